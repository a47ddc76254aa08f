/*
 * The warm-up manifest: a run records every kernel it looks up
 * (JITK_CACHE_RECORD), and `jitk cache warm` compiles them all again, in
 * parallel, on a machine that need not have a GPU, so that a job's
 * processes start with every kernel a hit in the local or remote tier.
 *
 * A line is one JSON object, the compile request exactly as the cache
 * received it: the generator's tag, the target, the program's name, the
 * source with its options, name expressions and headers. That is what
 * the key is computed from, so a kernel compiled from the line has the
 * key the recording run looked up, whatever generated the source. The
 * line ends with an XXH3-64 of everything before it, so a line that was
 * cut short, edited or damaged is refused rather than compiled into an
 * entry nobody asks for.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache/cache.h"
#include "engine.h"

#define JK_MANIFEST_FORMAT 1
#define CHECK_TAG ",\"check\":\""

/* --- writing --- */

static void put_string(jk_buf *b, const char *s) {
  jk_buf_puts(b, "\"");
  size_t start = 0, i = 0;
  for (; s[i] != '\0'; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    jk_buf_append(b, s + start, i - start);
    start = i + 1;
    switch (ch) {
      case '"': jk_buf_puts(b, "\\\""); break;
      case '\\': jk_buf_puts(b, "\\\\"); break;
      case '\n': jk_buf_puts(b, "\\n"); break;
      case '\t': jk_buf_puts(b, "\\t"); break;
      case '\r': jk_buf_puts(b, "\\r"); break;
      default: jk_buf_printf(b, "\\u%04x", ch); break;
    }
  }
  jk_buf_append(b, s + start, i - start);
  jk_buf_puts(b, "\"");
}

static void put_list(jk_buf *b, const char *name, const char *const *v, size_t n) {
  jk_buf_printf(b, ",\"%s\":[", name);
  for (size_t i = 0; i < n; i++) {
    if (i) jk_buf_puts(b, ",");
    put_string(b, v[i]);
  }
  jk_buf_puts(b, "]");
}

static const char *output_name(jk_piece_output o) {
  return o == JK_OUTPUT_RELOCATABLE ? "relocatable" : o == JK_OUTPUT_LTO_IR ? "lto_ir" : "program";
}

static const char *const kind_names[] = {"cuda",   "ptx",    "cubin",   "fatbin",
                                         "lto_ir", "object", "library", "device_runtime"};
enum { NUM_KINDS = (int)(sizeof kind_names / sizeof kind_names[0]) };

static void put_base64(jk_buf *b, const unsigned char *d, size_t n) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  jk_buf_puts(b, "\"");
  char quad[4];
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)d[i] << 16;
    if (i + 1 < n) v |= (unsigned)d[i + 1] << 8;
    if (i + 2 < n) v |= d[i + 2];
    quad[0] = abc[(v >> 18) & 63];
    quad[1] = abc[(v >> 12) & 63];
    quad[2] = (char)(i + 1 < n ? abc[(v >> 6) & 63] : '=');
    quad[3] = (char)(i + 2 < n ? abc[v & 63] : '=');
    jk_buf_append(b, quad, 4);
  }
  jk_buf_puts(b, "\"");
}

/* What NVRTC compiles a program from: options, name expressions, headers
 * and the source. */
static void put_program(jk_buf *b, const jk_compile_input *in) {
  put_list(b, "options", in->options, in->num_options);
  put_list(b, "name_expressions", in->name_expressions, in->num_name_expressions);
  jk_buf_puts(b, ",\"headers\":[");
  for (size_t i = 0; i < in->num_headers; i++) {
    jk_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    put_string(b, in->headers[i].name);
    jk_buf_puts(b, ",\"source\":");
    put_string(b, in->headers[i].source);
    jk_buf_puts(b, "}");
  }
  jk_buf_puts(b, "]");
  if (in->source != NULL) {
    jk_buf_puts(b, ",\"source\":");
    put_string(b, in->source);
  }
}

/* A linked program's settings and pieces: CUDA pieces as programs, the
 * others as their bytes (base64), so that the line alone rebuilds it. */
static void put_link(jk_buf *b, const jk_link_input *li) {
  jk_buf_printf(b, ",\"link\":{\"lto\":%s", li->lto ? "true" : "false");
  put_list(b, "options", li->options, li->num_options);
  jk_buf_puts(b, ",\"pieces\":[");
  for (size_t i = 0; i < li->num_pieces; i++) {
    const jk_link_piece *p = &li->pieces[i];
    jk_buf_printf(b, "%s{\"kind\":\"%s\",\"name\":", i ? "," : "",
                  (int)p->kind >= 0 && (int)p->kind < NUM_KINDS ? kind_names[p->kind] : "?");
    put_string(b, p->name ? p->name : "");
    if (p->kind == JITK_LINK_CUDA) {
      jk_buf_puts(b, ",\"program\":");
      put_string(b, p->cuda->program_name ? p->cuda->program_name : p->name ? p->name : "");
      jk_buf_printf(b, ",\"rewrite_log\":%s", p->cuda->rewrite_log ? "true" : "false");
      put_program(b, p->cuda);
    } else if (p->kind != JITK_LINK_DEVICE_RUNTIME) {
      jk_buf_puts(b, ",\"data\":");
      put_base64(b, p->data, p->size);
    }
    jk_buf_puts(b, "}");
  }
  jk_buf_puts(b, "]}");
}

