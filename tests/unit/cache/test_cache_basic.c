/* The two tiers, the key, the modes and the maintenance calls. */
#include <pthread.h>

#include "cache/cache.h"
#include "cache_common.h"
#include "kernels/kernels.h"

Test(cache, memory_then_disk_hits) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module *a = jt_kernel(e, 1);
  jitk_module *b = jt_kernel(e, 1);
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 1);
  cr_assert_eq(s.misses, 1);
  cr_assert_eq(s.memory_hits, 1, "the second ask is a memory hit");
  cr_assert_eq(a->entry, b->entry, "both handles share the loaded entry");
  size_t size;
  void *ref = jt_image_copy(a, &size);
  jitk_module_destroy(a);
  jitk_module_destroy(b);
  jitk_engine_destroy(e);

  /* A new engine (a new process, as far as the cache can tell) reads it
   * from disk. */
  e = jt_cache_engine(dir);
  jitk_module *c = jt_kernel(e, 1);
  s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 0);
  cr_assert_eq(s.disk_hits, 1);
  size_t size2;
  void *img = jt_image_copy(c, &size2);
  cr_assert(size == size2 && memcmp(ref, img, size) == 0, "the same cubin comes back");
  jitk_cache_stats all = jt_stats_all(e);
  cr_assert_eq(all.entries, 1);
  cr_assert_eq(all.compiles, 1, "the database sums every process's counters");
  cr_assert_eq(all.disk_hits, 1);
  cr_assert_eq(all.memory_hits, 1);
  cr_assert(all.bytes > size);
  free(ref);
  free(img);
  jitk_module_destroy(c);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache, names_survive_the_disk) {
  char *dir = jt_tmpdir();
  const char *src = "template <typename T, int N> __global__ void f(T *p) { p[0] = T(N); }\n";
  const char *names[] = {"f<float, 2>", "f<double, 3>"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 2;
  o.program_name = "f.cu";
  for (int round = 0; round < 2; round++) {
    jitk_engine *e = jt_cache_engine(dir);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, &o, &m));
    const char *lowered;
    JT_OK(e, jitk_module_lowered_name(m, "f<double, 3>", &lowered));
    cr_assert_str_eq(lowered, "_Z1fIdLi3EEvPT_");
    const jitk_kernel_resources *res;
    size_t n;
    JT_OK(e, jitk_module_resources(m, &res, &n));
    cr_assert_eq(n, 2, "ptxas's report comes back from the stored log too");
    cr_assert_eq(jt_stats_mine(e).disk_hits, (uint64_t)round);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
  }
  jt_rmdir(dir);
}

