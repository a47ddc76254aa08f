/*
 * Elementwise kernels: CuPy's ElementwiseKernel semantics over DLTensors.
 *
 * A launch broadcasts shapes, binds types, collapses the iteration space,
 * picks the index width and the vector width, and looks the resulting
 * specialization up in the kernel's own small table. Only a new
 * specialization generates source and goes through the kernel cache; a
 * known one costs a table probe, the packing of the parameters, and the
 * launch. A launch whose arguments have the layout of the kernel's last
 * launch skips even the planning (the memo below). Nothing on that path
 * allocates.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "array/array.h"
#include "array/iter.h"
#include "codegen/codegen.h"
#include "driver/image.h"
#include "kernels/gen.h"
#include "kernels/kernels.h"
#include "launch/launch.h"

#define JK_EW_GENERATOR "elementwise/1"
#define JK_EW_LABEL 80

struct jitk_elementwise {
  jk_gen g; /* name, parameters, options, specializations */
  char *operation, *loop_prep, *after_loop;
  bool uses_i;
  int unroll; /* vector path: groups per thread and iteration */
  bool load_output[JK_MAX_EW_PARAMS];
  bool fill_grid; /* JITK_EW_GRID=fill: a device-filling grid that strides */
  int tile;       /* transposed path: 64, or 32 when JITK_EW_TILE=32 */
  /* The last launch's plan (struct ew_memo; NULL when JITK_EW_MEMO=off).
   * memo_lock guards what it holds; launches only try the lock, so a
   * thread never waits for another's launch: it plans afresh instead. */
  pthread_mutex_t memo_lock;
  struct ew_memo *memo;
  unsigned long long memo_hits; /* under memo_lock */
};

void jitk_elementwise_destroy(jitk_elementwise *k) {
  if (k == NULL) return;
  jitk_engine *e = k->g.engine;
  jk_free(e, k->operation);
  jk_free(e, k->loop_prep);
  jk_free(e, k->after_loop);
  jk_free(e, k->memo);
  pthread_mutex_destroy(&k->memo_lock);
  jk_gen_fini(&k->g);
  jk_free(e, k);
}

static jitk_status ew_source(void *ctx, const void *spec, char **source);
static jitk_status ew_load(void *ctx, jk_gen_variant *v);
static struct ew_memo *memo_new(jitk_engine *e);

