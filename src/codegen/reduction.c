/*
 * CUDA source for one specialization of a reduction kernel.
 *
 * The host collapses the kept dimensions (one output per point) and the
 * reduced dimensions separately; coordinates come from linear indices by
 * multiply-shift division, as in elementwise kernels. Three strategies:
 *
 *  'i' (inner): a group of threads, a warp or the whole block, reduces one
 *      output at a time, its threads striding over the reduced elements,
 *      which the inputs hold contiguously (a row, or a whole array) and read
 *      with 16-byte vectors when they can; split reductions (few outputs,
 *      many elements) give each group a chunk of one output's elements.
 *  'o' (outer): a thread per output, 32 neighbouring outputs a block, so a
 *      warp reads 32 contiguous elements of each reduced row (a column
 *      reduction); the block's 8 warps split the rows, and blockIdx.y
 *      splits them further when there are few outputs.
 *  'm' (map): every output reduces one element or one 16-byte vector of
 *      them (an axis of extent 1, rows of four float32); each thread takes
 *      several outputs and loads them all before folding any.
 *  'r' (row segments): where the innermost kept dimension (and a short
 *      run of reduced elements inside each of its points) makes
 *      contiguous rows, each thread reads one vector (up to 16 bytes) of
 *      a row and a block a segment of several rows at a time, and each
 *      output's partial results combine across lanes and warps at the
 *      end (column sums, kept and reduced dimensions interleaved).
 *
 * A split reduction (blockIdx.y numbers the chunks) writes one partial
 * result per (output, chunk); the last blocks to finish a tile of outputs
 * then fold each output's chunks in order and write it (emit_combine), in
 * the same kernel, or (large reductions, `second_pass`) a second kernel,
 * `name_final`, does. Every combination follows a fixed tree, so results
 * are the same bits on every run.
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "codegen/codegen.h"

static const char *ctype_of(const jk_red_source_in *in, int p) {
  const jk_param_decl *d = &in->params->params[p];
  if (d->placeholder >= 0) return in->params->placeholders[d->placeholder];
  return jk_dtype((jitk_dtype)in->spec->dtype[p])->ctype;
}

static bool is_input_array(const jk_red_source_in *in, int p) {
  return in->spec->kind[p] == JK_EW_ARRAY && !in->params->params[p].output;
}

/* The kernel's parameters; both entry points take the same list. */
static void emit_params(jk_buf *b, const jk_red_source_in *in) {
  const jk_red_spec *s = in->spec;
  jk_buf_puts(
      b, "_jk_u _jk_K, _jk_u _jk_R, _jk_u _jk_units, _jk_u _jk_S, _jk_u _jk_chunk, _jk_u _jk_G");
  for (int d = 1; d < s->nk; d++)
    jk_buf_printf(b, ", _jk_u _jk_kext%d, _jk_u _jk_kmag%d, unsigned int _jk_kshf%d", d, d, d);
  for (int d = 1; d < s->nr; d++)
    jk_buf_printf(b, ", _jk_u _jk_rext%d, _jk_u _jk_rmag%d, unsigned int _jk_rshf%d", d, d, d);
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    const char *t = ctype_of(in, p);
    if (s->kind[p] == JK_EW_ARRAY) {
      jk_buf_printf(b, ",\n    %s%s *_jk_p_%s", d->output ? "" : "const ", t, d->name);
      for (int k = 0; k < s->nk; k++) jk_buf_printf(b, ", _jk_s _jk_k_%s_%d", d->name, k);
      if (!d->output)
        for (int k = 0; k < s->nr; k++) jk_buf_printf(b, ", _jk_s _jk_r_%s_%d", d->name, k);
    } else if (s->kind[p] == JK_EW_RAW) {
      jk_buf_printf(b, ",\n    jitk::array<const %s, %d> %s", t, s->raw_ndim[p], d->name);
    } else {
      jk_buf_printf(b, ",\n    const %s %s", t, d->name);
    }
  }
  jk_buf_puts(b, ",\n    jitk::red::part<_type_reduce> *_jk_work, unsigned int *_jk_tick");
}

/* Coordinates of linear index `var` over the kept ('k') or reduced ('r')
 * dimensions, then the offset _jk_<prefix>o_<name> of each array (inputs,
 * and outputs for the kept ones when `outputs`). */
static void emit_offsets(jk_buf *b, const jk_red_source_in *in, char prefix, const char *var,
                         bool inputs, bool outputs) {
  const jk_red_spec *s = in->spec;
  int nd = prefix == 'k' ? s->nk : s->nr;
  const char *div = s->idx64 ? "u64" : "u32";
  if (nd > 1) {
    jk_buf_printf(b, "    _jk_u _jk_%cq = %s;\n", prefix, var);
    for (int d = nd - 1; d >= 1; d--)
      jk_buf_printf(
          b,
          "    const _jk_u _jk_%cq%d = jitk::ew::div_%s(_jk_%cq, _jk_%cmag%d, _jk_%cshf%d);\n"
          "    const _jk_s _jk_%cc%d = (_jk_s)(_jk_%cq - _jk_%cq%d * _jk_%cext%d);\n"
          "    _jk_%cq = _jk_%cq%d;\n",
          prefix, d, div, prefix, prefix, d, prefix, d, prefix, d, prefix, prefix, d, prefix, d,
          prefix, prefix, d);
    jk_buf_printf(b, "    const _jk_s _jk_%cc0 = (_jk_s)_jk_%cq;\n", prefix, prefix);
  } else {
    jk_buf_printf(b, "    const _jk_s _jk_%cc0 = (_jk_s)(%s);\n", prefix, var);
  }
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    if (d->output ? !outputs : !inputs) continue;
    jk_buf_printf(b, "    const _jk_s _jk_%co_%s = ", prefix, d->name);
    for (int k = 0; k < nd; k++)
      jk_buf_printf(b, "%s_jk_%cc%d * _jk_%c_%s_%d", k ? " + " : "", prefix, k, prefix, d->name, k);
    jk_buf_puts(b, ";\n");
  }
}

/* Folds value `v` into the thread's accumulator. */
static void emit_fold(jk_buf *b, const jk_red_source_in *in, const char *v) {
  if (in->spec->has_identity)
    jk_buf_printf(b, "      _jk_acc = _jk_op()(_jk_acc, %s);\n", v);
  else
    jk_buf_printf(b,
                  "      if (_jk_has) _jk_acc = _jk_op()(_jk_acc, %s);\n"
                  "      else { _jk_acc = %s; _jk_has = 1; }\n",
                  v, v);
}

/* One element: the inputs as values (loaded into _jk_v_<name>[_jk_u4],
 * vectors of which `lane` picks one when not NULL), map_expr, the fold. */
static void emit_element(jk_buf *b, const jk_red_source_in *in, const char *file, const char *lane,
                         const char *j_expr) {
  const jk_red_spec *s = in->spec;
  jk_buf_printf(b, "      {\n      const _jk_s _j = (_jk_s)(%s);\n      (void)_j;\n", j_expr);
  for (int p = 0; p < s->nparams; p++) {
    if (!is_input_array(in, p)) continue;
    const char *name = in->params->params[p].name;
    if (lane != NULL)
      jk_buf_printf(b, "      const %s %s = _jk_v_%s[_jk_u4].v[%s];\n", ctype_of(in, p), name, name,
                    lane);
    else
      jk_buf_printf(b, "      const %s %s = _jk_v_%s[_jk_u4];\n", ctype_of(in, p), name, name);
    jk_buf_printf(b, "      (void)%s;\n", name);
  }
  jk_buf_puts(b, "      const _type_reduce _jk_m = static_cast<_type_reduce>(\n");
  jk_cg_user_code(b, "map_expr", in->map_expr, ");", file);
  emit_fold(b, in, "_jk_m");
  jk_buf_puts(b, "      }\n");
}

