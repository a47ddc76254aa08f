/*
 * Programs linked from several pieces (jitk_module_link), without a GPU: a
 * kernel calling a device function of another CUDA source links for sm_90
 * with link-time optimization and without; PTX, relocatable cubins, LTO-IR
 * made by NVRTC and an object made by nvcc -rdc=true -dlto link with
 * jitk's pieces; name expressions of every CUDA piece are found; the cache
 * serves the linked image and its key covers every piece; each bad input
 * gets its own clear error.
 */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "driver/image.h"
#include "kernels/kernels.h"
#include "unit/cache/cache_common.h"

/* nvJitLink keeps memory of failed links after nvJitLinkDestroy (seen
 * with 13.0): its own, which sanitizer builds should not blame on jitk. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvJitLink.so\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }

#ifdef JITK_TEST_HAVE_DLTO_OBJECT
/* tests/gpu/link_scale.cu built by nvcc: an object with LTO-IR
 * (-rdc=true -dlto -c), a relocatable fatbin (-rdc=true -fatbin) and an
 * archive (-rdc=true -lib). */
extern const unsigned char jt_dlto_object[], jt_rdc_fatbin[], jt_rdc_library[];
extern const size_t jt_dlto_object_size, jt_rdc_fatbin_size, jt_rdc_library_size;
#endif

/* A device function in one source... */
static const char *lib_src =
    "__device__ float scale(float x) { return 3.0f * x + 1.0f; }\n"
    "template <typename T> __global__ void fill(T *y, T v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = v;\n"
    "}\n"
    "template __global__ void fill<float>(float *, float, int);\n";
/* ...called from a kernel in another. */
static const char *main_src =
    "extern __device__ float scale(float x);\n"
    "extern \"C\" __global__ void apply(const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = scale(x[i]);\n"
    "}\n";

static void need_jitlink(jitk_engine *e) {
  if (jk_link_probe(e) != JK_LINKER_NVJITLINK)
    cr_skip_test("nvJitLink was not found (%s)", e->nvrtc.jitlink_why ? e->nvrtc.jitlink_why : "?");
}

static jitk_link_piece cuda_piece(const char *src, const char *name, const jitk_module_options *o) {
  jitk_link_piece p;
  memset(&p, 0, sizeof p);
  p.kind = JITK_LINK_CUDA;
  p.data = src;
  p.name = name;
  p.options = o;
  return p;
}

static jitk_link_piece bytes_piece(jitk_link_kind kind, const void *data, size_t size,
                                   const char *name) {
  jitk_link_piece p;
  memset(&p, 0, sizeof p);
  p.kind = kind;
  p.data = data;
  p.size = size;
  p.name = name;
  return p;
}

static jitk_status link_with(jitk_engine *e, const jitk_link_piece *p, size_t n, jitk_lto lto,
                             jitk_module **m) {
  jitk_link_options o;
  jitk_link_options_init(&o);
  o.lto = lto;
  o.program_name = "test_link.cu";
  return jitk_module_link(e, p, n, &o, m);
}

/* The linked image: an executable sm_90 cubin holding `kernel`. */
static void assert_linked(jitk_engine *e, jitk_module *m, const char *kernel) {
  const void *img;
  size_t size;
  jitk_image_kind kind;
  JT_OK(e, jitk_module_image(m, &img, &size, &kind));
  cr_assert_eq(kind, JITK_IMAGE_CUBIN);
  int sm = 0;
  JT_OK(e, jk_cubin_arch(e, img, size, &sm));
  cr_assert_eq(sm, 90);
  const unsigned char *p = img;
  cr_assert_eq(p[16] | p[17] << 8, 2, "ELF type %d: not linked", p[16] | p[17] << 8);
  cr_assert_eq(jk_image_has_kernel(kind, img, size, kernel), 1, "no %s in the image", kernel);
}

/* lib_src compiled by NVRTC itself, as another tool would hand it over:
 * PTX, a relocatable cubin or LTO-IR. */
