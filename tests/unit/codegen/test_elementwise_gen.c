/* Elementwise code generation without a GPU: the scanner, every dtype
 * compiling for sm_90, error positions in the user's own lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  /* Directives may take the assignment out or put another statement
   * first; a macro of the preamble may read the output or jump. */
  cr_assert(!jk_code_assigns_first("#if 0\nz = x;\n#endif\nz += x;", "z"));
  cr_assert(!jk_code_assigns_first("%:ifdef A\nz = x;\n%:endif\n", "z"), "digraph");
  cr_assert(jk_code_overwrites("z = x + y", "#define W 2", "z"));
  cr_assert(!jk_code_overwrites("z = x + OLD;", "#define OLD z", "z"));
  cr_assert(!jk_code_overwrites("z = ADD(x);", "#define ADD(v) (z + (v))", "z"));
  cr_assert(!jk_code_overwrites("SKIP; z = x;", "#define SKIP if (x < 0) return", "z"));
  cr_assert(!jk_code_overwrites("z = CAT(o, ld);", "#define CAT(a, b) a##b", "z"), "pastes");
  cr_assert(jk_code_overwrites("z = x", NULL, "z"));
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
  cr_assert(strstr(src, " / ") == NULL || strstr(src, "_jk_n / 4") != NULL,
            "no division in the loop");
  jitk_elementwise_layout wide = {3, 64, 1, NULL};
  JT_OK(e, jitk_elementwise_compile(k, "T=float64", &wide, &src, NULL));
  cr_assert(strstr(src, "jitk::ew::div_u64") != NULL);
  cr_assert(strstr(src, "unsigned long long _jk_u") != NULL);
  JT_FAILS(e, JITK_ERR_ARGUMENT_TYPE, "placeholder T has no type",
           jitk_elementwise_compile(k, "", NULL, &src, NULL));
  JT_FAILS(e, JITK_ERR_PARSE, "not a placeholder",
           jitk_elementwise_compile(k, "Q=float32", NULL, &src, NULL));
  JT_FAILS(e, JITK_ERR_PARSE, "unknown dtype",
           jitk_elementwise_compile(k, "T=float", NULL, &src, NULL));
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
  JT_FAILS(e, JITK_ERR_COMPILE, "preamble:2:14: error",
           jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  jitk_elementwise_destroy(k);
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "T t = x;\nT u = t +;\nz = u", "k2", NULL, &k));
  JT_FAILS(e, JITK_ERR_COMPILE,
           "operation:2:", jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  cr_assert(strstr(jitk_errmsg(e), "JITK_DUMP_SOURCE=1") != NULL);
  JT_OK(e, jitk_elementwise_source(k, &src));
  cr_assert(strstr(src, "T u = t +;") != NULL, "the failed source is kept");
  jitk_elementwise_destroy(k);
  JT_FAILS(e, JITK_ERR_PARSE, "C identifier",
           jitk_elementwise_create(e, "T x", "T z", "z = x", "2bad", NULL, &k));
  jitk_engine_destroy(e);
}

/* JITK_DUMP_SOURCE=1 logs the source after a comment line for each NVRTC
 * option, so that the text printed compiles as jitk compiled it. */
static char *dumped;

static void keep_dump(void *user, jitk_log_level level, const char *message) {
  (void)user, (void)level;
  if (strncmp(message, "generated source of ", 20) == 0 ||
      strncmp(message, "source of module ", 17) == 0) {
    free(dumped);
    dumped = strdup(message);
  }
}

/* A compile-only engine that prints sources (JITK_DUMP_SOURCE=1) to
 * keep_dump. */
static jitk_engine *dump_engine(void) {
  setenv("JITK_DUMP_SOURCE", "1", 1);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.log_fn = keep_dump;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  return e;
}

