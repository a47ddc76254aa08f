/*
 * Relocatable device code linked with the CUDA device runtime, without a
 * GPU: a kernel that launches another compiles and links for sm_90 on a
 * compile-only engine when -dc is given, fails to compile without it; the
 * options change the key and nothing else's; the cache serves the linked
 * image, and stops serving it when the libcudadevrt.a it was linked with
 * is no longer the one a new link would take; the errors say what is
 * missing and where it was looked for.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"
#include "driver/image.h"
#include "kernels/kernels.h"
#include "unit/cache/cache_common.h"

/* nvJitLink keeps about 200 KiB of a link that failed (seen with 13.0,
 * after nvJitLinkDestroy): its own memory, which sanitizer builds should
 * not blame on jitk. LeakSanitizer reads this hook when it is linked in. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvJitLink.so\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }

/* CuPy's test of dynamic parallelism (test_raw.py, _test_source4). */
static const char *parent_child =
    "extern \"C\" {\n"
    "__global__ void test_kernel_inner(float *arr, int N) {\n"
    "  unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "  if (tid < N) arr[tid] = 1.0;\n"
    "}\n"
    "__global__ void test_kernel(float *arr, int N, int inner_blk) {\n"
    "  unsigned int tid = blockDim.x * blockIdx.x + threadIdx.x;\n"
    "  if (tid < N / inner_blk) test_kernel_inner<<<1, inner_blk>>>(arr + tid * inner_blk, "
    "inner_blk);\n"
    "}\n"
    "}\n";

/* Skips the test when this machine has neither a linker nor the device
 * runtime (a CPU machine without the CUDA toolkit's libraries). */
static void need_linker(jitk_engine *e) {
  if (jk_link_probe(e) == JK_LINKER_NONE)
    cr_skip_test("nvJitLink was not found (%s): relocatable code cannot be linked here",
                 e->nvrtc.jitlink_why ? e->nvrtc.jitlink_why : "?");
  jk_deps deps;
  memset(&deps, 0, sizeof deps);
  char *path = NULL;
  void *data = NULL;
  size_t size = 0;
  jitk_status st = jk_find_devrt(e, &deps, &path, &data, &size);
  jk_deps_free(e, &deps);
  if (st != JITK_OK) cr_skip_test("%s", jitk_errmsg(e));
  cr_log_info("linking with %s (%zu bytes) through nvJitLink %u.%u at %s", path, size,
              e->nvrtc.jitlink.major, e->nvrtc.jitlink.minor, e->nvrtc.jitlink.path);
  jk_free(e, path);
  jk_free(e, data);
}

static jitk_status create_with(jitk_engine *e, const char *source, const char *option,
                               jitk_module **m) {
  const char *opts[] = {option};
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = option ? 1 : 0;
  o.program_name = "parent_child.cu";
  return jitk_module_create(e, source, &o, m);
}

/* The dependency record of libcudadevrt.a in a module's entry: the file
 * found (state 'F'), or NULL. */
static const jk_dep *devrt_dep(const jitk_module *m) {
  const jk_deps *d = &m->entry->deps;
  for (size_t i = 0; i < d->n; i++) {
    size_t n = strlen(d->v[i].path);
    if (d->v[i].state == 'F' && n >= 14 && strcmp(d->v[i].path + n - 14, "libcudadevrt.a") == 0)
      return &d->v[i];
  }
  return NULL;
}

Test(link, options_that_ask_for_relocatable_code) {
  const char *yes[][2] = {{"-dc", NULL},
                          {"--device-c", NULL},
                          {"-rdc=true", NULL},
                          {"--relocatable-device-code=true", NULL},
                          {"-rdc=false", "-dc"},
                          {"-DX=1", "-rdc=true"},
                          /* read as NVRTC reads them, past white space */
                          {" -rdc=true", NULL},
                          {"-dc\t", NULL},
                          {"-rdc", " true"}};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    cr_assert(jk_options_rdc(yes[i], yes[i][1] ? 2 : 1), "%s %s", yes[i][0],
              yes[i][1] ? yes[i][1] : "");
  const char *no[][2] = {{"-rdc=false", NULL},
                         {"-dc", "-rdc=false"},
                         {"-DDC=1", NULL},
                         {"--use_fast_math", NULL},
                         {"-dcx", NULL}};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
    cr_assert(!jk_options_rdc(no[i], no[i][1] ? 2 : 1), "%s", no[i][0]);
  cr_assert(!jk_options_rdc(NULL, 0));
  /* NVRTC also takes the value as the next option; that form was read as
   * no relocatable code, so the device runtime was never linked. */
  const char *split[][3] = {{"-rdc", "true", NULL},
                            {"--relocatable-device-code", "true", NULL},
                            {"-rdc", "false", "-dc"},
                            {"-dc", "-rdc", "false"}};
  const bool want[] = {true, true, true, false};
  for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
    size_t n = split[i][2] ? 3 : 2;
    cr_assert_eq(jk_options_rdc(split[i], n), want[i], "%s %s %s", split[i][0], split[i][1],
                 split[i][2] ? split[i][2] : "");
  }
}

