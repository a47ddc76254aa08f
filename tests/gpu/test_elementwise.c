/*
 * Elementwise kernels on a GPU: every dtype on fresh random data against a
 * float64 CPU reference, broadcasting, transposed and reversed views,
 * in-place use, allocated outputs, raw parameters, the 64-bit index path
 * past 2^31 elements, and bad input. Outputs are poisoned before each run
 * and checked everywhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

/* Fills element k with small random values that every dtype holds. */
static void write_random(void *buf, jitk_dtype d, size_t k, uint64_t *seed) {
  double r = jt_uniform(seed) * 50.0;
  double r2 = jt_uniform(seed) * 50.0;
  switch (d) {
    case JITK_BOOL: ((uint8_t *)buf)[k] = r > 0; break;
    case JITK_INT8: ((int8_t *)buf)[k] = (int8_t)r; break;
    case JITK_INT16: ((int16_t *)buf)[k] = (int16_t)(r * 100); break;
    case JITK_INT32: ((int32_t *)buf)[k] = (int32_t)(r * 1e6); break;
    case JITK_INT64: ((int64_t *)buf)[k] = (int64_t)(r * 1e12); break;
    case JITK_UINT8: ((uint8_t *)buf)[k] = (uint8_t)(r + 50); break;
    case JITK_UINT16: ((uint16_t *)buf)[k] = (uint16_t)((r + 50) * 100); break;
    case JITK_UINT32: ((uint32_t *)buf)[k] = (uint32_t)((r + 50) * 1e6); break;
    case JITK_UINT64: ((uint64_t *)buf)[k] = (uint64_t)((r + 50) * 1e12); break;
    case JITK_FLOAT16: ((uint16_t *)buf)[k] = jitk_float_to_half((float)r); break;
    case JITK_BFLOAT16: ((uint16_t *)buf)[k] = jitk_float_to_bfloat16((float)r); break;
    case JITK_FLOAT32: ((float *)buf)[k] = (float)r; break;
    case JITK_FLOAT64: ((double *)buf)[k] = r; break;
    case JITK_COMPLEX64:
      ((float *)buf)[2 * k] = (float)r;
      ((float *)buf)[2 * k + 1] = (float)r2;
      break;
    case JITK_COMPLEX128:
      ((double *)buf)[2 * k] = r;
      ((double *)buf)[2 * k + 1] = r2;
      break;
    default: break;
  }
}

/* z = x * y + x for every dtype, on a length that leaves a vector
 * remainder; the reference is computed in double and rounded to the
 * dtype where the dtype rounds. */
Test(elementwise, every_dtype) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x * y + x", "mul_add", NULL, &k));
  jitk_elementwise *kb = NULL; /* bool has no useful *, +: use logic */
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = (x && !y) || (y && !x)", "xor_", NULL,
                                   &kb));
  const size_t n = 100003;
  uint64_t seed = 0xE1E0;
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    /* The 8-bit floats saturate within this test's range: they have a
     * test of their own below, bit-exact. */
    if (d == JITK_FLOAT8_E4M3 || d == JITK_FLOAT8_E5M2) continue;
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    size_t bytes = n * info.size;
    unsigned char *hx = malloc(bytes), *hy = malloc(bytes), *hz = malloc(bytes);
    for (size_t i = 0; i < n; i++) {
      write_random(hx, (jitk_dtype)d, i, &seed);
      write_random(hy, (jitk_dtype)d, i, &seed);
    }
    void *dx = jt_dev_alloc(e, bytes), *dy = jt_dev_alloc(e, bytes), *dz = jt_dev_alloc(e, bytes);
    jt_to_dev(e, dx, hx, bytes);
    jt_to_dev(e, dy, hy, bytes);
    jt_poison(e, dz, bytes);
    int64_t shape[1] = {(int64_t)n};
    DLTensor tx = jt_tensor(dx, (jitk_dtype)d, 1, shape, NULL);
    DLTensor ty = jt_tensor(dy, (jitk_dtype)d, 1, shape, NULL);
    DLTensor tz = jt_tensor(dz, (jitk_dtype)d, 1, shape, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
    JT_OK(e, jitk_elementwise_launch(d == JITK_BOOL ? kb : k, NULL, args, 3, -1, NULL));
    jt_to_host(e, hz, dz, bytes);
    for (size_t i = 0; i < n; i++) {
      double x = jt_read_real(hx, (jitk_dtype)d, i), y = jt_read_real(hy, (jitk_dtype)d, i);
      double xi = jt_read_imag(hx, (jitk_dtype)d, i), yi = jt_read_imag(hy, (jitk_dtype)d, i);
      double got = jt_read_real(hz, (jitk_dtype)d, i), goti = jt_read_imag(hz, (jitk_dtype)d, i);
      double want, wanti = 0;
      if (d == JITK_BOOL) {
        want = ((x != 0) != (y != 0));
      } else if (info.kind == 'c') {
        want = x * y - xi * yi + x;
        wanti = x * yi + xi * y + xi;
      } else {
        want = x * y + x;
      }
      double tol;
      switch (d) {
        case JITK_FLOAT16: tol = 2e-3 * fabs(want) + 1e-2; break;
        case JITK_BFLOAT16: tol = 1.6e-2 * fabs(want) + 1e-1; break;
        case JITK_FLOAT32:
        case JITK_COMPLEX64:
          tol = 1e-6 * (hypot(x, xi) * hypot(y, yi) + hypot(x, xi)) + 1e-6;
          break;
        case JITK_FLOAT64:
        case JITK_COMPLEX128: tol = 1e-14 * (hypot(x, xi) * hypot(y, yi) + hypot(x, xi)); break;
        default: tol = 0; break;
      }
      if (info.kind == 'i' || info.kind == 'u') {
        /* Integers wrap: compare the low bytes of the product done in
         * unsigned 64-bit arithmetic, which wraps the same way. */
        uint64_t ux = 0, uy = 0;
        memcpy(&ux, hx + i * info.size, info.size);
        memcpy(&uy, hy + i * info.size, info.size);
        if (info.kind == 'i' && info.size < 8) { /* sign-extend */
          int shift = 64 - 8 * (int)info.size;
          ux = (uint64_t)(((int64_t)(ux << shift)) >> shift);
          uy = (uint64_t)(((int64_t)(uy << shift)) >> shift);
        }
        uint64_t w = ux * uy + ux;
        cr_assert(memcmp(&w, hz + i * info.size, info.size) == 0, "%s element %zu: %g * %g + %g",
                  info.name, i, x, y, x);
        continue;
      }
      cr_assert(fabs(got - want) <= tol && fabs(goti - wanti) <= tol + (info.kind == 'c' ? tol : 0),
                "%s element %zu: got %.9g%+.9gi, want %.9g%+.9gi", info.name, i, got, goti, want,
                wanti);
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    JT_OK(e, jitk_device_free(e, dz, NULL));
    free(hx);
    free(hy);
    free(hz);
  }
  jitk_elementwise_destroy(k);
  jitk_elementwise_destroy(kb);
  jitk_engine_destroy(e);
}

/* z = x * y + (T)1 on 8-bit floats, from random finite codes of the whole
 * range (subnormals, and products past the largest value, which
 * saturate), bit for bit against the host: the product of two 8-bit
 * floats is exact in float, so the float sum rounds once on both sides,
 * and the host's conversion rounds and saturates as the device's does.
 * Then an 8-bit float input with a float32 output. */
