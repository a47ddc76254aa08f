/*
 * The CUDA driver, loaded with dlopen so that no jitk binary links libcuda
 * and everything starts on a machine without a GPU. Entry points come from
 * cuGetProcAddress at fixed CUDA versions, so the prototypes in cuda.h match
 * what the driver returns on any driver from 12.0 on.
 */
#ifndef JITK_SRC_DRIVER_DRIVER_H
#define JITK_SRC_DRIVER_DRIVER_H

#include <cuda.h>
#include <stdbool.h>

#include <jitk/jitk.h>

/*
 * X(name, cuda_version, required). The name is cuda.h's, which may be a
 * macro for a versioned symbol (cuDeviceTotalMem is cuDeviceTotalMem_v2);
 * the field gets the expanded name and the prototype that goes with it,
 * while cuGetProcAddress is asked for the plain name with the version.
 * Where the plain name at that version is an older function than the
 * macro's (cuGraphInstantiate gives the CUDA 10 one, whose five
 * parameters the macro's three do not match), the entry names the new
 * function itself (cuGraphInstantiateWithFlags).
 */
#define JK_DRIVER_FUNCS(X)                                    \
  X(cuGetErrorName, 12000, true)                              \
  X(cuGetErrorString, 12000, true)                            \
  X(cuInit, 12000, true)                                      \
  X(cuDriverGetVersion, 12000, true)                          \
  X(cuDeviceGetCount, 12000, true)                            \
  X(cuDeviceGet, 12000, true)                                 \
  X(cuDeviceGetName, 12000, true)                             \
  X(cuDeviceGetAttribute, 12000, true)                        \
  X(cuDeviceTotalMem, 12000, true)                            \
  X(cuDevicePrimaryCtxRetain, 12000, true)                    \
  X(cuDevicePrimaryCtxRelease, 12000, true)                   \
  X(cuCtxGetCurrent, 12000, true)                             \
  X(cuCtxSetCurrent, 12000, true)                             \
  X(cuCtxGetDevice, 12000, true)                              \
  X(cuCtxSynchronize, 12000, true)                            \
  X(cuCtxEnablePeerAccess, 12000, false)                      \
  X(cuDeviceCanAccessPeer, 12000, false)                      \
  X(cuModuleLoadDataEx, 12000, true)                          \
  X(cuModuleUnload, 12000, true)                              \
  X(cuModuleGetFunction, 12000, true)                         \
  X(cuModuleGetGlobal, 12000, true)                           \
  X(cuFuncGetAttribute, 12000, true)                          \
  X(cuFuncSetAttribute, 12000, true)                          \
  X(cuFuncSetCacheConfig, 12000, false)                       \
  X(cuFuncGetParamInfo, 12040, false)                         \
  X(cuTensorMapEncodeTiled, 12000, false)                     \
  X(cuLinkCreate, 12000, false)                               \
  X(cuLinkAddData, 12000, false)                              \
  X(cuLinkAddFile, 12000, false)                              \
  X(cuLinkComplete, 12000, false)                             \
  X(cuLinkDestroy, 12000, false)                              \
  X(cuLaunchKernel, 12000, true)                              \
  X(cuLaunchKernelEx, 12000, false)                           \
  X(cuOccupancyMaxPotentialBlockSize, 12000, true)            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 12000, true) \
  X(cuMemAlloc, 12000, true)                                  \
  X(cuMemFree, 12000, true)                                   \
  X(cuMemAllocAsync, 12000, true)                             \
  X(cuMemFreeAsync, 12000, true)                              \
  X(cuMemPoolCreate, 12000, true)                             \
  X(cuMemPoolDestroy, 12000, true)                            \
  X(cuMemPoolSetAttribute, 12000, true)                       \
  X(cuMemAllocFromPoolAsync, 12000, true)                     \
  X(cuMemcpyAsync, 12000, true)                               \
  X(cuMemcpy, 12000, true)                                    \
  X(cuMemsetD8Async, 12000, true)                             \
  X(cuPointerGetAttribute, 12000, true)                       \
  X(cuPointerGetAttributes, 12000, true)                      \
  X(cuStreamCreate, 12000, true)                              \
  X(cuStreamDestroy, 12000, true)                             \
  X(cuStreamSynchronize, 12000, true)                         \
  X(cuStreamIsCapturing, 12000, false)                        \
  X(cuStreamBeginCapture, 12000, false)                       \
  X(cuStreamEndCapture, 12000, false)                         \
  X(cuGraphInstantiateWithFlags, 12000, false)                \
  X(cuGraphLaunch, 12000, false)                              \
  X(cuGraphExecDestroy, 12000, false)                         \
  X(cuGraphDestroy, 12000, false)                             \
  X(cuEventCreate, 12000, true)                               \
  X(cuEventDestroy, 12000, true)                              \
  X(cuEventRecord, 12000, true)                               \
  X(cuEventSynchronize, 12000, true)                          \
  X(cuEventElapsedTime, 12000, true)

