/*
 * The reduction launch's memo: a launch whose arguments, axes and
 * keepdims are those of the launch before it reuses that launch's plan
 * and specialization. Checked on the stand-in driver (tests/fakecuda),
 * which records every launch's grid, block and parameter bytes: two
 * kernels made from the same source, one with the memo and one without
 * (JITK_RED_MEMO=off), are launched on the same random arguments, and
 * every launch must be the same byte for byte, every failure the same
 * status and message. The memo must be taken, and must be left when the
 * axes, keepdims, a stride, a dtype or the alignment change.
 */
#include <stdio.h>

#include "common.h"
#include "fakecuda/fixture.h"
#include "kernels/kernels.h"

static int64_t pick(uint64_t *s, int64_t n) { return (int64_t)(jt_next(s) % (uint64_t)n); }

/* One launch's layout: x of 1 to 3 dimensions (C order, or strided with
 * gaps and reversals), the axes reduced, keepdims, the offset of x's
 * first element. */
typedef struct layout {
  jitk_dtype t;
  int ndim;
  int64_t shape[3], xs[3];
  bool strided;
  int64_t x_off;
  int axes[3], num_axes; /* num_axes -1: every axis */
  int keepdims;
} layout;

static layout random_layout(uint64_t *s) {
  layout L;
  memset(&L, 0, sizeof L);
  L.t = pick(s, 2) ? JITK_FLOAT32 : JITK_FLOAT64;
  L.ndim = 1 + (int)pick(s, 3);
  for (int d = 0; d < L.ndim; d++) L.shape[d] = pick(s, 6) == 0 ? 1 : 1 + pick(s, 12);
  L.strided = pick(s, 3) == 0;
  if (L.strided) {
    int64_t step = 1 + pick(s, 2);
    for (int d = L.ndim - 1; d >= 0; d--) {
      L.xs[d] = step;
      step *= L.shape[d] + pick(s, 2);
    }
    for (int d = 0; d < L.ndim; d++)
      if (pick(s, 4) == 0 && L.shape[d] > 1) {
        L.xs[d] = -L.xs[d];
        L.x_off += -L.xs[d] * (L.shape[d] - 1);
      }
  }
  L.x_off += pick(s, 4) == 0 ? 1 : 0;
  if (pick(s, 3) == 0) {
    L.num_axes = -1;
  } else {
    L.num_axes = 0;
    for (int d = 0; d < L.ndim; d++)
      if (pick(s, 2)) L.axes[L.num_axes++] = pick(s, 2) ? d : d - L.ndim;
    /* An axis given twice now and then: refused by both. */
    if (L.num_axes > 0 && pick(s, 10) == 0) L.axes[L.num_axes++] = L.axes[0];
  }
  L.keepdims = (int)pick(s, 2);
  return L;
}

/* The output's shape for L (its reduced shape; -1 dimensions: none). */
static int out_shape(const layout *L, int64_t *shape) {
  int n = 0;
  for (int d = 0; d < L->ndim; d++) {
    bool red = L->num_axes < 0;
    for (int i = 0; i < L->num_axes; i++) red |= (L->axes[i] + L->ndim) % L->ndim == d;
    if (!red)
      shape[n++] = L->shape[d];
    else if (L->keepdims)
      shape[n++] = 1;
  }
  return n;
}

enum { ARENA = 1 << 20 };
static _Alignas(256) unsigned char arena_x[ARENA], arena_s[ARENA];

typedef struct launch_args {
  DLTensor x, s;
  int64_t s_shape[3];
  jitk_arg args[2];
} launch_args;

static void build(launch_args *a, layout *L, size_t base, bool wrong_out) {
  size_t ts = L->t == JITK_FLOAT32 ? 4 : 8;
  a->x = jt_tensor(arena_x + base + (size_t)L->x_off * ts, L->t, L->ndim, L->shape,
                   L->strided ? L->xs : NULL);
  int n = out_shape(L, a->s_shape);
  /* A wrong output shape at times: refused by both. */
  if (wrong_out && n > 0) a->s_shape[0] += 1;
  a->s = jt_tensor(arena_s + base, L->t, n, a->s_shape, NULL);
  a->args[0] = jitk_arg_array(&a->x);
  a->args[1] = jitk_arg_array(&a->s);
}