jitk_status jitk_elementwise_create(jitk_engine *e, const char *in_params, const char *out_params,
                                    const char *operation, const char *name,
                                    const jitk_elementwise_options *opts, jitk_elementwise **out) {
  if (e == NULL || in_params == NULL || out_params == NULL || operation == NULL || name == NULL ||
      out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_create: an argument is NULL");
  static const char *const sections[] = {"operation", "preamble", "loop_prep", "after_loop"};
  const char *code[] = {operation, opts ? opts->preamble : NULL, opts ? opts->loop_prep : NULL,
                        opts ? opts->after_loop : NULL};
  for (int i = 0; i < 4; i++) {
    jitk_status bad = jk_code_check_directives(e, sections[i], code[i]);
    if (bad != JITK_OK) return bad;
  }
  jitk_elementwise *k = jk_calloc(e, 1, sizeof *k);
  if (k == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  jitk_status st = jk_gen_init(&k->g, e, "jitk_elementwise_create", in_params, out_params, name,
                               opts ? opts->preamble : NULL, opts ? opts->nvrtc_options : NULL,
                               opts ? opts->num_nvrtc_options : 0, NULL);
  if (st != JITK_OK) {
    jk_free(e, k);
    return st;
  }
  pthread_mutex_init(&k->memo_lock, NULL);
  k->g.generator = JK_EW_GENERATOR;
  k->g.spec_size = sizeof(jk_ew_spec);
  k->g.source_fn = ew_source;
  k->g.load_fn = ew_load;
  k->g.ctx = k;
  bool oom = false;
  k->operation = jk_gen_dup(e, operation, &oom);
  if (opts != NULL) {
    k->loop_prep = jk_gen_dup(e, opts->loop_prep, &oom);
    k->after_loop = jk_gen_dup(e, opts->after_loop, &oom);
  }
  /* Made here rather than at a launch, which never allocates.
   * JITK_EW_MEMO=off plans every launch afresh: the tests compare the two
   * paths' launches with it. */
  const char *memo = getenv("JITK_EW_MEMO");
  if (memo == NULL || strcmp(memo, "off") != 0) {
    k->memo = memo_new(e);
    oom |= k->memo == NULL;
  }
  if (oom) {
    jitk_elementwise_destroy(k);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  /* The element index ties the loop to C order; without it the loop may
   * visit memory in whatever order reads it fastest. */
  /* A macro may name it too (`#define IDX i` in the preamble). */
  const char *texts[] = {k->operation, k->loop_prep, k->after_loop, k->g.preamble};
  k->uses_i = false;
  for (size_t c = 0; c < sizeof texts / sizeof texts[0]; c++)
    k->uses_i |= (c < 3 && jk_code_uses(texts[c], "i")) || jk_code_directives_use(texts[c], "i");
  /* An output the operation assigns before anything else is not loaded,
   * unless a directive may change that. */
  for (int p = k->g.num_in; p < (int)k->g.params.count; p++)
    k->load_output[p] =
        !jk_code_overwrites(k->operation, k->g.preamble, k->g.params.params[p].name);
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

static jitk_status ew_source(void *ctx, const void *spec, char **source) {
  jitk_elementwise *k = ctx;
  jk_ew_source_in in = {k->g.name,     &k->g.params, k->load_output, k->operation,
                        k->g.preamble, k->loop_prep, k->after_loop,  spec};
  return jk_ew_generate(k->g.engine, &in, source);
}

static jitk_status ew_load(void *ctx, jk_gen_variant *v) {
  jitk_elementwise *k = ctx;
  jitk_engine *e = k->g.engine;
  CUresult r = jk_cu_get_function(e, (CUmodule)v->entry->cu, k->g.name, &v->fn[0]);
  int per_sm = 0, max_threads = 0;
  if (r == CUDA_SUCCESS) r = jk_cu_occupancy_blocks(e, v->fn[0], JK_EW_BLOCK, 0, &per_sm);
  /* Read once here, so that a launch with a block size of the caller's
   * checks it against a number rather than asking the driver. */
  if (r == CUDA_SUCCESS)
    r = jk_cu_func_attribute(e, v->fn[0], CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "preparing the elementwise kernel");
  if (per_sm < 1) per_sm = 1;
  v->max_blocks = (unsigned)(per_sm * e->info.multiprocessors);
  v->max_threads = max_threads > 0 ? (unsigned)max_threads : JK_EW_BLOCK;
  return JITK_OK;
}

/* --- launches --- */

/* Everything one launch works out before the kernel runs. */
typedef struct ew_plan {
  jk_gen_args a;
  int operand[JK_MAX_EW_PARAMS]; /* index into iter.ops, -1 for none */
  jk_iter iter;
  int ndim;
  int64_t shape[JITK_MAX_NDIM];
  int64_t head; /* elements peeled off a one-dimensional vector loop */
  int nout_ops; /* the iteration's first operands, the outputs */
} ew_plan;

/* Elements per 16-byte access for the arrays of the loop, when every one
 * allows it; 1 otherwise. A one-dimensional loop whose arrays are not
 * aligned where it starts still takes vectors: *head elements (fewer than
 * the width) are peeled off so that the first output's groups are
 * aligned, and an array that is still not aligned then (unaligned[k], per
 * operand) moves its groups one element at a time. Several loops alike
 * (x[1:] + y[1:]) are then as fast as aligned ones, and one misaligned
 * input costs only its own accesses. */
static int vector_width(const ew_plan *pl, int64_t *head, unsigned char *unaligned) {
  const jk_iter *it = &pl->iter;
  *head = 0;
  memset(unaligned, 0, (size_t)it->nops);
  size_t widest = 1;
  for (int k = 0; k < it->nops; k++)
    if (it->ops[k].itemsize > widest) widest = it->ops[k].itemsize;
  if (widest >= 16) return 1;
  int v = (int)(16 / widest);
  int nd = it->ndim;
  bool any_contiguous = false, aligned = true;
  /* Per operand, where its first group starts within a vector: forwards
   * at its first element, backwards (a reversed view, innermost stride
   * -1) at the element v - 1 below it. -1: broadcast, no groups. */
  int64_t mis[JK_MAX_OPERANDS];
  bool back[JK_MAX_OPERANDS];
  int64_t step[JK_MAX_OPERANDS];
  for (int k = 0; k < it->nops; k++) {
    const jk_operand *op = &it->ops[k];
    int64_t inner = op->strides[nd - 1];
    mis[k] = -1;
    back[k] = inner == -1;
    /* Inputs (after the outputs in the iteration) of a one-dimensional
     * loop may step by 2 to 4 elements: their groups are read as whole
     * vectors (the loop's last group goes one element at a time, so no
     * vector reaches past the view). */
    step[k] = nd == 1 && inner >= 2 && inner <= 4 && k >= pl->nout_ops ? inner : 1;
    if (inner != 0 && inner != 1 && inner != -1 && step[k] == 1) return 1;
    if (inner == 0) continue;
    any_contiguous |= step[k] == 1;
    /* An address that is not a multiple of its element's size never
     * aligns by whole elements. */
    if ((uintptr_t)op->data % op->itemsize != 0) return 1;
    int64_t e = (int64_t)(((uintptr_t)op->data / op->itemsize) % (uintptr_t)v);
    mis[k] = back[k] ? ((e - (v - 1)) % v + v) % v : e;
    aligned &= mis[k] == 0;
    for (int d = 0; d < nd - 1; d++)
      if (op->strides[d] % v != 0) return 1;
  }
  if (!any_contiguous) return 1;
  if (nd > 1 && it->shape[nd - 1] % v != 0) return 1;
  if (it->size < v) return 1;
  if (aligned) return v;
  if (nd > 1) return 1;
  /* The groups start where the first contiguous operand (an output, as
   * outputs come first) is aligned; a peel of h elements moves a forward
   * operand's groups up by h, a reversed one's down. */
  int ref = 0;
  while (ref < it->nops && mis[ref] < 0) ref++;
  if (ref == it->nops) return 1;
  *head = back[ref] ? mis[ref] : (v - mis[ref]) % v;
  if (it->size - *head < v) {
    *head = 0;
    return 1;
  }
  for (int k = 0; k < it->nops; k++) {
    if (mis[k] < 0) continue;
    int64_t at = back[k] ? mis[k] - *head : mis[k] + step[k] * *head;
    if ((at % v + v) % v != 0) unaligned[k] = 1;
  }
  return v;
}

/* Whether the tiles of the transposed inputs, `side` square, fit the
 * 48 KiB of shared memory a block may declare statically: each padded by
 * a column, or by two where they may hold element pairs (every transposed
 * input of 2 bytes), and each aligned for its element (codegen pads up to
 * that between them). Past it the kernel does not compile. */
static bool tiles_fit(const jk_ew_spec *spec, const ew_plan *pl, int n, size_t side) {
  bool pairs = true;
  for (int p = 0; p < n; p++)
    if (spec->transposed[p]) pairs &= jk_dtype(pl->a.dtype[p])->size == 2;
  size_t bytes = 0;
  for (int p = 0; p < n; p++) {
    if (!spec->transposed[p]) continue;
    const jitk_dtype_info *d = jk_dtype(pl->a.dtype[p]);
    bytes += d->size * side * (side + (pairs ? 2 : 1)) + (d->align > 4 ? d->align : 4) - 1;
  }
  return bytes <= 48 * 1024;
}

static jitk_status run(jitk_elementwise *k, jitk_stream stream, const jitk_arg *args, ew_plan *pl,
                       const jk_gen_variant *v, unsigned block) {
  jitk_engine *e = k->g.engine;
  const jk_ew_spec *s = (const jk_ew_spec *)(const void *)v->spec;
  const jk_iter *it = &pl->iter;
  int nd = s->ndim, vec = s->vec;
  /* Room: n, 3 per outer dimension, pointer and strides per array, a
   * descriptor or value per other parameter. */
  _Alignas(16) unsigned char
      store[8 * (4 + 3 * JITK_MAX_NDIM) + JK_MAX_EW_PARAMS * 8 * (1 + JITK_MAX_NDIM) * 2];
  void *kp[5 + 3 * JITK_MAX_NDIM + JK_MAX_EW_PARAMS * (1 + JITK_MAX_NDIM)];
  int np = 0;
  unsigned char *cur = store;
  int64_t inner_units = it->shape[nd - 1] / (nd > 1 ? vec : 1);
  int64_t head = s->peel ? pl->head : 0;
  if (s->idx64) {
    uint64_t n = (uint64_t)it->size, h = (uint64_t)head;
    JK_PUSH(kp, np, cur, n);
    if (s->peel) JK_PUSH(kp, np, cur, h);
    for (int d = 1; d < nd; d++) {
      uint64_t ext = (uint64_t)(d == nd - 1 ? inner_units : it->shape[d]), magic;
      unsigned shift;
      jk_gen_magic(ext, true, &magic, &shift);
      JK_PUSH(kp, np, cur, ext);
      JK_PUSH(kp, np, cur, magic);
      JK_PUSH(kp, np, cur, shift);
    }
  } else {
    uint32_t n = (uint32_t)it->size, h = (uint32_t)head;
    JK_PUSH(kp, np, cur, n);
    if (s->peel) JK_PUSH(kp, np, cur, h);
    for (int d = 1; d < nd; d++) {
      uint64_t magic64;
      unsigned shift;
      uint32_t ext = (uint32_t)(d == nd - 1 ? inner_units : it->shape[d]);
      jk_gen_magic(ext, false, &magic64, &shift);
      uint32_t magic = (uint32_t)magic64;
      JK_PUSH(kp, np, cur, ext);
      JK_PUSH(kp, np, cur, magic);
      JK_PUSH(kp, np, cur, shift);
    }
  }
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] == JK_EW_ARRAY) {
      const jk_operand *op = &it->ops[pl->operand[p]];
      void *ptr = op->data;
      JK_PUSH(kp, np, cur, ptr);
      for (int d = 0; d < nd; d++) {
        if (s->idx64) {
          int64_t st = op->strides[d];
          JK_PUSH(kp, np, cur, st);
        } else {
          int32_t st = (int32_t)op->strides[d];
          JK_PUSH(kp, np, cur, st);
        }
      }
    } else {
      jitk_status st =
          jk_gen_push_other(&k->g, &pl->a, args, p, s->kind[p] == JK_EW_RAW, kp, &np, &cur);
      if (JK_UNLIKELY(st != JITK_OK)) return st;
    }
  }
  uint64_t units = (uint64_t)(it->size - head) / (uint64_t)vec;
  if (units == 0) units = 1;
  uint64_t per_block = (uint64_t)block * (s->unroll > 1 ? s->unroll : 1);
  uint64_t blocks = (units + per_block - 1) / per_block;
  if (s->tiled) { /* one block per tile, over every batch of tiles */
    int last = it->ndim - 1;
    blocks = (uint64_t)((it->shape[s->tile_dim] + s->tile - 1) / s->tile) *
             (uint64_t)((it->shape[last] + s->tile - 1) / s->tile);
    for (int d = 0; d < last; d++)
      if (d != s->tile_dim) blocks *= (uint64_t)it->shape[d];
  }
  uint64_t cap = k->fill_grid ? v->max_blocks : 0x7fffffffu;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  /* The driver reads as many parameters as the kernel has; the NULL after
   * them tells a stand-in driver where they end. */
  kp[np] = NULL;
  return jk_launch_fn(e, stream, v->fn[0], k->g.name, (unsigned)blocks, 1, 1, block, 1, 1, 0, kp);
}

/* What a launch and jitk_elementwise_outputs share: the arguments
 * classified and bound, the loop's shape (the broadcast of the non-raw
 * arrays, or `size`), and the given non-raw outputs checked against it.
 * Reads no memory and calls no driver. */
static jitk_status prepare(jitk_elementwise *k, const char *what, const jitk_arg *args,
                           size_t nargs, int64_t size, bool can_allocate, ew_plan *pl) {
  jitk_engine *e = k->g.engine;
  int n = (int)k->g.params.count;
  if (size < -1)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: size is %lld; pass the number of elements, or -1 for that of the "
                   "arrays",
                   k->g.name, (long long)size);
  jitk_status st = jk_gen_classify(&k->g, what, args, nargs, can_allocate, &pl->a);
  if (st != JITK_OK) return st;

  /* The loop's shape: the broadcast of the non-raw arrays, or `size`. */
  if (pl->a.nb > 0) {
    st = jk_broadcast_shape(e, pl->a.bviews, pl->a.bnames, pl->a.nb, &pl->ndim, pl->shape);
    if (st != JITK_OK) return st;
    if (size >= 0) {
      int64_t count = 1;
      for (int d = 0; d < pl->ndim; d++) count *= pl->shape[d];
      if (count != size)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                       "kernel %s: size is %lld but the arrays have %lld elements", k->g.name,
                       (long long)size, (long long)count);
    }
  } else {
    if (size < 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "kernel %s: no non-raw array fixes the number of elements; pass size",
                     k->g.name);
    pl->ndim = 1;
    pl->shape[0] = size;
  }
  /* Types are bound after the broadcast and before the outputs' shapes are
   * checked: CuPy's order, so that arguments wrong in two ways get its
   * error. */
  st = jk_gen_bind(&k->g, args, nargs, &pl->a);
  if (st != JITK_OK) return st;
  /* Given non-raw outputs must have the loop's shape exactly; a raw one is
   * indexed by the operation, so its shape is its own. */
  for (int p = k->g.num_in; p < n; p++) {
    if (!pl->a.is_array[p] || k->g.params.params[p].raw) continue;
    const jk_view *v = &pl->a.views[p];
    bool same = v->ndim == pl->ndim;
    for (int d = 0; same && d < v->ndim; d++) same = v->shape[d] == pl->shape[d];
    if (!same)
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "kernel %s: %s does not have the shape the inputs broadcast to", k->g.name,
                     k->g.labels[p]);
  }
  return JITK_OK;
}

