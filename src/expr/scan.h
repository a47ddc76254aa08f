/*
 * Scanning users' C++ code without compiling it (scan.c): which names it
 * uses or assigns first, where it has a line directive, whether its end
 * is open (inside a comment, a literal or a splice).
 */
#ifndef JITK_SRC_EXPR_SCAN_H
#define JITK_SRC_EXPR_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

/* Whether identifier `name` occurs in `code` as a token (outside comments,
 * string and character literals, and preprocessor lines). */
bool jk_code_uses(const char *code, const char *name);

/* Whether a preprocessor line of `code` (after #, %: or ??=, to its end
 * past backslash splices) may bring `name` into code that expands it: it
 * names it, or pastes tokens (##, %:%:), which may form it. Read loosely,
 * so that a directive's comment or string counts too: false only where no
 * directive can. A macro defined so (`#define IDX i`) uses the name
 * wherever code uses the macro, which jk_code_uses does not see. */
bool jk_code_directives_use(const char *code, const char *name);

/* Whether a preprocessor line of `code` may bring in a jump (continue,
 * break, return, goto, throw ...: those jk_code_assigns_first stops at),
 * which code that expands its macro would then not show. */
bool jk_code_directives_jump(const char *code);

/*
 * Whether the first thing `code` does to `name` is a plain assignment at
 * the top level (`name = ...;` as a whole statement, outside any if, loop
 * or block, whose right-hand side does not mention `name`): then its old
 * value is never seen, and a kernel need not load it. Anything else
 * (`name += x`, `name = name * 2`, `if (c) name = x;`, a read, a jump such
 * as `continue` before the assignment) is false.
 */
bool jk_code_assigns_first(const char *code, const char *name);

/*
 * Whether a kernel may leave output `name` unloaded before running `code`
 * after `preamble`: code's first act on it is a plain assignment
 * (jk_code_assigns_first), and no directive of either text can change
 * that: conditional compilation in `code` (`#if 0` around the assignment),
 * a macro that names the output (`#define OLD z`, so `z = x + OLD;` reads
 * it) or one that may bring in a jump.
 */
bool jk_code_overwrites(const char *code, const char *preamble, const char *name);

/*
 * Whether every evaluation of expression `code` reads `name[index]`, both
 * identifiers, with nothing but whitespace between the tokens: then the
 * read may be made early, as matmul plans do for `bias[col]`.
 * Conservatively false for any text with something that may skip or not
 * evaluate a read (?:, && and ||, braces, sizeof and its kin, assert) or
 * that hides text (comments, literals, directives); a `name` after `.`,
 * `->` or `::` is another name.
 */
bool jk_code_always_reads_at(const char *code, const char *name, const char *index);

/*
 * Whether `code` reads operand `name` only as `name[index]` (with index
 * NULL: never names it), under the same conservative refusals: then,
 * when that element is already in registers, evaluating the code reads no
 * memory through `name`. True for NULL code.
 */
bool jk_code_reads_only_at(const char *code, const char *name, const char *index);

/*
 * Where `code` has a line directive (`#line N "file"`, or its short form
 * `# N "file"`), as a byte offset, with the directive's length in
 * *length; -1 when it has none. Comments, literals (raw ones too) and the
 * `#` operator inside a macro body are not directives.
 */
long jk_code_line_directive(const char *code, size_t *length);

/*
 * Refuses user code that could renumber its own lines. Each section of a
 * user's code sits under a `#line 1 "section"` of jitk's, and compiler
 * messages are mapped back to the user's text by those names; a directive
 * of the user's would make messages cite another section, or text that
 * does not exist, as if jitk had written it. JITK_ERR_PARSE with a caret
 * under the directive; JITK_OK for NULL.
 */
jitk_status jk_code_check_directives(jitk_engine *e, const char *label, const char *code);

/* Whether text put right after the first `len` bytes of `code` would fall
 * in a comment, a literal, a preprocessor line or a backslash splice. */
bool jk_code_tail_open(const char *code, size_t len);

#endif
