/*
 * The calls a language binding needs around elementwise and reduction
 * kernels, without a GPU: raw outputs, the outputs' specs before a launch
 * (jitk_*_outputs, on a compile-only engine whose tensors say kDLCUDA and
 * whose memory is never read), launch options, parameter introspection,
 * and jitk_pointer_device through a stubbed driver table.
 */
#include <stddef.h>
#include <stdio.h>

#include "codegen/codegen.h"
#include "common.h"
#include "engine.h"

/* Addresses for tensors whose memory is never touched: the calls under
 * test read descriptions only. Overlap checks compare these ranges. */
static char arena[1 << 16];

static DLTensor tensor(size_t offset, jitk_dtype dtype, int ndim, int64_t *shape,
                       int64_t *strides) {
  return jt_tensor(arena + offset, dtype, ndim, shape, strides);
}

static jitk_output_spec poisoned_spec(void) {
  jitk_output_spec s;
  memset(&s, 0x5e, sizeof s);
  return s;
}

static void assert_spec(const jitk_output_spec *s, jitk_dtype dtype, int ndim,
                        const int64_t *shape) {
  cr_assert_eq(s->dtype, dtype, "dtype %d, expected %d", (int)s->dtype, (int)dtype);
  cr_assert_eq(s->ndim, ndim, "ndim %d, expected %d", s->ndim, ndim);
  for (int d = 0; d < ndim; d++)
    cr_assert_eq(s->shape[d], shape[d], "extent %d is %lld, expected %lld", d,
                 (long long)s->shape[d], (long long)shape[d]);
  for (int d = ndim; d < JITK_MAX_NDIM; d++) cr_assert_eq(s->shape[d], 0, "extent %d not 0", d);
}

/* --- raw outputs --- */

/* CuPy's test_manual_indexing and TestElementwiseKernelSize: a raw output
 * is written by index, never fixes the loop's size, and is allocated with
 * the loop's shape (one dimension of `size` when only size fixes it). */
Test(raw_outputs, shapes_and_size) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "raw T x, raw T y", "raw T z", "z[i] = x[i] + y[i]", "manual",
                                   NULL, &k));
  int64_t sh[1] = {100};
  DLTensor x = tensor(0, JITK_FLOAT32, 1, sh, NULL), y = tensor(1024, JITK_FLOAT32, 1, sh, NULL);
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y)};
  jitk_output_spec spec = poisoned_spec();
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "pass size",
           jitk_elementwise_outputs(k, args, 2, -1, &spec));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "size is -2;",
           jitk_elementwise_outputs(k, args, 2, -2, &spec));
  JT_OK(e, jitk_elementwise_outputs(k, args, 2, 100, &spec));
  int64_t want[1] = {100};
  assert_spec(&spec, JITK_FLOAT32, 1, want);
  /* A size of its own: the raw output is allocated with it, whatever the
   * raw inputs' shapes. */
  JT_OK(e, jitk_elementwise_outputs(k, args, 2, 7, &spec));
  want[0] = 7;
  assert_spec(&spec, JITK_FLOAT32, 1, want);

  /* A given raw output has its own shape, also one unlike the loop's, and
   * still does not fix the size. */
  int64_t zsh[2] = {3, 5};
  DLTensor z = tensor(4096, JITK_FLOAT32, 2, zsh, NULL);
  jitk_arg given[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_array(&z)};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "pass size",
           jitk_elementwise_outputs(k, given, 3, -1, &spec));
  JT_OK(e, jitk_elementwise_outputs(k, given, 3, 100, &spec));
  assert_spec(&spec, JITK_FLOAT32, 2, zsh);
  /* Its dtype binds T as any array's does. */
  DLTensor z64 = tensor(4096, JITK_FLOAT64, 2, zsh, NULL);
  jitk_arg clash[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_array(&z64)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "bound to both float32 and float64",
           jitk_elementwise_outputs(k, clash, 3, 100, &spec));
  /* An output is an array, raw or not. */
  jitk_arg scalar_out[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_f32(1)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "must be an array",
           jitk_elementwise_outputs(k, scalar_out, 3, 100, &spec));
  jitk_elementwise_destroy(k);

  /* With non-raw arrays the loop has their broadcast shape, which an
   * allocated raw output takes. */
  JT_OK(e, jitk_elementwise_create(e, "T a, T b", "raw T z, T w", "z[i] = a; w = b", "mixed", NULL,
                                   &k));
  int64_t ash[2] = {4, 1}, bsh[1] = {6}, loop[2] = {4, 6};
  DLTensor a = tensor(0, JITK_INT16, 2, ash, NULL), b = tensor(512, JITK_INT16, 1, bsh, NULL);
  jitk_arg ab[] = {jitk_arg_array(&a), jitk_arg_array(&b)};
  jitk_output_spec specs[2] = {poisoned_spec(), poisoned_spec()};
  JT_OK(e, jitk_elementwise_outputs(k, ab, 2, -1, specs));
  assert_spec(&specs[0], JITK_INT16, 2, loop);
  assert_spec(&specs[1], JITK_INT16, 2, loop);
  /* The size may agree with the arrays, not differ. */
  JT_OK(e, jitk_elementwise_outputs(k, ab, 2, 24, specs));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "size is 25 but the arrays have 24",
           jitk_elementwise_outputs(k, ab, 2, 25, specs));
  /* A size is a count, or -1 for the arrays': any other negative one is
   * refused here too, where the arrays fix the count (it was ignored). */
  static const int64_t negative[] = {-2, -7, INT64_MIN};
  for (size_t i = 0; i < sizeof negative / sizeof negative[0]; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "size is %lld;", (long long)negative[i]);
    JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, needle,
             jitk_elementwise_outputs(k, ab, 2, negative[i], specs));
  }
  /* A given non-raw output fixes the loop: a raw input beside it does not. */
  int64_t wsh[2] = {4, 7};
  DLTensor w = tensor(8192, JITK_INT16, 2, wsh, NULL);
  jitk_arg bad_w[] = {jitk_arg_array(&a), jitk_arg_array(&b), jitk_arg_allocate(),
                      jitk_arg_array(&w)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "does not broadcast",
           jitk_elementwise_outputs(k, bad_w, 4, -1, specs));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* A raw output may be any array, sharing memory with raw arrays; partial
 * overlaps with non-raw arrays are refused as for any output. */
