/*
 * Telling kernel images apart and checking cubins before the driver sees
 * them. The driver's answer to a truncated or foreign cubin is a bare
 * CUDA_ERROR_INVALID_IMAGE or NO_BINARY_FOR_GPU; reading the ELF header
 * first lets the message say what is wrong and for which architecture the
 * cubin was built.
 */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
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

const char *jk_image_kind_name(jitk_image_kind k) {
  switch (k) {
    case JITK_IMAGE_CUBIN: return "cubin";
    case JITK_IMAGE_PTX: return "PTX";
    case JITK_IMAGE_FATBIN: return "fatbin";
    default: return "image";
  }
}

static jitk_image_kind sniff(const unsigned char *p, size_t size) {
  if (size >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0) return JITK_IMAGE_CUBIN;
  if (size >= 4 && rd32(p) == JK_FATBIN_MAGIC) return JITK_IMAGE_FATBIN;
  /* PTX is text that starts, after blank lines and comments, with a
   * directive; ptxas's output starts with comments. */
  size_t i = 0;
  while (i < size && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) i++;
  if (i + 2 <= size && (memcmp(p + i, "//", 2) == 0 || p[i] == '.'))
    return JITK_IMAGE_PTX;
  return JITK_IMAGE_AUTO;
}

jitk_status jk_cubin_arch(const jitk_engine *e, const void *data, size_t size,
                          int *sm) {
  const unsigned char *p = data;
  if (size < 64)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "truncated cubin: %zu bytes, less than an ELF header", size);
  if (p[4] != 2 || p[5] != 1)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "not a cubin: the ELF file is not 64-bit little-endian");
  if (rd16(p + 18) != JK_EM_CUDA)
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "not a cubin: ELF machine %u is not NVIDIA CUDA (190)",
                   (unsigned)rd16(p + 18));
  uint64_t shoff = rd64(p + 40);
  uint16_t shentsize = rd16(p + 58), shnum = rd16(p + 60);
  uint64_t phoff = rd64(p + 32);
  uint16_t phentsize = rd16(p + 54), phnum = rd16(p + 56);
  if (shnum > 0 && (shentsize < 64 || shoff > size ||
                    (uint64_t)shentsize * shnum > size - shoff))
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "truncated cubin: its section table ends at byte %llu but "
                   "the image has %zu bytes",
                   (unsigned long long)(shoff + (uint64_t)shentsize * shnum), size);
  if (phnum > 0 && (phoff > size || (uint64_t)phentsize * phnum > size - phoff))
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "truncated cubin: its program headers end past its %zu bytes",
                   size);
  for (uint16_t i = 0; i < shnum; i++) {
    const unsigned char *sh = p + shoff + (uint64_t)i * shentsize;
    uint32_t type = rd32(sh + 4);
    uint64_t off = rd64(sh + 24), sz = rd64(sh + 32);
    if (type == 8 /* SHT_NOBITS */) continue;
    if (off > size || sz > size - off)
      return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                     "truncated cubin: section %u ends at byte %llu but the "
                     "image has %zu bytes",
                     (unsigned)i, (unsigned long long)(off + sz), size);
  }
  /* The architecture's place in e_flags moved with the ELF ABI that
   * CUDA 12.8 introduced (OS/ABI 0x41): bits 8-15 there, bits 0-7 before. */
  uint32_t flags = rd32(p + 48);
  unsigned osabi = p[7];
  *sm = osabi == 0x41 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
  return JITK_OK;
}

jitk_status jk_image_check(const jitk_engine *e, jitk_image_kind kind,
                           const void *data, size_t size,
                           jitk_image_kind *kind_out) {
  if (data == NULL || size == 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "the image is %s",
                   data == NULL ? "NULL" : "empty");
  jitk_image_kind found = sniff(data, size);
  if (kind == JITK_IMAGE_AUTO) {
    if (found == JITK_IMAGE_AUTO)
      return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                     "the %zu bytes are not a cubin (ELF), a fatbin or PTX text",
                     size);
    kind = found;
  } else if (kind != found && !(kind == JITK_IMAGE_PTX && found == JITK_IMAGE_AUTO)) {
    if (kind < JITK_IMAGE_CUBIN || kind > JITK_IMAGE_FATBIN)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "unknown image kind %d", (int)kind);
    return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                   "the image was given as %s but its content is %s",
                   jk_image_kind_name(kind),
                   found == JITK_IMAGE_AUTO ? "none of cubin, fatbin or PTX"
                                            : jk_image_kind_name(found));
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
      return jk_fail(e, JITK_ERR_INVALID_IMAGE,
                     "the cubin is for sm_%d but the engine targets %s", sm,
                     e->target.arch);
    }
  }
  *kind_out = kind;
  return JITK_OK;
}
