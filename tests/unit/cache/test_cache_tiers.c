/*
 * Who can write to a cache (docs/GUIDE.md): the private tier, a group
 * tier, a shared read-only tier, checked as other users would attack them;
 * files made with their modes whatever the umask, which stays untouched;
 * links in parents; long paths; other programs' databases; and the
 * maintenance calls on damaged or hostile databases (issue 11).
 *
 * Tests that need a second user run as root: a forked child takes other
 * user and group ids (60001, 60002, 60003; group 60100) and reports by its
 * exit status.
 */
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cache_common.h"

#define USER_A 60001
#define USER_B 60002
#define OWNER 60003
#define GROUP 60100

/* Runs fn(arg) in a child as `uid`, with primary group `gid` and the
 * extra group GROUP, under umask 077; returns its exit status (0: the
 * child's checks held). */
static int as_user(uid_t uid, gid_t gid, int (*fn)(void *), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    gid_t groups[1] = {GROUP};
    if (setgroups(1, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(90);
    umask(077);
    _exit(fn(arg));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

static void need_root(void) {
  if (geteuid() != 0) cr_skip_test("acting as other users needs root");
}

/* A root-owned scratch folder others can enter. */
static char *open_scratch(void) {
  char *d = jt_tmpdir();
  cr_assert_eq(chmod(d, 0755), 0);
  return d;
}

/* A folder of `uid`'s own under the root-owned scratch folder. */
static void users_folder(const char *path, uid_t uid, mode_t mode) {
  cr_assert_eq(mkdir(path, mode), 0, "%s", path);
  cr_assert_eq(chown(path, uid, uid), 0);
  cr_assert_eq(chmod(path, mode), 0);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  cr_assert_eq(lstat(path, &st), 0, "%s", path);
  return st.st_mode;
}

/* --- a group tier used by two members --- */

typedef struct child_job {
  int shared; /* a group cache */
  const char *dir;
  int kernel;
  int expect_hits;
  const char *shared_dir;
  const char *owner;
  int expect_compiles;
  const char *needle; /* a warning that must have been logged */
} child_job;

static jitk_engine *child_engine(const child_job *j, jt_log *log, int shared) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cache_dir = j->dir;
  cfg.cache_mode = j->dir ? JITK_CACHE_ON : JITK_CACHE_OFF;
  cfg.cache_shared = shared;
  cfg.cache_shared_dir = j->shared_dir;
  cfg.cache_shared_owner = j->owner;
  cfg.log_fn = jt_log_fn;
  cfg.log_user = log;
  cfg.log_level = JITK_LOG_INFO;
  jitk_engine *e = NULL;
  return jitk_engine_create(&cfg, &e) == JITK_OK ? e : NULL;
}

/* Compiles kernels 1 and 2 (or job->kernel alone) and checks the hits. */
static int member_compiles(void *p) {
  child_job *j = p;
  jt_log log = {0, 0, ""};
  jitk_engine *e = child_engine(j, &log, j->shared);
  if (e == NULL) return 10;
  for (int i = 1; i <= 2; i++) {
    char src[512];
    jt_kernel_source(i, src, sizeof src);
    jitk_module *m = NULL;
    if (jitk_module_create(e, src, NULL, &m) != JITK_OK) return 11;
    jitk_module_destroy(m);
  }
  jitk_cache_stats s;
  jitk_cache_get_stats(e, &s, NULL);
  int ok = log.warnings == 0 && (int)s.disk_hits == j->expect_hits;
  if (!ok)
    fprintf(stderr, "member: %d warnings (%s), %llu hits\n", log.warnings, log.last_warning,
            (unsigned long long)s.disk_hits);
  jitk_engine_destroy(e);
  return ok ? 0 : 12;
}

Test(cache_tiers, a_group_cache_is_shared_by_its_members) {
  need_root();
  char *root = open_scratch();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/group", root);
  cr_assert_eq(mkdir(dir, 0700), 0);
  cr_assert_eq(chown(dir, 0, GROUP), 0);
  cr_assert_eq(chmod(dir, 02770), 0);
  /* Member A makes the database; member B, another user of the group,
   * uses it and adds to it; A sees B's kernel. Both run under umask 077,
   * which must not matter. */
  child_job a = {1, dir, 0, 0, NULL, NULL, 0, NULL};
  cr_assert_eq(as_user(USER_A, USER_A, member_compiles, &a), 0, "first member");
  child_job b = {1, dir, 0, 2, NULL, NULL, 0, NULL};
  cr_assert_eq(as_user(USER_B, USER_B, member_compiles, &b), 0, "second member");
  cr_assert_eq(as_user(USER_A, USER_A, member_compiles, &b), 0, "first member again");
  static const char *files[] = {"kernels.db", "kernels.lock"};
  for (int i = 0; i < 2; i++) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0660, "%s is %o", files[i], st.st_mode & 0777);
    cr_assert_eq(st.st_gid, GROUP, "%s belongs to group %u", files[i], (unsigned)st.st_gid);
  }
  jt_rmdir(root);
}

