/*
 * The public cache API: counters, location, listing, and maintenance
 * (verify, prune, clear, export, import) for the CLI and for programs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "engine.h"

extern const unsigned char jk_schema_sql[];

/* Opens the store for a maintenance call, or says why it cannot. Holds
 * disk_lock on success; the caller unlocks. */
static jitk_status open_for(jitk_engine *e, const char *what, bool write) {
  if (e == NULL) return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "%s: engine is NULL", what);
  jk_cache *c = &e->cache;
  pthread_mutex_lock(&c->disk_lock);
  if (c->mode == JITK_CACHE_OFF) {
    pthread_mutex_unlock(&c->disk_lock);
    return jk_fail(e, JITK_ERR_CACHE, "%s: the disk cache is off (JITK_CACHE=off)", what);
  }
  if (jk_store_open(e) != JITK_OK) {
    pthread_mutex_unlock(&c->disk_lock);
    return jk_fail(e, JITK_ERR_CACHE, "%s: the disk cache %s cannot be used (see the log)", what,
                   c->db_path ? c->db_path
                   : c->dir   ? c->dir
                              : "(no folder)");
  }
  if (write && c->disk != JK_DISK_OPEN) {
    pthread_mutex_unlock(&c->disk_lock);
    return jk_fail(e, JITK_ERR_CACHE, "%s: the disk cache %s is read-only", what, c->db_path);
  }
  return JITK_OK;
}

/* The connection's message only while it still describes `rc`: a
 * ROLLBACK since resets it to "not an error". */
static const char *message_of(jitk_engine *e, int rc) {
  sqlite3 *db = e->cache.db;
  if (db != NULL && sqlite3_extended_errcode(db) == rc) {
    const char *m = sqlite3_errmsg(db);
    if (m != NULL && strcmp(m, "not an error") != 0) return m;
  }
  return sqlite3_errstr(rc);
}

static jitk_status sql_fail(jitk_engine *e, const char *what, int rc) {
  const char *m = message_of(e, rc);
  jitk_status st = jk_fail(e, JITK_ERR_CACHE, "%s: %s%s", what, m,
                           jk_store_is_fatal(rc) ? " (the database may be damaged: "
                                                   "`jitk cache clear` starts afresh)"
                                                 : "");
  return st;
}

jitk_status jitk_cache_get_stats(jitk_engine *e, jitk_cache_stats *mine, jitk_cache_stats *all) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_get_stats: engine is NULL");
  jk_cache *c = &e->cache;
  /* Both are filled in locals and handed over only on success, as the
   * header promises for out-parameters. */
  jitk_cache_stats m, a;
  memset(&m, 0, sizeof m);
  pthread_mutex_lock(&c->disk_lock);
  m.disk_hits = c->stats.disk_hits;
  m.misses = c->stats.misses;
  m.compiles = c->stats.compiles;
  m.compile_ms = c->stats.compile_ms;
  m.corrupt = c->stats.corrupt;
  m.evictions = c->stats.evictions;
  m.disk_errors = c->stats.disk_errors;
  pthread_mutex_unlock(&c->disk_lock);
  m.memory_hits = atomic_load(&c->memory_hits);
  m.max_bytes = c->max_bytes;
  if (all == NULL) {
    if (mine != NULL) *mine = m;
    return JITK_OK;
  }
  jitk_status st = open_for(e, "jitk_cache_get_stats", false);
  if (st != JITK_OK) return st;
  /* Our own pending counts first, so the sum includes them. */
  jk_store_flush(e);
  memset(&a, 0, sizeof a);
  a.max_bytes = c->max_bytes;
  sqlite3_stmt *q = NULL;
  int rc = c->db ? sqlite3_prepare_v2(c->db, "SELECT id, value FROM stats", -1, &q, NULL)
                 : SQLITE_MISUSE;
  int step = SQLITE_DONE;
  while (rc == SQLITE_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
    int id = sqlite3_column_int(q, 0);
    int64_t v = sqlite3_column_int64(q, 1);
    switch (id) {
      case JK_STAT_MEMORY_HITS: a.memory_hits = (uint64_t)v; break;
      case JK_STAT_DISK_HITS: a.disk_hits = (uint64_t)v; break;
      case JK_STAT_MISSES: a.misses = (uint64_t)v; break;
      case JK_STAT_COMPILES: a.compiles = (uint64_t)v; break;
      case JK_STAT_COMPILE_US: a.compile_ms = (double)v / 1000.0; break;
      case JK_STAT_CORRUPT: a.corrupt = (uint64_t)v; break;
      case JK_STAT_EVICTIONS: a.evictions = (uint64_t)v; break;
      case JK_STAT_REMOTE_HITS:
      case JK_STAT_REMOTE_MISSES:
      case JK_STAT_REMOTE_ERRORS:
      case JK_STAT_REMOTE_REJECTED:
      case JK_STAT_REMOTE_READ:
      case JK_STAT_REMOTE_WRITTEN: c->remote_totals[id - JK_STAT_REMOTE_HITS] = (uint64_t)v; break;
      default: break;
    }
  }
  if (rc == SQLITE_OK && step != SQLITE_DONE) rc = sqlite3_errcode(c->db);
  sqlite3_finalize(q);
  q = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db, "SELECT count(*), coalesce(sum(bytes), 0) FROM entries", -1, &q,
                            NULL);
  if (rc == SQLITE_OK) {
    if (sqlite3_step(q) == SQLITE_ROW) {
      a.entries = (uint64_t)sqlite3_column_int64(q, 0);
      a.bytes = (uint64_t)sqlite3_column_int64(q, 1);
    } else {
      rc = sqlite3_errcode(c->db);
    }
  }
  sqlite3_finalize(q);
  a.disk_errors = c->stats.disk_errors;
  if (rc != SQLITE_OK) {
    st = sql_fail(e, "reading the cache's counters", rc);
  } else {
    *all = a;
    if (mine != NULL) *mine = m;
  }
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

