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
 * `jitk-bench compile` measures compiles with the cache off, on any
 * machine: below.
 */
#include <jitk/jitk.h>

#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/*
 * jitk-bench compile: how long a compile takes with the cache off, for the
 * kernels jitk generates and for raw ones, beside NVRTC compiling a bare
 * extern "C" kernel in the same run (the baseline of issue 15's figures).
 *
 *   jitk-bench compile [--reps N] [--settle SECONDS] [--no-first] [--json FILE]
 *
 * In this process ("warm": NVRTC and the headers already read once), each
 * kind is compiled with precompiled headers off and on, in rounds that
 * take every kind in turn, each compile beside one of the bare kernel by
 * NVRTC alone; a new kernel name each time makes a new source, so every
 * figure is a real compile. With
 * them on, the first compile of a kind's headers is reported on its own
 * row: on a machine of two CPUs or more it compiles plainly while a thread
 * of the engine makes the file, which the rows after it wait for. Then, unless --no-first, each kind's first
 * compile in a fresh process (this program run again), once after the
 * CUDA headers and the NVRTC libraries are evicted from the page cache
 * (posix_fadvise DONTNEED on every file, which needs no privileges), once
 * without. Those processes compile without precompiled headers, which a
 * first compile cannot load, and without the cache: the figure is the
 * compile's.
 */
enum {
  CK_BARE,
  CK_EW_F32,
  CK_EW_F16,
  CK_EW_BF16,
  CK_EW_C64,
  CK_RED_F32,
  CK_HAND_RED,
  CK_CUB,
  CK_COUNT
};
static const char *const ck_names[CK_COUNT] = {"bare extern \"C\" kernel",
                                               "float32 z = x + y",
                                               "float16 z = x + y",
                                               "bfloat16 z = x + y",
                                               "complex64 z = x * y",
                                               "float32 sum(x*x)",
                                               "hand-written sum(x*x), NVRTC alone",
                                               "raw kernel with CUB block reduce"};
static const char *const ck_args[CK_COUNT] = {"bare", "f32", "f16",  "bf16",
                                              "c64",  "red", "hand", "cub"};

/* A reduction written by hand for the same work as the generated
 * `sum(x*x)`: each block reduces the rows it is given, four floats a load,
 * through warp shuffles and shared memory, as anyone would write it. It is
 * compiled by NVRTC alone, beside the generated one, because what such a
 * kernel costs NVVM and ptxas is the floor a generated reduction can
 * approach: a bare kernel has no loop and no shuffles. */
static const char hand_reduction[] =
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "%s(unsigned rows, unsigned units, const float4 *x, int sx, float *y, int sy) {\n"
    "  __shared__ float s[8];\n"
    "  for (unsigned w = blockIdx.x; w < rows; w += gridDim.x) {\n"
    "    float acc = 0;\n"
    "    for (unsigned j = threadIdx.x; j < units; j += 256) {\n"
    "      float4 v = x[(int)w * sx + (int)j];\n"
    "      acc += v.x * v.x; acc += v.y * v.y; acc += v.z * v.z; acc += v.w * v.w;\n"
    "    }\n"
    "    for (int d = 1; d < 32; d <<= 1) acc += __shfl_down_sync(~0u, acc, d);\n"
    "    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "    if (lane == 0) s[warp] = acc;\n"
    "    __syncthreads();\n"
    "    if (warp == 0) {\n"
    "      if (lane < 8) acc = s[lane];\n"
    "      for (int d = 1; d < 8; d <<= 1) acc += __shfl_down_sync(~0u, acc, d);\n"
    "    }\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) y[(int)w * sy] = acc;\n"
    "  }\n"
    "}\n";

static double nvrtc_alone(jitk_engine *e, const char *src);

/* One compile of a new kernel of kind k (rep makes it new); its time. */
static double compile_kind(jitk_engine *e, int k, int rep, const char *tag) {
  char name[48];
  snprintf(name, sizeof name, "k%s_%d_%d", tag, k, rep);
  double t0, ms;
  if (k == CK_BARE || k == CK_CUB) {
    char src[512];
    if (k == CK_BARE)
      snprintf(src, sizeof src,
               "extern \"C\" __global__ void %s(float *x) { x[threadIdx.x] += 1; }\n", name);
    else
      snprintf(src, sizeof src,
               "#include <cub/block/block_reduce.cuh>\n"
               "extern \"C\" __global__ void %s(float *x) {\n"
               "  typedef cub::BlockReduce<float, 256> R;\n"
               "  __shared__ typename R::TempStorage t;\n"
               "  float v = R(t).Sum(x[threadIdx.x]);\n"
               "  if (threadIdx.x == 0) x[0] = v;\n"
               "}\n",
               name);
    jitk_module *m = NULL;
    t0 = bench_now_us();
    CHECK(e, jitk_module_create(e, src, NULL, &m));
    ms = (bench_now_us() - t0) / 1000.0;
    jitk_module_destroy(m);
    return ms;
  }
  if (k == CK_HAND_RED) {
    char src[2048];
    snprintf(src, sizeof src, hand_reduction, name);
    return nvrtc_alone(e, src);
  }
  const char *src;
  if (k == CK_RED_F32) {
    jitk_reduction *r = NULL;
    CHECK(e, jitk_reduction_create(e, "T x", "T y", "x * x", "a + b", "y = a", "0", NULL, name,
                                   NULL, &r));
    t0 = bench_now_us();
    CHECK(e, jitk_reduction_compile(r, "T=float32", NULL, &src, NULL));
    ms = (bench_now_us() - t0) / 1000.0;
    jitk_reduction_destroy(r);
    return ms;
  }
  static const char *const types[] = {"", "T=float32", "T=float16", "T=bfloat16", "T=complex64"};
  jitk_elementwise *w = NULL;
  CHECK(e, jitk_elementwise_create(e, "T x, T y", "T z", k == CK_EW_C64 ? "z = x * y" : "z = x + y",
                                   name, NULL, &w));
  t0 = bench_now_us();
  CHECK(e, jitk_elementwise_compile(w, types[k], NULL, &src, NULL));
  ms = (bench_now_us() - t0) / 1000.0;
  jitk_elementwise_destroy(w);
  return ms;
}

/* NVRTC alone on `src`, with the options jitk gives it; its time. */
static double nvrtc_alone(jitk_engine *e, const char *src) {
  char **opts = NULL;
  size_t n = 0;
  CHECK(e, jk_nvrtc_final_options(e, NULL, 0, 0, &opts, &n));
  nvrtcProgram prog;
  double t0 = bench_now_us();
  if (nvrtcCreateProgram(&prog, src, "bare.cu", 0, NULL, NULL) != NVRTC_SUCCESS ||
      nvrtcCompileProgram(prog, (int)n, (const char *const *)opts) != NVRTC_SUCCESS) {
    fprintf(stderr, "jitk-bench: NVRTC failed on a kernel it compiles alone\n");
    exit(1);
  }
  double ms = (bench_now_us() - t0) / 1000.0;
  nvrtcDestroyProgram(&prog);
  jk_options_free(e, opts, n);
  return ms;
}

/* NVRTC alone on a bare kernel: the baseline. */
static double nvrtc_bare(jitk_engine *e, int rep) {
  char src[160];
  snprintf(src, sizeof src,
           "extern \"C\" __global__ void bare%d(float *x) { x[threadIdx.x] += 1; }\n", rep);
  return nvrtc_alone(e, src);
}

/* Waits for the engine's thread that makes a precompiled header, if one
 * runs: the rows after a first compile are about loading it. */
static void wait_for_pch(jitk_engine *e) {
  jitk_pch_info info;
  for (int i = 0; i < 6000; i++) {
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(e, jitk_engine_pch_info(e, &info));
    if (!info.making) return;
    usleep(5000);
  }
}

static jitk_engine *compile_engine(jitk_pch_mode pch, jitk_cache_mode cache, const char *dir) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_mode = cache;
  cfg.cache_dir = dir;
  cfg.pch = pch;
  jitk_engine *e = NULL;
  CHECK(NULL, jitk_engine_create(&cfg, &e));
  return e;
}

