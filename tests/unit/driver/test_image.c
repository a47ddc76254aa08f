/* Images: kinds told by content, truncated and foreign cubins refused
 * before the driver sees them, files read with clear errors. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"
#include "driver/image.h"

static const char *src = "extern \"C\" __global__ void k(int *p) { *p = 42; }\n";

/* Compiles `src` for arch and returns a malloc'd copy of the image. */
static void *compile(const char *arch, size_t *size) {
  jitk_engine *e = jt_compile_engine(arch);
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, src, NULL, &m));
  const void *img;
  JT_OK(e, jitk_module_image(m, &img, size, NULL));
  void *copy = malloc(*size + 1);
  memcpy(copy, img, *size + 1);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return copy;
}

Test(image, cubin_loads_on_compile_only_engine) {
  size_t size;
  void *cubin = compile("sm_90", &size);
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create_from_image(e, JITK_IMAGE_AUTO, cubin, size, &m));
  const void *img;
  size_t got;
  jitk_image_kind kind;
  JT_OK(e, jitk_module_image(m, &img, &got, &kind));
  cr_assert_eq(kind, JITK_IMAGE_CUBIN);
  cr_assert_eq(got, size);
  cr_assert(memcmp(img, cubin, size) == 0);
  jitk_module_destroy(m);
  /* sm_86 code runs on an sm_89 target (same major, older minor). */
  jitk_engine *e89 = jt_compile_engine("sm_89");
  size_t s86;
  void *c86 = compile("sm_86", &s86);
  JT_OK(e89, jitk_module_create_from_image(e89, JITK_IMAGE_CUBIN, c86, s86, &m));
  jitk_module_destroy(m);
  jitk_engine_destroy(e89);
  free(c86);
  jitk_engine_destroy(e);
  free(cubin);
}

Test(image, wrong_arch_is_refused) {
  size_t size;
  void *cubin = compile("sm_80", &size);
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "sm_80", jitk_module_create_from_image(e, JITK_IMAGE_AUTO, cubin, size, &m));
  cr_assert(strstr(jitk_errmsg(e), "sm_90") != NULL, "%s", jitk_errmsg(e));
  jitk_engine_destroy(e);
  free(cubin);
}

Test(image, truncated_cubins_are_refused) {
  size_t size;
  void *cubin = compile("sm_90", &size);
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  /* Every cut must be caught: the section table and sections reach the
   * end of the file. */
  size_t cuts[] = {3, 40, 63, 64, 200, size / 2, size - 64, size - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    jitk_status st = jitk_module_create_from_image(e, JITK_IMAGE_AUTO, cubin, cuts[i], &m);
    cr_assert(st == JITK_ERR_INVALID_IMAGE, "cut at %zu of %zu gave %s", cuts[i], size, jitk_errname(st));
    cr_assert(cuts[i] < 4 || strstr(jitk_errmsg(e), "truncated") != NULL, "cut %zu: %s", cuts[i],
              jitk_errmsg(e));
  }
  jitk_engine_destroy(e);
  free(cubin);
}

Test(image, kinds_by_content) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  const char garbage[] = "\x01\x02\x03\x04garbage bytes";
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "not a cubin", jitk_module_create_from_image(e, JITK_IMAGE_AUTO, garbage, sizeof garbage, &m));
  const char *ptx = "//\n// hand-written\n.version 8.0\n.target sm_90\n.address_size 64\n";
  JT_OK(e, jitk_module_create_from_image(e, JITK_IMAGE_AUTO, ptx, strlen(ptx), &m));
  jitk_image_kind kind;
  const void *img;
  size_t size;
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_PTX);
  jitk_module_destroy(m);
  unsigned char fatbin[64] = {0x50, 0xed, 0x55, 0xba};
  JT_OK(e, jitk_module_create_from_image(e, JITK_IMAGE_AUTO, fatbin, sizeof fatbin, &m));
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_FATBIN);
  jitk_module_destroy(m);
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "given as cubin but its content is PTX",
           jitk_module_create_from_image(e, JITK_IMAGE_CUBIN, ptx, strlen(ptx), &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "empty", jitk_module_create_from_image(e, JITK_IMAGE_AUTO, ptx, 0, &m));
  unsigned char elf32[64] = {0x7f, 'E', 'L', 'F', 1, 1};
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "64-bit", jitk_module_create_from_image(e, JITK_IMAGE_AUTO, elf32, sizeof elf32, &m));
  jitk_engine_destroy(e);
}

Test(image, files) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_IO, "/nonexistent/k.cubin", jitk_module_create_from_file(e, "/nonexistent/k.cubin", &m));
  char path[] = "/tmp/jitk-image-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "is empty", jitk_module_create_from_file(e, path, &m));
  size_t size;
  void *cubin = compile("sm_90", &size);
  FILE *f = fopen(path, "wb");
  fwrite(cubin, 1, size, f);
  fclose(f);
  JT_OK(e, jitk_module_create_from_file(e, path, &m));
  jitk_module_destroy(m);
  /* A truncated file names itself in the message. */
  f = fopen(path, "wb");
  fwrite(cubin, 1, size / 3, f);
  fclose(f);
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "truncated", jitk_module_create_from_file(e, path, &m));
  cr_assert(strstr(jitk_errmsg(e), path) != NULL, "%s", jitk_errmsg(e));
  unlink(path);
  free(cubin);
  jitk_engine_destroy(e);
}

