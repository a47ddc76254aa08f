/*
 * The SQLite store of compiled kernels.
 *
 * Rules it keeps (DESIGN.md section 4):
 *  - one entry is one row, written in one transaction;
 *  - every hit compares the stored key material and a checksum over the
 *    image, names and log before anything is used; a row that fails is
 *    deleted, counted, and read as a miss;
 *  - WAL with a busy timeout, BEGIN IMMEDIATE for writes, and NVRTC never
 *    runs inside a transaction, so no caller sees SQLITE_BUSY;
 *  - anything unexpected (a corrupt file, an I/O error, a lock that never
 *    comes) turns the disk tier off for this engine with one log line:
 *    the kernel is still compiled and returned.
 * All functions here run with cache.disk_lock held.
 */
#define XXH_STATIC_LINKING_ONLY
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache/cache.h"
#include "driver/image.h"
#include "engine.h"

extern const unsigned char jk_schema_sql[];
extern const size_t jk_schema_sql_size;

static void finalize_statements(jk_cache *c) {
  sqlite3_finalize(c->lookup);
  sqlite3_finalize(c->candidates);
  sqlite3_finalize(c->memo_get);
  c->lookup = c->candidates = c->memo_get = NULL;
}

/* Label of a disk-tier failure, for the one log line. */
void jk_store_disable(jitk_engine *e, const char *why, int rc) {
  jk_cache *c = &e->cache;
  /* The connection's message is more precise, but only if it still
   * belongs to `rc` (a ROLLBACK since would have replaced it). */
  const char *detail = rc ? sqlite3_errstr(rc) : NULL;
  if (c->db != NULL && rc && sqlite3_extended_errcode(c->db) == rc) {
    const char *m = sqlite3_errmsg(c->db);
    if (m != NULL && strcmp(m, "not an error") != 0) detail = m;
  }
  jk_log(e, JITK_LOG_WARN, "kernel cache %s: %s%s%s; compiling without the disk cache",
         c->db_path ? c->db_path : (c->dir ? c->dir : "(none)"), why, detail ? ": " : "",
         detail ? detail : "");
  c->stats.disk_errors++;
  if (c->db != NULL && c->owner_pid == getpid()) {
    finalize_statements(c);
    sqlite3_close_v2(c->db);
  }
  c->lookup = c->candidates = c->memo_get = NULL;
  c->db = NULL;
  /* The key-lock descriptor stays open until the engine goes: another
   * thread may be waiting on it right now. */
  c->disk = JK_DISK_OFF;
}

bool jk_store_is_fatal(int rc) {
  int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR ||
         primary == SQLITE_FULL || primary == SQLITE_CANTOPEN || primary == SQLITE_PROTOCOL ||
         primary == SQLITE_READONLY || primary == SQLITE_NOMEM;
}

static int exec(jitk_engine *e, const char *sql) {
  return sqlite3_exec(e->cache.db, sql, NULL, NULL, NULL);
}

/* Runs a statement that takes a lock, retrying the SQLITE_BUSY answers
 * SQLite gives without waiting. The busy handler waits for other writers
 * already, but SQLite skips it where waiting could deadlock (two
 * connections each promoting a shared lock, as two processes switching a
 * new file to WAL at once do) and during a WAL restart; only those quick
 * answers are retried, within one busy timeout in all. */
static int exec_busy(jitk_engine *e, const char *sql) {
  int rc = SQLITE_BUSY;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int attempt = 0; (rc & 0xff) == SQLITE_BUSY; attempt++) {
    rc = exec(e, sql);
    if ((rc & 0xff) != SQLITE_BUSY) break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (attempt >= 20 || waited >= e->cache.busy_ms) break;
    struct timespec ts = {0, 1000000L * (attempt + 1)};
    nanosleep(&ts, NULL);
  }
  return rc;
}

/* BEGIN IMMEDIATE takes the write lock up front, so a transaction never
 * fails half-way for want of it. */
int jk_store_begin(jitk_engine *e) {
  int rc = exec_busy(e, "BEGIN IMMEDIATE");
  if (rc == SQLITE_OK && e->cache.test_hook)
    e->cache.test_hook(e->cache.test_user, JK_EVENT_IN_WRITE_TRANSACTION);
  return rc;
}

int jk_store_commit(jitk_engine *e) {
  int rc = exec(e, "COMMIT");
  if (rc != SQLITE_OK) exec(e, "ROLLBACK");
  return rc;
}

void jk_store_rollback(jitk_engine *e) { exec(e, "ROLLBACK"); }

/* One integer pragma; SQLITE_OK or the error. */
static int pragma_int(jitk_engine *e, const char *sql, int *value) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(e->cache.db, sql, -1, &q, NULL);
  if (rc == SQLITE_OK) {
    if (sqlite3_step(q) == SQLITE_ROW)
      *value = sqlite3_column_int(q, 0);
    else
      rc = sqlite3_errcode(e->cache.db);
  }
  sqlite3_finalize(q);
  return rc;
}

/* What the file is: jitk's (its format, PRAGMA user_version), empty (-1:
 * free to become a cache), or anything else (-2: another program's, left
 * alone). Only a file with no pages at all is empty: a database another
 * program made, even one without an application id, is never written to.
 * The common case, a database of ours, costs two header reads. An
 * unreadable file sets *rc. */
static int read_format(jitk_engine *e, int *rc) {
  /* One statement, so one read transaction: read one by one, the marks
   * could straddle another process's commit of a new database. */
  sqlite3_stmt *q = NULL;
  int id = 0, version = 0, pages = 0;
  *rc = sqlite3_prepare_v2(e->cache.db,
                           "SELECT a.application_id, v.user_version, p.page_count FROM "
                           "pragma_application_id() a, pragma_user_version() v, "
                           "pragma_page_count() p",
                           -1, &q, NULL);
  if (*rc == SQLITE_OK) {
    if (sqlite3_step(q) == SQLITE_ROW) {
      id = sqlite3_column_int(q, 0);
      version = sqlite3_column_int(q, 1);
      pages = sqlite3_column_int(q, 2);
    } else {
      *rc = sqlite3_errcode(e->cache.db);
    }
  }
  sqlite3_finalize(q);
  if (*rc != SQLITE_OK) return -1;
  if (id == JK_APPLICATION_ID) return version == 0 ? -1 : version;
  if (id != 0 || version != 0) return -2;
  return pages == 0 ? -1 : -2;
}

/* Makes an empty file a cache of our format, in one transaction that
 * checks again, under the write lock, that it is still empty (another
 * process may have set it up meanwhile). Then the journal mode, which is
 * kept in the file. */
static int set_up(jitk_engine *e) {
  int rc = jk_store_begin(e);
  if (rc != SQLITE_OK) return rc;
  /* Inside the transaction the pager counts a page already: emptiness is
   * no schema and no marks. */
  int id = -1, version = -1, objects = -1;
  rc = pragma_int(e, "PRAGMA application_id", &id);
  if (rc == SQLITE_OK) rc = pragma_int(e, "PRAGMA user_version", &version);
  if (rc == SQLITE_OK) rc = pragma_int(e, "SELECT count(*) FROM sqlite_schema", &objects);
  if (rc == SQLITE_OK && id == 0 && version == 0 && objects == 0) {
    rc = exec(e, (const char *)jk_schema_sql);
    if (rc == SQLITE_OK)
      return jk_store_commit(e) == SQLITE_OK
                 ? exec_busy(e, e->cache.network_fs ? "PRAGMA journal_mode=DELETE"
                                                    : "PRAGMA journal_mode=WAL")
                 : sqlite3_errcode(e->cache.db);
  }
  jk_store_rollback(e);
  return rc;
}

