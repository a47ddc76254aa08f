/*
 * Matmul plans without a GPU: the kernel each description gets (tensor
 * cores where 16-byte staging is possible: wgmma on sm_90, mma.sync on
 * sm_80; FFMA otherwise), every dtype pair compiling for sm_90 (and the
 * mma.sync kernels for sm_80) with a C and an epilogue, the epilogue's
 * errors citing its text, and descriptions refused with a clear message;
 * split-K for decode shapes (the split chosen, every kind compiling with
 * it, bad splits refused at creation, the tuning choice's round trip).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kernels/matmul.h"

static void expect_kind(jitk_engine *e, const jitk_matmul_desc *d, const char *kind,
                        const char *what) {
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, d, &p));
  char buf[256];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strncmp(buf, kind, strlen(kind)) == 0, "%s: %s", what, buf);
  jitk_matmul_destroy(p);
}

/* Plan d's description contains `want`. */
static void expect_described(jitk_engine *e, const jitk_matmul_desc *d, const char *want) {
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, want) != NULL, "no \"%s\" in: %s", want, buf);
  jitk_matmul_destroy(p);
}

Test(matmul_plan, kernel_choice_sm80) {
  jitk_engine *e = jt_compile_engine("sm_80");
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 4096);
  expect_kind(e, &d,
              "tensor cores bfloat16 m16n8k16 (mma.sync), float32 accumulation, tile "
              "128x256x64, 3 stages",
              "bf16, large");
  d.n = 512;
  expect_kind(e, &d,
              "tensor cores bfloat16 m16n8k16 (mma.sync), float32 accumulation, tile "
              "128x128x32, 4 stages",
              "bf16, narrow");
  d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  d.compute = JITK_COMPUTE_TF32;
  expect_kind(e, &d, "tensor cores tf32 m16n8k8 (mma.sync)", "tf32");
  d = jt_matmul_desc(JITK_FLOAT16, 301, 264, 136);
  d.b_order = JITK_COL_MAJOR;
  d.has_c = true;
  d.beta = 0.5;
  d.epilogue = "gelu(acc) + row - col";
  expect_kind(e, &d, "tensor cores float16 m16n8k16 (mma.sync)", "f16, B column-major, C");
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.a_order = JITK_COL_MAJOR; /* mma.sync stages A K-major only */
  expect_kind(e, &d, "FFMA", "bf16, A column-major");
  d = jt_matmul_desc(JITK_FLOAT16, 64, 64, 100);
  d.lda = d.ldb = 104; /* cp.async chunks would straddle K */
  expect_kind(e, &d, "FFMA", "f16, k % 8 != 0");
  jitk_engine_destroy(e);
}

Test(matmul_plan, kernel_choice) {
  jitk_engine *e = jt_compile_engine("sm_90");
  /* Long K takes the cooperative 128 x 256 tile, short K ping-pong. */
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 4096);
  expect_kind(e, &d,
              "tensor cores bfloat16 m64nNk16 (wgmma, sm_90a), float32 accumulation, "
              "tile 128x256x64, 3 stages (TMA), persistent, 1 producer and 2 consumer "
              "warpgroups (cooperative)",
              "bf16, large");
  d.k = 1024;
  expect_kind(e, &d,
              "tensor cores bfloat16 m64nNk16 (wgmma, sm_90a), float32 accumulation, "
              "tile 128x128x64, 5 stages (TMA), persistent, 1 producer and 2 consumer "
              "warpgroups (ping-pong)",
              "bf16, K = 1024");
  /* tf32 too: K-steps of 32 (a row-major B swaps: tf32_row_major_b_swaps). */
  d = jt_matmul_desc(JITK_FLOAT32, 4096, 4096, 4096);
  d.compute = JITK_COMPUTE_TF32;
  d.b_order = JITK_COL_MAJOR;
  expect_kind(e, &d,
              "tensor cores tf32 m64nNk8 (wgmma, sm_90a), float32 accumulation, tile 128x256x32, "
              "3 stages (TMA), persistent, 1 producer and 2 consumer warpgroups (cooperative)",
              "tf32, large");
  /* Long K where 128 x 256 tiles would leave more of the last round of
   * tiles idle (688 tiles on 132 multiprocessors against 1376). */
  d = jt_matmul_desc(JITK_BFLOAT16, 2048, 11008, 4096);
  expect_kind(e, &d,
              "tensor cores bfloat16 m64nNk16 (wgmma, sm_90a), float32 accumulation, "
              "tile 128x128x64, 5 stages",
              "bf16, 2048 x 11008 x 4096");
  /* Long K whose D rows are off 16 bytes (odd N): the threads store D,
   * and ping-pong runs that epilogue beside the other consumer's MMAs. */
  d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4095, 4096);
  expect_kind(e, &d,
              "tensor cores bfloat16 m64nNk16 (wgmma, sm_90a), float32 accumulation, "
              "tile 128x128x64, 5 stages (TMA), persistent, 1 producer and 2 consumer "
              "warpgroups (ping-pong)",
              "bf16, 4096 x 4095 x 4096");
  d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 4096);
  d.ldd = 4100; /* rows 8 bytes off in turn */
  expect_described(e, &d, "tile 128x128x64, 5 stages");
  d.ldd = 4104; /* rows on 16 bytes: TMA stores D */
  expect_described(e, &d, "tile 128x256x64, 3 stages");
  /* The GPU test's shape for this choice (test_matmul's
   * unaligned_rows_every_layout): cooperative where D's rows are aligned. */
  d = jt_matmul_desc(JITK_BFLOAT16, 1920, 1025, 4104);
  expect_described(e, &d, "tile 128x128x64, 5 stages");
  d.ldd = 1032;
  expect_described(e, &d, "tile 128x256x64, 3 stages");
  d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 4096);
  setenv("JITK_MM_SCHEDULE", "pingpong", 1);
  expect_kind(e, &d,
              "tensor cores bfloat16 m64nNk16 (wgmma, sm_90a), float32 accumulation, "
              "tile 128x128x64, 5 stages",
              "bf16, ping-pong forced");
  unsetenv("JITK_MM_SCHEDULE");
  /* Clusters of two, for measuring: the description says so. */
  setenv("JITK_MM_CLUSTER", "2", 1);
  expect_described(e, &d, "; clusters of 2 blocks sharing B (TMA multicast)");
  unsetenv("JITK_MM_CLUSTER");
  d.n = 4096;
  d.d_order = JITK_COL_MAJOR;
  expect_kind(e, &d, "tensor cores bfloat16", "bf16, D column-major");
  d.d_order = JITK_ROW_MAJOR;
  d.b_order = JITK_COL_MAJOR;
  expect_kind(e, &d, "tensor cores bfloat16", "bf16, B column-major");
  d = jt_matmul_desc(JITK_FLOAT16, 301, 264, 136);
  expect_kind(e, &d, "tensor cores float16", "f16, odd m");
  /* Rows off 16 bytes stay on wgmma: the operand is copied onto 16 bytes
   * at each execution (the module's _pad kernel). */
  d.k = 100;
  expect_kind(e, &d, "tensor cores float16 m64nNk16 (wgmma", "f16, k % 8 != 0");
  d.k = 0; /* nothing to multiply: no tensor map can describe it */
  expect_kind(e, &d, "FFMA", "f16, k = 0");
  d = jt_matmul_desc(JITK_FLOAT16, 64, 100, 64);
  d.n = 100;
  expect_kind(e, &d, "tensor cores float16 m64nNk16 (wgmma", "f16, row-major B, n % 8 != 0");
  d = jt_matmul_desc(JITK_BFLOAT16, 4095, 4095, 4095);
  expect_kind(e, &d, "tensor cores bfloat16 m64nNk16 (wgmma", "bf16, 4095^3");
  d = jt_matmul_desc(JITK_FLOAT32, 64, 63, 65);
  d.compute = JITK_COMPUTE_TF32;
  d.a_order = JITK_COL_MAJOR;
  expect_kind(e, &d, "tensor cores tf32 m64nNk8 (wgmma", "tf32, odd sizes, A column-major");
  d = jt_matmul_desc(JITK_FLOAT16, 64, 100, 64);
  d.b_order = JITK_COL_MAJOR;
  expect_kind(e, &d, "tensor cores", "f16, column-major B, any n");
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.a_order = JITK_COL_MAJOR;
  expect_kind(e, &d, "tensor cores bfloat16 m64nNk16 (wgmma", "bf16, A column-major");
  d = jt_matmul_desc(JITK_FLOAT16, 64, 64, 100);
  d.lda = d.ldb = 104; /* padded rows: TMA fills the K tail */
  expect_kind(e, &d, "tensor cores float16 m64nNk16 (wgmma", "f16, k % 8 != 0, padded rows");
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.lda = 68; /* not a multiple of 8 elements: copied onto 16 bytes */
  expect_kind(e, &d, "tensor cores bfloat16 m64nNk16 (wgmma", "bf16, lda % 8 != 0");
  d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  expect_kind(e, &d, "FFMA (simt) float32, float32", "f32");
  d.compute = JITK_COMPUTE_TF32;
  expect_kind(e, &d, "tensor cores tf32 m64nNk8 (wgmma, sm_90a)", "tf32");
  char buf[512];
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "B row-major (transposed first)") != NULL, "%s", buf);
  cr_assert(strstr(buf, "A row-major,") != NULL, "%s", buf);
  const char *src;
  JT_OK(e, jitk_matmul_source(p, &src));
  cr_assert(strstr(src, "matmul_tr(") != NULL, "tf32 with row-major B has its transpose: %s", src);
  cr_assert(strstr(src, "matmul_pad(") != NULL, "wgmma modules copy operands off 16 bytes: %s",
            src);
  jitk_matmul_destroy(p);
  d.b_order = JITK_COL_MAJOR;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "transposed") == NULL, "%s", buf);
  jitk_matmul_destroy(p);
  d.a_order = JITK_COL_MAJOR;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "A column-major (transposed first), B column-major,") != NULL, "%s", buf);
  JT_OK(e, jitk_matmul_source(p, &src));
  cr_assert(strstr(src, "matmul_tr(") != NULL, "%s", src);
  jitk_matmul_destroy(p);
  d.a_order = JITK_ROW_MAJOR;
  d.b_order = JITK_ROW_MAJOR;
  d.n = 66; /* transposed first into rows that start on 16 bytes */
  expect_kind(e, &d, "tensor cores tf32 m64nNk8 (wgmma", "tf32, n % 4 != 0");
  d = jt_matmul_desc(JITK_FLOAT64, 64, 64, 64);
  expect_kind(e, &d, "FFMA (simt) float64, float64", "f64");
  jitk_engine_destroy(e);
}

/* The mma.sync kernels, which sm_90 engines no longer pick. */
Test(matmul_plan, mma_sync_compiles_for_sm80) {
  jitk_engine *e = jt_compile_engine("sm_80");
  const jitk_dtype in[] = {JITK_FLOAT16, JITK_BFLOAT16, JITK_FLOAT32};
  for (int i = 0; i < 3; i++) {
    jitk_matmul_desc d = jt_matmul_desc(in[i], 512, 512, 512);
    d.compute = in[i] == JITK_FLOAT32 ? JITK_COMPUTE_TF32 : JITK_COMPUTE_DEFAULT;
    d.epilogue = "relu(acc + bias[col])";
    d.epilogue_params = "raw T bias";
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    const char *src;
    JT_OK(e, jitk_matmul_source(p, &src));
    cr_assert(strstr(src, "jitk::mm::mma_gemm<") != NULL, "%s", src);
    jitk_matmul_destroy(p);
  }
  jitk_engine_destroy(e);
}

Test(matmul_plan, every_dtype_pair_compiles) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const jitk_dtype in[] = {JITK_FLOAT16, JITK_BFLOAT16, JITK_FLOAT32, JITK_FLOAT64};
  const jitk_dtype out[] = {JITK_FLOAT16, JITK_BFLOAT16, JITK_FLOAT32, JITK_FLOAT64};
  for (int i = 0; i < 4; i++)
    for (int o = 0; o < 4; o++) {
      jitk_matmul_desc d = jt_matmul_desc(in[i], 512, 512, 512);
      d.d_dtype = out[o];
      d.has_c = o % 2;
      d.c_dtype = out[o];
      d.beta = 1;
      d.epilogue = "gelu(acc + bias[col]) * s";
      d.epilogue_params = "raw bfloat16 bias, float32 s";
      jitk_matmul *p = NULL;
      JT_OK(e, jitk_matmul_create(e, &d, &p));
      const char *src;
      JT_OK(e, jitk_matmul_source(p, &src));
      cr_assert(strstr(src, "#line 1 \"epilogue\"") != NULL);
      cr_assert(strstr(src, "jitk::mm::rd<__nv_bfloat16,") != NULL, "%s", src);
      jitk_matmul_destroy(p);
    }
  jitk_engine_destroy(e);
}