jitk_status jk_manifest_line(jitk_engine *e, const jk_compile_input *in, const char *generator,
                             const char *target, char **out) {
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "{\"jitk_manifest\":%d,\"jitk\":", JK_MANIFEST_FORMAT);
  put_string(&b, JITK_VERSION_STRING);
  jk_buf_puts(&b, ",\"target\":");
  put_string(&b, target);
  jk_buf_puts(&b, ",\"generator\":");
  put_string(&b, generator);
  jk_buf_puts(&b, ",\"program\":");
  put_string(&b, in->program_name ? in->program_name : in->link ? "linked.cu" : "module.cu");
  jk_buf_printf(&b, ",\"arch_specific\":%s,\"rewrite_log\":%s,\"output\":\"%s\"",
                in->arch_specific ? "true" : "false", in->rewrite_log ? "true" : "false",
                output_name(in->output));
  put_program(&b, in);
  if (in->link != NULL) put_link(&b, in->link);
  if (!b.failed)
    jk_buf_printf(&b, CHECK_TAG "%016llx\"}\n", (unsigned long long)XXH3_64bits(b.data, b.len));
  if (b.failed) {
    jk_buf_free(&b);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory writing a manifest line");
  }
  *out = jk_buf_take(&b);
  return JITK_OK;
}

jitk_status jk_manifest_init(jitk_engine *e, const jitk_engine_config *cfg) {
  const char *path = cfg->cache_record ? cfg->cache_record : getenv("JITK_CACHE_RECORD");
  if (path == NULL || *path == '\0') return JITK_OK;
  e->cache.record_path = jk_strdup(e, path);
  if (e->cache.record_path == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  return JITK_OK;
}

void jk_manifest_record(jitk_engine *e, const jk_compile_input *in, const char *generator) {
  jk_cache *c = &e->cache;
  if (c->record_path == NULL || atomic_load(&c->record_off)) return;
  char *line = NULL;
  if (jk_manifest_line(e, in, generator, e->target.arch, &line) != JITK_OK) return;
  /* One write of the whole line to a file opened for appending: lines of
   * processes recording into one file at once never interleave. The file
   * is its owner's alone, since it holds the kernels' sources. Only a
   * regular file is written: the open does not wait for a FIFO's reader
   * (O_NONBLOCK; one without a reader fails with ENXIO), and a FIFO or a
   * device opened is refused rather than written, since a write to a full
   * pipe would block the compile, or fail part of the way. */
  int fd = open(c->record_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0600);
  size_t n = strlen(line);
  ssize_t w = -1;
  int err = fd >= 0 ? 0 : errno;
  const char *why = NULL;
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) why = "not a regular file";
  if (fd < 0 && err == ENXIO) why = "not a regular file";
  if (fd >= 0 && why == NULL) {
    w = write(fd, line, n);
    err = errno;
  }
  if (fd >= 0) close(fd);
  jk_free(e, line);
  if (w == (ssize_t)n) return;
  if (why == NULL) why = w >= 0 ? "a short write" : strerror(err);
  if (!atomic_exchange(&c->record_off, true))
    jk_log(e, JITK_LOG_WARN, "kernel cache: cannot record kernels in the manifest %s (%s); %s",
           c->record_path, why, "this engine records no more, and everything else works as before");
}

/* --- reading --- */

typedef struct jk_manifest_rec {
  size_t line;
  int format;
  char *jitk, *target, *generator, *program, *source, *output;
  bool arch_specific, rewrite_log;
  char **options, **names;
  size_t num_options, num_names;
  jitk_header *headers;
  size_t num_headers;
  uint64_t check;
  /* A piece of a linked program (its own record): its kind, name and
   * bytes (CUDA pieces have the program's fields instead). */
  int kind;
  char *name;
  unsigned char *data;
  size_t size;
  bool has_data;
  /* A linked program: the link's settings and its pieces. */
  bool linked, lto;
  char **link_options;
  size_t num_link_options;
  struct jk_manifest_rec *pieces;
  size_t num_pieces;
} jk_manifest_rec;

