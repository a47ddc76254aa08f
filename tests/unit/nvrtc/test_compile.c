/* NVRTC without a GPU: targets, default options, errors, name expressions,
 * headers, ptxas's report, and every dtype in kernel code. */
#include <stdio.h>
#include <stdlib.h>

#include "array/array.h"
#include "common.h"
#include "engine.h"
#include "driver/image.h"

static const char *saxpy =
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, long long n) {\n"
    "  __shared__ float s[256];\n"
    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
    "  s[threadIdx.x] = i < n ? x[i] : 0.0f;\n"
    "  __syncthreads();\n"
    "  if (i < n) y[i] = a * s[threadIdx.x] + y[i];\n"
    "}\n";

static int cubin_sm(jitk_module *m) {
  const void *img;
  size_t size;
  jitk_image_kind kind;
  JT_OK(NULL, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_CUBIN);
  int sm = 0;
  JT_OK(NULL, jk_cubin_arch(NULL, img, size, &sm));
  return sm;
}

Test(nvrtc, cubins_for_sm80_and_sm90) {
  const char *archs[] = {"sm_80", "sm_90"};
  int want[] = {80, 90};
  for (int i = 0; i < 2; i++) {
    jitk_engine *e = jt_compile_engine(archs[i]);
    const char *arch;
    JT_OK(e, jitk_engine_arch(e, &arch));
    cr_assert_str_eq(arch, archs[i]);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, saxpy, NULL, &m));
    cr_assert_eq(cubin_sm(m), want[i]);
    const jitk_kernel_resources *res;
    size_t n;
    JT_OK(e, jitk_module_resources(m, &res, &n));
    cr_assert_eq(n, 1);
    cr_assert_str_eq(res[0].name, "saxpy");
    cr_assert(res[0].registers > 0);
    cr_assert_eq(res[0].shared_bytes, 1024);
    cr_assert_eq(res[0].spill_stores, 0);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
  }
}

Test(nvrtc, ptx_for_compute_targets) {
  jitk_engine *e = jt_compile_engine("compute_90");
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, saxpy, NULL, &m));
  const void *img;
  size_t size;
  jitk_image_kind kind;
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_PTX);
  cr_assert(strstr(img, ".target sm_90") != NULL);
  cr_assert(strstr(img, ".entry saxpy") != NULL);
  cr_assert_eq(strlen(img), size, "PTX is NUL-terminated text");
  const jitk_kernel_resources *res;
  size_t n = 99;
  JT_OK(e, jitk_module_resources(m, &res, &n));
  cr_assert_eq(n, 0, "no ptxas report for PTX");
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(nvrtc, default_options) {
  jitk_engine *e = jt_compile_engine("sm_90");
  char **opts;
  size_t n;
  JT_OK(e, jk_nvrtc_final_options(e, NULL, 0, false, &opts, &n));
  bool std = false, arch = false, inc = false;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(opts[i], "-std=c++17") == 0) std = true;
    if (strcmp(opts[i], "--gpu-architecture=sm_90") == 0) arch = true;
    if (strncmp(opts[i], "-I", 2) == 0) inc = true;
  }
  cr_assert(std && arch && inc, "defaults: -std=c++17, the target, -I");
  jk_options_free(e, opts, n);

  const char *mine[] = {"-std=c++20", "-DN=3"};
  JT_OK(e, jk_nvrtc_final_options(e, mine, 2, false, &opts, &n));
  cr_assert_str_eq(opts[0], "-std=c++20");
  cr_assert_str_eq(opts[1], "-DN=3");
  for (size_t i = 2; i < n; i++)
    cr_assert(strncmp(opts[i], "-std", 4) != 0, "user's -std kept alone");
  jk_options_free(e, opts, n);

  const char *arch_opt[] = {"-arch=sm_80"};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_config.arch",
           jk_nvrtc_final_options(e, arch_opt, 1, false, &opts, &n));
  /* NVRTC drops white space at both ends of each option: a target or
   * another output spelled with a space passed the checks it then obeyed. */
  const char *spaced[] = {" -arch=sm_80", "--gpu-architecture=sm_80\t", "\n-code=sm_80"};
  for (size_t i = 0; i < sizeof spaced / sizeof spaced[0]; i++)
    JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_engine_config.arch",
             jk_nvrtc_final_options(e, &spaced[i], 1, false, &opts, &n));
  const char *lto[] = {" -dlto "};
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "LTO IR", jk_nvrtc_final_options(e, lto, 1, false, &opts, &n));
  /* The options NVRTC gets, and the key, are as NVRTC reads them. */
  const char *padded[] = {"  -DN=3\t", " -std=c++20"};
  JT_OK(e, jk_nvrtc_final_options(e, padded, 2, false, &opts, &n));
  cr_assert_str_eq(opts[0], "-DN=3");
  cr_assert_str_eq(opts[1], "-std=c++20");
  for (size_t i = 2; i < n; i++)
    cr_assert(strncmp(opts[i], "-std", 4) != 0, "user's -std kept alone");
  jk_options_free(e, opts, n);

  /* Arch-specific compiles (wgmma kernels) name the "a" variant. */
  JT_OK(e, jk_nvrtc_final_options(e, NULL, 0, true, &opts, &n));
  bool specific = false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(opts[i], "--gpu-architecture=sm_90a") == 0) specific = true;
  cr_assert(specific, "arch_specific compiles for sm_90a");
  jk_options_free(e, opts, n);
  jitk_engine_destroy(e);
}

