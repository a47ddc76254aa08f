/*
 * The elementwise launch's memo: a launch whose arguments have the layout
 * of the launch before it reuses that launch's plan. Checked on the
 * stand-in driver (tests/fakecuda), which records every launch's grid,
 * block and parameter bytes: two kernels made from the same source, one
 * with the memo and one without (JITK_EW_MEMO=off), are launched on the
 * same random arguments, and every launch must be the same byte for byte,
 * every failure the same status and message. The memo must also be taken:
 * the kernel with it counts its hits. The same stand-in shows the plan of
 * permuted views: the path and the grid of their batches of tiles.
 */
#include <stdio.h>

#include "common.h"
#include "fakecuda/fixture.h"
#include "kernels/kernels.h"

typedef fakecuda_api fake_api;

/* One argument layout: for x, y (or a scalar y), the raw r and the output
 * z, the extents and strides (elements) and the offset of the first
 * element from its buffer's start. */
typedef struct layout {
  jitk_dtype t, u;
  int ndim;
  int64_t shape[3];
  int64_t xs[3], ys_shape[3], ys[3], zs[3];
  bool x_strided, y_strided, y_scalar, z_strided;
  int64_t x_off, y_off, z_off; /* elements */
  int64_t r_len;
} layout;

static const jitk_dtype T_TYPES[] = {JITK_FLOAT32, JITK_FLOAT64, JITK_INT8, JITK_FLOAT16};
static const jitk_dtype U_TYPES[] = {JITK_FLOAT32, JITK_INT32};

static int64_t pick(uint64_t *s, int64_t n) { return (int64_t)(jt_next(s) % (uint64_t)n); }

/* Strides (elements) that visit `shape` in some order, with gaps or
 * reversed at random; *first is the offset of the first element so that
 * every element lies at or after the buffer's start. */
static void random_strides(uint64_t *s, int nd, const int64_t *shape, int64_t *strides,
                           int64_t *first) {
  int order[3] = {0, 1, 2};
  for (int i = nd - 1; i > 0; i--) {
    int j = (int)pick(s, i + 1), tmp = order[i];
    order[i] = order[j];
    order[j] = tmp;
  }
  int64_t step = 1 + pick(s, 2);
  for (int i = nd - 1; i >= 0; i--) {
    strides[order[i]] = step;
    step *= shape[order[i]] + pick(s, 2);
  }
  *first = 0;
  for (int d = 0; d < nd; d++)
    if (pick(s, 4) == 0 && shape[d] > 1) {
      strides[d] = -strides[d];
      *first += -strides[d] * (shape[d] - 1);
    }
}

static layout random_layout(uint64_t *s) {
  layout L;
  memset(&L, 0, sizeof L);
  L.t = T_TYPES[pick(s, 4)];
  L.u = U_TYPES[pick(s, 2)];
  L.ndim = 1 + (int)pick(s, 3);
  for (int d = 0; d < L.ndim; d++) L.shape[d] = pick(s, 6) == 0 ? 1 : 1 + pick(s, 16);
  int64_t first;
  L.x_strided = pick(s, 3) == 0;
  if (L.x_strided) {
    random_strides(s, L.ndim, L.shape, L.xs, &first);
    L.x_off = first;
  }
  /* Misaligned for vectors at times; the base address of each launch
   * (below) moves the alignment too. */
  L.x_off += pick(s, 4) == 0 ? 1 : 0;
  L.y_scalar = pick(s, 4) == 0;
  for (int d = 0; d < L.ndim; d++) {
    /* y broadcasts along some dimensions. */
    L.ys_shape[d] = pick(s, 3) == 0 ? 1 : L.shape[d];
  }
  L.y_strided = pick(s, 3) == 0;
  if (L.y_strided) {
    random_strides(s, L.ndim, L.ys_shape, L.ys, &first);
    L.y_off = first;
  }
  L.y_off += pick(s, 4) == 0 ? 1 : 0;
  L.z_strided = pick(s, 4) == 0;
  if (L.z_strided) {
    random_strides(s, L.ndim, L.shape, L.zs, &first);
    for (int d = 0; d < L.ndim; d++) L.zs[d] = L.zs[d] < 0 ? -L.zs[d] : L.zs[d];
  }
  L.z_off = pick(s, 4) == 0 ? 1 : 0;
  L.r_len = 1 + pick(s, 8);
  return L;
}