/* post_map_expr on the result `a`, then the outputs' stores (their kept
 * offsets must be in scope). */
static void emit_post_map(jk_buf *b, const jk_red_source_in *in, const char *file) {
  const jk_red_spec *s = in->spec;
  /* An empty reduction is its identity, once: otherwise it would be the
   * identity folded over as many partial results as the strategy keeps
   * (sum with identity 7 gave 56 on 8 warps), which no user can predict. */
  if (s->has_identity)
    jk_buf_puts(b,
                "      {\n      const _type_reduce a = _jk_R == 0 ? _jk_identity() : _jk_acc;\n"
                "      (void)a;\n");
  else
    jk_buf_puts(b, "      {\n      const _type_reduce a = _jk_acc;\n      (void)a;\n");
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    /* An output is its element, as under CuPy, whose post-map may read
     * it (`y += a`) or assign it only sometimes: loaded first unless the
     * post-map surely overwrites it. */
    if (d->output && in->load_output != NULL && in->load_output[p])
      jk_buf_printf(b, "      %s %s = _jk_p_%s[_jk_ko_%s];\n", ctype_of(in, p), d->name, d->name,
                    d->name);
    else if (d->output)
      jk_buf_printf(b, "      %s %s;\n", ctype_of(in, p), d->name);
  }
  jk_cg_user_code(b, "post_map_expr", in->post_map_expr, ";", file);
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    if (d->output) jk_buf_printf(b, "      _jk_p_%s[_jk_ko_%s] = %s;\n", d->name, d->name, d->name);
  }
  jk_buf_puts(b, "      }\n");
}

/* `nu` elements from _jk_j, `step` apart: every load first, into
 * registers, then the maps and folds in order. */
static void emit_batch(jk_buf *b, const jk_red_source_in *in, const char *file, int nu,
                       const char *step) {
  const jk_red_spec *s = in->spec;
  int ov = s->strategy == 'o' && s->ovec > 1 ? s->ovec : 1;
  jk_buf_puts(b, "      {\n");
  for (int p = 0; p < s->nparams; p++) {
    if (!is_input_array(in, p)) continue;
    const char *name = in->params->params[p].name, *t = ctype_of(in, p);
    if (ov > 1)
      jk_buf_printf(b, "      jitk::ew::vec<%s, %d> _jk_v_%s[%d];\n", t, ov, name, nu);
    else if (s->vec > 1)
      jk_buf_printf(b, "      jitk::ew::vec<%s, %d> _jk_v_%s[%d];\n", t, s->vec, name, nu);
    else
      jk_buf_printf(b, "      %s _jk_v_%s[%d];\n", t, name, nu);
  }
  jk_buf_printf(b,
                "#pragma unroll\n"
                "      for (int _jk_u4 = 0; _jk_u4 < %d; ++_jk_u4) {\n"
                "      const _jk_u _jk_jj = _jk_j + _jk_u4 * (%s);\n",
                nu, step);
  /* Vectors along one reduced dimension are _jk_jj groups from the row's
   * start; along several, the offsets come from the coordinates, whose
   * innermost counts groups. */
  bool rows = s->strategy == 'r', vec_nd = !rows && s->vec > 1 && s->nr > 1;
  if (rows) {
    /* Row segments: _jk_jj counts rows, each the start of a run. */
    char var[48];
    snprintf(var, sizeof var, "_jk_jj * %d", s->rrun);
    emit_offsets(b, in, 'r', var, true, false);
  } else if (s->vec == 1 || ov > 1 || vec_nd) {
    emit_offsets(b, in, 'r', "_jk_jj", true, false);
  }
  for (int p = 0; p < s->nparams; p++) {
    if (!is_input_array(in, p)) continue;
    const char *name = in->params->params[p].name, *t = ctype_of(in, p);
    /* Vectors: one reduced dimension, unit stride in every input, and
     * _jk_jj counting groups of vec elements. */
    if (rows && s->vec > 1) /* The thread's vector of the row. */
      jk_buf_printf(b,
                    "      _jk_v_%s[_jk_u4] = *reinterpret_cast<const jitk::ew::vec<%s, %d> *>("
                    "_jk_p_%s + _jk_ko_%s + _jk_ro_%s + (_jk_s)_jk_c * %d);\n",
                    name, t, s->vec, name, name, name, s->vec);
    else if (rows)
      jk_buf_printf(b, "      _jk_v_%s[_jk_u4] = _jk_p_%s[_jk_ko_%s + _jk_ro_%s + (_jk_s)_jk_c];\n",
                    name, name, name, name);
    else if (ov > 1)
      /* The thread's ov outputs, side by side in the row. */
      jk_buf_printf(b,
                    "      _jk_v_%s[_jk_u4] = *reinterpret_cast<const jitk::ew::vec<%s, %d> *>("
                    "_jk_p_%s + _jk_ko_%s + _jk_ro_%s);\n",
                    name, t, ov, name, name, name);
    else if (vec_nd)
      jk_buf_printf(b,
                    "      _jk_v_%s[_jk_u4] = *reinterpret_cast<const jitk::ew::vec<%s, %d> *>("
                    "_jk_p_%s + _jk_ko_%s + _jk_ro_%s);\n",
                    name, t, s->vec, name, name, name);
    else if (s->vec > 1)
      jk_buf_printf(b,
                    "      _jk_v_%s[_jk_u4] = *reinterpret_cast<const jitk::ew::vec<%s, %d> *>("
                    "_jk_p_%s + _jk_ko_%s + (_jk_s)_jk_jj * %d);\n",
                    name, t, s->vec, name, name, s->vec);
    else
      jk_buf_printf(b, "      _jk_v_%s[_jk_u4] = _jk_p_%s[_jk_ko_%s + _jk_ro_%s];\n", name, name,
                    name, name);
  }
  jk_buf_printf(b,
                "      }\n"
                "#pragma unroll\n"
                "      for (int _jk_u4 = 0; _jk_u4 < %d; ++_jk_u4) {\n"
                "      const _jk_u _jk_jj = _jk_j + _jk_u4 * (%s);\n",
                nu, step);
  if (rows) {
    /* Element l of the vector is element (c V + l) mod B of its output's
     * run; with runs shorter than the vector, the vector holds V / B
     * outputs, one accumulator each. */
    int na = s->rrun < s->vec ? s->vec / s->rrun : 1;
    char which[32];
    snprintf(which, sizeof which, na > 1 ? "_jk_l / %d" : "0", s->rrun);
    jk_buf_printf(b,
                  "#pragma unroll\n      for (int _jk_l = 0; _jk_l < %d; ++_jk_l) {\n"
                  "      _type_reduce &_jk_acc = _jk_accs[%s];\n"
                  "      int &_jk_has = _jk_hass[%s];\n",
                  s->vec, which, which);
    char jx[96];
    snprintf(jx, sizeof jx, "_jk_jj * %d + ((_jk_s)_jk_c * %d + _jk_l) %% %d", s->rrun, s->vec,
             s->rrun);
    emit_element(b, in, file, s->vec > 1 ? "_jk_l" : NULL, jx);
    jk_buf_puts(b, "      }\n");
  } else if (ov > 1) {
    /* Lane l of each vector folds into output l's accumulator. */
    jk_buf_printf(b,
                  "#pragma unroll\n      for (int _jk_l = 0; _jk_l < %d; ++_jk_l) {\n"
                  "      _type_reduce &_jk_acc = _jk_accs[_jk_l];\n"
                  "      int &_jk_has = _jk_hass[_jk_l];\n",
                  ov);
    emit_element(b, in, file, "_jk_l", "_jk_jj");
    jk_buf_puts(b, "      }\n");
  } else if (s->vec > 1) {
    jk_buf_printf(b, "#pragma unroll\n      for (int _jk_l = 0; _jk_l < %d; ++_jk_l)\n", s->vec);
    char jx[48];
    snprintf(jx, sizeof jx, "_jk_jj * %d + _jk_l", s->vec);
    emit_element(b, in, file, "_jk_l", jx);
  } else {
    emit_element(b, in, file, NULL, "_jk_jj");
  }
  jk_buf_puts(b, "      }\n      }\n");
}