Test(nvrtc, user_options_reach_the_compiler) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *src =
      "#if N != 3\n#error N must be 3\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = N; }\n";
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_COMPILE, "N must be 3", jitk_module_create(e, src, NULL, &m));
  const char *opt = "-DN=3";
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = &opt;
  o.num_options = 1;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(nvrtc, compile_error_carries_log_options_and_name) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.program_name = "broken.cu";
  jitk_module *m = NULL;
  const char *src = "extern \"C\" __global__ void k(float *p) {\n  p[0] = undefined_thing;\n}\n";
  JT_FAILS(e, JITK_ERR_COMPILE, "broken.cu(2)", jitk_module_create(e, src, &o, &m));
  const char *msg = jitk_errmsg(e);
  cr_assert(strstr(msg, "undefined_thing") != NULL, "%s", msg);
  cr_assert(strstr(msg, "options:") != NULL && strstr(msg, "-std=c++17") != NULL, "%s", msg);
  cr_assert(strstr(msg, "failed to compile for sm_90") != NULL, "%s", msg);
  jitk_engine_destroy(e);
}

Test(nvrtc, name_expressions_and_lowered_names) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *src =
      "template <typename T, int N> __global__ void fill(T *p) { p[threadIdx.x] = T(N); }\n"
      "namespace ns { __global__ void plain(int *p) { *p = 1; } }\n";
  const char *names[] = {"fill<float, 3>", "fill<double, 7>", "ns::plain"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 3;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  const char *lowered;
  JT_OK(e, jitk_module_lowered_name(m, "fill<float, 3>", &lowered));
  cr_assert_str_eq(lowered, "_Z4fillIfLi3EEvPT_");
  JT_OK(e, jitk_module_lowered_name(m, "fill<double, 7>", &lowered));
  cr_assert_str_eq(lowered, "_Z4fillIdLi7EEvPT_");
  JT_OK(e, jitk_module_lowered_name(m, "ns::plain", &lowered));
  cr_assert_str_eq(lowered, "_ZN2ns5plainEPi");
  JT_FAILS(e, JITK_ERR_NOT_FOUND, "fill<int, 1>",
           jitk_module_lowered_name(m, "fill<int, 1>", &lowered));
  const jitk_kernel_resources *res;
  size_t n;
  JT_OK(e, jitk_module_resources(m, &res, &n));
  cr_assert_eq(n, 3);
  jitk_module_destroy(m);

  /* An expression that names nothing is NVRTC's compile error, naming it. */
  const char *bad[] = {"missing<int>"};
  o.name_expressions = bad;
  o.num_name_expressions = 1;
  JT_FAILS(e, JITK_ERR_COMPILE, "missing", jitk_module_create(e, src, &o, &m));
  jitk_engine_destroy(e);
}

