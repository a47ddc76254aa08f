/*
 * Kernel signatures: "float32 a, float32* x, float32[2] y, int64 n".
 * A small hand-written scanner, so each error can point at its byte.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "expr/signature.h"

static bool is_ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool is_ident(char c) { return isalnum((unsigned char)c) || c == '_'; }

static size_t skip_space(const char *s, size_t i) {
  while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') i++;
  return i;
}

void jk_param_describe(const jk_param *p, char *out, size_t size) {
  const jitk_dtype_info *d = jk_dtype(p->dtype);
  const char *name = d ? d->name : "void";
  if (p->kind == JITK_ARG_POINTER)
    snprintf(out, size, "%s*", name);
  else if (p->kind == JITK_ARG_ARRAY)
    snprintf(out, size, "%s[%d]", name, p->ndim);
  else
    snprintf(out, size, "%s", name);
}

jitk_status jk_signature_parse(jitk_engine *e, const char *text, jk_param **out, int *count) {
  static const char label[] = "signature";
  /* Commas bound the count, so one allocation fits every parameter. */
  size_t cap = 1;
  for (const char *p = text; *p; p++)
    if (*p == ',') cap++;
  jk_param *v = jk_calloc(e, cap, sizeof *v);
  if (v == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  int n = 0;
  size_t i = skip_space(text, 0);
  jitk_status st = JITK_OK;
  if (text[i] == '\0') goto done; /* no parameters */
  for (;;) {
    size_t start = i;
    if (!is_ident_start(text[i])) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, 1,
                         text[i] ? "expected a dtype name" : "expected a parameter after ','");
      goto done;
    }
    while (is_ident(text[i])) i++;
    jk_param p = {JITK_ARG_SCALAR, JITK_DTYPE_NONE, 0};
    bool is_void = i - start == 4 && memcmp(text + start, "void", 4) == 0;
    if (!is_void) {
      p.dtype = jk_dtype_lookup(text + start, i - start);
      if (p.dtype == JITK_DTYPE_NONE) {
        st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, start, i - start,
                           "unknown dtype \"%.*s\"; use bool, int8-64, "
                           "uint8-64, float16, bfloat16, float32, float64, "
                           "complex64 or complex128",
                           (int)(i - start), text + start);
        goto done;
      }
    }
    i = skip_space(text, i);
    if (text[i] == '*') {
      p.kind = JITK_ARG_POINTER;
      i = skip_space(text, i + 1);
    } else if (text[i] == '[') {
      size_t open = i;
      i = skip_space(text, i + 1);
      int nd = 0;
      size_t digits = i;
      while (isdigit((unsigned char)text[i]) && nd <= JITK_MAX_NDIM)
        nd = nd * 10 + (text[i++] - '0');
      if (i == digits || nd > JITK_MAX_NDIM) {
        st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, digits, i > digits ? i - digits : 1,
                           "expected a rank from 0 to %d for the array", JITK_MAX_NDIM);
        goto done;
      }
      i = skip_space(text, i);
      if (text[i] != ']') {
        st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, 1,
                           "expected ']' to close the '[' at column %zu", open + 1);
        goto done;
      }
      p.kind = JITK_ARG_ARRAY;
      p.ndim = nd;
      i = skip_space(text, i + 1);
    }
    if (is_void && p.kind != JITK_ARG_POINTER) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, start, 4,
                         "void is only a pointer type (void*)");
      goto done;
    }
    if (is_ident_start(text[i])) { /* the optional name */
      while (is_ident(text[i])) i++;
      i = skip_space(text, i);
    }
    v[n++] = p;
    if (text[i] == '\0') break;
    if (text[i] != ',') {
      st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, 1,
                         "expected ',' or the end of the signature");
      goto done;
    }
    i = skip_space(text, i + 1);
  }
done:
  if (st != JITK_OK) {
    jk_free(e, v);
    return st;
  }
  *out = v;
  *count = n;
  return JITK_OK;
}
