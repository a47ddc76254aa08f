/* Kernel signatures: the grammar, and errors that point at the byte. */
#include <stdio.h>

#include "common.h"
#include "expr/signature.h"

static jitk_engine *eng;

static void setup(void) { eng = jt_compile_engine("sm_90"); }
static void teardown(void) { jitk_engine_destroy(eng); }

TestSuite(signature, .init = setup, .fini = teardown);

Test(signature, valid) {
  jk_param *p;
  int n;
  JT_OK(eng, jk_signature_parse(
                 eng, "float32 a, float32* x, float32 [ 2 ] y, int64 n, void *raw, complex128[0]",
                 &p, &n));
  cr_assert_eq(n, 6);
  cr_assert(p[0].kind == JITK_ARG_SCALAR && p[0].dtype == JITK_FLOAT32);
  cr_assert(p[1].kind == JITK_ARG_POINTER && p[1].dtype == JITK_FLOAT32);
  cr_assert(p[2].kind == JITK_ARG_ARRAY && p[2].dtype == JITK_FLOAT32 && p[2].ndim == 2);
  cr_assert(p[3].kind == JITK_ARG_SCALAR && p[3].dtype == JITK_INT64);
  cr_assert(p[4].kind == JITK_ARG_POINTER && p[4].dtype == JITK_DTYPE_NONE);
  cr_assert(p[5].kind == JITK_ARG_ARRAY && p[5].dtype == JITK_COMPLEX128 && p[5].ndim == 0);
  jk_free(eng, p);
  JT_OK(eng, jk_signature_parse(eng, "  ", &p, &n));
  cr_assert_eq(n, 0);
  jk_free(eng, p);
  JT_OK(eng, jk_signature_parse(eng, "bfloat16*,bool", &p, &n));
  cr_assert_eq(n, 2);
  char d[32];
  jk_param_describe(&p[0], d, sizeof d);
  cr_assert_str_eq(d, "bfloat16*");
  jk_free(eng, p);
}

static void expect_error(const char *text, int offset, const char *needle) {
  jk_param *p = NULL;
  int n = 0;
  jitk_status st = jk_signature_parse(eng, text, &p, &n);
  cr_assert_eq(st, JITK_ERR_PARSE, "\"%s\" gave %s", text, jitk_errname(st));
  cr_assert_eq(jitk_error_offset(eng), offset, "\"%s\": offset %d, expected %d: %s", text,
               jitk_error_offset(eng), offset, jitk_errmsg(eng));
  cr_assert(strstr(jitk_errmsg(eng), needle) != NULL, "\"%s\": %s", text, jitk_errmsg(eng));
  /* The message repeats the text with a caret under the offset. */
  char caret[256];
  snprintf(caret, sizeof caret, "\n    %s\n", text);
  cr_assert(strstr(jitk_errmsg(eng), caret) != NULL, "%s", jitk_errmsg(eng));
}

Test(signature, errors_point_at_the_byte) {
  expect_error("float a", 0, "unknown dtype \"float\"");
  expect_error("float32 a, int n", 11, "unknown dtype \"int\"");
  expect_error("float32 a,", 10, "expected a parameter after ','");
  expect_error("float32[2 y", 10, "expected ']'");
  expect_error("float32[x] y", 8, "rank");
  expect_error("float32[17] y", 8, "rank");
  expect_error("void v", 0, "void*");
  expect_error("int32 a b", 8, "expected ','");
  expect_error("*p", 0, "expected a dtype name");
  const char *msg = jitk_errmsg(eng);
  cr_assert(strstr(msg, "signature:1:1:") != NULL, "%s", msg);
}

Test(signature, caret_marks_the_token) {
  jk_param *p = NULL;
  int n = 0;
  cr_assert_eq(jk_signature_parse(eng, "float32 a, uint128 b", &p, &n), JITK_ERR_PARSE);
  cr_assert(strstr(jitk_errmsg(eng), "\n               ^~~~~~~") != NULL, "%s", jitk_errmsg(eng));
}
