/*
 * Reduction kernels without a GPU: every dtype's specialization compiles
 * for sm_90 in both strategies and index widths without spilling, half
 * types accumulate in the reduce type, a struct of the preamble works as
 * the reduce type, NVRTC errors cite the user's expression, and bad
 * arguments to create are refused with a clear message.
 */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "common.h"

/* "T x" into "float32 y": the parameters the generator tests below give
 * jk_red_generate directly. */
static void sum_params(jitk_engine *e, jk_param_list *pl) {
  memset(pl, 0, sizeof *pl);
  JT_OK(e, jk_params_parse(e, "T x", "in_params", false, pl));
  JT_OK(e, jk_params_parse(e, "float32 y", "out_params", true, pl));
}

/* The spec of those parameters with x of dtype `dt`, summed in float32
 * with `strategy`: one kept and one reduced dimension, groups of a warp,
 * no vectors; each test sets the rest. */
static jk_red_spec sum_spec(jitk_dtype dt, char strategy) {
  jk_red_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nparams = 2;
  spec.dtype[0] = (unsigned char)dt;
  spec.dtype[1] = JITK_FLOAT32;
  spec.kind[0] = spec.kind[1] = JK_EW_ARRAY;
  spec.reduce_dtype = JITK_FLOAT32;
  spec.nk = 1;
  spec.nr = 1;
  spec.strategy = (unsigned char)strategy;
  spec.group = 32;
  spec.vec = 1;
  spec.ovec = 1;
  return spec;
}

/* Compiles a generated source (which it frees): `kernels` entry points,
 * none spilling. */
static void compile_clean(jitk_engine *e, char *src, size_t kernels, const char *what, size_t c) {
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  const jitk_kernel_resources *res;
  size_t n;
  JT_OK(e, jitk_module_resources(m, &res, &n));
  cr_assert_eq(n, kernels, "%s case %zu: %zu kernels", what, c, n);
  for (size_t r = 0; r < n; r++)
    cr_assert_eq(res[r].spill_stores, 0, "%s case %zu spills", what, c);
  jitk_module_destroy(m);
  jk_free(e, src);
}

Test(reduction_gen, every_dtype_and_layout_compiles) {
  jitk_engine *e = jt_compile_engine("sm_90");
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    char types[64], name[32];
    snprintf(types, sizeof types, "T=%s", info.name);
    snprintf(name, sizeof name, "sum_%s", info.name);
    bool half = d == JITK_FLOAT16 || d == JITK_BFLOAT16;
    /* Half types reduce in float32, bool counts into int64. */
    const char *map = d == JITK_BOOL ? "x ? 1 : 0" : half ? "(float)x * (float)x" : "x * x";
    const char *rtype = d == JITK_BOOL ? "int64" : half ? "float32" : NULL;
    const char *out = d == JITK_BOOL ? "int64 y" : half ? "float32 y" : "T y";
    jitk_reduction *k = NULL;
    JT_OK(e,
          jitk_reduction_create(e, "T x", out, map, "a + b", "y = a", "0", rtype, name, NULL, &k));
    jitk_reduction_layout layouts[] = {{0, 1, 32, 'i', 0}, {2, 1, 32, 'i', 2}, {1, 2, 64, 'o', 1},
                                       {3, 3, 32, 'o', 0}, {1, 1, 32, 'm', 0}, {3, 2, 64, 'm', 0},
                                       {2, 2, 64, 'r', 1}, {1, 1, 32, 'r', 0}, {2, 1, 32, 'o', 3},
                                       {1, 2, 64, 'r', 3}};
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
      const char *src = NULL;
      jitk_module *m = NULL;
      JT_OK(e, jitk_reduction_compile(k, types, &layouts[l], &src, &m));
      cr_assert(strstr(src, "#line 1 \"map_expr\"") != NULL);
      const char *kind = layouts[l].strategy == 'o'   ? "across outputs"
                         : layouts[l].strategy == 'm' ? "one group per output"
                         : layouts[l].strategy == 'r' ? "row segments"
                                                      : "along reduced";
      cr_assert(strstr(src, kind) != NULL, "%s layout %zu", info.name, l);
      const jitk_kernel_resources *res;
      size_t n;
      JT_OK(e, jitk_module_resources(m, &res, &n));
      cr_assert_eq(n, 1u, "one kernel, split or not");
      cr_assert_eq(strstr(src, "atomicInc(_jk_tk") != NULL, layouts[l].split != 0,
                   "%s layout %zu: the last block's combine exactly when split", info.name, l);
      for (size_t r = 0; r < n; r++)
        cr_assert_eq(res[r].spill_stores, 0, "%s layout %zu spills", info.name, l);
      jitk_module_destroy(m);
    }
    jitk_reduction_destroy(k);
  }
  jitk_engine_destroy(e);
}

