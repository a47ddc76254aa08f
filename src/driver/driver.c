#include "driver/driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef CUresult (*jk_get_proc_fn)(const char *symbol, void **pfn, int cuda_version,
                                   cuuint64_t flags, CUdriverProcAddressQueryResult *status);

jitk_status jk_driver_load(jk_driver *drv, const char *path, char *why, size_t why_size) {
  memset(drv, 0, sizeof *drv);
  if (path == NULL) path = "libcuda.so.1";

  /* RTLD_LOCAL keeps the driver's symbols out of the global namespace, so
   * a second copy loaded by the CUDA runtime does not clash with ours.
   * RTLD_NODELETE keeps it mapped after the last engine's dlclose: once
   * started, the driver has threads and thread-exit destructors of its
   * own, which would otherwise run in unmapped code when a thread that
   * used it ends after the engines are gone. */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == NULL) {
    const char *err = dlerror();
    snprintf(why, why_size,
             "no CUDA driver: could not load %s (%s); launching kernels "
             "needs an NVIDIA driver and GPU, compiling does not "
             "(use a compile-only engine, device = JITK_DEVICE_NONE)",
             path, err ? err : "unknown reason");
    return JITK_ERR_NO_DRIVER;
  }

  /* cuGetProcAddress_v2 exists from CUDA 12.0; older drivers lack the
   * entry points jitk relies on, so they count as no usable driver. */
  jk_get_proc_fn get_proc;
  *(void **)&get_proc = dlsym(h, "cuGetProcAddress_v2");
  if (get_proc == NULL) {
    snprintf(why, why_size,
             "the CUDA driver at %s is older than CUDA 12.0 "
             "(no cuGetProcAddress_v2); jitk needs 12.0 or newer",
             path);
    dlclose(h);
    return JITK_ERR_NO_DRIVER;
  }

#define JK_DRIVER_RESOLVE_(name, ver, req)                                         \
  do {                                                                             \
    void *fn_ = NULL;                                                              \
    CUdriverProcAddressQueryResult st_ = CU_GET_PROC_ADDRESS_SUCCESS;              \
    CUresult r_ = get_proc(#name, &fn_, (ver), CU_GET_PROC_ADDRESS_DEFAULT, &st_); \
    if (r_ != CUDA_SUCCESS || st_ != CU_GET_PROC_ADDRESS_SUCCESS) fn_ = NULL;      \
    if (fn_ == NULL && (req)) {                                                    \
      snprintf(why, why_size,                                                      \
               "the CUDA driver at %s lacks %s (CUDA %d.%d); update the "          \
               "NVIDIA driver",                                                    \
               path, #name, (ver) / 1000, ((ver) % 1000) / 10);                    \
      dlclose(h);                                                                  \
      memset(drv, 0, sizeof *drv);                                                 \
      return JITK_ERR_NO_DRIVER;                                                   \
    }                                                                              \
    *(void **)&drv->name = fn_;                                                    \
  } while (0);
  JK_DRIVER_FUNCS(JK_DRIVER_RESOLVE_)
#undef JK_DRIVER_RESOLVE_

  drv->handle = h;
  int version = 0;
  if (drv->cuDriverGetVersion(&version) != CUDA_SUCCESS) version = 0;
  drv->version = version;

  CUresult r = drv->cuInit(0);
  if (r != CUDA_SUCCESS) {
    char desc[256];
    jk_driver_describe(drv, r, desc, sizeof desc);
    bool no_device = r == CUDA_ERROR_NO_DEVICE;
    snprintf(why, why_size, "%s: cuInit failed: %s",
             no_device ? "no CUDA device" : "the CUDA driver cannot start", desc);
    dlclose(h);
    memset(drv, 0, sizeof *drv);
    drv->version = version; /* still worth reporting without a device */
    return no_device ? JITK_ERR_NO_DEVICE : JITK_ERR_NO_DRIVER;
  }
  drv->loaded = true;
  return JITK_OK;
}

void jk_driver_unload(jk_driver *drv) {
  if (drv->handle != NULL) dlclose(drv->handle);
  memset(drv, 0, sizeof *drv);
}

void jk_driver_describe(const jk_driver *drv, CUresult res, char *out, size_t size) {
  const char *name = NULL, *text = NULL;
  if (drv != NULL && drv->cuGetErrorName != NULL) {
    if (drv->cuGetErrorName(res, &name) != CUDA_SUCCESS) name = NULL;
    if (drv->cuGetErrorString(res, &text) != CUDA_SUCCESS) text = NULL;
  }
  if (name != NULL && text != NULL)
    snprintf(out, size, "%s (%s)", name, text);
  else
    snprintf(out, size, "CUDA error %d", (int)res);
}

CUresult jk_driver_device_info(const jk_driver *drv, int ordinal, jitk_device_info *info) {
  CUdevice dev;
  CUresult r = drv->cuDeviceGet(&dev, ordinal);
  if (r != CUDA_SUCCESS) return r;
  memset(info, 0, sizeof *info);
  info->ordinal = ordinal;
  r = drv->cuDeviceGetName(info->name, (int)sizeof info->name - 1, dev);
  if (r != CUDA_SUCCESS) return r;
  size_t total = 0;
  r = drv->cuDeviceTotalMem(&total, dev);
  if (r != CUDA_SUCCESS) return r;
  info->total_memory = total;

  struct {
    CUdevice_attribute attr;
    int *dst;
  } ints[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info->cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info->cc_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info->multiprocessors},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &info->max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &info->warp_size},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &info->l2_cache_bytes},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &info->max_grid[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &info->max_grid[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &info->max_grid[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &info->max_block[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &info->max_block[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &info->max_block[2]},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    r = drv->cuDeviceGetAttribute(ints[i].dst, ints[i].attr, dev);
    if (r != CUDA_SUCCESS) return r;
  }
  struct {
    CUdevice_attribute attr;
    size_t *dst;
  } sizes[] = {
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &info->shared_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info->shared_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &info->shared_per_multiprocessor},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int v = 0;
    r = drv->cuDeviceGetAttribute(&v, sizes[i].attr, dev);
    if (r != CUDA_SUCCESS) return r;
    *sizes[i].dst = (size_t)v;
  }
  return CUDA_SUCCESS;
}

CUresult jk_cu_device_count(const jk_driver *d, int *count) { return d->cuDeviceGetCount(count); }

CUresult jk_cu_device_get(const jk_driver *d, int ordinal, CUdevice *device) {
  return d->cuDeviceGet(device, ordinal);
}

CUresult jk_cu_primary_ctx_retain(const jk_driver *d, CUdevice device, CUcontext *ctx) {
  return d->cuDevicePrimaryCtxRetain(ctx, device);
}

CUresult jk_cu_primary_ctx_release(const jk_driver *d, CUdevice device) {
  return d->cuDevicePrimaryCtxRelease(device);
}

CUresult jk_cu_can_access_peer(const jk_driver *d, CUdevice device, CUdevice peer, int *can) {
  if (d->cuDeviceCanAccessPeer == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  return d->cuDeviceCanAccessPeer(can, device, peer);
}

CUresult jk_cu_enable_peer_access(const jk_driver *d, CUcontext peer) {
  if (d->cuCtxEnablePeerAccess == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult r = d->cuCtxEnablePeerAccess(peer, 0);
  return r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED ? CUDA_SUCCESS : r;
}
