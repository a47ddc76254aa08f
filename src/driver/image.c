/*
 * Telling kernel images apart and checking cubins before the driver sees
 * them. The driver's answer to a truncated or foreign cubin is a bare
 * CUDA_ERROR_INVALID_IMAGE or NO_BINARY_FOR_GPU; reading the ELF header
 * first lets the message say what is wrong and for which architecture the
 * cubin was built.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "driver/image.h"

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) {
  return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

#define JK_EM_CUDA 190
#define JK_FATBIN_MAGIC 0xBA55ED50u
#define JK_SHT_SYMTAB 2
#define JK_SHT_NOBITS 8

/*
 * Every offset, size and index below comes from bytes the caller handed
 * in (jitk_module_create_from_image), so each is checked against the
 * image before anything is read through it, in arithmetic that cannot
 * wrap: `off <= size && len <= size - off`, never `off + len <= size`.
 */
static bool in_bounds(uint64_t off, uint64_t len, size_t size) {
  return off <= size && len <= (uint64_t)size - off;
}

/* One section header's fields that the walkers use. */
typedef struct elf_section {
  uint32_t name, type, link;
  uint64_t off, size;
} elf_section;

/* Section i's header; the caller has checked the section table with
 * jk_cubin_arch, and i against e_shnum. */
static elf_section section_at(const unsigned char *p, uint16_t i) {
  uint64_t shoff = rd64(p + 40);
  uint16_t shentsize = rd16(p + 58);
  const unsigned char *sh = p + shoff + (uint64_t)i * shentsize;
  elf_section s = {rd32(sh), rd32(sh + 4), rd32(sh + 40), rd64(sh + 24), rd64(sh + 32)};
  return s;
}

/* Whether the section's bytes are in the file and may be read. NOBITS
 * sections (.bss, .nv.shared) occupy no bytes of the file whatever
 * their size says, so they hold nothing to read, as a string table, a
 * symbol table or attributes. */
static bool section_readable(const elf_section *s, size_t size) {
  return s->type != JK_SHT_NOBITS && in_bounds(s->off, s->size, size);
}

const char *jk_image_kind_name(jitk_image_kind k) {
  switch (k) {
    case JITK_IMAGE_CUBIN: return "cubin";
    case JITK_IMAGE_PTX: return "PTX";
    case JITK_IMAGE_FATBIN: return "fatbin";
    default: return "image";
  }
}

static jitk_image_kind sniff(const unsigned char *p, size_t size) {
  if (size >= 4 && memcmp(p,
                          "\x7f"
                          "ELF",
                          4) == 0)
    return JITK_IMAGE_CUBIN;
  if (size >= 4 && rd32(p) == JK_FATBIN_MAGIC) return JITK_IMAGE_FATBIN;
  /* PTX is text that starts, after blank lines and comments, with a
   * directive; ptxas's output starts with comments. */
  size_t i = 0;
  while (i < size && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
  if (i + 2 <= size && (memcmp(p + i, "//", 2) == 0 || p[i] == '.')) return JITK_IMAGE_PTX;
  return JITK_IMAGE_AUTO;
}

jitk_status jk_cubin_arch(const jitk_engine *e, const void *data, size_t size, int *sm) {
  const unsigned char *p = data;
  if (size < 64)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE, "truncated cubin: %zu bytes, less than an ELF header",
                   size);
  if (p[4] != 2 || p[5] != 1)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "not a cubin: the ELF file is not 64-bit little-endian");
  if (rd16(p + 18) != JK_EM_CUDA)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "not a cubin: ELF machine %u is not NVIDIA CUDA (190)", (unsigned)rd16(p + 18));
  uint64_t shoff = rd64(p + 40);
  uint16_t shentsize = rd16(p + 58), shnum = rd16(p + 60);
  uint64_t phoff = rd64(p + 32);
  uint16_t phentsize = rd16(p + 54), phnum = rd16(p + 56);
  if (shnum > 0 && shentsize < 64)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "not a cubin: section headers of %u bytes, less than ELF64's 64",
                   (unsigned)shentsize);
  if (shnum > 0 && !in_bounds(shoff, (uint64_t)shentsize * shnum, size))
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "truncated cubin: its section table (%u entries of %u bytes at byte "
                   "%llu) does not fit in the image's %zu bytes",
                   (unsigned)shnum, (unsigned)shentsize, (unsigned long long)shoff, size);
  if (phnum > 0 && !in_bounds(phoff, (uint64_t)phentsize * phnum, size))
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "truncated cubin: its program headers end past its %zu bytes", size);
  for (uint16_t i = 0; i < shnum; i++) {
    elf_section sec = section_at(p, i);
    /* A NOBITS section's size is memory, not bytes of the file; the
     * walkers below never read one. */
    if (sec.type == JK_SHT_NOBITS) continue;
    if (!in_bounds(sec.off, sec.size, size))
      return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                     "truncated cubin: section %u (%llu bytes at byte %llu) does not fit "
                     "in the image's %zu bytes",
                     (unsigned)i, (unsigned long long)sec.size, (unsigned long long)sec.off, size);
  }
  /* The architecture's place in e_flags moved with the ELF ABI that
   * CUDA 12.8 introduced (OS/ABI 0x41): bits 8-15 there, bits 0-7 before. */
  uint32_t flags = rd32(p + 48);
  unsigned osabi = p[7];
  *sm = osabi == 0x41 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
  return JITK_OK;
}

