/*
 * jitk-bench elementwise: generated elementwise kernels against the
 * device-to-device copy bandwidth measured in the same run, and the host
 * cost of launching a cached one against a bare cuLaunchKernel.
 *
 * Each case runs on fresh random data (written by a jitk kernel), with its
 * output poisoned first and every element checked against a reference
 * computed on the host in double precision afterwards. Times are CUDA
 * events around one launch, the median of 20 after 3 of warm-up; the bytes
 * counted are each input read once and each output written once.
 *
 *   jitk-bench elementwise [--json FILE] [--elements N]
 *
 * `jitk-bench compile` measures NVRTC's cold compile of generated float32
 * and complex64 kernels with the cache off, on any machine.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "base/base.h"
#include "kernels/kernels.h"

#define CHECK(e, call) BENCH_CHECK(e, call)

/* Median milliseconds of one launch over 20 runs, after 3 of warm-up. */
static double time_launch(jitk_engine *e, jitk_elementwise *k, const jitk_arg *args, size_t n) {
  CUevent a, b;
  e->drv.cuEventCreate(&a, CU_EVENT_DEFAULT);
  e->drv.cuEventCreate(&b, CU_EVENT_DEFAULT);
  for (int i = 0; i < 3; i++) CHECK(e, jitk_elementwise_launch(k, NULL, args, n, -1, NULL));
  double t[20];
  for (int i = 0; i < 20; i++) {
    e->drv.cuEventRecord(a, NULL);
    CHECK(e, jitk_elementwise_launch(k, NULL, args, n, -1, NULL));
    e->drv.cuEventRecord(b, NULL);
    e->drv.cuEventSynchronize(b);
    float ms = 0;
    e->drv.cuEventElapsedTime(&ms, a, b);
    t[i] = ms;
  }
  e->drv.cuEventDestroy(a);
  e->drv.cuEventDestroy(b);
  return bench_median(t, 20);
}

/* How far results are from the double reference, relative to the
 * dtype's rounding: the count of elements beyond `ulps` units. */
static size_t count_bad(const double *got, const double *want, size_t n, jitk_dtype d) {
  double eps = d == JITK_FLOAT32 ? 1.2e-7 : d == JITK_FLOAT16 ? 9.8e-4 : 7.9e-3;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= 2 * eps * fabs(want[i]) + 1e-30)) bad++;
  return bad;
}

