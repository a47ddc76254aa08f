/*
 * libFuzzer target for the kernel image walkers of src/driver/image.c: the
 * cubin (ELF) checks, kernel names and parameter sizes, the fatbin walker
 * and the PTX scanners, on fuzzed bytes.
 *
 * The input is the image itself, so real cubins, fatbins and PTX files are
 * the seeds. Each input goes through jitk_module_create_from_image on a
 * compile-only sm_90 engine (automatic kind and each explicit one), then
 * through the walkers that module loading and kernel lookup use on a
 * device (jk_image_kernels, jk_image_has_kernel, jk_cubin_param_sizes,
 * jk_fatbin_cubin, jk_ptx_param_sizes), which a compile-only engine never
 * reaches through the public API.
 *
 * Promises checked: no crash, leak or read outside the bytes given (the
 * input is an exact-size heap copy, so ASan sees any overrun); a refused
 * image is a clean JITK_ERR_INVALID_IMAGE (or INVALID_ARGUMENT for an
 * empty one) with a message and *module untouched; an accepted image is
 * copied whole, and an accepted cubin is for sm_90; a cubin passing
 * jk_cubin_arch has its section table inside the bytes; every kernel name
 * reported lies inside the image and is then found by jk_image_has_kernel;
 * parameter counts stay within -2..cap; a cubin found inside a fatbin lies
 * inside the fatbin and starts with the ELF magic.
 */
#include <jitk/jitk.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/image.h"
#include "fuzz_common.h"

#define CAP 8192 /* the parameter cap jitk's kernel lookup uses */
#define MAX_NAMES 8

static jitk_engine *engine;
static uint32_t sizes[CAP];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  engine = jf_engine("fuzz_image");
  return 0;
}

static uint64_t rd_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

typedef struct names {
  const unsigned char *lo, *hi; /* the bytes the walker was given */
  int calls;
  char name[MAX_NAMES][256];
  int count;
} names;

static void take_name(void *user, const char *name, size_t len) {
  names *n = user;
  n->calls++;
  JF_CHECK((const unsigned char *)name >= n->lo && len <= (size_t)(n->hi - n->lo) &&
               (const unsigned char *)name + len <= n->hi,
           "a kernel name lies outside the image");
  if (n->count < MAX_NAMES && len < sizeof n->name[0] && memchr(name, '\0', len) == NULL) {
    memcpy(n->name[n->count], name, len);
    n->name[n->count][len] = '\0';
    n->count++;
  }
}

/* The names, parameters and kernel lookups of one image of `kind`. */
static void walk(jitk_image_kind kind, const unsigned char *data, size_t size) {
  names n;
  memset(&n, 0, sizeof n);
  n.lo = data;
  n.hi = data + size;
  int count = jk_image_kernels(kind, data, size, take_name, &n);
  JF_CHECK(count >= -1, "jk_image_kernels returned %d", count);
  if (count >= 0) JF_CHECK(count == n.calls, "%d kernels counted, %d reported", count, n.calls);
  for (int i = 0; i < n.count; i++) {
    /* Names reported before the walker gave up (-1: it cannot tell) are
     * not a promise that lookups find them. */
    JF_CHECK(count < 0 || jk_image_has_kernel(kind, data, size, n.name[i]) == 1,
             "kernel %s was listed but not found", n.name[i]);
    int r = kind == JITK_IMAGE_PTX ? jk_ptx_param_sizes((const char *)data, n.name[i], sizes, CAP)
                                   : jk_cubin_param_sizes(data, size, n.name[i], sizes, CAP);
    JF_CHECK(r >= -2 && r <= CAP, "%d parameters", r);
    /* Parameters take at most 32764 bytes (the driver's limit from CUDA
     * 12.1; a record of the second form holds a 32-bit size). */
    for (int p = 0; p < r; p++)
      JF_CHECK(sizes[p] <= 32768u, "parameter %d of %u bytes", p, sizes[p]);
    memset(sizes, 0, (size_t)(r > 0 ? r : 0) * sizeof sizes[0]);
  }
  /* A name the image may not define reaches the section-name scan even
   * without a symbol table. */
  if (kind == JITK_IMAGE_CUBIN) {
    int r = jk_cubin_param_sizes(data, size, "fill", sizes, CAP);
    JF_CHECK(r >= -2 && r <= CAP, "%d parameters", r);
    memset(sizes, 0, (size_t)(r > 0 ? r : 0) * sizeof sizes[0]);
  }
}

