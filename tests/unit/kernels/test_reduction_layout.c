/*
 * The layout of reduction launches, without a GPU: which strategy, group,
 * vector width, split and index width each shape gets on a device of 132
 * multiprocessors (an H200).
 */
#include <string.h>

#include "common.h"
#include "kernels/reduction.h"

typedef struct layout_case {
  const char *what;
  jitk_dtype dtype;
  int ndim;
  int64_t shape[3], strides[3]; /* the input view; strides 0: C order */
  uintptr_t misalign;           /* bytes added to the input's address */
  unsigned mask;                /* reduced axes */
  bool keepdims;
  /* expected */
  char strategy;
  int group, vec, nk, nr, idx64;
  uint64_t S;
  int ocols; /* 'o': outputs a block, when reduced rows follow one another */
  int owarp; /* 'o': each warp owns a row of outputs */
  int ovec;  /* 'o': outputs a thread (0: 1) */
  int rcols; /* 'r': vectors a row */
  int rrun;  /* 'r': reduced elements of a run (1: none) */
} layout_case;

static void check(const layout_case *c) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list params;
  memset(&params, 0, sizeof params);
  JT_OK(e, jk_params_parse(e, "T x", "in_params", false, &params));
  JT_OK(e, jk_params_parse(e, "T y", "out_params", true, &params));
  static jk_red_plan pl;
  memset(&pl, 0, sizeof pl);
  size_t isz = jk_dtype(c->dtype)->size;
  jk_view *x = &pl.a.views[0], *y = &pl.a.views[1];
  x->data = (char *)(uintptr_t)(0x10000000 + c->misalign);
  x->dtype = c->dtype;
  x->ndim = c->ndim;
  x->size = 1;
  int64_t acc = 1;
  for (int d = c->ndim - 1; d >= 0; d--) {
    x->shape[d] = c->shape[d];
    x->strides[d] = c->strides[0] || c->strides[1] ? c->strides[d] : acc;
    acc *= c->shape[d];
    x->size *= c->shape[d];
  }
  pl.ndim = c->ndim;
  pl.K = pl.R = 1;
  for (int d = 0; d < c->ndim; d++) {
    pl.shape[d] = c->shape[d];
    pl.reduced[d] = c->mask >> d & 1;
    if (pl.reduced[d]) {
      pl.R *= c->shape[d];
      if (c->keepdims) pl.out_shape[pl.out_ndim++] = 1;
    } else {
      pl.K *= c->shape[d];
      pl.out_shape[pl.out_ndim++] = c->shape[d];
    }
  }
  y->data = (char *)(uintptr_t)0x90000000;
  y->dtype = c->dtype;
  y->ndim = pl.out_ndim;
  acc = 1;
  for (int d = pl.out_ndim - 1; d >= 0; d--) {
    y->shape[d] = pl.out_shape[d];
    y->strides[d] = acc;
    acc *= pl.out_shape[d];
  }
  pl.a.is_array[0] = pl.a.is_array[1] = true;
  pl.a.dtype[0] = pl.a.dtype[1] = c->dtype;
  jk_red_spec spec;
  memset(&spec, 0, sizeof spec);
  jk_red_layout(&pl, &params, 1, c->keepdims, false, 132, &spec);
  cr_assert_eq(spec.strategy, c->strategy, "%s: strategy %c", c->what, spec.strategy);
  cr_assert_eq(spec.group, c->group, "%s: group %d", c->what, spec.group);
  cr_assert_eq(spec.vec, c->vec, "%s: vec %d", c->what, spec.vec);
  cr_assert_eq(spec.nk, c->nk, "%s: nk %d", c->what, spec.nk);
  cr_assert_eq(spec.nr, c->nr, "%s: nr %d", c->what, spec.nr);
  cr_assert_eq(spec.idx64, c->idx64, "%s: idx64 %d", c->what, spec.idx64);
  cr_assert_eq(pl.S, c->S, "%s: %llu splits", c->what, (unsigned long long)pl.S);
  cr_assert_eq(spec.ocols, c->ocols, "%s: %d outputs a block", c->what, spec.ocols);
  cr_assert_eq(spec.owarp, c->owarp, "%s: warps own outputs: %d", c->what, spec.owarp);
  if (spec.strategy == 'o')
    cr_assert_eq(spec.ovec, c->ovec ? c->ovec : 1, "%s: %d outputs a thread", c->what, spec.ovec);
  cr_assert_eq(spec.rcols, c->rcols, "%s: rows of %d vectors", c->what, spec.rcols);
  cr_assert_eq(spec.rrun, c->rrun, "%s: runs of %d", c->what, spec.rrun);
  if (spec.strategy == 'r')
    cr_assert_eq(pl.units, (uint64_t)pl.R / spec.rrun, "%s: units are rows", c->what);
  /* Splits reading 16 MiB or more fold their chunks in a second kernel
   * (a block an output from 256 chunks, a warp from 5, else a thread);
   * smaller ones in the kernel, in groups of G then the groups: a thread
   * an output where neither level folds more than 4, else up to a warp. */
  uint64_t G = jk_red_fanin(c->S), S2 = (c->S + G - 1) / G;
  cr_assert(G >= 1 && G <= 256 && S2 <= 256 && (c->S > 32 || G == c->S),
            "%s: %llu chunks in groups of %llu", c->what, (unsigned long long)c->S,
            (unsigned long long)G);
  bool pass = c->S > 1 && (uint64_t)pl.K * (uint64_t)pl.R * isz >= ((uint64_t)16 << 20);
  cr_assert_eq(spec.second_pass, pass, "%s: second pass %d", c->what, spec.second_pass);
  unsigned want = c->S == 1 ? 0
                  : pass    ? (c->S >= 256 ? 256
                               : c->S > 4  ? 32
                                           : 1)
                            : ((G > S2 ? G : S2) > 4 ? 32 : 1);
  cr_assert_eq(spec.final_group, want, "%s: the fold of the chunks", c->what);
  /* Chunks cover the units, none empty. */
  cr_assert(pl.S * pl.chunk >= pl.units && (pl.S - 1) * pl.chunk < pl.units + (pl.units == 0),
            "%s: %llu chunks of %llu for %llu units", c->what, (unsigned long long)pl.S,
            (unsigned long long)pl.chunk, (unsigned long long)pl.units);
  (void)isz;
  jk_params_free(e, &params);
  jitk_engine_destroy(e);
}

