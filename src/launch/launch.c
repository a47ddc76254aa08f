/*
 * Launching (launch.h): the steps of every kind's launches, and the
 * argument checks and packing of raw kernels' jitk_arg lists.
 *
 * This is the hot path. It allocates nothing for ordinary launches (the
 * argument pointers and descriptors live on the stack), takes no lock and
 * touches the driver twice: cuCtxGetCurrent and cuLaunchKernel. Every
 * check is a comparison against facts read once when the function was
 * loaded, and the error branches are marked unlikely. A cooperative
 * launch adds one occupancy query, which depends on the block and shared
 * memory it is given.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "driver/image.h"
#include "launch/launch.h"

/* Arguments beyond this many take a heap path; real kernels have far
 * fewer. */
#define JK_STACK_ARGS 32
/* Bytes of descriptor storage on the stack: 8 descriptors of rank 4. */
#define JK_STACK_DESC 640

static const char *kind_name(jitk_arg_kind k) {
  switch (k) {
    case JITK_ARG_SCALAR: return "scalar";
    case JITK_ARG_POINTER: return "pointer";
    case JITK_ARG_ARRAY: return "array descriptor";
    default: return "unknown kind";
  }
}

/* Describes an argument for messages: "a float64 scalar (8 bytes)". */
static void describe_arg(const jitk_arg *a, jitk_dtype dtype, int ndim, size_t size, char *out,
                         size_t n) {
  const jitk_dtype_info *d = jk_dtype(dtype);
  const char *dn = d ? d->name : "untyped";
  if (a->kind == JITK_ARG_ARRAY)
    snprintf(out, n, "a %s[%d] array descriptor (%zu bytes)", dn, ndim, size);
  else
    snprintf(out, n, "a %s %s (%zu bytes)", dn, kind_name(a->kind), size);
}

static jitk_status check_signature(jitk_engine *e, const jk_fn_facts *k, int i, const jitk_arg *a,
                                   jitk_dtype dtype, int ndim) {
  const jk_param *p = &k->signature[i];
  bool ok = p->kind == a->kind;
  if (ok && p->kind == JITK_ARG_ARRAY)
    ok = p->ndim == ndim && p->dtype == dtype;
  else if (ok && p->kind == JITK_ARG_POINTER)
    ok = p->dtype == JITK_DTYPE_NONE || dtype == JITK_DTYPE_NONE || p->dtype == dtype;
  else if (ok)
    ok = p->dtype == dtype;
  if (ok) return JITK_OK;
  char want[64], got[128];
  jk_param_describe(p, want, sizeof want);
  describe_arg(a, dtype, ndim, 0, got, sizeof got);
  /* Drop the " (0 bytes)" the size-less description carries. */
  char *paren = strstr(got, " (");
  if (paren) *paren = '\0';
  return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                 "kernel %s, argument %d: got %s, but its signature says %s", k->name, i, got,
                 want);
}

static void jk_fn_refresh(jitk_engine *e, jk_fn_facts *f);

