/*
 * Autotuning on the stand-in driver (tests/fakecuda), whose events time
 * the host. A matmul plan's candidates are built and timed and one is
 * kept. jitk_reduction_autotune compiles and times every strategy that
 * applies, keeps the fastest for later launches of the same layout on the
 * kernel, and stores it in the cache's tuning table, where a new engine's
 * kernel with the same expressions finds it; another layout, or a kernel
 * with other expressions, keeps the layout's own choice. Which strategy
 * the stand-in finds fastest is left to its clock: the test follows
 * whichever it is. Row segments launch the grids their layout asks for,
 * and the fold of a few chunks takes a thread per output, in the kernel
 * for a small split, in a second kernel for a large one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "fakecuda/fixture.h"

/* Removes a test's cache folder and everything in it. */
static void remove_dir(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

/* The strategy line of the kernel's last source ("across outputs", ...). */
static void strategy_of(jitk_engine *e, jitk_reduction *k, char *buf, size_t size) {
  const char *src = NULL;
  JT_OK(e, jitk_reduction_source(k, &src));
  const char *a = strstr(src, "reduction kernel ");
  cr_assert_not_null(a, "%s", src);
  a = strchr(a, ',');
  cr_assert_not_null(a);
  const char *b = strchr(a + 1, ',');
  cr_assert_not_null(b);
  snprintf(buf, size, "%.*s", (int)(b - a - 2), a + 2);
}

static jitk_reduction *make_sum(jitk_engine *e, const char *map) {
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", map, "a + b", "y = a", "0", NULL, "colsum", NULL,
                                 &k));
  return k;
}

Test(reduction_tune, measured_choice_is_kept_and_stored) {
  char dir[] = "/tmp/jitk-tune-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  jitk_engine *e = jt_fake_engine(NULL, dir);
  jitk_reduction *k = make_sum(e, "x");
  /* Column sums of 64 x 2047 float32: across outputs by the layout (rows
   * of an odd width tile into no segments of row vectors). */
  float *x = calloc(64 * 2048, sizeof *x), *y = calloc(2048, sizeof *y);
  int64_t xs[2] = {64, 2047}, ys[1] = {2047};
  DLTensor tx = jt_tensor(x, JITK_FLOAT32, 2, xs, NULL),
           ty = jt_tensor(y, JITK_FLOAT32, 1, ys, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  int axis0[1] = {0};
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axis0, 1, 0, NULL));
  char own[64], tuned[64], again[64];
  strategy_of(e, k, own, sizeof own);
  cr_assert_str_eq(own, "across outputs");

  JT_OK(e, jitk_reduction_autotune(k, NULL, args, 2, axis0, 1, 0));
  strategy_of(e, k, tuned, sizeof tuned);
  cr_log_info("the stand-in's clock chose: %s", tuned);
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axis0, 1, 0, NULL));
  strategy_of(e, k, again, sizeof again);
  cr_assert_str_eq(again, tuned, "a later launch of the layout takes the tuned strategy");

  /* Another layout of the same kernel: its own choice. */
  int64_t xs2[2] = {32, 4095}, ys2[1] = {4095};
  DLTensor tx2 = jt_tensor(x, JITK_FLOAT32, 2, xs2, NULL),
           ty2 = jt_tensor(y, JITK_FLOAT32, 1, ys2, NULL);
  float *y2 = calloc(4096, sizeof *y2);
  ty2.data = y2;
  jitk_arg args2[] = {jitk_arg_array(&tx2), jitk_arg_array(&ty2)};
  JT_OK(e, jitk_reduction_launch(k, NULL, args2, 2, axis0, 1, 0, NULL));
  strategy_of(e, k, again, sizeof again);
  cr_assert_str_eq(again, "across outputs");

  /* Errors: outputs left out, and bad axes, refused before any launch. */
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "each must be given",
           jitk_reduction_autotune(k, NULL, args, 1, axis0, 1, 0));
  int bad_axis[1] = {5};
  jitk_status st = jitk_reduction_autotune(k, NULL, args, 2, bad_axis, 1, 0);
  cr_assert_neq(st, JITK_OK);
  cr_assert(strstr(jitk_errmsg(e), "axis") != NULL, "%s", jitk_errmsg(e));
  /* Outputs the many timed runs would change: one that is an input (in
   * place; one partly inside an input is refused by every launch), and
   * one the post-map adds to. */
  int64_t flat[1] = {64 * 2047};
  DLTensor tin = jt_tensor(x, JITK_FLOAT32, 1, flat, NULL);
  jitk_reduction *inc = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a + 1", "0", NULL, "inc", NULL,
                                 &inc));
  int none[1] = {0};
  jitk_arg in_place[] = {jitk_arg_array(&tin), jitk_arg_array(&tin)};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "shares memory",
           jitk_reduction_autotune(inc, NULL, in_place, 2, none, 0, 0));
  DLTensor tpart = jt_tensor(x + 5, JITK_FLOAT32, 1, ys, NULL);
  jitk_arg inside[] = {jitk_arg_array(&tx), jitk_arg_array(&tpart)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "overlaps",
           jitk_reduction_autotune(k, NULL, inside, 2, axis0, 1, 0));
  jitk_reduction *acc = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y += a", "0", NULL, "accsum", NULL,
                                 &acc));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "may read output `y`",
           jitk_reduction_autotune(acc, NULL, args, 2, axis0, 1, 0));
  jitk_reduction_destroy(acc);
  jitk_reduction_destroy(inc);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);

  /* A new engine on the same cache: a kernel with the same expressions
   * finds the tuned strategy in the tuning table; one with other
   * expressions does not. */
  e = jt_fake_engine(NULL, dir);
  k = make_sum(e, "x");
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axis0, 1, 0, NULL));
  strategy_of(e, k, again, sizeof again);
  cr_assert_str_eq(again, tuned, "the tuning table's choice: %s after tuning, %s from the table",
                   tuned, again);
  jitk_reduction *other = make_sum(e, "x * x");
  JT_OK(e, jitk_reduction_launch(other, NULL, args, 2, axis0, 1, 0, NULL));
  strategy_of(e, other, again, sizeof again);
  cr_assert_str_eq(again, "across outputs");
  jitk_reduction_destroy(other);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
  free(x);
  free(y);
  free(y2);
  remove_dir(dir);
}