typedef struct jk_driver {
  bool loaded;
  void *handle; /* from dlopen */
  int version;  /* cuDriverGetVersion */
/* A field named as the function, of its pointer type (no parentheses
 * possible around a declared name). */
#define JK_DRIVER_FIELD_(name, ver, req) \
  __typeof__(&name) name; /* NOLINT(bugprone-macro-parentheses) */
  JK_DRIVER_FUNCS(JK_DRIVER_FIELD_)
#undef JK_DRIVER_FIELD_
} jk_driver;

/*
 * Loads the driver library at `path` (NULL: "libcuda.so.1"), resolves the
 * table and calls cuInit. On failure the table is left unloaded and a
 * message explains why, written into `why` (at least 512 bytes).
 * Returns JITK_ERR_NO_DRIVER when the library is missing or too old,
 * JITK_ERR_NO_DEVICE when cuInit finds no device.
 */
jitk_status jk_driver_load(jk_driver *drv, const char *path, char *why, size_t why_size);
void jk_driver_unload(jk_driver *drv);

/* "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a result; works with any
 * table state. */
void jk_driver_describe(const jk_driver *drv, CUresult res, char *out, size_t size);

/* Reads the properties of device `ordinal` into `info`. */
CUresult jk_driver_device_info(const jk_driver *drv, int ordinal, jitk_device_info *info);

/* Makes the engine's context current on this thread if it is not. The
 * previous context is returned in *saved so jk_ctx_leave can restore it;
 * the common case (already current) costs one cuCtxGetCurrent
 * (context.c). */
jitk_status jk_ctx_enter(jitk_engine *e, CUcontext *saved);
void jk_ctx_leave(jitk_engine *e, CUcontext saved);

/* Reports a failed driver call: JITK_ERR_DEVICE_OUT_OF_MEMORY,
 * JITK_ERR_NO_DEVICE or JITK_ERR_CUDA with the driver's name and
 * description of `res` (context.c). */
jitk_status jk_cuda_fail(const jitk_engine *e, CUresult res, const char *call);

/* The median milliseconds of run(ctx) on `stream`: `warm` untimed runs,
 * then `runs` (1 to 16) each between two events and waited for; what
 * autotuning measures its candidates with. `what` names the work in a
 * failure's message. Makes and frees its own events (context.c). */
jitk_status jk_time_median(jitk_engine *e, jitk_stream stream, int warm, int runs,
                           jitk_status (*run)(void *ctx), void *ctx, const char *what, float *ms);