Test(matmul_plan, errors) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul *p = NULL;
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.epilogue = "acc + + ;";
  JT_FAILS(e, JITK_ERR_COMPILE, "epilogue:1:", jitk_matmul_create(e, &d, &p));
  d.epilogue = "acc + undefined_name";
  JT_FAILS(e, JITK_ERR_COMPILE, "epilogue:1:7: error", jitk_matmul_create(e, &d, &p));
  /* A missing last operand: the closing text is on the epilogue's line. */
  d.epilogue = "acc +";
  JT_FAILS(e, JITK_ERR_COMPILE, "epilogue:1:6: error: expected an expression",
           jitk_matmul_create(e, &d, &p));
  cr_assert(strstr(jitk_errmsg(e), "matmul.cu(") == NULL, "%s", jitk_errmsg(e));
  d.epilogue = "acc\n#line 1 \"operation\"";
  JT_FAILS(e, JITK_ERR_PARSE, "epilogue:2:1: #line directives", jitk_matmul_create(e, &d, &p));
  d.epilogue = "acc";
  d.preamble = "# 4 \"x\"";
  JT_FAILS(e, JITK_ERR_PARSE, "preamble:1:1: #line directives", jitk_matmul_create(e, &d, &p));
  d.preamble = NULL;
  d.epilogue = "acc + b[col]";
  d.epilogue_params = "raw U b";
  JT_FAILS(e, JITK_ERR_PARSE, "placeholder U", jitk_matmul_create(e, &d, &p));
  d.epilogue_params = "raw T b, raw T b";
  JT_FAILS(e, JITK_ERR_PARSE, "^", jitk_matmul_create(e, &d, &p));
  /* An operand named as one of the epilogue's own was shadowed by it: the
   * plan was made, and its epilogue read the row, the column, the batch
   * or the accumulator instead of the value passed. */
  static const char *const own[] = {"row", "col", "batch", "acc", "value"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
    char params[64], epi[64], needle[96];
    snprintf(params, sizeof params, "float32 %s", own[i]);
    snprintf(epi, sizeof epi, "acc + %s", own[i]);
    snprintf(needle, sizeof needle, "operand `%s` has the name of the epilogue's own", own[i]);
    d.epilogue_params = params;
    d.epilogue = epi;
    JT_FAILS(e, JITK_ERR_PARSE, needle, jitk_matmul_create(e, &d, &p));
  }
  d.epilogue = "acc + b[col]";
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.b_dtype = JITK_FLOAT16;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "mixed inputs", jitk_matmul_create(e, &d, &p));
  /* B's dtype none of the table's (found by fuzz_matmul: the message read
   * the name of a dtype that does not exist). */
  d.b_dtype = JITK_DTYPE_NONE;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "B is not a dtype", jitk_matmul_create(e, &d, &p));
  d.b_dtype = (jitk_dtype)1000;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "B is not a dtype", jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_INT32, 64, 64, 64);
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "float16, bfloat16, float32 or float64",
           jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  d.lda = 10;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "leading dimension must be at least 64",
           jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_FLOAT16, 64, 64, 64);
  d.compute = JITK_COMPUTE_TF32;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "tf32 compute takes float32",
           jitk_matmul_create(e, &d, &p));
  /* Layouts whose farthest element lies past 2^63 bytes: the packed batch
   * stride of D overflowed (UBSan, issue 11), and so would a leading
   * dimension given that large. */
  d = jt_matmul_desc(JITK_FLOAT32, 3037000500, 3037000500, 16);
  d.batch = 4;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "matmul: D (3037000500 x 3037000500",
           jitk_matmul_create(e, &d, &p));
  cr_assert(strstr(jitk_errmsg(e), "spans more than 2^63 bytes") != NULL, "%s", jitk_errmsg(e));
  d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  d.lda = INT64_MAX / 32;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "A (64 x 64", jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_FLOAT64, 64, 64, 64);
  d.batch = 3;
  d.stride_b = INT64_MAX / 4;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "B (64 x 64", jitk_matmul_create(e, &d, &p));
  /* alpha and beta are literals of the source: NaN and infinity failed
   * inside NVRTC (issue 11). beta counts only with C. */
  d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  d.alpha = NAN;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "alpha is nan; it must be a finite number",
           jitk_matmul_create(e, &d, &p));
  d.alpha = 1;
  d.beta = -INFINITY;
  d.has_c = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "beta is -inf", jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_FLOAT32, 64, 64, 64);
  d.batch = 0;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "batch at least 1", jitk_matmul_create(e, &d, &p));
  d.batch = 1;
  d.name = "2x";
  JT_FAILS(e, JITK_ERR_PARSE, "C identifier", jitk_matmul_create(e, &d, &p));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "NULL", jitk_matmul_create(e, NULL, &p));
  /* A compile-only engine plans but does not execute. */
  d.name = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "", jitk_matmul_execute(p, NULL, &d, &d, NULL, &d, NULL, 0));
  jitk_matmul_destroy(p);
  jitk_matmul_destroy(NULL);
  jitk_engine_destroy(e);
}

/* The wgmma kernel's cooperative schedule, chosen for measuring. */
Test(matmul_plan, cooperative_schedule) {
  setenv("JITK_MM_SCHEDULE", "cooperative", 1);
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 4096);
  d.epilogue = "relu(acc + bias[col])";
  d.epilogue_params = "raw T bias";
  expect_kind(e, &d,
              "tensor cores bfloat16 m64nNk16 (wgmma, sm_90a), float32 accumulation, "
              "tile 128x256x64, 3 stages (TMA), persistent, 1 producer and 2 consumer "
              "warpgroups (cooperative)",
              "bf16, cooperative");
  jitk_engine_destroy(e);
}

static size_t count_of(const char *s, const char *what) {
  size_t n = 0;
  for (const char *p = strstr(s, what); p != NULL; p = strstr(p + 1, what)) n++;
  return n;
}

/* alpha and beta are the kernels' parameters: plans that differ only in
 * them have the same source, so a new value compiles nothing. BLAS's rule
 * holds at run time: every read of C is under a test of beta, so a beta of
 * 0 leaves it unread (a C of NaN or never written then gives the D of
 * alpha * A * B; the emulated and GPU tests run it). Every kind of
 * kernel. */
Test(matmul_plan, alpha_and_beta_are_parameters_and_beta_zero_reads_no_c) {
  static const char *const archs[] = {"sm_90", "sm_80"};
  for (int a = 0; a < 2; a++) {
    jitk_engine *e = jt_compile_engine(archs[a]);
    const jitk_dtype dts[] = {JITK_BFLOAT16, JITK_FLOAT32, JITK_FLOAT64};
    for (int t = 0; t < 3; t++) {
      char *first = NULL;
      for (int v = 0; v < 3; v++) {
        jitk_matmul_desc d = jt_matmul_desc(dts[t], 256, 256, 128);
        d.has_c = true;
        d.alpha = v == 2 ? 0.25 : 1.0;
        d.beta = v == 0 ? 0.0 : -0.5;
        jitk_matmul *p = NULL;
        JT_OK(e, jitk_matmul_create(e, &d, &p));
        const char *src = NULL;
        JT_OK(e, jitk_matmul_source(p, &src));
        char what[256];
        JT_OK(e, jitk_matmul_describe(p, what, sizeof what));
        size_t reads = count_of(src, "(_jk_c + batch * _jk_sc)[");
        cr_assert(reads > 0 && reads == count_of(src, "if (_jk_beta != 0.0)\n      acc += "),
                  "%s, %s: %zu reads of C, not each under a test of beta", archs[a], what, reads);
        cr_assert(strstr(src, "double _jk_alpha") != NULL && strstr(src, "0.25") == NULL,
                  "%s, %s: alpha is not a parameter", archs[a], what);
        if (first == NULL)
          first = strdup(src);
        else
          cr_assert_str_eq(src, first, "%s, %s: alpha %g, beta %g changed the source", archs[a],
                           what, d.alpha, d.beta);
        jitk_matmul_destroy(p);
      }
      free(first);
    }
    jitk_engine_destroy(e);
  }
}

/* Outputs besides D and reductions of the epilogue's values: a GELU
 * forward pass that keeps its pre-activation and a ReLU mask, and the
 * bias gradient, row sums and the amax of a backward pass, on every kind
 * of kernel. */
static const jitk_matmul_output fwd_outs[] = {
    {"pre", JITK_BFLOAT16, "acc + bias[col]", 0, 0},
    {"mask", JITK_UINT8, "value > (T)0", 0, 0},
};
static const jitk_matmul_reduction bwd_reds[] = {
    {"dbias", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS},
    {"rows", JITK_FLOAT64, "value * value", JITK_REDUCE_SUM, JITK_REDUCE_COLUMNS},
    {"amax", JITK_FLOAT32, "fabs(value)", JITK_REDUCE_MAX, JITK_REDUCE_ALL},
};

static jitk_matmul_desc extras_desc(jitk_dtype t) {
  jitk_matmul_desc d = jt_matmul_desc(t, 300, 264, 136);
  d.epilogue = "gelu(acc + bias[col])";
  d.epilogue_params = "raw float32 bias";
  d.outputs = fwd_outs;
  d.num_outputs = 2;
  d.reductions = bwd_reds;
  d.num_reductions = 3;
  return d;
}

Test(matmul_plan, outputs_and_reductions_compile_on_every_kind) {
  static const char *const archs[] = {"sm_90", "sm_80"};
  for (int a = 0; a < 2; a++) {
    jitk_engine *e = jt_compile_engine(archs[a]);
    const jitk_dtype dts[] = {JITK_BFLOAT16, JITK_FLOAT16, JITK_FLOAT32, JITK_FLOAT64};
    for (int t = 0; t < 4; t++) {
      jitk_matmul_desc d = extras_desc(dts[t]);
      jitk_matmul *p = NULL;
      JT_OK(e, jitk_matmul_create(e, &d, &p));
      const char *src = NULL;
      JT_OK(e, jitk_matmul_source(p, &src));
      cr_assert(strstr(src, "#line 1 \"output pre\"") != NULL);
      cr_assert(strstr(src, "#line 1 \"reduction amax\"") != NULL);
      cr_assert(strstr(src, "matmul_r2b") != NULL, "the amax's second kernel");
      cr_assert(strstr(src, "matmul_r1b") == NULL, "rows over columns take one kernel");
      jitk_matmul_destroy(p);
    }
    jitk_engine_destroy(e);
  }
}

/* Reductions of every operation and axis, several at once, of 16-bit,
 * float32 and float64 results. */
static const jitk_matmul_reduction all_reds[] = {
    {"s_rows", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS},
    {"x_rows", JITK_FLOAT32, "value", JITK_REDUCE_MAX, JITK_REDUCE_ROWS},
    {"n_rows", JITK_BFLOAT16, "value", JITK_REDUCE_MIN, JITK_REDUCE_ROWS},
    {"s_cols", JITK_FLOAT64, "value * value", JITK_REDUCE_SUM, JITK_REDUCE_COLUMNS},
    {"x_cols", JITK_FLOAT32, "value", JITK_REDUCE_MAX, JITK_REDUCE_COLUMNS},
    {"n_cols", JITK_FLOAT32, "value + row", JITK_REDUCE_MIN, JITK_REDUCE_COLUMNS},
    {"s_all", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ALL},
    {"n_all", JITK_FLOAT16, "value", JITK_REDUCE_MIN, JITK_REDUCE_ALL},
};

/* Whether plan d's source folds its reductions per tile (the wgmma kernels
 * not swapped: codegen.h's jk_mm_tile_reduces) or writes
 * every term to its workspace; it compiles either way. */
static void expect_folds(jitk_engine *e, const jitk_matmul_desc *d, bool folds, const char *what) {
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, d, &p));
  const char *src = NULL;
  JT_OK(e, jitk_matmul_source(p, &src));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  const bool has = strstr(src, "struct _jk_reds") != NULL;
  cr_assert(has == folds, "%s (%s): the reductions %s per tile", what, desc,
            has ? "fold" : "do not fold");
  cr_assert((strstr(src, "_jk_w0[(batch * _jk_m + row) * _jk_n + col]") != NULL) == !folds,
            "%s: every term to the workspace only where the tile does not fold them", what);
  if (folds && d->num_reductions == sizeof all_reds / sizeof all_reds[0]) {
    cr_assert(strstr(src, "red_tile_over_rows<jitk::mm::op_max>(g1,") != NULL, "%s", what);
    cr_assert(strstr(src, "red_tile_over_cols<jitk::mm::op_min>(q5,") != NULL, "%s", what);
    cr_assert(strstr(src, "red_tile_over_cols<jitk::mm::op_sum>(q6,") != NULL, "%s", what);
    cr_assert(strstr(src, "_jk_rs.none();") != NULL, "%s", what);
  }
  jitk_matmul_destroy(p);
}