static jitk_status check_config(jitk_engine *e, jk_fn_facts *k, jitk_dim3 grid, jitk_dim3 block,
                                size_t shared, const jk_launch_how *how) {
  /* Facts another handle of the same function may have changed. */
  if (JK_UNLIKELY(__atomic_load_n(&k->attr_epoch, __ATOMIC_RELAXED) !=
                  __atomic_load_n(&e->attr_epoch, __ATOMIC_ACQUIRE)))
    jk_fn_refresh(e, k);
  const jitk_device_info *d = &e->info;
  unsigned g[3] = {grid.x, grid.y, grid.z}, b[3] = {block.x, block.y, block.z};
  for (int i = 0; i < 3; i++) {
    if (g[i] == 0 || b[i] == 0)
      return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                     "kernel %s: grid (%u, %u, %u) and block (%u, %u, %u) must "
                     "have no zero dimension",
                     k->name, g[0], g[1], g[2], b[0], b[1], b[2]);
    if (g[i] > (unsigned)d->max_grid[i])
      return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                     "kernel %s: grid dimension %c is %u; the device allows %d", k->name, "xyz"[i],
                     g[i], d -> max_grid[i]);
    if (b[i] > (unsigned)d->max_block[i])
      return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                     "kernel %s: block dimension %c is %u; the device allows %d", k->name, "xyz"[i],
                     b[i], d -> max_block[i]);
  }
  unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
  if (threads > (unsigned long long)k->max_threads)
    return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                   "kernel %s: a block of %llu threads; this kernel allows at most %d "
                   "(its registers and launch bounds decide)",
                   k->name, threads, k->max_threads);
  if (how != NULL && (how->cluster[0] | how->cluster[1] | how->cluster[2]) != 0) {
    const unsigned *c = how->cluster;
    if (c[0] == 0 || c[1] == 0 || c[2] == 0)
      return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                     "kernel %s: cluster (%u, %u, %u) has a zero dimension; leave all three 0 "
                     "for no clusters",
                     k->name, c[0], c[1], c[2]);
    if (d->cc_major < 9)
      return jk_fail(e, JITK_ERR_UNSUPPORTED,
                     "kernel %s: thread-block clusters need compute capability 9.0 or newer; "
                     "device %d (%s) is %d.%d",
                     k->name, e->ordinal, d->name, d->cc_major, d->cc_minor);
    for (int i = 0; i < 3; i++)
      if (g[i] % c[i] != 0)
        return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                       "kernel %s: grid (%u, %u, %u) is not a whole number of clusters (%u, %u, "
                       "%u): dimension %c",
                       k->name, g[0], g[1], g[2], c[0], c[1], c[2], "xyz"[i]);
    unsigned long long size = (unsigned long long)c[0] * c[1] * c[2];
    bool wide = __atomic_load_n(&k->non_portable_clusters, __ATOMIC_RELAXED);
    unsigned long long most = wide ? 16 : 8;
    if (size > most)
      return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                     "kernel %s: a cluster of %llu blocks (%u, %u, %u); at most %llu%s", k->name,
                     size, c[0], c[1], c[2], most,
                     wide ? ""
                          : ", the size every device with clusters supports (set "
                            "JITK_KERNEL_NON_PORTABLE_CLUSTER_SIZE_ALLOWED for up to 16)");
  }
  /* More dynamic shared memory than the function's limit raises the
   * limit, as far as the device allows (above 48 KiB a kernel must opt
   * in). The limit is read here without a lock, and raised under one,
   * where it is read again: two launches raising it at once must not
   * leave the lower of their sizes set after the larger one's launch
   * has passed this check. */
  if (shared > __atomic_load_n(&k->max_dynamic_shared, __ATOMIC_RELAXED)) {
    jitk_status st = jk_fn_set_max_dynamic_shared(e, k, shared, true);
    if (st != JITK_OK) return st;
  }
  return JITK_OK;
}

/* Where a pointer argument's value comes from, and its element type. */
static jitk_status pointer_value(jitk_engine *e, const jk_fn_facts *k, int i, const jitk_arg *a,
                                 void **value, jitk_dtype *dtype) {
  if (a->tensor == NULL) {
    *value = a->value.ptr;
    *dtype = a->dtype;
    return JITK_OK;
  }
  const DLTensor *t = a->tensor;
  int dt = (int)t->device.device_type;
  /* A pointer on another device than the engine's faults in the kernel
   * (or reads through a peer mapping that was never made): refused here,
   * where the check is one comparison. */
  if (JK_UNLIKELY((dt != kDLCUDA && dt != kDLCUDAManaged && dt != kDLCUDAHost) ||
                  (dt != kDLCUDAHost && !jk_device_usable(e, t->device.device_id)))) {
    char what[64];
    snprintf(what, sizeof what, "kernel %s, argument %d", k->name, i);
    jk_view v;
    return jk_view_from_tensor(e, t, what, &v);
  }
  *value = (char *)t->data + t->byte_offset;
  *dtype = jk_dtype_from_dl(t->dtype);
  return JITK_OK;
}