jitk_status jitk_cache_location(jitk_engine *e, const char **dir, const char **database,
                                const char **state) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_location: engine is NULL");
  jk_cache *c = &e->cache;
  pthread_mutex_lock(&c->disk_lock);
  if (c->mode != JITK_CACHE_OFF) jk_store_open(e);
  if (dir) *dir = c->dir;
  if (database) *database = c->db_path;
  if (state) {
    if (c->mode == JITK_CACHE_OFF)
      *state = "off: JITK_CACHE=off";
    else if (c->disk == JK_DISK_OPEN)
      *state = c->network_fs ? "on (network filesystem: rollback journal)" : "on";
    else if (c->disk == JK_DISK_READ_ONLY)
      *state = "read-only";
    else
      *state = "off: the database could not be used (the log says why)";
  }
  pthread_mutex_unlock(&c->disk_lock);
  return JITK_OK;
}

jitk_status jitk_cache_list(jitk_engine *e, jitk_cache_entry_fn fn, void *user) {
  if (fn == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_list: fn is NULL");
  jitk_status st = open_for(e, "jitk_cache_list", false);
  if (st != JITK_OK) return st;
  jk_cache *c = &e->cache;
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(c->db,
                              "SELECT key, label, target, kind, bytes, compile_ms, created, "
                              "last_used FROM entries ORDER BY last_used, id",
                              -1, &q, NULL);
  int step = SQLITE_DONE;
  while (rc == SQLITE_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
    jitk_cache_entry_info info;
    memset(&info, 0, sizeof info);
    jk_key k;
    memset(&k, 0, sizeof k);
    if (sqlite3_column_bytes(q, 0) == 16) memcpy(k.bytes, sqlite3_column_blob(q, 0), 16);
    jk_key_hex(&k, info.key);
    info.label = (const char *)sqlite3_column_text(q, 1);
    info.target = (const char *)sqlite3_column_text(q, 2);
    if (info.label == NULL) info.label = "";
    if (info.target == NULL) info.target = "";
    info.kind = (jitk_image_kind)sqlite3_column_int(q, 3);
    info.bytes = (size_t)sqlite3_column_int64(q, 4);
    info.compile_ms = sqlite3_column_double(q, 5);
    info.created = sqlite3_column_int64(q, 6) / 1000;
    info.last_used = sqlite3_column_int64(q, 7) / 1000;
    if (fn(user, &info) != 0) break;
  }
  if (rc == SQLITE_OK && step != SQLITE_DONE && step != SQLITE_ROW) rc = sqlite3_errcode(c->db);
  sqlite3_finalize(q);
  if (rc != SQLITE_OK) st = sql_fail(e, "listing the cache", rc);
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

/* What a row counts against the size cap: its stored bytes (as
 * jk_store_insert counts them), whatever its `bytes` column says. */
#define JK_ROW_BYTES \
  "(length(image) + length(names) + length(CAST(log AS BLOB)) + length(material) + 128)"

/* Sets every row's size in database `db` ("main", "import") to what it
 * holds, and the total to their sum; inside a write transaction. */
static int repair_sizes(jitk_engine *e, const char *db) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "UPDATE %s.entries SET bytes = " JK_ROW_BYTES " WHERE bytes IS NOT " JK_ROW_BYTES, db);
  int rc = sqlite3_exec(e->cache.db, sql, NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  snprintf(sql, sizeof sql,
           "INSERT INTO %s.stats (id, name, value) SELECT 8, 'total_bytes', coalesce(sum(bytes), "
           "0) FROM %s.entries WHERE true ON CONFLICT (id) DO UPDATE SET value = excluded.value",
           db, db);
  return sqlite3_exec(e->cache.db, sql, NULL, NULL, NULL);
}

/* Runs one statement whose only parameter is a file name (VACUUM INTO,
 * ATTACH); SQLITE_OK or the error code. */
static int run_on_file(sqlite3 *db, const char *sql, const char *file) {
  sqlite3_stmt *q = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(q, 1, file, -1, SQLITE_STATIC);
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
  }
  sqlite3_finalize(q);
  return rc;
}