/* The wgmma kernels fold their reductions per tile for sm_90a: ping-pong
 * and cooperative (256 columns) tiles, D row-major (TMA or staged rows)
 * and column-major, 16-bit and tf32 inputs, split plans too (each tile's
 * last slice runs the epilogue); swapped plans, and mma.sync on sm_80,
 * keep writing every term. */
Test(matmul_plan, reductions_fold_per_tile_on_wgmma) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul_desc d = extras_desc(JITK_BFLOAT16);
  d.reductions = all_reds;
  d.num_reductions = sizeof all_reds / sizeof all_reds[0];
  d.batch = 3;
  expect_folds(e, &d, true, "bf16 ping-pong");
  /* examples/mlp_train_step's backward pass: dGELU and the bias gradient. */
  jitk_matmul_desc bwd = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 1024);
  bwd.b_order = JITK_COL_MAJOR;
  bwd.epilogue = "acc * dgelu(pre[row * ld + col])";
  bwd.epilogue_params = "raw bfloat16 pre, int64 ld";
  bwd.reductions = all_reds;
  bwd.num_reductions = 1;
  expect_folds(e, &bwd, true, "the backward pass's bias gradient");
  d.d_dtype = JITK_FLOAT32;
  d.d_order = JITK_COL_MAJOR;
  d.a_dtype = d.b_dtype = JITK_FLOAT16;
  expect_folds(e, &d, true, "f16, float32 D column-major");
  d = extras_desc(JITK_FLOAT32);
  d.compute = JITK_COMPUTE_TF32;
  d.reductions = all_reds;
  d.num_reductions = sizeof all_reds / sizeof all_reds[0];
  expect_folds(e, &d, true, "tf32");
  setenv("JITK_MM_SCHEDULE", "cooperative", 1);
  d = extras_desc(JITK_BFLOAT16);
  d.reductions = all_reds;
  d.num_reductions = sizeof all_reds / sizeof all_reds[0];
  d.n = 520;
  expect_folds(e, &d, true, "bf16 cooperative 128x256");
  unsetenv("JITK_MM_SCHEDULE");
  d = extras_desc(JITK_BFLOAT16);
  d.reductions = all_reds;
  d.num_reductions = sizeof all_reds / sizeof all_reds[0];
  d.m = 16;
  d.k = 4096;
  d.split_k = 3;
  setenv("JITK_MM_SWAP", "0", 1);
  expect_folds(e, &d, true, "split-K 3");
  setenv("JITK_MM_SWAP", "1", 1);
  d.m = 7;
  d.split_k = 1;
  expect_folds(e, &d, false, "swapped");
  unsetenv("JITK_MM_SWAP");
  jitk_engine_destroy(e);
  e = jt_compile_engine("sm_80");
  d = extras_desc(JITK_BFLOAT16);
  d.reductions = all_reds;
  d.num_reductions = sizeof all_reds / sizeof all_reds[0];
  expect_folds(e, &d, false, "mma.sync");
  jitk_engine_destroy(e);
}

/* Outputs besides D leave in whole rows (matmul_sm90.cuh's out_rows) from
 * the wgmma kernels that fold reductions per tile when D is row-major,
 * with or without reductions; column-major, split and swapped plans
 * write each element where it is computed. */
static void expect_out_rows(jitk_engine *e, const jitk_matmul_desc *d, bool rows,
                            const char *what) {
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, d, &p));
  const char *src = NULL;
  JT_OK(e, jitk_matmul_source(p, &src));
  const bool has = strstr(src, "jitk::mm90::out_rows(h0, o0 + b * ") != NULL;
  cr_assert(has == rows, "%s: outputs %s", what, has ? "in whole rows" : "element by element");
  cr_assert((strstr(src, "_jk_o0[batch * ") != NULL) == !rows, "%s", what);
  jitk_matmul_destroy(p);
}

Test(matmul_plan, outputs_in_whole_rows_on_wgmma) {
  jitk_engine *e = jt_compile_engine("sm_90");
  /* examples/mlp_train_step's forward pass: GELU keeping its input. */
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 1024);
  d.epilogue = "gelu(acc + b1[col])";
  d.epilogue_params = "raw float32 b1";
  static const jitk_matmul_output pre[] = {{"pre", JITK_BFLOAT16, "acc + b1[col]", 0, 0}};
  d.outputs = pre;
  d.num_outputs = 1;
  expect_out_rows(e, &d, true, "the forward pass");
  d = extras_desc(JITK_BFLOAT16);
  d.d_dtype = JITK_FLOAT32;
  expect_out_rows(e, &d, true, "bf16 and a byte mask, float32 D, with reductions");
  /* 4-, 8- and 1-byte elements of other kinds. */
  static const jitk_matmul_output wide[] = {{"pre32", JITK_FLOAT32, "acc + bias[col]", 0, 0},
                                            {"at", JITK_INT64, "row * 1000 + col", 0, 0},
                                            {"f8", JITK_FLOAT8_E4M3, "value", 0, 0}};
  d.outputs = wide;
  d.num_outputs = 3;
  expect_out_rows(e, &d, true, "float32, int64 and float8 outputs");
  d.d_order = JITK_COL_MAJOR;
  expect_out_rows(e, &d, false, "D column-major");
  jitk_engine_destroy(e);
}

Test(matmul_plan, bad_outputs_and_reductions_fail_at_creation) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul *p = NULL;
  jitk_matmul_desc d = extras_desc(JITK_BFLOAT16);
  jitk_matmul_output o[2] = {fwd_outs[0], fwd_outs[1]};
  jitk_matmul_reduction r[1] = {bwd_reds[0]};
  d.outputs = o;
  d.reductions = r;
  d.num_reductions = 1;
  o[1].name = "value";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "already has a `value`", jitk_matmul_create(e, &d, &p));
  o[1].name = "bias";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "`bias` has the name of an epilogue operand",
           jitk_matmul_create(e, &d, &p));
  o[1].name = "pre";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "two outputs or reductions are `pre`",
           jitk_matmul_create(e, &d, &p));
  o[1].name = "2x";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "not a C identifier", jitk_matmul_create(e, &d, &p));
  o[1].name = "while";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "not a C identifier", jitk_matmul_create(e, &d, &p));
  o[1].name = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "(NULL)", jitk_matmul_create(e, &d, &p));
  o[1] = fwd_outs[1];
  o[1].dtype = JITK_COMPLEX64;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "is complex64: outputs take a real dtype",
           jitk_matmul_create(e, &d, &p));
  o[1] = fwd_outs[1];
  o[1].expr = "  ";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "output `mask` has no expression",
           jitk_matmul_create(e, &d, &p));
  o[1] = fwd_outs[1];
  o[1].ld = 100; /* less than N */
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "output `mask` is 300 x 264 row-major",
           jitk_matmul_create(e, &d, &p));
  o[1] = fwd_outs[1];
  r[0].dtype = JITK_INT32;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "reduction `dbias`'s dtype must be",
           jitk_matmul_create(e, &d, &p));
  r[0] = bwd_reds[0];
  r[0].op = (jitk_reduce_op)7;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "op 7 is not SUM, MAX or MIN",
           jitk_matmul_create(e, &d, &p));
  r[0] = bwd_reds[0];
  r[0].axis = (jitk_reduce_axis)-1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "axis -1 is not ROWS, COLUMNS or ALL",
           jitk_matmul_create(e, &d, &p));
  r[0] = bwd_reds[0];
  r[0].name = "mask";
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "two outputs or reductions are `mask`",
           jitk_matmul_create(e, &d, &p));
  r[0] = bwd_reds[0];
  d.num_outputs = 9;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "at most 8 outputs", jitk_matmul_create(e, &d, &p));
  d.num_outputs = 2;
  d.reductions = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "num_reductions is 1 but reductions is NULL",
           jitk_matmul_create(e, &d, &p));
  d.reductions = r;
  /* An error in an output's expression cites it. */
  o[0].expr = "acc +* bias[col]";
  JT_FAILS(e, JITK_ERR_COMPILE, "output pre:1:", jitk_matmul_create(e, &d, &p));
  o[0] = fwd_outs[0];
  r[0].expr = "value\n#line 1 \"epilogue\"";
  JT_FAILS(e, JITK_ERR_PARSE, "reduction dbias:2:1: #line directives",
           jitk_matmul_create(e, &d, &p));
  r[0] = bwd_reds[0];
  d.struct_size = 8;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_desc_init", jitk_matmul_create(e, &d, &p));
  d.struct_size = sizeof d;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  /* Executions need a device; the operands' struct is checked first. */
  jitk_matmul_operands ops;
  memset(&ops, 0, sizeof ops);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_operands_init",
           jitk_matmul_execute_ex(p, NULL, &ops));
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* --- FP8 plans (issue 16) --- */

static const char *dtype_name(jitk_dtype t) {
  jitk_dtype_info info;
  return jitk_dtype_get_info(t, &info) == JITK_OK ? info.name : "?";
}

/* An FP8 description as cuBLASLt takes it: A row-major, B column-major. */
static jitk_matmul_desc fp8_desc(jitk_dtype a, jitk_dtype b, jitk_dtype out, int64_t m, int64_t n,
                                 int64_t k) {
  jitk_matmul_desc d = jt_matmul_desc(a, m, n, k);
  d.b_dtype = b;
  d.c_dtype = d.d_dtype = out;
  d.b_order = JITK_COL_MAJOR;
  return d;
}

/* The plan's main kernel as ptxas left it for sm_90a: no spills, and no
 * wgmma serialized (C7514, which ptxas reports when it cannot tell that a
 * wgmma's accumulators are left alone while it runs: promotion reads one
 * partial sum while the other's MMAs run). */
static void expect_clean_kernel(const jitk_matmul *p, const char *what, size_t i) {
  const jk_entry *x = p->main.entry;
  cr_assert(x != NULL && x->num_resources > 0, "%s %zu: no ptxas report", what, i);
  for (size_t r = 0; r < x->num_resources; r++)
    cr_assert(x->resources[r].spill_stores == 0 && x->resources[r].spill_loads == 0,
              "%s %zu: %s spills %zu bytes (%zu loaded)", what, i, x->resources[r].name,
              x->resources[r].spill_stores, x->resources[r].spill_loads);
  cr_assert(x->log != NULL && strstr(x->log, "ptxas") != NULL, "%s %zu: no ptxas log", what, i);
  cr_assert(strstr(x->log, "C7514") == NULL && strstr(x->log, "serialized") == NULL,
            "%s %zu: ptxas serialized the wgmma: %s", what, i, x->log);
}

/* Each of ffma_gemm's cp.async tiles (JITK_MM_FFMA_BN forces it) plans
 * and compiles in every layout, unsplit and split, with nothing spilled:
 * the description names the tile, the lane's outputs and the threads,
 * and the kernel's launch bounds ask for the tile's blocks. */