/* A bfloat16 plan on the stand-in's Hopper device: jitk_matmul_autotune
 * builds and times its four candidates (each launch between events) and
 * keeps one, which the plan's description then says; operands that are
 * not 16-byte aligned are refused before anything runs. */
Test(matmul_tune, candidates_timed_and_one_kept, .timeout = 300) {
  char dir[] = "/tmp/jitk-mmtune-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  jitk_engine *e = jt_fake_engine(NULL, dir);
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = d.n = d.k = 256;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char before[512], after[512];
  JT_OK(e, jitk_matmul_describe(p, before, sizeof before));
  cr_assert(strstr(before, "wgmma") != NULL && strstr(before, "; tuned") == NULL, "%s", before);
  /* Host memory stands for device memory here; the stand-in reads none. */
  unsigned char *buf = aligned_alloc(256, 3 * 256 * 256 * 2 + 256);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "16-byte aligned",
           jitk_matmul_autotune(p, NULL, buf + 2, buf, NULL, buf + 2 * 256 * 256 * 2, NULL, 0));
  JT_OK(e, jitk_matmul_autotune(p, NULL, buf, buf + 256 * 256 * 2, NULL, buf + 2 * 256 * 256 * 2,
                                NULL, 0));
  JT_OK(e, jitk_matmul_describe(p, after, sizeof after));
  cr_assert(strstr(after, "; tuned") != NULL, "%s", after);
  /* A new plan of the class starts from the stored choice, unless a
   * knob forces its configuration, JITK_MM_KIND among them. */
  jitk_matmul *again = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &again));
  JT_OK(e, jitk_matmul_describe(again, after, sizeof after));
  cr_assert(strstr(after, "; tuned") != NULL, "%s", after);
  jitk_matmul_destroy(again);
  /* An mma.sync plan tuned with JITK_MM_KIND=mma stores its choice too,
   * which a plan made with that knob set does not take. */
  setenv("JITK_MM_KIND", "mma", 1);
  JT_OK(e, jitk_matmul_create(e, &d, &again));
  JT_OK(e, jitk_matmul_autotune(again, NULL, buf, buf + 256 * 256 * 2, NULL,
                                buf + 2 * 256 * 256 * 2, NULL, 0));
  JT_OK(e, jitk_matmul_describe(again, after, sizeof after));
  cr_assert(strstr(after, "mma.sync") != NULL && strstr(after, "; tuned") != NULL, "%s", after);
  jitk_matmul_destroy(again);
  JT_OK(e, jitk_matmul_create(e, &d, &again));
  unsetenv("JITK_MM_KIND");
  JT_OK(e, jitk_matmul_describe(again, after, sizeof after));
  cr_assert(strstr(after, "mma.sync") != NULL && strstr(after, "; tuned") == NULL, "%s", after);
  jitk_matmul_destroy(again);
  free(buf);
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
  remove_dir(dir);
}