/* The tensors of one launch of L, in buffers at offset `base` (bytes) of
 * each arena. */
typedef struct launch_args {
  DLTensor x, y, r, z;
  int64_t r_shape[1];
  jitk_arg args[4];
} launch_args;

enum { ARENA = 1 << 20 };
static _Alignas(256) unsigned char arenas[3][ARENA];

static void build(launch_args *a, layout *L, size_t base, bool overlap) {
  size_t ts = jt_dtype_size(L->t), us = jt_dtype_size(L->u);
  a->x = jt_tensor(arenas[0] + base + (size_t)L->x_off * ts, L->t, L->ndim, L->shape,
                   L->x_strided ? L->xs : NULL);
  a->y = jt_tensor(arenas[1] + base + (size_t)L->y_off * us, L->u, L->ndim, L->ys_shape,
                   L->y_strided ? L->ys : NULL);
  a->r_shape[0] = L->r_len;
  a->r = jt_tensor(arenas[2] + base, L->t, 1, a->r_shape, NULL);
  /* Overlapping: z starts one element into x's memory. */
  void *zdata =
      overlap ? (unsigned char *)a->x.data + ts : arenas[2] + base + 4096 + (size_t)L->z_off * ts;
  a->z = jt_tensor(zdata, L->t, L->ndim, L->shape, L->z_strided ? L->zs : NULL);
  a->args[0] = jitk_arg_array(&a->x);
  a->args[1] = L->y_scalar ? jitk_arg_f32(0.5f) : jitk_arg_array(&a->y);
  if (L->y_scalar && L->u == JITK_INT32) a->args[1] = jitk_arg_i32(3);
  a->args[2] = jitk_arg_array(&a->r);
  a->args[3] = jitk_arg_array(&a->z);
}

/* The last launch's record, copied. */
static fakecuda_launch last_of(const fake_api *f) { return *f->last(); }

static void same_launch(const fakecuda_launch *a, const fakecuda_launch *b, int step) {
  cr_assert(memcmp(a->grid, b->grid, sizeof a->grid) == 0 &&
                memcmp(a->block, b->block, sizeof a->block) == 0 && a->shared == b->shared,
            "step %d: grid %u/%u or block %u/%u differ", step, a->grid[0], b->grid[0], a->block[0],
            b->block[0]);
  cr_assert_eq(a->num_params, b->num_params, "step %d: %d parameters against %d", step,
               a->num_params, b->num_params);
  cr_assert(a->num_params > 0 && a->num_params < FAKECUDA_MAX_PARAMS,
            "step %d: %d parameters recorded", step, a->num_params);
  size_t bytes = a->param_offset[a->num_params - 1] + 8;
  for (int i = 0; i < a->num_params; i++) cr_assert_eq(a->param_offset[i], b->param_offset[i]);
  cr_assert(memcmp(a->param_bytes, b->param_bytes, bytes) == 0,
            "step %d: the parameter bytes differ", step);
}