Test(matmul_plan, ffma_tiles_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const struct {
    const char *bn, *desc, *bounds;
  } tiles[] = {
      {"256", "tile 128x256x16, 16x8 per thread, 256 threads, 3 stages (cp.async)",
       "__launch_bounds__(256, 1) matmul("},
      {"64", "tile 128x64x16, 8x4 per thread, 256 threads, 3 stages (cp.async)",
       "__launch_bounds__(256, 2) matmul("},
      {"32", "tile 128x32x16, 8x4 per thread, 128 threads, 3 stages (cp.async)",
       "__launch_bounds__(128, 4) matmul("},
  };
  const jitk_order orders[][2] = {{JITK_ROW_MAJOR, JITK_ROW_MAJOR},
                                  {JITK_COL_MAJOR, JITK_ROW_MAJOR},
                                  {JITK_ROW_MAJOR, JITK_COL_MAJOR},
                                  {JITK_COL_MAJOR, JITK_COL_MAJOR}};
  for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
    setenv("JITK_MM_FFMA_BN", tiles[t].bn, 1);
    for (size_t i = 0; i < 5; i++) {
      jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 1000, 1030, 999);
      d.a_order = orders[i % 4][0];
      d.b_order = orders[i % 4][1];
      d.epilogue = "max(acc + bias[col], (T)0)";
      d.epilogue_params = "raw T bias";
      d.split_k = i == 4 ? 3 : 1;
      jitk_matmul *p = NULL;
      JT_OK(e, jitk_matmul_create(e, &d, &p));
      char buf[512];
      JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
      cr_assert(strncmp(buf, "FFMA (simt) float32, float32 accumulation, ", 43) == 0 &&
                    strstr(buf, tiles[t].desc) != NULL,
                "tile %s, case %zu: %s", tiles[t].bn, i, buf);
      cr_assert((i == 4) == (strstr(buf, "; split-K 3 (") != NULL), "%s", buf);
      const char *src;
      JT_OK(e, jitk_matmul_source(p, &src));
      cr_assert(strstr(src, "jitk::mm::ffma_gemm<jitk::mm::ffma_tile<") != NULL &&
                    strstr(src, tiles[t].bounds) != NULL,
                "tile %s: %s", tiles[t].bn, src);
      expect_clean_kernel(p, "FFMA tile, case", t * 5 + i);
      jitk_matmul_destroy(p);
    }
  }
  /* 0 keeps simt_gemm's 128 x 128 tiles; a width no tile has is ignored. */
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 4096, 4096, 4096);
  setenv("JITK_MM_FFMA_BN", "0", 1);
  expect_kind(e, &d, "FFMA (simt) float32, float32 accumulation, tile 128x128x16, 8x8 per thread",
              "JITK_MM_FFMA_BN=0");
  setenv("JITK_MM_FFMA_BN", "96", 1);
  expect_kind(e, &d, "FFMA (simt) float32, float32 accumulation, tile 128x256x16, 16x8",
              "JITK_MM_FFMA_BN=96");
  unsetenv("JITK_MM_FFMA_BN");
  jitk_engine_destroy(e);
}

/* float32 FFMA plans pick the tile and the split together from the
 * model (matmul_plan.c's ffma_time; a compile-only sm_90 engine counts
 * 132 multiprocessors): the wide tiles where they fill the GPU, the
 * narrower ones and no split where those do, a split where even they
 * leave it idle; cp.async from sm_80 on, and never for float64 or where
 * JITK_MM_WIDE=0 says so. */
Test(matmul_plan, ffma_tile_choice) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *f32 = "FFMA (simt) float32, float32 accumulation, ";
  static const struct {
    int64_t m, n, k, batch;
    const char *tile;
    int split;
    bool cluster;
  } cases[] = {
      {4096, 4096, 4096, 1, "tile 128x256x16, 16x8", 1, false},
      {2048, 2048, 2048, 1, "tile 128x256x16, 16x8", 1, false}, /* 128 tiles of 132 */
      {2000, 2000, 999, 1, "tile 128x256x16, 16x8", 1, false},
      {300, 700, 75, 13, "tile 128x256x16, 16x8", 1, false}, /* 117 tiles */
      {300, 700, 64, 2, "tile 128x32x16, 8x4", 1, false},
      /* Splits summed across clusters, cheaper than the fix-up kernel:
       * 64 tiles in 4 slices, 72 in 3, 72 in 3, 50 in 4, 72 in 3; 128 in
       * 2 where that saves only 9 % (1000^3, 1024^3), as a cluster split
       * is priced closely. */
      {512, 512, 512, 1, "tile 128x32x16, 8x4", 4, true},
      {768, 768, 768, 1, "tile 128x64x16, 8x4", 3, true},
      {1536, 1536, 1536, 1, "tile 128x256x16, 16x8", 3, true},
      {640, 640, 768, 1, "tile 128x64x16, 8x4", 4, true},
      {1536, 1536, 1024, 1, "tile 128x256x16, 16x8", 3, true},
      {1000, 1000, 1000, 1, "tile 128x64x16, 8x4", 2, true},
      {1024, 1024, 1024, 1, "tile 128x64x16, 8x4", 2, true},
      /* 264 narrow tiles in 2 slices across clusters (528 blocks, four
       * rounds of a multiprocessor's blocks) are priced at 1.1, no
       * cheaper than unsplit. */
      {1000, 1030, 999, 1, "tile 128x32x16, 8x4", 1, false},
      /* The wide tile in 4 slices across clusters ran slow: 2 through
       * the fix-up kernel. */
      {1024, 2048, 2048, 1, "tile 128x256x16, 16x8", 2, false},
      {4096, 512, 2048, 1, "tile 128x256x16, 16x8", 2, false},
      /* Too few blocks for clusters (128 of 132): the fix-up kernel. */
      {1024, 1024, 4096, 1, "tile 128x256x16, 16x8", 4, false},
      /* Too many (96 wide tiles in 4 slices, 384 blocks, 3 rounds of
       * one a multiprocessor): no split. */
      {768, 4096, 2048, 1, "tile 128x256x16, 16x8", 1, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, cases[i].m, cases[i].n, cases[i].k);
    d.batch = cases[i].batch;
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    char buf[512], split[64];
    JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
    snprintf(split, sizeof split, "; split-K %d (", cases[i].split);
    cr_assert(strncmp(buf, f32, strlen(f32)) == 0 && strstr(buf, cases[i].tile) != NULL &&
                  (cases[i].split > 1) == (strstr(buf, "; split-K ") != NULL) &&
                  (cases[i].split == 1 || strstr(buf, split) != NULL),
              "case %zu wants %s, split %d: %s", i, cases[i].tile, cases[i].split, buf);
    cr_assert((strstr(buf, "across the cluster") != NULL) == cases[i].cluster, "%s", buf);
    jitk_matmul_destroy(p);
  }
  /* Without clusters (JITK_MM_CSPLIT=0) the model prices the fix-up: 512^3
   * in two slices, 1536^3 unsplit on 128 x 32 tiles. */
  setenv("JITK_MM_CSPLIT", "0", 1);
  jitk_matmul_desc fd = jt_matmul_desc(JITK_FLOAT32, 512, 512, 512);
  expect_described(e, &fd, "tile 128x32x16, 8x4");
  jitk_matmul *fp = NULL;
  JT_OK(e, jitk_matmul_create(e, &fd, &fp));
  char fbuf[512];
  JT_OK(e, jitk_matmul_describe(fp, fbuf, sizeof fbuf));
  cr_assert(strstr(fbuf, "; split-K 2 (") != NULL && strstr(fbuf, "fix-up kernel") != NULL, "%s",
            fbuf);
  jitk_matmul_destroy(fp);
  fd = jt_matmul_desc(JITK_FLOAT32, 1536, 1536, 1536);
  expect_described(e, &fd, "tile 128x32x16, 8x4");
  unsetenv("JITK_MM_CSPLIT");
  /* 512 x 1024 x 512: unsplit on 128 x 32 tiles, 0.96 of that time in 4
   * slices across clusters of 128 x 64 tiles, which JITK_MM_CSPLIT_MARGIN
   * = 0.97 takes; a margin out of 0.5 to 1 is ignored. */
  static const char *const margins[] = {NULL, "0.97", "2"};
  for (int i = 0; i < 3; i++) {
    if (margins[i] != NULL) setenv("JITK_MM_CSPLIT_MARGIN", margins[i], 1);
    fd = jt_matmul_desc(JITK_FLOAT32, 512, 1024, 512);
    JT_OK(e, jitk_matmul_create(e, &fd, &fp));
    JT_OK(e, jitk_matmul_describe(fp, fbuf, sizeof fbuf));
    if (i == 1)
      cr_assert(strstr(fbuf, "tile 128x64x16") != NULL && strstr(fbuf, "; split-K 4 (") != NULL &&
                    strstr(fbuf, "across the cluster") != NULL,
                "%s", fbuf);
    else
      cr_assert(strstr(fbuf, "tile 128x32x16") != NULL && strstr(fbuf, "; split-K") == NULL, "%s",
                fbuf);
    jitk_matmul_destroy(fp);
    unsetenv("JITK_MM_CSPLIT_MARGIN");
  }
  const char *narrow = "FFMA (simt) float32, float32 accumulation, tile 128x128x16, 8x8 per thread";
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 4096, 4096, 4096);
  setenv("JITK_MM_WIDE", "0", 1);
  expect_kind(e, &d, narrow, "JITK_MM_WIDE=0");
  unsetenv("JITK_MM_WIDE");
  d = jt_matmul_desc(JITK_FLOAT64, 4096, 4096, 4096);
  expect_kind(e, &d, "FFMA (simt) float64, float64 accumulation, tile 128x128x8", "float64");
  jitk_engine_destroy(e);
  /* PTX for compute_80 and later may use cp.async too; sm_75 has none. */
  d = jt_matmul_desc(JITK_FLOAT32, 4096, 4096, 4096);
  const char *wide = "FFMA (simt) float32, float32 accumulation, tile 128x256x16, 16x8";
  e = jt_compile_engine("compute_90");
  expect_kind(e, &d, wide, "compute_90");
  jitk_engine_destroy(e);
  e = jt_compile_engine("sm_80");
  expect_kind(e, &d, wide, "sm_80");
  jitk_engine_destroy(e);
  e = jt_compile_engine("sm_75");
  expect_kind(e, &d, narrow, "sm_75");
  jitk_engine_destroy(e);
}
/* Every supported pair of 8-bit inputs with D of every dtype it may have
 * (and a C, scales, amax and bias + ReLU) plans on wgmma for sm_90a, and
 * the generated source, which names jitk's 8-bit types, compiles. */
Test(matmul_plan, fp8_plans_take_wgmma_and_compile) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const struct {
    jitk_dtype a, b, d;
    int kind;
  } cases[] = {
      {JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_BFLOAT16, 3},
      {JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_FLOAT32, 3},
      {JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, 3},
      {JITK_FLOAT8_E4M3, JITK_FLOAT8_E5M2, JITK_FLOAT16, 4},
      {JITK_FLOAT8_E4M3, JITK_FLOAT8_E5M2, JITK_FLOAT8_E5M2, 4},
      {JITK_FLOAT8_E5M2, JITK_FLOAT8_E4M3, JITK_BFLOAT16, 5},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bool d8 = cases[i].d == JITK_FLOAT8_E4M3 || cases[i].d == JITK_FLOAT8_E5M2;
    jitk_matmul_desc d = fp8_desc(cases[i].a, cases[i].b, cases[i].d, 200, 264, 512);
    d.batch = 2;
    d.has_c = i % 2;
    d.beta = 0.5;
    d.alpha = 0.75;
    d.epilogue = "relu(acc + bias[col])";
    d.epilogue_params = "raw bfloat16 bias";
    d.has_a_scale = d.has_b_scale = d.has_amax_d = 1;
    d.has_d_scale = d8;
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    char buf[512], want[128];
    JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
    snprintf(want, sizeof want, "tensor cores %s x %s m64nNk32 (wgmma, sm_90a)",
             dtype_name(cases[i].a), dtype_name(cases[i].b));
    cr_assert(strncmp(buf, want, strlen(want)) == 0, "case %zu: %s", i, buf);
    cr_assert(strstr(buf, d8 ? "scale A, scale B, scale D, amax D" : "scale A, scale B, amax D"),
              "case %zu: %s", i, buf);
    const char *src;
    JT_OK(e, jitk_matmul_source(p, &src));
    snprintf(want, sizeof want, "jitk::mm90::gemm<%d, false, false,", cases[i].kind);
    cr_assert(strstr(src, want) != NULL, "case %zu: %s", i, src);
    cr_assert(strstr(src, "#include <jitk/fp8.cuh>") != NULL, "case %zu", i);
    cr_assert(strstr(src, "jitk::mm::amax_commit(_jk_amax, _jk_amax_v)") != NULL, "case %zu", i);
    cr_assert((strstr(src, "value * static_cast<T>(_jk_dscale)") != NULL) == d8, "case %zu", i);
    expect_clean_kernel(p, "case", i);
    jitk_matmul_destroy(p);
  }
  /* Without scales or amax the store is the plain one. */
  jitk_matmul_desc d = fp8_desc(JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_BFLOAT16, 64, 64, 64);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  const char *src;
  JT_OK(e, jitk_matmul_source(p, &src));
  cr_assert(strstr(src, "_jk_scale_a") == NULL && strstr(src, "_jk_amax") == NULL, "%s", src);
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* With fast accumulation, JITK_MM_SCHEDULE=cooperative's 128 x 256 tiles
 * use the n256 8-bit wgmma; a plan that promotes (the default) keeps its
 * cooperative 128 x 128 tiles, whose two accumulators fit the registers. */
