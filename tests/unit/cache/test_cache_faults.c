/* Failures: I/O errors from the filesystem, allocation failures, and a
 * damaged database. In every case the kernel comes back right, and nothing
 * corrupt is ever handed on to be loaded. */
#include <fcntl.h>

#include "cache/cache.h"
#include "cache_common.h"
#include "driver/image.h"
#include "kernels/kernels.h"

/* --- an SQLite VFS that fails the n-th write or sync --- */

typedef struct faulty_file {
  sqlite3_file base;
  sqlite3_file *real; /* allocated right after this struct */
} faulty_file;

static int g_ops, g_fail_at, g_failures;

static bool should_fail(void) {
  g_ops++;
  if (g_fail_at > 0 && g_ops == g_fail_at) {
    g_failures++;
    return true;
  }
  return false;
}

#define REAL(f) (((faulty_file *)(f))->real)
static int f_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int f_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
  return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int f_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) {
  if (should_fail()) return SQLITE_IOERR_WRITE;
  return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 n) {
  return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int f_sync(sqlite3_file *f, int flags) {
  if (should_fail()) return SQLITE_IOERR_FSYNC;
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *n) {
  return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int f_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int f_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int f_check(sqlite3_file *f, int *r) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r);
}
static int f_control(sqlite3_file *f, int op, void *a) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int f_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int f_chars(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int f_shm_map(sqlite3_file *f, int i, int sz, int w, void volatile **p) {
  return REAL(f)->pMethods->xShmMap(REAL(f), i, sz, w, p);
}
static int f_shm_lock(sqlite3_file *f, int o, int n, int fl) {
  return REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl);
}
static void f_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int f_shm_unmap(sqlite3_file *f, int d) { return REAL(f)->pMethods->xShmUnmap(REAL(f), d); }

/* No memory-mapped reads (xFetch), so every write goes through xWrite. */
static const sqlite3_io_methods faulty_methods = {
    2,          f_close,       f_read,      f_write,   f_truncate, f_sync,  f_size,
    f_lock,     f_unlock,      f_check,     f_control, f_sector,   f_chars, f_shm_map,
    f_shm_lock, f_shm_barrier, f_shm_unmap, NULL,      NULL};

static sqlite3_vfs faulty_vfs;

static int f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out) {
  sqlite3_vfs *real_vfs = vfs->pAppData;
  faulty_file *ff = (faulty_file *)file;
  ff->real = (sqlite3_file *)(ff + 1);
  int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out);
  file->pMethods = rc == SQLITE_OK && ff->real->pMethods ? &faulty_methods : NULL;
  return rc;
}

static void register_faulty(void) {
  static bool done = false;
  if (done) return;
  sqlite3_vfs *real = sqlite3_vfs_find(NULL);
  faulty_vfs = *real;
  faulty_vfs.zName = "faulty";
  faulty_vfs.szOsFile = (int)sizeof(faulty_file) + real->szOsFile;
  faulty_vfs.xOpen = f_open;
  faulty_vfs.pAppData = real;
  cr_assert_eq(sqlite3_vfs_register(&faulty_vfs, 0), SQLITE_OK);
  done = true;
}

enum { FILL = 3 };

/* Fills a fresh cache through the faulty VFS: every kernel must come back,
 * and match the reference. */
static void fill_through_faults(const char *dir, void **refs, size_t *ref_sizes) {
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, NULL);
  /* The engine opened its store when it was made; reopen it through the
   * faulty VFS. */
  pthread_mutex_lock(&e->cache.disk_lock);
  jk_store_close(e);
  e->cache.vfs = "faulty";
  pthread_mutex_unlock(&e->cache.disk_lock);
  for (int i = 0; i < FILL; i++) {
    jitk_module *m = jt_kernel(e, i);
    size_t n;
    void *img = jt_image_copy(m, &n);
    cr_assert(n == ref_sizes[i] && memcmp(img, refs[i], n) == 0, "kernel %d came back wrong", i);
    free(img);
    jitk_module_destroy(m);
  }
  jitk_engine_destroy(e);
}

