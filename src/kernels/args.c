/*
 * The arguments of a generated kernel's launch (see gen.h): classifying
 * them and binding the placeholders, the outputs jitk allocates, the rules
 * on overlapping outputs, and the packing of raw and scalar parameters.
 * The specialization table and the parameter lists stay in gen.c.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "array/iter.h"
#include "kernels/gen.h"
#include "kernels/kernels.h"

jitk_status jk_gen_bind(const jk_gen *g, const jitk_arg *args, size_t nargs, jk_gen_args *a) {
  jitk_engine *e = g->engine;
  const jk_param_list *pls = &g->params;
  for (size_t h = 0; h < pls->num_placeholders; h++) a->bound[h] = JITK_DTYPE_NONE;
  /* Arrays bind first, inputs then given outputs; scalars only bind what
   * no array did (as CuPy: an array's dtype wins over a scalar's). */
  for (int pass = 0; pass < 2; pass++) {
    for (int p = 0; p < (int)pls->count; p++) {
      const jk_param_decl *d = &pls->params[p];
      bool given = (size_t)p < nargs && args[p].kind != JITK_ARG_ALLOCATE;
      if (!given) continue;
      jitk_dtype have = a->is_array[p] ? a->views[p].dtype : args[p].dtype;
      if ((pass == 0) != a->is_array[p]) continue;
      if (d->placeholder < 0) {
        if (a->is_array[p] && have != d->dtype)
          return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                         "kernel %s: %s is %s, but its parameter says %s", g->name, g->labels[p],
                         jk_dtype(have)->name, jk_dtype(d->dtype)->name);
        continue;
      }
      jitk_dtype *slot = &a->bound[d->placeholder];
      if (*slot == JITK_DTYPE_NONE) {
        *slot = have;
      } else if (*slot != have && a->is_array[p]) {
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                       "kernel %s: placeholder %s is bound to both %s and %s (%s is %s)", g->name,
                       pls->placeholders[d->placeholder], jk_dtype(*slot)->name,
                       jk_dtype(have)->name, g->labels[p], jk_dtype(have)->name);
      }
    }
  }
  for (int p = 0; p < (int)pls->count; p++) {
    const jk_param_decl *d = &pls->params[p];
    if (d->placeholder < 0) {
      a->dtype[p] = d->dtype;
      continue;
    }
    a->dtype[p] = a->bound[d->placeholder];
    if (a->dtype[p] == JITK_DTYPE_NONE)
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "kernel %s: the type %s of %s is not bound by any argument; give an array "
                     "of that type (or the output itself)",
                     g->name, pls->placeholders[d->placeholder], g->labels[p]);
  }
  return JITK_OK;
}

jitk_status jk_gen_classify(jk_gen *g, const char *what, const jitk_arg *args, size_t nargs,
                            bool can_allocate, jk_gen_args *a) {
  jitk_engine *e = g->engine;
  int n = (int)g->params.count;
  if (JK_UNLIKELY(nargs != (size_t)g->num_in && nargs != (size_t)(g->num_in + g->num_out)))
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT,
                   "kernel %s takes %d inputs and %d outputs: %d or %d arguments, not %zu", g->name,
                   g->num_in, g->num_out, g->num_in, g->num_in + g->num_out, nargs);
  if (JK_UNLIKELY(nargs > 0 && args == NULL))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%s: args is NULL", what);
  a->nb = 0;
  a->need_alloc = false;
  for (int p = 0; p < n; p++) {
    const jk_param_decl *d = &g->params.params[p];
    a->is_array[p] = false;
    bool present = (size_t)p < nargs && args[p].kind != JITK_ARG_ALLOCATE;
    if (d->output && !present) {
      a->need_alloc = true;
      continue;
    }
    const jitk_arg *x = &args[p];
    if (x->kind == JITK_ARG_ARRAY) {
      jitk_status st = jk_view_from_tensor(e, x->tensor, g->labels[p], &a->views[p]);
      if (JK_UNLIKELY(st != JITK_OK)) return st;
      a->is_array[p] = true;
      if (!d->raw) {
        a->bviews[a->nb] = &a->views[p];
        a->bparam[a->nb] = p;
        a->bnames[a->nb++] = g->labels[p];
      }
    } else if (x->kind == JITK_ARG_SCALAR) {
      if (d->raw || d->output)
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "kernel %s: %s must be an array, not a scalar",
                       g->name, g->labels[p]);
      /* A scalar may bind a placeholder, whose dtype the generated code
       * then names: one outside the table is refused here, before any
       * code is made from it. */
      if (JK_UNLIKELY(jk_dtype(x->dtype) == NULL))
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                       "kernel %s: %s is a scalar of dtype %d, not one of jitk's dtypes", g->name,
                       g->labels[p], (int)x->dtype);
    } else {
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "kernel %s: %s must be a DLTensor (jitk_arg_array) or a scalar; "
                     "generated kernels take no bare pointers",
                     g->name, g->labels[p]);
    }
  }
  if (a->need_alloc && !can_allocate)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: an output is to be allocated but `outputs` is NULL", g->name);
  return JITK_OK;
}