/* --- the private tier against a second user --- */

static int planting_user(void *p) {
  child_job *j = p;
  jt_log log = {0, 0, ""};
  jitk_engine *e = child_engine(j, &log, 0);
  if (e == NULL) return 10;
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_cache_stats s;
  jitk_cache_get_stats(e, &s, NULL);
  bool ok = s.disk_hits == 0 && s.compiles == 1 && log.warnings >= 1 &&
            strstr(log.last_warning, j->needle) != NULL;
  if (!ok) fprintf(stderr, "planter: %d warnings: %s\n", log.warnings, log.last_warning);
  jitk_engine_destroy(e);
  return ok ? 0 : 12;
}

Test(cache_tiers, another_user_cannot_use_or_plant_in_a_private_cache) {
  need_root();
  char *root = open_scratch();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/alice", root);
  users_folder(dir, USER_A, 0700);
  /* A's cache, made by A. */
  child_job a = {0, dir, 0, 0, NULL, NULL, 0, NULL};
  cr_assert_eq(as_user(USER_A, USER_A, member_compiles, &a), 0);
  cr_assert_eq(mode_of(dir) & 0777, 0700);
  /* B pointed at it: refused, not written. */
  child_job b = {0, dir, 0, 0, NULL, NULL, 0, "belongs to user 60001"};
  cr_assert_eq(as_user(USER_B, USER_B, planting_user, &b), 0);
  /* Files in A's folder that A does not own, as a planted journal would
   * be: A refuses the cache, in read-only mode too. */
  char wal[600];
  snprintf(wal, sizeof wal, "%s/kernels.db-wal", dir);
  int fd = open(wal, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  close(fd);
  cr_assert_eq(chown(wal, USER_B, USER_B), 0);
  child_job a2 = {0, dir, 0, 0, NULL, NULL, 0, "kernels.db-wal: it belongs to user 60002"};
  cr_assert_eq(as_user(USER_A, USER_A, planting_user, &a2), 0);
  /* Root's own now, but for the journal, to test in this process. */
  char cmd[1700];
  snprintf(cmd, sizeof cmd, "chown 0:0 '%s' '%s/kernels.db' '%s/kernels.lock'", dir, dir, dir);
  cr_assert_eq(system(cmd), 0);
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_READ_ONLY, 0, 0, 0, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 0);
  cr_assert(strstr(log.last_warning, "-wal") != NULL, "%s", log.last_warning);
  jitk_engine_destroy(e);
  jt_rmdir(root);
}

/* --- a shared read-only tier published by one account --- */

static int publisher(void *p) {
  child_job *j = p;
  jitk_engine *e = child_engine(j, NULL, 0);
  if (e == NULL) return 10;
  jitk_module_destroy(jt_kernel(e, 1));
  size_t n = 0;
  jitk_status st = jitk_cache_publish(e, j->shared_dir, &n);
  if (st != JITK_OK) fprintf(stderr, "publish: %s\n", jitk_errmsg(e));
  jitk_engine_destroy(e);
  return st == JITK_OK && n == 1 ? 0 : 12;
}

