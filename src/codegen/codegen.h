/*
 * Source generation for the kernel kinds built from expressions.
 */
#ifndef JITK_SRC_CODEGEN_CODEGEN_H
#define JITK_SRC_CODEGEN_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"
#include "expr/params.h"
#include "expr/scan.h"

/* The most parameters an elementwise or reduction kernel takes. */
#define JK_MAX_EW_PARAMS 64

/* --- elementwise kernels --- */

typedef enum jk_ew_kind {
  JK_EW_ARRAY = 0,  /* read or written as one element per index */
  JK_EW_SCALAR = 1, /* a value, the same for every element */
  JK_EW_RAW = 2     /* a whole array, indexed by the operation */
} jk_ew_kind;

/* Threads per block of every elementwise kernel; the tiled path's thread
 * layout is built on it. */
#define JK_EW_BLOCK 256

/* What one specialization of an elementwise kernel is for. */
typedef struct jk_ew_spec {
  int nparams;
  unsigned char kind[JK_MAX_EW_PARAMS];
  unsigned char dtype[JK_MAX_EW_PARAMS];
  unsigned char raw_ndim[JK_MAX_EW_PARAMS];
  /* Vector path only: the array's innermost stride is 0 (one value per
   * row) rather than 1. */
  unsigned char inner_bcast[JK_MAX_EW_PARAMS];
  unsigned char ndim;   /* loop dimensions, at least 1 */
  unsigned char idx64;  /* 64-bit indexing */
  unsigned char vec;    /* elements per vector access; 1: no vectors */
  unsigned char unroll; /* vector path: groups a thread loads before computing */
  /* An input walks a dimension other than the innermost contiguously (a
   * transposed or permuted view) while the outputs walk the innermost:
   * square tiles over those two dimensions go through shared memory so
   * both its reads and the outputs' writes are coalesced. The other
   * dimensions (of a permuted 3-D or 4-D view) number the tiles. */
  unsigned char tiled;
  unsigned char tile;                         /* tiled: 32 or 64 elements a side */
  unsigned char tile_dim;                     /* tiled: the dimension the tile's rows run along */
  unsigned char transposed[JK_MAX_EW_PARAMS]; /* tiled: read through a tile */
  /* Tiled path only: the array's stride along the tile's rows is 0 (one
   * value per column, a bias along the rows), so a thread loads it once
   * per column. */
  unsigned char outer_bcast[JK_MAX_EW_PARAMS];
  /* Tiled path only: every array has 2-byte elements, even extents and
   * strides, and is 4-byte aligned: each thread moves pairs of elements
   * (two columns of a row, or for transposed inputs two rows of a
   * column), so every global access moves 4 bytes. */
  unsigned char tpair;
  /* Vector path, one dimension: the first _jk_h elements (a kernel
   * parameter, fewer than vec) go one at a time, so that the vector groups
   * start where the outputs' addresses are aligned (a misaligned slice
   * such as x[1:]). */
  unsigned char peel;
  /* Vector path: the array is not aligned to a whole group where the
   * groups start, so its group is moved one element at a time. */
  unsigned char unaligned[JK_MAX_EW_PARAMS];
  /* Vector path: the array's innermost stride is -1 (a reversed view):
   * its groups are read and written backwards from each group's element,
   * with the lanes reversed. */
  unsigned char reversed[JK_MAX_EW_PARAMS];
  /* Vector path, inputs: 0 or 1, or the innermost stride (2 to 4) of a
   * stepped view such as x[::2]: a group's elements are read as that many
   * whole vectors, every step-th element kept. */
  unsigned char step[JK_MAX_EW_PARAMS];
} jk_ew_spec;

typedef struct jk_ew_source_in {
  const char *name;
  const jk_param_list *params;
  const bool *load_output; /* per parameter; meaningful for outputs */
  const char *operation, *preamble, *loop_prep, *after_loop;
  const jk_ew_spec *spec;
} jk_ew_source_in;

/* Writes the CUDA source of one specialization. The user's code sits
 * under #line directives naming `operation`, `preamble`, `loop_prep` and
 * `after_loop`, so NVRTC's messages cite the user's own lines. */
jitk_status jk_ew_generate(jitk_engine *e, const jk_ew_source_in *in, char **source);

/* Shared by the generators. A user's code under `#line 1 "label"`, then
 * `close` (the generated text that completes it: ";", ")", "));"), on the
 * code's last line where that cannot change its meaning, then the
 * generated file's own numbering again (jk_cg_line_back). */