Test(raw_outputs, overlap_rules) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e,
        jitk_elementwise_create(e, "T x, raw T r", "raw T z", "z[i] = x + r[i]", "ov", NULL, &k));
  int64_t sh[1] = {64}, zero[1] = {0};
  DLTensor x = tensor(0, JITK_FLOAT32, 1, sh, NULL);
  DLTensor r = tensor(4096, JITK_FLOAT32, 1, sh, NULL);
  jitk_output_spec spec;
  /* Exactly the raw input, or overlapping it partly: both fine. */
  DLTensor z_same = tensor(4096, JITK_FLOAT32, 1, sh, NULL);
  DLTensor z_part = tensor(4096 + 16, JITK_FLOAT32, 1, sh, NULL);
  jitk_arg same[] = {jitk_arg_array(&x), jitk_arg_array(&r), jitk_arg_array(&z_same)};
  jitk_arg part[] = {jitk_arg_array(&x), jitk_arg_array(&r), jitk_arg_array(&z_part)};
  JT_OK(e, jitk_elementwise_outputs(k, same, 3, -1, &spec));
  JT_OK(e, jitk_elementwise_outputs(k, part, 3, -1, &spec));
  /* A stride of 0: a raw output is written where the operation says. */
  DLTensor z_bcast = tensor(16384, JITK_FLOAT32, 1, sh, zero);
  jitk_arg bcast[] = {jitk_arg_array(&x), jitk_arg_array(&r), jitk_arg_array(&z_bcast)};
  JT_OK(e, jitk_elementwise_outputs(k, bcast, 3, -1, &spec));
  /* Exactly the non-raw input: in place, fine; partly: refused. */
  DLTensor zx = tensor(0, JITK_FLOAT32, 1, sh, NULL);
  DLTensor zx_part = tensor(8, JITK_FLOAT32, 1, sh, NULL);
  jitk_arg inplace[] = {jitk_arg_array(&x), jitk_arg_array(&r), jitk_arg_array(&zx)};
  jitk_arg clash[] = {jitk_arg_array(&x), jitk_arg_array(&r), jitk_arg_array(&zx_part)};
  JT_OK(e, jitk_elementwise_outputs(k, inplace, 3, -1, &spec));
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "output `z` overlaps argument `x` without being the same",
           jitk_elementwise_outputs(k, clash, 3, -1, &spec));
  jitk_elementwise_destroy(k);

  /* Against a non-raw output, on either side of it in the list. */
  const char *lists[] = {"raw T z, T w", "T w, raw T z"};
  for (int order = 0; order < 2; order++) {
    JT_OK(e, jitk_elementwise_create(e, "T x", lists[order], "w = x; z[i] = x", "ov2", NULL, &k));
    DLTensor w = tensor(8192, JITK_FLOAT32, 1, sh, NULL);
    DLTensor z = tensor(8192 + 4, JITK_FLOAT32, 1, sh, NULL);
    jitk_arg a[3] = {jitk_arg_array(&x)};
    a[1 + order] = jitk_arg_array(&z);
    a[2 - order] = jitk_arg_array(&w);
    jitk_output_spec specs[2];
    JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "overlaps", jitk_elementwise_outputs(k, a, 3, -1, specs));
    DLTensor z_apart = tensor(32768, JITK_FLOAT32, 1, sh, NULL);
    a[1 + order] = jitk_arg_array(&z_apart);
    JT_OK(e, jitk_elementwise_outputs(k, a, 3, -1, specs));
    jitk_elementwise_destroy(k);
  }

  /* A non-raw output with a stride of 0 is still refused. */
  JT_OK(e, jitk_elementwise_create(e, "T x", "T y", "y = x", "plain", NULL, &k));
  DLTensor y0 = tensor(16384, JITK_FLOAT32, 1, sh, zero);
  jitk_arg y0args[] = {jitk_arg_array(&x), jitk_arg_array(&y0)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "stride 0",
           jitk_elementwise_outputs(k, y0args, 2, -1, &spec));
  /* So is one whose strides fold the indices onto fewer elements (4 x 4
   * onto 7, 2 x 3 x 2 onto 8), in either order and sign; a layout made
   * by slicing and transposing, however strided, is not. */
  int64_t sq[2] = {4, 4}, cube[3] = {2, 3, 2};
  DLTensor xs = tensor(0, JITK_FLOAT32, 2, sq, NULL), xc = tensor(0, JITK_FLOAT32, 3, cube, NULL);
  int64_t folded[][3] = {{1, 1}, {-1, 1}, {1, 2}, {2, 3}}, folded3[3] = {4, 2, 1};
  for (size_t i = 0; i < sizeof folded / sizeof folded[0]; i++) {
    DLTensor yf = tensor(32768 + 64, JITK_FLOAT32, 2, sq, folded[i]);
    jitk_arg fa[] = {jitk_arg_array(&xs), jitk_arg_array(&yf)};
    JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "may give two indices the same element",
             jitk_elementwise_outputs(k, fa, 2, -1, &spec));
  }
  DLTensor yc = tensor(32768, JITK_FLOAT32, 3, cube, folded3);
  jitk_arg ca[] = {jitk_arg_array(&xc), jitk_arg_array(&yc)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "may give two indices the same element",
           jitk_elementwise_outputs(k, ca, 2, -1, &spec));
  int64_t fine[][2] = {{4, 1}, {1, 4}, {-8, 2}, {1, 100}, {5, -1}};
  for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
    DLTensor yf = tensor(32768 + 2048, JITK_FLOAT32, 2, sq, fine[i]);
    jitk_arg fa[] = {jitk_arg_array(&xs), jitk_arg_array(&yf)};
    JT_OK(e, jitk_elementwise_outputs(k, fa, 2, -1, &spec));
  }
  jitk_elementwise_destroy(k);

  /* A reduction's output likewise; a raw output is the operation's to
   * index, so its strides are its own business. */
  jitk_reduction *rk = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "rsum", NULL,
                                 &rk));
  int64_t x3[3] = {4, 4, 8};
  DLTensor xr = tensor(0, JITK_FLOAT32, 3, x3, NULL);
  DLTensor yr = tensor(32768, JITK_FLOAT32, 2, sq, folded[0]);
  jitk_arg ra[] = {jitk_arg_array(&xr), jitk_arg_array(&yr)};
  int axis = 2;
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "may give two indices the same element",
           jitk_reduction_outputs(rk, ra, 2, &axis, 1, false, &spec));
  jitk_reduction_destroy(rk);
  JT_OK(e, jitk_elementwise_create(e, "T x", "raw T z", "z[i] = x", "rawfold", NULL, &k));
  DLTensor zf = tensor(32768, JITK_FLOAT32, 2, sq, folded[0]);
  jitk_arg za[] = {jitk_arg_array(&xs), jitk_arg_array(&zf)};
  JT_OK(e, jitk_elementwise_outputs(k, za, 2, -1, &spec));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* The generated kernel takes a raw output as a writable descriptor and
 * compiles, with the operation writing through it by index and by
 * coordinates; a rank-0 raw array takes z[i] too. */
