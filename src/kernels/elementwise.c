/*
 * Elementwise kernels: CuPy's ElementwiseKernel semantics over DLTensors.
 *
 * A launch binds types, broadcasts shapes, collapses the iteration space,
 * picks the index width and the vector width, and looks the resulting
 * specialization up in the kernel's own small table. Only a new
 * specialization generates source and goes through the kernel cache; a
 * known one costs a table probe, the packing of the parameters, and the
 * launch. Nothing on that path allocates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "array/array.h"
#include "array/iter.h"
#include "codegen/codegen.h"
#include "driver/image.h"
#include "kernels/kernels.h"

#define JK_EW_GENERATOR "elementwise/1"
#define JK_EW_LABEL 80

typedef struct jk_ew_variant {
  jk_ew_spec spec;
  uint64_t hash;
  jk_entry *entry;
  CUfunction fn;
  unsigned max_blocks; /* blocks that fill the device once */
  char *source;
} jk_ew_variant;

struct jitk_elementwise {
  jitk_engine *engine;
  char *name, *operation, *preamble, *loop_prep, *after_loop;
  char **options;
  size_t num_options;
  jk_param_list params;
  int num_in, num_out;
  bool uses_i;
  int unroll; /* vector path: groups per thread and iteration */
  bool load_output[JK_MAX_EW_PARAMS];
  char (*labels)[JK_EW_LABEL]; /* per parameter, for messages */
  bool fill_grid; /* JITK_EW_GRID=fill: a device-filling grid that strides */
  int tile; /* transposed path: 64, or 32 when JITK_EW_TILE=32 */
  pthread_mutex_t lock; /* guards the variants */
  jk_ew_variant *variants;
  size_t num_variants;
  const char *last_source; /* a variant's source, or failed_source */
  char *failed_source;     /* of the last specialization that failed */
};

static bool is_identifier(const char *s) {
  if (s == NULL || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
    return false;
  for (const char *p = s; *p; p++)
    if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
          (*p >= '0' && *p <= '9')))
      return false;
  return true;
}

static char *dup_or_null(jitk_engine *e, const char *s, bool *oom) {
  if (s == NULL) return NULL;
  char *d = jk_strdup(e, s);
  if (d == NULL) *oom = true;
  return d;
}

void jitk_elementwise_destroy(jitk_elementwise *k) {
  if (k == NULL) return;
  jitk_engine *e = k->engine;
  for (size_t i = 0; i < k->num_variants; i++) {
    jk_entry_release(e, k->variants[i].entry);
    jk_free(e, k->variants[i].source);
  }
  jk_free(e, k->variants);
  jk_free(e, k->labels);
  jk_free(e, k->failed_source);
  jk_params_free(e, &k->params);
  for (size_t i = 0; i < k->num_options; i++) jk_free(e, k->options[i]);
  jk_free(e, k->options);
  jk_free(e, k->name);
  jk_free(e, k->operation);
  jk_free(e, k->preamble);
  jk_free(e, k->loop_prep);
  jk_free(e, k->after_loop);
  pthread_mutex_destroy(&k->lock);
  jk_free(e, k);
}