Test(cache_faults, io_errors_at_every_write_and_sync, .timeout = 280) {
  register_faulty();
  void *refs[FILL];
  size_t sizes[FILL];
  jitk_engine *ce = jt_compile_engine("sm_90");
  for (int i = 0; i < FILL; i++) {
    jitk_module *m = jt_kernel(ce, i);
    refs[i] = jt_image_copy(m, &sizes[i]);
    jitk_module_destroy(m);
  }
  jitk_engine_destroy(ce);

  /* A run without faults counts the writes and syncs. */
  char *dir = jt_tmpdir();
  g_ops = 0;
  g_fail_at = 0;
  fill_through_faults(dir, refs, sizes);
  int total = g_ops;
  jt_rmdir(dir);
  cr_assert(total > 5, "the fill wrote (%d operations)", total);

  for (int n = 1; n <= total; n++) {
    dir = jt_tmpdir();
    g_ops = 0;
    g_fail_at = n;
    g_failures = 0;
    fill_through_faults(dir, refs, sizes);
    cr_assert_eq(g_failures, 1, "operation %d of %d failed once", n, total);
    g_fail_at = 0;
    char db[512];
    struct stat st;
    snprintf(db, sizeof db, "%s/kernels.db", dir);
    if (stat(db, &st) == 0) {
      char ic[64];
      jt_integrity(dir, ic, sizeof ic);
      cr_assert_str_eq(ic, "ok", "after failing operation %d", n);
      /* And a healthy engine on it serves or recompiles every kernel. */
      jitk_engine *e = jt_cache_engine(dir);
      for (int i = 0; i < FILL; i++) {
        jitk_module *m = jt_kernel(e, i);
        size_t sz;
        void *img = jt_image_copy(m, &sz);
        cr_assert(sz == sizes[i] && memcmp(img, refs[i], sz) == 0);
        free(img);
        jitk_module_destroy(m);
      }
      jitk_engine_destroy(e);
    }
    jt_rmdir(dir);
  }
  for (int i = 0; i < FILL; i++) free(refs[i]);
}

/* --- allocation failures through create, compile, store and load --- */

static jitk_engine *counted_engine(const char *dir, jt_counter *c, jitk_status *st) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = dir;
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.alloc_fn = jt_counting;
  cfg.alloc_user = c;
  cfg.log_level = JITK_LOG_OFF;
  jitk_engine *e = NULL;
  *st = jitk_engine_create(&cfg, &e);
  return e;
}

/* Compile and store with one engine, then load from disk with another,
 * then list and verify. Returns the first failure. */
static jitk_status alloc_scenario(const char *dir, jt_counter *c) {
  const char *names[] = {"t<int>"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 1;
  const char *src = "template <typename T> __global__ void t(T *p) { *p = T(3); }\n";
  jitk_status first = JITK_OK;
  for (int round = 0; round < 2; round++) {
    jitk_status st;
    jitk_engine *e = counted_engine(dir, c, &st);
    if (st != JITK_OK) return st;
    jitk_module *m = NULL;
    st = jitk_module_create(e, src, &o, &m);
    if (st == JITK_OK) {
      const char *lowered;
      st = jitk_module_lowered_name(m, "t<int>", &lowered);
    }
    jitk_module_destroy(m);
    size_t checked, removed;
    jitk_status vs = jitk_cache_verify(e, &checked, &removed);
    if (st == JITK_OK && vs != JITK_OK && vs != JITK_ERR_CACHE) st = vs;
    if (first == JITK_OK) first = st;
    jitk_engine_destroy(e);
  }
  return first;
}

Test(cache_faults, allocation_failures, .timeout = 280) {
  char *dir = jt_tmpdir();
  jt_counter full = {0, 0, 0};
  cr_assert_eq(alloc_scenario(dir, &full), JITK_OK);
  cr_assert_eq(full.live, 0, "%ld blocks leaked", full.live);
  jt_rmdir(dir);
  for (long n = 1; n <= full.calls; n++) {
    dir = jt_tmpdir();
    jt_counter c = {0, 0, n};
    jitk_status st = alloc_scenario(dir, &c);
    cr_assert(st == JITK_OK || st == JITK_ERR_OUT_OF_MEMORY,
              "failing allocation %ld of %ld gave %s: %s", n, full.calls, jitk_errname(st),
              jitk_errmsg(NULL));
    cr_assert_eq(c.live, 0, "failing allocation %ld leaked %ld blocks", n, c.live);
    /* Whatever was stored is sound. */
    char ic[64];
    char db[512];
    struct stat sb;
    snprintf(db, sizeof db, "%s/kernels.db", dir);
    if (stat(db, &sb) == 0) {
      jt_integrity(dir, ic, sizeof ic);
      cr_assert_str_eq(ic, "ok");
    }
    jt_rmdir(dir);
  }
}

/* --- a damaged database --- */

enum { CORRUPT_KERNELS = 6 };

typedef struct pristine {
  char *dir;
  void *refs[CORRUPT_KERNELS];
  size_t sizes[CORRUPT_KERNELS];
  unsigned char *file;
  size_t file_size;
} pristine;

static void make_pristine(pristine *p) {
  p->dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(p->dir);
  for (int i = 0; i < CORRUPT_KERNELS; i++) {
    jitk_module *m = jt_kernel(e, i);
    p->refs[i] = jt_image_copy(m, &p->sizes[i]);
    jitk_module_destroy(m);
  }
  jitk_engine_destroy(e); /* checkpoints: everything is in kernels.db */
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", p->dir);
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f);
  fseek(f, 0, SEEK_END);
  p->file_size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  p->file = malloc(p->file_size);
  cr_assert_eq(fread(p->file, 1, p->file_size, f), p->file_size);
  fclose(f);
}