static void *nvrtc_build(jitk_link_kind kind, size_t *size) {
  nvrtcProgram prog;
  cr_assert_eq(nvrtcCreateProgram(&prog, lib_src, "lib.cu", 0, NULL, NULL), NVRTC_SUCCESS);
  const char *arch = kind == JITK_LINK_PTX ? "-arch=compute_90" : "-arch=sm_90";
  const char *opts[] = {arch, "-rdc=true", "-dlto"};
  nvrtcResult r = nvrtcCompileProgram(prog, kind == JITK_LINK_LTO_IR ? 3 : 2, opts);
  cr_assert_eq(r, NVRTC_SUCCESS, "%s", nvrtcGetErrorString(r));
  void *out = NULL;
  if (kind == JITK_LINK_PTX) {
    cr_assert_eq(nvrtcGetPTXSize(prog, size), NVRTC_SUCCESS);
    out = malloc(*size);
    cr_assert_eq(nvrtcGetPTX(prog, out), NVRTC_SUCCESS);
    *size = strlen(out); /* without its NUL: jitk adds one */
  } else if (kind == JITK_LINK_CUBIN) {
    cr_assert_eq(nvrtcGetCUBINSize(prog, size), NVRTC_SUCCESS);
    out = malloc(*size);
    cr_assert_eq(nvrtcGetCUBIN(prog, out), NVRTC_SUCCESS);
  } else {
    cr_assert_eq(nvrtcGetLTOIRSize(prog, size), NVRTC_SUCCESS);
    out = malloc(*size);
    cr_assert_eq(nvrtcGetLTOIR(prog, out), NVRTC_SUCCESS);
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

Test(link_program, two_sources_link_with_and_without_lto) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  jitk_link_piece p[] = {cuda_piece(lib_src, "lib.cu", NULL),
                         cuda_piece(main_src, "main.cu", NULL)};
  jitk_lto modes[] = {JITK_LTO_AUTO, JITK_LTO_ON, JITK_LTO_OFF};
  for (int i = 0; i < 3; i++) {
    jitk_module *m = NULL;
    JT_OK(e, link_with(e, p, 2, modes[i], &m));
    assert_linked(e, m, "apply");
    /* ptxas reports the kernels, at the link with LTO, at NVRTC's
     * compile of each piece without. */
    const jitk_kernel_resources *res;
    size_t n = 0;
    JT_OK(e, jitk_module_resources(m, &res, &n));
    cr_assert_geq(n, 1, "lto mode %d: no resources", (int)modes[i]);
    jitk_module_destroy(m);
  }
  /* Alone, main.cu does not link: scale is defined nowhere. */
  jitk_module *m = (jitk_module *)(uintptr_t)0x5e5e;
  JT_FAILS(e, JITK_ERR_COMPILE, "nvJitLink", link_with(e, &p[1], 1, JITK_LTO_AUTO, &m));
  cr_assert(strstr(jitk_errmsg(e), "scale") != NULL, "%s", jitk_errmsg(e));
  cr_assert(strstr(jitk_errmsg(e), "main.cu (CUDA source)") != NULL, "%s", jitk_errmsg(e));
  cr_assert_eq(m, (jitk_module *)(uintptr_t)0x5e5e, "a failed link leaves the handle alone");
  jitk_engine_destroy(e);
}

Test(link_program, name_expressions_of_every_piece) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  const char *names[] = {"fill<float>"};
  jitk_module_options lo;
  memset(&lo, 0, sizeof lo);
  lo.name_expressions = names;
  lo.num_name_expressions = 1;
  jitk_link_piece p[] = {cuda_piece(main_src, "main.cu", NULL), cuda_piece(lib_src, "lib.cu", &lo)};
  jitk_module *m = NULL;
  JT_OK(e, link_with(e, p, 2, JITK_LTO_OFF, &m));
  const char *lowered = NULL;
  JT_OK(e, jitk_module_lowered_name(m, "fill<float>", &lowered));
  cr_assert_str_eq(lowered, "_Z4fillIfEvPT_S0_i");
  assert_linked(e, m, lowered);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

Test(link_program, binary_pieces_from_other_tools) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  jitk_link_kind kinds[] = {JITK_LINK_PTX, JITK_LINK_CUBIN, JITK_LINK_LTO_IR};
  for (int i = 0; i < 3; i++) {
    size_t size = 0;
    void *bytes = nvrtc_build(kinds[i], &size);
    jitk_link_piece p[] = {bytes_piece(kinds[i], bytes, size, "lib"),
                           cuda_piece(main_src, "main.cu", NULL)};
    jitk_module *m = NULL;
    JT_OK(e, link_with(e, p, 2, JITK_LTO_AUTO, &m));
    assert_linked(e, m, "apply");
    jitk_module_destroy(m);
    /* LTO-IR needs link-time optimization: refused without it. */
    if (kinds[i] == JITK_LINK_LTO_IR)
      JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "piece 0 (lib) is LTO-IR",
               link_with(e, p, 2, JITK_LTO_OFF, &m));
    free(bytes);
  }
  jitk_engine_destroy(e);
}

