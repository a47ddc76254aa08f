/* Images: kinds told by content, truncated and foreign cubins refused
 * before the driver sees them, files read with clear errors. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
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
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "sm_80",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, cubin, size, &m));
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
    cr_assert(st == JITK_ERR_INVALID_IMAGE, "cut at %zu of %zu gave %s", cuts[i], size,
              jitk_errname(st));
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
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "not a cubin",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, garbage, sizeof garbage, &m));
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
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "empty",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, ptx, 0, &m));
  unsigned char elf32[64] = {0x7f, 'E', 'L', 'F', 1, 1};
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "64-bit",
           jitk_module_create_from_image(e, JITK_IMAGE_AUTO, elf32, sizeof elf32, &m));
  jitk_engine_destroy(e);
}

Test(image, files) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jitk_module *m = NULL;
  JT_FAILS(e, JITK_ERR_IO, "/nonexistent/k.cubin",
           jitk_module_create_from_file(e, "/nonexistent/k.cubin", &m));
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
  /* What is not a regular file is refused at once: a FIFO without a
   * writer (opening it used to wait for one), a device that never ends
   * (/dev/zero was read until memory ran out), a directory. */
  char fifo[] = "/tmp/jitk-fifo-XXXXXX";
  cr_assert_not_null(mkdtemp(fifo));
  char fifo_path[64];
  snprintf(fifo_path, sizeof fifo_path, "%s/p", fifo);
  cr_assert_eq(mkfifo(fifo_path, 0600), 0);
  JT_FAILS(e, JITK_ERR_IO, "not a regular file", jitk_module_create_from_file(e, fifo_path, &m));
  JT_FAILS(e, JITK_ERR_IO, "not a regular file", jitk_module_create_from_file(e, "/dev/zero", &m));
  JT_FAILS(e, JITK_ERR_IO, "Is a directory", jitk_module_create_from_file(e, fifo, &m));
  unlink(fifo_path);
  rmdir(fifo);
  jitk_engine_destroy(e);
}

/* Parameters past 4352 bytes in all: ptxas writes their sizes in another
 * record (EIATTR_KPARAM_INFO_V2), which jitk once skipped, taking such a
 * kernel for one without parameters; a launch without arguments then
 * handed the driver slots nobody wrote. */
Test(image, parameter_sizes_past_4352_bytes) {
  jitk_engine *e = jt_compile_engine("sm_90");
  static char text[16384];
  size_t at = (size_t)snprintf(text, sizeof text,
                               "struct Big { char b[16383]; };\n"
                               "extern \"C\" __global__ void big(Big s, int *out) { out[0] = "
                               "s.b[7]; }\n"
                               "extern \"C\" __global__ void many(");
  for (int i = 0; i < 600; i++)
    at += (size_t)snprintf(text + at, sizeof text - at, "%sfloat *p%d", i ? ", " : "", i);
  at += (size_t)snprintf(text + at, sizeof text - at, ") { p0[0] = p599[0]; }\n");
  cr_assert(at < sizeof text);
  jitk_module *m = NULL;
  JT_OK(e, jitk_module_create(e, text, NULL, &m));
  const void *img;
  size_t size;
  JT_OK(e, jitk_module_image(m, &img, &size, NULL));
  uint32_t sizes[700];
  int n = jk_cubin_param_sizes(img, size, "big", sizes, 700);
  cr_assert(n == 2 && sizes[0] == 16383 && sizes[1] == 8, "big: %d parameters", n);
  n = jk_cubin_param_sizes(img, size, "many", sizes, 700);
  cr_assert_eq(n, 600);
  for (int i = 0; i < 600; i++) cr_assert_eq(sizes[i], 8, "parameter %d: %u bytes", i, sizes[i]);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
}

static const char *params_src =
    "struct D { float *p; long long s[4]; };\n"
    "extern \"C\" __global__ void k(float a, const float *x, D d, long long n, char c, double2 z) "
    "{\n"
    "  if (n < 0) d.p[0] = a + x[0] + c + z.x;\n"
    "}\n"
    "extern \"C\" __global__ void none() {}\n";

