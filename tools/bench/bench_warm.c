/*
 * jitk-bench warm: `jitk cache warm` of a manifest of N distinct kernels
 * (500 by default: elementwise kernels in float32, float16 and bfloat16,
 * reductions and raw modules, a quarter each), compiled for sm_90 into
 * empty caches on one thread and on the whole compile pool, and then once
 * more into the warmed cache (every kernel a disk hit). The manifest is
 * recorded first by a run that creates the kernels with the cache off.
 * No GPU is needed.
 *
 *   jitk-bench warm [N] [--json FILE]
 */
#include <jitk/jitk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define CHECK_W(e, call)                                                   \
  do {                                                                     \
    jitk_status st_ = (call);                                              \
    if (st_ != JITK_OK) {                                                  \
      fprintf(stderr, "jitk-bench warm: %s: %s\n", #call, jitk_errmsg(e)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static jitk_engine *engine(const char *dir, const char *record, int threads) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = dir ? JITK_CACHE_ON : JITK_CACHE_OFF;
  cfg.cache_record = record;
  cfg.compile_threads = threads;
  jitk_engine *e = NULL;
  CHECK_W(NULL, jitk_engine_create(&cfg, &e));
  return e;
}

/* Kernel i of the manifest, made through the public API as a program
 * would make it. */
static jitk_status make_kernel(void *user, size_t i) {
  jitk_engine *e = user;
  char op[128], name[32];
  snprintf(name, sizeof name, "k%zu", i);
  jitk_status st;
  switch (i % 4) {
    case 0:
    case 1: {
      static const char *const types[] = {"T=float32", "T=float16", "T=bfloat16"};
      snprintf(op, sizeof op, "z = x * (T)%zu + y", i + 1);
      jitk_elementwise *k = NULL;
      st = jitk_elementwise_create(e, "T x, T y", "T z", op, name, NULL, &k);
      if (st == JITK_OK) st = jitk_elementwise_compile(k, types[(i / 4) % 3], NULL, NULL, NULL);
      jitk_elementwise_destroy(k);
      return st;
    }
    case 2: {
      snprintf(op, sizeof op, "x * x + (T)%zu", i);
      jitk_reduction *r = NULL;
      st = jitk_reduction_create(e, "T x", "T y", op, "a + b", "y = a", "0", NULL, name, NULL, &r);
      if (st == JITK_OK) st = jitk_reduction_compile(r, "T=float32", NULL, NULL, NULL);
      jitk_reduction_destroy(r);
      return st;
    }
    default: {
      char src[512];
      snprintf(src, sizeof src,
               "extern \"C\" __global__ void %s(float *x, int n) {\n"
               "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
               "  if (i < n) x[i] = x[i] * %zu.0f + 1.0f;\n"
               "}\n",
               name, i);
      jitk_module *m = NULL;
      st = jitk_module_create(e, src, NULL, &m);
      jitk_module_destroy(m);
      return st;
    }
  }
}

static jitk_cache_warm_report warm(const char *dir, const char *manifest, int threads) {
  jitk_engine *e = engine(dir, NULL, threads);
  jitk_cache_warm_report rep;
  memset(&rep, 0, sizeof rep);
  rep.struct_size = sizeof rep;
  CHECK_W(e, jitk_cache_warm(e, manifest, NULL, &rep));
  jitk_engine_destroy(e);
  if (rep.failed || rep.damaged) {
    fprintf(stderr, "jitk-bench warm: %zu kernels failed, %zu lines damaged\n", rep.failed,
            rep.damaged);
    exit(1);
  }
  return rep;
}

int bench_warm(int argc, char **argv) {
  size_t n = 500;
  const char *json = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json = argv[++i];
    else if (atoi(argv[i]) > 0)
      n = (size_t)atoi(argv[i]);
  }
  char work[] = "/tmp/jitk-bench-warm-XXXXXX";
  if (mkdtemp(work) == NULL) {
    perror("jitk-bench warm");
    return 1;
  }
  char manifest[128], serial_dir[128], pool_dir[128];
  snprintf(manifest, sizeof manifest, "%s/manifest.jsonl", work);
  snprintf(serial_dir, sizeof serial_dir, "%s/serial", work);
  snprintf(pool_dir, sizeof pool_dir, "%s/pool", work);

  jitk_engine *rec = engine(NULL, manifest, 0);
  int threads = 0;
  CHECK_W(rec, jitk_engine_compile_threads(rec, &threads));
  double t0 = bench_now_us();
  CHECK_W(rec, jitk_parallel(rec, n, make_kernel, rec, NULL));
  double record_s = (bench_now_us() - t0) / 1e6;
  jitk_engine_destroy(rec);

  jitk_cache_warm_report one = warm(serial_dir, manifest, 1);
  jitk_cache_warm_report pool = warm(pool_dir, manifest, threads);
  jitk_cache_warm_report again = warm(pool_dir, manifest, threads);

  char notes[5][160];
  bench_row rows[5];
  snprintf(notes[0], sizeof notes[0], "%zu kernels, cache off, jitk_parallel on %d threads", n,
           threads);
  rows[0] = (bench_row){"recording run (creates every kernel)", record_s, "s", notes[0]};
  snprintf(notes[1], sizeof notes[1], "%zu compiled, %.1f kernels/s", one.compiled,
           (double)one.compiled / one.seconds);
  rows[1] = (bench_row){"jitk cache warm, 1 thread, empty cache", one.seconds, "s", notes[1]};
  snprintf(notes[2], sizeof notes[2], "%zu compiled, %.1f kernels/s, %.2fx the 1-thread warm-up",
           pool.compiled, (double)pool.compiled / pool.seconds, one.seconds / pool.seconds);
  char name[96];
  snprintf(name, sizeof name, "jitk cache warm, %d threads, empty cache", threads);
  rows[2] = (bench_row){name, pool.seconds, "s", notes[2]};
  snprintf(notes[3], sizeof notes[3], "%zu compiled, %zu found", again.compiled,
           again.kernels - again.compiled);
  rows[3] =
      (bench_row){"jitk cache warm again (every kernel a disk hit)", again.seconds, "s", notes[3]};
  char title[160];
  snprintf(title, sizeof title, "warm-up of a manifest of %zu kernels (sm_90, %d CPUs)", n,
           threads);
  bench_print(title, rows, 4, json);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
  if (system(cmd) != 0) fprintf(stderr, "jitk-bench warm: could not remove %s\n", work);
  return 0;
}