int64_t jk_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The rowid of a key: its first 63 bits. */
int64_t jk_key_id(const jk_key *key) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | key->bytes[i];
  return (int64_t)(v >> 1);
}

static const char *file_in(jitk_engine *e, const char *dir, const char *name, char **out) {
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%s/%s", dir, name);
  *out = jk_buf_take(&b);
  return *out;
}

static jitk_status store_open(jitk_engine *e);

/* How many entries one request keeps (the same source compiled against
 * different header contents, as when switching branches); older ones are
 * dropped when a new one is stored. */
#define JK_MAX_CANDIDATES 16

static int prepare_lookup(jitk_engine *e) {
  jk_cache *c = &e->cache;
  int rc = sqlite3_prepare_v3(c->db,
                              "SELECT kind, compile_ms, checksum, material, names, log, image, key "
                              "FROM entries WHERE id = ?1",
                              -1, SQLITE_PREPARE_PERSISTENT, &c->lookup, NULL);
  /* A database made by an older jitk may lack the tables of dependency
   * records until something is stored: then nothing is found. */
  if (rc == SQLITE_OK &&
      sqlite3_prepare_v3(c->db,
                         "SELECT e.kind, e.compile_ms, e.checksum, e.material, e.names, e.log, "
                         "e.image, e.key FROM requests r JOIN entries e ON e.id = r.id WHERE "
                         "r.request = ?1 ORDER BY e.last_used DESC, e.id LIMIT 16",
                         -1, SQLITE_PREPARE_PERSISTENT, &c->candidates, NULL) != SQLITE_OK)
    c->candidates = NULL;
  if (rc == SQLITE_OK &&
      sqlite3_prepare_v3(
          c->db, "SELECT size, mtime_ns, ctime_ns, hash FROM files WHERE dev = ?1 AND ino = ?2", -1,
          SQLITE_PREPARE_PERSISTENT, &c->memo_get, NULL) != SQLITE_OK)
    c->memo_get = NULL;
  return rc;
}

/* The tables a database made before dependency records lacks; created
 * once by the first writer that opens it. */
static int ensure_tables(jitk_engine *e) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(e->cache.db,
                              "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                              "name IN ('requests', 'files')",
                              -1, &q, NULL);
  int have = 0;
  if (rc == SQLITE_OK) {
    if (sqlite3_step(q) == SQLITE_ROW)
      have = sqlite3_column_int(q, 0);
    else
      rc = sqlite3_errcode(e->cache.db);
  }
  sqlite3_finalize(q);
  if (rc != SQLITE_OK || have == 2) return rc;
  rc = jk_store_begin(e);
  if (rc != SQLITE_OK) return rc;
  rc = exec(e,
            "CREATE TABLE IF NOT EXISTS requests (request INTEGER NOT NULL, id INTEGER NOT NULL, "
            "PRIMARY KEY (request, id)) WITHOUT ROWID; "
            "CREATE TABLE IF NOT EXISTS files (dev INTEGER NOT NULL, ino INTEGER NOT NULL, size "
            "INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, hash BLOB NOT "
            "NULL, PRIMARY KEY (dev, ino)) WITHOUT ROWID");
  if (rc == SQLITE_OK) return jk_store_commit(e);
  jk_store_rollback(e);
  return rc;
}

/* Whether a file with jitk's marks has the tables every version of the
 * format has, with their columns. Preparing a statement reads the schema
 * and writes nothing, so a file that only looks like a cache (another
 * program's, or one damaged before its tables were made) is found out
 * before ensure_tables or the journal mode could change it. Returns
 * SQLITE_OK with *whole set, or the error that stopped the reading. */
static int core_tables(jitk_engine *e, bool *whole) {
  static const char *const probes[] = {
      "SELECT id, key, kind, bytes, created, last_used, compile_ms, target, label, checksum, "
      "material, names, log, image FROM entries LIMIT 0",
      "SELECT id, name, value FROM stats LIMIT 0"};
  *whole = true;
  for (size_t i = 0; i < 2 && *whole; i++) {
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(e->cache.db, probes[i], -1, &q, NULL);
    sqlite3_finalize(q);
    /* A missing table or column is SQLITE_ERROR; anything else (a
     * damaged schema page, a lock held too long) is a failure to read. */
    if ((rc & 0xff) == SQLITE_ERROR)
      *whole = false;
    else if (rc != SQLITE_OK)
      return rc;
  }
  return SQLITE_OK;
}

/* Ends a use of the lookup statement: its read transaction too. */
static void release_lookup(sqlite3_stmt *q) {
  sqlite3_reset(q);
  sqlite3_clear_bindings(q);
}

jitk_status jk_store_open(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->disk == JK_DISK_OFF) return JITK_ERR_CACHE;
  if ((c->disk == JK_DISK_OPEN || c->disk == JK_DISK_READ_ONLY) && c->owner_pid == getpid())
    return JITK_OK;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  jitk_status st = store_open(e);
  clock_gettime(CLOCK_MONOTONIC, &b);
  c->open_us = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
  return st;
}

/* The checks of the database's files: the database and the journals
 * SQLite keeps beside it, any of which could carry planted pages. */
jitk_status jk_store_check_files(jitk_engine *e, const char *db_path, const jk_trust *t) {
  static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
  jitk_status st = JITK_OK;
  for (size_t i = 0; i < 4 && st == JITK_OK; i++) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "%s%s", db_path, suffixes[i]);
    char *p = jk_buf_take(&b);
    if (p == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    st = jk_cache_check_file(e, p, t);
    jk_free(e, p);
  }
  return st;
}

jitk_status jk_store_locate(jitk_engine *e, const char *dir, jk_trust *t, bool create,
                            char **db_path, char **lock_path) {
  *db_path = NULL;
  if (lock_path) *lock_path = NULL;
  char *real = NULL;
  jitk_status st = jk_cache_prepare_dir(e, dir, t, create, &real);
  if (st == JITK_OK && (file_in(e, real, "kernels.db", db_path) == NULL ||
                        (lock_path && file_in(e, real, "kernels.lock", lock_path) == NULL)))
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  jk_free(e, real);
  if (st == JITK_OK) st = jk_store_check_files(e, *db_path, t);
  if (st == JITK_OK && lock_path) st = jk_cache_check_file(e, *lock_path, t);
  if (st != JITK_OK) {
    jk_free(e, *db_path);
    *db_path = NULL;
    if (lock_path) {
      jk_free(e, *lock_path);
      *lock_path = NULL;
    }
  }
  return st;
}