Test(elementwise_memo, launches_are_those_of_a_fresh_plan) {
  fake_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  const char *in = "T x, U y, raw T r", *out = "T z", *op = "z = x + (T)y + r[0]";
  jitk_elementwise *memo = NULL, *fresh = NULL;
  JT_OK(e, jitk_elementwise_create(e, in, out, op, "memo_on", NULL, &memo));
  setenv("JITK_EW_MEMO", "off", 1);
  JT_OK(e, jitk_elementwise_create(e, in, out, op, "memo_off", NULL, &fresh));
  unsetenv("JITK_EW_MEMO");

  uint64_t seed = 20261201;
  layout pool[10];
  for (int i = 0; i < 10; i++) pool[i] = random_layout(&seed);
  int launched = 0, refused = 0;
  int current = 0;
  for (int step = 0; step < 800; step++) {
    /* Mostly the layout of the step before (with new addresses), as a
     * loop calls a kernel; at times another. */
    if (pick(&seed, 4) == 0) current = (int)pick(&seed, 10);
    layout twin = pool[current], *L = &pool[current];
    if (pick(&seed, 4) == 0) {
      /* A layout that differs from the one before in one thing only, so
       * that the memo must see that difference. */
      int64_t first;
      switch (pick(&seed, 5)) {
        case 0: /* x's strides */
          twin.x_strided = true;
          random_strides(&seed, twin.ndim, twin.shape, twin.xs, &first);
          twin.x_off = first;
          break;
        case 1: /* y's strides */
          twin.y_strided = !twin.y_strided;
          random_strides(&seed, twin.ndim, twin.ys_shape, twin.ys, &first);
          twin.y_off = twin.y_strided ? first : 0;
          break;
        case 2: /* a scalar y, or one of the other type */
          twin.y_scalar = true;
          twin.u = twin.u == JITK_FLOAT32 ? JITK_INT32 : JITK_FLOAT32;
          break;
        case 3: /* z's strides */
          twin.z_strided = !twin.z_strided;
          random_strides(&seed, twin.ndim, twin.shape, twin.zs, &first);
          for (int d = 0; d < twin.ndim; d++)
            twin.zs[d] = twin.zs[d] < 0 ? -twin.zs[d] : twin.zs[d];
          break;
        default: /* y broadcast along one more or one fewer dimension */
          for (int d = 0; d < twin.ndim; d++)
            if (twin.shape[d] > 1) {
              twin.ys_shape[d] = twin.ys_shape[d] == 1 ? twin.shape[d] : 1;
              break;
            }
          twin.y_strided = false;
          twin.y_off = 0;
          break;
      }
      L = &twin;
    }
    size_t base = (size_t)pick(&seed, 64) * 16 + (pick(&seed, 3) == 0 ? 8 : 0);
    bool overlap = pick(&seed, 12) == 0;
    launch_args a;
    build(&a, L, base, overlap);
    unsigned long long before = f.count();
    jitk_launch_options lo;
    jitk_launch_options_init(&lo);
    lo.block_size = pick(&seed, 8) == 0 ? 128 : 0;
    jitk_status s1 = jitk_elementwise_launch_ex(fresh, NULL, a.args, 4, &lo, NULL);
    char msg1[512];
    snprintf(msg1, sizeof msg1, "%s", jitk_errmsg(e));
    fakecuda_launch l1 = last_of(&f);
    jitk_status s2 = jitk_elementwise_launch_ex(memo, NULL, a.args, 4, &lo, NULL);
    cr_assert_eq(s1, s2, "step %d: %s without the memo, %s with it: %s", step, jitk_errname(s1),
                 jitk_errname(s2), jitk_errmsg(e));
    if (s1 != JITK_OK) {
      /* The same message, the kernels' names aside. */
      const char *m2 = jitk_errmsg(e);
      const char *t1 = strstr(msg1, "memo_off"), *t2 = strstr(m2, "memo_on");
      cr_assert(t1 != NULL && t2 != NULL && strcmp(t1 + 8, t2 + 7) == 0,
                "step %d: \"%s\" against \"%s\"", step, msg1, m2);
      cr_assert_eq(f.count(), before, "step %d: a refused launch reached the driver", step);
      refused++;
      continue;
    }
    fakecuda_launch l2 = last_of(&f);
    cr_assert_eq(f.count(), before + 2);
    same_launch(&l1, &l2, step);
    launched++;
  }
  unsigned long long hits = jk_elementwise_memo_hits(memo);
  cr_log_info("%d launched, %d refused, %llu memo hits", launched, refused, hits);
  cr_assert(launched > 500 && refused > 20, "%d launched, %d refused", launched, refused);
  cr_assert(hits > 100, "the memo was taken %llu times in %d launches", hits, launched);
  cr_assert_eq(jk_elementwise_memo_hits(fresh), 0);
  jitk_elementwise_destroy(memo);
  jitk_elementwise_destroy(fresh);
  jitk_engine_destroy(e);
}