/* Each change to what NVRTC sees must change the key. */
Test(cache, key_is_complete) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_engine *e80 = jt_compile_engine("sm_80");
  const char *opt1[] = {"-DX=1"}, *opt2[] = {"-DX=2"};
  const char *ne1[] = {"k"}, *ne2[] = {"k", "k"};
  jitk_header h1[] = {{"a.h", "#define A 1"}}, h2[] = {{"a.h", "#define A 2"}},
              h3[] = {{"b.h", "#define A 1"}};
  struct {
    jitk_engine *eng;
    const char *src, *program;
    const char *const *opts;
    size_t nopts;
    const char *const *names;
    size_t nnames;
    const jitk_header *headers;
    size_t nheaders;
  } variants[] = {
      {e, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, NULL, 0, NULL, 0},
      {e80, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, NULL, 0, NULL, 0},
      {e, "extern \"C\" __global__ void k() { }", NULL, NULL, 0, NULL, 0, NULL, 0},
      {e, "extern \"C\" __global__ void k() {}", "other.cu", NULL, 0, NULL, 0, NULL, 0},
      {e, "extern \"C\" __global__ void k() {}", NULL, opt1, 1, NULL, 0, NULL, 0},
      {e, "extern \"C\" __global__ void k() {}", NULL, opt2, 1, NULL, 0, NULL, 0},
      {e, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, ne1, 1, NULL, 0},
      {e, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, ne2, 2, NULL, 0},
      {e, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, NULL, 0, h1, 1},
      {e, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, NULL, 0, h2, 1},
      {e, "extern \"C\" __global__ void k() {}", NULL, NULL, 0, NULL, 0, h3, 1},
  };
  enum { N = sizeof variants / sizeof variants[0] };
  jk_key keys[N];
  for (int i = 0; i < N; i++) {
    jk_compile_input in;
    memset(&in, 0, sizeof in);
    in.source = variants[i].src;
    in.program_name = variants[i].program;
    in.options = variants[i].opts;
    in.num_options = variants[i].nopts;
    in.name_expressions = variants[i].names;
    in.num_name_expressions = variants[i].nnames;
    in.headers = variants[i].headers;
    in.num_headers = variants[i].nheaders;
    jk_material m;
    jk_material_init(&m, variants[i].eng);
    JT_OK(variants[i].eng, jk_cache_key(variants[i].eng, &in, "raw/1", &m, &keys[i]));
    /* The material names what goes in: the NVRTC build and the digest of
     * jitk's headers among it. */
    bool has_nvrtc = false, has_headers = false, has_format = false, has_scanner = false;
    char scanner[16];
    snprintf(scanner, sizeof scanner, "%d", JK_DEPS_SCANNER_VERSION);
    size_t pos = 0, n;
    const char *label;
    const unsigned char *bytes;
    bool ok;
    while (jk_material_next(m.data, m.len, &pos, &label, &bytes, &n, &ok)) {
      has_nvrtc |= strcmp(label, "nvrtc") == 0 && n > 4;
      has_headers |= strcmp(label, "jitk_headers") == 0 && n == 32;
      has_format |= strcmp(label, "format") == 0;
      /* The scan's version, so that records of an older scan are not
       * served. */
      has_scanner |= strcmp(label, "deps_scanner") == 0 && n == strlen(scanner) &&
                     memcmp(bytes, scanner, n) == 0;
    }
    cr_assert(ok && has_nvrtc && has_headers && has_format);
    cr_assert(has_scanner, "the dependency scan's version is not in the key material");
    jk_material_free(&m);
    /* The generator's version is part of it too. */
    if (i == 0) {
      jk_key other;
      jk_material_init(&m, e);
      JT_OK(e, jk_cache_key(e, &in, "raw/2", &m, &other));
      cr_assert(memcmp(other.bytes, keys[0].bytes, 16) != 0, "generator version");
      jk_material_free(&m);
    }
  }
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++)
      cr_assert(memcmp(keys[i].bytes, keys[j].bytes, 16) != 0, "variants %d and %d share a key", i,
                j);
  /* The same input gives the same key: nothing that varies goes in. */
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.source = variants[0].src;
  jk_material m;
  jk_material_init(&m, e);
  jk_key again;
  JT_OK(e, jk_cache_key(e, &in, "raw/1", &m, &again));
  cr_assert(memcmp(again.bytes, keys[0].bytes, 16) == 0);
  jk_material_free(&m);
  jitk_engine_destroy(e);
  jitk_engine_destroy(e80);
}

Test(cache, material_fields_are_unambiguous) {
  /* "ab"+"c" and "a"+"bc" must serialize differently. */
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_material a, b;
  jk_material_init(&a, e);
  jk_material_init(&b, e);
  jk_material_add_str(&a, "x", "ab");
  jk_material_add_str(&a, "x", "c");
  jk_material_add_str(&b, "x", "a");
  jk_material_add_str(&b, "x", "bc");
  cr_assert(a.len != b.len || memcmp(a.data, b.data, a.len) != 0);
  jk_material_free(&a);
  jk_material_free(&b);
  jitk_engine_destroy(e);
}