static jitk_status store_open(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->db != NULL && c->owner_pid != getpid()) {
    /* A forked child: the parent's connection must not be used or closed
     * here (closing would checkpoint and could delete the parent's WAL), so
     * it is abandoned and this process opens its own. The lock descriptor
     * can be closed: the parent's keeps its locks. */
    c->db = NULL;
    c->lookup = c->candidates = c->memo_get = NULL;
    if (c->lock_fd >= 0) close(c->lock_fd);
    c->lock_fd = -1;
    c->num_pending_used = 0;
    memset(&c->pending, 0, sizeof c->pending);
    /* The parent writes the entries it queued. */
    jk_store_drop_deferred(e);
  }
  c->owner_pid = getpid();
  if (c->dir == NULL) {
    jk_log(e, JITK_LOG_WARN,
           "no folder for the kernel cache (set JITK_CACHE_DIR or HOME); compiling without "
           "the disk cache");
    c->disk = JK_DISK_OFF;
    return JITK_ERR_CACHE;
  }
  /* Read-only or not, the folder and every file in it are checked: a
   * planted database or journal is as dangerous to read as to write. */
  bool read_only = c->mode == JITK_CACHE_READ_ONLY;
  c->trust.kind = c->shared ? JK_TIER_GROUP : JK_TIER_PRIVATE;
  char *lock_path = NULL;
  jk_free(e, c->db_path);
  jitk_status st =
      jk_store_locate(e, c->dir, &c->trust, !read_only, &c->db_path, read_only ? NULL : &lock_path);
  if (st == JITK_OK && !read_only && jk_cache_open_file(e, c->db_path, &c->trust, false) == -1 &&
      errno != EACCES && errno != EROFS)
    st = jk_fail(e, JITK_ERR_CACHE, "cannot create the cache database %s: %s", c->db_path,
                 strerror(errno));
  struct stat sb;
  if (st == JITK_OK && read_only && stat(c->db_path, &sb) != 0)
    st = jk_fail(e, JITK_ERR_CACHE, "there is no cache database at %s (read-only: none is made)",
                 c->db_path);
  if (st != JITK_OK) {
    jk_log(e, JITK_LOG_WARN, "%s; compiling without the disk cache", jitk_errmsg(e));
    jk_free(e, lock_path);
    c->stats.disk_errors++;
    c->disk = JK_DISK_OFF;
    return JITK_ERR_CACHE;
  }

  const char *fs_name = NULL;
  c->network_fs = jk_is_network_fs(c->db_path, &fs_name);
  if (c->network_fs)
    jk_log(e, JITK_LOG_WARN,
           "the kernel cache %s is on a %s filesystem, where SQLite's WAL is unsafe; using a "
           "rollback journal instead (slower under concurrency)",
           c->dir, fs_name);

  if (!read_only) {
    c->lock_fd = jk_cache_open_file(e, lock_path, &c->trust, true);
    if (c->lock_fd < 0)
      jk_log(e, JITK_LOG_INFO,
             "cannot open %s (%s): kernels compiled at once by several processes may be "
             "compiled more than once",
             lock_path, strerror(errno));
  }
  jk_free(e, lock_path);

  /* The file exists (made above with the tier's mode, so SQLite gives its
   * journals that mode too); SQLite never creates it. The path has no
   * links left in it, and NOFOLLOW keeps it so. */
  int oflags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
  int rc =
      sqlite3_open_v2(c->db_path, &c->db,
                      oflags | (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE), c->vfs);
  if (rc != SQLITE_OK && !read_only) {
    /* A database this user may read but not write still serves hits. */
    sqlite3_close_v2(c->db);
    c->db = NULL;
    rc = sqlite3_open_v2(c->db_path, &c->db, oflags | SQLITE_OPEN_READONLY, c->vfs);
    if (rc == SQLITE_OK) read_only = true;
  } else if (rc == SQLITE_OK && !read_only && sqlite3_db_readonly(c->db, "main") == 1) {
    read_only = true;
  }
  if (rc == SQLITE_OK && read_only && c->mode != JITK_CACHE_READ_ONLY)
    jk_log(e, JITK_LOG_WARN, "kernel cache %s is read-only here: serving hits, storing nothing",
           c->db_path);
  if (rc != SQLITE_OK) {
    jk_store_disable(e, "cannot open the database", rc);
    return JITK_ERR_CACHE;
  }
  sqlite3_extended_result_codes(c->db, 1);
  sqlite3_busy_timeout(c->db, c->busy_ms);

  int format = read_format(e, &rc);
  if (rc == SQLITE_OK && format == -1 && !read_only) {
    rc = set_up(e);
    if (rc != SQLITE_OK) {
      jk_store_disable(e, "cannot set up the database", rc);
      return JITK_ERR_CACHE;
    }
    format = read_format(e, &rc);
  }
  /* Marks without the tables (-3) are not a cache either: nothing below
   * writes to such a file. */
  bool whole = true;
  if (rc == SQLITE_OK && format == JK_CACHE_FORMAT && (rc = core_tables(e, &whole)) == SQLITE_OK &&
      !whole)
    format = -3;
  if (rc == SQLITE_OK && !read_only && c->network_fs && format == JK_CACHE_FORMAT) {
    /* A database made elsewhere in WAL mode, now seen over the network. */
    rc = exec_busy(e, "PRAGMA journal_mode=DELETE");
  }
  if (!read_only && rc == SQLITE_OK && format == JK_CACHE_FORMAT)
    rc = exec(e, c->network_fs ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");

  /* A newer format is someone else's to read; ours is 1. */
  if (rc != SQLITE_OK || format != JK_CACHE_FORMAT) {
    if (rc == SQLITE_OK) {
      char why[112];
      if (format == -2)
        snprintf(why, sizeof why,
                 "the file is another program's SQLite database; it is left as it is");
      else if (format == -3)
        snprintf(why, sizeof why,
                 "the file carries jitk's marks but not the cache's tables; it is left as it is");
      else if (format == -1)
        snprintf(why, sizeof why, "the database is empty (read-only: nothing is set up)");
      else
        snprintf(why, sizeof why, "the database has format %d; this jitk reads format %d", format,
                 JK_CACHE_FORMAT);
      jk_store_disable(e, why, 0);
    } else {
      jk_store_disable(e, "cannot read the database", rc);
    }
    return JITK_ERR_CACHE;
  }
  if (!read_only) rc = ensure_tables(e);
  if (rc == SQLITE_OK) rc = prepare_lookup(e);
  if (rc != SQLITE_OK) {
    jk_store_disable(e, "cannot read the database", rc);
    return JITK_ERR_CACHE;
  }
  c->disk = read_only ? JK_DISK_READ_ONLY : JK_DISK_OPEN;
  /* The NVRTC libraries' digest is part of every lookup; it costs a few
   * stat calls, and hashing them once per machine. On a device engine
   * this runs on the helper thread, under cuInit. */
  jk_toolchain(e);
  jk_log(e, JITK_LOG_DEBUG, "kernel cache %s opened%s", c->db_path, read_only ? " read-only" : "");
  return JITK_OK;
}

void jk_store_close(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->db != NULL && c->owner_pid == getpid()) {
    jk_store_flush(e);
    finalize_statements(c);
    if (c->db != NULL) sqlite3_close_v2(c->db);
  }
  c->lookup = c->candidates = c->memo_get = NULL;
  c->db = NULL;
  if (c->lock_fd >= 0) close(c->lock_fd);
  c->lock_fd = -1;
  if (c->disk != JK_DISK_OFF) c->disk = JK_DISK_CLOSED;
}

/* XXH3-128 over the parts of a row that are used, each length-prefixed. */
void jk_store_checksum(int kind, const void *image, size_t image_size, const void *names,
                       size_t names_size, const char *log, size_t log_size, uint8_t out[16]) {
  XXH3_state_t s;
  XXH3_128bits_reset(&s);
  const void *parts[3] = {image, names, log};
  size_t sizes[3] = {image_size, names_size, log_size};
  unsigned char k = (unsigned char)kind;
  XXH3_128bits_update(&s, &k, 1);
  for (int i = 0; i < 3; i++) {
    uint64_t n = sizes[i];
    unsigned char le[8];
    for (int j = 0; j < 8; j++) le[j] = (unsigned char)(n >> (8 * j));
    XXH3_128bits_update(&s, le, 8);
    if (n) XXH3_128bits_update(&s, parts[i], sizes[i]);
  }
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&s));
  memcpy(out, canon.digest, 16);
}

