/*
 * Host allocation through the engine's allocator, and a small growable
 * string used to build sources, option lists and messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

void *jk_realloc(jitk_engine *e, void *ptr, size_t size) {
  if (e != NULL && jk_base_of(e)->alloc_fn != NULL)
    return jk_base_of(e)->alloc_fn(jk_base_of(e)->alloc_user, ptr, size);
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, size);
}

void *jk_malloc(jitk_engine *e, size_t size) {
  /* A zero-byte request would mean "free" to a realloc-style hook. */
  return jk_realloc(e, NULL, size ? size : 1);
}

void *jk_calloc(jitk_engine *e, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) return NULL;
  size_t bytes = count * size;
  void *p = jk_malloc(e, bytes);
  if (p != NULL && bytes != 0) memset(p, 0, bytes);
  return p;
}

void jk_free(jitk_engine *e, void *ptr) {
  if (ptr != NULL) jk_realloc(e, ptr, 0);
}

char *jk_strndup(jitk_engine *e, const char *s, size_t n) {
  char *p = jk_malloc(e, n + 1);
  if (p == NULL) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *jk_strdup(jitk_engine *e, const char *s) { return jk_strndup(e, s, strlen(s)); }

void jk_buf_init(jk_buf *b, jitk_engine *e) {
  b->e = e;
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = false;
}

void jk_buf_free(jk_buf *b) {
  jk_free(b->e, b->data);
  jk_buf_init(b, b->e);
}

static bool buf_reserve(jk_buf *b, size_t extra) {
  if (b->failed) return false;
  /* A size that cannot be represented is a failure like any other, not a
   * wrapped-around small request: callers compute `extra` from text. */
  if (b->len > SIZE_MAX / 2 - 1 || extra > SIZE_MAX / 2 - 1 - b->len) {
    b->failed = true;
    return false;
  }
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = jk_realloc(b->e, b->data, cap);
  if (p == NULL) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void jk_buf_append(jk_buf *b, const char *s, size_t n) {
  if (!buf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void jk_buf_puts(jk_buf *b, const char *s) { jk_buf_append(b, s, strlen(s)); }

void jk_buf_printf(jk_buf *b, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
  } else if ((size_t)n < sizeof small) {
    jk_buf_append(b, small, (size_t)n);
  } else if (buf_reserve(b, (size_t)n)) {
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  }
  va_end(ap2);
}

char *jk_buf_take(jk_buf *b) {
  if (b->failed) {
    jk_buf_free(b);
    return NULL;
  }
  if (b->data == NULL && (!buf_reserve(b, 0) || b->data == NULL)) return NULL;
  if (b->len == 0) b->data[0] = '\0';
  char *s = b->data;
  jk_buf_init(b, b->e);
  return s;
}