/* Whether a row holds a usable entry: its key is the hash of its material,
 * the material parses, the checksum matches, the names parse. */
bool jk_store_row_is_sound(jitk_engine *e, sqlite3_stmt *q, int col_key, int64_t id) {
  int klen = sqlite3_column_bytes(q, col_key);
  const void *key = sqlite3_column_blob(q, col_key);
  int kind = sqlite3_column_int(q, col_key + 1);
  const void *sum = sqlite3_column_blob(q, col_key + 2);
  int sum_len = sqlite3_column_bytes(q, col_key + 2);
  const unsigned char *mat = sqlite3_column_blob(q, col_key + 3);
  size_t mat_len = (size_t)sqlite3_column_bytes(q, col_key + 3);
  const unsigned char *names = sqlite3_column_blob(q, col_key + 4);
  size_t names_len = (size_t)sqlite3_column_bytes(q, col_key + 4);
  const char *log = (const char *)sqlite3_column_text(q, col_key + 5);
  size_t log_len = (size_t)sqlite3_column_bytes(q, col_key + 5);
  const void *image = sqlite3_column_blob(q, col_key + 6);
  size_t image_len = (size_t)sqlite3_column_bytes(q, col_key + 6);
  if (klen != 16 || key == NULL || sum_len != 16 || mat == NULL || log == NULL || image == NULL ||
      image_len == 0)
    return false;
  if (kind != JITK_IMAGE_CUBIN && kind != JITK_IMAGE_PTX) return false;
  jk_key k;
  memcpy(k.bytes, key, 16);
  if (jk_key_id(&k) != id) return false;
  uint8_t h[16];
  jk_hash128(mat, mat_len, h);
  if (memcmp(h, key, 16) != 0) return false;
  size_t pos = 0;
  const char *label;
  const unsigned char *bytes;
  size_t n;
  bool ok = true;
  while (jk_material_next(mat, mat_len, &pos, &label, &bytes, &n, &ok)) {
  }
  if (!ok) return false;
  jk_store_checksum(kind, image, image_len, names, names_len, log, log_len, h);
  if (memcmp(h, sum, 16) != 0) return false;
  jk_entry tmp;
  memset(&tmp, 0, sizeof tmp);
  jitk_status st = jk_names_unpack(e, names ? names : (const unsigned char *)"", names_len, &tmp);
  for (size_t i = 0; i < tmp.num_names; i++) {
    if (tmp.name_expressions) jk_free(e, tmp.name_expressions[i]);
    if (tmp.lowered) jk_free(e, tmp.lowered[i]);
  }
  jk_free(e, tmp.name_expressions);
  jk_free(e, tmp.lowered);
  return st == JITK_OK;
}