jitk_status jk_names_pack(jitk_engine *e, const jk_entry *entry, jk_material *out) {
  for (size_t i = 0; i < entry->num_names; i++) {
    jk_material_add_str(out, "name_expression", entry->name_expressions[i]);
    jk_material_add_str(out, "lowered", entry->lowered[i]);
  }
  if (out->failed) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  return JITK_OK;
}

jitk_status jk_names_unpack(jitk_engine *e, const unsigned char *data, size_t n, jk_entry *entry) {
  size_t pos = 0, count = 0;
  const char *label;
  const unsigned char *bytes;
  size_t len;
  bool ok;
  while (jk_material_next(data, n, &pos, &label, &bytes, &len, &ok)) count++;
  if (!ok || count % 2 != 0) return JITK_ERR_INVALID_IMAGE;
  size_t pairs = count / 2;
  entry->num_names = 0;
  if (pairs == 0) return JITK_OK;
  entry->name_expressions = jk_calloc(e, pairs, sizeof(char *));
  entry->lowered = jk_calloc(e, pairs, sizeof(char *));
  if (entry->name_expressions == NULL || entry->lowered == NULL) return JITK_ERR_OUT_OF_MEMORY;
  entry->num_names = pairs;
  pos = 0;
  for (size_t i = 0; i < pairs; i++) {
    jk_material_next(data, n, &pos, &label, &bytes, &len, &ok);
    if (strcmp(label, "name_expression") != 0) return JITK_ERR_INVALID_IMAGE;
    entry->name_expressions[i] = jk_strndup(e, (const char *)bytes, len);
    jk_material_next(data, n, &pos, &label, &bytes, &len, &ok);
    if (strcmp(label, "lowered") != 0) return JITK_ERR_INVALID_IMAGE;
    entry->lowered[i] = jk_strndup(e, (const char *)bytes, len);
    if (entry->name_expressions[i] == NULL || entry->lowered[i] == NULL)
      return JITK_ERR_OUT_OF_MEMORY;
  }
  return JITK_OK;
}

static int read_total(jitk_engine *e, int64_t *total);
static int add_total(jitk_engine *e, int64_t delta);

/* Drops the request rows of entry `id` (all of them when id is -1: those
 * whose entry is gone); inside a write transaction. A database without
 * the table has none to drop. */
static int forget_requests(jitk_engine *e, int64_t id) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(e->cache.db,
                              id >= 0 ? "DELETE FROM requests WHERE id = ?1"
                                      : "DELETE FROM requests WHERE id NOT IN (SELECT id FROM "
                                        "entries)",
                              -1, &q, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(q);
    return (rc & 0xff) == SQLITE_ERROR ? SQLITE_OK : rc;
  }
  if (id >= 0) sqlite3_bind_int64(q, 1, id);
  rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(e->cache.db);
  sqlite3_finalize(q);
  return rc;
}

int jk_store_forget_requests(jitk_engine *e) { return forget_requests(e, -1); }

/* Deletes the row of a key's id and takes its size off the total; inside
 * a write transaction. */
int jk_store_delete_row(jitk_engine *e, const jk_key *key) {
  sqlite3 *db = e->cache.db;
  int64_t total;
  int rc = read_total(e, &total);
  sqlite3_stmt *q = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db, "DELETE FROM entries WHERE id = ?1 RETURNING bytes", -1, &q, NULL);
  int64_t bytes = 0;
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, jk_key_id(key));
    int step;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) bytes += sqlite3_column_int64(q, 0);
    rc = step == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
  }
  sqlite3_finalize(q);
  if (rc == SQLITE_OK && bytes) rc = add_total(e, -bytes);
  if (rc == SQLITE_OK) rc = forget_requests(e, jk_key_id(key));
  return rc;
}

/* Removes a row that failed its checks, outside any caller's transaction. */
static void delete_corrupt(jitk_engine *e, const jk_key *key, const char *why) {
  jk_cache *c = &e->cache;
  char hex[33];
  jk_key_hex(key, hex);
  jk_log(e, JITK_LOG_INFO, "kernel cache: entry %s is corrupt (%s); removing it and recompiling",
         hex, why);
  c->stats.corrupt++;
  c->pending.corrupt++;
  if (c->disk != JK_DISK_OPEN) return;
  int rc = jk_store_begin(e);
  if (rc != SQLITE_OK) {
    if (jk_store_is_fatal(rc)) jk_store_disable(e, "cannot remove a corrupt entry", rc);
    return;
  }
  rc = jk_store_delete_row(e, key);
  if (rc == SQLITE_OK)
    rc = jk_store_commit(e);
  else
    jk_store_rollback(e);
  if (rc != SQLITE_OK && jk_store_is_fatal(rc))
    jk_store_disable(e, "cannot remove a corrupt entry", rc);
}

/* A damaged row: deleted from the private tier, skipped in the shared
 * one (its owner repairs it). */
static void damaged(jitk_engine *e, bool shared, const jk_key *key, const char *why) {
  if (!shared) {
    delete_corrupt(e, key, why);
    return;
  }
  char hex[33];
  jk_key_hex(key, hex);
  jk_log(e, JITK_LOG_WARN, "shared kernel cache %s: entry %s is damaged (%s); not used",
         e->cache.shared_db_path, hex, why);
}

/* The row `q` stands on (columns: kind, compile_ms, checksum, material,
 * names, log, image, key), as the entry of `key` and `material`: *found
 * when it serves, *why when it is damaged, neither for another kernel with
 * the same first 63 bits. The caller resets q. */
static jitk_status read_row(jitk_engine *e, sqlite3_stmt *q, const jk_key *key,
                            const jk_material *material, jk_entry *out, bool *found,
                            const char **why) {
  *found = false;
  *why = NULL;
  int kind = sqlite3_column_int(q, 0);
  double ms = sqlite3_column_double(q, 1);
  const void *sum = sqlite3_column_blob(q, 2);
  int sum_len = sqlite3_column_bytes(q, 2);
  const void *mat = sqlite3_column_blob(q, 3);
  size_t mat_len = (size_t)sqlite3_column_bytes(q, 3);
  const void *names = sqlite3_column_blob(q, 4);
  size_t names_len = (size_t)sqlite3_column_bytes(q, 4);
  const char *log = (const char *)sqlite3_column_text(q, 5);
  size_t log_len = (size_t)sqlite3_column_bytes(q, 5);
  const void *image = sqlite3_column_blob(q, 6);
  size_t image_len = (size_t)sqlite3_column_bytes(q, 6);
  const void *stored_key = sqlite3_column_blob(q, 7);
  int stored_key_len = sqlite3_column_bytes(q, 7);

  uint8_t check[16];
  if (stored_key_len != 16 || memcmp(stored_key, key->bytes, 16) != 0) {
    /* Another key with the same first 63 bits, which is a miss; unless the
     * row's own key does not match its material, which is damage. */
    if (stored_key_len == 16 && mat != NULL) {
      jk_hash128(mat, mat_len, check);
      if (memcmp(check, stored_key, 16) == 0) return JITK_OK;
    }
    *why = "its key does not match its key material";
    return JITK_OK;
  }
  return jk_store_check_entry(e, kind, ms, sum, (size_t)sum_len, mat, mat_len, names, names_len,
                              log, log_len, image, image_len, material, out, found, why);
}

