/*
 * Raw kernels on a GPU: fresh random data checked element by element
 * against a float64 CPU reference, with outputs poisoned first; templated
 * kernels through name expressions; descriptors on strided views; every
 * scalar dtype; bad input. Each Test runs in its own process and pays for
 * CUDA set-up, so related checks share a Test.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "base/base.h"
#include "kernels/kernels.h"

static const char *saxpy_src =
    "extern \"C\" __global__ void saxpy(float a, const float *x, const float *y,\n"
    "                                   float *out, long long n) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    out[i] = a * x[i] + y[i];\n"
    "}\n";

static void check_saxpy(const float *out, float a, const float *x, const float *y, long long n,
                        const char *what) {
  for (long long i = 0; i < n; i++) {
    double ref = (double)a * x[i] + y[i];
    double tol = 4e-7 * (fabs((double)a * x[i]) + fabs(y[i])) + 1e-30;
    cr_assert(fabs(out[i] - ref) <= tol, "%s: element %lld is %.9g, reference %.9g", what, i,
              (double)out[i], ref);
  }
}

Test(raw, saxpy_random_data) {
  jitk_engine *e = jt_gpu_engine();
  jitk_device_info info;
  JT_OK(e, jitk_engine_device_info(e, &info));
  const char *arch;
  JT_OK(e, jitk_engine_arch(e, &arch));
  cr_log_info("device %s, cc %d.%d, %d SMs, target %s", info.name, info.cc_major, info.cc_minor,
              info.multiprocessors, arch);

  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, saxpy_src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "saxpy", &k));
  jitk_kernel *again = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "saxpy", &again));
  cr_assert_eq(k, again, "one handle per kernel");

  const long long n = (1 << 20) + 17;
  uint64_t seed = 0x5eed0001;
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *out = malloc(n * sizeof *out);
  for (long long i = 0; i < n; i++) {
    x[i] = (float)jt_uniform(&seed) * 100.0f;
    y[i] = (float)jt_uniform(&seed);
  }
  float *dx = jt_dev_alloc(e, n * 4), *dy = jt_dev_alloc(e, n * 4), *dout = jt_dev_alloc(e, n * 4);
  jt_to_dev(e, dx, x, n * 4);
  jt_to_dev(e, dy, y, n * 4);
  float a = -1.75f;
  int block = 0, min_grid = 0;
  JT_OK(e, jitk_kernel_suggest_block_size(k, 0, &block, &min_grid));
  cr_assert(block >= 32 && block <= 1024 && block % 32 == 0, "block %d", block);
  jitk_dim3 grid = {(unsigned)min_grid, 1, 1}, blk = {(unsigned)block, 1, 1};

  /* Plain pointers. */
  jt_poison(e, dout, n * 4);
  jitk_arg args[] = {jitk_arg_f32(a), jitk_arg_ptr(dx, JITK_FLOAT32),
                     jitk_arg_ptr(dy, JITK_FLOAT32), jitk_arg_ptr(dout, JITK_FLOAT32),
                     jitk_arg_i64(n)};
  JT_OK(e, jitk_kernel_launch(k, grid, blk, 0, NULL, args, 5));
  jt_to_host(e, out, dout, n * 4);
  check_saxpy(out, a, x, y, n, "pointers");

  /* The same through DLTensors, with a byte_offset on x and y: element i
   * of the views is element i + 5 of the buffers. */
  long long m5 = n - 5;
  int64_t shape[1] = {m5};
  DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 1, shape, NULL);
  DLTensor ty = jt_tensor(dy, JITK_FLOAT32, 1, shape, NULL);
  DLTensor to = jt_tensor(dout, JITK_FLOAT32, 1, shape, NULL);
  tx.byte_offset = ty.byte_offset = 5 * sizeof(float);
  jt_poison(e, dout, n * 4);
  JT_OK(e,
        jitk_kernel_set_signature(k, "float32 a, float32* x, float32* y, float32* out, int64 n"));
  jitk_arg targs[] = {jitk_arg_f32(a), jitk_arg_tensor_ptr(&tx), jitk_arg_tensor_ptr(&ty),
                      jitk_arg_tensor_ptr(&to), jitk_arg_i64(m5)};
  JT_OK(e, jitk_kernel_launch(k, grid, blk, 0, NULL, targs, 5));
  jt_to_host(e, out, dout, n * 4);
  check_saxpy(out, a, x + 5, y + 5, m5, "tensors with byte_offset");

  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  JT_OK(e, jitk_device_free(e, dout, NULL));
  free(x);
  free(y);
  free(out);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(raw, templates_through_name_expressions) {
  jitk_engine *e = jt_gpu_engine();
  const char *src =
      "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
      "template <typename T> __global__ void scale(T *x, T a, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) x[i] = x[i] * a;\n"
      "}\n";
  const char *names[] = {"scale<float>", "scale<double>", "scale<int>", "scale<__half>",
                         "scale<__nv_bfloat16>"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 5;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  const int n = 100003;
  uint64_t seed = 0x5eed0002;
  double *h = malloc(n * sizeof *h);
  void *host = malloc(n * 8), *back = malloc(n * 8);
  void *dev = jt_dev_alloc(e, n * 8);
  jitk_dim3 grid = {(n + 255) / 256, 1, 1}, blk = {256, 1, 1};
  for (int t = 0; t < 5; t++) {
    jitk_kernel *k = NULL;
    JT_OK(e, jitk_module_get_kernel(m, names[t], &k));
    for (int i = 0; i < n; i++) h[i] = jt_uniform(&seed) * 8.0;
    size_t es = t == 1 ? 8 : t >= 3 ? 2 : 4;
    jitk_arg a;
    for (int i = 0; i < n; i++) {
      switch (t) {
        case 0: ((float *)host)[i] = (float)h[i]; break;
        case 1: ((double *)host)[i] = h[i]; break;
        case 2: ((int *)host)[i] = (int)(h[i] * 1000); break;
        case 3: ((uint16_t *)host)[i] = jitk_float_to_half((float)h[i]); break;
        case 4: ((uint16_t *)host)[i] = jitk_float_to_bfloat16((float)h[i]); break;
      }
    }
    switch (t) {
      case 0: a = jitk_arg_f32(1.5f); break;
      case 1: a = jitk_arg_f64(-0.3); break;
      case 2: a = jitk_arg_i32(-3); break;
      case 3: a = jitk_arg_f16_bits(jitk_float_to_half(0.75f)); break;
      default: a = jitk_arg_bf16_bits(jitk_float_to_bfloat16(-1.25f)); break;
    }
    jt_to_dev(e, dev, host, n * es);
    jitk_arg args[] = {jitk_arg_ptr(dev, JITK_DTYPE_NONE), a, jitk_arg_i32(n)};
    JT_OK(e, jitk_kernel_launch(k, grid, blk, 0, NULL, args, 3));
    jt_to_host(e, back, dev, n * es);
    for (int i = 0; i < n; i++) {
      switch (t) {
        case 0: {
          double ref = (double)((float *)host)[i] * 1.5;
          cr_assert(fabs(((float *)back)[i] - ref) <= 1e-7 * fabs(ref) + 1e-30, "float %d", i);
          break;
        }
        case 1:
          cr_assert_eq(((double *)back)[i], ((double *)host)[i] * -0.3, "double %d", i);
          break;
        case 2: cr_assert_eq(((int *)back)[i], ((int *)host)[i] * -3, "int %d", i); break;
        case 3: {
          /* A half product is exact in float, so rounding it once to half
           * is what the device must produce. */
          float p = jitk_half_to_float(((uint16_t *)host)[i]) * 0.75f;
          cr_assert_eq(((uint16_t *)back)[i], jitk_float_to_half(p), "half %d", i);
          break;
        }
        default: {
          float p = jitk_bfloat16_to_float(((uint16_t *)host)[i]) * -1.25f;
          cr_assert_eq(((uint16_t *)back)[i], jitk_float_to_bfloat16(p), "bfloat16 %d", i);
          break;
        }
      }
    }
  }
  JT_OK(e, jitk_device_free(e, dev, NULL));
  free(h);
  free(host);
  free(back);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* Copies any 2-D view into a contiguous output in C order. */
static const char *copy2d_src =
    "#include <jitk/array.cuh>\n"
    "extern \"C\" __global__ void copy2d(jitk::array<float, 2> src, jitk::array<float, 2> dst) {\n"
    "  long long n = src.size();\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    dst(i / dst.shape[1], i % dst.shape[1]) = src.flat(i);\n"
    "}\n"
    "extern \"C\" __global__ void sum3(jitk::array<const double, 3> a, double *out) {\n"
    "  double s = 0;\n"
    "  for (long long i = 0; i < a.shape[0]; i++)\n"
    "    for (long long j = 0; j < a.shape[1]; j++)\n"
    "      for (long long k = 0; k < a.shape[2]; k++) s += a(i, j, k);\n"
    "  *out = s;\n"
    "}\n";

Test(raw, descriptors_on_strided_views) {
  jitk_engine *e = jt_gpu_engine();
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, copy2d_src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "copy2d", &k));
  JT_OK(e, jitk_kernel_set_signature(k, "float32[2] src, float32[2] dst"));
  enum { R = 37, C = 53 };
  uint64_t seed = 0x5eed0003;
  float host[R * C], out[R * C];
  for (int i = 0; i < R * C; i++) host[i] = (float)jt_uniform(&seed);
  float *dsrc = jt_dev_alloc(e, sizeof host), *ddst = jt_dev_alloc(e, sizeof out);
  jt_to_dev(e, dsrc, host, sizeof host);

  struct view {
    const char *name;
    int64_t shape[2], strides[2];
    uint64_t offset; /* elements */
  } views[] = {
      {"contiguous", {R, C}, {C, 1}, 0},
      {"transposed", {C, R}, {1, C}, 0},
      {"rows reversed", {R, C}, {-C, 1}, (uint64_t)(R - 1) * C},
      {"both reversed", {R, C}, {-C, -1}, (uint64_t)R * C - 1},
      {"every other column", {R, (C + 1) / 2}, {C, 2}, 0},
      {"row broadcast", {R, C}, {0, 1}, 5 * C},
      {"interior block", {10, 20}, {C, 1}, 3 * C + 7},
  };
  for (size_t v = 0; v < sizeof views / sizeof views[0]; v++) {
    struct view *w = &views[v];
    DLTensor src = jt_tensor(dsrc, JITK_FLOAT32, 2, w->shape, w->strides);
    src.byte_offset = w->offset * sizeof(float);
    int64_t dshape[2] = {w->shape[0], w->shape[1]};
    DLTensor dst = jt_tensor(ddst, JITK_FLOAT32, 2, dshape, NULL);
    jt_poison(e, ddst, sizeof out);
    jitk_arg args[] = {jitk_arg_array(&src), jitk_arg_array(&dst)};
    JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){8, 1, 1}, (jitk_dim3){128, 1, 1}, 0, NULL, args, 2));
    jt_to_host(e, out, ddst, sizeof out);
    for (int64_t i = 0; i < w->shape[0]; i++)
      for (int64_t j = 0; j < w->shape[1]; j++) {
        float want = host[w->offset + i * w->strides[0] + j * w->strides[1]];
        float got = out[i * w->shape[1] + j];
        cr_assert_eq(got, want, "%s view: (%lld, %lld) is %g, expected %g", w->name, (long long)i,
                     (long long)j, got, want);
      }
  }

  /* Rank 3 and float64, against a float64 sum on the host. */
  jitk_kernel *s3 = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "sum3", &s3));
  double d[4 * 5 * 6], total = 0, got = 0;
  for (int i = 0; i < 120; i++) d[i] = jt_uniform(&seed);
  /* A permuted view: shape (6, 4, 5) of a (4, 5, 6) array. */
  int64_t shape3[3] = {6, 4, 5}, strides3[3] = {1, 30, 6};
  for (int i = 0; i < 120; i++) total += d[i];
  double *dd = jt_dev_alloc(e, sizeof d), *dsum = jt_dev_alloc(e, sizeof(double));
  jt_to_dev(e, dd, d, sizeof d);
  DLTensor t3 = jt_tensor(dd, JITK_FLOAT64, 3, shape3, strides3);
  jitk_arg a3[] = {jitk_arg_array(&t3), jitk_arg_ptr(dsum, JITK_FLOAT64)};
  jt_poison(e, dsum, sizeof(double));
  JT_OK(e, jitk_kernel_launch(s3, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL, a3, 2));
  jt_to_host(e, &got, dsum, sizeof got);
  cr_assert(fabs(got - total) < 1e-12, "sum3 %.17g, expected %.17g", got, total);

  /* A descriptor whose rank differs from the kernel's is refused. */
  int64_t s1[1] = {R * C};
  DLTensor flat = jt_tensor(dsrc, JITK_FLOAT32, 1, s1, NULL);
  jitk_arg bad[] = {jitk_arg_array(&flat), jitk_arg_array(&flat)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "float32[1] array descriptor (24 bytes)",
           jitk_kernel_launch(k, (jitk_dim3){1, 1, 1}, (jitk_dim3){32, 1, 1}, 0, NULL, bad, 2));

  JT_OK(e, jitk_device_free(e, dsrc, NULL));
  JT_OK(e, jitk_device_free(e, ddst, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dsum, NULL));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(raw, scalars_of_every_dtype) {
  jitk_engine *e = jt_gpu_engine();
  char src[8192];
  size_t len = (size_t)snprintf(src, sizeof src,
                                "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                                "#include <jitk/complex.cuh>\n#include <jitk/fp8.cuh>\n");
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    len += (size_t)snprintf(src + len, sizeof src - len,
                            "extern \"C\" __global__ void put_%s(%s v, %s *out) { *out = v; }\n",
                            info.name, info.ctype, info.ctype);
  }
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  jitk_arg values[JITK_DTYPE_COUNT];
  values[JITK_BOOL] = jitk_arg_bool(1);
  values[JITK_INT8] = jitk_arg_i8(-7);
  values[JITK_INT16] = jitk_arg_i16(-300);
  values[JITK_INT32] = jitk_arg_i32(-70000);
  values[JITK_INT64] = jitk_arg_i64(-5000000000000LL);
  values[JITK_UINT8] = jitk_arg_u8(200);
  values[JITK_UINT16] = jitk_arg_u16(60000);
  values[JITK_UINT32] = jitk_arg_u32(4000000000u);
  values[JITK_UINT64] = jitk_arg_u64(18000000000000000000ull);
  values[JITK_FLOAT16] = jitk_arg_f16_bits(jitk_float_to_half(1.5f));
  values[JITK_BFLOAT16] = jitk_arg_bf16_bits(jitk_float_to_bfloat16(-2.25f));
  values[JITK_FLOAT32] = jitk_arg_f32(3.25f);
  values[JITK_FLOAT64] = jitk_arg_f64(-1e300);
  values[JITK_COMPLEX64] = jitk_arg_c64(1.5f, -2.5f);
  values[JITK_COMPLEX128] = jitk_arg_c128(1e-300, 2e300);
  values[JITK_FLOAT8_E4M3] = jitk_arg_f8e4m3_bits(jitk_float_to_float8_e4m3(-448.0f));
  values[JITK_FLOAT8_E5M2] = jitk_arg_f8e5m2_bits(jitk_float_to_float8_e5m2(0.375f));
  void *dout = jt_dev_alloc(e, 16);
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    char name[64];
    snprintf(name, sizeof name, "put_%s", info.name);
    jitk_kernel *k = NULL;
    JT_OK(e, jitk_module_get_kernel(m, name, &k));
    char sig[64];
    snprintf(sig, sizeof sig, "%s v, %s* out", info.name, info.name);
    JT_OK(e, jitk_kernel_set_signature(k, sig));
    jt_poison(e, dout, 16);
    jitk_arg args[] = {values[d], jitk_arg_ptr(dout, (jitk_dtype)d)};
    JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){1, 1, 1}, (jitk_dim3){1, 1, 1}, 0, NULL, args, 2));
    unsigned char got[16];
    jt_to_host(e, got, dout, 16);
    cr_assert(memcmp(got, &values[d].value, info.size) == 0, "%s came back changed", info.name);
  }
  JT_OK(e, jitk_device_free(e, dout, NULL));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(raw, bad_input_errors) {
  jitk_engine *e = jt_gpu_engine();
  const char *src =
      "extern \"C\" __global__ void k(float a, float *x, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) x[i] = a;\n"
      "}\n"
      "extern \"C\" __global__ void __launch_bounds__(128) small(float *x) { x[threadIdx.x] = 1; "
      "}\n"
      "extern \"C\" __global__ void dyn(float *x) {\n"
      "  extern __shared__ float s[];\n"
      "  s[threadIdx.x * 200] = threadIdx.x;\n"
      "  __syncthreads();\n"
      "  x[threadIdx.x] = s[(blockDim.x - 1 - threadIdx.x) * 200];\n"
      "}\n";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_FAILS(e, JITK_ERR_NOT_FOUND, "no kernel \"nope\"", jitk_module_get_kernel(m, "nope", &k));
  cr_assert(strstr(jitk_errmsg(e), "small") != NULL, "the message lists the kernels: %s",
            jitk_errmsg(e));
  JT_OK(e, jitk_module_get_kernel(m, "k", &k));
  float *dx = jt_dev_alloc(e, 1024 * sizeof(float));
  jitk_dim3 one = {1, 1, 1}, b32 = {32, 1, 1};

  jitk_arg two[] = {jitk_arg_f32(1), jitk_arg_ptr(dx, JITK_FLOAT32)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "takes 3 arguments; 2 given",
           jitk_kernel_launch(k, one, b32, 0, NULL, two, 2));
  jitk_arg wide[] = {jitk_arg_f64(1), jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "float64 scalar (8 bytes)",
           jitk_kernel_launch(k, one, b32, 0, NULL, wide, 3));
  cr_assert(strstr(jitk_errmsg(e), "is 4 bytes") != NULL, "%s", jitk_errmsg(e));
  int64_t shape[1] = {1024};
  DLTensor t = jt_tensor(dx, JITK_FLOAT32, 1, shape, NULL);
  jitk_arg desc[] = {jitk_arg_f32(1), jitk_arg_array(&t), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "array descriptor",
           jitk_kernel_launch(k, one, b32, 0, NULL, desc, 3));

  /* With a signature, a same-size wrong dtype is caught too. */
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "lists 2 parameters",
           jitk_kernel_set_signature(k, "float32, float32*"));
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "float64",
           jitk_kernel_set_signature(k, "float64 a, float32* x, int32 n"));
  JT_OK(e, jitk_kernel_set_signature(k, "float32 a, float32* x, int32 n"));
  jitk_arg swapped[] = {jitk_arg_i32(1), jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "signature says float32",
           jitk_kernel_launch(k, one, b32, 0, NULL, swapped, 3));
  jitk_arg wrongptr[] = {jitk_arg_f32(1), jitk_arg_ptr(dx, JITK_INT32), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "int32 pointer",
           jitk_kernel_launch(k, one, b32, 0, NULL, wrongptr, 3));
  jitk_arg good[] = {jitk_arg_f32(1), jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_i32(32)};

  /* Grid, block and shared memory out of range. */
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "no zero dimension",
           jitk_kernel_launch(k, (jitk_dim3){0, 1, 1}, b32, 0, NULL, good, 3));
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "grid dimension y is 70000",
           jitk_kernel_launch(k, (jitk_dim3){1, 70000, 1}, b32, 0, NULL, good, 3));
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "block dimension x is 2048",
           jitk_kernel_launch(k, one, (jitk_dim3){2048, 1, 1}, 0, NULL, good, 3));
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "block of 2048 threads",
           jitk_kernel_launch(k, one, (jitk_dim3){1024, 2, 1}, 0, NULL, good, 3));
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "block dimension z is 65",
           jitk_kernel_launch(k, one, (jitk_dim3){1, 1, 65}, 0, NULL, good, 3));
  /* More than the device allows; 64 KiB would raise the limit by itself. */
  JT_FAILS(e, JITK_ERR_SHARED_MEMORY, "300000 bytes of dynamic shared memory",
           jitk_kernel_launch(k, one, b32, 300000, NULL, good, 3));

  jitk_kernel *small = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "small", &small));
  jitk_kernel_attributes attrs;
  JT_OK(e, jitk_kernel_get_attributes(small, &attrs));
  cr_assert_eq(attrs.max_threads_per_block, 128);
  jitk_arg sx[] = {jitk_arg_ptr(dx, JITK_FLOAT32)};
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "at most 128",
           jitk_kernel_launch(small, one, (jitk_dim3){256, 1, 1}, 0, NULL, sx, 1));
  JT_OK(e, jitk_kernel_launch(small, one, (jitk_dim3){128, 1, 1}, 0, NULL, sx, 1));

  /* Dynamic shared memory past 48 KiB: a launch raises the limit by
   * itself, and so does the explicit call. */
  jitk_kernel *dyn = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "dyn", &dyn));
  jitk_device_info info;
  JT_OK(e, jitk_engine_device_info(e, &info));
  JT_FAILS(e, JITK_ERR_SHARED_MEMORY, "exceed the device's",
           jitk_kernel_set_max_dynamic_shared(dyn, info.shared_per_block_optin + 1));
  size_t bytes = 128 * 200 * sizeof(float); /* 100 KiB */
  JT_OK(e, jitk_kernel_launch(dyn, one, (jitk_dim3){128, 1, 1}, bytes, NULL, sx, 1));
  JT_OK(e, jitk_kernel_set_max_dynamic_shared(dyn, bytes));
  jt_poison(e, dx, 1024 * sizeof(float));
  JT_OK(e, jitk_kernel_launch(dyn, one, (jitk_dim3){128, 1, 1}, bytes, NULL, sx, 1));
  float back[128];
  jt_to_host(e, back, dx, sizeof back);
  for (int i = 0; i < 128; i++) cr_assert_eq(back[i], (float)(127 - i), "dyn %d", i);

  /* Arrays that are not on this device. */
  DLTensor host_t = jt_tensor(back, JITK_FLOAT32, 1, shape, NULL);
  host_t.device.device_type = kDLCPU;
  jitk_arg hp[] = {jitk_arg_f32(1), jitk_arg_tensor_ptr(&host_t), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "kDLCPU", jitk_kernel_launch(k, one, b32, 0, NULL, hp, 3));
  DLTensor other = jt_tensor(dx, JITK_FLOAT32, 1, shape, NULL);
  other.device.device_id = 3;
  jitk_arg op[] = {jitk_arg_f32(1), jitk_arg_array(&other), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "device 3", jitk_kernel_launch(k, one, b32, 0, NULL, op, 3));
  /* A plain pointer argument is checked too, and the message says how to
   * let the engine reach another device. */
  jitk_arg opp[] = {jitk_arg_f32(1), jitk_arg_tensor_ptr(&other), jitk_arg_i32(32)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "jitk_engine_enable_peer_access",
           jitk_kernel_launch(k, one, b32, 0, NULL, opp, 3));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "the engine's own device",
           jitk_engine_enable_peer_access(e, 0));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "not a device ordinal",
           jitk_engine_enable_peer_access(e, -1));
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "peers 0 to 63", jitk_engine_enable_peer_access(e, 64));
  int version = 0, devices = 0;
  JT_OK(NULL, jitk_driver_query(NULL, &version, &devices));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "no CUDA device", jitk_engine_enable_peer_access(e, devices));
  /* The refusals enabled nothing. */
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "device 3", jitk_kernel_launch(k, one, b32, 0, NULL, op, 3));

  /* Images for the wrong arch, and truncated. */
  jitk_engine *ce = jt_compile_engine("sm_80");
  jitk_module *cm = NULL;
  JT_OK(ce, jitk_module_create(ce, src, NULL, &cm));
  const void *img;
  size_t size;
  JT_OK(ce, jitk_module_image(cm, &img, &size, NULL));
  jitk_module *wrong = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "sm_80, which cannot run on device 0",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, img, size, &wrong));
  jitk_module_destroy(cm);
  jitk_engine_destroy(ce);
  const void *own;
  JT_OK(e, jitk_module_image(m, &own, &size, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "truncated",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, own, size - 100, &wrong));

  /* No such device, no driver. */
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = 64;
  jitk_engine *none = NULL;
  JT_FAILS(NULL, JITK_ERR_NO_DEVICE, "no CUDA device 64", jitk_engine_create(&cfg, &none));
  cfg.device = JITK_DEVICE_DEFAULT;
  cfg.driver_library = "/nonexistent/libcuda.so.1";
  JT_FAILS(NULL, JITK_ERR_NO_DRIVER, "could not load", jitk_engine_create(&cfg, &none));
  cfg.driver_library = NULL;
  cfg.arch = "sm_80";
  JT_FAILS(NULL, JITK_ERR_INVALID_ARGUMENT, "cannot run on device",
           jitk_engine_create(&cfg, &none));

  /* After all that, the engine still works. */
  jt_poison(e, dx, 1024 * sizeof(float));
  jitk_arg fine[] = {jitk_arg_f32(2.5f), jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_i32(1000)};
  JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){4, 1, 1}, (jitk_dim3){256, 1, 1}, 0, NULL, fine, 3));
  float res[1024];
  jt_to_host(e, res, dx, sizeof res);
  for (int i = 0; i < 1000; i++) cr_assert_eq(res[i], 2.5f, "element %d", i);
  for (int i = 1000; i < 1024; i++) cr_assert(isnan(res[i]), "element %d must stay poisoned", i);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(raw, attributes_ptx_and_files) {
  jitk_engine *e = jt_gpu_engine();
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, saxpy_src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "saxpy", &k));
  jitk_kernel_attributes a;
  JT_OK(e, jitk_kernel_get_attributes(k, &a));
  jitk_device_info info;
  JT_OK(e, jitk_engine_device_info(e, &info));
  cr_assert(a.registers > 0);
  cr_assert_eq(a.binary_version, info.cc_major * 10 + info.cc_minor);
  cr_assert_eq(a.num_params, 5);
  /* The sizes read from the cubin agree with the driver's, and the
   * public call hands over the same array. */
  const uint32_t *sizes = NULL;
  int nsizes = 0;
  JT_OK(e, jitk_kernel_param_sizes(k, &sizes, &nsizes));
  cr_assert_eq(nsizes, 5);
  for (int i = 0; i < 5; i++) {
    size_t off, size;
    cr_assert_eq(e->drv.cuFuncGetParamInfo(k->f.fn, (size_t)i, &off, &size), CUDA_SUCCESS);
    cr_assert_eq(size, k->f.param_sizes[i], "parameter %d", i);
    cr_assert_eq(size, sizes[i], "parameter %d", i);
  }
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "count is NULL", jitk_kernel_param_sizes(k, &sizes, NULL));
  cr_assert_eq(a.max_threads_per_block, 1024);
  cr_assert_eq(a.static_shared_bytes, 0);
  int blocks = 0;
  JT_OK(e, jitk_kernel_active_blocks(k, 256, 0, &blocks));
  cr_assert(blocks >= 1, "%d blocks of 256 per SM", blocks);
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "outside 1..1024",
           jitk_kernel_active_blocks(k, 4096, 0, &blocks));

  /* PTX from a compile-only engine, compiled by the driver here. */
  char arch[32];
  snprintf(arch, sizeof arch, "compute_%d%d", info.cc_major, info.cc_minor);
  jitk_engine *ce = jt_compile_engine(arch);
  jitk_module *pm = NULL;
  JT_OK(ce, jitk_module_create(ce, saxpy_src, NULL, &pm));
  const void *ptx;
  size_t ptx_size;
  jitk_image_kind kind;
  JT_OK(ce, jitk_module_image(pm, &ptx, &ptx_size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_PTX);
  jitk_module *loaded = NULL;
  JT_OK(e, jitk_module_create_from_image(e, JITK_IMAGE_PTX, ptx, ptx_size, &loaded));
  jitk_module_destroy(pm);
  jitk_engine_destroy(ce);

  /* The cubin through a file. */
  const void *cubin;
  size_t cubin_size;
  JT_OK(e, jitk_module_image(m, &cubin, &cubin_size, NULL));
  char path[] = "/tmp/jitk-gpu-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, cubin, cubin_size), (ssize_t)cubin_size);
  close(fd);
  jitk_module *from_file = NULL;
  JT_OK(e, jitk_module_create_from_file(e, path, &from_file));
  unlink(path);

  const int n = 4099;
  float x[4099], y[4099], out[4099];
  uint64_t seed = 0x5eed0004;
  for (int i = 0; i < n; i++) {
    x[i] = (float)jt_uniform(&seed);
    y[i] = (float)jt_uniform(&seed);
  }
  float *dx = jt_dev_alloc(e, sizeof x), *dy = jt_dev_alloc(e, sizeof y),
        *dout = jt_dev_alloc(e, sizeof out);
  jt_to_dev(e, dx, x, sizeof x);
  jt_to_dev(e, dy, y, sizeof y);
  jitk_module *mods[] = {loaded, from_file};
  for (int i = 0; i < 2; i++) {
    jitk_kernel *kk = NULL;
    JT_OK(e, jitk_module_get_kernel(mods[i], "saxpy", &kk));
    jt_poison(e, dout, sizeof out);
    jitk_arg args[] = {jitk_arg_f32(0.5f), jitk_arg_ptr(dx, JITK_FLOAT32),
                       jitk_arg_ptr(dy, JITK_FLOAT32), jitk_arg_ptr(dout, JITK_FLOAT32),
                       jitk_arg_i64(n)};
    JT_OK(e,
          jitk_kernel_launch(kk, (jitk_dim3){4, 1, 1}, (jitk_dim3){256, 1, 1}, 0, NULL, args, 5));
    jt_to_host(e, out, dout, sizeof out);
    check_saxpy(out, 0.5f, x, y, n, i == 0 ? "PTX module" : "cubin file");
  }
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  JT_OK(e, jitk_device_free(e, dout, NULL));
  jitk_module_destroy(loaded);
  jitk_module_destroy(from_file);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

typedef struct worker {
  jitk_engine *e;
  jitk_kernel *k;
  int id;
  int ok;
} worker;

/* Each thread launches on its own stream and buffers, many times. */
static void *work(void *p) {
  worker *w = p;
  jitk_engine *e = w->e;
  CUstream s;
  CUcontext ctx = e->context;
  e->drv.cuCtxSetCurrent(ctx);
  if (e->drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return NULL;
  const long long n = 65536;
  float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
  uint64_t seed = 0x7000 + (uint64_t)w->id;
  for (long long i = 0; i < n; i++) {
    x[i] = (float)jt_uniform(&seed);
    y[i] = (float)jt_uniform(&seed);
  }
  void *dx, *dy, *dout;
  jitk_stream st = (jitk_stream)s;
  int ok = jitk_device_alloc(e, n * 4, st, &dx) == JITK_OK &&
           jitk_device_alloc(e, n * 4, st, &dy) == JITK_OK &&
           jitk_device_alloc(e, n * 4, st, &dout) == JITK_OK &&
           jitk_memcpy(e, dx, x, n * 4, st) == JITK_OK &&
           jitk_memcpy(e, dy, y, n * 4, st) == JITK_OK;
  float a = (float)w->id + 0.5f;
  jitk_arg args[] = {jitk_arg_f32(a), jitk_arg_ptr(dx, JITK_FLOAT32),
                     jitk_arg_ptr(dy, JITK_FLOAT32), jitk_arg_ptr(dout, JITK_FLOAT32),
                     jitk_arg_i64(n)};
  for (int r = 0; ok && r < 200; r++)
    ok = jitk_kernel_launch(w->k, (jitk_dim3){64, 1, 1}, (jitk_dim3){256, 1, 1}, 0, st, args, 5) ==
         JITK_OK;
  ok = ok && jitk_memcpy(e, out, dout, n * 4, st) == JITK_OK &&
       jitk_stream_synchronize(e, st) == JITK_OK;
  for (long long i = 0; ok && i < n; i++) {
    double ref = (double)a * x[i] + y[i];
    if (fabs(out[i] - ref) > 1e-6 * (fabs(ref) + 1)) ok = 0;
  }
  jitk_device_free(e, dx, st);
  jitk_device_free(e, dy, st);
  jitk_device_free(e, dout, st);
  jitk_stream_synchronize(e, st);
  e->drv.cuStreamDestroy(s);
  free(x);
  free(y);
  free(out);
  w->ok = ok;
  return NULL;
}

Test(raw, threads_share_an_engine) {
  jitk_engine *e = jt_gpu_engine();
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, saxpy_src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "saxpy", &k));
  worker w[8];
  pthread_t th[8];
  for (int i = 0; i < 8; i++) {
    w[i] = (worker){e, k, i, 0};
    pthread_create(&th[i], NULL, work, &w[i]);
  }
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 8; i++) cr_assert(w[i].ok, "thread %d got wrong results or an error", i);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

