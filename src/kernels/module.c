/*
 * Raw modules: CUDA source compiled through the kernel cache, or images
 * from memory and files, loaded into the engine's context.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/image.h"
#include "kernels/kernels.h"

/* The generator name and version that go into raw modules' cache keys.
 * Raw source is compiled as given, so this changes only if jitk changes
 * how it compiles raw modules. */
#define JK_RAW_GENERATOR "raw/1"

static void module_free(jitk_module *m) {
  jitk_engine *e = m->engine;
  jitk_kernel *k = m->kernels;
  while (k != NULL) {
    jitk_kernel *next = k->next;
    jk_fn_facts_free(e, &k->f);
    jk_free(e, k->symbol);
    jk_free(e, k);
    k = next;
  }
  jk_entry_release(e, m->entry);
  jk_free(e, m->program_name);
  jk_free(e, m);
}

/* A handle on `x`, taking over the caller's reference. */
jitk_status jk_module_from_entry(jitk_engine *e, jk_entry *x, const char *program_name,
                                 jitk_module **out) {
  jitk_module *m = jk_calloc(e, 1, sizeof *m);
  char *name = jk_strdup(e, program_name);
  if (m == NULL || name == NULL) {
    jk_free(e, m);
    jk_free(e, name);
    jk_entry_release(e, x);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  m->engine = e;
  m->entry = x;
  m->program_name = name;
  m->image = x->image;
  m->image_size = x->image_size;
  m->kind = x->kind;
  m->cu = (CUmodule)x->cu;
  m->name_expressions = x->name_expressions;
  m->lowered = x->lowered;
  m->num_names = x->num_names;
  m->resources = x->resources;
  m->num_resources = x->num_resources;
  m->log = x->log ? x->log : "";
  pthread_mutex_lock(&e->lock);
  e->live_modules++;
  pthread_mutex_unlock(&e->lock);
  *out = m;
  return JITK_OK;
}

jitk_status jk_check_module_options(jitk_engine *e, const jitk_module_options *opts,
                                    const char *what) {
  if ((opts->num_options && !opts->options) ||
      (opts->num_name_expressions && !opts->name_expressions) ||
      (opts->num_headers && !opts->headers))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "%s: an options array is NULL but its count is not zero", what);
  for (size_t i = 0; i < opts->num_options; i++)
    if (opts->options[i] == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: option %zu is NULL", what, i);
  for (size_t i = 0; i < opts->num_name_expressions; i++)
    if (opts->name_expressions[i] == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: name expression %zu is NULL", what, i);
  for (size_t i = 0; i < opts->num_headers; i++)
    if (opts->headers[i].name == NULL || opts->headers[i].source == NULL)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: header %zu has a NULL name or source", what,
                     i);
  return JITK_OK;
}

void jk_program_input(const char *source, const jitk_module_options *opts, jk_compile_input *in) {
  memset(in, 0, sizeof *in);
  in->source = source;
  in->program_name = opts->program_name;
  in->options = opts->options;
  in->num_options = opts->num_options;
  in->name_expressions = opts->name_expressions;
  in->num_name_expressions = opts->num_name_expressions;
  in->headers = opts->headers;
  in->num_headers = opts->num_headers;
}

void jk_dump_source(jitk_engine *e, const char *what, const char *name, const char *src,
                    const char *const *options, size_t num_options,
                    const char *const *name_expressions, size_t num_name_expressions) {
  const char *v = getenv("JITK_DUMP_SOURCE");
  if (v == NULL || strcmp(v, "1") != 0) return;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "%s %s:\n", what, name);
  for (size_t i = 0; i < num_options; i++) jk_buf_printf(&b, "// NVRTC option: %s\n", options[i]);
  for (size_t i = 0; i < num_name_expressions; i++)
    jk_buf_printf(&b, "// NVRTC name expression: %s\n", name_expressions[i]);
  jk_buf_printf(&b, "%s", src);
  char *m = jk_buf_take(&b);
  if (m == NULL) return;
  if (e->base.log_fn != NULL)
    e->base.log_fn(e->base.log_user, JITK_LOG_INFO, m);
  else
    fprintf(stderr, "jitk: %s\n", m);
  jk_free(e, m);
}