jitk_status jk_store_check_entry(jitk_engine *e, int kind, double ms, const void *sum,
                                 size_t sum_len, const void *mat, size_t mat_len, const void *names,
                                 size_t names_len, const char *log, size_t log_len,
                                 const void *image, size_t image_len, const jk_material *material,
                                 jk_entry *out, bool *found, const char **why) {
  *found = false;
  *why = NULL;
  uint8_t check[16];
  if (mat_len != material->len || (mat_len && memcmp(mat, material->data, mat_len) != 0))
    *why = "its key material differs";
  else if (kind != JITK_IMAGE_CUBIN && kind != JITK_IMAGE_PTX)
    *why = "unknown image kind";
  else if (sum_len != 16 || image == NULL || image_len == 0 || log == NULL)
    *why = "missing fields";
  if (*why == NULL) {
    jk_store_checksum(kind, image, image_len, names, names_len, log, log_len, check);
    if (memcmp(check, sum, 16) != 0) *why = "checksum mismatch";
  }
  /* A consistent row may still hold an image this engine cannot load: a
   * cubin for another architecture (copied from another cache, or put
   * into a remote by another jitk) would fail at every load, where it is
   * served, and never be compiled again. The check (jk_image_check, as
   * for images callers give) reads the ELF's headers and section table,
   * far less than the checksum above, and runs once per entry, as it
   * enters memory from a disk, shared or remote tier. */
  jitk_image_kind checked;
  if (*why == NULL &&
      jk_image_check(e, (jitk_image_kind)kind, image, image_len, &checked) != JITK_OK)
    *why = "its image is not one this engine can load (another architecture, or a damaged ELF)";
  if (*why != NULL) return JITK_OK;

  jitk_status st = JITK_OK;
  out->kind = (jitk_image_kind)kind;
  out->compile_ms = ms;
  out->image = jk_malloc(e, image_len + 1);
  out->log = jk_strndup(e, log, log_len);
  if (out->image == NULL || out->log == NULL) st = JITK_ERR_OUT_OF_MEMORY;
  if (st == JITK_OK) {
    memcpy(out->image, image, image_len);
    ((char *)out->image)[image_len] = '\0';
    out->image_size = image_len;
    st = jk_names_unpack(e, names, names_len, out);
  }
  if (st == JITK_OK) {
    *found = true;
    return JITK_OK;
  }
  /* Nothing of a row that is not served stays in `out`: the caller goes
   * on to compile into it. */
  for (size_t i = 0; i < out->num_names; i++) {
    if (out->name_expressions) jk_free(e, out->name_expressions[i]);
    if (out->lowered) jk_free(e, out->lowered[i]);
  }
  jk_free(e, out->name_expressions);
  jk_free(e, out->lowered);
  jk_free(e, out->image);
  jk_free(e, out->log);
  out->name_expressions = out->lowered = NULL;
  out->num_names = 0;
  out->image = NULL;
  out->log = NULL;
  out->image_size = 0;
  if (st == JITK_ERR_INVALID_IMAGE) {
    *why = "its names do not parse";
    return JITK_OK;
  }
  return jk_fail(e, st, "out of memory reading a cache entry");
}

/* The row of `key` through lookup statement `q` of either tier. */
static jitk_status lookup_in(jitk_engine *e, sqlite3_stmt *q, bool shared, const jk_key *key,
                             const jk_material *material, jk_entry *out, bool *found) {
  *found = false;
  sqlite3_bind_int64(q, 1, jk_key_id(key));
  int rc = sqlite3_step(q);
  if (rc == SQLITE_DONE) {
    release_lookup(q);
    return JITK_OK;
  }
  if (rc != SQLITE_ROW) {
    release_lookup(q);
    if (shared)
      jk_store_shared_disable(e, "cannot read the database", rc);
    else
      jk_store_disable(e, "cannot read the database", rc);
    return JITK_OK;
  }
  const char *why = NULL;
  jitk_status st = read_row(e, q, key, material, out, found, &why);
  release_lookup(q);
  if (why != NULL) damaged(e, shared, key, why);
  return st;
}

jitk_status jk_store_lookup(jitk_engine *e, const jk_key *key, const jk_material *material,
                            jk_entry *out, bool *found) {
  jk_cache *c = &e->cache;
  *found = false;
  if (jk_store_open(e) != JITK_OK) return JITK_OK;
  /* The statement is prepared once per connection, when the store opens,
   * so a hit costs a bind and a step. */
  if (c->lookup == NULL) {
    finalize_statements(c);
    int rc = prepare_lookup(e);
    if (rc != SQLITE_OK) {
      jk_store_disable(e, "cannot read the database", rc);
      return JITK_OK;
    }
  }
  return lookup_in(e, c->lookup, false, key, material, out, found);
}

/* Adds this process's pending counters to the database's; inside a write
 * transaction. */
static int write_counters(jitk_engine *e) {
  jk_cache *c = &e->cache;
  jk_counters *p = &c->pending;
  p->memory_hits += atomic_exchange(&c->memory_hits_unflushed, 0);
  struct {
    int id;
    const char *name;
    int64_t value;
  } rows[] = {
      {JK_STAT_MEMORY_HITS, "memory_hits", (int64_t)p->memory_hits},
      {JK_STAT_DISK_HITS, "disk_hits", (int64_t)p->disk_hits},
      {JK_STAT_MISSES, "misses", (int64_t)p->misses},
      {JK_STAT_COMPILES, "compiles", (int64_t)p->compiles},
      {JK_STAT_COMPILE_US, "compile_us", (int64_t)(p->compile_ms * 1000.0)},
      {JK_STAT_CORRUPT, "corrupt", (int64_t)p->corrupt},
      {JK_STAT_EVICTIONS, "evictions", (int64_t)p->evictions},
      {JK_STAT_REMOTE_HITS, "remote_hits", (int64_t)p->remote_hits},
      {JK_STAT_REMOTE_MISSES, "remote_misses", (int64_t)p->remote_misses},
      {JK_STAT_REMOTE_ERRORS, "remote_errors", (int64_t)p->remote_errors},
      {JK_STAT_REMOTE_REJECTED, "remote_rejected", (int64_t)p->remote_rejected},
      {JK_STAT_REMOTE_READ, "remote_bytes_read", (int64_t)p->remote_read},
      {JK_STAT_REMOTE_WRITTEN, "remote_bytes_written", (int64_t)p->remote_written},
  };
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(c->db,
                              "INSERT INTO stats (id, name, value) VALUES (?1, ?2, ?3) "
                              "ON CONFLICT (id) DO UPDATE SET value = value + excluded.value",
                              -1, &q, NULL);
  for (size_t i = 0; rc == SQLITE_OK && i < sizeof rows / sizeof rows[0]; i++) {
    if (rows[i].value == 0) continue;
    sqlite3_bind_int(q, 1, rows[i].id);
    sqlite3_bind_text(q, 2, rows[i].name, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, rows[i].value);
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_reset(q);
  }
  sqlite3_finalize(q);
  return rc;
}

static int write_stamps(jitk_engine *e, int64_t now) {
  jk_cache *c = &e->cache;
  if (c->num_pending_used == 0) return SQLITE_OK;
  sqlite3_stmt *q = NULL;
  int rc =
      sqlite3_prepare_v2(c->db, "UPDATE entries SET last_used = ?1 WHERE id = ?2", -1, &q, NULL);
  for (size_t i = 0; rc == SQLITE_OK && i < c->num_pending_used; i++) {
    sqlite3_bind_int64(q, 1, now);
    sqlite3_bind_int64(q, 2, jk_key_id(&c->pending_used[i]));
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_reset(q);
  }
  sqlite3_finalize(q);
  return rc;
}