static int evict_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (type != FTW_F) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  return 0;
}

/* This process's own pages of the files `libs` (NVRTC, which it has
 * run): posix_fadvise leaves pages that a process maps in the page cache,
 * so they are handed back first (MADV_PAGEOUT, Linux 5.4 and newer; this
 * process faults them in again when it next runs NVRTC). */
static void page_out_self(const char *const *libs) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) return;
  char line[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned long lo, hi;
    char path[4096];
    if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095s", &lo, &hi, path) != 3) continue;
    for (const char *const *l = libs; *l; l++) {
      char real[4096];
      if (realpath(*l, real) != NULL && strcmp(real, path) == 0)
        madvise((void *)lo, hi - lo, 21 /* MADV_PAGEOUT */);
    }
  }
  fclose(f);
}

/* Megabytes of `path` in the page cache. */
static double resident_mb(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  double mb = -1;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      long page = sysconf(_SC_PAGESIZE);
      size_t pages = ((size_t)st.st_size + (size_t)page - 1) / (size_t)page, in = 0;
      unsigned char *vec = malloc(pages);
      if (vec != NULL && mincore(map, (size_t)st.st_size, vec) == 0)
        for (size_t i = 0; i < pages; i++) in += vec[i] & 1;
      free(vec);
      munmap(map, (size_t)st.st_size);
      mb = (double)in * (double)page / (1 << 20);
    }
  }
  close(fd);
  return mb;
}

