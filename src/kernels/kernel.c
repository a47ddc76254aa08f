/*
 * Kernels of a module: lookup by name or name expression, attributes,
 * signatures, shared-memory limits and occupancy.
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "driver/image.h"
#include "kernels/kernels.h"

/* The most parameters jitk reads per kernel; the driver's parameter space
 * (32 KiB) cannot hold more non-empty ones. */
#define JK_MAX_PARAMS 8192

static const char *resolve_symbol(const jitk_module *m, const char *name) {
  for (size_t i = 0; i < m->num_names; i++)
    if (strcmp(m->name_expressions[i], name) == 0) return m->lowered[i];
  return name;
}

typedef struct name_list {
  const jitk_module *m;
  jk_buf *b;
  int n;
} name_list;

/* Appends one kernel of the module to the message, with the name
 * expression it came from when there is one. */
static void list_kernel(void *user, const char *name, size_t len) {
  name_list *l = user;
  jk_buf_puts(l->b, l->n++ ? ", " : "; it has ");
  jk_buf_append(l->b, name, len);
  for (size_t i = 0; i < l->m->num_names; i++)
    if (strlen(l->m->lowered[i]) == len && memcmp(l->m->lowered[i], name, len) == 0)
      jk_buf_printf(l->b, " (%s)", l->m->name_expressions[i]);
}

static jitk_status not_found(jitk_module *m, const char *name) {
  jitk_engine *e = m->engine;
  jk_buf b;
  jk_buf_init(&b, e);
  jk_buf_printf(&b, "no kernel \"%s\" in module %s", name, m->program_name);
  name_list l = {m, &b, 0};
  jk_image_kernels(m->kind, m->image, m->image_size, list_kernel, &l);
  if (m->num_names == 0 && strchr(name, '<') != NULL)
    jk_buf_puts(&b,
                ". A templated kernel needs its name expression given at creation "
                "(jitk_module_options.name_expressions)");
  char *msg = jk_buf_take(&b);
  jitk_status st = jk_fail(e, JITK_ERR_NOT_FOUND, "%s", msg ? msg : "no such kernel");
  jk_free(e, msg);
  return st;
}

/*
 * The number and sizes of the kernel's parameters, which every launch
 * checks its arguments against. Cubins and PTX describe them, so they are
 * read from the image (a fatbin's cubin); the driver is asked only when the
 * image cannot tell (a fatbin of compressed or PTX entries), because
 * cuFuncGetParamInfo can only be probed past the last parameter, and the
 * CUDA_ERROR_INVALID_VALUE that ends the probe shows up in tools such as
 * compute-sanitizer as an error in the user's program.
 */
static jitk_status read_params(jitk_engine *e, jitk_kernel *k) {
  const jitk_module *m = k->module;
  uint32_t *sizes = jk_calloc(e, JK_MAX_PARAMS, sizeof *sizes);
  if (sizes == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  int n = -1;
  const void *cubin = NULL;
  size_t cubin_size = 0;
  if (m->kind == JITK_IMAGE_CUBIN) {
    cubin = m->image;
    cubin_size = m->image_size;
  } else if (m->kind == JITK_IMAGE_FATBIN) {
    jk_fatbin_cubin(m->image, m->image_size, e->info.cc_major * 10 + e->info.cc_minor, &cubin,
                    &cubin_size);
  }
  if (cubin != NULL)
    n = jk_cubin_param_sizes(cubin, cubin_size, k->symbol, sizes, JK_MAX_PARAMS);
  else if (m->kind == JITK_IMAGE_PTX)
    n = jk_ptx_param_sizes(m->image, k->symbol, sizes, JK_MAX_PARAMS);
  if (n < 0 && e->drv.cuFuncGetParamInfo != NULL) {
    size_t off, size;
    n = 0;
    while (n < JK_MAX_PARAMS &&
           e->drv.cuFuncGetParamInfo(k->fn, (size_t)n, &off, &size) == CUDA_SUCCESS)
      sizes[n++] = (uint32_t)size;
  }
  k->num_params = n < 0 ? -1 : n;
  if (n > 0) {
    k->param_sizes = jk_realloc(e, sizes, (size_t)n * sizeof *sizes);
    if (k->param_sizes == NULL) {
      jk_free(e, sizes);
      return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    }
  } else {
    jk_free(e, sizes);
  }
  return JITK_OK;
}

/* Reads what launches check against; called with the context current. */
static jitk_status read_kernel_facts(jitk_engine *e, jitk_kernel *k) {
  int v = 0;
  CUresult r = e->drv.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncGetAttribute");
  k->max_threads = v;
  r = e->drv.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncGetAttribute");
  k->static_shared = (size_t)v;
  r = e->drv.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->fn);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncGetAttribute");
  k->max_dynamic_shared = (size_t)v;

  return read_params(e, k);
}