/* An engine on the stand-in with its cache in a new folder made from the
 * mkdtemp template `dir`, and the stand-in's inspection functions in *f. */
static jitk_engine *inspected_engine(char *dir, fakecuda_api *f) {
  cr_assert_not_null(mkdtemp(dir));
  jitk_engine *e = jt_fake_engine(NULL, dir);
  cr_assert(fakecuda_api_open(JT_FAKE_PATH, f), "the stand-in's inspection functions");
  return e;
}

/* A kernel's name may be any identifier, however long: the functions and
 * the global its launch looks up are named after it whole. A buffer of
 * 160 bytes cut "<name>_final" of a name of 159 characters down to the
 * name itself, and the second pass of a split reduction looked up the
 * first kernel. Column sums of (1024, 4096) float32 split in 4 and fold
 * in the second kernel (row_segments_on_the_stand_in says why). */
Test(reduction_launch, long_names_are_looked_up_whole) {
  char dir[] = "/tmp/jitk-rname-XXXXXX";
  fakecuda_api f;
  jitk_engine *e = inspected_engine(dir, &f);
  float *x = calloc((size_t)1024 * 4096, sizeof *x), *y = calloc(4096, sizeof *y);
  cr_assert(x != NULL && y != NULL);
  static const size_t lengths[] = {153, 154, 159, 300};
  for (size_t c = 0; c < sizeof lengths / sizeof lengths[0]; c++) {
    char name[301];
    memset(name, 'k', lengths[c]);
    name[lengths[c]] = '\0';
    jitk_reduction *k = NULL;
    JT_OK(e,
          jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, name, NULL, &k));
    int64_t xs[2] = {1024, 4096}, ys[1] = {4096};
    DLTensor tx = jt_tensor(x, JITK_FLOAT32, 2, xs, NULL),
             ty = jt_tensor(y, JITK_FLOAT32, 1, ys, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
    int axis0[1] = {0};
    const unsigned long long before = f.count();
    JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, axis0, 1, 0, NULL));
    cr_assert_eq(f.count() - before, 2, "%zu characters: %llu launches", lengths[c],
                 f.count() - before);
    const char *fn = f.last()->function;
    cr_assert(strlen(fn) == lengths[c] + 6 && strncmp(fn, name, lengths[c]) == 0 &&
                  strcmp(fn + lengths[c], "_final") == 0,
              "%zu characters: the second pass launched %s", lengths[c], fn);
    jitk_reduction_destroy(k);
  }
  free(x);
  free(y);
  jitk_engine_destroy(e);
  remove_dir(dir);
}

/* Where row segments launch, on the stand-in (which records the last
 * launch and the last memset): column sums of (256, 65536) float32 take
 * segments of 32 outputs, 2048 blocks, no split; (512, 4096), 8 MiB,
 * takes 128 segments split in 2 along y, one launch still: its tickets
 * (two a segment) are cleared on the launch's stream first, and the last
 * block of each segment folds the 2 chunks of its outputs with a thread
 * an output; (1024, 4096), 16 MiB, splits in 4 and folds them in a
 * second kernel, a thread an output, 4096 outputs in 16 blocks. */