Test(link_program, pieces_read_from_files) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  char *dir = jt_tmpdir();
  char path[4096];
  snprintf(path, sizeof path, "%s/lib.ltoir", dir);
  size_t size = 0;
  void *bytes = nvrtc_build(JITK_LINK_LTO_IR, &size);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(bytes, 1, size, f), size);
  fclose(f);
  jitk_link_piece p[] = {bytes_piece(JITK_LINK_LTO_IR, NULL, 0, NULL),
                         cuda_piece(main_src, "main.cu", NULL)};
  p[0].path = path;
  jitk_module *m = NULL;
  JT_OK(e, link_with(e, p, 2, JITK_LTO_AUTO, &m));
  assert_linked(e, m, "apply");
  jitk_module_destroy(m);
  /* A path that cannot be read. */
  snprintf(path, sizeof path, "%s/missing.ltoir", dir);
  JT_FAILS(e, JITK_ERR_IO, "missing.ltoir", link_with(e, p, 2, JITK_LTO_AUTO, &m));
  free(bytes);
  jt_rmdir(dir);
  jitk_engine_destroy(e);
}

#ifdef JITK_TEST_HAVE_DLTO_OBJECT
Test(link_program, an_nvcc_dlto_object_links_with_a_jitk_kernel) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  /* tests/gpu/link_scale.cu, built by nvcc -rdc=true -dlto -c, defines
   * scale() as lib_src does. */
  jitk_link_piece p[] = {
      bytes_piece(JITK_LINK_OBJECT, jt_dlto_object, jt_dlto_object_size, "link_scale.o"),
      cuda_piece(main_src, "main.cu", NULL)};
  jitk_module *m = NULL;
  JT_OK(e, link_with(e, p, 2, JITK_LTO_AUTO, &m));
  assert_linked(e, m, "apply");
  jitk_module_destroy(m);
  /* The fatbin and the archive, with and without LTO. */
  jitk_link_piece others[] = {
      bytes_piece(JITK_LINK_FATBIN, jt_rdc_fatbin, jt_rdc_fatbin_size, "link_scale.fatbin"),
      bytes_piece(JITK_LINK_LIBRARY, jt_rdc_library, jt_rdc_library_size, "liblink_scale.a")};
  for (int i = 0; i < 2; i++)
    for (int lto = 0; lto < 2; lto++) {
      p[0] = others[i];
      JT_OK(e, link_with(e, p, 2, lto ? JITK_LTO_ON : JITK_LTO_OFF, &m));
      assert_linked(e, m, "apply");
      jitk_module_destroy(m);
    }
  jitk_engine_destroy(e);
}
#endif

Test(link_program, the_device_runtime_as_a_piece) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  const char *parent_child =
      "extern \"C\" __global__ void inner(float *a) { a[threadIdx.x] = 1.0f; }\n"
      "extern \"C\" __global__ void outer(float *a) { inner<<<1, 32>>>(a); }\n";
  jitk_link_piece p[] = {cuda_piece(parent_child, "parent.cu", NULL),
                         bytes_piece(JITK_LINK_DEVICE_RUNTIME, NULL, 0, NULL)};
  jitk_module *m = NULL;
  jitk_status st = link_with(e, p, 2, JITK_LTO_OFF, &m);
  if (st == JITK_ERR_UNSUPPORTED) cr_skip_test("%s", jitk_errmsg(e));
  JT_OK(e, st);
  assert_linked(e, m, "outer");
  /* The library found is in the entry's dependency record. */
  bool found = false;
  for (size_t i = 0; i < m->entry->deps.n; i++)
    found |= strstr(m->entry->deps.v[i].path, "libcudadevrt.a") != NULL &&
             m->entry->deps.v[i].state == 'F';
  cr_assert(found, "libcudadevrt.a is not in the record");
  jitk_module_destroy(m);
  /* Without it, the device-side launch does not link. */
  JT_FAILS(e, JITK_ERR_COMPILE, "nvJitLink", link_with(e, p, 1, JITK_LTO_OFF, &m));
  jitk_engine_destroy(e);
}