static void rec_free(jitk_engine *e, jk_manifest_rec *r) {
  jk_free(e, r->jitk);
  jk_free(e, r->target);
  jk_free(e, r->generator);
  jk_free(e, r->program);
  jk_free(e, r->source);
  jk_free(e, r->output);
  for (size_t i = 0; i < r->num_options; i++) jk_free(e, r->options[i]);
  jk_free(e, r->options);
  for (size_t i = 0; i < r->num_names; i++) jk_free(e, r->names[i]);
  jk_free(e, r->names);
  for (size_t i = 0; i < r->num_headers; i++) {
    jk_free(e, (char *)r->headers[i].name);
    jk_free(e, (char *)r->headers[i].source);
  }
  jk_free(e, r->headers);
  jk_free(e, r->name);
  jk_free(e, r->data);
  for (size_t i = 0; i < r->num_link_options; i++) jk_free(e, r->link_options[i]);
  jk_free(e, r->link_options);
  for (size_t i = 0; i < r->num_pieces; i++) rec_free(e, &r->pieces[i]);
  jk_free(e, r->pieces);
  memset(r, 0, sizeof *r);
}

/* A cursor over one line; `why` says what is wrong with it. */
typedef struct jk_jp {
  jitk_engine *e;
  const char *p, *end;
  const char *why;
} jk_jp;

static void skip_ws(jk_jp *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t')) j->p++;
}

static bool expect(jk_jp *j, char ch) {
  skip_ws(j);
  if (j->p < j->end && *j->p == ch) {
    j->p++;
    return true;
  }
  if (j->why == NULL) j->why = "not a manifest record (malformed JSON)";
  return false;
}

static int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static bool read_hex4(jk_jp *j, unsigned *out) {
  if (j->end - j->p < 4) return false;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(j->p[i]);
    if (d < 0) return false;
    v = v * 16 + (unsigned)d;
  }
  j->p += 4;
  *out = v;
  return true;
}

static void put_utf8(jk_buf *b, unsigned cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xC0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (char)(0xF0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  jk_buf_append(b, u, n);
}

/* A JSON string, allocated. Bytes that are not UTF-8 pass as they are
 * (a source is bytes to NVRTC); a NUL, escaped or not, cannot be part of
 * a C string and fails the line. */
static char *read_string(jk_jp *j) {
  if (!expect(j, '"')) return NULL;
  jk_buf b;
  jk_buf_init(&b, j->e);
  const char *run = j->p;
  while (j->p < j->end && *j->p != '"') {
    unsigned char ch = (unsigned char)*j->p;
    if (ch < 0x20) {
      j->why = "a control character inside a string";
      break;
    }
    if (ch != '\\') {
      j->p++;
      continue;
    }
    jk_buf_append(&b, run, (size_t)(j->p - run));
    j->p++;
    if (j->p >= j->end) break;
    char esc = *j->p++;
    switch (esc) {
      case '"': jk_buf_puts(&b, "\""); break;
      case '\\': jk_buf_puts(&b, "\\"); break;
      case '/': jk_buf_puts(&b, "/"); break;
      case 'b': jk_buf_puts(&b, "\b"); break;
      case 'f': jk_buf_puts(&b, "\f"); break;
      case 'n': jk_buf_puts(&b, "\n"); break;
      case 'r': jk_buf_puts(&b, "\r"); break;
      case 't': jk_buf_puts(&b, "\t"); break;
      case 'u': {
        unsigned cp = 0, lo = 0;
        if (!read_hex4(j, &cp)) {
          j->why = "a bad \\u escape";
          break;
        }
        if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' &&
            j->p[1] == 'u') {
          j->p += 2;
          if (read_hex4(j, &lo) && lo >= 0xDC00 && lo < 0xE000)
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else
            j->why = "a bad \\u escape";
        }
        if (cp == 0) j->why = "a NUL character inside a string";
        if (j->why == NULL) put_utf8(&b, cp);
        break;
      }
      default: j->why = "an unknown escape in a string"; break;
    }
    if (j->why != NULL) break;
    run = j->p;
  }
  if (j->why == NULL && j->p >= j->end) j->why = "a string that does not end";
  if (j->why != NULL) {
    jk_buf_free(&b);
    return NULL;
  }
  jk_buf_append(&b, run, (size_t)(j->p - run));
  j->p++; /* the closing quote */
  char *s = jk_buf_take(&b);
  if (s == NULL) j->why = "out of memory";
  return s;
}

static bool read_bool(jk_jp *j, bool *out) {
  skip_ws(j);
  if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
    j->p += 4;
    *out = true;
    return true;
  }
  if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
    j->p += 5;
    *out = false;
    return true;
  }
  j->why = "a value that should be true or false";
  return false;
}

static bool read_int(jk_jp *j, int *out) {
  skip_ws(j);
  long v = 0;
  const char *start = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9' && v < 1000000) v = v * 10 + (*j->p++ - '0');
  if (j->p == start || v >= 1000000) {
    j->why = "a value that should be a small number";
    return false;
  }
  *out = (int)v;
  return true;
}

