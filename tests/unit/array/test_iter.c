/* Broadcasting, collapsing, ordering and the index width. */
#include "array/iter.h"
#include "common.h"

static jk_view view(int ndim, const int64_t *shape, const int64_t *strides, jitk_dtype d,
                    uintptr_t data) {
  jk_view v;
  memset(&v, 0, sizeof v);
  v.ndim = ndim;
  v.dtype = d;
  v.data = (char *)data;
  v.size = 1;
  for (int i = 0; i < ndim; i++) {
    v.shape[i] = shape[i];
    v.strides[i] = strides[i];
    v.size *= shape[i];
  }
  return v;
}

Test(iter, broadcast_shapes) {
  int64_t s1[] = {4, 1, 3}, st1[] = {3, 3, 1};
  int64_t s2[] = {5, 1}, st2[] = {1, 1};
  jk_view a = view(3, s1, st1, JITK_FLOAT32, 0x1000), b = view(2, s2, st2, JITK_FLOAT32, 0x2000);
  const jk_view *vs[] = {&a, &b};
  const char *names[] = {"a", "b"};
  int nd;
  int64_t shape[JITK_MAX_NDIM];
  JT_OK(NULL, jk_broadcast_shape(NULL, vs, names, 2, &nd, shape));
  cr_assert_eq(nd, 3);
  cr_assert(shape[0] == 4 && shape[1] == 5 && shape[2] == 3);
  int64_t s3[] = {2}, st3[] = {1};
  jk_view c = view(1, s3, st3, JITK_FLOAT32, 0x3000);
  const jk_view *bad[] = {&a, &c};
  const char *bn[] = {"argument `x`", "argument `y`"};
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "argument `y` (extent 2",
           jk_broadcast_shape(NULL, bad, bn, 2, &nd, shape));
  cr_assert(strstr(jitk_errmsg(NULL), "argument `x`") != NULL, "%s", jitk_errmsg(NULL));
}

Test(iter, contiguous_collapses_to_one) {
  int64_t s[] = {4, 5, 6}, st[] = {30, 6, 1};
  jk_view a = view(3, s, st, JITK_FLOAT32, 0), b = view(3, s, st, JITK_FLOAT32, 0);
  jk_iter it;
  jk_iter_init(&it, 3, s);
  jk_iter_add(&it, &a);
  jk_iter_add(&it, &b);
  jk_iter_coalesce(&it, true);
  cr_assert_eq(it.ndim, 1);
  cr_assert_eq(it.shape[0], 120);
  cr_assert_eq(it.ops[0].strides[0], 1);
  cr_assert(jk_iter_fits_32(&it));
}

Test(iter, bias_broadcast_keeps_two_dims) {
  int64_t s[] = {100, 64}, st[] = {64, 1};
  int64_t bs[] = {64}, bst[] = {1};
  jk_view y = view(2, s, st, JITK_FLOAT32, 0), x = view(2, s, st, JITK_FLOAT32, 0),
          b = view(1, bs, bst, JITK_FLOAT32, 0);
  jk_iter it;
  jk_iter_init(&it, 2, s);
  jk_iter_add(&it, &y);
  jk_iter_add(&it, &x);
  jk_iter_add(&it, &b);
  jk_iter_coalesce(&it, true);
  cr_assert_eq(it.ndim, 2);
  cr_assert(it.shape[0] == 100 && it.shape[1] == 64);
  cr_assert(it.ops[2].strides[0] == 0 && it.ops[2].strides[1] == 1, "the bias walks the rows");
}

Test(iter, transposed_output_reorders) {
  /* The output is a transposed view: the loop follows its memory. */
  int64_t s[] = {8, 16}, out_st[] = {1, 8}, in_st[] = {16, 1};
  jk_view out = view(2, s, out_st, JITK_FLOAT32, 0), in = view(2, s, in_st, JITK_FLOAT32, 0);
  jk_iter it;
  jk_iter_init(&it, 2, s);
  jk_iter_add(&it, &out);
  jk_iter_add(&it, &in);
  jk_iter_coalesce(&it, true);
  cr_assert_eq(it.ndim, 2);
  cr_assert_eq(it.ops[0].strides[1], 1, "innermost: the output's unit stride");
  cr_assert_eq(it.shape[1], 8);
  /* Without reordering (the operation uses i), C order stays. */
  jk_iter_init(&it, 2, s);
  jk_iter_add(&it, &out);
  jk_iter_add(&it, &in);
  jk_iter_coalesce(&it, false);
  cr_assert_eq(it.ops[0].strides[1], 8);
  cr_assert_eq(it.shape[1], 16);
}