/* The reduced elements [_jk_lo, _jk_hi) of the current output, `step`
 * apart from `first`: four scalar loads or two 16-byte ones at a time
 * while that many remain, so that they are in flight together (a loop the
 * compiler unrolls itself keeps a branch between them, and measured half
 * the bandwidth), then one at a time. Two vectors rather than four
 * measured the same in hand-written kernels and compile faster; so did
 * eight float16 loads rather than four in column sums (H200, the sweep's
 * float16 column sums within 0.03 of each other). */
static void emit_reduce_loop(jk_buf *b, const jk_red_source_in *in, const char *file,
                             const char *first, const char *step) {
  const jk_red_spec *s = in->spec;
  size_t widest = 1;
  for (int p = 0; p < s->nparams; p++)
    if (is_input_array(in, p) && jk_dtype((jitk_dtype)s->dtype[p])->size > widest)
      widest = jk_dtype((jitk_dtype)s->dtype[p])->size;
  /* Loads of one element: eight in flight a thread for inputs of 4 bytes
   * or less, four for wider ones. Eight against four, on the H200's
   * sweep of 92 reductions of float32 and float16 (same session, best of
   * two runs): 0.988 of the time in geometric mean, 0.92-0.96 on the
   * splits of (16, 64, 64, 256), none slower by more than 3 %. */
  int nu = s->vec > 1 ? 2 : widest <= 4 ? 8 : 4;
  if (s->strategy == 'r') {
    /* Row segments: 32 bytes of the widest input in flight a thread, in
     * 2 to 8 loads (float16 vectors of four: four loads; complex128: two).
     * Vectors of eight float16 with eight accumulators took 33 registers
     * and left room for 6 blocks a multiprocessor, not 8. */
    size_t per = (size_t)(s->vec > 0 ? s->vec : 1) * widest;
    nu = per >= 16 ? 2 : per >= 8 ? 4 : 8;
  }
  /* `unroll 1`: the batch is the unrolling. ptxas would unroll the loop
   * again, with the loop's test between the copies, so no load moves
   * ahead of another; it only made the code longer and cost a float32
   * sum a quarter of its ptxas time. */
  jk_buf_printf(b,
                "    _jk_u _jk_j = %s;\n"
                "#pragma unroll 1\n"
                "    for (; _jk_j + %d * (%s) < _jk_hi; _jk_j += %d * (%s))\n",
                first, nu - 1, step, nu, step);
  emit_batch(b, in, file, nu, step);
  /* What the batches leave is fewer than nu elements; after batches of
   * two, one at most, so an `if` rather than a loop: the same code where
   * it runs, and a loop less for ptxas, which would unroll it. */
  if (nu == 2)
    jk_buf_puts(b, "    if (_jk_j < _jk_hi)\n");
  else
    jk_buf_printf(b, "    for (; _jk_j < _jk_hi; _jk_j += %s)\n", step);
  emit_batch(b, in, file, 1, step);
}

static void emit_acc_init(jk_buf *b, const jk_red_source_in *in) {
  /* With an identity the flag stays 1 and the folds go without it, so it
   * may be left unread (a partial result in a workspace still stores it). */
  if (in->spec->has_identity)
    jk_buf_puts(b,
                "    _type_reduce _jk_acc = _jk_identity();\n"
                "    int _jk_has __attribute__((unused)) = 1;\n");
  else
    jk_buf_puts(b, "    _type_reduce _jk_acc = _jk_identity();\n    int _jk_has = 0;\n");
}

/* The fold of a block's or a group's partial results into its first
 * thread (`group` of 256, 32 or fewer lanes; nothing for 1), from the
 * accumulators emit_acc_init began. With an identity every accumulator
 * holds something, so the tree goes without the flags (the `_full`
 * folds): the same bits, half the shuffles, and less for NVVM and ptxas
 * to compile. */
static void emit_tree(jk_buf *b, const jk_red_source_in *in, int group, const char *scratch) {
  bool full = in->spec->has_identity;
  if (group == JK_RED_BLOCK && full)
    jk_buf_printf(b, "    jitk::red::block_reduce_full<%d>(_jk_acc, _jk_op(), %s);\n", JK_RED_BLOCK,
                  scratch);
  else if (group == JK_RED_BLOCK)
    jk_buf_printf(b, "    jitk::red::block_reduce<%d>(_jk_acc, _jk_has, _jk_op(), %s);\n",
                  JK_RED_BLOCK, scratch);
  else if (group > 1 && full)
    jk_buf_printf(b, "    jitk::red::group_reduce_full<%d>(_jk_acc, _jk_op());\n", group);
  else if (group > 1)
    jk_buf_printf(b, "    jitk::red::group_reduce<%d>(_jk_acc, _jk_has, _jk_op());\n", group);
}

/* Writes the result of output _jk_k (split _jk_split of _jk_S). */
/* Writes the result of output _jk_k: through post_map_expr, or as the
 * partial result `slot` of a split reduction. */
static void emit_result(jk_buf *b, const jk_red_source_in *in, const char *file, const char *slot) {
  if (in->spec->final_group == 0) {
    emit_post_map(b, in, file);
    return;
  }
  jk_buf_printf(b,
                "      _jk_work[%s].v = _jk_acc;\n"
                "      _jk_work[%s].has = _jk_has;\n",
                slot, slot);
}

/* Shared memory for `n` partial results; `_jk_sp` points at them as
 * parts when `typed`. */
static void emit_shared_parts(jk_buf *b, int n, bool typed) {
  jk_buf_printf(b,
                "  __shared__ __align__(16) unsigned char _jk_sm[%d * "
                "sizeof(jitk::red::part<_type_reduce>)];\n",
                n);
  if (typed)
    jk_buf_puts(b,
                "  jitk::red::part<_type_reduce> *_jk_sp = "
                "reinterpret_cast<jitk::red::part<_type_reduce> *>(_jk_sm);\n");
}

/* `n` accumulators a thread (_jk_accs, _jk_hass), each starting empty or
 * at the identity. */