Test(link_program, cached_and_keyed_over_every_piece) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  need_jitlink(e);
  size_t size = 0;
  unsigned char *ir = nvrtc_build(JITK_LINK_LTO_IR, &size);
  jitk_link_piece p[] = {bytes_piece(JITK_LINK_LTO_IR, ir, size, "lib"),
                         cuda_piece(main_src, "main.cu", NULL)};
  jitk_module *m1 = NULL, *m2 = NULL;
  JT_OK(e, link_with(e, p, 2, JITK_LTO_AUTO, &m1));
  JT_OK(e, link_with(e, p, 2, JITK_LTO_AUTO, &m2));
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 1);
  cr_assert_eq(s.memory_hits, 1);
  const void *img1;
  size_t n1;
  JT_OK(e, jitk_module_image(m1, &img1, &n1, NULL));
  void *copy = malloc(n1);
  memcpy(copy, img1, n1);
  jitk_module_destroy(m1);
  jitk_module_destroy(m2);
  jitk_engine_destroy(e);

  /* Another engine, as another process: from disk, nothing compiled. */
  e = jt_cache_engine(dir);
  JT_OK(e, link_with(e, p, 2, JITK_LTO_AUTO, &m1));
  s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.compiles, 0);
  const void *img2;
  size_t n2;
  JT_OK(e, jitk_module_image(m1, &img2, &n2, NULL));
  cr_assert(n2 == n1 && memcmp(img2, copy, n1) == 0, "the linked image comes back");
  jitk_module_destroy(m1);

  /* Each of these is another program: a miss, compiled and linked. */
  const char *fast[] = {"--use_fast_math"};
  jitk_module_options fo;
  memset(&fo, 0, sizeof fo);
  fo.options = fast;
  fo.num_options = 1;
  const char *lopt[] = {"-lineinfo"};
  uint64_t compiles = 0;
  for (int change = 0; change < 5; change++) {
    jitk_link_piece q[2] = {p[0], p[1]};
    jitk_link_options o;
    jitk_link_options_init(&o);
    o.program_name = "test_link.cu";
    if (change == 0) {
      /* One byte of the LTO-IR piece flipped in its last byte (padding a
       * reader may not notice; the key does). */
      unsigned char *other = malloc(size);
      memcpy(other, ir, size);
      other[size - 1] ^= 1;
      q[0].data = other;
    } else if (change == 1) {
      q[1].options = &fo;
    } else if (change == 2) {
      o.options = lopt;
      o.num_options = 1;
    } else if (change == 3) {
      q[1].name = "other.cu";
    } else {
      q[1].data =
          "extern __device__ float scale(float x);\n"
          "extern \"C\" __global__ void apply(const float *x, float *y, int n) {\n"
          "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  if (i < n) y[i] = scale(x[i]) + 1.0f;\n"
          "}\n";
    }
    jitk_status st = jitk_module_link(e, q, 2, &o, &m1);
    if (change == 0) free((void *)q[0].data);
    if (change == 0 && st != JITK_OK) {
      /* nvJitLink may refuse the changed bytes; then it was not a hit. */
      cr_assert_eq(st, JITK_ERR_COMPILE, "%s", jitk_errmsg(e));
      compiles++;
      continue;
    }
    JT_OK(e, st);
    compiles++;
    s = jt_stats_mine(e);
    cr_assert_eq(s.compiles, compiles, "change %d was served from the cache", change);
    jitk_module_destroy(m1);
  }
  free(copy);
  free(ir);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
}

