/*
 * Helpers for the cache tests: scratch folders, engines on a given cache,
 * distinct kernels, and direct looks into the database.
 */
#ifndef JITK_TESTS_CACHE_COMMON_H
#define JITK_TESTS_CACHE_COMMON_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "engine.h"

/* A new empty folder under /tmp; removed by jt_rmdir. */
static inline char *jt_tmpdir(void) {
  char *d = strdup("/tmp/jitk-cache-test-XXXXXX");
  cr_assert_not_null(mkdtemp(d));
  return d;
}

static inline void jt_rmdir(char *d) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", d, d);
  cr_assert_eq(system(cmd), 0);
  free(d);
}

typedef struct jt_log {
  int warnings;
  int lines;
  char last_warning[4096];
} jt_log;

/* The library calls it from any thread (the compile pool, the thread
 * that makes precompiled headers), as jitk.h allows: a lock keeps the
 * counts whole. */
static pthread_mutex_t jt_log_lock = PTHREAD_MUTEX_INITIALIZER;

static inline void jt_log_fn(void *user, jitk_log_level level, const char *message) {
  jt_log *l = user;
  if (l == NULL) return;
  pthread_mutex_lock(&jt_log_lock);
  l->lines++;
  if (level <= JITK_LOG_WARN) {
    l->warnings++;
    snprintf(l->last_warning, sizeof l->last_warning, "%s", message);
  }
  pthread_mutex_unlock(&jt_log_lock);
}

/* A compile-only sm_90 engine on cache folder `dir`. */
static inline jitk_engine *jt_cache_engine_ex(const char *dir, jitk_cache_mode mode,
                                              int64_t max_bytes, size_t memory_entries, int shared,
                                              jt_log *log) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = mode;
  cfg.cache_max_bytes = max_bytes;
  cfg.cache_memory_entries = memory_entries;
  cfg.cache_shared = shared;
  cfg.log_fn = jt_log_fn;
  cfg.log_user = log;
  cfg.log_level = JITK_LOG_INFO;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine on cache %s: %s", dir, jitk_errmsg(NULL));
  return e;
}

static inline jitk_engine *jt_cache_engine(const char *dir) {
  return jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, NULL);
}

/* Kernel number i: a distinct source, so a distinct key. */
static inline void jt_kernel_source(int i, char *out, size_t n) {
  snprintf(out, n,
           "extern \"C\" __global__ void k%d(float *x, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] = x[i] * %d.0f + %d.0f;\n"
           "}\n",
           i, i + 1, i);
}

/* Compiles kernel i through the engine; returns the module. */
static inline jitk_module *jt_kernel(jitk_engine *e, int i) {
  char src[512];
  jt_kernel_source(i, src, sizeof src);
  jitk_module *m = NULL;
  jitk_status st = jitk_module_create(e, src, NULL, &m);
  cr_assert_eq(st, JITK_OK, "kernel %d: %s", i, jitk_errmsg(e));
  return m;
}

/* A fresh cache folder whose database holds kernel 1, closed again. */
static inline char *jt_cache_with_one_kernel(void) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  return dir;
}

/* Copies a module's image, to compare with later. */
static inline void *jt_image_copy(jitk_module *m, size_t *size) {
  const void *img;
  cr_assert_eq(jitk_module_image(m, &img, size, NULL), JITK_OK);
  void *c = malloc(*size);
  memcpy(c, img, *size);
  return c;
}

static inline jitk_cache_stats jt_stats_all(jitk_engine *e) {
  jitk_cache_stats all;
  jitk_status st = jitk_cache_get_stats(e, NULL, &all);
  cr_assert_eq(st, JITK_OK, "stats: %s", jitk_errmsg(e));
  return all;
}

static inline jitk_cache_stats jt_stats_mine(jitk_engine *e) {
  jitk_cache_stats mine;
  cr_assert_eq(jitk_cache_get_stats(e, &mine, NULL), JITK_OK);
  return mine;
}

/* PRAGMA integrity_check on the folder's database, through SQLite
 * directly; "ok" when it is sound. */
static inline void jt_integrity(const char *dir, char *out, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  sqlite3 *db = NULL;
  snprintf(out, n, "cannot open");
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  sqlite3_busy_timeout(db, 10000);
  sqlite3_stmt *q = NULL;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) == SQLITE_OK &&
      sqlite3_step(q) == SQLITE_ROW)
    snprintf(out, n, "%s", (const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  sqlite3_close(db);
}

#endif
