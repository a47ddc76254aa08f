/*
 * A C++ token scanner just good enough to answer a few questions about a
 * user's operation: does it use a name, is a name's first use a plain
 * assignment, does every evaluation of an expression read name[index].
 * It skips comments and literals and tracks nesting; it never needs to
 * understand the code beyond that.
 */
#include <ctype.h>
#include <string.h>

#include "expr/lex.h"
#include "expr/scan.h"

typedef enum { T_END, T_IDENT, T_PUNCT, T_OTHER } tok_kind;

typedef struct tok {
  tok_kind kind;
  const char *s;
  size_t n;
} tok;

/* A raw string literal R"delim( ... )delim" whose quote is at the cursor:
 * past its end (true), or at the end of the text when it has none. */
static bool skip_raw(jk_lex *lx) {
  const char *d = lx->text + lx->pos + 1;
  const char *open = d;
  while (*open && *open != '(' && open - d <= 16) open++;
  if (*open != '(') return jk_lex_quoted(lx); /* not a raw string: as an ordinary one */
  size_t dl = (size_t)(open - d);
  for (const char *q = open + 1; *q; q++)
    if (*q == ')' && strncmp(q + 1, d, dl) == 0 && q[1 + dl] == '"') {
      lx->pos = (size_t)(q + dl + 2 - lx->text);
      return true;
    }
  lx->pos += strlen(lx->text + lx->pos);
  return false;
}

/* Whether the identifier of n bytes at s, followed by a quote, is the
 * prefix of a raw string literal (R, LR, uR, UR, u8R). */
static bool raw_prefix(const char *s, size_t n) {
  return s[n - 1] == 'R' && (n == 1 || (n == 2 && strchr("LuU", s[0]) != NULL) ||
                             (n == 3 && s[0] == 'u' && s[1] == '8'));
}

/* Reads an identifier, with the raw string literal it prefixes when it
 * is one's prefix: whether it was (*closed then says whether the literal
 * ends). */
static bool read_word(jk_lex *lx, bool *closed) {
  size_t start = lx->pos, n = jk_lex_ident(lx);
  if (jk_lex_peek(lx) != '"' || !raw_prefix(lx->text + start, n)) return false;
  *closed = skip_raw(lx);
  return true;
}

/* Skips whitespace, comments and preprocessor lines, which are not the
 * operation's own code. A directive goes on past a backslash splice, as a
 * #define's body does. */
static void skip_trivia(jk_lex *lx) {
  for (;;) {
    jk_lex_skip_space_comments(lx);
    if (jk_lex_peek(lx) != '#') return;
    jk_lex_skip_logical_line(lx);
  }
}

/* Reads the next token into *t, which points into the text. Numbers and
 * literals are read as the directive walk below reads them, so that a
 * digit separator (1'000) or a quote inside a raw string cannot open a
 * literal that hides the code after it. */
static void next_tok(jk_lex *lx, tok *t) {
  skip_trivia(lx);
  size_t start = lx->pos;
  const char *p = lx->text + start;
  bool closed;
  t->s = p;
  if (*p == '\0') {
    t->kind = T_END;
  } else if (jk_lex_ident_start(*p)) {
    t->kind = read_word(lx, &closed) ? T_OTHER : T_IDENT;
  } else if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
    t->kind = T_OTHER;
    jk_lex_pp_number(lx);
  } else if (*p == '"' || *p == '\'') {
    t->kind = T_OTHER;
    jk_lex_quoted(lx);
  } else {
    /* Punctuation: the two-character operators that matter here. */
    static const char *const two[] = {"==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=",
                                      "|=", "^=", "++", "--", "->", "::", "&&", "||", "<<", ">>"};
    t->kind = T_PUNCT;
    size_t n = 1;
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
      if (p[0] == two[i][0] && p[1] == two[i][1]) n = 2;
    lx->pos += n;
  }
  t->n = lx->pos - start;
}

static bool is(const tok *t, const char *s) {
  return t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}

bool jk_code_uses(const char *code, const char *name) {
  if (code == NULL) return false;
  size_t len = strlen(name);
  tok t, prev = {T_END, NULL, 0};
  jk_lex lx;
  jk_lex_init(&lx, code);
  for (next_tok(&lx, &t); t.kind != T_END; next_tok(&lx, &t)) {
    /* `x.i` or `x->i` is a member, not the name itself. */
    bool member = prev.kind == T_PUNCT && (is(&prev, ".") || is(&prev, "->"));
    if (t.kind == T_IDENT && t.n == len && memcmp(t.s, name, len) == 0 && !member) return true;
    prev = t;
  }
  return false;
}