static bool grow(jk_jp *j, void **v, size_t n, size_t size) {
  void *g = jk_realloc(j->e, *v, (n + 1) * size);
  if (g == NULL) {
    j->why = "out of memory";
    return false;
  }
  *v = g;
  return true;
}

/* An array: '[', items separated by commas, ']'; `item` reads one. */
static bool read_array(jk_jp *j, bool (*item)(jk_jp *j, void *ctx), void *ctx) {
  if (!expect(j, '[')) return false;
  skip_ws(j);
  if (j->p < j->end && *j->p == ']') {
    j->p++;
    return true;
  }
  for (;;) {
    if (!item(j, ctx)) return false;
    skip_ws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    return expect(j, ']');
  }
}

typedef struct jk_str_list {
  char ***v;
  size_t *n;
} jk_str_list;

static bool list_item(jk_jp *j, void *ctx) {
  jk_str_list *l = ctx;
  if (!grow(j, (void **)l->v, *l->n, sizeof **l->v)) return false;
  char *s = read_string(j);
  if (s == NULL) return false;
  (*l->v)[(*l->n)++] = s;
  return true;
}

static bool read_list(jk_jp *j, char ***v, size_t *n) {
  if (*v != NULL || *n != 0) {
    j->why = "a field given twice";
    return false;
  }
  jk_str_list l = {v, n};
  return read_array(j, list_item, &l);
}

/* {"name": ..., "source": ...} */
static bool header_item(jk_jp *j, void *ctx) {
  jk_manifest_rec *r = ctx;
  if (!grow(j, (void **)&r->headers, r->num_headers, sizeof *r->headers)) return false;
  jitk_header *h = &r->headers[r->num_headers];
  memset(h, 0, sizeof *h);
  r->num_headers++;
  char *name = NULL, *src = NULL;
  bool ok = expect(j, '{');
  for (int field = 0; ok && field < 2; field++) {
    char *key = read_string(j);
    ok = key != NULL && expect(j, ':');
    if (ok && strcmp(key, "name") == 0 && name == NULL)
      ok = (name = read_string(j)) != NULL;
    else if (ok && strcmp(key, "source") == 0 && src == NULL)
      ok = (src = read_string(j)) != NULL;
    else if (ok)
      ok = false, j->why = "a header that is not {\"name\", \"source\"}";
    jk_free(j->e, key);
    if (ok) ok = expect(j, field == 0 ? ',' : '}');
  }
  h->name = name;
  h->source = src;
  return ok;
}

static bool read_headers(jk_jp *j, jk_manifest_rec *r) {
  if (r->headers != NULL) {
    j->why = "a field given twice";
    return false;
  }
  return read_array(j, header_item, r);
}

