/*
 * Tuning choices in the kernel cache's database: what an autotune step
 * measured fastest, one row per key (the generator, target, device and
 * shape class, as the caller spells them). The table is created by the
 * first choice stored, so databases made before it existed stay format 1;
 * readers that find no table find no choice. A choice is advice: the
 * caller checks it before use, and a lost or unreadable one only means the
 * default configuration.
 */
#include <sqlite3.h>
#include <string.h>

#include "cache/cache.h"
#include "engine.h"

static const char *const create_sql =
    "CREATE TABLE IF NOT EXISTS tuning (key TEXT PRIMARY KEY, choice TEXT NOT NULL, "
    "measured INTEGER NOT NULL)";

jitk_status jk_tuning_get(jitk_engine *e, const char *key, char *choice, size_t size, bool *found) {
  jk_cache *c = &e->cache;
  *found = false;
  if (c->mode == JITK_CACHE_OFF || size == 0) return JITK_OK;
  pthread_mutex_lock(&c->disk_lock);
  sqlite3_stmt *q = NULL;
  if (jk_store_open(e) == JITK_OK &&
      sqlite3_prepare_v2(c->db, "SELECT choice FROM tuning WHERE key = ?1", -1, &q, NULL) ==
          SQLITE_OK) {
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW) {
      const unsigned char *text = sqlite3_column_text(q, 0);
      size_t len = text != NULL ? strlen((const char *)text) : 0;
      if (text != NULL && len < size) {
        memcpy(choice, text, len + 1);
        *found = true;
      }
    }
  }
  /* A failed prepare is most often a database without the table yet. */
  sqlite3_finalize(q);
  pthread_mutex_unlock(&c->disk_lock);
  return JITK_OK;
}

bool jk_tuning_any(jitk_engine *e, const char *prefix) {
  jk_cache *c = &e->cache;
  size_t n = strlen(prefix);
  if (c->mode == JITK_CACHE_OFF || n == 0 || (unsigned char)prefix[n - 1] == 0xFF) return false;
  /* Keys from the prefix up to the prefix with its last byte raised: the
   * primary key's index answers without a scan. */
  char *hi = jk_malloc(e, n + 1);
  if (hi == NULL) return false;
  memcpy(hi, prefix, n + 1);
  hi[n - 1] = (char)((unsigned char)hi[n - 1] + 1);
  bool any = false;
  pthread_mutex_lock(&c->disk_lock);
  sqlite3_stmt *q = NULL;
  if (jk_store_open(e) == JITK_OK &&
      sqlite3_prepare_v2(c->db, "SELECT 1 FROM tuning WHERE key >= ?1 AND key < ?2 LIMIT 1", -1, &q,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, prefix, (int)n, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, hi, (int)n, SQLITE_STATIC);
    any = sqlite3_step(q) == SQLITE_ROW;
  }
  /* A failed prepare is most often a database without the table yet. */
  sqlite3_finalize(q);
  pthread_mutex_unlock(&c->disk_lock);
  jk_free(e, hi);
  return any;
}

jitk_status jk_tuning_put(jitk_engine *e, const char *key, const char *choice) {
  jk_cache *c = &e->cache;
  if (c->mode == JITK_CACHE_OFF) return JITK_OK;
  pthread_mutex_lock(&c->disk_lock);
  jitk_status st = JITK_OK;
  if (jk_store_open(e) != JITK_OK || c->disk != JK_DISK_OPEN) {
    jk_log(e, JITK_LOG_INFO,
           "the kernel cache is not writable: the tuning choice for %s is "
           "kept by this plan only",
           key);
    pthread_mutex_unlock(&c->disk_lock);
    return st;
  }
  int rc = jk_store_begin(e);
  sqlite3_stmt *q = NULL;
  if (rc == SQLITE_OK) rc = sqlite3_exec(c->db, create_sql, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(c->db,
                            "INSERT OR REPLACE INTO tuning (key, choice, measured) VALUES (?1, "
                            "?2, ?3)",
                            -1, &q, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, choice, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, jk_now_ms());
    rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(c->db);
  }
  sqlite3_finalize(q);
  if (rc == SQLITE_OK)
    rc = jk_store_commit(e);
  else
    jk_store_rollback(e);
  if (rc != SQLITE_OK) {
    st =
        jk_fail(e, JITK_ERR_CACHE, "storing the tuning choice for %s: %s", key, sqlite3_errstr(rc));
    if (jk_store_is_fatal(rc)) jk_store_disable(e, "cannot write the database", rc);
  }
  pthread_mutex_unlock(&c->disk_lock);
  return st;
}
