/*
 * The matmul generator without a compiler: which epilogue operands the
 * wgmma kernel reads ahead at their columns (only `name[col]` reads that
 * every evaluation of the epilogue makes, and only in the kernels that
 * can hold them), and the cluster size it instantiates the tile loop
 * with. NVRTC compiles such kernels in test_kernels_matmul_plan; the GPU
 * tests check their results.
 */
#include <string.h>

#include "codegen/codegen.h"
#include "common.h"

/* A bfloat16 wgmma spec, row-major A and D, B column-major, ping-pong
 * 128 x 128 in five stages; each test sets the rest. */
static jk_mm_spec wgmma_spec(void) {
  jk_mm_spec s;
  memset(&s, 0, sizeof s);
  s.kind = JK_MM_WGMMA;
  s.a = s.b = s.c = s.d = JITK_BFLOAT16;
  s.acc = JITK_FLOAT32;
  s.a_k = true;
  s.d_row = true;
  s.stages = 5;
  s.bn = 128;
  s.arow = 128;
  s.pingpong = true;
  s.cluster = 1;
  return s;
}

/* The source of spec `s` with `epilogue` over `params`, and one output
 * of `out_expr` when it is not NULL. The caller frees it. */
static char *generate(jitk_engine *e, const jk_mm_spec *s, const char *params, const char *epilogue,
                      const char *out_expr, const char *preamble) {
  jk_param_list pl;
  memset(&pl, 0, sizeof pl);
  JT_OK(e, jk_params_parse(e, params, "epilogue_params", false, &pl));
  jitk_matmul_output out = {"aux", JITK_FLOAT32, out_expr, 64, 64 * 64};
  jk_mm_source_in in = {"mm", s, epilogue, &pl, preamble, &out, out_expr ? 1 : 0, NULL, 0};
  char *src = NULL;
  JT_OK(e, jk_mm_generate(e, &in, &src));
  jk_params_free(e, &pl);
  return src;
}

static bool reads_ahead(const char *src, const char *vec) { return strstr(src, vec) != NULL; }

