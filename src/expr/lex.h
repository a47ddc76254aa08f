/*
 * The small lexer the text parsers of jitk share (lex.c): parameter lists,
 * kernel signatures, the placeholders' type list, lists of names and the
 * scanner of users' C++ code. A cursor walks NUL-terminated text byte by
 * byte; each function reads one kind of thing at the cursor and moves past
 * it, or leaves the cursor where it was when that thing is not there.
 *
 * The cursor keeps a byte offset and no line number: every message points
 * at a byte, and jk_fail_caret works out the line and column from it.
 */
#ifndef JITK_SRC_EXPR_LEX_H
#define JITK_SRC_EXPR_LEX_H

#include <stdbool.h>
#include <stddef.h>

/* A position in NUL-terminated text. */
typedef struct jk_lex {
  const char *text; /* the whole text, which offsets count from */
  size_t pos;       /* the offset of the next byte to read */
} jk_lex;

/* The whitespace of parameter lists and signatures. */
#define JK_LEX_SPACE " \t\n\r"
/* Blanks that do not end a line: what may stand inside a preprocessor
 * directive. */
#define JK_LEX_BLANK " \t\f\v\r"

/* A cursor at the start of `text`. */
void jk_lex_init(jk_lex *lx, const char *text);

/* The byte at the cursor ('\0' at the end), and the one `ahead` bytes
 * further; every byte between must be before the end. */
char jk_lex_peek(const jk_lex *lx);
char jk_lex_peek_at(const jk_lex *lx, size_t ahead);

/* Moves past `c` when it is next; whether it was. */
bool jk_lex_accept(jk_lex *lx, char c);

/* Whether c may start, or continue, a C identifier (ASCII letters, digits
 * and '_', whatever the locale). */
bool jk_lex_ident_start(char c);
bool jk_lex_ident_char(char c);

/* Moves past every byte that is in `set`; how many. */
size_t jk_lex_skip(jk_lex *lx, const char *set);

/* Moves up to the first byte that is in `stop`, or the end; how many
 * bytes it passed. */
size_t jk_lex_span(jk_lex *lx, const char *stop);

/* Moves past JK_LEX_SPACE. */
void jk_lex_skip_space(jk_lex *lx);

/* Moves past whitespace (as isspace in the C locale), line comments and
 * block comments. A line comment goes on past a backslash splice, as
 * jk_lex_skip_logical_line. */
void jk_lex_skip_space_comments(jk_lex *lx);

/* Moves past a backslash-newline splice ("\\\n" or "\\\r\n"); whether
 * there was one. */
bool jk_lex_splice(jk_lex *lx);

/* Moves to the next newline (or the end), not past it. */
void jk_lex_skip_line(jk_lex *lx);

/* Moves to the next newline that no backslash splices away (or the end),
 * not past it: the end of a line comment as the preprocessor sees it. */
void jk_lex_skip_logical_line(jk_lex *lx);

/* At the start of a block comment, moves past its end; false when it is
 * never closed (the cursor is then at the end of the text). */
bool jk_lex_block_comment(jk_lex *lx);

/* Reads a C identifier; its length, 0 when none starts at the cursor. */
size_t jk_lex_ident(jk_lex *lx);

/* Reads decimal digits into *value, stopping once the value is above
 * `max` (so it never overflows while max is below LONG_MAX / 10); how
 * many digits it read. The caller tells a number out of range by
 * *value > max. */
size_t jk_lex_number(jk_lex *lx, long max, long *value);

/* Reads a preprocessing number (a digit, or a '.' and a digit, then
 * identifier characters, '.', digit separators such as 1'000 and the
 * signs of exponents); its length. */
size_t jk_lex_pp_number(jk_lex *lx);

/* At a string or character literal's opening quote, moves past its
 * closing quote (true), or to the end of its line when it has none
 * (false). Backslash escapes are skipped whole. */
bool jk_lex_quoted(jk_lex *lx);

#endif