jitk_status jitk_module_get_kernel(jitk_module *m, const char *name, jitk_kernel **out) {
  if (m == NULL || name == NULL || out == NULL)
    return jk_fail(m ? m->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_module_get_kernel: %s is NULL",
                   m == NULL      ? "module"
                   : name == NULL ? "name"
                                  : "kernel");
  jitk_engine *e = m->engine;
  jitk_status st = jk_require_device(e, "jitk_module_get_kernel");
  if (st != JITK_OK) return st;

  pthread_mutex_lock(&e->lock);
  for (jitk_kernel *k = m->kernels; k != NULL; k = k->next)
    if (strcmp(k->name, name) == 0) {
      pthread_mutex_unlock(&e->lock);
      *out = k;
      return JITK_OK;
    }

  const char *symbol = resolve_symbol(m, name);
  jitk_kernel *k = jk_calloc(e, 1, sizeof *k);
  CUcontext saved = NULL;
  bool entered = false;
  if (k == NULL) {
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    goto fail;
  }
  k->engine = e;
  k->module = m;
  k->name = jk_strdup(e, name);
  k->symbol = jk_strdup(e, symbol);
  if (k->name == NULL || k->symbol == NULL) {
    st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    goto fail;
  }
  /* Names the image does not define fail here, not in the driver, whose
   * CUDA_ERROR_NOT_FOUND tools such as compute-sanitizer would report. */
  if (jk_image_has_kernel(m->kind, m->image, m->image_size, symbol) == 0) {
    st = not_found(m, name);
    goto fail;
  }
  st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) goto fail;
  entered = true;
  CUresult r = e->drv.cuModuleGetFunction(&k->fn, m->cu, symbol);
  if (r == CUDA_ERROR_NOT_FOUND) {
    st = not_found(m, name);
    goto fail;
  }
  if (r != CUDA_SUCCESS) {
    st = jk_cuda_fail(e, r, "cuModuleGetFunction");
    goto fail;
  }
  st = read_kernel_facts(e, k);
  if (st != JITK_OK) goto fail;
  jk_ctx_leave(e, saved);
  k->next = m->kernels;
  m->kernels = k;
  pthread_mutex_unlock(&e->lock);
  *out = k;
  return JITK_OK;

fail:
  if (entered) jk_ctx_leave(e, saved);
  pthread_mutex_unlock(&e->lock);
  if (k != NULL) {
    jk_free(e, k->name);
    jk_free(e, k->symbol);
    jk_free(e, k->param_sizes);
    jk_free(e, k);
  }
  return st;
}

jitk_status jitk_kernel_set_signature(jitk_kernel *k, const char *signature) {
  if (k == NULL || signature == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_set_signature: %s is NULL", k == NULL ? "kernel" : "signature");
  jitk_engine *e = k->engine;
  jk_param *params = NULL;
  int n = 0;
  jitk_status st = jk_signature_parse(e, signature, &params, &n);
  if (st != JITK_OK) return st;
  if (k->num_params >= 0 && n != k->num_params) {
    jk_free(e, params);
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT,
                   "the signature lists %d parameter%s but kernel %s has %d", n, n == 1 ? "" : "s",
                   k->name, k->num_params);
  }
  /* Each declared parameter must also have the compiled size. */
  for (int i = 0; k->num_params >= 0 && i < n; i++) {
    size_t want;
    if (params[i].kind == JITK_ARG_SCALAR)
      want = jk_dtype(params[i].dtype)->size;
    else if (params[i].kind == JITK_ARG_POINTER)
      want = sizeof(void *);
    else
      want = 8 + 16 * (size_t)params[i].ndim;
    if (want != k->param_sizes[i]) {
      char d[64];
      jk_param_describe(&params[i], d, sizeof d);
      jk_free(e, params);
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "the signature's parameter %d (%s, %zu bytes) does not "
                     "match kernel %s, whose parameter %d is %u bytes",
                     i, d, want, k->name, i, (unsigned)k->param_sizes[i]);
    }
  }
  jk_free(e, k->signature);
  k->signature = params;
  k->num_signature = n;
  return JITK_OK;
}