Test(cache, memory_table_is_bounded) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 2, 0, NULL);
  for (int i = 0; i < 3; i++) jitk_module_destroy(jt_kernel(e, i));
  cr_assert_eq(e->cache.table.count, 2, "the table holds its bound");
  /* Kernel 0 was the least recently used: gone from memory, read again
   * from disk. */
  jitk_module_destroy(jt_kernel(e, 0));
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 3);
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.memory_hits, 0);
  jitk_module_destroy(jt_kernel(e, 0));
  cr_assert_eq(jt_stats_mine(e).memory_hits, 1);
  /* An entry still held by a module outlives its eviction from the table. */
  jitk_module *held = jt_kernel(e, 1);
  jitk_module_destroy(jt_kernel(e, 2));
  jitk_module_destroy(jt_kernel(e, 3));
  jitk_module_destroy(jt_kernel(e, 4));
  const void *img;
  size_t size;
  JT_OK(e, jitk_module_image(held, &img, &size, NULL));
  cr_assert(size > 0 && memcmp(img,
                               "\x7f"
                               "ELF",
                               4) == 0);
  jitk_module_destroy(held);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache, off_and_read_only) {
  char *dir = jt_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_OFF, 0, 0, 0, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  struct stat st;
  cr_assert_neq(stat(path, &st), 0, "JITK_CACHE=off writes no database");
  jitk_cache_stats all, mine;
  JT_FAILS(e, JITK_ERR_CACHE, "off", jitk_cache_get_stats(e, NULL, &all));
  /* A failure leaves both out-parameters as they were. */
  memset(&all, 0xab, sizeof all);
  memset(&mine, 0xcd, sizeof mine);
  JT_FAILS(e, JITK_ERR_CACHE, "off", jitk_cache_get_stats(e, &mine, &all));
  for (size_t i = 0; i < sizeof all; i++) {
    cr_assert_eq(((unsigned char *)&all)[i], 0xab, "*all was written");
    cr_assert_eq(((unsigned char *)&mine)[i], 0xcd, "*mine was written");
  }
  const char *d, *db, *state;
  JT_OK(e, jitk_cache_location(e, &d, &db, &state));
  cr_assert(strncmp(state, "off", 3) == 0);
  jitk_engine_destroy(e);

  /* Read-only serves hits and stores nothing. */
  e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  e = jt_cache_engine_ex(dir, JITK_CACHE_READ_ONLY, 0, 0, 0, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_module_destroy(jt_kernel(e, 2));
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.compiles, 1);
  JT_OK(e, jitk_cache_location(e, &d, &db, &state));
  cr_assert_str_eq(state, "read-only");
  size_t removed;
  JT_FAILS(e, JITK_ERR_CACHE, "read-only", jitk_cache_clear(e, &removed));
  jitk_engine_destroy(e);
  e = jt_cache_engine(dir);
  cr_assert_eq(jt_stats_all(e).entries, 1, "kernel 2 was not stored");
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache, environment_defaults) {
  char *dir = jt_tmpdir();
  setenv("JITK_CACHE_DIR", dir, 1);
  setenv("JITK_CACHE_MAX_SIZE", "3M", 1);
  setenv("JITK_CACHE", "read-only", 1);
  jitk_engine *e = jt_compile_engine("sm_90");
  cr_assert_str_eq(e->cache.dir, dir);
  cr_assert_eq(e->cache.max_bytes, 3 << 20);
  cr_assert_eq(e->cache.mode, JITK_CACHE_READ_ONLY);
  cr_assert(!e->cache.shared);
  jitk_engine_destroy(e);
  setenv("JITK_CACHE", "off", 1);
  setenv("JITK_CACHE_SHARED", "1", 1);
  setenv("JITK_CACHE_MAX_SIZE", "lots", 1);
  e = jt_compile_engine("sm_90");
  cr_assert_eq(e->cache.mode, JITK_CACHE_OFF);
  cr_assert(e->cache.shared);
  cr_assert_eq(e->cache.max_bytes, (int64_t)1 << 30, "a bad size falls back to 1 GiB");
  jitk_engine_destroy(e);
  unsetenv("JITK_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  e = jt_compile_engine("sm_90");
  char *def = jk_cache_default_dir(e);
  cr_assert_str_eq(def, "/xdg/jitk");
  jk_free(e, def);
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  def = jk_cache_default_dir(e);
  cr_assert_str_eq(def, "/home/someone/.cache/jitk");
  jk_free(e, def);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

static int collect_labels(void *user, const jitk_cache_entry_info *info) {
  char *out = user;
  strcat(out, info->label);
  strcat(out, ";");
  cr_assert_eq(strlen(info->key), 32);
  cr_assert_str_eq(info->target, "sm_90");
  cr_assert_eq(info->kind, JITK_IMAGE_CUBIN);
  cr_assert(info->bytes > 0 && info->created > 0 && info->last_used >= info->created);
  return 0;
}

Test(cache, maintenance) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  for (int i = 0; i < 4; i++) {
    char src[512], name[32];
    jt_kernel_source(i, src, sizeof src);
    snprintf(name, sizeof name, "k%d.cu", i);
    jitk_module_options o;
    memset(&o, 0, sizeof o);
    o.program_name = name;
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, &o, &m));
    jitk_module_destroy(m);
  }
  char labels[256] = "";
  JT_OK(e, jitk_cache_list(e, collect_labels, labels));
  cr_assert_str_eq(labels, "k0.cu;k1.cu;k2.cu;k3.cu;", "least recently used first");
  size_t checked = 0, removed = 9;
  JT_OK(e, jitk_cache_verify(e, &checked, &removed));
  cr_assert_eq(checked, 4);
  cr_assert_eq(removed, 0);

  char file[512];
  snprintf(file, sizeof file, "%s/export.db", dir);
  size_t n = 0;
  JT_OK(e, jitk_cache_export(e, file, &n));
  cr_assert_eq(n, 4);
  JT_FAILS(e, JITK_ERR_IO, "exists already", jitk_cache_export(e, file, &n));

  /* Prune to 60 % of four entries of about the same size: the two oldest
   * go. */
  jitk_cache_stats all = jt_stats_all(e);
  JT_OK(e, jitk_cache_prune(e, (int64_t)all.bytes * 3 / 5, &removed));
  cr_assert_eq(removed, 2);
  labels[0] = '\0';
  JT_OK(e, jitk_cache_list(e, collect_labels, labels));
  cr_assert_str_eq(labels, "k2.cu;k3.cu;");
  cr_assert(jt_stats_all(e).bytes <= all.bytes * 3 / 5);

  JT_OK(e, jitk_cache_clear(e, &removed));
  cr_assert_eq(removed, 2);
  cr_assert_eq(jt_stats_all(e).entries, 0);
  cr_assert_eq(jt_stats_all(e).bytes, 0);

  /* Import brings all four back, each verified; again imports none. */
  size_t imported = 0, rejected = 9;
  JT_OK(e, jitk_cache_import(e, file, &imported, &rejected));
  cr_assert_eq(imported, 4);
  cr_assert_eq(rejected, 0);
  JT_OK(e, jitk_cache_import(e, file, &imported, &rejected));
  cr_assert_eq(imported, 0);
  jitk_engine_destroy(e);

  /* The imported entries serve a fresh engine. */
  e = jt_cache_engine(dir);
  jitk_module *m = NULL;
  char src[512];
  jt_kernel_source(3, src, sizeof src);
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.program_name = "k3.cu";
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_module_destroy(m);

  /* A damaged export: entries that fail verification are rejected. */
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(file, &db), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(db,
                            "UPDATE entries SET image = zeroblob(64) WHERE label = 'k1.cu';"
                            "UPDATE entries SET material = x'00' WHERE label = 'k2.cu'",
                            NULL, NULL, NULL),
               SQLITE_OK);
  sqlite3_close(db);
  JT_OK(e, jitk_cache_clear(e, &removed));
  JT_OK(e, jitk_cache_import(e, file, &imported, &rejected));
  cr_assert_eq(imported, 2);
  cr_assert_eq(rejected, 2);
  char notdb[512];
  snprintf(notdb, sizeof notdb, "%s/not-a-cache", dir);
  FILE *f = fopen(notdb, "w");
  fputs("hello", f);
  fclose(f);
  JT_FAILS(e, JITK_ERR_CACHE, "not-a-cache", jitk_cache_import(e, notdb, &imported, &rejected));
  /* The cache's own database, which the import cannot write while it
   * reads it: a status and a message, and the cache keeps its entries (the
   * statement that read its format was finalized twice, a crash). */
  char own[512];
  snprintf(own, sizeof own, "%s/kernels.db", dir);
  const size_t entries = jt_stats_all(e).entries;
  const jitk_status st = jitk_cache_import(e, own, &imported, &rejected);
  cr_assert(st == JITK_OK || (st == JITK_ERR_CACHE && *jitk_errmsg(e) != '\0'), "%d: %s", (int)st,
            jitk_errmsg(e));
  cr_assert_eq(jt_stats_all(e).entries, entries);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