void jk_cg_user_code(jk_buf *b, const char *label, const char *code, const char *close,
                     const char *file);
/* A section of statements or declarations (preamble, loop_prep,
 * after_loop), closed by ";"; nothing for NULL or "". */
void jk_cg_user_section(jk_buf *b, const char *label, const char *code, const char *file);
void jk_cg_line_back(jk_buf *b, const char *file);
/* The includes the parameters' dtypes and `extra` need (fp16/bf16,
 * complex, raw arrays), the index typedefs _jk_u and _jk_s, and a typedef
 * per placeholder. `code` (NULL entries allowed) is every section of the
 * user's: a float16 kernel reads cuda_bf16.h only when it names bfloat16. */
void jk_cg_prologue(jk_buf *b, const jk_param_list *params, int nparams, const unsigned char *dtype,
                    const unsigned char *kind, bool idx64, jitk_dtype extra,
                    const char *const *code, size_t ncode);

/* Threads per block of every reduction kernel. */
#define JK_RED_BLOCK 256

/* What one specialization of a reduction kernel is for. Each output
 * reduces the elements of the reduced dimensions at one point of the kept
 * dimensions; both sets are collapsed on the host (nk, nr >= 1). */
typedef struct jk_red_spec {
  int nparams;
  unsigned char kind[JK_MAX_EW_PARAMS]; /* jk_ew_kind */
  unsigned char dtype[JK_MAX_EW_PARAMS];
  unsigned char raw_ndim[JK_MAX_EW_PARAMS];
  unsigned char reduce_dtype; /* the bound reduce type; JITK_DTYPE_NONE: as written */
  unsigned char nk, nr;       /* kept and reduced dimensions */
  unsigned char idx64;
  /* 'i': a group of `group` threads (32 or 256) reduces each output along
   * its reduced elements, which the inputs hold contiguously (rows, whole
   * arrays); 'o': a thread per output, 32 outputs a block, 8 threads
   * splitting the reduced elements (columns); 'm': rows of one group of
   * `vec` elements, each thread `group` (2 to 8) outputs, all their loads
   * first; 'r': row segments (see rcols). */
  unsigned char strategy;
  /* 'i': threads per output: 256, 32, or fewer (a power of two) for short
   * rows, several outputs a warp. */
  unsigned short group;
  unsigned char vec; /* 'i' only: elements per vector access */
  /* 'o' only: 0, or the outputs a block takes (1 to 16, one row of the
   * innermost kept dimension) when the reduced rows lie right after one
   * another (few tall columns, a middle axis): a warp then reads 32 / ocols
   * consecutive rows at once. */
  unsigned char ocols;
  /* 'o' only: each warp owns its outputs and reads all their reduced rows
   * (many outputs, few rows each); otherwise a block's 8 warps split the
   * rows of one block of outputs. */
  unsigned char owarp;
  /* 'o' only, neither ocols nor owarp: 1, or the outputs each thread
   * takes (2: a float16 pair), read as one vector per reduced row, so
   * that a warp reads 128 contiguous bytes of each row, not 64. */
  unsigned char ovec;
  /* 'r' only (row segments): the innermost kept dimension and the run of
   * `rrun` reduced elements inside each of its points (1: none) make
   * contiguous rows, read in segments of `rcols` vectors of `vec`
   * elements (a power of two up to 256, whole outputs); a block reads a
   * segment of 256 / rcols rows at a time, each thread one vector, and
   * the threads of each output combine at the end. */
  unsigned short rcols, rrun;
  /* 0: one piece per output (S == 1), no combine; else the threads per
   * output, 1, 32 or 256, that fold each output's chunks (S > 1): in the
   * last block of its tile to finish, or with `second_pass` in a second
   * kernel, `name_final`. */
  unsigned short final_group;
  unsigned char second_pass;
  unsigned char has_identity;
} jk_red_spec;

typedef struct jk_red_source_in {
  const char *name;
  const jk_param_list *params;
  const char *map_expr, *reduce_expr, *post_map_expr, *identity, *reduce_type, *preamble;
  const jk_red_spec *spec;
  /* Per parameter: an output the post-map may read, or leave as it was,
   * before (or without) assigning it, which is loaded first. */
  const bool *load_output;
} jk_red_source_in;