jitk_status jitk_elementwise_create(jitk_engine *e, const char *in_params, const char *out_params,
                                    const char *operation, const char *name,
                                    const jitk_elementwise_options *opts,
                                    jitk_elementwise **out) {
  if (e == NULL || in_params == NULL || out_params == NULL || operation == NULL ||
      name == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_create: an argument is NULL");
  if (!is_identifier(name) || jk_is_reserved_word(name, strlen(name)))
    return jk_fail_caret(e, JITK_ERR_PARSE, "name", name, 0, strlen(name) ? strlen(name) : 1,
                         "the kernel's name must be a C identifier");
  jitk_elementwise *k = jk_calloc(e, 1, sizeof *k);
  if (k == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  k->engine = e;
  pthread_mutex_init(&k->lock, NULL);
  jitk_status st = jk_params_parse(e, in_params, "in_params", false, &k->params);
  if (st == JITK_OK) {
    k->num_in = (int)k->params.count;
    st = jk_params_parse(e, out_params, "out_params", true, &k->params);
  }
  if (st != JITK_OK) {
    jitk_elementwise_destroy(k);
    return st;
  }
  k->num_out = (int)k->params.count - k->num_in;
  if (k->params.count > JK_MAX_EW_PARAMS) {
    jitk_elementwise_destroy(k);
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "%zu parameters; at most %d",
                   k->params.count, JK_MAX_EW_PARAMS);
  }
  for (int p = k->num_in; p < (int)k->params.count; p++)
    if (k->params.params[p].raw) {
      st = jk_fail_caret(e, JITK_ERR_PARSE, "out_params", out_params, k->params.params[p].offset,
                         strlen(k->params.params[p].name),
                         "outputs cannot be raw here: an elementwise kernel writes each "
                         "output element once");
      jitk_elementwise_destroy(k);
      return st;
    }
  bool oom = false;
  k->name = dup_or_null(e, name, &oom);
  k->operation = dup_or_null(e, operation, &oom);
  if (opts != NULL) {
    k->preamble = dup_or_null(e, opts->preamble, &oom);
    k->loop_prep = dup_or_null(e, opts->loop_prep, &oom);
    k->after_loop = dup_or_null(e, opts->after_loop, &oom);
    if (opts->num_nvrtc_options > 0) {
      if (opts->nvrtc_options == NULL) {
        jitk_elementwise_destroy(k);
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "nvrtc_options is NULL");
      }
      k->options = jk_calloc(e, opts->num_nvrtc_options, sizeof(char *));
      if (k->options == NULL) oom = true;
      for (size_t i = 0; k->options && i < opts->num_nvrtc_options; i++) {
        if (opts->nvrtc_options[i] == NULL) {
          jitk_elementwise_destroy(k);
          return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "nvrtc option %zu is NULL", i);
        }
        k->options[i] = dup_or_null(e, opts->nvrtc_options[i], &oom);
        k->num_options = i + 1;
      }
    }
  }
  if (oom) {
    jitk_elementwise_destroy(k);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  k->labels = jk_calloc(e, k->params.count ? k->params.count : 1, sizeof *k->labels);
  if (k->labels == NULL) {
    jitk_elementwise_destroy(k);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t p = 0; p < k->params.count; p++)
    snprintf(k->labels[p], sizeof k->labels[p], "%s `%s`",
             k->params.params[p].output ? "output" : "argument", k->params.params[p].name);
  /* The element index ties the loop to C order; without it the loop may
   * visit memory in whatever order reads it fastest. */
  k->uses_i = jk_code_uses(k->operation, "i") || jk_code_uses(k->loop_prep, "i") ||
              jk_code_uses(k->after_loop, "i");
  for (int p = k->num_in; p < (int)k->params.count; p++)
    k->load_output[p] = !jk_code_assigns_first(k->operation, k->params.params[p].name);
  /* The shape of the work, measured on the H200 (docs/PERFORMANCE.md):
   * one thread per 16-byte group and a grid that covers the loop once
   * reach 1.03 of copy bandwidth on z = x + y, where a grid that fills
   * the device once and strides reached 0.98 whatever the unroll (1 to 8).
   * The tiled path also runs fastest one-shot, with tiles of 64: 0.96 of
   * copy in a hand-written kernel of the same shape, against 0.88 for a
   * device-filling grid and 0.87 for tiles of 32. JITK_EW_UNROLL (1, 2, 4,
   * 8), JITK_EW_GRID (oneshot, fill) and JITK_EW_TILE (32, 64) exist for
   * measuring that again. */
  k->unroll = 1;
  const char *u = getenv("JITK_EW_UNROLL");
  if (u != NULL && (atoi(u) == 1 || atoi(u) == 2 || atoi(u) == 4 || atoi(u) == 8))
    k->unroll = atoi(u);
  const char *tl = getenv("JITK_EW_TILE");
  k->tile = tl != NULL && strcmp(tl, "32") == 0 ? 32 : 64;
  const char *g = getenv("JITK_EW_GRID");
  k->fill_grid = g != NULL && strcmp(g, "fill") == 0;
  *out = k;
  return JITK_OK;
}

/* --- specializations --- */

/* XXH3 over the whole (zero-padded) specialization: a few dozen
 * nanoseconds, where a byte-wise hash of its 330 bytes cost a fair part of
 * a launch. */
static uint64_t spec_hash(const jk_ew_spec *s) { return XXH3_64bits(s, sizeof *s); }

static void dump_source(jitk_engine *e, const char *name, const char *src) {
  const char *v = getenv("JITK_DUMP_SOURCE");
  if (v == NULL || strcmp(v, "1") != 0) return;
  if (e->log_fn != NULL) {
    jk_buf b;
    jk_buf_init(&b, e);
    jk_buf_printf(&b, "generated source of %s:\n%s", name, src);
    char *m = jk_buf_take(&b);
    if (m) e->log_fn(e->log_user, JITK_LOG_INFO, m);
    jk_free(e, m);
  } else {
    fprintf(stderr, "jitk: generated source of %s:\n%s\n", name, src);
  }
}

/* Generates, compiles (through the cache) and loads one specialization;
 * called with k->lock held. */
