#include <stdio.h>
#include <string.h>

#include "array/iter.h"
#include "base/base.h"

jitk_status jk_broadcast_shape(const jitk_engine *e, const jk_view *const *views,
                               const char *const *names, int n, int *ndim, int64_t *shape) {
  int nd = 0;
  for (int k = 0; k < n; k++)
    if (views[k]->ndim > nd) nd = views[k]->ndim;
  for (int d = 0; d < nd; d++) shape[d] = 1;
  for (int k = 0; k < n; k++) {
    const jk_view *v = views[k];
    for (int d = 0; d < v->ndim; d++) {
      int out = nd - v->ndim + d;
      int64_t ext = v->shape[d];
      if (ext == shape[out] || ext == 1) continue;
      if (shape[out] == 1) {
        shape[out] = ext;
        continue;
      }
      /* Find who set the other extent, to name both arrays. */
      int other = 0;
      for (int j = 0; j < k; j++) {
        int dj = out - (nd - views[j]->ndim);
        if (dj >= 0 && views[j]->shape[dj] == shape[out]) {
          other = j;
          break;
        }
      }
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "%s (extent %lld in dimension %d of %d) does not broadcast with %s (extent "
                     "%lld there)",
                     names[k], (long long)ext, d, v->ndim, names[other], (long long)shape[out]);
    }
  }
  /* Each view's own element count fits in 64 bits (jk_view_from_tensor),
   * but the broadcast of two can have more: (2^40, 1) with (1, 2^40). The
   * count must fit, since launches and allocations compute with it; an
   * extent of 0 makes any shape empty. */
  bool empty = false;
  for (int d = 0; d < nd; d++) empty |= shape[d] == 0;
  int64_t count = 1;
  for (int d = 0; d < nd && !empty; d++) {
    if (shape[d] > INT64_MAX / count)
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "the arrays broadcast to more than 2^63 elements (extent %lld in "
                     "dimension %d of %d, after %lld elements in the ones before)",
                     (long long)shape[d], d, nd, (long long)count);
    count *= shape[d];
  }
  *ndim = nd;
  return JITK_OK;
}

void jk_iter_init(jk_iter *it, int ndim, const int64_t *shape) {
  it->ndim = ndim;
  it->nops = 0;
  it->size = 1;
  for (int d = 0; d < ndim; d++) {
    it->shape[d] = shape[d];
    it->size *= shape[d];
  }
}

void jk_iter_add(jk_iter *it, const jk_view *v) {
  jk_operand *op = &it->ops[it->nops++];
  const jitk_dtype_info *info = jk_dtype(v->dtype);
  op->data = v->data;
  op->itemsize = info ? info->size : 1;
  int lead = it->ndim - v->ndim;
  for (int d = 0; d < it->ndim; d++) {
    int vd = d - lead;
    op->strides[d] = (vd < 0 || v->shape[vd] == 1) ? 0 : v->strides[vd];
  }
}

/* Whether dimension a should be outside dimension b. */
static bool outer_than(const jk_iter *it, int a, int b) {
  for (int k = 0; k < it->nops; k++) {
    int64_t sa = it->ops[k].strides[a], sb = it->ops[k].strides[b];
    if (sa < 0) sa = -sa;
    if (sb < 0) sb = -sb;
    if (sa == 0 || sb == 0) continue; /* broadcast: no preference */
    if (sa != sb) return sa > sb;
  }
  return a < b; /* keep C order otherwise */
}