jitk_status jk_image_check(const jitk_engine *e, jitk_image_kind kind, const void *data,
                           size_t size, jitk_image_kind *kind_out) {
  if (data == NULL || size == 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "the image is %s",
                   data == NULL ? "NULL" : "empty");
  jitk_image_kind found = sniff(data, size);
  if (kind == JITK_IMAGE_AUTO) {
    if (found == JITK_IMAGE_AUTO)
      return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                     "the %zu bytes are not a cubin (ELF), a fatbin or PTX text", size);
    kind = found;
  } else if (kind != found && !(kind == JITK_IMAGE_PTX && found == JITK_IMAGE_AUTO)) {
    if (kind < JITK_IMAGE_CUBIN || kind > JITK_IMAGE_FATBIN)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "unknown image kind %d", (int)kind);
    return jk_fail(
        e, JITK_ERR_INVALID_IMAGE, "the image was given as %s but its content is %s",
        jk_image_kind_name(kind),
        found == JITK_IMAGE_AUTO ? "none of cubin, fatbin or PTX" : jk_image_kind_name(found));
  }
  if (kind == JITK_IMAGE_CUBIN) {
    int sm = 0;
    jitk_status st = jk_cubin_arch(e, data, size, &sm);
    if (st != JITK_OK) return st;
    int major = e->has_device ? e->info.cc_major : e->target.major;
    int minor = e->has_device ? e->info.cc_minor : e->target.minor;
    if (sm / 10 != major || sm % 10 > minor) {
      if (e->has_device)
        return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                       "the cubin is for sm_%d, which cannot run on device %d "
                       "(%s, sm_%d%d); compile it for sm_%d%d or load PTX",
                       sm, e->ordinal, e->info.name, major, minor, major, minor);
      return jk_fail(e, JITK_ERR_INVALID_IMAGE, "the cubin is for sm_%d but the engine targets %s",
                     sm, e->target.arch);
    }
  }
  *kind_out = kind;
  return JITK_OK;
}

/* Kernel parameters take at most 32764 bytes (CUDA 12.1 on), so a parameter
 * larger than this (in PTX or a cubin) is malformed. */
#define JK_MAX_PARAM_BYTES 32768u

/* EIATTR_KPARAM_INFO in ptxas's .nv.info.<kernel> sections: a 12-byte
 * record per parameter (index, ordinal, offset, flags with the size in
 * bits 18-31). Where a kernel's parameters take more than 4352 bytes (up
 * to 32764 from CUDA 12.1), whose sizes 14 bits may not hold, ptxas
 * writes EIATTR_KPARAM_INFO_V2 instead: index (32 bits), ordinal and
 * offset (16 each), size (32). EIATTR_CBANK_PARAM_SIZE holds the bytes of
 * all of them, a 16-bit value. Attributes are 4-byte headers (format, id,
 * and either a 16-bit value or the length of a payload that follows). */
#define JK_EIFMT_HVAL 3
#define JK_EIFMT_SVAL 4
#define JK_EIATTR_KPARAM_INFO 0x17
#define JK_EIATTR_CBANK_PARAM_SIZE 0x19
#define JK_EIATTR_KPARAM_INFO_V2 0x45