static void write_db(const pristine *p, const unsigned char *bytes, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", p->dir);
  for (const char *suffix = ""; suffix != NULL; suffix = *suffix ? NULL : "-wal") {
    char side[600];
    snprintf(side, sizeof side, "%s%s", path, suffix);
    unlink(side);
  }
  snprintf(path, sizeof path, "%s/kernels.db-shm", p->dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/kernels.db", p->dir);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(bytes, 1, n, f), n);
  fclose(f);
  chmod(path, 0600);
}

/* Asks for every kernel: each must be the reference, whether it came
 * from the damaged file or from NVRTC. Returns the entries found corrupt. */
static uint64_t ask_all(const pristine *p, const char *what) {
  jitk_engine *e = jt_cache_engine_ex(p->dir, JITK_CACHE_ON, 0, 0, 0, NULL);
  for (int i = 0; i < CORRUPT_KERNELS; i++) {
    jitk_module *m = jt_kernel(e, i);
    size_t n;
    void *img = jt_image_copy(m, &n);
    cr_assert(n == p->sizes[i] && memcmp(img, p->refs[i], n) == 0,
              "%s: kernel %d came back corrupt", what, i);
    free(img);
    jitk_module_destroy(m);
  }
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits + s.compiles, CORRUPT_KERNELS, "%s", what);
  jitk_engine_destroy(e);
  return s.corrupt;
}

Test(cache_faults, damaged_database, .timeout = 280) {
  pristine p;
  make_pristine(&p);
  uint64_t seed = 0xDA3A6E;

  /* Truncated. */
  size_t cuts[] = {p.file_size / 2, p.file_size / 3, 4096, 100};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    write_db(&p, p.file, cuts[i]);
    ask_all(&p, "truncated");
  }

  /* Random bit flips anywhere in the file. */
  unsigned char *copy = malloc(p.file_size);
  for (int trial = 0; trial < 24; trial++) {
    memcpy(copy, p.file, p.file_size);
    int flips = 1 + (int)(jt_next(&seed) % 40);
    for (int f = 0; f < flips; f++) {
      size_t at = (size_t)(jt_next(&seed) % p.file_size);
      copy[at] ^= (unsigned char)(1u << (jt_next(&seed) % 8));
    }
    write_db(&p, copy, p.file_size);
    ask_all(&p, "bit flips");
  }

  /* A flip inside each stored cubin: the checksum catches it. */
  for (int k = 0; k < CORRUPT_KERNELS; k++) {
    memcpy(copy, p.file, p.file_size);
    /* The page layout may split a cubin across pages; its first 256 bytes
     * (the ELF header) sit together. */
    unsigned char *hit = memmem(copy, p.file_size, p.refs[k], 256);
    cr_assert_not_null(hit, "cubin %d found in the file", k);
    hit[100] ^= 0x10;
    write_db(&p, copy, p.file_size);
    uint64_t corrupt = ask_all(&p, "a flip inside a cubin");
    cr_assert_eq(corrupt, 1, "cubin %d: the damaged entry was detected", k);
  }

  /* Garbage. */
  for (size_t i = 0; i < p.file_size; i++) copy[i] = (unsigned char)jt_next(&seed);
  write_db(&p, copy, p.file_size);
  ask_all(&p, "garbage");
  free(copy);

  /* The write-ahead log deleted while its connection is open. */
  write_db(&p, p.file, 0);
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", p.dir);
  unlink(path);
  jitk_engine *holder = jt_cache_engine(p.dir);
  for (int i = 0; i < CORRUPT_KERNELS; i++) jitk_module_destroy(jt_kernel(holder, i));
  snprintf(path, sizeof path, "%s/kernels.db-wal", p.dir);
  struct stat st;
  cr_assert_eq(stat(path, &st), 0, "the entries sit in the WAL");
  cr_assert_eq(unlink(path), 0);
  ask_all(&p, "deleted -wal");
  jitk_engine_destroy(holder);
  ask_all(&p, "after the WAL's owner closed");

  for (int i = 0; i < CORRUPT_KERNELS; i++) free(p.refs[i]);
  free(p.file);
  jt_rmdir(p.dir);
}

/* A row whose checksum holds but whose names do not parse (a jitk of
 * another format wrote it, or a hand) is not served, and leaves nothing
 * in the entry it was read into: the caller compiles into that entry
 * next, which overwrote the image, the log and the names read so far. */