Test(matmul_plan, fp8_cooperative_schedule_compiles) {
  setenv("JITK_MM_SCHEDULE", "cooperative", 1);
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul_desc d =
      fp8_desc(JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_BFLOAT16, 4096, 4096, 4096);
  d.epilogue = "relu(acc + bias[col])";
  d.epilogue_params = "raw bfloat16 bias";
  d.compute = JITK_COMPUTE_FLOAT32_FAST_ACCUM;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "tile 128x256x128, 3 stages") != NULL, "%s", buf);
  cr_assert(strstr(buf, "(cooperative)") != NULL, "%s", buf);
  jitk_matmul_destroy(p);
  d.compute = JITK_COMPUTE_DEFAULT;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "tile 128x128x128, 5 stages") != NULL, "%s", buf);
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* FP8 on wgmma promotes by default (DEFAULT and FLOAT32 compute): each
 * K-tile's sum goes into a fresh accumulator, added into the float32 one,
 * on cooperative 128 x 128 tiles in five stages; the kernel's PROMOTE
 * argument says so. JITK_COMPUTE_FLOAT32_FAST_ACCUM keeps the ping-pong
 * kernel without promotion. Configurations whose registers would not
 * hold both accumulators (128 x 256, ping-pong) are refused for a
 * promoting plan, from the tuning table and from JITK_MM_TILE alike, and
 * every input pair compiles both ways. */
Test(matmul_plan, fp8_promotion_is_the_default) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const jitk_dtype pairs[][2] = {{JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3},
                                        {JITK_FLOAT8_E4M3, JITK_FLOAT8_E5M2},
                                        {JITK_FLOAT8_E5M2, JITK_FLOAT8_E4M3}};
  static const jitk_compute computes[] = {JITK_COMPUTE_DEFAULT, JITK_COMPUTE_FLOAT32,
                                          JITK_COMPUTE_FLOAT32_FAST_ACCUM};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    for (size_t c = 0; c < sizeof computes / sizeof computes[0]; c++) {
      const bool fast = computes[c] == JITK_COMPUTE_FLOAT32_FAST_ACCUM;
      jitk_matmul_desc d = fp8_desc(pairs[i][0], pairs[i][1], JITK_BFLOAT16, 8192, 8192, 8192);
      d.compute = computes[c];
      d.epilogue = "acc + bias[col]";
      d.epilogue_params = "raw bfloat16 bias";
      d.has_a_scale = d.has_b_scale = d.has_amax_d = 1;
      jitk_matmul *p = NULL;
      JT_OK(e, jitk_matmul_create(e, &d, &p));
      char buf[512], want[128];
      JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
      cr_assert(strstr(buf, fast ? "(fast: the tensor cores' accumulator over the whole K)"
                                 : "(each K-tile's sum promoted to a separate float32 sum)"),
                "pair %zu compute %zu: %s", i, c, buf);
      cr_assert(strstr(buf, fast ? "(ping-pong)" : "(cooperative)"), "%s", buf);
      cr_assert(strstr(buf, "tile 128x128x128, 5 stages") != NULL, "%s", buf);
      const char *src;
      JT_OK(e, jitk_matmul_source(p, &src));
      /* <..., BN, STAGES, PP, STAGING, ROWS (D row-major), PROMOTE, CL, SERIAL, DRAIN, PH,
       * FEED>;
       * no drain: D's rows are on 16 bytes. */
      snprintf(want, sizeof want, "128, 5, %s, 32768, true, %s, 1, false, false, 1, false>(_jk_ta",
               fast ? "true" : "false", fast ? "false" : "true");
      cr_assert(strstr(src, want) != NULL, "pair %zu compute %zu: no `%s`", i, c, want);
      /* Configurations that do not fit a promoting kernel's registers. */
      cr_assert(jk_mm_choice_fits(p, JK_MM_WGMMA, 256, 128, 3, 0, false) == fast, "%zu %zu", i, c);
      cr_assert(jk_mm_choice_fits(p, JK_MM_WGMMA, 128, 128, 5, 1, false) == fast, "%zu %zu", i, c);
      cr_assert(jk_mm_choice_fits(p, JK_MM_WGMMA, 128, 128, 4, 0, false), "%zu %zu", i, c);
      cr_assert(
          jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=256 arow=128 stages=3 pingpong=0 split=1") == fast,
          "%zu %zu", i, c);
      expect_clean_kernel(p, "pair and compute", 3 * i + c);
      jitk_matmul_destroy(p);
    }
  /* JITK_MM_TILE asking for 128 x 256 is ignored by a promoting plan. */
  setenv("JITK_MM_TILE", "256x128x3", 1);
  jitk_matmul_desc d =
      fp8_desc(JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_BFLOAT16, 4096, 4096, 4096);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "tile 128x128x128, 5 stages") != NULL, "%s", buf);
  jitk_matmul_destroy(p);
  unsetenv("JITK_MM_TILE");
  /* Fast accumulation is for float8 inputs only. */
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.compute = JITK_COMPUTE_FLOAT32_FAST_ACCUM;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT,
           "JITK_COMPUTE_FLOAT32_FAST_ACCUM is for float8 inputs, and A is bfloat16",
           jitk_matmul_create(e, &d, &p));
  jitk_engine_destroy(e);
}

/* Without wgmma (sm_80 here, or K = 0) an FP8 plan computes in float32 on
 * CUDA cores, scales and amax included. */
Test(matmul_plan, fp8_ffma_elsewhere) {
  jitk_engine *e = jt_compile_engine("sm_80");
  jitk_matmul_desc d =
      fp8_desc(JITK_FLOAT8_E4M3, JITK_FLOAT8_E5M2, JITK_FLOAT8_E4M3, 200, 264, 512);
  d.has_a_scale = d.has_b_scale = d.has_d_scale = d.has_amax_d = 1;
  d.epilogue = "relu(acc + bias[col])";
  d.epilogue_params = "raw T bias";
  expect_kind(e, &d, "FFMA (simt) float8_e4m3fn x float8_e5m2, float32 accumulation", "sm_80");
  jitk_engine_destroy(e);
  e = jt_compile_engine("sm_90");
  d.k = 0;
  expect_kind(e, &d, "FFMA (simt) float8_e4m3fn x float8_e5m2", "k = 0");
  jitk_engine_destroy(e);
}

/* Each description an FP8 plan cannot take fails at creation, with a
 * message that says why. */
Test(matmul_plan, fp8_bad_descriptions_fail_at_creation) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul *p = NULL;
  const jitk_dtype e4 = JITK_FLOAT8_E4M3, e5 = JITK_FLOAT8_E5M2;
  jitk_matmul_desc d = fp8_desc(e4, e4, JITK_BFLOAT16, 64, 64, 64);
  d.a_order = JITK_COL_MAJOR;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "A is column-major and B column-major",
           jitk_matmul_create(e, &d, &p));
  cr_assert(strstr(jitk_errmsg(e), "must both be K-major") != NULL, "%s", jitk_errmsg(e));
  d = fp8_desc(e4, e4, JITK_BFLOAT16, 64, 64, 64);
  d.b_order = JITK_ROW_MAJOR;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "A is row-major and B row-major",
           jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e5, e5, JITK_BFLOAT16, 64, 64, 64);
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "both float8_e5m2", jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, JITK_BFLOAT16, JITK_BFLOAT16, 64, 64, 64);
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "a float8 operand takes a float8 partner",
           jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, e4, JITK_FLOAT64, 64, 64, 64);
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "D is float64; it must be float16, bfloat16, float32",
           jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, e4, JITK_INT8, 64, 64, 64);
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "D is int8", jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, e4, JITK_BFLOAT16, 64, 64, 64);
  d.has_c = 1;
  d.c_dtype = JITK_FLOAT64;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "C is float64", jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, e4, JITK_BFLOAT16, 64, 64, 64);
  d.compute = JITK_COMPUTE_TF32;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "float8 inputs compute in float32",
           jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, e4, JITK_BFLOAT16, 64, 64, 32);
  d.lda = 40; /* TMA's rows are whole 16-byte chunks */
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "multiples of 16 elements (lda 40",
           jitk_matmul_create(e, &d, &p));
  /* Scales for operands that are not 8-bit, and D's amax in a plan that
   * is not FP8. */
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.has_a_scale = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "has_a_scale is set but A is bfloat16",
           jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_FLOAT16, 64, 64, 64);
  d.has_b_scale = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "has_b_scale is set but B is float16",
           jitk_matmul_create(e, &d, &p));
  d = fp8_desc(e4, e4, JITK_BFLOAT16, 64, 64, 64);
  d.has_d_scale = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "has_d_scale is set but D is bfloat16",
           jitk_matmul_create(e, &d, &p));
  d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.has_amax_d = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "has_amax_d is set but A and B are bfloat16",
           jitk_matmul_create(e, &d, &p));
  /* A plan with scales executes only through jitk_matmul_execute_ex, and
   * autotunes only without them; a compile-only engine executes nothing. */
  d = fp8_desc(e4, e4, JITK_FLOAT8_E4M3, 64, 64, 64);
  d.has_a_scale = d.has_d_scale = 1;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "FP8 scales or amax, is not autotuned",
           jitk_matmul_autotune(p, NULL, &d, &d, NULL, &d, NULL, 0));
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "", jitk_matmul_execute(p, NULL, &d, &d, NULL, &d, NULL, 0));
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* A caller compiled before the FP8 fields (a smaller struct_size) still
 * makes plans, and its operands still execute them. */
Test(matmul_plan, descriptions_from_before_fp8_fields) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 64, 64, 64);
  d.struct_size = offsetof(jitk_matmul_desc, has_a_scale);
  d.has_a_scale = 1; /* beyond the old size: never read */
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  jitk_matmul_operands o;
  JT_OK(e, jitk_matmul_operands_init(&o));
  o.struct_size = offsetof(jitk_matmul_operands, a_scale);
  o.a = o.b = o.d = &d;
  JT_FAILS(e, JITK_ERR_NO_DEVICE, "", jitk_matmul_execute_ex(p, NULL, &o));
  o.struct_size = 12;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size is 12", jitk_matmul_execute_ex(p, NULL, &o));
  jitk_matmul_destroy(p);
  d.struct_size = 24;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size is 24", jitk_matmul_create(e, &d, &p));
  jitk_engine_destroy(e);
}

/* --- split-K ------------------------------------------------------------- */

/* The split a plan got, from its description ("; split-K N (..."), 1 for
 * none. */
static int split_of(jitk_engine *e, jitk_matmul *p) {
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  const char *at = strstr(buf, "; split-K ");
  return at ? atoi(at + strlen("; split-K ")) : 1;
}

/* Decode shapes leave most of the 132 multiprocessors of an sm_90 part
 * without a tile, yet are bound by reading B, which the busy ones already
 * do at the memory's pace, so jitk keeps them whole; a few tiles with a
 * long K are bound by their multiprocessors' steps, and split. */
Test(matmul_plan, split_k_chosen_by_the_model) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const int64_t ms[] = {1, 8, 32, 128};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, ms[i], 8192, 8192);
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    int split = split_of(e, p);
    cr_assert(split == 1, "M %lld: split %d", (long long)ms[i], split);
    jitk_matmul_destroy(p);
  }
  {
    /* 16 tiles of 128 x 128, 1024 K-tiles of 64: 8 slices make 128
     * items; 16 would take two rounds of 132. */
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 512, 512, 65536);
    d.epilogue = "relu(acc + bias[col])";
    d.epilogue_params = "raw T bias";
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    cr_assert_eq(split_of(e, p), 8);
    const char *src = NULL;
    JT_OK(e, jitk_matmul_source(p, &src));
    /* The slices are summed in the kernel, by each tile's last. */
    cr_assert(strstr(src, "_jk_count") != NULL && strstr(src, "matmul_sk(") == NULL, "%s", src);
    cr_assert(strstr(src, "relu(acc + bias[col])") != NULL);
    jitk_matmul_destroy(p);
  }
  /* 256 x 8192: 128 tiles already; 4096^2: many waves. */
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 256, 8192, 8192);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 1);
  jitk_matmul_destroy(p);
  d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4096, 4096);
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 1);
  const char *src = NULL;
  JT_OK(e, jitk_matmul_source(p, &src));
  cr_assert(strstr(src, "_sk(") == NULL, "no fix-up kernel without a split");
  jitk_matmul_destroy(p);
  /* split_k = 1 keeps a decode shape whole; N forces N slices. */
  d = jt_matmul_desc(JITK_BFLOAT16, 16, 8192, 8192);
  d.split_k = 1;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 1);
  jitk_matmul_destroy(p);
  d.split_k = 7;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 7);
  jitk_matmul_destroy(p);
  /* tf32: K-tiles of 32, a decode shape whole, long K in 8 slices. */
  d = jt_matmul_desc(JITK_FLOAT32, 16, 8192, 8192);
  d.compute = JITK_COMPUTE_TF32;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 1);
  jitk_matmul_destroy(p);
  d = jt_matmul_desc(JITK_FLOAT32, 512, 512, 65536);
  d.compute = JITK_COMPUTE_TF32;
  d.b_order = JITK_COL_MAJOR; /* unswapped */
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 8);
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* A split plan of each kind, with tails (M 7, N 1000, K 4104, K 4100 for
 * float32: rows of A and B stay 16-byte aligned), C and beta,
 * a bias+ReLU epilogue, an output and reductions, compiles: wgmma for
 * sm_90a with every layout of A and B (tf32 transposing first), mma.sync
 * and FFMA for sm_90 (FFMA summed across clusters where a batch of 20
 * gives more blocks than multiprocessors, but no more than a round of
 * them, or by the fix-up with one matrix, with a batch of 64 or with
 * JITK_MM_CSPLIT=0; JITK_MM_CSPLIT=1 takes clusters with one matrix and
 * with 64), mma.sync and FFMA for sm_80 (the fix-up). */