void jk_iter_coalesce(jk_iter *it, bool reorder) {
  /* Drop extent-1 dimensions. */
  int nd = 0;
  for (int d = 0; d < it->ndim; d++) {
    if (it->shape[d] == 1) continue;
    it->shape[nd] = it->shape[d];
    for (int k = 0; k < it->nops; k++) it->ops[k].strides[nd] = it->ops[k].strides[d];
    nd++;
  }
  it->ndim = nd;
  /* Order: a stable insertion sort of the dimensions, outermost first. */
  int perm[JITK_MAX_NDIM];
  for (int d = 0; d < nd; d++) perm[d] = d;
  for (int i = 1; reorder && i < nd; i++) {
    int x = perm[i], j = i - 1;
    while (j >= 0 && outer_than(it, x, perm[j])) {
      perm[j + 1] = perm[j];
      j--;
    }
    perm[j + 1] = x;
  }
  int64_t shape[JITK_MAX_NDIM];
  for (int d = 0; d < nd; d++) shape[d] = it->shape[perm[d]];
  memcpy(it->shape, shape, sizeof(int64_t) * (size_t)nd);
  for (int k = 0; k < it->nops; k++) {
    int64_t s[JITK_MAX_NDIM];
    for (int d = 0; d < nd; d++) s[d] = it->ops[k].strides[perm[d]];
    memcpy(it->ops[k].strides, s, sizeof(int64_t) * (size_t)nd);
  }
  /* Merge dimension d into d + 1 when every operand steps over d exactly
   * as far as it walks through d + 1. */
  for (int d = nd - 2; d >= 0; d--) {
    bool ok = true;
    for (int k = 0; k < it->nops && ok; k++)
      ok = it->ops[k].strides[d] == it->ops[k].strides[d + 1] * it->shape[d + 1];
    if (!ok) continue;
    it->shape[d + 1] *= it->shape[d];
    for (int m = d; m < nd - 1; m++) {
      it->shape[m] = it->shape[m + 1];
      for (int k = 0; k < it->nops; k++) it->ops[k].strides[m] = it->ops[k].strides[m + 1];
    }
    nd--;
  }
  it->ndim = nd;
}

bool jk_span_fits_32(int ndim, const int64_t *shape, const int64_t *strides, int64_t itemsize) {
  const int64_t limit = ((int64_t)1 << 31) / itemsize;
  int64_t reach = 0;
  for (int d = 0; d < ndim; d++) {
    int64_t s = strides[d];
    if (s < 0) s = -s;
    if (s != 0 && (shape[d] - 1) > limit / s) return false;
    reach += s * (shape[d] - 1);
    if (reach >= limit) return false;
  }
  return true;
}

bool jk_iter_fits_32(const jk_iter *it) {
  if (it->size >= (int64_t)1 << 31) return false;
  for (int k = 0; k < it->nops; k++)
    if (!jk_span_fits_32(it->ndim, it->shape, it->ops[k].strides, (int64_t)it->ops[k].itemsize))
      return false;
  return true;
}

bool jk_view_range(const jk_view *v, size_t itemsize, uintptr_t *lo, uintptr_t *hi) {
  if (v->size == 0) return false;
  intptr_t min = 0, max = 0;
  for (int d = 0; d < v->ndim; d++) {
    intptr_t span = (intptr_t)v->strides[d] * (intptr_t)(v->shape[d] - 1);
    if (span < 0)
      min += span;
    else
      max += span;
  }
  *lo = (uintptr_t)v->data + (uintptr_t)(min * (intptr_t)itemsize);
  *hi = (uintptr_t)v->data + (uintptr_t)(max * (intptr_t)itemsize) + itemsize - 1;
  return true;
}

static uint64_t gcd_u64(uint64_t x, uint64_t y) {
  while (y != 0) {
    uint64_t t = x % y;
    x = y;
    y = t;
  }
  return x;
}

bool jk_views_interleave(const jk_view *a, size_t isa, const jk_view *b, size_t isb) {
  uint64_t g = 0;
  const jk_view *const v[2] = {a, b};
  const size_t is[2] = {isa, isb};
  for (int k = 0; k < 2; k++)
    for (int d = 0; d < v[k]->ndim; d++)
      if (v[k]->shape[d] > 1) {
        int64_t s = v[k]->strides[d];
        /* Views past 2^62 bytes are refused before this (tensor checks). */
        g = gcd_u64(g, (uint64_t)(s < 0 ? -s : s) * is[k]);
      }
  /* Single elements, or strides of 0, whose ranges the caller found to
   * meet: they share bytes. */
  if (g == 0) return false;
  int64_t gap = (int64_t)((intptr_t)b->data - (intptr_t)a->data) % (int64_t)g;
  uint64_t r = (uint64_t)(gap < 0 ? gap + (int64_t)g : gap);
  return isa <= r && r + isb <= g;
}

bool jk_view_same(const jk_view *a, const jk_view *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++) {
    if (a->shape[d] != b->shape[d]) return false;
    if (a->shape[d] != 1 && a->strides[d] != b->strides[d]) return false;
  }
  return true;
}