static void emit_acc_array(jk_buf *b, const jk_red_source_in *in, int n) {
  jk_buf_printf(b,
                "    _type_reduce _jk_accs[%d];\n"
                "    int _jk_hass[%d];\n"
                "#pragma unroll\n"
                "    for (int _jk_a = 0; _jk_a < %d; ++_jk_a) {\n"
                "      _jk_accs[_jk_a] = _jk_identity();\n"
                "      _jk_hass[_jk_a] = %d;\n"
                "    }\n",
                n, n, n, in->spec->has_identity ? 1 : 0);
}

/* The step of a loop over tiles of `per` outputs (`_jk_wb` in 'i',
 * `_jk_kb` in 'r'): the grid's width, or for a split, whose grid holds
 * each tile once, the end: then nothing the reduction loop needs stays
 * live through the combine (H200, sm_90: 32 registers against 43 for
 * float32 row segments, eight blocks a multiprocessor against five). */
static void split_next(const jk_red_spec *s, char *out, size_t size, int per) {
  const char *var = s->strategy == 'r' ? "_jk_kb" : "_jk_wb";
  if (s->final_group != 0)
    snprintf(out, size, "%s = _jk_K", var);
  else if (per == 1)
    snprintf(out, size, "%s += (_jk_u)gridDim.x", var);
  else
    snprintf(out, size, "%s += (_jk_u)gridDim.x * %d", var, per);
}

/* One fold of a split's combine: for each output k of the tile (`n` from
 * _jk_f0), the `count` partial results src[k * stride + from + t], t =
 * 0, 1, ..., in order, by `g` threads an output (a thread, a warp or the
 * block, a fixed tree whichever block runs it); then the output, or (when
 * `to2` is not NULL) a partial result of the second level. */
static void emit_fold_parts(jk_buf *b, const jk_red_source_in *in, const char *file, int g, int n,
                            const char *src, const char *stride, const char *from,
                            const char *count, const char *to2) {
  /* The loop runs over each warp's first output (the block's, for a
   * block an output), the same for all its lanes: the group reductions
   * shuffle across the whole warp, so lanes whose output is past the
   * tile's end (_jk_fok false) fold nothing but still take part. */
  int pw = g >= 32 ? 1 : 32 / g;
  if (g == JK_RED_BLOCK)
    jk_buf_printf(b,
                  "      {\n"
                  "      const _jk_u _jk_fhi = _jk_K - _jk_f0 < %d ? _jk_K : _jk_f0 + %d;\n"
                  "      for (_jk_u _jk_k = _jk_f0; _jk_k < _jk_fhi; ++_jk_k) {\n"
                  "    const bool _jk_fok = true;\n",
                  n, n);
  else if (n * g <= JK_RED_BLOCK)
    /* One pass covers the tile (no loop: fewer registers). */
    jk_buf_printf(b,
                  "      {\n"
                  "      const _jk_u _jk_fhi = _jk_K - _jk_f0 < %d ? _jk_K : _jk_f0 + %d;\n"
                  "      {\n"
                  "    const _jk_u _jk_k = _jk_f0 + threadIdx.x / %d;\n"
                  "    const bool _jk_fok = _jk_k < _jk_fhi;\n",
                  n, n, g);
  else
    jk_buf_printf(b,
                  "      {\n"
                  "      const _jk_u _jk_fhi = _jk_K - _jk_f0 < %d ? _jk_K : _jk_f0 + %d;\n"
                  "      for (_jk_u _jk_kw = _jk_f0 + (threadIdx.x >> 5) * %d; _jk_kw < _jk_fhi; "
                  "_jk_kw += %d) {\n"
                  "    const _jk_u _jk_k = _jk_kw + (threadIdx.x & 31) / %d;\n"
                  "    const bool _jk_fok = _jk_k < _jk_fhi;\n",
                  n, n, pw, JK_RED_BLOCK / g, g);
  emit_acc_init(b, in);
  /* Four loads in flight before their folds (a loop of one load and its
   * fold would wait out the cache's latency at every step), in the order
   * t = lane, lane + g, ... either way; one for a block an output, whose
   * lanes hold one partial result each (at most 256 a fold). */
  int nq = g == JK_RED_BLOCK ? 1 : 4;
  jk_buf_printf(
      b,
      "    const jitk::red::part<_type_reduce> *_jk_from = %s + _jk_k * (%s) + (%s);\n"
      "    const unsigned int _jk_n = _jk_fok ? (unsigned int)(%s) : 0u;\n"
      "    for (unsigned int _jk_t = _jk_fl; _jk_t < _jk_n; _jk_t += %d) {\n"
      "      jitk::red::part<_type_reduce> _jk_q[%d];\n"
      "#pragma unroll\n"
      "      for (unsigned int _jk_i = 0; _jk_i < %d; ++_jk_i)\n"
      "        if (_jk_t + _jk_i * %du < _jk_n) _jk_q[_jk_i] = _jk_from[_jk_t + _jk_i * %du];\n"
      "#pragma unroll\n"
      "      for (unsigned int _jk_i = 0; _jk_i < %d; ++_jk_i)\n"
      "        if (_jk_t + _jk_i * %du < _jk_n)\n"
      "          jitk::red::merge(_jk_acc, _jk_has, _jk_q[_jk_i].v, _jk_q[_jk_i].has, "
      "_jk_op());\n"
      "    }\n",
      src, stride, from, count, nq * g, nq, nq, g, g, nq, g);
  emit_tree(b, in, g, "_jk_fsm");
  jk_buf_puts(b, "    if (_jk_fl == 0 && _jk_fok) {\n");
  if (to2 != NULL)
    jk_buf_printf(b,
                  "    if (_jk_S2 > 1) {\n"
                  "      _jk_work2[_jk_k * _jk_S2 + %s].v = _jk_acc;\n"
                  "      _jk_work2[_jk_k * _jk_S2 + %s].has = _jk_has;\n"
                  "    } else {\n",
                  to2, to2);
  emit_offsets(b, in, 'k', "_jk_k", false, true);
  emit_post_map(b, in, file);
  if (to2 != NULL) jk_buf_puts(b, "    }\n");
  jk_buf_puts(b, "    }\n      }\n      }\n");
}

/* The end of a split reduction, inside the kernel, once a block has
 * written the partial results of its tile of outputs (`n` of them from
 * `lo`, the tile numbered `tile`) for its chunk (blockIdx.y). The chunks
 * fold in a tree of two levels: groups of G = _jk_G consecutive chunks,
 * then the S2 = ceil(S / G) groups (one level when G >= S). Each level
 * counts arrivals with a ticket (atomicInc, which leaves it at zero
 * again): the block that takes a group's last ticket folds that group's
 * chunks for every output of the tile into a second-level partial
 * result, and the block that takes the tile's last group ticket folds
 * those and writes the outputs. The tree depends only on S and G, never
 * on which block comes last, so results repeat bit for bit. One kernel in
 * place of a second pass saves its launch and the gap before it (H200:
 * 2.9-4.6 us of a 20 us reduction of 2^24 float32); the second level
 * keeps the last block's fold small where one level would have it read
 * every partial result of its tile (32 outputs of 2112 chunks: one block
 * reading 540 KB, 55 us in the layout sweep). The tickets, S2 + 1 a tile
 * (the groups', then the tile's), start at zero: the launch clears them
 * on its stream. */