Test(reduction_layout, whole_arrays_rows_and_columns) {
  const int64_t N = 16384;
  /* One case a line, as the fields list them. */
  /* clang-format off */
  layout_case cases[] = {
      /* The whole of 2^28 float32: along the elements, 16-byte loads, 16
       * chunks per multiprocessor. */
      {"whole array", JITK_FLOAT32, 1, {1 << 28}, {0}, 0, 1, false, 'i', 256, 4, 1, 1, 0, 2112, 0, 0, 0, 0, 0},
      /* A whole array of 4096 float32 (1024 vectors): one block, no
       * split; of 65536, four chunks. */
      {"4096 elements", JITK_FLOAT32, 1, {4096}, {0}, 0, 1, false, 'i', 256, 4, 1, 1, 0, 1, 0, 0, 0,
       0, 0},
      {"65536 elements", JITK_FLOAT32, 1, {65536}, {0}, 0, 1, false, 'i', 256, 4, 1, 1, 0, 4, 0, 0,
       0, 0, 0},
      /* Rows of 16384: a block per row, no split. */
      {"rows", JITK_FLOAT32, 2, {N, N}, {0}, 0, 2, false, 'i', 256, 4, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      {"rows, keepdims", JITK_FLOAT32, 2, {N, N}, {0}, 0, 2, true, 'i', 256, 4, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      /* A misaligned input: no vectors. */
      {"rows, misaligned", JITK_FLOAT32, 2, {N, N}, {0}, 4, 2, false, 'i', 256, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      /* Columns: segments of 8 vectors (32 outputs) of 32 rows at a time,
       * about 16 blocks per multiprocessor. */
      {"columns", JITK_FLOAT32, 2, {N, N}, {0}, 0, 1, false, 'r', 32, 4, 1, 1, 0, 4, 0, 0, 0, 8, 1},
      /* Short rows: a group of as many lanes as a row has elements (8 for
       * 7), four rows a warp. */
      {"short rows", JITK_FLOAT64, 2, {100000, 7}, {0}, 0, 2, false, 'i', 8, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      /* Rows of 32 float32: 8 vectors each, 8 lanes a row. */
      {"rows of 32", JITK_FLOAT32, 2, {1 << 20, 32}, {0}, 0, 2, false, 'i', 8, 4, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      /* Rows of three: groups of four lanes, eight rows a warp. */
      {"rows of three", JITK_FLOAT32, 2, {1 << 20, 3}, {0}, 0, 2, false, 'i', 4, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      /* Few tall columns: whole rows, one 16-byte vector each, 256 rows a
       * block at a time, and the rows split across the device. */
      {"four tall columns", JITK_FLOAT32, 2, {1 << 24, 4}, {0}, 0, 1, false, 'r', 32, 4, 1, 1, 0,
       2112, 0, 0, 0, 1, 1},
      /* Rows of 256 float32 outputs: 8 segments of 32, the rows split 256
       * ways. */
      {"rows of 256 outputs", JITK_FLOAT32, 2, {1 << 16, 256}, {0}, 0, 1, false, 'r', 32, 4, 1, 1,
       0, 256, 0, 0, 0, 8, 1},
      /* Columns of float16: segments of 8 vectors of 4 (32 outputs, four
       * accumulators a thread); of int8, 16 vectors of 4 (64 outputs, 64
       * bytes); a view misaligned for vectors reads segments of 32 single
       * elements. Rows of 62 and 130 float16 outputs tile in no segment
       * of 64 bytes: across outputs, a pair a thread for 130, one for 62
       * (fewer than 64). */
      {"float16 columns", JITK_FLOAT16, 2, {N, N}, {0}, 0, 1, false, 'r', 32, 4, 1, 1, 0, 4, 0, 0,
       0, 8, 1},
      {"int8 columns", JITK_INT8, 2, {N, N}, {0}, 0, 1, false, 'r', 32, 4, 1, 1, 0, 8, 0, 0, 0, 16,
       1},
      {"float16 columns, misaligned", JITK_FLOAT16, 2, {N, N}, {0}, 2, 1, false, 'r', 32, 1, 1, 1,
       0, 4, 0, 0, 0, 32, 1},
      {"float16 columns, rows of 62", JITK_FLOAT16, 2, {N, 62}, {0}, 0, 1, false, 'o', 32, 1, 1, 1,
       0, 256, 0, 0, 1, 0, 0},
      {"float16 columns, rows of 130", JITK_FLOAT16, 2, {N, 130}, {0}, 0, 1, false, 'o', 32, 1, 1,
       1, 0, 256, 0, 0, 2, 0, 0},
      /* Rows of a transposed view are columns in memory. */
      {"rows of a transposed view", JITK_FLOAT32, 2, {4096, 4096}, {1, 4096}, 0, 2, false, 'r', 32,
       4, 1, 1, 0, 16, 0, 0, 0, 8, 1},
      /* Axes 0 and 2 of a 3-D array: two reduced dimensions, contiguous
       * innermost: along the elements, 16-byte vectors of its runs of
       * 128, no split (2048 groups an output); runs of 5 take no vectors
       * and split in 2 chunks. */
      {"axes 0 and 2", JITK_FLOAT32, 3, {64, 50, 128}, {0}, 0, 5, false, 'i', 256, 4, 1, 2, 0, 1, 0, 0, 0, 0, 0},
      /* Runs of 16 float32 in rows of 256 among 16 outputs: whole rows,
       * four vectors a run; runs of two int8 in rows of 128: segments of
       * 8 vectors of 8 (four outputs each, 64 bytes). */
      {"axes 0 and 2, runs of 16", JITK_FLOAT32, 3, {65536, 16, 16}, {0}, 0, 5, false, 'r', 32, 4,
       1, 2, 0, 2048, 0, 0, 0, 64, 16},
      {"axes 0 and 2, int8 runs of 2", JITK_INT8, 3, {4096, 64, 2}, {0}, 0, 5, false, 'r', 32, 8,
       1, 2, 0, 16, 0, 0, 0, 8, 2},
      /* Runs of 16 among many outputs (more than four a multiprocessor):
       * along the elements, as 'i' reads them. */
      {"axes 0 and 2, 8192 outputs", JITK_FLOAT32, 3, {256, 8192, 16}, {0}, 0, 5, false, 'i', 32,
       4, 1, 2, 0, 1, 0, 0, 0, 0, 0},
      {"axes 0 and 2, runs of 5", JITK_FLOAT32, 3, {2048, 50, 5}, {0}, 0, 5, false, 'i', 256, 1, 1,
       2, 0, 2, 0, 0, 0, 0, 0},
      /* Runs of 2 float32: 8-byte vectors. */
      {"axes 0 and 2, runs of 2", JITK_FLOAT32, 3, {8192, 50, 2}, {0}, 0, 5, false, 'i', 256, 2, 1,
       2, 0, 2, 0, 0, 0, 0, 0},
      /* Axis 1 of a 3-D array: the outer and inner kept dimensions do not
       * merge; rows of 96 outputs in three segments of 32. */
      {"middle axis", JITK_FLOAT32, 3, {8, 1000, 96}, {0}, 0, 2, false, 'r', 32, 4, 2, 1, 0, 3, 0,
       0, 0, 8, 1},
      /* The same with 16 outputs a row: whole rows of four vectors, 64
       * rows a block at a time; of float16 too (vectors of four). */
      {"middle axis, 16 wide", JITK_FLOAT32, 3, {256, 8192, 16}, {0}, 0, 2, false, 'r', 32, 4, 2, 1,
       0, 8, 0, 0, 0, 4, 1},
      {"middle axis, 16 float16 wide", JITK_FLOAT16, 3, {256, 8192, 16}, {0}, 0, 2, false, 'r', 32,
       4, 2, 1, 0, 8, 0, 0, 0, 4, 1},
      {"float16 axes 0 and 1, 16 wide", JITK_FLOAT16, 3, {256, 8192, 16}, {0}, 0, 3, false, 'r',
       32, 4, 1, 1, 0, 2112, 0, 0, 0, 4, 1},
      /* Rows of four float16: one 8-byte vector a row, four rows a
       * thread; rows of four float32, one 16-byte vector, two a thread. */
      {"rows of four halves", JITK_FLOAT16, 2, {1 << 20, 4}, {0}, 0, 2, false, 'm', 4, 4, 1, 1, 0,
       1, 0, 0, 0, 0, 0},
      {"rows of four", JITK_FLOAT32, 2, {1 << 24, 4}, {0}, 0, 2, false, 'm', 2, 4, 1, 1, 0, 1, 0, 0, 0, 0, 0},
      /* A sum over an axis of extent 1: one element an output, eight
       * float16 or float32 outputs a thread. */
      {"axis of extent 1", JITK_FLOAT16, 2, {1 << 26, 1}, {0}, 0, 2, false, 'm', 8, 1, 1, 1, 0, 1,
       0, 0, 0, 0, 0},
      /* A sum over a short outer axis of many outputs: each warp owns 32
       * outputs and reads all 16 rows; the same with a row of 16 outputs
       * and two rows a warp at a time. */
      {"short outer axis", JITK_FLOAT32, 2, {16, 1 << 20}, {0}, 0, 1, false, 'o', 32, 1, 1, 1, 0, 1,
       0, 1, 0, 0, 0},
      /* Of float16, whose warps would read 64 bytes of a row: segments
       * of 128 vectors, two rows at a time (8 rows a thread). */
      {"short outer axis, float16", JITK_FLOAT16, 2, {16, 1 << 20}, {0}, 0, 1, false, 'r', 32, 4, 1,
       1, 0, 1, 0, 0, 0, 128, 1},
      {"short middle axis", JITK_FLOAT32, 3, {65536, 16, 16}, {0}, 0, 2, false, 'o', 32, 1, 2, 1, 0,
       1, 16, 1, 0, 0, 0},
      /* Past 2^31 elements: 64-bit indexing. */
      {"past 2^31", JITK_UINT8, 2, {3, 715827889}, {0}, 0, 3, false, 'i', 256, 1, 1, 1, 1, 2112, 0, 0, 0, 0, 0},
      /* Reducing nothing: one element per output. */
      {"no axes", JITK_FLOAT32, 1, {5000}, {0}, 0, 0, false, 'm', 8, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0},
  };
  /* clang-format on */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i]);
}

/* The candidates of autotuning on one layout, column sums of 16384^2
 * float32 (the layout's own choice: segments of 32 outputs, split in 4):
 * along the reduced elements applies, with its own group and split; a
 * block per short row of outputs does not (16384 outputs a row), nor one
 * group an output, nor warps owning rows of 32 outputs (512 rows: fewer
 * than eight warps a multiprocessor); 32 outputs a block across outputs
 * does, and segments again. On four tall columns (whole rows of one
 * vector, the layout's own), a block per row of outputs applies and
 * warps owning the single row do not. */
Test(reduction_layout, autotune_candidates) {
  jitk_engine *e = jt_compile_engine("sm_90");
  jk_param_list params;
  memset(&params, 0, sizeof params);
  JT_OK(e, jk_params_parse(e, "T x", "in_params", false, &params));
  JT_OK(e, jk_params_parse(e, "T y", "out_params", true, &params));
  for (int shape = 0; shape < 2; shape++) {
    static jk_red_plan pl;
    memset(&pl, 0, sizeof pl);
    int64_t rows = shape == 0 ? 16384 : 1 << 24, cols = shape == 0 ? 16384 : 4;
    jk_view *x = &pl.a.views[0], *y = &pl.a.views[1];
    x->data = (char *)(uintptr_t)0x10000000;
    x->dtype = y->dtype = JITK_FLOAT32;
    x->ndim = 2;
    x->shape[0] = rows;
    x->shape[1] = cols;
    x->strides[0] = cols;
    x->strides[1] = 1;
    x->size = rows * cols;
    y->data = (char *)(uintptr_t)0x90000000;
    y->ndim = 1;
    y->shape[0] = cols;
    y->strides[0] = 1;
    y->size = cols;
    pl.ndim = 2;
    pl.shape[0] = rows;
    pl.shape[1] = cols;
    pl.reduced[0] = true;
    pl.K = cols;
    pl.R = rows;
    pl.out_ndim = 1;
    pl.out_shape[0] = cols;
    pl.a.is_array[0] = pl.a.is_array[1] = true;
    pl.a.dtype[0] = pl.a.dtype[1] = JITK_FLOAT32;
    jk_red_spec spec;
    memset(&spec, 0, sizeof spec);
    jk_red_layout(&pl, &params, 1, false, false, 132, &spec);
    if (shape == 1) {
      cr_assert(spec.strategy == 'r' && spec.rcols == 1 && spec.rrun == 1 && spec.vec == 4);
      cr_assert(!jk_red_choose(&pl, 2, 132, 'w', &spec), "one row of outputs for 132 SMs");
      cr_assert(jk_red_choose(&pl, 2, 132, 'c', &spec) && spec.strategy == 'o' && spec.ocols == 4 &&
                spec.rcols == 0);
      cr_assert(jk_red_choose(&pl, 2, 132, 'o', &spec) && spec.strategy == 'o');
      cr_assert(jk_red_choose(&pl, 2, 132, 'r', &spec) && spec.strategy == 'r' &&
                pl.units == (uint64_t)rows);
      continue;
    }
    cr_assert(spec.strategy == 'r' && spec.rcols == 8 && pl.S == 4, "own: %c, %d vectors",
              spec.strategy, spec.rcols);
    cr_assert(jk_red_choose(&pl, 2, 132, 'i', &spec));
    cr_assert(spec.strategy == 'i' && spec.group == 256 && spec.vec == 1 && pl.S == 1,
              "'i' on columns: %c, group %d, vec %d, %llu splits", spec.strategy, spec.group,
              spec.vec, (unsigned long long)pl.S);
    cr_assert(!jk_red_choose(&pl, 2, 132, 'c', &spec), "16384 outputs a row");
    cr_assert(!jk_red_choose(&pl, 2, 132, 'm', &spec), "16384 elements an output");
    cr_assert(!jk_red_choose(&pl, 2, 132, 'w', &spec), "512 rows of outputs for 132 SMs");
    cr_assert(jk_red_choose(&pl, 2, 132, 'o', &spec));
    cr_assert(spec.strategy == 'o' && !spec.owarp && spec.ocols == 0 && spec.rcols == 0 &&
              pl.S == 4);
    cr_assert(jk_red_choose(&pl, 2, 132, 'r', &spec));
    cr_assert(spec.strategy == 'r' && spec.rcols == 8 && pl.units == 16384);
    cr_assert(jk_red_choose(&pl, 2, 132, 'i', &spec));
    cr_assert(jk_red_choose(&pl, 2, 132, 0, &spec));
    cr_assert(spec.strategy == 'r' && spec.rcols == 8 && pl.S == 4, "back to the layout's own");
  }
  jk_params_free(e, &params);
  jitk_engine_destroy(e);
}