static int reader(void *p) {
  child_job *j = p;
  jt_log log = {0, 0, ""};
  jitk_engine *e = child_engine(j, &log, 0);
  if (e == NULL) return 10;
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_cache_stats s;
  jitk_cache_get_stats(e, &s, NULL);
  bool ok = (int)s.compiles == j->expect_compiles &&
            (int)e->cache.stats.shared_hits == 1 - j->expect_compiles &&
            (j->needle == NULL ? log.warnings == 0 : strstr(log.last_warning, j->needle) != NULL);
  if (!ok)
    fprintf(stderr, "reader: %llu compiles, %d warnings: %s\n", (unsigned long long)s.compiles,
            log.warnings, log.last_warning);
  jitk_engine_destroy(e);
  return ok ? 0 : 12;
}

Test(cache_tiers, a_shared_cache_is_read_only_and_trusted_by_name) {
  need_root();
  char *root = open_scratch();
  char own[512], pub[512], db[600], mine[512];
  snprintf(own, sizeof own, "%s/owner-private", root);
  snprintf(pub, sizeof pub, "%s/pub", root);
  snprintf(db, sizeof db, "%s/kernels.db", pub);
  snprintf(mine, sizeof mine, "%s/reader-private", root);
  users_folder(pub, OWNER, 0755);
  users_folder(own, OWNER, 0700);
  users_folder(mine, USER_A, 0700);
  child_job o = {0, own, 0, 0, pub, NULL, 0, NULL};
  cr_assert_eq(as_user(OWNER, OWNER, publisher, &o), 0, "publishing");
  cr_assert_eq(mode_of(db) & 0777, 0644);
  struct stat before;
  cr_assert_eq(stat(db, &before), 0);

  /* A reader who names the owner is served from it, and writes nothing
   * to it. */
  child_job r = {0, mine, 0, 0, pub, "60003", 0, NULL};
  cr_assert_eq(as_user(USER_A, USER_A, reader, &r), 0, "trusted reader");
  /* With its own cache off too. */
  child_job r_off = {0, NULL, 0, 0, pub, "60003", 0, NULL};
  cr_assert_eq(as_user(USER_A, USER_A, reader, &r_off), 0, "reader without a cache");
  struct stat after;
  cr_assert_eq(stat(db, &after), 0);
  cr_assert_eq(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  cr_assert_eq(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  char journal[640];
  snprintf(journal, sizeof journal, "%s-wal", db);
  cr_assert_neq(access(journal, F_OK), 0, "readers made a WAL file");

  /* Without naming the owner: refused, compiled (with no cache of the
   * reader's own from here on, which would serve what it compiled). */
  child_job untrusted = {0, NULL, 0, 0, pub, NULL, 1, "JITK_CACHE_SHARED_OWNER"};
  cr_assert_eq(as_user(USER_A, USER_A, reader, &untrusted), 0, "reader trusting nobody");
  /* Naming someone else than the files' owner: refused. */
  child_job wrong = {0, NULL, 0, 0, pub, "60002", 1, "belongs to user 60003"};
  cr_assert_eq(as_user(USER_A, USER_A, reader, &wrong), 0, "reader trusting another");
  /* Writable by the group: refused. */
  cr_assert_eq(chmod(db, 0664), 0);
  child_job gw = {0, NULL, 0, 0, pub, "60003", 1, "writable by its group"};
  cr_assert_eq(as_user(USER_A, USER_A, reader, &gw), 0, "group-writable shared cache");
  cr_assert_eq(chmod(db, 0644), 0);
  /* A folder on its path that someone untrusted could write: refused. */
  cr_assert_eq(chmod(root, 0777), 0);
  child_job wp = {0, NULL, 0, 0, pub, "60003", 1, "on its path is writable by everyone"};
  cr_assert_eq(as_user(USER_A, USER_A, reader, &wp), 0, "writable parent");
  cr_assert_eq(chmod(root, 0755), 0);
  jt_rmdir(root);
}

/* --- modes whatever the umask, and the umask left alone --- */

static _Atomic int stop_files;

static void *make_files(void *p) {
  const char *dir = p;
  for (int i = 0; !stop_files; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s/f%d", dir, i % 64);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd >= 0) {
      struct stat st;
      fstat(fd, &st);
      close(fd);
      unlink(path);
      /* Made new under umask 022: 0644, unless someone changed it. */
      if ((st.st_mode & 0777) != 0644) return (void *)1;
    }
  }
  return NULL;
}

Test(cache_tiers, modes_do_not_depend_on_the_umask_which_is_left_alone) {
  char *root = jt_tmpdir();
  char other[512];
  snprintf(other, sizeof other, "%s/other", root);
  cr_assert_eq(mkdir(other, 0700), 0);
  umask(022);
  pthread_t t;
  stop_files = 0;
  cr_assert_eq(pthread_create(&t, NULL, make_files, other), 0);
  for (int i = 0; i < 12; i++) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/c%d", root, i);
    jitk_engine *e = jt_cache_engine(dir);
    jitk_engine_destroy(e);
  }
  stop_files = 1;
  void *bad = NULL;
  pthread_join(t, &bad);
  cr_assert_null(bad, "a file made by another thread got another mode while caches opened");
  cr_assert_eq(umask(022), 022, "the umask was changed");
  /* Under umask 0 and 0777, the cache's own files keep their modes. */
  mode_t masks[] = {0, 0777};
  for (int k = 0; k < 2; k++) {
    umask(masks[k]);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/m%d", root, k);
    jitk_engine *e = jt_cache_engine(dir);
    jitk_module_destroy(jt_kernel(e, 1));
    cr_assert_eq(mode_of(dir) & 07777, 0700, "folder under umask %o", masks[k]);
    /* SQLite's journals exist while the engine is open. */
    static const char *names[] = {"kernels.db", "kernels.lock", "kernels.db-wal", "kernels.db-shm"};
    for (int i = 0; i < 4; i++) {
      char p[600];
      snprintf(p, sizeof p, "%s/%s", dir, names[i]);
      cr_assert_eq(mode_of(p) & 0777, 0600, "%s under umask %o: %o", names[i], masks[k],
                   mode_of(p) & 0777);
    }
    jitk_engine_destroy(e);
    umask(022);
  }
  jt_rmdir(root);
}

