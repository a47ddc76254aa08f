/*
 * Raw modules: CUDA source compiled by NVRTC, or images from memory and
 * files, loaded into the engine's context.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/image.h"
#include "kernels/kernels.h"

static jitk_module *module_new(jitk_engine *e) {
  jitk_module *m = jk_calloc(e, 1, sizeof *m);
  if (m != NULL) m->engine = e;
  return m;
}

static void module_free(jitk_module *m) {
  jitk_engine *e = m->engine;
  jitk_kernel *k = m->kernels;
  while (k != NULL) {
    jitk_kernel *next = k->next;
    jk_free(e, k->name);
    jk_free(e, k->symbol);
    jk_free(e, k->param_sizes);
    jk_free(e, k->signature);
    jk_free(e, k);
    k = next;
  }
  for (size_t i = 0; i < m->num_names; i++) {
    if (m->name_expressions) jk_free(e, m->name_expressions[i]);
    if (m->lowered) jk_free(e, m->lowered[i]);
  }
  jk_free(e, m->name_expressions);
  jk_free(e, m->lowered);
  jk_ptxas_free(e, m->resources, m->num_resources);
  jk_free(e, m->log);
  jk_free(e, m->image);
  jk_free(e, m->program_name);
  jk_free(e, m);
}

/* Loads m->image into the engine's context; a no-op on compile-only
 * engines, whose modules only carry the image. */
static jitk_status module_load(jitk_module *m) {
  jitk_engine *e = m->engine;
  if (!e->has_device) return JITK_OK;
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  /* The JIT's error log explains PTX the driver cannot compile. */
  char errlog[4096];
  errlog[0] = '\0';
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {errlog, (void *)(uintptr_t)sizeof errlog};
  CUresult r = e->drv.cuModuleLoadDataEx(&m->cu, m->image, 2, opts, vals);
  jk_ctx_leave(e, saved);
  if (r == CUDA_SUCCESS) return JITK_OK;
  m->cu = NULL;
  char desc[256];
  jk_driver_describe(&e->drv, r, desc, sizeof desc);
  jitk_status code = JITK_ERR_CUDA;
  if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
      r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    code = JITK_ERR_INVALID_IMAGE;
  else if (r == CUDA_ERROR_OUT_OF_MEMORY)
    code = JITK_ERR_DEVICE_OUT_OF_MEMORY;
  return jk_fail(e, code, "loading the %s into device %d failed: %s%s%s",
                 jk_image_kind_name(m->kind), e->ordinal, desc,
                 errlog[0] ? "\n" : "", errlog);
}

static void module_created(jitk_module *m) {
  jitk_engine *e = m->engine;
  pthread_mutex_lock(&e->lock);
  e->live_modules++;
  pthread_mutex_unlock(&e->lock);
}