/*
 * The driver's entry points as the rest of src/ calls them: only this
 * floor reaches into the table (tools/check_layers.py checks it), so that
 * what jitk asks of the driver is listed in one place and a stand-in or a
 * trace of the calls has one place to go. Each wrapper is one call and
 * returns the driver's CUresult, which the caller turns into a jitk error
 * (jk_cuda_fail) with its own words. Wrappers that need a context expect
 * the caller to have made the engine's current (jk_ctx_enter).
 *
 * The launches are inline here, since they sit in the launch loop and must
 * cost what the bare call costs; being defined before the engine's struct
 * exists, they take the table rather than the engine.
 */

/* cuLaunchKernel without the extra-options array, which jitk never uses. */
static inline CUresult jk_cu_launch(const jk_driver *d, CUfunction fn, unsigned gx, unsigned gy,
                                    unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                    unsigned shared, CUstream stream, void **params) {
  return d->cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, NULL);
}

/* Whether the driver has cuLaunchKernelEx (from 12.0, but resolved as
 * optional), which cooperative, clustered and programmatic dependent
 * launches need. */
static inline bool jk_cu_has_launch_ex(const jk_driver *d) { return d->cuLaunchKernelEx != NULL; }

/* cuLaunchKernelEx; the caller checks jk_cu_has_launch_ex first. */
static inline CUresult jk_cu_launch_ex(const jk_driver *d, const CUlaunchConfig *cfg, CUfunction fn,
                                       void **params) {
  return d->cuLaunchKernelEx(cfg, fn, params, NULL);
}

/* Sets `bytes` bytes at `p` to `value` in stream order. */
static inline CUresult jk_cu_memset_d8_async(const jk_driver *d, CUdeviceptr p, unsigned char value,
                                             size_t bytes, CUstream stream) {
  return d->cuMemsetD8Async(p, value, bytes, stream);
}

/* Devices and the primary context (driver.c). They take the table, not
 * an engine, because jitk_driver_query and jitk_device_query ask them of
 * a driver loaded without one. */
CUresult jk_cu_device_count(const jk_driver *d, int *count);
CUresult jk_cu_device_get(const jk_driver *d, int ordinal, CUdevice *device);
CUresult jk_cu_primary_ctx_retain(const jk_driver *d, CUdevice device, CUcontext *ctx);
CUresult jk_cu_primary_ctx_release(const jk_driver *d, CUdevice device);
/* Whether `device` can reach `peer`'s memory (cuDeviceCanAccessPeer);
 * CUDA_ERROR_NOT_SUPPORTED from a driver without the entry point. */
CUresult jk_cu_can_access_peer(const jk_driver *d, CUdevice device, CUdevice peer, int *can);
/* Lets the current context reach `peer`'s memory (cuCtxEnablePeerAccess);
 * enabled already, by jitk or the CUDA runtime, is a success. */
CUresult jk_cu_enable_peer_access(const jk_driver *d, CUcontext peer);

/* Destroys a memory pool made by jitk (memory.c). */
CUresult jk_cu_mem_pool_destroy(const jitk_engine *e, CUmemoryPool pool);

/* Modules and functions (function.c), with the engine's context current. */

/* The kernel `name` (a mangled or extern "C" name) of module `m`. */
CUresult jk_cu_get_function(const jitk_engine *e, CUmodule m, const char *name, CUfunction *fn);

/* The address and size of the __device__ or __constant__ variable `name`
 * of module `m`; either output may be NULL. */
CUresult jk_cu_module_global(const jitk_engine *e, CUmodule m, const char *name, CUdeviceptr *ptr,
                             size_t *bytes);

/* Reads and sets one attribute of a kernel. */
CUresult jk_cu_func_attribute(const jitk_engine *e, CUfunction fn, CUfunction_attribute a,
                              int *value);
CUresult jk_cu_set_func_attribute(const jitk_engine *e, CUfunction fn, CUfunction_attribute a,
                                  int value);

/* Whether the driver has cuFuncSetCacheConfig, and the call itself, which
 * answers CUDA_ERROR_NOT_SUPPORTED on a driver without it. */
