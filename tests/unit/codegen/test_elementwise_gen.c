/* Elementwise code generation without a GPU: the scanner, every dtype
 * compiling for sm_90, error positions in the user's own lines. */
#include <stdio.h>

#include "codegen/codegen.h"
#include "common.h"

Test(scan, uses_and_assigns_first) {
  cr_assert(jk_code_uses("z = x[i]", "i"));
  cr_assert(!jk_code_uses("z = x.i + w->i; // i", "i"), "members and comments do not count");
  cr_assert(!jk_code_uses("z = \"i\" + 'i'", "i"));
  cr_assert(!jk_code_uses("int ix = 1; z = ix", "i"));
  cr_assert(jk_code_assigns_first("z = x + y", "z"));
  cr_assert(jk_code_assigns_first("T t = x; z = t * 2; z += 1", "z"));
  cr_assert(!jk_code_assigns_first("z += x", "z"));
  cr_assert(!jk_code_assigns_first("z = z * 2", "z"), "the right-hand side reads it");
  cr_assert(!jk_code_assigns_first("y = a * x + y", "y"), "saxpy reads y");
  cr_assert(jk_code_assigns_first("y = f(a[0], x); y = y + 1", "y"));
  cr_assert(!jk_code_assigns_first("if (x > 0) z = x;", "z"));
  cr_assert(!jk_code_assigns_first("{ z = x; }", "z"));
  cr_assert(!jk_code_assigns_first("y = z; z = 1", "z"));
  cr_assert(!jk_code_assigns_first("z == x", "z"));
  cr_assert(!jk_code_assigns_first("w = x", "z"), "never assigned: its value is kept");
}

Test(rewrite, user_lines_with_columns) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *log = "operation(2): error: identifier \"w\" is undefined\n"
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

Test(elementwise_gen, every_dtype_and_layout_compiles) {
  jitk_engine *e = jt_compile_engine("sm_90");
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    char types[64];
    snprintf(types, sizeof types, "T=%s", info.name);
    jitk_elementwise *k = NULL;
    char name[32];
    snprintf(name, sizeof name, "add_%s", info.name);
    const char *op = d == JITK_BOOL ? "z = x && !s" : "z = x + y * s";
    JT_OK(e, jitk_elementwise_create(e, "T x, T y, T s", "T z", op, name, NULL, &k));
    jitk_elementwise_layout layouts[] = {
        {1, 32, 0, "s"}, {2, 32, 0, "s"}, {3, 64, 1, "s"}, {1, 64, 0, NULL}};
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
      const char *src = NULL;
      jitk_module *m = NULL;
      JT_OK(e, jitk_elementwise_compile(k, types, &layouts[l], &src, &m));
      cr_assert(strstr(src, info.ctype) != NULL, "%s: typedef of T", info.name);
      const jitk_kernel_resources *res;
      size_t n;
      JT_OK(e, jitk_module_resources(m, &res, &n));
      cr_assert_eq(n, 1);
      cr_assert_eq(res[0].spill_stores, 0, "%s layout %zu spills", info.name, l);
      jitk_module_destroy(m);
    }
    jitk_elementwise_destroy(k);
  }
  jitk_engine_destroy(e);
}

Test(elementwise_gen, paths_in_the_source) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x, raw T r", "T z", "z = x + r[i]", "k", NULL, &k));
  const char *src;
  jitk_elementwise_layout vec = {2, 32, 4, NULL};
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", &vec, &src, NULL));
  cr_assert(strstr(src, "jitk::ew::vec<T, 4>") != NULL, "16-byte accesses");
  cr_assert(strstr(src, "jitk::ew::div_u32") != NULL, "magic division, 32-bit");
  cr_assert(strstr(src, "jitk::array<const T, 1> r") != NULL, "raw as a descriptor");
  cr_assert(strstr(src, "typedef float T;") != NULL);
  cr_assert(strstr(src, "#line 1 \"operation\"") != NULL);
  cr_assert(strstr(src, " / ") == NULL || strstr(src, "_jk_n / 4") != NULL, "no division in the loop");
  jitk_elementwise_layout wide = {3, 64, 1, NULL};
  JT_OK(e, jitk_elementwise_compile(k, "T=float64", &wide, &src, NULL));
  cr_assert(strstr(src, "jitk::ew::div_u64") != NULL);
  cr_assert(strstr(src, "unsigned long long _jk_u") != NULL);
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "placeholder T has no type", jitk_elementwise_compile(k, "", NULL, &src, NULL));
  JT_FAILS(e, JITK_ERR_PARSE, "not a placeholder", jitk_elementwise_compile(k, "Q=float32", NULL, &src, NULL));
  JT_FAILS(e, JITK_ERR_PARSE, "unknown dtype", jitk_elementwise_compile(k, "T=float", NULL, &src, NULL));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