Test(matmul_gen, column_operands_read_ahead) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_mm_spec s = wgmma_spec();
  static const struct {
    const char *epilogue;
    bool ahead;
  } cases[] = {
      {"acc + bias[col]", true},
      {"relu(acc + bias [ col ]) * 2", true},
      {"gelu(acc + bias[col]) + bias[(col + 1) % 7]", true},
      /* Reads the epilogue may skip or never makes. */
      {"row < 3 ? acc + bias[col] : acc", false},
      {"acc > 0 && bias[col] > 0 ? acc : 0", false},
      {"acc + (T)sizeof(bias[col])", false},
      {"acc + bias[col] /* a comment */", false},
      /* Other indices. */
      {"acc + bias[col + 1]", false},
      {"acc + bias[row]", false},
      {"acc + bias[column]", false},
      {"acc + bias[row * 4 + col]", false},
      {"acc", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *src = generate(e, &s, "raw float32 bias", cases[i].epilogue, NULL, NULL);
    cr_assert(reads_ahead(src, "col_vec<float, 128> _jk_cv0;") == cases[i].ahead, "case %zu: %s", i,
              cases[i].epilogue);
    cr_assert(reads_ahead(src, "_jk_rs, _jk_pre);") == cases[i].ahead, "case %zu", i);
    if (cases[i].ahead) {
      cr_assert(strstr(src, "const float _jk_h0 = _jk_cv0.cur[_jk_slot & 1];") != NULL, "case %zu",
                i);
      cr_assert(strstr(src, "const auto &bias = _jk_cw0;") != NULL, "case %zu", i);
    }
    jk_free(e, src);
  }
  /* A read in an output's expression counts; two operands, each its own;
   * a scalar operand never; the operand's own type (a placeholder's is
   * the accumulator's). */
  char *src = generate(e, &s, "raw bfloat16 b, raw float32 g, float32 k", "acc * k",
                       "acc + b[col] * g[col]", NULL);
  cr_assert(strstr(src, "col_vec<__nv_bfloat16, 128> _jk_cv0;") != NULL, "%s", src);
  cr_assert(strstr(src, "col_vec<float, 128> _jk_cv1;") != NULL, "%s", src);
  cr_assert(strstr(src, "_jk_cv2") == NULL, "%s", src);
  jk_free(e, src);
  /* A macro of the preamble might hide a condition: nothing read ahead. */
  src = generate(e, &s, "raw float32 bias", "acc + bias[col]", NULL,
                 "#define SEL(c, a, b) ((c) ? (a) : (b))\n");
  cr_assert(strstr(src, "col_vec") == NULL, "%s", src);
  jk_free(e, src);
  /* Kernels that do not read ahead: swapped, measuring without. */
  jk_mm_spec t = s;
  t.swap = true;
  t.bn = 16;
  t.pingpong = false;
  src = generate(e, &t, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(strstr(src, "col_vec") == NULL, "swapped");
  jk_free(e, src);
  /* A split kernel's last slice of each tile runs the epilogue as an
   * unsplit kernel does, reading ahead as well. */
  t = s;
  t.split = true;
  src = generate(e, &t, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(strstr(src, "col_vec<float, 128> _jk_cv0;") != NULL, "split: %s", src);
  jk_free(e, src);
  t = s;
  t.no_col_vecs = true;
  src = generate(e, &t, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(strstr(src, "col_vec") == NULL, "without");
  jk_free(e, src);
  /* The cooperative 128 x 256 tile holds 256 columns. */
  t = s;
  t.bn = 256;
  t.pingpong = false;
  t.stages = 3;
  src = generate(e, &t, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(strstr(src, "col_vec<float, 256> _jk_cv0;") != NULL, "%s", src);
  jk_free(e, src);
  jitk_engine_destroy(e);
}

/* Whether the value lambda computes every element and selects (true) or
 * branches around the elements outside D (false). */
static bool selects(const char *src) {
  const bool sel = strstr(src, "const bool _jk_in = row < _jk_m && col < _jk_n;") != NULL;
  const bool branch = strstr(src, "if (row >= _jk_m || col >= _jk_n) {") != NULL;
  cr_assert(sel != branch, "%s", src);
  return sel;
}

/* Elements outside D are computed and dropped only when computing them
 * reads no memory: the operands read are read ahead at `col`, C is not
 * read, no preamble, outputs and reductions wait in the reduction object. */
Test(matmul_gen, values_outside_d_selected_only_without_reads) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_mm_spec s = wgmma_spec();
  static const struct {
    const char *params, *epilogue, *out, *preamble;
    bool select;
  } cases[] = {
      {"raw float32 bias", "gelu(acc + bias[col])", "acc + bias[col]", NULL, true},
      {"", "acc", NULL, NULL, true},
      {"float32 k", "relu(acc) * k", "acc * k", NULL, true},
      {"", "row < 3 ? acc : 0", NULL, NULL, true},
      {"raw float32 bias", "acc", NULL, NULL, true},
      /* Reads of memory outside D. */
      {"raw float32 bias", "acc + bias[row]", NULL, NULL, false},
      {"raw float32 bias", "acc + bias[col] + bias[(col + 1) % 7]", NULL, NULL, false},
      {"raw float32 bias", "acc", "acc + bias[row]", NULL, false},
      {"raw float32 bias", "acc + (row < 3 ? bias[col] : 0)", NULL, NULL, false},
      {"raw float32 bias", "acc + bias[col]", NULL, "__device__ float t[4];\n", false},
      {"raw float32 bias, raw float32 g", "acc + bias[col] + g[col]", "acc * g[row]", NULL, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *src =
        generate(e, &s, cases[i].params, cases[i].epilogue, cases[i].out, cases[i].preamble);
    cr_assert(selects(src) == cases[i].select, "case %zu: %s", i, cases[i].epilogue);
    if (cases[i].select)
      cr_assert(
          strstr(src, cases[i].out
                          ? "if (!_jk_in) _jk_rs.none();"
                          : "return _jk_in ? _jk_r : static_cast<__nv_bfloat16>(0.f);") != NULL,
          "case %zu: %s", i, src);
    jk_free(e, src);
  }
  /* A plan with C branches: an execution's beta, a parameter, decides
   * whether C is read (never with beta = 0), so C may be read. */
  jk_mm_spec t = s;
  t.has_c = true;
  char *src = generate(e, &t, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(!selects(src));
  cr_assert(strstr(src, "if (_jk_beta != 0.0)\n      acc += static_cast<T>(_jk_beta) *") != NULL,
            "%s", src);
  jk_free(e, src);
  /* A column-major D stores its outputs from the lambda: a branch. */
  t = s;
  t.d_row = false;
  src = generate(e, &t, "", "acc", "acc * 2", NULL);
  cr_assert(!selects(src));
  jk_free(e, src);
  jitk_engine_destroy(e);
}

Test(matmul_gen, cluster_size_reaches_the_tile_loop) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_mm_spec s = wgmma_spec();
  /* <KIND, A_MN, B_MN, BN, STAGES, PP, STAGING, ROWS, PROMOTE, CL, SERIAL, DRAIN, PH>. */
  char *src = generate(e, &s, "", "acc", NULL, NULL);
  cr_assert(
      strstr(
          src,
          "gemm<1, false, false, 128, 5, true, 32768, true, false, 1, false, true, 1, false>(") !=
          NULL,
      "%s", src);
  jk_free(e, src);
  s.cluster = 2;
  src = generate(e, &s, "", "acc", NULL, NULL);
  cr_assert(
      strstr(
          src,
          "gemm<1, false, false, 128, 5, true, 32768, true, false, 2, false, true, 1, false>(") !=
          NULL,
      "%s", src);
  jk_free(e, src);
  /* Rows the consumers store themselves (JITK_MM_DRAIN=0, for measuring). */
  s.no_drain = true;
  src = generate(e, &s, "", "acc", NULL, NULL);
  cr_assert(
      strstr(
          src,
          "gemm<1, false, false, 128, 5, true, 32768, true, false, 2, false, false, 1, false>(") !=
          NULL,
      "%s", src);
  jk_free(e, src);
  jitk_engine_destroy(e);
}

/* Split-K on wgmma sums the slices inside the kernel (SERIAL, with the
 * slices' copies and the counters as parameters); FFMA and mma.sync
 * plans keep the fix-up kernel NAME_sk. Either way the epilogue, its
 * scales and the amax are applied once, to the sum. */
Test(matmul_gen, split_k_sums_in_the_wgmma_kernel) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_mm_spec s = wgmma_spec();
  s.split = true;
  char *src = generate(e, &s, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(
      strstr(src,
             "gemm<1, false, false, 128, 5, true, 32768, true, false, 1, true, true, 1, false>(") !=
          NULL,
      "%s", src);
  cr_assert(strstr(src, "unsigned int *__restrict__ _jk_count") != NULL, "%s", src);
  cr_assert(
      strstr(src, "_jk_work, _jk_splits, _jk_ws, _jk_count, _jk_ashift, _jk_fa, _jk_m, _jk_n") !=
          NULL,
      "%s", src);
  cr_assert(strstr(src, "_sk(") == NULL, "no fix-up kernel: %s", src);
  jk_free(e, src);
  s.kind = JK_MM_SIMT;
  src = generate(e, &s, "raw float32 bias", "acc + bias[col]", NULL, NULL);
  cr_assert(strstr(src, "_sk(") != NULL, "the FFMA plan's fix-up: %s", src);
  cr_assert(strstr(src, "_jk_count") == NULL, "%s", src);
  jk_free(e, src);
  jitk_engine_destroy(e);
}