/* Binds, shapes and picks the specialization; the launch itself is run().
 * `block` is the launch's threads per block. */
static jitk_status plan(jitk_elementwise *k, const char *what, jitk_stream stream,
                        const jitk_arg *args, size_t nargs, int64_t size, unsigned block,
                        DLManagedTensor **outputs, ew_plan *pl, jk_ew_spec *spec, bool *empty) {
  jitk_engine *e = k->g.engine;
  int n = (int)k->g.params.count;
  *empty = false;
  jitk_status st = prepare(k, what, args, nargs, size, outputs != NULL, pl);
  if (st != JITK_OK) return st;
  for (int p = 0; p < n; p++) pl->operand[p] = -1;
  /* Outputs left to jitk get the loop's shape, raw ones too (as CuPy
   * allocates them). */
  for (int p = k->g.num_in; p < n; p++) {
    if (pl->a.is_array[p]) continue;
    if (outputs != NULL) outputs[p - k->g.num_in] = NULL;
    st = jk_gen_allocate(e, stream, pl->a.dtype[p], pl->ndim, pl->shape, &outputs[p - k->g.num_in],
                         &pl->a.views[p]);
    if (st != JITK_OK) return st;
    pl->a.is_array[p] = true;
  }
  st = jk_gen_check_overlap(&k->g, &pl->a);
  if (st != JITK_OK) return st;

  /* The iteration: outputs first, so their layout orders the loop. */
  jk_iter_init(&pl->iter, pl->ndim, pl->shape);
  if (pl->iter.size == 0) {
    *empty = true;
    return JITK_OK;
  }
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) pl->nout_ops = pl->iter.nops;
    for (int p = 0; p < n; p++) {
      const jk_param_decl *d = &k->g.params.params[p];
      if (!pl->a.is_array[p] || d->raw || d->output != (pass == 0)) continue;
      pl->operand[p] = pl->iter.nops;
      jk_iter_add(&pl->iter, &pl->a.views[p]);
    }
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
  spec->idx64 = !jk_iter_fits_32(&pl->iter) || !jk_gen_raw_fits_32(&k->g, &pl->a);
  unsigned char unaligned[JK_MAX_OPERANDS];
  spec->vec = (unsigned char)vector_width(pl, &pl->head, unaligned);
  spec->peel = pl->head > 0;
  spec->unroll = (unsigned char)(spec->vec > 1 ? k->unroll : 1);
  /* An input that walks a dimension other than the innermost
   * contiguously (a transposed or permuted view), outputs along the
   * innermost: the tiled path, over that dimension and the innermost. Its
   * threads are laid out over a tile for jitk's own block size, so a
   * launch with another one takes the scalar loop, which runs with any. */
  if (spec->vec == 1 && pl->iter.ndim >= 2 && block == JK_EW_BLOCK) {
    const jk_iter *it = &pl->iter;
    int nd = it->ndim, last = nd - 1, tdim = -1;
    bool outputs_inner = true;
    for (int p = 0; p < n; p++) {
      if (pl->operand[p] < 0) continue;
      const int64_t *sd = it->ops[pl->operand[p]].strides;
      if (k->g.params.params[p].output) {
        outputs_inner &= sd[last] == 1;
        continue;
      }
      if (sd[last] == 0 || sd[last] == 1 || sd[last] == -1) continue;
      /* The first such input decides the tile's rows; another input
       * contiguous along that dimension shares the tile's layout, one
       * contiguous along a third is read along the innermost. */
      for (int d = 0; d < last && tdim < 0; d++)
        if (sd[d] == 1 || sd[d] == -1) tdim = d;
      if (tdim >= 0 && (sd[tdim] == 1 || sd[tdim] == -1)) spec->transposed[p] = 1;
    }
    /* Tiles of 64 while their shared memory stays within the 48 KiB a
     * block may have statically, then tiles of 32, no tiles otherwise.
     * With batches of tiles (three or more dimensions), both tiled
     * extents must fill at least half a tile of 32, or most of every
     * tile would be idle; tiles of 32 where either is below 64. */
    int64_t rows = tdim >= 0 ? it->shape[tdim] : 0, cols = it->shape[last];
    bool small = nd > 2 && (rows < 64 || cols < 64);
    spec->tile = 0;
    if (outputs_inner && tdim >= 0 && (nd == 2 || (rows >= 16 && cols >= 16))) {
      if (tiles_fit(spec, pl, n, 64) && k->tile == 64 && !small)
        spec->tile = 64;
      else if (tiles_fit(spec, pl, n, 32))
        spec->tile = 32;
    }
    spec->tiled = spec->tile != 0;
    spec->tile_dim = (unsigned char)(spec->tiled ? tdim : 0);
    if (!spec->tiled) memset(spec->transposed, 0, sizeof spec->transposed);
    for (int p = 0; spec->tiled && p < n; p++)
      if (pl->operand[p] >= 0 && !k->g.params.params[p].output && !spec->transposed[p])
        spec->outer_bcast[p] = it->ops[pl->operand[p]].strides[tdim] == 0;
    /* Pairs of 2-byte elements: every array moves 4 bytes at a time along
     * its contiguous dimension of the tile (transposed inputs the rows,
     * the others the columns), so both extents and every other stride
     * are even and every address 4-byte aligned. */
    bool pair = spec->tiled && rows % 2 == 0 && cols % 2 == 0;
    for (int p = 0; pair && p < n; p++) {
      if (pl->operand[p] < 0) continue;
      const jk_operand *o = &it->ops[pl->operand[p]];
      int unit = spec->transposed[p] ? tdim : last;
      pair = jk_dtype(pl->a.dtype[p])->size == 2 && o->strides[unit] == 1 &&
             (uintptr_t)o->data % 4 == 0;
      for (int d = 0; d < nd && pair; d++)
        if (d != unit) pair = o->strides[d] % 2 == 0;
    }
    spec->tpair = pair;
  }
  for (int p = 0; p < n; p++) {
    const jk_param_decl *d = &k->g.params.params[p];
    spec->dtype[p] = (unsigned char)pl->a.dtype[p];
    if (d->raw) {
      spec->kind[p] = JK_EW_RAW;
      spec->raw_ndim[p] = (unsigned char)pl->a.views[p].ndim;
    } else if (pl->a.is_array[p]) {
      spec->kind[p] = JK_EW_ARRAY;
      if (spec->vec > 1) {
        int64_t inner = pl->iter.ops[pl->operand[p]].strides[pl->iter.ndim - 1];
        spec->inner_bcast[p] = inner == 0;
        spec->reversed[p] = inner == -1;
        spec->step[p] =
            (unsigned char)(!d->output && pl->iter.ndim == 1 && inner >= 2 && inner <= 4 ? inner
                                                                                         : 0);
        spec->unaligned[p] = unaligned[pl->operand[p]];
      }
    } else {
      spec->kind[p] = JK_EW_SCALAR;
    }
  }
  return JITK_OK;
}

