/*
 * The engine's context and the report of a failed driver call: what every
 * stage that calls the driver needs around its calls. Kept here, in the
 * driver's stage, so that the engine's ground floor (core) does not call
 * the driver itself.
 */
#include "core/core.h"
#include "driver/driver.h"

jitk_status jk_ctx_enter(jitk_engine *e, CUcontext *saved) {
  CUcontext cur = NULL;
  CUresult r = e->drv.cuCtxGetCurrent(&cur);
  if (JK_UNLIKELY(r != CUDA_SUCCESS)) return jk_cuda_fail(e, r, "cuCtxGetCurrent");
  *saved = cur;
  if (JK_LIKELY(cur == e->context)) return JITK_OK;
  r = e->drv.cuCtxSetCurrent(e->context);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "cuCtxSetCurrent");
  return JITK_OK;
}

void jk_ctx_leave(jitk_engine *e, CUcontext saved) {
  /* A thread that had no context keeps the primary one current, as the
   * CUDA runtime would leave it; one that had another gets it back. */
  if (saved != NULL && saved != e->context) e->drv.cuCtxSetCurrent(saved);
}

jitk_status jk_cuda_fail(const jitk_engine *e, CUresult res, const char *call) {
  char desc[256];
  jk_driver_describe(e ? &e->drv : NULL, res, desc, sizeof desc);
  jitk_status st = JITK_ERR_CUDA;
  if (res == CUDA_ERROR_OUT_OF_MEMORY) st = JITK_ERR_DEVICE_OUT_OF_MEMORY;
  else if (res == CUDA_ERROR_NO_DEVICE || res == CUDA_ERROR_INVALID_DEVICE)
    st = JITK_ERR_NO_DEVICE;
  return jk_fail(e, st, "%s failed: %s", call, desc);
}
