/*
 * Status codes and per-thread error messages.
 *
 * Each engine keeps one record per thread that failed on it, found through
 * a pthread key of the engine's own, so two engines in one thread and one
 * engine in two threads never see each other's messages. Failures with no
 * engine go to a fixed per-thread buffer that needs no allocation, so even
 * an out-of-memory failure during engine creation can be described.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

const char *jitk_version(void) { return JITK_VERSION_STRING; }

const char *jitk_errname(jitk_status status) {
  switch (status) {
#define JK_ERRNAME_(name, code, text) \
  case name: return #name;
    JITK_STATUS_LIST(JK_ERRNAME_)
#undef JK_ERRNAME_
  }
  return "JITK_ERR_UNKNOWN";
}

const char *jitk_strerror(jitk_status status) {
  switch (status) {
#define JK_STRERROR_(name, code, text) \
  case name: return text;
    JITK_STATUS_LIST(JK_STRERROR_)
#undef JK_STRERROR_
  }
  return "unknown status code";
}

/* The fallback for failures without an engine. Fixed size: it must work
 * when allocation does not. */
static _Thread_local char tl_message[4096];
static _Thread_local int tl_offset = -1;
static _Thread_local bool tl_set = false;

static void set_fallback(jitk_status status, int offset, const char *fmt, va_list ap) {
  int n = vsnprintf(tl_message, sizeof tl_message, fmt, ap);
  if (n < 0) snprintf(tl_message, sizeof tl_message, "%s", jitk_strerror(status));
  tl_offset = offset;
  tl_set = true;
}

static void record_destructor(void *p) {
  jk_err_record *r = p;
  jitk_engine *e = r->engine;
  pthread_mutex_lock(&jk_base_of(e)->err_lock);
  if (r->prev)
    r->prev->next = r->next;
  else
    jk_base_of(e)->err_records = r->next;
  if (r->next) r->next->prev = r->prev;
  pthread_mutex_unlock(&jk_base_of(e)->err_lock);
  jk_free(e, r->message);
  jk_free(e, r);
}

void jk_errors_init(jitk_engine *e) {
  jk_base_of(e)->err_records = NULL;
  pthread_mutex_init(&jk_base_of(e)->err_lock, NULL);
  if (pthread_key_create(&jk_base_of(e)->err_key, record_destructor) != 0) {
    /* Without a key every message goes to the per-thread fallback, which
     * jitk_errmsg also consults, so errors stay visible. */
    jk_base_of(e)->err_key = (pthread_key_t)-1;
  }
}

void jk_errors_destroy(jitk_engine *e) {
  if (jk_base_of(e)->err_key != (pthread_key_t)-1) {
    /* Deleting the key first guarantees no thread-exit destructor runs for
     * it afterwards; the records are then ours alone to free. */
    pthread_key_delete(jk_base_of(e)->err_key);
  }
  pthread_mutex_lock(&jk_base_of(e)->err_lock);
  jk_err_record *r = jk_base_of(e)->err_records;
  jk_base_of(e)->err_records = NULL;
  pthread_mutex_unlock(&jk_base_of(e)->err_lock);
  while (r) {
    jk_err_record *next = r->next;
    jk_free(e, r->message);
    jk_free(e, r);
    r = next;
  }
  pthread_mutex_destroy(&jk_base_of(e)->err_lock);
}

static jk_err_record *thread_record(jitk_engine *e, bool create) {
  if (jk_base_of(e)->err_key == (pthread_key_t)-1) return NULL;
  jk_err_record *r = pthread_getspecific(jk_base_of(e)->err_key);
  if (r != NULL || !create) return r;
  r = jk_calloc(e, 1, sizeof *r);
  if (r == NULL) return NULL;
  r->engine = e;
  r->offset = -1;
  if (pthread_setspecific(jk_base_of(e)->err_key, r) != 0) {
    jk_free(e, r);
    return NULL;
  }
  pthread_mutex_lock(&jk_base_of(e)->err_lock);
  r->next = jk_base_of(e)->err_records;
  if (r->next) r->next->prev = r;
  jk_base_of(e)->err_records = r;
  pthread_mutex_unlock(&jk_base_of(e)->err_lock);
  return r;
}