typedef struct jk_managed {
  DLManagedTensor t;
  jitk_engine *engine;
  jitk_stream stream;
  int64_t shape[JITK_MAX_NDIM];
} jk_managed;

static void managed_deleter(DLManagedTensor *t) {
  jk_managed *m = (jk_managed *)t;
  jitk_device_free(m->engine, t->dl_tensor.data, m->stream);
  jk_free(m->engine, m);
}

jitk_status jk_gen_allocate(jitk_engine *e, jitk_stream stream, jitk_dtype dtype, int ndim,
                            const int64_t *shape, DLManagedTensor **out, jk_view *view) {
  const jitk_dtype_info *info = jk_dtype(dtype);
  /* The shape's element count fits in 64 bits (jk_broadcast_shape); its
   * bytes may not. */
  int64_t count = 1;
  for (int d = 0; d < ndim; d++) count *= shape[d];
  if ((uint64_t)count > SIZE_MAX / info->size)
    return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                   "an output of %lld elements of %zu bytes is more memory than can be "
                   "addressed",
                   (long long)count, info->size);
  jk_managed *m = jk_calloc(e, 1, sizeof *m);
  if (m == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  void *data = NULL;
  /* An empty array still gets a distinct allocation, so that it has an
   * address to compare. */
  jitk_status st =
      jitk_device_alloc(e, count ? (size_t)count * info->size : info->size, stream, &data);
  if (st != JITK_OK) {
    jk_free(e, m);
    return st;
  }
  m->engine = e;
  m->stream = stream;
  memcpy(m->shape, shape, sizeof(int64_t) * (size_t)ndim);
  m->t.dl_tensor.data = data;
  m->t.dl_tensor.device.device_type = kDLCUDA;
  m->t.dl_tensor.device.device_id = e->ordinal;
  m->t.dl_tensor.ndim = ndim;
  m->t.dl_tensor.dtype = info->dl;
  m->t.dl_tensor.shape = m->shape;
  m->t.dl_tensor.strides = NULL;
  m->t.dl_tensor.byte_offset = 0;
  m->t.manager_ctx = m;
  m->t.deleter = managed_deleter;
  *out = &m->t;
  return jk_view_from_tensor(e, &m->t.dl_tensor, "output", view);
}

void jk_gen_release_outputs(int num_out, DLManagedTensor **outputs) {
  if (outputs == NULL) return;
  for (int j = 0; j < num_out; j++)
    if (outputs[j] != NULL) {
      outputs[j]->deleter(outputs[j]);
      outputs[j] = NULL;
    }
}

jitk_status jk_gen_finish_outputs(jitk_status st, int num_out, DLManagedTensor **made,
                                  DLManagedTensor **outputs) {
  /* Outputs allocated for a launch that failed go back; the caller's
   * array is written only on success, as out-parameters are. */
  if (st != JITK_OK) {
    jk_gen_release_outputs(num_out, made);
    return st;
  }
  if (outputs != NULL)
    for (int j = 0; j < num_out; j++) outputs[j] = made[j];
  return JITK_OK;
}