int jk_cubin_param_sizes(const void *data, size_t size, const char *symbol, uint32_t *sizes,
                         int cap) {
  const unsigned char *p = data;
  int sm;
  if (jk_cubin_arch(NULL, data, size, &sm) != JITK_OK) return -2;
  uint16_t shnum = rd16(p + 60), shstrndx = rd16(p + 62);
  if (shstrndx >= shnum) return -2;
  elf_section strs = section_at(p, shstrndx);
  if (!section_readable(&strs, size)) return -2;
  size_t symlen = strlen(symbol);
  for (uint16_t i = 0; i < shnum; i++) {
    elf_section sec = section_at(p, i);
    /* The name ".nv.info.<symbol>" and its NUL must lie in the table. */
    if (sec.name >= strs.size || strs.size - sec.name < 10 + (uint64_t)symlen) continue;
    const char *sn = (const char *)p + strs.off + sec.name;
    if (memcmp(sn, ".nv.info.", 9) != 0 || memcmp(sn + 9, symbol, symlen) != 0 ||
        sn[9 + symlen] != '\0')
      continue;
    if (!section_readable(&sec, size)) return -2;
    uint64_t off = sec.off, len = sec.size;
    int count = 0;
    uint32_t bank = 0, reach = 0; /* the bytes the section says, and the records reach */
    for (uint64_t q = 0; len - q >= 4;) {
      const unsigned char *a = p + off + q;
      uint8_t fmt = a[0], attr = a[1];
      if (fmt != JK_EIFMT_SVAL) {
        if (fmt == JK_EIFMT_HVAL && attr == JK_EIATTR_CBANK_PARAM_SIZE) bank = rd16(a + 2);
        q += 4;
        continue;
      }
      uint16_t plen = rd16(a + 2);
      if (plen > len - q - 4) return -2;
      if ((attr == JK_EIATTR_KPARAM_INFO || attr == JK_EIATTR_KPARAM_INFO_V2) && plen >= 12) {
        uint16_t ordinal = rd16(a + 8), poff = rd16(a + 10);
        uint32_t psize =
            attr == JK_EIATTR_KPARAM_INFO ? (rd32(a + 12) >> 18) & 0x3fff : rd32(a + 12);
        if (ordinal >= cap || psize > JK_MAX_PARAM_BYTES) return -2;
        sizes[ordinal] = psize;
        if (ordinal + 1 > count) count = ordinal + 1;
        if ((uint32_t)poff + psize > reach) reach = (uint32_t)poff + psize;
      }
      q += 4 + (uint64_t)plen;
    }
    /* Records of a form not read here would leave parameters out: where
     * the bytes they reach are not the section's count of them, the
     * sizes are not known (the driver is asked instead). */
    if (bank != 0 && reach != bank) return -1;
    return count;
  }
  return -1;
}

/* The decimal number of at most 9 digits in [t, t + n) (more would be no
 * size a kernel parameter can have), or -1. atoi would take any length
 * and overflow, and a sign. */
static long ptx_number(const char *t, size_t n) {
  if (n == 0 || n > 9) return -1;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (t[i] < '0' || t[i] > '9') return -1;
    v = v * 10 + (t[i] - '0');
  }
  return v;
}

/* The bytes of one PTX parameter type (".u64", ".f32", ".b8"). */
static uint32_t ptx_type_size(const char *t, size_t n) {
  if (n < 3 || t[0] != '.') return 0;
  char k = t[1];
  if (k != 'u' && k != 's' && k != 'b' && k != 'f') return 0;
  long bits = ptx_number(t + 2, n - 2);
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (uint32_t)bits / 8 : 0;
}

/* PTX's next token from *p, past white space and comments (`//` to the
 * end of the line, `/ *` to `* /`): one of `,`, `(` and `)`, or a word of
 * anything else; *n is 0 at the end of the text. A comment is never a
 * token, so that a `)` or `,` in one (or a commented-out `.entry`) cannot
 * end or split a parameter list. */
static const char *ptx_token(const char **p, size_t *n) {
  const char *s = *p;
  for (;;) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    if (s[0] == '/' && s[1] == '/') {
      while (*s != '\0' && *s != '\n') s++;
    } else if (s[0] == '/' && s[1] == '*') {
      const char *close = strstr(s + 2, "*/");
      s = close != NULL ? close + 2 : s + strlen(s);
    } else {
      break;
    }
  }
  const char *t = s;
  if (*s == ',' || *s == '(' || *s == ')') {
    s++;
  } else {
    while (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != ',' &&
           *s != '(' && *s != ')' && !(s[0] == '/' && (s[1] == '/' || s[1] == '*')))
      s++;
  }
  *n = (size_t)(s - t);
  *p = s;
  return t;
}