/* One entry queued for the local store. */
struct jk_deferred {
  jk_key request;
  jk_material full;
  jk_entry entry; /* image, log, kind, compile_ms and names: copies */
  char *label;
};

static void deferred_free(jitk_engine *e, struct jk_deferred *d) {
  jk_material_free(&d->full);
  jk_free(e, d->entry.image);
  jk_free(e, d->entry.log);
  for (size_t i = 0; i < d->entry.num_names; i++) {
    if (d->entry.name_expressions) jk_free(e, d->entry.name_expressions[i]);
    if (d->entry.lowered) jk_free(e, d->entry.lowered[i]);
  }
  jk_free(e, d->entry.name_expressions);
  jk_free(e, d->entry.lowered);
  jk_free(e, d->label);
}

void jk_store_drop_deferred(jitk_engine *e) {
  jk_cache *c = &e->cache;
  for (size_t i = 0; i < c->num_deferred; i++) deferred_free(e, &c->deferred[i]);
  jk_free(e, c->deferred);
  c->deferred = NULL;
  c->num_deferred = 0;
}

/* Writes the queued entries, each in its own transaction, as a compile's
 * is written. */
static void write_deferred(jitk_engine *e) {
  jk_cache *c = &e->cache;
  for (size_t i = 0; i < c->num_deferred; i++) {
    struct jk_deferred *d = &c->deferred[i];
    jk_key key;
    jk_hash128(d->full.data, d->full.len, key.bytes);
    jk_store_insert(e, &key, &d->request, &d->full, &d->entry, d->label);
  }
  jk_store_drop_deferred(e);
}

void jk_store_defer(jitk_engine *e, const jk_key *request, const jk_material *full,
                    const jk_entry *x, const char *label) {
  jk_cache *c = &e->cache;
  struct jk_deferred *grown =
      jk_realloc(e, c->deferred, (c->num_deferred + 1) * sizeof *c->deferred);
  if (grown == NULL) return; /* a cache: the entry is simply not kept */
  c->deferred = grown;
  struct jk_deferred *d = &c->deferred[c->num_deferred];
  memset(d, 0, sizeof *d);
  d->request = *request;
  jk_material_init(&d->full, e);
  jk_material_append(&d->full, full->data, full->len);
  d->entry.kind = x->kind;
  d->entry.compile_ms = x->compile_ms;
  d->entry.image = jk_malloc(e, x->image_size + 1);
  d->entry.image_size = x->image_size;
  d->entry.log = jk_strdup(e, x->log ? x->log : "");
  d->label = jk_strdup(e, label);
  bool ok = !d->full.failed && d->entry.image != NULL && d->entry.log != NULL && d->label != NULL;
  if (ok) memcpy(d->entry.image, x->image, x->image_size + 1);
  if (ok && x->num_names > 0) {
    d->entry.name_expressions = jk_calloc(e, x->num_names, sizeof(char *));
    d->entry.lowered = jk_calloc(e, x->num_names, sizeof(char *));
    ok = d->entry.name_expressions != NULL && d->entry.lowered != NULL;
    if (ok) d->entry.num_names = x->num_names;
    for (size_t i = 0; ok && i < x->num_names; i++) {
      d->entry.name_expressions[i] = jk_strdup(e, x->name_expressions[i]);
      d->entry.lowered[i] = jk_strdup(e, x->lowered[i]);
      ok = d->entry.name_expressions[i] != NULL && d->entry.lowered[i] != NULL;
    }
  }
  if (!ok) {
    deferred_free(e, d);
    return;
  }
  if (++c->num_deferred >= 8) write_deferred(e);
}

void jk_store_flush(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->disk != JK_DISK_OPEN || c->owner_pid != getpid()) return;
  if (c->num_deferred > 0) write_deferred(e);
  const jk_counters *p = &c->pending;
  bool none = p->memory_hits == 0 && p->disk_hits == 0 && p->misses == 0 && p->compiles == 0 &&
              p->corrupt == 0 && p->evictions == 0 && p->disk_errors == 0 && p->shared_hits == 0 &&
              p->compile_ms == 0 && p->remote_hits == 0 && p->remote_misses == 0 &&
              p->remote_errors == 0 && p->remote_rejected == 0 && p->remote_read == 0 &&
              p->remote_written == 0;
  if (c->num_pending_used == 0 && none && atomic_load(&c->memory_hits_unflushed) == 0 &&
      !jk_memo_pending(e))
    return;
  int rc = jk_store_begin(e);
  if (rc == SQLITE_OK) rc = write_stamps(e, jk_now_ms());
  if (rc == SQLITE_OK) rc = write_counters(e);
  if (rc == SQLITE_OK) rc = jk_memo_write(e);
  if (rc == SQLITE_OK)
    rc = jk_store_commit(e);
  else
    jk_store_rollback(e);
  if (rc != SQLITE_OK) {
    if (jk_store_is_fatal(rc)) jk_store_disable(e, "cannot write to the database", rc);
    return;
  }
  c->num_pending_used = 0;
  memset(&c->pending, 0, sizeof c->pending);
  jk_memo_written(e);
}

void jk_store_note_hit(jitk_engine *e, const jk_key *key) {
  jk_cache *c = &e->cache;
  if (c->disk != JK_DISK_OPEN) return;
  if (c->num_pending_used == sizeof c->pending_used / sizeof c->pending_used[0]) jk_store_flush(e);
  if (c->num_pending_used < sizeof c->pending_used / sizeof c->pending_used[0])
    c->pending_used[c->num_pending_used++] = *key;
}

/* The store's total size, kept in stats as 'total_bytes' so that no write
 * scans the table; computed once when the row is missing. Inside a write
 * transaction. */
static int read_total(jitk_engine *e, int64_t *total) {
  sqlite3 *db = e->cache.db;
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT value FROM stats WHERE id = 8", -1, &q, NULL);
  int step = rc == SQLITE_OK ? sqlite3_step(q) : rc;
  if (step == SQLITE_ROW) *total = sqlite3_column_int64(q, 0);
  sqlite3_finalize(q);
  if (step == SQLITE_ROW) return SQLITE_OK;
  if (step != SQLITE_DONE) return rc == SQLITE_OK ? sqlite3_errcode(db) : rc;
  rc = sqlite3_exec(db,
                    "INSERT INTO stats (id, name, value) SELECT 8, 'total_bytes', "
                    "coalesce(sum(bytes), 0) FROM entries",
                    NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  return read_total(e, total);
}

static int add_total(jitk_engine *e, int64_t delta) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(e->cache.db, "UPDATE stats SET value = value + ?1 WHERE id = 8", -1,
                              &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, delta);
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(e->cache.db);
  }
  sqlite3_finalize(q);
  return rc;
}

/* Deletes least recently used rows until the total is at most `limit`;
 * inside a write transaction. *removed counts them. */
