/*
 * The parameter-list parser. Hand-written so that every error can point at
 * its byte: "in_params:1:10: `int` is a C type; use a dtype name ...".
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "base/base.h"
#include "expr/lex.h"
#include "expr/params.h"

bool jk_is_reserved_word(const char *s, size_t n) {
  static const char *const words[] = {"alignas",      "alignof",
                                      "and",          "asm",
                                      "auto",         "bool",
                                      "break",        "case",
                                      "catch",        "char",
                                      "char16_t",     "char32_t",
                                      "class",        "const",
                                      "constexpr",    "const_cast",
                                      "continue",     "decltype",
                                      "default",      "delete",
                                      "do",           "double",
                                      "dynamic_cast", "else",
                                      "enum",         "explicit",
                                      "export",       "extern",
                                      "false",        "float",
                                      "for",          "friend",
                                      "goto",         "if",
                                      "inline",       "int",
                                      "long",         "mutable",
                                      "namespace",    "new",
                                      "noexcept",     "not",
                                      "nullptr",      "operator",
                                      "or",           "private",
                                      "protected",    "public",
                                      "register",     "reinterpret_cast",
                                      "return",       "short",
                                      "signed",       "sizeof",
                                      "static",       "static_assert",
                                      "static_cast",  "struct",
                                      "switch",       "template",
                                      "this",         "thread_local",
                                      "throw",        "true",
                                      "try",          "typedef",
                                      "typeid",       "typename",
                                      "union",        "unsigned",
                                      "using",        "virtual",
                                      "void",         "volatile",
                                      "wchar_t",      "while",
                                      "xor",          "half",
                                      "__half",       "__nv_bfloat16",
                                      "size_t",       "raw"};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strlen(words[i]) == n && memcmp(words[i], s, n) == 0) return true;
  return false;
}

static bool is_c_type(const char *s, size_t n) {
  static const char *const types[] = {"bool",   "char",          "short",    "int",    "long",
                                      "float",  "double",        "unsigned", "signed", "half",
                                      "__half", "__nv_bfloat16", "size_t",   "void"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strlen(types[i]) == n && memcmp(types[i], s, n) == 0) return true;
  return false;
}

static int find_placeholder(const jk_param_list *l, const char *s, size_t n) {
  for (size_t i = 0; i < l->num_placeholders; i++)
    if (strlen(l->placeholders[i]) == n && memcmp(l->placeholders[i], s, n) == 0) return (int)i;
  return -1;
}

static jitk_status add_placeholder(jitk_engine *e, jk_param_list *l, const char *s, size_t n,
                                   int *index) {
  int found = find_placeholder(l, s, n);
  if (found >= 0) {
    *index = found;
    return JITK_OK;
  }
  char **v = jk_realloc(e, l->placeholders, (l->num_placeholders + 1) * sizeof *v);
  if (v == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  l->placeholders = v;
  char *copy = jk_strndup(e, s, n);
  if (copy == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  v[l->num_placeholders] = copy;
  *index = (int)l->num_placeholders++;
  return JITK_OK;
}

/* Names every generated kernel sees with a meaning of their own: CUDA's
 * built-in variables, jitk's namespace, the element index (`i`, `_ind`),
 * and CUDA's vector types (float2, uint4, dim3, ...). A parameter or
 * placeholder of such a name would clash with them in the generated code,
 * whose compile errors cite lines the user never wrote. */