/* Writes a jitk::array<T, N> (pointer, shape[N], strides[N]) at `dst`. */
static jitk_status pack_array(jitk_engine *e, const jk_fn_facts *k, int i, const jitk_arg *a,
                              unsigned char *dst, jitk_dtype *dtype, int *ndim) {
  char what[64];
  snprintf(what, sizeof what, "kernel %s, argument %d", k->name, i);
  jk_view v;
  jitk_status st = jk_view_from_tensor(e, a->tensor, what, &v);
  if (st != JITK_OK) return st;
  void *p = v.data;
  memcpy(dst, &p, sizeof p);
  memcpy(dst + 8, v.shape, 8 * (size_t)v.ndim);
  memcpy(dst + 8 + 8 * (size_t)v.ndim, v.strides, 8 * (size_t)v.ndim);
  *dtype = v.dtype;
  *ndim = v.ndim;
  return JITK_OK;
}

/* A cooperative grid runs all its blocks at once, which only works when
 * they all fit; the driver would refuse a larger one with a bare
 * CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE. With the context current. */
static jitk_status check_coresident(jitk_engine *e, const jk_launch_op *op) {
  int per_sm = 0;
  int threads = (int)(op->block[0] * op->block[1] * op->block[2]);
  CUresult r = jk_cu_occupancy_blocks(e, op->fn, threads, op->shared, &per_sm);
  if (JK_UNLIKELY(r != CUDA_SUCCESS))
    return jk_cuda_fail(e, r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  unsigned long long blocks = (unsigned long long)op->grid[0] * op->grid[1] * op->grid[2];
  unsigned long long fit = (unsigned long long)per_sm * (unsigned long long)e->info.multiprocessors;
  if (JK_UNLIKELY(blocks > fit))
    return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                   "kernel %s: a cooperative launch needs all %llu blocks of its grid (%u, %u, %u) "
                   "resident at once, but at most %llu fit on device %d: %d per multiprocessor "
                   "with blocks of %d threads and %u bytes of dynamic shared memory, times %d "
                   "multiprocessors",
                   op->name, blocks, op->grid[0], op->grid[1], op->grid[2], fit, e->ordinal, per_sm,
                   threads, op->shared, e->info.multiprocessors);
  return JITK_OK;
}

/* A launch with attributes: cooperative, clusters (and how their blocks
 * are placed), programmatic dependent launch (the kernel may start before
 * the one before it on the stream ends, and waits for it with
 * cudaGridDependencySynchronize). */