static jitk_status make_variant(jitk_elementwise *k, const jk_ew_spec *spec, uint64_t hash,
                                jk_ew_variant **out) {
  jitk_engine *e = k->engine;
  jk_ew_source_in in = {k->name, &k->params, k->load_output, k->operation, k->preamble,
                        k->loop_prep, k->after_loop, spec};
  char *src = NULL;
  jitk_status st = jk_ew_generate(e, &in, &src);
  if (st != JITK_OK) return st;
  dump_source(e, k->name, src);
  char pname[160];
  snprintf(pname, sizeof pname, "%s.cu", k->name);
  jk_compile_input ci;
  memset(&ci, 0, sizeof ci);
  ci.source = src;
  ci.program_name = pname;
  ci.options = (const char *const *)k->options;
  ci.num_options = k->num_options;
  ci.rewrite_log = true;
  jk_entry *entry = NULL;
  st = jk_cache_get(e, &ci, JK_EW_GENERATOR, &entry);
  if (st != JITK_OK) {
    /* Keep the source for jitk_elementwise_source: it explains the error. */
    jk_free(e, k->failed_source);
    k->failed_source = src;
    k->last_source = src;
    return st;
  }
  jk_ew_variant v;
  memset(&v, 0, sizeof v);
  v.spec = *spec;
  v.hash = hash;
  v.entry = entry;
  v.source = src;
  if (e->has_device) {
    CUcontext saved;
    st = jk_ctx_enter(e, &saved);
    if (st == JITK_OK) {
      CUresult r = e->drv.cuModuleGetFunction(&v.fn, (CUmodule)entry->cu, k->name);
      int per_sm = 0;
      if (r == CUDA_SUCCESS)
        r = e->drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.fn, JK_EW_BLOCK, 0);
      jk_ctx_leave(e, saved);
      if (r != CUDA_SUCCESS) st = jk_cuda_fail(e, r, "preparing the elementwise kernel");
      if (per_sm < 1) per_sm = 1;
      v.max_blocks = (unsigned)(per_sm * e->info.multiprocessors);
    }
  }
  jk_ew_variant *grown = NULL;
  if (st == JITK_OK) {
    grown = jk_realloc(e, k->variants, (k->num_variants + 1) * sizeof *grown);
    if (grown == NULL) st = jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (st != JITK_OK) {
    jk_entry_release(e, entry);
    jk_free(e, src);
    return st;
  }
  k->variants = grown;
  k->variants[k->num_variants] = v;
  *out = &k->variants[k->num_variants++];
  k->last_source = (*out)->source;
  return JITK_OK;
}

/* The variant for `spec`, made when new. Returns with k->lock released. */
static jitk_status get_variant(jitk_elementwise *k, const jk_ew_spec *spec, jk_ew_variant *copy) {
  uint64_t h = spec_hash(spec);
  pthread_mutex_lock(&k->lock);
  for (size_t i = 0; i < k->num_variants; i++) {
    jk_ew_variant *v = &k->variants[i];
    if (v->hash == h && memcmp(&v->spec, spec, sizeof *spec) == 0) {
      *copy = *v;
      k->last_source = v->source;
      pthread_mutex_unlock(&k->lock);
      return JITK_OK;
    }
  }
  jk_ew_variant *made = NULL;
  jitk_status st = make_variant(k, spec, h, &made);
  if (st == JITK_OK) *copy = *made;
  pthread_mutex_unlock(&k->lock);
  return st;
}

/* --- launches --- */

/* Everything one launch works out before the kernel runs. */
typedef struct ew_plan {
  jk_view views[JK_MAX_EW_PARAMS];
  bool is_array[JK_MAX_EW_PARAMS];
  jitk_dtype bound[JK_MAX_EW_PARAMS]; /* per placeholder */
  jitk_dtype dtype[JK_MAX_EW_PARAMS]; /* per parameter */
  int operand[JK_MAX_EW_PARAMS];      /* index into iter.ops, -1 for none */
  jk_iter iter;
  int ndim;
  int64_t shape[JITK_MAX_NDIM];
} ew_plan;

/* "argument `x`" or "output `z`", written once at creation: error messages
 * and views name their parameter without formatting on every launch. */
static const char *param_label(const jitk_elementwise *k, int p) { return k->labels[p]; }