static void check_cubin(const unsigned char *data, size_t size) {
  int sm = -1;
  if (jk_cubin_arch(NULL, data, size, &sm) == JITK_OK) {
    JF_CHECK(sm >= 0 && sm <= 255, "architecture %d", sm);
    uint64_t shoff = rd_le(data + 40, 8), shentsize = rd_le(data + 58, 2),
             shnum = rd_le(data + 60, 2);
    JF_CHECK(shnum == 0 || (shoff <= size && shentsize * shnum <= size - shoff),
             "jk_cubin_arch accepted a section table outside the image");
  } else {
    JF_CHECK(jitk_errmsg(NULL)[0] != '\0', "jk_cubin_arch failed without a message");
  }
  walk(JITK_IMAGE_CUBIN, data, size);
}

static void check_fatbin(const unsigned char *data, size_t size) {
  static const int sms[] = {0, 80, 90};
  for (size_t i = 0; i < sizeof sms / sizeof sms[0]; i++) {
    const void *cubin = NULL;
    size_t cubin_size = 0;
    if (!jk_fatbin_cubin(data, size, sms[i], &cubin, &cubin_size)) continue;
    const unsigned char *c = cubin;
    JF_CHECK(c >= data && cubin_size <= size && (size_t)(c - data) <= size - cubin_size,
             "jk_fatbin_cubin returned bytes %td..%td of a %zu-byte fatbin", c - data,
             c - data + (ptrdiff_t)cubin_size, size);
    JF_CHECK(cubin_size >= 64 && memcmp(c,
                                        "\x7f"
                                        "ELF",
                                        4) == 0,
             "jk_fatbin_cubin returned something that is not a cubin");
    if (i == 0) check_cubin(c, cubin_size);
  }
  walk(JITK_IMAGE_FATBIN, data, size);
}

static void check_module(jitk_image_kind kind, const unsigned char *data, size_t size) {
  jitk_module *sentinel = (jitk_module *)(void *)&engine, *m = sentinel;
  jitk_status st = jitk_module_create_from_image(engine, kind, data, size, &m);
  if (st != JITK_OK) {
    jf_check_failure(engine, st, "jitk_module_create_from_image");
    JF_CHECK(st == JITK_ERR_INVALID_IMAGE || (st == JITK_ERR_INVALID_ARGUMENT && size == 0),
             "jitk_module_create_from_image failed with %s: %s", jitk_errname(st),
             jitk_errmsg(engine));
    JF_CHECK(m == sentinel, "jitk_module_create_from_image failed but changed *module");
    return;
  }
  const void *image = NULL;
  size_t image_size = 0;
  jitk_image_kind found = JITK_IMAGE_AUTO;
  JF_CHECK(jitk_module_image(m, &image, &image_size, &found) == JITK_OK, "no image");
  JF_CHECK(image_size == size && memcmp(image, data, size) == 0, "the image was not copied");
  JF_CHECK(found != JITK_IMAGE_AUTO && (kind == JITK_IMAGE_AUTO || found == kind),
           "the module's kind is %d for %d", (int)found, (int)kind);
  if (found == JITK_IMAGE_CUBIN) {
    int sm = -1;
    JF_CHECK(jk_cubin_arch(NULL, data, size, &sm) == JITK_OK && sm == 90,
             "a cubin for sm_%d was accepted on an sm_90 engine", sm);
  }
  jitk_module_destroy(m);
}

/*
 * A mutator that knows the ELF and fatbin layouts. Byte-level mutations
 * rarely change a section's type together with its extent, or point a
 * string-table index at another section: the checks that would notice
 * compare against values libFuzzer cannot guess from coverage. Two times
 * in three this edits one header field of the image (a section's type,
 * offset, size, link or name, the section-string-table index, a symbol, a
 * fatbin entry's sizes, kind or architecture) to a value near the image's
 * own bounds; otherwise, and sometimes after such an edit, libFuzzer's own
 * mutations run.
 */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void wr_le(uint8_t *p, int n, uint64_t v) {
  for (int i = 0; i < n; i++, v >>= 8) p[i] = (uint8_t)v;
}

/* A value near the bounds that the walkers compare against. */
static uint64_t interesting(uint64_t *s, size_t size, uint64_t other) {
  switch (rng_next(s) % 9) {
    case 0: return 0;
    case 1: return size;
    case 2: return size - 1;
    case 3: return size + 1 + rng_next(s) % 64;
    case 4: return other;
    case 5: return 0x7fffffff;
    case 6: return UINT64_MAX - rng_next(s) % 64;
    case 7: return rng_next(s) % (2 * size + 1);
    default: return 1ull << (rng_next(s) % 64);
  }
}