Test(link, device_launch_links_for_sm90_without_a_gpu) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_linker(e);
  const char *forms[] = {"-dc", "--device-c", "-rdc=true", "--relocatable-device-code=true"};
  for (int f = 0; f < 4; f++) {
    jitk_module *m = NULL;
    JT_OK(e, create_with(e, parent_child, forms[f], &m));
    const void *img;
    size_t size;
    jitk_image_kind kind;
    JT_OK(e, jitk_module_image(m, &img, &size, &kind));
    cr_assert_eq(kind, JITK_IMAGE_CUBIN, "%s", forms[f]);
    int sm = 0;
    JT_OK(e, jk_cubin_arch(e, img, size, &sm));
    cr_assert_eq(sm, 90);
    /* Linked: an executable ELF (ET_EXEC), not NVRTC's relocatable one. */
    const unsigned char *p = img;
    cr_assert_eq(p[16] | p[17] << 8, 2, "%s: ELF type %d", forms[f], p[16] | p[17] << 8);
    cr_assert_eq(jk_image_has_kernel(kind, img, size, "test_kernel"), 1);
    cr_assert_eq(jk_image_has_kernel(kind, img, size, "test_kernel_inner"), 1);
    uint32_t sizes[8];
    cr_assert_eq(jk_cubin_param_sizes(img, size, "test_kernel", sizes, 8), 3);
    cr_assert(sizes[0] == 8 && sizes[1] == 4 && sizes[2] == 4);
    /* ptxas's report of NVRTC's compile still describes the kernels. */
    const jitk_kernel_resources *res;
    size_t n;
    JT_OK(e, jitk_module_resources(m, &res, &n));
    cr_assert_eq(n, 2, "%s", forms[f]);
    /* The record holds the library linked in, with its hash. */
    const jk_dep *d = devrt_dep(m);
    cr_assert_not_null(d, "%s: no libcudadevrt.a in the record", forms[f]);
    cr_assert(d->hashed);
    jitk_module_destroy(m);
  }
  jitk_engine_destroy(e);
}

Test(link, device_launch_without_dc_is_a_compile_error) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = (jitk_module *)(uintptr_t)0x5e5e;
  JT_FAILS(e, JITK_ERR_COMPILE, "device-side kernel launch",
           create_with(e, parent_child, NULL, &m));
  cr_assert_eq(m, (jitk_module *)(uintptr_t)0x5e5e);
  JT_FAILS(e, JITK_ERR_COMPILE, "parent_child.cu", create_with(e, parent_child, "-rdc=false", &m));
  jitk_engine_destroy(e);
}

/* Labels of the fields of a key material. */
static bool has_label(const jk_material *m, const char *label) {
  size_t pos = 0, n;
  const char *l;
  const unsigned char *bytes;
  bool ok;
  while (jk_material_next(m->data, m->len, &pos, &l, &bytes, &n, &ok))
    if (strcmp(l, label) == 0) return true;
  cr_assert(ok, "malformed key material");
  return false;
}

