/*
 * Device memory and stream helpers, so that a C program using jitk needs
 * neither the CUDA runtime nor its own driver bindings for the basics.
 */
#include <string.h>

#include "engine.h"

#define JK_CHECK_ENGINE(e, fn)                                                               \
  do {                                                                                       \
    if ((e) == NULL) return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, fn ": engine is NULL"); \
    jitk_status st_ = jk_require_device((e), fn);                                            \
    if (st_ != JITK_OK) return st_;                                                          \
  } while (0)

/* Runs one driver call with the engine's context current. */
#define JK_IN_CONTEXT(e, call, name)                            \
  do {                                                          \
    CUcontext saved_;                                           \
    jitk_status st_ = jk_ctx_enter((e), &saved_);               \
    if (st_ != JITK_OK) return st_;                             \
    CUresult r_ = (call);                                       \
    jk_ctx_leave((e), saved_);                                  \
    if (r_ != CUDA_SUCCESS) return jk_cuda_fail((e), r_, name); \
  } while (0)

jitk_status jitk_device_alloc(jitk_engine *e, size_t bytes, jitk_stream stream, void **ptr) {
  JK_CHECK_ENGINE(e, "jitk_device_alloc");
  if (ptr == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_device_alloc: ptr is NULL");
  CUdeviceptr p = 0;
  /* A zero-byte request still returns a distinct, freeable pointer. */
  JK_IN_CONTEXT(e, e->drv.cuMemAllocAsync(&p, bytes ? bytes : 1, (CUstream)stream),
                "cuMemAllocAsync");
  *ptr = (void *)(uintptr_t)p;
  return JITK_OK;
}

/* The pool keeps up to this much freed memory for the next temporaries. */
#define JK_TEMP_POOL_KEEP ((uint64_t)256 << 20)

static jitk_status temp_pool(jitk_engine *e, CUmemoryPool *out) {
  pthread_mutex_lock(&e->lock);
  CUresult r = CUDA_SUCCESS;
  if (e->temp_pool == NULL) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = e->ordinal;
    CUmemoryPool pool;
    r = e->drv.cuMemPoolCreate(&pool, &props);
    if (r == CUDA_SUCCESS) {
      cuuint64_t keep = JK_TEMP_POOL_KEEP;
      e->drv.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
      e->temp_pool = pool;
    }
  }
  *out = e->temp_pool;
  pthread_mutex_unlock(&e->lock);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuMemPoolCreate");
  return JITK_OK;
}

jitk_status jk_temp_alloc(jitk_engine *e, size_t bytes, jitk_stream stream, void **ptr) {
  /* Under a graph's capture the allocation becomes a memory node the
   * graph owns: it is made as captured allocations are documented, with
   * cuMemAllocAsync from the device's own pool, not from jitk's pool. */
  bool capturing = false;
  jitk_status st = jk_stream_capturing(e, stream, &capturing);
  if (st != JITK_OK) return st;
  CUdeviceptr p = 0;
  if (capturing) {
    JK_IN_CONTEXT(e, e->drv.cuMemAllocAsync(&p, bytes ? bytes : 1, (CUstream)stream),
                  "cuMemAllocAsync");
  } else {
    CUmemoryPool pool;
    st = temp_pool(e, &pool);
    if (st != JITK_OK) return st;
    JK_IN_CONTEXT(e, e->drv.cuMemAllocFromPoolAsync(&p, bytes ? bytes : 1, pool, (CUstream)stream),
                  "cuMemAllocFromPoolAsync");
  }
  *ptr = (void *)(uintptr_t)p;
  return JITK_OK;
}

void jk_temp_free(jitk_engine *e, void *ptr, jitk_stream stream) {
  CUcontext saved;
  if (ptr == NULL || jk_ctx_enter(e, &saved) != JITK_OK) return;
  e->drv.cuMemFreeAsync((CUdeviceptr)(uintptr_t)ptr, (CUstream)stream);
  jk_ctx_leave(e, saved);
}

