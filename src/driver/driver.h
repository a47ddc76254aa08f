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

#endif