static void emit_combine(jk_buf *b, const jk_red_source_in *in, const char *file, const char *tile,
                         const char *lo, int n) {
  int most = in->spec->final_group;
  if (most == 0 || in->spec->second_pass) return;
  /* Threads an output: as many as the block has for each of the tile's
   * outputs (a power of two; a block for a tile of one output, at most a
   * warp otherwise), up to the spec's 1, 32 or 256, so that every thread
   * of the last block reads a share of the partial results. */
  int g = n <= 1 ? JK_RED_BLOCK : 1;
  while (n > 1 && g * 2 <= 32 && g * 2 * n <= JK_RED_BLOCK) g *= 2;
  if (most == 1)
    g = 1;
  else if (most == 32 && g > 32)
    g = 32;
  /* The block's partial results are all written before thread 0 takes a
   * ticket (the barrier, then its fence: a release that covers what the
   * barrier ordered before it), and the last block reads the others'
   * only after thread 0 saw their tickets (its fence after the atomic,
   * an acquire, then the barrier), the pattern of a grid-wide barrier. */
  static const char take[] =
      "    __syncthreads();\n"
      "    if (threadIdx.x == 0) {\n"
      "      __threadfence();\n"
      "      _jk_last = atomicInc(%s, (unsigned int)(%s) - 1u) == (unsigned int)(%s) - 1u;\n"
      "      __threadfence();\n"
      "    }\n"
      "    __syncthreads();\n";
  jk_buf_printf(b,
                "    {\n"
                "    __shared__ unsigned int _jk_last;\n"
                "    const _jk_u _jk_S2 = (_jk_S + _jk_G - 1) / _jk_G;\n"
                "    const _jk_u _jk_grp2 = (_jk_u)blockIdx.y / _jk_G;\n"
                "    const _jk_u _jk_c0 = _jk_grp2 * _jk_G;\n"
                "    const _jk_u _jk_cn = _jk_S - _jk_c0 < _jk_G ? _jk_S - _jk_c0 : _jk_G;\n"
                "    unsigned int *_jk_tk = _jk_tick + (_jk_u)(%s) * (_jk_S2 + 1);\n"
                "    jitk::red::part<_type_reduce> *_jk_work2 = _jk_work + _jk_K * _jk_S;\n"
                "    const _jk_u _jk_f0 = %s;\n"
                "    const unsigned int _jk_fl = threadIdx.x %% %d;\n",
                tile, lo, g);
  if (g == JK_RED_BLOCK)
    jk_buf_printf(b,
                  "    __shared__ __align__(16) unsigned char _jk_fsm[%d * "
                  "sizeof(jitk::red::part<_type_reduce>)];\n",
                  JK_RED_BLOCK / 32);
  jk_buf_printf(b, take, "_jk_tk + _jk_grp2", "_jk_cn", "_jk_cn");
  jk_buf_puts(b, "    if (_jk_last) {\n");
  emit_fold_parts(b, in, file, g, n, "_jk_work", "_jk_S", "_jk_c0", "_jk_cn", "_jk_grp2");
  jk_buf_puts(b, "    if (_jk_S2 > 1) {\n");
  jk_buf_printf(b, take, "_jk_tk + _jk_S2", "_jk_S2", "_jk_S2");
  jk_buf_puts(b, "    if (_jk_last) {\n");
  emit_fold_parts(b, in, file, g, n, "_jk_work2", "_jk_S2", "0", "_jk_S2", NULL);
  jk_buf_puts(b, "    }\n    }\n    }\n    }\n");
}

static void emit_inner(jk_buf *b, const jk_red_source_in *in, const char *file) {
  const jk_red_spec *s = in->spec;
  int g = s->group == 256 ? 256 : s->group >= 1 && s->group <= 32 ? s->group : 32;
  int per = JK_RED_BLOCK / g;
  char step[16];
  snprintf(step, sizeof step, "%d", g);
  /* Output _jk_w (past the last one, _jk_ok false: it reduces nothing),
   * chunk blockIdx.y of it. A block takes `per` outputs at a time from
   * _jk_wb, the same for all its threads, so that a split's combine may
   * wait for the whole block. */
  char next[48];
  split_next(s, next, sizeof next, per);
  if (g == 256) {
    emit_shared_parts(b, JK_RED_BLOCK / 32, false);
    jk_buf_printf(b,
                  "  const unsigned int _jk_lane = threadIdx.x;\n"
                  "  for (_jk_u _jk_wb = (_jk_u)blockIdx.x; _jk_wb < _jk_K; %s) {\n"
                  "    const _jk_u _jk_w = _jk_wb;\n"
                  "    const bool _jk_ok = true;\n",
                  next);
  } else {
    /* Groups of a warp or less: the group reductions shuffle across the
     * whole warp, whose lanes all run every pass. */
    jk_buf_printf(b,
                  "  const unsigned int _jk_lane = threadIdx.x %% %d, _jk_grp = threadIdx.x / %d;\n"
                  "  for (_jk_u _jk_wb = (_jk_u)blockIdx.x * %d; _jk_wb < _jk_K; %s) {\n"
                  "    const _jk_u _jk_w = _jk_wb + _jk_grp;\n"
                  "    const bool _jk_ok = _jk_w < _jk_K;\n",
                  g, g, per, next);
  }
  jk_buf_puts(b,
              "    const _jk_u _jk_k = _jk_ok ? _jk_w : 0;\n"
              "    const _jk_u _jk_split = blockIdx.y;\n");
  emit_offsets(b, in, 'k', "_jk_k", true, true);
  jk_buf_puts(b,
              "    const _jk_u _jk_lo = _jk_split * _jk_chunk;\n"
              "    const _jk_u _jk_hi = !_jk_ok ? _jk_lo : _jk_units - _jk_lo < _jk_chunk ? "
              "_jk_units : _jk_lo + _jk_chunk;\n");
  emit_acc_init(b, in);
  emit_reduce_loop(b, in, file, "_jk_lo + _jk_lane", step);
  emit_tree(b, in, g, "_jk_sm");
  jk_buf_puts(b, "    if (_jk_lane == 0 && _jk_ok) {\n");
  emit_result(b, in, file, "_jk_k * _jk_S + _jk_split");
  jk_buf_puts(b, "    }\n");
  char tile[48];
  snprintf(tile, sizeof tile, "_jk_wb / %d", per);
  emit_combine(b, in, file, tile, "_jk_wb", per);
  jk_buf_puts(b, "  }\n");
}

/* The 'o' path when every warp owns its outputs: E of them (a row of
 * outputs), P reduced rows at a time, all the rows; the P partial results
 * of each output then fold in order across the warp's lanes. */