static void same_launch(const fakecuda_launch *a, const fakecuda_launch *b, int step) {
  cr_assert(memcmp(a->grid, b->grid, sizeof a->grid) == 0 &&
                memcmp(a->block, b->block, sizeof a->block) == 0 && a->shared == b->shared,
            "step %d: grid %u/%u or block %u/%u differ", step, a->grid[0], b->grid[0], a->block[0],
            b->block[0]);
  cr_assert_eq(a->num_params, b->num_params, "step %d", step);
  cr_assert(a->num_params > 0 && a->num_params <= FAKECUDA_MAX_PARAMS, "step %d: %d parameters",
            step, a->num_params);
  size_t bytes = a->param_offset[a->num_params - 1] + 8;
  cr_assert(memcmp(a->param_bytes, b->param_bytes, bytes) == 0,
            "step %d: the parameter bytes differ", step);
}

Test(reduction_memo, launches_are_those_of_a_fresh_plan) {
  fakecuda_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_reduction *memo = NULL, *fresh = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T s", "x * x", "a + b", "s = a", "0", NULL, "memo_on",
                                 NULL, &memo));
  setenv("JITK_RED_MEMO", "off", 1);
  JT_OK(e, jitk_reduction_create(e, "T x", "T s", "x * x", "a + b", "s = a", "0", NULL, "memo_off",
                                 NULL, &fresh));
  unsetenv("JITK_RED_MEMO");

  uint64_t seed = 20261202;
  layout pool[8];
  for (int i = 0; i < 8; i++) pool[i] = random_layout(&seed);
  int current = 0, compared = 0, refused = 0, split = 0;
  for (int step = 0; step < 600; step++) {
    /* Mostly the layout before, at new addresses; at times another, or
     * the one before with one thing changed. */
    if (pick(&seed, 4) == 0) current = (int)pick(&seed, 8);
    layout twin = pool[current];
    if (pick(&seed, 4) == 0) {
      switch (pick(&seed, 4)) {
        case 0: twin.keepdims = !twin.keepdims; break;
        case 1: twin.num_axes = twin.num_axes < 0 ? 0 : -1; break;
        case 2: twin.t = twin.t == JITK_FLOAT32 ? JITK_FLOAT64 : JITK_FLOAT32; break;
        default: twin.x_off += 1; break; /* the alignment */
      }
    }
    size_t base = (size_t)pick(&seed, 64) * 16 + (pick(&seed, 3) == 0 ? 8 : 0);
    launch_args a;
    build(&a, &twin, base, pick(&seed, 20) == 0);
    const int *axes = twin.num_axes < 0 ? NULL : twin.axes;
    unsigned long long before = f.count();
    jitk_status s1 =
        jitk_reduction_launch(fresh, NULL, a.args, 2, axes, twin.num_axes, twin.keepdims, NULL);
    char msg1[512];
    snprintf(msg1, sizeof msg1, "%s", jitk_errmsg(e));
    unsigned long long mid = f.count();
    fakecuda_launch l1 = *f.last();
    jitk_status s2 =
        jitk_reduction_launch(memo, NULL, a.args, 2, axes, twin.num_axes, twin.keepdims, NULL);
    cr_assert_eq(s1, s2, "step %d: %s without the memo, %s with it: %s", step, jitk_errname(s1),
                 jitk_errname(s2), jitk_errmsg(e));
    if (s1 != JITK_OK) {
      const char *m2 = jitk_errmsg(e);
      const char *t1 = strstr(msg1, "memo_off"), *t2 = strstr(m2, "memo_on");
      cr_assert(t1 != NULL && t2 != NULL && strcmp(t1 + 8, t2 + 7) == 0,
                "step %d: \"%s\" against \"%s\"", step, msg1, m2);
      cr_assert_eq(f.count(), before, "step %d: a refused launch reached the driver", step);
      refused++;
      continue;
    }
    unsigned long long after = f.count();
    cr_assert_eq(after - mid, mid - before, "step %d: %llu launches against %llu", step,
                 after - mid, mid - before);
    /* A split's temporary is another allocation each time: its address
     * is in the parameters, so such launches are compared by count. */
    if (mid - before != 1) {
      split++;
      continue;
    }
    fakecuda_launch l2 = *f.last();
    same_launch(&l1, &l2, step);
    compared++;
  }
  unsigned long long hits = jk_reduction_memo_hits(memo);
  cr_log_info("%d compared, %d split, %d refused, %llu memo hits", compared, split, refused, hits);
  cr_assert(compared > 300 && refused > 10, "%d compared, %d refused", compared, refused);
  cr_assert(hits > 100 && hits < (unsigned long long)compared + split,
            "%llu memo hits in %d launches", hits, compared + split);
  cr_assert_eq(jk_reduction_memo_hits(fresh), 0);
  jitk_reduction_destroy(memo);
  jitk_reduction_destroy(fresh);
  jitk_engine_destroy(e);
}