Test(elementwise_gen, dumped_source_names_its_options) {
  jitk_engine *e = dump_engine();
  const char *opts[] = {"-DOFFSET=7", "-DTWICE(v)=((v)+(v))"};
  jitk_elementwise_options o;
  memset(&o, 0, sizeof o);
  o.nvrtc_options = opts;
  o.num_nvrtc_options = 2;
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = TWICE(x) + OFFSET", "opts", &o, &k));
  const char *src = NULL;
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  cr_assert_not_null(dumped, "no source was logged");
  const char *head =
      "generated source of opts:\n// NVRTC option: -DOFFSET=7\n"
      "// NVRTC option: -DTWICE(v)=((v)+(v))\n";
  cr_assert(strncmp(dumped, head, strlen(head)) == 0, "%s", dumped);
  cr_assert_str_eq(dumped + strlen(head), src, "then the source, whole");
  free(dumped);
  dumped = NULL;
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* A raw module's source is printed the same way (kernels/module.c), under
 * its program name and with its name expressions, so that the emulator can
 * run raw kernels too. */
Test(elementwise_gen, dumped_raw_module_names_its_options) {
  jitk_engine *e = dump_engine();
  const char *opts[] = {"-DSCALE=3"};
  const char *src = "extern \"C\" __global__ void k(int *y) { y[0] = SCALE; }\n";
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.program_name = "raw.cu";
  o.options = opts;
  o.num_options = 1;
  const char *names[] = {"k"};
  o.name_expressions = names;
  o.num_name_expressions = 1;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  cr_assert_not_null(dumped, "no source was logged");
  char want[256];
  snprintf(want, sizeof want,
           "source of module raw.cu:\n// NVRTC option: -DSCALE=3\n"
           "// NVRTC name expression: k\n%s",
           src);
  cr_assert_str_eq(dumped, want);
  free(dumped);
  dumped = NULL;
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* The tiled path's source, generated directly and compiled, with tiles of
 * 32 and of 64, a bias loaded once per column or per element, an output
 * the operation reads or not, and tiles aligned for their elements. */
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
    /* Aligned at least as its elements are (complex128's 16 bytes), or
     * each element would move 4 bytes at a time. */
    char decl[64];
    snprintf(decl, sizeof decl, "__align__(%d) T _jk_t_x[%d][%d]", t == 2 ? 16 : 4, side, side + 1);
    cr_assert(strstr(src, "__shared__") != NULL && strstr(src, decl) != NULL, "%s", src);
    cr_assert(strstr(src, c % 2 ? "b = _jk_l_b;" : "b = _jk_l_b[_jk_qi];") != NULL, "%s", src);
    cr_assert((strstr(src, "y = _jk_l_y[_jk_qi];") != NULL) == load[3], "%s", src);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, NULL, &m));
    jitk_module_destroy(m);
    jk_free(e, src);
  }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}

/* The tiled path with batches of tiles (a permuted 3-D or 4-D view): the
 * tile's rows along each dimension but the innermost, the batch's
 * coordinates found per tile, and the element index i, compiled. */
Test(elementwise_gen, tiled_batches_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list pl;
  memset(&pl, 0, sizeof pl);
  JT_OK(e, jk_params_parse(e, "T x, T b", "in_params", false, &pl));
  JT_OK(e, jk_params_parse(e, "T y", "out_params", true, &pl));
  bool load[3] = {false, false, false};
  for (int nd = 3; nd <= 4; nd++)
    for (int td = 0; td < nd - 1; td++) {
      jk_ew_spec spec;
      memset(&spec, 0, sizeof spec);
      spec.nparams = 3;
      spec.ndim = (unsigned char)nd;
      spec.vec = 1;
      spec.unroll = 1;
      spec.tiled = 1;
      spec.tile = (unsigned char)(td % 2 ? 32 : 64);
      spec.tile_dim = (unsigned char)td;
      spec.idx64 = nd == 4;
      for (int p = 0; p < 3; p++) {
        spec.dtype[p] = (unsigned char)(nd == 3 ? JITK_FLOAT16 : JITK_FLOAT64);
        spec.kind[p] = JK_EW_ARRAY;
      }
      spec.transposed[0] = 1;
      spec.outer_bcast[1] = (unsigned char)(td % 2);
      jk_ew_source_in in = {"tiledn", &pl,  load, "y = x + b; if (i < 0) y = x;",
                            NULL,     NULL, NULL, &spec};
      char *src = NULL;
      JT_OK(e, jk_ew_generate(e, &in, &src));
      char rows[40];
      if (td == 0)
        snprintf(rows, sizeof rows, "_jk_rows = _jk_n / (_jk_ext1");
      else
        snprintf(rows, sizeof rows, "_jk_rows = _jk_ext%d;", td);
      cr_assert(strstr(src, rows) != NULL, "%s", src);
      cr_assert(strstr(src, "_jk_bo_x") != NULL && strstr(src, "_jk_ix") != NULL, "%s", src);
      char coord[40];
      snprintf(coord, sizeof coord, "_jk_s_x_%d + (_jk_s)_jk_c * _jk_s_x_%d", td, nd - 1);
      cr_assert(strstr(src, coord) != NULL, "%s", src);
      jitk_module *m = NULL;
      JT_OK(e, jitk_module_create(e, src, NULL, &m));
      jitk_module_destroy(m);
      jk_free(e, src);
    }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}

