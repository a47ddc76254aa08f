/*
 * Logging: one line at a time to the engine's callback, or to stderr. The
 * library never writes to stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

jitk_log_level jk_log_level_from_env(void) {
  const char *v = getenv("JITK_LOG");
  if (v == NULL || *v == '\0') return JITK_LOG_WARN;
  static const struct {
    const char *name;
    jitk_log_level level;
  } names[] = {{"off", JITK_LOG_OFF},    {"none", JITK_LOG_OFF},     {"error", JITK_LOG_ERROR},
               {"warn", JITK_LOG_WARN},  {"warning", JITK_LOG_WARN}, {"info", JITK_LOG_INFO},
               {"debug", JITK_LOG_DEBUG}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(v, names[i].name) == 0) return names[i].level;
  return JITK_LOG_WARN;
}

bool jk_log_enabled(const jitk_engine *e, jitk_log_level level) {
  jitk_log_level max = e ? jk_base_of(e)->log_level : jk_log_level_from_env();
  return level != JITK_LOG_OFF && level <= max;
}

static const char *level_name(jitk_log_level level) {
  switch (level) {
    case JITK_LOG_ERROR: return "error";
    case JITK_LOG_WARN: return "warn";
    case JITK_LOG_INFO: return "info";
    case JITK_LOG_DEBUG: return "debug";
    default: return "log";
  }
}

void jk_log(const jitk_engine *e, jitk_log_level level, const char *fmt, ...) {
  if (!jk_log_enabled(e, level)) return;
  /* A fixed buffer serves the common line without allocating, so logging
   * works on out-of-memory paths. A longer line (paths can be long, and
   * the reason comes after them) gets a buffer of its size; only when
   * that cannot be had is it cut, and marked so. */
  char fixed[2048];
  char *line = fixed;
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int n = vsnprintf(fixed, sizeof fixed, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof fixed) {
    char *big = jk_malloc((jitk_engine *)e, (size_t)n + 1);
    if (big != NULL) {
      vsnprintf(big, (size_t)n + 1, fmt, again);
      line = big;
    } else {
      memcpy(fixed + sizeof fixed - 5, "...", 4);
    }
  }
  va_end(again);
  if (e != NULL && jk_base_of(e)->log_fn != NULL) {
    jk_base_of(e)->log_fn(jk_base_of(e)->log_user, level, line);
  } else {
    /* One fprintf call per line keeps lines from threads whole. */
    fprintf(stderr, "jitk: %s: %s\n", level_name(level), line);
  }
  if (line != fixed) jk_free((jitk_engine *)e, line);
}
