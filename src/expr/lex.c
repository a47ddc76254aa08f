/*
 * The shared lexer; see lex.h. Every function reads the byte after another
 * only once the one before is known not to be the end, so none reads past
 * the text's NUL.
 */
#include <string.h>

#include "expr/lex.h"

void jk_lex_init(jk_lex *lx, const char *text) {
  lx->text = text;
  lx->pos = 0;
}

char jk_lex_peek(const jk_lex *lx) { return lx->text[lx->pos]; }

char jk_lex_peek_at(const jk_lex *lx, size_t ahead) { return lx->text[lx->pos + ahead]; }

bool jk_lex_accept(jk_lex *lx, char c) {
  if (c == '\0' || lx->text[lx->pos] != c) return false;
  lx->pos++;
  return true;
}

/* ASCII ranges rather than isalpha: a locale a program sets must not make
 * other bytes part of a name that NVRTC is then given. */
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool jk_lex_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool jk_lex_ident_char(char c) { return jk_lex_ident_start(c) || is_digit(c); }

/* Whether c is one of the bytes of `set`; never the NUL, which strchr
 * would find as the set's own end. */
static bool in_set(char c, const char *set) { return c != '\0' && strchr(set, c) != NULL; }

size_t jk_lex_skip(jk_lex *lx, const char *set) {
  size_t start = lx->pos;
  while (in_set(lx->text[lx->pos], set)) lx->pos++;
  return lx->pos - start;
}

size_t jk_lex_span(jk_lex *lx, const char *stop) {
  size_t start = lx->pos;
  while (lx->text[lx->pos] != '\0' && !in_set(lx->text[lx->pos], stop)) lx->pos++;
  return lx->pos - start;
}

void jk_lex_skip_space(jk_lex *lx) { jk_lex_skip(lx, JK_LEX_SPACE); }

void jk_lex_skip_space_comments(jk_lex *lx) {
  for (;;) {
    /* isspace's set in the C locale. */
    jk_lex_skip(lx, " \t\n\v\f\r");
    if (jk_lex_peek(lx) != '/') return;
    if (jk_lex_peek_at(lx, 1) == '/')
      jk_lex_skip_logical_line(lx);
    else if (jk_lex_peek_at(lx, 1) == '*')
      jk_lex_block_comment(lx);
    else
      return;
  }
}

bool jk_lex_splice(jk_lex *lx) {
  const char *p = lx->text + lx->pos;
  if (p[0] != '\\') return false;
  if (p[1] == '\n') {
    lx->pos += 2;
    return true;
  }
  if (p[1] == '\r' && p[2] == '\n') {
    lx->pos += 3;
    return true;
  }
  return false;
}

void jk_lex_skip_line(jk_lex *lx) { jk_lex_span(lx, "\n"); }

void jk_lex_skip_logical_line(jk_lex *lx) {
  const char *s = lx->text;
  while (s[lx->pos] != '\0' && !(s[lx->pos] == '\n' && (lx->pos == 0 || s[lx->pos - 1] != '\\')))
    lx->pos++;
}

bool jk_lex_block_comment(jk_lex *lx) {
  const char *s = lx->text;
  lx->pos += 2;
  while (s[lx->pos] != '\0' && !(s[lx->pos] == '*' && s[lx->pos + 1] == '/')) lx->pos++;
  if (s[lx->pos] == '\0') return false;
  lx->pos += 2;
  return true;
}

size_t jk_lex_ident(jk_lex *lx) {
  if (!jk_lex_ident_start(jk_lex_peek(lx))) return 0;
  size_t start = lx->pos;
  while (jk_lex_ident_char(lx->text[lx->pos])) lx->pos++;
  return lx->pos - start;
}

size_t jk_lex_number(jk_lex *lx, long max, long *value) {
  size_t start = lx->pos;
  long v = 0;
  while (is_digit(lx->text[lx->pos]) && v <= max) v = v * 10 + (lx->text[lx->pos++] - '0');
  *value = v;
  return lx->pos - start;
}

size_t jk_lex_pp_number(jk_lex *lx) {
  const char *s = lx->text;
  size_t start = lx->pos;
  for (;;) {
    char c = s[lx->pos];
    /* A sign belongs to the number only after an exponent's letter. */
    bool sign = (c == '+' || c == '-') && lx->pos > start && in_set(s[lx->pos - 1], "eEpP");
    bool separator = c == '\'' && jk_lex_ident_char(s[lx->pos + 1]);
    if (!(jk_lex_ident_char(c) || c == '.' || separator || sign)) break;
    lx->pos++;
  }
  return lx->pos - start;
}

bool jk_lex_quoted(jk_lex *lx) {
  const char *s = lx->text;
  char quote = s[lx->pos++];
  while (s[lx->pos] != '\0' && s[lx->pos] != quote && s[lx->pos] != '\n')
    lx->pos += (s[lx->pos] == '\\' && s[lx->pos + 1] != '\0') ? 2 : 1;
  if (s[lx->pos] != quote) return false;
  lx->pos++;
  return true;
}