/* Tiles of element pairs (tpair): float16 in 2-D (a transposed input, a
 * bias along the rows, an output the operation also reads) and bfloat16
 * batches of 3-D tiles, both tile sides; every global access moves a pair
 * (a 4-byte vector), the transposed tile is padded by a pair and read back
 * by column, and each compiles. */
Test(elementwise_gen, tiled_pairs_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list pl;
  memset(&pl, 0, sizeof pl);
  JT_OK(e, jk_params_parse(e, "T x, T b", "in_params", false, &pl));
  JT_OK(e, jk_params_parse(e, "T y", "out_params", true, &pl));
  bool load[3] = {false, false, true};
  for (int c = 0; c < 4; c++) {
    jk_ew_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.nparams = 3;
    spec.ndim = (unsigned char)(c < 2 ? 2 : 3);
    spec.vec = 1;
    spec.unroll = 1;
    spec.tiled = 1;
    spec.tpair = 1;
    spec.tile = (unsigned char)(c % 2 ? 32 : 64);
    spec.tile_dim = (unsigned char)(c < 2 ? 0 : 1);
    spec.idx64 = c == 3;
    for (int p = 0; p < 3; p++) {
      spec.dtype[p] = (unsigned char)(c < 2 ? JITK_FLOAT16 : JITK_BFLOAT16);
      spec.kind[p] = JK_EW_ARRAY;
    }
    spec.transposed[0] = 1;
    spec.outer_bcast[1] = (unsigned char)(c % 2);
    jk_ew_source_in in = {"tpair", &pl,  load, "y = y + x * b; if (i < 0) y = x;",
                          NULL,    NULL, NULL, &spec};
    char *src = NULL;
    JT_OK(e, jk_ew_generate(e, &in, &src));
    int side = c % 2 ? 32 : 64;
    char want[96];
    snprintf(want, sizeof want, "_jk_t_x[%d][%d]", side, side + 2);
    cr_assert(strstr(src, "tiled path, element pairs") != NULL, "%s", src);
    cr_assert(strstr(src, want) != NULL, "case %d: %s", c, want);
    cr_assert(strstr(src, "_jk_t_x[2 * _jk_tx + _jk_l][_jk_ty + _jk_q]") != NULL, "%s", src);
    cr_assert(strstr(src, "*reinterpret_cast<jitk::ew::vec<T, 2> *>(_jk_p_y + _jk_o_y)") != NULL,
              "%s", src);
    snprintf(want, sizeof want, "_jk_tx = threadIdx.x %% %d", side / 2);
    cr_assert(strstr(src, want) != NULL, "case %d: %s", c, want);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, NULL, &m));
    const jitk_kernel_resources *res;
    size_t n;
    JT_OK(e, jitk_module_resources(m, &res, &n));
    cr_assert_eq(res[0].spill_stores, 0, "case %d spills", c);
    jitk_module_destroy(m);
    jk_free(e, src);
  }
  jk_params_free(e, &pl);
  jitk_engine_destroy(e);
}