Test(link, the_option_changes_the_key_and_nothing_else) {
  jitk_engine *e = jt_compile_engine("sm_90");
  const char *dc[] = {"-dc"}, *other[] = {"-DX=1"};
  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.source = parent_child;
  jk_material plain, with_dc, with_other;
  jk_material_init(&plain, e);
  jk_material_init(&with_dc, e);
  jk_material_init(&with_other, e);
  jk_key k_plain, k_dc, k_other;
  JT_OK(e, jk_cache_key(e, &in, "raw/1", &plain, &k_plain));
  in.options = dc;
  in.num_options = 1;
  JT_OK(e, jk_cache_key(e, &in, "raw/1", &with_dc, &k_dc));
  in.options = other;
  JT_OK(e, jk_cache_key(e, &in, "raw/1", &with_other, &k_other));
  cr_assert(memcmp(k_plain.bytes, k_dc.bytes, 16) != 0);
  cr_assert(memcmp(k_dc.bytes, k_other.bytes, 16) != 0);
  /* Only relocatable programs carry the linker and the search: other
   * keys are what they were before linking existed. */
  cr_assert(has_label(&with_dc, "linker"));
  cr_assert(has_label(&with_dc, "devrt_search"));
  cr_assert(!has_label(&plain, "linker") && !has_label(&plain, "devrt_search"));
  cr_assert(!has_label(&with_other, "linker") && !has_label(&with_other, "devrt_search"));
  /* The same request gives the same key. */
  jk_material again;
  jk_material_init(&again, e);
  jk_key k_again;
  in.options = dc;
  JT_OK(e, jk_cache_key(e, &in, "raw/1", &again, &k_again));
  cr_assert(memcmp(k_dc.bytes, k_again.bytes, 16) == 0);
  /* The same -dc program kept unlinked (a manifest's "relocatable"
   * output) is another image, under another key. */
  jk_material unlinked;
  jk_material_init(&unlinked, e);
  jk_key k_unlinked;
  in.output = JK_OUTPUT_RELOCATABLE;
  JT_OK(e, jk_cache_key(e, &in, "raw/1", &unlinked, &k_unlinked));
  cr_assert(memcmp(k_dc.bytes, k_unlinked.bytes, 16) != 0,
            "a relocatable piece under a linked program's key");
  cr_assert(has_label(&unlinked, "unlinked") && !has_label(&with_dc, "unlinked"));
  jk_material_free(&unlinked);
  jk_material_free(&plain);
  jk_material_free(&with_dc);
  jk_material_free(&with_other);
  jk_material_free(&again);
  jitk_engine_destroy(e);
}

Test(link, a_second_compile_is_a_cache_hit) {
  char *dir = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  need_linker(e);
  jitk_module *m1 = NULL, *m2 = NULL;
  JT_OK(e, create_with(e, parent_child, "-dc", &m1));
  JT_OK(e, create_with(e, parent_child, "-dc", &m2));
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.compiles, 1);
  cr_assert_eq(s.memory_hits, 1);
  const void *img1, *img2;
  size_t n1, n2;
  JT_OK(e, jitk_module_image(m1, &img1, &n1, NULL));
  void *copy = malloc(n1);
  memcpy(copy, img1, n1);
  jitk_module_destroy(m1);
  jitk_module_destroy(m2);
  jitk_engine_destroy(e);

  /* Another engine (as another process would) reads it from disk. */
  e = jt_cache_engine(dir);
  JT_OK(e, create_with(e, parent_child, "-dc", &m2));
  s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.compiles, 0);
  JT_OK(e, jitk_module_image(m2, &img2, &n2, NULL));
  cr_assert_eq(n2, n1);
  cr_assert(memcmp(img2, copy, n1) == 0, "the linked image comes back");
  cr_assert_not_null(devrt_dep(m2), "the record comes back with it");
  /* The same source without -dc is another request, which fails. */
  jitk_module *m3 = NULL;
  cr_assert_eq(create_with(e, parent_child, NULL, &m3), JITK_ERR_COMPILE);
  jitk_module_destroy(m2);
  jitk_engine_destroy(e);
  free(copy);
  jt_rmdir(dir);
}

static void copy_file(const char *from, const char *to) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* A libcudadevrt.a that appears earlier in the search than the one an
 * entry was linked with turns the entry into a miss, in memory as on
 * disk: a new link would take the other file. */
