/*
 * Matmul plans inside the library: what planning (matmul_plan.c),
 * execution (matmul_execute.c) and tuning (matmul_tune.c) share: the plan,
 * its compiled kernels, and the functions one part calls in another.
 */
#ifndef JITK_SRC_KERNELS_MATMUL_H
#define JITK_SRC_KERNELS_MATMUL_H

#include "cache/cache.h"
#include "codegen/codegen.h"
#include "kernels/gen.h"
#include "kernels/kernels.h"

#define JK_MM_GENERATOR "matmul/1"
#define JK_MM_STAGES 4
#define JK_MM_TILE 128

typedef struct mm_kernel {
  jk_mm_spec spec;
  jk_entry *entry;
  CUfunction fn;
  CUfunction tr;  /* wgmma tf32 with column-major A or row-major B: their transpose */
  CUfunction pad; /* wgmma: the copy of an operand whose rows are off 16 bytes */
  char *source;
  size_t smem; /* dynamic shared memory per block */
  /* Each reduction's kernels over its workspace (NAME_rIa, NAME_rIb;
   * the second is NULL over the columns). */
  CUfunction red[JK_MM_MAX_EXTRA][2];
} mm_kernel;

struct jitk_matmul {
  jitk_engine *engine;
  jitk_matmul_desc d; /* strings below are the plan's own copies */
  char *name, *epilogue, *epilogue_params, *preamble;
  jk_param_list params;
  char (*labels)[JK_GEN_LABEL]; /* "epilogue operand `s`", per operand, for messages */
  mm_kernel main, fallback;     /* fallback: FFMA, made on first need */
  int stages, bn, arow;         /* the tensor-core tile: K-tiles in flight, width, K bytes */
  bool pingpong;                /* wgmma: the ping-pong schedule */
  bool tuned;                   /* the configuration came from the tuning table */
  /* Outputs and reductions besides D, their strings the plan's own and
   * the outputs' ld and stride filled in. */
  jitk_matmul_output outs[JK_MM_MAX_EXTRA];
  jitk_matmul_reduction reds[JK_MM_MAX_EXTRA];
  size_t num_outs, num_reds;
  pthread_mutex_t lock; /* guards fallback */
};

/* Releases a compiled kernel of the plan (its cache entry and source). */
void jk_mm_kernel_free(jitk_engine *e, mm_kernel *k);

/* Generates, compiles and loads the plan's kernel of `kind`, accumulating
 * in `acc`. */
jitk_status jk_mm_build(jitk_matmul *p, jk_mm_kind kind, jitk_dtype acc, mm_kernel *out);

/* The tuning table's key of the plan's shape and dtypes for `kind`. */
void jk_mm_tuning_key(const jitk_matmul *p, jk_mm_kind kind, char *buf, size_t size);

/* The plan's tile configuration as the tuning table stores it. */
void jk_mm_choice_format(const jitk_matmul *p, char *buf, size_t size);

/* Checks the operands of an execution (or an autotune call) of the plan. */
jitk_status jk_mm_check_operands(jitk_matmul *p, const char *who, const jitk_matmul_operands *o);

/* Packs the parameters of kernel `k` of the plan and launches it; `work`
 * holds the reductions' workspaces (NULL without reductions). */
jitk_status jk_mm_run_kernel(jitk_matmul *p, mm_kernel *k, jitk_stream stream,
                             const jitk_matmul_operands *o, void *const *work);

#endif