int bench_elementwise(int argc, char **argv) {
  bench_session bs;
  int skipped = bench_open("elementwise", argc, argv, &bs);
  if (skipped) return skipped;
  jitk_engine *e = bs.engine;
  jitk_kernel *empty = bs.empty;
  const char *json = bs.json;
  int64_t n = bs.elements;
  double copy = bs.copy_gbs;

  jitk_elementwise *fill = bench_fill_create(e), *add, *saxpy, *bias_relu;
  CHECK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "add", NULL, &add));
  CHECK(e, jitk_elementwise_create(e, "T a, T x", "T y", "y = a * x + y", "saxpy", NULL, &saxpy));
  CHECK(e, jitk_elementwise_create(e, "T x, T b", "T y", "y = max(x + b, (T)0)", "bias_relu", NULL,
                                   &bias_relu));

  bench_row rows[28];
  char notes[28][96];
  int nr = 0;
  rows[nr++] = (bench_row){"device-to-device copy, 1 GiB (read+write)", copy, "GB/s", ""};
  size_t total_bad = 0;

  /* z = x + y and y = a * x + y over n elements of each float dtype. */
  jitk_dtype dts[] = {JITK_FLOAT32, JITK_FLOAT16, JITK_BFLOAT16};
  const char *dnames[] = {"float32", "float16", "bfloat16"};
  for (int t = 0; t < 3; t++) {
    bench_array x, y, z;
    bench_array_make(&x, e, dts[t], 1, n, 0);
    bench_array_make(&y, e, dts[t], 1, n, 0);
    bench_array_make(&z, e, dts[t], 1, n, 0);
    bench_fill_random(e, fill, &x, 11u + (uint32_t)t);
    bench_fill_random(e, fill, &y, 23u + (uint32_t)t);
    CHECK(e, jitk_memset(e, z.data, 0xFF, bench_array_bytes(&z), NULL));
    jitk_arg args[] = {jitk_arg_array(&x.t), jitk_arg_array(&y.t), jitk_arg_array(&z.t)};
    double ms = time_launch(e, add, args, 3);
    size_t isz = dts[t] == JITK_FLOAT32 ? 4 : 2;
    double gbs = 3.0 * (double)n * (double)isz / (ms * 1e-3) / 1e9;
    double *hx = bench_array_to_host(e, &x), *hy = bench_array_to_host(e, &y);
    double *hz = bench_array_to_host(e, &z);
    for (int64_t i = 0; i < n; i++) hx[i] += hy[i];
    size_t bad = count_bad(hz, hx, (size_t)n, dts[t]);
    total_bad += bad;
    snprintf(notes[nr], sizeof notes[nr], "%.3f of copy; %zu wrong", gbs / copy, bad);
    static char names[3][64];
    snprintf(names[t], sizeof names[t], "%s z = x + y, 2^%d", dnames[t], (int)log2((double)n));
    rows[nr] = (bench_row){names[t], gbs, "GB/s", notes[nr]};
    nr++;
    free(hx);
    free(hy);
    free(hz);
    if (t == 0) {
      /* saxpy in place: y = a * x + y; y is read and written. */
      double *y0 = bench_array_to_host(e, &y), *x0 = bench_array_to_host(e, &x);
      jitk_arg sargs[] = {jitk_arg_f32(1.5f), jitk_arg_array(&x.t), jitk_arg_array(&y.t)};
      CHECK(e, jitk_elementwise_launch(saxpy, NULL, sargs, 3, -1, NULL));
      double *y1 = bench_array_to_host(e, &y);
      for (int64_t i = 0; i < n; i++) y0[i] = 1.5 * x0[i] + y0[i];
      bad = count_bad(y1, y0, (size_t)n, JITK_FLOAT32);
      total_bad += bad;
      double sms = time_launch(e, saxpy, sargs, 3);
      double sgbs = 3.0 * (double)n * 4 / (sms * 1e-3) / 1e9;
      snprintf(notes[nr], sizeof notes[nr], "%.3f of copy; %zu wrong", sgbs / copy, bad);
      rows[nr] = (bench_row){"float32 y = a*x + y (in place), 2^28", sgbs, "GB/s", notes[nr]};
      nr++;
      free(y0);
      free(x0);
      free(y1);
    }
    if (t == 0) {
      /* The same kernel with other shapes of work: how many 16-byte
       * groups a thread loads before computing, and whether the grid
       * fills the device once and strides (the default) or has one thread
       * per group of groups. The default is one-shot, unroll 1. */
      static const int unrolls[] = {1, 4, 8, 2, 4};
      static const char *grids[] = {"fill", "fill", "fill", "oneshot", "oneshot"};
      static char unames[5][64], unotes[5][64];
      for (int u = 0; u < 5; u++) {
        char val[8];
        snprintf(val, sizeof val, "%d", unrolls[u]);
        setenv("JITK_EW_UNROLL", val, 1);
        setenv("JITK_EW_GRID", grids[u], 1);
        jitk_elementwise *ku;
        char kname[32];
        snprintf(kname, sizeof kname, "add_%s_u%d", grids[u], unrolls[u]);
        CHECK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", kname, NULL, &ku));
        unsetenv("JITK_EW_UNROLL");
        unsetenv("JITK_EW_GRID");
        CHECK(e, jitk_memset(e, z.data, 0xFF, bench_array_bytes(&z), NULL));
        double ums = time_launch(e, ku, args, 3);
        double ugbs = 3.0 * (double)n * 4 / (ums * 1e-3) / 1e9;
        double *hx2 = bench_array_to_host(e, &x), *hy2 = bench_array_to_host(e, &y);
        double *hz2 = bench_array_to_host(e, &z);
        for (int64_t i = 0; i < n; i++) hx2[i] += hy2[i];
        size_t ubad = count_bad(hz2, hx2, (size_t)n, JITK_FLOAT32);
        total_bad += ubad;
        free(hx2);
        free(hy2);
        free(hz2);
        snprintf(unames[u], sizeof unames[u], "float32 z = x + y, %s grid, unroll %d", grids[u],
                 unrolls[u]);
        snprintf(unotes[u], sizeof unotes[u], "%.3f of copy; %zu wrong", ugbs / copy, ubad);
        rows[nr++] = (bench_row){unames[u], ugbs, "GB/s", unotes[u]};
        jitk_elementwise_destroy(ku);
      }
    }
    CHECK(e, jitk_device_free(e, x.data, NULL));
    CHECK(e, jitk_device_free(e, y.data, NULL));
    CHECK(e, jitk_device_free(e, z.data, NULL));
  }

  /* bias+ReLU on 16384 x 16384 float32, bias along rows; then reading x
   * through a transposed view. */
  const int64_t R = 16384, C = 16384;
  bench_array x, b, y;
  bench_array_make(&x, e, JITK_FLOAT32, 2, R, C);
  bench_array_make(&b, e, JITK_FLOAT32, 1, C, 0);
  bench_array_make(&y, e, JITK_FLOAT32, 2, R, C);
  bench_fill_random(e, fill, &x, 31);
  bench_fill_random(e, fill, &b, 37);
  double *hx = bench_array_to_host(e, &x), *hb = bench_array_to_host(e, &b);
  /* Each case also with a device-filling grid, and the transposed case
   * with tiles of 32 (the default: one-shot grids, tiles of 64). */
  jitk_elementwise *bias_relu_fill, *bias_relu_t32;
  setenv("JITK_EW_GRID", "fill", 1);
  CHECK(e, jitk_elementwise_create(e, "T x, T b", "T y", "y = max(x + b, (T)0)", "bias_relu_fill",
                                   NULL, &bias_relu_fill));
  unsetenv("JITK_EW_GRID");
  setenv("JITK_EW_TILE", "32", 1);
  CHECK(e, jitk_elementwise_create(e, "T x, T b", "T y", "y = max(x + b, (T)0)", "bias_relu_t32",
                                   NULL, &bias_relu_t32));
  unsetenv("JITK_EW_TILE");
  for (int run = 0; run < 5; run++) {
    int view = run >= 2;
    jitk_elementwise *kinds[5] = {bias_relu, bias_relu_fill, bias_relu, bias_relu_fill,
                                  bias_relu_t32};
    jitk_elementwise *kb = kinds[run];
    DLTensor tx = x.t;
    int64_t tstrides[2] = {1, C};
    if (view == 1) tx.strides = tstrides; /* x(i, j) = stored[j][i] */
    CHECK(e, jitk_memset(e, y.data, 0xFF, (size_t)(R * C) * 4, NULL));
    jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&b.t), jitk_arg_array(&y.t)};
    double ms = time_launch(e, kb, args, 3);
    double gbs = 2.0 * (double)(R * C) * 4 / (ms * 1e-3) / 1e9;
    double *hy = bench_array_to_host(e, &y);
    size_t bad = 0;
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++) {
        double xv = view ? hx[j * C + i] : hx[i * C + j];
        double want = (double)((float)xv + (float)hb[j]);
        if (want < 0) want = 0;
        if (hy[i * C + j] != want) bad++;
      }
    total_bad += bad;
    free(hy);
    snprintf(notes[nr], sizeof notes[nr], "%.3f of copy; %zu wrong", gbs / copy, bad);
    static const char *bnames[5] = {"float32 bias+ReLU, bias along rows, 16384^2",
                                    "float32 bias+ReLU, bias along rows, fill grid",
                                    "float32 bias+ReLU, x a transposed view, 16384^2",
                                    "float32 bias+ReLU, transposed, fill grid",
                                    "float32 bias+ReLU, transposed, tiles of 32"};
    rows[nr] = (bench_row){bnames[run], gbs, "GB/s", notes[nr]};
    nr++;
  }
  jitk_elementwise_destroy(bias_relu_fill);
  jitk_elementwise_destroy(bias_relu_t32);
  free(hx);
  free(hb);
  CHECK(e, jitk_device_free(e, x.data, NULL));
  CHECK(e, jitk_device_free(e, b.data, NULL));
  CHECK(e, jitk_device_free(e, y.data, NULL));

  /* Host cost of launching a cached kernel (z = x + y on 1024 elements)
   * against a bare cuLaunchKernel of an empty kernel, measured alike. */
  bench_array sx, sy, sz;
  bench_array_make(&sx, e, JITK_FLOAT32, 1, 1024, 0);
  bench_array_make(&sy, e, JITK_FLOAT32, 1, 1024, 0);
  bench_array_make(&sz, e, JITK_FLOAT32, 1, 1024, 0);
  bench_fill_random(e, fill, &sx, 41);
  bench_fill_random(e, fill, &sy, 43);
  jitk_arg sargs[] = {jitk_arg_array(&sx.t), jitk_arg_array(&sy.t), jitk_arg_array(&sz.t)};
  CHECK(e, jitk_elementwise_launch(add, NULL, sargs, 3, -1, NULL));
  double bare_us, raw_us;
  bench_launch_overhead(e, empty, NULL, 0, NULL, &bare_us, &raw_us);
  enum { ROUNDS = 1000, PER = 100 };
  double *tt = malloc(ROUNDS * sizeof *tt);
  for (int i = 0; i < 2000; i++) jitk_elementwise_launch(add, NULL, sargs, 3, -1, NULL);
  CHECK(e, jitk_stream_synchronize(e, NULL));
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < PER; i++) jitk_elementwise_launch(add, NULL, sargs, 3, -1, NULL);
    tt[r] = (bench_now_us() - t0) / PER;
    CHECK(e, jitk_stream_synchronize(e, NULL));
  }
  double ew_us = bench_median(tt, ROUNDS);
  /* The same through jitk_elementwise_launch_ex with a block size of the
   * caller's (CuPy's block_size=), which must cost no more. */
  jitk_launch_options lo;
  jitk_launch_options_init(&lo);
  lo.block_size = 128;
  CHECK(e, jitk_elementwise_launch_ex(add, NULL, sargs, 3, &lo, NULL));
  for (int i = 0; i < 2000; i++) jitk_elementwise_launch_ex(add, NULL, sargs, 3, &lo, NULL);
  CHECK(e, jitk_stream_synchronize(e, NULL));
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < PER; i++) jitk_elementwise_launch_ex(add, NULL, sargs, 3, &lo, NULL);
    tt[r] = (bench_now_us() - t0) / PER;
    CHECK(e, jitk_stream_synchronize(e, NULL));
  }
  double ex_us = bench_median(tt, ROUNDS);
  free(tt);
  rows[nr++] = (bench_row){"bare cuLaunchKernel, empty kernel", bare_us, "us/launch", ""};
  snprintf(notes[nr], sizeof notes[nr], "%.3fx bare", ew_us / bare_us);
  rows[nr] =
      (bench_row){"jitk_elementwise_launch, cached z = x + y", ew_us, "us/launch", notes[nr]};
  nr++;
  snprintf(notes[nr], sizeof notes[nr], "%.3fx bare", ex_us / bare_us);
  rows[nr] =
      (bench_row){"jitk_elementwise_launch_ex, block_size 128", ex_us, "us/launch", notes[nr]};
  nr++;
  CHECK(e, jitk_device_free(e, sx.data, NULL));
  CHECK(e, jitk_device_free(e, sy.data, NULL));
  CHECK(e, jitk_device_free(e, sz.data, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));

  char title[300];
  snprintf(title, sizeof title, "elementwise on %s (%d SMs)", e->info.name,
           e->info.multiprocessors);
  bench_print(title, rows, (size_t)nr, json);
  if (total_bad) printf("jitk-bench elementwise: %zu WRONG ELEMENTS\n", total_bad);
  jitk_elementwise_destroy(fill);
  jitk_elementwise_destroy(add);
  jitk_elementwise_destroy(saxpy);
  jitk_elementwise_destroy(bias_relu);
  bench_close(&bs);
  return total_bad ? 1 : 0;
}