static jitk_status bind(jitk_elementwise *k, const jitk_arg *args, size_t nargs, ew_plan *pl) {
  jitk_engine *e = k->engine;
  const jk_param_list *pls = &k->params;
  for (size_t h = 0; h < pls->num_placeholders; h++) pl->bound[h] = JITK_DTYPE_NONE;
  /* Arrays bind first, inputs then given outputs; scalars only bind what
   * no array did (as CuPy: an array's dtype wins over a scalar's). */
  for (int pass = 0; pass < 2; pass++) {
    for (int p = 0; p < (int)pls->count; p++) {
      const jk_param_decl *d = &pls->params[p];
      bool given = (size_t)p < nargs && args[p].kind != JITK_ARG_ALLOCATE;
      if (!given) continue;
      jitk_dtype have = pl->is_array[p] ? pl->views[p].dtype : args[p].dtype;
      if ((pass == 0) != pl->is_array[p]) continue;
      if (d->placeholder < 0) {
        if (pl->is_array[p] && have != d->dtype)
          return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "kernel %s: %s is %s, but its parameter says %s",
                         k->name, param_label(k, p), jk_dtype(have)->name,
                         jk_dtype(d->dtype)->name);
        continue;
      }
      jitk_dtype *slot = &pl->bound[d->placeholder];
      if (*slot == JITK_DTYPE_NONE) {
        *slot = have;
      } else if (*slot != have && pl->is_array[p]) {
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                       "kernel %s: placeholder %s is bound to both %s and %s (%s is %s)", k->name,
                       pls->placeholders[d->placeholder], jk_dtype(*slot)->name,
                       jk_dtype(have)->name, param_label(k, p),
                       jk_dtype(have)->name);
      }
    }
  }
  for (int p = 0; p < (int)pls->count; p++) {
    const jk_param_decl *d = &pls->params[p];
    if (d->placeholder < 0) {
      pl->dtype[p] = d->dtype;
      continue;
    }
    pl->dtype[p] = pl->bound[d->placeholder];
    if (pl->dtype[p] == JITK_DTYPE_NONE) {
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "kernel %s: the type %s of %s is not bound by any argument; give an array "
                     "of that type (or the output itself)",
                     k->name, pls->placeholders[d->placeholder],
                     param_label(k, p));
    }
  }
  return JITK_OK;
}

static void managed_deleter(DLManagedTensor *t);

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

/* A new C-contiguous output of the loop's shape, from the memory pool. */
static jitk_status allocate_output(jitk_engine *e, jitk_stream stream, jitk_dtype dtype, int ndim,
                                   const int64_t *shape, DLManagedTensor **out, jk_view *view) {
  const jitk_dtype_info *info = jk_dtype(dtype);
  int64_t count = 1;
  for (int d = 0; d < ndim; d++) count *= shape[d];
  jk_managed *m = jk_calloc(e, 1, sizeof *m);
  if (m == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  void *data = NULL;
  jitk_status st = jitk_device_alloc(e, (size_t)count * info->size, stream, &data);
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

/* An output must not share memory with any input unless it is exactly
 * that input, nor with another output, nor with itself (a zero stride). */
static jitk_status check_overlap(jitk_elementwise *k, ew_plan *pl) {
  jitk_engine *e = k->engine;
  int n = (int)k->params.count;
  for (int o = k->num_in; o < n; o++) {
    const jk_view *ov = &pl->views[o];
    for (int d = 0; d < ov->ndim; d++)
      if (ov->shape[d] > 1 && ov->strides[d] == 0)
        return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                       "kernel %s: %s has stride 0 in dimension %d, so elements would be "
                       "written twice",
                       k->name, param_label(k, o), d);
    size_t isz = jk_dtype(ov->dtype)->size;
    uintptr_t olo, ohi;
    if (!jk_view_range(ov, isz, &olo, &ohi)) continue;
    for (int p = 0; p < n; p++) {
      if (p == o || !pl->is_array[p] || k->params.params[p].raw) continue;
      if (p > o && k->params.params[p].output) continue; /* each pair once */
      const jk_view *iv = &pl->views[p];
      uintptr_t lo, hi;
      if (!jk_view_range(iv, jk_dtype(iv->dtype)->size, &lo, &hi)) continue;
      if (hi < olo || lo > ohi) continue;
      if (!k->params.params[p].output && jk_view_same(ov, iv))
        continue; /* in place: exactly the same elements */
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "kernel %s: %s overlaps %s without being the same array; an output may "
                     "only be exactly one of the inputs",
                     k->name, param_label(k, o), param_label(k, p));
    }
  }
  return JITK_OK;
}