#ifdef JITK_TEST_HAVE_FATBIN
Test(raw, fatbin_from_nvcc) {
  jitk_engine *e = jt_gpu_engine();
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create_from_image(e, JITK_IMAGE_FATBIN, jt_fatbin, jt_fatbin_size, &m));
  jitk_kernel *k = NULL;
  JT_FAILS(e, JITK_ERR_NOT_FOUND, "it has fill", jitk_module_get_kernel(m, "fil", &k));
  JT_OK(e, jitk_module_get_kernel(m, "fill", &k));
  cr_assert_eq(k->f.num_params, 3, "parameters read from the fatbin's cubin");
  const int n = 5000;
  float *d = jt_dev_alloc(e, n * sizeof(float));
  jt_poison(e, d, n * sizeof(float));
  jitk_arg args[] = {jitk_arg_f32(0.25f), jitk_arg_ptr(d, JITK_FLOAT32), jitk_arg_i32(n)};
  JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){(n + 127) / 128, 1, 1}, (jitk_dim3){128, 1, 1}, 0,
                              NULL, args, 3));
  jitk_arg wrong[] = {jitk_arg_f64(0.25), jitk_arg_ptr(d, JITK_FLOAT32), jitk_arg_i32(n)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "is 4 bytes",
           jitk_kernel_launch(k, (jitk_dim3){1, 1, 1}, (jitk_dim3){128, 1, 1}, 0, NULL, wrong, 3));
  float *h = malloc(n * sizeof(float));
  jt_to_host(e, h, d, n * sizeof(float));
  for (int i = 0; i < n; i++) cr_assert_eq(h[i], 0.25f * (float)i, "element %d", i);
  free(h);
  JT_OK(e, jitk_device_free(e, d, NULL));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}