static CUresult launch_ex(jitk_engine *e, CUstream stream, const jk_launch_op *op) {
  CUlaunchAttribute attr[4];
  memset(attr, 0, sizeof attr);
  unsigned n = 0;
  if (op->cooperative) {
    attr[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr[n++].value.cooperative = 1;
  }
  if (op->cluster[0] != 0) {
    attr[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr[n].value.clusterDim.x = op->cluster[0];
    attr[n].value.clusterDim.y = op->cluster[1];
    attr[n++].value.clusterDim.z = op->cluster[2];
    if (op->cluster_policy != 0) {
      attr[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
      attr[n++].value.clusterSchedulingPolicyPreference =
          (CUclusterSchedulingPolicy)op->cluster_policy;
    }
  }
  if (op->pdl) {
    attr[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[n++].value.programmaticStreamSerializationAllowed = 1;
  }
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = op->grid[0];
  cfg.gridDimY = op->grid[1];
  cfg.gridDimZ = op->grid[2];
  cfg.blockDimX = op->block[0];
  cfg.blockDimY = op->block[1];
  cfg.blockDimZ = op->block[2];
  cfg.sharedMemBytes = op->shared;
  cfg.hStream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return jk_cu_launch_ex(&e->drv, &cfg, op->fn, op->params);
}

static bool needs_ex(const jk_launch_op *op) {
  return op->cooperative || op->cluster[0] != 0 || op->pdl;
}

/* The report of a step the driver refused: a configuration it rejects is
 * the caller's to fix, so it is named whole. */
static jitk_status refused(jitk_engine *e, const jk_launch_op *op, const char *call, CUresult r) {
  if (op->fn == NULL) return jk_cuda_fail(e, r, call);
  char how_text[96] = "";
  if (op->cooperative) snprintf(how_text, sizeof how_text, ", cooperative");
  if (op->cluster[0] != 0)
    snprintf(how_text + strlen(how_text), sizeof how_text - strlen(how_text),
             ", clusters (%u, %u, %u)", op->cluster[0], op->cluster[1], op->cluster[2]);
  if (op->pdl)
    snprintf(how_text + strlen(how_text), sizeof how_text - strlen(how_text),
             ", programmatic dependent");
  if (r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_INVALID_CLUSTER_SIZE ||
      r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES || r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    return jk_fail(e, JITK_ERR_LAUNCH_CONFIG,
                   "%s refused kernel %s with grid (%u, %u, %u), block (%u, %u, %u), %u bytes of "
                   "shared memory%s: error %d",
                   call, op->name, op->grid[0], op->grid[1], op->grid[2], op->block[0],
                   op->block[1], op->block[2], op->shared, how_text, (int)r);
  return jk_cuda_fail(e, r, call);
}

jitk_status jk_launch_ops(jitk_engine *e, jitk_stream stream, const jk_launch_op *ops, int n) {
  for (int i = 0; i < n; i++)
    if (JK_UNLIKELY(needs_ex(&ops[i]) && !jk_cu_has_launch_ex(&e->drv)))
      return jk_fail(e, JITK_ERR_UNSUPPORTED,
                     "kernel %s: a %s launch needs cuLaunchKernelEx, which this CUDA driver "
                     "lacks; update the NVIDIA driver",
                     ops[i].name,
                     ops[i].cooperative  ? "cooperative"
                     : ops[i].cluster[0] ? "clustered"
                                         : "programmatic dependent");
  jk_trace_push(e, "jitk launch %s", ops[n - 1].name ? ops[n - 1].name : "kernel");
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (JK_UNLIKELY(st != JITK_OK)) {
    jk_trace_pop(e);
    return st;
  }
  CUstream s = (CUstream)stream;
  for (int i = 0; i < n && st == JITK_OK; i++) {
    const jk_launch_op *op = &ops[i];
    CUresult r;
    const char *call = "cuLaunchKernel";
    if (op->fn == NULL) {
      call = "cuMemsetD8Async";
      r = jk_cu_memset_d8_async(&e->drv, (CUdeviceptr)(uintptr_t)op->clear, 0, op->clear_bytes, s);
    } else if (JK_LIKELY(!needs_ex(op))) {
      r = jk_cu_launch(&e->drv, op->fn, op->grid[0], op->grid[1], op->grid[2], op->block[0],
                       op->block[1], op->block[2], op->shared, s, op->params);
    } else {
      call = "cuLaunchKernelEx";
      if (op->cooperative && (st = check_coresident(e, op)) != JITK_OK) break;
      r = launch_ex(e, s, op);
    }
    if (JK_UNLIKELY(r != CUDA_SUCCESS)) st = refused(e, op, call, r);
  }
  jk_ctx_leave(e, saved);
  jk_trace_pop(e);
  return st;
}

static jitk_status launch_checked(jitk_engine *e, jk_fn_facts *k, jitk_dim3 grid, jitk_dim3 block,
                                  size_t shared, jitk_stream stream, const jitk_arg *args, int n,
                                  void **params, void **values, unsigned char *desc,
                                  size_t desc_cap, const jk_launch_how *how) {
  size_t desc_used = 0;
  for (int i = 0; i < n; i++) {
    const jitk_arg *a = &args[i];
    size_t size;
    jitk_dtype dtype = a->dtype;
    int ndim = 0;
    switch (a->kind) {
      case JITK_ARG_SCALAR: {
        const jitk_dtype_info *d = jk_dtype(a->dtype);
        if (JK_UNLIKELY(d == NULL))
          return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                         "kernel %s, argument %d: a scalar needs a dtype", k->name, i);
        size = d->size;
        params[i] = (void *)&a->value;
        break;
      }
      case JITK_ARG_POINTER: {
        jitk_status st = pointer_value(e, k, i, a, &values[i], &dtype);
        if (JK_UNLIKELY(st != JITK_OK)) return st;
        size = sizeof(void *);
        params[i] = &values[i];
        break;
      }
      case JITK_ARG_ARRAY: {
        if (JK_UNLIKELY(a->tensor == NULL))
          return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                         "kernel %s, argument %d: an array argument needs a DLTensor", k->name, i);
        /* The rank is checked before the descriptor's room is: a rank
         * past the largest was given only a length's room. */
        if (JK_UNLIKELY(a->tensor->ndim < 0 || a->tensor->ndim > JITK_MAX_NDIM))
          return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                         "kernel %s, argument %d: %d dimensions; jitk handles 0 to %d", k->name, i,
                         (int)a->tensor->ndim, JITK_MAX_NDIM);
        size = 8 + 16 * (size_t)a->tensor->ndim;
        if (JK_UNLIKELY(desc_used + size > desc_cap))
          return jk_fail(e, JITK_ERR_INTERNAL, "descriptor storage exhausted");
        jitk_status st = pack_array(e, k, i, a, desc + desc_used, &dtype, &ndim);
        if (JK_UNLIKELY(st != JITK_OK)) return st;
        params[i] = desc + desc_used;
        desc_used += size;
        break;
      }
      default:
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                       "kernel %s, argument %d: kind %d is not a jitk_arg_kind", k->name, i,
                       (int)a->kind);
    }
    if (JK_UNLIKELY(k->num_params >= 0 && size != k->param_sizes[i])) {
      char got[128];
      describe_arg(a, dtype, ndim, size, got, sizeof got);
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "kernel %s, argument %d: got %s, but the kernel's parameter "
                     "%d is %u bytes",
                     k->name, i, got, i, (unsigned)k->param_sizes[i]);
    }
    if (k->signature != NULL) {
      jitk_status st = check_signature(e, k, i, a, dtype, ndim);
      if (JK_UNLIKELY(st != JITK_OK)) return st;
    }
  }
  jitk_status st = check_config(e, k, grid, block, shared, how);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  /* No arguments: no array, so that a kernel whose parameters jitk could
   * not count is never handed slots nobody wrote (the driver then refuses
   * the launch rather than read them). */
  jk_launch_op op = {.fn = k->fn,
                     .name = k->name,
                     .grid = {grid.x, grid.y, grid.z},
                     .block = {block.x, block.y, block.z},
                     .shared = (unsigned)shared,
                     .params = n > 0 ? params : NULL};
  if (how != NULL) {
    op.cooperative = how->cooperative;
    op.pdl = how->pdl;
    memcpy(op.cluster, how->cluster, sizeof op.cluster);
  }
  return jk_launch_ops(e, stream, &op, 1);
}