int bench_compile(int argc, char **argv) {
  (void)argc;
  (void)argv;
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = JITK_CACHE_OFF;
  jitk_engine *e = NULL;
  CHECK(NULL, jitk_engine_create(&cfg, &e));
  const char *types[] = {"T=float32", "T=float16", "T=complex64", "T=float32"};
  const char *names[] = {"NVRTC, generated float32 z = x + y", "NVRTC, generated float16 z = x + y",
                         "NVRTC, generated complex64 z = x * y",
                         "NVRTC, generated float32 reduction sum(x*x)"};
  const char *goals[] = {"median of 7, cache off; goal <= 50 ms", "median of 7, cache off",
                         "median of 7, cache off; goal <= 150 ms",
                         "median of 7, cache off; goal <= 80 ms"};
  bench_row rows[4];
  for (int t = 0; t < 4; t++) {
    double times[7];
    for (int r = 0; r < 7; r++) {
      /* A new name each time: a new source, so a real compile rather
       * than a hit in the engine's table. */
      char kname[32];
      snprintf(kname, sizeof kname, "k%d_%d", t, r);
      const char *src;
      double t0;
      if (t < 3) {
        jitk_elementwise *k = NULL;
        CHECK(e, jitk_elementwise_create(e, "T x, T y", "T z", t == 2 ? "z = x * y" : "z = x + y",
                                         kname, NULL, &k));
        t0 = bench_now_us();
        CHECK(e, jitk_elementwise_compile(k, types[t], NULL, &src, NULL));
        times[r] = (bench_now_us() - t0) / 1000.0;
        jitk_elementwise_destroy(k);
      } else {
        jitk_reduction *k = NULL;
        CHECK(e, jitk_reduction_create(e, "T x", "T y", "x * x", "a + b", "y = a", "0", NULL, kname,
                                       NULL, &k));
        t0 = bench_now_us();
        CHECK(e, jitk_reduction_compile(k, types[t], NULL, &src, NULL));
        times[r] = (bench_now_us() - t0) / 1000.0;
        jitk_reduction_destroy(k);
      }
    }
    rows[t] = (bench_row){names[t], bench_median(times, 7), "ms", goals[t]};
  }
  bench_print("compile (cold NVRTC, sm_90)", rows, 4, NULL);
  jitk_engine_destroy(e);
  return 0;
}