void jitk_launch_options_init(jitk_launch_options *o) {
  if (o == NULL) return;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->size = -1;
  o->block_size = 0;
}

/* The plan of the kernel's last successful launch with every output
 * given. A launch whose arguments match it in everything but their
 * addresses (and scalar values) takes the plan as it is, with the new
 * addresses written into it: a loop that calls a kernel on arrays of one
 * layout plans once. What depends on the addresses is done again: the
 * overlap rules, and the parameters packed for the launch. */
typedef struct ew_memo {
  bool valid;
  size_t nargs;
  int64_t size;   /* as the caller passed it (-1: from the arrays) */
  unsigned block; /* as the caller passed it (0: jitk's choice) */
  jk_memo_arg arg[JK_MAX_EW_PARAMS];
  ew_plan pl;
  jk_gen_variant v; /* a copy; the kernel's table keeps the variant */
} ew_memo;

static ew_memo *memo_new(jitk_engine *e) { return jk_calloc(e, 1, sizeof(ew_memo)); }

/* Whether the arguments of a launch have the memo's layout; when they do,
 * their addresses are written into its plan. */
static bool memo_take(ew_memo *m, const jitk_arg *args, size_t nargs, int64_t size,
                      unsigned block) {
  if (!m->valid || m->nargs != nargs || m->size != size || m->block != block) return false;
  if (!jk_memo_matches(m->arg, m->pl.a.views, args, nargs)) return false;
  for (size_t p = 0; p < nargs; p++) {
    if (args[p].kind != JITK_ARG_ARRAY) continue;
    char *first = (char *)args[p].tensor->data + args[p].tensor->byte_offset;
    m->pl.a.views[p].data = first;
    if (m->pl.operand[p] >= 0) m->pl.iter.ops[m->pl.operand[p]].data = first;
  }
  return true;
}

