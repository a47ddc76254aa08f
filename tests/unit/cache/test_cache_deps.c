/*
 * The files a compile reads are part of what a hit is checked against:
 * an edited header, another working directory, a header added earlier on
 * the include path, an updated toolkit or NVRTC each make a miss, never a
 * stale hit (issue 11).
 */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_common.h"

static const char *kernel =
    "#include \"h.cuh\"\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";

/* The kernel above with its header named by a macro, which the scan of
 * its includes cannot follow: its dependency record is incomplete. */
static const char *by_macro =
    "#define PICK(x) <x.cuh>\n#include PICK(impl)\n"
    "extern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  fclose(f);
}

static void header(const char *path, int v) {
  char text[64];
  snprintf(text, sizeof text, "#define VALUE %d\n", v);
  put(path, text);
}

/* Compiles `src` as program k.cu with the options given; returns a copy
 * of the cubin. */
static void *compile(jitk_engine *e, const char *src, const char **opts, size_t nopts,
                     size_t *size) {
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = nopts;
  o.program_name = "k.cu";
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  void *img = jt_image_copy(m, size);
  jitk_module_destroy(m);
  return img;
}

static bool same(const void *a, size_t na, const void *b, size_t nb) {
  return na == nb && memcmp(a, b, na) == 0;
}

/* A scratch working directory with a cache folder inside; returns the
 * cache folder. */
static char *scratch(char *work) {
  cr_assert_eq(chdir(work), 0);
  cr_assert_eq(mkdir("a", 0755), 0);
  char *cache = malloc(strlen(work) + 16);
  sprintf(cache, "%s/cache", work);
  return cache;
}

Test(cache_deps, an_edited_header_is_a_miss) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  const char *opts[] = {"-Ia"};
  header("a/h.cuh", 111);
  jitk_engine *e = jt_cache_engine(cache);
  size_t n1, n2, n3;
  void *one = compile(e, kernel, opts, 1, &n1);
  jitk_engine_destroy(e);

  header("a/h.cuh", 222);
  e = jt_cache_engine(cache);
  void *two = compile(e, kernel, opts, 1, &n2);
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 0, "the edited header was served from the old entry");
  cr_assert_eq(s.compiles, 1);
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);

  /* Back to the first content: the first entry serves it again. */
  header("a/h.cuh", 111);
  e = jt_cache_engine(cache);
  void *three = compile(e, kernel, opts, 1, &n3);
  s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.compiles, 0);
  cr_assert(same(one, n1, three, n3));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(three);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, two_working_directories_with_their_own_headers) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  cr_assert_eq(mkdir("one", 0755), 0);
  cr_assert_eq(mkdir("one/a", 0755), 0);
  cr_assert_eq(mkdir("two", 0755), 0);
  cr_assert_eq(mkdir("two/a", 0755), 0);
  header("one/a/h.cuh", 111);
  header("two/a/h.cuh", 222);
  const char *opts[] = {"-Ia"}; /* relative: a different folder in each */
  size_t n1, n2, n3;
  cr_assert_eq(chdir("one"), 0);
  jitk_engine *e = jt_cache_engine(cache);
  void *one = compile(e, kernel, opts, 1, &n1);
  jitk_engine_destroy(e);
  cr_assert_eq(chdir("../two"), 0);
  e = jt_cache_engine(cache);
  void *two = compile(e, kernel, opts, 1, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 1, "the other folder's kernel was served");
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  cr_assert_eq(chdir("../one"), 0);
  e = jt_cache_engine(cache);
  void *three = compile(e, kernel, opts, 1, &n3);
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  cr_assert(same(one, n1, three, n3));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(three);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, a_header_added_earlier_on_the_path_is_a_miss) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  cr_assert_eq(mkdir("b", 0755), 0);
  header("b/h.cuh", 444);
  const char *opts[] = {"-Ia", "-Ib"};
  const char *angle = "#include <h.cuh>\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  size_t n1, n2;
  jitk_engine *e = jt_cache_engine(cache);
  void *one = compile(e, angle, opts, 2, &n1);
  jitk_engine_destroy(e);
  header("a/h.cuh", 333);
  e = jt_cache_engine(cache);
  void *two = compile(e, angle, opts, 2, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 1, "a/h.cuh now comes first and was not read");
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, memory_hits_recheck_the_callers_files) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  const char *opts[] = {"-Ia"};
  header("a/h.cuh", 111);
  jt_log log = {0};
  jitk_engine *e = jt_cache_engine_ex(cache, JITK_CACHE_ON, 0, 0, 0, &log);
  size_t n1, n2, n3;
  void *one = compile(e, kernel, opts, 1, &n1);
  void *again = compile(e, kernel, opts, 1, &n2);
  cr_assert_eq(jt_stats_mine(e).memory_hits, 1);
  cr_assert(same(one, n1, again, n2));
  free(again);
  header("a/h.cuh", 222);
  void *two = compile(e, kernel, opts, 1, &n3);
  cr_assert_eq(jt_stats_mine(e).compiles, 2, "a memory hit served the old header");
  cr_assert(!same(one, n1, two, n3));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

