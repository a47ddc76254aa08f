/*
 * Loading images into the engine's context, and unloading them.
 */
#include <stdint.h>

#include "engine.h"
#include "driver/image.h"

jitk_status jk_module_load(jitk_engine *e, const void *image, jitk_image_kind kind, CUmodule *out) {
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  /* The JIT's error log explains PTX the driver cannot compile. */
  char errlog[4096];
  errlog[0] = '\0';
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {errlog, (void *)(uintptr_t)sizeof errlog};
  CUmodule mod = NULL;
  jk_trace_push(e, "jitk load %s", jk_image_kind_name(kind));
  CUresult r = e->drv.cuModuleLoadDataEx(&mod, image, 2, opts, vals);
  jk_trace_pop(e);
  jk_ctx_leave(e, saved);
  if (r == CUDA_SUCCESS) {
    *out = mod;
    return JITK_OK;
  }
  char desc[256];
  jk_driver_describe(&e->drv, r, desc, sizeof desc);
  jitk_status code = JITK_ERR_CUDA;
  if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
      r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    code = JITK_ERR_INVALID_IMAGE;
  else if (r == CUDA_ERROR_OUT_OF_MEMORY)
    code = JITK_ERR_DEVICE_OUT_OF_MEMORY;
  return jk_fail(e, code, "loading the %s into device %d failed: %s%s%s", jk_image_kind_name(kind),
                 e->ordinal, desc, errlog[0] ? "\n" : "", errlog);
}

void jk_module_unload(jitk_engine *e, CUmodule mod) {
  if (mod == NULL) return;
  CUcontext saved;
  if (jk_ctx_enter(e, &saved) != JITK_OK) return;
  CUresult r = e->drv.cuModuleUnload(mod);
  jk_ctx_leave(e, saved);
  if (r != CUDA_SUCCESS) {
    char desc[256];
    jk_driver_describe(&e->drv, r, desc, sizeof desc);
    jk_log(e, JITK_LOG_WARN, "cuModuleUnload failed: %s", desc);
  }
}
