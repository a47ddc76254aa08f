/*
 * The driver's questions about modules and kernels (functions, globals,
 * attributes, occupancy) and the tensor maps Hopper's kernels read through,
 * one thin call each, so that the floors above ask them here rather than
 * through the table (driver.h says why).
 */
#include "engine.h"
#include "driver/driver.h"

CUresult jk_cu_get_function(const jitk_engine *e, CUmodule m, const char *name, CUfunction *fn) {
  return e->drv.cuModuleGetFunction(fn, m, name);
}

CUresult jk_cu_module_global(const jitk_engine *e, CUmodule m, const char *name, CUdeviceptr *ptr,
                             size_t *bytes) {
  /* The driver's documentation lets either output be NULL, but the tests'
   * stand-in driver writes both, so the call is always given both. */
  CUdeviceptr p = 0;
  size_t b = 0;
  CUresult r = e->drv.cuModuleGetGlobal(&p, &b, m, name);
  if (ptr != NULL) *ptr = p;
  if (bytes != NULL) *bytes = b;
  return r;
}

CUresult jk_cu_func_attribute(const jitk_engine *e, CUfunction fn, CUfunction_attribute a,
                              int *value) {
  return e->drv.cuFuncGetAttribute(value, a, fn);
}

CUresult jk_cu_set_func_attribute(const jitk_engine *e, CUfunction fn, CUfunction_attribute a,
                                  int value) {
  return e->drv.cuFuncSetAttribute(fn, a, value);
}

bool jk_cu_has_cache_config(const jitk_engine *e) { return e->drv.cuFuncSetCacheConfig != NULL; }

CUresult jk_cu_set_cache_config(const jitk_engine *e, CUfunction fn, CUfunc_cache config) {
  /* The entry point is optional in the table; a missing one is an answer,
   * not a call through NULL. */
  if (e->drv.cuFuncSetCacheConfig == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  return e->drv.cuFuncSetCacheConfig(fn, config);
}

bool jk_cu_has_param_info(const jitk_engine *e) { return e->drv.cuFuncGetParamInfo != NULL; }

CUresult jk_cu_func_param_info(const jitk_engine *e, CUfunction fn, size_t index, size_t *offset,
                               size_t *size) {
  if (e->drv.cuFuncGetParamInfo == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  return e->drv.cuFuncGetParamInfo(fn, index, offset, size);
}

CUresult jk_cu_occupancy_blocks(const jitk_engine *e, CUfunction fn, int block_size,
                                size_t dynamic_shared, int *blocks) {
  return e->drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, fn, block_size, dynamic_shared);
}

CUresult jk_cu_occupancy_block_size(const jitk_engine *e, CUfunction fn, size_t dynamic_shared,
                                    int *min_grid, int *block_size) {
  /* The driver writes both answers; the caller may want only one. */
  int grid = 0;
  CUresult r =
      e->drv.cuOccupancyMaxPotentialBlockSize(&grid, block_size, fn, NULL, dynamic_shared, 0);
  if (min_grid != NULL) *min_grid = grid;
  return r;
}

bool jk_cu_has_tensor_map(const jitk_engine *e) { return e->drv.cuTensorMapEncodeTiled != NULL; }

CUresult jk_cu_tensor_map(const jitk_engine *e, CUtensorMap *map, CUtensorMapDataType type,
                          cuuint32_t rank, void *base, const cuuint64_t *dims,
                          const cuuint64_t *strides, const cuuint32_t *box,
                          const cuuint32_t *element_strides, CUtensorMapInterleave interleave,
                          CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
                          CUtensorMapFloatOOBfill fill) {
  if (e->drv.cuTensorMapEncodeTiled == NULL) return CUDA_ERROR_NOT_SUPPORTED;
  return e->drv.cuTensorMapEncodeTiled(map, type, rank, base, dims, strides, box, element_strides,
                                       interleave, swizzle, promotion, fill);
}