static void magic_for(uint64_t d, bool wide, uint64_t *magic, unsigned *shift) {
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

/* Elements per 16-byte access for the arrays of the loop, when every one
 * allows it; 1 otherwise. */
static int vector_width(const ew_plan *pl) {
  const jk_iter *it = &pl->iter;
  size_t widest = 1;
  for (int k = 0; k < it->nops; k++)
    if (it->ops[k].itemsize > widest) widest = it->ops[k].itemsize;
  if (widest >= 16) return 1;
  int v = (int)(16 / widest);
  int nd = it->ndim;
  bool any_contiguous = false;
  for (int k = 0; k < it->nops; k++) {
    const jk_operand *op = &it->ops[k];
    int64_t inner = op->strides[nd - 1];
    if (inner != 0 && inner != 1) return 1;
    if (inner == 0) continue;
    any_contiguous = true;
    if ((uintptr_t)op->data % ((size_t)v * op->itemsize) != 0) return 1;
    for (int d = 0; d < nd - 1; d++)
      if (op->strides[d] % v != 0) return 1;
  }
  if (!any_contiguous) return 1;
  if (nd > 1 && it->shape[nd - 1] % v != 0) return 1;
  if (it->size < v) return 1;
  return v;
}

/* Appends one kernel parameter: its bytes at *cursor, its address in kp. */
#define PUSH(kp, np, cursor, value)                 \
  do {                                              \
    memcpy((cursor), &(value), sizeof(value));      \
    (kp)[(np)++] = (cursor);                        \
    (cursor) += (sizeof(value) + 7) & ~(size_t)7;   \
  } while (0)

static jitk_status run(jitk_elementwise *k, jitk_stream stream, const jitk_arg *args,
                       ew_plan *pl, const jk_ew_variant *v) {
  jitk_engine *e = k->engine;
  const jk_ew_spec *s = &v->spec;
  const jk_iter *it = &pl->iter;
  int nd = s->ndim, vec = s->vec;
  /* Room: n, 3 per outer dimension, pointer and strides per array, a
   * descriptor or value per other parameter. */
  _Alignas(16) unsigned char store[8 * (4 + 3 * JITK_MAX_NDIM) +
                                   JK_MAX_EW_PARAMS * 8 * (1 + JITK_MAX_NDIM) * 2];
  void *kp[4 + 3 * JITK_MAX_NDIM + JK_MAX_EW_PARAMS * (1 + JITK_MAX_NDIM)];
  int np = 0;
  unsigned char *cur = store;
  int64_t inner_units = it->shape[nd - 1] / (nd > 1 ? vec : 1);
  if (s->idx64) {
    uint64_t n = (uint64_t)it->size;
    PUSH(kp, np, cur, n);
    for (int d = 1; d < nd; d++) {
      uint64_t ext = (uint64_t)(d == nd - 1 ? inner_units : it->shape[d]), magic;
      unsigned shift;
      magic_for(ext, true, &magic, &shift);
      PUSH(kp, np, cur, ext);
      PUSH(kp, np, cur, magic);
      PUSH(kp, np, cur, shift);
    }
  } else {
    uint32_t n = (uint32_t)it->size;
    PUSH(kp, np, cur, n);
    for (int d = 1; d < nd; d++) {
      uint64_t magic64;
      unsigned shift;
      uint32_t ext = (uint32_t)(d == nd - 1 ? inner_units : it->shape[d]);
      magic_for(ext, false, &magic64, &shift);
      uint32_t magic = (uint32_t)magic64;
      PUSH(kp, np, cur, ext);
      PUSH(kp, np, cur, magic);
      PUSH(kp, np, cur, shift);
    }
  }
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] == JK_EW_ARRAY) {
      const jk_operand *op = &it->ops[pl->operand[p]];
      void *ptr = op->data;
      PUSH(kp, np, cur, ptr);
      for (int d = 0; d < nd; d++) {
        if (s->idx64) {
          int64_t st = op->strides[d];
          PUSH(kp, np, cur, st);
        } else {
          int32_t st = (int32_t)op->strides[d];
          PUSH(kp, np, cur, st);
        }
      }
    } else if (s->kind[p] == JK_EW_RAW) {
      const jk_view *rv = &pl->views[p];
      void *ptr = rv->data;
      memcpy(cur, &ptr, 8);
      memcpy(cur + 8, rv->shape, 8 * (size_t)rv->ndim);
      memcpy(cur + 8 + 8 * (size_t)rv->ndim, rv->strides, 8 * (size_t)rv->ndim);
      kp[np++] = cur;
      cur += 8 + 16 * (size_t)rv->ndim;
    } else {
      jitk_status st = jk_convert_scalar(e, &args[p], pl->dtype[p], cur,
                                         param_label(k, p));
      if (JK_UNLIKELY(st != JITK_OK)) return st;
      kp[np++] = cur;
      cur += 16;
    }
  }
  uint64_t units = (uint64_t)it->size / (uint64_t)vec;
  if (units == 0) units = 1;
  uint64_t per_block = (uint64_t)JK_EW_BLOCK * (s->unroll > 1 ? s->unroll : 1);
  uint64_t blocks = (units + per_block - 1) / per_block;
  if (s->tiled) /* one block per tile */
    blocks = (uint64_t)((it->shape[0] + s->tile - 1) / s->tile) *
             (uint64_t)((it->shape[1] + s->tile - 1) / s->tile);
  uint64_t cap = k->fill_grid ? v->max_blocks : 0x7fffffffu;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  CUcontext saved;
  jitk_status st = jk_ctx_enter(e, &saved);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  CUresult r = e->drv.cuLaunchKernel(v->fn, (unsigned)blocks, 1, 1, JK_EW_BLOCK, 1, 1, 0,
                                     (CUstream)stream, kp, NULL);
  jk_ctx_leave(e, saved);
  if (JK_UNLIKELY(r != CUDA_SUCCESS)) return jk_cuda_fail(e, r, "cuLaunchKernel");
  return JITK_OK;
}

