/* Parameter lists: what parses, and errors that point at the byte. */
#include <stdio.h>

#include "common.h"
#include "base/base.h"
#include "expr/params.h"

static jitk_engine *eng;
static void setup(void) { eng = jt_compile_engine("sm_90"); }
static void teardown(void) { jitk_engine_destroy(eng); }
TestSuite(params, .init = setup, .fini = teardown);

Test(params, valid_lists) {
  jk_param_list l;
  memset(&l, 0, sizeof l);
  JT_OK(eng, jk_params_parse(eng, "T x, raw T y, float32 a,U  b ,raw  bfloat16 table", "in_params",
                             false, &l));
  JT_OK(eng, jk_params_parse(eng, "T z, complex64 w", "out_params", true, &l));
  cr_assert_eq(l.count, 7);
  cr_assert_eq(l.num_placeholders, 2);
  cr_assert_str_eq(l.placeholders[0], "T");
  cr_assert_str_eq(l.placeholders[1], "U");
  cr_assert(!l.params[0].raw && l.params[0].placeholder == 0 &&
            l.params[0].dtype == JITK_DTYPE_NONE);
  cr_assert(l.params[1].raw && l.params[1].placeholder == 0);
  cr_assert(l.params[2].dtype == JITK_FLOAT32 && l.params[2].placeholder == -1);
  cr_assert_str_eq(l.params[3].name, "b");
  cr_assert(l.params[4].raw && l.params[4].dtype == JITK_BFLOAT16);
  cr_assert(l.params[5].output && l.params[5].placeholder == 0);
  cr_assert(l.params[6].output && l.params[6].dtype == JITK_COMPLEX64);
  cr_assert_eq(l.params[0].offset, 2, "offset of the name");
  jk_params_free(eng, &l);
  /* Empty lists are lists. */
  JT_OK(eng, jk_params_parse(eng, "  ", "in_params", false, &l));
  cr_assert_eq(l.count, 0);
  /* A placeholder may have any identifier's name, raw as a name is not. */
  JT_OK(eng, jk_params_parse(eng, "MyType value, raw MyType r", "in_params", false, &l));
  cr_assert_str_eq(l.placeholders[0], "MyType");
  jk_params_free(eng, &l);
}

static void bad(const char *in, const char *out, int offset, const char *needle) {
  jk_param_list l;
  memset(&l, 0, sizeof l);
  jitk_status st = jk_params_parse(eng, in, "in_params", false, &l);
  if (st == JITK_OK && out != NULL) st = jk_params_parse(eng, out, "out_params", true, &l);
  jk_params_free(eng, &l);
  cr_assert_eq(st, JITK_ERR_PARSE, "\"%s\" / \"%s\" parsed", in, out ? out : "");
  cr_assert_eq(jitk_error_offset(eng), offset, "\"%s\": offset %d, expected %d: %s", in,
               jitk_error_offset(eng), offset, jitk_errmsg(eng));
  cr_assert(strstr(jitk_errmsg(eng), needle) != NULL, "\"%s\": %s", in, jitk_errmsg(eng));
  /* The message shows the line with a caret under the offset. */
  const char *text = out ? out : in;
  char line[256];
  snprintf(line, sizeof line, "\n    %s\n", text);
  cr_assert(strstr(jitk_errmsg(eng), line) != NULL, "%s", jitk_errmsg(eng));
}

Test(params, errors_point_at_the_byte) {
  bad("int x", NULL, 0, "`int` is a C type");
  bad("T x, float y", NULL, 5, "`float` is a C type");
  bad("T x,", NULL, 4, "expected a parameter after ','");
  bad("T", NULL, 0, "needs a type and a name");
  bad("T x y", NULL, 4, "expected ',' or the end");
  bad("T i", NULL, 2, "`i` is reserved");
  bad("T _ind", NULL, 2, "`_ind` is reserved");
  bad("T _jk_p", NULL, 2, "reserved for jitk");
  bad("T x, T x", NULL, 7, "`x` is already a parameter");
  bad("T x", "T x", 2, "already a parameter (of the other list)");
  bad("T for", NULL, 2, "C++ keyword");
  bad("T float32", NULL, 2, "is a dtype name");
  bad("raw x", NULL, 0, "`raw` needs a type and a name");
  bad("T x, x y", NULL, 5, "names a parameter");
  bad("T T", NULL, 2, "cannot be both");
  bad("T 9x", NULL, 2, "expected a parameter name");
  bad("T x, y T", NULL, 7, "is a type placeholder");
}

Test(params, messages_name_the_list) {
  jk_param_list l;
  memset(&l, 0, sizeof l);
  cr_assert_eq(jk_params_parse(eng, "T x,\n  bogus!", "out_params", true, &l), JITK_ERR_PARSE);
  cr_assert(strstr(jitk_errmsg(eng), "out_params:2:") != NULL, "%s", jitk_errmsg(eng));
  jk_params_free(eng, &l);
}

/* Binding placeholders from "T=float32, U=int8": spaces around either
 * side, any order; each mistake gets its own message and caret, and
 * leaves nothing half bound that the caller could use. */
Test(params, bind_types) {
  jk_param_list l;
  memset(&l, 0, sizeof l);
  JT_OK(eng, jk_params_parse(eng, "T x, U y, float32 a", "in_params", false, &l));
  jitk_dtype bound[2];
  JT_OK(eng, jk_params_bind_types(eng, &l, " U = int8 ,T=float32", bound));
  cr_assert(bound[0] == JITK_FLOAT32 && bound[1] == JITK_INT8);
  JT_FAILS(eng, JITK_ERR_PARSE, "expected PLACEHOLDER=DTYPE",
           jk_params_bind_types(eng, &l, "T float32", bound));
  JT_FAILS(eng, JITK_ERR_PARSE, "`V` is not a placeholder of this kernel",
           jk_params_bind_types(eng, &l, "T=float32, V=int8", bound));
  cr_assert_eq(jitk_error_offset(eng), 11);
  JT_FAILS(eng, JITK_ERR_PARSE, "unknown dtype `float33`",
           jk_params_bind_types(eng, &l, "T=float33, U=int8", bound));
  JT_FAILS(eng, JITK_ERR_PARSE, "placeholder T is bound twice (to float32, then float64)",
           jk_params_bind_types(eng, &l, "T=float32, U=int8, T=float64", bound));
  JT_FAILS(eng, JITK_ERR_ARGUMENT_TYPE, "placeholder U has no type; bind it (U=float32)",
           jk_params_bind_types(eng, &l, "T=float32", bound));
  JT_FAILS(eng, JITK_ERR_ARGUMENT_TYPE, "placeholder T has no type",
           jk_params_bind_types(eng, &l, NULL, bound));
  jk_params_free(eng, &l);
}