jitk_status jitk_module_create(jitk_engine *e, const char *source,
                               const jitk_module_options *opts,
                               jitk_module **out) {
  if (e == NULL || source == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_module_create: %s is NULL",
                   e == NULL ? "engine" : source == NULL ? "source" : "module");
  jitk_module_options none;
  if (opts == NULL) {
    memset(&none, 0, sizeof none);
    opts = &none;
  }
  if ((opts->num_options && !opts->options) ||
      (opts->num_name_expressions && !opts->name_expressions) ||
      (opts->num_headers && !opts->headers))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_create: an options array is NULL but its "
                   "count is not zero");

  jk_compile_input in;
  memset(&in, 0, sizeof in);
  in.source = source;
  in.program_name = opts->program_name;
  in.options = opts->options;
  in.num_options = opts->num_options;
  in.name_expressions = opts->name_expressions;
  in.num_name_expressions = opts->num_name_expressions;
  in.headers = opts->headers;
  in.num_headers = opts->num_headers;

  jk_compile_output co;
  jitk_status st = jk_nvrtc_compile(e, &in, &co);
  if (st != JITK_OK) return st;

  jitk_module *m = module_new(e);
  if (m == NULL) {
    jk_compile_output_free(e, &co);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  m->image = co.image;
  m->image_size = co.image_size;
  m->kind = co.ptx ? JITK_IMAGE_PTX : JITK_IMAGE_CUBIN;
  m->log = co.log;
  m->lowered = co.lowered;
  m->num_names = co.num_lowered;
  co.image = NULL;
  co.log = NULL;
  co.lowered = NULL;
  co.num_lowered = 0;
  jk_compile_output_free(e, &co);

  st = JITK_OK;
  m->program_name = jk_strdup(e, opts->program_name ? opts->program_name : "module.cu");
  if (m->program_name == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  if (st == JITK_OK && m->num_names > 0) {
    m->name_expressions = jk_calloc(e, m->num_names, sizeof(char *));
    if (m->name_expressions == NULL)
      st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; st == JITK_OK && i < m->num_names; i++)
      if ((m->name_expressions[i] = jk_strdup(e, opts->name_expressions[i])) == NULL)
        st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (st == JITK_OK)
    st = jk_ptxas_parse(e, m->log, &m->resources, &m->num_resources);
  if (st == JITK_OK) st = module_load(m);
  if (st != JITK_OK) {
    module_free(m);
    return st;
  }
  module_created(m);
  *out = m;
  return JITK_OK;
}

jitk_status jitk_module_create_from_image(jitk_engine *e, jitk_image_kind kind,
                                          const void *image, size_t size,
                                          jitk_module **out) {
  if (e == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_create_from_image: %s is NULL",
                   e == NULL ? "engine" : "module");
  jitk_image_kind found;
  jitk_status st = jk_image_check(e, kind, image, size, &found);
  if (st != JITK_OK) return st;
  jitk_module *m = module_new(e);
  /* One byte more keeps PTX text NUL-terminated, as the driver needs. */
  void *copy = jk_malloc(e, size + 1);
  char *name = jk_strdup(e, "image");
  char *log = jk_strdup(e, "");
  if (m == NULL || copy == NULL || name == NULL || log == NULL) {
    jk_free(e, copy);
    jk_free(e, name);
    jk_free(e, log);
    if (m) module_free(m);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(copy, image, size);
  ((char *)copy)[size] = '\0';
  m->image = copy;
  m->image_size = size;
  m->kind = found;
  m->program_name = name;
  m->log = log;
  st = module_load(m);
  if (st != JITK_OK) {
    module_free(m);
    return st;
  }
  module_created(m);
  *out = m;
  return JITK_OK;
}

jitk_status jitk_module_create_from_file(jitk_engine *e, const char *path,
                                         jitk_module **out) {
  if (e == NULL || path == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_create_from_file: %s is NULL",
                   e == NULL ? "engine" : path == NULL ? "path" : "module");
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return jk_fail(e, JITK_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  jk_buf b;
  jk_buf_init(&b, e);
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) jk_buf_append(&b, chunk, n);
  bool read_error = ferror(f) != 0;
  int err = errno;
  fclose(f);
  if (read_error) {
    jk_buf_free(&b);
    return jk_fail(e, JITK_ERR_IO, "cannot read %s: %s", path, strerror(err));
  }
  if (b.failed) {
    jk_buf_free(&b);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory reading %s", path);
  }
  if (b.len == 0) {
    jk_buf_free(&b);
    return jk_fail(e, JITK_ERR_INVALID_IMAGE, "%s is empty", path);
  }
  jitk_status st =
      jitk_module_create_from_image(e, JITK_IMAGE_AUTO, b.data, b.len, out);
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
  if (m->cu != NULL) {
    CUcontext saved;
    if (jk_ctx_enter(e, &saved) == JITK_OK) {
      CUresult r = e->drv.cuModuleUnload(m->cu);
      if (r != CUDA_SUCCESS) {
        char desc[256];
        jk_driver_describe(&e->drv, r, desc, sizeof desc);
        jk_log(e, JITK_LOG_WARN, "cuModuleUnload failed: %s", desc);
      }
      jk_ctx_leave(e, saved);
    }
  }
  pthread_mutex_lock(&e->lock);
  e->live_modules--;
  pthread_mutex_unlock(&e->lock);
  module_free(m);
}

jitk_status jitk_module_image(const jitk_module *m, const void **image,
                              size_t *size, jitk_image_kind *kind) {
  if (m == NULL || image == NULL || size == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_image: an argument is NULL");
  *image = m->image;
  *size = m->image_size;
  if (kind != NULL) *kind = m->kind;
  return JITK_OK;
}

jitk_status jitk_module_lowered_name(const jitk_module *m, const char *expr,
                                     const char **lowered) {
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

jitk_status jitk_module_resources(const jitk_module *m,
                                  const jitk_kernel_resources **resources,
                                  size_t *count) {
  if (m == NULL || resources == NULL || count == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_resources: an argument is NULL");
  *resources = m->resources;
  *count = m->num_resources;
  return JITK_OK;
}

jitk_status jitk_module_log(const jitk_module *m, const char **log) {
  if (m == NULL || log == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_log: an argument is NULL");
  *log = m->log ? m->log : "";
  return JITK_OK;
}
