/*
 * Reading ptxas's "-v" report out of an NVRTC log. The report is the only
 * source of spill counts, and it needs no GPU, which the CLI relies on.
 * Lines look like:
 *   ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
 *   ptxas         .     400 bytes stack frame, 0 bytes spill stores, ...
 *   ptxas info    : Used 14 registers, used 1 barriers, 1024 bytes smem,
 *                   376 bytes cmem[0]
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* The number just before `word` in `line` ("14 registers"), or 0 when
 * there is none. A number above `limit` is none that ptxas prints (and
 * would not fit the field): it sets *bad and reads as 0. */
static size_t number_before(const char *line, const char *end, const char *word, size_t limit,
                            bool *bad) {
  size_t wl = strlen(word);
  for (const char *p = line; p + wl <= end; p++) {
    if (strncmp(p, word, wl) != 0) continue;
    const char *q = p;
    while (q > line && q[-1] == ' ') q--;
    const char *digits_end = q;
    while (q > line && q[-1] >= '0' && q[-1] <= '9') q--;
    if (q == digits_end) continue;
    size_t v = 0;
    for (; q < digits_end; q++) {
      size_t d = (size_t)(*q - '0');
      if (v > (limit - d) / 10) {
        *bad = true;
        return 0;
      }
      v = v * 10 + d;
    }
    return v;
  }
  return 0;
}

jitk_status jk_ptxas_parse(jitk_engine *e, const char *log, jitk_kernel_resources **out,
                           size_t *count) {
  *out = NULL;
  *count = 0;
  size_t cap = 0, n = 0;
  jitk_kernel_resources *v = NULL;
  jitk_kernel_resources *cur = NULL;
  for (const char *line = log; line && *line;) {
    const char *end = strchr(line, '\n');
    if (end == NULL) end = line + strlen(line);
    static const char entry[] = "Compiling entry function '";
    /* Searched within the line: a search to the end of the log from every
     * line would make a long log without entries quadratic. */
    const char *p = memmem(line, (size_t)(end - line), entry, sizeof entry - 1);
    if (p != NULL) {
      p += sizeof entry - 1;
      const char *q = memchr(p, '\'', (size_t)(end - p));
      if (q != NULL) {
        if (n == cap) {
          size_t ncap = cap ? cap * 2 : 4;
          jitk_kernel_resources *nv = jk_realloc(e, v, ncap * sizeof *nv);
          if (nv == NULL) goto oom;
          v = nv;
          cap = ncap;
        }
        cur = &v[n];
        memset(cur, 0, sizeof *cur);
        if ((cur->name = jk_strndup(e, p, (size_t)(q - p))) == NULL) goto oom;
        n++;
      }
    } else if (cur != NULL) {
      char tmp[512];
      size_t len = (size_t)(end - line);
      if (len >= sizeof tmp) len = sizeof tmp - 1;
      memcpy(tmp, line, len);
      tmp[len] = '\0';
      const char *te = tmp + len;
      bool bad = false;
      if (strstr(tmp, "stack frame") != NULL) {
        cur->stack_bytes = number_before(tmp, te, "bytes stack frame", SIZE_MAX, &bad);
        cur->spill_stores = number_before(tmp, te, "bytes spill stores", SIZE_MAX, &bad);
        cur->spill_loads = number_before(tmp, te, "bytes spill loads", SIZE_MAX, &bad);
      } else if (strstr(tmp, "Used ") != NULL) {
        cur->registers = (int)number_before(tmp, te, "registers", INT_MAX, &bad);
        cur->shared_bytes = number_before(tmp, te, "bytes smem", SIZE_MAX, &bad);
        cur->constant_bytes = number_before(tmp, te, "bytes cmem[0]", SIZE_MAX, &bad);
      }
      /* The report is advisory: a garbled number must not fail a compile
       * that succeeded, so it is left out (0) with a warning that shows
       * the line. */
      if (bad)
        jk_log(e, JITK_LOG_WARN,
               "ptxas's report for kernel %s has a number out of range, read as 0: %s", cur->name,
               tmp);
    }
    line = *end ? end + 1 : end;
  }
  *out = v;
  *count = n;
  return JITK_OK;
oom:
  jk_ptxas_free(e, v, n);
  return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading ptxas's report");
}

void jk_ptxas_free(jitk_engine *e, jitk_kernel_resources *res, size_t count) {
  if (res == NULL) return;
  for (size_t i = 0; i < count; i++) jk_free(e, (char *)res[i].name);
  jk_free(e, res);
}