/* Outputs whose byte ranges meet but whose elements interleave, as the
 * real and imaginary parts out[0::2] and out[1::2] of one buffer, or an
 * input x = buf[0::2] beside an output buf[1::2], share no element: they
 * are accepted, as CuPy runs them. Views whose elements may meet are
 * still refused. */
Test(elementwise_outputs, interleaved_views_are_apart) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T re, T im", "re = x; im = -x", "parts", NULL, &k));
  int64_t sh[1] = {64}, two[1] = {2}, four[1] = {4};
  DLTensor x = tensor(0, JITK_FLOAT32, 1, sh, NULL);
  DLTensor re = tensor(8192, JITK_FLOAT32, 1, sh, two);
  DLTensor im = tensor(8192 + 4, JITK_FLOAT32, 1, sh, two);
  jitk_output_spec specs[2];
  jitk_arg parts[] = {jitk_arg_array(&x), jitk_arg_array(&re), jitk_arg_array(&im)};
  JT_OK(e, jitk_elementwise_outputs(k, parts, 3, -1, specs));
  /* im one float later than re would share all but re's first element. */
  DLTensor next = tensor(8192 + 8, JITK_FLOAT32, 1, sh, two);
  jitk_arg meet[] = {jitk_arg_array(&x), jitk_arg_array(&re), jitk_arg_array(&next)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "output `im` overlaps output `re`",
           jitk_elementwise_outputs(k, meet, 3, -1, specs));
  jitk_elementwise_destroy(k);

  JT_OK(e, jitk_elementwise_create(e, "T x", "U z", "z = (U)x", "halves", NULL, &k));
  DLTensor evens = tensor(16384, JITK_FLOAT32, 1, sh, two);
  /* float16 elements 2 bytes wide at byte 4 of each 8: after each float32. */
  DLTensor odds = tensor(16384 + 4, JITK_FLOAT16, 1, sh, four);
  jitk_arg apart[] = {jitk_arg_array(&evens), jitk_arg_array(&odds)};
  jitk_output_spec spec;
  JT_OK(e, jitk_elementwise_outputs(k, apart, 2, -1, &spec));
  /* At byte 2 of each 8 it would share a float32's upper half. */
  DLTensor inside = tensor(16384 + 2, JITK_FLOAT16, 1, sh, four);
  jitk_arg clash[] = {jitk_arg_array(&evens), jitk_arg_array(&inside)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "output `z` overlaps argument `x`",
           jitk_elementwise_outputs(k, clash, 2, -1, &spec));
  /* Strides of 2 and 1: every byte of the output's range meets the input's. */
  DLTensor dense = tensor(16384 + 4, JITK_FLOAT16, 1, sh, NULL);
  jitk_arg meets[] = {jitk_arg_array(&evens), jitk_arg_array(&dense)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "overlaps", jitk_elementwise_outputs(k, meets, 2, -1, &spec));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

