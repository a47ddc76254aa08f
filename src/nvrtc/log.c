/*
 * The grammar of NVRTC's log, where it concerns the user: a message about a
 * line of one of the user's sections (the generators put each section
 * under a #line directive named after it, "operation" or "map_expr") is
 * rewritten in a compiler's style, "operation:LINE:COL: message", the
 * column taken from NVRTC's caret. The compile stage calls it on logs of
 * generated kernels; it knows the sections' names and nothing else of the
 * generators.
 */
#include <string.h>

#include "base/base.h"
#include "nvrtc/nvrtc.h"

bool jk_log_user_label(const char *s, size_t n) {
  static const char *const labels[] = {"operation",     "preamble", "loop_prep",
                                       "after_loop",    "map_expr", "reduce_expr",
                                       "post_map_expr", "identity", "epilogue"};
  for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
    if (strlen(labels[i]) == n && memcmp(labels[i], s, n) == 0) return true;
  /* A matmul plan's outputs and reductions: "output NAME", "reduction
   * NAME", NAME an identifier. */
  static const char *const named[] = {"output ", "reduction "};
  for (size_t i = 0; i < 2; i++) {
    size_t k = strlen(named[i]);
    if (n <= k || memcmp(s, named[i], k) != 0) continue;
    bool ident = !(s[k] >= '0' && s[k] <= '9');
    for (size_t j = k; j < n && ident; j++)
      ident = s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
              (s[j] >= '0' && s[j] <= '9');
    if (ident) return true;
  }
  return false;
}

/*
 * Reads "label(LINE): " at the start of the line [p, p + len), where label
 * is one of the user's sections: the label's length in *label_len, the
 * line in *line and where the rest of the line starts in *rest. The log
 * may echo any text of the user's (a string literal, an identifier), so
 * nothing is read past the line: the number is plain digits right after
 * the parenthesis (no sign or blanks, as strtol would take), followed by
 * "):". The digits are copied, never converted, so no count of them can
 * overflow: *line_at and *line_len say where they are.
 */
static bool user_location(const char *p, size_t len, size_t *label_len, size_t *line_at,
                          size_t *line_len, size_t *rest) {
  const char *paren = memchr(p, '(', len);
  if (paren == NULL || !jk_log_user_label(p, (size_t)(paren - p))) return false;
  size_t start = (size_t)(paren - p) + 1, i = start;
  while (i < len && p[i] >= '0' && p[i] <= '9') i++;
  if (i == start || i + 2 > len || p[i] != ')' || p[i + 1] != ':') return false;
  *label_len = (size_t)(paren - p);
  *line_at = start;
  *line_len = i - start;
  *rest = i + 2;
  return true;
}

/* The line after the one starting at p, or NULL when p's is the last. */
static const char *next_line(const char *p) {
  const char *nl = strchr(p, '\n');
  return nl ? nl + 1 : NULL;
}

char *jk_rewrite_log(jitk_engine *e, const char *log) {
  jk_buf b;
  jk_buf_init(&b, e);
  const char *p = log;
  int skip = 0; /* lines left of a repeated message */
  while (*p) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *following = end ? end + 1 : p + len;
    if (skip > 0) {
      p = following;
      skip--;
      continue;
    }
    /* "label(LINE): rest" where label is one of the user's sections. */
    size_t label_len, line_at, line_len, rest;
    if (!user_location(p, len, &label_len, &line_at, &line_len, &rest)) {
      jk_buf_append(&b, p, len);
      if (end) jk_buf_puts(&b, "\n");
      p = following;
      continue;
    }
    /* The caret sits two lines below, under the offending token; NVRTC
     * indents the echoed line by two. */
    long col = 0;
    const char *l1 = end ? end + 1 : NULL;
    const char *l2 = l1 ? next_line(l1) : NULL;
    if (l2 != NULL) {
      const char *caret = l2;
      while (*caret == ' ' || *caret == '\t') caret++;
      if (*caret == '^') {
        size_t at = (size_t)(caret - l2);
        col = at > 1 ? (long)(at - 1) : 1;
      }
    }
    size_t mark = b.len;
    jk_buf_append(&b, p, label_len);
    jk_buf_puts(&b, ":");
    jk_buf_append(&b, p + line_at, line_len);
    if (col > 0)
      jk_buf_printf(&b, ":%ld:", col);
    else
      jk_buf_puts(&b, ":");
    jk_buf_append(&b, p + rest, len - rest);
    jk_buf_puts(&b, "\n");
    /* Generated kernels can hold the operation twice (the vector loop and
     * its remainder): say each message once. */
    if (!b.failed && mark > 0) {
      const char *first = strstr(b.data, b.data + mark);
      if (first != NULL && (size_t)(first - b.data) < mark &&
          (first == b.data || first[-1] == '\n')) {
        b.len = mark;
        b.data[b.len] = '\0';
        skip = col > 0 ? 2 : 0;
      }
    }
    p = following;
  }
  return jk_buf_take(&b);
}
