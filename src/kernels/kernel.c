/*
 * Kernels of a module: lookup by name or name expression, attributes,
 * signatures, shared-memory limits and occupancy.
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "driver/image.h"
#include "kernels/kernels.h"
#include "launch/launch.h"

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
    if (strcmp(k->f.name, name) == 0) {
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
  k->symbol = jk_strdup(e, symbol);
  if (k->symbol == NULL) {
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
  CUfunction fn = NULL;
  CUresult r = jk_cu_get_function(e, m->cu, symbol, &fn);
  if (r == CUDA_ERROR_NOT_FOUND) {
    st = not_found(m, name);
    goto fail;
  }
  if (r != CUDA_SUCCESS) {
    st = jk_cuda_fail(e, r, "cuModuleGetFunction");
    goto fail;
  }
  jk_fn_source src = {m->kind, m->image, m->image_size, k->symbol};
  st = jk_fn_read_facts(e, fn, name, &src, &k->f);
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
    jk_free(e, k->symbol);
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
  if (k->f.num_params >= 0 && n != k->f.num_params) {
    jk_free(e, params);
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT,
                   "the signature lists %d parameter%s but kernel %s has %d", n, n == 1 ? "" : "s",
                   k->f.name, k->f.num_params);
  }
  /* Each declared parameter must also have the compiled size. */
  for (int i = 0; k->f.num_params >= 0 && i < n; i++) {
    size_t want;
    if (params[i].kind == JITK_ARG_SCALAR)
      want = jk_dtype(params[i].dtype)->size;
    else if (params[i].kind == JITK_ARG_POINTER)
      want = sizeof(void *);
    else
      want = 8 + 16 * (size_t)params[i].ndim;
    if (want != k->f.param_sizes[i]) {
      char d[64];
      jk_param_describe(&params[i], d, sizeof d);
      jk_free(e, params);
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "the signature's parameter %d (%s, %zu bytes) does not "
                     "match kernel %s, whose parameter %d is %u bytes",
                     i, d, want, k->f.name, i, (unsigned)k->f.param_sizes[i]);
    }
  }
  jk_free(e, k->f.signature);
  k->f.signature = params;
  k->f.num_signature = n;
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
    CUresult r = jk_cu_func_attribute(e, k->f.fn, ids[i], &v[i]);
    if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncGetAttribute");
  }
  memset(a, 0, sizeof *a);
  a->registers = v[0];
  a->constant_bytes = (size_t)v[1];
  a->local_bytes = (size_t)v[2];
  a->ptx_version = v[3];
  a->binary_version = v[4];
  a->max_threads_per_block = k->f.max_threads;
  a->static_shared_bytes = k->f.static_shared;
  /* Launches may raise it meanwhile (check_config). */
  a->max_dynamic_shared_bytes = __atomic_load_n(&k->f.max_dynamic_shared, __ATOMIC_RELAXED);
  a->num_params = k->f.num_params;
  return JITK_OK;
}

_Static_assert(JITK_KERNEL_CLUSTER_SCHEDULING_POLICY_PREFERENCE ==
                       (int)CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE &&
                   JITK_KERNEL_MAX_DYNAMIC_SHARED_SIZE_BYTES ==
                       (int)CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
                   JITK_PREFER_EQUAL == (int)CU_FUNC_CACHE_PREFER_EQUAL,
               "jitk's numbers are the driver's");

static jitk_status check_attribute(const jitk_kernel *k, jitk_kernel_attribute a,
                                   const char *what) {
  if ((int)a < 0 || (int)a > JITK_KERNEL_CLUSTER_SCHEDULING_POLICY_PREFERENCE)
    return jk_fail(k->engine, JITK_ERR_INVALID_ARGUMENT,
                   "%s: kernel %s: %d is not a jitk_kernel_attribute (0 to %d)", what, k->f.name,
                   (int)a, (int)JITK_KERNEL_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  return JITK_OK;
}

jitk_status jitk_kernel_get_attribute(const jitk_kernel *k, jitk_kernel_attribute a, int *value) {
  if (k == NULL || value == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_get_attribute: %s is NULL", k == NULL ? "kernel" : "value");
  jitk_status st = check_attribute(k, a, "jitk_kernel_get_attribute");
  if (st != JITK_OK) return st;
  jitk_engine *e = k->engine;
  CUresult r = jk_cu_func_attribute(e, k->f.fn, (CUfunction_attribute)a, value);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncGetAttribute");
  return JITK_OK;
}

jitk_status jitk_kernel_set_attribute(jitk_kernel *k, jitk_kernel_attribute a, int value) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_kernel_set_attribute: kernel is NULL");
  jitk_status st = check_attribute(k, a, "jitk_kernel_set_attribute");
  if (st != JITK_OK) return st;
  jitk_engine *e = k->engine;
  const char *bad = NULL;
  switch (a) {
    case JITK_KERNEL_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0) bad = "a size is not negative";
      break;
    case JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) bad = "the carveout is -1 (the default) or 0 to 100 percent";
      break;
    case JITK_KERNEL_REQUIRED_CLUSTER_WIDTH:
    case JITK_KERNEL_REQUIRED_CLUSTER_HEIGHT:
    case JITK_KERNEL_REQUIRED_CLUSTER_DEPTH:
      if (value < 0) bad = "a cluster dimension is not negative";
      break;
    case JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      if (value != 0 && value != 1) bad = "it is 0 or 1";
      break;
    case JITK_KERNEL_CLUSTER_SCHEDULING_POLICY_PREFERENCE: break;
    default:
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "jitk_kernel_set_attribute: kernel %s: attribute %d is read-only; the "
                     "settable ones are 8, 9 and 11 to 15",
                     k->f.name, (int)a);
  }
  if (bad != NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_set_attribute: kernel %s: %d for attribute %d: %s", k->f.name,
                   value, (int)a, bad);
  if (a == JITK_KERNEL_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return jk_fn_set_max_dynamic_shared(e, &k->f, (size_t)value, false);
  if (a == JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)
    return jk_fn_set_non_portable_clusters(e, &k->f, value == 1);
  CUresult r = jk_cu_set_func_attribute(e, k->f.fn, (CUfunction_attribute)a, value);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncSetAttribute");
  return JITK_OK;
}