bool jk_cu_has_cache_config(const jitk_engine *e);
CUresult jk_cu_set_cache_config(const jitk_engine *e, CUfunction fn, CUfunc_cache config);

/* Whether the driver has cuFuncGetParamInfo (CUDA 12.4), and the offset
 * and size of parameter `index` of a kernel; past the last parameter the
 * driver answers CUDA_ERROR_INVALID_VALUE, and a driver without the entry
 * point CUDA_ERROR_NOT_SUPPORTED. */
bool jk_cu_has_param_info(const jitk_engine *e);
CUresult jk_cu_func_param_info(const jitk_engine *e, CUfunction fn, size_t index, size_t *offset,
                               size_t *size);

/* How many blocks of `block_size` threads and `dynamic_shared` bytes of
 * dynamic shared memory fit on one multiprocessor at once. */
CUresult jk_cu_occupancy_blocks(const jitk_engine *e, CUfunction fn, int block_size,
                                size_t dynamic_shared, int *blocks);

/* The block size that gives the most resident blocks, and the smallest
 * grid that fills the device with it (min_grid may be NULL). */
CUresult jk_cu_occupancy_block_size(const jitk_engine *e, CUfunction fn, size_t dynamic_shared,
                                    int *min_grid, int *block_size);

/* Whether the driver has cuTensorMapEncodeTiled, which Hopper's wgmma
 * kernels need, and the call itself (CUDA_ERROR_NOT_SUPPORTED without
 * it). The arguments are the driver's, in its order. */
bool jk_cu_has_tensor_map(const jitk_engine *e);
CUresult jk_cu_tensor_map(const jitk_engine *e, CUtensorMap *map, CUtensorMapDataType type,
                          cuuint32_t rank, void *base, const cuuint64_t *dims,
                          const cuuint64_t *strides, const cuuint32_t *box,
                          const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
                          CUtensorMapFloatOOBfill fill);

/* Linking with the driver's own linker (link.c). */

/* One input of a link: what cuLinkAddData takes. PTX text is counted
 * with its terminating NUL. */
typedef struct jk_cu_link_piece {
  CUjitInputType type; /* CU_JIT_INPUT_PTX, _CUBIN, _LIBRARY, ... */
  const void *data;
  size_t size;
  const char *name; /* for the driver's messages */
} jk_cu_link_piece;

/* Whether the driver has the linker's entry points (cuLinkCreate,
 * cuLinkAddData, cuLinkComplete, cuLinkDestroy; cuLinkAddFile is only the
 * fallback below). */
bool jk_cu_has_linker(const jitk_engine *e);

/*
 * Links `n` pieces, in order, into one cubin, with the engine's context
 * current. `target` is CU_JIT_TARGET's value, or 0 to let the driver
 * compile for the context's device. A CU_JIT_INPUT_LIBRARY piece the
 * driver refuses as data (CUDA_ERROR_INVALID_VALUE or _NOT_SUPPORTED: some
 * drivers take archives only as files) is added from `library_file`
 * instead, when that is not NULL and the driver has cuLinkAddFile.
 *
 * The driver's error log is written into `log` (log_size bytes, at least
 * 1), emptied before the fallback so that it tells only of the file.
 * On failure the result is the failed call's, named in *step
 * ("cuLinkCreate", "cuLinkAddData", "cuLinkAddFile", "cuLinkComplete").
 * On CUDA_SUCCESS, *image is the cubin copied into jk_malloc'd memory
 * (with a NUL after it, not counted in *image_size), for the caller to
 * jk_free; *image is NULL when the driver produced nothing (*image_size 0)
 * or when the copy found no memory (*image_size the cubin's size, *step
 * "copying the linked cubin").
 */
CUresult jk_cu_link(jitk_engine *e, const jk_cu_link_piece *pieces, int n, const char *library_file,
                    unsigned target, char *log, size_t log_size, void **image, size_t *image_size,
                    const char **step);

#endif