Test(link, another_devrt_is_a_miss) {
  char *dir = jt_tmpdir(), *first = jt_tmpdir(), *second = jt_tmpdir();
  jitk_engine *e = jt_cache_engine(dir);
  need_linker(e);
  /* The machine's own library, copied into the second folder. */
  jk_deps deps;
  memset(&deps, 0, sizeof deps);
  char *real = NULL;
  void *data = NULL;
  size_t size = 0;
  JT_OK(e, jk_find_devrt(e, &deps, &real, &data, &size));
  jk_deps_free(e, &deps);
  char path[4096];
  snprintf(path, sizeof path, "%s/libcudadevrt.a", second);
  copy_file(real, path);
  jk_free(e, real);
  jk_free(e, data);
  jitk_engine_destroy(e);

  const char *dirs[] = {first, second, NULL};
  e = jt_cache_engine(dir);
  e->nvrtc.devrt_dirs = dirs;
  jitk_module *m = NULL;
  JT_OK(e, create_with(e, parent_child, "-dc", &m));
  const jk_dep *d = devrt_dep(m);
  cr_assert_not_null(d);
  cr_assert_str_eq(d->path, path);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);

  e = jt_cache_engine(dir);
  e->nvrtc.devrt_dirs = dirs;
  JT_OK(e, create_with(e, parent_child, "-dc", &m));
  cr_assert_eq(jt_stats_mine(e).disk_hits, 1);
  jitk_module_destroy(m);
  /* Now the first folder has one too. */
  char earlier[4096];
  snprintf(earlier, sizeof earlier, "%s/libcudadevrt.a", first);
  copy_file(path, earlier);
  JT_OK(e, create_with(e, parent_child, "-dc", &m));
  jitk_cache_stats s = jt_stats_mine(e);
  cr_assert_eq(s.memory_hits, 0, "a memory hit whose record no longer holds is refused");
  cr_assert_eq(s.compiles, 1);
  d = devrt_dep(m);
  cr_assert_not_null(d);
  cr_assert_str_eq(d->path, earlier);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);

  /* On disk too: a new engine finds the entry linked with the first
   * folder's library, and not the one linked with the second's. */
  e = jt_cache_engine(dir);
  e->nvrtc.devrt_dirs = dirs;
  JT_OK(e, create_with(e, parent_child, "-dc", &m));
  s = jt_stats_mine(e);
  cr_assert_eq(s.disk_hits, 1);
  cr_assert_eq(s.compiles, 0);
  cr_assert_str_eq(devrt_dep(m)->path, earlier);
  jitk_module_destroy(m);
  /* And a changed library is a miss again. */
  unlink(earlier);
  JT_OK(e, create_with(e, parent_child, "-dc", &m));
  cr_assert_str_eq(devrt_dep(m)->path, path);
  cr_assert_eq(jt_stats_mine(e).compiles, 0, "the older entry serves again");
  cr_assert_eq(jt_stats_mine(e).disk_hits, 2);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  jt_rmdir(dir);
  jt_rmdir(first);
  jt_rmdir(second);
}

Test(link, missing_devrt_names_the_folders) {
  char *a = jt_tmpdir(), *b = jt_tmpdir();
  const char *dirs[] = {a, b, NULL};
  jitk_engine *e = jt_compile_engine("sm_90");
  if (jk_link_probe(e) == JK_LINKER_NONE) cr_skip_test("nvJitLink was not found");
  e->nvrtc.devrt_dirs = dirs;
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "libcudadevrt.a", create_with(e, parent_child, "-dc", &m));
  cr_assert(strstr(jitk_errmsg(e), a) != NULL && strstr(jitk_errmsg(e), b) != NULL, "%s",
            jitk_errmsg(e));
  cr_assert(strstr(jitk_errmsg(e), "nvidia-cuda-runtime") != NULL, "%s", jitk_errmsg(e));
  jitk_engine_destroy(e);
  jt_rmdir(a);
  jt_rmdir(b);
}

Test(link, without_a_linker_the_error_says_what_to_install) {
  jitk_engine *e = jt_compile_engine("sm_90");
  e->nvrtc.no_jitlink = true;
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "nvJitLink", create_with(e, parent_child, "-dc", &m));
  cr_assert(strstr(jitk_errmsg(e), "libnvJitLink.so.") != NULL, "%s", jitk_errmsg(e));
  cr_assert(strstr(jitk_errmsg(e), "only compiles") != NULL, "%s", jitk_errmsg(e));
  /* Programs without -dc do not care. */
  JT_OK(e, jitk_module_create(e, "extern \"C\" __global__ void k() {}", NULL, &m));
  jitk_module_destroy(m);
  jitk_engine_destroy(e);

  /* PTX targets are linked by the driver, for its device: a compile-only
   * engine cannot. */
  e = jt_compile_engine("compute_90");
  JT_FAILS(e, JITK_ERR_UNSUPPORTED, "PTX target", create_with(e, parent_child, "-dc", &m));
  jitk_engine_destroy(e);
}

Test(link, link_errors_are_compile_errors) {
  jitk_engine *e = jt_compile_engine("sm_90");
  need_linker(e);
  const char *src =
      "extern __device__ int defined_elsewhere;\n"
      "extern \"C\" __global__ void k(int *x) { *x = defined_elsewhere; }\n";
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_COMPILE, "linking it with the CUDA device runtime",
           create_with(e, src, "-dc", &m));
  cr_assert(strstr(jitk_errmsg(e), "defined_elsewhere") != NULL, "%s", jitk_errmsg(e));
  jitk_engine_destroy(e);
}