jitk_status jitk_cache_verify(jitk_engine *e, size_t *checked, size_t *removed) {
  jitk_status st = open_for(e, "jitk_cache_verify", true);
  if (st != JITK_OK) return st;
  jk_cache *c = &e->cache;
  size_t n_checked = 0, n_removed = 0;
  int rc = jk_store_begin(e);
  sqlite3_stmt *q = NULL, *del = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db, "SELECT id, " JK_ROW_COLUMNS " FROM entries", -1, &q, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db, "DELETE FROM entries WHERE id = ?1", -1, &del, NULL);
  /* Deleting the row a SELECT stands on is allowed in SQLite; the scan
   * goes on with the next one. */
  int step = SQLITE_DONE;
  while (rc == SQLITE_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
    n_checked++;
    if (jk_store_row_is_sound(e, q, 1, sqlite3_column_int64(q, 0))) continue;
    sqlite3_bind_int64(del, 1, sqlite3_column_int64(q, 0));
    rc = sqlite3_step(del) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    sqlite3_reset(del);
    n_removed++;
  }
  if (rc == SQLITE_OK && step != SQLITE_DONE) rc = sqlite3_errcode(c->db);
  sqlite3_finalize(q);
  sqlite3_finalize(del);
  /* Sizes are what the rows hold (an import from an older jitk may have
   * brought any number), and the total is recomputed from what is left. */
  if (rc == SQLITE_OK) rc = repair_sizes(e, "main");
  if (rc == SQLITE_OK) rc = jk_store_forget_requests(e);
  if (rc == SQLITE_OK) {
    c->pending.corrupt += n_removed;
    c->stats.corrupt += n_removed;
    rc = jk_store_commit(e);
  } else {
    jk_store_rollback(e);
  }
  if (rc == SQLITE_OK) {
    /* SQLite's own structure too: entries can be sound in a damaged file. */
    sqlite3_stmt *ic = NULL;
    rc = sqlite3_prepare_v2(c->db, "PRAGMA quick_check", -1, &ic, NULL);
    if (rc == SQLITE_OK && sqlite3_step(ic) == SQLITE_ROW) {
      const char *r = (const char *)sqlite3_column_text(ic, 0);
      if (r == NULL || strcmp(r, "ok") != 0) {
        /* The text belongs to the statement: it is copied out before the
         * statement goes. */
        char report[512];
        snprintf(report, sizeof report, "%s", r ? r : "?");
        sqlite3_finalize(ic);
        pthread_mutex_unlock(&c->disk_lock);
        return jk_fail(e, JITK_ERR_CACHE,
                       "the cache database %s is damaged (%s); `jitk cache clear` starts "
                       "afresh",
                       c->db_path, report);
      }
    }
    sqlite3_finalize(ic);
  }
  if (rc != SQLITE_OK)
    st = sql_fail(e, "verifying the cache", rc);
  else {
    if (checked) *checked = n_checked;
    if (removed) *removed = n_removed;
  }
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