static bool taken_in_kernels(const char *s, size_t n) {
  static const char *const names[] = {"threadIdx", "blockIdx", "blockDim", "gridDim",
                                      "jitk",      "i",        "_ind",     "dim3"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (strlen(names[k]) == n && memcmp(names[k], s, n) == 0) return true;
  /* [u]char, [u]short, [u]int, [u]long, [u]longlong, float, double, then
   * 1 to 4. */
  if (n < 4 || s[n - 1] < '1' || s[n - 1] > '4') return false;
  static const char *const bases[] = {"char", "uchar", "short",    "ushort",    "int",   "uint",
                                      "long", "ulong", "longlong", "ulonglong", "float", "double"};
  for (size_t k = 0; k < sizeof bases / sizeof bases[0]; k++)
    if (strlen(bases[k]) == n - 1 && memcmp(bases[k], s, n - 1) == 0) return true;
  return false;
}

jitk_status jk_params_parse(jitk_engine *e, const char *text, const char *label, bool outputs,
                            jk_param_list *l) {
  if (text == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s is NULL", label);
  jk_lex lx;
  jk_lex_init(&lx, text);
  jk_lex_skip_space(&lx);
  if (jk_lex_peek(&lx) == '\0') return JITK_OK; /* an empty list */
  for (;;) {
    /* [raw] TYPE NAME */
    size_t i = lx.pos;
    size_t n = jk_lex_ident(&lx);
    if (n == 0)
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, 1,
                           text[i] == '\0' ? "expected a parameter after ','"
                                           : "expected a type (a dtype name or a placeholder "
                                             "such as T)");
    bool raw = false;
    if (n == 3 && memcmp(text + i, "raw", 3) == 0) {
      /* "raw T x": raw is the qualifier. "raw x" alone would make raw a
       * type, which it cannot be. The two words after it are looked at on
       * a copy of the cursor. */
      jk_lex ahead = lx;
      jk_lex_skip_space(&ahead);
      size_t j = ahead.pos;
      size_t m = jk_lex_ident(&ahead);
      jk_lex_skip_space(&ahead);
      if (m == 0 || jk_lex_ident(&ahead) == 0)
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, 3,
                             "`raw` needs a type and a name after it: raw TYPE NAME");
      raw = true;
      i = j;
      n = m;
      lx.pos = j + m;
    }
    size_t type_at = i, type_len = n;
    jitk_dtype dtype = jk_dtype_lookup(text + i, n);
    int placeholder = -1;
    if (dtype == JITK_DTYPE_NONE) {
      if (is_c_type(text + i, n))
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, n,
                             "`%.*s` is a C type; write a dtype name (bool, int8-64, uint8-64, "
                             "float16, bfloat16, float32, float64, complex64, complex128) or a "
                             "placeholder such as T",
                             (int)n, text + i);
      if (jk_is_reserved_word(text + i, n))
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, n,
                             "`%.*s` is a C++ keyword, not a type", (int)n, text + i);
      if (n >= 3 && memcmp(text + i, "_jk", 3) == 0)
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, n,
                             "names starting with _jk are reserved for jitk");
      if (taken_in_kernels(text + i, n))
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, n,
                             "`%.*s` names something of CUDA's or jitk's in every kernel, so it "
                             "cannot name a type placeholder",
                             (int)n, text + i);
    }
    jk_lex_skip_space(&lx);
    i = lx.pos;
    size_t name_len = jk_lex_ident(&lx);
    if (name_len == 0) {
      if (text[i] == '\0' || text[i] == ',')
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, type_at, type_len,
                             "a parameter needs a type and a name: `%.*s NAME`", (int)type_len,
                             text + type_at);
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, 1,
                           "expected a parameter name (a C identifier)");
    }
    const char *name = text + i;
    size_t name_at = i;
    if ((name_len == 1 && name[0] == 'i') || (name_len == 4 && memcmp(name, "_ind", 4) == 0))
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                           "`%.*s` is reserved: the operation uses it for the element index",
                           (int)name_len, name);
    if (name_len >= 3 && memcmp(name, "_jk", 3) == 0)
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                           "names starting with _jk are reserved for jitk");
    if (taken_in_kernels(name, name_len))
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                           "`%.*s` names something of CUDA's or jitk's in every kernel, so it "
                           "cannot name a parameter",
                           (int)name_len, name);
    if (jk_is_reserved_word(name, name_len))
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                           "`%.*s` is a C++ keyword and cannot name a parameter", (int)name_len,
                           name);
    if (jk_dtype_lookup(name, name_len) != JITK_DTYPE_NONE)
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                           "`%.*s` is a dtype name and cannot name a parameter", (int)name_len,
                           name);
    for (size_t p = 0; p < l->count; p++)
      if (strlen(l->params[p].name) == name_len && memcmp(l->params[p].name, name, name_len) == 0)
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                             "`%.*s` is already a parameter%s", (int)name_len, name,
                             l->params[p].output == outputs ? "" : " (of the other list)");
    if (find_placeholder(l, name, name_len) >= 0)
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                           "`%.*s` is a type placeholder and cannot name a parameter too",
                           (int)name_len, name);
    if (dtype == JITK_DTYPE_NONE) {
      /* A placeholder must not be the name of a parameter either. */
      for (size_t p = 0; p < l->count; p++)
        if (strlen(l->params[p].name) == type_len &&
            memcmp(l->params[p].name, text + type_at, type_len) == 0)
          return jk_fail_caret(e, JITK_ERR_PARSE, label, text, type_at, type_len,
                               "`%.*s` names a parameter and cannot be a type placeholder too",
                               (int)type_len, text + type_at);
      if (type_len == name_len && memcmp(text + type_at, name, name_len) == 0)
        return jk_fail_caret(e, JITK_ERR_PARSE, label, text, i, name_len,
                             "`%.*s` cannot be both the type and the name", (int)name_len, name);
      jitk_status st = add_placeholder(e, l, text + type_at, type_len, &placeholder);
      if (st != JITK_OK) return st;
    }
    jk_param_decl *v = jk_realloc(e, l->params, (l->count + 1) * sizeof *v);
    if (v == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    l->params = v;
    jk_param_decl *d = &v[l->count];
    memset(d, 0, sizeof *d);
    d->name = jk_strndup(e, name, name_len);
    if (d->name == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    d->raw = raw;
    d->output = outputs;
    d->dtype = dtype;
    d->placeholder = placeholder;
    d->offset = name_at;
    l->count++;
    jk_lex_skip_space(&lx);
    if (jk_lex_peek(&lx) == '\0') return JITK_OK;
    if (!jk_lex_accept(&lx, ','))
      return jk_fail_caret(e, JITK_ERR_PARSE, label, text, lx.pos, 1,
                           "expected ',' or the end of the list after `%.*s`", (int)name_len, name);
    jk_lex_skip_space(&lx);
  }
}