static void expect_params(int n, const uint32_t *sizes) {
  static const uint32_t want[] = {4, 8, 40, 8, 1, 16};
  cr_assert_eq(n, 6);
  for (int i = 0; i < 6; i++)
    cr_assert_eq(sizes[i], want[i], "parameter %d: %u bytes", i, sizes[i]);
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

/* --- crafted images: every offset, size and index the walkers read comes
 * from the caller's bytes --- */

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Section i's header in a cubin. */
static unsigned char *shdr(unsigned char *p, unsigned i) {
  return p + get64(p + 40) + (uint64_t)i * get16(p + 58);
}

/* The index of the section named `name` (through .shstrtab). */
static unsigned section_named(unsigned char *p, const char *name) {
  unsigned char *strs = shdr(p, get16(p + 62));
  for (unsigned i = 0; i < get16(p + 60); i++)
    if (strcmp((const char *)p + get64(strs + 24) + get32(shdr(p, i)), name) == 0) return i;
  cr_assert_fail("no section %s", name);
  return 0;
}

static unsigned section_of_type(unsigned char *p, uint32_t type) {
  for (unsigned i = 0; i < get16(p + 60); i++)
    if (get32(shdr(p, i) + 4) == type) return i;
  cr_assert_fail("no section of type %u", type);
  return 0;
}

/* Makes section i NOBITS with an offset far outside the image: the
 * structure check lets NOBITS sections be anywhere, so the walkers must
 * not read one. */
static void make_nobits(unsigned char *p, unsigned i) {
  put32(shdr(p, i) + 4, 8);
  put64(shdr(p, i) + 24, 0x7fffffff00ull);
}

/* Runs every walker over the image; under ASan any read outside it
 * fails the test. */
static void walk_all(const unsigned char *img, size_t size) {
  uint32_t sizes[16];
  (void)jk_cubin_param_sizes(img, size, "k", sizes, 16);
  (void)jk_image_kernels(JITK_IMAGE_CUBIN, img, size, NULL, NULL);
  (void)jk_image_has_kernel(JITK_IMAGE_CUBIN, img, size, "k");
  (void)jk_image_kernels(JITK_IMAGE_FATBIN, img, size, NULL, NULL);
  const void *c;
  size_t cs;
  if (jk_fatbin_cubin(img, size, 90, &c, &cs))
    cr_assert((const unsigned char *)c >= img && cs <= size &&
              (size_t)((const unsigned char *)c - img) <= size - cs);
}

Test(image, nobits_sections_are_never_read) {
  size_t size;
  unsigned char *orig = compile("sm_90", &size);
  unsigned char *p = malloc(size);
  uint32_t sizes[16];
  /* The section-name table as NOBITS: the parameter reader read names
   * through it (SEGV). */
  memcpy(p, orig, size);
  make_nobits(p, get16(p + 62));
  int sm;
  cr_assert_eq(jk_cubin_arch(NULL, p, size, &sm), JITK_OK, "the structure check allows it");
  cr_assert_eq(jk_cubin_param_sizes(p, size, "k", sizes, 16), -2);
  /* The symbol table's string table as NOBITS: the kernel lister read
   * names through it. */
  memcpy(p, orig, size);
  unsigned symtab = section_of_type(p, 2);
  make_nobits(p, get32(shdr(p, symtab) + 40));
  cr_assert_eq(jk_image_kernels(JITK_IMAGE_CUBIN, p, size, NULL, NULL), -1);
  cr_assert_eq(jk_image_has_kernel(JITK_IMAGE_CUBIN, p, size, "k"), -1);
  /* The kernel's attributes as NOBITS. */
  memcpy(p, orig, size);
  make_nobits(p, section_named(p, ".nv.info.k"));
  cr_assert_eq(jk_cubin_param_sizes(p, size, "k", sizes, 16), -2);
  /* The untouched image still reads. */
  cr_assert_eq(jk_cubin_param_sizes(orig, size, "k", sizes, 16), 1);
  cr_assert_eq(jk_image_has_kernel(JITK_IMAGE_CUBIN, orig, size, "k"), 1);
  free(p);
  free(orig);
}

Test(image, crafted_cubin_fields) {
  size_t size;
  unsigned char *orig = compile("sm_90", &size);
  unsigned char *p = malloc(size);
  uint32_t sizes[16];
  int sm;
  jitk_engine *e = jt_compile_engine("sm_90");
  /* A section table whose end wraps around 64 bits. */
  memcpy(p, orig, size);
  put64(p + 40, UINT64_MAX - 63);
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "section table", jk_cubin_arch(e, p, size, &sm));
  /* Section headers smaller than ELF64's. */
  memcpy(p, orig, size);
  p[58] = 40;
  p[59] = 0;
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "64", jk_cubin_arch(e, p, size, &sm));
  /* A section whose end wraps around. */
  memcpy(p, orig, size);
  unsigned info = section_named(p, ".nv.info.k");
  put64(shdr(p, info) + 24, 16);
  put64(shdr(p, info) + 32, UINT64_MAX - 8);
  JT_FAILS(e, JITK_ERR_INVALID_IMAGE, "section", jk_cubin_arch(e, p, size, &sm));
  /* An attribute whose payload runs past its section. */
  memcpy(p, orig, size);
  uint64_t ioff = get64(shdr(p, info) + 24), ilen = get64(shdr(p, info) + 32);
  for (uint64_t q = 0; q + 4 <= ilen; q += 4)
    if (p[ioff + q] == 4) { /* the first attribute with a payload */
      p[ioff + q + 2] = 0xff;
      p[ioff + q + 3] = 0xff;
      break;
    }
  cr_assert_eq(jk_cubin_param_sizes(p, size, "k", sizes, 16), -2);
  /* A symbol table link past the section count, and a symbol name past
   * its string table. */
  memcpy(p, orig, size);
  unsigned symtab = section_of_type(p, 2);
  put32(shdr(p, symtab) + 40, 0xffff);
  cr_assert_eq(jk_image_kernels(JITK_IMAGE_CUBIN, p, size, NULL, NULL), -1);
  memcpy(p, orig, size);
  unsigned strtab = get32(shdr(p, symtab) + 40);
  put64(shdr(p, strtab) + 32, 1); /* a string table of one byte */
  cr_assert_eq(jk_image_kernels(JITK_IMAGE_CUBIN, p, size, NULL, NULL), -1);
  /* A section-name index past the table. */
  memcpy(p, orig, size);
  p[62] = 0xff;
  p[63] = 0xff;
  cr_assert_eq(jk_cubin_param_sizes(p, size, "k", sizes, 16), -2);
  jitk_engine_destroy(e);
  free(p);
  free(orig);
}