Test(link_program, bad_input_errors) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = (jitk_module *)(uintptr_t)0x5e5e;
  jitk_link_piece ok = cuda_piece(main_src, "main.cu", NULL);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "no pieces", jitk_module_link(e, &ok, 0, NULL, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "pieces is NULL", jitk_module_link(e, NULL, 1, NULL, &m));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "module is NULL", jitk_module_link(e, &ok, 1, NULL, NULL));
  cr_assert_eq(jitk_module_link(NULL, &ok, 1, NULL, &m), JITK_ERR_INVALID_ARGUMENT);

  jitk_link_piece bad = ok;
  bad.kind = (jitk_link_kind)42;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "unknown kind (42)",
           jitk_module_link(e, &bad, 1, NULL, &m));
  bad = ok;
  bad.data = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "data (the source text) is NULL",
           jitk_module_link(e, &bad, 1, NULL, &m));
  bad = bytes_piece(JITK_LINK_CUBIN, NULL, 0, "lib.cubin");
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "neither data nor a path",
           jitk_module_link(e, &bad, 1, NULL, &m));
  bad = bytes_piece(JITK_LINK_CUBIN, "x", 0, NULL);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "piece 0 (piece0) has data but size 0",
           jitk_module_link(e, &bad, 1, NULL, &m));
  bad = bytes_piece(JITK_LINK_CUBIN, "not a cubin at all", 18, "junk.cubin");
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "junk.cubin", jitk_module_link(e, &bad, 1, NULL, &m));
  const char *null_opt[] = {NULL};
  jitk_module_options no;
  memset(&no, 0, sizeof no);
  no.options = null_opt;
  no.num_options = 1;
  bad = cuda_piece(main_src, "main.cu", &no);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "option 0 is NULL",
           jitk_module_link(e, &bad, 1, NULL, &m));

  jitk_link_options o;
  jitk_link_options_init(&o);
  o.struct_size = 3;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "struct_size is 3", jitk_module_link(e, &ok, 1, &o, &m));
  /* A size that ends inside a field: four bytes of program_name's
   * pointer were read, and the name was then read through half a
   * pointer (a crash). */
  jitk_link_options_init(&o);
  o.program_name = "prog.cu";
  o.struct_size = offsetof(jitk_link_options, program_name) + 4;
  char needle[64];
  snprintf(needle, sizeof needle, "struct_size is %zu", o.struct_size);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, needle, jitk_module_link(e, &ok, 1, &o, &m));
  /* The target and -lto are jitk's to give nvJitLink: an sm_80 image was
   * linked into the sm_90 engine's cache. */
  static const char *const theirs[][2] = {{"-arch=sm_80", "the target is the engine's"},
                                          {"--arch=sm_80", "the target is the engine's"},
                                          {"-lto", "set options->lto"},
                                          {" -arch=sm_80", "the target is the engine's"},
                                          {"-lto ", "set options->lto"}};
  for (size_t i = 0; i < sizeof theirs / sizeof theirs[0]; i++) {
    jitk_link_options_init(&o);
    o.options = &theirs[i][0];
    o.num_options = 1;
    JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, theirs[i][1], jitk_module_link(e, &ok, 1, &o, &m));
  }
  jitk_link_options_init(&o);
  o.lto = (jitk_lto)9;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "lto is 9", jitk_module_link(e, &ok, 1, &o, &m));
  jitk_link_options_init(&o);
  o.num_options = 1;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "options->options is NULL",
           jitk_module_link(e, &ok, 1, &o, &m));
  cr_assert_eq(jitk_link_options_init(NULL), JITK_ERR_INVALID_ARGUMENT);

  /* A cubin for another architecture names both. */
  jitk_engine *e80 = jt_compile_engine("sm_80");
  jitk_module *m80 = NULL;
  JT_OK(e80, jitk_module_create(e80, "extern \"C\" __global__ void k() {}", NULL, &m80));
  const void *img;
  size_t size;
  JT_OK(e80, jitk_module_image(m80, &img, &size, NULL));
  bad = bytes_piece(JITK_LINK_CUBIN, img, size, "old.cubin");
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "old.cubin", jitk_module_link(e, &bad, 1, NULL, &m));
  cr_assert(strstr(jitk_errmsg(e), "sm_80") != NULL, "%s", jitk_errmsg(e));
  jitk_module_destroy(m80);
  jitk_engine_destroy(e80);

  /* The linker refuses what it cannot read, and says which piece. */
  need_jitlink(e);
  bad = bytes_piece(JITK_LINK_LTO_IR, "garbage, not LTO-IR", 19, "junk.ltoir");
  jitk_link_piece two[] = {bad, ok};
  JT_FAILS(e, JITK_ERR_COMPILE, "junk.ltoir", jitk_module_link(e, two, 2, NULL, &m));
  /* A CUDA piece that does not compile is named. */
  jitk_link_piece broken[] = {cuda_piece("this is not CUDA", "broken.cu", NULL), ok};
  JT_FAILS(e, JITK_ERR_COMPILE, "piece 0 (broken.cu)", jitk_module_link(e, broken, 2, NULL, &m));
  /* An option nvJitLink does not know. */
  const char *weird[] = {"-no-such-option"};
  jitk_link_options_init(&o);
  o.options = weird;
  o.num_options = 1;
  jitk_link_piece pair[] = {cuda_piece(lib_src, "lib.cu", NULL), ok};
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "-no-such-option", jitk_module_link(e, pair, 2, &o, &m));
  cr_assert_eq(m, (jitk_module *)(uintptr_t)0x5e5e, "no failure touched the handle");
  jitk_engine_destroy(e);
}