/* Binds, shapes and picks the specialization; the launch itself is run(). */
static jitk_status plan(jitk_elementwise *k, jitk_stream stream, const jitk_arg *args,
                        size_t nargs, int64_t size, DLManagedTensor **outputs, ew_plan *pl,
                        jk_ew_spec *spec, bool *empty) {
  jitk_engine *e = k->engine;
  int n = (int)k->params.count;
  *empty = false;
  /* Classify each argument. */
  const jk_view *bviews[JK_MAX_EW_PARAMS];
  const char *bnames[JK_MAX_EW_PARAMS];
  int nb = 0;
  bool need_alloc = false;
  for (int p = 0; p < n; p++) {
    const jk_param_decl *d = &k->params.params[p];
    pl->is_array[p] = false;
    pl->operand[p] = -1;
    bool present = (size_t)p < nargs && args[p].kind != JITK_ARG_ALLOCATE;
    if (d->output && !present) {
      need_alloc = true;
      continue;
    }
    const jitk_arg *a = &args[p];
    if (a->kind == JITK_ARG_ARRAY) {
      jitk_status st = jk_view_from_tensor(e, a->tensor, param_label(k, p), &pl->views[p]);
      if (JK_UNLIKELY(st != JITK_OK)) return st;
      pl->is_array[p] = true;
      if (!d->raw) {
        bviews[nb] = &pl->views[p];
        bnames[nb++] = param_label(k, p);
      }
    } else if (a->kind == JITK_ARG_SCALAR) {
      if (d->raw || d->output)
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "kernel %s: %s must be an array, not a scalar",
                       k->name, param_label(k, p));
    } else {
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                     "kernel %s: %s must be a DLTensor (jitk_arg_array) or a scalar; "
                     "elementwise kernels take no bare pointers",
                     k->name, param_label(k, p));
    }
  }
  if (need_alloc && outputs == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: an output is to be allocated but `outputs` is NULL", k->name);
  jitk_status st = bind(k, args, nargs, pl);
  if (st != JITK_OK) return st;

  /* The loop's shape: the broadcast of the non-raw arrays, or `size`. */
  if (nb > 0) {
    st = jk_broadcast_shape(e, bviews, bnames, nb, &pl->ndim, pl->shape);
    if (st != JITK_OK) return st;
    if (size >= 0) {
      int64_t count = 1;
      for (int d = 0; d < pl->ndim; d++) count *= pl->shape[d];
      if (count != size)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                       "kernel %s: size is %lld but the arrays have %lld elements", k->name,
                       (long long)size, (long long)count);
    }
  } else {
    if (size < 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "kernel %s: no non-raw array fixes the number of elements; pass size",
                     k->name);
    pl->ndim = 1;
    pl->shape[0] = size;
  }
  /* Given outputs must have the loop's shape exactly. */
  for (int p = k->num_in; p < n; p++) {
    if (!pl->is_array[p]) continue;
    const jk_view *v = &pl->views[p];
    bool same = v->ndim == pl->ndim;
    for (int d = 0; same && d < v->ndim; d++) same = v->shape[d] == pl->shape[d];
    if (!same)
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "kernel %s: %s does not have the shape the inputs broadcast to", k->name,
                     param_label(k, p));
  }
  for (int p = k->num_in; p < n; p++) {
    if (pl->is_array[p]) continue;
    if (outputs != NULL) outputs[p - k->num_in] = NULL;
    st = allocate_output(e, stream, pl->dtype[p], pl->ndim, pl->shape,
                         &outputs[p - k->num_in], &pl->views[p]);
    if (st != JITK_OK) return st;
    pl->is_array[p] = true;
  }
  st = check_overlap(k, pl);
  if (st != JITK_OK) return st;

  /* The iteration: outputs first, so their layout orders the loop. */
  jk_iter_init(&pl->iter, pl->ndim, pl->shape);
  if (pl->iter.size == 0) {
    *empty = true;
    return JITK_OK;
  }
  for (int pass = 0; pass < 2; pass++)
    for (int p = 0; p < n; p++) {
      const jk_param_decl *d = &k->params.params[p];
      if (!pl->is_array[p] || d->raw || d->output != (pass == 0)) continue;
      pl->operand[p] = pl->iter.nops;
      jk_iter_add(&pl->iter, &pl->views[p]);
    }
  jk_iter_coalesce(&pl->iter, !k->uses_i);
  if (pl->iter.ndim == 0) {
    /* One element: a loop of one. */
    pl->iter.ndim = 1;
    pl->iter.shape[0] = 1;
    for (int o = 0; o < pl->iter.nops; o++) pl->iter.ops[o].strides[0] = 0;
  }

  memset(spec, 0, sizeof *spec);
  spec->nparams = n;
  spec->ndim = (unsigned char)pl->iter.ndim;
  spec->idx64 = !jk_iter_fits_32(&pl->iter);
  spec->vec = (unsigned char)vector_width(pl);
  spec->unroll = (unsigned char)(spec->vec > 1 ? k->unroll : 1);
  /* Two dimensions with an input that walks the outer one contiguously
   * (a transposed view), outputs along the inner one: the tiled path. */
  if (spec->vec == 1 && pl->iter.ndim == 2) {
    const jk_iter *it = &pl->iter;
    bool outputs_inner = true, any = false;
    for (int p = 0; p < n; p++) {
      if (pl->operand[p] < 0) continue;
      const int64_t *sd = it->ops[pl->operand[p]].strides;
      if (k->params.params[p].output)
        outputs_inner &= sd[1] == 1;
      else if ((sd[0] == 1 || sd[0] == -1) && sd[1] != 0 && sd[1] != 1 && sd[1] != -1) {
        spec->transposed[p] = 1;
        any = true;
      }
    }
    /* Tiles of 64 while their shared memory stays within the 48 KiB a
     * block may have statically, then tiles of 32, no tiles otherwise. */
    size_t row_bytes = 0;
    for (int p = 0; p < n; p++)
      if (spec->transposed[p]) row_bytes += jk_dtype(pl->dtype[p])->size;
    spec->tile = 0;
    if (outputs_inner && any) {
      if (row_bytes * 64 * 65 <= 48 * 1024 && k->tile == 64)
        spec->tile = 64;
      else if (row_bytes * 32 * 33 <= 48 * 1024)
        spec->tile = 32;
    }
    spec->tiled = spec->tile != 0;
    if (!spec->tiled) memset(spec->transposed, 0, sizeof spec->transposed);
    for (int p = 0; spec->tiled && p < n; p++)
      if (pl->operand[p] >= 0 && !k->params.params[p].output && !spec->transposed[p])
        spec->outer_bcast[p] = it->ops[pl->operand[p]].strides[0] == 0;
  }
  for (int p = 0; p < n; p++) {
    const jk_param_decl *d = &k->params.params[p];
    spec->dtype[p] = (unsigned char)pl->dtype[p];
    if (d->raw) {
      spec->kind[p] = JK_EW_RAW;
      spec->raw_ndim[p] = (unsigned char)pl->views[p].ndim;
    } else if (pl->is_array[p]) {
      spec->kind[p] = JK_EW_ARRAY;
      if (spec->vec > 1)
        spec->inner_bcast[p] = pl->iter.ops[pl->operand[p]].strides[pl->iter.ndim - 1] == 0;
    } else {
      spec->kind[p] = JK_EW_SCALAR;
    }
  }
  return JITK_OK;
}