static const char *params_src =
    "struct D { float *p; long long s[4]; };\n"
    "extern \"C\" __global__ void k(float a, const float *x, D d, long long n, char c, double2 z) {\n"
    "  if (n < 0) d.p[0] = a + x[0] + c + z.x;\n"
    "}\n"
    "extern \"C\" __global__ void none() {}\n";

static void expect_params(int n, const uint32_t *sizes) {
  static const uint32_t want[] = {4, 8, 40, 8, 1, 16};
  cr_assert_eq(n, 6);
  for (int i = 0; i < 6; i++) cr_assert_eq(sizes[i], want[i], "parameter %d: %u bytes", i, sizes[i]);
}

Test(image, parameter_sizes_from_cubin_and_ptx) {
  const char *archs[] = {"sm_90", "compute_90"};
  for (int a = 0; a < 2; a++) {
    jitk_engine *e = jt_compile_engine(archs[a]);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, params_src, NULL, &m));
    const void *img;
    size_t size;
    JT_OK(e, jitk_module_image(m, &img, &size, NULL));
    uint32_t sizes[16];
    int n;
    if (a == 0) {
      expect_params(jk_cubin_param_sizes(img, size, "k", sizes, 16), sizes);
      cr_assert_eq(jk_cubin_param_sizes(img, size, "none", sizes, 16), 0);
      cr_assert_eq(jk_cubin_param_sizes(img, size, "missing", sizes, 16), -1);
      cr_assert_eq(jk_cubin_param_sizes(img, size, "k", sizes, 3), -2, "more than cap");
      n = jk_cubin_param_sizes(img, size / 2, "k", sizes, 16);
      cr_assert_eq(n, -2, "truncated");
    } else {
      expect_params(jk_ptx_param_sizes(img, "k", sizes, 16), sizes);
      cr_assert_eq(jk_ptx_param_sizes(img, "none", sizes, 16), 0);
      cr_assert_eq(jk_ptx_param_sizes(img, "missing", sizes, 16), -1);
    }
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
  }
}

static void collect(void *user, const char *name, size_t len) {
  char *out = user;
  strncat(out, name, len);
  strcat(out, ";");
}

Test(image, kernel_names) {
  const char *names_src =
      "__device__ __noinline__ float helper(float x) { return x * x + 1; }\n"
      "extern \"C\" __global__ void first(float *x) { x[0] = helper(x[1]); }\n"
      "template <typename T> __global__ void second(T *x) { x[0] = T(1); }\n"
      "template __global__ void second<int>(int *);\n";
  const char *archs[] = {"sm_90", "compute_90"};
  for (int a = 0; a < 2; a++) {
    jitk_engine *e = jt_compile_engine(archs[a]);
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, names_src, NULL, &m));
    const void *img;
    size_t size;
    jitk_image_kind kind;
    JT_OK(e, jitk_module_image(m, &img, &size, &kind));
    char names[256] = "";
    cr_assert_eq(jk_image_kernels(kind, img, size, collect, names), 2, "%s: %s", archs[a], names);
    cr_assert(strstr(names, "first;") != NULL, "%s", names);
    cr_assert(strstr(names, "_Z6secondIiEvPT_;") != NULL, "%s", names);
    cr_assert(strstr(names, "helper") == NULL, "device functions are not kernels: %s", names);
    cr_assert_eq(jk_image_has_kernel(kind, img, size, "first"), 1);
    cr_assert_eq(jk_image_has_kernel(kind, img, size, "firs"), 0);
    cr_assert_eq(jk_image_has_kernel(JITK_IMAGE_FATBIN, img, size, "first"), -1);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
  }
}

#ifdef JITK_TEST_HAVE_FATBIN
Test(image, fatbin_from_nvcc) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create_from_image(e, JITK_IMAGE_AUTO, jt_fatbin, jt_fatbin_size, &m));
  jitk_image_kind kind;
  const void *img;
  size_t size;
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_FATBIN);
  const void *cubin;
  size_t cubin_size;
  cr_assert(jk_fatbin_cubin(img, size, 90, &cubin, &cubin_size), "an uncompressed cubin inside");
  int sm = 0;
  JT_OK(e, jk_cubin_arch(e, cubin, cubin_size, &sm));
  cr_assert_eq(sm, 90, "the device's own cubin is preferred");
  cr_assert(jk_fatbin_cubin(img, size, 80, &cubin, &cubin_size));
  JT_OK(e, jk_cubin_arch(e, cubin, cubin_size, &sm));
  cr_assert_eq(sm, 80);
  cr_assert_eq(jk_image_has_kernel(JITK_IMAGE_FATBIN, img, size, "fill"), 1);
  cr_assert_eq(jk_image_has_kernel(JITK_IMAGE_FATBIN, img, size, "nope"), 0);
  uint32_t sizes[8];
  cr_assert_eq(jk_cubin_param_sizes(cubin, cubin_size, "fill", sizes, 8), 3);
  cr_assert(sizes[0] == 4 && sizes[1] == 8 && sizes[2] == 4);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}
#endif
