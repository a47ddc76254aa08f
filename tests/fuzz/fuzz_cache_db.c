/*
 * libFuzzer target for the kernel cache's reading of its database: the
 * input is a whole kernels.db file.
 *
 * One compile-only sm_90 engine serves the whole run, on a private cache
 * folder of its own. For each input the engine's store is closed, the
 * input becomes the folder's kernels.db (the journals are removed), and the
 * engine opens it again: the checks of owner, mode and format, the
 * identification of other programs' files, then what reads entries: the
 * candidates of a request and their dependency records
 * (jk_store_find), a row looked up by its own key and material
 * (jk_store_lookup, which checks keys, checksums and names), and the
 * maintenance calls (list, stats, verify, prune, clear, and an import of
 * the file into a second cache). NVRTC never runs: nothing here compiles.
 *
 * Seeds: the database files under tests/fuzz/corpus/cache_db, and one the
 * target makes at start-up with this machine's NVRTC and toolkit, written
 * into the first corpus folder it is given (run.sh's scratch folder), so
 * that the request the target asks for has candidates whose toolchain
 * matches and whose dependency records are read and checked.
 *
 * Promises checked: no crash, leak or read outside what SQLite returns; an
 * entry served has a non-empty image and parses back into names; a call
 * that fails leaves a real status and a message; a file that is not a
 * jitk cache is never changed by opening it.
 */
#include <jitk/jitk.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine.h"
#include "fuzz_common.h"

static jitk_engine *engine;   /* on `folder` */
static jitk_engine *importer; /* on `folder2`, for imports */
static char folder[64], folder2[64], db_path[128];
/* The request the seeds answer, and the key material of its request. */
static jk_material request;
static jk_key request_key;

static const char *source =
    "#include \"fuzz_header.cuh\"\n"
    "extern \"C\" __global__ void k(float *x) { x[threadIdx.x] *= SCALE; }\n";

static void put(const char *path, const void *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  const unsigned char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) abort();
    p += w;
    n -= (size_t)w;
  }
  fchmod(fd, 0600);
  close(fd);
}

static jitk_engine *cache_engine(const char *dir) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.cache_max_bytes = 1 << 20;
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "fuzz_cache_db: no engine: %s\n", jitk_errmsg(NULL));
    abort();
  }
  return e;
}

/* Reopens the engine's store on whatever kernels.db now holds. */
static void reopen(jitk_engine *e) {
  pthread_mutex_lock(&e->cache.disk_lock);
  jk_store_close(e);
  e->cache.disk = JK_DISK_CLOSED;
  pthread_mutex_unlock(&e->cache.disk_lock);
}

static void remove_db(const char *dir) {
  static const char *const names[] = {"kernels.db", "kernels.db-wal", "kernels.db-shm",
                                      "kernels.db-journal"};
  for (int i = 0; i < 4; i++) {
    char p[160];
    snprintf(p, sizeof p, "%s/%s", dir, names[i]);
    unlink(p);
  }
}

static void free_entry(jitk_engine *e, jk_entry *x) {
  jk_free(e, x->image);
  jk_free(e, x->log);
  for (size_t i = 0; i < x->num_names; i++) {
    if (x->name_expressions) jk_free(e, x->name_expressions[i]);
    if (x->lowered) jk_free(e, x->lowered[i]);
  }
  jk_free(e, x->name_expressions);
  jk_free(e, x->lowered);
  jk_deps_free(e, &x->deps);
  memset(x, 0, sizeof *x);
}

/* The seed: a cache holding the request's entry (its header read from a
 * folder of this run's) and a templated kernel with names. */