static int base64_value(char ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

/* A piece's bytes, base64 in a string. */
static bool read_base64(jk_jp *j, jk_manifest_rec *r) {
  if (r->has_data) {
    j->why = "a field given twice";
    return false;
  }
  char *text = read_string(j);
  if (text == NULL) return false;
  size_t n = strlen(text);
  unsigned char *out = n % 4 == 0 ? jk_malloc(j->e, n / 4 * 3 + 1) : NULL;
  size_t len = 0;
  bool ok = out != NULL;
  for (size_t i = 0; ok && i < n; i += 4) {
    int v[4];
    for (int k = 0; k < 4; k++) v[k] = base64_value(text[i + k]);
    bool last = i + 4 == n;
    int pad = last && text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
    ok = v[0] >= 0 && v[1] >= 0 && (pad == 2 || v[2] >= 0) && (pad >= 1 || v[3] >= 0);
    if (!ok) break;
    unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (pad < 2 ? (unsigned)v[2] << 6 : 0) |
                 (pad < 1 ? (unsigned)v[3] : 0);
    out[len++] = (unsigned char)(w >> 16);
    if (pad < 2) out[len++] = (unsigned char)(w >> 8);
    if (pad < 1) out[len++] = (unsigned char)w;
  }
  jk_free(j->e, text);
  if (!ok) {
    jk_free(j->e, out);
    j->why = out == NULL && n % 4 == 0 ? "out of memory" : "a piece's bytes that are not base64";
    return false;
  }
  r->data = out;
  r->size = len;
  r->has_data = true;
  return true;
}

static bool read_members(jk_jp *j, jk_manifest_rec *r, bool piece, bool top);

/* One piece of a link: an object of a piece's fields. */
static bool piece_item(jk_jp *j, void *ctx) {
  jk_manifest_rec *r = ctx;
  if (!grow(j, (void **)&r->pieces, r->num_pieces, sizeof *r->pieces)) return false;
  jk_manifest_rec *pc = &r->pieces[r->num_pieces++];
  memset(pc, 0, sizeof *pc);
  pc->kind = -1;
  return expect(j, '{') && read_members(j, pc, true, false);
}

/* A linked program: {"lto": ..., "options": [...], "pieces": [...]}. */
static bool read_link(jk_jp *j, jk_manifest_rec *r) {
  if (r->linked) {
    j->why = "a field given twice";
    return false;
  }
  r->linked = true;
  if (!expect(j, '{')) return false;
  bool first = true, pieces = false;
  for (;;) {
    skip_ws(j);
    if (j->p < j->end && *j->p == '}') {
      j->p++;
      break;
    }
    if (!first && !expect(j, ',')) return false;
    first = false;
    char *key = read_string(j);
    bool ok = key != NULL && expect(j, ':');
    if (ok && strcmp(key, "lto") == 0) {
      ok = read_bool(j, &r->lto);
    } else if (ok && strcmp(key, "options") == 0) {
      ok = read_list(j, &r->link_options, &r->num_link_options);
    } else if (ok && strcmp(key, "pieces") == 0 && !pieces) {
      pieces = true;
      ok = read_array(j, piece_item, r);
    } else if (ok) {
      j->why = "an unknown field of a link";
      ok = false;
    }
    jk_free(j->e, key);
    if (!ok) return false;
  }
  if (!pieces || r->num_pieces == 0) {
    j->why = "a link without pieces";
    return false;
  }
  return true;
}

static bool read_field(jk_jp *j, jk_manifest_rec *r, const char *key, bool piece) {
  struct {
    const char *name;
    char **slot;
    bool top, in_piece;
  } strings[] = {{"jitk", &r->jitk, true, false},
                 {"target", &r->target, true, false},
                 {"generator", &r->generator, true, false},
                 {"output", &r->output, true, false},
                 {"program", &r->program, true, true},
                 {"source", &r->source, true, true},
                 {"name", &r->name, false, true}};
  for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
    if (strcmp(key, strings[i].name) != 0 || !(piece ? strings[i].in_piece : strings[i].top))
      continue;
    if (*strings[i].slot != NULL) {
      j->why = "a field given twice";
      return false;
    }
    return (*strings[i].slot = read_string(j)) != NULL;
  }
  if (strcmp(key, "rewrite_log") == 0) return read_bool(j, &r->rewrite_log);
  if (strcmp(key, "options") == 0) return read_list(j, &r->options, &r->num_options);
  if (strcmp(key, "name_expressions") == 0) return read_list(j, &r->names, &r->num_names);
  if (strcmp(key, "headers") == 0) return read_headers(j, r);
  if (!piece && strcmp(key, "arch_specific") == 0) return read_bool(j, &r->arch_specific);
  if (!piece && strcmp(key, "link") == 0) return read_link(j, r);
  if (piece && strcmp(key, "data") == 0) return read_base64(j, r);
  if (piece && strcmp(key, "kind") == 0 && r->kind < 0) {
    char *k = read_string(j);
    if (k == NULL) return false;
    for (int i = 0; i < NUM_KINDS; i++)
      if (strcmp(k, kind_names[i]) == 0) r->kind = i;
    jk_free(j->e, k);
    if (r->kind < 0) j->why = "an unknown kind of piece";
    return r->kind >= 0;
  }
  j->why = piece ? "an unknown field of a piece" : "an unknown field";
  return false;
}

/* The members of an object up to its closing brace (`top`: up to the end
 * of the line, whose brace is past the check). */
static bool read_members(jk_jp *j, jk_manifest_rec *r, bool piece, bool top) {
  bool first = true;
  for (;;) {
    skip_ws(j);
    if (top && j->p >= j->end) return true;
    if (!top && j->p < j->end && *j->p == '}') {
      j->p++;
      break;
    }
    if (!first && !expect(j, ',')) return false;
    first = false;
    char *key = read_string(j);
    bool ok = key != NULL && expect(j, ':');
    if (ok && top && strcmp(key, "jitk_manifest") == 0)
      ok = read_int(j, &r->format);
    else if (ok)
      ok = read_field(j, r, key, piece);
    jk_free(j->e, key);
    if (!ok) return false;
  }
  /* A piece is complete: CUDA has its source, device_runtime nothing, the
   * others their bytes. */
  if (piece && r->kind < 0) j->why = "a piece without a kind";
  if (piece && r->kind == JITK_LINK_CUDA && r->source == NULL)
    j->why = "a CUDA piece without a source";
  if (piece && r->kind != JITK_LINK_CUDA && r->kind != JITK_LINK_DEVICE_RUNTIME && r->kind >= 0 &&
      !r->has_data)
    j->why = "a piece without its bytes";
  return j->why == NULL;
}

