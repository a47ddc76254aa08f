/*
 * A C++ token scanner just good enough to answer two questions about a
 * user's operation: does it use a name, and is a name's first use a plain
 * assignment. It skips comments and literals and tracks nesting; it never
 * needs to understand the code beyond that.
 */
#include <ctype.h>
#include <string.h>

#include "codegen/codegen.h"

typedef enum { T_END, T_IDENT, T_PUNCT, T_OTHER } tok_kind;

typedef struct tok {
  tok_kind kind;
  const char *s;
  size_t n;
} tok;

static const char *skip_trivia(const char *p) {
  for (;;) {
    while (*p && isspace((unsigned char)*p)) p++;
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
    } else if (p[0] == '/' && p[1] == '*') {
      p += 2;
      while (*p && !(p[0] == '*' && p[1] == '/')) p++;
      if (*p) p += 2;
    } else if (p[0] == '#') {
      /* A preprocessor line is not the operation's own code. */
      while (*p && *p != '\n') p++;
    } else {
      return p;
    }
  }
}

static const char *next_tok(const char *p, tok *t) {
  p = skip_trivia(p);
  t->s = p;
  if (*p == '\0') {
    t->kind = T_END;
    t->n = 0;
    return p;
  }
  if (isalpha((unsigned char)*p) || *p == '_') {
    const char *q = p;
    while (isalnum((unsigned char)*q) || *q == '_') q++;
    t->kind = T_IDENT;
    t->n = (size_t)(q - p);
    return q;
  }
  if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
    const char *q = p;
    while (isalnum((unsigned char)*q) || *q == '.' || *q == '_' ||
           ((*q == '+' || *q == '-') && (q[-1] == 'e' || q[-1] == 'E' || q[-1] == 'p')))
      q++;
    t->kind = T_OTHER;
    t->n = (size_t)(q - p);
    return q;
  }
  if (*p == '"' || *p == '\'') {
    char quote = *p;
    const char *q = p + 1;
    while (*q && *q != quote) q += (*q == '\\' && q[1]) ? 2 : 1;
    if (*q) q++;
    t->kind = T_OTHER;
    t->n = (size_t)(q - p);
    return q;
  }
  /* Punctuation: the two-character operators that matter here. */
  static const char *const two[] = {"==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=",
                                    "&=", "|=", "^=", "++", "--", "->", "::", "&&", "||",
                                    "<<", ">>"};
  for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
    if (p[0] == two[i][0] && p[1] == two[i][1]) {
      t->kind = T_PUNCT;
      t->n = 2;
      return p + 2;
    }
  t->kind = T_PUNCT;
  t->n = 1;
  return p + 1;
}

static bool is(const tok *t, const char *s) {
  return t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}

bool jk_code_uses(const char *code, const char *name) {
  if (code == NULL) return false;
  size_t len = strlen(name);
  tok t, prev = {T_END, NULL, 0};
  for (const char *p = next_tok(code, &t); t.kind != T_END; p = next_tok(p, &t)) {
    /* `x.i` or `x->i` is a member, not the name itself. */
    bool member = prev.kind == T_PUNCT && (is(&prev, ".") || is(&prev, "->"));
    if (t.kind == T_IDENT && t.n == len && memcmp(t.s, name, len) == 0 && !member) return true;
    prev = t;
  }
  return false;
}

bool jk_code_assigns_first(const char *code, const char *name) {
  if (code == NULL) return false;
  size_t len = strlen(name);
  int depth = 0;          /* (), [], {} nesting */
  bool stmt_start = true; /* the next token begins a top-level statement */
  tok t;
  for (const char *p = next_tok(code, &t); t.kind != T_END; p = next_tok(p, &t)) {
    if (t.kind == T_IDENT && t.n == len && memcmp(t.s, name, len) == 0) {
      if (!(stmt_start && depth == 0)) return false;
      tok n;
      const char *q = next_tok(p, &n);
      if (!is(&n, "=")) return false;
      /* `name = ...;`: the right-hand side must not read it (y = a*x + y). */
      int d = 0;
      for (q = next_tok(q, &n); n.kind != T_END; q = next_tok(q, &n)) {
        if (n.kind == T_PUNCT && (is(&n, "(") || is(&n, "[") || is(&n, "{"))) d++;
        if (n.kind == T_PUNCT && (is(&n, ")") || is(&n, "]") || is(&n, "}"))) d--;
        if (d <= 0 && n.kind == T_PUNCT && is(&n, ";")) break;
        if (n.kind == T_IDENT && n.n == len && memcmp(n.s, name, len) == 0) return false;
      }
      return true;
    }
    if (t.kind == T_PUNCT && (is(&t, "(") || is(&t, "[") || is(&t, "{"))) depth++;
    if (t.kind == T_PUNCT && (is(&t, ")") || is(&t, "]") || is(&t, "}"))) depth--;
    /* A statement starts after a ';' or a closing brace at the top level;
     * anything else (if, for, a declaration's type) means the next token
     * is inside a statement. */
    stmt_start = depth == 0 && t.kind == T_PUNCT && (is(&t, ";") || is(&t, "}"));
  }
  return false;
}
