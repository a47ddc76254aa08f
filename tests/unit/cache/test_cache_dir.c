/* Where the cache lives: permissions, symlinks, the shared opt-in, network
 * filesystems, fork, and the checked-in sample of format 1. */
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/wait.h>

#include "cache/cache.h"
#include "cache_common.h"

/* Kernel 1 compiles (and is returned) but the disk cache is refused with
 * one warning that contains `needle`. */
static void expect_refused(const char *dir, int shared, const char *needle) {
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, shared, &log);
  jitk_module *m = jt_kernel(e, 1);
  jitk_module_destroy(m);
  jitk_module_destroy(jt_kernel(e, 2));
  cr_assert_eq(log.warnings, 1, "one log line, not %d: %s", log.warnings, log.last_warning);
  cr_assert(strstr(log.last_warning, needle) != NULL, "the line says why: %s", log.last_warning);
  /* A refusal over who owns or may write something says what to do. */
  bool about_permissions = strstr(needle, "regular file") == NULL &&
                           strstr(needle, "format") == NULL && strstr(needle, "program") == NULL &&
                           strstr(needle, "cannot") == NULL && strstr(needle, "tables") == NULL;
  cr_assert(!about_permissions || strstr(log.last_warning, "JITK_CACHE_DIR") != NULL ||
                strstr(log.last_warning, "chmod") != NULL ||
                strstr(log.last_warning, "real path") != NULL,
            "%s", log.last_warning);
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 2);
  cr_assert_eq(s.disk_errors, 1);
  const char *d, *db, *state;
  JT_OK(e, jitk_cache_location(e, &d, &db, &state));
  cr_assert(strncmp(state, "off", 3) == 0, "%s", state);
  jitk_engine_destroy(e);
}

static bool has_db(const char *dir) {
  char path[1100];
  struct stat st;
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  return stat(path, &st) == 0;
}

Test(cache_dir, made_private) {
  char *root = jt_tmpdir();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/a/b/jitk", root);
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  struct stat st;
  cr_assert_eq(stat(dir, &st), 0, "the folder and its parents are made");
  cr_assert_eq(st.st_mode & 0777, 0700, "mode %o", st.st_mode & 0777);
  char db[600];
  snprintf(db, sizeof db, "%s/kernels.db", dir);
  cr_assert_eq(stat(db, &st), 0);
  cr_assert_eq(st.st_mode & 0077, 0, "the database is private: %o", st.st_mode & 0777);
  jt_rmdir(root);
}

Test(cache_dir, writable_by_others_is_refused) {
  char *dir = jt_tmpdir();
  chmod(dir, 0777);
  expect_refused(dir, 0, "writable by everyone");
  chmod(dir, 0770);
  expect_refused(dir, 0, "writable by its group");
  cr_assert(!has_db(dir), "nothing written into a refused folder");
  /* A database file others can write is refused the same way. */
  chmod(dir, 0700);
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  char db[512];
  snprintf(db, sizeof db, "%s/kernels.db", dir);
  chmod(db, 0666);
  expect_refused(dir, 0, "kernels.db: it is writable by everyone");
  jt_rmdir(dir);
}