jitk_status jk_launch_args(jitk_engine *e, jk_fn_facts *k, jitk_dim3 grid, jitk_dim3 block,
                           size_t shared, jitk_stream stream, const jitk_arg *args, size_t num_args,
                           const jk_launch_how *how, const char *entry) {
  if (JK_UNLIKELY(num_args != 0 && args == NULL))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: args is NULL but num_args is %zu", entry,
                   num_args);
  if (JK_UNLIKELY(k->num_params >= 0 && num_args != (size_t)k->num_params))
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT, "kernel %s takes %d argument%s; %zu given", k->name,
                   k->num_params, k->num_params == 1 ? "" : "s", num_args);
  if (JK_UNLIKELY(k->signature != NULL && num_args != (size_t)k->num_signature))
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT,
                   "kernel %s takes %d argument%s by its signature; %zu given", k->name,
                   k->num_signature, k->num_signature == 1 ? "" : "s", num_args);
  if (JK_UNLIKELY(num_args > 65536))
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT, "%zu arguments is too many", num_args);

  int n = (int)num_args;
  size_t desc_need = 0;
  for (int i = 0; i < n; i++)
    if (args[i].kind == JITK_ARG_ARRAY && args[i].tensor != NULL && args[i].tensor->ndim > 0 &&
        args[i].tensor->ndim <= JITK_MAX_NDIM)
      desc_need += 8 + 16 * (size_t)args[i].tensor->ndim;
    else if (args[i].kind == JITK_ARG_ARRAY)
      desc_need += 8;

  if (JK_LIKELY(n <= JK_STACK_ARGS && desc_need <= JK_STACK_DESC)) {
    void *params[JK_STACK_ARGS];
    void *values[JK_STACK_ARGS];
    _Alignas(16) unsigned char desc[JK_STACK_DESC];
    return launch_checked(e, k, grid, block, shared, stream, args, n, params, values, desc,
                          sizeof desc, how);
  }
  /* Many arguments or large descriptors: one heap block for all. */
  size_t bytes = 2 * (size_t)n * sizeof(void *) + desc_need + 16;
  void **mem = jk_malloc(e, bytes);
  if (mem == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  unsigned char *desc = (unsigned char *)(mem + 2 * (size_t)n);
  jitk_status st = launch_checked(e, k, grid, block, shared, stream, args, n, mem, mem + n, desc,
                                  desc_need, how);
  jk_free(e, mem);
  return st;
}