void jk_params_free(jitk_engine *e, jk_param_list *l) {
  for (size_t i = 0; i < l->count; i++) jk_free(e, l->params[i].name);
  jk_free(e, l->params);
  for (size_t i = 0; i < l->num_placeholders; i++) jk_free(e, l->placeholders[i]);
  jk_free(e, l->placeholders);
  memset(l, 0, sizeof *l);
}

/* The length of the first n bytes of s without the spaces that end them. */
static size_t trim_spaces(const char *s, size_t n) {
  while (n > 0 && s[n - 1] == ' ') n--;
  return n;
}

/* "T=float32, U=int8": each placeholder bound once, every one bound; the
 * errors point at the bytes of `types`, labelled "types". */
jitk_status jk_params_bind_types(jitk_engine *e, const jk_param_list *params, const char *types,
                                 jitk_dtype *bound) {
  for (size_t h = 0; h < params->num_placeholders; h++) bound[h] = JITK_DTYPE_NONE;
  jk_lex lx;
  jk_lex_init(&lx, types ? types : "");
  for (;;) {
    jk_lex_skip(&lx, " ,");
    if (jk_lex_peek(&lx) == '\0') break;
    /* One pair, up to the next comma, split at its '='. */
    const char *p = lx.text + lx.pos;
    size_t pair_len = jk_lex_span(&lx, ",");
    const char *end = p + pair_len;
    const char *eq = memchr(p, '=', pair_len);
    if (eq == NULL)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(p - types), pair_len,
                           "expected PLACEHOLDER=DTYPE");
    size_t nl = trim_spaces(p, (size_t)(eq - p));
    int found = -1;
    for (size_t h = 0; h < params->num_placeholders; h++)
      if (strlen(params->placeholders[h]) == nl && memcmp(params->placeholders[h], p, nl) == 0)
        found = (int)h;
    if (found < 0)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(p - types), nl,
                           "`%.*s` is not a placeholder of this kernel", (int)nl, p);
    const char *t = eq + 1;
    while (*t == ' ') t++;
    size_t tl = trim_spaces(t, (size_t)(end - t));
    jitk_dtype d = jk_dtype_lookup(t, tl);
    if (d == JITK_DTYPE_NONE)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(t - types), tl ? tl : 1,
                           "unknown dtype `%.*s`", (int)tl, t);
    /* A second binding would silently win over the first: "T=float32,
     * T=float64" is a mistake whichever was meant. */
    if (bound[found] != JITK_DTYPE_NONE)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(p - types), nl,
                           "placeholder %s is bound twice (to %s, then %s)",
                           params->placeholders[found], jk_dtype(bound[found])->name,
                           jk_dtype(d)->name);
    bound[found] = d;
  }
  for (size_t h = 0; h < params->num_placeholders; h++)
    if (bound[h] == JITK_DTYPE_NONE)
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "placeholder %s has no type; bind it (%s=float32)",
                     params->placeholders[h], params->placeholders[h]);
  return JITK_OK;
}