/* Writes the CUDA source of one specialization: the kernel `name`, which
 * writes the outputs; split reductions write partial results to _jk_work,
 * and the last block of each tile of outputs to finish (counted in
 * _jk_tick, cleared by the launch) folds them in order, or with
 * `second_pass` the kernel `name_final` does. `name_slot` is a device
 * array the size of one partial result. */
jitk_status jk_red_generate(jitk_engine *e, const jk_red_source_in *in, char **source);

/* --- matmul plans --- */

/* SIMT: FFMA, any dtype and layout. MMA: mma.sync tensor cores (sm_80
 * and later). WGMMA: Hopper's warpgroup MMA with TMA (sm_90a only). */
typedef enum jk_mm_kind { JK_MM_SIMT = 0, JK_MM_MMA = 1, JK_MM_WGMMA = 2 } jk_mm_kind;

/* What a matmul plan's kernel is for. */
typedef struct jk_mm_spec {
  jk_mm_kind kind;
  jitk_dtype a, b, c, d, acc; /* acc: float32 or float64 */
  bool a_k, b_n;              /* A K-contiguous (row-major), B N-contiguous (row-major) */
  bool c_row, d_row;
  bool has_c;    /* alpha and beta are the kernel's parameters, not the spec's */
  int stages;    /* mma, wgmma: K-tiles in flight */
  int bn;        /* mma, wgmma: tile width, 128 or 256 (the height is 128);
                  swapped wgmma plans also 8, 16, 32 or 64 */
  int arow;      /* mma: bytes of K per tile row, 64 or 128 (wgmma: 128) */
  bool pingpong; /* wgmma: consumers take whole tiles in turns (bn 128) */
  /* FP8 plans: the kernel takes device float32 scales of A, B and D, and
   * an amax of D (jitk.h, "FP8 plans"). */
  bool a_scale, b_scale, d_scale, amax;
  /* FP8 plans on wgmma: each K-tile's products summed apart and added
   * into a float32 sum (matmul_sm90.cuh's PROMOTE); false: the tensor
   * cores' accumulator takes the whole K (fast accumulation). */
  bool promote;
  /* Split-K. FFMA and mma.sync: the kernel computes slice blockIdx.z of
   * K into a float32 workspace, and the module's second kernel,
   * "<name>_sk", sums the slices in order and applies the epilogue
   * (jk_mm_fixup). wgmma: each work item is a slice of a tile; every
   * slice writes its partial sums to the workspace, and the slice that
   * finishes last (a counter per tile says which) sums them in slice
   * order and runs the epilogue as an unsplit kernel does, so the bits
   * do not depend on which slice that is (matmul_sm90.cuh's SERIAL). */
  bool split;
  /* Split-K on a cp.async FFMA tile (ffma > 0) on sm_90 and later, with
   * at most JK_MM_CLUSTER_SLICES slices: the slices of a tile run as one
   * thread-block cluster of (1, 1, splits) blocks, each stages its
   * partial tile in its shared memory, and each block sums a share of the
   * tile's rows over the cluster's blocks through distributed shared
   * memory, in slice order (the bits of the fix-up's sum), and runs the
   * epilogue on it (matmul.cuh's cluster_sum): no workspace and no
   * fix-up kernel. */
  bool csplit;
  /* wgmma, 16-bit or tf32 inputs: the kernel computes D^T = B^T A^T, so
   * that a small M lies along the tile's bn columns and N along its 128
   * rows (decode shapes). The kernel's A is the user's B and its B the
   * user's A (always K-major: a column-major A is transposed first); the
   * epilogue still sees the user's row and col, and D, C, the outputs and
   * the workspaces keep the user's layouts. D leaves registers directly. */
  bool swap;
  /* wgmma, not swapped: blocks of a cluster of this many (1 or 2) take
   * adjacent tile-rows and load the B tile they share once, by halves,
   * into both (TMA multicast). */
  int cluster;
  /* wgmma, 16-bit inputs, not swapped, no cluster or split: A is
   * row-major with rows off 16 bytes, and rather than copying it onto 16
   * bytes the kernel reads it in place, its rows in `aph` phases (row %
   * aph) of one tensor map each (matmul_sm90.cuh's phase_tile); 0: not so.
   * B is row-major, D row-major and stored by the threads. */
  int aph;
  /* wgmma, 16-bit inputs, B row-major with rows off 16 bytes, not
   * swapped, no cluster, split or drain: the kernel copies B onto rows of
   * 128-byte lines itself, with the producer warpgroup's idle warps, as
   * its MMAs run (matmul_sm90.cuh's feed_copy), rather than the `_pad`
   * kernel before it (only with JITK_MM_FEED=1, for measuring: its first
   * form ran slower). Its shared memory holds JK_MM_FEED_SMEM more bytes. */
  bool feed;
  /* wgmma: no epilogue operand is read ahead at its columns
   * (matmul_sm90.cuh's col_vec), for measuring. */
  bool no_col_vecs;
  /* wgmma: D's rows that TMA cannot store are stored by the consumers
   * themselves (matmul_sm90.cuh's stage_rows) rather than drained by the
   * producer warpgroup (stage_rows_drained), for measuring. */
  bool no_drain;
  /* FFMA in float with more blocks than multiprocessors: registers capped
   * at 128 so that two blocks share a multiprocessor. */
  bool two_blocks;
  /* FFMA with float32 A, B and accumulation on sm_80 and later: the
   * cp.async tile (jk_mm_ffma_tile_at) matmul.cuh's ffma_gemm runs, with
   * `stages` K-tiles in flight; 0: simt_gemm's 128 x 128 tiles. */
  int ffma;
} jk_mm_spec;

