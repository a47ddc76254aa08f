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
/* The most phases a wgmma kernel reads an A in (jk_mm_spec's aph). */
#define JK_MM_MAX_PHASES 8

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
  /* Split-K (spec.split): the fix-up kernel NAME_sk (FFMA and mma.sync;
   * NULL on wgmma, whose kernel sums the slices itself), and the slices an
   * execution cuts K into (the kernel takes any count from 2 up to its
   * K-tiles; autotuning times several on one compiled kernel). */
  CUfunction fix;
  int splits;
  /* Split-K summed across clusters (spec.csplit): how the launch asks
   * the clusters' blocks to be placed (launch.h's cluster_policy). */
  unsigned char cluster_policy;
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
  bool swap;                    /* wgmma: D^T = B^T A^T (jk_mm_spec's swap) */
  int cluster;                  /* wgmma: blocks a cluster sharing B (jk_mm_spec's) */
  bool tuned;                   /* the configuration came from the tuning table */
  bool pdl;                     /* wgmma: launched as a programmatic dependent */
  int split;                    /* K slices (1: none); 0 while not yet chosen */
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

/* Whether the plan's kernel of `kind` promotes (FP8 on wgmma without
 * JITK_COMPUTE_FLOAT32_FAST_ACCUM): each K-tile's sum added into a
 * separate float32 one, which allows only cooperative 128 x 128 tiles. */
bool jk_mm_promotes(const jitk_matmul *p, jk_mm_kind kind);

/* Whether a tile configuration fits the plan's kernel of `kind`: its
 * shared memory, its registers, and the schedules the kind has; `swap`
 * for a kernel with A and B swapped. */
bool jk_mm_choice_fits(const jitk_matmul *p, jk_mm_kind kind, int bn, int arow, int stages,
                       int pingpong, bool swap);

/* The tuning table's key of the plan's shape and dtypes for `kind`. */
void jk_mm_tuning_key(const jitk_matmul *p, jk_mm_kind kind, char *buf, size_t size);

/* The plan's tile configuration as the tuning table stores it. */
void jk_mm_choice_format(const jitk_matmul *p, char *buf, size_t size);

/* A stored configuration back onto the plan, for a kernel of `kind`:
 * false (and the plan untouched) when it does not parse or does not fit.
 * A choice stored before split-K had no `split=`: the plan's split is then
 * left to be chosen (0); a split beyond the K-tiles is cut to them. */
bool jk_mm_choice_parse(jitk_matmul *p, jk_mm_kind kind, const char *choice);

/* Whether the plan may swap A and B (jk_mm_spec's swap) for `kind`:
 * wgmma with 16-bit or tf32 inputs. */
bool jk_mm_swap_allowed(const jitk_matmul *p, jk_mm_kind kind);

/* A swapped plan's default tile width for M (the narrowest of 8, 16, 32
 * and 64 that holds it, else 128), the most stages that then fit (which
 * autotuning tries), and the default stages (at most 8). */
int jk_mm_swap_bn(int64_t m);
int jk_mm_swap_stages(int bn);
int jk_mm_swap_default_stages(int bn);

/* K-tiles of the plan's kernel of `kind` in its current configuration:
 * the most slices split-K may cut K into. */
int64_t jk_mm_ktiles(const jitk_matmul *p, jk_mm_kind kind);

/* The split jitk chooses for the plan's kernel of `kind` in its current
 * configuration, from the shape and `sms` multiprocessors. */
int jk_mm_auto_split(const jitk_matmul *p, jk_mm_kind kind, int sms);

/* Multiprocessors split-K plans for: the device's, or on a compile-only
 * engine those of the arch's data-center part (132 for sm_90, 108 for
 * sm_80). */
int jk_mm_sms(const jitk_engine *e);

/* Whether TMA can read or write a matrix at p (NULL: an address not yet
 * known, taken as aligned) with leading dimension ld and batch stride sx,
 * in elements of es bytes, as it is: the address and every row and matrix
 * on 16 bytes. A single matrix's (nb = 1) stride is never used. */
bool jk_mm_tma_ready(const void *p, uint64_t ld, uint64_t sx, uint64_t nb, uint64_t es);

/* Whether an execution copies its row-major B, whose rows (ldb elements
 * of es bytes) start on 16 bytes, onto 128-byte lines first
 * (matmul_execute.c says when that pays). */
bool jk_mm_line_pays(const jitk_matmul *p, uint64_t ldb, uint64_t es);

/* Checks the operands of an execution (or an autotune call) of the plan. */
jitk_status jk_mm_check_operands(jitk_matmul *p, const char *who, const jitk_matmul_operands *o);

/* Packs the parameters of kernel `k` of the plan and launches it; `work`
 * holds the reductions' workspaces (NULL without reductions). */
jitk_status jk_mm_run_kernel(jitk_matmul *p, mm_kernel *k, jitk_stream stream,
                             const jitk_matmul_operands *o, void *const *work);

#endif