Test(elementwise, float8_bit_exact) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL, *up = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x * y + (T)1", "fma8", NULL, &k));
  JT_OK(e, jitk_elementwise_create(e, "T x", "float32 y", "y = (float)x * 2", "up8", NULL, &up));
  const size_t n = 100003;
  uint64_t seed = 0xF8F8;
  const jitk_dtype dts[] = {JITK_FLOAT8_E4M3, JITK_FLOAT8_E5M2};
  for (int f = 0; f < 2; f++) {
    jitk_dtype d = dts[f];
    bool e4m3 = d == JITK_FLOAT8_E4M3;
    uint8_t *hx = malloc(n), *hy = malloc(n), *hz = malloc(n);
    float *hf = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
      uint8_t *p[2] = {&hx[i], &hy[i]};
      for (int j = 0; j < 2; j++) {
        float v;
        do {
          *p[j] = (uint8_t)jt_next(&seed);
          v = e4m3 ? jitk_float8_e4m3_to_float(*p[j]) : jitk_float8_e5m2_to_float(*p[j]);
        } while (!isfinite(v));
      }
    }
    uint8_t *dx = jt_dev_alloc(e, n), *dy = jt_dev_alloc(e, n), *dz = jt_dev_alloc(e, n);
    float *df = jt_dev_alloc(e, n * 4);
    jt_to_dev(e, dx, hx, n);
    jt_to_dev(e, dy, hy, n);
    jt_poison(e, dz, n);
    jt_poison(e, df, n * 4);
    int64_t shape[1] = {(int64_t)n};
    DLTensor tx = jt_tensor(dx, d, 1, shape, NULL), ty = jt_tensor(dy, d, 1, shape, NULL);
    DLTensor tz = jt_tensor(dz, d, 1, shape, NULL),
             tf = jt_tensor(df, JITK_FLOAT32, 1, shape, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
    JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
    jitk_arg args_up[] = {jitk_arg_array(&tx), jitk_arg_array(&tf)};
    JT_OK(e, jitk_elementwise_launch(up, NULL, args_up, 2, -1, NULL));
    jt_to_host(e, hz, dz, n);
    jt_to_host(e, hf, df, n * 4);
    size_t saturated = 0;
    for (size_t i = 0; i < n; i++) {
      float x = e4m3 ? jitk_float8_e4m3_to_float(hx[i]) : jitk_float8_e5m2_to_float(hx[i]);
      float y = e4m3 ? jitk_float8_e4m3_to_float(hy[i]) : jitk_float8_e5m2_to_float(hy[i]);
      float w = x * y + 1.0f;
      uint8_t want = e4m3 ? jitk_float_to_float8_e4m3(w) : jitk_float_to_float8_e5m2(w);
      saturated += (want & 0x7f) == (e4m3 ? 0x7e : 0x7b);
      cr_assert_eq(hz[i], want, "%s element %zu: %02x (%g) * %02x (%g) + 1 gave %02x, want %02x",
                   e4m3 ? "e4m3" : "e5m2", i, hx[i], x, hy[i], y, hz[i], want);
      cr_assert_eq(hf[i], x * 2, "element %zu: (float)x * 2", i);
    }
    cr_assert(saturated > 0, "the data reaches saturation");
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    JT_OK(e, jitk_device_free(e, dz, NULL));
    JT_OK(e, jitk_device_free(e, df, NULL));
    free(hx);
    free(hy);
    free(hz);
    free(hf);
  }
  jitk_elementwise_destroy(k);
  jitk_elementwise_destroy(up);
  jitk_engine_destroy(e);
}

/* y = max(x + b, 0) with b broadcast along rows; on x contiguous, on x a
 * transposed view, on x with reversed rows; and saxpy in place. */
Test(elementwise, broadcast_views_in_place) {
  jitk_engine *e = jt_gpu_engine();
  /* The default shapes of work, then tiles of 32, then a device-filling
   * grid everywhere (the knobs the benchmark turns). */
  jitk_elementwise *ks[3] = {NULL, NULL, NULL};
  static const char *tiles[3] = {NULL, "32", NULL}, *grids[3] = {NULL, NULL, "fill"};
  for (int c = 0; c < 3; c++) {
    if (tiles[c]) setenv("JITK_EW_TILE", tiles[c], 1);
    if (grids[c]) setenv("JITK_EW_GRID", grids[c], 1);
    JT_OK(e, jitk_elementwise_create(e, "T x, T b", "T y", "y = max(x + b, (T)0)", "bias_relu",
                                     NULL, &ks[c]));
    unsetenv("JITK_EW_TILE");
    unsetenv("JITK_EW_GRID");
  }
  enum { R = 301, C = 517 };
  const size_t count = (size_t)R * C;
  uint64_t seed = 0xB1A5;
  float *hx = malloc(count * 4), *hb = malloc(C * 4), *hy = malloc(count * 4);
  for (size_t i = 0; i < count; i++) hx[i] = (float)jt_uniform(&seed);
  for (int j = 0; j < C; j++) hb[j] = (float)jt_uniform(&seed) * 0.5f;
  float *dx = jt_dev_alloc(e, count * 4), *db = jt_dev_alloc(e, C * 4),
        *dy = jt_dev_alloc(e, count * 4);
  jt_to_dev(e, dx, hx, count * 4);
  jt_to_dev(e, db, hb, C * 4);
  struct {
    const char *name;
    int64_t shape[2], strides[2], offset;
  } views[] = {
      {"contiguous", {R, C}, {C, 1}, 0},
      {"transposed", {R, C}, {1, R}, 0}, /* x viewed as the transpose of a (C, R) array */
      {"rows reversed", {R, C}, {-C, 1}, (int64_t)(R - 1) * C},
  };
  for (int kv = 0; kv < 9; kv++) {
    int v = kv % 3;
    jitk_elementwise *k = ks[kv / 3];
    int64_t shb[1] = {C}, shy[2] = {R, C};
    DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 2, views[v].shape, views[v].strides);
    tx.byte_offset = (uint64_t)views[v].offset * 4;
    DLTensor tb = jt_tensor(db, JITK_FLOAT32, 1, shb, NULL);
    DLTensor ty = jt_tensor(dy, JITK_FLOAT32, 2, shy, NULL);
    jt_poison(e, dy, count * 4);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&tb), jitk_arg_array(&ty)};
    JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
    jt_to_host(e, hy, dy, count * 4);
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) {
        float x = hx[views[v].offset + i * views[v].strides[0] + j * views[v].strides[1]];
        float want = x + hb[j] > 0 ? x + hb[j] : 0;
        cr_assert_eq(hy[(size_t)i * C + j], want, "%s, kernel %d: (%d, %d)", views[v].name, kv / 3,
                     i, j);
      }
  }

  /* In place: y = a * x + y, where y is both input and output. */
  jitk_elementwise *saxpy = NULL;
  JT_OK(e, jitk_elementwise_create(e, "float32 a, T x", "T y", "y = a * x + y", "saxpy", NULL,
                                   &saxpy));
  float *before = malloc(count * 4);
  jt_to_dev(e, dy, hx, count * 4);
  memcpy(before, hx, count * 4);
  int64_t sh[1] = {(int64_t)count};
  DLTensor t1 = jt_tensor(dx, JITK_FLOAT32, 1, sh, NULL),
           t2 = jt_tensor(dy, JITK_FLOAT32, 1, sh, NULL);
  jitk_arg sargs[] = {jitk_arg_f64(2.5), jitk_arg_array(&t1), jitk_arg_array(&t2)};
  JT_OK(e, jitk_elementwise_launch(saxpy, NULL, sargs, 3, -1, NULL));
  jt_to_host(e, hy, dy, count * 4);
  for (size_t i = 0; i < count; i++)
    cr_assert(fabs(hy[i] - (2.5 * hx[i] + before[i])) <= 1e-6, "saxpy %zu: %g, want %g", i,
              (double)hy[i], 2.5 * hx[i] + before[i]);

  /* The tiled path with an output the operation reads (in place) and a
   * full two-dimensional operand beside the transposed one: with tiles of
   * 64 and of 32. */
  for (int c = 0; c < 2; c++) {
    jitk_elementwise *acc = NULL;
    if (c == 1) setenv("JITK_EW_TILE", "32", 1);
    JT_OK(e, jitk_elementwise_create(e, "T x, T w", "T y", "y = y * (T)0.5 + x * w", "tiled_acc",
                                     NULL, &acc));
    unsetenv("JITK_EW_TILE");
    float *hw = malloc(count * 4), *hy0 = malloc(count * 4);
    for (size_t i = 0; i < count; i++) {
      hw[i] = (float)jt_uniform(&seed);
      hy0[i] = (float)jt_uniform(&seed);
    }
    float *dw = jt_dev_alloc(e, count * 4);
    jt_to_dev(e, dw, hw, count * 4);
    jt_to_dev(e, dy, hy0, count * 4);
    int64_t shy[2] = {R, C};
    DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 2, views[1].shape, views[1].strides);
    DLTensor tw = jt_tensor(dw, JITK_FLOAT32, 2, shy, NULL),
             ty = jt_tensor(dy, JITK_FLOAT32, 2, shy, NULL);
    jitk_arg aargs[] = {jitk_arg_array(&tx), jitk_arg_array(&tw), jitk_arg_array(&ty)};
    JT_OK(e, jitk_elementwise_launch(acc, NULL, aargs, 3, -1, NULL));
    jt_to_host(e, hy, dy, count * 4);
    for (int i = 0; i < R; i++)
      for (int j = 0; j < C; j++) {
        size_t o = (size_t)i * C + j;
        float want = hy0[o] * 0.5f + hx[i + (size_t)j * R] * hw[o];
        cr_assert(fabsf(hy[o] - want) <= 1e-6f, "tiled in place, tiles %d: (%d, %d): %g, want %g",
                  c ? 32 : 64, i, j, (double)hy[o], (double)want);
      }
    JT_OK(e, jitk_device_free(e, dw, NULL));
    free(hw);
    free(hy0);
    jitk_elementwise_destroy(acc);
  }

  /* An output that is exactly an input is fine; half of one is not. */
  jitk_elementwise *inplace = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T y", "y = x * 2", "twice", NULL, &inplace));
  jitk_arg same[] = {jitk_arg_array(&t2), jitk_arg_array(&t2)};
  JT_OK(e, jitk_elementwise_launch(inplace, NULL, same, 2, -1, NULL));
  int64_t half_shape[1] = {(int64_t)count / 2};
  DLTensor lo = jt_tensor(dy, JITK_FLOAT32, 1, half_shape, NULL);
  DLTensor hi = jt_tensor(dy, JITK_FLOAT32, 1, half_shape, NULL);
  hi.byte_offset = 4 * 10;
  jitk_arg shifted[] = {jitk_arg_array(&lo), jitk_arg_array(&hi)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "overlaps",
           jitk_elementwise_launch(inplace, NULL, shifted, 2, -1, NULL));
  free(before);
  jitk_elementwise_destroy(inplace);
  jitk_elementwise_destroy(saxpy);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  free(hx);
  free(hb);
  free(hy);
  for (int c = 0; c < 3; c++) jitk_elementwise_destroy(ks[c]);
  jitk_engine_destroy(e);
}