Test(raw_outputs, generated_and_compiled) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, raw T r", "raw T z, T w",
                                   "z[i] = x + r[i]; w = x; z(0) = w", "rawout", NULL, &k));
  const char *src = NULL;
  JT_OK(e, jitk_elementwise_compile(k, "T=float16", NULL, &src, NULL));
  cr_assert(strstr(src, "jitk::array<T, 1> z") != NULL, "a writable descriptor:\n%s", src);
  cr_assert(strstr(src, "jitk::array<const T, 1> r") != NULL, "a read-only one for inputs");
  cr_assert(strstr(src, "_jk_p_z") == NULL, "a raw output is not an element-wise pointer");
  jitk_elementwise_layout scalar = {2, 64, 1, NULL};
  JT_OK(e, jitk_elementwise_compile(k, "T=complex128", &scalar, &src, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "cannot be a scalar",
           jitk_elementwise_compile(k, "T=float32", &(jitk_elementwise_layout){1, 32, 0, "z"}, &src,
                                    NULL));
  jitk_elementwise_destroy(k);

  /* Rank 0: the source of a specialization whose raw output has no
   * dimensions (allocated for a loop over rank-0 arrays). */
  jk_param_list pl;
  memset(&pl, 0, sizeof pl);
  JT_OK(e, jk_params_parse(e, "float32 x", "in_params", false, &pl));
  JT_OK(e, jk_params_parse(e, "raw float32 z", "out_params", true, &pl));
  jk_ew_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nparams = 2;
  spec.ndim = 1;
  spec.vec = 1;
  spec.dtype[0] = spec.dtype[1] = JITK_FLOAT32;
  spec.kind[0] = JK_EW_ARRAY;
  spec.kind[1] = JK_EW_RAW;
  spec.raw_ndim[1] = 0;
  bool load[2] = {false, false};
  jk_ew_source_in in = {"rank0", &pl, load, "z[i] = x * 2", NULL, NULL, NULL, &spec};
  char *gen = NULL;
  JT_OK(e, jk_ew_generate(e, &in, &gen));
  cr_assert(strstr(gen, "jitk::array<float, 0> z") != NULL, "%s", gen);
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, gen, NULL, &m));
  jitk_module_destroy(m);
  jk_free(e, gen);
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}

/* Reductions keep refusing raw outputs, saying why. */
Test(raw_outputs, reductions_refuse_them) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_reduction *k = (jitk_reduction *)(uintptr_t)0x5e;
  JT_FAILS(e, JITK_ERR_PARSE, "reduction outputs cannot be raw",
           jitk_reduction_create(e, "T x", "T s, raw T y", "x", "a + b", "s = a", "0", NULL, "r",
                                 NULL, &k));
  cr_assert(strstr(jitk_errmsg(e), "ReductionKernel") != NULL, "%s", jitk_errmsg(e));
  cr_assert_eq(jitk_error_offset(e), 11, "the caret is under `y`: %d", jitk_error_offset(e));
  cr_assert_eq((uintptr_t)k, 0x5e, "untouched on failure");
  jitk_engine_destroy(e);
}

/* A parameter named as something the reduction's kernel declares where
 * the user's expressions see it would be shadowed there: a scalar `_j`
 * was read as the element's index. Refused at creation, naming it. */
Test(raw_outputs, reductions_refuse_the_names_they_declare) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const char *const ins[] = {"T x, float32 _j", "T x, int32 _in_ind", "T x, raw T _out_ind",
                                    "T _type_reduce"};
  for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++) {
    jitk_reduction *k = (jitk_reduction *)(uintptr_t)0x5e;
    JT_FAILS(
        e, JITK_ERR_PARSE, "cannot be named",
        jitk_reduction_create(e, ins[i], "T s", "x", "a + b", "s = a", "0", NULL, "r", NULL, &k));
    cr_assert_eq((uintptr_t)k, 0x5e, "untouched on failure");
  }
  /* reduce_expr and identity are compiled apart from the parameters and
   * indices: a use of one is refused at creation, not at the first
   * launch's compile. */
  static const char *const apart[][3] = {{"a + b * w", "0", "`w`"},
                                         {"a + b", "init", "`init`"},
                                         {"a + b + _in_ind.size()", "0", "`_in_ind`"},
                                         {"a + b", "(T)_j", "`_j`"}};
  for (size_t i = 0; i < sizeof apart / sizeof apart[0]; i++) {
    jitk_reduction *k = (jitk_reduction *)(uintptr_t)0x5e;
    JT_FAILS(e, JITK_ERR_PARSE, apart[i][2],
             jitk_reduction_create(e, "T x, T w, T init", "T s", "x", apart[i][0], "s = a",
                                   apart[i][1], NULL, "r", NULL, &k));
    cr_assert(strstr(jitk_errmsg(e), "compiled apart") != NULL, "%s", jitk_errmsg(e));
    cr_assert_eq((uintptr_t)k, 0x5e, "untouched on failure");
  }
  /* An output named `a` would hide post_map_expr's reduced value; names
   * CUDA or jitk give every kernel cannot name parameters or
   * placeholders; reduce_type may have any space around it. */
  static const char *const clash[][2] = {{"T x", "T a"},
                                         {"T x, float32 blockDim", "T y"},
                                         {"T x, int32 threadIdx", "T y"},
                                         {"i x", "i y"},
                                         {"jitk x", "jitk y"},
                                         {"float2 x", "float2 y"},
                                         {"T x, raw ulonglong4 w", "T y"}};
  for (size_t i = 0; i < sizeof clash / sizeof clash[0]; i++) {
    jitk_reduction *k = (jitk_reduction *)(uintptr_t)0x5e;
    cr_assert_eq(jitk_reduction_create(e, clash[i][0], clash[i][1], "x", "a + b", "s = a", "0",
                                       NULL, "r", NULL, &k),
                 JITK_ERR_PARSE, "%s -> %s was taken", clash[i][0], clash[i][1]);
    cr_assert_eq((uintptr_t)k, 0x5e, "untouched on failure");
  }
  /* CUDA's names of jitk's dtypes are those dtypes: the source declares
   * them. */
  static const char *const cuda_names[][2] = {{"half", "T=float32"},
                                              {"__nv_bfloat16", "T=float32"},
                                              {"complex<float>", "T=complex64"},
                                              {"double", "T=float32"}};
  for (size_t i = 0; i < sizeof cuda_names / sizeof cuda_names[0]; i++) {
    jitk_reduction *k = NULL;
    JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", cuda_names[i][0],
                                   "r", NULL, &k));
    const char *src = NULL;
    jitk_module *m = NULL;
    JT_OK(e, jitk_reduction_compile(k, cuda_names[i][1], NULL, &src, &m));
    jitk_module_destroy(m);
    jitk_reduction_destroy(k);
  }
  jitk_reduction *tabbed = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", "\tfloat32\n", "r",
                                 NULL, &tabbed));
  jitk_reduction_destroy(tabbed);
  /* Names that only start like them are parameters as any other, and
   * in reduce_expr `a` and `b` are the values it combines, whatever the
   * parameters are named. */
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T a", "T b", "a", "a + b", "b = a", "0", NULL, "r", NULL, &k));
  jitk_reduction_destroy(k);
  JT_OK(e, jitk_reduction_create(e, "T x, float32 _jj, float32 _in_index", "T s", "x * _jj",
                                 "a + b", "s = a", "0", NULL, "r", NULL, &k));
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* --- outputs without a launch --- */