typedef struct thread_arg {
  jitk_engine *e;
  jitk_module *m;
  jitk_status st;
} thread_arg;

static void *ask_kernel_7(void *p) {
  thread_arg *a = p;
  char src[512];
  jt_kernel_source(7, src, sizeof src);
  a->st = jitk_module_create(a->e, src, NULL, &a->m);
  return NULL;
}

Test(cache, threads_wait_for_one_compile) {
  /* Eight threads of one engine ask for the same kernel at once: one
   * compiles, the others wait for it and share it. */
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  enum { T = 8 };
  pthread_t th[T];
  thread_arg args[T];
  for (int i = 0; i < T; i++) {
    args[i] = (thread_arg){e, NULL, JITK_ERR_INTERNAL};
    pthread_create(&th[i], NULL, ask_kernel_7, &args[i]);
  }
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    cr_assert_eq(args[i].st, JITK_OK, "thread %d", i);
    cr_assert_eq(args[i].m->entry, args[0].m->entry);
  }
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 1, "compiled %llu times", (unsigned long long)s.compiles);
  cr_assert_eq(s.memory_hits, T - 1);
  for (int i = 0; i < T; i++) jitk_module_destroy(args[i].m);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

/* Autotune choices: stored, replaced, read back by another engine; a
 * database made before the table existed, a read-only or disabled cache
 * read as no choice. */