bool jk_code_directives_use(const char *code, const char *name) {
  if (code == NULL) return false;
  const size_t len = strlen(name);
  for (const char *p = code; *p != '\0'; p++) {
    /* "\?\?=": the trigraph, spelled so that no compiler reads it as one. */
    size_t intro = *p == '#'                     ? 1
                   : strncmp(p, "%:", 2) == 0    ? 2
                   : strncmp(p, "\?\?=", 3) == 0 ? 3
                                                 : 0;
    if (intro == 0) continue;
    /* The directive's text, to the end of its logical line. */
    const char *q = p + intro;
    for (; *q != '\0'; q++) {
      if (*q == '\\' && (q[1] == '\n' || (q[1] == '\r' && q[2] == '\n'))) {
        q += q[1] == '\r' ? 2 : 1;
        continue;
      }
      if (*q == '\n') break;
      if (*q == '#' || strncmp(q, "%:", 2) == 0) return true; /* ## or %:%: pastes */
      if (jk_lex_ident_start(*q) && !jk_lex_ident_char(q[-1])) {
        size_t n = 1;
        while (jk_lex_ident_char(q[n])) n++;
        if (n == len && memcmp(q, name, len) == 0) return true;
        q += n - 1;
      }
    }
    p = q - 1; /* the loop's p++ then looks at the line's end */
    if (*q == '\0') break;
  }
  return false;
}

/* The statements that may leave an element before the rest of the
 * operation runs. */
static const char *const jumps[] = {"continue", "break",     "return", "goto",
                                    "throw",    "co_return", "longjmp"};

bool jk_code_directives_jump(const char *code) {
  for (size_t j = 0; j < sizeof jumps / sizeof jumps[0]; j++)
    if (jk_code_directives_use(code, jumps[j])) return true;
  return false;
}

/* Whether `code` may hold a preprocessor directive (read loosely: a '#'
 * in a literal counts too). */
static bool may_have_directive(const char *code) {
  return strchr(code, '#') != NULL || strstr(code, "%:") != NULL || strstr(code, "\?\?=") != NULL;
}