/* Parses one line (without its newline). NULL and *why on failure. */
static bool parse_line(jitk_engine *e, const char *line, size_t len, jk_manifest_rec *r,
                       const char **why) {
  memset(r, 0, sizeof *r);
  /* The check first: a damaged line says so, whatever it became. */
  static const char tag[] = CHECK_TAG;
  const size_t tag_len = sizeof tag - 1, tail = tag_len + 16 + 2;
  if (len < tail + 2 || line[0] != '{' || memcmp(line + len - 2, "\"}", 2) != 0 ||
      memcmp(line + len - tail, tag, tag_len) != 0) {
    *why = len > 0 && line[0] == '{' && memmem(line, len, CHECK_TAG, tag_len) == NULL
               ? "cut short (no check at its end)"
               : "not a manifest record";
    return false;
  }
  uint64_t want = 0;
  for (size_t i = 0; i < 16; i++) {
    int d = hex_digit(line[len - 18 + i]);
    if (d < 0) {
      *why = "not a manifest record (a bad check)";
      return false;
    }
    want = want * 16 + (uint64_t)d;
  }
  if (XXH3_64bits(line, len - tail) != want) {
    *why = "damaged (its check does not match its contents)";
    return false;
  }
  r->check = want;
  jk_jp j = {e, line + 1, line + len - tail, NULL};
  r->kind = -1;
  if (!read_members(&j, r, false, true) && j.why == NULL) j.why = "not a manifest record";
  if (j.why == NULL && r->format != JK_MANIFEST_FORMAT)
    j.why = r->format > JK_MANIFEST_FORMAT ? "written by a newer jitk (a later manifest format)"
                                           : "not a manifest record (no format)";
  if (j.why == NULL &&
      (r->target == NULL || r->generator == NULL || (r->source == NULL && !r->linked)))
    j.why = "incomplete (no target, generator or source)";
  if (j.why == NULL && r->output != NULL && strcmp(r->output, "program") != 0 &&
      strcmp(r->output, "relocatable") != 0 && strcmp(r->output, "lto_ir") != 0)
    j.why = "an unknown output kind";
  if (j.why != NULL) {
    rec_free(e, r);
    *why = j.why;
    return false;
  }
  return true;
}

/* --- warming --- */

typedef struct jk_warm {
  jitk_engine *e;
  const char *path;
  jk_manifest_rec *recs;
  size_t n;
  const jitk_cache_warm_options *opt;
} jk_warm;

static jk_piece_output output_of(const char *s) {
  if (s != NULL && strcmp(s, "relocatable") == 0) return JK_OUTPUT_RELOCATABLE;
  if (s != NULL && strcmp(s, "lto_ir") == 0) return JK_OUTPUT_LTO_IR;
  return JK_OUTPUT_PROGRAM;
}

/* The first lines of a message, for a warning that stays readable. */
static void first_lines(const char *msg, int lines, char *out, size_t cap) {
  size_t n = 0;
  const char *p = msg;
  for (int i = 0; i < lines && *p; i++) {
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : p + strlen(p);
  }
  n = (size_t)(p - msg);
  while (n > 0 && msg[n - 1] == '\n') n--;
  if (n >= cap) n = cap - 1;
  memcpy(out, msg, n);
  out[n] = '\0';
}

/* The compile input a record describes (a program, or a CUDA piece). */
static void input_of(const jk_manifest_rec *r, jk_compile_input *in) {
  memset(in, 0, sizeof *in);
  in->source = r->source;
  in->program_name = r->program;
  in->options = (const char *const *)r->options;
  in->num_options = r->num_options;
  in->name_expressions = (const char *const *)r->names;
  in->num_name_expressions = r->num_names;
  in->headers = r->headers;
  in->num_headers = r->num_headers;
  in->rewrite_log = r->rewrite_log;
  in->arch_specific = r->arch_specific;
  in->output = output_of(r->output);
}

static jitk_status warm_one(void *user, size_t i) {
  jk_warm *w = user;
  jitk_engine *e = w->e;
  const jk_manifest_rec *r = &w->recs[i];
  jk_compile_input in;
  input_of(r, &in);
  jk_compile_input *cuda = NULL;
  jk_link_piece *pieces = NULL;
  jk_link_input li;
  jitk_status st = JITK_OK;
  if (r->linked) {
    cuda = jk_calloc(e, r->num_pieces, sizeof *cuda);
    pieces = jk_calloc(e, r->num_pieces, sizeof *pieces);
    if (cuda == NULL || pieces == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t k = 0; st == JITK_OK && k < r->num_pieces; k++) {
      const jk_manifest_rec *pc = &r->pieces[k];
      pieces[k].kind = (jitk_link_kind)pc->kind;
      pieces[k].name = pc->name ? pc->name : "";
      pieces[k].data = pc->data;
      pieces[k].size = pc->size;
      if (pc->kind == JITK_LINK_CUDA) {
        input_of(pc, &cuda[k]);
        pieces[k].cuda = &cuda[k];
      }
    }
    li.pieces = pieces;
    li.num_pieces = r->num_pieces;
    li.lto = r->lto;
    li.options = (const char *const *)r->link_options;
    li.num_options = r->num_link_options;
    in.link = &li;
  }
  jk_entry *x = NULL;
  if (st == JITK_OK) st = jk_cache_get(e, &in, r->generator, &x);
  jk_free(e, cuda);
  jk_free(e, pieces);
  if (st == JITK_OK) {
    jk_entry_release(e, x);
    return JITK_OK;
  }
  char head[1024];
  first_lines(jitk_errmsg(e), 6, head, sizeof head);
  jk_log(e, JITK_LOG_WARN, "%s:%zu (%s, %s): does not compile now: %s", w->path, r->line,
         r->program ? r->program : "module.cu", r->generator, head);
  return jk_fail(e, st, "%s:%zu (%s): %s", w->path, r->line, r->program ? r->program : "module.cu",
                 head);
}