jitk_status jitk_module_create(jitk_engine *e, const char *source, const jitk_module_options *opts,
                               jitk_module **out) {
  if (e == NULL || source == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create: %s is NULL",
                   e == NULL        ? "engine"
                   : source == NULL ? "source"
                                    : "module");
  jitk_module_options none;
  if (opts == NULL) {
    memset(&none, 0, sizeof none);
    opts = &none;
  }
  jitk_status st = jk_check_module_options(e, opts, "jitk_module_create");
  if (st != JITK_OK) return st;
  jk_compile_input in;
  jk_program_input(source, opts, &in);
  jk_dump_source(e, "source of module", opts->program_name ? opts->program_name : "module.cu",
                 source, opts->options, opts->num_options, opts->name_expressions,
                 opts->num_name_expressions);
  jk_entry *x = NULL;
  st = jk_cache_get(e, &in, JK_RAW_GENERATOR, &x);
  if (st != JITK_OK) return st;
  return jk_module_from_entry(e, x, opts->program_name ? opts->program_name : "module.cu", out);
}

jitk_status jitk_module_create_from_image(jitk_engine *e, jitk_image_kind kind, const void *image,
                                          size_t size, jitk_module **out) {
  if (e == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create_from_image: %s is NULL",
                   e == NULL ? "engine" : "module");
  jitk_image_kind found;
  jitk_status st = jk_image_check(e, kind, image, size, &found);
  if (st != JITK_OK) return st;
  /* Images are the caller's already: they are loaded, not cached. */
  jk_entry *x = NULL;
  st = jk_entry_from_image(e, found, image, size, &x);
  if (st != JITK_OK) return st;
  return jk_module_from_entry(e, x, "image", out);
}