Test(reduction_launch, row_segments_on_the_stand_in) {
  char dir[] = "/tmp/jitk-rgeo-XXXXXX";
  fakecuda_api f;
  jitk_engine *e = inspected_engine(dir, &f);
  jitk_reduction *k = make_sum(e, "x");
  float *x = calloc((size_t)256 * 65536, sizeof *x), *y = calloc(65536, sizeof *y);
  cr_assert(x != NULL && y != NULL);
  const struct {
    int64_t rows, cols;
    unsigned launches, grid_x, grid_y, final_grid, tickets;
  } cases[] = {{256, 65536, 1, 2048, 1, 0, 0},
               {512, 4096, 1, 128, 2, 0, 256},
               {1024, 4096, 2, 128, 4, 16, 0}};
  int axis0[1] = {0};
  jitk_stream stream = (jitk_stream)(uintptr_t)0x5150;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t xs[2] = {cases[c].rows, cases[c].cols}, ys[1] = {cases[c].cols};
    DLTensor tx = jt_tensor(x, JITK_FLOAT32, 2, xs, NULL),
             ty = jt_tensor(y, JITK_FLOAT32, 1, ys, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
    unsigned long long before = f.count(), memsets_before = 0, memsets = 0;
    f.memset(&memsets_before);
    JT_OK(e, jitk_reduction_launch(k, stream, args, 2, axis0, 1, 0, NULL));
    const fakecuda_memset *ms = f.memset(&memsets);
    char what[64];
    strategy_of(e, k, what, sizeof what);
    cr_assert_str_eq(what, "row segments", "case %zu", c);
    cr_assert_eq(f.count() - before, cases[c].launches, "case %zu: %llu launches", c,
                 f.count() - before);
    const fakecuda_launch *l = f.last();
    cr_assert_eq(l->block[0], 256);
    cr_assert_eq(l->stream, (void *)stream);
    const char *src = NULL;
    JT_OK(e, jitk_reduction_source(k, &src));
    const char *ticket = strstr(src, "_jk_tick + (_jk_u)(_jk_kb / 32)");
    if (cases[c].launches == 2) {
      cr_assert(strstr(l->function, "_final") != NULL, "case %zu: %s", c, l->function);
      cr_assert(l->grid[0] == cases[c].final_grid && l->grid[1] == 1,
                "case %zu: second kernel's grid %u x %u", c, l->grid[0], l->grid[1]);
      /* A thread per output: no warp or block reduce in the second pass,
       * and no tickets. */
      const char *fin = strstr(src, "_final(");
      cr_assert(fin != NULL && strstr(fin, "group_reduce") == NULL &&
                    strstr(fin, "block_reduce") == NULL && ticket == NULL &&
                    memsets == memsets_before,
                "%s", fin ? fin : src);
      continue;
    }
    cr_assert(l->grid[0] == cases[c].grid_x && l->grid[1] == cases[c].grid_y,
              "case %zu: grid %u x %u", c, l->grid[0], l->grid[1]);
    cr_assert(strstr(src, "_final(") == NULL, "case %zu: one kernel", c);
    if (cases[c].grid_y == 1) {
      cr_assert(ticket == NULL && memsets == memsets_before, "case %zu: no split, no tickets", c);
    } else {
      cr_assert_eq(memsets, memsets_before + 1, "case %zu: the tickets cleared once", c);
      /* Two tickets a segment: its group's of 2 chunks, and the unused
       * second level's. */
      cr_assert(ms->bytes == cases[c].tickets * sizeof(unsigned int) && ms->value == 0 &&
                    ms->stream == (void *)stream,
                "case %zu: memset of %zu bytes to %d", c, ms->bytes, ms->value);
      /* A thread per output folds the chunks: no group or block reduce
       * after the ticket. */
      cr_assert(ticket != NULL && strstr(ticket, "group_reduce") == NULL &&
                    strstr(ticket, "block_reduce") == NULL,
                "%s", src);
    }
  }
  free(x);
  free(y);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
  remove_dir(dir);
}