static void expect_split_compiles(jitk_engine *e, jitk_dtype t, jitk_compute compute, jitk_order ao,
                                  jitk_order bo, int64_t batch, const char *kind) {
  static const jitk_matmul_output outs[] = {{"pre", JITK_FLOAT32, "acc", 0, 0}};
  static const jitk_matmul_reduction reds[] = {
      {"dbias", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS}};
  jitk_matmul_desc d = jt_matmul_desc(t, 7, 1000, t == JITK_FLOAT32 ? 4100 : 4104);
  d.compute = compute;
  d.a_order = ao;
  d.b_order = bo;
  if (ao == JITK_COL_MAJOR) d.lda = 8; /* 16-byte columns for tensor cores */
  d.batch = batch;
  d.has_c = true;
  d.beta = 0.5;
  d.epilogue = "relu(acc + bias[col])";
  d.epilogue_params = "raw float32 bias";
  d.outputs = outs;
  d.num_outputs = 1;
  d.reductions = reds;
  d.num_reductions = 1;
  d.split_k = 3;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, kind) != NULL, "%s", buf);
  cr_assert(strstr(buf, "; split-K 3 (") != NULL, "%s", buf);
  const char *src = NULL;
  JT_OK(e, jitk_matmul_source(p, &src));
  if (strstr(buf, "across the cluster") != NULL)
    cr_assert(strstr(src, "_jk_ws") == NULL && strstr(src, "jitk::mm::cluster_sum<") != NULL, "%s",
              src);
  else
    cr_assert(strstr(src, "_jk_ws") != NULL);
  cr_assert(strstr(src, "(_jk_c + batch * _jk_sc)[") != NULL, "C read by the fix-up");
  jitk_matmul_destroy(p);
}

Test(matmul_plan, split_k_compiles_on_every_kind) {
  jitk_engine *e = jt_compile_engine("sm_90");
  expect_split_compiles(e, JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, JITK_ROW_MAJOR, JITK_ROW_MAJOR, 1,
                        "(wgmma, sm_90a)");
  expect_split_compiles(e, JITK_FLOAT16, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_COL_MAJOR, 1,
                        "(wgmma, sm_90a)");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_TF32, JITK_COL_MAJOR, JITK_ROW_MAJOR, 1,
                        "(wgmma, sm_90a)");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_ROW_MAJOR, 20,
                        "summed in shared memory across the cluster");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_ROW_MAJOR, 1,
                        "summed by a fix-up kernel");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_ROW_MAJOR, 64,
                        "summed by a fix-up kernel");
  setenv("JITK_MM_CSPLIT", "1", 1); /* clusters whatever the blocks */
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_ROW_MAJOR, 64,
                        "summed in shared memory across the cluster");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_ROW_MAJOR, 1,
                        "summed in shared memory across the cluster");
  setenv("JITK_MM_CSPLIT", "0", 1);
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_COL_MAJOR, JITK_ROW_MAJOR, 20,
                        "summed by a fix-up kernel");
  unsetenv("JITK_MM_CSPLIT");
  setenv("JITK_MM_KIND", "mma", 1);
  expect_split_compiles(e, JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, JITK_ROW_MAJOR, JITK_COL_MAJOR, 1,
                        "(mma.sync)");
  unsetenv("JITK_MM_KIND");
  jitk_engine_destroy(e);
  e = jt_compile_engine("sm_80");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_TF32, JITK_ROW_MAJOR, JITK_ROW_MAJOR, 1,
                        "(mma.sync)");
  expect_split_compiles(e, JITK_FLOAT32, JITK_COMPUTE_DEFAULT, JITK_ROW_MAJOR, JITK_COL_MAJOR, 64,
                        "summed by a fix-up kernel");
  jitk_engine_destroy(e);
}

/* Bad splits fail when the plan is made, never at execution. */
Test(matmul_plan, split_k_errors) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul *p = NULL;
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 16, 1000, 128);
  d.split_k = -1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "split_k is -1; it must be 0",
           jitk_matmul_create(e, &d, &p));
  /* K = 128 is two K-tiles of 64 for wgmma. */
  d.split_k = 3;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "K = 128 makes only 2 K-tiles of 64 for this plan's wgmma",
           jitk_matmul_create(e, &d, &p));
  d.split_k = 2;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 2);
  jitk_matmul_destroy(p);
  d.k = 0;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "K = 0 makes only 0 K-tiles",
           jitk_matmul_create(e, &d, &p));
  /* float64 plans cannot split. */
  d = jt_matmul_desc(JITK_FLOAT64, 16, 1000, 4096);
  d.split_k = 2;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "a float64 plan does not split K",
           jitk_matmul_create(e, &d, &p));
  d.split_k = 0;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 1, "jitk does not split a float64 plan either");
  jitk_matmul_destroy(p);
  /* A caller compiled before split_k passes the smaller struct_size. */
  d = jt_matmul_desc(JITK_BFLOAT16, 512, 512, 65536);
  d.split_k = 99; /* beyond the old size: not read */
  d.struct_size = offsetof(jitk_matmul_desc, split_k);
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 8, "jitk's own choice");
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/* A row-major B whose rows are off 128-byte lines is copied onto them only
 * where the copy costs under a tenth of the product: bf16 M of about 4000
 * and more (4096 x 4104 x 4096, the vocabulary projection), not 2048 nor
 * decode shapes; 8-bit inputs from about 4000 too (half the bytes to copy,
 * twice the pace). Rows on lines, or JITK_MM_LINES=0, never copy. */
Test(matmul_plan, b_rows_off_lines_copied_where_it_pays) {
  struct jitk_matmul p;
  memset(&p, 0, sizeof p);
  p.d = jt_matmul_desc(JITK_BFLOAT16, 4096, 4104, 4096);
  cr_assert(jk_mm_line_pays(&p, 4104, 2), "4096 x 4104 x 4096");
  cr_assert(!jk_mm_line_pays(&p, 4160, 2), "rows of 8320 bytes are on lines");
  setenv("JITK_MM_LINES", "0", 1);
  cr_assert(!jk_mm_line_pays(&p, 4104, 2), "JITK_MM_LINES=0");
  unsetenv("JITK_MM_LINES");
  p.d = jt_matmul_desc(JITK_BFLOAT16, 8192, 50264, 1024);
  cr_assert(jk_mm_line_pays(&p, 50264, 2), "the vocabulary projection");
  p.d = jt_matmul_desc(JITK_BFLOAT16, 2048, 8200, 4096);
  cr_assert(!jk_mm_line_pays(&p, 8200, 2), "M = 2048: the copy costs more than it saves");
  p.d = jt_matmul_desc(JITK_BFLOAT16, 16, 8200, 8192);
  cr_assert(!jk_mm_line_pays(&p, 8200, 2), "a decode shape");
  p.d = jt_matmul_desc(JITK_FLOAT8_E4M3, 2048, 4112, 4096);
  cr_assert(!jk_mm_line_pays(&p, 4112, 1), "8-bit at M = 2048");
  p.d.m = 4096;
  cr_assert(jk_mm_line_pays(&p, 4112, 1), "8-bit at M = 4096");
}

/* The tuning table's choice carries the split and comes back as stored;
 * choices stored before split-K still parse. */
Test(matmul_plan, split_k_tuning_choice_round_trip) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 16, 8192, 8192);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char buf[128];
  jk_mm_choice_format(p, buf, sizeof buf);
  /* M = 16 swaps A and B: a 128 x 16 tile in 8 stages, fewer than the 12
   * that fit (more loads in flight only queued at the memory). */
  cr_assert_str_eq(buf, "bn=16 arow=128 stages=8 pingpong=0 split=1 swap=1");
  cr_assert_eq(jk_mm_swap_stages(16), 12);
  for (int bn = 8; bn <= 256; bn *= 2) {
    int most = jk_mm_swap_stages(bn);
    cr_assert_eq(jk_mm_swap_default_stages(bn), most < 8 ? most : 8, "bn %d", bn);
  }
  const char *stored = "bn=256 arow=128 stages=3 pingpong=0 split=7";
  cr_assert(jk_mm_choice_parse(p, JK_MM_WGMMA, stored));
  jk_mm_choice_format(p, buf, sizeof buf);
  cr_assert_str_eq(buf, stored);
  /* Before split-K: the split is left for the plan to choose. */
  cr_assert(jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=128 arow=128 stages=4 pingpong=1"));
  cr_assert_eq(p->split, 0);
  /* A split beyond the K-tiles (8192 / 64) is cut to them. */
  cr_assert(jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=128 arow=128 stages=5 pingpong=1 split=500"));
  cr_assert_eq(p->split, 128);
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=128 arow=128 stages=5 pingpong=1 split=0"));
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=128 arow=64 stages=5 pingpong=1 split=2"));
  cr_assert_eq(p->split, 128, "a refused choice leaves the plan as it was");
  cr_assert(!p->swap, "a choice without swap= is unswapped");
  /* 64 tiles of 128 x 128: reading B (8192 x 8192) bounds them on 132
   * multiprocessors; on 16 they take four full rounds, which slices
   * cannot shorten. */
  cr_assert_eq(jk_mm_auto_split(p, JK_MM_WGMMA, 132), 1);
  cr_assert_eq(jk_mm_auto_split(p, JK_MM_WGMMA, 16), 1);
  /* Swapped choices: the narrow tiles, more stages, no ping-pong. */
  stored = "bn=8 arow=128 stages=12 pingpong=0 split=3 swap=1";
  cr_assert(jk_mm_choice_parse(p, JK_MM_WGMMA, stored));
  cr_assert(p->swap);
  jk_mm_choice_format(p, buf, sizeof buf);
  cr_assert_str_eq(buf, stored);
  /* 64 tiles of 128 rows of N by two of 8 columns of M (16): 128 tiles
   * nearly fill 132 multiprocessors, so no split; 16 tiles of 16 columns
   * would leave 64 tiles, still bound by reading B. */
  cr_assert_eq(jk_mm_auto_split(p, JK_MM_WGMMA, 132), 1);
  cr_assert(
      jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=16 arow=128 stages=12 pingpong=0 swap=1") == false,
      "swap= comes after split=");
  cr_assert(
      jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=16 arow=128 stages=12 pingpong=0 split=1 swap=1"));
  cr_assert_eq(jk_mm_auto_split(p, JK_MM_WGMMA, 132), 1, "bound by reading B");
  cr_assert(jk_mm_choice_parse(p, JK_MM_WGMMA, stored));
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=8 arow=128 stages=5 pingpong=0 split=3"),
            "a narrow tile needs the swap");
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA,
                                "bn=16 arow=128 stages=13 pingpong=0 split=2 "
                                "swap=1"),
            "at most 12 stages");
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA,
                                "bn=128 arow=128 stages=5 pingpong=1 split=2 "
                                "swap=1"),
            "no ping-pong when swapped");
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA,
                                "bn=16 arow=128 stages=4 pingpong=0 split=2 "
                                "swap=2"));
  cr_assert(!jk_mm_choice_parse(p, JK_MM_MMA, "bn=16 arow=128 stages=4 pingpong=0 split=2 swap=1"),
            "only wgmma swaps");
  cr_assert_eq(p->bn, 8, "a refused choice leaves the plan as it was");
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