#endif

/* A module read back from the disk cache by a new engine loads and runs. */
Test(raw, disk_cache_hit_runs) {
  char dir[] = "/tmp/jitk-gpu-cache-test-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.cache_dir = dir;
  cfg.cache_mode = JITK_CACHE_ON;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    rmdir(dir);
    cr_skip_test("no CUDA device (%s)", jitk_errmsg(NULL));
  }
  cr_assert_eq(st, JITK_OK, "%s", jitk_errmsg(NULL));
  for (int round = 0; round < 2; round++) {
    if (round == 1) JT_OK(NULL, jitk_engine_create(&cfg, &e));
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, saxpy_src, NULL, &m));
    jitk_cache_stats s;
    JT_OK(e, jitk_cache_get_stats(e, &s, NULL));
    cr_assert_eq(s.disk_hits, (uint64_t)round, "round %d", round);
    cr_assert_eq(s.compiles, (uint64_t)(1 - round));
    jitk_kernel *k = NULL;
    JT_OK(e, jitk_module_get_kernel(m, "saxpy", &k));
    const int n = 10007;
    float *x = malloc(n * 4), *y = malloc(n * 4), *out = malloc(n * 4);
    uint64_t seed = 0x5eed0100 + (uint64_t)round;
    for (int i = 0; i < n; i++) {
      x[i] = (float)jt_uniform(&seed);
      y[i] = (float)jt_uniform(&seed);
    }
    float *dx = jt_dev_alloc(e, n * 4), *dy = jt_dev_alloc(e, n * 4),
          *dout = jt_dev_alloc(e, n * 4);
    jt_to_dev(e, dx, x, n * 4);
    jt_to_dev(e, dy, y, n * 4);
    jt_poison(e, dout, n * 4);
    jitk_arg args[] = {jitk_arg_f32(3.0f), jitk_arg_ptr(dx, JITK_FLOAT32),
                       jitk_arg_ptr(dy, JITK_FLOAT32), jitk_arg_ptr(dout, JITK_FLOAT32),
                       jitk_arg_i64(n)};
    JT_OK(e,
          jitk_kernel_launch(k, (jitk_dim3){40, 1, 1}, (jitk_dim3){256, 1, 1}, 0, NULL, args, 5));
    jt_to_host(e, out, dout, n * 4);
    check_saxpy(out, 3.0f, x, y, n, round ? "from the disk cache" : "compiled");
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    JT_OK(e, jitk_device_free(e, dout, NULL));
    free(x);
    free(y);
    free(out);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_assert_eq(system(cmd), 0);
}