Test(scan, line_directives) {
  size_t len = 0;
  cr_assert_eq(jk_code_line_directive("z = x;\n#line 1 \"map_expr\"\nz = q;", &len), 7);
  cr_assert_eq(len, strlen("#line 1 \"map_expr\""));
  const char *found[] = {"#line 3", "  # line 3", "# 3 \"x\"", "%:line 3", "#\\\nline 3",
                         "/* c */ # /* c */ line 3", "z = 1; /* a\nb */\n#line 9",
                         "#define A \\\n  1\n#line 2", "\t#\tline 2",
                         /* A string literal ends at its line's end, even unterminated. */
                         "s = \"\n#line 1\""};
  for (size_t i = 0; i < sizeof found / sizeof found[0]; i++)
    cr_assert(jk_code_line_directive(found[i], NULL) >= 0, "not found in: %s", found[i]);
  const char *not_found[] = {"z = x",
                             "// #line 1",
                             "/*\n#line 1 */",
                             "z = x # line",
                             "#define S(x) #x\n#define L line",
                             "#lines 1",
                             "#include <a.h>",
                             "auto s = R\"(\n#line 1 \"x\"\n)\";",
                             "auto s = R\"d(\n)\"\n#line 1\n)d\";",
                             "int n = 1'000; char c = '#';\nz = n",
                             "z = 'a' + '\\'' ;",
                             NULL};
  for (size_t i = 0; not_found[i]; i++)
    cr_assert_eq(jk_code_line_directive(not_found[i], NULL), -1, "found in: %s", not_found[i]);
  cr_assert_eq(jk_code_line_directive(NULL, NULL), -1);
}

Test(scan, tail_open) {
  struct {
    const char *code;
    bool open;
  } cases[] = {
      {"x * x", false},          {"x * x // sq", true},   {"x /* c */", false},
      {"x /* c", true},          {"#define N 4", true},   {"x \\", true},
      {"s = \"a\"", false},      {"s = \"a", true},       {"x = 1;\n#include <a.h>", true},
      {"#define A 1\nx", false}, {"// c\nx", false},      {"R\"(a)\"", false},
      {"R\"(a", true},           {"x // a \\\n b", true}, {"c = '\\''", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    cr_assert_eq(jk_code_tail_open(cases[i].code, strlen(cases[i].code)), cases[i].open, "%s",
                 cases[i].code);
}

/* A user's #line could make NVRTC's messages cite another section, or a
 * "section" whose name is any text, as if jitk had numbered it; it is
 * refused where the code is given, with a caret under it. */
Test(elementwise_gen, line_directives_are_refused) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_FAILS(e, JITK_ERR_PARSE, "operation:2:1: #line directives are not allowed in operation",
           jitk_elementwise_create(
               e, "T x", "T z", "z = x;\n#line 1 \"map_expr(\\n\\n5):w\"\nz = qq;", "k", NULL, &k));
  cr_assert_null(k, "nothing is made");
  cr_assert(strstr(jitk_errmsg(e), "^~~~") != NULL, "%s", jitk_errmsg(e));
  const char *where[] = {"preamble", "loop_prep", "after_loop"};
  for (int i = 0; i < 3; i++) {
    jitk_elementwise_options o;
    memset(&o, 0, sizeof o);
    const char *bad = "int q = 0;\n  # 12 \"operation\"";
    if (i == 0) o.preamble = bad;
    if (i == 1) o.loop_prep = bad;
    if (i == 2) o.after_loop = bad;
    char want[64];
    snprintf(want, sizeof want, "%s:2:3: #line directives", where[i]);
    JT_FAILS(e, JITK_ERR_PARSE, want,
             jitk_elementwise_create(e, "T x", "T z", "z = x", "k", &o, &k));
  }
  /* Text that only looks like one is fine. */
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x; // #line 1\n/*\n#line 2 */", "k", NULL,
                                   &k));
  const char *src;
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* An error at the very end of a section (an operand missing) is NVRTC's
 * at the text that closes the section; that text sits on the section's
 * own last line, so the message cites the user's line and column. */
