/* The shared lexer: what each reader takes, and where it leaves the cursor. */
#include "common.h"
#include "expr/lex.h"
#include "expr/scan.h"

/* A cursor at the start of `text`. */
static jk_lex at(const char *text) {
  jk_lex lx;
  jk_lex_init(&lx, text);
  return lx;
}

Test(lex, peek_and_accept) {
  jk_lex lx = at("a,");
  cr_assert_eq(jk_lex_peek(&lx), 'a');
  cr_assert_eq(jk_lex_peek_at(&lx, 1), ',');
  cr_assert(!jk_lex_accept(&lx, ','));
  cr_assert_eq(lx.pos, 0);
  cr_assert(jk_lex_accept(&lx, 'a'));
  cr_assert(jk_lex_accept(&lx, ','));
  cr_assert_eq(jk_lex_peek(&lx), '\0');
  /* The end is never accepted, so a loop on accept cannot run past it. */
  cr_assert(!jk_lex_accept(&lx, '\0'));
  cr_assert_eq(lx.pos, 2);
}

Test(lex, identifiers) {
  jk_lex lx = at("_x9 y");
  cr_assert_eq(jk_lex_ident(&lx), 3);
  cr_assert_eq(lx.pos, 3);
  /* None at a space, a digit or the end: the cursor stays. */
  cr_assert_eq(jk_lex_ident(&lx), 0);
  cr_assert_eq(lx.pos, 3);
  lx = at("9a");
  cr_assert_eq(jk_lex_ident(&lx), 0);
  lx = at("");
  cr_assert_eq(jk_lex_ident(&lx), 0);
  /* Only ASCII letters, whatever the locale: a byte of UTF-8 ends a name. */
  lx = at("ab\xc3\xa9");
  cr_assert_eq(jk_lex_ident(&lx), 2);
  cr_assert(jk_lex_ident_start('Z') && jk_lex_ident_start('_') && !jk_lex_ident_start('0'));
  cr_assert(jk_lex_ident_char('0') && !jk_lex_ident_char('-') && !jk_lex_ident_char('\0'));
}

Test(lex, skip_and_span) {
  jk_lex lx = at(" ,, x y,z");
  cr_assert_eq(jk_lex_skip(&lx, " ,"), 4);
  cr_assert_eq(jk_lex_span(&lx, ","), 3); /* "x y" */
  cr_assert_eq(jk_lex_peek(&lx), ',');
  cr_assert_eq(jk_lex_span(&lx, ","), 0);
  lx.pos++;
  cr_assert_eq(jk_lex_span(&lx, ","), 1); /* up to the end */
  cr_assert_eq(jk_lex_peek(&lx), '\0');
  /* The NUL ending a set is not one of its bytes. */
  cr_assert_eq(jk_lex_skip(&lx, " "), 0);
  cr_assert_eq(lx.pos, 9);
}

/* Where a reader that moves over whitespace, comments or lines leaves the
 * cursor, on each of a table of texts. */
typedef struct {
  void (*skip)(jk_lex *);
  const char *text;
  size_t end;
} skip_case;

static void skip_blanks(jk_lex *lx) { jk_lex_skip(lx, JK_LEX_BLANK); }