/* A tile of matmul.cuh's ffma_gemm (its ffma_tile): 128 x bn outputs, wm x
 * wn warps, lanes lr x (32 / lr), and the blocks a multiprocessor its
 * launch bounds ask for. */
typedef struct jk_mm_ffma_tile {
  int bn, wm, wn, lr, blocks;
} jk_mm_ffma_tile;

/* The cp.async FFMA tiles, 1 to JK_MM_FFMA_TILES (jk_mm_spec's ffma):
 * NULL for any other index. */
#define JK_MM_FFMA_TILES 3
const jk_mm_ffma_tile *jk_mm_ffma_tile_at(int index);

/* The cp.async FFMA kernels' K-tiles in flight by default, and their
 * dynamic shared memory with `stages` of them: per K-tile of 16, A's 16 x
 * 128 and B's 16 x bn floats, each row of 16 padded by 4 (matmul.cuh's
 * ffma_slab). */
#define JK_MM_FFMA_STAGES 3
static inline size_t jk_mm_ffma_smem(int bn, int stages) {
  return (size_t)stages * (size_t)(132 + bn + 4) * 16 * 4;
}

/* The most slices a cluster-summed split (jk_mm_spec's csplit) takes.
 * Clusters of up to 8 blocks run on every device with clusters, but on an
 * H100 (jitk-bench matmul, 2026-12-07) 5 and 7 slices ran some 9 us
 * longer than the same kernels' time model, and 2 and 3 within it. */
#define JK_MM_CLUSTER_SLICES 4

/* The shared memory a cluster-summed split's block stages its partial
 * 128 x bn tile in, after its K-tiles' buffers: rows padded by 4 floats
 * (matmul.cuh's cluster_sum). */
static inline size_t jk_mm_stage_smem(int bn) { return (size_t)128 * (size_t)(bn + 4) * 4; }

/* The block of a wgmma module's "_pad" kernel (matmul.cuh's pad_rows):
 * threads, each with the loads of four 16-byte chunks of a row in flight.
 * The generated launch bounds, pad_rows' template argument (its loop
 * strides) and matmul_execute.c's launch all take it from here. */
#define JK_MM_PAD_THREADS 128

/* A kernel that copies its B itself (jk_mm_spec's feed) copies units of
 * JK_MM_FEED_SEG bytes of a row (matmul_sm90.cuh's FEED_SEG), and its
 * shared memory holds JK_MM_FEED_SMEM more bytes (FEED_SMEM): two warps'
 * two buffers of a unit and 32 bytes, and their four barriers. */
#define JK_MM_FEED_SEG 4096
#define JK_MM_FEED_SMEM (32 + 4 * (JK_MM_FEED_SEG + 32))

/* Columns of D a block of the kernel of `s` computes (its rows: 128). */
static inline int jk_mm_tile_n(const jk_mm_spec *s) {
  if (s->kind == JK_MM_SIMT) return s->ffma > 0 ? jk_mm_ffma_tile_at(s->ffma)->bn : 128;
  return s->bn;
}