static jitk_status fail_common(const jitk_engine *ce, jitk_status status, int offset,
                               const char *fmt, va_list ap) {
  /* The record belongs to the engine, but filling it in is this thread's
   * business alone; the cast only drops the const of the caller's view. */
  jitk_engine *e = (jitk_engine *)ce;
  jk_err_record *r = e ? thread_record(e, true) : NULL;
  if (r == NULL) {
    set_fallback(status, offset, fmt, ap);
    return status;
  }
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(r->inline_message, sizeof r->inline_message, fmt, ap);
  jk_free(e, r->message);
  r->message = NULL;
  if (n >= (int)sizeof r->inline_message) {
    /* Long messages (compile logs) get a heap copy; if that fails the
     * truncated inline text still says what happened. */
    char *m = jk_malloc(e, (size_t)n + 1);
    if (m != NULL) {
      vsnprintf(m, (size_t)n + 1, fmt, ap2);
      r->message = m;
    }
  } else if (n < 0) {
    snprintf(r->inline_message, sizeof r->inline_message, "%s", jitk_strerror(status));
  }
  va_end(ap2);
  r->offset = offset;
  if (jk_log_enabled(e, JITK_LOG_DEBUG))
    jk_log(e, JITK_LOG_DEBUG, "failed with %s: %s", jitk_errname(status),
           r->message ? r->message : r->inline_message);
  return status;
}

jitk_status jk_failv(const jitk_engine *e, jitk_status status, const char *fmt, va_list ap) {
  return fail_common(e, status, -1, fmt, ap);
}

jitk_status jk_fail_record(const jitk_engine *e, jitk_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_common(e, status, -1, fmt, ap);
  va_end(ap);
  return status;
}

jitk_status jk_fail_at(const jitk_engine *e, jitk_status status, int offset, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_common(e, status, offset, fmt, ap);
  va_end(ap);
  return status;
}

const char *jitk_errmsg(const jitk_engine *ce) {
  jitk_engine *e = (jitk_engine *)ce;
  if (e != NULL) {
    jk_err_record *r = thread_record(e, false);
    if (r != NULL) return r->message ? r->message : r->inline_message;
  }
  return tl_set ? tl_message : "no error";
}

int jitk_error_offset(const jitk_engine *ce) {
  jitk_engine *e = (jitk_engine *)ce;
  if (e != NULL) {
    jk_err_record *r = thread_record(e, false);
    if (r != NULL) return r->offset;
  }
  return tl_set ? tl_offset : -1;
}

jitk_status jk_fail_caret(const jitk_engine *e, jitk_status status, const char *label,
                          const char *text, size_t offset, size_t length, const char *fmt, ...) {
  size_t tlen = strlen(text);
  if (offset > tlen) offset = tlen;
  /* Find the line holding the offset, and its number, for a
   * compiler-style "label:LINE:COL:" prefix. */
  size_t line_start = 0, line_no = 1;
  for (size_t i = 0; i < offset; i++)
    if (text[i] == '\n') {
      line_start = i + 1;
      line_no++;
    }
  size_t line_end = line_start;
  while (line_end < tlen && text[line_end] != '\n') line_end++;
  size_t col = offset - line_start;
  if (length == 0) length = 1;
  if (offset + length > line_end) length = line_end > offset ? line_end - offset : 1;

  char what[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);

  /* The caret line repeats tabs from the source so it lines up in any
   * terminal. Long lines are shown whole: they are the user's own text. */
  char stack[2048];
  size_t need = strlen(label) + strlen(what) + 2 * (line_end - line_start) + length + 64;
  char *buf = need <= sizeof stack ? stack : jk_malloc((jitk_engine *)e, need);
  if (buf == NULL)
    return jk_fail_at(e, status, (int)offset, "%s:%zu:%zu: %s", label, line_no, col + 1, what);
  size_t n = (size_t)snprintf(buf, need, "%s:%zu:%zu: %s\n    ", label, line_no, col + 1, what);
  memcpy(buf + n, text + line_start, line_end - line_start);
  n += line_end - line_start;
  memcpy(buf + n, "\n    ", 5);
  n += 5;
  for (size_t i = line_start; i < offset; i++) buf[n++] = text[i] == '\t' ? '\t' : ' ';
  buf[n++] = '^';
  for (size_t i = 1; i < length; i++) buf[n++] = '~';
  buf[n] = '\0';
  jk_fail_at(e, status, (int)offset, "%s", buf);
  if (buf != stack) jk_free((jitk_engine *)e, buf);
  return status;
}

size_t jk_struct_form(size_t size, const size_t *ends, size_t n) {
  for (size_t i = 0; i < n; i++) {
    /* The padding after a form's last field reaches the next multiple of
     * 8, the struct's alignment (it begins with a size_t), or the next
     * form's fields. */
    size_t padded = (ends[i] + 7) / 8 * 8;
    if (i + 1 < n && padded > ends[i + 1]) padded = ends[i + 1];
    if (size >= ends[i] && size <= padded && (i + 1 == n || size < ends[i + 1])) return ends[i];
  }
  return 0;
}