jitk_status jitk_cache_prune(jitk_engine *e, int64_t max_bytes, size_t *removed) {
  if (max_bytes < 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_prune: max_bytes is negative");
  jitk_status st = open_for(e, "jitk_cache_prune", true);
  if (st != JITK_OK) return st;
  jk_cache *c = &e->cache;
  size_t n = 0;
  int rc = jk_store_begin(e);
  if (rc == SQLITE_OK) rc = repair_sizes(e, "main");
  if (rc == SQLITE_OK) rc = jk_store_evict_to(e, max_bytes ? max_bytes : c->max_bytes, -1, &n);
  if (rc == SQLITE_OK) {
    c->pending.evictions += n;
    c->stats.evictions += n;
    rc = jk_store_commit(e);
  } else {
    jk_store_rollback(e);
  }
  if (rc != SQLITE_OK)
    st = sql_fail(e, "pruning the cache", rc);
  else if (removed)
    *removed = n;
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

/* Whether the file at `path` may be deleted as a damaged cache of ours:
 * not another program's SQLite database, nor a newer jitk's. What is not
 * an SQLite file at all (its header gone) is damage. */
static bool deletable(const char *path, const char **why) {
  unsigned char h[100];
  FILE *f = fopen(path, "rb");
  if (f == NULL) return true;
  size_t n = fread(h, 1, sizeof h, f);
  fclose(f);
  if (n < sizeof h || memcmp(h, "SQLite format 3", 16) != 0) return true;
  uint32_t version = (uint32_t)h[60] << 24 | (uint32_t)h[61] << 16 | (uint32_t)h[62] << 8 | h[63];
  uint32_t id = (uint32_t)h[68] << 24 | (uint32_t)h[69] << 16 | (uint32_t)h[70] << 8 | h[71];
  if (id == JK_APPLICATION_ID && version <= JK_CACHE_FORMAT) return true;
  *why = id == JK_APPLICATION_ID ? "it is a newer jitk's cache"
                                 : "it is another program's SQLite database";
  return false;
}

/* Deletes a database that cannot be opened or written (damaged), after
 * the folder's and files' checks, and makes a new one. Under disk_lock. */
static jitk_status start_afresh(jitk_engine *e) {
  jk_cache *c = &e->cache;
  jk_store_close(e);
  c->disk = JK_DISK_CLOSED;
  char *db = NULL;
  jitk_status st = jk_store_locate(e, c->dir, &c->trust, false, &db, NULL);
  const char *why = NULL;
  if (st == JITK_OK && !deletable(db, &why))
    st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_clear: not deleting %s: %s", db, why);
  static const char *const suffixes[] = {"-wal", "-shm", "-journal", ""};
  for (size_t i = 0; st == JITK_OK && i < 4; i++) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "%s%s", db, suffixes[i]);
    char *p = jk_buf_take(&b);
    if (p == NULL) {
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    } else if (unlink(p) != 0 && errno != ENOENT) {
      st = jk_fail(e, JITK_ERR_IO, "jitk_cache_clear: cannot delete %s: %s", p, strerror(errno));
    }
    jk_free(e, p);
  }
  if (st == JITK_OK) {
    jk_log(e, JITK_LOG_WARN, "kernel cache %s was damaged; deleted it and started afresh", db);
    if (jk_store_open(e) != JITK_OK)
      st = jk_fail(e, JITK_ERR_CACHE,
                   "jitk_cache_clear: a new database at %s cannot be made "
                   "(see the log)",
                   db);
  }
  jk_free(e, db);
  return st;
}

jitk_status jitk_cache_clear(jitk_engine *e, size_t *removed) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_clear: engine is NULL");
  jk_cache *c = &e->cache;
  if (c->mode != JITK_CACHE_ON)
    return jk_fail(e, JITK_ERR_CACHE, "jitk_cache_clear: the disk cache is %s",
                   c->mode == JITK_CACHE_OFF ? "off (JITK_CACHE=off)" : "read-only");
  pthread_mutex_lock(&c->disk_lock);
  size_t n = 0;
  jitk_status st = JITK_OK;
  int rc = SQLITE_OK;
  bool damaged = jk_store_open(e) != JITK_OK;
  if (!damaged && c->disk != JK_DISK_OPEN) {
    pthread_mutex_unlock(&c->disk_lock);
    return jk_fail(e, JITK_ERR_CACHE, "jitk_cache_clear: the disk cache %s is read-only",
                   c->db_path);
  }
  if (!damaged) {
    rc = jk_store_begin(e);
    if (rc == SQLITE_OK) rc = sqlite3_exec(c->db, "DELETE FROM entries", NULL, NULL, NULL);
    if (rc == SQLITE_OK) n = (size_t)sqlite3_changes(c->db);
    if (rc == SQLITE_OK) rc = jk_store_forget_requests(e);
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(c->db, "UPDATE stats SET value = 0 WHERE id = 8", NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
      rc = jk_store_commit(e);
    } else {
      /* The message is kept before ROLLBACK resets it. */
      st = sql_fail(e, "clearing the cache", rc);
      jk_store_rollback(e);
    }
    damaged = rc != SQLITE_OK && jk_store_is_fatal(rc) && (rc & 0xff) != SQLITE_READONLY;
    if (rc != SQLITE_OK && st == JITK_OK) st = sql_fail(e, "clearing the cache", rc);
  }
  /* What cannot be opened or emptied is deleted and made anew, which is
   * what every "damaged" message promises. */
  if (damaged) {
    st = start_afresh(e);
    n = 0;
  }
  if (st == JITK_OK && removed) *removed = n;
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