/* Outputs allocated by jitk; raw parameters and i; size without arrays. */
Test(elementwise, allocated_outputs_raw_and_index) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, raw T r", "T y, U idx",
                                   "y = x + r[_ind.size() - 1 - i]; idx = i", "rev_add", NULL, &k));
  /* U is bound by nothing but its (allocated) output: an error. */
  const int n = 70001;
  uint64_t seed = 0xA110;
  double *hx = malloc(n * 8), *hr = malloc(n * 8), *hy = malloc(n * 8);
  for (int i = 0; i < n; i++) {
    hx[i] = jt_uniform(&seed);
    hr[i] = jt_uniform(&seed);
  }
  double *dx = jt_dev_alloc(e, n * 8), *dr = jt_dev_alloc(e, n * 8);
  jt_to_dev(e, dx, hx, n * 8);
  jt_to_dev(e, dr, hr, n * 8);
  int64_t sh[1] = {n};
  DLTensor tx = jt_tensor(dx, JITK_FLOAT64, 1, sh, NULL),
           tr = jt_tensor(dr, JITK_FLOAT64, 1, sh, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&tr)};
  DLManagedTensor *outs[2] = {NULL, NULL};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "U", jitk_elementwise_launch(k, NULL, args, 2, -1, outs));
  jitk_elementwise_destroy(k);
  JT_OK(e, jitk_elementwise_create(e, "T x, raw T r", "T y, int64 idx",
                                   "y = x + r[_ind.size() - 1 - i]; idx = i", "rev_add", NULL, &k));
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, -1, outs));
  cr_assert_not_null(outs[0]);
  cr_assert_not_null(outs[1]);
  cr_assert_eq(outs[0]->dl_tensor.ndim, 1);
  cr_assert_eq(outs[0]->dl_tensor.shape[0], n);
  cr_assert_eq(outs[1]->dl_tensor.dtype.bits, 64);
  jt_to_host(e, hy, outs[0]->dl_tensor.data, n * 8);
  int64_t *hidx = malloc(n * 8);
  jt_to_host(e, hidx, outs[1]->dl_tensor.data, n * 8);
  for (int i = 0; i < n; i++) {
    cr_assert_eq(hy[i], hx[i] + hr[n - 1 - i], "y %d", i);
    cr_assert_eq(hidx[i], i, "idx %d", i);
  }
  outs[0]->deleter(outs[0]);
  outs[1]->deleter(outs[1]);
  JT_OK(e, jitk_stream_synchronize(e, NULL));

  /* Only raw inputs: the size says how many elements. */
  jitk_elementwise *gather = NULL;
  JT_OK(e, jitk_elementwise_create(e, "raw T r", "T y", "y = r[2 * i]", "evens", NULL, &gather));
  jitk_arg rargs[] = {jitk_arg_array(&tr)};
  DLManagedTensor *g = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "pass size",
           jitk_elementwise_launch(gather, NULL, rargs, 1, -1, &g));
  JT_OK(e, jitk_elementwise_launch(gather, NULL, rargs, 1, n / 2, &g));
  jt_to_host(e, hy, g->dl_tensor.data, (size_t)(n / 2) * 8);
  for (int i = 0; i < n / 2; i++) cr_assert_eq(hy[i], hr[2 * i]);
  g->deleter(g);

  /* The generated source is there to read. */
  const char *src = NULL;
  JT_OK(e, jitk_elementwise_source(gather, &src));
  cr_assert(strstr(src, "extern \"C\" __global__ void evens(") != NULL);

  jitk_elementwise_destroy(gather);
  jitk_elementwise_destroy(k);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dr, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  free(hx);
  free(hr);
  free(hy);
  free(hidx);
  jitk_engine_destroy(e);
}

