/* DLTensor checks: device type, dtype, byte_offset and NULL strides. */
#include "array/array.h"
#include "common.h"

_Alignas(16) static float fake_storage[64];

Test(tensor, c_contiguous_when_strides_null) {
  int64_t shape[3] = {2, 3, 4};
  DLTensor t = jt_tensor(fake_storage, JITK_FLOAT32, 3, shape, NULL);
  jk_view v;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.ndim, 3);
  cr_assert_eq(v.size, 24);
  cr_assert_eq(v.strides[0], 12);
  cr_assert_eq(v.strides[1], 4);
  cr_assert_eq(v.strides[2], 1);
  cr_assert_eq(v.dtype, JITK_FLOAT32);
  cr_assert_eq(v.data, (char *)fake_storage);
}

Test(tensor, byte_offset_and_explicit_strides) {
  int64_t shape[2] = {4, 3}, strides[2] = {1, -4};
  DLTensor t = jt_tensor(fake_storage, JITK_FLOAT64, 2, shape, strides);
  t.byte_offset = 64;
  jk_view v;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.data, (char *)fake_storage + 64);
  cr_assert_eq(v.strides[0], 1);
  cr_assert_eq(v.strides[1], -4);
  cr_assert_eq(v.dtype, JITK_FLOAT64);
}

Test(tensor, zero_dims_and_empty) {
  DLTensor t = jt_tensor(fake_storage, JITK_INT32, 0, NULL, NULL);
  jk_view v;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.size, 1);
  int64_t shape[2] = {0, 5};
  t = jt_tensor(NULL, JITK_INT32, 2, shape, NULL);
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.size, 0);
  /* An empty array's other extents may be as large as an int64_t holds:
   * the row-major strides made for it stop growing rather than overflow
   * (which UBSan reported before). */
  int64_t huge[4] = {0, (int64_t)1 << 62, 4, INT64_MAX};
  t = jt_tensor(NULL, JITK_INT32, 4, huge, NULL);
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.size, 0);
  cr_assert_eq(v.strides[3], 1);
  cr_assert_eq(v.strides[2], INT64_MAX);
  cr_assert_eq(v.strides[1], INT64_MAX);
}

/* A first element off its dtype's alignment is refused: kernels would
 * fault on it, and a fault ends the CUDA context. An empty array has no
 * element to read. */
Test(tensor, elements_aligned_to_their_dtype) {
  int64_t shape[1] = {4}, none[1] = {0};
  jk_view v;
  static const struct {
    jitk_dtype dtype;
    uint64_t offset;
    const char *why;
  } bad[] = {{JITK_FLOAT32, 2, "aligned to 4 bytes, as float32"},
             {JITK_FLOAT16, 1, "aligned to 2 bytes, as float16"},
             {JITK_FLOAT64, 4, "aligned to 8 bytes, as float64"},
             {JITK_COMPLEX128, 8, "aligned to 16 bytes, as complex128"},
             {JITK_INT64, 12, "aligned to 8 bytes, as int64"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    DLTensor t = jt_tensor(fake_storage, bad[i].dtype, 1, shape, NULL);
    t.byte_offset = bad[i].offset;
    JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, bad[i].why,
             jk_view_from_tensor(NULL, &t, "argument 2", &v));
    cr_assert(strstr(jitk_errmsg(NULL), "argument 2") != NULL);
    t.shape = none;
    JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
    /* The data pointer itself off, with no offset: the same. */
    t = jt_tensor((char *)fake_storage + bad[i].offset, bad[i].dtype, 1, shape, NULL);
    JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, bad[i].why, jk_view_from_tensor(NULL, &t, "x", &v));
  }
  /* One-byte dtypes take any address; others their alignment's multiples. */
  DLTensor t = jt_tensor(fake_storage, JITK_UINT8, 1, shape, NULL);
  t.byte_offset = 3;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  t = jt_tensor(fake_storage, JITK_COMPLEX128, 1, shape, NULL);
  t.byte_offset = 32;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
}

Test(tensor, refusals) {
  int64_t shape[2] = {2, 2};
  jk_view v;
  DLTensor t = jt_tensor(fake_storage, JITK_FLOAT32, 2, shape, NULL);
  t.device.device_type = kDLCPU;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "kDLCPU", jk_view_from_tensor(NULL, &t, "argument 3", &v));
  cr_assert(strstr(jitk_errmsg(NULL), "argument 3") != NULL);
  t = jt_tensor(fake_storage, JITK_FLOAT32, 2, shape, NULL);
  t.dtype.lanes = 2;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "2 lanes", jk_view_from_tensor(NULL, &t, "x", &v));
  int64_t neg[2] = {2, -1};
  t = jt_tensor(fake_storage, JITK_FLOAT32, 2, neg, NULL);
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "negative extent", jk_view_from_tensor(NULL, &t, "x", &v));
  int64_t many[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  t = jt_tensor(fake_storage, JITK_FLOAT32, 17, many, NULL);
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "17 dimensions", jk_view_from_tensor(NULL, &t, "x", &v));
  t = jt_tensor(NULL, JITK_FLOAT32, 2, shape, NULL);
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "data is NULL", jk_view_from_tensor(NULL, &t, "x", &v));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "NULL", jk_view_from_tensor(NULL, NULL, "x", &v));
}

/* Strides are the caller's numbers: ranges and overlaps multiply them by
 * extents, which overflowed for strides no memory can have (issue 11). */
Test(tensor, strides_reaching_past_2_62_bytes) {
  jk_view v;
  int64_t shape[2] = {4, 3};
  int64_t huge[2] = {(int64_t)1 << 61, 1}, most[2] = {INT64_MIN, 1}, fine[2] = {1 << 20, -1};
  DLTensor t = jt_tensor(fake_storage, JITK_FLOAT32, 2, shape, huge);
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "reaches past 2^62 bytes",
           jk_view_from_tensor(NULL, &t, "x", &v));
  t.strides = most;
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "stride -9223372036854775808 in dimension 0",
           jk_view_from_tensor(NULL, &t, "x", &v));
  t.strides = fine;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  /* Extent-1 dimensions are never stepped along, and empty arrays reach
   * nothing: their strides do not matter. */
  int64_t one[2] = {1, 3};
  t.shape = one;
  t.strides = most;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  int64_t empty[2] = {0, 3};
  t.shape = empty;
  t.strides = huge;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
}

/* DLPack 1.1's 8-bit float codes, as a producer such as PyTorch or JAX
 * writes them by number: 10 (kDLFloat8_e4m3fn) and 12 (kDLFloat8_e5m2). */
Test(tensor, float8_codes) {
  int64_t shape[1] = {64};
  DLTensor t = jt_tensor(fake_storage, JITK_FLOAT32, 1, shape, NULL);
  t.dtype.code = 10;
  t.dtype.bits = 8;
  jk_view v;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.dtype, JITK_FLOAT8_E4M3);
  cr_assert_eq(v.size, 64);
  cr_assert_eq(v.strides[0], 1);
  t.dtype.code = 12;
  JT_OK(NULL, jk_view_from_tensor(NULL, &t, "x", &v));
  cr_assert_eq(v.dtype, JITK_FLOAT8_E5M2);
  t.dtype.code = 11; /* e4m3fnuz: another format, not jitk's */
  JT_FAILS(NULL, JITK_ERR_INVALID_ARRAY, "code 11", jk_view_from_tensor(NULL, &t, "x", &v));
}