Test(lex, skipping) {
  static const skip_case cases[] = {
      /* The lists' whitespace: no form feed or vertical tab. */
      {jk_lex_skip_space, " \t\r\n\fx", 4},
      /* Blanks inside a directive: no newline. */
      {skip_blanks, " \t\f\v\r\nx", 5},
      {jk_lex_skip_space_comments, " /* a */\f// b\n\v/**/x", 19},
      /* A line comment goes on past a spliced newline, not past the next. */
      {jk_lex_skip_space_comments, "// a \\\nx", 8},
      {jk_lex_skip_space_comments, "// a \\\nx\ny", 9},
      /* A lone slash is not a comment. */
      {jk_lex_skip_space_comments, " / x", 1},
      {jk_lex_skip_space_comments, "  /* open", 9},
      {jk_lex_skip_line, "ab\ncd", 2},
      {jk_lex_skip_line, "ab", 2},
      /* A logical line goes on past a backslash before its newline. */
      {jk_lex_skip_logical_line, "// a\\\nb\nc", 7},
      {jk_lex_skip_logical_line, "\nx", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jk_lex lx = at(cases[i].text);
    cases[i].skip(&lx);
    cr_assert_eq(lx.pos, cases[i].end, "case %zu: at %zu, expected %zu", i, lx.pos, cases[i].end);
  }
}

/* What a reader of one thing that may be left open (a comment, a
 * literal) or be absent (a splice) says, and where it leaves the cursor. */
typedef struct {
  bool (*read)(jk_lex *);
  const char *text;
  bool result;
  size_t end;
} read_case;

Test(lex, comments_literals_splices) {
  static const read_case cases[] = {
      {jk_lex_block_comment, "/* a * / */x", true, 11},
      {jk_lex_block_comment, "/* a", false, 4},
      /* The slash right after the opening star does not close the comment. */
      {jk_lex_block_comment, "/*/", false, 3},
      {jk_lex_quoted, "\"a\\\"b\"x", true, 6},
      {jk_lex_quoted, "'\\''x", true, 4},
      /* Unterminated: it stops at the end of its line, or of the text. */
      {jk_lex_quoted, "\"ab\ncd\"", false, 3},
      {jk_lex_quoted, "'a\\", false, 3},
      {jk_lex_splice, "\\\nx", true, 2},
      {jk_lex_splice, "\\\r\nx", true, 3},
      {jk_lex_splice, "\\x", false, 0},
      {jk_lex_splice, "\\\r", false, 0},
      {jk_lex_splice, "\\", false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jk_lex lx = at(cases[i].text);
    cr_assert_eq(cases[i].read(&lx), cases[i].result, "case %zu", i);
    cr_assert_eq(lx.pos, cases[i].end, "case %zu: at %zu, expected %zu", i, lx.pos, cases[i].end);
  }
}

Test(lex, bounded_numbers) {
  long v = -1;
  jk_lex lx = at("16]");
  cr_assert_eq(jk_lex_number(&lx, 16, &v), 2);
  cr_assert_eq(v, 16);
  cr_assert_eq(jk_lex_peek(&lx), ']');
  /* It stops after the first digit that takes the value past the bound. */
  lx = at("1234");
  cr_assert_eq(jk_lex_number(&lx, 16, &v), 3);
  cr_assert_eq(v, 123);
  /* No digits: nothing read, and the value is 0. */
  lx = at("x");
  cr_assert_eq(jk_lex_number(&lx, 16, &v), 0);
  cr_assert_eq(v, 0);
  /* A long run of digits cannot overflow. */
  lx = at("99999999999999999999999999");
  jk_lex_number(&lx, 1000, &v);
  cr_assert_eq(v, 9999);
}

Test(lex, pp_numbers) {
  static const struct {
    const char *text;
    size_t len;
  } cases[] = {
      {"1'000+x", 5}, {"1e+5-y", 4}, {"0x1P-3)", 6}, {".5f;", 3},
      {"1+2", 1},     {"1'", 1},     {"1.2.3_u", 7}, {"12 3", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jk_lex lx = at(cases[i].text);
    cr_assert_eq(jk_lex_pp_number(&lx), cases[i].len, "%s", cases[i].text);
    cr_assert_eq(lx.pos, cases[i].len);
  }
}

/* The C++ scanner reads numbers, literals and lines with the readers the
 * directive walk uses: a digit separator, a quote in a raw string or a
 * spliced directive does not hide or invent the code after it. */
Test(scan, reads_as_the_preprocessor) {
  /* y is read on the right: the kernel must load it. */
  cr_assert(!jk_code_assigns_first("y = 1'000 * y;", "y"));
  cr_assert(jk_code_uses("a = 1'000; b = x;", "x"));
  cr_assert(jk_code_uses("s = R\"(\")\"; t = x;", "x"));
  cr_assert(!jk_code_uses("s = R\"d(x)\")d\";", "x"));
  cr_assert(jk_code_assigns_first("y = 1e-3 * x;", "y"));
  /* A #define's body and a line comment go on past a splice: neither
   * assigns y before the code reads it. */
  cr_assert(!jk_code_assigns_first("#define F \\\n y = 1;\nz = y;", "y"));
  cr_assert(!jk_code_assigns_first("// c \\\n y = 1;\nz = y;", "y"));
  cr_assert(!jk_code_uses("#define F \\\n x\n", "x"));
  /* An unterminated literal ends with its line. */
  cr_assert(jk_code_uses("c = 'a\nb = x;", "x"));
}

/* A directive may bring a name into the code that expands its macro:
 * named in its body (after #, %: or ??=, past a splice), or formed by
 * pasting; a directive that names neither, or a name outside directives,
 * is not such a use. A jump before the first assignment may skip it. */
Test(scan, directives_and_jumps) {
  cr_assert(jk_code_directives_use("#define IDX i", "i"));
  cr_assert(jk_code_directives_use("z = 1;\n  #  define IDX (i + 1)\n", "i"));
  cr_assert(jk_code_directives_use("%:define IDX i", "i"));
  cr_assert(
      jk_code_directives_use("?"
                             "?=define IDX i",
                             "i"));
  cr_assert(jk_code_directives_use("#define IDX \\\n  i\n", "i"));
  cr_assert(jk_code_directives_use("#define CAT(a, b) a##b", "_j"));
  cr_assert(!jk_code_directives_use("#define IDX ii\nz = i;", "i"));
  cr_assert(!jk_code_directives_use("#define IDX j\n", "i"));
  cr_assert(!jk_code_directives_use("z = i;", "i"));
  cr_assert(!jk_code_directives_use(NULL, "i"));
  cr_assert(!jk_code_assigns_first("if (x < 0) continue;\nz = x * 2;", "z"));
  cr_assert(!jk_code_assigns_first("if (x < 0) return;\nz = x;", "z"));
  cr_assert(jk_code_assigns_first("z = x;\nif (x < 0) continue;", "z"));
}

/* Reads that every evaluation of an expression makes, which a matmul
 * plan may make early: name[index] as tokens, nothing that may skip or
 * never evaluate it, nothing that hides text. */
Test(scan, always_reads_at) {
  cr_assert(jk_code_always_reads_at("acc + bias[col]", "bias", "col"));
  cr_assert(jk_code_always_reads_at("relu(acc + bias [ col ]) * 2", "bias", "col"));
  cr_assert(jk_code_always_reads_at("acc>bias[col]", "bias", "col"));
  cr_assert(jk_code_always_reads_at("(acc, bias\n[col])", "bias", "col"));
  /* May skip the read, or never evaluates it. */
  cr_assert(!jk_code_always_reads_at("row < 3 ? acc + bias[col] : acc", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc > 0 && bias[col] > 0", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc > 0 || bias[col] > 0", "bias", "col"));
  /* The same in the other spellings C++ has for them (they let the
   * wgmma epilogue's read-ahead load a whole row of bias where the code
   * reads it only for a few columns). */
  cr_assert(!jk_code_always_reads_at("acc * (col < 10 and bias[col] > 0)", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc * (col >= 10 or bias[col] > 0)", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("[&] <% return bias[col]; %>()", "bias", "col"));
  cr_assert(!jk_code_reads_only_at("acc * (col < 10 and bias[col] > 0)", "bias", "col"));
  /* Names that merely begin so are names. */
  cr_assert(jk_code_always_reads_at("order + bias[col] + android", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + sizeof(bias[col])", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + decltype(bias[col])(0)", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("[&] { return bias[col]; }()", "bias", "col"));
  /* Hides text. */
  cr_assert(!jk_code_always_reads_at("acc + bias[col] /* c */", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + bias[col] // c", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + bias[col] + 'a'", "bias", "col"));
  /* Other indices, other names, members. */
  cr_assert(!jk_code_always_reads_at("acc + bias[col + 1]", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + bias[column]", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + bias2[col]", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + x.bias[col]", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + x->bias[col]", "bias", "col"));
  cr_assert(!jk_code_always_reads_at("acc + ns::bias[col]", "bias", "col"));
  cr_assert(!jk_code_always_reads_at(NULL, "bias", "col"));
}

/* Reads of an operand only at one index (or none at all): what lets a
 * matmul plan evaluate its epilogue outside D and drop the value. */
Test(scan, reads_only_at) {
  cr_assert(jk_code_reads_only_at("acc + bias[col]", "bias", "col"));
  cr_assert(jk_code_reads_only_at("gelu(acc + bias[col]) * bias [col]", "bias", "col"));
  cr_assert(jk_code_reads_only_at("acc * 2", "bias", "col"), "not named at all");
  cr_assert(jk_code_reads_only_at("acc * 2", "bias", NULL));
  cr_assert(jk_code_reads_only_at(NULL, "bias", NULL));
  cr_assert(jk_code_reads_only_at("acc + x.bias[row]", "bias", NULL), "a member is another name");
  /* Another index, the bare name, any name with NULL. */
  cr_assert(!jk_code_reads_only_at("acc + bias[col] + bias[row]", "bias", "col"));
  cr_assert(!jk_code_reads_only_at("acc + *(bias.p + row)", "bias", "col"));
  cr_assert(!jk_code_reads_only_at("acc + bias[col]", "bias", NULL));
  /* The same refusals as always_reads_at. */
  cr_assert(!jk_code_reads_only_at("acc + bias[col] /* bias[row] */", "bias", "col"));
  cr_assert(!jk_code_reads_only_at("row < 3 ? bias[col] : 0", "bias", "col"));
  cr_assert(!jk_code_reads_only_at("acc + sizeof(bias[col])", "bias", "col"));
}