jitk_status jitk_elementwise_launch(jitk_elementwise *k, jitk_stream stream, const jitk_arg *args,
                                    size_t nargs, int64_t size, DLManagedTensor **outputs) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_launch: kernel is NULL");
  jitk_engine *e = k->engine;
  if (JK_UNLIKELY(nargs != (size_t)k->num_in && nargs != (size_t)(k->num_in + k->num_out)))
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT,
                   "kernel %s takes %d inputs and %d outputs: %d or %d arguments, not %zu",
                   k->name, k->num_in, k->num_out, k->num_in, k->num_in + k->num_out, nargs);
  if (JK_UNLIKELY(nargs > 0 && args == NULL))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_launch: args is NULL");
  jitk_status st = jk_require_device(e, "jitk_elementwise_launch");
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  ew_plan pl;
  jk_ew_spec spec;
  bool empty;
  if (outputs != NULL)
    for (int j = 0; j < k->num_out; j++) outputs[j] = NULL;
  st = plan(k, stream, args, nargs, size, outputs, &pl, &spec, &empty);
  if (st == JITK_OK && !empty) {
    jk_ew_variant v;
    st = get_variant(k, &spec, &v);
    if (st == JITK_OK) st = run(k, stream, args, &pl, &v);
  }
  if (st != JITK_OK && outputs != NULL) {
    /* Outputs allocated for a launch that failed go back. */
    for (int j = 0; j < k->num_out; j++)
      if (outputs[j] != NULL) {
        outputs[j]->deleter(outputs[j]);
        outputs[j] = NULL;
      }
  }
  return st;
}

