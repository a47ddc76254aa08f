/*
 * jitk-bench cache: what the kernel cache costs.
 *
 *  - memory hit: the table lookup alone, and a whole jitk_module_create
 *    that hits memory (which also builds and hashes the key);
 *  - disk hit in a fresh process: engine already made, then the first
 *    jitk_module_create: open the database, read, verify, load the module
 *    (median over fresh processes);
 *  - a miss: jitk_module_create on new source against NVRTC's own compile
 *    time for it, the difference being what the cache adds;
 *  - the same for kernels that include five headers of the user's, whose
 *    content every disk hit checks again;
 *  - a disk lookup in a database of 10,000 entries.
 * With a GPU the engine loads modules; without one it stops at the image.
 */
#include <jitk/jitk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cache/cache.h"
#include "base/base.h"
#include "kernels/kernels.h"

static const char *kernel_fmt =
    "extern \"C\" __global__ void k%d(float *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = x[i] * %d.0f + 1.0f;\n"
    "}\n";

static jitk_engine *make_engine_mode(const char *dir, bool *gpu, jitk_cache_mode mode) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.cache_dir = dir;
  cfg.cache_mode = mode;
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) == JITK_OK) {
    *gpu = true;
    return e;
  }
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "jitk-bench cache: %s\n", jitk_errmsg(NULL));
    exit(1);
  }
  *gpu = false;
  return e;
}

static jitk_engine *make_engine(const char *dir, bool *gpu) {
  return make_engine_mode(dir, gpu, JITK_CACHE_ON);
}

static jitk_module *create(jitk_engine *e, int i) {
  char src[512];
  snprintf(src, sizeof src, kernel_fmt, i, i + 2);
  jitk_module *m = NULL;
  if (jitk_module_create(e, src, NULL, &m) != JITK_OK) {
    fprintf(stderr, "jitk-bench cache: %s\n", jitk_errmsg(e));
    exit(1);
  }
  return m;
}

/* A kernel that includes five headers from `dir`/hdr (see write_headers). */
static jitk_module *create_with_headers(jitk_engine *e, const char *dir, int i) {
  char src[1024], inc[600];
  snprintf(src, sizeof src,
           "#include \"h1.cuh\"\n#include \"h2.cuh\"\n#include \"h3.cuh\"\n"
           "#include \"h4.cuh\"\n#include \"h5.cuh\"\n"
           "extern \"C\" __global__ void k%d(float *x, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] = f5(f4(f3(f2(f1(x[i]))))) * %d.0f;\n"
           "}\n",
           i, i + 2);
  snprintf(inc, sizeof inc, "-I%s/hdr", dir);
  const char *opts[] = {inc};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = 1;
  jitk_module *m = NULL;
  if (jitk_module_create(e, src, &o, &m) != JITK_OK) {
    fprintf(stderr, "jitk-bench cache: %s\n", jitk_errmsg(e));
    exit(1);
  }
  return m;
}

static void write_headers(const char *dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/hdr", dir);
  mkdir(path, 0700);
  for (int h = 1; h <= 5; h++) {
    snprintf(path, sizeof path, "%s/hdr/h%d.cuh", dir, h);
    FILE *f = fopen(path, "w");
    if (f == NULL) exit(1);
    fprintf(f, "#pragma once\n__device__ inline float f%d(float v) { return v * %d.5f + 1.0f; }\n",
            h, h);
    fclose(f);
  }
}

/* The child of the fresh-process measurement: prints the microseconds of
 * its first jitk_module_create, which must be a disk hit. */
int bench_cache_child(int argc, char **argv) {
  if (argc < 2) return 2;
  bool gpu;
  if (argc > 2 && strcmp(argv[2], "off") == 0) {
    /* Engine creation alone, without a cache, for comparison. */
    double a = bench_now_us();
    jitk_engine *e = make_engine_mode(argv[0], &gpu, JITK_CACHE_OFF);
    printf("%.3f\n", bench_now_us() - a);
    jitk_engine_destroy(e);
    return 0;
  }
  double c0 = bench_now_us();
  jitk_engine *e = make_engine(argv[0], &gpu);
  double create_us = bench_now_us() - c0;
  int which = atoi(argv[1]);
  bool headers = argc > 2 && strcmp(argv[2], "headers") == 0;
  double t0 = bench_now_us();
  jitk_module *m = headers ? create_with_headers(e, argv[0], which) : create(e, which);
  double t1 = bench_now_us();
  jitk_cache_stats s;
  jitk_cache_get_stats(e, &s, NULL);
  /* The store was opened while the engine was made; its cost is reported
   * beside the hit's. */
  printf("%.3f %d %.3f %.3f\n", t1 - t0, s.disk_hits == 1 ? 1 : 0, e->cache.open_us, create_us);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return 0;
}

