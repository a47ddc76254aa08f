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

/* NVRTC's compile with the header rewritten before it (999) and put back
 * as the scan read it (111) after it. */
static const char *edited;
static nvrtcResult compile_between_edits(nvrtcProgram prog, int n, const char *const *opts) {
  header(edited, 999);
  nvrtcResult r = nvrtcCompileProgram(prog, n, opts);
  header(edited, 111);
  return r;
}

Test(cache_deps, a_header_edited_and_put_back_during_the_compile_is_not_stored) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  header("a/h.cuh", 111);
  const char *opts[] = {"-Ia"};
  size_t n1, n2, n3;
  jitk_engine *e = jt_cache_engine(cache);
  edited = "a/h.cuh";
  e->nvrtc.nvrtcCompileProgram = compile_between_edits;
  void *one = compile(e, kernel, opts, 1, &n1);
  e->nvrtc.nvrtcCompileProgram = nvrtcCompileProgram;
  /* The header holds what the scan read (111), but NVRTC read 999: the
   * kernel is served neither from memory nor from disk. */
  void *two = compile(e, kernel, opts, 1, &n2);
  cr_assert_eq(jt_stats_mine(e).compiles, 2, "the 999 kernel was served from memory");
  cr_assert(!same(one, n1, two, n2));
  jitk_engine_destroy(e);
  e = jt_cache_engine(cache);
  void *three = compile(e, kernel, opts, 1, &n3);
  cr_assert(same(two, n2, three, n3), "the 999 kernel was stored as the 111 one");
  jitk_engine_destroy(e);
  free(one);
  free(two);
  free(three);
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

/* Runs the program toolchain_child.c with libnvrtc loaded from `lib`;
 * returns its output. The program lies beside this test's executable, in
 * the build's tests folder as in a GPU bundle's bin folder. */
static void run_child(const char *lib, const char *cache, const char *when, const char *link,
                      const char *target, const char *kernels, char *out, size_t n) {
  char self[2048];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  cr_assert(len > 0, "where is this test's executable?");
  self[len] = '\0';
  char *slash = strrchr(self, '/');
  cr_assert_not_null(slash);
  *slash = '\0';
  char cmd[4096];
  /* `lib` comes first, so that its NVRTC is the one loaded; the path the
   * test inherited follows, for the other libraries the program needs
   * where they are not the system's (a GPU bundle's lib folder). */
  snprintf(cmd, sizeof cmd,
           "LD_LIBRARY_PATH='%s'${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} '%s/toolchain_child' '%s' %s "
           "'%s' '%s' %s",
           lib, self, cache, when, link, target, kernels);
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  size_t got = fread(out, 1, n - 1, p);
  out[got] = '\0';
  cr_assert_eq(pclose(p), 0, "%s: %s", cmd, out);
}

/* Copies a file, through the shell's cp. */
static void copy_file(const char *from, const char *to) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* A package update replaces NVRTC's files under running processes, which
 * go on compiling with the libraries they loaded. Such a process must not
 * label its kernels with the new files' digest (every process that loads
 * the new files would be served them), nor be served kernels the new
 * files compiled: while a library it runs is not the file on disk, it
 * neither stores nor serves from the disk tier. */
