/*
 * Kernel signatures: "float32 a, float32* x, float32[2] y, int64 n".
 * A small hand-written scanner, so each error can point at its byte.
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "expr/lex.h"
#include "expr/signature.h"

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
  jk_lex lx;
  jk_lex_init(&lx, text);
  jk_lex_skip_space(&lx);
  jitk_status st = JITK_OK;
  if (jk_lex_peek(&lx) == '\0') goto done; /* no parameters */
  for (;;) {
    size_t start = lx.pos;
    size_t len = jk_lex_ident(&lx);
    if (len == 0) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, start, 1,
                         text[start] ? "expected a dtype name" : "expected a parameter after ','");
      goto done;
    }
    jk_param p = {JITK_ARG_SCALAR, JITK_DTYPE_NONE, 0};
    bool is_void = len == 4 && memcmp(text + start, "void", 4) == 0;
    if (!is_void) {
      p.dtype = jk_dtype_lookup(text + start, len);
      if (p.dtype == JITK_DTYPE_NONE) {
        st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, start, len,
                           "unknown dtype \"%.*s\"; use bool, int8-64, "
                           "uint8-64, float16, bfloat16, float32, float64, "
                           "complex64 or complex128",
                           (int)len, text + start);
        goto done;
      }
    }
    jk_lex_skip_space(&lx);
    if (jk_lex_accept(&lx, '*')) {
      p.kind = JITK_ARG_POINTER;
      jk_lex_skip_space(&lx);
    } else if (jk_lex_peek(&lx) == '[') {
      size_t open = lx.pos;
      jk_lex_accept(&lx, '[');
      jk_lex_skip_space(&lx);
      size_t digits = lx.pos;
      long nd = 0;
      size_t nd_len = jk_lex_number(&lx, JITK_MAX_NDIM, &nd);
      if (nd_len == 0 || nd > JITK_MAX_NDIM) {
        st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, digits, nd_len ? nd_len : 1,
                           "expected a rank from 0 to %d for the array", JITK_MAX_NDIM);
        goto done;
      }
      jk_lex_skip_space(&lx);
      if (!jk_lex_accept(&lx, ']')) {
        st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, lx.pos, 1,
                           "expected ']' to close the '[' at column %zu", open + 1);
        goto done;
      }
      p.kind = JITK_ARG_ARRAY;
      p.ndim = (int)nd;
      jk_lex_skip_space(&lx);
    }
    if (is_void && p.kind != JITK_ARG_POINTER) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, start, 4,
                         "void is only a pointer type (void*)");
      goto done;
    }
    if (jk_lex_ident(&lx) > 0) jk_lex_skip_space(&lx); /* the optional name */
    v[n++] = p;
    if (jk_lex_peek(&lx) == '\0') break;
    if (!jk_lex_accept(&lx, ',')) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, label, text, lx.pos, 1,
                         "expected ',' or the end of the signature");
      goto done;
    }
    jk_lex_skip_space(&lx);
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
