/* The NVRTC log grammar (src/nvrtc/log.c): messages about the user's
 * sections rewritten as "section:LINE:COL", every other line untouched,
 * and no log, however hostile, read past its lines or grown without
 * bound. */
#include <stdio.h>

#include "common.h"
#include "base/base.h"
#include "nvrtc/nvrtc.h"

Test(rewrite, user_lines_with_columns) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *log =
      "operation(2): error: identifier \"w\" is undefined\n"
      "    y = x + w;\n"
      "            ^\n"
      "\n"
      "kernel.cu(30): warning: something generated\n"
      "operation(2): error: identifier \"w\" is undefined\n"
      "    y = x + w;\n"
      "            ^\n";
  char *out = jk_rewrite_log(e, log);
  cr_assert(strstr(out, "operation:2:11: error: identifier \"w\" is undefined") != NULL, "%s", out);
  cr_assert(strstr(out, "kernel.cu(30): warning") != NULL, "%s", out);
  const char *first = strstr(out, "operation:2:11");
  cr_assert(strstr(first + 1, "operation:2:11") == NULL, "said once: %s", out);
  jk_free(e, out);
  jitk_engine_destroy(e);
}

/* NVRTC echoes user text in its log (file names of #line directives,
 * string literals, identifiers), so the rewriting must hold for any log:
 * each of these once read past the end of its line (strtol skipped the
 * newlines after "map_expr(") and gave the buffer a negative length. */
Test(rewrite, hostile_logs_stay_in_their_lines) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *logs[] = {
      "map_expr(\n\n5):w(1): error: identifier \"qq\" is undefined\n  z = qq;\n      ^\n",
      "operation(\n5): x",
      "operation( 5): x\n",
      "operation(-5): x\n",
      "operation(+5): x\n",
      "operation(5)",
      "operation(5):",
      "operation(5)\n:",
      "operation(99999999999999999999999): x\n  y\n  ^\n",
      "operation(7): e\n",
      "operation(7): e\n  only one line",
      "operation(7): e\n\n^",
      "operation(",
      "(",
      "(1): x",
      "preamble(1): a\n  b\n^\npreamble(1): a\n",
      "",
  };
  for (size_t i = 0; i < sizeof logs / sizeof logs[0]; i++) {
    char *out = jk_rewrite_log(e, logs[i]);
    cr_assert(out != NULL, "log %zu", i);
    cr_assert(strlen(out) <= strlen(logs[i]) + 32, "log %zu grew: %s", i, out);
    jk_free(e, out);
  }
  /* Lines that are not a section's location pass through untouched. */
  char *out = jk_rewrite_log(e, logs[0]);
  cr_assert_str_eq(out, logs[0]);
  jk_free(e, out);
  out = jk_rewrite_log(e, "operation( 5): x\noperation(5)\n");
  cr_assert_str_eq(out, "operation( 5): x\noperation(5)\n");
  jk_free(e, out);
  out = jk_rewrite_log(e, "operation(7): e\n\n^");
  cr_assert_str_eq(out, "operation:7:1: e\n\n^");
  jk_free(e, out);
  /* A line number of any length is rewritten, its digits copied: ten
   * digits were once left in NVRTC's form (the parser stopped at nine). */
  out = jk_rewrite_log(e, "map_expr(3333333331): x\n");
  cr_assert_str_eq(out, "map_expr:3333333331: x\n");
  jk_free(e, out);
  out = jk_rewrite_log(e, "operation(99999999999999999999999): x\n  y\n  ^\n");
  cr_assert_str_eq(out, "operation:99999999999999999999999:1: x\n  y\n  ^\n");
  jk_free(e, out);
  jitk_engine_destroy(e);
}

/* Random logs built from the pieces the parser looks for. */
Test(rewrite, random_logs) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const char *const pieces[] = {"operation", "map_expr", "(",  ")",           ":",  ": ",
                                       "\n",        " ",        "^",  "1",           "42", "-",
                                       "  ^",       "error",    "\t", "999999999999"};
  uint64_t seed = 11;
  for (int round = 0; round < 20000; round++) {
    char log[256];
    size_t n = 0;
    int count = (int)(jt_next(&seed) % 24);
    for (int i = 0; i < count; i++) {
      const char *p = pieces[jt_next(&seed) % (sizeof pieces / sizeof pieces[0])];
      size_t l = strlen(p);
      if (n + l >= sizeof log) break;
      memcpy(log + n, p, l);
      n += l;
    }
    log[n] = '\0';
    char *out = jk_rewrite_log(e, log);
    cr_assert(out != NULL);
    cr_assert(strlen(out) <= n + 32 * (size_t)count, "%s -> %s", log, out);
    jk_free(e, out);
  }
  jitk_engine_destroy(e);
}