Test(nvrtc, headers_from_strings_and_embedded) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_header h[] = {{"my/consts.h", "#pragma once\nconstexpr int kScale = 4;\n"}};
  const char *src =
      "#include <my/consts.h>\n"
      "#include <jitk/array.cuh>\n"
      "#include <jitk/complex.cuh>\n"
      "extern \"C\" __global__ void k(jitk::array<float, 2> a, jitk::array<jitk::complex<double>, "
      "1> c) {\n"
      "  a.flat(threadIdx.x) *= kScale;\n"
      "  a(1, 2) = a.size();\n"
      "  c(0) = c(0) * jitk::conj(c(1));\n"
      "}\n";
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.headers = h;
  o.num_headers = 1;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  jitk_module_destroy(m);
  jitk_header nulls[] = {{NULL, "x"}};
  o.headers = nulls;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "header 0", jitk_module_create(e, src, &o, &m));
  jitk_engine_destroy(e);
}

Test(nvrtc, every_dtype_in_kernel_code) {
  /* One kernel per dtype taking a scalar and a pointer of its C type,
   * compiled together in one program. */
  jitk_engine *e = jt_compile_engine("sm_90");
  char src[8192];
  size_t n = (size_t)snprintf(src, sizeof src,
                              "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                              "#include <jitk/complex.cuh>\n#include <jitk/fp8.cuh>\n");
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    jitk_dtype_info info;
    JT_OK(NULL, jitk_dtype_get_info((jitk_dtype)d, &info));
    n += (size_t)snprintf(src + n, sizeof src - n,
                          "extern \"C\" __global__ void put_%s(%s v, %s *out) { "
                          "static_assert(sizeof(%s) == %zu, \"size\"); "
                          "static_assert(alignof(%s) == %zu, \"align\"); *out = v; }\n",
                          info.name, info.ctype, info.ctype, info.ctype, info.size, info.ctype,
                          info.align);
  }
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  const jitk_kernel_resources *res;
  size_t count;
  JT_OK(e, jitk_module_resources(m, &res, &count));
  cr_assert_eq(count, JITK_DTYPE_COUNT - 1);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(nvrtc, target_choice) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_target t;
  JT_OK(e, jk_target_for_device(e, 9, 0, &t));
  cr_assert_str_eq(t.arch, "sm_90");
  cr_assert(!t.ptx);
  /* A device newer than this NVRTC gets PTX for the newest target. */
  JT_OK(e, jk_target_for_device(e, 19, 9, &t));
  cr_assert(t.ptx);
  cr_assert(strncmp(t.arch, "compute_", 8) == 0, "%s", t.arch);
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "older", jk_target_for_device(e, 3, 5, &t));
  JT_OK(e, jk_target_parse(e, "sm_90a", &t));
  cr_assert(t.specific && !t.ptx && t.major == 9 && t.minor == 0);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "sm_XY", jk_target_parse(e, "sm_90x", &t));
  jitk_engine_destroy(e);
}

Test(nvrtc, include_dir_discovery) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *dir;
  JT_OK(e, jitk_engine_cuda_include_dir(e, &dir));
  cr_assert_not_null(dir, "this machine has the CUDA toolkit");
  char path[4096];
  snprintf(path, sizeof path, "%s/cuda_fp16.h", dir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  fclose(f);
  jitk_engine_destroy(e);

  /* A bogus CUDA_HOME falls through to the other places. */
  setenv("CUDA_HOME", "/nonexistent/cuda", 1);
  e = jt_compile_engine("sm_90");
  JT_OK(e, jitk_engine_cuda_include_dir(e, &dir));
  cr_assert_not_null(dir);
  jitk_engine_destroy(e);

  /* An explicit folder wins, even a wrong one (with a warning). */
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.cuda_include_dir = "/tmp";
  cfg.log_level = JITK_LOG_OFF;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  JT_OK(e, jitk_engine_cuda_include_dir(e, &dir));
  cr_assert_str_eq(dir, "/tmp");
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_COMPILE, "cuda_fp16.h",
           jitk_module_create(e, "#include <cuda_fp16.h>\n", NULL, &m));
  jitk_engine_destroy(e);
}