/* Module variables: a __constant__ table filled from the host through its
 * address and read by a kernel, a __device__ counter the kernel updates
 * and the host reads back, a variable in a namespace through its name
 * expression, and the errors. */
static const char *globals_src =
    "extern \"C\" {\n"
    "__constant__ float c[100];\n"
    "__device__ int counter;\n"
    "__global__ void multiply_by_const(float *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) {\n"
    "    x[i] *= c[i];\n"
    "    atomicAdd(&counter, 1);\n"
    "  }\n"
    "}\n"
    "}\n"
    "namespace ns { __device__ double offset; }\n"
    "extern \"C\" __global__ void add_offset(double *x) { x[threadIdx.x] += ns::offset; }\n";

Test(raw, module_globals) {
  jitk_engine *e = jt_gpu_engine();
  const char *names[] = {"&ns::offset"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 1;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, globals_src, &o, &m));

  void *c = NULL;
  size_t bytes = 0;
  JT_OK(e, jitk_module_get_global(m, "c", &c, &bytes));
  cr_assert_not_null(c);
  cr_assert_eq(bytes, 100 * sizeof(float));
  float table[100], x[100], out[100];
  uint64_t seed = 0x5eed0200;
  for (int i = 0; i < 100; i++) {
    table[i] = (float)jt_uniform(&seed) * 8.0f;
    x[i] = (float)jt_uniform(&seed);
  }
  jt_to_dev(e, c, table, sizeof table);
  float back[100];
  jt_to_host(e, back, c, sizeof back);
  cr_assert(memcmp(back, table, sizeof table) == 0);

  void *counter = NULL;
  size_t counter_bytes = 0;
  JT_OK(e, jitk_module_get_global(m, "counter", &counter, &counter_bytes));
  cr_assert_eq(counter_bytes, sizeof(int));
  int zero = 0;
  jt_to_dev(e, counter, &zero, sizeof zero);

  float *dx = jt_dev_alloc(e, sizeof x);
  jt_to_dev(e, dx, x, sizeof x);
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "multiply_by_const", &k));
  jitk_arg args[] = {jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_i32(100)};
  JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){1, 1, 1}, (jitk_dim3){128, 1, 1}, 0, NULL, args, 2));
  jt_to_host(e, out, dx, sizeof out);
  for (int i = 0; i < 100; i++)
    cr_assert_eq(out[i], x[i] * table[i], "element %d: %g, expected %g", i, (double)out[i],
                 (double)(x[i] * table[i]));
  int count = -1;
  jt_to_host(e, &count, counter, sizeof count);
  cr_assert_eq(count, 100);

  /* Through a name expression: the mangled variable of a namespace. */
  void *offset = NULL;
  size_t offset_bytes = 0;
  JT_OK(e, jitk_module_get_global(m, "&ns::offset", &offset, &offset_bytes));
  cr_assert_eq(offset_bytes, sizeof(double));
  void *same = NULL;
  JT_OK(e, jitk_module_get_global(m, "_ZN2ns6offsetE", &same, &offset_bytes));
  cr_assert_eq(same, offset);
  double off = 0.25, xs[32], got[32];
  for (int i = 0; i < 32; i++) xs[i] = i;
  jt_to_dev(e, offset, &off, sizeof off);
  double *dxs = jt_dev_alloc(e, sizeof xs);
  jt_to_dev(e, dxs, xs, sizeof xs);
  jitk_kernel *add = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "add_offset", &add));
  jitk_arg args2[] = {jitk_arg_ptr(dxs, JITK_FLOAT64)};
  JT_OK(e, jitk_kernel_launch(add, (jitk_dim3){1, 1, 1}, (jitk_dim3){32, 1, 1}, 0, NULL, args2, 1));
  jt_to_host(e, got, dxs, sizeof got);
  for (int i = 0; i < 32; i++) cr_assert_eq(got[i], i + 0.25, "element %d", i);

  /* Unknown names fail before the driver is asked, listing what there is;
   * a kernel is no variable. Outputs stay untouched. */
  void *p = (void *)(uintptr_t)0x5e5e;
  size_t pb = 77;
  JT_FAILS(e, JITK_ERR_NOT_FOUND, "no __device__ or __constant__ variable \"nope\"",
           jitk_module_get_global(m, "nope", &p, &pb));
  cr_assert(
      strstr(jitk_errmsg(e), "counter") != NULL && strstr(jitk_errmsg(e), "_ZN2ns6offsetE") != NULL,
      "%s", jitk_errmsg(e));
  JT_FAILS(e, JITK_ERR_NOT_FOUND, "multiply_by_const",
           jitk_module_get_global(m, "multiply_by_const", &p, &pb));
  cr_assert_eq(p, (void *)(uintptr_t)0x5e5e);
  cr_assert_eq(pb, 77);

  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dxs, NULL));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* Dynamic parallelism: a kernel compiled with -dc launches a child kernel
 * that writes 1.0 into every element (CuPy's test_dynamical_parallelism),
 * linked with the CUDA device runtime through nvJitLink and, on a second
 * engine told that nvJitLink is missing, through the driver's linker.
 * Without -dc the same source does not compile. */
static const char *device_launch_src =
    "extern \"C\" {\n"
    "__global__ void test_kernel_inner(float *arr, int N) {\n"
    "  unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "  if (tid < N) arr[tid] = 1.0;\n"
    "}\n"
    "__global__ void test_kernel(float *arr, int N, int inner_blk) {\n"
    "  unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "  if (tid < N / inner_blk) test_kernel_inner<<<1, inner_blk>>>(arr + tid * inner_blk, "
    "inner_blk);\n"
    "}\n"
    "}\n";

static void run_device_launch(jitk_engine *e, const char *how) {
  const char *opts[] = {"-dc"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = 1;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, device_launch_src, &o, &m));
  jitk_image_kind kind;
  const void *img;
  size_t size;
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_CUBIN, "%s", how);
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "test_kernel", &k));
  /* CuPy's sizes (169 elements in chunks of 13), then 256 children of 256. */
  const int sizes[][2] = {{169, 13}, {65536, 256}};
  for (int c = 0; c < 2; c++) {
    int n = sizes[c][0], inner = sizes[c][1], parents = n / inner;
    float *d = jt_dev_alloc(e, (size_t)n * 4);
    jt_poison(e, d, (size_t)n * 4);
    jitk_arg args[] = {jitk_arg_ptr(d, JITK_FLOAT32), jitk_arg_i32(n), jitk_arg_i32(inner)};
    unsigned block = parents < 256 ? (unsigned)parents : 256u;
    unsigned grid = ((unsigned)parents + block - 1) / block;
    JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){grid, 1, 1}, (jitk_dim3){block, 1, 1}, 0, NULL, args,
                                3));
    JT_OK(e, jitk_stream_synchronize(e, NULL));
    float *h = malloc((size_t)n * 4);
    jt_to_host(e, h, d, (size_t)n * 4);
    for (int i = 0; i < n; i++)
      cr_assert_eq(h[i], 1.0f, "%s, %d elements: element %d is %g", how, n, i, (double)h[i]);
    free(h);
    JT_OK(e, jitk_device_free(e, d, NULL));
  }
  jitk_module_destroy(m);
}