jitk_status jk_read_file(jitk_engine *e, const char *path, jk_buf *b) {
  /* Opened without waiting for a FIFO's writer (jk_open_regular); only a
   * regular file is read, and no further than the size it had when
   * opened, so that a device (/dev/zero) or a file that keeps growing
   * cannot keep the call reading. */
  struct stat sb;
  int fd = jk_open_regular(path, &sb);
  if (fd == -1) return jk_fail(e, JITK_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  if (fd == -2)
    return jk_fail(e, JITK_ERR_IO, "cannot read %s: %s", path,
                   S_ISDIR(sb.st_mode) ? strerror(EISDIR) : "not a regular file");
  jk_buf_init(b, e);
  char chunk[65536];
  uint64_t left = (uint64_t)sb.st_size;
  int err = 0;
  while (left > 0 && !b->failed) {
    ssize_t n = read(fd, chunk, left < sizeof chunk ? (size_t)left : sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    jk_buf_append(b, chunk, (size_t)n);
    left -= (uint64_t)n;
  }
  close(fd);
  jitk_status st = JITK_OK;
  if (err != 0)
    st = jk_fail(e, JITK_ERR_IO, "cannot read %s: %s", path, strerror(err));
  else if (b->failed)
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
  else if (b->len == 0)
    st = jk_fail(e, JITK_ERR_INVALID_IMAGE, "%s is empty", path);
  if (st != JITK_OK) jk_buf_free(b);
  return st;
}

jitk_status jitk_module_create_from_file(jitk_engine *e, const char *path, jitk_module **out) {
  if (e == NULL || path == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create_from_file: %s is NULL",
                   e == NULL      ? "engine"
                   : path == NULL ? "path"
                                  : "module");
  jk_buf b;
  jitk_status st = jk_read_file(e, path, &b);
  if (st != JITK_OK) return st;
  st = jitk_module_create_from_image(e, JITK_IMAGE_AUTO, b.data, b.len, out);
  jk_buf_free(&b);
  if (st != JITK_OK) {
    /* Say which file the image problem came from. */
    char *msg = jk_strdup(e, jitk_errmsg(e));
    if (msg != NULL) {
      jk_fail(e, st, "%s: %s", path, msg);
      jk_free(e, msg);
    }
  }
  return st;
}

void jitk_module_destroy(jitk_module *m) {
  if (m == NULL) return;
  jitk_engine *e = m->engine;
  pthread_mutex_lock(&e->lock);
  e->live_modules--;
  pthread_mutex_unlock(&e->lock);
  module_free(m);
}

jitk_status jitk_module_image(const jitk_module *m, const void **image, size_t *size,
                              jitk_image_kind *kind) {
  if (m == NULL || image == NULL || size == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_image: an argument is NULL");
  *image = m->image;
  *size = m->image_size;
  if (kind != NULL) *kind = m->kind;
  return JITK_OK;
}

jitk_status jitk_module_lowered_name(const jitk_module *m, const char *expr, const char **lowered) {
  if (m == NULL || expr == NULL || lowered == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_lowered_name: an argument is NULL");
  for (size_t i = 0; i < m->num_names; i++)
    if (strcmp(m->name_expressions[i], expr) == 0) {
      *lowered = m->lowered[i];
      return JITK_OK;
    }
  return jk_fail(m->engine, JITK_ERR_NOT_FOUND,
                 "\"%s\" was not among the module's name expressions "
                 "(jitk_module_options.name_expressions)",
                 expr);
}

jitk_status jitk_module_resources(const jitk_module *m, const jitk_kernel_resources **resources,
                                  size_t *count) {
  if (m == NULL || resources == NULL || count == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_resources: an argument is NULL");
  *resources = m->resources;
  *count = m->num_resources;
  return JITK_OK;
}

typedef struct global_list {
  jk_buf *b;
  int n;
} global_list;

static void list_global(void *user, const char *name, size_t len) {
  global_list *l = user;
  jk_buf_puts(l->b, l->n++ ? ", " : "; it has ");
  jk_buf_append(l->b, name, len);
}

static jitk_status global_not_found(jitk_module *m, const char *name, const char *symbol) {
  jitk_engine *e = m->engine;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "no __device__ or __constant__ variable \"%s\"", name);
  if (strcmp(name, symbol) != 0) jk_buf_printf(&b, " (%s)", symbol);
  jk_buf_printf(&b, " in module %s", m->program_name);
  global_list l = {&b, 0};
  int n = jk_image_globals(m->kind, m->image, m->image_size, list_global, &l);
  if (n == 0) jk_buf_puts(&b, "; it has none");
  char *msg = jk_buf_take(&b);
  jitk_status st = jk_fail(e, JITK_ERR_NOT_FOUND, "%s", msg ? msg : "no such variable");
  jk_free(e, msg);
  return st;
}

jitk_status jitk_module_get_global(jitk_module *m, const char *name, void **ptr, size_t *bytes) {
  if (m == NULL || name == NULL || ptr == NULL || bytes == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_get_global: %s is NULL",
                   m == NULL      ? "module"
                   : name == NULL ? "name"
                   : ptr == NULL  ? "ptr"
                                  : "bytes");
  jitk_engine *e = m->engine;
  jitk_status st = jk_require_device(e, "jitk_module_get_global");
  if (st != JITK_OK) return st;
  const char *symbol = name;
  for (size_t i = 0; i < m->num_names; i++)
    if (strcmp(m->name_expressions[i], name) == 0) symbol = m->lowered[i];
  /* A name the image does not define fails here, not in the driver, whose
   * CUDA_ERROR_NOT_FOUND tools such as compute-sanitizer would report as
   * an error of the caller's program. */
  if (jk_image_has_global(m->kind, m->image, m->image_size, symbol) == 0)
    return global_not_found(m, name, symbol);
  CUcontext saved;
  st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  CUdeviceptr dptr = 0;
  size_t size = 0;
  CUresult r = jk_cu_module_global(e, m->cu, symbol, &dptr, &size);
  jk_ctx_leave(e, saved);
  if (r == CUDA_ERROR_NOT_FOUND) return global_not_found(m, name, symbol);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuModuleGetGlobal");
  *ptr = (void *)(uintptr_t)dptr;
  *bytes = size;
  return JITK_OK;
}

jitk_status jitk_module_log(const jitk_module *m, const char **log) {
  if (m == NULL || log == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_log: an argument is NULL");
  *log = m->log;
  return JITK_OK;
}
