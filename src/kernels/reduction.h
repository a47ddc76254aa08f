/*
 * The layout of a reduction launch, apart from the kernel object so that
 * tests can check the choice on shapes without a GPU.
 */
#ifndef JITK_SRC_KERNELS_REDUCTION_H
#define JITK_SRC_KERNELS_REDUCTION_H

#include "array/iter.h"
#include "codegen/codegen.h"
#include "kernels/gen.h"

typedef struct jk_red_plan {
  jk_gen_args a;
  int ndim; /* of the inputs' broadcast shape */
  int64_t shape[JITK_MAX_NDIM];
  bool reduced[JITK_MAX_NDIM];
  int out_ndim;
  int64_t out_shape[JITK_MAX_NDIM];
  int64_t K, R; /* outputs, and elements reduced into each */
  /* Kept dimensions: outputs then non-raw array inputs; reduced ones:
   * the inputs alone. op_k/op_r: each parameter's operand, -1 for none. */
  jk_iter kept, red;
  int op_k[JK_MAX_EW_PARAMS], op_r[JK_MAX_EW_PARAMS];
  uint64_t S, chunk, units; /* splits per output, units per split, units per output */
} jk_red_plan;

/*
 * From a plan whose views (inputs and outputs, a.views / a.is_array /
 * a.dtype), shape, reduced mask, K and R are set: the kept and reduced
 * iterations, collapsed (the reduced ones in C order when `c_order`), and
 * in `spec` the dimensions, strategy, group, vector width and index
 * width; in the plan the split. `sms`: the device's multiprocessors.
 */
void jk_red_layout(jk_red_plan *pl, const jk_param_list *params, int num_in, bool keepdims,
                   bool c_order, int sms, jk_red_spec *spec);

/*
 * After jk_red_layout: the strategy again, the layout's own (`force` 0)
 * or a candidate of autotuning ('i', 'o', 'c', 'w', 'm' or 'r'; see
 * reduction.c), with its group, vector width and split. False when the
 * candidate does not apply; the spec and split are then to be chosen
 * again.
 */
bool jk_red_choose(jk_red_plan *pl, int n, int sms, char force, jk_red_spec *spec);

/* The chunks a split folds together at the first level of its combine
 * (all of them up to 32, else about the square root of S). */
uint64_t jk_red_fanin(uint64_t S);

#endif