Test(cache_faults, a_row_whose_names_do_not_parse_leaves_nothing) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_material mat;
  jk_material_init(&mat, e);
  jk_material_add_str(&mat, "request", "what the key was made of");
  static const char *const names_sets[][4] = {
      {"name_expression", "f<1>", "bogus", "x"},              /* a pair of the wrong labels */
      {"name_expression", "f<1>", "lowered", "_Z1fILi1EEvv"}, /* sound, for contrast */
  };
  for (size_t c = 0; c < 2; c++) {
    jk_material names;
    jk_material_init(&names, e);
    jk_material_add_str(&names, names_sets[c][0], names_sets[c][1]);
    jk_material_add_str(&names, names_sets[c][2], names_sets[c][3]);
    /* A real cubin: rows pass the image check before they are served. */
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
    const void *image = NULL;
    size_t image_size = 0;
    JT_OK(e, jitk_module_image(m, &image, &image_size, NULL));
    static const char log[] = "a log";
    uint8_t sum[16];
    jk_store_checksum(JITK_IMAGE_CUBIN, image, image_size, names.data, names.len, log, strlen(log),
                      sum);
    jk_entry x;
    memset(&x, 0, sizeof x);
    bool found = true;
    const char *why = NULL;
    JT_OK(e, jk_store_check_entry(e, JITK_IMAGE_CUBIN, 1.0, sum, 16, mat.data, mat.len, names.data,
                                  names.len, log, strlen(log), image, image_size, &mat, &x, &found,
                                  &why));
    jitk_module_destroy(m);
    if (c == 0) {
      cr_assert(!found && why != NULL && strcmp(why, "its names do not parse") == 0, "%s",
                why ? why : "(served)");
      cr_assert(x.image == NULL && x.log == NULL && x.name_expressions == NULL &&
                    x.lowered == NULL && x.num_names == 0 && x.image_size == 0,
                "what the row gave before its names failed is freed and cleared");
    } else {
      cr_assert(found && why == NULL, "%s", why ? why : "");
      cr_assert(x.num_names == 1 && strcmp(x.lowered[0], "_Z1fILi1EEvv") == 0);
      jk_free(e, x.name_expressions[0]);
      jk_free(e, x.lowered[0]);
      jk_free(e, x.name_expressions);
      jk_free(e, x.lowered);
      jk_free(e, x.image);
      jk_free(e, x.log);
    }
    jk_material_free(&names);
  }
  jk_material_free(&mat);
  jitk_engine_destroy(e);
}

/* A row whose checksum holds but whose cubin is for another architecture
 * (sm_80 on an sm_90 engine: copied between caches, or put into a remote
 * by another machine) is not served, where it would fail at every load: it
 * is removed as corrupt and the kernel compiled again. */
Test(cache_faults, a_cubin_for_another_architecture_is_not_served) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  jitk_engine *e80 = jt_compile_engine_with_cache("sm_80", JITK_CACHE_OFF);
  jitk_module *m80 = jt_kernel(e80, 1);
  const void *img80 = NULL;
  size_t n80 = 0;
  JT_OK(e80, jitk_module_image(m80, &img80, &n80, NULL));

  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *q = NULL;
  cr_assert_eq(sqlite3_prepare_v2(db, "SELECT id, names, log FROM entries", -1, &q, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  int64_t id = sqlite3_column_int64(q, 0);
  uint8_t sum[16];
  jk_store_checksum(JITK_IMAGE_CUBIN, img80, n80, sqlite3_column_blob(q, 1),
                    (size_t)sqlite3_column_bytes(q, 1), (const char *)sqlite3_column_text(q, 2),
                    (size_t)sqlite3_column_bytes(q, 2), sum);
  sqlite3_finalize(q);
  cr_assert_eq(sqlite3_prepare_v2(db, "UPDATE entries SET image = ?1, checksum = ?2 WHERE id = ?3",
                                  -1, &q, NULL),
               SQLITE_OK);
  sqlite3_bind_blob(q, 1, img80, (int)n80, SQLITE_STATIC);
  sqlite3_bind_blob(q, 2, sum, 16, SQLITE_STATIC);
  sqlite3_bind_int64(q, 3, id);
  cr_assert_eq(sqlite3_step(q), SQLITE_DONE);
  sqlite3_finalize(q);
  sqlite3_close(db);
  jitk_module_destroy(m80);
  jitk_engine_destroy(e80);

  e = jt_cache_engine(dir);
  jitk_module *m = jt_kernel(e, 1);
  jitk_cache_stats st = jt_stats_mine(e);
  cr_assert_eq(st.disk_hits, 0, "the sm_80 cubin was served");
  cr_assert_eq(st.compiles, 1);
  cr_assert_eq(st.corrupt, 1);
  const void *img = NULL;
  size_t n = 0;
  JT_OK(e, jitk_module_image(m, &img, &n, NULL));
  int sm = 0;
  JT_OK(e, jk_cubin_arch(e, img, n, &sm));
  cr_assert_eq(sm, 90);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  /* The row compiled again is sound: a disk hit. */
  e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}