Test(elementwise_gen, errors_at_the_end_of_a_section) {
  jitk_engine *e = jt_compile_engine("sm_90");
  struct {
    const char *op, *preamble, *loop_prep, *after_loop, *want;
  } cases[] = {
      {"z = x +", NULL, NULL, NULL, "operation:1:8: error: expected an expression"},
      {"T t = x;\nz = t *  ", NULL, NULL, NULL, "operation:2:8: error: expected an expression"},
      {"z = x", NULL, "int q = ", NULL, "loop_prep:1:8: error: expected an expression"},
      {"z = x", NULL, NULL, "int q = 1 +", NULL},
      {"z = x", "const int g = 1 +", NULL, NULL, "preamble:1:18: error: expected an expression"},
      /* A trailing comment or directive cannot take the closing text: it
       * goes on the next line, still the section's. */
      {"z = x + // the sum", NULL, NULL, NULL, "operation:2:1: error: expected an expression"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    jitk_elementwise_options o;
    memset(&o, 0, sizeof o);
    o.preamble = cases[c].preamble;
    o.loop_prep = cases[c].loop_prep;
    o.after_loop = cases[c].after_loop;
    jitk_elementwise *k = NULL;
    JT_OK(e, jitk_elementwise_create(e, "T x", "T z", cases[c].op, "k", &o, &k));
    const char *src;
    const char *want =
        cases[c].want ? cases[c].want : "after_loop:1:12: error: expected an expression";
    JT_FAILS(e, JITK_ERR_COMPILE, want, jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
    cr_assert(strstr(jitk_errmsg(e), "k.cu(") == NULL, "case %zu cites generated code: %s", c,
              jitk_errmsg(e));
    jitk_elementwise_destroy(k);
  }
  /* Sections ending in a comment or a preprocessor line still compile. */
  jitk_elementwise_options o;
  memset(&o, 0, sizeof o);
  o.preamble = "#define TWO 2";
  o.loop_prep = "int q = TWO; // two";
  o.after_loop = "(void)q; /* done */";
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "T x", "T z", "z = x * q // scaled\n", "k", &o, &k));
  const char *src;
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* What jitk_elementwise_compile once took without a word (issue 11): a
 * scalar that names no parameter, a placeholder bound twice, and vector
 * widths that fail inside NVRTC. */
Test(elementwise_gen, layout_and_types_are_checked) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_elementwise *k = NULL;
  JT_OK(e,
        jitk_elementwise_create(e, "T a, T x, raw T r", "T z", "z = a * x + r[0]", "k", NULL, &k));
  const char *src;
  jitk_elementwise_layout l = {1, 32, 0, "a, q"};
  JT_FAILS(e, JITK_ERR_PARSE, "scalars:1:4: kernel k has no parameter `q`",
           jitk_elementwise_compile(k, "T=float32", &l, &src, NULL));
  l.scalars = "a,a";
  JT_FAILS(e, JITK_ERR_PARSE, "`a` is listed twice",
           jitk_elementwise_compile(k, "T=float32", &l, &src, NULL));
  l.scalars = "r";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "raw parameter r cannot be a scalar",
           jitk_elementwise_compile(k, "T=float32", &l, &src, NULL));
  l.scalars = "z";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "output z cannot be a scalar",
           jitk_elementwise_compile(k, "T=float32", &l, &src, NULL));
  l.scalars = "a";
  JT_FAILS(e, JITK_ERR_PARSE, "placeholder T is bound twice (to float32, then float64)",
           jitk_elementwise_compile(k, "T=float32,T=float64", &l, &src, NULL));
  JT_FAILS(e, JITK_ERR_PARSE, "bound twice",
           jitk_elementwise_compile(k, "T=float32, T=float32", &l, &src, NULL));
  l.vector = 3;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "vector is 3",
           jitk_elementwise_compile(k, "T=float32", &l, &src, NULL));
  l.vector = 4;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "32-byte access",
           jitk_elementwise_compile(k, "T=float64", &l, &src, NULL));
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", &l, &src, NULL));
  cr_assert(strstr(src, "jitk::ew::vec<T, 4>") != NULL);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}

/* A float16 kernel reads cuda_bf16.h (25 ms of NVRTC) only when its code
 * names bfloat16; a bfloat16 kernel, and one of both types, always. */
