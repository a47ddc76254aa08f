/*
 * What the libFuzzer targets share: a compile-only engine, splitting an
 * input into NUL-separated text fields, and a failure that says which
 * promise broke before aborting (libFuzzer then saves the input).
 */
#ifndef JITK_FUZZ_COMMON_H
#define JITK_FUZZ_COMMON_H

#include <jitk/jitk.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reports a broken promise and aborts, so the input is kept as a crash. */
static inline void jf_broken(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("broken promise: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

#define JF_CHECK(cond, ...)              \
  do {                                   \
    if (!(cond)) jf_broken(__VA_ARGS__); \
  } while (0)

/* A compile-only engine for `arch` without a disk cache: no input reaches
 * the user's cache or needs a GPU. */
static inline jitk_engine *jf_engine_for(const char *who, const char *arch) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = arch;
  cfg.cache_mode = JITK_CACHE_OFF;
  jitk_engine *e = NULL;
  if (jitk_engine_create(&cfg, &e) != JITK_OK) {
    fprintf(stderr, "%s: no engine for %s: %s\n", who, arch, jitk_errmsg(NULL));
    abort();
  }
  return e;
}

/* The same for sm_90, which most targets compile for. */
static inline jitk_engine *jf_engine(const char *who) { return jf_engine_for(who, "sm_90"); }

/* The input as NUL-separated fields. `text` is a private copy with a NUL
 * after the last byte, so every field is a C string; fields past the end
 * of the input are NULL. */
typedef struct jf_fields {
  char *text;
  const char *field[16];
  int count;
} jf_fields;

static inline int jf_split(jf_fields *f, const uint8_t *data, size_t size) {
  memset(f, 0, sizeof *f);
  f->text = malloc(size + 1);
  if (f->text == NULL) return -1;
  memcpy(f->text, data, size);
  f->text[size] = '\0';
  size_t at = 0;
  while (f->count < 16) {
    f->field[f->count++] = f->text + at;
    at += strlen(f->text + at) + 1;
    if (at > size) break;
  }
  return 0;
}

/* Field `i`, or `def` when the input has fewer fields. */
static inline const char *jf_get(const jf_fields *f, int i, const char *def) {
  return i < f->count ? f->field[i] : def;
}

/* Field `i`, or NULL when it is missing or empty: optional strings. */
static inline const char *jf_opt(const jf_fields *f, int i) {
  return i < f->count && f->field[i][0] != '\0' ? f->field[i] : NULL;
}

/* A failed call must leave a real status and a message. */
static inline void jf_check_failure(jitk_engine *e, jitk_status st, const char *call) {
  JF_CHECK(strcmp(jitk_errname(st), "JITK_ERR_UNKNOWN") != 0, "%s returned %d, not a status", call,
           (int)st);
  JF_CHECK(jitk_errmsg(e)[0] != '\0' && strcmp(jitk_errmsg(e), "no error") != 0,
           "%s failed with %s but left no message", call, jitk_errname(st));
}

#endif