Test(reduction_gen, source_shapes) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x, T w, float32 s, raw T r", "T y", "x * w * s + r[0]",
                                 "a + b", "y = a / _in_ind.size()", NULL, NULL, "k", NULL, &k));
  const char *src;
  jitk_reduction_layout whole = {0, 1, 32, 'i', 0};
  JT_OK(e, jitk_reduction_compile(k, "T=float32", &whole, &src, NULL));
  cr_assert(strstr(src, "atomicInc") == NULL && strstr(src, "_jk_work[") == NULL,
            "one piece per output: no combine of chunks");
  jitk_reduction_layout rows = {1, 1, 32, 'i', 1};
  JT_OK(e, jitk_reduction_compile(k, "T=float32", &rows, &src, NULL));
  cr_assert(strstr(src, "jitk::ew::vec<T, 4>") != NULL, "16-byte loads along rows");
  cr_assert(strstr(src, "jitk::red::block_reduce<256>") != NULL);
  /* Split: a block an output (one a tile, taken once: no grid stride),
   * and the last block to finish each group of chunks, then the last of
   * the groups, fold them with a warp (split 1: up to a warp). */
  const char *ticket = strstr(src, "_jk_tick + (_jk_u)(_jk_wb / 1)");
  cr_assert(ticket != NULL && strstr(src, "_jk_wb = _jk_K)") != NULL &&
                strstr(ticket, "_jk_work + _jk_k * (_jk_S) + (_jk_c0)") != NULL &&
                strstr(ticket, "_jk_work2 + _jk_k * (_jk_S2) + (0)") != NULL &&
                strstr(ticket, "atomicInc(_jk_tk + _jk_S2") != NULL &&
                strstr(ticket, "jitk::red::group_reduce<32>") != NULL &&
                strstr(ticket, "block_reduce") == NULL && strstr(src, "k_final") == NULL,
            "the combine, a warp per output: %s", src);
  cr_assert(strstr(src, "int _jk_has = 0;") != NULL, "no identity: partial results start empty");
  cr_assert(strstr(src, "jitk::array<const T, 1> r") != NULL, "raw as a descriptor");
  jitk_reduction_layout cols = {2, 3, 64, 'o', 0};
  JT_OK(e, jitk_reduction_compile(k, "T=float64", &cols, &src, NULL));
  cr_assert(strstr(src, "jitk::ew::div_u64") != NULL, "magic division, 64-bit");
  cr_assert(strstr(src, "unsigned long long _jk_u") != NULL);
  cr_assert(strstr(src, "jitk::ew::vec") == NULL, "no vectors across outputs");
  /* One group an output: a 16-byte vector of four float32 each, two
   * outputs a thread, every load before the first fold. */
  jitk_reduction_layout single = {1, 1, 32, 'm', 0};
  JT_OK(e, jitk_reduction_compile(k, "T=float32", &single, &src, NULL));
  cr_assert(strstr(src, "one group per output") != NULL && strstr(src, "_jk_v_x[2]") != NULL &&
                strstr(src, "jitk::ew::vec<T, 4>") != NULL && strstr(src, "atomicInc") == NULL,
            "%s", src);
  jitk_reduction_layout bad = {0, 0, 32, 'i', 0};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "reduced_ndim",
           jitk_reduction_compile(k, "T=float32", &bad, &src, NULL));
  jitk_reduction_layout split_single = {1, 1, 32, 'm', 1};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "(0 for 'm')",
           jitk_reduction_compile(k, "T=float32", &split_single, &src, NULL));
  jitk_reduction_layout split_four = {1, 1, 32, 'r', 4}, strategy_x = {1, 1, 32, 'x', 0};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "split 0..3",
           jitk_reduction_compile(k, "T=float32", &split_four, &src, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "'i', 'o', 'm' or 'r'",
           jitk_reduction_compile(k, "T=float32", &strategy_x, &src, NULL));
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "placeholder T has no type",
           jitk_reduction_compile(k, "", NULL, &src, NULL));
  JT_FAILS(e, JITK_ERR_PARSE, "placeholder T is bound twice",
           jitk_reduction_compile(k, "T=float32,T=float64", NULL, &src, NULL));
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