/* An engine whose CUDA headers are a folder of the test's. */
static jitk_engine *engine_with_toolkit(const char *cache, const char *include) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = cache;
  cfg.cache_mode = JITK_CACHE_ON;
  cfg.cuda_include_dir = include;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  return e;
}

Test(cache_deps, a_toolkit_update_is_a_miss) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  cr_assert_eq(mkdir("toolkit", 0755), 0);
  put("toolkit/cuda_fp16.h", "/* stands for the toolkit's */\n");
  header("toolkit/tk.h", 1);
  char inc[600];
  snprintf(inc, sizeof inc, "%s/toolkit", work);
  const char *src = "#include <tk.h>\nextern \"C\" __global__ void k(int *p) { *p = VALUE; }\n";
  size_t n1, n2;
  jitk_engine *e = engine_with_toolkit(cache, inc);
  void *one = compile(e, src, NULL, 0, &n1);
  jitk_engine_destroy(e);
  e = engine_with_toolkit(cache, inc);
  free(compile(e, src, NULL, 0, &n2));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  /* The same NVRTC, other CUDA headers. */
  header("toolkit/tk.h", 2);
  e = engine_with_toolkit(cache, inc);
  void *two = compile(e, src, NULL, 0, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 1, "a changed toolkit header was served stale");
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, another_nvrtc_build_is_a_miss) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  header("a/h.cuh", 111);
  const char *opts[] = {"-Ia"};
  size_t n;
  jitk_engine *e = jt_cache_engine(cache);
  free(compile(e, kernel, opts, 1, &n));
  /* The NVRTC libraries' content is in every entry; their large files'
   * hashes are remembered in the database. */
  cr_assert_eq(strlen(e->cache.toolchain), 32);
  char toolchain[33];
  memcpy(toolchain, e->cache.toolchain, 33);
  jitk_engine_destroy(e);
  sqlite3 *db;
  char path[600];
  snprintf(path, sizeof path, "%s/kernels.db", cache);
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *q;
  cr_assert_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM files", -1, &q, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  cr_assert_geq(sqlite3_column_int(q, 0), 1, "libnvrtc's hash is not remembered");
  sqlite3_finalize(q);
  sqlite3_close(db);

  e = jt_cache_engine(cache);
  free(compile(e, kernel, opts, 1, &n));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  cr_assert_str_eq(e->cache.toolchain, toolchain, "the digest changed between engines");
  jitk_engine_destroy(e);
  /* An NVRTC whose files hash differently (the same version): a miss. */
  e = jt_cache_engine(cache);
  memcpy(e->cache.toolchain, "0123456789abcdef0123456789abcdef", 33);
  free(compile(e, kernel, opts, 1, &n));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 0);
  cr_assert_eq(jt_stats_mine(e).compiles, 1);
  jitk_engine_destroy(e);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, an_incomplete_record_is_not_stored) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  header("a/impl.cuh", 5);
  const char *opts[] = {"-Ia"};
  jt_log log = {0};
  size_t n;
  for (int round = 0; round < 2; round++) {
    jitk_engine *e = jt_cache_engine_ex(cache, JITK_CACHE_ON, 0, 0, 0, &log);
    free(compile(e, by_macro, opts, 1, &n));
    cr_assert_eq(jt_stats_mine(e).compiles, 1, "round %d", round);
    jitk_engine_destroy(e);
  }
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

/* Nor is it served from the engine's memory: the header it reads through
 * a macro is edited between two compiles in one engine, and the second
 * sees the edit (a memory hit once served the first). */