/* --- links in parents, trailing slashes, long paths --- */

Test(cache_tiers, links_in_parents_are_followed) {
  char *root = jt_tmpdir();
  char real[512], link[512], dir[600];
  snprintf(real, sizeof real, "%s/real-home", root);
  snprintf(link, sizeof link, "%s/home", root);
  cr_assert_eq(mkdir(real, 0700), 0);
  cr_assert_eq(symlink(real, link), 0);
  /* A home under a linked /home. */
  snprintf(dir, sizeof dir, "%s/user/.cache/jitk/", link);
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  const char *d, *db, *state;
  JT_OK(e, jitk_cache_location(e, &d, &db, &state));
  cr_assert_str_eq(state, "on", "%s (%s)", state, log.last_warning);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  jt_rmdir(root);
}

Test(cache_tiers, long_paths_are_refused_with_the_reason) {
  char *root = jt_tmpdir();
  char dir[2700];
  int n = snprintf(dir, sizeof dir, "%s", root);
  while (n < 2500)
    n += snprintf(dir + n, sizeof dir - (size_t)n, "/%s", "a-rather-long-folder-name");
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(log.warnings, 1);
  cr_assert(strstr(log.last_warning, "SQLite opens files of at most 512 bytes") != NULL, "%s",
            log.last_warning);
  cr_assert(strstr(log.last_warning, "compiling without the disk cache") != NULL,
            "the line was cut: %s", log.last_warning);
  jitk_engine_destroy(e);
  jt_rmdir(root);
}

/* --- other programs' databases --- */