static void emit_outer_warp(jk_buf *b, const jk_red_source_in *in, const char *file, int E, int P) {
  jk_buf_printf(
      b,
      "  const unsigned int _jk_tx = threadIdx.x & 31;\n"
      "  const unsigned int _jk_c = _jk_tx %% %d, _jk_q = _jk_tx / %d;\n"
      "  const _jk_u _jk_kk = ((_jk_u)blockIdx.x * %d + (threadIdx.x >> 5)) * %d + _jk_c;\n"
      "  const bool _jk_in = _jk_kk < _jk_K && _jk_q < %d;\n"
      "  const _jk_u _jk_k = _jk_in ? _jk_kk : 0;\n"
      "  {\n",
      E, E, JK_RED_BLOCK / 32, E, P);
  emit_offsets(b, in, 'k', "_jk_k", true, true);
  jk_buf_puts(b, "    const _jk_u _jk_hi = _jk_in ? _jk_units : 0;\n");
  emit_acc_init(b, in);
  char step[16];
  snprintf(step, sizeof step, "%d", P);
  emit_reduce_loop(b, in, file, "_jk_q", step);
  /* Every lane shuffles the partial results as they were before the
   * fold (its own accumulator changes as it folds). */
  if (P > 1)
    jk_buf_printf(
        b,
        "    const _type_reduce _jk_mine = _jk_acc;\n"
        "    const int _jk_mine_has = _jk_has;\n"
        "#pragma unroll\n"
        "    for (int _jk_t = 1; _jk_t < %d; ++_jk_t) {\n"
        "      const _type_reduce _jk_o = jitk::red::shfl_idx(_jk_mine, _jk_c + _jk_t * %d);\n"
        "      const int _jk_oh = __shfl_sync(0xffffffffu, _jk_mine_has, _jk_c + _jk_t * %d);\n"
        "      jitk::red::merge(_jk_acc, _jk_has, _jk_o, _jk_oh, _jk_op());\n"
        "    }\n",
        P, E, E);
  jk_buf_puts(b, "    if (_jk_q == 0 && _jk_kk < _jk_K) {\n");
  emit_result(b, in, file, "_jk_k");
  jk_buf_puts(b, "    }\n  }\n");
}

/* The 'o' path with V outputs a thread (ovec): 32 V outputs a block, a
 * thread's V side by side and read as one vector of each reduced row, its
 * warp's rows a block's 8 warps apart, V accumulators; then per output the
 * 8 warps' partial results in order, as the scalar path combines them. */
static void emit_outer_vec(jk_buf *b, const jk_red_source_in *in, const char *file, int V) {
  emit_shared_parts(b, V * JK_RED_BLOCK, true);
  jk_buf_printf(b,
                "  const unsigned int _jk_c = threadIdx.x & 31, _jk_ty = threadIdx.x >> 5;\n"
                "  const _jk_u _jk_kk = ((_jk_u)blockIdx.x * 32 + _jk_c) * %d;\n"
                "  const bool _jk_in = _jk_kk < _jk_K;\n"
                "  const _jk_u _jk_k = _jk_in ? _jk_kk : 0;\n"
                "  const _jk_u _jk_split = blockIdx.y;\n"
                "  {\n",
                V);
  emit_offsets(b, in, 'k', "_jk_k", true, false);
  jk_buf_puts(b,
              "    const _jk_u _jk_lo = _jk_split * _jk_chunk;\n"
              "    const _jk_u _jk_hi = !_jk_in ? _jk_lo : _jk_units - _jk_lo < _jk_chunk ? "
              "_jk_units : _jk_lo + _jk_chunk;\n");
  emit_acc_array(b, in, V);
  emit_reduce_loop(b, in, file, "_jk_lo + _jk_ty", "8");
  jk_buf_printf(
      b,
      "#pragma unroll\n"
      "    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) {\n"
      "      _jk_sp[_jk_l * %d + threadIdx.x].v = _jk_accs[_jk_l];\n"
      "      _jk_sp[_jk_l * %d + threadIdx.x].has = _jk_hass[_jk_l];\n"
      "    }\n"
      "    __syncthreads();\n"
      "    if (_jk_ty == 0 && _jk_in) {\n"
      "#pragma unroll\n"
      "    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) {\n"
      "      _type_reduce _jk_acc = _jk_accs[_jk_l];\n"
      "      int _jk_has = _jk_hass[_jk_l];\n"
      "#pragma unroll\n"
      "      for (int _jk_t = 1; _jk_t < 8; ++_jk_t)\n"
      "        jitk::red::merge(_jk_acc, _jk_has, _jk_sp[_jk_l * %d + _jk_t * 32 + _jk_c].v,\n"
      "                         _jk_sp[_jk_l * %d + _jk_t * 32 + _jk_c].has, _jk_op());\n"
      "      const _jk_u _jk_k = _jk_kk + _jk_l;\n",
      V, JK_RED_BLOCK, JK_RED_BLOCK, V, JK_RED_BLOCK, JK_RED_BLOCK);
  emit_offsets(b, in, 'k', "_jk_k", false, true);
  emit_result(b, in, file, "_jk_k * _jk_S + _jk_split");
  jk_buf_puts(b, "    }\n    }\n  }\n");
  char lo[48];
  snprintf(lo, sizeof lo, "(_jk_u)blockIdx.x * %d", 32 * V);
  emit_combine(b, in, file, "blockIdx.x", lo, 32 * V);
}

static void emit_outer(jk_buf *b, const jk_red_source_in *in, const char *file) {
  /* E outputs a block (32, or ocols), and P reduced rows a warp at a time
   * (32 / E): lane c + E q takes output c of the block's row and rows
   * q, q + P, ... of its warp's share. */
  int E = in->spec->ocols >= 1 && in->spec->ocols <= 16 ? in->spec->ocols : 32, P = 32 / E;
  if (in->spec->owarp) {
    emit_outer_warp(b, in, file, E, P);
    return;
  }
  if (in->spec->ovec > 1 && E == 32) {
    emit_outer_vec(b, in, file, in->spec->ovec);
    return;
  }
  emit_shared_parts(b, JK_RED_BLOCK, true);
  jk_buf_printf(b,
                "  const unsigned int _jk_tx = threadIdx.x & 31, _jk_ty = threadIdx.x >> 5;\n"
                "  const unsigned int _jk_c = _jk_tx %% %d, _jk_q = _jk_tx / %d;\n"
                "  const _jk_u _jk_kk = (_jk_u)blockIdx.x * %d + _jk_c;\n"
                "  const bool _jk_in = _jk_kk < _jk_K && _jk_q < %d;\n"
                "  const _jk_u _jk_k = _jk_in ? _jk_kk : 0;\n"
                "  const _jk_u _jk_split = blockIdx.y;\n"
                "  {\n",
                E, E, E, P);
  emit_offsets(b, in, 'k', "_jk_k", true, true);
  jk_buf_puts(b,
              "    const _jk_u _jk_lo = _jk_split * _jk_chunk;\n"
              "    const _jk_u _jk_hi = !_jk_in ? _jk_lo : _jk_units - _jk_lo < _jk_chunk ? "
              "_jk_units : _jk_lo + _jk_chunk;\n");
  emit_acc_init(b, in);
  char first[48], step[16];
  snprintf(first, sizeof first, "_jk_lo + _jk_ty * %d + _jk_q", P);
  snprintf(step, sizeof step, "%d", 8 * P);
  emit_reduce_loop(b, in, file, first, step);
  /* Each output's 8 P partial results, in the order of the rows they
   * started from. */
  jk_buf_printf(
      b,
      "    _jk_sp[threadIdx.x].v = _jk_acc;\n"
      "    _jk_sp[threadIdx.x].has = _jk_has;\n"
      "    __syncthreads();\n"
      "    if (_jk_ty == 0 && _jk_q == 0 && _jk_kk < _jk_K) {\n"
      "#pragma unroll\n"
      "      for (int _jk_t = 1; _jk_t < %d; ++_jk_t)\n"
      "        jitk::red::merge(_jk_acc, _jk_has,\n"
      "                         _jk_sp[(_jk_t / %d) * 32 + (_jk_t %% %d) * %d + _jk_c].v,\n"
      "                         _jk_sp[(_jk_t / %d) * 32 + (_jk_t %% %d) * %d + _jk_c].has,"
      " _jk_op());\n",
      8 * P, P, P, E, P, P, E);
  emit_result(b, in, file, "_jk_k * _jk_S + _jk_split");
  jk_buf_puts(b, "    }\n  }\n");
  char lo[48];
  snprintf(lo, sizeof lo, "(_jk_u)blockIdx.x * %d", E);
  emit_combine(b, in, file, "blockIdx.x", lo, E);
}