Test(link_program, without_nvjitlink_the_error_says_what_to_install) {
  jitk_engine *e = jt_compile_engine("sm_90");
  e->nvrtc.no_jitlink = true;
  jitk_link_piece p[] = {cuda_piece(lib_src, "lib.cu", NULL),
                         cuda_piece(main_src, "main.cu", NULL)};
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "libnvJitLink.so.", link_with(e, p, 2, JITK_LTO_AUTO, &m));
  jitk_engine_destroy(e);
  e = jt_compile_engine("compute_90");
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "target is PTX", link_with(e, p, 2, JITK_LTO_AUTO, &m));
  jitk_engine_destroy(e);
}

/* Generated kernels linked with compiled pieces: the operation calls a
 * device function of an LTO-IR piece (or of the nvcc object) declared in
 * the preamble; without the piece it does not link. */
Test(link_program, generated_kernels_link_with_pieces) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_jitlink(e);
  size_t size = 0;
  void *ir = nvrtc_build(JITK_LINK_LTO_IR, &size);
  jitk_link_piece p = bytes_piece(JITK_LINK_LTO_IR, ir, size, "lib.ltoir");
  jitk_elementwise_options eo;
  memset(&eo, 0, sizeof eo);
  eo.preamble = "extern __device__ float scale(float x);";

  /* Unlinked, scale is defined nowhere: NVRTC's whole-program compile
   * cannot resolve it. */
  jitk_elementwise *bare = NULL;
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "float32 y", "y = scale(x)", "unlinked", &eo,
                                   &bare));
  const char *src = NULL;
  cr_assert_neq(jitk_elementwise_compile(bare, "", NULL, &src, NULL), JITK_OK);
  jitk_elementwise_destroy(bare);

  jitk_elementwise *k = NULL;
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "float32 y", "y = scale(x)", "scaled", &eo, &k));
  JT_OK(e, jitk_elementwise_link(k, &p, 1, NULL));
  /* The bytes were copied: the caller's may change. */
  unsigned char *kept = malloc(size);
  memcpy(kept, ir, size);
  memset(ir, 0, size);
  jitk_module *m = NULL;
  JT_OK(e, jitk_elementwise_compile(k, "", NULL, &src, &m));
  assert_linked(e, m, "scaled");
  jitk_module_destroy(m);
  /* Once only, and before the first compile. */
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "is linked with pieces already",
           jitk_elementwise_link(k, &p, 1, NULL));
  jitk_elementwise_destroy(k);
  /* A compile that failed leaves nothing compiled: the pieces may still
   * be given, and then it links. */
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "float32 y", "y = scale(x)", "retry", &eo, &k));
  cr_assert_neq(jitk_elementwise_compile(k, "", NULL, &src, NULL), JITK_OK);
  jitk_link_piece cuda = cuda_piece(lib_src, "lib.cu", NULL);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "goes into its preamble",
           jitk_elementwise_link(k, &cuda, 1, NULL));
  memcpy(ir, kept, size);
  free(kept);
  JT_OK(e, jitk_elementwise_link(k, &p, 1, NULL));
  JT_OK(e, jitk_elementwise_compile(k, "", NULL, &src, NULL));
  jitk_elementwise_destroy(k);
  /* One that compiled a specialization refuses them. */
  JT_OK(e, jitk_elementwise_create(e, "float32 x", "float32 y", "y = 2 * x", "early", NULL, &k));
  JT_OK(e, jitk_elementwise_compile(k, "", NULL, &src, NULL));
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "has specializations compiled or being compiled",
           jitk_elementwise_link(k, &p, 1, NULL));
  jitk_elementwise_destroy(k);

  /* A reduction whose map calls the function. */
#ifdef JITK_TEST_HAVE_DLTO_OBJECT
  jitk_link_piece obj =
      bytes_piece(JITK_LINK_OBJECT, jt_dlto_object, jt_dlto_object_size, "link_scale.o");
  jitk_reduction_options ro;
  memset(&ro, 0, sizeof ro);
  ro.preamble = "extern __device__ float scale(float x);";
  jitk_reduction *r = NULL;
  JT_OK(e, jitk_reduction_create(e, "float32 x", "float32 s", "scale(x)", "a + b", "s = a", "0",
                                 NULL, "scaled_sum", &ro, &r));
  JT_OK(e, jitk_reduction_link(r, &obj, 1, NULL));
  JT_OK(e, jitk_reduction_compile(r, "", NULL, &src, &m));
  assert_linked(e, m, "scaled_sum");
  jitk_module_destroy(m);
  jitk_reduction_destroy(r);
