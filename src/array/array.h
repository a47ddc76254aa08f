/*
 * dtypes and arrays: the dtype table, promotion, and DLTensor checks.
 */
#ifndef JITK_SRC_ARRAY_ARRAY_H
#define JITK_SRC_ARRAY_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jitk/jitk.h>

/* The table row, or NULL for JITK_DTYPE_NONE and out-of-range values. */
const jitk_dtype_info *jk_dtype(jitk_dtype d);
/* Whether p is aligned to dtype d's elements (d a dtype of the table),
 * as the GPU requires of every element it reads or writes. */
bool jk_dtype_aligned(const void *p, jitk_dtype d);
/* By NumPy name, not NUL-terminated; JITK_DTYPE_NONE when unknown. */
jitk_dtype jk_dtype_lookup(const char *name, size_t len);
jitk_dtype jk_dtype_from_dl(DLDataType dl);
/* JITK_DTYPE_NONE when either is not a dtype, or when an 8-bit float
 * meets another dtype (they promote only with themselves). */
jitk_dtype jk_promote(jitk_dtype a, jitk_dtype b);
/* A double rounded to the 8-bit float `d` (JITK_FLOAT8_E4M3 or
 * JITK_FLOAT8_E5M2) as CUDA's saturating conversions round it. */
uint8_t jk_double_to_float8(double value, jitk_dtype d);
/* A double rounded once to float16 or bfloat16 (to nearest even, past the
 * largest finite value to infinity), as NumPy's float64 to float16 and
 * __double2bfloat16 do; through a float first, two roundings could land
 * one unit off. */
uint16_t jk_double_to_half(double value);
uint16_t jk_double_to_bfloat16(double value);

/* A checked view of a DLTensor: the first element's address (byte_offset
 * applied), and strides in elements, filled in for C order when the
 * tensor had none. */
typedef struct jk_view {
  char *data;
  jitk_dtype dtype;
  int ndim;
  int64_t size; /* number of elements */
  int64_t shape[JITK_MAX_NDIM];
  int64_t strides[JITK_MAX_NDIM];
} jk_view;

/* Whether the tensor's memory is CUDA memory the engine's device can
 * reach (its own, a peer's it was let reach, or pinned host memory);
 * JITK_ERR_INVALID_ARRAY naming `what` otherwise. t is not NULL. */
jitk_status jk_tensor_reachable(const jitk_engine *e, const DLTensor *t, const char *what);

/*
 * Checks that `t` is usable by a kernel on engine `e`: CUDA memory of the
 * engine's device, a dtype jitk knows, at most JITK_MAX_NDIM dimensions,
 * no negative extents. `what` names the tensor in messages ("argument 2").
 * JITK_ERR_INVALID_ARRAY otherwise.
 */
jitk_status jk_view_from_tensor(const jitk_engine *e, const DLTensor *t, const char *what,
                                jk_view *out);

/* Writes scalar `a` converted to dtype `to` (as a C cast would) at `out`,
 * which has room for the largest dtype. A complex scalar for a real dtype
 * is refused: its imaginary part would be lost silently. */
jitk_status jk_convert_scalar(const jitk_engine *e, const jitk_arg *a, jitk_dtype to, void *out,
                              const char *what);

#endif