/* Records the layout of a launch that just ran with the plan in m->pl and
 * the variant in m->v. Launches that allocated outputs are not recorded:
 * the next one allocates again. */
static void memo_record(ew_memo *m, const jitk_arg *args, size_t nargs, int64_t size,
                        unsigned block) {
  if (m->pl.a.need_alloc) return;
  m->nargs = nargs;
  m->size = size;
  m->block = block;
  m->valid = jk_memo_record(m->arg, args, nargs);
}

/* The memo no longer taken: the next launch plans afresh (and looks its
 * variant up, so that the kernel's source names what it launched again,
 * after a compile or a prepare of another layout named that one). */
static void forget_memo(jitk_elementwise *k) {
  if (k->memo == NULL) return;
  pthread_mutex_lock(&k->memo_lock);
  k->memo->valid = false;
  pthread_mutex_unlock(&k->memo_lock);
}

/* The launch both public calls make. Nothing here allocates host memory
 * or takes a lock but the kernel's table's and (tried, never waited for)
 * the memo's, as the launch path promises. */
static jitk_status launch(jitk_elementwise *k, const char *what, jitk_stream stream,
                          const jitk_arg *args, size_t nargs, int64_t size, unsigned block,
                          DLManagedTensor **outputs, bool prepare) {
  jitk_engine *e = k->g.engine;
  jitk_status st = jk_require_device(e, what);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  bool chosen = block != 0;
  if (!chosen) {
    block = JK_EW_BLOCK;
  } else if (JK_UNLIKELY(block > (unsigned)e->info.max_threads_per_block)) {
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: block_size %u is more threads than a block of %s can have (%d)",
                   k->g.name, block, e->info.name, e->info.max_threads_per_block);
  }
  unsigned asked = chosen ? block : 0;
  /* The memo: taken when the arguments have its layout, otherwise planned
   * into, when no other thread holds it. A prepare names its own layout's
   * source, which the next launch must name again. */
  if (prepare) forget_memo(k);
  ew_memo *m = NULL;
  if (!prepare && k->memo != NULL && pthread_mutex_trylock(&k->memo_lock) == 0) {
    m = k->memo;
    if (memo_take(m, args, nargs, size, asked)) {
      k->memo_hits++;
      st = jk_gen_check_overlap(&k->g, &m->pl.a);
      if (st == JITK_OK) st = run(k, stream, args, &m->pl, &m->v, block);
      pthread_mutex_unlock(&k->memo_lock);
      return st;
    }
    m->valid = false;
  }
  ew_plan local;
  ew_plan *pl = m != NULL ? &m->pl : &local;
  jk_gen_variant local_v;
  jk_gen_variant *v = m != NULL ? &m->v : &local_v;
  jk_ew_spec spec;
  bool empty;
  /* Outputs are made into a local array and handed over only on success,
   * so a failed launch leaves the caller's `outputs` as it was. */
  DLManagedTensor *made[JK_MAX_EW_PARAMS];
  for (int j = 0; j < k->g.num_out; j++) made[j] = NULL;
  st = plan(k, what, stream, args, nargs, size, block, outputs || prepare ? made : NULL, pl, &spec,
            &empty);
  if (st == JITK_OK && !empty && prepare) {
    /* Compiled and loaded, nothing run; outputs made for the plan go. */
    st = jk_gen_variant_get(&k->g, &spec, NULL, NULL, v);
    jk_gen_release_outputs(k->g.num_out, made);
    return st;
  }
  if (st == JITK_OK && !empty) {
    st = jk_gen_variant_get(&k->g, &spec, &stream, "jitk_elementwise_prepare", v);
    /* The compiled kernel's own limit: its registers may allow fewer
     * threads than the device does. */
    if (st == JITK_OK && chosen && JK_UNLIKELY(block > v->max_threads))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: block_size %u is more threads than this specialization can run "
                   "with (%u, for its registers); pass %u or fewer, or 0 for jitk's choice",
                   k->g.name, block, v->max_threads, v->max_threads);
    if (st == JITK_OK) st = run(k, stream, args, pl, v, block);
    if (st == JITK_OK && m != NULL) memo_record(m, args, nargs, size, asked);
  }
  if (m != NULL) pthread_mutex_unlock(&k->memo_lock);
  return jk_gen_finish_outputs(st, k->g.num_out, made, outputs);
}

