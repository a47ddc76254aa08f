/*
 * Cache keys: labelled, length-prefixed key material hashed with XXH3-128.
 * The material is stored with each entry and compared on every hit, so a
 * hash collision or a damaged key can never serve the wrong binary.
 */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "cache/cache.h"
#include "engine.h"

void jk_material_init(jk_material *m, jitk_engine *e) {
  memset(m, 0, sizeof *m);
  m->e = e;
}

void jk_material_free(jk_material *m) {
  jk_free(m->e, m->data);
  jk_material_init(m, m->e);
}

static bool reserve(jk_material *m, size_t extra) {
  if (m->failed) return false;
  if (m->len + extra <= m->cap) return true;
  size_t cap = m->cap ? m->cap : 256;
  while (cap < m->len + extra) cap *= 2;
  unsigned char *p = jk_realloc(m->e, m->data, cap);
  if (p == NULL) {
    m->failed = true;
    return false;
  }
  m->data = p;
  m->cap = cap;
  return true;
}

void jk_material_add(jk_material *m, const char *label, const void *bytes, size_t n) {
  size_t ll = strlen(label) + 1;
  if (!reserve(m, ll + 8 + n)) return;
  memcpy(m->data + m->len, label, ll);
  m->len += ll;
  uint64_t len = n;
  for (int i = 0; i < 8; i++) m->data[m->len++] = (unsigned char)(len >> (8 * i));
  if (n) memcpy(m->data + m->len, bytes, n);
  m->len += n;
}

void jk_material_append(jk_material *m, const void *bytes, size_t n) {
  if (!reserve(m, n)) return;
  if (n) memcpy(m->data + m->len, bytes, n);
  m->len += n;
}

void jk_material_add_str(jk_material *m, const char *label, const char *s) {
  jk_material_add(m, label, s, strlen(s));
}

bool jk_material_next(const unsigned char *data, size_t len, size_t *pos, const char **label,
                      const unsigned char **bytes, size_t *n, bool *ok) {
  *ok = true;
  if (*pos >= len) return false;
  const unsigned char *nul = memchr(data + *pos, '\0', len - *pos);
  if (nul == NULL || (size_t)(nul - data) + 1 + 8 > len) {
    *ok = false;
    return false;
  }
  *label = (const char *)data + *pos;
  size_t p = (size_t)(nul - data) + 1;
  uint64_t flen = 0;
  for (int i = 0; i < 8; i++) flen |= (uint64_t)data[p + i] << (8 * i);
  p += 8;
  if (flen > len - p) {
    *ok = false;
    return false;
  }
  *bytes = data + p;
  *n = (size_t)flen;
  *pos = p + (size_t)flen;
  return true;
}

void jk_hash128(const void *data, size_t n, uint8_t out[16]) {
  XXH128_hash_t h = XXH3_128bits(data, n);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  memcpy(out, c.digest, 16);
}

void jk_key_hex(const jk_key *k, char out[33]) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[2 * i] = hex[k->bytes[i] >> 4];
    out[2 * i + 1] = hex[k->bytes[i] & 15];
  }
  out[32] = '\0';
}

void jk_headers_digest(jitk_engine *e, char out[33]) {
  jk_material m;
  jk_material_init(&m, e);
  for (size_t i = 0; i < jk_num_embedded_headers; i++) {
    jk_material_add_str(&m, "name", jk_embedded_headers[i].name);
    jk_material_add(&m, "content", jk_embedded_headers[i].data, jk_embedded_headers[i].size);
  }
  jk_key k;
  jk_hash128(m.data ? m.data : (const unsigned char *)"", m.len, k.bytes);
  jk_key_hex(&k, out);
  jk_material_free(&m);
}

/* The fields of one NVRTC compile: final options, name, source, name
 * expressions and headers. */
static jitk_status add_program(jitk_engine *e, jk_material *m, const jk_compile_input *in) {
  char **opts = NULL;
  size_t nopts = 0;
  jitk_status st =
      jk_nvrtc_final_options(e, in->options, in->num_options, jk_final_flags(in), &opts, &nopts);
  if (st != JITK_OK) return st;
  for (size_t i = 0; i < nopts; i++) jk_material_add_str(m, "option", opts[i]);
  jk_options_free(e, opts, nopts);
  jk_material_add_str(m, "program_name", in->program_name ? in->program_name : "module.cu");
  jk_material_add_str(m, "source", in->source);
  for (size_t i = 0; i < in->num_name_expressions; i++)
    jk_material_add_str(m, "name_expression", in->name_expressions[i]);
  for (size_t i = 0; i < in->num_headers; i++) {
    jk_material_add_str(m, "header_name", in->headers[i].name);
    jk_material_add_str(m, "header", in->headers[i].source);
  }
  return JITK_OK;
}