#endif
  cr_assert_eq(jitk_reduction_link(NULL, &p, 1, NULL), JITK_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(jitk_errmsg(NULL), "kernel is NULL") != NULL, "%s", jitk_errmsg(NULL));
  free(ir);
  jitk_engine_destroy(e);
}

/* Linked programs go into the warm-up manifest with every piece (binary
 * ones as their bytes), and a warm-up compiles them into another cache
 * under the keys the recording run looked up. */
Test(link_program, linked_programs_are_recorded_and_warmed) {
  char *work = jt_tmpdir();
  char man[4096], a[4096], b[4096];
  snprintf(man, sizeof man, "%s/m.jsonl", work);
  snprintf(a, sizeof a, "%s/a", work);
  snprintf(b, sizeof b, "%s/b", work);
  size_t ir_size = 0, ptx_size = 0;
  void *ir = nvrtc_build(JITK_LINK_LTO_IR, &ir_size);
  void *ptx = nvrtc_build(JITK_LINK_PTX, &ptx_size);
  static const char *const names[] = {"fill<float>"};
  jitk_module_options lib_opts;
  memset(&lib_opts, 0, sizeof lib_opts);
  lib_opts.name_expressions = names;
  lib_opts.num_name_expressions = 1;
  for (int round = 0; round < 3; round++) {
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = "sm_90";
    cfg.cache_mode = JITK_CACHE_ON;
    /* Recorded on cache a; warmed into b; then the same links on b. */
    cfg.cache_dir = round == 0 ? a : b;
    cfg.cache_record = round == 0 ? man : NULL;
    jitk_engine *e = NULL;
    JT_OK(NULL, jitk_engine_create(&cfg, &e));
    need_jitlink(e);
    if (round == 1) {
      jitk_cache_warm_report rep;
      memset(&rep, 0, sizeof rep);
      rep.struct_size = sizeof rep;
      JT_OK(e, jitk_cache_warm(e, man, NULL, &rep));
      cr_assert_eq(rep.kernels, 3);
      cr_assert_eq(rep.compiled, 3);
      cr_assert_eq(rep.failed + rep.damaged, 0);
      jitk_engine_destroy(e);
      continue;
    }
    jitk_link_piece p1[] = {bytes_piece(JITK_LINK_LTO_IR, ir, ir_size, "lib.ltoir"),
                            cuda_piece(main_src, "main.cu", NULL)};
    jitk_link_piece p2[] = {bytes_piece(JITK_LINK_PTX, ptx, ptx_size, "lib.ptx"),
                            cuda_piece(main_src, "main.cu", NULL)};
    jitk_link_piece p3[] = {cuda_piece(lib_src, "lib.cu", &lib_opts),
                            cuda_piece(main_src, "main.cu", NULL),
                            bytes_piece(JITK_LINK_DEVICE_RUNTIME, NULL, 0, NULL)};
    jitk_module *m = NULL;
    JT_OK(e, link_with(e, p1, 2, JITK_LTO_AUTO, &m));
    jitk_module_destroy(m);
    JT_OK(e, link_with(e, p2, 2, JITK_LTO_OFF, &m));
    jitk_module_destroy(m);
    JT_OK(e, link_with(e, p3, 3, JITK_LTO_ON, &m));
    const char *lowered = NULL;
    JT_OK(e, jitk_module_lowered_name(m, "fill<float>", &lowered));
    jitk_module_destroy(m);
    jitk_cache_stats s;
    JT_OK(e, jitk_cache_get_stats(e, &s, NULL));
    cr_assert_eq(s.compiles, round == 0 ? 3 : 0, "round %d: %llu compiles", round,
                 (unsigned long long)s.compiles);
    jitk_engine_destroy(e);
  }
  free(ir);
  free(ptx);
  jt_rmdir(work);
}

/* nvJitLink keeps a cache of its own under CUDA's compute cache, outside
 * the checks jitk makes of the caches it reads (src/nvrtc/link.c,
 * jitlink_create): every nvJitLink jitk creates is given -no-cache, for
 * linked programs and for a source that calls the device runtime. The
 * options each nvJitLinkCreate gets are recorded; a recorder that refuses
 * -no-cache stands for an nvJitLink older than the option. */