/* Threads of a block of the main kernel of `s`. */
static inline int jk_mm_threads(const jk_mm_spec *s) {
  if (s->kind == JK_MM_SIMT && s->ffma > 0) {
    const jk_mm_ffma_tile *t = jk_mm_ffma_tile_at(s->ffma);
    return t->wm * t->wn * 32;
  }
  return s->kind == JK_MM_WGMMA ? 384 : 256;
}

/* Elements of K a kernel of `s` takes per K-tile, the unit split-K cuts K
 * into: FFMA 16 (8 in float64), mma.sync arow bytes, wgmma 128 bytes (128
 * elements of 8-bit floats, as matmul_sm90.cuh's BK). */
static inline int jk_mm_ktile(const jk_mm_spec *s) {
  const int es = s->a == JITK_FLOAT32                                   ? 4
                 : s->a == JITK_FLOAT64                                 ? 8
                 : s->a == JITK_FLOAT8_E4M3 || s->a == JITK_FLOAT8_E5M2 ? 1
                                                                        : 2;
  if (s->kind == JK_MM_SIMT) return s->acc == JITK_FLOAT64 ? 8 : 16;
  return (s->kind == JK_MM_MMA ? s->arow : 128) / es;
}

/* wgmma: tf32 reads A and B K-major only from shared memory, so a
 * column-major float32 A and, unless the plan is swapped, a row-major
 * float32 B are first transposed by the module's second kernel,
 * "<name>_tr". A swapped plan's kernel reads the user's A as its B tile,
 * K-major only, so a column-major A of any dtype is transposed first too;
 * its A tile is the user's B, which a tf32 kernel takes M-major through
 * registers (matmul_sm90.cuh's wgmma_rs), so B is never transposed. */
static inline bool jk_mm_transposes_a(const jk_mm_spec *s) {
  return s->kind == JK_MM_WGMMA && (s->a == JITK_FLOAT32 || s->swap) && !s->a_k;
}
static inline bool jk_mm_transposes_b(const jk_mm_spec *s) {
  return s->kind == JK_MM_WGMMA && s->a == JITK_FLOAT32 && s->b_n && !s->swap;
}

/* The most outputs and reductions a plan may have besides D. */
#define JK_MM_MAX_EXTRA 8

typedef struct jk_mm_source_in {
  const char *name;
  const jk_mm_spec *spec;
  const char *epilogue;        /* NULL: acc */
  const jk_param_list *params; /* the epilogue's extra operands */
  const char *preamble;
  /* Extra outputs (ld and stride filled in) and reductions. Each
   * reduction's terms go to a workspace of the work type (float, or
   * double for float64), batch x M x N row-major, which the module's
   * kernels NAME_rIa and NAME_rIb reduce. */
  const jitk_matmul_output *outputs;
  size_t num_outputs;
  const jitk_matmul_reduction *reductions;
  size_t num_reductions;
} jk_mm_source_in;

/* The workspace type of a plan's reduction: double when it or the
 * accumulator is float64. */
static inline jitk_dtype jk_mm_work_dtype(jitk_dtype acc, jitk_dtype red) {
  return acc == JITK_FLOAT64 || red == JITK_FLOAT64 ? JITK_FLOAT64 : JITK_FLOAT32;
}

/* Whether a plan's kernel folds its reductions per tile before they leave
 * the multiprocessor (matmul_sm90.cuh's red_tile_over_rows and
 * red_tile_over_cols): wgmma kernels that are not swapped (whose tile
 * rows are D's columns), split or not (a split tile's last slice runs the
 * epilogue).
 * Their workspaces then hold partial results, which the module's
 * kernels NAME_rIa and NAME_rIb reduce as they would the terms: over the
 * rows, batch x ceil(M / 16) x N (one row per warp's 16 rows of D); over
 * the columns and the whole matrix, batch x M x tiles (one column per
 * tile column of bn). Other kernels write every term, batch x M x N. */
static inline bool jk_mm_tile_reduces(const jk_mm_spec *s) {
  return s->kind == JK_MM_WGMMA && !s->swap;
}

/* Whether a split plan's slices are summed by a second kernel, NAME_sk,
 * over planes of partial sums (FFMA and mma.sync), rather than inside
 * the kernel (wgmma, and FFMA summed across clusters). */
static inline bool jk_mm_fixup(const jk_mm_spec *s) {
  return s->split && s->kind != JK_MM_WGMMA && !s->csplit;
}

/* The source of a plan's kernel `name`. */
jitk_status jk_mm_generate(jitk_engine *e, const jk_mm_source_in *in, char **source);

#endif