Test(nvrtc, ptxas_report_parsing) {
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
      "ptxas info    : Function properties for _Z1kPf\n"
      "ptxas         .     400 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 14 registers, used 1 barriers, 2048 bytes smem, 376 bytes cmem[0]\n"
      "ptxas info    : Compile time = 3.361 ms\n"
      "ptxas info    : Compiling entry function 'e' for 'sm_90'\n"
      "ptxas info    : Used 4 registers, used 0 barriers\n";
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_kernel_resources *r;
  size_t n;
  JT_OK(e, jk_ptxas_parse(e, log, &r, &n));
  cr_assert_eq(n, 2);
  cr_assert_str_eq(r[0].name, "_Z1kPf");
  cr_assert_eq(r[0].registers, 14);
  cr_assert_eq(r[0].stack_bytes, 400);
  cr_assert_eq(r[0].spill_stores, 8);
  cr_assert_eq(r[0].spill_loads, 12);
  cr_assert_eq(r[0].shared_bytes, 2048);
  cr_assert_eq(r[0].constant_bytes, 376);
  cr_assert_str_eq(r[1].name, "e");
  cr_assert_eq(r[1].registers, 4);
  cr_assert_eq(r[1].shared_bytes, 0);
  jk_ptxas_free(e, r, n);
  jitk_engine_destroy(e);
}

/* Found by tests/fuzz/fuzz_ptxas: "Used 2222222222registers" made the
 * register count negative. Numbers out of their field's range are no
 * numbers ptxas prints; they read as 0 with a warning naming the kernel,
 * and the rest of the report still counts. */
typedef struct warn_capture {
  int warnings;
  char last[1024];
} warn_capture;

static void capture_warning(void *user, jitk_log_level level, const char *message) {
  warn_capture *c = user;
  if (level != JITK_LOG_WARN) return;
  c->warnings++;
  snprintf(c->last, sizeof c->last, "%s", message);
}

Test(nvrtc, ptxas_report_numbers_out_of_range) {
  warn_capture cap = {0, ""};
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  cfg.log_fn = capture_warning;
  cfg.log_user = &cap;
  cfg.log_level = JITK_LOG_WARN;
  jitk_engine *e = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &e));
  const char *log =
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas         .     99999999999999999999999 bytes stack frame, 4 bytes spill stores, "
      "8 bytes spill loads\n"
      "ptxas info    : Used 2222222222 registers, used 0 barriers, 64 bytes smem\n"
      "Compiling entry function ''\n"
      "Used 2222222222registers\n";
  jitk_kernel_resources *r;
  size_t n;
  JT_OK(e, jk_ptxas_parse(e, log, &r, &n));
  cr_assert_eq(n, 2);
  cr_assert_str_eq(r[0].name, "k");
  cr_assert_eq(r[0].stack_bytes, 0);
  cr_assert_eq(r[0].spill_stores, 4);
  cr_assert_eq(r[0].spill_loads, 8);
  cr_assert_eq(r[0].registers, 0);
  cr_assert_eq(r[0].shared_bytes, 64);
  cr_assert_str_eq(r[1].name, "");
  cr_assert_eq(r[1].registers, 0);
  cr_assert_eq(cap.warnings, 3, "%d warnings, last: %s", cap.warnings, cap.last);
  cr_assert(strstr(cap.last, "out of range") != NULL && strstr(cap.last, "2222222222") != NULL,
            "%s", cap.last);
  jk_ptxas_free(e, r, n);
  /* The largest numbers that fit still read. */
  JT_OK(e, jk_ptxas_parse(e,
                          "Compiling entry function 'm' for 'sm_90'\n"
                          "Used 2147483647 registers, 18446744073709551615 bytes smem\n",
                          &r, &n));
  cr_assert_eq(n, 1);
  cr_assert_eq(r[0].registers, 2147483647);
  cr_assert_eq(r[0].shared_bytes, (size_t)18446744073709551615ull);
  cr_assert_eq(cap.warnings, 3);
  jk_ptxas_free(e, r, n);
  jitk_engine_destroy(e);
}