static int (*real_create)(void **, uint32_t, const char **);
static int creates, no_cache_given;
static bool refuse_no_cache;

static int recording_create(void **h, uint32_t n, const char **options) {
  const char *v[64];
  cr_assert(n <= 64);
  creates++;
  for (uint32_t i = 0; i < n; i++) {
    v[i] = options[i];
    if (strcmp(options[i], "-no-cache") == 0) {
      no_cache_given++;
      if (refuse_no_cache) v[i] = "-jitk-test-refuses-no-cache"; /* unknown to nvJitLink */
    }
  }
  return real_create(h, n, v);
}

static const char *device_launch =
    "__global__ void child(float *y) { y[threadIdx.x] = 1.0f; }\n"
    "extern \"C\" __global__ void parent(float *y) { child<<<1, 32>>>(y); }\n";

/* Links the two sources and compiles a kernel that launches another
 * (linked with the device runtime), on an engine without a disk cache,
 * so that each calls nvJitLink. */
static void link_both_ways(jitk_engine *e) {
  jitk_link_piece p[] = {cuda_piece(lib_src, "lib.cu", NULL),
                         cuda_piece(main_src, "main.cu", NULL)};
  jitk_module *m = NULL;
  JT_OK(e, link_with(e, p, 2, JITK_LTO_ON, &m));
  assert_linked(e, m, "apply");
  jitk_module_destroy(m);
  const char *rdc[] = {"-rdc=true"};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = rdc;
  o.num_options = 1;
  JT_OK(e, jitk_module_create(e, device_launch, &o, &m));
  assert_linked(e, m, "parent");
  jitk_module_destroy(m);
}

/* {"-rdc", "true"}, the value as the next option, as NVRTC also takes
 * it: linked with the device runtime as "-rdc=true" is (the module held
 * the unlinked relocatable cubin). */
Test(link_program, relocatable_code_asked_for_in_two_options) {
  jitk_engine *e = jt_uncached_compile_engine("sm_90");
  need_jitlink(e);
  static const char *const forms[][2] = {{"-rdc", "true"}, {"--relocatable-device-code", "true"}};
  for (size_t i = 0; i < 2; i++) {
    jitk_module_options o;
    memset(&o, 0, sizeof o);
    o.options = forms[i];
    o.num_options = 2;
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, device_launch, &o, &m));
    assert_linked(e, m, "parent");
    jitk_module_destroy(m);
  }
  jitk_engine_destroy(e);
}

/* An engine without a disk cache whose nvJitLinkCreate calls are
 * recorded (refusing -no-cache when `refuse`), after link_both_ways. */
static jitk_engine *recorded_links(bool refuse) {
  jitk_engine *e = jt_uncached_compile_engine("sm_90");
  need_jitlink(e);
  real_create = e->nvrtc.jitlink.create;
  e->nvrtc.jitlink.create = recording_create;
  refuse_no_cache = refuse;
  link_both_ways(e);
  return e;
}

Test(link_program, nvjitlink_cache_is_off) {
  jitk_engine *e = recorded_links(false);
  cr_assert_eq(creates, 2, "%d links", creates);
  cr_assert_eq(no_cache_given, 2, "-no-cache given to %d of %d links", no_cache_given, creates);
  cr_assert_not(atomic_load(&e->nvrtc.jitlink_no_cache_refused));
  jitk_engine_destroy(e);
}

Test(link_program, nvjitlink_no_cache_refused) {
  jitk_engine *e = recorded_links(true);
  /* The first link is given it once and made again without it; nothing
   * after is given it. */
  cr_assert_eq(no_cache_given, 1, "-no-cache given %d times", no_cache_given);
  cr_assert_eq(creates, 3, "%d nvJitLinkCreate calls", creates);
  cr_assert(atomic_load(&e->nvrtc.jitlink_no_cache_refused));
  /* A bad option of the caller's is still the caller's error. */
  const char *bad[] = {"-no-such-link-option"};
  jitk_link_options lo;
  jitk_link_options_init(&lo);
  lo.options = bad;
  lo.num_options = 1;
  jitk_link_piece p[] = {cuda_piece(lib_src, "lib.cu", NULL),
                         cuda_piece(main_src, "main.cu", NULL)};
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "-no-such-link-option",
           jitk_module_link(e, p, 2, &lo, &m));
  jitk_engine_destroy(e);
}