static void warm_progress(void *user, size_t finished, size_t total, size_t failed) {
  const jitk_cache_warm_options *o = user;
  o->progress(o->progress_user, finished, total, failed);
}

/* The engine's compiles and remote hits so far. */
static void counts(jitk_engine *e, uint64_t *compiles, uint64_t *remote_hits) {
  jk_cache *c = &e->cache;
  if (c->remote.inited) {
    pthread_mutex_lock(&c->remote.lock);
    *remote_hits = c->remote.stats.hits;
    pthread_mutex_unlock(&c->remote.lock);
  }
  pthread_mutex_lock(&c->disk_lock);
  *compiles = c->stats.compiles;
  pthread_mutex_unlock(&c->disk_lock);
}

static double mono_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

jitk_status jitk_cache_warm_options_init(jitk_cache_warm_options *options) {
  if (options == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_cache_warm_options_init: options is NULL");
  memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  return JITK_OK;
}

/* The checks of the lines kept, in an open-addressed table: a job's
 * manifest holds a line for each kernel of each process that recorded
 * it, so repeats are the rule, and comparing each line with every line
 * kept took quadratic time. A check is already a hash of its line. */
typedef struct {
  uint64_t *slot; /* 0 is an empty slot; a check of 0 is `zero` */
  size_t cap, n;
  bool zero;
} check_set;

static bool check_set_insert(check_set *s, uint64_t c) {
  size_t i = (size_t)c & (s->cap - 1);
  while (s->slot[i] != 0) {
    if (s->slot[i] == c) return false;
    i = (i + 1) & (s->cap - 1);
  }
  s->slot[i] = c;
  s->n++;
  return true;
}

/* Adds `c`: *added says whether it was new. Fails only for memory. */
static jitk_status check_set_add(jitk_engine *e, check_set *s, uint64_t c, bool *added) {
  if (c == 0) {
    *added = !s->zero;
    s->zero = true;
    return JITK_OK;
  }
  if (2 * (s->n + 1) > s->cap) {
    check_set g = {NULL, s->cap ? 2 * s->cap : 8, 0, s->zero};
    g.slot = jk_calloc(e, g.cap, sizeof *g.slot);
    if (g.slot == NULL) return JITK_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < s->cap; i++)
      if (s->slot[i] != 0) check_set_insert(&g, s->slot[i]);
    jk_free(e, s->slot);
    *s = g;
  }
  *added = check_set_insert(s, c);
  return JITK_OK;
}