/* NVRTC's entry points live in a table on the engine, so each failure path
 * can be forced. */
static nvrtcResult fail_oom_compile(nvrtcProgram p, int n, const char *const *o) {
  (void)p, (void)n, (void)o;
  return NVRTC_ERROR_OUT_OF_MEMORY;
}
static nvrtcResult fail_create(nvrtcProgram *p, const char *s, const char *n, int h,
                               const char *const *hs, const char *const *hn) {
  (void)p, (void)s, (void)n, (void)h, (void)hs, (void)hn;
  return NVRTC_ERROR_PROGRAM_CREATION_FAILURE;
}
static nvrtcResult fail_cubin(nvrtcProgram p, char *c) {
  (void)p, (void)c;
  return NVRTC_ERROR_INTERNAL_ERROR;
}
static nvrtcResult fail_lowered(nvrtcProgram p, const char *e, const char **l) {
  (void)p, (void)e, (void)l;
  return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}

Test(nvrtc, forced_failures) {
  jitk_engine *e = jt_uncached_compile_engine("sm_90");
  jitk_module *m = NULL;
  const char *src = "template <int N> __global__ void k(int *p) { *p = N; }\n";
  const char *names[] = {"k<3>"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 1;

  __typeof__(e->nvrtc.nvrtcCompileProgram) compile = e->nvrtc.nvrtcCompileProgram;
  e->nvrtc.nvrtcCompileProgram = fail_oom_compile;
  JT_FAILS(e, JITK_ERR_OUT_OF_MEMORY, "NVRTC_ERROR_OUT_OF_MEMORY",
           jitk_module_create(e, src, &o, &m));
  e->nvrtc.nvrtcCompileProgram = compile;

  __typeof__(e->nvrtc.nvrtcCreateProgram) create = e->nvrtc.nvrtcCreateProgram;
  e->nvrtc.nvrtcCreateProgram = fail_create;
  JT_FAILS(e, JITK_ERR_NVRTC, "nvrtcCreateProgram failed", jitk_module_create(e, src, &o, &m));
  e->nvrtc.nvrtcCreateProgram = create;

  __typeof__(e->nvrtc.nvrtcGetCUBIN) cubin = e->nvrtc.nvrtcGetCUBIN;
  e->nvrtc.nvrtcGetCUBIN = fail_cubin;
  JT_FAILS(e, JITK_ERR_NVRTC, "reading the compiled image", jitk_module_create(e, src, &o, &m));
  e->nvrtc.nvrtcGetCUBIN = cubin;

  __typeof__(e->nvrtc.nvrtcGetLoweredName) lowered = e->nvrtc.nvrtcGetLoweredName;
  e->nvrtc.nvrtcGetLoweredName = fail_lowered;
  JT_FAILS(e, JITK_ERR_NOT_FOUND, "k<3>", jitk_module_create(e, src, &o, &m));
  e->nvrtc.nvrtcGetLoweredName = lowered;

  JT_OK(e, jitk_module_create(e, src, &o, &m));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* A caller's header named as one of jitk's replaces it (NVRTC refused the
 * pair with a bare INVALID_INPUT, issue 11), and the cache tells the
 * versions apart by content. */
Test(nvrtc, caller_header_replaces_an_embedded_one) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *src =
      "#include <jitk/array.cuh>\n"
      "#ifndef MINE\n#define MINE 1\n#endif\n"
      "extern \"C\" __global__ void k(int *p) { *p = MINE; }\n";
  const char *contents[] = {NULL, "#define MINE 7\n", "#define MINE 8\n"};
  void *images[3];
  size_t sizes[3];
  for (int i = 0; i < 3; i++) {
    jitk_header h = {"jitk/array.cuh", contents[i]};
    jitk_module_options o;
    memset(&o, 0, sizeof o);
    o.headers = &h;
    o.num_headers = contents[i] ? 1 : 0;
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, &o, &m));
    const void *img;
    JT_OK(e, jitk_module_image(m, &img, &sizes[i], NULL));
    images[i] = malloc(sizes[i]);
    memcpy(images[i], img, sizes[i]);
    jitk_module_destroy(m);
  }
  for (int i = 0; i < 3; i++)
    for (int j = i + 1; j < 3; j++)
      cr_assert(sizes[i] != sizes[j] || memcmp(images[i], images[j], sizes[i]) != 0,
                "headers %d and %d gave the same image", i, j);
  for (int i = 0; i < 3; i++) free(images[i]);
  /* Two of the caller's own with one name are refused clearly. */
  jitk_header twice[] = {{"a.h", "#define A 1\n"}, {"a.h", "#define A 2\n"}};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.headers = twice;
  o.num_headers = 2;
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "headers 0 and 1 are both named \"a.h\"",
           jitk_module_create(e, src, &o, &m));
  jitk_engine_destroy(e);
}