/* Types: scalars converted, placeholders bound once, arrays checked. */
Test(elementwise, binding_and_errors) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T s, float16 h", "T y", "y = x * s + (T)(float)h",
                                   "scale", NULL, &k));
  const int n = 1000;
  float *hx = malloc(n * 4), *hy = malloc(n * 4);
  uint64_t seed = 0xB1D;
  for (int i = 0; i < n; i++) hx[i] = (float)jt_uniform(&seed);
  float *dx = jt_dev_alloc(e, n * 4), *dy = jt_dev_alloc(e, n * 4);
  jt_to_dev(e, dx, hx, n * 4);
  int64_t sh[1] = {n};
  DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 1, sh, NULL),
           ty = jt_tensor(dy, JITK_FLOAT32, 1, sh, NULL);
  /* An int64 scalar where T is float32, and a float64 for a float16. */
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_i64(3), jitk_arg_f64(0.5), jitk_arg_array(&ty)};
  jt_poison(e, dy, n * 4);
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 4, -1, NULL));
  jt_to_host(e, hy, dy, n * 4);
  /* The device may fuse the multiply and the add: one rounding, not two. */
  for (int i = 0; i < n; i++)
    cr_assert(fabs(hy[i] - ((double)hx[i] * 3.0 + 0.5)) <= 1e-6, "%d: %g", i, (double)hy[i]);

  /* T met as float32 and float64. */
  double *dd = jt_dev_alloc(e, n * 8);
  DLTensor td = jt_tensor(dd, JITK_FLOAT64, 1, sh, NULL);
  jitk_arg clash[] = {jitk_arg_array(&tx), jitk_arg_f32(1), jitk_arg_f32(0), jitk_arg_array(&td)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "bound to both float32 and float64",
           jitk_elementwise_launch(k, NULL, clash, 4, -1, NULL));
  /* A complex scalar for a real parameter. */
  jitk_arg cplx[] = {jitk_arg_array(&tx), jitk_arg_c64(1, 1), jitk_arg_f32(0), jitk_arg_array(&ty)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "imaginary",
           jitk_elementwise_launch(k, NULL, cplx, 4, -1, NULL));
  /* Shapes that do not broadcast. */
  int64_t sh2[1] = {n - 1};
  DLTensor tshort = jt_tensor(dy, JITK_FLOAT32, 1, sh2, NULL);
  jitk_arg bad_shape[] = {jitk_arg_array(&tx), jitk_arg_f32(1), jitk_arg_f32(0),
                          jitk_arg_array(&tshort)};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "does not broadcast",
           jitk_elementwise_launch(k, NULL, bad_shape, 4, -1, NULL));
  /* A pointer argument is not an array. */
  jitk_arg ptr[] = {jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_f32(1), jitk_arg_f32(0),
                    jitk_arg_array(&ty)};
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "DLTensor",
           jitk_elementwise_launch(k, NULL, ptr, 4, -1, NULL));
  JT_FAILS(e, JITK_ERR_ARGUMENT_COUNT, "takes 3 inputs",
           jitk_elementwise_launch(k, NULL, ptr, 2, -1, NULL));
  jitk_elementwise_destroy(k);

  /* An operation that does not compile: the error names its own line. */
  jitk_elementwise *bad = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T y", "T t = x;\ny = t + undefined_name", "bad", NULL,
                                   &bad));
  jitk_arg one[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  JT_FAILS(e, JITK_ERR_COMPILE, "operation:2:9: error: identifier \"undefined_name\" is undefined",
           jitk_elementwise_launch(bad, NULL, one, 2, -1, NULL));
  jitk_elementwise_destroy(bad);

  /* Its output allocated, then the compile failing: the output goes back
   * and the caller's slot keeps what it held (out-parameters are left
   * untouched on failure, issue 11). */
  JT_OK(e, jitk_elementwise_create(e, "T x", "T y", "y = x +", "bad2", NULL, &bad));
  DLManagedTensor *outs[1] = {(DLManagedTensor *)(uintptr_t)0x5e5e5e5e};
  JT_FAILS(e, JITK_ERR_COMPILE, "operation:1:8: error: expected an expression",
           jitk_elementwise_launch(bad, NULL, one, 1, -1, outs));
  cr_assert_eq((uintptr_t)outs[0], 0x5e5e5e5e);
  jitk_elementwise_destroy(bad);

  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  free(hx);
  free(hy);
  jitk_engine_destroy(e);
}

/* More than 2^31 elements: the 64-bit index path, with i checked. */
Test(elementwise, past_two_to_the_31, .timeout = 120) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "int8 x", "int8 y",
                                   "y = (signed char)(x + (signed char)(i % 7))", "big", NULL, &k));
  const int64_t rows = 65539, cols = 32771; /* 2,147,778,169 elements */
  const size_t n = (size_t)(rows * cols);
  int8_t *h = malloc(n);
  for (size_t i = 0; i < n; i++) h[i] = (int8_t)(i * 2654435761u >> 24);
  void *dx = jt_dev_alloc(e, n), *dy = jt_dev_alloc(e, n);
  jt_to_dev(e, dx, h, n);
  jt_poison(e, dy, n);
  int64_t shape[2] = {rows, cols};
  DLTensor tx = jt_tensor(dx, JITK_INT8, 2, shape, NULL),
           ty = jt_tensor(dy, JITK_INT8, 2, shape, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, -1, NULL));
  const char *src;
  JT_OK(e, jitk_elementwise_source(k, &src));
  cr_assert(strstr(src, "64-bit index") != NULL, "the 64-bit path was taken");
  int8_t *out = malloc(n);
  jt_to_host(e, out, dy, n);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += out[i] != (int8_t)(h[i] + (int8_t)(i % 7));
  cr_assert_eq(bad, 0, "%zu of %zu elements wrong", bad, n);
  free(out);
  free(h);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* Raw outputs, as CuPy writes them: written by index, allocated with the
 * loop's shape (one dimension of `size` when only size fixes it), given
 * ones of any shape and strides, and one that is a raw input in place.
 * jitk_elementwise_outputs reports what each launch allocates. */
