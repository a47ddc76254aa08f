/*
 * The engine's context, the report of a failed driver call and the timing
 * of a piece of work with events: what the stages that call the driver
 * need around their calls. Kept here, in the driver's stage, so that the
 * engine's ground floor (core) does not call the driver itself.
 */
#include <stdio.h>

#include "engine.h"
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
  if (res == CUDA_ERROR_OUT_OF_MEMORY)
    st = JITK_ERR_DEVICE_OUT_OF_MEMORY;
  else if (res == CUDA_ERROR_NO_DEVICE || res == CUDA_ERROR_INVALID_DEVICE)
    st = JITK_ERR_NO_DEVICE;
  return jk_fail(e, st, "%s failed: %s", call, desc);
}

jitk_status jk_time_median(jitk_engine *e, jitk_stream stream, int warm, int runs,
                           jitk_status (*run)(void *ctx), void *ctx, const char *what, float *ms) {
  enum { MOST = 16 };
  if (runs < 1 || runs > MOST)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "timing %s: %d runs (1 to %d)", what, runs, MOST);
  float t[MOST] = {0};
  CUevent ev[2] = {NULL, NULL};
  CUcontext saved = NULL;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (st != JITK_OK) return st;
  CUresult r = e->drv.cuEventCreate(&ev[0], CU_EVENT_DEFAULT);
  if (r == CUDA_SUCCESS) r = e->drv.cuEventCreate(&ev[1], CU_EVENT_DEFAULT);
  jk_ctx_leave(e, saved);
  if (r != CUDA_SUCCESS) st = jk_cuda_fail(e, r, "cuEventCreate");
  for (int i = 0; i < warm + runs && st == JITK_OK; i++) {
    st = jk_ctx_enter(e, &saved);
    if (st != JITK_OK) break;
    r = e->drv.cuEventRecord(ev[0], (CUstream)stream);
    jk_ctx_leave(e, saved);
    if (r != CUDA_SUCCESS) {
      st = jk_cuda_fail(e, r, "cuEventRecord");
      break;
    }
    st = run(ctx);
    if (st != JITK_OK) break;
    st = jk_ctx_enter(e, &saved);
    if (st != JITK_OK) break;
    r = e->drv.cuEventRecord(ev[1], (CUstream)stream);
    if (r == CUDA_SUCCESS) r = e->drv.cuEventSynchronize(ev[1]);
    if (r == CUDA_SUCCESS && i >= warm) r = e->drv.cuEventElapsedTime(&t[i - warm], ev[0], ev[1]);
    jk_ctx_leave(e, saved);
    if (r != CUDA_SUCCESS) {
      char call[128];
      snprintf(call, sizeof call, "timing %s", what);
      st = jk_cuda_fail(e, r, call);
    }
  }
  if (jk_ctx_enter(e, &saved) == JITK_OK) {
    if (ev[0] != NULL) e->drv.cuEventDestroy(ev[0]);
    if (ev[1] != NULL) e->drv.cuEventDestroy(ev[1]);
    jk_ctx_leave(e, saved);
  }
  if (st != JITK_OK) return st;
  for (int i = 1; i < runs; i++) /* insertion sort: a handful of values */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      float x = t[j];
      t[j] = t[j - 1];
      t[j - 1] = x;
    }
  *ms = t[runs / 2];
  return JITK_OK;
}