/* Random damage to the header and section table of a real cubin: every
 * walker either reads inside the image or gives up. */
Test(image, damaged_cubins) {
  size_t size;
  unsigned char *orig = compile("sm_90", &size);
  unsigned char *p = malloc(size);
  uint64_t seed = 2;
  uint64_t shoff = get64(orig + 40);
  size_t table = (size_t)get16(orig + 58) * get16(orig + 60);
  for (int round = 0; round < 3000; round++) {
    memcpy(p, orig, size);
    int flips = 1 + (int)(jt_next(&seed) % 4);
    for (int f = 0; f < flips; f++) {
      uint64_t r = jt_next(&seed);
      size_t at = (r & 1) ? (size_t)((r >> 8) % 64) : (size_t)(shoff + (r >> 8) % table);
      p[at] = (unsigned char)(r >> 56);
    }
    walk_all(p, size);
  }
  free(p);
  free(orig);
}

/* A fatbin's entry sizes: a header size larger than the room left once
 * wrapped the check around, and the "cubin" returned lay at offset 65 of
 * a 64-byte image. The image sits in a larger buffer here whose next
 * bytes look like an ELF file, so the old code's answer is visible even
 * without ASan. */
Test(image, fatbin_entries_stay_inside) {
  unsigned char buf[256];
  memset(buf, 0, sizeof buf);
  unsigned char *f = buf;
  put32(f, 0xBA55ED50u);
  f[4] = 1;
  f[6] = 16;             /* header size */
  put64(f + 8, 48);      /* entries: bytes 16..63 */
  f[16] = 2;             /* an ELF entry */
  put32(f + 16 + 4, 49); /* its header is 49 bytes: past the image's end */
  put64(f + 16 + 8, 64); /* and a 64-byte payload */
  memcpy(buf + 65,
         "\x7f"
         "ELF",
         4);
  const void *c = NULL;
  size_t cs = 0;
  cr_assert(!jk_fatbin_cubin(f, 64, 90, &c, &cs), "returned %p + %zu for a 64-byte image at %p", c,
            cs, (void *)f);
  /* Sizes that wrap: a payload size near 2^64, a header size near 2^32,
   * a fatbin header size outside the image. */
  put32(f + 16 + 4, 32);
  put64(f + 16 + 8, UINT64_MAX - 40);
  cr_assert(!jk_fatbin_cubin(f, 64, 90, &c, &cs));
  put32(f + 16 + 4, UINT32_MAX);
  put64(f + 16 + 8, 0);
  cr_assert(!jk_fatbin_cubin(f, 64, 90, &c, &cs));
  put64(f + 8, UINT64_MAX - 8);
  cr_assert(!jk_fatbin_cubin(f, 64, 90, &c, &cs));
  f[6] = 0xff;
  f[7] = 0xff;
  cr_assert(!jk_fatbin_cubin(f, 64, 90, &c, &cs));
  /* A well-formed entry right at the end is found, and lies inside. */
  memset(buf, 0, sizeof buf);
  put32(f, 0xBA55ED50u);
  f[6] = 16;
  put64(f + 8, 32 + 64);
  f[16] = 2;
  put32(f + 16 + 4, 32);
  put64(f + 16 + 8, 64);
  memcpy(f + 48,
         "\x7f"
         "ELF",
         4);
  cr_assert(jk_fatbin_cubin(f, 112, 90, &c, &cs));
  cr_assert(c == f + 48 && cs == 64);
  cr_assert(!jk_fatbin_cubin(f, 111, 90, &c, &cs), "one byte short");
}