static double fresh_process_hit(const char *self, const char *dir, int which, double *open_us,
                                double *create_us, bool headers) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' cache-child '%s' %d%s", self, dir, which,
           headers ? " headers" : "");
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  double us = -1;
  int hit = 0;
  if (fscanf(p, "%lf %d %lf %lf", &us, &hit, open_us, create_us) != 4) us = -1;
  pclose(p);
  return hit ? us : -1;
}

/* Engine creation without a cache, in a fresh process. */
static double fresh_process_create_off(const char *self, const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' cache-child '%s' 0 off", self, dir);
  FILE *p = popen(cmd, "r");
  if (p == NULL) return -1;
  double us = -1;
  if (fscanf(p, "%lf", &us) != 1) us = -1;
  pclose(p);
  return us;
}

int bench_cache(const char *self, int argc, char **argv) {
  const char *json = NULL;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) json = argv[++i];
  }
  char dir[] = "/tmp/jitk-bench-cache-XXXXXX";
  if (mkdtemp(dir) == NULL) return 1;
  bool gpu;
  jitk_engine *e = make_engine(dir, &gpu);

  /* Fill: 16 kernels compiled (misses), their NVRTC time kept apart. */
  enum { MISSES = 16 };
  double miss_total[MISSES], miss_nvrtc[MISSES];
  for (int i = 0; i < MISSES; i++) {
    double t0 = bench_now_us();
    jitk_module *m = create(e, i);
    double t1 = bench_now_us();
    miss_total[i] = (t1 - t0) / 1000.0;
    miss_nvrtc[i] = m->entry->compile_ms;
    jitk_module_destroy(m);
  }
  double overhead[MISSES];
  for (int i = 0; i < MISSES; i++) overhead[i] = (miss_total[i] - miss_nvrtc[i]) / miss_nvrtc[i];
  double nvrtc_ms = bench_median(miss_nvrtc, MISSES);
  double miss_ms = bench_median(miss_total, MISSES);
  double miss_overhead = bench_median(overhead, MISSES);

  /* Memory hits. */
  jitk_module *keep = create(e, 0);
  enum { LOOKUPS = 2000000 };
  jk_key key = keep->entry->key;
  double t0 = bench_now_us();
  size_t found = 0;
  for (int i = 0; i < LOOKUPS; i++) {
    pthread_mutex_lock(&e->lock);
    found += jk_chains_find(&e->cache.table, &key) != NULL;
    pthread_mutex_unlock(&e->lock);
  }
  double lookup_ns = (bench_now_us() - t0) * 1000.0 / LOOKUPS;
  double hit_us[2000];
  for (int i = 0; i < 2000; i++) {
    double a = bench_now_us();
    jitk_module *m = create(e, 1 + i % (MISSES - 1));
    hit_us[i] = bench_now_us() - a;
    jitk_module_destroy(m);
  }
  double memory_hit_us = bench_median(hit_us, 2000);
  jitk_module_destroy(keep);
  jitk_engine_destroy(e); /* flushes, closes */

  /* Disk hits, each in a fresh process. */
  double fresh[MISSES], opens[MISSES], totals[MISSES], creates_on[MISSES], creates_off[MISSES];
  int nfresh = 0, noff = 0;
  for (int i = 0; i < MISSES; i++) {
    double open_us = 0, create_us = 0;
    double us = fresh_process_hit(self, dir, i, &open_us, &create_us, false);
    if (us > 0) {
      fresh[nfresh] = us;
      opens[nfresh] = open_us;
      totals[nfresh] = us + open_us;
      creates_on[nfresh] = create_us;
      nfresh++;
    }
    double off = fresh_process_create_off(self, dir);
    if (off > 0) creates_off[noff++] = off;
  }
  double fresh_us = nfresh ? bench_median(fresh, (size_t)nfresh) : -1;
  double open_us = nfresh ? bench_median(opens, (size_t)nfresh) : -1;
  double total_us = nfresh ? bench_median(totals, (size_t)nfresh) : -1;
  double create_on = nfresh ? bench_median(creates_on, (size_t)nfresh) : -1;
  double create_off = noff ? bench_median(creates_off, (size_t)noff) : -1;

  /* Kernels with five headers of the user's: each disk hit reads and
   * hashes them again (and checks the places looked at before them). */
  write_headers(dir);
  e = make_engine(dir, &gpu);
  for (int i = 0; i < MISSES; i++) jitk_module_destroy(create_with_headers(e, dir, 100 + i));
  jitk_engine_destroy(e);
  double fresh_h[MISSES];
  int nh = 0;
  for (int i = 0; i < MISSES; i++) {
    double ignored = 0, ignored2 = 0;
    double us = fresh_process_hit(self, dir, 100 + i, &ignored, &ignored2, true);
    if (us > 0) fresh_h[nh++] = us;
  }
  double fresh_headers_us = nh ? bench_median(fresh_h, (size_t)nh) : -1;

  /* A database of 10,000 entries: real cubins under synthetic keys. */
  enum { BIG = 10000 };
  e = make_engine(dir, &gpu);
  jitk_module *img = create(e, 0);
  double fill0 = bench_now_us();
  pthread_mutex_lock(&e->cache.disk_lock);
  jk_key keys[64];
  for (int i = 0; i < BIG; i++) {
    jk_material m;
    jk_material_init(&m, e);
    char label[32];
    snprintf(label, sizeof label, "bench/%d", i);
    jk_material_add_str(&m, "bench", label);
    jk_key k;
    jk_hash128(m.data, m.len, k.bytes);
    if (i % (BIG / 64) == 0 && i / (BIG / 64) < 64) keys[i / (BIG / 64)] = k;
    jk_store_insert(e, &k, &k, &m, img->entry, label);
    jk_material_free(&m);
  }
  double fill_s = (bench_now_us() - fill0) / 1e6;
  double look[64 * 8];
  int nlook = 0;
  for (int r = 0; r < 8; r++)
    for (int i = 0; i < 64; i++) {
      jk_material m;
      jk_material_init(&m, e);
      char label[32];
      snprintf(label, sizeof label, "bench/%d", i * (BIG / 64));
      jk_material_add_str(&m, "bench", label);
      jk_entry x;
      memset(&x, 0, sizeof x);
      bool hit = false;
      double a = bench_now_us();
      jk_store_lookup(e, &keys[i], &m, &x, &hit);
      double b = bench_now_us();
      if (hit) look[nlook++] = b - a;
      jk_free(e, x.image);
      jk_free(e, x.log);
      for (size_t j = 0; j < x.num_names; j++) {
        jk_free(e, x.name_expressions[j]);
        jk_free(e, x.lowered[j]);
      }
      jk_free(e, x.name_expressions);
      jk_free(e, x.lowered);
      jk_material_free(&m);
    }
  pthread_mutex_unlock(&e->cache.disk_lock);
  double big_lookup_us = nlook ? bench_median(look, (size_t)nlook) : -1;
  jitk_module_destroy(img);
  jitk_engine_destroy(e);
  double fresh_big[8];
  int nbig = 0;
  for (int i = 0; i < 8; i++) {
    double ignored = 0, ignored2 = 0;
    double us = fresh_process_hit(self, dir, i, &ignored, &ignored2, false);
    if (us > 0) fresh_big[nbig++] = us;
  }
  double fresh_big_us = nbig ? bench_median(fresh_big, (size_t)nbig) : -1;

  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "jitk-bench: could not remove %s\n", dir);

  const char *where = gpu ? "with module load" : "no GPU: without module load";
  bench_row rows[] = {
      {"cache: memory hit, table lookup", lookup_ns, "ns", "goal <= 100 ns"},
      {"cache: memory hit, whole jitk_module_create", memory_hit_us, "us", "key built and hashed"},
      {"cache: disk hit, fresh process: read+verify+load", fresh_us / 1000.0, "ms", where},
      {"cache: opening the store (at engine creation)", open_us / 1000.0, "ms",
       gpu ? "SQLite's first open, beside cuInit" : "SQLite's first open"},
      {"cache: disk hit, fresh process: open+read+verify+load", total_us / 1000.0, "ms", where},
      {"cache: disk hit, fresh process, 5 user headers", fresh_headers_us / 1000.0, "ms",
       "read+verify+load, headers rehashed; goal <= 0.3 ms"},
      {"cache: engine creation, cache off", create_off / 1000.0, "ms", "fresh process"},
      {"cache: engine creation, cache on (store opened)", create_on / 1000.0, "ms",
       "fresh process"},
      {"cache: miss, NVRTC alone", nvrtc_ms, "ms", ""},
      {"cache: miss, whole jitk_module_create", miss_ms, "ms", ""},
      {"cache: miss overhead over NVRTC", miss_overhead * 100.0, "%", "goal <= 5 %"},
      {"cache: lookup in 10,000-entry database", big_lookup_us, "us", "read + verify"},
      {"cache: disk hit, fresh process, 10,000 entries", fresh_big_us / 1000.0, "ms",
       "read+verify+load"},
      {"cache: filling 10,000 entries", fill_s, "s", "one transaction each"},
  };
  bench_print("cache", rows, sizeof rows / sizeof rows[0], json);
  return 0;
}