/*
 * Swapped A and B for decode shapes (issue 16): chosen for M <= 64 with N
 * of a tile at least (the narrowest tile of 8, 16, 32 or 64 columns that
 * holds M), not for M = 128 or for float64, FP8 or mma.sync; JITK_MM_SWAP
 * forces it either way; the description says so.
 */
static void expect_swap(jitk_engine *e, const jitk_matmul_desc *d, int bn, const char *what) {
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  if (bn == 0) {
    cr_assert(strstr(buf, "swapped") == NULL, "%s: %s", what, buf);
  } else {
    char tile[64], cols[64];
    snprintf(tile, sizeof tile, "tile 128x%dx", bn);
    snprintf(cols, sizeof cols, "M along its %d columns)", bn);
    cr_assert(strstr(buf, tile) != NULL && strstr(buf, "; A and B swapped (D^T = B^T A^T") &&
                  strstr(buf, cols) != NULL && strstr(buf, "(cooperative)") != NULL,
              "%s: %s", what, buf);
    const char *src = NULL;
    JT_OK(e, jitk_matmul_source(p, &src));
    cr_assert(strstr(src, "A and B swapped") != NULL, "%s", what);
  }
  jitk_matmul_destroy(p);
}

Test(matmul_plan, swap_chosen_for_decode_shapes) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const int64_t ms[] = {1, 8, 9, 16, 17, 32, 33, 64};
  static const int bns[] = {8, 8, 16, 16, 32, 32, 64, 64};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, ms[i], 8192, 8192);
    char what[64];
    snprintf(what, sizeof what, "M %lld", (long long)ms[i]);
    expect_swap(e, &d, bns[i], what);
  }
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 128, 8192, 8192);
  expect_swap(e, &d, 0, "M 128 is not swapped (it takes 128 x 64 tiles)");
  d = jt_matmul_desc(JITK_BFLOAT16, 16, 100, 8192);
  expect_swap(e, &d, 0, "N under a tile");
  d = jt_matmul_desc(JITK_FLOAT64, 16, 8192, 1024);
  expect_swap(e, &d, 0, "float64 (FFMA)");
  d = jt_matmul_desc(JITK_FLOAT32, 16, 8192, 1024);
  expect_swap(e, &d, 0, "float32 (FFMA)");
  d = jt_matmul_desc(JITK_FLOAT32, 16, 8192, 1024);
  d.compute = JITK_COMPUTE_TF32;
  expect_swap(e, &d, 16, "tf32");
  /* Forced on and off. */
  setenv("JITK_MM_SWAP", "1", 1);
  d = jt_matmul_desc(JITK_FLOAT16, 200, 1000, 512);
  expect_swap(e, &d, 128, "M 200 forced: 128-column tiles");
  d = jt_matmul_desc(JITK_FLOAT16, 40, 64, 512);
  expect_swap(e, &d, 64, "N 64 forced");
  setenv("JITK_MM_SWAP", "0", 1);
  d = jt_matmul_desc(JITK_FLOAT16, 16, 8192, 8192);
  expect_swap(e, &d, 0, "forced off");
  unsetenv("JITK_MM_SWAP");
  setenv("JITK_MM_KIND", "mma", 1);
  d = jt_matmul_desc(JITK_FLOAT16, 16, 8192, 8192);
  expect_swap(e, &d, 0, "mma.sync does not swap");
  unsetenv("JITK_MM_KIND");
  jitk_engine_destroy(e);
  e = jt_compile_engine("sm_80");
  d = jt_matmul_desc(JITK_BFLOAT16, 16, 8192, 8192);
  expect_swap(e, &d, 0, "sm_80 (mma.sync) does not swap");
  jitk_engine_destroy(e);
}

/* tf32 with a row-major B swaps A and B where 128 x 256 swapped tiles
 * fill the multiprocessors, and for decode shapes, reading B M-major
 * through registers (matmul_sm90.cuh's wgmma_rs: gemm<2, true, ...>)
 * rather than transposing it first; K split by the user takes 128
 * columns. Each such kernel leaves ptxas with no spill and no serialized
 * wgmma (the A fragments of a K-tile stay in their registers while its
 * MMAs run). Not swapped: B column-major, fewer tiles (M = 300 x 4096,
 * or N under a tile), reductions (which fold per tile only unswapped),
 * and JITK_MM_SWAP=0. */
Test(matmul_plan, tf32_row_major_b_swaps) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static const int64_t ms[] = {4096, 4096, 2048, 64, 5};
  static const int bns[] = {256, 128, 256, 64, 8};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
    jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, ms[i], 4096, 4096);
    /* Split K by the user: 128 columns, whose fix-up fits beside the A
     * fragments (256 spilled). */
    d.split_k = i == 1 ? 2 : 0;
    d.compute = JITK_COMPUTE_TF32;
    d.epilogue = "max(acc + bias[col], (T)0)";
    d.epilogue_params = "raw T bias";
    char what[64];
    snprintf(what, sizeof what, "tf32 M %lld", (long long)ms[i]);
    expect_swap(e, &d, bns[i], what);
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    char buf[512];
    JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
    cr_assert(strstr(buf, "A row-major, B row-major, D stored from registers") != NULL, "%s: %s",
              what, buf);
    const char *src;
    JT_OK(e, jitk_matmul_source(p, &src));
    cr_assert(strstr(src, "jitk::mm90::gemm<2, true, false,") != NULL, "%s: %s", what, src);
    cr_assert(strstr(src, "matmul_tr(") == NULL, "%s: B is not transposed", what);
    expect_clean_kernel(p, "tf32 M", (size_t)ms[i]);
    jitk_matmul_destroy(p);
  }
  jitk_matmul_desc d = jt_matmul_desc(JITK_FLOAT32, 4096, 4096, 4096);
  d.compute = JITK_COMPUTE_TF32;
  d.b_order = JITK_COL_MAJOR;
  expect_swap(e, &d, 0, "B column-major");
  d.b_order = JITK_ROW_MAJOR;
  d.m = 300;
  expect_swap(e, &d, 0, "M 300: 32 x 2 tiles of 256 columns");
  d.m = 4096;
  d.n = 100;
  expect_swap(e, &d, 0, "N under a tile");
  d.n = 4096;
  jitk_matmul_reduction red = {"db", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS};
  d.reductions = &red;
  d.num_reductions = 1;
  expect_swap(e, &d, 0, "a reduction");
  d.reductions = NULL;
  d.num_reductions = 0;
  setenv("JITK_MM_SWAP", "0", 1);
  expect_swap(e, &d, 0, "forced off");
  expect_described(e, &d, "B row-major (transposed first)");
  unsetenv("JITK_MM_SWAP");
  jitk_engine_destroy(e);
}

/* Swapped kernels compile through NVRTC for sm_90a at every tile width,
 * for bfloat16, float16 and tf32, every layout of A and B (a column-major
 * A transposed first, by a 16-bit transpose for 16-bit inputs), D either
 * way, C with beta, a bias epilogue using row and col, an output, a row
 * and a column reduction, split and not (split_k 1). */
/* The tile a plan of d takes, as jk_mm_choice_format writes it. */
static void expect_choice(jitk_engine *e, const jitk_matmul_desc *d, const char *want,
                          const char *what) {
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, d, &p));
  char buf[128];
  jk_mm_choice_format(p, buf, sizeof buf);
  cr_assert(strncmp(buf, want, strlen(want)) == 0, "%s: %s, not %s", what, buf, want);
  jitk_matmul_destroy(p);
}

/* An M of one or two whole 128-row tiles whose 128 x 128 tiles would keep
 * no more than half the multiprocessors busy takes 128 x 64 tiles,
 * cooperative, in six stages (16-bit inputs); every other product keeps
 * its tile. */
Test(matmul_plan, narrow_tiles_where_few) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *narrow = "bn=64 arow=128 stages=6 pingpong=0 split=1";
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 128, 8192, 8192);
  expect_choice(e, &d, narrow, "128 x 8192 x 8192 (64 tiles of 128 x 128)");
  d = jt_matmul_desc(JITK_FLOAT16, 128, 4096, 4096);
  expect_choice(e, &d, narrow, "f16 128 x 4096 x 4096");
  d = jt_matmul_desc(JITK_BFLOAT16, 256, 4096, 1024);
  expect_choice(e, &d, narrow, "256 x 4096 (64 tiles)");
  const char *pingpong = "bn=128 arow=128 stages=5 pingpong=1";
  d = jt_matmul_desc(JITK_BFLOAT16, 256, 8192, 8192);
  expect_choice(e, &d, pingpong, "256 x 8192: 128 tiles of 128 x 128, near the 132");
  d = jt_matmul_desc(JITK_BFLOAT16, 96, 8192, 8192);
  expect_choice(e, &d, pingpong, "M 96 does not fill its tiles");
  d = jt_matmul_desc(JITK_BFLOAT16, 512, 512, 8192);
  expect_choice(e, &d, pingpong, "M 512: long K and few tiles split instead");
  d = jt_matmul_desc(JITK_FLOAT32, 128, 8192, 8192);
  d.compute = JITK_COMPUTE_TF32;
  expect_choice(e, &d, "bn=128", "tf32 was not measured so");
  jitk_matmul_desc fp8 = jt_matmul_desc(JITK_FLOAT8_E4M3, 128, 8192, 8192);
  fp8.b_order = JITK_COL_MAJOR;
  fp8.d_dtype = JITK_BFLOAT16;
  expect_choice(e, &fp8, "bn=128", "FP8 keeps its tiles");
  setenv("JITK_MM_SCHEDULE", "pingpong", 1);
  d = jt_matmul_desc(JITK_BFLOAT16, 128, 8192, 8192);
  expect_choice(e, &d, pingpong, "a forced schedule");
  unsetenv("JITK_MM_SCHEDULE");
  /* As a stored choice: cooperative only, 16-bit inputs. */
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert(jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=64 arow=128 stages=4 pingpong=0 split=1"));
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=64 arow=128 stages=4 pingpong=1 split=1"),
            "no ping-pong at 64 columns");
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=64 arow=128 stages=9 pingpong=0 split=1"),
            "six stages at most beside D's staging");
  jitk_matmul_destroy(p);
  JT_OK(e, jitk_matmul_create(e, &fp8, &p));
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=64 arow=128 stages=4 pingpong=0 split=1"),
            "FP8 takes no 64-column tile");
  jitk_matmul_destroy(p);
  d = jt_matmul_desc(JITK_FLOAT32, 128, 8192, 8192);
  d.compute = JITK_COMPUTE_TF32;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert(!jk_mm_choice_parse(p, JK_MM_WGMMA, "bn=64 arow=128 stages=4 pingpong=0 split=1"),
            "nor does tf32 (not measured)");
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
}

static void expect_swap_compiles(jitk_engine *e, jitk_dtype t, int64_t m, jitk_order ao,
                                 jitk_order bo, jitk_order dor, int split) {
  static const jitk_matmul_output outs[] = {{"pre", JITK_FLOAT32, "acc + (T)row", 0, 0}};
  static const jitk_matmul_reduction reds[] = {
      {"dbias", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS},
      {"rows", JITK_FLOAT32, "value", JITK_REDUCE_MAX, JITK_REDUCE_COLUMNS}};
  jitk_matmul_desc d = jt_matmul_desc(t, m, 1000, t == JITK_FLOAT32 ? 4100 : 4104);
  if (t == JITK_FLOAT32) d.compute = JITK_COMPUTE_TF32;
  d.a_order = ao;
  d.b_order = bo;
  d.d_order = dor;
  d.batch = 2;
  d.has_c = true;
  d.beta = 0.5;
  d.epilogue = "relu(acc + bias[col]) + (T)(row - col)";
  d.epilogue_params = "raw float32 bias";
  d.outputs = outs;
  d.num_outputs = 1;
  d.reductions = reds;
  d.num_reductions = 2;
  d.split_k = split;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "; A and B swapped") != NULL, "%s", buf);
  if (split > 1) {
    char need[64];
    snprintf(need, sizeof need, "columns); split-K %d (", split);
    cr_assert(strstr(buf, need) != NULL, "%s", buf);
  }
  if (ao == JITK_COL_MAJOR) cr_assert(strstr(buf, "A column-major (transposed first)"), "%s", buf);
  const char *src = NULL;
  JT_OK(e, jitk_matmul_source(p, &src));
  cr_assert(strstr(src, "const long long row = _jk_kc, col = _jk_kr;") != NULL,
            "the epilogue sees the user's row and col");
  /* No staging of D, and no drain (a swapped kernel stores from registers). */
  cr_assert(strstr(src, split > 1 ? ", 0, false, false, 1, true, false, 1, false>(_jk_ta"
                                  : ", 0, false, false, 1, false, false, 1, false>(_jk_ta") != NULL,
            "no staging of D: %s", buf);
  if (ao == JITK_COL_MAJOR) cr_assert(strstr(src, "_tr(") != NULL, "the transpose kernel");
  jitk_matmul_destroy(p);
}