Test(raw, device_side_launch) {
  jitk_engine *e = jt_gpu_engine();
  jk_linker linker = jk_link_probe(e);
  cr_log_info("relocatable code links through %s", linker == JK_LINKER_NVJITLINK ? "nvJitLink"
                                                   : linker == JK_LINKER_DRIVER  ? "the driver"
                                                                                 : "nothing");
  run_device_launch(e, linker == JK_LINKER_NVJITLINK ? "nvJitLink" : "the driver's linker");
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_COMPILE, "device-side kernel launch",
           jitk_module_create(e, device_launch_src, NULL, &m));
  jitk_engine_destroy(e);

  /* The driver's linker, as when nvJitLink is not installed. */
  e = jt_gpu_engine();
  e->nvrtc.no_jitlink = true;
  cr_assert_eq(jk_link_probe(e), JK_LINKER_DRIVER);
  run_device_launch(e, "the driver's linker");
  jitk_engine_destroy(e);
}

/* Cooperative launches: a kernel that synchronizes its whole grid with
 * cooperative_groups (each block writes, the grid syncs, each block reads
 * what other blocks wrote), at the largest grid that fits and at a
 * smaller one; one block more is refused before the driver sees it. */
static const char *grid_sync_src =
    "#include <cooperative_groups.h>\n"
    "namespace cg = cooperative_groups;\n"
    "extern \"C\" __global__ void grid_exchange(int *a, int *b, int *partial, int *sums, int "
    "total) {\n"
    "  cg::grid_group grid = cg::this_grid();\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  a[i] = i + 1;\n"
    "  if (threadIdx.x == 0) partial[blockIdx.x] = blockIdx.x + 1;\n"
    "  grid.sync();\n"
    "  b[i] = a[total - 1 - i];\n"
    "  if (threadIdx.x == 0) {\n"
    "    int s = 0;\n"
    "    for (unsigned k = 0; k < gridDim.x; k++) s += partial[k];\n"
    "    sums[blockIdx.x] = s;\n"
    "  }\n"
    "}\n";