jitk_status jitk_kernel_set_cache_preference(jitk_kernel *k, jitk_cache_preference p) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_set_cache_preference: kernel is NULL");
  jitk_engine *e = k->engine;
  if ((int)p < 0 || (int)p > JITK_PREFER_EQUAL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_set_cache_preference: kernel %s: %d is not a "
                   "jitk_cache_preference (0 to 3)",
                   k->f.name, (int)p);
  if (!jk_cu_has_cache_config(e))
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "jitk_kernel_set_cache_preference: this CUDA driver lacks cuFuncSetCacheConfig");
  CUresult r = jk_cu_set_cache_config(e, k->f.fn, (CUfunc_cache)p);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncSetCacheConfig");
  return JITK_OK;
}

jitk_status jitk_kernel_param_sizes(const jitk_kernel *k, const uint32_t **sizes, int *count) {
  if (k == NULL || sizes == NULL || count == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_param_sizes: %s is NULL",
                   k == NULL       ? "kernel"
                   : sizes == NULL ? "sizes"
                                   : "count");
  *sizes = k->f.num_params >= 0 ? k->f.param_sizes : NULL;
  *count = k->f.num_params;
  return JITK_OK;
}

jitk_status jitk_kernel_set_max_dynamic_shared(jitk_kernel *k, size_t bytes) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_set_max_dynamic_shared: kernel is NULL");
  return jk_fn_set_max_dynamic_shared(k->engine, &k->f, bytes, false);
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
  CUresult r = jk_cu_occupancy_block_size(e, k->f.fn, dynamic_shared, &grid, &block);
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
  if (block_size <= 0 || block_size > k->f.max_threads)
    return jk_fail(e, JITK_ERR_LAUNCH_CONFIG, "block size %d is outside 1..%d for kernel %s",
                   block_size, k->f.max_threads, k->f.name);
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  int n = 0;
  CUresult r = jk_cu_occupancy_blocks(e, k->f.fn, block_size, dynamic_shared, &n);
  jk_ctx_leave(e, saved);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  *blocks = n;
  return JITK_OK;
}

jitk_status jitk_kernel_launch(jitk_kernel *k, jitk_dim3 grid, jitk_dim3 block, size_t shared,
                               jitk_stream stream, const jitk_arg *args, size_t num_args) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_kernel_launch: kernel is NULL");
  return jk_launch_args(k->engine, &k->f, grid, block, shared, stream, args, num_args, NULL,
                        "jitk_kernel_launch");
}

jitk_status jitk_kernel_launch_config_init(jitk_kernel_launch_config *config) {
  if (config == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_kernel_launch_config_init: config is NULL");
  memset(config, 0, sizeof *config);
  config->struct_size = sizeof *config;
  return JITK_OK;
}

jitk_status jitk_kernel_launch_ex(jitk_kernel *k, jitk_dim3 grid, jitk_dim3 block, size_t shared,
                                  jitk_stream stream, const jitk_arg *args, size_t num_args,
                                  const jitk_kernel_launch_config *config) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_kernel_launch_ex: kernel is NULL");
  jk_launch_how how = {false, {0, 0, 0}, false};
  if (config != NULL) {
    /* A caller built against an older header passes a smaller struct: the
     * fields it lacks keep their defaults. */
    static const size_t forms[] = {
        offsetof(jitk_kernel_launch_config, cooperative) + sizeof(int),
        offsetof(jitk_kernel_launch_config, cluster) + sizeof(jitk_dim3),
        offsetof(jitk_kernel_launch_config, programmatic_dependent_launch) + sizeof(int)};
    size_t n = jk_struct_form(config->struct_size, forms, sizeof forms / sizeof forms[0]);
    if (JK_UNLIKELY(n == 0))
      return jk_fail(k->engine, JITK_ERR_INVALID_ARGUMENT,
                     "jitk_kernel_launch_ex: config->struct_size is %zu; call "
                     "jitk_kernel_launch_config_init before setting fields",
                     config->struct_size);
    jitk_kernel_launch_config c;
    jitk_kernel_launch_config_init(&c);
    memcpy(&c, config, n);
    how.cooperative = c.cooperative != 0;
    how.cluster[0] = c.cluster.x;
    how.cluster[1] = c.cluster.y;
    how.cluster[2] = c.cluster.z;
    how.pdl = c.programmatic_dependent_launch != 0;
  }
  return jk_launch_args(k->engine, &k->f, grid, block, shared, stream, args, num_args, &how,
                        "jitk_kernel_launch_ex");
}