Test(matmul_plan, swapped_kernels_compile) {
  setenv("JITK_MM_SWAP", "1", 1);
  jitk_engine *e = jt_compile_engine("sm_90");
  const jitk_order R = JITK_ROW_MAJOR, C = JITK_COL_MAJOR;
  /* Every tile width, and every layout of A and B once per dtype. */
  expect_swap_compiles(e, JITK_BFLOAT16, 1, R, R, R, 1);
  expect_swap_compiles(e, JITK_BFLOAT16, 16, C, C, C, 3);
  expect_swap_compiles(e, JITK_BFLOAT16, 30, R, C, R, 1);
  expect_swap_compiles(e, JITK_BFLOAT16, 64, C, R, C, 2);
  expect_swap_compiles(e, JITK_BFLOAT16, 200, R, R, R, 1);
  expect_swap_compiles(e, JITK_FLOAT16, 7, C, R, R, 1);
  expect_swap_compiles(e, JITK_FLOAT16, 12, R, C, C, 2);
  expect_swap_compiles(e, JITK_FLOAT16, 33, R, R, R, 4);
  expect_swap_compiles(e, JITK_FLOAT16, 64, C, C, R, 1);
  expect_swap_compiles(e, JITK_FLOAT32, 3, R, C, R, 1);
  expect_swap_compiles(e, JITK_FLOAT32, 16, C, R, C, 2);
  expect_swap_compiles(e, JITK_FLOAT32, 40, R, R, R, 1);
  expect_swap_compiles(e, JITK_FLOAT32, 100, C, C, C, 3);
  jitk_engine_destroy(e);
}

/* FP8 decode shapes split K in the 8-bit wgmma kernel's K-tiles of 128
 * (not 64, as for 16-bit inputs): at most as many slices as those, the
 * promoting kernel then compiling cleanly with the split's workspace. */
Test(matmul_plan, fp8_split_k_in_k_tiles_of_128) {
  jitk_engine *e = jt_compile_engine("sm_90");
  /* K = 16384: 128 K-tiles of 128 for 4 tiles, which jitk splits. */
  jitk_matmul_desc d = fp8_desc(JITK_FLOAT8_E4M3, JITK_FLOAT8_E4M3, JITK_BFLOAT16, 16, 512, 16384);
  d.epilogue = "acc + bias[col]";
  d.epilogue_params = "raw bfloat16 bias";
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char buf[512];
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  cr_assert(strstr(buf, "(each K-tile's sum promoted") != NULL, "%s", buf);
  const int split = split_of(e, p);
  cr_assert(split > 1 && split <= 32, "split %d: %s", split, buf);
  cr_assert(strstr(buf, "K-tiles of 128, float32 workspace") != NULL, "%s", buf);
  expect_clean_kernel(p, "auto split", (size_t)split);
  jitk_matmul_destroy(p);
  /* K = 1664: 13 K-tiles of 128. */
  d.k = 1664;
  d.split_k = 13;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  cr_assert_eq(split_of(e, p), 13);
  jitk_matmul_destroy(p);
  d.split_k = 14;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "K = 1664 makes only 13 K-tiles of 128",
           jitk_matmul_create(e, &d, &p));
  jitk_engine_destroy(e);
}

/* FFMA in float on simt_gemm's 128 x 128 tiles (JITK_MM_FFMA_BN=0 keeps
 * float32 plans on them) asks for two blocks a multiprocessor (registers
 * capped at 128) only where its blocks outnumber the multiprocessors (132
 * on a compile-only sm_90 engine); float64 never does. */
Test(matmul_plan, ffma_two_blocks_where_they_outnumber_the_sms) {
  jitk_engine *e = jt_compile_engine("sm_90");
  setenv("JITK_MM_FFMA_BN", "0", 1);
  const struct {
    jitk_dtype t;
    int64_t m, n, batch;
    int blocks; /* a multiprocessor; 0: unbounded */
  } cases[] = {
      {JITK_FLOAT32, 4096, 4096, 1, 2}, /* 1024 blocks */
      {JITK_FLOAT32, 1000, 1030, 1, 0}, /* 72 */
      {JITK_FLOAT32, 1408, 1536, 1, 0}, /* 132 */
      {JITK_FLOAT32, 1409, 1536, 1, 2}, /* 144 */
      {JITK_FLOAT32, 128, 128, 133, 2}, /* a block a matrix */
      {JITK_FLOAT64, 4096, 4096, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    jitk_matmul_desc d = jt_matmul_desc(cases[i].t, cases[i].m, cases[i].n, 64);
    d.batch = cases[i].batch;
    jitk_matmul *p = NULL;
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    const char *src;
    JT_OK(e, jitk_matmul_source(p, &src));
    const char *want = cases[i].blocks == 2   ? "__launch_bounds__(256, 2) matmul("
                       : cases[i].blocks == 1 ? "__launch_bounds__(256, 1) matmul("
                                              : "__launch_bounds__(256) matmul(";
    cr_assert(strstr(src, "FFMA (simt)") != NULL && strstr(src, want) != NULL,
              "case %zu (%lld x %lld, batch %lld): wants %s in %s", i, (long long)cases[i].m,
              (long long)cases[i].n, (long long)cases[i].batch, want, src);
    jitk_matmul_destroy(p);
  }
  unsetenv("JITK_MM_FFMA_BN");
  jitk_engine_destroy(e);
}

/* Whether the plan's kernel has the producer's warps store D's rows (the
 * drain: the template argument of the tensor-core kernel before its
 * phases of A, 1 here, and whether it copies B, false). */
static bool drains(jitk_engine *e, int64_t m, int64_t n, int64_t k) {
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, m, n, k);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  const char *src = NULL;
  JT_OK(e, jitk_matmul_source(p, &src));
  bool on = strstr(src, ", false, true, 1, false>(_jk_ta") != NULL;
  cr_assert(on || strstr(src, ", false, false, 1, false>(_jk_ta") != NULL, "no tensor-core kernel");
  jitk_matmul_destroy(p);
  return on;
}

Test(matmul_plan, the_drain_where_multiprocessors_have_many_tiles) {
  unsetenv("JITK_MM_DRAIN");
  jitk_engine *e = jt_compile_engine("sm_90");
  /* 64 x 197 tiles of 128 x 256: 95 a multiprocessor. */
  cr_assert(drains(e, 8192, 50257, 1024));
  /* 32 x 16: about 4. */
  cr_assert_not(drains(e, 4096, 4095, 512));
  /* D's rows on 16 bytes are TMA's: no drain however many tiles. */
  cr_assert_not(drains(e, 8192, 50264, 1024));
  setenv("JITK_MM_DRAIN", "1", 1);
  cr_assert(drains(e, 4096, 4095, 512));
  setenv("JITK_MM_DRAIN", "0", 1);
  cr_assert_not(drains(e, 8192, 50257, 1024));
  unsetenv("JITK_MM_DRAIN");
  jitk_engine_destroy(e);
}

/* Whether plan d reads A by phases, and on which schedule. */
static bool read_by_phases(jitk_engine *e, const jitk_matmul_desc *d, bool *cooperative) {
  jitk_matmul *p = NULL;
  char buf[512];
  JT_OK(e, jitk_matmul_create(e, d, &p));
  JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
  jitk_matmul_destroy(p);
  *cooperative = strstr(buf, "(cooperative)") != NULL;
  return strstr(buf, "A read in place by 8 row phases") != NULL;
}

/* A row-major 16-bit A whose rows are off 16 bytes, with a row-major B,
 * is read in place by 8 row phases (matmul_sm90.cuh's phase_tile) on the
 * cooperative schedule where its 128 x 256 tiles fill the waves as well as
 * ping-pong's (4095^3, 4096 x 4096 x 4095), and copied onto 16 bytes on
 * ping-pong otherwise (2048 x 11008 x 4095) or with JITK_MM_PHASES=0;
 * JITK_MM_PHASES=1 reads by phases wherever the layout allows. The kernel
 * compiles with each schedule, D of 16 and 32 bits, with and without the
 * drain, a C and an epilogue operand. A column-major B or D, an output,
 * float32 or batches off 16 bytes keep the copy. */
Test(matmul_plan, a_read_by_phases_compiles) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *ph = "A read in place by 8 row phases";
  jitk_matmul_desc d = jt_matmul_desc(JITK_BFLOAT16, 4095, 4095, 4095);
  d.epilogue = "relu(acc + bias[col])";
  d.epilogue_params = "raw float32 bias";
  bool coop = false;
  cr_assert(read_by_phases(e, &d, &coop) && coop, "4095^3");
  d.m = d.n = 4096;
  cr_assert(read_by_phases(e, &d, &coop) && coop, "4096 x 4096 x 4095");
  d.m = 2048;
  d.n = 11008;
  cr_assert(!read_by_phases(e, &d, &coop) && !coop, "2048 x 11008 x 4095");
  setenv("JITK_MM_PHASES", "0", 1);
  d.m = d.n = 4095;
  cr_assert(!read_by_phases(e, &d, &coop), "4095^3 with JITK_MM_PHASES=0");
  jitk_matmul *p = NULL;
  char buf[512];
  setenv("JITK_MM_PHASES", "1", 1);
  static const struct {
    const char *schedule, *drain;
    jitk_dtype t, dt;
    int64_t m, n, k, batch;
  } cases[] = {
      {NULL, NULL, JITK_FLOAT16, JITK_FLOAT16, 131, 77, 93, 1},
      {"cooperative", NULL, JITK_BFLOAT16, JITK_FLOAT32, 200, 264, 101, 1},
      {NULL, "0", JITK_BFLOAT16, JITK_BFLOAT16, 70, 136, 70, 2},
      {NULL, "1", JITK_FLOAT16, JITK_FLOAT32, 300, 128, 333, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cases[i].schedule != NULL) setenv("JITK_MM_SCHEDULE", cases[i].schedule, 1);
    if (cases[i].drain != NULL) setenv("JITK_MM_DRAIN", cases[i].drain, 1);
    d = jt_matmul_desc(cases[i].t, cases[i].m, cases[i].n, cases[i].k);
    d.d_dtype = d.c_dtype = cases[i].dt;
    d.batch = cases[i].batch;
    d.lda = cases[i].k + 1 - cases[i].k % 2; /* odd */
    if (d.batch > 1) {
      d.stride_a = (cases[i].m * d.lda + 7) / 8 * 8;
      d.stride_b = cases[i].k * cases[i].n;
      d.stride_d = d.stride_c = cases[i].m * cases[i].n;
    }
    d.has_c = true;
    d.beta = 0.5;
    d.epilogue = "acc + bias[col]";
    d.epilogue_params = "raw float32 bias";
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
    cr_assert(strstr(buf, ph) != NULL, "case %zu: %s", i, buf);
    if (cases[i].schedule != NULL) cr_assert(strstr(buf, cases[i].schedule) != NULL, "%s", buf);
    const char *src = NULL;
    JT_OK(e, jitk_matmul_source(p, &src));
    cr_assert(strstr(src, "jitk::mm90::tensor_maps<8> _jk_tas") != NULL, "case %zu", i);
    jitk_matmul_destroy(p);
    unsetenv("JITK_MM_SCHEDULE");
    unsetenv("JITK_MM_DRAIN");
  }
  /* Layouts that keep the copy, even when asked. */
  for (int i = 0; i < 5; i++) {
    d = jt_matmul_desc(i == 3 ? JITK_FLOAT32 : JITK_BFLOAT16, 4096, 4096, 4095);
    static const jitk_matmul_output outs[] = {{"pre", JITK_FLOAT32, "acc", 0, 0}};
    if (i == 0) d.b_order = JITK_COL_MAJOR;
    if (i == 1) d.d_order = JITK_COL_MAJOR;
    if (i == 2) {
      d.outputs = outs;
      d.num_outputs = 1;
    }
    if (i == 3) d.compute = JITK_COMPUTE_TF32;
    if (i == 4) {
      d.batch = 2;
      d.stride_a = 4096 * 4095 + 1;
    }
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    JT_OK(e, jitk_matmul_describe(p, buf, sizeof buf));
    cr_assert(strstr(buf, ph) == NULL, "layout %d: %s", i, buf);
    jitk_matmul_destroy(p);
  }
  unsetenv("JITK_MM_PHASES");
  jitk_engine_destroy(e);
}