jitk_status jitk_elementwise_launch(jitk_elementwise *k, jitk_stream stream, const jitk_arg *args,
                                    size_t nargs, int64_t size, DLManagedTensor **outputs) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_launch: kernel is NULL");
  return launch(k, "jitk_elementwise_launch", stream, args, nargs, size, 0, outputs, false);
}

jitk_status jitk_elementwise_link(jitk_elementwise *k, const jitk_link_piece *pieces,
                                  size_t num_pieces, const jitk_link_options *options) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_link: kernel is NULL");
  return jk_gen_set_link(&k->g, "jitk_elementwise_link", pieces, num_pieces, options);
}

jitk_status jitk_elementwise_prepare(jitk_elementwise *k, const jitk_arg *args, size_t nargs,
                                     int64_t size) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_prepare: kernel is NULL");
  return launch(k, "jitk_elementwise_prepare", NULL, args, nargs, size, 0, NULL, true);
}

/* The end of the first version of jitk_launch_options: every caller's
 * struct_size reaches at least this far. */
#define JK_LAUNCH_OPTIONS_V1 (offsetof(jitk_launch_options, block_size) + sizeof(unsigned int))

jitk_status jitk_elementwise_launch_ex(jitk_elementwise *k, jitk_stream stream,
                                       const jitk_arg *args, size_t nargs,
                                       const jitk_launch_options *opts, DLManagedTensor **outputs) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_launch_ex: kernel is NULL");
  if (opts == NULL)
    return launch(k, "jitk_elementwise_launch_ex", stream, args, nargs, -1, 0, outputs, false);
  if (JK_UNLIKELY(opts->struct_size < JK_LAUNCH_OPTIONS_V1))
    return jk_fail(k->g.engine, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_elementwise_launch_ex: options->struct_size is %zu; fill the options "
                   "with jitk_launch_options_init first",
                   opts->struct_size);
  /* A caller built against a later jitk may know fields this one does
   * not: left at zero they mean their defaults, anything else would be
   * ignored silently. */
  if (JK_UNLIKELY(opts->struct_size > sizeof *opts)) {
    const unsigned char *extra = (const unsigned char *)opts;
    for (size_t b = sizeof *opts; b < opts->struct_size; b++)
      if (extra[b] != 0)
        return jk_fail(k->g.engine, JITK_ERR_INVALID_ARGUMENT,
                       "jitk_elementwise_launch_ex: the options set a field (byte %zu) that "
                       "this version of jitk (%s) does not know",
                       b, JITK_VERSION_STRING);
  }
  return launch(k, "jitk_elementwise_launch_ex", stream, args, nargs, opts->size, opts->block_size,
                outputs, false);
}