Test(elementwise, raw_outputs) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  /* CuPy's test_manual_indexing. */
  JT_OK(e, jitk_elementwise_create(e, "raw T x, raw T y", "raw T z", "z[i] = x[i] + y[i]",
                                   "uesr_kernel_2", NULL, &k));
  const int n = 100;
  float hx[100], hy[100], hz[100];
  uint64_t seed = 0x4a3;
  for (int i = 0; i < n; i++) {
    hx[i] = (float)jt_uniform(&seed);
    hy[i] = (float)jt_uniform(&seed);
  }
  float *dx = jt_dev_alloc(e, n * 4), *dy = jt_dev_alloc(e, n * 4), *dz = jt_dev_alloc(e, n * 8);
  jt_to_dev(e, dx, hx, n * 4);
  jt_to_dev(e, dy, hy, n * 4);
  int64_t sh[1] = {n};
  DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 1, sh, NULL),
           ty = jt_tensor(dy, JITK_FLOAT32, 1, sh, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
  DLManagedTensor *out = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "pass size",
           jitk_elementwise_launch(k, NULL, args, 2, -1, &out));
  cr_assert_null(out);
  jitk_output_spec spec;
  JT_OK(e, jitk_elementwise_outputs(k, args, 2, n, &spec));
  JT_OK(e, jitk_elementwise_launch(k, NULL, args, 2, n, &out));
  cr_assert_not_null(out);
  cr_assert_eq(out->dl_tensor.ndim, spec.ndim);
  cr_assert_eq(spec.ndim, 1);
  cr_assert_eq(out->dl_tensor.shape[0], n);
  cr_assert_eq(spec.shape[0], n);
  cr_assert_eq(spec.dtype, JITK_FLOAT32);
  jt_to_host(e, hz, out->dl_tensor.data, n * 4);
  for (int i = 0; i < n; i++) cr_assert_eq(hz[i], hx[i] + hy[i], "z %d", i);
  out->deleter(out);

  /* Given: every other element of a buffer of 2n, as a strided view. */
  jt_poison(e, dz, n * 8);
  int64_t stride2[1] = {2};
  DLTensor tz = jt_tensor(dz, JITK_FLOAT32, 1, sh, stride2);
  jitk_arg given[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, given, 3, n, NULL));
  float hz2[200];
  jt_to_host(e, hz2, dz, n * 8);
  for (int i = 0; i < n; i++) {
    cr_assert_eq(hz2[2 * i], hx[i] + hy[i], "z %d", i);
    cr_assert(isnan(hz2[2 * i + 1]), "the gaps are not written (%d)", i);
  }
  /* In place on a raw input: each element read, then written, by one
   * thread. */
  jitk_arg inplace[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tx)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, inplace, 3, n, NULL));
  jt_to_host(e, hz, dx, n * 4);
  for (int i = 0; i < n; i++) cr_assert_eq(hz[i], hx[i] + hy[i], "in place %d", i);
  jitk_elementwise_destroy(k);

  /* With non-raw arrays: the loop is theirs, and so is the shape of an
   * allocated raw output; z(r, c) by coordinates. */
  JT_OK(e, jitk_elementwise_create(e, "T a", "raw T z, T w", "z(i / 10, i % 10) = a * 2; w = a + 1",
                                   "mixed", NULL, &k));
  int64_t sh2[2] = {10, 10};
  DLTensor ta = jt_tensor(dy, JITK_FLOAT32, 2, sh2, NULL);
  jitk_arg a1[] = {jitk_arg_array(&ta)};
  jitk_output_spec specs[2];
  JT_OK(e, jitk_elementwise_outputs(k, a1, 1, -1, specs));
  DLManagedTensor *outs[2] = {NULL, NULL};
  JT_OK(e, jitk_elementwise_launch(k, NULL, a1, 1, -1, outs));
  for (int j = 0; j < 2; j++) {
    cr_assert_eq(outs[j]->dl_tensor.ndim, 2);
    cr_assert_eq(specs[j].ndim, 2);
    for (int d = 0; d < 2; d++) {
      cr_assert_eq(outs[j]->dl_tensor.shape[d], 10);
      cr_assert_eq(specs[j].shape[d], 10);
    }
  }
  jt_to_host(e, hz, outs[0]->dl_tensor.data, n * 4);
  for (int i = 0; i < n; i++) cr_assert_eq(hz[i], hy[i] * 2, "z %d", i);
  jt_to_host(e, hz, outs[1]->dl_tensor.data, n * 4);
  for (int i = 0; i < n; i++) cr_assert_eq(hz[i], hy[i] + 1, "w %d", i);
  outs[0]->deleter(outs[0]);
  outs[1]->deleter(outs[1]);
  /* A raw output partly over the non-raw input: refused. */
  DLTensor tover = jt_tensor(dy + 1, JITK_FLOAT32, 2, sh2, NULL);
  jitk_arg over[] = {jitk_arg_array(&ta), jitk_arg_array(&tover), jitk_arg_allocate()};
  JT_FAILS(e, JITK_ERR_INVALID_ARRAY, "overlaps",
           jitk_elementwise_launch(k, NULL, over, 3, -1, outs));
  jitk_elementwise_destroy(k);

  /* A loop over rank-0 arrays allocates a rank-0 raw output, z[i]. */
  JT_OK(e, jitk_elementwise_create(e, "float32 a", "raw float32 z", "z[i] = a + 3", "rank0", NULL,
                                   &k));
  DLTensor t0 = jt_tensor(dy, JITK_FLOAT32, 0, NULL, NULL);
  jitk_arg a0[] = {jitk_arg_array(&t0)};
  JT_OK(e, jitk_elementwise_launch(k, NULL, a0, 1, -1, &out));
  cr_assert_eq(out->dl_tensor.ndim, 0);
  float one;
  jt_to_host(e, &one, out->dl_tensor.data, 4);
  cr_assert_eq(one, hy[0] + 3);
  out->deleter(out);
  jitk_elementwise_destroy(k);

  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dy, NULL));
  JT_OK(e, jitk_device_free(e, dz, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jitk_engine_destroy(e);
}

/* Block sizes of the caller's (CuPy's block_size=): 1 as CuPy's test, a
 * whole block, one that would have run tiled, one the device refuses. */
Test(elementwise, block_size) {
  jitk_engine *e = jt_gpu_engine();
  jitk_device_info dev;
  JT_OK(e, jitk_engine_device_info(e, &dev));
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "add", NULL, &k));
  const int rows = 300, cols = 200, n = rows * cols;
  float *hx = malloc(n * 4), *hz = malloc(n * 4);
  for (int i = 0; i < n; i++) hx[i] = (float)i;
  float *dx = jt_dev_alloc(e, n * 4), *dz = jt_dev_alloc(e, n * 4);
  jt_to_dev(e, dx, hx, n * 4);
  int64_t sh[3] = {2, 3, 4};
  DLTensor tx = jt_tensor(dx, JITK_FLOAT32, 3, sh, NULL),
           tz = jt_tensor(dz, JITK_FLOAT32, 3, sh, NULL);
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_f32(1), jitk_arg_array(&tz)};
  jitk_launch_options o;
  jitk_launch_options_init(&o);
  unsigned blocks[] = {1, 32, 1000, (unsigned)dev.max_threads_per_block};
  for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
    o.block_size = blocks[b];
    jt_poison(e, dz, 24 * 4);
    JT_OK(e, jitk_elementwise_launch_ex(k, NULL, args, 3, &o, NULL));
    jt_to_host(e, hz, dz, 24 * 4);
    for (int i = 0; i < 24; i++) cr_assert_eq(hz[i], hx[i] + 1, "block %u, %d", blocks[b], i);
  }
  o.block_size = (unsigned)dev.max_threads_per_block + 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "more threads than a block",
           jitk_elementwise_launch_ex(k, NULL, args, 3, &o, NULL));

  /* A transposed input runs tiled at jitk's block size; with another the
   * plain loop runs, with the same result. */
  int64_t tsh[2] = {cols, rows}, tst[2] = {1, cols}, zsh[2] = {cols, rows};
  DLTensor tt = jt_tensor(dx, JITK_FLOAT32, 2, tsh, tst),
           tz2 = jt_tensor(dz, JITK_FLOAT32, 2, zsh, NULL);
  jitk_arg targs[] = {jitk_arg_array(&tt), jitk_arg_f32(0.5f), jitk_arg_array(&tz2)};
  const char *src = NULL;
  JT_OK(e, jitk_elementwise_launch(k, NULL, targs, 3, -1, NULL));
  JT_OK(e, jitk_elementwise_source(k, &src));
  cr_assert(strstr(src, "tiled path") != NULL, "the default runs tiled");
  for (int pass = 0; pass < 2; pass++) {
    o.block_size = pass == 0 ? 128 : 256;
    jt_poison(e, dz, n * 4);
    JT_OK(e, jitk_elementwise_launch_ex(k, NULL, targs, 3, &o, NULL));
    JT_OK(e, jitk_elementwise_source(k, &src));
    cr_assert(strstr(src, pass == 0 ? "scalar path" : "tiled path") != NULL, "block %u",
              o.block_size);
    jt_to_host(e, hz, dz, n * 4);
    for (int c = 0; c < cols; c++)
      for (int r = 0; r < rows; r++)
        cr_assert_eq(hz[c * rows + r], hx[r * cols + c] + 0.5f, "block %u (%d, %d)", o.block_size,
                     c, r);
  }
  /* size through the options, with only raw arrays. */
  jitk_elementwise *g = NULL;
  JT_OK(e, jitk_elementwise_create(e, "raw T r", "raw T z", "z[i] = r[2 * i]", "evens", NULL, &g));
  int64_t fsh[1] = {n};
  DLTensor tr = jt_tensor(dx, JITK_FLOAT32, 1, fsh, NULL);
  jitk_arg rargs[] = {jitk_arg_array(&tr)};
  DLManagedTensor *out = NULL;
  o.block_size = 64;
  o.size = n / 2;
  JT_OK(e, jitk_elementwise_launch_ex(g, NULL, rargs, 1, &o, &out));
  cr_assert_eq(out->dl_tensor.shape[0], n / 2);
  jt_to_host(e, hz, out->dl_tensor.data, (size_t)(n / 2) * 4);
  for (int i = 0; i < n / 2; i++) cr_assert_eq(hz[i], hx[2 * i], "%d", i);
  out->deleter(out);
  jitk_elementwise_destroy(g);
  jitk_elementwise_destroy(k);
  JT_OK(e, jitk_device_free(e, dx, NULL));
  JT_OK(e, jitk_device_free(e, dz, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  free(hx);
  free(hz);
  jitk_engine_destroy(e);
}

/* Where a pointer lives: device memory of the engine's device, memory
 * from the memory pool, a host address. */
Test(elementwise, pointer_device) {
  jitk_engine *e = jt_gpu_engine();
  jitk_device_info dev;
  JT_OK(e, jitk_engine_device_info(e, &dev));
  void *d = jt_dev_alloc(e, 256);
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  int ordinal = -5, is_dev = -5;
  JT_OK(e, jitk_pointer_device(e, d, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 1);
  cr_assert_eq(ordinal, dev.ordinal);
  /* An address inside the allocation too. */
  JT_OK(e, jitk_pointer_device(e, (char *)d + 100, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 1);
  int on_stack = 0;
  void *heap = malloc(64);
  JT_OK(e, jitk_pointer_device(e, &on_stack, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 0);
  cr_assert_eq(ordinal, -1);
  JT_OK(e, jitk_pointer_device(e, heap, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 0);
  JT_OK(e, jitk_pointer_device(e, NULL, &ordinal, &is_dev));
  cr_assert_eq(is_dev, 0);
  free(heap);
  JT_OK(e, jitk_device_free(e, d, NULL));
  JT_OK(e, jitk_stream_synchronize(e, NULL));
  jitk_engine_destroy(e);
}

/* How far x + y * k, computed in dtype d, may be from the double result
 * for terms of magnitude `mag`: a rounding or two of the dtype, none for
 * integers. */
static double add_tolerance(jitk_dtype d, double mag) {
  switch (d) {
    case JITK_FLOAT16: return 2e-3 * mag + 1e-2;
    case JITK_FLOAT32: return 1e-6 * mag;
    case JITK_FLOAT64: return 1e-14 * mag;
    default: return 0;
  }
}

/* The first byte of h[0, bytes) outside [first, last) that is no longer
 * the poison (0xFF) jt_poison wrote, or `bytes` when none was written. */
static size_t written_outside(const unsigned char *h, size_t bytes, size_t first, size_t last) {
  for (size_t b = 0; b < bytes; b++)
    if ((b < first || b >= last) && h[b] != 0xFF) return b;
  return bytes;
}

/* Loops whose arrays start off a 16-byte boundary: every combination of
 * offsets of x, y and z (0 to 3 elements) for float32, float16, int8 and
 * float64, on lengths around the vector width and a long one, so that the
 * peeled head, the vector groups of aligned and of unaligned operands and
 * the remainder are all met. z = x + y * i uses the element index, which
 * must count from the loop's start through the peel. */
Test(elementwise, misaligned_starts) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e,
        jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y * (T)(i % 8)", "peel", NULL, &k));
  const jitk_dtype dts[] = {JITK_FLOAT32, JITK_FLOAT16, JITK_INT8, JITK_FLOAT64};
  const size_t lengths[] = {1, 3, 7, 17, 33, 100003};
  uint64_t seed = 0x9EE1;
  for (int t = 0; t < 4; t++) {
    jitk_dtype d = dts[t];
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info(d, &info));
    const size_t cap = 100003 + 8;
    size_t bytes = cap * info.size;
    unsigned char *hx = malloc(bytes), *hy = malloc(bytes), *hz = malloc(bytes);
    for (size_t i = 0; i < cap; i++) {
      write_random(hx, d, i, &seed);
      write_random(hy, d, i, &seed);
    }
    /* Small integers, so that int8 products by i % 8 stay exact. */
    if (d == JITK_INT8)
      for (size_t i = 0; i < cap; i++) {
        ((int8_t *)hx)[i] /= 4;
        ((int8_t *)hy)[i] /= 8;
      }
    unsigned char *dx = jt_dev_alloc(e, bytes), *dy = jt_dev_alloc(e, bytes),
                  *dz = jt_dev_alloc(e, bytes);
    jt_to_dev(e, dx, hx, bytes);
    jt_to_dev(e, dy, hy, bytes);
    for (int ox = 0; ox < 4; ox++)
      for (int oy = 0; oy < 4; oy++)
        for (int oz = 0; oz < 4; oz++)
          for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li];
            /* The long length only for a few offset combinations. */
            if (n > 1000 && !(ox == oz || oy == 0)) continue;
            jt_poison(e, dz, bytes);
            int64_t shape[1] = {(int64_t)n};
            DLTensor tx = jt_tensor(dx + ox * info.size, d, 1, shape, NULL);
            DLTensor ty = jt_tensor(dy + oy * info.size, d, 1, shape, NULL);
            DLTensor tz = jt_tensor(dz + oz * info.size, d, 1, shape, NULL);
            jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
            JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
            jt_to_host(e, hz, dz, bytes);
            for (size_t i = 0; i < n; i++) {
              double x = jt_read_real(hx, d, i + (size_t)ox),
                     y = jt_read_real(hy, d, i + (size_t)oy);
              double want = x + y * (double)(i % 8), got = jt_read_real(hz, d, i + (size_t)oz);
              double tol = add_tolerance(d, fabs(x) + fabs(y) * 8);
              if (d == JITK_INT8) want = (double)(int8_t)(int)want;
              if (!(fabs(got - want) <= tol))
                cr_assert_fail("%s, offsets %d %d %d, %zu elements: element %zu is %g, want %g",
                               info.name, ox, oy, oz, n, i, got, want);
            }
            /* Nothing written outside z's elements: the poison (0xFF
             * bytes) is intact before and after them. */
            size_t first = (size_t)oz * info.size;
            size_t bad = written_outside(hz, bytes, first, first + n * info.size);
            cr_assert(bad == bytes,
                      "%s, offsets %d %d %d, %zu elements: byte %zu outside z was written",
                      info.name, ox, oy, oz, n, bad);
          }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    JT_OK(e, jitk_device_free(e, dz, NULL));
    free(hx);
    free(hy);
    free(hz);
  }
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* Reversed views (innermost stride -1) on the vector path: x reversed,
 * and z reversed too, at every offset from 0 to 3 elements, so that their
 * groups are read and written backwards, aligned or one element at a time,
 * beside forward arrays; every element checked, and nothing outside z
 * written. */
Test(elementwise, reversed_vectors) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e,
        jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y * (T)(i % 8)", "rev", NULL, &k));
  const jitk_dtype dts[] = {JITK_FLOAT32, JITK_FLOAT16, JITK_INT8};
  const size_t lengths[] = {5, 19, 100003};
  uint64_t seed = 0x4E7;
  for (int t = 0; t < 3; t++) {
    jitk_dtype d = dts[t];
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info(d, &info));
    const size_t cap = 100003 + 8;
    size_t bytes = cap * info.size;
    unsigned char *hx = malloc(bytes), *hy = malloc(bytes), *hz = malloc(bytes);
    for (size_t i = 0; i < cap; i++) {
      write_random(hx, d, i, &seed);
      write_random(hy, d, i, &seed);
      if (d == JITK_INT8) {
        ((int8_t *)hx)[i] /= 4;
        ((int8_t *)hy)[i] /= 8;
      }
    }
    unsigned char *dx = jt_dev_alloc(e, bytes), *dy = jt_dev_alloc(e, bytes),
                  *dz = jt_dev_alloc(e, bytes);
    jt_to_dev(e, dx, hx, bytes);
    jt_to_dev(e, dy, hy, bytes);
    for (int zrev = 0; zrev < 2; zrev++)
      for (int ox = 0; ox < 4; ox++)
        for (int oz = 0; oz < 4; oz++)
          for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            size_t n = lengths[li];
            jt_poison(e, dz, bytes);
            int64_t shape[1] = {(int64_t)n}, back[1] = {-1};
            /* x[i] is element ox + n - 1 - i of its buffer; z's likewise
             * when reversed. */
            DLTensor tx = jt_tensor(dx + (ox + n - 1) * info.size, d, 1, shape, back);
            DLTensor ty = jt_tensor(dy, d, 1, shape, NULL);
            DLTensor tz = zrev ? jt_tensor(dz + (oz + n - 1) * info.size, d, 1, shape, back)
                               : jt_tensor(dz + oz * info.size, d, 1, shape, NULL);
            jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
            JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
            jt_to_host(e, hz, dz, bytes);
            for (size_t i = 0; i < n; i++) {
              double x = jt_read_real(hx, d, (size_t)ox + n - 1 - i), y = jt_read_real(hy, d, i);
              size_t zi = zrev ? (size_t)oz + n - 1 - i : (size_t)oz + i;
              double want = x + y * (double)(i % 8), got = jt_read_real(hz, d, zi);
              double tol = add_tolerance(d, fabs(x) + fabs(y) * 8);
              if (d == JITK_INT8) want = (double)(int8_t)(int)want;
              if (!(fabs(got - want) <= tol))
                cr_assert_fail("%s, z %s, offsets %d %d, %zu elements: element %zu is %g, want %g",
                               info.name, zrev ? "reversed" : "forward", ox, oz, n, i, got, want);
            }
            size_t first = (size_t)oz * info.size;
            size_t bad = written_outside(hz, bytes, first, first + n * info.size);
            cr_assert(bad == bytes, "%s, offsets %d %d, %zu elements: byte %zu outside z written",
                      info.name, ox, oz, n, bad);
          }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    JT_OK(e, jitk_device_free(e, dz, NULL));
    free(hx);
    free(hy);
    free(hz);
  }
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* Stepped inputs (x[::2], x[::3], x[::4]) on the vector path, their groups
 * read as whole vectors: views that end at the very end of their
 * allocation (so that memcheck sees any read past the view), at every
 * offset from 0 to 3 elements, on lengths that do and do not fill whole
 * groups. */