static _Alignas(256) float small_in[64], small_out[8];
static _Alignas(256) signed char raw_bytes[64];

/* A raw array past 2^31 bytes takes 64-bit indices, as elementwise
 * kernels' do: map_expr indexes it with expressions of _j (`r[_j *
 * 4096]`), which 32 bits wrapped. The stand-in reads no element, so the
 * array's extent is only described. */
Test(reduction_plan, large_raw_arrays_take_64_bit_indices) {
  fakecuda_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "float32 x, raw int8 r", "float32 y", "x + (float)r[_j * 4096]",
                                 "a + b", "y = a", "0", NULL, "rawbig", NULL, &k));
  const int64_t sizes[] = {64, ((int64_t)1 << 31) + 8192};
  for (int c = 0; c < 2; c++) {
    int64_t xs[1] = {64}, rs[1] = {sizes[c]}, ys[1] = {1};
    DLTensor x = jt_tensor(small_in, JITK_FLOAT32, 1, xs, NULL);
    DLTensor r = jt_tensor(raw_bytes, JITK_INT8, 1, rs, NULL);
    DLTensor y = jt_tensor(small_out, JITK_FLOAT32, 0, ys, NULL);
    jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&r), jitk_arg_array(&y)};
    JT_OK(e, jitk_reduction_launch(k, NULL, args, 3, NULL, -1, 0, NULL));
    const char *src = NULL;
    JT_OK(e, jitk_reduction_source(k, &src));
    cr_assert_eq(strstr(src, "64-bit index") != NULL, c == 1, "case %d: %.200s", c, src);
  }
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* The source names what the last launch ran, also when that launch took
 * the memo after a compile or a prepare of another layout had named
 * theirs. */
Test(reduction_plan, source_names_the_launch_after_a_compile_or_prepare) {
  fakecuda_api f;
  jitk_engine *e = jt_fake_engine(&f, NULL);
  jitk_reduction *k = NULL;
  JT_OK(e,
        jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "rs", NULL, &k));
  int64_t xs[1] = {64}, ys[1] = {1}, xs2[2] = {8, 8}, ys2[1] = {8};
  DLTensor x = jt_tensor(small_in, JITK_FLOAT32, 1, xs, NULL);
  DLTensor y = jt_tensor(small_out, JITK_FLOAT32, 0, ys, NULL);
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y)};
  DLTensor x2 = jt_tensor(small_in, JITK_FLOAT32, 2, xs2, NULL);
  DLTensor y2 = jt_tensor(small_out, JITK_FLOAT32, 1, ys2, NULL);
  jitk_arg args2[] = {jitk_arg_array(&x2), jitk_arg_array(&y2)};
  int axis0[1] = {0};
  char first[256];
  const char *src = NULL;
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, NULL, -1, 0, NULL));
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, NULL, -1, 0, NULL)); /* the memo's */
  JT_OK(e, jitk_reduction_source(k, &src));
  snprintf(first, sizeof first, "%.*s", (int)strcspn(src, "\n"), src);
  /* A compile of another layout, then the memo's layout again. */
  jitk_reduction_layout other = {2, 2, 64, 'o', 0};
  JT_OK(e, jitk_reduction_compile(k, "T=float32", &other, NULL, NULL));
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, NULL, -1, 0, NULL));
  JT_OK(e, jitk_reduction_source(k, &src));
  cr_assert(strncmp(src, first, strlen(first)) == 0, "after a compile: %.200s", src);
  /* A prepare of another layout, then the memo's layout again. */
  JT_OK(e, jitk_reduction_prepare(k, args2, 2, axis0, 1, 0));
  JT_OK(e, jitk_reduction_source(k, &src));
  cr_assert(strncmp(src, first, strlen(first)) != 0, "the prepare names its own");
  JT_OK(e, jitk_reduction_launch(k, NULL, args, 2, NULL, -1, 0, NULL));
  JT_OK(e, jitk_reduction_source(k, &src));
  cr_assert(strncmp(src, first, strlen(first)) == 0, "after a prepare: %.200s", src);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}