jitk_status jitk_device_free(jitk_engine *e, void *ptr, jitk_stream stream) {
  JK_CHECK_ENGINE(e, "jitk_device_free");
  if (ptr == NULL) return JITK_OK;
  JK_IN_CONTEXT(e, e->drv.cuMemFreeAsync((CUdeviceptr)(uintptr_t)ptr, (CUstream)stream),
                "cuMemFreeAsync");
  return JITK_OK;
}

jitk_status jitk_memcpy(jitk_engine *e, void *dst, const void *src, size_t bytes,
                        jitk_stream stream) {
  JK_CHECK_ENGINE(e, "jitk_memcpy");
  if (bytes == 0) return JITK_OK;
  if (dst == NULL || src == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_memcpy: %s is NULL",
                   dst == NULL ? "dst" : "src");
  JK_IN_CONTEXT(e,
                e->drv.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                     bytes, (CUstream)stream),
                "cuMemcpyAsync");
  return JITK_OK;
}

jitk_status jitk_memset(jitk_engine *e, void *dst, int value, size_t bytes, jitk_stream stream) {
  JK_CHECK_ENGINE(e, "jitk_memset");
  if (bytes == 0) return JITK_OK;
  if (dst == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_memset: dst is NULL");
  JK_IN_CONTEXT(e,
                e->drv.cuMemsetD8Async((CUdeviceptr)(uintptr_t)dst, (unsigned char)value, bytes,
                                       (CUstream)stream),
                "cuMemsetD8Async");
  return JITK_OK;
}

jitk_status jitk_stream_synchronize(jitk_engine *e, jitk_stream stream) {
  JK_CHECK_ENGINE(e, "jitk_stream_synchronize");
  JK_IN_CONTEXT(e, e->drv.cuStreamSynchronize((CUstream)stream), "cuStreamSynchronize");
  return JITK_OK;
}

jitk_status jk_stream_capturing(jitk_engine *e, jitk_stream stream, bool *capturing) {
  *capturing = false;
  if (e->drv.cuStreamIsCapturing == NULL) return JITK_OK;
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  JK_IN_CONTEXT(e, e->drv.cuStreamIsCapturing((CUstream)stream, &cs), "cuStreamIsCapturing");
  /* An invalidated capture still belongs to its stream until it ends. */
  *capturing = cs != CU_STREAM_CAPTURE_STATUS_NONE;
  return JITK_OK;
}

jitk_status jitk_pointer_device(jitk_engine *e, const void *ptr, int *ordinal,
                                int *is_device_memory) {
  JK_CHECK_ENGINE(e, "jitk_pointer_device");
  if (ordinal == NULL || is_device_memory == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_pointer_device: %s is NULL",
                   ordinal == NULL ? "ordinal" : "is_device_memory");
  /* NULL is where empty arrays often point: no memory at all, answered
   * without asking the driver what it makes of address 0. */
  if (ptr == NULL) {
    *is_device_memory = 0;
    *ordinal = -1;
    return JITK_OK;
  }
  /* cuPointerGetAttributes, unlike cuPointerGetAttribute, answers for an
   * address the driver does not know (a plain host pointer) with empty
   * values rather than an error, which a caller would otherwise see as a
   * failed API call under compute-sanitizer. The memory type is an enum
   * and "is managed" a boolean whose width the documentation leaves open:
   * both are read into zeroed 64-bit words, which hold either. */
  unsigned long long type = 0, managed = 0;
  int device = -1;
  CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void *data[3] = {&type, &managed, &device};
  JK_IN_CONTEXT(e, e->drv.cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)ptr),
                "cuPointerGetAttributes");
  bool on_device = type == CU_MEMORYTYPE_DEVICE || managed != 0;
  *is_device_memory = on_device ? 1 : 0;
  *ordinal = on_device ? device : -1;
  return JITK_OK;
}

CUresult jk_cu_mem_pool_destroy(const jitk_engine *e, CUmemoryPool pool) {
  return e->drv.cuMemPoolDestroy(pool);
}