/* Whether every index of a view reaches an element of its own, by a test
 * that suffices rather than decides: the dimensions of extent above 1,
 * taken by growing |stride|, each step past the furthest offset the ones
 * before it reach. Every layout that slicing, transposing and reshaping
 * make of an array passes; strides such as (1, 1) for a 4 x 4 view, which
 * give 16 indices 7 elements, do not. */
static bool distinct_elements(const jk_view *v) {
  uint64_t step[JITK_MAX_NDIM], ext[JITK_MAX_NDIM];
  int n = 0;
  for (int d = 0; d < v->ndim; d++) {
    if (v->shape[d] == 0) return true; /* no elements */
    if (v->shape[d] == 1) continue;
    uint64_t s = v->strides[d] < 0 ? 0 - (uint64_t)v->strides[d] : (uint64_t)v->strides[d];
    int k = n++;
    for (; k > 0 && step[k - 1] > s; k--) {
      step[k] = step[k - 1];
      ext[k] = ext[k - 1];
    }
    step[k] = s;
    ext[k] = (uint64_t)v->shape[d];
  }
  /* The view's reach was checked below 2^62 bytes, so no sum overflows. */
  uint64_t reach = 0;
  for (int k = 0; k < n; k++) {
    if (step[k] <= reach) return false;
    reach += (ext[k] - 1) * step[k];
  }
  return true;
}

bool jk_gen_raw_fits_32(const jk_gen *g, const jk_gen_args *a) {
  for (size_t p = 0; p < g->params.count; p++) {
    if (!g->params.params[p].raw || !a->is_array[p]) continue;
    const jk_view *v = &a->views[p];
    const int64_t es = (int64_t)jk_dtype(a->dtype[p])->size;
    if (v->size >= ((int64_t)1 << 31) / es || !jk_span_fits_32(v->ndim, v->shape, v->strides, es))
      return false;
  }
  return true;
}

jitk_status jk_gen_check_overlap(const jk_gen *g, const jk_gen_args *a) {
  jitk_engine *e = g->engine;
  int n = (int)g->params.count;
  for (int o = g->num_in; o < n; o++) {
    /* An output not made yet (jitk_*_outputs) overlaps nothing. */
    if (!a->is_array[o]) continue;
    bool raw_o = g->params.params[o].raw;
    const jk_view *ov = &a->views[o];
    /* A raw output is written where the operation says, so a stride of 0
     * is the operation's business; a non-raw one is written once per
     * index, and a stride of 0 would write one element many times. */
    for (int d = 0; !raw_o && d < ov->ndim; d++)
      if (ov->shape[d] > 1 && ov->strides[d] == 0)
        return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                       "kernel %s: %s has stride 0 in dimension %d, so elements would be "
                       "written twice",
                       g->name, g->labels[o], d);
    /* The same for strides that fold the indices onto fewer elements. */
    if (!raw_o && !distinct_elements(ov))
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "kernel %s: %s's strides may give two indices the same element, which "
                     "would then be written twice; write to an array whose elements are "
                     "distinct",
                     g->name, g->labels[o]);
    size_t isz = jk_dtype(ov->dtype)->size;
    uintptr_t olo, ohi;
    if (!jk_view_range(ov, isz, &olo, &ohi)) continue;
    /* Against every non-raw array: those are read or written one element
     * per index, and a partial overlap would make the result depend on
     * the order the loop runs in. Raw arrays, inputs or outputs, may
     * share memory with a raw output: the operation indexes all of them
     * itself. */
    for (int p = 0; p < n; p++) {
      if (p == o || !a->is_array[p] || g->params.params[p].raw) continue;
      /* Two non-raw outputs: each pair once. A raw output is not met as
       * the inner one, so it checks every non-raw output itself. */
      if (!raw_o && p > o && g->params.params[p].output) continue;
      const jk_view *iv = &a->views[p];
      uintptr_t lo, hi;
      if (!jk_view_range(iv, jk_dtype(iv->dtype)->size, &lo, &hi)) continue;
      if (hi < olo || lo > ohi) continue;
      if (!g->params.params[p].output && jk_view_same(ov, iv))
        continue; /* in place: exactly the same elements */
      /* Interleaved views (real and imaginary parts as out[0::2] and
       * out[1::2]) span the same bytes and share none. */
      if (jk_views_interleave(ov, isz, iv, jk_dtype(iv->dtype)->size)) continue;
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "kernel %s: %s overlaps %s without being the same array; an output "
                     "may only be exactly one of the inputs, and share no element with any "
                     "other array",
                     g->name, g->labels[o], g->labels[p]);
    }
  }
  return JITK_OK;
}