/* Every argument rule of the launch holds, with its error, and specs is
 * written only on success. */
Test(elementwise_outputs, same_rules_as_a_launch) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y, float32 s", "T z, int64 n", "z = x * y + s; n = i",
                                   "k", NULL, &k));
  int64_t xs[2] = {3, 1}, ys[2] = {1, 5}, loop[2] = {3, 5};
  DLTensor x = tensor(0, JITK_FLOAT64, 2, xs, NULL), y = tensor(256, JITK_FLOAT64, 2, ys, NULL);
  jitk_output_spec specs[2] = {poisoned_spec(), poisoned_spec()}, before[2];
  memcpy(before, specs, sizeof specs);
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y), jitk_arg_f64(2.5)};
  /* Outputs omitted, or asked for with jitk_arg_allocate. */
  JT_OK(e, jitk_elementwise_outputs(k, args, 3, -1, specs));
  assert_spec(&specs[0], JITK_FLOAT64, 2, loop);
  assert_spec(&specs[1], JITK_INT64, 2, loop);
  jitk_arg alloc[] = {args[0], args[1], args[2], jitk_arg_allocate(), jitk_arg_allocate()};
  memcpy(specs, before, sizeof specs);
  JT_OK(e, jitk_elementwise_outputs(k, alloc, 5, -1, specs));
  assert_spec(&specs[1], JITK_INT64, 2, loop);

  /* Failures leave specs alone. */
  memcpy(specs, before, sizeof specs);
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "takes 3 inputs and 2 outputs",
           jitk_elementwise_outputs(k, args, 2, -1, specs));
  int64_t bad[2] = {2, 5};
  DLTensor yb = tensor(256, JITK_FLOAT64, 2, bad, NULL);
  jitk_arg nb[] = {jitk_arg_array(&x), jitk_arg_array(&yb), jitk_arg_f64(1)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "does not broadcast",
           jitk_elementwise_outputs(k, nb, 3, -1, specs));
  DLTensor y32 = tensor(256, JITK_FLOAT32, 2, ys, NULL);
  jitk_arg clash[] = {jitk_arg_array(&x), jitk_arg_array(&y32), jitk_arg_f64(1)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "placeholder T is bound to both",
           jitk_elementwise_outputs(k, clash, 3, -1, specs));
  /* A fixed dtype is checked for given outputs. */
  DLTensor z = tensor(4096, JITK_FLOAT64, 2, loop, NULL),
           n32 = tensor(8192, JITK_INT32, 2, loop, NULL);
  jitk_arg wrong_n[] = {args[0], args[1], args[2], jitk_arg_array(&z), jitk_arg_array(&n32)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "output `n` is int32, but its parameter says int64",
           jitk_elementwise_outputs(k, wrong_n, 5, -1, specs));
  /* A given output of another shape. */
  DLTensor z_small = tensor(4096, JITK_FLOAT64, 2, xs, NULL);
  jitk_arg small[] = {args[0], args[1], args[2], jitk_arg_array(&z_small), jitk_arg_allocate()};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "does not have the shape the inputs broadcast to",
           jitk_elementwise_outputs(k, small, 5, -1, specs));
  /* Host memory, and a pointer instead of an array. */
  DLTensor host = x;
  host.device.device_type = kDLCPU;
  jitk_arg on_host[] = {jitk_arg_array(&host), args[1], args[2]};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "kDLCPU", jitk_elementwise_outputs(k, on_host, 3, -1, specs));
  jitk_arg ptr[] = {jitk_arg_ptr(arena, JITK_FLOAT64), args[1], args[2]};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "DLTensor", jitk_elementwise_outputs(k, ptr, 3, -1, specs));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "specs is NULL",
           jitk_elementwise_outputs(k, args, 3, -1, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "args is NULL",
           jitk_elementwise_outputs(k, NULL, 3, -1, specs));
  cr_assert_eq(memcmp(specs, before, sizeof specs), 0, "specs untouched by failures");
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_elementwise_outputs(NULL, args, 3, -1, specs));

  /* Given outputs report their own layout's shape and dtype; a placeholder
   * bound by the output alone. */
  jitk_elementwise_destroy(k);
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "U y", "y = (U)x", "cast", NULL, &k));
  int64_t s3[3] = {2, 3, 4};
  DLTensor x3 = tensor(0, JITK_FLOAT32, 3, s3, NULL), y3 = tensor(4096, JITK_UINT8, 3, s3, NULL);
  jitk_arg only_x[] = {jitk_arg_array(&x3)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "not bound",
           jitk_elementwise_outputs(k, only_x, 1, -1, specs));
  jitk_arg with_y[] = {jitk_arg_array(&x3), jitk_arg_array(&y3)};
  JT_OK(e, jitk_elementwise_outputs(k, with_y, 2, -1, specs));
  assert_spec(&specs[0], JITK_UINT8, 3, s3);
  jitk_elementwise_destroy(k);
  /* Rank-0 inputs: rank-0 outputs, raw or not. */
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "raw float32 z, float64 w", "z[i] = x; w = x",
                                   "rank0", NULL, &k));
  DLTensor x0 = tensor(0, JITK_FLOAT32, 0, NULL, NULL);
  jitk_arg r0[] = {jitk_arg_array(&x0)};
  JT_OK(e, jitk_elementwise_outputs(k, r0, 1, -1, specs));
  assert_spec(&specs[0], JITK_FLOAT32, 0, s3);
  assert_spec(&specs[1], JITK_FLOAT64, 0, s3);
  jitk_elementwise_destroy(k);

  /* A scalar whose dtype is none of jitk's, binding a placeholder that
   * the generated code would then name (it once reached the generator as
   * a NULL dtype). */
  JT_OK(e, jitk_elementwise_create(e, "T a", "float32 z", "z = a", "by_scalar", NULL, &k));
  jitk_arg odd = jitk_arg_f64(1.0);
  odd.dtype = (jitk_dtype)99;
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "is a scalar of dtype 99, not one of jitk's dtypes",
           jitk_elementwise_outputs(k, &odd, 1, 16, specs));
  odd.dtype = JITK_DTYPE_NONE;
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "is a scalar of dtype 0",
           jitk_elementwise_outputs(k, &odd, 1, 16, specs));
  jitk_elementwise_destroy(k);

  /* No outputs at all: specs may be NULL. */
  JT_OK(e, jitk_elementwise_create(e, "raw T x", "", "x[i] = 0", "none", NULL, &k));
  int64_t s1[1] = {9};
  DLTensor x1 = tensor(0, JITK_INT8, 1, s1, NULL);
  jitk_arg one[] = {jitk_arg_array(&x1)};
  JT_OK(e, jitk_elementwise_outputs(k, one, 1, 9, NULL));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