Test(iter, reversed_and_unit_dims) {
  int64_t s[] = {1, 6, 1, 4}, st[] = {99, -4, 7, -1};
  jk_view a = view(4, s, st, JITK_FLOAT64, 0);
  jk_iter it;
  jk_iter_init(&it, 4, s);
  jk_iter_add(&it, &a);
  jk_iter_coalesce(&it, true);
  cr_assert_eq(it.ndim, 1, "extent-1 dims go, reversed contiguous dims merge");
  cr_assert_eq(it.shape[0], 24);
  cr_assert_eq(it.ops[0].strides[0], -1);
}

Test(iter, index_width) {
  int64_t s[] = {(int64_t)1 << 31}, st[] = {1};
  jk_view a = view(1, s, st, JITK_INT8, 0);
  jk_iter it;
  jk_iter_init(&it, 1, s);
  jk_iter_add(&it, &a);
  cr_assert(!jk_iter_fits_32(&it), "2^31 elements need 64 bits");
  int64_t s2[] = {(int64_t)1 << 29}, st2[] = {1};
  jk_view b = view(1, s2, st2, JITK_FLOAT64, 0); /* 4 GiB of bytes */
  jk_iter_init(&it, 1, s2);
  jk_iter_add(&it, &b);
  cr_assert(!jk_iter_fits_32(&it), "byte offsets past 2^31 need 64 bits");
  jk_view c = view(1, s2, st2, JITK_INT8, 0);
  jk_iter_init(&it, 1, s2);
  jk_iter_add(&it, &c);
  cr_assert(jk_iter_fits_32(&it));
}

Test(iter, ranges_and_sameness) {
  int64_t s[] = {3, 4}, st[] = {4, 1}, rst[] = {-4, 1};
  jk_view a = view(2, s, st, JITK_FLOAT32, 1000), b = view(2, s, rst, JITK_FLOAT32, 1032);
  uintptr_t lo, hi;
  cr_assert(jk_view_range(&a, 4, &lo, &hi));
  cr_assert(lo == 1000 && hi == 1000 + 11 * 4 + 3);
  cr_assert(jk_view_range(&b, 4, &lo, &hi));
  cr_assert(lo == 1000 && hi == 1032 + 3 * 4 + 3);
  cr_assert(jk_view_same(&a, &a));
  cr_assert(!jk_view_same(&a, &b));
}

/* Two arrays whose own counts fit can broadcast to more than 2^63
 * elements; the count is refused rather than overflowed (issue 11). */
Test(iter, broadcast_count_overflow) {
  int64_t s1[] = {(int64_t)1 << 40, 1}, s2[] = {1, (int64_t)1 << 40}, st[] = {1, 1};
  jk_view a = view(2, s1, st, JITK_FLOAT32, 0x1000), b = view(2, s2, st, JITK_FLOAT32, 0x2000);
  const jk_view *vs[] = {&a, &b};
  const char *names[] = {"a", "b"};
  int nd;
  int64_t shape[JITK_MAX_NDIM];
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "more than 2^63 elements",
           jk_broadcast_shape(NULL, vs, names, 2, &nd, shape));
  /* Just inside: 2^31 x 2^31 elements. */
  int64_t s3[] = {(int64_t)1 << 31, 1}, s4[] = {1, (int64_t)1 << 31};
  a = view(2, s3, st, JITK_FLOAT32, 0x1000);
  b = view(2, s4, st, JITK_FLOAT32, 0x2000);
  JT_OK(NULL, jk_broadcast_shape(NULL, vs, names, 2, &nd, shape));
  /* An empty dimension makes any product empty. */
  int64_t s5[] = {0, (int64_t)1 << 40, 1};
  int64_t st3[] = {1, 1, 1};
  jk_view c = view(3, s5, st3, JITK_FLOAT32, 0x3000);
  a = view(2, s1, st, JITK_FLOAT32, 0x1000);
  b = view(2, s2, st, JITK_FLOAT32, 0x2000);
  const jk_view *ve[] = {&a, &b, &c};
  const char *ne[] = {"a", "b", "c"};
  JT_OK(NULL, jk_broadcast_shape(NULL, ve, ne, 3, &nd, shape));
}