jitk_status jitk_kernel_get_attributes(const jitk_kernel *k, jitk_kernel_attributes *a) {
  if (k == NULL || a == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_get_attributes: %s is NULL", k == NULL ? "kernel" : "attributes");
  jitk_engine *e = k->engine;
  static const CUfunction_attribute ids[] = {
      CU_FUNC_ATTRIBUTE_NUM_REGS, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
      CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, CU_FUNC_ATTRIBUTE_PTX_VERSION,
      CU_FUNC_ATTRIBUTE_BINARY_VERSION};
  int v[5];
  for (int i = 0; i < 5; i++) {
    CUresult r = e->drv.cuFuncGetAttribute(&v[i], ids[i], k->fn);
    if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncGetAttribute");
  }
  memset(a, 0, sizeof *a);
  a->registers = v[0];
  a->constant_bytes = (size_t)v[1];
  a->local_bytes = (size_t)v[2];
  a->ptx_version = v[3];
  a->binary_version = v[4];
  a->max_threads_per_block = k->max_threads;
  a->static_shared_bytes = k->static_shared;
  a->max_dynamic_shared_bytes = k->max_dynamic_shared;
  a->num_params = k->num_params;
  return JITK_OK;
}

jitk_status jitk_kernel_param_sizes(const jitk_kernel *k, const uint32_t **sizes, int *count) {
  if (k == NULL || sizes == NULL || count == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_param_sizes: %s is NULL",
                   k == NULL       ? "kernel"
                   : sizes == NULL ? "sizes"
                                   : "count");
  *sizes = k->num_params >= 0 ? k->param_sizes : NULL;
  *count = k->num_params;
  return JITK_OK;
}

jitk_status jitk_kernel_set_max_dynamic_shared(jitk_kernel *k, size_t bytes) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_set_max_dynamic_shared: kernel is NULL");
  jitk_engine *e = k->engine;
  size_t limit = e->info.shared_per_block_optin;
  if (k->static_shared > limit || bytes > limit - k->static_shared)
    return jk_fail(e, JITK_ERR_SHARED_MEMORY,
                   "kernel %s: %zu bytes of dynamic shared memory plus %zu "
                   "static exceed the device's %zu bytes per block",
                   k->name, bytes, k->static_shared, limit);
  CUresult r =
      e->drv.cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncSetAttribute");
  k->max_dynamic_shared = bytes;
  return JITK_OK;
}

jitk_status jitk_kernel_suggest_block_size(const jitk_kernel *k, size_t dynamic_shared,
                                           int *block_size, int *min_grid) {
  if (k == NULL || block_size == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_suggest_block_size: %s is NULL",
                   k == NULL ? "kernel" : "block_size");
  jitk_engine *e = k->engine;
  int grid = 0, block = 0;
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  CUresult r =
      e->drv.cuOccupancyMaxPotentialBlockSize(&grid, &block, k->fn, NULL, dynamic_shared, 0);
  jk_ctx_leave(e, saved);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuOccupancyMaxPotentialBlockSize");
  *block_size = block;
  if (min_grid != NULL) *min_grid = grid;
  return JITK_OK;
}

jitk_status jitk_kernel_active_blocks(const jitk_kernel *k, int block_size, size_t dynamic_shared,
                                      int *blocks) {
  if (k == NULL || blocks == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_active_blocks: %s is NULL", k == NULL ? "kernel" : "blocks_per_sm");
  jitk_engine *e = k->engine;
  if (block_size <= 0 || block_size > k->max_threads)
    return jk_fail(e, JITK_ERR_LAUNCH_CONFIG, "block size %d is outside 1..%d for kernel %s",
                   block_size, k->max_threads, k->name);
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  int n = 0;
  CUresult r =
      e->drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, block_size, dynamic_shared);
  jk_ctx_leave(e, saved);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  *blocks = n;
  return JITK_OK;
}