bool jk_code_assigns_first(const char *code, const char *name) {
  /* The tokens below skip directives, but conditional compilation may
   * take the assignment out (`#if 0`) or put another statement first. */
  if (code == NULL || may_have_directive(code)) return false;
  size_t len = strlen(name);
  int depth = 0;          /* (), [], {} nesting */
  bool stmt_start = true; /* the next token begins a top-level statement */
  tok t;
  jk_lex lx;
  jk_lex_init(&lx, code);
  for (next_tok(&lx, &t); t.kind != T_END; next_tok(&lx, &t)) {
    /* A jump before the assignment may skip it for some elements, whose
     * old value then stays (`if (x < 0) continue; z = x;`). */
    for (size_t j = 0; t.kind == T_IDENT && j < sizeof jumps / sizeof jumps[0]; j++)
      if (is(&t, jumps[j])) return false;
    if (t.kind == T_IDENT && t.n == len && memcmp(t.s, name, len) == 0) {
      if (!(stmt_start && depth == 0)) return false;
      tok n;
      next_tok(&lx, &n);
      if (!is(&n, "=")) return false;
      /* `name = ...;`: the right-hand side must not read it (y = a*x + y). */
      int d = 0;
      for (next_tok(&lx, &n); n.kind != T_END; next_tok(&lx, &n)) {
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

bool jk_code_overwrites(const char *code, const char *preamble, const char *name) {
  return jk_code_assigns_first(code, name) && !jk_code_directives_use(preamble, name) &&
         !jk_code_directives_jump(preamble);
}

/* Counts the occurrences of identifier `name` in `code` (`all`) and those
 * of them that are `name[index]` (`at`; none when index is NULL). False,
 * without counting, for text that may skip a read (?:, && and || and
 * their spellings `and` and `or`, blocks, also as the digraph <% and the
 * trigraph ??<) or not evaluate one (sizeof and its kin, assert), or that
 * hides text from the tokens (comments, literals, directives, also as %:
 * and ??=). */
static bool count_reads(const char *code, const char *name, const char *index, size_t *all,
                        size_t *at) {
  *all = *at = 0;
  if (code == NULL) return true;
  static const char *const bad[] = {
      "?", "&&", "||", "{", "<%", "%:", "\"", "'", "#", "//", "/*", NULL};
  for (int i = 0; bad[i] != NULL; i++)
    if (strstr(code, bad[i]) != NULL) return false;
  static const char *const unevaluated[] = {"sizeof",   "decltype", "alignof", "_Alignof", "typeid",
                                            "noexcept", "assert",   "and",     "or",       NULL};
  size_t len = strlen(name), ilen = index != NULL ? strlen(index) : 0;
  tok t, prev = {T_END, NULL, 0};
  jk_lex lx;
  jk_lex_init(&lx, code);
  for (next_tok(&lx, &t); t.kind != T_END; prev = t, next_tok(&lx, &t)) {
    if (t.kind != T_IDENT) continue;
    for (int u = 0; unevaluated[u] != NULL; u++)
      if (is(&t, unevaluated[u])) return false;
    /* `x.name`, `x->name` and `ns::name` are not the operand. */
    bool member = prev.kind == T_PUNCT && (is(&prev, ".") || is(&prev, "->") || is(&prev, "::"));
    if (member || t.n != len || memcmp(t.s, name, len) != 0) continue;
    (*all)++;
    /* name [ index ], looked at from a copy of the cursor, so that every
     * token is still checked above. */
    jk_lex ahead = lx;
    tok a, b, c;
    next_tok(&ahead, &a);
    next_tok(&ahead, &b);
    next_tok(&ahead, &c);
    if (index != NULL && is(&a, "[") && b.kind == T_IDENT && b.n == ilen &&
        memcmp(b.s, index, ilen) == 0 && is(&c, "]"))
      (*at)++;
  }
  return true;
}

bool jk_code_always_reads_at(const char *code, const char *name, const char *index) {
  size_t all, at;
  return code != NULL && count_reads(code, name, index, &all, &at) && at > 0;
}

bool jk_code_reads_only_at(const char *code, const char *name, const char *index) {
  size_t all, at;
  return count_reads(code, name, index, &all, &at) && at == all;
}

/* --- preprocessor line directives in users' code --- */

/* Skips what may stand between a directive's `#` and its name: blanks,
 * block comments and backslash-newline splices. */
static void skip_directive_gap(jk_lex *lx) {
  for (;;) {
    if (jk_lex_skip(lx, JK_LEX_BLANK) > 0 || jk_lex_splice(lx)) continue;
    if (jk_lex_peek(lx) != '/' || jk_lex_peek_at(lx, 1) != '*') return;
    jk_lex_block_comment(lx);
  }
}

/* Whether the directive whose `#` was just read is a line directive:
 * `#line N "file"`, or the short form `# N "file"` that EDG and GCC also
 * read as one. */
static bool is_line_directive(jk_lex after_hash) {
  skip_directive_gap(&after_hash);
  if (isdigit((unsigned char)jk_lex_peek(&after_hash))) return true;
  const char *word = after_hash.text + after_hash.pos;
  return jk_lex_ident(&after_hash) == 4 && memcmp(word, "line", 4) == 0;
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
  jk_lex lx;
  jk_lex_init(&lx, code);
  bool line_start = true; /* nothing but blanks and comments so far on this line */
  bool in_directive = false;
  while (lx.pos < stop) {
    size_t at = lx.pos;
    char c = jk_lex_peek(&lx);
    if (jk_lex_accept(&lx, '\n')) {
      line_start = true;
      in_directive = false;
      continue;
    }
    /* A splice continues the same logical line. */
    if (jk_lex_splice(&lx) || jk_lex_skip(&lx, JK_LEX_BLANK) > 0) continue;
    /* Comments and literals: `closed` when their end is part of them (a
     * line comment's newline is not). */
    char c1 = '\0';
    if (c != '\0') c1 = jk_lex_peek_at(&lx, 1);
    bool closed = true, comment = c == '/' && (c1 == '/' || c1 == '*');
    if (c == '/' && c1 == '/') {
      /* A line comment ends at a newline that no backslash splices away. */
      jk_lex_skip_logical_line(&lx);
      closed = false;
    } else if (c == '/' && c1 == '*') {
      /* A comment is one space, even across lines: it does not start a new one. */
      closed = jk_lex_block_comment(&lx);
    } else if (c == '#' || (c == '%' && c1 == ':')) {
      lx.pos += c == '#' ? 1 : 2;
      if (line_start) {
        in_directive = true;
        if (w->directive < 0 && is_line_directive(lx)) {
          jk_lex line = lx;
          jk_lex_skip_line(&line);
          w->directive = (long)at;
          w->directive_len = line.pos - at;
        }
      }
      /* Otherwise the # or ## operator inside a macro body. */
    } else if (c == '"' || c == '\'') {
      closed = jk_lex_quoted(&lx);
    } else if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)c1))) {
      jk_lex_pp_number(&lx);
    } else if (jk_lex_ident_start(c)) {
      read_word(&lx, &closed);
    } else {
      lx.pos++;
    }
    if (!comment) line_start = false;
    if (lx.pos > stop || (!closed && lx.pos >= stop)) {
      w->open = true;
      return;
    }
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