Test(cache_dir, symlink_is_refused) {
  char *root = jt_tmpdir();
  char real[256], link[256];
  snprintf(real, sizeof real, "%s/real", root);
  snprintf(link, sizeof link, "%s/link", root);
  mkdir(real, 0700);
  cr_assert_eq(symlink(real, link), 0);
  expect_refused(link, 0, "symbolic link");
  /* Also written with a trailing slash, which would make lstat follow it,
   * and in a group cache. */
  char slashed[300];
  snprintf(slashed, sizeof slashed, "%s/", link);
  expect_refused(slashed, 0, "symbolic link");
  expect_refused(link, 1, "symbolic link");
  cr_assert(!has_db(real));
  /* A group-writable folder is a group cache's: made setgid, so that the
   * files the members make belong to the group. */
  chmod(real, 0770);
  jitk_engine *e = jt_cache_engine_ex(real, JITK_CACHE_ON, 0, 0, 1, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  e = jt_cache_engine_ex(real, JITK_CACHE_ON, 0, 0, 1, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  struct stat st;
  cr_assert_eq(stat(real, &st), 0);
  cr_assert(st.st_mode & S_ISGID);
  char db[300];
  snprintf(db, sizeof db, "%s/kernels.db", real);
  cr_assert_eq(stat(db, &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0660, "%o", st.st_mode & 0777);
  jt_rmdir(root);
}

Test(cache_dir, foreign_owner_is_refused) {
  if (geteuid() != 0) cr_skip_test("giving a folder to another user needs root");
  char *dir = jt_tmpdir();
  cr_assert_eq(chown(dir, 65534, 65534), 0);
  expect_refused(dir, 0, "belongs to user 65534");
  /* A group cache of another user's: its group must be one of ours, and
   * it must be setgid, which only its owner can make it. */
  expect_refused(dir, 1, "is not one of this user's groups");
  /* Of one of our groups, but its owner (nobody) is no member of that
   * group: they could write code into it. */
  cr_assert_eq(chown(dir, 65534, 0), 0);
  chmod(dir, 02770);
  expect_refused(dir, 1, "belongs to user 65534, who is not a member of its group 0");
  /* Ours again: used. */
  cr_assert_eq(chown(dir, 0, 0), 0);
  chmod(dir, 02770);
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 1, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  cr_assert(has_db(dir));
  jt_rmdir(dir);
}

/* What a process of user `uid` in group `gid` alone makes of the group
 * cache `dir` (and its database, when there is one): 0 used, 1 refused
 * with the message in `msg`. Run in a child that drops root's identity. */
static int group_check_as(uid_t uid, gid_t gid, const char *dir, char *msg, size_t cap) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    if (setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(3);
    jitk_engine *e = jt_compile_engine("sm_90");
    jk_trust t = {.kind = JK_TIER_GROUP};
    char *real = NULL;
    jitk_status st = jk_cache_prepare_dir(e, dir, &t, false, &real);
    char db[600];
    snprintf(db, sizeof db, "%s/kernels.db", dir);
    if (st == JITK_OK) st = jk_cache_check_file(e, db, &t);
    if (st != JITK_OK) {
      const char *m = jitk_errmsg(e);
      if (write(fds[1], m, strlen(m)) < 0) _exit(4);
    }
    _exit(st == JITK_OK ? 0 : 1);
  }
  close(fds[1]);
  ssize_t n = read(fds[0], msg, cap - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(fds[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "the child ended by signal");
  return WEXITSTATUS(status);
}

/* A group cache's folder and files may belong to a member of its group
 * that is not the user (by the member's primary group here: daemon, 1),
 * not to a user outside it (bin, 2), whatever their group says. The user
 * is nobody, whose only group is daemon's. Without this check bin's
 * folder and database were used. */
Test(cache_dir, group_cache_owners_are_members) {
  if (geteuid() != 0) cr_skip_test("giving a folder to other users needs root");
  /* getpwuid's answers share one buffer: each is read before the next. */
  const struct passwd *pw = getpwuid(1);
  const bool daemon_ok = pw != NULL && pw->pw_gid == 1;
  pw = getpwuid(2);
  const bool bin_ok = pw != NULL && pw->pw_gid != 1;
  if (!daemon_ok || !bin_ok)
    cr_skip_test("no users daemon (1, of group 1) and bin (2, of another group)");
  char *root = jt_tmpdir();
  chmod(root, 0755);
  char dir[300], db[320], msg[1024];
  snprintf(dir, sizeof dir, "%s/group", root);
  snprintf(db, sizeof db, "%s/kernels.db", dir);
  cr_assert_eq(mkdir(dir, 0700), 0);
  cr_assert_eq(chown(dir, 1, 1), 0);
  cr_assert_eq(chmod(dir, 02770), 0);
  cr_assert_eq(group_check_as(65534, 1, dir, msg, sizeof msg), 0, "%s", msg);
  /* Not setgid, which only its owner can make it: the files the members
   * make would not belong to the group. */
  cr_assert_eq(chmod(dir, 0770), 0);
  cr_assert_eq(group_check_as(65534, 1, dir, msg, sizeof msg), 1, "a folder not setgid was used");
  cr_assert(strstr(msg, "not setgid") != NULL, "%s", msg);
  cr_assert_eq(chown(dir, 2, 1), 0);
  cr_assert_eq(chmod(dir, 02770), 0);
  cr_assert_eq(group_check_as(65534, 1, dir, msg, sizeof msg), 1, "a folder of bin's was used");
  cr_assert(strstr(msg, "folder") != NULL &&
                strstr(msg, "belongs to user 2, who is not a member") != NULL,
            "%s", msg);
  /* A user the user database does not know (as containers run them) may
   * be a member: whether it is cannot be told, and it is let be. */
  cr_assert_eq(chown(dir, 60077, 1), 0);
  cr_assert_eq(chmod(dir, 02770), 0);
  cr_assert_eq(group_check_as(65534, 1, dir, msg, sizeof msg), 0, "%s", msg);
  /* A member's folder holding a database of bin's, of the group. */
  cr_assert_eq(chown(dir, 1, 1), 0);
  cr_assert_eq(chmod(dir, 02770), 0);
  int fd = open(db, O_CREAT | O_WRONLY, 0660);
  cr_assert(fd >= 0);
  close(fd);
  cr_assert_eq(chown(db, 2, 1), 0);
  cr_assert_eq(chmod(db, 0660), 0);
  cr_assert_eq(group_check_as(65534, 1, dir, msg, sizeof msg), 1, "a database of bin's was used");
  cr_assert(
      strstr(msg, "file") != NULL && strstr(msg, "belongs to user 2, who is not a member") != NULL,
      "%s", msg);
  cr_assert_eq(chown(db, 1, 1), 0);
  cr_assert_eq(chmod(db, 0660), 0);
  cr_assert_eq(group_check_as(65534, 1, dir, msg, sizeof msg), 0, "%s", msg);
  jt_rmdir(root);
}

Test(cache_dir, unusable_database_degrades) {
  char *dir = jt_tmpdir();
  /* A folder where the database should be. */
  char db[512];
  snprintf(db, sizeof db, "%s/kernels.db", dir);
  mkdir(db, 0700);
  expect_refused(dir, 0, "not a regular file");
  rmdir(db);
  /* A file that is not a database. */
  FILE *f = fopen(db, "w");
  fputs("this is not an SQLite database, not even close, and it is long enough to be read", f);
  fclose(f);
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(log.warnings, 1, "%s", log.last_warning);
  cr_assert(strstr(log.last_warning, "compiling without the disk cache") != NULL, "%s",
            log.last_warning);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache_dir, read_only_database_still_serves) {
  if (geteuid() == 0) cr_skip_test("root writes read-only files anyway");
  char *dir = jt_cache_with_one_kernel();
  char db[512];
  snprintf(db, sizeof db, "%s/kernels.db", dir);
  chmod(db, 0400);
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache_dir, network_filesystems) {
  const char *name = NULL;
  cr_assert(jk_is_network_fs_type(0x6969, &name));
  cr_assert_str_eq(name, "NFS");
  cr_assert(jk_is_network_fs_type((long)0xFF534D42, &name));
  cr_assert(jk_is_network_fs_type(0x01021997, &name), "9p, as WSL and VMs share folders");
  cr_assert(!jk_is_network_fs_type(0xEF53, &name), "ext4 is local");
  cr_assert(!jk_is_network_fs_type(0x01021994, &name), "tmpfs is local");

  /* On one, the store uses a rollback journal instead of WAL. */
  char *dir = jt_tmpdir();
  setenv("JITK_CACHE_ASSUME_NETWORK_FS", "1", 1);
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(log.warnings, 1);
  cr_assert(strstr(log.last_warning, "rollback journal") != NULL, "%s", log.last_warning);
  const char *d, *db, *state;
  JT_OK(e, jitk_cache_location(e, &d, &db, &state));
  cr_assert(strstr(state, "rollback journal") != NULL, "%s", state);
  jitk_engine_destroy(e);
  unsetenv("JITK_CACHE_ASSUME_NETWORK_FS");
  sqlite3 *h;
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK);
  sqlite3_stmt *q;
  cr_assert_eq(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  cr_assert_str_eq((const char *)sqlite3_column_text(q, 0), "delete");
  sqlite3_finalize(q);
  sqlite3_close(h);
  /* It still serves hits. */
  setenv("JITK_CACHE_ASSUME_NETWORK_FS", "1", 1);
  e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache_dir, children_use_their_own_connection) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 0)); /* the parent's connection is open */
  sqlite3 *parent_db = e->cache.db;
  cr_assert_not_null(parent_db);
  enum { CHILDREN = 4 };
  pid_t pids[CHILDREN];
  for (int c = 0; c < CHILDREN; c++) {
    pids[c] = fork();
    if (pids[c] == 0) {
      /* The same engine, in the child: compile, store, load, hit. */
      int ok = 1;
      for (int i = 1; i <= 3; i++) {
        char src[512];
        jt_kernel_source(10 * (c + 1) + i, src, sizeof src);
        jitk_module *m = NULL;
        ok &= jitk_module_create(e, src, NULL, &m) == JITK_OK;
        jitk_module_destroy(m);
      }
      ok &= e->cache.db != NULL && e->cache.db != parent_db;
      ok &= e->cache.owner_pid == getpid();
      jitk_cache_stats all;
      ok &= jitk_cache_get_stats(e, NULL, &all) == JITK_OK;
      _exit(ok ? 0 : 1);
    }
  }
  for (int c = 0; c < CHILDREN; c++) {
    int status = 0;
    waitpid(pids[c], &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed", c);
  }
  /* The parent's connection still works, and sees the children's work. */
  cr_assert_eq(e->cache.db, parent_db);
  jitk_module_destroy(jt_kernel(e, 99));
  jitk_cache_stats all = jt_stats_all(e);
  cr_assert_eq(all.entries, 2 + 3 * CHILDREN);
  jitk_engine_destroy(e);
  char ic[64];
  jt_integrity(dir, ic, sizeof ic);
  cr_assert_str_eq(ic, "ok");
  jt_rmdir(dir);
}

/* cache/samples/v1.db: made by cache/samples/make-v1.sh from the sources
 * beside it. */
Test(cache_dir, sample_of_format_1) {
  char *dir = jt_tmpdir();
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "cp '%s/../cache/samples/v1.db' '%s/kernels.db'", JITK_TEST_DATA_DIR,
           dir);
  cr_assert_eq(system(cmd), 0);
  jitk_engine *e = jt_cache_engine(dir);
  size_t checked = 0, removed = 1;
  JT_OK(e, jitk_cache_verify(e, &checked, &removed));
  cr_assert_eq(checked, 3, "the sample holds three kernels");
  cr_assert_eq(removed, 0, "all of them sound");
  jitk_cache_stats all = jt_stats_all(e);
  cr_assert_eq(all.entries, 3);

  /* Served by key: each entry, asked for with its own key material, is
   * read, verified and unpacked by this jitk. */
  {
    sqlite3_stmt *q = NULL;
    pthread_mutex_lock(&e->cache.disk_lock);
    cr_assert_eq(sqlite3_prepare_v2(e->cache.db, "SELECT key, material FROM entries", -1, &q, NULL),
                 SQLITE_OK);
    int served = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
      jk_key key;
      memcpy(key.bytes, sqlite3_column_blob(q, 0), 16);
      jk_material m;
      jk_material_init(&m, e);
      jk_material_add(&m, "x", "", 0); /* make room, then replace */
      m.len = 0;
      const void *mb = sqlite3_column_blob(q, 1);
      size_t ml = (size_t)sqlite3_column_bytes(q, 1);
      unsigned char *copy = jk_malloc(e, ml);
      memcpy(copy, mb, ml);
      jk_material_free(&m);
      m.data = copy;
      m.len = m.cap = ml;
      jk_entry x;
      memset(&x, 0, sizeof x);
      bool found = false;
      JT_OK(e, jk_store_lookup(e, &key, &m, &x, &found));
      cr_assert(found, "an entry of the sample was not served");
      cr_assert(x.image_size > 0 && memcmp(x.image,
                                           "\x7f"
                                           "ELF",
                                           4) == 0);
      served++;
      jk_free(e, x.image);
      jk_free(e, x.log);
      for (size_t i = 0; i < x.num_names; i++) {
        jk_free(e, x.name_expressions[i]);
        jk_free(e, x.lowered[i]);
      }
      jk_free(e, x.name_expressions);
      jk_free(e, x.lowered);
      jk_material_free(&m);
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&e->cache.disk_lock);
    cr_assert_eq(served, 3);
  }

  /* Through the front door, an entry is served only with a record of the
   * files its compile read, which the sample's entries (made before
   * jitk kept one) lack: compiling the same sources compiles them again
   * and stores entries that carry one, beside the old ones (the tables
   * for the records are added to the old file on the way). A second
   * engine is then served from disk. */
  static const char *files[] = {"saxpy.cu", "templated.cu", "scale.cu"};
  for (int round = 0; round < 2; round++) {
    jitk_engine *f = round == 0 ? e : jt_cache_engine(dir);
    for (int i = 0; i < 3; i++) {
      char path[1024];
      snprintf(path, sizeof path, "%s/../cache/samples/sources/%s", JITK_TEST_DATA_DIR, files[i]);
      FILE *fp = fopen(path, "rb");
      cr_assert_not_null(fp, "%s", path);
      char src[8192];
      size_t n = fread(src, 1, sizeof src - 1, fp);
      src[n] = '\0';
      fclose(fp);
      jitk_module_options o;
      memset(&o, 0, sizeof o);
      o.program_name = files[i];
      const char *names[] = {"scale_by<float>", "scale_by<double>"};
      if (strcmp(files[i], "templated.cu") == 0) {
        o.name_expressions = names;
        o.num_name_expressions = 2;
      }
      jitk_module *m = NULL;
      JT_OK(f, jitk_module_create(f, src, &o, &m));
      jitk_module_destroy(m);
    }
    jitk_cache_stats s = jt_stats_mine(f);
    cr_assert_eq(s.disk_hits, round == 0 ? 0 : 3, "round %d: %llu disk hits", round,
                 (unsigned long long)s.disk_hits);
    cr_assert_eq(s.compiles, round == 0 ? 3 : 0);
    if (round == 1) {
      cr_assert_eq(jt_stats_all(f).entries, 6, "the sample's three and the new three");
      jitk_engine_destroy(f);
    }
  }
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache_dir, other_formats_are_left_alone) {
  char *dir = jt_cache_with_one_kernel();
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  sqlite3 *db;
  /* A newer jitk's format: not read, not written. */
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(db, "PRAGMA user_version = 2", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  expect_refused(dir, 0, "format 2; this jitk reads format 1");
  /* Another program's database at that path. */
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(
      sqlite3_exec(db, "PRAGMA user_version = 1; PRAGMA application_id = 42", NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(db);
  expect_refused(dir, 0, "another program's SQLite database");
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_stmt *q;
  cr_assert_eq(sqlite3_prepare_v2(db, "PRAGMA application_id", -1, &q, NULL), SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  cr_assert_eq(sqlite3_column_int(q, 0), 42, "left as it was");
  sqlite3_finalize(q);
  sqlite3_close(db);
  jt_rmdir(dir);
}

static unsigned char *file_bytes(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "%s", path);
  unsigned char *b = malloc(1 << 16);
  *n = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

/* A file with jitk's application id and format number but without the
 * cache's tables (another program that borrowed the marks, or a cache
 * damaged before its tables were made) is not a cache: opening it must
 * not add the tables a newer format has, nor change its journal mode. A
 * fuzzer found that it once did. Each variant lacks something else. */
Test(cache_dir, marks_without_the_tables_are_left_alone) {
  static const char *const schemas[] = {
      "CREATE TABLE notes (x)",
      "CREATE TABLE entries (id INTEGER PRIMARY KEY, key BLOB); CREATE TABLE stats (id, name, "
      "value)",
      "CREATE TABLE entries (id INTEGER PRIMARY KEY, key BLOB, kind, bytes, created, last_used, "
      "compile_ms, target, label, checksum, material, names, log, image)",
  };
  for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
    char *dir = jt_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/kernels.db", dir);
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
    char sql[512];
    snprintf(sql, sizeof sql,
             "PRAGMA page_size = 512; PRAGMA journal_mode = DELETE; PRAGMA application_id = "
             "1785295979; PRAGMA user_version = 1; %s",
             schemas[i]);
    cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    chmod(path, 0600);
    size_t n0, n1;
    unsigned char *before = file_bytes(path, &n0);
    expect_refused(dir, 0, "jitk's marks but not the cache's tables");
    unsigned char *after = file_bytes(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0, "variant %zu: the file was changed", i);
    free(before);
    free(after);
    jt_rmdir(dir);
  }
}

Test(cache_dir, folder_that_cannot_exist) {
  expect_refused("/dev/null/jitk", 0, "cannot use the cache folder /dev/null/jitk");
}

Test(cache_dir, locked_database_degrades) {
  char *dir = jt_cache_with_one_kernel();
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);

  /* Another writer holds the write lock for longer than we wait: hits are
   * still served (WAL readers do not wait), the new kernel is compiled and
   * returned, and the store gives up with one line. */
  sqlite3 *holder;
  cr_assert_eq(sqlite3_open(path, &holder), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  pthread_mutex_lock(&e->cache.disk_lock);
  jk_store_close(e);
  e->cache.busy_ms = 200;
  pthread_mutex_unlock(&e->cache.disk_lock);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_module_destroy(jt_kernel(e, 2));
  jitk_module_destroy(jt_kernel(e, 3));
  cr_assert_eq(jt_stats_mine(e).compiles, 2);
  cr_assert_eq(log.warnings, 1, "%d lines; last: %s", log.warnings, log.last_warning);
  cr_assert(strstr(log.last_warning, "locked") != NULL, "%s", log.last_warning);
  jitk_engine_destroy(e);
  sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL);

  /* A holder that keeps readers out too: the store cannot even open. */
  cr_assert_eq(sqlite3_exec(holder,
                            "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; "
                            "UPDATE stats SET value = value WHERE id = 1; COMMIT",
                            NULL, NULL, NULL),
               SQLITE_OK);
  log = (jt_log){0, 0, ""};
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  e = jt_cache_engine_ex(dir, JITK_CACHE_OFF, 0, 0, 0, &log);
  e->cache.mode = JITK_CACHE_ON; /* open on first use, with a short wait */
  e->cache.disk = JK_DISK_CLOSED;
  e->cache.busy_ms = 200;
  e->cache.dir = jk_strdup(e, dir);
  jitk_module_destroy(jt_kernel(e, 4));
  cr_assert_eq(log.warnings, 1, "%d lines; last: %s", log.warnings, log.last_warning);
  cr_assert(strstr(log.last_warning, "compiling without the disk cache") != NULL, "%s",
            log.last_warning);
  jitk_engine_destroy(e);
  sqlite3_close(holder);
  jt_rmdir(dir);
}

Test(cache_dir, immutable_database_still_serves) {
  char *dir = jt_cache_with_one_kernel();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "chattr +i '%s/kernels.db' 2>/dev/null", dir);
  if (system(cmd) != 0) {
    jt_rmdir(dir);
    cr_skip_test("chattr +i is not possible here");
  }
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_module_destroy(jt_kernel(e, 2));
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 1, "the read-only file still serves hits");
  cr_assert_eq(s.compiles, 1);
  cr_assert(log.warnings <= 1, "%d lines; last: %s", log.warnings, log.last_warning);
  jitk_engine_destroy(e);
  snprintf(cmd, sizeof cmd, "chattr -i '%s/kernels.db'", dir);
  cr_assert_eq(system(cmd), 0);
  jt_rmdir(dir);
}