jitk_status jitk_cache_export(jitk_engine *e, const char *file, size_t *exported) {
  if (file == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_export: file is NULL");
  jitk_status st = open_for(e, "jitk_cache_export", false);
  if (st != JITK_OK) return st;
  jk_cache *c = &e->cache;
  /* The file holds kernel sources: made private (0600, whatever the
   * umask) and new, before SQLite writes into it. VACUUM INTO accepts an
   * empty file. */
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    pthread_mutex_unlock(&c->disk_lock);
    if (err == EEXIST)
      return jk_fail(e, JITK_ERR_IO, "jitk_cache_export: %s exists already; choose a new file",
                     file);
    return jk_fail(e, JITK_ERR_IO, "jitk_cache_export: cannot create %s: %s", file, strerror(err));
  }
  fchmod(fd, 0600);
  close(fd);
  jk_store_flush(e);
  sqlite3_stmt *q = NULL;
  /* VACUUM INTO writes a compact, self-contained copy in one go. */
  int rc = run_on_file(c->db, "VACUUM INTO ?1", file);
  size_t n = 0;
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v2(c->db, "SELECT count(*) FROM entries", -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) n = (size_t)sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
  }
  if (rc != SQLITE_OK) {
    st = sql_fail(e, "exporting the cache", rc);
    unlink(file);
  } else if (exported) {
    *exported = n;
  }
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

/* Whether database `db` of the connection has table `name`. */
static bool has_table(jitk_engine *e, const char *db, const char *name) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT 1 FROM %s.sqlite_schema WHERE type = 'table' AND name = ?1",
           db);
  sqlite3_stmt *q = NULL;
  bool found = false;
  if (sqlite3_prepare_v2(e->cache.db, sql, -1, &q, NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    found = sqlite3_step(q) == SQLITE_ROW;
  }
  sqlite3_finalize(q);
  return found;
}

