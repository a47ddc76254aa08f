/*
 * Reduction kernels: CuPy's ReductionKernel semantics over DLTensors.
 *
 * A launch broadcasts the inputs, binds types, splits the dimensions into
 * kept ones (one output per point) and reduced ones, collapses each set,
 * and chooses a strategy from the layout of the first input: along its
 * contiguous reduced elements ('i': rows, whole arrays), in segments of
 * its rows ('r': columns whose rows allow vectors, interleaved kept and
 * reduced axes), across its contiguous outputs ('o': other columns), or
 * several single-group outputs a thread ('m'). When that leaves too few
 * blocks to fill the device, the reduced elements are split into chunks
 * whose partial results the last block of each tile of outputs to finish
 * combines in order, in the same kernel; the split
 * depends only on the shapes and the device, so results repeat bit for
 * bit.
 */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "array/array.h"
#include "array/iter.h"
#include "cache/cache.h"
#include "codegen/codegen.h"
#include "kernels/gen.h"
#include "kernels/kernels.h"
#include "launch/launch.h"
#include "kernels/reduction.h"

#define JK_RED_GENERATOR "reduction/1"
#define JK_RED_TUNED 32

struct jitk_reduction {
  jk_gen g; /* name, parameters, options, specializations */
  char *map_expr, *reduce_expr, *post_map_expr, *identity, *reduce_type;
  /* The reduce type: a placeholder (index), a dtype, or neither (a type
   * the preamble defines, written as given). */
  int reduce_placeholder;
  jitk_dtype reduce_dtype;
  bool uses_j; /* map_expr reads _j: the reduced dimensions keep C order */
  /* Per parameter: an output the post-map may read or leave as it was,
   * which the kernel loads before it (jk_code_overwrites). */
  bool load_output[JK_MAX_EW_PARAMS];
  /* Autotuned strategies by layout (see jitk_reduction_autotune): what
   * this kernel measured or found in the cache's tuning table, and the
   * layouts it looked up and found nothing for (force 0), the oldest
   * replaced first. Guarded by g.lock. */
  struct {
    uint64_t layout;
    char force;
  } tuned[JK_RED_TUNED];
  unsigned num_tuned, next_tuned;
  /* 0: not yet known; 1: no tuning anywhere for this target and device
   * (a launch then spends nothing on it); 2: look layouts up. */
  _Atomic int tune_state;
  uint64_t ops_hash; /* of the expressions, lists and name: the tuning key's */
  /* The last launch's plan (struct red_memo; NULL when JITK_RED_MEMO=off),
   * as the elementwise kernels keep theirs: a loop that reduces arrays of
   * one layout plans once. memo_lock guards it; launches only try it. */
  pthread_mutex_t memo_lock;
  struct red_memo *memo;
  unsigned long long memo_hits; /* under memo_lock */
};

/* The plan of the kernel's last successful launch with every output
 * given. A launch whose arguments match it in everything but their
 * addresses (and scalar values), with the same axes and keepdims, takes
 * the plan and the specialization as they are, with the new addresses
 * written into them. What depends on the addresses is done again: the
 * overlap rules, the temporary of a split, and the parameters packed. */
struct red_memo {
  bool valid;
  size_t nargs;
  bool all_axes; /* axes NULL or num_axes < 0 */
  int num_axes;
  int axes[JITK_MAX_NDIM];
  int keepdims;
  jk_memo_arg arg[JK_MAX_EW_PARAMS];
  jk_red_plan pl;
  jk_gen_variant v; /* a copy; the kernel's table keeps the variant */
};

void jitk_reduction_destroy(jitk_reduction *k) {
  if (k == NULL) return;
  jitk_engine *e = k->g.engine;
  jk_free(e, k->map_expr);
  jk_free(e, k->reduce_expr);
  jk_free(e, k->post_map_expr);
  jk_free(e, k->identity);
  jk_free(e, k->reduce_type);
  jk_free(e, k->memo);
  pthread_mutex_destroy(&k->memo_lock);
  jk_gen_fini(&k->g);
  jk_free(e, k);
}

static jitk_status red_source(void *ctx, const void *spec, char **source) {
  jitk_reduction *k = ctx;
  jk_red_source_in in = {
      k->g.name,   &k->g.params,   k->map_expr,   k->reduce_expr, k->post_map_expr,
      k->identity, k->reduce_type, k->g.preamble, spec,           k->load_output};
  return jk_red_generate(k->g.engine, &in, source);
}

static jitk_status red_load(void *ctx, jk_gen_variant *v) {
  jitk_reduction *k = ctx;
  jitk_engine *e = k->g.engine;
  CUmodule m = (CUmodule)v->entry->cu;
  /* The names are as long as the kernel's (any identifier): a buffer of
   * fixed size would cut a long one, and look up another function or
   * none. */
  jk_buf fin, sl;
  jk_buf_init(&fin, e);
  jk_buf_init(&sl, e);
  jk_buf_printf(&fin, "%s_final", k->g.name);
  jk_buf_printf(&sl, "%s_slot", k->g.name);
  char *final_name = jk_buf_take(&fin), *slot_name = jk_buf_take(&sl);
  if (final_name == NULL || slot_name == NULL) {
    jk_free(e, final_name);
    jk_free(e, slot_name);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  CUresult r = jk_cu_get_function(e, m, k->g.name, &v->fn[0]);
  const jk_red_spec *s = (const jk_red_spec *)(const void *)v->spec;
  if (r == CUDA_SUCCESS && s->final_group != 0 && s->second_pass)
    r = jk_cu_get_function(e, m, final_name, &v->fn[1]);
  /* The size of a partial result: the device compiler knows the reduce
   * type's size; the host may not (a struct of the preamble). */
  size_t slot = 0;
  if (r == CUDA_SUCCESS) r = jk_cu_module_global(e, m, slot_name, NULL, &slot);
  jk_free(e, final_name);
  jk_free(e, slot_name);
  if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "preparing the reduction kernel");
  v->slot = slot;
  return JITK_OK;
}

