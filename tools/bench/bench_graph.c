/*
 * jitk-bench graph: what a CUDA graph of captured jitk launches costs to
 * replay, against a graph the driver captured from bare cuLaunchKernel
 * calls doing the same work.
 *
 * Two graphs of 100 kernel nodes each compute z = x + y on float32 arrays
 * of 2^16 and 2^22 elements:
 *   jitk   100 jitk_elementwise_launch calls captured on a stream (after
 *          jitk_elementwise_prepare, as a captured launch requires);
 *   bare   100 cuLaunchKernel calls of a hand-written kernel of the same
 *          expression, one thread per element, 256 per block.
 * Each graph is instantiated once and replayed; the figure is the GPU time
 * of one replay (CUDA events around it on the stream), the median of 200
 * after 20 untimed replays. Inputs are fresh random values, z is poisoned
 * before a checked replay and every element compared with x + y computed
 * in double precision (exact for one float32 addition).
 *
 *   jitk-bench graph [--json FILE]
 */
#include <jitk/jitk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine.h"
#include "kernels/kernels.h"

#define CHECK(e, call) BENCH_CHECK(e, call)
#define CU(e, call)                                                              \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      fprintf(stderr, "jitk-bench: %s failed: CUDA error %d\n", #call, (int)r_); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

enum { NODES = 100, REPLAYS = 200 };

static const char *add_src =
    "extern \"C\" __global__ void add(const float *x, const float *y, float *z, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) z[i] = x[i] + y[i];\n"
    "}\n";

/* Median GPU milliseconds of one replay of `ge` on `st`. */
static double replay_ms(jitk_engine *e, CUgraphExec ge, CUstream st) {
  CUevent a, b;
  CU(e, e->drv.cuEventCreate(&a, CU_EVENT_DEFAULT));
  CU(e, e->drv.cuEventCreate(&b, CU_EVENT_DEFAULT));
  for (int i = 0; i < 20; i++) CU(e, e->drv.cuGraphLaunch(ge, st));
  double t[REPLAYS];
  for (int i = 0; i < REPLAYS; i++) {
    CU(e, e->drv.cuEventRecord(a, st));
    CU(e, e->drv.cuGraphLaunch(ge, st));
    CU(e, e->drv.cuEventRecord(b, st));
    CU(e, e->drv.cuEventSynchronize(b));
    float ms = 0;
    CU(e, e->drv.cuEventElapsedTime(&ms, a, b));
    t[i] = ms;
  }
  CU(e, e->drv.cuEventDestroy(a));
  CU(e, e->drv.cuEventDestroy(b));
  return bench_median(t, REPLAYS);
}

