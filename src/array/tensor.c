/*
 * DLTensor checks. DLPack leaves much to convention (NULL strides mean C
 * order, byte_offset applies before indexing); this is the one place that
 * interprets it.
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "engine.h"

static const char *device_type_name(int type) {
  switch (type) {
    case kDLCPU: return "kDLCPU (host memory)";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLROCM: return "kDLROCM";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    default: return "an unknown device type";
  }
}

jitk_status jk_tensor_reachable(const jitk_engine *e, const DLTensor *t, const char *what) {
  int dt = (int)t->device.device_type;
  if (dt != kDLCUDA && dt != kDLCUDAManaged && dt != kDLCUDAHost)
    return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                   "%s: the tensor is in %s; kernels need CUDA memory "
                   "(kDLCUDA, kDLCUDAManaged or kDLCUDAHost)",
                   what, device_type_name(dt));
  if (dt != kDLCUDAHost && e != NULL && e->has_device && !jk_device_usable(e, t->device.device_id))
    return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                   "%s: the tensor is on device %d but the engine uses device %d (make an engine "
                   "for that device, or let this one reach it with "
                   "jitk_engine_enable_peer_access)",
                   what, (int)t->device.device_id, e->ordinal);
  return JITK_OK;
}

jitk_status jk_view_from_tensor(const jitk_engine *e, const DLTensor *t, const char *what,
                                jk_view *out) {
  if (t == NULL) return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: the DLTensor is NULL", what);
  jitk_status st = jk_tensor_reachable(e, t, what);
  if (st != JITK_OK) return st;
  jitk_dtype d = jk_dtype_from_dl(t->dtype);
  if (d == JITK_DTYPE_NONE)
    return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                   "%s: DLPack type (code %u, %u bits, %u lanes) has no jitk "
                   "dtype",
                   what, (unsigned)t->dtype.code, (unsigned)t->dtype.bits,
                   (unsigned)t->dtype.lanes);
  if (t->ndim < 0 || t->ndim > JITK_MAX_NDIM)
    return jk_fail(e, JITK_ERR_INVALID_ARRAY, "%s: %d dimensions; jitk handles 0 to %d", what,
                   (int)t->ndim, JITK_MAX_NDIM);
  if (t->ndim > 0 && t->shape == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARRAY, "%s: shape is NULL", what);

  out->dtype = d;
  out->ndim = t->ndim;
  int64_t size = 1;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return jk_fail(e, JITK_ERR_INVALID_ARRAY, "%s: dimension %d has negative extent %lld", what,
                     i, (long long)t->shape[i]);
    out->shape[i] = t->shape[i];
    if (size != 0 && t->shape[i] > INT64_MAX / (size ? size : 1))
      return jk_fail(e, JITK_ERR_INVALID_ARRAY, "%s: too many elements", what);
    size *= t->shape[i];
  }
  out->size = size;
  if (t->strides != NULL) {
    for (int i = 0; i < t->ndim; i++) out->strides[i] = t->strides[i];
  } else {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
      out->strides[i] = s;
      /* Only an empty array's extents can pass int64_t here (the size was
       * checked): its strides reach nothing, and stop growing. */
      if (__builtin_mul_overflow(s, t->shape[i] ? t->shape[i] : 1, &s)) s = out->strides[i];
    }
  }
  if (t->data == NULL && size != 0)
    return jk_fail(e, JITK_ERR_INVALID_ARRAY, "%s: data is NULL", what);
  /* Every element's offset from the first, in bytes, must be a number:
   * ranges, overlaps and index widths are computed from strides times
   * extents. No memory is that large, so strides that reach 2^62 bytes
   * are a mistake, not an array. Extent-1 dimensions are never stepped
   * along, and an empty array has no elements to reach. */
  const int64_t limit = (int64_t)1 << 62;
  int64_t reach = 0, item = (int64_t)jk_dtype(d)->size;
  for (int i = 0; i < t->ndim && size != 0; i++) {
    if (out->shape[i] <= 1) continue;
    int64_t s = out->strides[i];
    if (s < -(limit - 1) || s > limit - 1 ||
        (s < 0 ? -s : s) > (limit - 1 - reach) / item / (out->shape[i] - 1))
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "%s: stride %lld in dimension %d (extent %lld) reaches past 2^62 bytes", what,
                     (long long)s, i, (long long)out->shape[i]);
    reach += (s < 0 ? -s : s) * (out->shape[i] - 1) * item;
  }
  out->data = (char *)t->data + t->byte_offset;
  /* Kernels read and write whole elements, which the GPU requires to be
   * aligned to their size (16 bytes for complex128): a misaligned one
   * faults, and the fault ends the whole CUDA context. */
  if (size != 0 && !jk_dtype_aligned(out->data, d))
    return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                   "%s: its first element (data + byte_offset = %p) is not aligned to %zu bytes, "
                   "as %s elements must be",
                   what, out->data, jk_dtype(d)->align, jk_dtype(d)->name);
  return JITK_OK;
}