Test(elementwise, stepped_inputs) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "stepped", NULL, &k));
  const jitk_dtype dts[] = {JITK_FLOAT32, JITK_FLOAT16, JITK_INT8};
  const size_t lengths[] = {16, 23, 4096, 100000};
  uint64_t seed = 0x57E9;
  for (int t = 0; t < 3; t++) {
    jitk_dtype d = dts[t];
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info(d, &info));
    for (int64_t step = 2; step <= 4; step++)
      for (int off = 0; off < 4; off++)
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
          size_t n = lengths[li], xn = (size_t)off + (size_t)step * (n - 1) + 1;
          unsigned char *hx = malloc(xn * info.size), *hy = malloc(n * info.size),
                        *hz = malloc(n * info.size);
          for (size_t i = 0; i < xn; i++) write_random(hx, d, i, &seed);
          for (size_t i = 0; i < n; i++) write_random(hy, d, i, &seed);
          if (d == JITK_INT8) {
            for (size_t i = 0; i < xn; i++) ((int8_t *)hx)[i] /= 4;
            for (size_t i = 0; i < n; i++) ((int8_t *)hy)[i] /= 4;
          }
          unsigned char *dx = jt_dev_alloc(e, xn * info.size), *dy = jt_dev_alloc(e, n * info.size),
                        *dz = jt_dev_alloc(e, n * info.size);
          jt_to_dev(e, dx, hx, xn * info.size);
          jt_to_dev(e, dy, hy, n * info.size);
          jt_poison(e, dz, n * info.size);
          int64_t shape[1] = {(int64_t)n}, strides[1] = {step};
          DLTensor tx = jt_tensor(dx + (size_t)off * info.size, d, 1, shape, strides);
          DLTensor ty = jt_tensor(dy, d, 1, shape, NULL), tz = jt_tensor(dz, d, 1, shape, NULL);
          jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
          JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
          jt_to_host(e, hz, dz, n * info.size);
          for (size_t i = 0; i < n; i++) {
            double x = jt_read_real(hx, d, (size_t)off + (size_t)step * i),
                   y = jt_read_real(hy, d, i);
            double want = x + y, got = jt_read_real(hz, d, i);
            double tol = add_tolerance(d, fabs(x) + fabs(y));
            if (!(fabs(got - want) <= tol))
              cr_assert_fail("%s, step %lld, offset %d, %zu elements: element %zu is %g, want %g",
                             info.name, (long long)step, off, n, i, got, want);
          }
          JT_OK(e, jitk_device_free(e, dx, NULL));
          JT_OK(e, jitk_device_free(e, dy, NULL));
          JT_OK(e, jitk_device_free(e, dz, NULL));
          free(hx);
          free(hy);
          free(hz);
        }
  }
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* Permuted 3-D and 4-D views (x = buffer.transpose(perm)) that no
 * collapsing brings down to two dimensions: every permutation of a 3-D and
 * of a 4-D buffer whose extents do not divide the tiles, with y a full
 * array broadcast along one dimension of the view (a different one for
 * each permutation, so that it is at times constant along the tile's
 * rows), and z = x + y * (i % 8), which checks the element index through
 * the batches of tiles. Where the tiled path applies (the outputs' inner
 * extent and x's contiguous extent both at least 16) it must be the one
 * taken. */
Test(elementwise, tiled_permutations) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *k = NULL;
  JT_OK(e,
        jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y * (T)(i % 8)", "perm", NULL, &k));
  const jitk_dtype dts[] = {JITK_FLOAT32, JITK_FLOAT16, JITK_FLOAT64};
  const int64_t buf3[3] = {70, 33, 100}, buf4[4] = {5, 70, 3, 66};
  uint64_t seed = 0x7E23;
  int tiled_runs = 0;
  for (int t = 0; t < 3; t++) {
    jitk_dtype d = dts[t];
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info(d, &info));
    for (int nd = 3; nd <= 4; nd++) {
      const int64_t *bs = nd == 3 ? buf3 : buf4;
      size_t n = 1;
      for (int a = 0; a < nd; a++) n *= (size_t)bs[a];
      size_t bytes = n * info.size;
      unsigned char *hx = malloc(bytes), *hy = malloc(bytes), *hz = malloc(bytes);
      for (size_t i = 0; i < n; i++) {
        write_random(hx, d, i, &seed);
        write_random(hy, d, i, &seed);
      }
      unsigned char *dx = jt_dev_alloc(e, bytes), *dy = jt_dev_alloc(e, bytes),
                    *dz = jt_dev_alloc(e, bytes);
      jt_to_dev(e, dx, hx, bytes);
      jt_to_dev(e, dy, hy, bytes);
      int64_t bstr[4];
      bstr[nd - 1] = 1;
      for (int a = nd - 2; a >= 0; a--) bstr[a] = bstr[a + 1] * bs[a + 1];
      /* Every permutation, in lexicographic order. */
      int perm[4] = {0, 1, 2, 3};
      for (int count = 0;; count++) {
        int64_t vs[4], xs[4], ys[4];
        for (int j = 0; j < nd; j++) {
          vs[j] = bs[perm[j]];
          xs[j] = bstr[perm[j]];
        }
        int bd = count % nd; /* y's broadcast dimension */
        ys[nd - 1] = 1;
        for (int j = nd - 2; j >= 0; j--) ys[j] = ys[j + 1] * vs[j + 1];
        ys[bd] = 0;
        jt_poison(e, dz, bytes);
        DLTensor tx = jt_tensor(dx, d, nd, vs, xs), ty = jt_tensor(dy, d, nd, vs, ys);
        DLTensor tz = jt_tensor(dz, d, nd, vs, NULL);
        jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
        JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
        jt_to_host(e, hz, dz, bytes);
        int xunit = -1;
        for (int j = 0; j < nd; j++)
          if (xs[j] == 1) xunit = j;
        if (xunit != nd - 1 && vs[xunit] >= 16 && vs[nd - 1] >= 16) {
          const char *src = NULL;
          JT_OK(e, jitk_elementwise_source(k, &src));
          cr_assert(strstr(src, "tiled path") != NULL, "%s, %d-D permutation %d %d %d %d: %s",
                    info.name, nd, perm[0], perm[1], perm[2], perm[3], src);
          tiled_runs++;
        }
        for (size_t i = 0; i < n; i++) {
          size_t r = i, xo = 0, yo = 0;
          for (int j = nd - 1; j >= 0; j--) {
            size_t c = r % (size_t)vs[j];
            r /= (size_t)vs[j];
            xo += c * (size_t)xs[j];
            yo += c * (size_t)ys[j];
          }
          double x = jt_read_real(hx, d, xo), y = jt_read_real(hy, d, yo);
          double want = x + y * (double)(i % 8), got = jt_read_real(hz, d, i);
          if (!(fabs(got - want) <= add_tolerance(d, fabs(x) + fabs(y) * 8)))
            cr_assert_fail(
                "%s, %d-D permutation %d %d %d %d, y broadcast along %d: element %zu "
                "is %g, want %g",
                info.name, nd, perm[0], perm[1], perm[2], perm[3], bd, i, got, want);
        }
        /* The next permutation (Narayana's algorithm); done after the
         * last. */
        int a = nd - 2;
        while (a >= 0 && perm[a] > perm[a + 1]) a--;
        if (a < 0) break;
        int b = nd - 1;
        while (perm[b] < perm[a]) b--;
        int tmp = perm[a];
        perm[a] = perm[b];
        perm[b] = tmp;
        for (int lo = a + 1, hi = nd - 1; lo < hi; lo++, hi--) {
          tmp = perm[lo];
          perm[lo] = perm[hi];
          perm[hi] = tmp;
        }
      }
      JT_OK(e, jitk_device_free(e, dx, NULL));
      JT_OK(e, jitk_device_free(e, dy, NULL));
      JT_OK(e, jitk_device_free(e, dz, NULL));
      free(hx);
      free(hy);
      free(hz);
    }
  }
  /* The 4-D buffer alone has permutations that put its 66 contiguous
   * elements along a tile's rows and its 70 along the outputs. */
  cr_assert(tiled_runs >= 3 * 4, "%d runs were tiled", tiled_runs);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* Tiles of element pairs: 2-byte transposes (x a transposed view) whose
 * every array allows 4-byte accesses take them; float16 and int16 x + y,
 * a bfloat16 z = z + x * b with z read and b a bias broadcast along the
 * rows, a batched 3-D float16 permutation, and, on single elements, odd
 * extents and a view one element off. Every element against the host;
 * nothing written outside z (its poison around it survives). */
Test(elementwise, tiles_of_pairs) {
  jitk_engine *e = jt_gpu_engine();
  jitk_elementwise *kadd = NULL, *kfma = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "padd", NULL, &kadd));
  JT_OK(e, jitk_elementwise_create(e, "T x, T b", "T z", "z = z + x * b", "pfma", NULL, &kfma));
  struct {
    jitk_dtype d;
    int nd;
    int64_t shape[3]; /* the view's; x is a (B, C, R) buffer seen as (B, R, C) */
    int x_off;        /* elements */
    bool fma, pairs;
  } cases[] = {
      {JITK_FLOAT16, 2, {300, 512}, 0, false, true},
      {JITK_INT16, 2, {64, 1000}, 0, false, true},
      {JITK_BFLOAT16, 2, {128, 96}, 0, true, true},
      {JITK_FLOAT16, 3, {6, 64, 50}, 0, false, true},
      {JITK_FLOAT16, 2, {301, 511}, 0, false, false},
      {JITK_FLOAT16, 2, {300, 512}, 1, false, false},
  };
  uint64_t seed = 0x9A12;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jitk_dtype d = cases[c].d;
    int nd = cases[c].nd;
    int64_t R = cases[c].shape[nd - 2], C = cases[c].shape[nd - 1];
    int64_t B = nd == 3 ? cases[c].shape[0] : 1;
    size_t n = (size_t)(B * R * C), isz = jt_dtype_size(d), off = (size_t)cases[c].x_off;
    unsigned char *hx = malloc((n + off) * isz), *hy = malloc(n * isz), *hz0 = malloc(n * isz),
                  *hz = malloc((n + 64) * isz);
    for (size_t i = 0; i < n + off; i++) write_random(hx, d, i, &seed);
    for (size_t i = 0; i < n; i++) {
      write_random(hy, d, i, &seed);
      write_random(hz0, d, i, &seed);
    }
    unsigned char *dx = jt_dev_alloc(e, (n + off) * isz), *dy = jt_dev_alloc(e, n * isz),
                  *dz = jt_dev_alloc(e, (n + 64) * isz);
    jt_to_dev(e, dx, hx, (n + off) * isz);
    jt_to_dev(e, dy, hy, n * isz);
    jt_poison(e, dz, (n + 64) * isz);
    unsigned char *z = dz + 32 * isz; /* poison on both sides */
    if (cases[c].fma) jt_to_dev(e, z, hz0, n * isz);
    int64_t vs[3], xs[3], ys[3];
    for (int a = 0; a < nd; a++) vs[a] = cases[c].shape[a];
    /* x: buffer (B, C, R) with (B, R, C) strides (R C, 1, R). */
    xs[nd - 2] = 1;
    xs[nd - 1] = R;
    if (nd == 3) xs[0] = R * C;
    /* y: contiguous, or for the fma the bias b of C values along the rows. */
    ys[nd - 1] = 1;
    ys[nd - 2] = cases[c].fma ? 0 : C;
    if (nd == 3) ys[0] = R * C;
    DLTensor tx = jt_tensor(dx + off * isz, d, nd, vs, xs), ty = jt_tensor(dy, d, nd, vs, ys),
             tz = jt_tensor(z, d, nd, vs, NULL);
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
    jitk_elementwise *k = cases[c].fma ? kfma : kadd;
    JT_OK(e, jitk_elementwise_launch(k, NULL, args, 3, -1, NULL));
    const char *src = NULL;
    JT_OK(e, jitk_elementwise_source(k, &src));
    cr_assert(strstr(src, "tiled path") != NULL, "case %zu: %.100s", c, src);
    cr_assert_eq(strstr(src, "element pairs") != NULL, cases[c].pairs, "case %zu: %.100s", c, src);
    jt_to_host(e, hz, dz, (n + 64) * isz);
    cr_assert_eq(written_outside(hz, (n + 64) * isz, 32 * isz, (n + 32) * isz), (n + 64) * isz,
                 "case %zu wrote outside z", c);
    for (size_t i = 0; i < n; i++) {
      size_t b = i / (size_t)(R * C), r = i / (size_t)C % (size_t)R, col = i % (size_t)C;
      size_t xo = off + b * (size_t)(R * C) + col * (size_t)R + r;
      size_t yo = b * (size_t)(R * C) + (cases[c].fma ? col : r * (size_t)C + col);
      double x = jt_read_real(hx, d, xo), y = jt_read_real(hy, d, yo);
      double want = cases[c].fma ? jt_read_real(hz0, d, i) + x * y : x + y;
      double got = jt_read_real(hz, d, i + 32);
      double mag = fabs(want) + fabs(x) + fabs(y) * (cases[c].fma ? fabs(x) : 1);
      double tol = d == JITK_BFLOAT16 ? 1e-2 * mag + 1e-2 : add_tolerance(d, mag);
      if (!(fabs(got - want) <= tol))
        cr_assert_fail("case %zu, element %zu (batch %zu, row %zu, column %zu): %g, want %g", c, i,
                       b, r, col, got, want);
    }
    JT_OK(e, jitk_device_free(e, dx, NULL));
    JT_OK(e, jitk_device_free(e, dy, NULL));
    JT_OK(e, jitk_device_free(e, dz, NULL));
    free(hx);
    free(hy);
    free(hz0);
    free(hz);
  }
  jitk_elementwise_destroy(kadd);
  jitk_elementwise_destroy(kfma);
  jitk_engine_destroy(e);
}