jitk_status jitk_elementwise_outputs(jitk_elementwise *k, const jitk_arg *args, size_t nargs,
                                     int64_t size, jitk_output_spec *specs) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_outputs: kernel is NULL");
  if (specs == NULL && k->g.num_out > 0)
    return jk_fail(k->g.engine, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_elementwise_outputs: specs is NULL");
  ew_plan pl;
  jitk_status st = prepare(k, "jitk_elementwise_outputs", args, nargs, size, true, &pl);
  if (st == JITK_OK) st = jk_gen_check_overlap(&k->g, &pl.a);
  if (st != JITK_OK) return st;
  jk_gen_output_specs(&k->g, &pl.a, pl.ndim, pl.shape, specs);
  return JITK_OK;
}

jitk_status jitk_elementwise_num_params(const jitk_elementwise *k, int *num_in, int *num_out) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_num_params: kernel is NULL");
  return jk_gen_num_params(&k->g, num_in, num_out);
}

jitk_status jitk_elementwise_param(const jitk_elementwise *k, int index, jitk_param_info *info) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_param: kernel is NULL");
  return jk_gen_param(&k->g, "jitk_elementwise_param", index, info);
}

jitk_status jitk_elementwise_compile(jitk_elementwise *k, const char *types,
                                     const jitk_elementwise_layout *layout, const char **source,
                                     jitk_module **module) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_elementwise_compile: kernel is NULL");
  jitk_engine *e = k->g.engine;
  jitk_elementwise_layout def = {1, 32, 0, NULL};
  if (layout == NULL) layout = &def;
  if (layout->ndim < 1 || layout->ndim > JITK_MAX_NDIM ||
      (layout->index_bits != 32 && layout->index_bits != 64) || layout->vector < 0 ||
      layout->vector > 16)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "layout: ndim 1..%d, index_bits 32 or 64, vector 0..16", JITK_MAX_NDIM);
  /* A vector access is jitk::ew::vec<T, N>, aligned to its whole size:
   * N must be a power of two, as the launch path chooses it. */
  int vq = layout->vector;
  if (vq != 0 && (vq & (vq - 1)) != 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "layout: vector is %d; it must be 1, 2, 4, 8 or 16 elements (or 0 for the "
                   "widest 16-byte access)",
                   vq);
  jitk_dtype bound[JK_MAX_EW_PARAMS];
  jitk_status st = jk_params_bind_types(k->g.engine, &k->g.params, types, bound);
  if (st == JITK_OK) st = jk_gen_check_names(&k->g, "scalars", layout->scalars);
  if (st != JITK_OK) return st;
  jk_ew_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nparams = (int)k->g.params.count;
  spec.ndim = (unsigned char)layout->ndim;
  spec.idx64 = layout->index_bits == 64;
  size_t widest = 1;
  for (int p = 0; p < spec.nparams; p++) {
    const jk_param_decl *d = &k->g.params.params[p];
    jitk_dtype dt = d->placeholder >= 0 ? bound[d->placeholder] : d->dtype;
    spec.dtype[p] = (unsigned char)dt;
    if (d->raw) {
      if (jk_gen_listed(layout->scalars, d->name))
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                       "raw parameter %s cannot be a scalar: it is a whole array", d->name);
      spec.kind[p] = JK_EW_RAW;
      spec.raw_ndim[p] = 1;
    } else if (jk_gen_listed(layout->scalars, d->name)) {
      if (d->output)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "output %s cannot be a scalar", d->name);
      spec.kind[p] = JK_EW_SCALAR;
    } else {
      spec.kind[p] = JK_EW_ARRAY;
      if (jk_dtype(dt)->size > widest) widest = jk_dtype(dt)->size;
    }
  }
  if (vq != 0 && (size_t)vq * widest > 16)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "layout: vector %d of %zu-byte elements is a %zu-byte access; vector accesses "
                   "are at most 16 bytes",
                   vq, widest, (size_t)vq * widest);
  int v = layout->vector ? layout->vector : (widest >= 16 ? 1 : (int)(16 / widest));
  spec.vec = (unsigned char)v;
  spec.unroll = (unsigned char)(v > 1 ? k->unroll : 1);
  st = jk_gen_compile(&k->g, &spec, source, module);
  /* jitk_elementwise_source now names this specialization; the next
   * launch plans afresh, so that it names the launched one again. */
  forget_memo(k);
  return st;
}

unsigned long long jk_elementwise_memo_hits(jitk_elementwise *k) {
  pthread_mutex_lock(&k->memo_lock);
  unsigned long long n = k->memo_hits;
  pthread_mutex_unlock(&k->memo_lock);
  return n;
}

jitk_status jitk_elementwise_source(jitk_elementwise *k, const char **source) {
  return jk_gen_source(k ? &k->g : NULL, "jitk_elementwise_source", source);
}