/* "T=float16, U=int32" into the kernel's placeholders. */
static jitk_status parse_types(jitk_elementwise *k, const char *types, jitk_dtype *bound) {
  jitk_engine *e = k->engine;
  for (size_t h = 0; h < k->params.num_placeholders; h++) bound[h] = JITK_DTYPE_NONE;
  const char *p = types ? types : "";
  while (*p) {
    while (*p == ' ' || *p == ',') p++;
    if (!*p) break;
    const char *eq = strchr(p, '=');
    const char *end = p + strcspn(p, ",");
    if (eq == NULL || eq > end)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(p - types),
                           (size_t)(end - p), "expected PLACEHOLDER=DTYPE");
    size_t nl = (size_t)(eq - p);
    while (nl > 0 && p[nl - 1] == ' ') nl--;
    int found = -1;
    for (size_t h = 0; h < k->params.num_placeholders; h++)
      if (strlen(k->params.placeholders[h]) == nl && memcmp(k->params.placeholders[h], p, nl) == 0)
        found = (int)h;
    if (found < 0)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(p - types), nl,
                           "`%.*s` is not a placeholder of this kernel", (int)nl, p);
    const char *t = eq + 1;
    while (*t == ' ') t++;
    size_t tl = (size_t)(end - t);
    while (tl > 0 && t[tl - 1] == ' ') tl--;
    jitk_dtype d = jk_dtype_lookup(t, tl);
    if (d == JITK_DTYPE_NONE)
      return jk_fail_caret(e, JITK_ERR_PARSE, "types", types, (size_t)(t - types), tl ? tl : 1,
                           "unknown dtype `%.*s`", (int)tl, t);
    bound[found] = d;
    p = end;
  }
  for (size_t h = 0; h < k->params.num_placeholders; h++)
    if (bound[h] == JITK_DTYPE_NONE)
      return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "placeholder %s has no type; bind it (%s=float32)",
                     k->params.placeholders[h], k->params.placeholders[h]);
  return JITK_OK;
}

static bool listed(const char *list, const char *name) {
  if (list == NULL) return false;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    while (*p == ' ' || *p == ',') p++;
    const char *q = p;
    while (*q && *q != ',' && *q != ' ') q++;
    if ((size_t)(q - p) == n && memcmp(p, name, n) == 0) return true;
    p = q;
  }
  return false;
}

jitk_status jitk_elementwise_compile(jitk_elementwise *k, const char *types,
                                     const jitk_elementwise_layout *layout, const char **source,
                                     jitk_module **module) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_compile: kernel is NULL");
  jitk_engine *e = k->engine;
  jitk_elementwise_layout def = {1, 32, 0, NULL};
  if (layout == NULL) layout = &def;
  if (layout->ndim < 1 || layout->ndim > JITK_MAX_NDIM ||
      (layout->index_bits != 32 && layout->index_bits != 64) || layout->vector < 0 ||
      layout->vector > 16)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "layout: ndim 1..%d, index_bits 32 or 64, vector 0..16", JITK_MAX_NDIM);
  jitk_dtype bound[JK_MAX_EW_PARAMS];
  jitk_status st = parse_types(k, types, bound);
  if (st != JITK_OK) return st;
  jk_ew_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nparams = (int)k->params.count;
  spec.ndim = (unsigned char)layout->ndim;
  spec.idx64 = layout->index_bits == 64;
  size_t widest = 1;
  for (int p = 0; p < spec.nparams; p++) {
    const jk_param_decl *d = &k->params.params[p];
    jitk_dtype dt = d->placeholder >= 0 ? bound[d->placeholder] : d->dtype;
    spec.dtype[p] = (unsigned char)dt;
    if (d->raw) {
      spec.kind[p] = JK_EW_RAW;
      spec.raw_ndim[p] = 1;
    } else if (listed(layout->scalars, d->name)) {
      if (d->output)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "output %s cannot be a scalar", d->name);
      spec.kind[p] = JK_EW_SCALAR;
    } else {
      spec.kind[p] = JK_EW_ARRAY;
      if (jk_dtype(dt)->size > widest) widest = jk_dtype(dt)->size;
    }
  }
  int v = layout->vector ? layout->vector : (widest >= 16 ? 1 : (int)(16 / widest));
  spec.vec = (unsigned char)v;
  spec.unroll = (unsigned char)(v > 1 ? k->unroll : 1);
  jk_ew_variant copy;
  st = get_variant(k, &spec, &copy);
  if (source != NULL) *source = k->last_source;
  if (st != JITK_OK) return st;
  if (module != NULL) {
    jk_entry *x = copy.entry;
    pthread_mutex_lock(&e->lock);
    x->refs++;
    pthread_mutex_unlock(&e->lock);
    st = jk_module_from_entry(e, x, k->name, module);
  }
  return st;
}

jitk_status jitk_elementwise_source(jitk_elementwise *k, const char **source) {
  if (k == NULL || source == NULL)
    return jk_fail(k ? k->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_elementwise_source: an argument is NULL");
  pthread_mutex_lock(&k->lock);
  *source = k->last_source;
  pthread_mutex_unlock(&k->lock);
  if (*source == NULL)
    return jk_fail(k->engine, JITK_ERR_NOT_FOUND,
                   "kernel %s has not been specialized yet: launch or compile it first", k->name);
  return JITK_OK;
}