Test(elementwise_gen, bfloat16_header_only_when_named) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const struct {
    const char *in, *op, *types;
    bool bf16;
  } cases[] = {
      {"T x", "z = exp(x) * (T)2 + x", "T=float16", false},
      {"T x", "z = x + __float2half(__bfloat162float(__float2bfloat16(1.5f)))", "T=float16", true},
      {"T x", "__nv_bfloat162 p = __floats2bfloat162_rn(1.f, 2.f); z = x + (T)__low2float(p)",
       "T=float16", true},
      {"T x", "nv_bfloat16 b = __float2bfloat16((float)x); z = (T)(float)b", "T=float16", true},
      {"T x", "z = x * x", "T=bfloat16", true},
      {"T x, U u", "z = x + (T)(float)u", "T=float16, U=bfloat16", true},
      {"T x", "z = x + x", "T=float32", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jitk_elementwise *k = NULL;
    JT_OK(e, jitk_elementwise_create(e, cases[i].in, "T z", cases[i].op, "k", NULL, &k));
    const char *src = NULL;
    JT_OK(e, jitk_elementwise_compile(k, cases[i].types, NULL, &src, NULL));
    cr_assert_eq(strstr(src, "#include <cuda_bf16.h>") != NULL, cases[i].bf16, "case %zu:\n%s", i,
                 src);
    jitk_elementwise_destroy(k);
  }
  jitk_engine_destroy(e);
}

/* An 8-bit float kernel compiles with arithmetic written as on float
 * (jitk/fp8.cuh computes in float and rounds where a value is stored),
 * and cuda_fp8.h comes only with an 8-bit float. */
Test(elementwise_gen, float8_kernels_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *names[] = {"float8_e4m3fn", "float8_e5m2"};
  const char *ctypes[] = {"jitk::float8_e4m3", "jitk::float8_e5m2"};
  jitk_elementwise_layout scalar_y = {1, 32, 0, "y"};
  for (int f = 0; f < 2; f++) {
    char types[64];
    snprintf(types, sizeof types, "T=%s", names[f]);
    jitk_elementwise *k = NULL;
    JT_OK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x * y + (T)1", "fma8", NULL, &k));
    const char *src = NULL;
    jitk_module *m = NULL;
    JT_OK(e, jitk_elementwise_compile(k, types, NULL, &src, &m));
    cr_assert(strstr(src, "#include <cuda_fp8.h>") != NULL, "%s", names[f]);
    cr_assert(strstr(src, "#include <jitk/fp8.cuh>") != NULL);
    cr_assert(strstr(src, ctypes[f]) != NULL);
    cr_assert(strstr(src, "jitk/half_math.cuh") == NULL, "no half header without a half");
    jitk_module_destroy(m);
    m = NULL;
    JT_OK(e, jitk_elementwise_compile(k, types, &scalar_y, &src, &m));
    jitk_module_destroy(m);
    jitk_elementwise_destroy(k);
    /* Comparisons, math functions, compound assignment, numbers of every
     * kind, the other 8-bit float and a float16 in one kernel. */
    JT_OK(e, jitk_elementwise_create(e, "T x, T y, float8_e5m2 w, float16 h, int32 n", "T z",
                                     "z = x > y ? exp(x) : max(x, y);\n"
                                     "z += w * 2; z *= n; z -= 0.5; z /= h;\n"
                                     "if (x == y || x < 1.0f || !(y >= n)) z = -x;\n"
                                     "z = z + fabsf(x) + sqrt(y) + h * x + x * h + (int)x",
                                     "mix8", NULL, &k));
    m = NULL;
    JT_OK(e, jitk_elementwise_compile(k, types, NULL, &src, &m));
    jitk_module_destroy(m);
    jitk_elementwise_destroy(k);
  }
  /* An 8-bit float input, a float32 output. */
  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "float8_e4m3fn x", "float32 y", "y = (float)x * 2", "up8",
                                   NULL, &k));
  const char *src = NULL;
  jitk_module *m = NULL;
  JT_OK(e, jitk_elementwise_compile(k, "", NULL, &src, &m));
  cr_assert(strstr(src, "jitk::float8_e4m3") != NULL);
  jitk_module_destroy(m);
  jitk_elementwise_destroy(k);
  /* The alias binds the same type. */
  JT_OK(e, jitk_elementwise_create(e, "T x", "float32 y", "y = x", "alias8", NULL, &k));
  JT_OK(e, jitk_elementwise_compile(k, "T=float8_e4m3", NULL, &src, NULL));
  cr_assert(strstr(src, "typedef jitk::float8_e4m3 T;") != NULL);
  /* No 8-bit float: no cuda_fp8.h. */
  JT_OK(e, jitk_elementwise_compile(k, "T=float32", NULL, &src, NULL));
  cr_assert(strstr(src, "cuda_fp8.h") == NULL && strstr(src, "fp8.cuh") == NULL);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
}