Test(reduction_outputs, axes_keepdims_and_errors) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x, raw T w", "T y, int64 n", "x * w[_j]", "a + b",
                                 "y = a; n = _in_ind.size()", "0", NULL, "wsum", NULL, &k));
  int64_t xs[3] = {4, 5, 6}, ws[1] = {30};
  DLTensor x = tensor(0, JITK_FLOAT32, 3, xs, NULL), w = tensor(4096, JITK_FLOAT32, 1, ws, NULL);
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&w)};
  jitk_output_spec specs[2] = {poisoned_spec(), poisoned_spec()}, before[2];
  memcpy(before, specs, sizeof specs);
  /* Every axis. */
  int64_t none[1] = {0};
  JT_OK(e, jitk_reduction_outputs(k, args, 2, NULL, -1, 0, specs));
  assert_spec(&specs[0], JITK_FLOAT32, 0, none);
  assert_spec(&specs[1], JITK_INT64, 0, none);
  int64_t ones[3] = {1, 1, 1};
  JT_OK(e, jitk_reduction_outputs(k, args, 2, NULL, -1, 1, specs));
  assert_spec(&specs[0], JITK_FLOAT32, 3, ones);
  /* Axes 1 and -1 (2). */
  int axes[2] = {1, -1};
  int64_t kept[1] = {4}, kept_dims[3] = {4, 1, 1};
  JT_OK(e, jitk_reduction_outputs(k, args, 2, axes, 2, 0, specs));
  assert_spec(&specs[0], JITK_FLOAT32, 1, kept);
  assert_spec(&specs[1], JITK_INT64, 1, kept);
  JT_OK(e, jitk_reduction_outputs(k, args, 2, axes, 2, 1, specs));
  assert_spec(&specs[1], JITK_INT64, 3, kept_dims);
  /* No axes: each output one element. */
  JT_OK(e, jitk_reduction_outputs(k, args, 2, axes, 0, 0, specs));
  assert_spec(&specs[0], JITK_FLOAT32, 3, xs);
  /* A given output has its own; one of the wrong shape is refused. */
  DLTensor y = tensor(8192, JITK_FLOAT32, 1, kept, NULL);
  jitk_arg given[] = {args[0], args[1], jitk_arg_array(&y), jitk_arg_allocate()};
  JT_OK(e, jitk_reduction_outputs(k, given, 4, axes, 2, 0, specs));
  assert_spec(&specs[0], JITK_FLOAT32, 1, kept);
  assert_spec(&specs[1], JITK_INT64, 1, kept);

  memcpy(specs, before, sizeof specs);
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "does not have the reduced shape",
           jitk_reduction_outputs(k, given, 4, axes, 2, 1, specs));
  int out_of_range[1] = {3}, twice[2] = {0, -3};
  JT_FAILS(e, JITK_ERR_AXIS, "axis 3 is out of range for 3 dimensions",
           jitk_reduction_outputs(k, args, 2, out_of_range, 1, 0, specs));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "given twice",
           jitk_reduction_outputs(k, args, 2, twice, 2, 0, specs));
  /* An output overlapping the input. */
  DLTensor y_over = tensor(4, JITK_FLOAT32, 1, kept, NULL);
  jitk_arg over[] = {args[0], args[1], jitk_arg_array(&y_over)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "takes 2 inputs and 2 outputs",
           jitk_reduction_outputs(k, over, 3, axes, 2, 0, specs));
  jitk_arg over4[] = {args[0], args[1], jitk_arg_array(&y_over), jitk_arg_allocate()};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "overlaps",
           jitk_reduction_outputs(k, over4, 4, axes, 2, 0, specs));
  /* Only raw inputs give no shape to reduce. */
  jitk_arg raw_only[] = {jitk_arg_f32(1), args[1]};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "no non-raw array input",
           jitk_reduction_outputs(k, raw_only, 2, NULL, -1, 0, specs));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "specs is NULL",
           jitk_reduction_outputs(k, args, 2, NULL, -1, 0, NULL));
  cr_assert_eq(memcmp(specs, before, sizeof specs), 0, "specs untouched by failures");
  jitk_reduction_destroy(k);

  /* An empty reduction needs an identity. */
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x", "max(a, b)", "y = a", NULL, NULL, "mx", NULL,
                                 &k));
  int64_t es[2] = {3, 0};
  DLTensor empty = tensor(0, JITK_INT32, 2, es, NULL);
  jitk_arg eargs[] = {jitk_arg_array(&empty)};
  int last[1] = {1}, first[1] = {0};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "needs an identity",
           jitk_reduction_outputs(k, eargs, 1, last, 1, 0, specs));
  /* No outputs at all (3 x 0 kept) reduce nothing, and need none. */
  int64_t zero_out[1] = {0};
  JT_OK(e, jitk_reduction_outputs(k, eargs, 1, first, 1, 0, specs));
  assert_spec(&specs[0], JITK_INT32, 1, zero_out);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* --- launch options --- */