jitk_status jitk_reduction_create(jitk_engine *e, const char *in_params, const char *out_params,
                                  const char *map_expr, const char *reduce_expr,
                                  const char *post_map_expr, const char *identity,
                                  const char *reduce_type, const char *name,
                                  const jitk_reduction_options *opts, jitk_reduction **out) {
  if (e == NULL || in_params == NULL || out_params == NULL || map_expr == NULL ||
      reduce_expr == NULL || post_map_expr == NULL || name == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_create: an argument is NULL");
  static const char *const what[] = {"map_expr", "reduce_expr", "post_map_expr"};
  const char *text[] = {map_expr, reduce_expr, post_map_expr};
  for (int i = 0; i < 3; i++)
    if (strspn(text[i], " \t\r\n") == strlen(text[i]))
      return jk_fail(e, JITK_ERR_PARSE, "jitk_reduction_create: %s is empty", what[i]);
  if (identity != NULL && strspn(identity, " \t\r\n") == strlen(identity))
    return jk_fail(e, JITK_ERR_PARSE,
                   "jitk_reduction_create: identity is empty; pass NULL for none");
  static const char *const sections[] = {"map_expr", "reduce_expr", "post_map_expr",
                                         "identity", "reduce_type", "preamble"};
  const char *code[] = {map_expr, reduce_expr, post_map_expr,
                        identity, reduce_type, opts ? opts->preamble : NULL};
  for (int i = 0; i < 6; i++) {
    jitk_status bad = jk_code_check_directives(e, sections[i], code[i]);
    if (bad != JITK_OK) return bad;
  }
  jitk_reduction *k = jk_calloc(e, 1, sizeof *k);
  if (k == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  pthread_mutex_init(&k->memo_lock, NULL);
  jitk_status st = jk_gen_init(&k->g, e, "jitk_reduction_create", in_params, out_params, name,
                               opts ? opts->preamble : NULL, opts ? opts->nvrtc_options : NULL,
                               opts ? opts->num_nvrtc_options : 0,
                               "reduction outputs cannot be raw: each output element is one "
                               "reduced value, which the post-map writes (CuPy's "
                               "ReductionKernel has no raw outputs either)");
  if (st != JITK_OK) {
    jk_free(e, k);
    return st;
  }
  k->g.generator = JK_RED_GENERATOR;
  k->g.spec_size = sizeof(jk_red_spec);
  k->g.source_fn = red_source;
  k->g.load_fn = red_load;
  k->g.ctx = k;
  if (k->g.num_in == 0 || k->g.num_out == 0) {
    jitk_reduction_destroy(k);
    return jk_fail(e, JITK_ERR_PARSE,
                   "jitk_reduction_create: a reduction needs at least one input and one output");
  }
  /* Names the generated kernel declares where the user's expressions see
   * them: a parameter of one of these names would be shadowed there, and
   * map_expr would read jitk's value instead of the argument's without a
   * word (a scalar `_j` read as the element's index). */
  static const char *const own[][2] = {{"_j", "map_expr's index of the reduced element"},
                                       {"_in_ind", "the index over the reduced elements"},
                                       {"_out_ind", "the index over the outputs"},
                                       {"_type_reduce", "the reduce type"}};
  for (size_t p = 0; p < k->g.params.count; p++) {
    /* post_map_expr's `a` is the reduced value, which an output of that
     * name would hide. */
    if (k->g.params.params[p].output && strcmp(k->g.params.params[p].name, "a") == 0) {
      jitk_reduction_destroy(k);
      return jk_fail(e, JITK_ERR_PARSE,
                     "jitk_reduction_create: an output cannot be named `a`: post_map_expr "
                     "reads the reduced value as `a`");
    }
    for (size_t r = 0; r < sizeof own / sizeof own[0]; r++)
      if (strcmp(k->g.params.params[p].name, own[r][0]) == 0) {
        jitk_reduction_destroy(k);
        return jk_fail(e, JITK_ERR_PARSE,
                       "jitk_reduction_create: a parameter cannot be named `%s`: the kernel "
                       "declares it as %s",
                       own[r][0], own[r][1]);
      }
  }
  /* The reduce type: as given, or the first input's type. */
  k->reduce_placeholder = -1;
  k->reduce_dtype = JITK_DTYPE_NONE;
  const jk_param_decl *first = &k->g.params.params[0];
  bool oom = false;
  if (reduce_type == NULL) {
    k->reduce_placeholder = first->placeholder;
    k->reduce_dtype = first->dtype;
  } else {
    const char *t = reduce_type;
    size_t n = strlen(t);
    while (n > 0 && isspace((unsigned char)t[n - 1])) n--;
    while (n > 0 && isspace((unsigned char)*t)) {
      t++;
      n--;
    }
    if (n == 0) {
      jitk_reduction_destroy(k);
      return jk_fail(e, JITK_ERR_PARSE, "jitk_reduction_create: reduce_type is empty");
    }
    for (size_t h = 0; h < k->g.params.num_placeholders; h++)
      if (strlen(k->g.params.placeholders[h]) == n &&
          memcmp(k->g.params.placeholders[h], t, n) == 0)
        k->reduce_placeholder = (int)h;
    if (k->reduce_placeholder < 0) k->reduce_dtype = jk_dtype_lookup(t, n);
    /* CUDA's and C's names of jitk's dtypes, as CuPy's users write them:
     * taken as the dtype, so that the generated code includes its header
     * (`half` alone named a type no header had declared). */
    static const struct {
      const char *name;
      jitk_dtype dtype;
    } aliases[] = {{"half", JITK_FLOAT16},
                   {"__half", JITK_FLOAT16},
                   {"__nv_bfloat16", JITK_BFLOAT16},
                   {"nv_bfloat16", JITK_BFLOAT16},
                   {"float", JITK_FLOAT32},
                   {"double", JITK_FLOAT64},
                   {"complex<float>", JITK_COMPLEX64},
                   {"complex<double>", JITK_COMPLEX128},
                   {"thrust::complex<float>", JITK_COMPLEX64},
                   {"thrust::complex<double>", JITK_COMPLEX128}};
    for (size_t a = 0; k->reduce_placeholder < 0 && k->reduce_dtype == JITK_DTYPE_NONE &&
                       a < sizeof aliases / sizeof aliases[0];
         a++)
      if (strlen(aliases[a].name) == n && memcmp(aliases[a].name, t, n) == 0)
        k->reduce_dtype = aliases[a].dtype;
    k->reduce_type = jk_gen_dup(e, reduce_type, &oom);
  }
  k->map_expr = jk_gen_dup(e, map_expr, &oom);
  k->reduce_expr = jk_gen_dup(e, reduce_expr, &oom);
  k->post_map_expr = jk_gen_dup(e, post_map_expr, &oom);
  k->identity = jk_gen_dup(e, identity, &oom);
  if (oom) {
    jitk_reduction_destroy(k);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t p = 0; p < k->g.params.count && p < JK_MAX_EW_PARAMS; p++)
    k->load_output[p] =
        k->g.params.params[p].output &&
        !jk_code_overwrites(post_map_expr, k->g.preamble, k->g.params.params[p].name);
  /* A macro may name it too (`#define JJ _j` in the preamble). */
  k->uses_j = jk_code_uses(map_expr, "_j") || jk_code_directives_use(map_expr, "_j") ||
              jk_code_directives_use(k->g.preamble, "_j");
  /* reduce_expr and identity are compiled apart from the kernel's body
   * (the combining functor and the identity's function), where neither
   * the parameters nor the indices exist: a use of one would only fail
   * when the first launch compiles, citing generated code. */
  const char *apart[] = {reduce_expr, identity};
  const char *apart_names[] = {"reduce_expr", "identity"};
  for (int t = 0; t < 2; t++) {
    const char *bad = NULL;
    for (size_t p = 0; bad == NULL && p < k->g.params.count; p++) {
      const char *pn = k->g.params.params[p].name;
      /* In reduce_expr, `a` and `b` are the two values it combines. */
      bool own_ab = t == 0 && (strcmp(pn, "a") == 0 || strcmp(pn, "b") == 0);
      if (!own_ab && jk_code_uses(apart[t], pn)) bad = pn;
    }
    static const char *const indices[] = {"_in_ind", "_out_ind", "_j"};
    for (size_t i = 0; bad == NULL && i < sizeof indices / sizeof indices[0]; i++)
      if (jk_code_uses(apart[t], indices[i])) bad = indices[i];
    if (bad != NULL) {
      /* The message first: `bad` may be a parameter's name, which the
       * kernel's destruction frees. */
      st = jk_fail(e, JITK_ERR_PARSE,
                   "jitk_reduction_create: %s cannot use `%s`: it is compiled apart from the "
                   "kernel's parameters and indices (use them in map_expr or post_map_expr)",
                   apart_names[t], bad);
      jitk_reduction_destroy(k);
      return st;
    }
  }
  const char *parts[] = {map_expr,
                         reduce_expr,
                         post_map_expr,
                         identity ? identity : "",
                         reduce_type ? reduce_type : "",
                         k->g.preamble ? k->g.preamble : "",
                         in_params,
                         out_params,
                         name};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    k->ops_hash = XXH3_64bits_withSeed(parts[i], strlen(parts[i]) + 1, k->ops_hash);
  /* JITK_RED_MEMO=off plans every launch afresh: the tests compare the
   * two (tests/unit/kernels/test_reduction_memo.c). */
  const char *memo = getenv("JITK_RED_MEMO");
  if (memo == NULL || strcmp(memo, "off") != 0) {
    k->memo = jk_calloc(e, 1, sizeof(struct red_memo));
    if (k->memo == NULL) {
      jitk_reduction_destroy(k);
      return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    }
  }
  *out = k;
  return JITK_OK;
}

/* --- launches --- */

/* The reduced axes as a mask over the broadcast shape. */
static jitk_status axes_mask(jitk_reduction *k, const int *axes, int num_axes, jk_red_plan *pl) {
  int nd = pl->ndim;
  bool all = axes == NULL || num_axes < 0;
  for (int d = 0; d < nd; d++) pl->reduced[d] = all;
  if (all) return JITK_OK;
  for (int i = 0; i < num_axes; i++) {
    int a = axes[i];
    if (a < -nd || a >= nd)
      return jk_fail(k->g.engine, JITK_ERR_AXIS,
                     "kernel %s: axis %d is out of range for %d dimensions", k->g.name, a, nd);
    if (a < 0) a += nd;
    if (pl->reduced[a])
      return jk_fail(k->g.engine, JITK_ERR_INVALID_ARGUMENT, "kernel %s: axis %d is given twice",
                     k->g.name, axes[i]);
    pl->reduced[a] = true;
  }
  return JITK_OK;
}

/* An iteration over the dimensions of `shape` picked by `pick` (reduced
 * or kept), with the operands' strides along them. */
static void sub_iter(jk_iter *it, const jk_red_plan *pl, bool pick_reduced) {
  int n = 0;
  int64_t shape[JITK_MAX_NDIM];
  for (int d = 0; d < pl->ndim; d++)
    if (pl->reduced[d] == pick_reduced) shape[n++] = pl->shape[d];
  jk_iter_init(it, n, shape);
}

/* Appends an operand to a sub-iteration from strides over the full shape. */
static int add_strides(jk_iter *it, const jk_red_plan *pl, bool pick_reduced, const jk_view *v,
                       const int64_t *full_strides) {
  jk_operand *op = &it->ops[it->nops];
  op->data = v->data;
  op->itemsize = jk_dtype(v->dtype)->size;
  int n = 0;
  for (int d = 0; d < pl->ndim; d++)
    if (pl->reduced[d] == pick_reduced) {
      op->strides[n] = it->shape[n] == 1 ? 0 : full_strides[d];
      n++;
    }
  return it->nops++;
}

/* A collapsed iteration keeps at least one dimension (of extent 1). */
static void at_least_one(jk_iter *it) {
  if (it->ndim > 0) return;
  it->ndim = 1;
  it->shape[0] = 1;
  for (int o = 0; o < it->nops; o++) it->ops[o].strides[0] = 0;
}

/* The largest element offset any operand reaches, kept and reduced
 * dimensions together. */
/* The farthest element (in elements) an operand reaches over `it`. */
static int64_t reach(const jk_iter *it, const jk_operand *op) {
  int64_t r = 0;
  for (int d = 0; d < it->ndim; d++)
    r += (it->shape[d] - 1) * (op->strides[d] < 0 ? -op->strides[d] : op->strides[d]);
  return r;
}

static bool fits_32(const jk_red_plan *pl, int n) {
  if (pl->K > INT32_MAX || pl->R > INT32_MAX || pl->K * (int64_t)pl->S > INT32_MAX) return false;
  for (int p = 0; p < n; p++) {
    if (pl->op_k[p] < 0) continue;
    int64_t r = reach(&pl->kept, &pl->kept.ops[pl->op_k[p]]);
    if (pl->op_r[p] >= 0) r += reach(&pl->red, &pl->red.ops[pl->op_r[p]]);
    if (r > INT32_MAX) return false;
  }
  return true;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* The chunks of a split fold in groups of G, then the groups (see
 * emit_combine): one level up to 32 chunks, else groups of about the
 * square root of S, so that neither level's fold reads more than 256
 * partial results an output. */
uint64_t jk_red_fanin(uint64_t S) {
  if (S <= 32) return S < 1 ? 1 : S;
  uint64_t G = 1;
  while (G * G < S) G++;
  return G;
}

/* How a split folds its chunks. Reductions reading less than
 * JK_RED_PASS_BYTES fold them in the same kernel (emit_combine): one
 * launch and a memset of the tickets in place of two launches, which
 * halved the host time of sums of 2^16 and 2^18 float32 on the H200
 * (12 us to 6) and cut their GPU time back to back from 11-12 us to 7.
 * Larger ones use a second kernel: beside it, in one session on one
 * H200, the combine in the kernel took 1.05-1.15 of its time on the
 * sweep's split reductions of 2^24 to 2^26 elements (every block's
 * ticket, and the memset, cost more there than a second launch); sizes
 * between 1 and 64 MiB were not measured. The fold's threads per output:
 * in the kernel, a thread where neither level of the tree folds more
 * than 4 (emit_combine picks the lanes from the tile otherwise); in the
 * second kernel, a block for many chunks (a whole-array sum), a warp
 * from 5, a thread for 2 to 4 (a warp per output of 4 chunks left 28
 * lanes idle: 4.6 us over 16384 outputs in Nsight Compute; a thread per
 * output of 8 or 16 chunks measured slower than a warp, its folds one
 * load after another). */
#define JK_RED_PASS_BYTES ((uint64_t)16 << 20)

static void choose_combine(const jk_red_plan *pl, size_t widest, jk_red_spec *s) {
  uint64_t S = pl->S, G = jk_red_fanin(S), S2 = ceil_div(S, G), most = G > S2 ? G : S2;
  uint64_t bytes = (uint64_t)pl->K * (uint64_t)pl->R * widest;
  s->second_pass = S > 1 && bytes >= JK_RED_PASS_BYTES;
  if (S == 1)
    s->final_group = 0;
  else if (s->second_pass)
    s->final_group = S >= 256 ? JK_RED_BLOCK : S > 4 ? 32 : 1;
  else
    s->final_group = most > 4 ? 32 : 1;
}

/* Strategy 'r' (rows): where the innermost kept dimension and the run of
 * reduced elements inside each of its points (B of them, 1 when the
 * innermost reduced dimension is not contiguous) make one contiguous row
 * of W = Ein B elements in every input (a column sum, axes 0 and 2 of a
 * 3-D array), threads read rows in vectors of V and a block takes a
 * segment of C vectors (the whole row when it is narrow) of 256 / C rows
 * at a time. C is a power of two up to 256 whose segments tile the row
 * and hold whole outputs, about 32 of them (as many as a block of 'o'
 * holds: more make the partial results of a split too many) and 64 bytes
 * at least. Applies when V and B divide one another, at most 32 vectors
 * share an output, and every input's rows and vectors are aligned; sets
 * the vector, the segment and the run. `first` is the first input the
 * reduced dimensions walk. */
static bool row_layout(const jk_red_plan *pl, int n, int first, size_t widest, jk_red_spec *s) {
  if (pl->R <= 0 || widest > 16) return false;
  int nk = pl->kept.ndim, nr = pl->red.ndim;
  int64_t ein = pl->kept.shape[nk - 1];
  const jk_operand *fr = &pl->red.ops[pl->op_r[first]];
  bool run = nr >= 2 && fr->strides[nr - 1] == 1;
  int64_t B = run ? pl->red.shape[nr - 1] : 1;
  if (ein < 2 || B > 512) return false;
  for (int p = 0; p < n; p++) {
    if (pl->op_r[p] < 0) continue;
    const jk_operand *q = &pl->kept.ops[pl->op_k[p]], *o = &pl->red.ops[pl->op_r[p]];
    if (q->strides[nk - 1] != B || (run && o->strides[nr - 1] != 1)) return false;
  }
  int64_t W = ein * B;
  /* At most four outputs a vector (four accumulators a thread): eight
   * float16 outputs a thread took 33 registers, too many for eight
   * blocks a multiprocessor (H200: 0.69 of DRAM's peak, against 0.87 for
   * float32 segments). The loads make up in number what they lose in
   * width. */
  int widest_v = (int)(16 / widest);
  if (widest_v > 4 * B) widest_v = (int)(4 * B);
  for (int V = widest_v; V >= 1; V /= 2) {
    if (W % V != 0 || (B % V != 0 && V % B != 0) || (B >= V && B / V > 32)) continue;
    /* The widest segment up to about 32 outputs (and 256 vectors) that
     * tiles the row in whole outputs. */
    int64_t most = 32 * B / V;
    if ((size_t)(most * V) * widest < 64) most = (int64_t)(64 / ((size_t)V * widest));
    /* Few rows: wider segments, so that each thread still reads 8 rows
     * (64 rows: segments of 32 vectors, 8 rows at a time). */
    int64_t rows = pl->R / B, wide = (2048 + rows - 1) / rows;
    if (wide > most) most = wide;
    if (most > 256) most = 256;
    int64_t C = 1;
    while (C * 2 <= most && C * 2 <= W / V) C *= 2;
    while (C >= 1 && (W % (C * V) != 0 || (C * V) % B != 0)) C /= 2;
    /* A segment of part of a row narrower than 64 bytes would have each
     * block pull whole rows through the cache for a few of their bytes. */
    if (C < 1 || (C * V != W && (size_t)(C * V) * widest < 64)) continue;
    bool ok = true;
    for (int p = 0; p < n && ok; p++) {
      if (pl->op_r[p] < 0) continue;
      const jk_operand *q = &pl->kept.ops[pl->op_k[p]], *o = &pl->red.ops[pl->op_r[p]];
      ok = (uintptr_t)o->data % ((size_t)V * o->itemsize) == 0;
      for (int d = 0; d < nk - 1 && ok; d++) ok = q->strides[d] % V == 0;
      for (int d = 0; d < nr - (run ? 1 : 0) && ok; d++) ok = o->strides[d] % V == 0;
    }
    if (!ok) continue;
    s->vec = (unsigned char)V;
    s->rcols = (unsigned short)C;
    s->rrun = (unsigned short)B;
    return true;
  }
  return false;
}

/* The strategy, the group, the vector width and the split. `force` is 0
 * for the layout's own choice, or a candidate of autotuning: 'i', 'o' (32
 * outputs a block), 'c' (a block per row of at most 16 outputs), 'w' (each
 * warp owns a row of outputs), 'm' (several outputs of one group a
 * thread) or 'r' (row segments), with the group, vector width and split
 * that strategy would have. Returns false when the candidate does not
 * apply to the layout (a row of more than 16 outputs for 'c', outputs of
 * more than one group for 'm', fewer rows of outputs than eight warps a
 * multiprocessor for 'w', rows that no segment tiles for 'r'). */
bool jk_red_choose(jk_red_plan *pl, int n, int sms_count, char force, jk_red_spec *s) {
  int first = -1;
  size_t widest = 1;
  for (int p = 0; p < n; p++)
    if (pl->op_r[p] >= 0) {
      if (first < 0) first = p;
      size_t isz = jk_dtype(pl->a.dtype[p])->size;
      if (isz > widest) widest = isz;
    }
  const jk_operand *fr = &pl->red.ops[pl->op_r[first]];
  const jk_operand *fk = &pl->kept.ops[pl->op_k[first]];
  int64_t rs = fr->strides[pl->red.ndim - 1], ks = fk->strides[pl->kept.ndim - 1];
  if (pl->K == 1 || rs == 1 || rs == -1)
    s->strategy = 'i';
  else if (ks == 1 || ks == -1)
    s->strategy = 'o';
  else
    s->strategy = pl->R >= pl->K ? 'i' : 'o';
  if (force != 0) s->strategy = force == 'i' || force == 'm' ? 'i' : 'o';
  s->ocols = 0;
  s->owarp = 0;
  s->ovec = 1;
  s->rcols = 0;
  s->rrun = 0;
  /* Row segments in place of columns read 32 outputs a block ('o'), and
   * of short runs read along the reduced elements ('i', kept and reduced
   * dimensions interleaved) when the outputs are few (so that 'i' would
   * split them); only where each thread gets 8 rows at least (fewer rows
   * leave most of a block's threads idle; row_layout widens the segments
   * of few rows to keep them). Measured on the H200 with
   * jitk_reduction_autotune beside the other strategies (docs/
   * PERFORMANCE.md): float16 column sums 0.81-0.92 of the time of the
   * best other strategy, float32 ones 0.97-1.00, (65536, 16, 16) float32
   * over axes 0 and 2 0.89 of the time along the elements; among 8192
   * outputs, (256, 8192, 16) over axes 0 and 2, segments took 1.10 (and
   * float16 1.19) of it, which the bound on outputs leaves to 'i'. */
  if (force == 'r' || force == 0) {
    jk_red_spec r = *s;
    bool fits = row_layout(pl, n, first, widest, &r);
    if (force == 'r' && !fits) return false;
    uint64_t P = fits ? JK_RED_BLOCK / r.rcols : 0, rows = fits ? (uint64_t)pl->R / r.rrun : 0;
    bool narrow_runs =
        s->strategy == 'i' && r.rrun > 1 && r.rrun * widest < 512 && pl->K < 4 * (int64_t)sms_count;
    /* Many outputs of few rows of 4-byte elements or wider stay with
     * warps that own their outputs (a warp's lanes read 128 contiguous
     * bytes of a row): 16 rows of (16, 16, 65536) float32, 0.90 of the
     * time of segments; 2-byte ones read 64, and segments took 0.81 of
     * their time on 64 rows of (64, 2^20) float16. */
    int64_t kin = pl->kept.shape[pl->kept.ndim - 1];
    int64_t per = kin <= 16 && fr->strides[pl->red.ndim - 1] == kin ? kin : 32;
    bool warps = (pl->K + per - 1) / per >= 32 * (int64_t)sms_count && widest >= 4;
    bool narrow_cols = s->strategy == 'o' && r.rrun == 1 && !warps;
    if (fits && (force == 'r' || ((narrow_runs || narrow_cols) && rows >= 8 * P))) {
      *s = r;
      s->strategy = 'r';
      s->group = 32;
      uint64_t outs = (uint64_t)s->rcols * s->vec / s->rrun;
      uint64_t blocks = (uint64_t)pl->K / outs, S = 1;
      pl->units = rows;
      if (blocks < (uint64_t)sms_count * 8) {
        S = (uint64_t)sms_count * 16 / blocks;
        uint64_t most = rows / (P * 8);
        if (S > most) S = most;
        if (S > 65535) S = 65535;
        if (S < 1) S = 1;
      }
      pl->chunk = ceil_div(pl->units, S);
      pl->S = ceil_div(pl->units, pl->chunk);
      if (pl->S == 1) pl->chunk = pl->units;
      choose_combine(pl, widest, s);
      return true;
    }
  }
  /* 16-byte loads along the contiguous innermost reduced dimension: the
   * widest vector, up to 16 bytes, that divides its extent and that every
   * input is aligned to there (rows shorter than 16 bytes, four float16,
   * still load whole rows at once). With several reduced dimensions (kept
   * and reduced ones interleaved, such as axes 0 and 2 of a 3-D array)
   * the vectors walk runs of the innermost one, which every other stride
   * must keep aligned. */
  int v = 1;
  if (s->strategy == 'i' && widest < 16) {
    int last = pl->red.ndim - 1;
    for (v = (int)(16 / widest); v > 1; v /= 2) {
      bool ok = pl->red.shape[last] % v == 0;
      for (int p = 0; p < n && ok; p++) {
        if (pl->op_r[p] < 0) continue;
        const jk_operand *o = &pl->red.ops[pl->op_r[p]];
        const jk_operand *q = &pl->kept.ops[pl->op_k[p]];
        ok = o->strides[last] == 1 && (uintptr_t)o->data % ((size_t)v * o->itemsize) == 0;
        for (int d = 0; d < last && ok; d++) ok = o->strides[d] % v == 0;
        for (int d = 0; d < pl->kept.ndim && ok; d++) ok = q->strides[d] % v == 0;
      }
      if (ok) break;
    }
  }
  s->vec = (unsigned char)v;
  pl->units = (uint64_t)pl->R / (uint64_t)v;
  /* Enough blocks for a few waves of the device; fewer outputs than that
   * split their elements into chunks, each of a fair size (a split costs
   * a temporary, cleared tickets and a combine, which small reductions
   * would feel).
   * Measured on the H200 (docs/PERFORMANCE.md): a whole-array sum reads
   * fastest with 16 chunks per multiprocessor (1.06-1.08 of copy against
   * 1.02-1.03 with 4 or 8), a column sum of 16384^2 with about 16 blocks
   * per multiprocessor (1.02 with 4 splits, 0.97 with 9, 0.92 with 32). */
  uint64_t S = 1, sms = (uint64_t)sms_count;
  if (s->strategy == 'i') {
    /* A block per output for long rows, a warp for rows of 32 groups or
     * more, and for shorter rows a group of as many lanes as the row has
     * groups, several rows a warp, so that no lane idles and a warp's
     * loads stay contiguous across rows. Fewer outputs than
     * multiprocessors take a block each from 256 groups on: a sum of 4096
     * float32 in one block, one launch, where two warps of a split took a
     * second launch and a temporary (H200: 10.2 us of host time a call
     * against 4.7 for 16384 elements in one block, docs/PERFORMANCE.md). */
    if (pl->units >= 2048 || (pl->units >= 256 && pl->K < (int64_t)sms)) {
      s->group = 256;
    } else if (pl->units >= 32) {
      s->group = 32;
    } else {
      s->group = 1;
      while (s->group < pl->units) s->group = (unsigned short)(s->group * 2);
    }
    uint64_t blocks = ceil_div((uint64_t)pl->K, JK_RED_BLOCK / s->group);
    if (blocks < sms * 4) {
      S = ceil_div(sms * 16, blocks);
      uint64_t most = pl->units / (16 * (uint64_t)s->group);
      if (S > most) S = most;
    }
  } else {
    s->group = 32;
    /* Few outputs along a contiguous kept row whose reduced rows follow
     * one another (column sums of a narrow matrix, a middle axis): a
     * block takes that row of outputs, and each warp several reduced rows
     * at once, which lie together in memory. */
    int64_t inner = pl->kept.ndim > 0 ? pl->kept.shape[pl->kept.ndim - 1] : 1;
    if (force == 'c' && !(inner >= 1 && inner <= 16)) return false;
    if (force == 'c' || (force == 0 && ks == 1 && inner >= 1 && inner <= 16 && rs == inner))
      s->ocols = (unsigned char)inner;
    uint64_t per_block = s->ocols ? s->ocols : 32;
    uint64_t blocks = ceil_div((uint64_t)pl->K, per_block);
    /* Rows of outputs enough for every warp of the device several times
     * over: each warp owns one row of outputs and reads all its reduced
     * rows, without the block's shared-memory combine (many outputs of
     * few rows each, such as a sum over a short outer axis). */
    /* A candidate only where the rows of outputs give every
     * multiprocessor eight warps at least: fewer leave the device idle
     * (measured 30 to 3,000 times slower than the other strategies). */
    if (force == 'w' && blocks < sms * 8) return false;
    s->owarp = force == 'w' || (force == 0 && blocks >= sms * 32);
    /* Inputs of 2 bytes (or 1) or less: each thread takes a pair (or four)
     * of neighbouring outputs, read as one vector of each row, when every
     * input walks the kept inner dimension contiguously and every vector
     * is aligned: a warp then reads 128 contiguous bytes of a row rather
     * than 64 (32), the loads the float32 path makes. Rows of fewer than
     * 32 vectors would leave lanes idle (H200: rows of 32 float16, 0.58 of
     * copy with pairs against 0.48). The split below still counts blocks
     * of 32 outputs: a block of pairs does twice the work. */
    s->ovec = 1;
    if (!s->ocols && !s->owarp && widest <= 2) {
      int V = (int)(4 / widest);
      bool ok = inner % V == 0 && inner >= 32 * V;
      for (int p = 0; p < n && ok; p++) {
        if (pl->op_r[p] < 0) continue;
        const jk_operand *q = &pl->kept.ops[pl->op_k[p]], *o = &pl->red.ops[pl->op_r[p]];
        ok = q->strides[pl->kept.ndim - 1] == 1 &&
             (uintptr_t)q->data % ((size_t)V * q->itemsize) == 0;
        for (int d = 0; d < pl->kept.ndim - 1 && ok; d++) ok = q->strides[d] % V == 0;
        for (int d = 0; d < pl->red.ndim && ok; d++) ok = o->strides[d] % V == 0;
      }
      if (ok) s->ovec = (unsigned char)V;
    }
    /* Only few blocks split (warp-owned rows are many, and never do). */
    if (blocks < sms * 8 && !s->owarp) {
      S = sms * 16 / blocks;
      uint64_t most = pl->units / 64;
      if (S > most) S = most;
      if (S > 65535) S = 65535;
    }
  }
  if (S < 1) S = 1;
  /* Rows of one group (a sum over an axis of extent 1 or over no axis,
   * or rows of four float32): each output is a single load, and a thread
   * per output would keep 2 to 16 bytes in flight. Each thread takes
   * several outputs instead, all their loads first, about 32 bytes of
   * them: a map with a reduction's semantics, each output folded in the
   * same order as before. */
  if (force == 'm' && !(s->strategy == 'i' && pl->units == 1)) return false;
  if (pl->units == 1 && (force == 0 || force == 'm')) {
    size_t per = (size_t)v * widest, u = 32 / per;
    s->strategy = 'm';
    s->group = (unsigned short)(u < 2 ? 2 : u > 8 ? 8 : u);
    s->ocols = 0;
    s->owarp = 0;
    s->ovec = 1;
    S = 1;
  }
  pl->chunk = pl->units == 0 ? 0 : ceil_div(pl->units, S);
  /* No empty chunk: each one's partial result holds something. */
  pl->S = pl->chunk == 0 ? 1 : ceil_div(pl->units, pl->chunk);
  if (pl->S == 1) pl->chunk = pl->units;
  choose_combine(pl, widest, s);
  return true;
}

void jk_red_layout(jk_red_plan *pl, const jk_param_list *params, int num_in, bool keepdims,
                   bool c_order, int sms, jk_red_spec *spec) {
  int n = (int)params->count;
  /* Inputs broadcast to the full shape, then split into kept and reduced
   * dimensions; outputs walk the kept ones. */
  jk_iter full;
  jk_iter_init(&full, pl->ndim, pl->shape);
  sub_iter(&pl->kept, pl, false);
  sub_iter(&pl->red, pl, true);
  for (int p = 0; p < n; p++) pl->op_k[p] = pl->op_r[p] = -1;
  for (int p = num_in; p < n; p++) {
    const jk_view *v = &pl->a.views[p];
    int64_t fs[JITK_MAX_NDIM];
    for (int d = 0, o = 0; d < pl->ndim; d++) {
      if (pl->reduced[d]) {
        fs[d] = 0;
        if (keepdims) o++;
      } else {
        fs[d] = v->strides[o++];
      }
    }
    pl->op_k[p] = add_strides(&pl->kept, pl, false, v, fs);
  }
  for (int p = 0; p < num_in; p++) {
    if (!pl->a.is_array[p] || params->params[p].raw) continue;
    int f = full.nops;
    jk_iter_add(&full, &pl->a.views[p]);
    pl->op_k[p] = add_strides(&pl->kept, pl, false, &pl->a.views[p], full.ops[f].strides);
    pl->op_r[p] = add_strides(&pl->red, pl, true, &pl->a.views[p], full.ops[f].strides);
  }
  jk_iter_coalesce(&pl->kept, true);
  if (pl->R > 0)
    jk_iter_coalesce(&pl->red, !c_order);
  else {
    pl->red.ndim = 1;
    pl->red.shape[0] = 0;
    for (int o = 0; o < pl->red.nops; o++) pl->red.ops[o].strides[0] = 0;
  }
  at_least_one(&pl->kept);
  at_least_one(&pl->red);

  spec->nk = (unsigned char)pl->kept.ndim;
  spec->nr = (unsigned char)pl->red.ndim;
  jk_red_choose(pl, n, sms, 0, spec);
  spec->idx64 = !fits_32(pl, n);
}

/* What a launch and jitk_reduction_outputs share: the arguments classified
 * and bound, the inputs' broadcast shape, the axes, the outputs' shape,
 * and the given outputs checked against it. The checks come in CuPy's
 * order (the inputs' broadcast, the types, the axes, the outputs' shape),
 * so that arguments wrong in two ways get CuPy's error. Reads no memory
 * and calls no driver. */
static jitk_status prepare(jitk_reduction *k, const char *what, const jitk_arg *args, size_t nargs,
                           const int *axes, int num_axes, int keepdims, bool can_allocate,
                           jk_red_plan *pl) {
  jitk_engine *e = k->g.engine;
  int n = (int)k->g.params.count;
  jitk_status st = jk_gen_classify(&k->g, what, args, nargs, can_allocate, &pl->a);
  if (st != JITK_OK) return st;
  /* The broadcast shape of the non-raw array inputs. */
  const jk_view *iv[JK_MAX_EW_PARAMS];
  const char *iname[JK_MAX_EW_PARAMS];
  int ni = 0;
  for (int i = 0; i < pl->a.nb; i++)
    if (pl->a.bparam[i] < k->g.num_in) {
      iv[ni] = pl->a.bviews[i];
      iname[ni++] = pl->a.bnames[i];
    }
  if (ni == 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: no non-raw array input gives the shape to reduce", k->g.name);
  st = jk_broadcast_shape(e, iv, iname, ni, &pl->ndim, pl->shape);
  if (st != JITK_OK) return st;
  st = jk_gen_bind(&k->g, args, nargs, &pl->a);
  if (st != JITK_OK) return st;
  st = axes_mask(k, axes, num_axes, pl);
  if (st != JITK_OK) return st;
  pl->out_ndim = 0;
  pl->K = 1;
  pl->R = 1;
  for (int d = 0; d < pl->ndim; d++) {
    if (pl->reduced[d]) {
      pl->R *= pl->shape[d];
      if (keepdims) pl->out_shape[pl->out_ndim++] = 1;
    } else {
      pl->K *= pl->shape[d];
      pl->out_shape[pl->out_ndim++] = pl->shape[d];
    }
  }
  if (pl->R == 0 && k->identity == NULL && pl->K > 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "kernel %s: a reduction over no elements needs an identity, and this kernel "
                   "has none",
                   k->g.name);
  /* Given outputs must have the reduced shape. */
  for (int p = k->g.num_in; p < n; p++) {
    if (!pl->a.is_array[p]) continue;
    const jk_view *v = &pl->a.views[p];
    bool same = v->ndim == pl->out_ndim;
    for (int d = 0; same && d < v->ndim; d++) same = v->shape[d] == pl->out_shape[d];
    if (!same)
      return jk_fail(e, JITK_ERR_INVALID_ARRAY,
                     "kernel %s: %s does not have the reduced shape (%d dimensions%s)", k->g.name,
                     k->g.labels[p], pl->out_ndim, keepdims ? ", keepdims" : "");
  }
  return JITK_OK;
}

/* --- autotuned strategies --- */

/* What the strategy depends on besides addresses: the collapsed kept and
 * reduced dimensions with every operand's strides there, and the dtypes
 * and kinds of the parameters. */
static uint64_t layout_hash(const jk_red_plan *pl, const jk_red_spec *spec) {
  uint64_t h = XXH3_64bits(spec->dtype, (size_t)spec->nparams);
  h = XXH3_64bits_withSeed(spec->kind, (size_t)spec->nparams, h);
  const jk_iter *its[2] = {&pl->kept, &pl->red};
  for (int i = 0; i < 2; i++) {
    const jk_iter *it = its[i];
    size_t dims = sizeof(int64_t) * (size_t)it->ndim;
    h = XXH3_64bits_withSeed(it->shape, dims, h ^ (uint64_t)it->ndim);
    for (int o = 0; o < it->nops; o++) h = XXH3_64bits_withSeed(it->ops[o].strides, dims, h);
  }
  return h;
}

/* The tuning table's key: generator, target, device, the kernel's
 * expressions, parameter lists and name (hashed), and the layout. */
static void tuning_prefix(const jitk_reduction *k, char *buf, size_t size) {
  const jitk_engine *e = k->g.engine;
  snprintf(buf, size, "%s %s %s ", JK_RED_GENERATOR, e->target.arch,
           e->has_device ? e->info.name : "none");
}

static void tuning_key(const jitk_reduction *k, uint64_t layout, char *buf, size_t size) {
  char prefix[512];
  tuning_prefix(k, prefix, sizeof prefix);
  snprintf(buf, size, "%sops=%016llx layout=%016llx", prefix, (unsigned long long)k->ops_hash,
           (unsigned long long)layout);
}

static void remember(jitk_reduction *k, uint64_t layout, char force) {
  pthread_mutex_lock(&k->g.lock);
  unsigned i = 0;
  while (i < k->num_tuned && k->tuned[i].layout != layout) i++;
  if (i == k->num_tuned) {
    if (k->num_tuned < JK_RED_TUNED) {
      k->num_tuned++;
    } else {
      i = k->next_tuned;
      k->next_tuned = (k->next_tuned + 1) % JK_RED_TUNED;
    }
  }
  k->tuned[i].layout = layout;
  k->tuned[i].force = force;
  pthread_mutex_unlock(&k->g.lock);
}

/* The strategy autotuning chose for this layout: remembered by the kernel,
 * else read once from the tuning table (a layout without one is
 * remembered as such). 0: none. */
static char tuned_choice(jitk_reduction *k, const jk_red_plan *pl, const jk_red_spec *spec) {
  /* Whether the tuning table has any reduction choice for this target
   * and device, asked once per kernel: a kernel made before another
   * process's tuning does not see it. */
  int state = atomic_load(&k->tune_state);
  if (state == 0) {
    char prefix[512];
    tuning_prefix(k, prefix, sizeof prefix);
    int expected = 0;
    atomic_compare_exchange_strong(&k->tune_state, &expected,
                                   jk_tuning_any(k->g.engine, prefix) ? 2 : 1);
    state = atomic_load(&k->tune_state);
  }
  if (state != 2) return 0;
  uint64_t layout = layout_hash(pl, spec);
  pthread_mutex_lock(&k->g.lock);
  for (unsigned i = 0; i < k->num_tuned; i++)
    if (k->tuned[i].layout == layout) {
      char f = k->tuned[i].force;
      pthread_mutex_unlock(&k->g.lock);
      return f;
    }
  pthread_mutex_unlock(&k->g.lock);
  char key[640], choice[32];
  bool found = false;
  tuning_key(k, layout, key, sizeof key);
  jk_tuning_get(k->g.engine, key, choice, sizeof choice, &found);
  /* A choice this version does not know is no choice. */
  char force = 0;
  if (found && strncmp(choice, "strategy=", 9) == 0 && strlen(choice) == 10 &&
      strchr("iocwmr", choice[9]) != NULL)
    force = choice[9];
  /* "strategy=d": the layout's own choice measured fastest (force 0). */
  remember(k, layout, force);
  return force;
}

static jitk_status plan(jitk_reduction *k, jitk_stream stream, const jitk_arg *args, size_t nargs,
                        const int *axes, int num_axes, int keepdims, DLManagedTensor **outputs,
                        jk_red_plan *pl, jk_red_spec *spec, bool *nothing) {
  jitk_engine *e = k->g.engine;
  int n = (int)k->g.params.count;
  *nothing = false;
  jitk_status st = prepare(k, "jitk_reduction_launch", args, nargs, axes, num_axes, keepdims,
                           outputs != NULL, pl);
  if (st != JITK_OK) return st;
  /* The outputs left to jitk are made. */
  for (int p = k->g.num_in; p < n; p++) {
    if (pl->a.is_array[p]) continue;
    st = jk_gen_allocate(e, stream, pl->a.dtype[p], pl->out_ndim, pl->out_shape,
                         &outputs[p - k->g.num_in], &pl->a.views[p]);
    if (st != JITK_OK) return st;
    pl->a.is_array[p] = true;
  }
  st = jk_gen_check_overlap(&k->g, &pl->a);
  if (st != JITK_OK) return st;
  if (pl->K == 0) {
    *nothing = true;
    return JITK_OK;
  }

  memset(spec, 0, sizeof *spec);
  spec->nparams = n;
  spec->has_identity = k->identity != NULL;
  spec->reduce_dtype =
      (unsigned char)(k->reduce_placeholder >= 0 ? pl->a.bound[k->reduce_placeholder]
                                                 : k->reduce_dtype);
  for (int p = 0; p < n; p++) {
    const jk_param_decl *d = &k->g.params.params[p];
    spec->dtype[p] = (unsigned char)pl->a.dtype[p];
    if (d->raw) {
      spec->kind[p] = JK_EW_RAW;
      spec->raw_ndim[p] = (unsigned char)pl->a.views[p].ndim;
    } else {
      spec->kind[p] = pl->a.is_array[p] ? JK_EW_ARRAY : JK_EW_SCALAR;
    }
  }
  jk_red_layout(pl, &k->g.params, k->g.num_in, keepdims, k->uses_j, e->info.multiprocessors, spec);
  /* Raw arrays take no part in the layout, but map_expr indexes them with
   * expressions of _j (`r[_j * 4096]`), which 32 bits would wrap on one
   * past 2^31 bytes. */
  if (!jk_gen_raw_fits_32(&k->g, &pl->a)) spec->idx64 = true;
  char force = tuned_choice(k, pl, spec);
  if (force != 0 && !jk_red_choose(pl, n, e->info.multiprocessors, force, spec))
    jk_red_choose(pl, n, e->info.multiprocessors, 0, spec);
  return JITK_OK;
}

/* The extents (and their magic numbers) of dimensions 1 and up; the
 * innermost counted in groups of `group` elements (vectors along several
 * reduced dimensions), else in elements. */
static void push_dims(void **kp, int *np, unsigned char **cur, const jk_iter *it, bool wide,
                      int group) {
  for (int d = 1; d < it->ndim; d++) {
    uint64_t magic;
    unsigned shift;
    uint64_t extent = (uint64_t)it->shape[d] / (d == it->ndim - 1 ? (uint64_t)group : 1);
    jk_gen_magic(extent, wide, &magic, &shift);
    if (wide) {
      uint64_t ext = extent;
      JK_PUSH(kp, *np, *cur, ext);
      JK_PUSH(kp, *np, *cur, magic);
    } else {
      uint32_t ext = (uint32_t)extent, m = (uint32_t)magic;
      JK_PUSH(kp, *np, *cur, ext);
      JK_PUSH(kp, *np, *cur, m);
    }
    JK_PUSH(kp, *np, *cur, shift);
  }
}

/* An operand's strides, the innermost one per group of `group` elements. */
static void push_strides(void **kp, int *np, unsigned char **cur, const jk_operand *op, int nd,
                         bool wide, int group) {
  for (int d = 0; d < nd; d++) {
    int64_t full = op->strides[d] * (d == nd - 1 ? group : 1);
    if (wide) {
      int64_t st = full;
      JK_PUSH(kp, *np, *cur, st);
    } else {
      int32_t st = (int32_t)full;
      JK_PUSH(kp, *np, *cur, st);
    }
  }
}

static jitk_status run(jitk_reduction *k, jitk_stream stream, const jitk_arg *args, jk_red_plan *pl,
                       const jk_gen_variant *v) {
  jitk_engine *e = k->g.engine;
  const jk_red_spec *s = (const jk_red_spec *)(const void *)v->spec;
  bool wide = s->idx64;
  _Alignas(16) unsigned char
      store[8 * (8 + 6 * JITK_MAX_NDIM) + JK_MAX_EW_PARAMS * 8 * (1 + 2 * JITK_MAX_NDIM) * 2];
  /* One slot more than the parameters for the NULL that ends the list. */
  void *kp[9 + 6 * JITK_MAX_NDIM + JK_MAX_EW_PARAMS * (1 + 2 * JITK_MAX_NDIM)];
  int np = 0;
  unsigned char *cur = store;
  uint64_t G = jk_red_fanin(pl->S), S2 = ceil_div(pl->S, G);
  uint64_t sizes[6] = {(uint64_t)pl->K, (uint64_t)pl->R, pl->units, pl->S, pl->chunk, G};
  for (int i = 0; i < 6; i++) {
    if (wide) {
      JK_PUSH(kp, np, cur, sizes[i]);
    } else {
      uint32_t x = (uint32_t)sizes[i];
      JK_PUSH(kp, np, cur, x);
    }
  }
  /* Vectors along several reduced dimensions walk the innermost in
   * groups: its extent and strides are given per group. */
  int rgroup = s->strategy == 'i' && s->vec > 1 && s->nr > 1 ? s->vec : 1;
  push_dims(kp, &np, &cur, &pl->kept, wide, 1);
  push_dims(kp, &np, &cur, &pl->red, wide, rgroup);
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] == JK_EW_ARRAY) {
      const jk_operand *ok = &pl->kept.ops[pl->op_k[p]];
      void *ptr = ok->data;
      JK_PUSH(kp, np, cur, ptr);
      push_strides(kp, &np, &cur, ok, s->nk, wide, 1);
      if (pl->op_r[p] >= 0)
        push_strides(kp, &np, &cur, &pl->red.ops[pl->op_r[p]], s->nr, wide, rgroup);
    } else {
      jitk_status st =
          jk_gen_push_other(&k->g, &pl->a, args, p, s->kind[p] == JK_EW_RAW, kp, &np, &cur);
      if (JK_UNLIKELY(st != JITK_OK)) return st;
    }
  }
  unsigned gx, gy = 1;
  if (s->strategy == 'o' && s->owarp) {
    /* A warp per row of outputs, eight a block. */
    uint64_t b = ceil_div(ceil_div((uint64_t)pl->K, s->ocols ? s->ocols : 32), JK_RED_BLOCK / 32);
    gx = (unsigned)(b > 0x7fffffffu ? 0x7fffffffu : b);
  } else if (s->strategy == 'o') {
    gx = (unsigned)ceil_div((uint64_t)pl->K, s->ocols ? s->ocols : 32 * (uint64_t)s->ovec);
    gy = (unsigned)pl->S;
  } else if (s->strategy == 'r') {
    /* A block per segment of outputs (grid-strided past 2^31 - 1), the
     * split along y. */
    uint64_t b = (uint64_t)pl->K / ((uint64_t)s->rcols * s->vec / s->rrun);
    gx = (unsigned)(b > 0x7fffffffu ? 0x7fffffffu : b);
    gy = (unsigned)pl->S;
  } else if (s->strategy == 'm') {
    /* `group` outputs a thread. */
    uint64_t b = ceil_div((uint64_t)pl->K, (uint64_t)JK_RED_BLOCK * s->group);
    gx = (unsigned)(b > 0x7fffffffu ? 0x7fffffffu : b);
  } else {
    /* Groups of `group` threads, one output each, the split along y. */
    uint64_t b = ceil_div((uint64_t)pl->K, JK_RED_BLOCK / s->group);
    gx = (unsigned)(b > 0x7fffffffu ? 0x7fffffffu : b);
    gy = (unsigned)pl->S;
  }
  /* A split takes a temporary: the partial results, one per output and
   * chunk, and one per output and group of chunks, then the tickets,
   * S2 + 1 per tile of outputs (a block's along x, which the grid covers
   * whole when it splits: splits are for few outputs), cleared here on
   * the stream; the blocks that take the last ones fold the partial
   * results (emit_combine). With a second pass, the partial results
   * alone, which the second kernel folds. */
  bool pass = pl->S > 1 && s->second_pass;
  void *work = NULL, *tick = NULL;
  size_t tick_bytes = 0;
  if (pl->S > 1) {
    size_t parts =
        (v->slot * (size_t)pl->K * (size_t)(pl->S + (!pass && S2 > 1 ? S2 : 0)) + 15) & ~(size_t)15;
    tick_bytes = pass ? 0 : (size_t)gx * (size_t)(S2 + 1) * sizeof(unsigned int);
    jitk_status st = jk_temp_alloc(e, parts + tick_bytes, stream, &work);
    if (st != JITK_OK) return st;
    if (!pass) tick = (unsigned char *)work + parts;
  }
  JK_PUSH(kp, np, cur, work);
  JK_PUSH(kp, np, cur, tick);
  /* The driver reads as many parameters as the kernel has; the NULL after
   * them tells the stand-in driver of the tests where the list ends. */
  kp[np] = NULL;
  /* The tickets' clearing, the kernel, and the second pass's kernel. */
  jk_launch_op ops[3];
  int n = 0;
  if (tick != NULL)
    ops[n++] = (jk_launch_op){.name = k->g.name, .clear = tick, .clear_bytes = tick_bytes};
  ops[n++] = (jk_launch_op){.fn = v->fn[0],
                            .name = k->g.name,
                            .grid = {gx, gy, 1},
                            .block = {JK_RED_BLOCK, 1, 1},
                            .params = kp};
  if (pass) {
    uint64_t b = ceil_div((uint64_t)pl->K, JK_RED_BLOCK / s->final_group);
    ops[n++] = (jk_launch_op){.fn = v->fn[1],
                              .name = k->g.name,
                              .grid = {(unsigned)(b > 0x7fffffffu ? 0x7fffffffu : b), 1, 1},
                              .block = {JK_RED_BLOCK, 1, 1},
                              .params = kp};
  }
  jitk_status st = jk_launch_ops(e, stream, ops, n);
  if (work != NULL) jk_temp_free(e, work, stream);
  return st;
}

/* Whether a launch's arguments, axes and keepdims are the memo's; when
 * they are, their addresses are written into its plan. */
static bool memo_take(struct red_memo *m, const jitk_arg *args, size_t nargs, const int *axes,
                      int num_axes, int keepdims) {
  bool all = axes == NULL || num_axes < 0;
  if (!m->valid || m->nargs != nargs || m->keepdims != keepdims || m->all_axes != all) return false;
  if (!all &&
      (m->num_axes != num_axes || memcmp(m->axes, axes, sizeof(int) * (size_t)num_axes) != 0))
    return false;
  if (!jk_memo_matches(m->arg, m->pl.a.views, args, nargs)) return false;
  jk_red_plan *pl = &m->pl;
  for (size_t p = 0; p < nargs; p++) {
    if (args[p].kind != JITK_ARG_ARRAY) continue;
    char *first = (char *)args[p].tensor->data + args[p].tensor->byte_offset;
    pl->a.views[p].data = first;
    if (pl->op_k[p] >= 0) pl->kept.ops[pl->op_k[p]].data = first;
    if (pl->op_r[p] >= 0) pl->red.ops[pl->op_r[p]].data = first;
  }
  return true;
}

/* Records the layout of a launch that just ran with the plan in m->pl and
 * the variant in m->v. Not recorded: launches that allocated outputs (the
 * next one allocates again), more axes than dimensions can be, and plans
 * whose operands do not start where their views do (a memo hit writes
 * one address into both). */
static void memo_record(struct red_memo *m, const jitk_arg *args, size_t nargs, const int *axes,
                        int num_axes, int keepdims) {
  const jk_red_plan *pl = &m->pl;
  m->all_axes = axes == NULL || num_axes < 0;
  if (pl->a.need_alloc || (!m->all_axes && num_axes > JITK_MAX_NDIM)) return;
  for (size_t p = 0; p < nargs; p++) {
    if (!pl->a.is_array[p]) continue;
    const void *first = pl->a.views[p].data;
    if ((pl->op_k[p] >= 0 && pl->kept.ops[pl->op_k[p]].data != first) ||
        (pl->op_r[p] >= 0 && pl->red.ops[pl->op_r[p]].data != first))
      return;
  }
  m->nargs = nargs;
  m->keepdims = keepdims;
  m->num_axes = m->all_axes ? 0 : num_axes;
  if (!m->all_axes) memcpy(m->axes, axes, sizeof(int) * (size_t)num_axes);
  m->valid = jk_memo_record(m->arg, args, nargs);
}

/* The memo no longer taken: the next launch plans afresh (and looks its
 * variant up, so that the kernel's source names what it launched again,
 * after a compile or a prepare of another layout named that one). */
static void forget_memo(jitk_reduction *k) {
  if (k->memo == NULL) return;
  pthread_mutex_lock(&k->memo_lock);
  k->memo->valid = false;
  pthread_mutex_unlock(&k->memo_lock);
}

/* What a launch and jitk_reduction_prepare share: the plan, then the
 * specialization; a launch runs it (and hands over the outputs it made),
 * a prepare lets the outputs go. A launch of the memo's layout skips the
 * plan and the lookup. */
static jitk_status launch(jitk_reduction *k, const char *what, jitk_stream stream,
                          const jitk_arg *args, size_t nargs, const int *axes, int num_axes,
                          int keepdims, DLManagedTensor **outputs, bool prepare) {
  jitk_engine *e = k->g.engine;
  jitk_status st = jk_require_device(e, what);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  /* A prepare names its own layout's source, which the next launch must
   * name again (forget_memo). */
  if (prepare) forget_memo(k);
  struct red_memo *m = NULL;
  if (!prepare && k->memo != NULL && pthread_mutex_trylock(&k->memo_lock) == 0) {
    m = k->memo;
    if (memo_take(m, args, nargs, axes, num_axes, keepdims)) {
      k->memo_hits++;
      st = jk_gen_check_overlap(&k->g, &m->pl.a);
      if (st == JITK_OK) st = run(k, stream, args, &m->pl, &m->v);
      pthread_mutex_unlock(&k->memo_lock);
      return st;
    }
    m->valid = false;
  }
  /* Outputs are made into a local array and handed over only on success,
   * so a failed launch leaves the caller's `outputs` as it was. */
  DLManagedTensor *made[JK_MAX_EW_PARAMS];
  for (int j = 0; j < k->g.num_out; j++) made[j] = NULL;
  jk_red_plan local;
  jk_red_plan *pl = m != NULL ? &m->pl : &local;
  jk_gen_variant local_v;
  jk_gen_variant *v = m != NULL ? &m->v : &local_v;
  jk_red_spec spec;
  bool nothing;
  st = plan(k, stream, args, nargs, axes, num_axes, keepdims, outputs || prepare ? made : NULL, pl,
            &spec, &nothing);
  if (st == JITK_OK && !nothing) {
    st = jk_gen_variant_get(&k->g, &spec, prepare ? NULL : &stream, "jitk_reduction_prepare", v);
    if (st == JITK_OK && !prepare) st = run(k, stream, args, pl, v);
    if (st == JITK_OK && m != NULL) memo_record(m, args, nargs, axes, num_axes, keepdims);
  }
  if (m != NULL) pthread_mutex_unlock(&k->memo_lock);
  if (prepare) {
    jk_gen_release_outputs(k->g.num_out, made);
    return st;
  }
  return jk_gen_finish_outputs(st, k->g.num_out, made, outputs);
}

unsigned long long jk_reduction_memo_hits(jitk_reduction *k) {
  pthread_mutex_lock(&k->memo_lock);
  unsigned long long n = k->memo_hits;
  pthread_mutex_unlock(&k->memo_lock);
  return n;
}

jitk_status jitk_reduction_launch(jitk_reduction *k, jitk_stream stream, const jitk_arg *args,
                                  size_t nargs, const int *axes, int num_axes, int keepdims,
                                  DLManagedTensor **outputs) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_launch: kernel is NULL");
  return launch(k, "jitk_reduction_launch", stream, args, nargs, axes, num_axes, keepdims, outputs,
                false);
}

