/*
 * The iteration space of an elementwise loop: NumPy broadcasting, then
 * dimensions reordered for coalesced access and collapsed where memory is
 * contiguous across them, then the index width.
 */
#ifndef JITK_SRC_ARRAY_ITER_H
#define JITK_SRC_ARRAY_ITER_H

#include <stdbool.h>
#include <stdint.h>

#include "array/array.h"

#define JK_MAX_OPERANDS 64

typedef struct jk_operand {
  char *data;
  size_t itemsize;
  int64_t strides[JITK_MAX_NDIM]; /* elements; 0 along broadcast dimensions */
} jk_operand;

typedef struct jk_iter {
  int ndim;
  int64_t shape[JITK_MAX_NDIM];
  int64_t size;
  int nops;
  jk_operand ops[JK_MAX_OPERANDS];
} jk_iter;

/*
 * The broadcast shape of `n` views (NumPy's rules: align the trailing
 * dimensions; extents must be equal or 1). `names` label the views in the
 * message when they do not broadcast.
 */
jitk_status jk_broadcast_shape(const jitk_engine *e, const jk_view *const *views,
                               const char *const *names, int n, int *ndim, int64_t *shape);

/* Starts an iteration over `shape`. */
void jk_iter_init(jk_iter *it, int ndim, const int64_t *shape);

/* Adds a view, broadcast to the iteration's shape (its strides become 0
 * along the dimensions it lacks or has of extent 1). The view's shape must
 * broadcast to the iteration's; callers check with jk_broadcast_shape. */
void jk_iter_add(jk_iter *it, const jk_view *v);

/*
 * Drops dimensions of extent 1, orders the rest so that the innermost has
 * the smallest stride in the first operand (the first output, by the
 * callers' convention) and the next ones break ties, and merges neighbours
 * that every operand walks contiguously. The result runs over the same
 * elements in an order that reads and writes memory in long runs. Without
 * `reorder` the C order is kept (kernels whose code uses the element index
 * need it), and only extent-1 dimensions and contiguous neighbours go.
 */
void jk_iter_coalesce(jk_iter *it, bool reorder);

/* Whether every byte offset any operand reaches, and the element count,
 * fit in 31 bits: then the kernel indexes with 32-bit integers. */
bool jk_iter_fits_32(const jk_iter *it);

/* Whether every byte offset a view of `ndim` dimensions (shape, strides in
 * elements of `itemsize` bytes) reaches from its first element fits in 31
 * bits: the part of jk_iter_fits_32 for one operand, also asked of arrays
 * outside the iteration (an elementwise kernel's raw arrays). */
bool jk_span_fits_32(int ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize);

/* Byte range [lo, hi] a view touches; false for an empty view. */
bool jk_view_range(const jk_view *v, size_t itemsize, uintptr_t *lo, uintptr_t *hi);

/* Whether two views (elements of isa and isb bytes) surely share no byte,
 * where their byte ranges meet: every element of either starts a multiple
 * of g bytes from its first, g the greatest common divisor of both views'
 * strides in bytes, so where the second's first byte lies r bytes past a
 * multiple of g from the first's, with isa <= r and r + isb <= g, no two
 * elements meet (interleaved views, as out[0::2] and out[1::2]). False
 * where that does not show it, which may still be disjoint. */
bool jk_views_interleave(const jk_view *a, size_t isa, const jk_view *b, size_t isb);

/* Whether two views are the same elements in the same order. */
bool jk_view_same(const jk_view *a, const jk_view *b);

#endif