jitk_status jitk_cache_import(jitk_engine *e, const char *file, size_t *imported,
                              size_t *rejected) {
  if (file == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_import: file is NULL");
  jitk_status st = open_for(e, "jitk_cache_import", true);
  if (st != JITK_OK) return st;
  jk_cache *c = &e->cache;
  struct stat sb;
  if (stat(file, &sb) != 0) {
    pthread_mutex_unlock(&c->disk_lock);
    return jk_fail(e, JITK_ERR_IO, "jitk_cache_import: cannot read %s", file);
  }
  sqlite3_stmt *q = NULL;
  int rc = run_on_file(c->db, "ATTACH ?1 AS import", file);
  if (rc != SQLITE_OK) {
    st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_import: cannot open %s: %s", file,
                 sqlite3_errmsg(c->db));
    pthread_mutex_unlock(&c->disk_lock);
    return st;
  }
  int format = -1;
  rc = sqlite3_prepare_v2(c->db, "PRAGMA import.user_version", -1, &q, NULL);
  if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) format = sqlite3_column_int(q, 0);
  char why[256];
  snprintf(why, sizeof why, "%s", rc == SQLITE_OK ? "no format mark" : sqlite3_errmsg(c->db));
  if (format == 0) format = -1;
  sqlite3_finalize(q);
  q = NULL; /* the statement below may not be made, and is finalized either way */
  if (format != JK_CACHE_FORMAT) {
    sqlite3_exec(c->db, "DETACH import", NULL, NULL, NULL);
    pthread_mutex_unlock(&c->disk_lock);
    if (format >= 0)
      return jk_fail(e, JITK_ERR_CACHE,
                     "jitk_cache_import: %s is a jitk cache of format %d; this jitk reads %d", file,
                     format, JK_CACHE_FORMAT);
    return jk_fail(e, JITK_ERR_CACHE, "jitk_cache_import: %s is not a jitk cache (%s)", file, why);
  }
  size_t n_in = 0, n_bad = 0;
  rc = jk_store_begin(e);
  sqlite3_stmt *ins = NULL;
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db, "SELECT id, " JK_ROW_COLUMNS " FROM import.entries", -1, &q,
                            NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db,
                            "INSERT OR IGNORE INTO main.entries (id, key, kind, bytes, created, "
                            "last_used, compile_ms, target, label, checksum, material, names, log, "
                            "image) SELECT id, key, kind, " JK_ROW_BYTES
                            ", created, last_used, "
                            "compile_ms, target, label, checksum, material, names, log, image FROM "
                            "import.entries WHERE id = ?1",
                            -1, &ins, NULL);
  int step = SQLITE_DONE;
  while (rc == SQLITE_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
    if (!jk_store_row_is_sound(e, q, 1, sqlite3_column_int64(q, 0))) {
      n_bad++;
      continue;
    }
    sqlite3_bind_int64(ins, 1, sqlite3_column_int64(q, 0));
    rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
    if (rc == SQLITE_OK) n_in += (size_t)sqlite3_changes(c->db);
    sqlite3_reset(ins);
  }
  if (rc == SQLITE_OK && step != SQLITE_DONE) rc = sqlite3_errcode(c->db);
  sqlite3_finalize(q);
  sqlite3_finalize(ins);
  size_t evicted = 0;
  /* Which requests the imported entries answer, when the file says (a
   * file from before dependency records has none: its entries are kept
   * but never served). */
  if (rc == SQLITE_OK && has_table(e, "import", "requests"))
    rc = sqlite3_exec(c->db,
                      "INSERT OR IGNORE INTO main.requests (request, id) SELECT r.request, r.id "
                      "FROM import.requests r JOIN main.entries m ON m.id = r.id JOIN "
                      "import.entries i ON i.id = r.id AND i.key = m.key",
                      NULL, NULL, NULL);
  if (rc == SQLITE_OK) rc = repair_sizes(e, "main");
  if (rc == SQLITE_OK) rc = jk_store_evict_to(e, c->max_bytes, -1, &evicted);
  if (rc == SQLITE_OK)
    rc = jk_store_commit(e);
  else
    jk_store_rollback(e);
  sqlite3_exec(c->db, "DETACH import", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    st = sql_fail(e, "importing into the cache", rc);
  } else {
    if (imported) *imported = n_in;
    if (rejected) *rejected = n_bad;
    if (evicted)
      jk_log(e, JITK_LOG_WARN, "import: %zu entries evicted to stay under the size cap", evicted);
  }
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}

jitk_status jitk_cache_shared_location(jitk_engine *e, const char **dir, const char **state) {
  if (e == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_shared_location: engine is NULL");
  jk_cache *c = &e->cache;
  pthread_mutex_lock(&c->disk_lock);
  if (c->shared_dir != NULL) jk_store_shared_open(e);
  if (dir) *dir = c->shared_dir;
  if (state) *state = c->shared_why;
  pthread_mutex_unlock(&c->disk_lock);
  return JITK_OK;
}

/* Makes the published database ready: an empty file becomes a cache in a
 * rollback journal (its readers cannot write the -shm file WAL needs); a
 * cache of ours stays. Through a connection of its own. */
static jitk_status publish_set_up(jitk_engine *e, const char *path) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, e->cache.vfs);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, e->cache.busy_ms);
    rc = sqlite3_exec(db, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
  }
  int id = -1, version = -1, objects = -1;
  sqlite3_stmt *q = NULL;
  const char *probes[3] = {"PRAGMA application_id", "PRAGMA user_version",
                           "SELECT count(*) FROM sqlite_schema"};
  int *out[3] = {&id, &version, &objects};
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  for (int i = 0; i < 3 && rc == SQLITE_OK; i++) {
    rc = sqlite3_prepare_v2(db, probes[i], -1, &q, NULL);
    if (rc == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) *out[i] = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
  }
  jitk_status st = JITK_OK;
  if (rc == SQLITE_OK && id == 0 && version == 0 && objects == 0) {
    rc = sqlite3_exec(db, (const char *)jk_schema_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  } else if (rc == SQLITE_OK) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    if (id != JK_APPLICATION_ID || version != JK_CACHE_FORMAT)
      st = jk_fail(e, JITK_ERR_CACHE,
                   "jitk_cache_publish: %s is not a jitk cache of format %d; not writing to it",
                   path, JK_CACHE_FORMAT);
  }
  if (rc != SQLITE_OK && st == JITK_OK)
    st = jk_fail(e, JITK_ERR_CACHE, "jitk_cache_publish: cannot set up %s: %s", path,
                 db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  sqlite3_close_v2(db);
  return st;
}