int jk_store_evict_to(jitk_engine *e, int64_t limit, int64_t keep, size_t *removed) {
  jk_cache *c = &e->cache;
  int64_t sum = 0;
  int rc = read_total(e, &sum);
  if (rc != SQLITE_OK || sum <= limit) return rc;
  sqlite3_stmt *oldest = NULL, *del = NULL;
  /* No index on last_used (it would slow every open): eviction scans and
   * sorts the small columns, and goes down to 90 % of the limit so that it
   * runs rarely. The entry just stored is never the one evicted: at most
   * the cap itself, it may stay above 90 % alone. */
  rc = sqlite3_prepare_v2(c->db,
                          "SELECT id, bytes FROM entries WHERE id != ?1 ORDER BY last_used, id", -1,
                          &oldest, NULL);
  if (rc == SQLITE_OK) sqlite3_bind_int64(oldest, 1, keep);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db, "DELETE FROM entries WHERE id = ?1", -1, &del, NULL);
  int64_t freed = 0, target = limit - limit / 10;
  while (rc == SQLITE_OK && sum - freed > target) {
    int step = sqlite3_step(oldest);
    if (step != SQLITE_ROW) {
      rc = step == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
      break;
    }
    int64_t bytes = sqlite3_column_int64(oldest, 1);
    sqlite3_bind_int64(del, 1, sqlite3_column_int64(oldest, 0));
    rc = sqlite3_step(del) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_reset(del);
    if (rc == SQLITE_OK) {
      freed += bytes;
      ++*removed;
    }
  }
  sqlite3_finalize(oldest);
  sqlite3_finalize(del);
  if (rc == SQLITE_OK && freed) rc = add_total(e, -freed);
  if (rc == SQLITE_OK && *removed) rc = forget_requests(e, -1);
  return rc;
}

/* Records that entry `id` answers `request`, and drops the request's
 * least recently used entries beyond JK_MAX_CANDIDATES; inside a write
 * transaction. */
static int add_request(jitk_engine *e, const jk_key *request, int64_t id, size_t *removed) {
  jk_cache *c = &e->cache;
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(c->db, "INSERT OR IGNORE INTO requests (request, id) VALUES (?1, ?2)",
                              -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, jk_key_id(request));
    sqlite3_bind_int64(q, 2, id);
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
  }
  sqlite3_finalize(q);
  q = NULL;
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_prepare_v2(c->db,
                          "SELECT e.key FROM requests r JOIN entries e ON e.id = r.id WHERE "
                          "r.request = ?1 ORDER BY e.last_used DESC, e.id LIMIT -1 OFFSET ?2",
                          -1, &q, NULL);
  jk_key old[8];
  size_t n = 0;
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, jk_key_id(request));
    sqlite3_bind_int(q, 2, JK_MAX_CANDIDATES);
    int step;
    while ((step = sqlite3_step(q)) == SQLITE_ROW && n < 8)
      if (sqlite3_column_bytes(q, 0) == 16) memcpy(old[n++].bytes, sqlite3_column_blob(q, 0), 16);
    if (step != SQLITE_ROW && step != SQLITE_DONE) rc = sqlite3_errcode(c->db);
  }
  sqlite3_finalize(q);
  for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
    rc = jk_store_delete_row(e, &old[i]);
    ++*removed;
  }
  return rc;
}

jitk_status jk_store_insert(jitk_engine *e, const jk_key *key, const jk_key *request,
                            const jk_material *material, const jk_entry *entry, const char *label) {
  jk_cache *c = &e->cache;
  if (jk_store_open(e) != JITK_OK || c->disk != JK_DISK_OPEN) return JITK_OK;
  jk_material names;
  jk_material_init(&names, e);
  if (jk_names_pack(e, entry, &names) != JITK_OK) {
    jk_material_free(&names);
    return JITK_ERR_OUT_OF_MEMORY;
  }
  const char *log = entry->log ? entry->log : "";
  size_t log_len = strlen(log);
  int64_t bytes = (int64_t)(entry->image_size + names.len + log_len + material->len + 128);
  if (bytes > c->max_bytes) {
    jk_log(e, JITK_LOG_INFO,
           "kernel cache: an entry of %lld bytes exceeds the cap of %lld; not stored",
           (long long)bytes, (long long)c->max_bytes);
    jk_material_free(&names);
    return JITK_OK;
  }
  uint8_t sum[16];
  jk_store_checksum(entry->kind, entry->image, entry->image_size, names.data, names.len, log,
                    log_len, sum);
  int64_t now = jk_now_ms();

  int rc = jk_store_begin(e);
  sqlite3_stmt *q = NULL;
  int64_t total = 0;
  /* Reading the total first makes sure its row exists (computed without
   * the new entry) before the entry is added to it. */
  if (rc == SQLITE_OK) rc = read_total(e, &total);
  (void)total;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db,
                            "INSERT OR IGNORE INTO entries (key, kind, bytes, created, last_used, "
                            "compile_ms, target, label, checksum, material, names, log, image, id) "
                            "VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                            -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 13, jk_key_id(key));
    sqlite3_bind_blob(q, 1, key->bytes, 16, SQLITE_STATIC);
    sqlite3_bind_int(q, 2, (int)entry->kind);
    sqlite3_bind_int64(q, 3, bytes);
    sqlite3_bind_int64(q, 4, now);
    sqlite3_bind_double(q, 5, entry->compile_ms);
    sqlite3_bind_text(q, 6, e->target.arch, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 7, label ? label : "", -1, SQLITE_STATIC);
    sqlite3_bind_blob(q, 8, sum, 16, SQLITE_STATIC);
    sqlite3_bind_blob(q, 9, material->data, (int)material->len, SQLITE_STATIC);
    sqlite3_bind_blob(q, 10, names.data ? (const void *)names.data : "", (int)names.len,
                      SQLITE_STATIC);
    sqlite3_bind_text(q, 11, log, (int)log_len, SQLITE_STATIC);
    sqlite3_bind_blob(q, 12, entry->image, (int)entry->image_size, SQLITE_STATIC);
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
  }
  bool inserted = rc == SQLITE_OK && sqlite3_changes(c->db) == 1;
  sqlite3_finalize(q);
  size_t evicted = 0;
  if (rc == SQLITE_OK && inserted) rc = add_total(e, bytes);
  if (rc == SQLITE_OK && inserted) rc = add_request(e, request, jk_key_id(key), &evicted);
  if (rc == SQLITE_OK) rc = write_stamps(e, now);
  if (rc == SQLITE_OK) rc = jk_memo_write(e);
  if (rc == SQLITE_OK) rc = jk_store_evict_to(e, c->max_bytes, jk_key_id(key), &evicted);
  if (rc == SQLITE_OK) {
    c->pending.evictions += evicted;
    rc = write_counters(e);
  }
  if (rc == SQLITE_OK) {
    rc = jk_store_commit(e);
  } else {
    jk_store_rollback(e);
  }
  jk_material_free(&names);
  if (rc != SQLITE_OK) {
    c->pending.evictions -= evicted;
    if (jk_store_is_fatal(rc) || (rc & 0xff) == SQLITE_BUSY)
      jk_store_disable(e, "cannot store a compiled kernel", rc);
    return JITK_OK;
  }
  c->stats.evictions += evicted;
  c->num_pending_used = 0;
  memset(&c->pending, 0, sizeof c->pending);
  jk_memo_written(e);
  if (evicted)
    jk_log(e, JITK_LOG_INFO, "kernel cache: evicted %zu entr%s to stay under %lld bytes", evicted,
           evicted == 1 ? "y" : "ies", (long long)c->max_bytes);
  return JITK_OK;
}

/* The entry for a request among its candidates in one tier. The
 * candidates statement returns whole rows (in the lookup's columns), so a
 * hit is one query: the first candidate whose dependency record holds is
 * checked as a lookup by its key would check it, the key recomputed from
 * its material. */