/* The 'r' path (row segments): rows of the inputs made of the innermost
 * kept dimension's outputs and, inside each, a run of B = rrun reduced
 * elements, read in segments of C = rcols vectors of V elements (a whole
 * narrow row, or about 32 outputs of a wide one). Thread t reads vector
 * c = t mod C of the segment in rows t / C, t / C + P, ... (P = 256 / C
 * rows at a time), so that the block reads P segments together; a block
 * takes one segment (blockIdx.x) and one chunk of rows (blockIdx.y).
 * Then each output's partial results fold in a fixed tree: across the
 * lanes of a warp that share it (the vectors of one run, the rows of one
 * warp), then across the warps through shared memory in order, one
 * thread an output. */
static void emit_rows(jk_buf *b, const jk_red_source_in *in, const char *file) {
  const jk_red_spec *s = in->spec;
  int C = s->rcols >= 1 && s->rcols <= 256 ? s->rcols : 32, B = s->rrun >= 1 ? s->rrun : 1;
  int V = s->vec >= 1 ? s->vec : 1;
  int na = B < V ? V / B : 1, g1 = B >= V ? B / V : 1, outs = C * V / B;
  int P = JK_RED_BLOCK / C, span = C > 32 ? C : 32, parts = JK_RED_BLOCK / span;
  char next[48];
  split_next(s, next, sizeof next, outs);
  emit_shared_parts(b, JK_RED_BLOCK, true);
  jk_buf_printf(b,
                "  const unsigned int _jk_c = threadIdx.x %% %d, _jk_r = threadIdx.x / %d;\n"
                "  const _jk_u _jk_split = blockIdx.y;\n"
                "  const _jk_u _jk_lo = _jk_split * _jk_chunk;\n"
                "  const _jk_u _jk_hi = _jk_units - _jk_lo < _jk_chunk ? _jk_units : _jk_lo + "
                "_jk_chunk;\n"
                "  for (_jk_u _jk_kb = (_jk_u)blockIdx.x * %d; _jk_kb < _jk_K; %s) {\n",
                C, C, outs, next);
  emit_offsets(b, in, 'k', "_jk_kb", true, false);
  emit_acc_array(b, in, na);
  char step[16];
  snprintf(step, sizeof step, "%d", P);
  emit_reduce_loop(b, in, file, "_jk_lo + _jk_r", step);
  /* Lanes that share an output: those whose vector lies in the same run
   * (the low log2(B / V) bits of c) and, for rows of fewer than 32
   * vectors, those of the other rows of the warp (the lane bits above
   * log2(C)). Lane bits of neither kind select different outputs. */
  for (int bit = 1; bit < 32; bit <<= 1) {
    if (!(bit < g1 || bit >= C)) continue;
    jk_buf_printf(b,
                  "#pragma unroll\n"
                  "    for (int _jk_a = 0; _jk_a < %d; ++_jk_a) {\n"
                  "      const _type_reduce _jk_o = jitk::red::shfl_xor(_jk_accs[_jk_a], %du);\n"
                  "      const int _jk_oh = __shfl_xor_sync(0xffffffffu, _jk_hass[_jk_a], %du);\n"
                  "      jitk::red::merge(_jk_accs[_jk_a], _jk_hass[_jk_a], _jk_o, _jk_oh, "
                  "_jk_op());\n"
                  "    }\n",
                  na, bit, bit);
  }
  /* Then the warps': output o's partial results are at threads c0, c0 +
   * span, ... (c0 its first vector: the lanes above hold the same), one
   * pass through shared memory per accumulator. */
  jk_buf_printf(b,
                "#pragma unroll\n"
                "    for (int _jk_a = 0; _jk_a < %d; ++_jk_a) {\n"
                "    __syncthreads();\n"
                "    _jk_sp[threadIdx.x].v = _jk_accs[_jk_a];\n"
                "    _jk_sp[threadIdx.x].has = _jk_hass[_jk_a];\n"
                "    __syncthreads();\n"
                "    if (threadIdx.x < %d) {\n"
                "      const unsigned int _jk_c0 = threadIdx.x * %d;\n"
                "      _type_reduce _jk_acc = _jk_sp[_jk_c0].v;\n"
                "      int _jk_has = _jk_sp[_jk_c0].has;\n"
                "#pragma unroll\n"
                "      for (int _jk_t = 1; _jk_t < %d; ++_jk_t)\n"
                "        jitk::red::merge(_jk_acc, _jk_has, _jk_sp[_jk_c0 + _jk_t * %d].v,\n"
                "                         _jk_sp[_jk_c0 + _jk_t * %d].has, _jk_op());\n"
                "      const _jk_u _jk_k = _jk_kb + threadIdx.x * %d + _jk_a;\n",
                na, C / g1, g1, parts, span, span, na);
  emit_offsets(b, in, 'k', "_jk_k", false, true);
  emit_result(b, in, file, "_jk_k * _jk_S + _jk_split");
  jk_buf_puts(b, "    }\n    }\n");
  char tile[48];
  snprintf(tile, sizeof tile, "_jk_kb / %d", outs);
  emit_combine(b, in, file, tile, "_jk_kb", outs);
  jk_buf_puts(b, "  }\n");
}

/* The second pass of split reductions with `second_pass`: per output,
 * the partial results of its chunks in order, by one thread (`group` 1:
 * 2 to 4 chunks), a warp (32) or the whole block (256: a few outputs of
 * many chunks, such as one whole-array sum). */
static void emit_final(jk_buf *b, const jk_red_source_in *in, const char *file, int group) {
  int per = JK_RED_BLOCK / group;
  if (group == JK_RED_BLOCK) emit_shared_parts(b, JK_RED_BLOCK / 32, false);
  jk_buf_printf(b,
                "  const unsigned int _jk_lane = threadIdx.x %% %d;\n"
                "  for (_jk_u _jk_k = ((_jk_u)blockIdx.x * %d + threadIdx.x / %d); _jk_k < _jk_K;\n"
                "       _jk_k += (_jk_u)gridDim.x * %d) {\n",
                group, per, group, per);
  emit_acc_init(b, in);
  jk_buf_printf(b,
                "    for (_jk_u _jk_t = _jk_lane; _jk_t < _jk_S; _jk_t += %d)\n"
                "      jitk::red::merge(_jk_acc, _jk_has, _jk_work[_jk_k * _jk_S + _jk_t].v,\n"
                "                       _jk_work[_jk_k * _jk_S + _jk_t].has, _jk_op());\n",
                group);
  emit_tree(b, in, group, "_jk_sm");
  jk_buf_puts(b, "    if (_jk_lane == 0) {\n");
  emit_offsets(b, in, 'k', "_jk_k", false, true);
  emit_post_map(b, in, file);
  jk_buf_puts(b, "    }\n  }\n");
}