Test(reduction_gen, struct_reduce_type) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_reduction_options o = {
      "struct vi { float v; long long i; };\n"
      "__device__ __forceinline__ vi make_vi(float v, long long i) { vi r; r.v = v; r.i = i; "
      "return r; }\n",
      NULL, 0};
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "int64 y", "make_vi(x, _j)",
                                 "(b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a", "y = a.i",
                                 "make_vi(__int_as_float(0xff800000), 0)", "vi", "argmax", &o, &k));
  const char *src;
  jitk_reduction_layout cols = {1, 1, 32, 'o', 2};
  JT_OK(e, jitk_reduction_compile(k, "T=float32", &cols, &src, NULL));
  cr_assert(strstr(src, "typedef vi _type_reduce;") != NULL, "%s", src);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

Test(reduction_gen, errors_cite_the_users_expressions) {
  jitk_engine *e = jt_compile_engine("sm_90");
  struct {
    const char *map, *reduce, *post, *identity, *want;
  } cases[] = {
      {"x * * x", "a + b", "y = a", "0", "map_expr:1:"},
      {"x * x", "a + + b;", "y = a", "0", "reduce_expr:1:"},
      {"x * x", "a + b", "y = a + undefined_thing", "0", "post_map_expr:1:9: error"},
      {"x * x", "a + b", "y = a", "nope", "identity:1:1: error"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jitk_reduction *k = NULL;
    JT_OK(e, jitk_reduction_create(e, "T x", "T y", cases[c].map, cases[c].reduce, cases[c].post,
                                   cases[c].identity, NULL, "bad", NULL, &k));
    const char *src;
    JT_FAILS(e, JITK_ERR_COMPILE, cases[c].want,
             jitk_reduction_compile(k, "T=float32", NULL, &src, NULL));
    jitk_reduction_destroy(k);
  }
  jitk_reduction *k = NULL;
  JT_FAILS(
      e, JITK_ERR_PARSE, "map_expr is empty",
      jitk_reduction_create(e, "T x", "T y", "  ", "a + b", "y = a", "0", NULL, "k", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "identity is empty",
           jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "", NULL, "k", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "at least one input and one output",
           jitk_reduction_create(e, "T x", "", "x", "a + b", "y = a", "0", NULL, "k", NULL, &k));
  JT_FAILS(
      e, JITK_ERR_PARSE, "^",
      jitk_reduction_create(e, "T x, T x", "T y", "x", "a + b", "y = a", "0", NULL, "k", NULL, &k));
  JT_FAILS(
      e, JITK_ERR_PARSE, "C identifier",
      jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "1k", NULL, &k));
  JT_FAILS(
      e, JITK_ERR_INVALID_ARGUMENT, "NULL",
      jitk_reduction_create(e, "T x", "T y", NULL, "a + b", "y = a", "0", NULL, "k", NULL, &k));
  JT_FAILS(
      e, JITK_ERR_PARSE, "reduction outputs cannot be raw",
      jitk_reduction_create(e, "T x", "raw T y", "x", "a + b", "y = a", "0", NULL, "k", NULL, &k));
  jitk_engine_destroy(e);
}

/* An expression missing its last operand is reported where the
 * generated code closes it; that is on the expression's own last line,
 * so the message cites the user's section, line and column. */
Test(reduction_gen, errors_at_the_end_of_an_expression) {
  jitk_engine *e = jt_compile_engine("sm_90");
  struct {
    const char *map, *reduce, *post, *identity, *want;
  } cases[] = {
      {"x + ", "a + b", "y = a", "0", "map_expr:1:4: error: expected an expression"},
      {"x", "a +", "y = a", "0", "reduce_expr:1:4: error: expected an expression"},
      {"x", "a + b", "y = a *", "0", "post_map_expr:1:8: error: expected an expression"},
      {"x", "a + b", "y = a", "1 -", "identity:1:4: error: expected an expression"},
      {"x *\n  ", "a + b", "y = a", "0", "map_expr:1:4: error: expected an expression"},
      {"x * // squared", "a + b", "y = a", "0", "map_expr:2:1: error: expected an expression"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jitk_reduction *k = NULL;
    JT_OK(e, jitk_reduction_create(e, "T x", "T y", cases[c].map, cases[c].reduce, cases[c].post,
                                   cases[c].identity, NULL, "bad", NULL, &k));
    const char *src;
    JT_FAILS(e, JITK_ERR_COMPILE, cases[c].want,
             jitk_reduction_compile(k, "T=float32", NULL, &src, NULL));
    cr_assert(strstr(jitk_errmsg(e), "bad.cu(") == NULL, "case %zu cites generated code: %s", c,
              jitk_errmsg(e));
    jitk_reduction_destroy(k);
  }
  /* Expressions ending in a comment still compile. */
  jitk_reduction *k = NULL;
  JT_OK(e, jitk_reduction_create(e, "T x", "T y", "x * x // square", "a + b /* sum */",
                                 "y = a // out", "0 // none", NULL, "ok", NULL, &k));
  const char *src;
  JT_OK(e, jitk_reduction_compile(k, "T=float32", NULL, &src, NULL));
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
}

/* Line directives in any of the user's texts are refused (see the
 * elementwise test of the same name). */
Test(reduction_gen, line_directives_are_refused) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *bad = "x\n#line 1 \"reduce_expr\"";
  jitk_reduction *k = NULL;
  JT_FAILS(e, JITK_ERR_PARSE, "map_expr:2:1: #line",
           jitk_reduction_create(e, "T x", "T y", bad, "a + b", "y = a", "0", NULL, "k", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "reduce_expr:2:1: #line",
           jitk_reduction_create(e, "T x", "T y", "x", bad, "y = a", "0", NULL, "k", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "post_map_expr:2:1: #line",
           jitk_reduction_create(e, "T x", "T y", "x", "a + b", bad, "0", NULL, "k", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "identity:2:1: #line",
           jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", bad, NULL, "k", NULL, &k));
  JT_FAILS(e, JITK_ERR_PARSE, "reduce_type:2:1: #line",
           jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", "float\n#line 3", "k",
                                 NULL, &k));
  jitk_reduction_options o = {"#line 5", NULL, 0};
  JT_FAILS(e, JITK_ERR_PARSE, "preamble:1:1: #line",
           jitk_reduction_create(e, "T x", "T y", "x", "a + b", "y = a", "0", NULL, "k", &o, &k));
  cr_assert_null(k);
  jitk_engine_destroy(e);
}

/* Columns with several outputs a thread (ovec): float16 pairs into a
 * float32 sum, with and without identity, whole and split, and int8
 * fours, generated directly and compiled without spills. */
Test(reduction_gen, outputs_in_vectors_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list pl;
  sum_params(e, &pl);
  for (int c = 0; c < 4; c++) {
    jk_red_spec spec = sum_spec(c < 3 ? JITK_FLOAT16 : JITK_INT8, 'o');
    spec.nk = (unsigned char)(c == 2 ? 2 : 1);
    spec.ovec = (unsigned char)(c < 3 ? 2 : 4);
    spec.has_identity = c != 1;
    spec.final_group = (unsigned short)(c == 2 ? 32 : 0);
    jk_red_source_in in = {"colv", &pl, "(float)x", "a + b", "y = a", "0", NULL, NULL, &spec, NULL};
    char *src = NULL;
    JT_OK(e, jk_red_generate(e, &in, &src));
    char want[64];
    snprintf(want, sizeof want, "jitk::ew::vec<T, %d>", spec.ovec);
    cr_assert(strstr(src, want) != NULL && strstr(src, "_jk_accs[") != NULL, "%s", src);
    compile_clean(e, src, 1, "columns of vectors", (size_t)c);
  }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}

/* Rows ('r'): segments of C vectors of V elements with runs of B reduced
 * elements inside each output, over the combinations the layout picks:
 * runs as long as several vectors (float32 runs of 16, float64 of 64),
 * runs shorter than a vector (int8 runs of 2: four outputs a vector),
 * columns (B 1: float16 segments of 8 vectors of 4, float32 of one
 * vector, int8 of 16 vectors of 4), scalar segments of 256, a split and
 * 64-bit indices, with and without an identity, and map_expr reading _j;
 * each compiles without spills, and the lanes that share an output
 * shuffle over the right bits. */
Test(reduction_gen, whole_rows_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list pl;
  sum_params(e, &pl);
  const struct {
    jitk_dtype dt;
    int C, B, V, nk, nr, idx64, split, identity;
    const char *map, *xors; /* the shuffle masks expected, in order */
  } cases[] = {
      {JITK_FLOAT32, 64, 16, 4, 1, 2, 0, 32, 1, "(float)x", "1u 2u"},
      {JITK_FLOAT64, 16, 64, 2, 2, 2, 1, 0, 0, "(float)x", "1u 2u 4u 8u 16u"},
      {JITK_INT8, 8, 2, 8, 1, 2, 0, 256, 1, "(float)x + (float)_j", "8u 16u"},
      {JITK_FLOAT16, 8, 1, 4, 2, 1, 0, 256, 1, "(float)x", "8u 16u"},
      {JITK_FLOAT32, 1, 1, 4, 1, 1, 1, 0, 0, "(float)x * (float)_j", "1u 2u 4u 8u 16u"},
      {JITK_FLOAT32, 256, 1, 1, 3, 3, 0, 32, 1, "(float)x", ""},
      {JITK_INT8, 16, 1, 4, 2, 1, 0, 32, 1, "(float)x", "16u"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jk_red_spec spec = sum_spec(cases[c].dt, 'r');
    spec.nk = (unsigned char)cases[c].nk;
    spec.nr = (unsigned char)cases[c].nr;
    spec.idx64 = (unsigned char)cases[c].idx64;
    spec.vec = (unsigned char)cases[c].V;
    spec.rcols = (unsigned short)cases[c].C;
    spec.rrun = (unsigned short)cases[c].B;
    spec.has_identity = (unsigned char)cases[c].identity;
    spec.final_group = (unsigned short)cases[c].split;
    jk_red_source_in in = {"rows", &pl,  cases[c].map, "a + b", "y = a",
                           "0",    NULL, NULL,         &spec,   NULL};
    char *src = NULL;
    JT_OK(e, jk_red_generate(e, &in, &src));
    cr_assert(strstr(src, "row segments") != NULL, "case %zu", c);
    /* The masks of jitk::red::shfl_xor, in the order they appear. */
    char seen[64] = "";
    for (const char *q = strstr(src, "shfl_xor(_jk_accs"); q != NULL;
         q = strstr(q + 1, "shfl_xor(_jk_accs")) {
      const char *comma = strstr(q, "], ");
      cr_assert_not_null(comma);
      size_t used = strlen(seen);
      snprintf(seen + used, sizeof seen - used, "%s%.*s", used ? " " : "",
               (int)strcspn(comma + 3, ")"), comma + 3);
    }
    cr_assert_str_eq(seen, cases[c].xors, "case %zu shuffles over %s", c, seen);
    cr_assert_eq(strstr(src, "atomicInc(_jk_tk") != NULL, cases[c].split != 0,
                 "case %zu: the combine when split", c);
    compile_clean(e, src, 1, "row segments", c);
  }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}

/* Large splits fold their chunks in a second kernel, `name_final`, with a
 * thread, a warp or a block an output: each strategy that splits ('i'
 * with groups of a block and of a warp, 'o' with 32 outputs a block, 7,
 * and pairs, 'r') compiles to two kernels without spills, the first
 * writing partial results and taking no tickets. */
Test(reduction_gen, second_pass_compiles) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list pl;
  sum_params(e, &pl);
  const struct {
    jitk_dtype dt;
    char strategy;
    int group, vec, ocols, ovec, rcols, final_group;
    const char *fold; /* in the second kernel */
  } cases[] = {
      {JITK_FLOAT32, 'i', 256, 4, 0, 0, 0, 256, "block_reduce_full<256>"},
      {JITK_FLOAT32, 'i', 32, 4, 0, 0, 0, 1, NULL},
      {JITK_FLOAT64, 'o', 32, 1, 0, 0, 0, 32, "group_reduce_full<32>"},
      {JITK_FLOAT32, 'o', 32, 1, 7, 0, 0, 256, "block_reduce_full<256>"},
      {JITK_FLOAT16, 'o', 32, 1, 0, 2, 0, 32, "group_reduce_full<32>"},
      {JITK_FLOAT32, 'r', 32, 4, 0, 0, 8, 1, NULL},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jk_red_spec spec = sum_spec(cases[c].dt, cases[c].strategy);
    spec.group = (unsigned short)cases[c].group;
    spec.vec = (unsigned char)cases[c].vec;
    spec.ocols = (unsigned char)cases[c].ocols;
    spec.ovec = (unsigned char)(cases[c].ovec ? cases[c].ovec : 1);
    spec.rcols = (unsigned short)cases[c].rcols;
    spec.rrun = (unsigned short)(cases[c].rcols ? 1 : 0);
    spec.has_identity = 1;
    spec.final_group = (unsigned short)cases[c].final_group;
    spec.second_pass = 1;
    jk_red_source_in in = {"two", &pl, "(float)x", "a + b", "y = a", "0", NULL, NULL, &spec, NULL};
    char *src = NULL;
    JT_OK(e, jk_red_generate(e, &in, &src));
    const char *fin = strstr(src, "two_final(");
    cr_assert(fin != NULL && strstr(src, "atomicInc") == NULL && strstr(src, "_jk_tk") == NULL,
              "case %zu: a second kernel, no tickets", c);
    if (cases[c].fold != NULL)
      cr_assert(strstr(fin, cases[c].fold) != NULL, "case %zu: %s", c, cases[c].fold);
    else
      cr_assert(strstr(fin, "group_reduce") == NULL && strstr(fin, "block_reduce") == NULL,
                "case %zu: a thread an output", c);
    compile_clean(e, src, 2, "second pass", c);
  }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}