Test(elementwise_gen, errors_cite_the_users_lines) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise_options o;
  memset(&o, 0, sizeof o);
  o.preamble = "__device__ float helper(float v) {\n  return v * undefined_in_preamble;\n}";
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = helper(x)", "k", &o, &k));
  const char *src;
  JT_FAILS(e, JITK_ERR_COMPILE, "preamble:2:14: error", jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  jitk_elementwise_destroy(k);
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "T t = x;\nT u = t +;\nz = u", "k2", NULL, &k));
  JT_FAILS(e, JITK_ERR_COMPILE, "operation:2:", jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  cr_assert(strstr(jitk_errmsg(e), "JITK_DUMP_SOURCE=1") != NULL);
  JT_OK(e, jitk_elementwise_source(k, &src));
  cr_assert(strstr(src, "T u = t +;") != NULL, "the failed source is kept");
  jitk_elementwise_destroy(k);
  JT_FAILS(e, JITK_ERR_PARSE, "C identifier", jitk_elementwise_create(e, "T x", "T z", "z = x", "2bad", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "cannot be raw", jitk_elementwise_create(e, "T x", "raw T z", "z = x", "k3", NULL, &k));
  jitk_engine_destroy(e);
}

/* The tiled path's source, generated directly and compiled, with tiles of
 * 32 and of 64, a bias loaded once per column or per element, and an
 * output the operation reads or not. */
Test(elementwise_gen, tiled_path_compiles) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list pl;
  memset(&pl, 0, sizeof pl);
  JT_OK(e, jk_params_parse(e, "T x, T b, raw T r", "in_params", false, &pl));
  JT_OK(e, jk_params_parse(e, "T y", "out_params", true, &pl));
  bool load[4] = {false, false, false, false};
  const jitk_dtype dts[] = {JITK_FLOAT32, JITK_FLOAT16, JITK_COMPLEX128};
  for (int c = 0; c < 6; c++) {
    int t = c % 3, side = c < 3 ? 32 : 64;
    if (t == 2 && side == 64) continue; /* 65 KiB of tile: launches never choose it */
    jk_ew_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.nparams = 4;
    spec.ndim = 2;
    spec.vec = 1;
    spec.unroll = 1;
    spec.tiled = 1;
    spec.tile = (unsigned char)side;
    spec.idx64 = t == 2;
    for (int p = 0; p < 4; p++) spec.dtype[p] = (unsigned char)dts[t];
    spec.kind[0] = spec.kind[1] = spec.kind[3] = JK_EW_ARRAY;
    spec.kind[2] = JK_EW_RAW;
    spec.raw_ndim[2] = 2;
    spec.transposed[0] = 1;
    spec.outer_bcast[1] = (unsigned char)(c % 2);
    load[3] = c >= 3;
    jk_ew_source_in in = {"tiled", &pl, load, "y = x + b + r(0, 0)", NULL, NULL, NULL, &spec};
    char *src = NULL;
    JT_OK(e, jk_ew_generate(e, &in, &src));
    char decl[32];
    snprintf(decl, sizeof decl, "_jk_t_x[%d][%d]", side, side + 1);
    cr_assert(strstr(src, "__shared__") != NULL && strstr(src, decl) != NULL, "%s", src);
    cr_assert(strstr(src, c % 2 ? "b = _jk_l_b;" : "b = _jk_l_b[_jk_qi];") != NULL,
              "%s", src);
    cr_assert((strstr(src, "y = _jk_l_y[_jk_qi];") != NULL) == load[3], "%s", src);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, NULL, &m));
    jitk_module_destroy(m);
    jk_free(e, src);
  }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}