Test(launch_options, init_and_checks) {
  jitk_launch_options o;
  memset(&o, 0x5e, sizeof o);
  jitk_launch_options_init(&o);
  cr_assert_eq(o.struct_size, sizeof o);
  cr_assert_eq(o.size, -1);
  cr_assert_eq(o.block_size, 0);
  jitk_launch_options_init(NULL);

  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T y", "y = x", "copy", NULL, &k));
  int64_t sh[1] = {8};
  DLTensor x = tensor(0, JITK_FLOAT32, 1, sh, NULL), y = tensor(64, JITK_FLOAT32, 1, sh, NULL);
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_array(&y)};
  /* Refused options are reported as such, before the device is needed. */
  jitk_launch_options bad = o;
  bad.struct_size = 0;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_launch_options_init",
           jitk_elementwise_launch_ex(k, NULL, args, 2, &bad, NULL));
  /* A caller built against a later jitk: fields this one lacks must be
   * zero (their defaults). */
  struct {
    jitk_launch_options base;
    uint64_t later;
  } newer;
  memset(&newer, 0, sizeof newer);
  jitk_launch_options_init(&newer.base);
  newer.base.struct_size = sizeof newer;
  newer.later = 7;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "does not know",
           jitk_elementwise_launch_ex(k, NULL, args, 2, &newer.base, NULL));
  newer.later = 0;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU",
           jitk_elementwise_launch_ex(k, NULL, args, 2, &newer.base, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "jitk_elementwise_launch_ex needs a GPU",
           jitk_elementwise_launch_ex(k, NULL, args, 2, NULL, NULL));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU",
           jitk_elementwise_launch_ex(k, NULL, args, 2, &o, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_elementwise_launch_ex(NULL, NULL, args, 2, &o, NULL));

  /* A block larger than the device allows, on an engine that believes it
   * has a device: refused before any driver call (the table is empty). */
  e->has_device = true;
  snprintf(e->info.name, sizeof e->info.name, "a stand-in GPU");
  e->info.max_threads_per_block = 1024;
  o.block_size = 1025;
  DLManagedTensor *outs[1] = {(DLManagedTensor *)(uintptr_t)0x5e};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT,
           "block_size 1025 is more threads than a block of a stand-in GPU can have (1024)",
           jitk_elementwise_launch_ex(k, NULL, args, 1, &o, outs));
  cr_assert_eq((uintptr_t)outs[0], 0x5e, "outputs untouched");
  e->has_device = false;
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* --- parameters --- */

Test(params, introspection) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, raw U r, float16 h", "raw T z, int64 n",
                                   "z[i] = x; n = i", "intro", NULL, &k));
  int nin = -1, nout = -1;
  JT_OK(e, jitk_elementwise_num_params(k, &nin, &nout));
  cr_assert_eq(nin, 3);
  cr_assert_eq(nout, 2);
  JT_OK(e, jitk_elementwise_num_params(k, NULL, &nout));
  JT_OK(e, jitk_elementwise_num_params(k, &nin, NULL));
  struct {
    const char *name;
    int out, raw;
    jitk_dtype dtype;
    const char *placeholder;
  } want[] = {{"x", 0, 0, JITK_DTYPE_NONE, "T"},
              {"r", 0, 1, JITK_DTYPE_NONE, "U"},
              {"h", 0, 0, JITK_FLOAT16, NULL},
              {"z", 1, 1, JITK_DTYPE_NONE, "T"},
              {"n", 1, 0, JITK_INT64, NULL}};
  for (int p = 0; p < 5; p++) {
    jitk_param_info info;
    memset(&info, 0x5e, sizeof info);
    info.struct_size = sizeof info;
    JT_OK(e, jitk_elementwise_param(k, p, &info));
    cr_assert_str_eq(info.name, want[p].name);
    cr_assert_eq(info.is_output, want[p].out, "%s", want[p].name);
    cr_assert_eq(info.is_raw, want[p].raw, "%s", want[p].name);
    cr_assert_eq(info.dtype, want[p].dtype, "%s", want[p].name);
    if (want[p].placeholder == NULL)
      cr_assert_null(info.placeholder, "%s", want[p].name);
    else
      cr_assert_str_eq(info.placeholder, want[p].placeholder);
    cr_assert_eq(info.struct_size, sizeof info);
  }
  jitk_param_info info;
  memset(&info, 0x5e, sizeof info);
  info.struct_size = sizeof info;
  jitk_param_info before = info;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "there is no parameter 5",
           jitk_elementwise_param(k, 5, &info));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "there is no parameter -1",
           jitk_elementwise_param(k, -1, &info));
  info.struct_size = 0;
  before.struct_size = 0;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size", jitk_elementwise_param(k, 0, &info));
  cr_assert_eq(memcmp(&info, &before, sizeof info), 0, "untouched on failure");
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "info is NULL", jitk_elementwise_param(k, 0, NULL));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_elementwise_param(NULL, 0, &info));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL",
           jitk_elementwise_num_params(NULL, &nin, &nout));
  /* A caller built against a later, larger jitk_param_info: the fields
   * this version knows are written, the rest left alone. */
  struct {
    jitk_param_info base;
    uint64_t later;
  } newer;
  memset(&newer, 0, sizeof newer);
  newer.base.struct_size = sizeof newer;
  newer.later = 42;
  JT_OK(e, jitk_elementwise_param(k, 2, &newer.base));
  cr_assert_str_eq(newer.base.name, "h");
  cr_assert_eq(newer.later, 42);
  jitk_elementwise_destroy(k);

  jitk_reduction *r = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x, float32 s", "T y", "x * s", "a + b", "y = a", "0", NULL,
                                 "rs", NULL, &r));
  JT_OK(e, jitk_reduction_num_params(r, &nin, &nout));
  cr_assert_eq(nin, 2);
  cr_assert_eq(nout, 1);
  jitk_param_info ri = {sizeof ri, NULL, 0, 0, JITK_DTYPE_NONE, NULL};
  JT_OK(e, jitk_reduction_param(r, 1, &ri));
  cr_assert_str_eq(ri.name, "s");
  cr_assert_eq(ri.dtype, JITK_FLOAT32);
  cr_assert_null(ri.placeholder);
  JT_OK(e, jitk_reduction_param(r, 2, &ri));
  cr_assert_str_eq(ri.name, "y");
  cr_assert_eq(ri.is_output, 1);
  cr_assert_str_eq(ri.placeholder, "T");
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "kernel rs has 3 parameters",
           jitk_reduction_param(r, 3, &ri));
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "kernel is NULL", jitk_reduction_param(NULL, 0, &ri));
  jitk_reduction_destroy(r);
  jitk_engine_destroy(e);
}