/* A fresh process's first compile of kind k: this program run again with
 * --child, after the CUDA headers and NVRTC's libraries leave the page
 * cache when `cold`. Its compile time, and the whole process's in
 * *process_ms. */
static double first_process(int k, bool cold, const char *inc, const char *const *libs,
                            double *process_ms, double *resident) {
  if (cold) {
    page_out_self(libs);
    nftw(inc, evict_one, 16, FTW_PHYS);
    for (const char *const *l = libs; *l; l++) evict_one(*l, NULL, FTW_F, NULL);
  }
  *resident = libs[0] ? resident_mb(libs[0]) : -1;
  char dir[] = "/tmp/jitk-bench-first-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("jitk-bench: mkdtemp");
    exit(1);
  }
  int fds[2];
  if (pipe(fds) != 0) exit(1);
  double t0 = bench_now_us();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "jitk-bench", "compile", "--child", ck_args[k], dir, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char out[128] = "";
  ssize_t got = read(fds[0], out, sizeof out - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  *process_ms = (bench_now_us() - t0) / 1000.0;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "jitk-bench: could not remove %s\n", dir);
  if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "jitk-bench: the first-compile process of %s failed\n", ck_args[k]);
    exit(1);
  }
  return atof(out);
}

static int compile_child(const char *kind, const char *dir) {
  int k = 0;
  while (k < CK_COUNT && strcmp(ck_args[k], kind) != 0) k++;
  if (k == CK_COUNT) return 2;
  /* A fresh process's first compile cannot load a precompiled header (a
   * file serves only the process that made it), so these rows are without
   * them: what making one beside a first compile costs is the "PCH on,
   * first" rows' business. The cache is off: its writes are not the
   * compile's. */
  jitk_engine *e = compile_engine(JITK_PCH_OFF, JITK_CACHE_OFF, dir);
  double ms = compile_kind(e, k, 0, "first");
  printf("%.3f\n", ms);
  jitk_engine_destroy(e);
  return 0;
}

static double median_of(double *v, int n) { return bench_median(v, (size_t)n); }

