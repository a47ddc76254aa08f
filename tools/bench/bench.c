/*
 * jitk-bench: the limits every jitk benchmark is reported against, measured
 * in the same run.
 *
 *   jitk-bench limits [--json FILE]
 *
 * - device-to-device copy bandwidth of 1 GiB (bytes read plus written over
 *   the median time of 20 copies, timed with CUDA events after warm-up);
 * - host time per launch: a bare cuLaunchKernel against jitk_kernel_launch
 *   of the same kernel, for an empty kernel and for one with four
 *   arguments, median over 100,000 launches each, rounds interleaved.
 *
 * Later benchmarks (elementwise, reduction, matmul) join as subcommands.
 * The program exits 77 when there is no GPU, which test drivers read as
 * "skipped".
 */
#include <jitk/jitk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "base/base.h"
#include "kernels/kernels.h"

#define EXIT_SKIP 77

/* The benchmarks here name their engine `e`. */
#define CHECK(call) BENCH_CHECK(e, call)

#define CU(call)                                                            \
  do {                                                                      \
    CUresult r_ = (call);                                                   \
    if (r_ != CUDA_SUCCESS) {                                               \
      fprintf(stderr, "jitk-bench: %s failed: error %d\n", #call, (int)r_); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

const char *bench_kernels_src =
    "extern \"C\" __global__ void empty() {}\n"
    "extern \"C\" __global__ void four(float a, const float *x, float *y, long long n) {\n"
    "  if (n < 0) y[0] = a * x[0];\n"
    "}\n"
    "extern \"C\" __global__ void fill(unsigned *p, unsigned long long n, unsigned seed) {\n"
    "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "       i < n; i += (unsigned long long)gridDim.x * blockDim.x) {\n"
    "    unsigned long long z = i * 0x9E3779B97F4A7C15ull + seed;\n"
    "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;\n"
    "    p[i] = (unsigned)(z ^ (z >> 27));\n"
    "  }\n"
    "}\n";

int bench_open(const char *what, int argc, char **argv, bench_session *s) {
  memset(s, 0, sizeof *s);
  s->elements = (int64_t)1 << 28;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      s->json = argv[++i];
    else if (strcmp(argv[i], "--elements") == 0 && i + 1 < argc)
      s->elements = atoll(argv[++i]);
  }
  if (jitk_engine_create(NULL, &s->engine) != JITK_OK) {
    printf("jitk-bench %s: no CUDA device (%s); nothing measured\n", what, jitk_errmsg(NULL));
    return 77;
  }
  jitk_engine *e = s->engine;
  BENCH_CHECK(e, jitk_module_create(e, bench_kernels_src, NULL, &s->module));
  BENCH_CHECK(e, jitk_module_get_kernel(s->module, "fill", &s->fill));
  BENCH_CHECK(e, jitk_module_get_kernel(s->module, "empty", &s->empty));
  s->copy_gbs = bench_copy_bandwidth(e, s->fill);
  return 0;
}

void bench_close(bench_session *s) {
  jitk_module_destroy(s->module);
  jitk_engine_destroy(s->engine);
}

double bench_copy_bandwidth(jitk_engine *e, jitk_kernel *fill) {
  const size_t bytes = (size_t)1 << 30;
  void *src, *dst;
  CHECK(jitk_device_alloc(e, bytes, NULL, &src));
  CHECK(jitk_device_alloc(e, bytes, NULL, &dst));
  /* Random data, never zeros: some hardware paths compress zeros. */
  unsigned long long words = bytes / 4;
  jitk_arg fa[] = {jitk_arg_ptr(src, JITK_UINT32), jitk_arg_u64(words), jitk_arg_u32(12345)};
  jitk_dim3 grid = {(unsigned)e->info.multiprocessors * 8, 1, 1}, block = {256, 1, 1};
  CHECK(jitk_kernel_launch(fill, grid, block, 0, NULL, fa, 3));
  CHECK(jitk_memset(e, dst, 0x5a, bytes, NULL));

  CUevent a, b;
  CU(e->drv.cuEventCreate(&a, CU_EVENT_DEFAULT));
  CU(e->drv.cuEventCreate(&b, CU_EVENT_DEFAULT));
  for (int i = 0; i < 3; i++) CHECK(jitk_memcpy(e, dst, src, bytes, NULL));
  double t[20];
  for (int i = 0; i < 20; i++) {
    CU(e->drv.cuEventRecord(a, NULL));
    CHECK(jitk_memcpy(e, dst, src, bytes, NULL));
    CU(e->drv.cuEventRecord(b, NULL));
    CU(e->drv.cuEventSynchronize(b));
    float ms = 0;
    CU(e->drv.cuEventElapsedTime(&ms, a, b));
    t[i] = ms;
  }
  CU(e->drv.cuEventDestroy(a));
  CU(e->drv.cuEventDestroy(b));
  CHECK(jitk_device_free(e, src, NULL));
  CHECK(jitk_device_free(e, dst, NULL));
  CHECK(jitk_stream_synchronize(e, NULL));
  double ms = bench_median(t, 20);
  return 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
}

/* Host microseconds per launch, median over rounds of 100 launches; the
 * stream is drained between rounds (untimed) so the launch queue never
 * fills and the figure stays a host cost. */
enum { ROUNDS = 1000, PER_ROUND = 100 };

void bench_launch_overhead(jitk_engine *e, jitk_kernel *k, const jitk_arg *args, size_t nargs,
                           void **bare_params, double *bare_us, double *jitk_us) {
  jitk_dim3 one = {1, 1, 1};
  double *tb = malloc(ROUNDS * sizeof *tb), *tj = malloc(ROUNDS * sizeof *tj);
  if (tb == NULL || tj == NULL) exit(1);
  for (int w = 0; w < 2000; w++) {
    CU(e->drv.cuLaunchKernel(k->f.fn, 1, 1, 1, 1, 1, 1, 0, NULL, bare_params, NULL));
    CHECK(jitk_kernel_launch(k, one, one, 0, NULL, args, nargs));
  }
  CHECK(jitk_stream_synchronize(e, NULL));
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < PER_ROUND; i++)
      e->drv.cuLaunchKernel(k->f.fn, 1, 1, 1, 1, 1, 1, 0, NULL, bare_params, NULL);
    double t1 = bench_now_us();
    CHECK(jitk_stream_synchronize(e, NULL));
    double t2 = bench_now_us();
    for (int i = 0; i < PER_ROUND; i++) jitk_kernel_launch(k, one, one, 0, NULL, args, nargs);
    double t3 = bench_now_us();
    CHECK(jitk_stream_synchronize(e, NULL));
    tb[r] = (t1 - t0) / PER_ROUND;
    tj[r] = (t3 - t2) / PER_ROUND;
  }
  *bare_us = bench_median(tb, ROUNDS);
  *jitk_us = bench_median(tj, ROUNDS);
  free(tb);
  free(tj);
}