static bool mutate_elf(uint8_t *d, size_t size, uint64_t *s) {
  if (size < 64 || memcmp(d,
                          "\x7f"
                          "ELF",
                          4) != 0)
    return false;
  uint64_t shoff = rd_le(d + 40, 8), entsize = rd_le(d + 58, 2), shnum = rd_le(d + 60, 2);
  if (entsize < 64 || shnum == 0 || shoff > size || entsize * shnum > size - shoff) {
    /* Only the header can be edited: the section table's own fields. */
    static const int at[] = {40, 58, 60, 62};
    static const int width[] = {8, 2, 2, 2};
    int f = (int)(rng_next(s) % 4);
    wr_le(d + at[f], width[f], interesting(s, size, shnum));
    return true;
  }
  uint8_t *sh = d + shoff + rng_next(s) % shnum * entsize;
  switch (rng_next(s) % 7) {
    case 0: { /* sh_type */
      static const uint32_t types[] = {1, 2, 3, 8, 0x70000000};
      wr_le(sh + 4, 4, types[rng_next(s) % 5]);
      break;
    }
    case 1: wr_le(sh + 24, 8, interesting(s, size, rd_le(sh + 24, 8))); break; /* sh_offset */
    case 2: wr_le(sh + 32, 8, interesting(s, size, rd_le(sh + 32, 8))); break; /* sh_size */
    case 3: wr_le(sh + 40, 4, rng_next(s) % (shnum + 2)); break;               /* sh_link */
    case 4: wr_le(sh, 4, interesting(s, size, rd_le(sh, 4))); break;           /* sh_name */
    case 5: wr_le(d + 62, 2, rng_next(s) % (shnum + 2)); break;                /* e_shstrndx */
    default: { /* one symbol of a symbol table: a kernel with any name */
      uint64_t off = rd_le(sh + 24, 8), len = rd_le(sh + 32, 8);
      if (rd_le(sh + 4, 4) != 2 || off > size || len > size - off || len < 24) return false;
      uint8_t *sym = d + off + rng_next(s) % (len / 24) * 24;
      wr_le(sym, 4, interesting(s, size, rd_le(sym, 4)));
      sym[4] = (uint8_t)((sym[4] & 0xf0) | 2);
      sym[5] |= 0x10;
      break;
    }
  }
  return true;
}

static bool mutate_fatbin(uint8_t *d, size_t size, uint64_t *s) {
  if (size < 16 || rd_le(d, 4) != 0xBA55ED50u) return false;
  /* The entries as the walker sees them, up to a random one. */
  uint64_t off = rd_le(d + 6, 2), pick = rng_next(s) % 8;
  for (uint64_t i = 0; i < pick && off <= size && size - off >= 32; i++) {
    uint64_t hsize = rd_le(d + off + 4, 4), psize = rd_le(d + off + 8, 8);
    if (hsize + psize == 0 || hsize > size - off || psize > size - off - hsize) break;
    uint64_t next = off + hsize + psize;
    if (size - next < 32) break;
    off = next;
  }
  if (off > size || size - off < 32) {
    wr_le(d + 8, 8, interesting(s, size, rd_le(d + 8, 8))); /* the payload size */
    return true;
  }
  uint8_t *h = d + off;
  uint64_t hsize = rd_le(h + 4, 4), psize = rd_le(h + 8, 8);
  /* An embedded cubin gets the cubin edits. */
  if (rng_next(s) % 2 && hsize <= size - off && psize <= size - off - hsize &&
      mutate_elf(h + hsize, psize, s))
    return true;
  switch (rng_next(s) % 4) {
    case 0: wr_le(h + 4, 4, interesting(s, size - off, rd_le(h + 4, 4))); break; /* hsize */
    case 1: wr_le(h + 8, 8, interesting(s, size - off, rd_le(h + 8, 8))); break; /* psize */
    case 2: wr_le(h, 2, 1 + rng_next(s) % 2); break;                             /* kind */
    default: wr_le(h + 28, 4, rng_next(s) % 2 ? 90 : 80); break;                 /* sm */
  }
  return true;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  uint64_t s = seed;
  uint64_t r = rng_next(&s) % 12;
  if (r < 8 && (mutate_elf(data, size, &s) || mutate_fatbin(data, size, &s))) {
    if (r == 0) return LLVMFuzzerMutate(data, size, max_size);
    return size;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_module(JITK_IMAGE_AUTO, data, size);
  check_module(JITK_IMAGE_CUBIN, data, size);
  check_module(JITK_IMAGE_FATBIN, data, size);
  check_module(JITK_IMAGE_PTX, data, size);
  check_cubin(data, size);
  check_fatbin(data, size);
  /* The PTX scanners read text up to its NUL, as a module's copy has. */
  unsigned char *text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  walk(JITK_IMAGE_PTX, text, size);
  free(text);
  return 0;
}