static bool ptx_is(const char *t, size_t n, const char *word) {
  return n == strlen(word) && memcmp(t, word, n) == 0;
}

int jk_ptx_param_sizes(const char *ptx, const char *symbol, uint32_t *sizes, int cap) {
  const char *p = ptx;
  size_t n;
  for (const char *t = ptx_token(&p, &n); n > 0; t = ptx_token(&p, &n)) {
    if (!ptx_is(t, n, ".entry")) continue;
    const char *at = p;
    t = ptx_token(&at, &n);
    if (!ptx_is(t, n, symbol)) continue;
    t = ptx_token(&at, &n);
    if (!ptx_is(t, n, "(")) continue;
    /* Each parameter is ".param [.align N] [.ptr ...] .TYPE name[N]?",
     * separated by commas, the list closed by ")". */
    int count = 0;
    for (;;) {
      t = ptx_token(&at, &n);
      if (ptx_is(t, n, ")")) return count;
      if (!ptx_is(t, n, ".param")) return -2;
      uint32_t base = 0, mult = 1;
      for (t = ptx_token(&at, &n); n > 0 && !ptx_is(t, n, ",") && !ptx_is(t, n, ")");
           t = ptx_token(&at, &n)) {
        if (base == 0) base = ptx_type_size(t, n);
        const char *br = memchr(t, '[', n);
        if (br != NULL) {
          const char *close = memchr(br, ']', n - (size_t)(br - t));
          long v = close ? ptx_number(br + 1, (size_t)(close - br - 1)) : -1;
          if (v < 1 || v > (long)JK_MAX_PARAM_BYTES) return -2;
          mult = (uint32_t)v;
        }
      }
      if (n == 0 || base == 0 || count >= cap || base * mult > JK_MAX_PARAM_BYTES) return -2;
      sizes[count++] = base * mult;
      if (ptx_is(t, n, ")")) return count;
    }
  }
  return -1;
}

#define JK_STT_FUNC 2
#define JK_STO_CUDA_ENTRY 0x10

static int cubin_kernels(const unsigned char *p, size_t size, jk_kernel_name_fn fn, void *user) {
  int sm;
  if (jk_cubin_arch(NULL, p, size, &sm) != JITK_OK) return -1;
  uint16_t shnum = rd16(p + 60);
  int count = 0;
  for (uint16_t i = 0; i < shnum; i++) {
    elf_section symtab = section_at(p, i);
    if (symtab.type != JK_SHT_SYMTAB) continue;
    if (!section_readable(&symtab, size) || symtab.link >= shnum) return -1;
    elf_section strs = section_at(p, (uint16_t)symtab.link);
    if (!section_readable(&strs, size)) return -1;
    /* Kernels are function symbols marked as CUDA entry points; device
     * functions that were not inlined are functions without the mark. */
    for (uint64_t s = 0; symtab.size - s >= 24; s += 24) {
      const unsigned char *sym = p + symtab.off + s;
      uint32_t name = rd32(sym);
      if ((sym[4] & 0xf) != JK_STT_FUNC || !(sym[5] & JK_STO_CUDA_ENTRY)) continue;
      if (name >= strs.size) return -1;
      const char *n = (const char *)p + strs.off + name;
      size_t nl = strnlen(n, (size_t)(strs.size - name));
      if (fn) fn(user, n, nl);
      count++;
    }
  }
  return count;
}

static int ptx_kernels(const char *ptx, jk_kernel_name_fn fn, void *user) {
  int count = 0;
  for (const char *e = strstr(ptx, ".entry "); e != NULL; e = strstr(e + 1, ".entry ")) {
    const char *s = e + 7;
    while (*s == ' ' || *s == '\t') s++;
    const char *t = s;
    while (*t && *t != '(' && *t != ' ' && *t != '\t' && *t != '\n' && *t != '\r') t++;
    if (t == s) continue;
    if (fn) fn(user, s, (size_t)(t - s));
    count++;
  }
  return count;
}

int jk_image_kernels(jitk_image_kind kind, const void *data, size_t size, jk_kernel_name_fn fn,
                     void *user) {
  if (kind == JITK_IMAGE_FATBIN && jk_fatbin_cubin(data, size, 0, &data, &size))
    kind = JITK_IMAGE_CUBIN;
  if (kind == JITK_IMAGE_CUBIN) return cubin_kernels(data, size, fn, user);
  if (kind == JITK_IMAGE_PTX) return ptx_kernels(data, fn, user);
  return -1;
}