/* Host microseconds per bare launch of `four` (float, pointer, pointer,
 * long long) with its arguments passed through `extra` as one buffer, timed
 * as bench_launch_overhead times. */
static double bench_launch_extra(jitk_engine *e, jitk_kernel *k, float a, void *x, void *y,
                                 long long n) {
  _Alignas(8) unsigned char buf[32];
  memset(buf, 0, sizeof buf);
  memcpy(buf, &a, 4);
  memcpy(buf + 8, &x, 8);
  memcpy(buf + 16, &y, 8);
  memcpy(buf + 24, &n, 8);
  size_t size = sizeof buf;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  for (int w = 0; w < 2000; w++)
    CU(e->drv.cuLaunchKernel(k->f.fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
  CHECK(jitk_stream_synchronize(e, NULL));
  double *t = malloc(ROUNDS * sizeof *t);
  if (t == NULL) exit(1);
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < PER_ROUND; i++)
      e->drv.cuLaunchKernel(k->f.fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra);
    double t1 = bench_now_us();
    CHECK(jitk_stream_synchronize(e, NULL));
    t[r] = (t1 - t0) / PER_ROUND;
  }
  double us = bench_median(t, ROUNDS);
  free(t);
  return us;
}

/* Host microseconds per launch of `k` (no arguments) on one block of one
 * thread: bare cuLaunchKernelEx with the attributes of `cfg` (cuLaunchKernel
 * when it asks for none) against
 * jitk_kernel_launch_ex with `cfg`, timed as bench_launch_overhead times,
 * the two interleaved round by round. */