/* The plan of permuted views that no collapsing brings down to two
 * dimensions: the tiled path over x's contiguous dimension and the
 * outputs' inner one, one block per tile of every batch of tiles; and the
 * scalar path where the outputs' inner extent is too short to fill tiles. */
Test(elementwise_plan, permuted_views_take_batches_of_tiles) {
  fake_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "perm_plan", NULL, &k));
  struct {
    int64_t shape[4], xs[4];
    const char *path;
    unsigned grid;
  } cases[] = {
      /* x contiguous along dimension 2; dimensions 0 and 1 collapse into
       * one batch dimension of 32: 32 batches of 1 x 2 tiles of 64. */
      {{4, 8, 64, 100}, {51200, 6400, 1, 64}, "tiled path", 32 * 2},
      /* x contiguous along dimension 0 (its buffer is 6 x 50 x 20 x 40),
       * whose 40 elements take tiles of 32; nothing collapses, and
       * dimensions 1 and 2 number 120 batches of 2 x 2 tiles. */
      {{40, 6, 20, 50}, {1, 40000, 40, 800}, "tiled path", 120 * 2 * 2},
      /* Eight outputs a row: most of a tile would idle. */
      {{4, 8, 64, 8}, {4096, 512, 1, 64}, "scalar path", 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    DLTensor x = jt_tensor(arenas[0], JITK_FLOAT32, 4, cases[c].shape, cases[c].xs);
    DLTensor y = jt_tensor(arenas[1], JITK_FLOAT32, 4, cases[c].shape, NULL);
    DLTensor z = jt_tensor(arenas[2], JITK_FLOAT32, 4, cases[c].shape, NULL);
    jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_array(&z)};
    JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
    const char *src = NULL;
    JT_OK(e, jitk_elementwise_source(k, &src));
    cr_assert(strstr(src, cases[c].path) != NULL, "case %zu: %s", c, src);
    fakecuda_launch l = last_of(&f);
    if (cases[c].grid != 0)
      cr_assert_eq(l.grid[0], cases[c].grid, "case %zu: %u blocks", c, l.grid[0]);
  }
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* float16 transposes take tiles of element pairs only when every array
 * allows 4-byte accesses along its contiguous dimension of the tile: even
 * extents, even strides elsewhere, 4-byte aligned. An odd extent, an
 * input one element off, a float32 output, or an input broadcast along
 * the columns (stride 0 there) keep single elements; a bias along the
 * rows does not stop pairs. */
Test(elementwise_plan, float16_tiles_take_pairs) {
  fake_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_elementwise *k = NULL, *widen = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "pair_plan", NULL, &k));
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "float32 z", "z = (float)x + (float)y",
                                   "pair_widen", NULL, &widen));
  struct {
    int64_t rows, cols;
    size_t x_off;  /* elements */
    int64_t ys[2]; /* y's strides; {0, 0}: C order */
    bool widen, pairs;
  } cases[] = {
      {256, 512, 0, {0, 0}, false, true},  {256, 511, 0, {0, 0}, false, false},
      {255, 512, 0, {0, 0}, false, false}, {256, 512, 1, {0, 0}, false, false},
      {256, 512, 0, {0, 1}, false, true},  {256, 512, 0, {1, 0}, false, false},
      {256, 512, 0, {0, 0}, true, false},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t shape[2] = {cases[c].rows, cases[c].cols};
    int64_t xs[2] = {1, cases[c].rows}; /* x = buffer.T */
    int64_t ys[2] = {cases[c].ys[0], cases[c].ys[1]};
    bool cord = ys[0] == 0 && ys[1] == 0;
    DLTensor x = jt_tensor(arenas[0] + 2 * cases[c].x_off, JITK_FLOAT16, 2, shape, xs);
    DLTensor y = jt_tensor(arenas[1], JITK_FLOAT16, 2, shape, cord ? NULL : ys);
    DLTensor z = jt_tensor(arenas[2], cases[c].widen ? JITK_FLOAT32 : JITK_FLOAT16, 2, shape, NULL);
    jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_array(&z)};
    jitk_elementwise *kk = cases[c].widen ? widen : k;
    JT_OK(e, jitk_elementwise_launch(kk, NULL, args, 3, -1, NULL));
    const char *src = NULL;
    JT_OK(e, jitk_elementwise_source(kk, &src));
    cr_assert(strstr(src, "tiled path") != NULL, "case %zu: %s", c, src);
    cr_assert_eq(strstr(src, "element pairs") != NULL, cases[c].pairs, "case %zu: %.120s", c, src);
  }
  jitk_elementwise_destroy(k);
  jitk_elementwise_destroy(widen);
  jitk_engine_destroy(e);
}