typedef struct find_name {
  const char *name;
  size_t len;
  bool found;
} find_name;

static void match_name(void *user, const char *name, size_t len) {
  find_name *f = user;
  if (len == f->len && memcmp(name, f->name, len) == 0) f->found = true;
}

int jk_image_has_kernel(jitk_image_kind kind, const void *data, size_t size, const char *symbol) {
  find_name f = {symbol, strlen(symbol), false};
  if (jk_image_kernels(kind, data, size, match_name, &f) < 0) return -1;
  return f.found ? 1 : 0;
}

#define JK_STT_OBJECT 1

/* Names of runtime-internal tables (sin and cos reduction tables,
 * printf's format strings), which a list meant for people leaves out. */
static bool internal_global(const char *name, size_t len) {
  return (len >= 9 && memcmp(name, "__cudart_", 9) == 0) || (len > 0 && name[0] == '$');
}

static bool has_prefix(const char *s, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(s, prefix, n) == 0;
}

/*
 * Object symbols of a cubin. With `all`, every defined one (the lookup,
 * which leaves doubtful cases to the driver); without, those in the
 * sections cuModuleGetGlobal serves (.nv.global, .nv.global.init,
 * .nv.constantN) minus internal tables (the list in messages).
 */
static int cubin_globals(const unsigned char *p, size_t size, bool all, jk_kernel_name_fn fn,
                         void *user) {
  int sm;
  if (jk_cubin_arch(NULL, p, size, &sm) != JITK_OK) return -1;
  uint16_t shnum = rd16(p + 60), shstrndx = rd16(p + 62);
  elf_section secnames = {0, 0, 0, 0, 0};
  bool have_secnames = false;
  if (shstrndx < shnum) {
    secnames = section_at(p, shstrndx);
    have_secnames = section_readable(&secnames, size);
  }
  int count = 0;
  for (uint16_t i = 0; i < shnum; i++) {
    elf_section symtab = section_at(p, i);
    if (symtab.type != JK_SHT_SYMTAB) continue;
    if (!section_readable(&symtab, size) || symtab.link >= shnum) return -1;
    elf_section strs = section_at(p, (uint16_t)symtab.link);
    if (!section_readable(&strs, size)) return -1;
    for (uint64_t s = 0; symtab.size - s >= 24; s += 24) {
      const unsigned char *sym = p + symtab.off + s;
      uint32_t name = rd32(sym);
      uint16_t shndx = rd16(sym + 6);
      /* Undefined symbols (index 0) are references, and the reserved
       * indices above the table (absolute, common) hold no variable the
       * driver has placed. */
      if ((sym[4] & 0xf) != JK_STT_OBJECT || shndx == 0 || shndx >= shnum) continue;
      if (name >= strs.size) return -1;
      const char *n = (const char *)p + strs.off + name;
      size_t nl = strnlen(n, (size_t)(strs.size - name));
      if (nl == 0) continue;
      if (!all) {
        if (!have_secnames || internal_global(n, nl)) continue;
        elf_section sec = section_at(p, shndx);
        if (sec.name >= secnames.size) continue;
        const char *sn = (const char *)p + secnames.off + sec.name;
        size_t snl = strnlen(sn, (size_t)(secnames.size - sec.name));
        if (!has_prefix(sn, snl, ".nv.global") && !has_prefix(sn, snl, ".nv.constant")) continue;
      }
      if (fn) fn(user, n, nl);
      count++;
    }
  }
  return count;
}

/* Module-scope .global and .const declarations of PTX, such as
 *   .visible .global .align 4 .u32 counter;
 *   .const .align 4 .b8 table[400];
 * and not .extern ones, which name a variable defined elsewhere. */