/* The linker and the folders searched for libcudadevrt.a belong to the
 * request (the library found, and every place before it, to the entry's
 * dependency record). */
static jitk_status add_devrt_search(jitk_engine *e, jk_material *m) {
  char *dirs = NULL;
  jitk_status st = jk_devrt_search_dirs(e, &dirs);
  if (st != JITK_OK) return st;
  jk_material_add_str(m, "devrt_search", dirs);
  jk_free(e, dirs);
  return JITK_OK;
}

/* A linked program: the link's own settings, then every piece in order,
 * CUDA ones by what compiles them (with the options the link adds), the
 * others by their bytes. */
static jitk_status add_link(jitk_engine *e, jk_material *m, const jk_compile_input *in) {
  const jk_link_input *li = in->link;
  jk_material_add_str(m, "program_name", in->program_name ? in->program_name : "linked.cu");
  jk_material_add_str(m, "linker", jk_linker_identity(e));
  jk_material_add_str(m, "lto", li->lto ? "on" : "off");
  for (size_t i = 0; i < li->num_options; i++)
    jk_material_add_str(m, "link_option", li->options[i]);
  for (size_t i = 0; i < li->num_pieces; i++) {
    const jk_link_piece *p = &li->pieces[i];
    char kind[16];
    snprintf(kind, sizeof kind, "%d", (int)p->kind);
    jk_material_add_str(m, "piece", kind);
    jk_material_add_str(m, "piece_name", p->name);
    jitk_status st = JITK_OK;
    if (p->kind == JITK_LINK_CUDA) {
      jk_compile_input ci;
      const char **storage = NULL;
      st = jk_link_piece_input(e, p->cuda, li->lto, &ci, &storage);
      if (st == JITK_OK) st = add_program(e, m, &ci);
      jk_free(e, storage);
    } else if (p->kind == JITK_LINK_DEVICE_RUNTIME) {
      st = add_devrt_search(e, m);
    } else {
      jk_material_add(m, "piece_bytes", p->data, p->size);
    }
    if (st != JITK_OK) return st;
  }
  return JITK_OK;
}

jitk_status jk_cache_key(jitk_engine *e, const jk_compile_input *in, const char *generator,
                         jk_material *m, jk_key *key) {
  char num[32];
  snprintf(num, sizeof num, "%d", JK_CACHE_FORMAT);
  jk_material_add_str(m, "format", num);
  jk_material_add_str(m, "generator", generator);
  jk_material_add_str(m, "nvrtc", e->cache.nvrtc_id);
  jk_material_add_str(m, "target", e->target.arch);
  jk_material_add_str(m, "output", e->target.ptx ? "ptx" : "cubin");
  /* Every compile turns NVRTC's own cache off (src/nvrtc/nvrtc.c,
   * own_cache_off). Entries made before could hold a cubin that cache
   * served for other options; this mark keeps them from being found. */
  jk_material_add_str(m, "nvrtc_own_cache", "off");
  jitk_status st = in->link != NULL ? add_link(e, m, in) : add_program(e, m, in);
  if (st != JITK_OK) return st;
  /* jitk's own device headers are part of every program; their digest
   * (computed once per engine) stands for them, since they are the same
   * for every kernel of a jitk build. */
  jk_material_add_str(m, "jitk_headers", e->cache.headers_digest);
  /* The dependency scan's version: entries whose records an older, less
   * complete scan made are not found (JK_DEPS_SCANNER_VERSION). */
  snprintf(num, sizeof num, "%d", JK_DEPS_SCANNER_VERSION);
  jk_material_add_str(m, "deps_scanner", num);
  /* A relocatable piece (of a linked program, or a manifest's
   * "relocatable" output) is kept unlinked, where the same -dc program
   * asked for as a whole is linked with libcudadevrt: the two images
   * differ, so the output kind is part of the key. */
  if (in->output == JK_OUTPUT_RELOCATABLE) jk_material_add_str(m, "unlinked", "relocatable");
  /* Relocatable code is linked with libcudadevrt after NVRTC. Other
   * programs' keys are as they always were. */
  if (in->link == NULL && jk_options_rdc(in->options, in->num_options)) {
    jk_material_add_str(m, "linker", jk_linker_identity(e));
    st = add_devrt_search(e, m);
    if (st != JITK_OK) return st;
  }
  if (m->failed) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory building a cache key");
  jk_hash128(m->data, m->len, key->bytes);
  return JITK_OK;
}