Test(cache_deps, a_replaced_nvrtc_is_neither_served_nor_stored) {
  char *work = jt_tmpdir();
  char *cache = scratch(work);
  jitk_engine *e = jt_cache_engine(cache);
  jitk_module_destroy(jt_kernel(e, 1));
  char *nvrtc = NULL, *builtins = NULL;
  JT_OK(e, jk_nvrtc_library_files(e, &nvrtc, &builtins));
  cr_assert(nvrtc != NULL && builtins != NULL);
  char real[4096];
  cr_assert_not_null(realpath(nvrtc, real));
  jitk_engine_destroy(e);

  /* A folder to load libnvrtc from: the library itself (NVRTC opens the
   * builtins beside its real path), a link to the builtins, and another
   * build of the builtins (one byte of its build ID changed). */
  char lib[600], lib_nvrtc[700], lib_builtins[700], other[600];
  snprintf(lib, sizeof lib, "%s/lib", work);
  snprintf(lib_nvrtc, sizeof lib_nvrtc, "%s/%s", lib, strrchr(nvrtc, '/') + 1);
  snprintf(lib_builtins, sizeof lib_builtins, "%s/%s", lib, strrchr(builtins, '/') + 1);
  snprintf(other, sizeof other, "%s/other-builtins.so", work);
  cr_assert_eq(mkdir(lib, 0755), 0);
  if (link(real, lib_nvrtc) != 0) copy_file(real, lib_nvrtc);
  cr_assert_not_null(realpath(builtins, real));
  cr_assert_eq(symlink(real, lib_builtins), 0);
  copy_file(real, other);
  jk_build_id id;
  cr_assert(jk_file_build_id(other, &id) && id.n > 0, "the builtins have no build ID");
  FILE *f = fopen(other, "r+b");
  cr_assert_not_null(f);
  size_t size = 0;
  unsigned char *bytes = NULL;
  cr_assert_eq(fseek(f, 0, SEEK_END), 0);
  size = (size_t)ftell(f);
  bytes = malloc(size);
  rewind(f);
  cr_assert_eq(fread(bytes, 1, size, f), size);
  unsigned char *at = memmem(bytes, size, id.bytes, id.n);
  cr_assert_not_null(at);
  cr_assert_eq(fseek(f, (long)(at - bytes), SEEK_SET), 0);
  fputc(at[0] ^ 0xff, f);
  fclose(f);
  free(bytes);
  jk_build_id changed;
  cr_assert(jk_file_build_id(other, &changed) && !jk_build_id_same(&id, &changed));

  char out[8192];
  /* Untouched, the child's files are this process's: kernel 1 is a hit,
   * kernel 2 is stored. */
  run_child(lib, cache, "never", "-", "-", "1 2", out, sizeof out);
  cr_assert_str_eq(out, "k1 hits 1 compiles 0\nk2 hits 0 compiles 1\n");
  /* The builtins replaced after the engine hashed them and before NVRTC
   * loads them (at its first compile): kernel 3 is compiled by files
   * other than the digest's and not stored; kernel 2 is not served. */
  run_child(lib, cache, "between", lib_builtins, other, "3 2", out, sizeof out);
  cr_assert_str_eq(out,
                   "k3 hits 0 compiles 1\nk2 hits 0 compiles 1\nwarning: kernel cache: the "
                   "libnvrtc-builtins file on disk is not the library this process loaded (it "
                   "was replaced after the process started); until the process is restarted, "
                   "kernels are neither served from nor stored in the disk and remote tiers\n");
  /* libnvrtc replaced before the engine hashes it. */
  cr_assert_eq(unlink(lib_builtins), 0);
  cr_assert_eq(symlink(real, lib_builtins), 0);
  run_child(lib, cache, "before", lib_nvrtc, other, "1 4", out, sizeof out);
  cr_assert(strstr(out,
                   "k1 hits 0 compiles 1\nk4 hits 0 compiles 1\nwarning: kernel cache: the "
                   "libnvrtc file on disk") == out,
            "%s", out);

  /* Nothing but kernels 1 and 2 was stored. */
  e = jt_cache_engine(cache);
  cr_assert_eq(jt_stats_all(e).entries, 2);
  jitk_module_destroy(jt_kernel(e, 2));
  jitk_module_destroy(jt_kernel(e, 3));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  cr_assert_eq(jt_stats_mine(e).compiles, 1);
  jitk_engine_destroy(e);
  free(nvrtc);
  free(builtins);
  free(cache);
  cr_assert_eq(chdir("/"), 0);
  jt_rmdir(work);
}

/* A record comes from other machines too (a remote's value): one larger
 * than any compile makes, or with a path longer than any, is refused as
 * malformed before a single file is looked at. */
Test(cache_deps, records_no_compile_makes_are_refused) {
  jitk_engine *e = jt_compile_engine("sm_90");
  for (int kind = 0; kind < 3; kind++) {
    jk_material m;
    jk_material_init(&m, e);
    jk_material_add_str(&m, "toolchain", "0123456789abcdef0123456789abcdef");
    size_t count = kind == 0 ? 65536 : kind == 1 ? 65537 : 1;
    size_t path_len = kind == 2 ? 4097 : 20;
    unsigned char *field = calloc(1, 17 + path_len);
    field[0] = 'A';
    memset(field + 17, 'p', path_len);
    for (size_t i = 0; i < count; i++) jk_material_add(&m, "dependency", field, 17 + path_len);
    free(field);
    cr_assert(!m.failed);
    const unsigned char *tc;
    size_t tcl;
    jk_deps d;
    jitk_status st = jk_deps_parse(e, m.data, m.len, 0, &tc, &tcl, &d);
    if (kind == 0) {
      cr_assert_eq(st, JITK_OK);
      cr_assert_eq(d.n, 65536);
      jk_deps_free(e, &d);
    } else {
      cr_assert_eq(st, JITK_ERR_INVALID_IMAGE, "kind %d: %d", kind, st);
    }
    jk_material_free(&m);
  }
  jitk_engine_destroy(e);
}