#ifdef JITK_TEST_HAVE_FATBIN
/* Random damage to nvcc's fatbin, within its first entries' headers. */
Test(image, damaged_fatbins) {
  unsigned char *p = malloc(jt_fatbin_size);
  uint64_t seed = 3;
  for (int round = 0; round < 3000; round++) {
    memcpy(p, jt_fatbin, jt_fatbin_size);
    int flips = 1 + (int)(jt_next(&seed) % 3);
    for (int f = 0; f < flips; f++) {
      uint64_t r = jt_next(&seed);
      p[(r >> 8) % (jt_fatbin_size < 256 ? jt_fatbin_size : 256)] = (unsigned char)(r >> 56);
    }
    walk_all(p, jt_fatbin_size);
  }
  free(p);
}
#endif

/* PTX parameter declarations with absurd sizes are malformed, not
 * numbers to overflow. */
Test(image, ptx_parameter_sizes_are_bounded) {
  uint32_t sizes[4];
  const char *huge = ".entry k(.param .align 8 .b8 k_param_0[99999999999999999999])\n{}";
  cr_assert_eq(jk_ptx_param_sizes(huge, "k", sizes, 4), -2);
  const char *neg = ".entry k(.param .b8 k_param_0[-1])\n{}";
  cr_assert_eq(jk_ptx_param_sizes(neg, "k", sizes, 4), -2);
  const char *big = ".entry k(.param .b64 k_param_0[100000])\n{}";
  cr_assert_eq(jk_ptx_param_sizes(big, "k", sizes, 4), -2);
  const char *bits = ".entry k(.param .u99999999999999999999 k_param_0)\n{}";
  cr_assert_eq(jk_ptx_param_sizes(bits, "k", sizes, 4), -2);
  const char *ok = ".entry k(.param .align 8 .b8 k_param_0[40], .param .u64 k_param_1)\n{}";
  cr_assert_eq(jk_ptx_param_sizes(ok, "k", sizes, 4), 2);
  cr_assert(sizes[0] == 40 && sizes[1] == 8);
  /* Comments are not PTX: a `,` or `)` in one splits or ends no list, and
   * an .entry in one is no kernel. */
  const char *commented =
      "// .entry k(.param .u32 a)\n"
      ".visible .entry k(\n"
      "  .param .u32 k_n, // element count (not bytes)\n"
      "  /* a pointer, ) */ .param .u64 k_out\n"
      ")\n{}";
  cr_assert_eq(jk_ptx_param_sizes(commented, "k", sizes, 4), 2);
  cr_assert(sizes[0] == 4 && sizes[1] == 8, "%u %u", sizes[0], sizes[1]);
  const char *only_comment = "/* .entry k(.param .u32 a) */\n.entry j(.param .u64 x)\n{}";
  cr_assert_eq(jk_ptx_param_sizes(only_comment, "k", sizes, 4), -1);
}

/* The variables cuModuleGetGlobal can find, read from cubins and PTX so
 * that an unknown name fails before the driver is asked. */