/* Options whose output is not a cubin or PTX: NVRTC succeeds and there
 * was "no cubin: NVRTC_SUCCESS" (issue 11). */
Test(nvrtc, options_with_other_outputs_are_refused) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *refused[] = {"-dlto", "--dlink-time-opt", "--gen-opt-lto", "--optix-ir",
                           "-fdevice-syntax-only"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    jitk_module_options o;
    memset(&o, 0, sizeof o);
    o.options = &refused[i];
    o.num_options = 1;
    jitk_module *m = NULL;
    JT_FAILS(e, JITK_ERR_UNSUPPORTED, "is not supported", jitk_module_create(e, saxpy, &o, &m));
    cr_assert(strstr(jitk_errmsg(e), refused[i]) != NULL, "%s", jitk_errmsg(e));
    cr_assert_null(m);
  }
  /* Options that only share a prefix are the user's business. */
  const char *fine = "-dlto-not-really";
  char **opts;
  size_t n;
  JT_OK(e, jk_nvrtc_final_options(e, &fine, 1, false, &opts, &n));
  jk_options_free(e, opts, n);
  jitk_engine_destroy(e);
}

/* Builds a kernel that meets a float16 and a bfloat16 with a value of each
 * plain type under every operator, on both sides: through jitk/half_math's
 * operators (`explicit_form` false), or written out as what those
 * operators are to do, the half in float and the value passed as the
 * number type overload resolution picks for it (an int for types that
 * promote to it, an unsigned int for char32_t, a float for a class that
 * converts to one). */