Test(cache_deps, an_incomplete_record_is_not_served_from_memory) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  header("a/impl.cuh", 5);
  const char *opts[] = {"-Ia"};
  jt_log log = {0};
  jitk_engine *e = jt_cache_engine_ex(cache, JITK_CACHE_ON, 0, 0, 0, &log);
  size_t n1, n2;
  void *one = compile(e, by_macro, opts, 1, &n1);
  header("a/impl.cuh", 6);
  void *two = compile(e, by_macro, opts, 1, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 2, "a memory hit served the old header");
  cr_assert_eq(jt_stats_mine(e).memory_hits, 0);
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

static void rewrite_header(void *user, jk_cache_event ev) {
  if (ev == JK_EVENT_COMPILED) header((const char *)user, 999);
}

Test(cache_deps, a_header_edited_during_the_compile_is_not_stored) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  header("a/h.cuh", 111);
  const char *opts[] = {"-Ia"};
  size_t n1, n2;
  jitk_engine *e = jt_cache_engine(cache);
  e->cache.test_hook = rewrite_header;
  e->cache.test_user = (void *)"a/h.cuh";
  void *one = compile(e, kernel, opts, 1, &n1);
  jitk_engine_destroy(e);
  /* What NVRTC read (111) is no longer on disk (999): nothing may serve
   * the 111 kernel for it. */
  e = jt_cache_engine(cache);
  void *two = compile(e, kernel, opts, 1, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 1);
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, large_headers_are_remembered_until_they_change) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  /* Over the size from which hashes are remembered (16 KiB). */
  char *big = malloc(40000);
  memset(big, ' ', 39990);
  memcpy(big, "#define VALUE 7 ", 16);
  strcpy(big + 39990, "\n");
  put("a/h.cuh", big);
  /* Remembered only once its change time is a few seconds old. */
  sleep(3);
  const char *opts[] = {"-Ia"};
  size_t n1, n2;
  jitk_engine *e = jt_cache_engine(cache);
  void *one = compile(e, kernel, opts, 1, &n1);
  jitk_engine_destroy(e);
  char path[600];
  snprintf(path, sizeof path, "%s/kernels.db", cache);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  struct stat st;
  cr_assert_eq(stat("a/h.cuh", &st), 0);
  sqlite3_stmt *q;
  cr_assert_eq(
      sqlite3_prepare_v2(db, "SELECT size FROM files WHERE dev = ?1 AND ino = ?2", -1, &q, NULL),
      SQLITE_OK);
  sqlite3_bind_int64(q, 1, (int64_t)st.st_dev);
  sqlite3_bind_int64(q, 2, (int64_t)st.st_ino);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW, "the large header's hash is not remembered");
  cr_assert_eq(sqlite3_column_int64(q, 0), 39991);
  sqlite3_finalize(q);
  sqlite3_close(db);
  e = jt_cache_engine(cache);
  free(compile(e, kernel, opts, 1, &n2));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  /* Same size, same inode, new content: the change time moved, so the
   * remembered hash no longer stands. */
  big[15] = '8';
  FILE *f = fopen("a/h.cuh", "r+");
  cr_assert_not_null(f);
  fputs(big, f);
  fclose(f);
  e = jt_cache_engine(cache);
  void *two = compile(e, kernel, opts, 1, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 1);
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  free(big);
  free(one);
  free(two);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

Test(cache_deps, a_request_keeps_at_most_sixteen_entries) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  const char *opts[] = {"-Ia"};
  jitk_engine *e = jt_cache_engine(cache);
  for (int i = 0; i < 20; i++) {
    header("a/h.cuh", 1000 + i);
    size_t n;
    free(compile(e, kernel, opts, 1, &n));
  }
  cr_assert_eq(jt_stats_mine(e).compiles, 20);
  jitk_cache_stats all = jt_stats_all(e);
  cr_assert_eq(all.entries, 16, "%llu entries", (unsigned long long)all.entries);
  pthread_mutex_lock(&e->cache.disk_lock);
  sqlite3_stmt *q;
  cr_assert_eq(sqlite3_prepare_v2(e->cache.db, "SELECT count(*) FROM requests", -1, &q, NULL),
               SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  cr_assert_eq(sqlite3_column_int(q, 0), 16);
  sqlite3_finalize(q);
  pthread_mutex_unlock(&e->cache.disk_lock);
  jitk_engine_destroy(e);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}