/* The most parameters jitk reads per function; the driver's parameter
 * space (32 KiB) cannot hold more non-empty ones. */
#define JK_MAX_PARAMS 8192

/*
 * The number and sizes of the function's parameters, which every launch
 * checks its arguments against. Cubins and PTX describe them, so they are
 * read from the image (a fatbin's cubin); the driver is asked only when the
 * image cannot tell (a fatbin of compressed or PTX entries), because
 * cuFuncGetParamInfo can only be probed past the last parameter, and the
 * CUDA_ERROR_INVALID_VALUE that ends the probe shows up in tools such as
 * compute-sanitizer as an error in the user's program.
 */
static jitk_status read_params(jitk_engine *e, const jk_fn_source *src, jk_fn_facts *f) {
  uint32_t *sizes = jk_calloc(e, JK_MAX_PARAMS, sizeof *sizes);
  if (sizes == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  int n = -1;
  const void *cubin = NULL;
  size_t cubin_size = 0;
  if (src->kind == JITK_IMAGE_CUBIN) {
    cubin = src->image;
    cubin_size = src->image_size;
  } else if (src->kind == JITK_IMAGE_FATBIN) {
    jk_fatbin_cubin(src->image, src->image_size, e->info.cc_major * 10 + e->info.cc_minor, &cubin,
                    &cubin_size);
  }
  if (cubin != NULL)
    n = jk_cubin_param_sizes(cubin, cubin_size, src->symbol, sizes, JK_MAX_PARAMS);
  else if (src->kind == JITK_IMAGE_PTX)
    n = jk_ptx_param_sizes(src->image, src->symbol, sizes, JK_MAX_PARAMS);
  if (n < 0 && jk_cu_has_param_info(e)) {
    size_t off, size;
    n = 0;
    while (n < JK_MAX_PARAMS &&
           jk_cu_func_param_info(e, f->fn, (size_t)n, &off, &size) == CUDA_SUCCESS)
      sizes[n++] = (uint32_t)size;
  }
  f->num_params = n < 0 ? -1 : n;
  if (n > 0) {
    f->param_sizes = jk_realloc(e, sizes, (size_t)n * sizeof *sizes);
    if (f->param_sizes == NULL) {
      jk_free(e, sizes);
      return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    }
  } else {
    jk_free(e, sizes);
  }
  return JITK_OK;
}

jitk_status jk_fn_read_facts(jitk_engine *e, CUfunction fn, const char *name,
                             const jk_fn_source *src, jk_fn_facts *f) {
  memset(f, 0, sizeof *f);
  f->fn = fn;
  f->attr_epoch = __atomic_load_n(&e->attr_epoch, __ATOMIC_ACQUIRE);
  f->name = jk_strdup(e, name);
  if (f->name == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  static const CUfunction_attribute ids[3] = {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                              CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES};
  int v[3] = {0, 0, 0};
  jitk_status st = JITK_OK;
  for (int i = 0; i < 3 && st == JITK_OK; i++) {
    CUresult r = jk_cu_func_attribute(e, fn, ids[i], &v[i]);
    if (r != CUDA_SUCCESS) st = jk_cuda_fail(e, r, "cuFuncGetAttribute");
  }
  f->max_threads = v[0];
  f->static_shared = (size_t)v[1];
  f->max_dynamic_shared = (size_t)v[2];
  if (st == JITK_OK) st = read_params(e, src, f);
  if (st != JITK_OK) jk_fn_facts_free(e, f);
  return st;
}

/* Reads the facts of f that handles change (jk_fn_attribute_changed)
 * from the driver again, under attr_lock; a value the driver does not
 * give stays as it was. */
static void jk_fn_refresh(jitk_engine *e, jk_fn_facts *f) {
  pthread_mutex_lock(&e->attr_lock);
  unsigned long epoch = __atomic_load_n(&e->attr_epoch, __ATOMIC_RELAXED);
  int v = 0;
  if (jk_cu_func_attribute(e, f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &v) ==
      CUDA_SUCCESS)
    __atomic_store_n(&f->max_dynamic_shared, (size_t)v, __ATOMIC_RELAXED);
  if (jk_cu_func_attribute(e, f->fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &v) ==
      CUDA_SUCCESS)
    __atomic_store_n(&f->non_portable_clusters, v == 1, __ATOMIC_RELAXED);
  __atomic_store_n(&f->attr_epoch, epoch, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->attr_lock);
}

void jk_fn_attribute_changed(jitk_engine *e, jk_fn_facts *f) {
  pthread_mutex_lock(&e->attr_lock);
  unsigned long epoch = __atomic_add_fetch(&e->attr_epoch, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&f->attr_epoch, epoch, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&e->attr_lock);
}

jitk_status jk_fn_set_max_dynamic_shared(jitk_engine *e, jk_fn_facts *f, size_t bytes,
                                         bool raise_only) {
  size_t limit = e->info.shared_per_block_optin;
  if (f->static_shared > limit || bytes > limit - f->static_shared)
    return jk_fail(e, JITK_ERR_SHARED_MEMORY,
                   "kernel %s: %zu bytes of dynamic shared memory plus %zu static exceed the "
                   "device's %zu bytes per block",
                   f->name, bytes, f->static_shared, limit);
  pthread_mutex_lock(&e->attr_lock);
  CUresult r = CUDA_SUCCESS;
  if (!raise_only || bytes > __atomic_load_n(&f->max_dynamic_shared, __ATOMIC_RELAXED)) {
    r = jk_cu_set_func_attribute(e, f->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 (int)bytes);
    if (r == CUDA_SUCCESS) __atomic_store_n(&f->max_dynamic_shared, bytes, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&e->attr_lock);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncSetAttribute");
  /* A limit set lower than before: other handles' copies may be higher. */
  if (!raise_only) jk_fn_attribute_changed(e, f);
  return JITK_OK;
}

jitk_status jk_fn_set_non_portable_clusters(jitk_engine *e, jk_fn_facts *f, bool allowed) {
  /* The driver's value, this handle's copy and the epoch move together
   * under the lock: two setters must not leave the copy at one value and
   * the driver at the other. */
  pthread_mutex_lock(&e->attr_lock);
  CUresult r = jk_cu_set_func_attribute(
      e, f->fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, allowed ? 1 : 0);
  if (r == CUDA_SUCCESS) {
    __atomic_store_n(&f->non_portable_clusters, allowed, __ATOMIC_RELAXED);
    unsigned long epoch = __atomic_add_fetch(&e->attr_epoch, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&f->attr_epoch, epoch, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&e->attr_lock);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuFuncSetAttribute");
  return JITK_OK;
}

void jk_fn_facts_free(jitk_engine *e, jk_fn_facts *f) {
  jk_free(e, f->name);
  jk_free(e, f->param_sizes);
  jk_free(e, f->signature);
  memset(f, 0, sizeof *f);
}