static char *mixed_source(bool explicit_form, bool bf16) {
  static const struct {
    const char *type, *init, *as;
  } plain[] = {
      {"bool", "(bool)d[0]", "int"},
      {"char", "(char)d[1]", "int"},
      {"signed char", "(signed char)d[2]", "int"},
      {"unsigned char", "(unsigned char)d[3]", "int"},
      {"short", "(short)d[4]", "int"},
      {"unsigned short", "(unsigned short)d[5]", "int"},
      {"int", "(int)d[6]", "int"},
      {"unsigned int", "(unsigned int)d[7]", "unsigned int"},
      {"long", "(long)d[8]", "long"},
      {"unsigned long", "(unsigned long)d[9]", "unsigned long"},
      {"long long", "(long long)d[10]", "long long"},
      {"unsigned long long", "(unsigned long long)d[11]", "unsigned long long"},
      {"float", "(float)d[12]", "float"},
      {"double", "d[13]", "double"},
      {"E", "(E)(int)d[14]", "int"},
      {"C", "C{(float)d[15]}", "float"},
      {"char16_t", "(char16_t)d[16]", "int"},
      {"char32_t", "(char32_t)d[17]", "unsigned int"},
      {"wchar_t", "(wchar_t)d[18]", "int"},
  };
  static const char *const ops[] = {"+", "-", "*", "/", "<", ">", "<=", ">=", "==", "!="};
  static const struct {
    const char *array, *to_float;
  } halves[] = {{"h", "__half2float"}, {"b", "__bfloat162float"}};
  size_t cap = 1 << 20, len = 0;
  char *s = malloc(cap);
  len += (size_t)snprintf(
      s + len, cap - len,
      "#include <cuda_fp16.h>\n%s#include <jitk/half_math.cuh>\n"
      "enum E { e0, e1, e7 = 7 };\n"
      "struct C { float v; __device__ operator float() const { return v; } };\n"
      "template <typename T> __device__ double as_d(T v) { return (double)v; }\n"
      "extern \"C\" __global__ void k(const __half *h, const %s *b, const double *d,\n"
      "                             double *out) {\n"
      "  int t = threadIdx.x;\n  double acc = 0;\n",
      bf16 ? "#include <cuda_bf16.h>\n" : "", bf16 ? "__nv_bfloat16" : "void");
  for (size_t p = 0; p < sizeof plain / sizeof plain[0]; p++) {
    len +=
        (size_t)snprintf(s + len, cap - len, "  {\n    %s s = %s;\n", plain[p].type, plain[p].init);
    for (size_t h = 0; h < (bf16 ? 2u : 1u); h++)
      for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        if (explicit_form)
          len += (size_t)snprintf(
              s + len, cap - len,
              "    acc += as_d(%s(%s[t]) %s (%s)s);\n    acc += as_d((%s)s %s %s(%s[t]));\n",
              halves[h].to_float, halves[h].array, ops[o], plain[p].as, plain[p].as, ops[o],
              halves[h].to_float, halves[h].array);
        else
          len += (size_t)snprintf(s + len, cap - len,
                                  "    acc += as_d(%s[t] %s s);\n    acc += as_d(s %s %s[t]);\n",
                                  halves[h].array, ops[o], ops[o], halves[h].array);
      }
    len += (size_t)snprintf(s + len, cap - len, "  }\n");
  }
  snprintf(s + len, cap - len, "  out[t] = acc;\n}\n");
  return s;
}

/* jitk/half_math.cuh's operators between a half and a plain number are
 * templates that must do what one function per number type did: the same
 * code as the arithmetic written out, for 760 expressions; and for the 380
 * of float16 alone, without cuda_bf16.h, as a float16 kernel reads it. */
static void same_code_as_written_out(bool bf16) {
  jitk_engine *e = jt_compile_engine("sm_90");
  void *images[2];
  size_t sizes[2];
  for (int i = 0; i < 2; i++) {
    char *src = mixed_source(i == 1, bf16);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, src, NULL, &m));
    const void *img;
    jitk_image_kind kind;
    JT_OK(e, jitk_module_image(m, &img, &sizes[i], &kind));
    images[i] = malloc(sizes[i]);
    memcpy(images[i], img, sizes[i]);
    jitk_module_destroy(m);
    free(src);
  }
  cr_assert_eq(sizes[0], sizes[1]);
  cr_assert(memcmp(images[0], images[1], sizes[0]) == 0,
            "the operators compile to other code than the arithmetic they stand for");
  free(images[0]);
  free(images[1]);
  jitk_engine_destroy(e);
}

Test(nvrtc, half_math_mixed_operators_are_the_written_out_arithmetic) {
  same_code_as_written_out(true);
  same_code_as_written_out(false);
}