Test(cache_tiers, another_programs_database_is_not_written) {
  char *dir = jt_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(db, "CREATE TABLE notes (x); INSERT INTO notes VALUES ('mine')", NULL,
                            NULL, NULL),
               SQLITE_OK);
  sqlite3_close(db);
  chmod(path, 0600);
  FILE *f = fopen(path, "rb");
  unsigned char before[8192], after[8192];
  size_t nb = fread(before, 1, sizeof before, f);
  fclose(f);
  jt_log log = {0, 0, ""};
  jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert(strstr(log.last_warning, "another program's SQLite database") != NULL, "%s",
            log.last_warning);
  size_t cleared = 0;
  JT_FAILS(e, JITK_ERR_CACHE, "another program's", jitk_cache_clear(e, &cleared));
  jitk_engine_destroy(e);
  f = fopen(path, "rb");
  size_t na = fread(after, 1, sizeof after, f);
  fclose(f);
  cr_assert(nb == na && memcmp(before, after, nb) == 0, "the file was changed");
  jt_rmdir(dir);
}

Test(cache_tiers, an_empty_file_becomes_a_cache) {
  char *dir = jt_tmpdir();
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  int fd = open(path, O_WRONLY | O_CREAT, 0600);
  close(fd);
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  jitk_engine_destroy(e);
  e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

/* --- maintenance on damaged and hostile databases --- */

static void damage(const char *dir, long offset, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/kernels.db", dir);
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  fseek(f, offset, SEEK_SET);
  for (size_t i = 0; i < n; i++) fputc((int)(0x5a ^ i), f);
  fclose(f);
}

Test(cache_tiers, clear_starts_afresh_on_a_damaged_database) {
  /* The damages tried: the header, the schema page, page 2, all of it. */
  long offsets[] = {0, 100, 4096, 0};
  size_t lengths[] = {100, 3000, 4096, 65536};
  for (int k = 0; k < 4; k++) {
    char *dir = jt_cache_with_one_kernel();
    jitk_engine *e = jt_cache_engine(dir);
    jitk_module_destroy(jt_kernel(e, 2));
    jitk_engine_destroy(e); /* checkpointed: everything in the main file */
    damage(dir, offsets[k], lengths[k]);
    jt_log log = {0, 0, ""};
    e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
    size_t removed = 99;
    JT_OK(e, jitk_cache_clear(e, &removed));
    cr_assert(strstr(jitk_errmsg(e), "not an error") == NULL);
    jitk_module_destroy(jt_kernel(e, 3));
    jitk_engine_destroy(e);
    e = jt_cache_engine(dir);
    jitk_module_destroy(jt_kernel(e, 3));
    cr_assert_eq(jt_stats_mine(e).disk_hits, 1, "damage %d: no working cache after clear", k);
    size_t checked = 0, bad = 0;
    JT_OK(e, jitk_cache_verify(e, &checked, &bad));
    jitk_engine_destroy(e);
    jt_rmdir((char *)dir);
  }
}

Test(cache_tiers, verify_reports_damage_in_full) {
  /* The quick_check report is read before its statement goes (it was
   * read after, under ASan a use after free). */
  char *dir = jt_cache_with_one_kernel();
  jitk_engine *e = jt_cache_engine(dir);
  for (int i = 2; i < 40; i++) jitk_module_destroy(jt_kernel(e, i));
  jitk_engine_destroy(e);
  /* Damage an index page of the entries' b-tree, past the schema. */
  damage(dir, 4096 * 3 + 8, 64);
  e = jt_cache_engine(dir);
  size_t checked = 0, removed = 0;
  jitk_status st = jitk_cache_verify(e, &checked, &removed);
  if (st != JITK_OK) {
    cr_assert(strstr(jitk_errmsg(e), "damaged") != NULL || strstr(jitk_errmsg(e), "malformed"),
              "%s", jitk_errmsg(e));
    for (const char *p = jitk_errmsg(e); *p; p++)
      cr_assert((unsigned char)*p >= 32 || *p == '\n', "garbage in the message");
  }
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache_tiers, import_counts_what_rows_hold) {
  char *src = jt_cache_with_one_kernel();
  char file[512];
  snprintf(file, sizeof file, "%s/planted.db", src);
  jitk_engine *e = jt_cache_engine(src);
  JT_OK(e, jitk_cache_export(e, file, NULL));
  cr_assert_eq(mode_of(file) & 0777, 0600, "an export holds sources: private");
  jitk_engine_destroy(e);
  /* A file whose row claims -10^12 bytes. */
  sqlite3 *db;
  cr_assert_eq(sqlite3_open(file, &db), SQLITE_OK);
  cr_assert_eq(sqlite3_exec(db, "UPDATE entries SET bytes = -1000000000000", NULL, NULL, NULL),
               SQLITE_OK);
  sqlite3_close(db);
  char *dir = jt_tmpdir();
  e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 64 * 1024, 0, 0, NULL);
  size_t in = 0, bad = 0;
  JT_OK(e, jitk_cache_import(e, file, &in, &bad));
  cr_assert_eq(in, 1);
  jitk_cache_stats all = jt_stats_all(e);
  cr_assert_gt(all.bytes, 1000, "the size is what the row holds: %llu",
               (unsigned long long)all.bytes);
  /* The cap holds as kernels come. */
  for (int i = 2; i < 40; i++) jitk_module_destroy(jt_kernel(e, i));
  all = jt_stats_all(e);
  cr_assert_leq(all.bytes, 64 * 1024, "%llu bytes over a 64 KiB cap",
                (unsigned long long)all.bytes);
  pthread_mutex_lock(&e->cache.disk_lock);
  sqlite3_stmt *q;
  cr_assert_eq(
      sqlite3_prepare_v2(e->cache.db, "SELECT value FROM stats WHERE id = 8", -1, &q, NULL),
      SQLITE_OK);
  cr_assert_eq(sqlite3_step(q), SQLITE_ROW);
  cr_assert_eq((uint64_t)sqlite3_column_int64(q, 0), all.bytes, "the kept total is the sum");
  sqlite3_finalize(q);
  pthread_mutex_unlock(&e->cache.disk_lock);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
  jt_rmdir(src);
}