jitk_status jk_gen_push_other(const jk_gen *g, const jk_gen_args *a, const jitk_arg *args, int p,
                              bool raw, void **kp, int *np, unsigned char **cur) {
  if (raw) {
    const jk_view *rv = &a->views[p];
    void *ptr = rv->data;
    memcpy(*cur, &ptr, 8);
    memcpy(*cur + 8, rv->shape, 8 * (size_t)rv->ndim);
    memcpy(*cur + 8 + 8 * (size_t)rv->ndim, rv->strides, 8 * (size_t)rv->ndim);
    kp[(*np)++] = *cur;
    *cur += 8 + 16 * (size_t)rv->ndim;
    return JITK_OK;
  }
  memset(*cur, 0, 16); /* the bytes past a narrow value, as JK_PUSH does */
  jitk_status st = jk_convert_scalar(g->engine, &args[p], a->dtype[p], *cur, g->labels[p]);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  kp[(*np)++] = *cur;
  *cur += 16;
  return JITK_OK;
}

void jk_gen_magic(uint64_t d, bool wide, uint64_t *magic, unsigned *shift) {
  unsigned s = 0;
  while (s < 63 && ((uint64_t)1 << s) < d) s++;
  if (wide) {
    unsigned __int128 m = ((((unsigned __int128)1) << 64) * (((uint64_t)1 << s) - d)) / d + 1;
    *magic = (uint64_t)m;
  } else {
    *magic = ((((uint64_t)1) << 32) * (((uint64_t)1 << s) - d)) / d + 1;
  }
  *shift = s;
}

/* --- The launch memo --- */

bool jk_memo_record(jk_memo_arg *rec, const jitk_arg *args, size_t nargs) {
  for (size_t p = 0; p < nargs; p++) {
    const jitk_arg *x = &args[p];
    jk_memo_arg *a = &rec[p];
    memset(a, 0, sizeof *a);
    a->kind = x->kind;
    if (x->kind == JITK_ARG_SCALAR) {
      a->dtype = x->dtype;
    } else if (x->kind == JITK_ARG_ARRAY) {
      const DLTensor *t = x->tensor;
      a->device = t->device;
      a->dl = t->dtype;
      a->strided = t->strides != NULL;
      a->align = (unsigned char)(((uintptr_t)t->data + (uintptr_t)t->byte_offset) & 15u);
    } else {
      return false;
    }
  }
  return true;
}

bool jk_memo_matches(const jk_memo_arg *rec, const jk_view *views, const jitk_arg *args,
                     size_t nargs) {
  if (nargs > 0 && args == NULL) return false;
  for (size_t p = 0; p < nargs; p++) {
    const jitk_arg *x = &args[p];
    const jk_memo_arg *a = &rec[p];
    if (x->kind != a->kind) return false;
    if (x->kind == JITK_ARG_SCALAR) {
      if (x->dtype != a->dtype) return false;
      continue;
    }
    const DLTensor *t = x->tensor;
    const jk_view *v = &views[p];
    if (t == NULL || t->ndim != v->ndim || t->device.device_type != a->device.device_type ||
        t->device.device_id != a->device.device_id || t->dtype.code != a->dl.code ||
        t->dtype.bits != a->dl.bits || t->dtype.lanes != a->dl.lanes ||
        (t->strides != NULL) != a->strided)
      return false;
    size_t dims = sizeof(int64_t) * (size_t)v->ndim;
    if (v->ndim > 0 && (t->shape == NULL || memcmp(t->shape, v->shape, dims) != 0)) return false;
    if (t->strides != NULL && v->ndim > 0 && memcmp(t->strides, v->strides, dims) != 0)
      return false;
    uintptr_t first = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    if ((first & 15u) != a->align || (t->data == NULL && v->size != 0)) return false;
  }
  return true;
}