/* NVRTC 12.9 and newer keep a cache of their own whose key leaves out
 * -ftz (src/nvrtc/nvrtc.c, own_cache_off); jitk turns it off for every
 * compile. NVRTC's --enable-cache-trace writes a line to the log at each
 * step of its cache, and none when the cache is off: the control below,
 * NVRTC called directly with the trace alone, shows the lines appear. */
Test(nvrtc, own_cache_is_off) {
  jitk_engine *e = jt_uncached_compile_engine("sm_90");
  const jk_nvrtc *nv = &e->nvrtc;
  if (nv->major * 100 + nv->minor < 1209) {
    jitk_engine_destroy(e);
    cr_skip("NVRTC %d.%d keeps no cache of its own", nv->major, nv->minor);
  }
  const char *src = "extern \"C\" __global__ void k(float *p) { *p *= 2.0f; }\n";
  const char *trace[] = {"--enable-cache-trace", "--gpu-architecture=sm_90"};
  nvrtcProgram prog = NULL;
  cr_assert_eq(nv->nvrtcCreateProgram(&prog, src, "k.cu", 0, NULL, NULL), NVRTC_SUCCESS);
  cr_assert_eq(nv->nvrtcCompileProgram(prog, 2, trace), NVRTC_SUCCESS);
  size_t size = 0;
  cr_assert_eq(nv->nvrtcGetProgramLogSize(prog, &size), NVRTC_SUCCESS);
  char *direct = malloc(size + 1);
  cr_assert_not_null(direct);
  cr_assert_eq(nv->nvrtcGetProgramLog(prog, direct), NVRTC_SUCCESS);
  direct[size] = '\0';
  nv->nvrtcDestroyProgram(&prog);
  cr_assert(strstr(direct, "[nvrtc cache]") != NULL, "the trace shows NVRTC's cache: %s", direct);
  free(direct);

  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = trace;
  o.num_options = 1;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, &o, &m));
  const char *log = NULL;
  JT_OK(e, jitk_module_log(m, &log));
  cr_assert(log != NULL && strstr(log, "[nvrtc cache]") == NULL,
            "jitk's compile went through NVRTC's cache: %s", log ? log : "(no log)");
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

/* An NVRTC that refuses --no-cache (as one older than the option would):
 * NVRTC's real compile, given an option it does not know in its place.
 * The compile is made again without it, and the engine's later compiles
 * do not give it. */
static nvrtcResult (*real_compile)(nvrtcProgram, int, const char *const *);
static int no_cache_given;

static nvrtcResult refusing_compile(nvrtcProgram prog, int n, const char *const *options) {
  const char *v[64];
  cr_assert(n <= 64);
  for (int i = 0; i < n; i++) {
    v[i] = options[i];
    if (strcmp(options[i], "--no-cache") == 0) {
      no_cache_given++;
      v[i] = "--no-cache-refused-by-this-test";
    }
  }
  return real_compile(prog, n, v);
}

Test(nvrtc, own_cache_option_refused) {
  jitk_engine *e = jt_uncached_compile_engine("sm_90");
  if (e->nvrtc.major * 100 + e->nvrtc.minor < 1209) {
    jitk_engine_destroy(e);
    cr_skip("NVRTC %d.%d is given no --no-cache", e->nvrtc.major, e->nvrtc.minor);
  }
  real_compile = e->nvrtc.nvrtcCompileProgram;
  e->nvrtc.nvrtcCompileProgram = refusing_compile;
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, saxpy, NULL, &m));
  cr_assert_eq(cubin_sm(m), 90);
  jitk_module_destroy(m);
  cr_assert_eq(no_cache_given, 1);
  cr_assert(atomic_load(&e->nvrtc.no_cache_refused));
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k(int *p) { *p = 1; }\n", NULL, &m));
  jitk_module_destroy(m);
  cr_assert_eq(no_cache_given, 1, "a refused option is not given again");
  /* A real compile error still reads as one. */
  JT_FAILS(e, JITK_ERR_COMPILE, "undefined",
           jitk_module_create(e, "int f() { return undefined; }\n", NULL, &m));
  jitk_engine_destroy(e);
}