/* A raw array indexed with expressions of `i` may reach past 2^31 bytes
 * even where the loop is small (`x[i * 4096]`): such a raw array takes
 * 64-bit indices, as a large loop's arrays do; a small one keeps 32. The
 * stand-in reads no memory, so the large array needs none. */
Test(elementwise_plan, large_raw_arrays_take_64_bit_indices) {
  fake_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "raw T x, T y", "T z", "z = x[i * 4096] + y", "rawbig", NULL,
                                   &k));
  const int64_t sizes[] = {4096, (int64_t)1 << 31, ((int64_t)1 << 30) + 1};
  const jitk_dtype types[] = {JITK_INT8, JITK_INT8, JITK_INT16};
  const bool wide[] = {false, true, true};
  for (int c = 0; c < 3; c++) {
    int64_t xs[1] = {sizes[c]}, ys[1] = {16};
    DLTensor x = jt_tensor(arenas[0], types[c], 1, xs, NULL);
    DLTensor y = jt_tensor(arenas[1], types[c], 1, ys, NULL);
    DLTensor z = jt_tensor(arenas[2], types[c], 1, ys, NULL);
    jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_array(&z)};
    JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
    const char *src = NULL;
    JT_OK(e, jitk_elementwise_source(k, &src));
    cr_assert_eq(strstr(src, "unsigned long long _jk_u") != NULL, wide[c], "case %d: %s", c, src);
  }
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* The source names what the last launch ran, also when that launch took
 * the memo after a prepare of another layout had named its own. */
Test(elementwise_plan, source_names_the_launch_after_a_prepare) {
  fake_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x + 1", "ewsrc", NULL, &k));
  int64_t n1[1] = {64}, n2[2] = {8, 8}, s2[2] = {1, 8};
  DLTensor x = jt_tensor(arenas[0], JITK_FLOAT32, 1, n1, NULL);
  DLTensor z = jt_tensor(arenas[1], JITK_FLOAT32, 1, n1, NULL);
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&z)};
  DLTensor x2 = jt_tensor(arenas[0], JITK_FLOAT32, 2, n2, s2); /* a transposed view */
  DLTensor z2 = jt_tensor(arenas[1], JITK_FLOAT32, 2, n2, NULL);
  jitk_arg args2[] = {jitk_arg_array(&x2), jitk_arg_array(&z2)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, -1, NULL));
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, -1, NULL)); /* the memo's */
  const char *src = NULL;
  JT_OK(e, jitk_elementwise_source(k, &src));
  char first[256];
  snprintf(first, sizeof first, "%.*s", (int)strcspn(src, "\n"), src);
  JT_OK(e, jitk_elementwise_prepare(k, args2, 2, -1));
  JT_OK(e, jitk_elementwise_source(k, &src));
  cr_assert(strncmp(src, first, strlen(first)) != 0, "the prepare names its own: %.200s", src);
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, -1, NULL));
  JT_OK(e, jitk_elementwise_source(k, &src));
  cr_assert(strncmp(src, first, strlen(first)) == 0, "after a prepare: %.200s", src);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}