Test(raw, cooperative_grid_sync) {
  jitk_engine *e = jt_gpu_engine();
  jitk_device_info info;
  JT_OK(e, jitk_engine_device_info(e, &info));
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, grid_sync_src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "grid_exchange", &k));
  const unsigned block = 256;
  int per_sm = 0;
  JT_OK(e, jitk_kernel_active_blocks(k, (int)block, 0, &per_sm));
  cr_assert(per_sm >= 1, "%d blocks per multiprocessor", per_sm);
  unsigned most = (unsigned)per_sm * (unsigned)info.multiprocessors;
  cr_log_info("%d blocks of %u threads per multiprocessor, %d multiprocessors: %u blocks at most",
              per_sm, block, info.multiprocessors, most);
  size_t cap = (size_t)most * block;
  int *a = jt_dev_alloc(e, cap * 4), *b = jt_dev_alloc(e, cap * 4);
  int *partial = jt_dev_alloc(e, most * 4), *sums = jt_dev_alloc(e, most * 4);
  int *hb = malloc(cap * 4), *hs = malloc(most * 4);
  jitk_kernel_launch_config c;
  JT_OK(e, jitk_kernel_launch_config_init(&c));
  c.cooperative = 1;
  unsigned grids[2] = {most, (unsigned)info.multiprocessors};
  for (int g = 0; g < 2; g++) {
    unsigned grid = grids[g];
    int total = (int)(grid * block);
    jt_poison(e, a, cap * 4);
    jt_poison(e, b, cap * 4);
    jt_poison(e, partial, most * 4);
    jt_poison(e, sums, most * 4);
    jitk_arg args[] = {jitk_arg_ptr(a, JITK_INT32), jitk_arg_ptr(b, JITK_INT32),
                       jitk_arg_ptr(partial, JITK_INT32), jitk_arg_ptr(sums, JITK_INT32),
                       jitk_arg_i32(total)};
    JT_OK(e, jitk_kernel_launch_ex(k, (jitk_dim3){grid, 1, 1}, (jitk_dim3){block, 1, 1}, 0, NULL,
                                   args, 5, &c));
    JT_OK(e, jitk_stream_synchronize(e, NULL));
    jt_to_host(e, hb, b, (size_t)total * 4);
    jt_to_host(e, hs, sums, grid * 4);
    for (int i = 0; i < total; i++)
      cr_assert_eq(hb[i], total - i, "grid %u: b[%d] is %d, expected %d", grid, i, hb[i],
                   total - i);
    long long want = (long long)grid * (grid + 1) / 2;
    for (unsigned j = 0; j < grid; j++)
      cr_assert_eq(hs[j], want, "grid %u: block %u summed %d, expected %lld", grid, j, hs[j], want);
  }

  /* One block more than fits: refused with both numbers, nothing runs. */
  char got[32], fit[32];
  snprintf(got, sizeof got, "all %u blocks", most + 1);
  snprintf(fit, sizeof fit, "at most %u fit", most);
  jitk_arg args[] = {jitk_arg_ptr(a, JITK_INT32), jitk_arg_ptr(b, JITK_INT32),
                     jitk_arg_ptr(partial, JITK_INT32), jitk_arg_ptr(sums, JITK_INT32),
                     jitk_arg_i32(0)};
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, got,
           jitk_kernel_launch_ex(k, (jitk_dim3){most + 1, 1, 1}, (jitk_dim3){block, 1, 1}, 0, NULL,
                                 args, 5, &c));
  cr_assert(strstr(jitk_errmsg(e), fit) != NULL, "%s", jitk_errmsg(e));
  JT_OK(e, jitk_stream_synchronize(e, NULL));

  JT_OK(e, jitk_device_free(e, a, NULL));
  JT_OK(e, jitk_device_free(e, b, NULL));
  JT_OK(e, jitk_device_free(e, partial, NULL));
  JT_OK(e, jitk_device_free(e, sums, NULL));
  free(hb);
  free(hs);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* Thread-block clusters: each block writes its shared memory, the
 * cluster syncs, and each block reads its neighbour's through distributed
 * shared memory (map_shared_rank), then records its rank. */
static const char *cluster_src =
    "#include <cooperative_groups.h>\n"
    "namespace cg = cooperative_groups;\n"
    "extern \"C\" __global__ void cluster_swap(int *out, int *ranks) {\n"
    "  extern __shared__ int sm[];\n"
    "  cg::cluster_group cl = cg::this_cluster();\n"
    "  unsigned rank = cl.block_rank();\n"
    "  sm[threadIdx.x] = (int)(blockIdx.x * 1000 + threadIdx.x);\n"
    "  cl.sync();\n"
    "  int *peer = cl.map_shared_rank(sm, (rank + 1) % cl.num_blocks());\n"
    "  int v = peer[threadIdx.x];\n"
    "  cl.sync();\n"
    "  out[blockIdx.x * blockDim.x + threadIdx.x] = v;\n"
    "  if (threadIdx.x == 0) ranks[blockIdx.x] = (int)rank;\n"
    "}\n"
    /* 100 KiB of dynamic shared memory, read back reversed. */
    "extern \"C\" __global__ void big_shared(int *out, int n) {\n"
    "  extern __shared__ int sm[];\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) sm[i] = 3 * i;\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = sm[n - 1 - i];\n"
    "}\n"
    /* A programmatic dependent pair: the second waits for the first's
     * writes with griddepcontrol.wait, the first lets it start early. */
    "extern \"C\" __global__ void produce(int *a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) a[i] = i + 1;\n"
    "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "}\n"
    "extern \"C\" __global__ void consume(const int *a, int *b, int n) {\n"
    "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) b[i] = 2 * a[i];\n"
    "}\n";

Test(raw, clusters_shared_memory_and_dependent_launch) {
  jitk_engine *e = jt_gpu_engine();
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, cluster_src, NULL, &m));
  jitk_kernel *k = NULL, *big = NULL, *produce = NULL, *consume = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "cluster_swap", &k));
  JT_OK(e, jitk_module_get_kernel(m, "big_shared", &big));
  JT_OK(e, jitk_module_get_kernel(m, "produce", &produce));
  JT_OK(e, jitk_module_get_kernel(m, "consume", &consume));

  const unsigned grid = 64, block = 128;
  int *out = jt_dev_alloc(e, grid * block * 4), *ranks = jt_dev_alloc(e, grid * 4);
  int *h = malloc(grid * block * 4), *hr = malloc(grid * 4);
  jitk_kernel_launch_config c;
  JT_OK(e, jitk_kernel_launch_config_init(&c));
  for (unsigned cs = 2; cs <= 8; cs *= 2) {
    c.cluster = (jitk_dim3){cs, 1, 1};
    jt_poison(e, out, grid * block * 4);
    jt_poison(e, ranks, grid * 4);
    jitk_arg args[] = {jitk_arg_ptr(out, JITK_INT32), jitk_arg_ptr(ranks, JITK_INT32)};
    JT_OK(e, jitk_kernel_launch_ex(k, (jitk_dim3){grid, 1, 1}, (jitk_dim3){block, 1, 1}, block * 4,
                                   NULL, args, 2, &c));
    JT_OK(e, jitk_stream_synchronize(e, NULL));
    jt_to_host(e, h, out, grid * block * 4);
    jt_to_host(e, hr, ranks, grid * 4);
    for (unsigned b = 0; b < grid; b++) {
      cr_assert_eq(hr[b], (int)(b % cs), "clusters of %u: block %u has rank %d", cs, b, hr[b]);
      unsigned peer = b - b % cs + (b % cs + 1) % cs;
      for (unsigned t = 0; t < block; t++)
        cr_assert_eq(h[b * block + t], (int)(peer * 1000 + t),
                     "clusters of %u: block %u thread %u read %d", cs, b, t, h[b * block + t]);
    }
  }
  /* A grid the cluster does not divide never reaches the driver. */
  c.cluster = (jitk_dim3){4, 1, 1};
  jitk_arg args[] = {jitk_arg_ptr(out, JITK_INT32), jitk_arg_ptr(ranks, JITK_INT32)};
  JT_FAILS(e, JITK_ERR_LAUNCH_CONFIG, "not a whole number of clusters",
           jitk_kernel_launch_ex(k, (jitk_dim3){6, 1, 1}, (jitk_dim3){block, 1, 1}, block * 4, NULL,
                                 args, 2, &c));

  /* 100 KiB of dynamic shared memory with no opt-in call first. */
  const int n = 25600;
  int *big_out = jt_dev_alloc(e, (size_t)n * 4), *hb = malloc((size_t)n * 4);
  jt_poison(e, big_out, (size_t)n * 4);
  jitk_arg bargs[] = {jitk_arg_ptr(big_out, JITK_INT32), jitk_arg_i32(n)};
  JT_OK(e, jitk_kernel_launch(big, (jitk_dim3){1, 1, 1}, (jitk_dim3){256, 1, 1}, (size_t)n * 4,
                              NULL, bargs, 2));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jt_to_host(e, hb, big_out, (size_t)n * 4);
  for (int i = 0; i < n; i++) cr_assert_eq(hb[i], 3 * (n - 1 - i), "big_shared[%d] = %d", i, hb[i]);
  jitk_kernel_attributes at;
  JT_OK(e, jitk_kernel_get_attributes(big, &at));
  cr_assert_eq(at.max_dynamic_shared_bytes, (size_t)n * 4, "the limit was raised");
  JT_FAILS(e, JITK_ERR_SHARED_MEMORY, "exceed the device's",
           jitk_kernel_launch(big, (jitk_dim3){1, 1, 1}, (jitk_dim3){256, 1, 1}, 1 << 20, NULL,
                              bargs, 2));

  /* Programmatic dependent launch: the consumer always sees the whole of
   * what the producer wrote, over runs on fresh poison. */
  const int count = 1 << 22;
  int *pa = jt_dev_alloc(e, (size_t)count * 4), *pb = jt_dev_alloc(e, (size_t)count * 4);
  int *hp = malloc((size_t)count * 4);
  jitk_kernel_launch_config pc;
  JT_OK(e, jitk_kernel_launch_config_init(&pc));
  pc.programmatic_dependent_launch = 1;
  for (int run = 0; run < 3; run++) {
    jt_poison(e, pa, (size_t)count * 4);
    jt_poison(e, pb, (size_t)count * 4);
    jitk_arg a1[] = {jitk_arg_ptr(pa, JITK_INT32), jitk_arg_i32(count)};
    jitk_arg a2[] = {jitk_arg_ptr(pa, JITK_INT32), jitk_arg_ptr(pb, JITK_INT32),
                     jitk_arg_i32(count)};
    unsigned g = (unsigned)(count / 256);
    JT_OK(e, jitk_kernel_launch(produce, (jitk_dim3){g, 1, 1}, (jitk_dim3){256, 1, 1}, 0, NULL, a1,
                                2));
    JT_OK(e, jitk_kernel_launch_ex(consume, (jitk_dim3){g, 1, 1}, (jitk_dim3){256, 1, 1}, 0, NULL,
                                   a2, 3, &pc));
    JT_OK(e, jitk_stream_synchronize(e, NULL));
    jt_to_host(e, hp, pb, (size_t)count * 4);
    for (int i = 0; i < count; i++)
      cr_assert_eq(hp[i], 2 * (i + 1), "run %d: b[%d] = %d", run, i, hp[i]);
  }

  JT_OK(e, jitk_device_free(e, out, NULL));
  JT_OK(e, jitk_device_free(e, ranks, NULL));
  JT_OK(e, jitk_device_free(e, big_out, NULL));
  JT_OK(e, jitk_device_free(e, pa, NULL));
  JT_OK(e, jitk_device_free(e, pb, NULL));
  free(h);
  free(hr);
  free(hb);
  free(hp);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* Each kind captured into one CUDA graph and replayed on fresh inputs:
 * a raw kernel (y = 2 x), an elementwise kernel (z = y + x), a reduction
 * (column sums of z as 4096 x 256: few outputs, which the planner
 * splits in chunks, so a temporary and a memset are captured with it) and a matmul (D = A B). The
 * reduction is prepared first; the elementwise kernel is not, and its
 * captured launch is refused until it is. The capture runs in the
 * driver's global mode, where an unsafe call on the capturing thread would
 * end it. */