/* --- jitk_pointer_device through a stubbed driver --- */

static CUcontext stub_ctx = (CUcontext)(uintptr_t)0xC0;
static CUresult stub_result;
static int stub_calls;

static CUresult stub_get_current(CUcontext *c) {
  *c = stub_ctx;
  return CUDA_SUCCESS;
}

/* Three kinds of address: below 0x1000 host memory the driver does not
 * know (empty answers), 0x1000-0x1fff device memory of device 3, from
 * 0x2000 managed memory of device 1. */
static CUresult stub_attributes(unsigned n, CUpointer_attribute *attrs, void **data,
                                CUdeviceptr ptr) {
  stub_calls++;
  if (stub_result != CUDA_SUCCESS) return stub_result;
  for (unsigned i = 0; i < n; i++) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data[i] = ptr < 0x1000 ? 0 : CU_MEMORYTYPE_DEVICE;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        /* A boolean one byte wide: the caller must not read more. */
        *(unsigned char *)data[i] = ptr >= 0x2000;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data[i] = ptr < 0x1000 ? -2 : ptr < 0x2000 ? 3 : 1;
        break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

Test(pointer_device, through_the_driver_table) {
  jitk_engine *e = jt_compile_engine("sm_90");
  int ordinal = 77, is_dev = 77;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "needs a GPU", jitk_pointer_device(e, arena, &ordinal, &is_dev));
  cr_assert_eq(ordinal, 77);
  cr_assert_eq(is_dev, 77);
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "engine is NULL",
           jitk_pointer_device(NULL, arena, &ordinal, &is_dev));

  /* The engine believes it has a device, and its table answers from the
   * stubs; the context is already current, so nothing else is called. */
  e->has_device = true;
  e->context = stub_ctx;
  e->drv.cuCtxGetCurrent = stub_get_current;
  e->drv.cuPointerGetAttributes = stub_attributes;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "ordinal is NULL",
           jitk_pointer_device(e, arena, NULL, &is_dev));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "is_device_memory is NULL",
           jitk_pointer_device(e, arena, &ordinal, NULL));
  cr_assert_eq(stub_calls, 0);
  /* NULL (an empty array's address) is answered without the driver. */
  JT_OK(e, jitk_pointer_device(e, NULL, &ordinal, &is_dev));
  cr_assert_eq(stub_calls, 0);
  cr_assert_eq(is_dev, 0);
  cr_assert_eq(ordinal, -1);
  JT_OK(e, jitk_pointer_device(e, (void *)(uintptr_t)0x10, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 0);
  cr_assert_eq(ordinal, -1, "host memory has no device: %d", ordinal);
  JT_OK(e, jitk_pointer_device(e, (void *)(uintptr_t)0x1800, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 1);
  cr_assert_eq(ordinal, 3);
  JT_OK(e, jitk_pointer_device(e, (void *)(uintptr_t)0x2800, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 1);
  cr_assert_eq(ordinal, 1);
  /* A failing driver call: JITK_ERR_CUDA, outputs untouched. */
  stub_result = CUDA_ERROR_INVALID_CONTEXT;
  ordinal = is_dev = 77;
  JT_FAILS(e, JITK_ERR_CUDA, "cuPointerGetAttributes",
           jitk_pointer_device(e, (void *)(uintptr_t)0x1800, &ordinal, &is_dev));
  cr_assert_eq(ordinal, 77);
  cr_assert_eq(is_dev, 77);
  stub_result = CUDA_SUCCESS;
  e->has_device = false;
  e->context = NULL;
  e->drv.cuCtxGetCurrent = NULL;
  e->drv.cuPointerGetAttributes = NULL;
  jitk_engine_destroy(e);
}