int bench_compile(int argc, char **argv) {
  int reps = 7, settle = 0;
  bool first = true;
  const char *json = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--child") == 0 && i + 2 < argc)
      return compile_child(argv[i + 1], argv[i + 2]);
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--settle") == 0 && i + 1 < argc) {
      settle = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--no-first") == 0) {
      first = false;
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      fprintf(stderr,
              "usage: jitk-bench compile [--reps N] [--settle SECONDS] [--no-first] [--json "
              "FILE]\n");
      return 2;
    }
  }
  if (reps < 1 || reps > 99) reps = 7;
  char dir[] = "/tmp/jitk-bench-pch-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    perror("jitk-bench: mkdtemp");
    return 1;
  }
  /* The first-process figures come first, while this process has read
   * little of NVRTC: pages a process maps stay in the page cache whatever
   * posix_fadvise says, so a library this process had run would not be
   * cold for the next. */
  jitk_engine *off = compile_engine(JITK_PCH_OFF, JITK_CACHE_OFF, NULL);
  bench_row rows[64];
  static char notes[64][160];
  int nr = 0;
  double cold[CK_COUNT] = {0}, warmp[CK_COUNT] = {0}, cold_proc[CK_COUNT] = {0},
         warm_proc[CK_COUNT] = {0};
  if (first) {
    const char *inc = NULL;
    CHECK(off, jitk_engine_cuda_include_dir(off, &inc));
    char *nvrtc_lib = NULL, *builtins = NULL;
    CHECK(off, jk_nvrtc_library_files(off, &nvrtc_lib, &builtins));
    const char *libs[3] = {nvrtc_lib, builtins, NULL};
    if (nvrtc_lib == NULL) libs[0] = builtins;
    for (int k = 0; k < CK_RED_F32 + 1; k++) {
      double c[3], cp[3], w[3], wp[3], res[3], ignored;
      for (int r = 0; r < 3; r++) {
        c[r] = first_process(k, true, inc, libs, &cp[r], &res[r]);
        w[r] = first_process(k, false, inc, libs, &wp[r], &ignored);
      }
      cold[k] = median_of(c, 3);
      warmp[k] = median_of(w, 3);
      static char names[2 * CK_COUNT][80];
      snprintf(names[2 * k], sizeof names[0], "%s, first process, cold pages", ck_names[k]);
      snprintf(names[2 * k + 1], sizeof names[0], "%s, first process, warm pages", ck_names[k]);
      cold_proc[k] = median_of(cp, 3);
      warm_proc[k] = median_of(wp, 3);
      snprintf(notes[nr], sizeof notes[nr],
               "%.2fx the bare kernel's; process %.0f ms, %.2fx; NVRTC %.1f MB in memory before",
               cold[k] / cold[CK_BARE], cold_proc[k], cold_proc[k] / cold_proc[CK_BARE],
               median_of(res, 3));
      rows[nr] = (bench_row){names[2 * k], cold[k], "ms", notes[nr]};
      nr++;
      snprintf(notes[nr], sizeof notes[nr], "%.2fx the bare kernel's; process %.0f ms, %.2fx",
               warmp[k] / warmp[CK_BARE], warm_proc[k], warm_proc[k] / warm_proc[CK_BARE]);
      rows[nr] = (bench_row){names[2 * k + 1], warmp[k], "ms", notes[nr]};
      nr++;
    }
    free(nvrtc_lib);
    free(builtins);
  }
  double off_ms[CK_COUNT], on_ms[CK_COUNT], made_ms[CK_COUNT], off_x[CK_COUNT], on_x[CK_COUNT];
  int runs[CK_COUNT];

  jitk_engine *on = compile_engine(JITK_PCH_ALL, JITK_CACHE_OFF, dir);
  /* One compile of each engine first, untimed, so that neither's first
   * use is counted; then each kind's compile that saves its precompiled
   * header. */
  nvrtc_bare(off, 999);
  /* --settle: the bare kernel compiled again and again for that long
   * before the rounds, its first and last ten compiles reported. A machine
   * just started compiles 3-4.5 times as slowly for a while, and this
   * shows whether the rounds ran in such a spell or after it. */
  if (settle > 0) {
    double t[4096], t_end = bench_now_us() + settle * 1e6;
    int n = 0;
    while (n < 4096 && (n < 20 || bench_now_us() < t_end)) {
      t[n] = nvrtc_bare(off, 5000 + n);
      n++;
    }
    static char settle_note[2][160];
    snprintf(settle_note[0], sizeof settle_note[0], "median of the first 10 of %d in %d s", n,
             settle);
    rows[nr++] =
        (bench_row){"settling: NVRTC alone, bare, first", median_of(t, 10), "ms", settle_note[0]};
    snprintf(settle_note[1], sizeof settle_note[1], "median of the last 10; the rounds follow");
    rows[nr++] = (bench_row){"settling: NVRTC alone, bare, last", median_of(t + n - 10, 10), "ms",
                             settle_note[1]};
  }
  compile_kind(off, CK_BARE, 999, "warm");
  compile_kind(on, CK_BARE, 999, "warm");
  for (int k = 0; k < CK_COUNT; k++) {
    made_ms[k] = compile_kind(on, k, 99, "on");
    wait_for_pch(on);
  }
  /* Rounds: in each, every kind with precompiled headers off and on, each
   * beside NVRTC alone on the bare kernel. A kind's ratio is the median
   * of its rounds' ratios, each against the bare compile next to it, so
   * that a busy or slow spell of the machine (a machine just started
   * gives several) falls on a kind and its baseline alike rather than on
   * whichever kinds it happened to reach. CUB's block reduce, seconds a
   * compile, gets three rounds at most. */
  double a[CK_COUNT][99], b[CK_COUNT][99], ra[CK_COUNT][99], rb[CK_COUNT][99];
  double base[CK_COUNT * 2 * 99], bare;
  int nb = 0;
  for (int k = 0; k < CK_COUNT; k++) runs[k] = k == CK_CUB ? (reps < 3 ? reps : 3) : reps;
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < CK_COUNT; k++) {
      if (r >= runs[k]) continue;
      double b0 = nvrtc_bare(off, k * 200 + 2 * r);
      a[k][r] = compile_kind(off, k, r, "off");
      double b1 = nvrtc_bare(off, k * 200 + 2 * r + 1);
      b[k][r] = compile_kind(on, k, r, "on");
      base[nb++] = b0;
      base[nb++] = b1;
      ra[k][r] = a[k][r] / b0;
      rb[k][r] = b[k][r] / b1;
    }
  }
  for (int k = 0; k < CK_COUNT; k++) {
    int n = runs[k];
    off_ms[k] = median_of(a[k], n);
    on_ms[k] = median_of(b[k], n);
    off_x[k] = median_of(ra[k], n);
    on_x[k] = median_of(rb[k], n);
  }
  bare = median_of(base, nb);
  int bare_row = nr++;
  snprintf(notes[bare_row], sizeof notes[bare_row],
           "median of %d, one beside each compile; the baseline", nb);
  rows[bare_row] =
      (bench_row){"NVRTC alone, bare extern \"C\" kernel", bare, "ms", notes[bare_row]};
  for (int k = 0; k < CK_COUNT; k++) {
    double ma = off_ms[k], mb = on_ms[k], made = made_ms[k];
    int n = runs[k];
    static char names[3 * CK_COUNT][80];
    snprintf(names[3 * k], sizeof names[0], "%s, PCH off", ck_names[k]);
    snprintf(names[3 * k + 1], sizeof names[0], "%s, PCH on, first", ck_names[k]);
    snprintf(names[3 * k + 2], sizeof names[0], "%s, PCH on", ck_names[k]);
    snprintf(notes[nr], sizeof notes[nr], "median of %d; %.2fx bare", n, off_x[k]);
    rows[nr] = (bench_row){names[3 * k], ma, "ms", notes[nr]};
    nr++;
    snprintf(notes[nr], sizeof notes[nr],
             "the first compile of these headers, before the rounds; %.2fx bare", made / bare);
    rows[nr] = (bench_row){names[3 * k + 1], made, "ms", notes[nr]};
    nr++;
    snprintf(notes[nr], sizeof notes[nr], "median of %d; %.2fx bare, %.2fx PCH off", n, on_x[k],
             mb / ma);
    rows[nr] = (bench_row){names[3 * k + 2], mb, "ms", notes[nr]};
    nr++;
  }
  jitk_pch_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(on, jitk_engine_pch_info(on, &info));
  char title[200];
  snprintf(title, sizeof title,
           "compile (NVRTC %d.%d, sm_90, cache off; PCH: %llu saved, %llu used, %llu failed)",
           on->nvrtc.major, on->nvrtc.minor, (unsigned long long)info.created,
           (unsigned long long)info.used, (unsigned long long)info.failed);
  bench_print(title, rows, (size_t)nr, json);
  jitk_engine_destroy(on);
  jitk_engine_destroy(off);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "jitk-bench: could not remove %s\n", dir);
  return 0;
}