static int ptx_globals(const char *ptx, bool all, jk_kernel_name_fn fn, void *user) {
  int count = 0;
  for (const char *line = ptx; *line;) {
    const char *end = strchr(line, '\n');
    if (end == NULL) end = line + strlen(line);
    const char *t = line;
    bool space = false, skip_next = false, declaration = true;
    const char *name = NULL;
    size_t nl = 0;
    while (declaration && name == NULL) {
      while (t < end && (*t == ' ' || *t == '\t' || *t == '\r')) t++;
      if (t == end) break;
      const char *w = t;
      while (t < end && *t != ' ' && *t != '\t' && *t != '\r') t++;
      size_t wl = (size_t)(t - w);
      if (skip_next) { /* the number after .align */
        skip_next = false;
        continue;
      }
      if (w[0] != '.') {
        if (space) {
          name = w;
          while (nl < wl && w[nl] != '[' && w[nl] != ';' && w[nl] != '=') nl++;
        } else {
          declaration = false;
        }
      } else if ((wl == 7 && memcmp(w, ".global", 7) == 0) ||
                 (wl == 6 && memcmp(w, ".const", 6) == 0)) {
        space = true;
      } else if (wl == 6 && memcmp(w, ".align", 6) == 0) {
        skip_next = true;
      } else if ((wl == 7 && memcmp(w, ".extern", 7) == 0) ||
                 (!space && !(wl == 8 && memcmp(w, ".visible", 8) == 0) &&
                  !(wl == 5 && memcmp(w, ".weak", 5) == 0) &&
                  !(wl == 7 && memcmp(w, ".common", 7) == 0))) {
        declaration = false; /* .extern, .reg, .shared, .entry, .version ... */
      }
    }
    if (name != NULL && nl > 0 && (all || !internal_global(name, nl))) {
      if (fn) fn(user, name, nl);
      count++;
    }
    line = *end ? end + 1 : end;
  }
  return count;
}

static int image_globals(jitk_image_kind kind, const void *data, size_t size, bool all,
                         jk_kernel_name_fn fn, void *user) {
  if (data == NULL) return -1;
  if (kind == JITK_IMAGE_FATBIN && jk_fatbin_cubin(data, size, 0, &data, &size))
    kind = JITK_IMAGE_CUBIN;
  if (kind == JITK_IMAGE_CUBIN) return cubin_globals(data, size, all, fn, user);
  if (kind == JITK_IMAGE_PTX) return ptx_globals(data, all, fn, user);
  return -1;
}

int jk_image_globals(jitk_image_kind kind, const void *data, size_t size, jk_kernel_name_fn fn,
                     void *user) {
  return image_globals(kind, data, size, false, fn, user);
}

int jk_image_has_global(jitk_image_kind kind, const void *data, size_t size, const char *symbol) {
  find_name f = {symbol, strlen(symbol), false};
  if (image_globals(kind, data, size, true, match_name, &f) < 0) return -1;
  return f.found ? 1 : 0;
}

/* A fatbin is a 16-byte header (magic, version, header size, payload
 * size) and entries, each a header (kind 1 PTX or 2 ELF, version, its own
 * size, the payload size, ..., the sm number at byte 28, flags at byte 40)
 * and a payload, which may be compressed. */
#define JK_FATBIN_ELF 2

bool jk_fatbin_cubin(const void *data, size_t size, int sm, const void **cubin,
                     size_t *cubin_size) {
  const unsigned char *p = data;
  if (size < 16 || rd32(p) != JK_FATBIN_MAGIC) return false;
  /* The entries lie between the header (its own size at byte 6) and the
   * end its payload size gives, which must not pass the image's. */
  uint64_t first = rd16(p + 6), payload_size = rd64(p + 8);
  if (first < 16 || first > size) return false;
  uint64_t end = payload_size > (uint64_t)size - 16 ? (uint64_t)size : 16 + payload_size;
  const unsigned char *best = NULL;
  uint64_t best_size = 0;
  for (uint64_t off = first; off <= end && end - off >= 32;) {
    const unsigned char *h = p + off;
    uint32_t hsize = rd32(h + 4);
    uint64_t psize = rd64(h + 8);
    /* Header and payload both inside [off, end): tested one at a time,
     * so that a large header size cannot wrap the room left around. */
    if (hsize < 32 || hsize > end - off || psize > end - off - hsize) break;
    const unsigned char *payload = h + hsize;
    /* Only uncompressed ELF entries can be read; any architecture of the
     * same source has the same kernels and parameters, the device's own
     * is preferred. */
    if (rd16(h) == JK_FATBIN_ELF && psize >= 64 &&
        memcmp(payload,
               "\x7f"
               "ELF",
               4) == 0 &&
        (best == NULL || (int)rd32(h + 28) == sm)) {
      best = payload;
      best_size = psize;
    }
    off += hsize + psize;
  }
  if (best == NULL) return false;
  *cubin = best;
  *cubin_size = (size_t)best_size;
  return true;
}