Test(cache, tuning_choices) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, NULL);
  char choice[64];
  bool found = true;
  /* The entries exist but the tuning table does not, yet. */
  JT_OK(e, jk_tuning_get(e, "matmul/1 sm_90 x", choice, sizeof choice, &found));
  cr_assert(!found);
  JT_OK(e, jk_tuning_put(e, "matmul/1 sm_90 x", "bn=128 arow=128 stages=5 pingpong=1"));
  JT_OK(e, jk_tuning_put(e, "matmul/1 sm_90 x", "bn=256 arow=128 stages=3 pingpong=0"));
  JT_OK(e, jk_tuning_get(e, "matmul/1 sm_90 x", choice, sizeof choice, &found));
  cr_assert(found);
  cr_assert_str_eq(choice, "bn=256 arow=128 stages=3 pingpong=0");
  JT_OK(e, jk_tuning_get(e, "matmul/1 sm_90 y", choice, sizeof choice, &found));
  cr_assert(!found, "another class has no choice");
  JT_OK(e, jk_tuning_get(e, "matmul/1 sm_90 x", choice, 8, &found));
  cr_assert(!found, "a choice longer than the buffer is not cut");
  jitk_engine_destroy(e);

  jitk_engine *ro = jt_cache_engine_ex(dir, JITK_CACHE_READ_ONLY, 0, 0, 0, NULL);
  JT_OK(ro, jk_tuning_get(ro, "matmul/1 sm_90 x", choice, sizeof choice, &found));
  cr_assert(found && strcmp(choice, "bn=256 arow=128 stages=3 pingpong=0") == 0);
  JT_OK(ro, jk_tuning_put(ro, "matmul/1 sm_90 z", "bn=128 arow=128 stages=4 pingpong=0"));
  JT_OK(ro, jk_tuning_get(ro, "matmul/1 sm_90 z", choice, sizeof choice, &found));
  cr_assert(!found, "a read-only cache stores nothing");
  jitk_engine_destroy(ro);

  jitk_engine *off = jt_cache_engine_ex(dir, JITK_CACHE_OFF, 0, 0, 0, NULL);
  JT_OK(off, jk_tuning_get(off, "matmul/1 sm_90 x", choice, sizeof choice, &found));
  cr_assert(!found, "no disk cache, no choice");
  jitk_engine_destroy(off);
  jt_rmdir(dir);
}