static const char *twice_src =
    "extern \"C\" __global__ void twice(const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = 2.0f * x[i];\n"
    "}\n";

Test(raw, graphs_capture_every_kind) {
  cr_log_info("graphs: engine");
  jitk_engine *e = jt_gpu_engine();
  cr_log_info("graphs: engine made");
  cr_assert(e->drv.cuStreamBeginCapture != NULL && e->drv.cuGraphInstantiateWithFlags != NULL);
  enum { R = 4096, C = 256, N = R * C, MM = 128, MK = 64 };
  jitk_module *m = NULL;
  jitk_kernel *twice = NULL;
  JT_OK(e, jitk_module_create(e, twice_src, NULL, &m));
  JT_OK(e, jitk_module_get_kernel(m, "twice", &twice));
  jitk_elementwise *add = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = y + x", "graph_add", NULL, &add));
  jitk_reduction *colsum = NULL;
  JT_OK(e, jitk_reduction_create(e, "T z", "T s", "z", "a + b", "s = a", "0", NULL, "graph_colsum",
                                 NULL, &colsum));
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = d.n = MM;
  d.k = MK;
  d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = JITK_FLOAT32;
  d.lda = MK;
  d.ldb = MM;
  jitk_matmul *mm = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &mm));

  float *x = jt_dev_alloc(e, N * 4), *y = jt_dev_alloc(e, N * 4), *z = jt_dev_alloc(e, N * 4);
  float *s = jt_dev_alloc(e, C * 4);
  float *a = jt_dev_alloc(e, MM * MK * 4), *b = jt_dev_alloc(e, MK * MM * 4),
        *dd = jt_dev_alloc(e, MM * MM * 4);
  int64_t flat[1] = {N}, rc[2] = {R, C}, cs[1] = {C};
  DLTensor tx = jt_tensor(x, JITK_FLOAT32, 1, flat, NULL),
           ty = jt_tensor(y, JITK_FLOAT32, 1, flat, NULL),
           tz = jt_tensor(z, JITK_FLOAT32, 1, flat, NULL),
           tz2 = jt_tensor(z, JITK_FLOAT32, 2, rc, NULL),
           ts = jt_tensor(s, JITK_FLOAT32, 1, cs, NULL);
  jitk_arg raw_args[] = {jitk_arg_ptr(x, JITK_FLOAT32), jitk_arg_ptr(y, JITK_FLOAT32),
                         jitk_arg_i32(N)};
  jitk_arg ew_args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
  jitk_arg red_args[] = {jitk_arg_array(&tz2), jitk_arg_array(&ts)};
  int axis0[1] = {0};
  JT_OK(e, jitk_reduction_prepare(colsum, red_args, 2, axis0, 1, 0));
  cr_log_info("graphs: prepared");

  CUcontext saved;
  JT_OK(e, jk_ctx_enter(e, &saved));
  CUstream st = NULL;
  cr_assert_eq(e->drv.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  jitk_stream js = (jitk_stream)st;

  /* Not prepared: refused, and the capture goes on. */
  cr_assert_eq(e->drv.cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  JT_FAILS(e, JITK_ERR_STREAM_CAPTURE, "jitk_elementwise_prepare",
           jitk_elementwise_launch(add, js, ew_args, 3, -1, NULL));
  CUgraph g = NULL;
  cr_assert_eq(e->drv.cuStreamEndCapture(st, &g), CUDA_SUCCESS, "the capture survived");
  cr_assert_eq(e->drv.cuGraphDestroy(g), CUDA_SUCCESS);
  JT_OK(e, jitk_elementwise_prepare(add, ew_args, 3, -1));

  cr_assert_eq(e->drv.cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  JT_OK(e, jitk_kernel_launch(twice, (jitk_dim3){N / 256, 1, 1}, (jitk_dim3){256, 1, 1}, 0, js,
                              raw_args, 3));
  JT_OK(e, jitk_elementwise_launch(add, js, ew_args, 3, -1, NULL));
  JT_OK(e, jitk_reduction_launch(colsum, js, red_args, 2, axis0, 1, 0, NULL));
  JT_OK(e, jitk_matmul_execute(mm, js, a, b, NULL, dd, NULL, 0));
  g = NULL;
  CUresult r = e->drv.cuStreamEndCapture(st, &g);
  cr_assert_eq(r, CUDA_SUCCESS, "cuStreamEndCapture: %d", (int)r);
  cr_log_info("graphs: captured");
  CUgraphExec ge = NULL;
  r = e->drv.cuGraphInstantiateWithFlags(&ge, g, 0);
  cr_assert_eq(r, CUDA_SUCCESS, "cuGraphInstantiateWithFlags: %d", (int)r);

  float *hx = malloc(N * 4), *hz = malloc(N * 4), *hs = malloc(C * 4);
  float *ha = malloc(MM * MK * 4), *hb = malloc(MK * MM * 4), *hd = malloc(MM * MM * 4);
  uint64_t seed = 77;
  for (int rep = 0; rep < 3; rep++) {
    for (int i = 0; i < N; i++) hx[i] = (float)(jt_uniform(&seed) * 2 - 1);
    for (int i = 0; i < MM * MK; i++) ha[i] = (float)(jt_uniform(&seed) * 2 - 1);
    for (int i = 0; i < MK * MM; i++) hb[i] = (float)(jt_uniform(&seed) * 2 - 1);
    jt_to_dev(e, x, hx, N * 4);
    jt_to_dev(e, a, ha, MM * MK * 4);
    jt_to_dev(e, b, hb, MK * MM * 4);
    jt_poison(e, y, N * 4);
    jt_poison(e, z, N * 4);
    jt_poison(e, s, C * 4);
    jt_poison(e, dd, MM * MM * 4);
    cr_log_info("graphs: replay %d", rep);
    cr_assert_eq(e->drv.cuGraphLaunch(ge, st), CUDA_SUCCESS);
    cr_assert_eq(e->drv.cuStreamSynchronize(st), CUDA_SUCCESS);
    jt_to_host(e, hz, z, N * 4);
    jt_to_host(e, hs, s, C * 4);
    jt_to_host(e, hd, dd, MM * MM * 4);
    for (int i = 0; i < N; i++) {
      float want = 2.0f * hx[i] + hx[i];
      cr_assert(hz[i] == want, "replay %d: z[%d] = %g, expected %g", rep, i, hz[i], want);
    }
    for (int j = 0; j < C; j++) {
      double want = 0;
      for (int i = 0; i < R; i++) want += (double)(2.0f * hx[i * C + j] + hx[i * C + j]);
      cr_assert(fabs(hs[j] - want) <= 1e-4 * R, "replay %d: s[%d] = %g, expected %g", rep, j, hs[j],
                want);
    }
    for (int i = 0; i < MM; i++)
      for (int j = 0; j < MM; j++) {
        double want = 0;
        for (int k = 0; k < MK; k++) want += (double)ha[i * MK + k] * hb[k * MM + j];
        cr_assert(fabs(hd[i * MM + j] - want) <= 1e-3, "replay %d: D[%d][%d] = %g, expected %g",
                  rep, i, j, hd[i * MM + j], want);
      }
  }
  cr_assert_eq(e->drv.cuGraphExecDestroy(ge), CUDA_SUCCESS);
  cr_assert_eq(e->drv.cuGraphDestroy(g), CUDA_SUCCESS);
  cr_assert_eq(e->drv.cuStreamDestroy(st), CUDA_SUCCESS);
  jk_ctx_leave(e, saved);
  free(hx), free(hz), free(hs), free(ha), free(hb), free(hd);
  JT_OK(e, jitk_device_free(e, x, NULL));
  JT_OK(e, jitk_device_free(e, y, NULL));
  JT_OK(e, jitk_device_free(e, z, NULL));
  JT_OK(e, jitk_device_free(e, s, NULL));
  JT_OK(e, jitk_device_free(e, a, NULL));
  JT_OK(e, jitk_device_free(e, b, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  jitk_matmul_destroy(mm);
  jitk_reduction_destroy(colsum);
  jitk_elementwise_destroy(add);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* Attributes read and set on the device: what the driver reports, the
 * carveout and cluster permission read back as set, the cache preference
 * taken, and the kernel still runs. */
Test(raw, kernel_attributes_on_the_device) {
  jitk_engine *e = jt_gpu_engine();
  jitk_device_info info;
  JT_OK(e, jitk_engine_device_info(e, &info));
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, saxpy_src, NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "saxpy", &k));
  int v = 0;
  JT_OK(e, jitk_kernel_get_attribute(k, JITK_KERNEL_NUM_REGS, &v));
  cr_assert(v > 0 && v <= 255, "%d registers", v);
  JT_OK(e, jitk_kernel_get_attribute(k, JITK_KERNEL_BINARY_VERSION, &v));
  cr_assert_eq(v, info.cc_major * 10 + info.cc_minor);
  JT_OK(e, jitk_kernel_set_attribute(k, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, 25));
  JT_OK(e, jitk_kernel_get_attribute(k, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, &v));
  cr_assert_eq(v, 25);
  JT_OK(e, jitk_kernel_set_attribute(k, JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
  JT_OK(e, jitk_kernel_get_attribute(k, JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &v));
  cr_assert_eq(v, 1);
  JT_OK(e, jitk_kernel_set_cache_preference(k, JITK_PREFER_SHARED));
  const long long n = 4096;
  float *x = jt_dev_alloc(e, n * 4), *y = jt_dev_alloc(e, n * 4), *out = jt_dev_alloc(e, n * 4);
  float *hx = malloc(n * 4), *hy = malloc(n * 4), *ho = malloc(n * 4);
  uint64_t seed = 5;
  for (long long i = 0; i < n; i++)
    hx[i] = (float)jt_uniform(&seed), hy[i] = (float)jt_uniform(&seed);
  jt_to_dev(e, x, hx, n * 4);
  jt_to_dev(e, y, hy, n * 4);
  jt_poison(e, out, n * 4);
  jitk_arg args[] = {jitk_arg_f32(3.0f), jitk_arg_ptr(x, JITK_FLOAT32),
                     jitk_arg_ptr(y, JITK_FLOAT32), jitk_arg_ptr(out, JITK_FLOAT32),
                     jitk_arg_i64(n)};
  JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){16, 1, 1}, (jitk_dim3){256, 1, 1}, 0, NULL, args, 5));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jt_to_host(e, ho, out, n * 4);
  check_saxpy(ho, 3.0f, hx, hy, n, "after setting attributes");
  JT_OK(e, jitk_device_free(e, x, NULL));
  JT_OK(e, jitk_device_free(e, y, NULL));
  JT_OK(e, jitk_device_free(e, out, NULL));
  free(hx), free(hy), free(ho);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* Linked programs (jitk_module_link) run: a kernel calling a device
 * function of another source, with link-time optimization and without,
 * and (when the build had nvcc) the same function from an object nvcc
 * built with -rdc=true -dlto, linked with a kernel jitk compiles. */
#ifdef JITK_TEST_HAVE_DLTO_OBJECT
extern const unsigned char jt_dlto_object[], jt_rdc_fatbin[], jt_rdc_library[];
extern const size_t jt_dlto_object_size, jt_rdc_fatbin_size, jt_rdc_library_size;
#endif

static const char *link_lib_src = "__device__ float scale(float x) { return 3.0f * x + 1.0f; }\n";
static const char *link_main_src =
    "extern __device__ float scale(float x);\n"
    "extern \"C\" __global__ void apply(const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = scale(x[i]);\n"
    "}\n";

static void run_linked(jitk_engine *e, jitk_module *m, const char *what) {
  enum { N = 100003 };
  jitk_kernel *k = NULL;
  JT_OK(e, jitk_module_get_kernel(m, "apply", &k));
  float *x = jt_dev_alloc(e, N * 4), *y = jt_dev_alloc(e, N * 4);
  float *hx = malloc(N * 4), *hy = malloc(N * 4);
  uint64_t seed = 5;
  for (int i = 0; i < N; i++) hx[i] = (float)(jt_uniform(&seed) * 2 - 1);
  jt_to_dev(e, x, hx, N * 4);
  jt_poison(e, y, N * 4);
  jitk_arg args[] = {jitk_arg_ptr(x, JITK_FLOAT32), jitk_arg_ptr(y, JITK_FLOAT32), jitk_arg_i32(N)};
  JT_OK(e, jitk_kernel_launch(k, (jitk_dim3){(N + 255) / 256, 1, 1}, (jitk_dim3){256, 1, 1}, 0,
                              NULL, args, 3));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jt_to_host(e, hy, y, N * 4);
  for (int i = 0; i < N; i++) {
    /* 3x + 1 in float32, with or without a fused multiply-add. */
    double want = 3.0 * (double)hx[i] + 1.0;
    cr_assert(fabs(hy[i] - want) <= 1e-6 * (1 + fabs(want)), "%s: y[%d] = %g, expected %g", what, i,
              hy[i], want);
  }
  jitk_device_free(e, x, NULL);
  jitk_device_free(e, y, NULL);
  free(hx);
  free(hy);
}

Test(raw, linked_programs_run) {
  jitk_engine *e = jt_gpu_engine();
  jitk_link_piece p[2];
  memset(p, 0, sizeof p);
  p[0].kind = JITK_LINK_CUDA;
  p[0].data = link_lib_src;
  p[0].name = "lib.cu";
  p[1].kind = JITK_LINK_CUDA;
  p[1].data = link_main_src;
  p[1].name = "main.cu";
  jitk_link_options o;
  jitk_link_options_init(&o);
  const jitk_lto modes[] = {JITK_LTO_ON, JITK_LTO_OFF};
  for (int i = 0; i < 2; i++) {
    o.lto = modes[i];
    jitk_module *m = NULL;
    jitk_status st = jitk_module_link(e, p, 2, &o, &m);
    if (st == JITK_ERR_UNSUPPORTED) cr_skip_test("%s", jitk_errmsg(e));
    JT_OK(e, st);
    run_linked(e, m, i == 0 ? "two sources, LTO" : "two sources, no LTO");
    jitk_module_destroy(m);
  }
#ifdef JITK_TEST_HAVE_DLTO_OBJECT
  p[0].kind = JITK_LINK_OBJECT;
  p[0].data = jt_dlto_object;
  p[0].size = jt_dlto_object_size;
  p[0].name = "link_scale.o";
  jitk_link_options_init(&o);
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_link(e, p, 2, &o, &m));
  run_linked(e, m, "nvcc -dlto object");
  jitk_module_destroy(m);
  jitk_link_piece q[2] = {p[0], p[1]};
  q[0].kind = JITK_LINK_FATBIN;
  q[0].data = jt_rdc_fatbin;
  q[0].size = jt_rdc_fatbin_size;
  q[0].name = "link_scale.fatbin";
  JT_OK(e, jitk_module_link(e, q, 2, &o, &m));
  run_linked(e, m, "nvcc relocatable fatbin");
  jitk_module_destroy(m);
  q[0].kind = JITK_LINK_LIBRARY;
  q[0].data = jt_rdc_library;
  q[0].size = jt_rdc_library_size;
  q[0].name = "liblink_scale.a";
  JT_OK(e, jitk_module_link(e, q, 2, &o, &m));
  run_linked(e, m, "nvcc device library");
  jitk_module_destroy(m);

  /* A generated kernel calling the object's function. */
  enum { N = 70001 };
  jitk_elementwise_options eo;
  memset(&eo, 0, sizeof eo);
  eo.preamble = "extern __device__ float scale(float x);";
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "float32 y", "y = scale(x)", "linked_scale", &eo,
                                   &k));
  JT_OK(e, jitk_elementwise_link(k, p, 1, NULL));
  float *x = jt_dev_alloc(e, N * 4), *y = jt_dev_alloc(e, N * 4);
  float *hx = malloc(N * 4), *hy = malloc(N * 4);
  uint64_t seed = 9;
  for (int i = 0; i < N; i++) hx[i] = (float)(jt_uniform(&seed) * 2 - 1);
  jt_to_dev(e, x, hx, N * 4);
  jt_poison(e, y, N * 4);
  int64_t shape[1] = {N};
  DLTensor tx = jt_tensor(x, JITK_FLOAT32, 1, shape, NULL),
           ty = jt_tensor(y, JITK_FLOAT32, 1, shape, NULL);
  jitk_arg ea[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, ea, 2, -1, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jt_to_host(e, hy, y, N * 4);
  for (int i = 0; i < N; i++) {
    double want = 3.0 * (double)hx[i] + 1.0;
    cr_assert(fabs(hy[i] - want) <= 1e-6 * (1 + fabs(want)), "elementwise: y[%d] = %g, expected %g",
              i, hy[i], want);
  }
  jitk_elementwise_destroy(k);
  jitk_device_free(e, x, NULL);
  jitk_device_free(e, y, NULL);
  free(hx);
  free(hy);
#endif
  jitk_engine_destroy(e);
}
