/*
 * The one way a kernel reaches the GPU. Every kind (raw kernels,
 * elementwise, reduction and matmul) ends in jk_launch_ops: the engine's
 * context made current once, the steps of the launch run in order on one
 * stream, the context given back, and a refusal reported with the kernel's
 * name and its configuration. Raw kernels come in one step higher, through
 * jk_launch_args, which checks users' jitk_arg lists against what the
 * driver said of the function and packs them.
 *
 * This floor sits below src/kernels: it knows functions and their facts,
 * not modules, caches or kernel handles.
 */
#ifndef JITK_SRC_LAUNCH_LAUNCH_H
#define JITK_SRC_LAUNCH_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "expr/signature.h"

/* What a launch of one function is checked against, read once from the
 * driver when the function is loaded (jk_fn_read_facts). */
typedef struct jk_fn_facts {
  CUfunction fn;
  char *name; /* as the user asked for it */
  /* From cuFuncGetParamInfo; num_params is -1 when the driver is older
   * than 12.4 and cannot tell. */
  int num_params;
  uint32_t *param_sizes;
  jk_param *signature; /* NULL until jitk_kernel_set_signature */
  int num_signature;
  int max_threads;
  size_t static_shared;
  size_t max_dynamic_shared;  /* the current limit */
  bool non_portable_clusters; /* clusters of up to 16 blocks allowed */
  unsigned long attr_epoch;   /* the engine's attr_epoch when these were read */
} jk_fn_facts;

/* One step of a launch: a kernel, or (fn NULL) clearing `clear_bytes`
 * bytes at `clear` to zero, as a reduction's tickets are. */
typedef struct jk_launch_op {
  CUfunction fn;
  const char *name; /* the kernel, for messages */
  unsigned grid[3], block[3];
  unsigned shared;
  void **params; /* as cuLaunchKernel takes them */
  bool cooperative;
  unsigned cluster[3]; /* thread-block clusters; {0, 0, 0}: none */
  /* How the clusters' blocks are placed on multiprocessors (a
   * CUclusterSchedulingPolicy); 0 leaves it to the driver. */
  unsigned char cluster_policy;
  bool pdl; /* programmatic dependent launch */
  void *clear;
  size_t clear_bytes;
} jk_launch_op;

/* Runs `n` steps in order on `stream`, stopping at the first the driver
 * refuses. A cooperative step is checked first for a grid whose blocks
 * can all be resident at once. */
jitk_status jk_launch_ops(jitk_engine *e, jitk_stream stream, const jk_launch_op *ops, int n);

/* One kernel step, the common case. */
static inline jitk_status jk_launch_fn(jitk_engine *e, jitk_stream stream, CUfunction fn,
                                       const char *name, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                       void **params) {
  jk_launch_op op = {.fn = fn,
                     .name = name,
                     .grid = {gx, gy, gz},
                     .block = {bx, by, bz},
                     .shared = shared,
                     .params = params};
  return jk_launch_ops(e, stream, &op, 1);
}

/* How a raw launch runs beyond its grid, block and shared memory. */
typedef struct jk_launch_how {
  bool cooperative;
  unsigned cluster[3];
  bool pdl;
} jk_launch_how;

/* A user's launch of a raw function: the arguments counted, checked
 * against the function's parameter sizes and signature, and packed (array
 * descriptors on the stack), the configuration checked against the
 * device and the function (dynamic shared memory beyond the function's
 * limit raises the limit, up to what the device allows), then one step.
 * `how` NULL is an ordinary launch; `entry` names the public call for
 * messages. */
jitk_status jk_launch_args(jitk_engine *e, jk_fn_facts *f, jitk_dim3 grid, jitk_dim3 block,
                           size_t shared, jitk_stream stream, const jitk_arg *args, size_t num_args,
                           const jk_launch_how *how, const char *entry);

/* Sets the dynamic shared memory the function's launches may ask for
 * (cuFuncSetAttribute), after checking it against the device's opt-in
 * limit with the function's static shared memory. With raise_only, only
 * where the limit is below `bytes` (a launch that needs more). The
 * driver's value and the one kept in `f` change together, under the
 * engine's attr_lock. */
jitk_status jk_fn_set_max_dynamic_shared(jitk_engine *e, jk_fn_facts *f, size_t bytes,
                                         bool raise_only);
/* Sets whether f may launch in clusters past the portable size, on the
 * driver and in f's copy together, and tells the function's other handles
 * (jk_fn_attribute_changed), all under attr_lock. */
jitk_status jk_fn_set_non_portable_clusters(jitk_engine *e, jk_fn_facts *f, bool allowed);

/* After an attribute of a function changed through a handle (the limit
 * lowered, the cluster flag set): another handle of the same function
 * reads its facts from the driver again before it trusts them. */
void jk_fn_attribute_changed(jitk_engine *e, jk_fn_facts *f);

/* Where a function was loaded from: its image, which describes its
 * parameters, and its symbol there. */
typedef struct jk_fn_source {
  jitk_image_kind kind;
  const void *image;
  size_t image_size;
  const char *symbol;
} jk_fn_source;

/* Reads a loaded function's facts: its limits from the driver, its
 * parameters from its image (the driver when the image cannot tell);
 * `name` is copied. With the context current. On failure nothing is left
 * to free. */
jitk_status jk_fn_read_facts(jitk_engine *e, CUfunction fn, const char *name,
                             const jk_fn_source *src, jk_fn_facts *f);
void jk_fn_facts_free(jitk_engine *e, jk_fn_facts *f);

#endif