jitk_status jitk_cache_publish(jitk_engine *e, const char *dir, size_t *published) {
  if (dir == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_publish: dir is NULL");
  jitk_status st = open_for(e, "jitk_cache_publish", false);
  if (st != JITK_OK) return st;
  jk_cache *c = &e->cache;
  /* The folder is checked as its readers will check it, with this user
   * as the trusted owner. */
  jk_trust t;
  memset(&t, 0, sizeof t);
  t.kind = JK_TIER_SHARED;
  char *path = NULL;
  st = jk_store_locate(e, dir, &t, true, &path, NULL);
  if (st == JITK_OK && jk_cache_open_file(e, path, &t, false) == -1)
    st = jk_fail(e, JITK_ERR_IO, "jitk_cache_publish: cannot create %s: %s", path, strerror(errno));
  if (st == JITK_OK) st = publish_set_up(e, path);
  size_t n = 0;
  int rc = SQLITE_OK;
  if (st == JITK_OK) {
    jk_store_flush(e);
    rc = run_on_file(c->db, "ATTACH ?1 AS pub", path);
    if (rc != SQLITE_OK) {
      st = sql_fail(e, "jitk_cache_publish: attaching the shared cache", rc);
    } else {
      sqlite3_stmt *q = NULL, *ins = NULL, *req = NULL;
      rc = jk_store_begin(e);
      if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db, "SELECT id, " JK_ROW_COLUMNS " FROM main.entries", -1, &q,
                                NULL);
      if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(
            c->db,
            "INSERT OR IGNORE INTO pub.entries (id, key, kind, bytes, created, last_used, "
            "compile_ms, target, label, checksum, material, names, log, image) SELECT id, key, "
            "kind, " JK_ROW_BYTES
            ", created, last_used, compile_ms, target, label, checksum, "
            "material, names, log, image FROM main.entries WHERE id = ?1",
            -1, &ins, NULL);
      if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(c->db,
                                "INSERT OR IGNORE INTO pub.requests (request, id) SELECT request, "
                                "id FROM main.requests WHERE id = ?1",
                                -1, &req, NULL);
      int step = SQLITE_DONE;
      while (rc == SQLITE_OK && (step = sqlite3_step(q)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(q, 0);
        if (!jk_store_row_is_sound(e, q, 1, id)) continue;
        sqlite3_bind_int64(ins, 1, id);
        rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
        if (rc == SQLITE_OK) n += (size_t)sqlite3_changes(c->db);
        sqlite3_reset(ins);
        sqlite3_bind_int64(req, 1, id);
        if (rc == SQLITE_OK)
          rc = sqlite3_step(req) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
        sqlite3_reset(req);
      }
      if (rc == SQLITE_OK && step != SQLITE_DONE) rc = sqlite3_errcode(c->db);
      sqlite3_finalize(q);
      sqlite3_finalize(ins);
      sqlite3_finalize(req);
      if (rc == SQLITE_OK) rc = repair_sizes(e, "pub");
      if (rc == SQLITE_OK) rc = jk_store_commit(e);
      if (rc != SQLITE_OK) {
        st = sql_fail(e, "jitk_cache_publish: copying entries", rc);
        jk_store_rollback(e);
      }
      sqlite3_exec(c->db, "DETACH pub", NULL, NULL, NULL);
    }
  }
  if (st == JITK_OK && published) *published = n;
  jk_free(e, path);
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}