Test(image, global_variables) {
  static const char *vars =
      "extern \"C\" {\n"
      "__constant__ float table[100];\n"
      "__device__ int counter;\n"
      "__device__ int start = 5;\n"
      "__managed__ int shared_value;\n"
      "__global__ void k(float *x) {\n"
      "  __shared__ float s[32];\n"
      "  s[threadIdx.x % 32] = table[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  x[threadIdx.x] = sinf(s[(threadIdx.x + 1) % 32]) + counter + start + shared_value;\n"
      "  atomicAdd(&counter, 1);\n"
      "}\n"
      "}\n"
      "namespace ns { __device__ double value; }\n"
      "template <typename T> __device__ T scale;\n"
      "__global__ void reads_ns(double *x) { *x = ns::value * scale<float>; }\n";
  const char *archs[] = {"sm_90", "compute_90"};
  for (int a = 0; a < 2; a++) {
    jitk_engine *e = jt_compile_engine(archs[a]);
    const char *names[] = {"&ns::value", "&scale<float>"};
    jitk_module_options o;
    memset(&o, 0, sizeof o);
    o.name_expressions = names;
    o.num_name_expressions = 2;
    jitk_module *m = NULL;
    JT_OK(e, jitk_module_create(e, vars, &o, &m));
    const void *img;
    size_t size;
    jitk_image_kind kind;
    JT_OK(e, jitk_module_image(m, &img, &size, &kind));
    const char *lowered = NULL;
    JT_OK(e, jitk_module_lowered_name(m, "&ns::value", &lowered));
    cr_assert_str_eq(lowered, "_ZN2ns5valueE", "%s", archs[a]);
    const char *scale = NULL;
    JT_OK(e, jitk_module_lowered_name(m, "&scale<float>", &scale));
    const char *have[] = {"table", "counter", "start", "shared_value", "_ZN2ns5valueE", scale};
    for (int i = 0; i < 6; i++)
      cr_assert_eq(jk_image_has_global(kind, img, size, have[i]), 1, "%s: %s", archs[a], have[i]);
    const char *lack[] = {"k", "s", "nope", "tabl", "tables", "value"};
    for (int i = 0; i < 6; i++)
      cr_assert_eq(jk_image_has_global(kind, img, size, lack[i]), 0, "%s: %s", archs[a], lack[i]);
    /* The list for messages has the six and none of the runtime's own
     * tables (sinf's reduction table is __cudart_i2opi_f). */
    cr_assert_eq(jk_image_globals(kind, img, size, NULL, NULL), 6, "%s", archs[a]);
    jitk_module_destroy(m);
    /* A kernel without variables has none. */
    JT_OK(e, jitk_module_create(e, src, NULL, &m));
    JT_OK(e, jitk_module_image(m, &img, &size, &kind));
    cr_assert_eq(jk_image_globals(kind, img, size, NULL, NULL), 0, "%s", archs[a]);
    cr_assert_eq(jk_image_has_global(kind, img, size, "k"), 0);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
  }
  /* Declarations PTX may hold: .extern ones define nothing, and lines
   * inside functions are no declarations. */
  const char *ptx =
      ".version 9.0\n.target sm_90\n.address_size 64\n"
      ".extern .global .align 4 .u32 elsewhere;\n"
      ".visible .global .attribute(.managed) .align 8 .u64 m = 7;\n"
      "\t.const .align 4 .b8 c[400];\n"
      ".global .align 1 .b8 $str[6] = {104, 101, 108, 108, 111, 0};\n"
      ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\tld.global.u32 %r1, [m];\n\tret;\n}\n";
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_PTX, ptx, strlen(ptx), "m"), 1);
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_PTX, ptx, strlen(ptx), "c"), 1);
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_PTX, ptx, strlen(ptx), "$str"), 1);
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_PTX, ptx, strlen(ptx), "elsewhere"), 0);
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_PTX, ptx, strlen(ptx), "%r1"), 0);
  cr_assert_eq(jk_image_globals(JITK_IMAGE_PTX, ptx, strlen(ptx), NULL, NULL), 2);
  /* Images that cannot tell leave the answer to the driver. */
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_CUBIN,
                                   "\x7f"
                                   "ELF",
                                   4, "m"),
               -1);
  cr_assert_eq(jk_image_has_global(JITK_IMAGE_FATBIN, "\x50\xed\x55\xba", 4, "m"), -1);
}
