/*
 * A C++ token scanner just good enough to answer two questions about a
 * user's operation: does it use a name, and is a name's first use a plain
 * assignment. It skips comments and literals and tracks nesting; it never
 * needs to understand the code beyond that.
 */
#include <ctype.h>
#include <string.h>

#include "expr/scan.h"

typedef enum { T_END, T_IDENT, T_PUNCT, T_OTHER } tok_kind;

typedef struct tok {
  tok_kind kind;
  const char *s;
  size_t n;
} tok;

static const char *skip_trivia(const char *p) {
  for (;;) {
    while (*p && isspace((unsigned char)*p)) p++;
    if ((p[0] == '/' && p[1] == '/') || p[0] == '#') {
      /* A line comment, or a preprocessor line, which is not the
       * operation's own code. */
      while (*p && *p != '\n') p++;
    } else if (p[0] == '/' && p[1] == '*') {
      p += 2;
      while (*p && !(p[0] == '*' && p[1] == '/')) p++;
      if (*p) p += 2;
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
  static const char *const two[] = {"==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=",
                                    "|=", "^=", "++", "--", "->", "::", "&&", "||", "<<", ">>"};
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

/* --- preprocessor line directives in users' code --- */

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Skips what may stand between a directive's `#` and its name: blanks,
 * block comments and backslash-newline splices. */
static const char *skip_directive_gap(const char *p) {
  for (;;) {
    if (*p == ' ' || *p == '\t' || *p == '\f' || *p == '\v' || *p == '\r') {
      p++;
    } else if (p[0] == '\\' && p[1] == '\n') {
      p += 2;
    } else if (p[0] == '\\' && p[1] == '\r' && p[2] == '\n') {
      p += 3;
    } else if (p[0] == '/' && p[1] == '*') {
      p += 2;
      while (*p && !(p[0] == '*' && p[1] == '/')) p++;
      if (*p) p += 2;
    } else {
      return p;
    }
  }
}

/* The end of a string or character literal opened at p (a quote): past
 * its closing quote (*closed true), or at the end of the line for an
 * unterminated one. */
static const char *skip_quoted(const char *p, bool *closed) {
  char quote = *p++;
  while (*p && *p != quote && *p != '\n') p += (*p == '\\' && p[1]) ? 2 : 1;
  *closed = *p == quote;
  return *closed ? p + 1 : p;
}

/* A raw string literal R"delim( ... )delim" whose quote is at p. */
static const char *skip_raw(const char *p, bool *closed) {
  const char *d = p + 1;
  const char *open = d;
  while (*open && *open != '(' && open - d <= 16) open++;
  if (*open != '(') return skip_quoted(p, closed); /* not a raw string: as an ordinary one */
  size_t dl = (size_t)(open - d);
  for (const char *q = open + 1; *q; q++)
    if (*q == ')' && strncmp(q + 1, d, dl) == 0 && q[1 + dl] == '"') {
      *closed = true;
      return q + dl + 2;
    }
  *closed = false;
  return p + strlen(p);
}

/* What a walk over the first `stop` bytes of some code found. */
typedef struct pp_walk {
  long directive;       /* offset of the first line directive, or -1 */
  size_t directive_len; /* its length up to the end of its line */
  bool open;            /* text put right at `stop` would fall in a comment,
                           a literal, a preprocessor line or a splice */
} pp_walk;

/* Walks C++ source as its preprocessor sees lines: comments, literals
 * (raw ones too), backslash-newline splices and directives. */
static void walk(const char *code, size_t stop, pp_walk *w) {
  w->directive = -1;
  w->directive_len = 0;
  w->open = false;
  const char *p = code, *limit = code + stop;
  bool line_start = true; /* nothing but blanks and comments so far on this line */
  bool in_directive = false;
  while (p < limit) {
    char c = *p;
    const char *q = p;
    if (c == '\n') {
      line_start = true;
      in_directive = false;
      p++;
      continue;
    }
    if (c == '\\' && (p[1] == '\n' || (p[1] == '\r' && p[2] == '\n'))) {
      p += p[1] == '\n' ? 2 : 3; /* a splice continues the same logical line */
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r') {
      p++;
      continue;
    }
    /* Comments and literals: `closed` when their end is part of them (a
     * line comment's newline is not). */
    bool closed = true, comment = c == '/' && (p[1] == '/' || p[1] == '*');
    if (c == '/' && p[1] == '/') {
      /* A line comment ends at a newline that no backslash splices away. */
      q = p + 2;
      while (*q && !(*q == '\n' && q[-1] != '\\')) q++;
      closed = false;
    } else if (c == '/' && p[1] == '*') {
      /* A comment is one space, even across lines: it does not start a new one. */
      q = p + 2;
      while (*q && !(q[0] == '*' && q[1] == '/')) q++;
      closed = *q != '\0';
      if (closed) q += 2;
    } else if (c == '#' || (c == '%' && p[1] == ':')) {
      q = p + (c == '#' ? 1 : 2);
      if (line_start) {
        in_directive = true;
        const char *n = skip_directive_gap(q);
        /* `#line N "file"`, or the short form `# N "file"` that EDG and
         * GCC also read as a line directive. */
        bool is_line =
            isdigit((unsigned char)*n) || (strncmp(n, "line", 4) == 0 && !ident_char(n[4]));
        if (is_line && w->directive < 0) {
          const char *end = p;
          while (*end && *end != '\n') end++;
          w->directive = (long)(p - code);
          w->directive_len = (size_t)(end - p);
        }
      }
      /* Otherwise the # or ## operator inside a macro body. */
    } else if (c == '"' || c == '\'') {
      q = skip_quoted(p, &closed);
    } else if (ident_char(c) || (c == '.' && isdigit((unsigned char)p[1]))) {
      if (isdigit((unsigned char)c) || c == '.') {
        /* A pp-number, with C++14 digit separators (1'000) and exponents. */
        while (ident_char(*q) || *q == '.' || (*q == '\'' && ident_char(q[1])) ||
               ((*q == '+' || *q == '-') && strchr("eEpP", q[-1]) != NULL))
          q++;
      } else {
        while (ident_char(*q)) q++;
        size_t n = (size_t)(q - p);
        bool raw = *q == '"' && p[n - 1] == 'R' &&
                   (n == 1 || (n == 2 && strchr("LuU", p[0]) != NULL) ||
                    (n == 3 && p[0] == 'u' && p[1] == '8'));
        if (raw) q = skip_raw(q, &closed);
      }
    } else {
      q = p + 1;
    }
    if (!comment) line_start = false;
    if (q > limit || (!closed && q >= limit)) {
      w->open = true;
      return;
    }
    p = q;
  }
  w->open = in_directive || (stop > 0 && code[stop - 1] == '\\');
}

long jk_code_line_directive(const char *code, size_t *length) {
  if (code == NULL) return -1;
  pp_walk w;
  walk(code, strlen(code), &w);
  if (w.directive >= 0 && length != NULL) *length = w.directive_len;
  return w.directive;
}

bool jk_code_tail_open(const char *code, size_t len) {
  pp_walk w;
  walk(code, len, &w);
  return w.open;
}

jitk_status jk_code_check_directives(jitk_engine *e, const char *label, const char *code) {
  size_t len = 0;
  long at = jk_code_line_directive(code, &len);
  if (at < 0) return JITK_OK;
  return jk_fail_caret(e, JITK_ERR_PARSE, label, code, (size_t)at, len,
                       "#line directives are not allowed in %s: jitk numbers the lines of "
                       "each section of your code itself, so that compiler messages cite "
                       "them as %s:LINE:COL",
                       label, label);
}