jitk_status jitk_reduction_link(jitk_reduction *k, const jitk_link_piece *pieces, size_t num_pieces,
                                const jitk_link_options *options) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_link: kernel is NULL");
  return jk_gen_set_link(&k->g, "jitk_reduction_link", pieces, num_pieces, options);
}

jitk_status jitk_reduction_prepare(jitk_reduction *k, const jitk_arg *args, size_t nargs,
                                   const int *axes, int num_axes, int keepdims) {
  if (JK_UNLIKELY(k == NULL))
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_prepare: kernel is NULL");
  return launch(k, "jitk_reduction_prepare", NULL, args, nargs, axes, num_axes, keepdims, NULL,
                true);
}

/* One launch of a candidate on the autotune call's arguments, as
 * jk_time_median runs it. */
typedef struct red_timed {
  jitk_reduction *k;
  jitk_stream stream;
  const jitk_arg *args;
  jk_red_plan *pl;
  const jk_gen_variant *v;
} red_timed;

static jitk_status run_timed(void *ctx) {
  red_timed *t = ctx;
  return run(t->k, t->stream, t->args, t->pl, t->v);
}

jitk_status jitk_reduction_autotune(jitk_reduction *k, jitk_stream stream, const jitk_arg *args,
                                    size_t nargs, const int *axes, int num_axes, int keepdims) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_autotune: kernel is NULL");
  jitk_engine *e = k->g.engine;
  jitk_status st = jk_require_device(e, "jitk_reduction_autotune");
  if (st != JITK_OK) return st;
  /* Every output given: the candidates write them, and the last to run
   * is the one chosen, so they end as a launch would leave them. */
  if (nargs < k->g.params.count)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_reduction_autotune: kernel %s takes %zu arguments, outputs included, "
                   "and %zu were given: autotuning writes the outputs, so each must be given",
                   k->g.name, k->g.params.count, nargs);
  /* Timing synchronizes on events: it would end a graph's capture. */
  bool capturing = false;
  st = jk_stream_capturing(e, stream, &capturing);
  if (st == JITK_OK && capturing)
    st = jk_fail(e, JITK_ERR_STREAM_CAPTURE,
                 "jitk_reduction_autotune: kernel %s: the stream is capturing a CUDA graph; "
                 "autotune before the capture (a captured launch then uses the choice)",
                 k->g.name);
  if (st != JITK_OK) return st;
  jk_red_plan pl;
  jk_red_spec spec;
  bool nothing;
  st = plan(k, stream, args, nargs, axes, num_axes, keepdims, NULL, &pl, &spec, &nothing);
  if (st != JITK_OK || nothing) return st;
  int n = (int)k->g.params.count, sms = e->info.multiprocessors;
  /* Each candidate runs many times on the caller's arrays: an output the
   * post-map reads or may leave as it was, or one that shares memory with
   * an input, would then end far from what one launch leaves. */
  for (int o = k->g.num_in; o < n; o++) {
    if (k->load_output[o])
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "jitk_reduction_autotune: kernel %s: post_map_expr may read %s or leave it "
                     "as it was, so the many runs of autotuning would each change it; autotune "
                     "with an output of its own, then launch",
                     k->g.name, k->g.labels[o]);
    uintptr_t olo, ohi;
    const jk_view *ov = &pl.a.views[o];
    if (!pl.a.is_array[o] || !jk_view_range(ov, jk_dtype(ov->dtype)->size, &olo, &ohi)) continue;
    for (int p = 0; p < k->g.num_in; p++) {
      const jk_view *iv = &pl.a.views[p];
      uintptr_t lo, hi;
      if (pl.a.is_array[p] && jk_view_range(iv, jk_dtype(iv->dtype)->size, &lo, &hi) &&
          !(hi < olo || lo > ohi))
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                       "jitk_reduction_autotune: kernel %s: %s shares memory with %s, so each "
                       "of autotuning's many runs would read the last one's result; autotune "
                       "with an output of its own, then launch",
                       k->g.name, k->g.labels[o], k->g.labels[p]);
    }
  }
  uint64_t layout = layout_hash(&pl, &spec);
  /* The layout's own choice ('d') first: another must beat it by 3%,
   * more than the timings' noise, to replace it. */
  static const char candidates[] = "diocwmr";
  char best = 0;
  float best_ms = 0;
  for (const char *c = candidates; *c != '\0' && st == JITK_OK; c++) {
    if (!jk_red_choose(&pl, n, sms, (char)(*c == 'd' ? 0 : *c), &spec)) continue;
    jk_gen_variant v;
    float ms = 0;
    st = jk_gen_variant_get(&k->g, &spec, NULL, NULL, &v);
    /* The median of 7 launches after 2. */
    red_timed timed = {k, stream, args, &pl, &v};
    if (st == JITK_OK)
      st = jk_time_median(e, stream, 2, 7, run_timed, &timed, "a reduction candidate", &ms);
    if (st != JITK_OK) break;
    jk_log(e, JITK_LOG_DEBUG, "reduction %s autotune: strategy %c: %.4f ms", k->g.name, *c,
           (double)ms);
    if (best == 0 || ms < best_ms * (best == 'd' ? 0.97f : 1.0f)) {
      best = *c;
      best_ms = ms;
    }
  }
  if (st != JITK_OK || best == 0) return st;
  /* The winner runs last, so that the outputs hold its results. */
  jk_red_choose(&pl, n, sms, (char)(best == 'd' ? 0 : best), &spec);
  jk_gen_variant v;
  st = jk_gen_variant_get(&k->g, &spec, NULL, NULL, &v);
  if (st == JITK_OK) st = run(k, stream, args, &pl, &v);
  if (st != JITK_OK) return st;
  remember(k, layout, (char)(best == 'd' ? 0 : best));
  atomic_store(&k->tune_state, 2);
  /* The memo's plan may hold the strategy this choice replaces. */
  forget_memo(k);
  char key[640], choice[32];
  tuning_key(k, layout, key, sizeof key);
  snprintf(choice, sizeof choice, "strategy=%c", best);
  jk_log(e, JITK_LOG_INFO, "reduction %s autotune: %s (%.4f ms) for %s", k->g.name, choice,
         (double)best_ms, key);
  return jk_tuning_put(e, key, choice);
}