static void make_seed(char **argv, int argc) {
  char inc[96], hdr[128], opt[112];
  snprintf(inc, sizeof inc, "%s-inc", folder);
  mkdir(inc, 0700);
  snprintf(hdr, sizeof hdr, "%s/fuzz_header.cuh", inc);
  put(hdr, "#define SCALE 3.0f\n", 19);
  snprintf(opt, sizeof opt, "-I%s", inc);
  const char *opts[] = {opt};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = 1;
  o.program_name = "fuzz.cu";
  jitk_module *m = NULL;
  if (jitk_module_create(engine, source, &o, &m) != JITK_OK) {
    fprintf(stderr, "fuzz_cache_db: seed: %s\n", jitk_errmsg(engine));
    abort();
  }
  jitk_module_destroy(m);
  const char *names[] = {"twice<float>", "twice<int>"};
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 2;
  if (jitk_module_create(engine,
                         "template <typename T> __global__ void twice(T *x) { x[0] *= 2; }\n", &o,
                         &m) != JITK_OK)
    abort();
  jitk_module_destroy(m);
  /* The request asked for on every input. */
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.source = source;
  in.program_name = "fuzz.cu";
  in.options = opts;
  in.num_options = 1;
  jk_material_init(&request, engine);
  if (jk_cache_key(engine, &in, "raw/1", &request, &request_key) != JITK_OK) abort();
  reopen(engine); /* writes everything back to the main file */
  /* Into the first corpus folder given, when it is writable. */
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    struct stat st;
    if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    char to[4096];
    snprintf(to, sizeof to, "%s/seed-this-machine.db", argv[i]);
    FILE *f = fopen(db_path, "rb");
    if (f == NULL) break;
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (write(fd, buf, n) != (ssize_t)n) fprintf(stderr, "fuzz_cache_db: short seed\n");
      close(fd);
    }
    break;
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  snprintf(folder, sizeof folder, "/tmp/jitk-fuzz-db-XXXXXX");
  snprintf(folder2, sizeof folder2, "/tmp/jitk-fuzz-db2-XXXXXX");
  if (mkdtemp(folder) == NULL || mkdtemp(folder2) == NULL) abort();
  snprintf(db_path, sizeof db_path, "%s/kernels.db", folder);
  engine = cache_engine(folder);
  importer = cache_engine(folder2);
  make_seed(*argv, *argc);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reopen(engine);
  remove_db(folder);
  put(db_path, data, size);
  unsigned char *before = malloc(size ? size : 1);
  memcpy(before, data, size);

  /* Open, and the request's candidates with their dependency records. */
  jk_entry x;
  memset(&x, 0, sizeof x);
  bool found = false;
  pthread_mutex_lock(&engine->cache.disk_lock);
  jitk_status st = jk_store_find(engine, &request_key, &request, &x, &found);
  bool ours = engine->cache.disk == JK_DISK_OPEN || engine->cache.disk == JK_DISK_READ_ONLY;
  if (st != JITK_OK) jf_check_failure(engine, st, "jk_store_find");
  if (found) {
    JF_CHECK(x.image != NULL && x.image_size > 0, "an entry served without an image");
    JF_CHECK(x.kind == JITK_IMAGE_CUBIN || x.kind == JITK_IMAGE_PTX, "an entry of kind %d",
             (int)x.kind);
  }
  free_entry(engine, &x);

  /* Each row by its own key and material, which reaches the checksum and
   * the names of rows whose keys are right. */
  if (ours && engine->cache.db != NULL) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(engine->cache.db, "SELECT key, material FROM entries LIMIT 8", -1, &q,
                           NULL) == SQLITE_OK) {
      while (sqlite3_step(q) == SQLITE_ROW) {
        if (sqlite3_column_bytes(q, 0) != 16) continue;
        jk_key k;
        memcpy(k.bytes, sqlite3_column_blob(q, 0), 16);
        jk_material m;
        jk_material_init(&m, engine);
        jk_material_append(&m, sqlite3_column_blob(q, 1), (size_t)sqlite3_column_bytes(q, 1));
        bool hit = false;
        /* The row may be deleted as damaged under the running SELECT,
         * which SQLite allows. */
        st = jk_store_lookup(engine, &k, &m, &x, &hit);
        if (st != JITK_OK) jf_check_failure(engine, st, "jk_store_lookup");
        if (hit) {
          jk_deps d;
          const unsigned char *tc;
          size_t tcl;
          if (jk_deps_parse(engine, m.data, m.len, 0, &tc, &tcl, &d) == JITK_OK)
            jk_deps_free(engine, &d);
        }
        free_entry(engine, &x);
        jk_material_free(&m);
        if (engine->cache.db == NULL) break; /* turned off by damage */
      }
    }
    sqlite3_finalize(q);
  }
  pthread_mutex_unlock(&engine->cache.disk_lock);

  if (!ours) {
    /* Not opened as a cache: left byte for byte as it was. */
    FILE *f = fopen(db_path, "rb");
    if (f != NULL) {
      unsigned char *now = malloc(size + 1);
      size_t n = fread(now, 1, size + 1, f);
      fclose(f);
      JF_CHECK(n == size && memcmp(now, before, size) == 0,
               "a file that is not a jitk cache was changed");
      free(now);
    }
  }
  free(before);

  /* The maintenance calls, each on what the previous one left. */
  size_t a = 0, b = 0;
  jitk_cache_stats all;
  if ((st = jitk_cache_get_stats(engine, NULL, &all)) != JITK_OK)
    jf_check_failure(engine, st, "jitk_cache_get_stats");
  if ((st = jitk_cache_verify(engine, &a, &b)) != JITK_OK)
    jf_check_failure(engine, st, "jitk_cache_verify");
  if ((st = jitk_cache_prune(engine, 64 * 1024, &a)) != JITK_OK)
    jf_check_failure(engine, st, "jitk_cache_prune");

  /* An import of the fuzzed bytes into a clean cache. */
  char file[160];
  snprintf(file, sizeof file, "%s/import.db", folder2);
  put(file, data, size);
  if ((st = jitk_cache_import(importer, file, &a, &b)) != JITK_OK)
    jf_check_failure(importer, st, "jitk_cache_import");
  unlink(file);
  if ((st = jitk_cache_clear(importer, &a)) != JITK_OK)
    jf_check_failure(importer, st, "jitk_cache_clear");

  /* And clear, which starts afresh on what it cannot use. */
  if ((st = jitk_cache_clear(engine, &a)) != JITK_OK)
    jf_check_failure(engine, st, "jitk_cache_clear");
  return 0;
}