/* Poisons z, replays once and checks every element against x + y. */
static void check_replay(jitk_engine *e, CUgraphExec ge, CUstream st, const bench_array *x,
                         const bench_array *y, const bench_array *z, const char *what) {
  CHECK(e, jitk_memset(e, z->data, 0xff, bench_array_bytes(z), NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  CU(e, e->drv.cuGraphLaunch(ge, st));
  CU(e, e->drv.cuStreamSynchronize(st));
  double *hx = bench_array_to_host(e, x), *hy = bench_array_to_host(e, y),
         *hz = bench_array_to_host(e, z);
  size_t n = bench_array_count(z);
  for (size_t i = 0; i < n; i++) {
    double want = (double)(float)(hx[i] + hy[i]);
    if (hz[i] != want) {
      fprintf(stderr, "jitk-bench graph: %s: z[%zu] = %g, expected %g\n", what, i, hz[i], want);
      exit(1);
    }
  }
  free(hx);
  free(hy);
  free(hz);
}

int bench_graph(int argc, char **argv) {
  const char *json = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      fprintf(stderr, "usage: jitk-bench graph [--json FILE]\n");
      return 2;
    }
  }
  jitk_engine *e = NULL;
  jitk_status st0 = jitk_engine_create(NULL, &e);
  if (st0 == JITK_ERR_NO_DRIVER || st0 == JITK_ERR_NO_DEVICE) {
    printf("jitk-bench: no CUDA device (%s); nothing measured\n", jitk_errmsg(NULL));
    return 77;
  }
  if (st0 != JITK_OK) {
    fprintf(stderr, "jitk-bench: %s\n", jitk_errmsg(NULL));
    return 1;
  }
  if (e->drv.cuStreamBeginCapture == NULL || e->drv.cuGraphInstantiateWithFlags == NULL) {
    printf("jitk-bench: this driver has no stream capture; nothing measured\n");
    jitk_engine_destroy(e);
    return 77;
  }
  jitk_module *m;
  jitk_kernel *add_raw;
  CHECK(e, jitk_module_create(e, add_src, NULL, &m));
  CHECK(e, jitk_module_get_kernel(m, "add", &add_raw));
  jitk_elementwise *add;
  CHECK(e,
        jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "bench_graph_add", NULL, &add));
  jitk_elementwise *fill = bench_fill_create(e);

  CUcontext saved;
  CHECK(e, jk_ctx_enter(e, &saved));
  CUstream st;
  CU(e, e->drv.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

  static const int64_t sizes[] = {1 << 16, 1 << 22};
  bench_row rows[8];
  char notes[4][96];
  size_t nr = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int64_t n = sizes[s];
    bench_array x, y, z;
    bench_array_make(&x, e, JITK_FLOAT32, 1, n, 0);
    bench_array_make(&y, e, JITK_FLOAT32, 1, n, 0);
    bench_array_make(&z, e, JITK_FLOAT32, 1, n, 0);
    bench_fill_random(e, fill, &x, (uint32_t)(11 + s));
    bench_fill_random(e, fill, &y, (uint32_t)(23 + s));
    CHECK(e, jitk_stream_synchronize(e, NULL));

    jitk_arg ew[] = {jitk_arg_array(&x.t), jitk_arg_array(&y.t), jitk_arg_array(&z.t)};
    CHECK(e, jitk_elementwise_prepare(add, ew, 3, -1));
    CUgraph g;
    CUgraphExec jitk_ge, bare_ge;
    CU(e, e->drv.cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < NODES; i++)
      CHECK(e, jitk_elementwise_launch(add, (jitk_stream)st, ew, 3, -1, NULL));
    CU(e, e->drv.cuStreamEndCapture(st, &g));
    CU(e, e->drv.cuGraphInstantiateWithFlags(&jitk_ge, g, 0));
    CU(e, e->drv.cuGraphDestroy(g));

    void *px = x.data, *py = y.data, *pz = z.data;
    long long nn = n;
    void *params[] = {&px, &py, &pz, &nn};
    unsigned blocks = (unsigned)((n + 255) / 256);
    CU(e, e->drv.cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < NODES; i++)
      CU(e, e->drv.cuLaunchKernel(add_raw->f.fn, blocks, 1, 1, 256, 1, 1, 0, st, params, NULL));
    CU(e, e->drv.cuStreamEndCapture(st, &g));
    CU(e, e->drv.cuGraphInstantiateWithFlags(&bare_ge, g, 0));
    CU(e, e->drv.cuGraphDestroy(g));

    check_replay(e, jitk_ge, st, &x, &y, &z, "jitk graph");
    check_replay(e, bare_ge, st, &x, &y, &z, "bare graph");
    /* Interleaved twice, so that clocks warming up favour neither. */
    double bare1 = replay_ms(e, bare_ge, st), jitk1 = replay_ms(e, jitk_ge, st);
    double bare2 = replay_ms(e, bare_ge, st), jitk2 = replay_ms(e, jitk_ge, st);
    double bare = bare1 < bare2 ? bare1 : bare2, jk = jitk1 < jitk2 ? jitk1 : jitk2;
    CU(e, e->drv.cuGraphExecDestroy(jitk_ge));
    CU(e, e->drv.cuGraphExecDestroy(bare_ge));

    snprintf(notes[2 * s], sizeof notes[0], "%lld elements, %.2f us per node", (long long)n,
             bare * 1e3 / NODES);
    snprintf(notes[2 * s + 1], sizeof notes[0], "%.3fx bare, %.2f us per node", jk / bare,
             jk * 1e3 / NODES);
    rows[nr++] = (bench_row){
        s == 0 ? "graph of 100 bare launches, 2^16" : "graph of 100 bare launches, 2^22",
        bare * 1e3, "us/replay", notes[2 * s]};
    rows[nr++] = (bench_row){
        s == 0 ? "graph of 100 jitk elementwise, 2^16" : "graph of 100 jitk elementwise, 2^22",
        jk * 1e3, "us/replay", notes[2 * s + 1]};
    CHECK(e, jitk_device_free(e, x.data, NULL));
    CHECK(e, jitk_device_free(e, y.data, NULL));
    CHECK(e, jitk_device_free(e, z.data, NULL));
  }
  CU(e, e->drv.cuStreamDestroy(st));
  jk_ctx_leave(e, saved);
  char title[300];
  snprintf(title, sizeof title, "CUDA graph replay on %s", e->info.name);
  bench_print(title, rows, nr, json);
  jitk_elementwise_destroy(fill);
  jitk_elementwise_destroy(add);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return 0;
}