/* Reads the whole file; JITK_ERR_IO saying why. */
static jitk_status read_file(jitk_engine *e, const char *path, char **data, size_t *len) {
  enum { MOST = 1 << 30 };
  /* A FIFO named as the manifest is refused, never waited on. */
  struct stat st;
  int fd = jk_open_regular(path, &st);
  if (fd == -1)
    return jk_fail(e, JITK_ERR_IO, "jitk_cache_warm: cannot open the manifest %s: %s", path,
                   strerror(errno));
  if (fd == -2 || st.st_size > MOST) {
    if (fd >= 0) close(fd);
    return jk_fail(e, JITK_ERR_IO, "jitk_cache_warm: the manifest %s is %s", path,
                   fd >= 0 ? "larger than 1 GiB" : "not a regular file");
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = jk_malloc(e, cap);
  if (buf == NULL) {
    close(fd);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
  }
  for (;;) {
    if (n + 1 == cap) break; /* a file that grew while read: what was there */
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      close(fd);
      jk_free(e, buf);
      return jk_fail(e, JITK_ERR_IO, "jitk_cache_warm: cannot read %s: %s", path, strerror(err));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return JITK_OK;
}

jitk_status jitk_cache_warm(jitk_engine *e, const char *path,
                            const jitk_cache_warm_options *options,
                            jitk_cache_warm_report *report) {
  if (e == NULL || path == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_warm: %s is NULL",
                   e == NULL ? "engine" : "path");
  jitk_cache_warm_options opt;
  jitk_cache_warm_options_init(&opt);
  if (options != NULL) {
    if (options->struct_size < offsetof(jitk_cache_warm_options, progress_user) + sizeof(void *) ||
        options->struct_size > sizeof opt)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "jitk_cache_warm: options->struct_size is %zu; call "
                     "jitk_cache_warm_options_init first",
                     options->struct_size);
    memcpy(&opt, options, options->struct_size);
  }
  if (opt.threads < 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_cache_warm: threads is %d", opt.threads);
  jitk_cache_warm_report rep;
  memset(&rep, 0, sizeof rep);
  if (report != NULL &&
      (report->struct_size > sizeof rep ||
       report->struct_size < offsetof(jitk_cache_warm_report, seconds) + sizeof(double)))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_cache_warm: report->struct_size is %zu; set it to "
                   "sizeof(jitk_cache_warm_report)",
                   report->struct_size);
  double t0 = mono_seconds();
  char *data = NULL;
  size_t len = 0;
  jitk_status st = read_file(e, path, &data, &len);
  if (st != JITK_OK) return st;

  jk_manifest_rec *recs = NULL;
  size_t n = 0, cap = 0;
  check_set seen = {NULL, 0, 0, false};
  bool version_noted = false;
  size_t line_no = 0;
  for (size_t pos = 0; pos < len && st == JITK_OK;) {
    const char *line = data + pos;
    const char *nl = memchr(line, '\n', len - pos);
    size_t ll = nl ? (size_t)(nl - line) : len - pos;
    pos += ll + (nl ? 1 : 0);
    line_no++;
    if (ll > 0 && line[ll - 1] == '\r') ll--;
    if (ll == 0) continue;
    rep.lines++;
    jk_manifest_rec r;
    const char *why = NULL;
    if (!parse_line(e, line, ll, &r, &why)) {
      rep.damaged++;
      jk_log(e, JITK_LOG_WARN, "%s:%zu: %s; skipped", path, line_no, why);
      continue;
    }
    r.line = line_no;
    if (strcmp(r.target, e->target.arch) != 0) {
      rep.other_targets++;
      rec_free(e, &r);
      continue;
    }
    bool added = false;
    if (check_set_add(e, &seen, r.check, &added) != JITK_OK) {
      rec_free(e, &r);
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
      break;
    }
    if (!added) {
      rep.duplicates++;
      rec_free(e, &r);
      continue;
    }
    if (!version_noted && r.jitk != NULL && strcmp(r.jitk, JITK_VERSION_STRING) != 0) {
      version_noted = true;
      jk_log(e, JITK_LOG_WARN,
             "%s:%zu: recorded by jitk %s, and this is jitk %s: the kernels compile as recorded, "
             "but the new version may generate other sources for the same kernels; record the "
             "manifest again with this version",
             path, line_no, r.jitk, JITK_VERSION_STRING);
    }
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 64;
      jk_manifest_rec *g = jk_realloc(e, recs, nc * sizeof *g);
      if (g != NULL) recs = g;
      if (g == NULL) {
        rec_free(e, &r);
        st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
        break;
      }
      cap = nc;
    }
    recs[n++] = r;
  }
  jk_free(e, data);
  jk_free(e, seen.slot);
  rep.kernels = n;

  if (st == JITK_OK && n > 0) {
    uint64_t compiles0 = 0, remote0 = 0;
    counts(e, &compiles0, &remote0);
    jk_warm w = {e, path, recs, n, &opt};
    jitk_status *statuses = jk_calloc(e, n, sizeof *statuses);
    if (statuses == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == JITK_OK) {
      int threads = opt.threads > 0 ? opt.threads : e->compile_threads;
      jitk_status run = jk_parallel_run(e, n, threads, warm_one, &w, statuses,
                                        opt.progress ? warm_progress : NULL, &opt);
      (void)run; /* each failure was reported; the counts say how many */
      for (size_t i = 0; i < n; i++) {
        if (statuses[i] == JITK_OK) continue;
        rep.failed++;
        /* Running out of memory is not a kernel's fault: the call fails. */
        if (statuses[i] == JITK_ERR_OUT_OF_MEMORY && st == JITK_OK)
          st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "jitk_cache_warm: out of memory");
      }
    }
    jk_free(e, statuses);
    uint64_t compiles1 = 0, remote1 = 0;
    counts(e, &compiles1, &remote1);
    rep.compiled = (size_t)(compiles1 - compiles0);
    rep.remote_hits = (size_t)(remote1 - remote0);
    /* What the local tier keeps is written now, not at the engine's end. */
    pthread_mutex_lock(&e->cache.disk_lock);
    jk_store_flush(e);
    pthread_mutex_unlock(&e->cache.disk_lock);
  }
  for (size_t i = 0; i < n; i++) rec_free(e, &recs[i]);
  jk_free(e, recs);
  rep.seconds = mono_seconds() - t0;
  if (report != NULL) {
    size_t size = report->struct_size;
    rep.struct_size = size;
    memcpy(report, &rep, size);
  }
  return st;
}