/* The 'm' path: every output reduces one group of `vec` elements (rows
 * of one element, or of one vector), and each thread takes `group`
 * outputs a block's width apart, issuing every load before the first
 * fold, so that enough bytes are in flight. */
static void emit_single(jk_buf *b, const jk_red_source_in *in, const char *file) {
  const jk_red_spec *s = in->spec;
  int u = s->group >= 1 && s->group <= 8 ? s->group : 2, v = s->vec;
  jk_buf_printf(b,
                "  for (_jk_u _jk_b0 = (_jk_u)blockIdx.x * %d + threadIdx.x; _jk_b0 < _jk_K;\n"
                "       _jk_b0 += (_jk_u)gridDim.x * %d) {\n",
                JK_RED_BLOCK * u, JK_RED_BLOCK * u);
  for (int p = 0; p < s->nparams; p++) {
    if (!is_input_array(in, p)) continue;
    const char *name = in->params->params[p].name, *t = ctype_of(in, p);
    if (v > 1)
      jk_buf_printf(b, "    jitk::ew::vec<%s, %d> _jk_v_%s[%d];\n", t, v, name, u);
    else
      jk_buf_printf(b, "    %s _jk_v_%s[%d];\n", t, name, u);
  }
  /* Past the last output, a thread reads output 0's group again. */
  jk_buf_printf(b,
                "#pragma unroll\n"
                "    for (int _jk_u4 = 0; _jk_u4 < %d; ++_jk_u4) {\n"
                "    const _jk_u _jk_w = _jk_b0 + _jk_u4 * %d;\n"
                "    const _jk_u _jk_k = _jk_w < _jk_K ? _jk_w : 0;\n",
                u, JK_RED_BLOCK);
  emit_offsets(b, in, 'k', "_jk_k", true, false);
  for (int p = 0; p < s->nparams; p++) {
    if (!is_input_array(in, p)) continue;
    const char *name = in->params->params[p].name, *t = ctype_of(in, p);
    if (v > 1)
      jk_buf_printf(b,
                    "    _jk_v_%s[_jk_u4] = *reinterpret_cast<const jitk::ew::vec<%s, %d> *>("
                    "_jk_p_%s + _jk_ko_%s);\n",
                    name, t, v, name, name);
    else
      jk_buf_printf(b, "    _jk_v_%s[_jk_u4] = _jk_p_%s[_jk_ko_%s];\n", name, name, name);
  }
  jk_buf_printf(b,
                "    }\n"
                "#pragma unroll\n"
                "    for (int _jk_u4 = 0; _jk_u4 < %d; ++_jk_u4) {\n"
                "    const _jk_u _jk_k = _jk_b0 + _jk_u4 * %d;\n"
                "    if (_jk_k >= _jk_K) break;\n",
                u, JK_RED_BLOCK);
  emit_offsets(b, in, 'k', "_jk_k", false, true);
  emit_acc_init(b, in);
  if (v > 1) {
    jk_buf_printf(b, "#pragma unroll\n      for (int _jk_l = 0; _jk_l < %d; ++_jk_l)\n", v);
    emit_element(b, in, file, "_jk_l", "_jk_l");
  } else {
    emit_element(b, in, file, NULL, "0");
  }
  emit_post_map(b, in, file);
  jk_buf_puts(b, "    }\n  }\n");
}

static void emit_entry(jk_buf *b, const jk_red_source_in *in, const char *suffix) {
  jk_buf_printf(b, "extern \"C\" __global__ void __launch_bounds__(%d) %s%s(", JK_RED_BLOCK,
                in->name, suffix);
  emit_params(b, in);
  jk_buf_puts(
      b,
      ") {\n"
      "  const jitk::ew::index<_jk_s> _in_ind = {(_jk_s)_jk_R}, _out_ind = {(_jk_s)_jk_K};\n"
      "  (void)_in_ind;\n  (void)_out_ind;\n");
}

jitk_status jk_red_generate(jitk_engine *e, const jk_red_source_in *in, char **source) {
  const jk_red_spec *s = in->spec;
  jk_buf b;
  jk_buf_init(&b, e);
  char file[128];
  snprintf(file, sizeof file, "%s.cu", in->name);
  jk_buf_printf(&b,
                "// Generated by jitk: reduction kernel %s, %s, %d kept and %d reduced "
                "dimension%s, %d-bit index\n",
                in->name,
                s->strategy == 'o'   ? "across outputs"
                : s->strategy == 'm' ? "one group per output"
                : s->strategy == 'r' ? "row segments"
                                     : "along reduced elements",
                s->nk, s->nr, s->nr == 1 ? "" : "s", s->idx64 ? 64 : 32);
  jk_buf_puts(&b, "#include <jitk/elementwise.cuh>\n#include <jitk/reduction.cuh>\n");
  /* The reduce type may be a half or complex type no parameter has. */
  const char *const code[] = {in->map_expr, in->reduce_expr, in->post_map_expr,
                              in->identity, in->reduce_type, in->preamble};
  jk_cg_prologue(&b, in->params, s->nparams, s->dtype, s->kind, s->idx64,
                 (jitk_dtype)s->reduce_dtype, code, sizeof code / sizeof code[0]);
  jk_cg_user_section(&b, "preamble", in->preamble, file);
  if (s->reduce_dtype != JITK_DTYPE_NONE)
    jk_buf_printf(&b, "typedef %s _type_reduce;\n", jk_dtype((jitk_dtype)s->reduce_dtype)->ctype);
  else
    jk_buf_printf(&b, "typedef %s _type_reduce;\n", in->reduce_type);
  jk_buf_puts(
      &b,
      "struct _jk_op {\n"
      "  __device__ __forceinline__ _type_reduce operator()(const _type_reduce &a,\n"
      "                                                     const _type_reduce &b) const {\n"
      "    return static_cast<_type_reduce>(\n");
  jk_cg_user_code(&b, "reduce_expr", in->reduce_expr, ");", file);
  jk_buf_puts(&b, "  }\n};\n");
  jk_buf_puts(&b, "__device__ __forceinline__ _type_reduce _jk_identity() {\n");
  if (s->has_identity) {
    jk_buf_puts(&b, "  return static_cast<_type_reduce>(\n");
    jk_cg_user_code(&b, "identity", in->identity, ");", file);
    jk_buf_puts(&b, "}\n");
  } else {
    jk_buf_puts(&b, "  return _type_reduce();\n}\n");
  }
  jk_buf_printf(&b, "__device__ unsigned char %s_slot[sizeof(jitk::red::part<_type_reduce>)];\n",
                in->name);
  emit_entry(&b, in, "");
  if (s->strategy == 'o')
    emit_outer(&b, in, file);
  else if (s->strategy == 'r')
    emit_rows(&b, in, file);
  else if (s->strategy == 'm')
    emit_single(&b, in, file);
  else
    emit_inner(&b, in, file);
  jk_buf_puts(&b, "}\n");
  if (s->final_group != 0 && s->second_pass) {
    emit_entry(&b, in, "_final");
    emit_final(&b, in, file,
               s->final_group == JK_RED_BLOCK ? JK_RED_BLOCK
               : s->final_group == 1          ? 1
                                              : 32);
    jk_buf_puts(&b, "}\n");
  }
  char *src = jk_buf_take(&b);
  if (src == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory generating a kernel");
  *source = src;
  return JITK_OK;
}