Test(cache_tiers, an_entry_near_the_cap_is_stored_not_evicted_at_once) {
  char *dir = jt_tmpdir();
  /* Find one entry's size, then set the cap so that it lies between 90 %
   * and 100 % of it. */
  jitk_engine *e = jt_cache_engine(dir);
  jitk_module_destroy(jt_kernel(e, 1));
  int64_t bytes = (int64_t)jt_stats_all(e).bytes;
  jitk_engine_destroy(e);
  jt_rmdir(dir);
  dir = jt_tmpdir();
  e = jt_cache_engine_ex(dir, JITK_CACHE_ON, bytes * 100 / 95, 0, 0, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_all(e).entries, 1, "stored and evicted at once");
  jitk_engine_destroy(e);
  e = jt_cache_engine_ex(dir, JITK_CACHE_ON, bytes * 100 / 95, 0, 0, NULL);
  jitk_module_destroy(jt_kernel(e, 1));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  /* The next one takes its place. */
  jitk_module_destroy(jt_kernel(e, 2));
  cr_assert_eq(jt_stats_all(e).entries, 1);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(cache_tiers, sizes_in_the_environment) {
  char *dir = jt_tmpdir();
  const char *bad[] = {"inf", "1e30", "nan", "-1", "9e18G"};
  for (int i = 0; i < 5; i++) {
    setenv("JITK_CACHE_MAX_SIZE", bad[i], 1);
    jt_log log = {0, 0, ""};
    jitk_engine *e = jt_cache_engine_ex(dir, JITK_CACHE_ON, 0, 0, 0, &log);
    cr_assert_eq(e->cache.max_bytes, (int64_t)1 << 30, "%s gave %lld", bad[i],
                 (long long)e->cache.max_bytes);
    cr_assert(strstr(log.last_warning, "is not a size") != NULL, "%s: %s", bad[i],
              log.last_warning);
    jitk_engine_destroy(e);
  }
  unsetenv("JITK_CACHE_MAX_SIZE");
  jt_rmdir(dir);
}