static void bench_launch_config(jitk_engine *e, jitk_kernel *k,
                                const jitk_kernel_launch_config *cfg, double *bare_us,
                                double *jitk_us) {
  jitk_dim3 one = {1, 1, 1};
  CUlaunchAttribute attrs[2];
  unsigned na = 0;
  memset(attrs, 0, sizeof attrs);
  if (cfg->cluster.x != 0) {
    attrs[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[na].value.clusterDim.x = cfg->cluster.x;
    attrs[na].value.clusterDim.y = cfg->cluster.y;
    attrs[na].value.clusterDim.z = cfg->cluster.z;
    na++;
  }
  if (cfg->programmatic_dependent_launch) {
    attrs[na].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[na].value.programmaticStreamSerializationAllowed = 1;
    na++;
  }
  CUlaunchConfig lc;
  memset(&lc, 0, sizeof lc);
  lc.gridDimX = lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = lc.blockDimY = lc.blockDimZ = 1;
  lc.attrs = attrs;
  lc.numAttrs = na;
  double *tb = malloc(ROUNDS * sizeof *tb), *tj = malloc(ROUNDS * sizeof *tj);
  if (tb == NULL || tj == NULL) exit(1);
  for (int w = 0; w < 2000; w++) {
    CU(e->drv.cuLaunchKernelEx(&lc, k->f.fn, NULL, NULL));
    CHECK(jitk_kernel_launch_ex(k, one, one, 0, NULL, NULL, 0, cfg));
  }
  CHECK(jitk_stream_synchronize(e, NULL));
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    /* Without attributes the bare call is cuLaunchKernel, which jitk's
     * launch takes then too. */
    for (int i = 0; i < PER_ROUND; i++)
      if (na == 0)
        e->drv.cuLaunchKernel(k->f.fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
      else
        e->drv.cuLaunchKernelEx(&lc, k->f.fn, NULL, NULL);
    double t1 = bench_now_us();
    CHECK(jitk_stream_synchronize(e, NULL));
    double t2 = bench_now_us();
    for (int i = 0; i < PER_ROUND; i++) jitk_kernel_launch_ex(k, one, one, 0, NULL, NULL, 0, cfg);
    double t3 = bench_now_us();
    CHECK(jitk_stream_synchronize(e, NULL));
    tb[r] = (t1 - t0) / PER_ROUND;
    tj[r] = (t3 - t2) / PER_ROUND;
  }
  *bare_us = bench_median(tb, ROUNDS);
  *jitk_us = bench_median(tj, ROUNDS);
  free(tb);
  free(tj);
}

static int cmd_limits(int argc, char **argv) {
  const char *json = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      fprintf(stderr, "usage: jitk-bench limits [--json FILE]\n");
      return 2;
    }
  }
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    printf("jitk-bench: no CUDA device (%s); nothing measured\n", jitk_errmsg(NULL));
    return EXIT_SKIP;
  }
  if (st != JITK_OK) {
    fprintf(stderr, "jitk-bench: %s\n", jitk_errmsg(NULL));
    return 1;
  }
  jitk_module *m;
  CHECK(jitk_module_create(e, bench_kernels_src, NULL, &m));
  jitk_kernel *empty, *four, *fill;
  CHECK(jitk_module_get_kernel(m, "empty", &empty));
  CHECK(jitk_module_get_kernel(m, "four", &four));
  CHECK(jitk_module_get_kernel(m, "fill", &fill));

  double gbs = bench_copy_bandwidth(e, fill);

  double eb, ej, fb, fj;
  bench_launch_overhead(e, empty, NULL, 0, NULL, &eb, &ej);
  void *buf;
  CHECK(jitk_device_alloc(e, 256, NULL, &buf));
  float a = 2.0f;
  long long n = 1;
  void *x = buf, *y = (char *)buf + 128;
  void *bare[] = {&a, &x, &y, &n};
  jitk_arg args[] = {jitk_arg_f32(a), jitk_arg_ptr(x, JITK_FLOAT32), jitk_arg_ptr(y, JITK_FLOAT32),
                     jitk_arg_i64(n)};
  bench_launch_overhead(e, four, args, 4, bare, &fb, &fj);
  /* The same launch with the arguments in one buffer laid out as the
   * kernel's parameters are (cuLaunchKernel's `extra`), against the array
   * of pointers: whether the driver's copying of each parameter costs. */
  double xb = bench_launch_extra(e, four, a, x, y, n);
  CHECK(jitk_device_free(e, buf, NULL));
  CHECK(jitk_stream_synchronize(e, NULL));

  /* Launches with a launch configuration: the defaults (which take
   * cuLaunchKernel's path), a cluster of one block, and programmatic
   * dependent launch (both through cuLaunchKernelEx), each against the
   * bare driver call that does the same. */
  jitk_kernel_launch_config plain, cluster, pdl;
  CHECK(jitk_kernel_launch_config_init(&plain));
  cluster = plain;
  cluster.cluster = (jitk_dim3){1, 1, 1};
  pdl = plain;
  pdl.programmatic_dependent_launch = 1;
  double cb_plain, cj_plain, cb_cluster = 0, cj_cluster = 0, cb_pdl, cj_pdl;
  bench_launch_config(e, empty, &plain, &cb_plain, &cj_plain);
  bool has_clusters = e->info.cc_major >= 9;
  if (has_clusters) bench_launch_config(e, empty, &cluster, &cb_cluster, &cj_cluster);
  bench_launch_config(e, empty, &pdl, &cb_pdl, &cj_pdl);

  char note_e[64], note_f[64], note_x[64], note_cp[64], note_cc[64], note_cd[64];
  snprintf(note_cp, sizeof note_cp, "%.3fx bare cuLaunchKernel", cj_plain / cb_plain);
  snprintf(note_cc, sizeof note_cc, "%.3fx bare cuLaunchKernelEx, %.3fx cuLaunchKernel",
           has_clusters ? cj_cluster / cb_cluster : 0.0, has_clusters ? cj_cluster / eb : 0.0);
  snprintf(note_cd, sizeof note_cd, "%.3fx bare cuLaunchKernelEx, %.3fx cuLaunchKernel",
           cj_pdl / cb_pdl, cj_pdl / eb);
  snprintf(note_x, sizeof note_x, "%.3fx bare", xb / fb);
  snprintf(note_e, sizeof note_e, "%.3fx bare", ej / eb);
  snprintf(note_f, sizeof note_f, "%.3fx bare", fj / fb);
  bench_row rows[] = {
      {"device-to-device copy, 1 GiB (read+write)", gbs, "GB/s", ""},
      {"bare cuLaunchKernel, empty kernel", eb, "us/launch", ""},
      {"jitk_kernel_launch, empty kernel", ej, "us/launch", note_e},
      {"bare cuLaunchKernel, 4 arguments", fb, "us/launch", ""},
      {"jitk_kernel_launch, 4 arguments", fj, "us/launch", note_f},
      {"bare cuLaunchKernel, 4 arguments in one buffer", xb, "us/launch", note_x},
      {"jitk_kernel_launch_ex, default config, empty kernel", cj_plain, "us/launch", note_cp},
      {"bare cuLaunchKernelEx, cluster 1x1x1", cb_cluster, "us/launch", ""},
      {"jitk_kernel_launch_ex, cluster 1x1x1", cj_cluster, "us/launch", note_cc},
      {"bare cuLaunchKernelEx, programmatic dependent", cb_pdl, "us/launch", ""},
      {"jitk_kernel_launch_ex, programmatic dependent", cj_pdl, "us/launch", note_cd},
  };
  char title[400];
  snprintf(title, sizeof title, "limits on %s (%d SMs), %s", e->info.name, e->info.multiprocessors,
           e->target.arch);
  bench_print(title, rows, sizeof rows / sizeof rows[0], json);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    printf(
        "usage: jitk-bench <benchmark> [--json FILE]\n"
        "  limits   copy bandwidth and launch overhead, the reference figures (GPU)\n"
        "  cache    what the kernel cache costs: hits, misses, a 10,000-entry store\n"
        "  elementwise  bandwidth of generated kernels against the copy, launch cost (GPU)\n"
        "  reduction    bytes read per second of generated reductions against the copy,\n"
        "               launch cost (GPU)\n"
        "  matmul       fused matmul plans against cuBLASLt (when it loads): bfloat16,\n"
        "               float16, tf32, float32, FP8, shapes off 16 bytes, TFLOP/s (GPU;\n"
        "               --only large|decode|plain|fp8|unaligned|epilogue, or\n"
        "               --shapes MxNxK,... [--float32])\n"
        "  autotune     tuned matmul plans against the default ones, and a tuned plan\n"
        "               created in a new engine (GPU)\n"
        "  compile  NVRTC time of generated kernels, cold (no GPU needed)\n"
        "  sweep    elementwise and reduction layouts against the copy (GPU; --list,\n"
        "           --only REGEX)\n"
        "  small    host and GPU time of cached launches on 2^10 to 2^18 elements (GPU)\n"
        "  graph    replay of a CUDA graph of 100 captured elementwise launches against\n"
        "           one of 100 bare cuLaunchKernel calls (GPU)\n"
        "  remote   the cache's remote tier on a loopback redis-server: compiles of\n"
        "           2 nodes x 8 processes, a remote hit against a disk hit\n"
        "  warm [N] `jitk cache warm` of a manifest of N kernels (500), on one thread\n"
        "           and on the compile pool (no GPU needed)\n"
        "  multi    host time per launch with a thread and an engine per device, all\n"
        "           devices at once, against one thread on one device (GPU; --devices N)\n"
        "--json FILE appends one JSON line per figure.\n");
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "limits") == 0) return cmd_limits(argc - 2, argv + 2);
  if (strcmp(argv[1], "cache") == 0) return bench_cache(argv[0], argc - 2, argv + 2);
  if (strcmp(argv[1], "elementwise") == 0) return bench_elementwise(argc - 2, argv + 2);
  if (strcmp(argv[1], "reduction") == 0) return bench_reduction(argc - 2, argv + 2);
  if (strcmp(argv[1], "matmul") == 0) return bench_matmul(argc - 2, argv + 2);
  if (strcmp(argv[1], "autotune") == 0) return bench_autotune(argc - 2, argv + 2);
  if (strcmp(argv[1], "compile") == 0) return bench_compile(argc - 2, argv + 2);
  if (strcmp(argv[1], "sweep") == 0) return bench_sweep(argc - 2, argv + 2);
  if (strcmp(argv[1], "small") == 0) return bench_small(argc - 2, argv + 2);
  if (strcmp(argv[1], "graph") == 0) return bench_graph(argc - 2, argv + 2);
  if (strcmp(argv[1], "remote") == 0) return bench_remote(argc - 2, argv + 2);
  if (strcmp(argv[1], "warm") == 0) return bench_warm(argc - 2, argv + 2);
  if (strcmp(argv[1], "multi") == 0) return bench_multi(argc - 2, argv + 2);
  if (strcmp(argv[1], "cache-child") == 0) return bench_cache_child(argc - 2, argv + 2);
  fprintf(stderr, "jitk-bench: unknown benchmark '%s'\n", argv[1]);
  return 2;
}