static jitk_status find_in(jitk_engine *e, sqlite3_stmt *q, bool shared, const jk_key *request,
                           const jk_material *req, jk_entry *out, bool *found) {
  *found = false;
  const char *toolchain = jk_toolchain(e);
  size_t tl = strlen(toolchain);
  if (!jk_toolchain_runs(e)) return JITK_OK;
  sqlite3_bind_int64(q, 1, jk_key_id(request));
  jitk_status st = JITK_OK;
  jk_key damaged_key;
  const char *damage = NULL;
  int step = SQLITE_DONE;
  while (!*found && damage == NULL && st == JITK_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
    const unsigned char *m = sqlite3_column_blob(q, 3);
    size_t ml = (size_t)sqlite3_column_bytes(q, 3);
    /* Another request with the same first 63 bits, or a damaged row: not
     * this request's. */
    if (m == NULL || ml <= req->len || memcmp(m, req->data, req->len) != 0) continue;
    const unsigned char *tc;
    size_t tcl;
    jk_deps deps;
    st = jk_deps_parse(e, m, ml, req->len, &tc, &tcl, &deps);
    if (st == JITK_ERR_INVALID_IMAGE) {
      st = JITK_OK;
      continue;
    }
    if (st != JITK_OK) break;
    /* Compiled by another NVRTC build: never served. */
    const char *failed = NULL;
    if (tcl == tl && memcmp(tc, toolchain, tl) == 0 && jk_deps_hold(e, &deps, true, &failed)) {
      jk_key key;
      jk_hash128(m, ml, key.bytes);
      jk_material view = {e, (unsigned char *)m, ml, ml, false};
      st = read_row(e, q, &key, &view, out, found, &damage);
      if (*found) {
        out->deps = deps;
        memset(&deps, 0, sizeof deps);
      } else if (damage != NULL) {
        damaged_key = key;
      }
    } else if (failed != NULL && jk_log_enabled(e, JITK_LOG_DEBUG)) {
      jk_log(e, JITK_LOG_DEBUG, "kernel cache: an entry of the request does not serve: %s changed",
             failed);
    }
    jk_deps_free(e, &deps);
  }
  sqlite3_reset(q);
  sqlite3_clear_bindings(q);
  if (step != SQLITE_ROW && step != SQLITE_DONE) {
    if (shared)
      jk_store_shared_disable(e, "cannot read the database", step);
    else
      jk_store_disable(e, "cannot read the database", step);
    return st;
  }
  if (damage != NULL) damaged(e, shared, &damaged_key, damage);
  if (st == JITK_ERR_OUT_OF_MEMORY) return jk_fail(e, st, "out of memory reading a cache entry");
  return st;
}

jitk_status jk_store_find(jitk_engine *e, const jk_key *request, const jk_material *req,
                          jk_entry *out, bool *found) {
  jk_cache *c = &e->cache;
  *found = false;
  jitk_status st = JITK_OK;
  if (jk_store_open(e) == JITK_OK && c->candidates != NULL && c->lookup != NULL)
    st = find_in(e, c->candidates, false, request, req, out, found);
  if (st != JITK_OK || *found || c->shared_dir == NULL) return st;
  if (jk_store_shared_open(e) != JITK_OK) return JITK_OK;
  st = find_in(e, c->shared_candidates, true, request, req, out, found);
  if (st == JITK_OK && *found) c->stats.shared_hits++;
  return st;
}

/* --- the shared tier: read-only, checked at every open --- */

void jk_store_shared_disable(jitk_engine *e, const char *why, int rc) {
  jk_cache *c = &e->cache;
  const char *detail = rc ? sqlite3_errstr(rc) : NULL;
  if (c->shared_db != NULL && rc && sqlite3_extended_errcode(c->shared_db) == rc)
    detail = sqlite3_errmsg(c->shared_db);
  snprintf(c->shared_why, sizeof c->shared_why, "off: %s%s%s", why, detail ? ": " : "",
           detail ? detail : "");
  jk_log(e, JITK_LOG_WARN, "shared kernel cache %s: %s%s%s; not using it", c->shared_dir, why,
         detail ? ": " : "", detail ? detail : "");
  c->stats.disk_errors++;
  jk_store_shared_close(e);
  c->shared_state = JK_DISK_OFF;
}

void jk_store_shared_close(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->shared_db != NULL && c->shared_pid == getpid()) {
    sqlite3_finalize(c->shared_lookup);
    sqlite3_finalize(c->shared_candidates);
    sqlite3_close_v2(c->shared_db);
  }
  c->shared_lookup = c->shared_candidates = NULL;
  c->shared_db = NULL;
  if (c->shared_state != JK_DISK_OFF) c->shared_state = JK_DISK_CLOSED;
}

jitk_status jk_store_shared_open(jitk_engine *e) {
  jk_cache *c = &e->cache;
  if (c->shared_dir == NULL || c->shared_state == JK_DISK_OFF) return JITK_ERR_CACHE;
  if (c->shared_state == JK_DISK_READ_ONLY && c->shared_pid == getpid()) return JITK_OK;
  if (c->shared_db != NULL && c->shared_pid != getpid()) {
    /* A forked child leaves the parent's connection alone. */
    c->shared_db = NULL;
    c->shared_lookup = c->shared_candidates = NULL;
  }
  c->shared_pid = getpid();
  c->shared_trust.kind = JK_TIER_SHARED;
  jk_free(e, c->shared_db_path);
  jitk_status st =
      jk_store_locate(e, c->shared_dir, &c->shared_trust, false, &c->shared_db_path, NULL);
  if (st != JITK_OK) {
    char why[600];
    snprintf(why, sizeof why, "%s", jitk_errmsg(e));
    jk_store_shared_disable(e, why, 0);
    return JITK_ERR_CACHE;
  }
  int rc =
      sqlite3_open_v2(c->shared_db_path, &c->shared_db,
                      SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, c->vfs);
  if (rc == SQLITE_OK) {
    sqlite3_extended_result_codes(c->shared_db, 1);
    sqlite3_busy_timeout(c->shared_db, c->busy_ms);
  }
  sqlite3 *mine = c->db;
  int format = -1;
  if (rc == SQLITE_OK) {
    /* read_format works on the engine's connection; lend it this one. */
    c->db = c->shared_db;
    format = read_format(e, &rc);
    c->db = mine;
  }
  if (rc == SQLITE_OK && format != JK_CACHE_FORMAT) {
    jk_store_shared_disable(e,
                            format == -2 ? "the file is another program's SQLite database"
                                         : "the database is not a jitk cache of format 1",
                            0);
    return JITK_ERR_CACHE;
  }
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v3(c->shared_db,
                            "SELECT kind, compile_ms, checksum, material, names, log, image, key "
                            "FROM entries WHERE id = ?1",
                            -1, SQLITE_PREPARE_PERSISTENT, &c->shared_lookup, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v3(c->shared_db,
                            "SELECT e.kind, e.compile_ms, e.checksum, e.material, e.names, "
                            "e.log, e.image, e.key FROM requests r JOIN entries e ON e.id = r.id "
                            "WHERE r.request = ?1 ORDER BY e.last_used DESC, e.id LIMIT 16",
                            -1, SQLITE_PREPARE_PERSISTENT, &c->shared_candidates, NULL);
  if (rc != SQLITE_OK) {
    jk_store_shared_disable(e,
                            "cannot read the database (a shared cache is published with a "
                            "rollback journal by jitk cache publish)",
                            rc);
    return JITK_ERR_CACHE;
  }
  c->shared_state = JK_DISK_READ_ONLY;
  snprintf(c->shared_why, sizeof c->shared_why, "on");
  jk_log(e, JITK_LOG_DEBUG, "shared kernel cache %s opened", c->shared_db_path);
  return JITK_OK;
}