jitk_status jitk_reduction_outputs(jitk_reduction *k, const jitk_arg *args, size_t nargs,
                                   const int *axes, int num_axes, int keepdims,
                                   jitk_output_spec *specs) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_outputs: kernel is NULL");
  if (specs == NULL)
    return jk_fail(k->g.engine, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_outputs: specs is NULL");
  jk_red_plan pl;
  jitk_status st =
      prepare(k, "jitk_reduction_outputs", args, nargs, axes, num_axes, keepdims, true, &pl);
  if (st == JITK_OK) st = jk_gen_check_overlap(&k->g, &pl.a);
  if (st != JITK_OK) return st;
  jk_gen_output_specs(&k->g, &pl.a, pl.out_ndim, pl.out_shape, specs);
  return JITK_OK;
}

jitk_status jitk_reduction_num_params(const jitk_reduction *k, int *num_in, int *num_out) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_num_params: kernel is NULL");
  return jk_gen_num_params(&k->g, num_in, num_out);
}

jitk_status jitk_reduction_param(const jitk_reduction *k, int index, jitk_param_info *info) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_param: kernel is NULL");
  return jk_gen_param(&k->g, "jitk_reduction_param", index, info);
}

jitk_status jitk_reduction_compile(jitk_reduction *k, const char *types,
                                   const jitk_reduction_layout *layout, const char **source,
                                   jitk_module **module) {
  if (k == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_reduction_compile: kernel is NULL");
  jitk_engine *e = k->g.engine;
  jitk_reduction_layout def = {0, 1, 32, 'i', 0};
  if (layout == NULL) layout = &def;
  if (layout->kept_ndim < 0 || layout->kept_ndim > JITK_MAX_NDIM || layout->reduced_ndim < 1 ||
      layout->reduced_ndim > JITK_MAX_NDIM ||
      (layout->index_bits != 32 && layout->index_bits != 64) ||
      (layout->strategy != 'i' && layout->strategy != 'o' && layout->strategy != 'm' &&
       layout->strategy != 'r') ||
      layout->split < 0 || layout->split > 3 || (layout->strategy == 'm' && layout->split != 0))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "layout: kept_ndim 0..%d, reduced_ndim 1..%d, index_bits 32 or 64, strategy "
                   "'i', 'o', 'm' or 'r', split 0..3 (0 for 'm')",
                   JITK_MAX_NDIM, JITK_MAX_NDIM);
  jitk_dtype bound[JK_MAX_EW_PARAMS];
  jitk_status st = jk_params_bind_types(k->g.engine, &k->g.params, types, bound);
  if (st != JITK_OK) return st;
  jk_red_spec spec;
  memset(&spec, 0, sizeof spec);
  spec.nparams = (int)k->g.params.count;
  spec.nk = (unsigned char)(layout->kept_ndim ? layout->kept_ndim : 1);
  spec.nr = (unsigned char)layout->reduced_ndim;
  spec.idx64 = layout->index_bits == 64;
  spec.strategy = (unsigned char)layout->strategy;
  spec.group = spec.strategy == 'i' ? 256 : 32;
  spec.final_group = (unsigned short)(layout->split == 0   ? 0
                                      : layout->split == 1 ? 32
                                      : layout->split == 2 ? 256
                                                           : 1);
  spec.has_identity = k->identity != NULL;
  spec.reduce_dtype =
      (unsigned char)(k->reduce_placeholder >= 0 ? bound[k->reduce_placeholder] : k->reduce_dtype);
  size_t widest = 1;
  for (int p = 0; p < spec.nparams; p++) {
    const jk_param_decl *d = &k->g.params.params[p];
    jitk_dtype dt = d->placeholder >= 0 ? bound[d->placeholder] : d->dtype;
    spec.dtype[p] = (unsigned char)dt;
    spec.kind[p] = d->raw ? JK_EW_RAW : JK_EW_ARRAY;
    spec.raw_ndim[p] = d->raw ? 1 : 0;
    if (!d->raw && !d->output && jk_dtype(dt)->size > widest) widest = jk_dtype(dt)->size;
  }
  spec.vec = (unsigned char)(spec.strategy != 'o' && spec.nr == 1 && widest < 16 ? 16 / widest : 1);
  if (spec.strategy == 'r') {
    /* Column sums in segments of 32 outputs, vectors of at most four
     * elements, the form a launch picks for wide rows. */
    spec.vec = (unsigned char)(widest >= 16 ? 1 : 16 / widest > 4 ? 4 : 16 / widest);
    spec.rcols = (unsigned short)(32 / spec.vec);
    spec.rrun = 1;
  }
  if (spec.strategy == 'm') {
    /* As a launch picks it: about 32 bytes of loads a thread. */
    size_t u = 32 / (spec.vec * widest);
    spec.group = (unsigned short)(u < 2 ? 2 : u > 8 ? 8 : u);
  }
  st = jk_gen_compile(&k->g, &spec, source, module);
  forget_memo(k);
  return st;
}

jitk_status jitk_reduction_source(jitk_reduction *k, const char **source) {
  return jk_gen_source(k ? &k->g : NULL, "jitk_reduction_source", source);
}
