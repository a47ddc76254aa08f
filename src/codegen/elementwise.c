/*
 * CUDA source for one specialization of an elementwise kernel.
 *
 * The loop visits the collapsed iteration space (src/array/iter.c) with a
 * grid-stride loop. Coordinates come from the linear index by division with
 * host-computed magic numbers, never a divide instruction. With `vec` > 1
 * each thread moves `vec` consecutive elements of every array with one
 * 16-byte access (arrays whose innermost stride is 0 read one value per
 * group instead); a one-dimensional loop finishes its remainder one element
 * at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "codegen/codegen.h"

static const char *ctype_of(const jk_ew_source_in *in, int p) {
  const jk_param_decl *d = &in->params->params[p];
  if (d->placeholder >= 0) return in->params->placeholders[d->placeholder];
  return jk_dtype((jitk_dtype)in->spec->dtype[p])->ctype;
}

/* The decomposition of linear index `var` into coordinates _jk_c0..,
 * then each array's element offset _jk_o_<name>. In the vector path the
 * innermost coordinate counts groups of `vec` elements. */
static void emit_offsets(jk_buf *b, const jk_ew_source_in *in, const char *var, int vec) {
  const jk_ew_spec *s = in->spec;
  int nd = s->ndim;
  jk_buf_printf(b, "    _jk_u _jk_r = %s;\n", var);
  for (int d = nd - 1; d >= 1; d--) {
    jk_buf_printf(b,
                  "    const _jk_u _jk_q%d = jitk::ew::div_%s(_jk_r, _jk_mag%d, _jk_shf%d);\n"
                  "    const _jk_s _jk_c%d = (_jk_s)(_jk_r - _jk_q%d * _jk_ext%d);\n"
                  "    _jk_r = _jk_q%d;\n",
                  d, s->idx64 ? "u64" : "u32", d, d, d, d, d, d);
  }
  jk_buf_puts(b, "    const _jk_s _jk_c0 = (_jk_s)_jk_r;\n");
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const char *name = in->params->params[p].name;
    jk_buf_printf(b, "    const _jk_s _jk_o_%s = ", name);
    for (int d = 0; d < nd; d++) {
      bool inner = d == nd - 1;
      if (inner && vec > 1)
        jk_buf_printf(b, "%s_jk_c%d * %d * _jk_s_%s_%d", d ? " + " : "", d, vec, name, d);
      else
        jk_buf_printf(b, "%s_jk_c%d * _jk_s_%s_%d", d ? " + " : "", d, name, d);
    }
    jk_buf_puts(b, ";\n");
  }
}

/* One element: inputs as values, outputs as locals, the operation, the
 * stores. `lane` is the lane variable in the vector path, NULL otherwise;
 * on the tiled path, transposed inputs come from their tile. */
static void emit_element(jk_buf *b, const jk_ew_source_in *in, const char *file, const char *lane,
                         const char *index_expr) {
  const jk_ew_spec *s = in->spec;
  jk_buf_printf(b, "    {\n    const _jk_s i = (_jk_s)(%s);\n    (void)i;\n", index_expr);
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    const char *t = ctype_of(in, p);
    /* Pairs of the tiled path: element `lane` of the thread's pair. */
    bool pair = s->tiled && s->tpair && lane != NULL;
    if (!d->output) {
      if (pair && s->transposed[p]) /* its tile holds columns: [column][row] */
        jk_buf_printf(b, "    const %s %s = _jk_t_%s[2 * _jk_tx + %s][_jk_ty + _jk_q];\n", t,
                      d->name, d->name, lane);
      else if (s->tiled && s->transposed[p]) /* from its tile, read back transposed */
        jk_buf_printf(b, "    const %s %s = _jk_t_%s[_jk_ty + _jk_q][_jk_tx];\n", t, d->name,
                      d->name);
      else if (pair && s->outer_bcast[p])
        jk_buf_printf(b, "    const %s %s = _jk_l_%s.v[%s];\n", t, d->name, d->name, lane);
      else if (s->tiled && s->outer_bcast[p])
        jk_buf_printf(b, "    const %s %s = _jk_l_%s;\n", t, d->name, d->name);
      else if (pair)
        jk_buf_printf(b, "    const %s %s = _jk_l_%s[_jk_qi].v[%s];\n", t, d->name, d->name, lane);
      else if (s->tiled)
        jk_buf_printf(b, "    const %s %s = _jk_l_%s[_jk_qi];\n", t, d->name, d->name);
      else if (lane == NULL)
        jk_buf_printf(b, "    const %s %s = _jk_p_%s[_jk_o_%s];\n", t, d->name, d->name, d->name);
      else if (s->inner_bcast[p])
        jk_buf_printf(b, "    const %s %s = _jk_b1_%s;\n", t, d->name, d->name);
      else
        jk_buf_printf(b, "    const %s %s = _jk_w_%s.v[%s];\n", t, d->name, d->name, lane);
    } else if (in->load_output[p]) {
      if (pair)
        jk_buf_printf(b, "    %s %s = _jk_l_%s[_jk_qi].v[%s];\n", t, d->name, d->name, lane);
      else if (s->tiled)
        jk_buf_printf(b, "    %s %s = _jk_l_%s[_jk_qi];\n", t, d->name, d->name);
      else if (lane == NULL)
        jk_buf_printf(b, "    %s %s = _jk_p_%s[_jk_o_%s];\n", t, d->name, d->name, d->name);
      else
        jk_buf_printf(b, "    %s %s = _jk_w_%s.v[%s];\n", t, d->name, d->name, lane);
    } else {
      jk_buf_printf(b, "    %s %s;\n", t, d->name);
    }
    /* An input the operation does not read is no one's concern. */
    if (!d->output) jk_buf_printf(b, "    (void)%s;\n", d->name);
  }
  jk_cg_user_code(b, "operation", in->operation, ";", file);
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    if (s->kind[p] != JK_EW_ARRAY || !d->output) continue;
    if (lane == NULL)
      jk_buf_printf(b, "    _jk_p_%s[_jk_o_%s] = %s;\n", d->name, d->name, d->name);
    else
      jk_buf_printf(b, "    _jk_w_%s.v[%s] = %s;\n", d->name, lane, d->name);
  }
  jk_buf_puts(b, "    }\n");
}

/* The vector path: each thread takes `unroll` groups of `vec` elements,
 * a grid-stride apart so that every access instruction stays contiguous
 * across the warp, issues all their loads, then computes and stores. The
 * launch decides how many groups a thread meets: one by default, with a
 * grid that covers the loop once (the fastest on the H200). */
static void emit_vector_loop(jk_buf *b, const jk_ew_source_in *in, const char *file) {
  const jk_ew_spec *s = in->spec;
  int v = s->vec, u = s->unroll > 0 ? s->unroll : 1;
  /* A stepped input's group reads its vectors whole, past its last
   * element: the last group goes to the remainder loop, so that nothing
   * past the view's last element is read. */
  bool stepped = false;
  for (int p = 0; p < s->nparams; p++) stepped |= s->step[p] > 1;
  jk_buf_printf(b,
                "  const _jk_u _jk_units = %s / %d;\n"
                "  const _jk_u _jk_stride = gridDim.x * (_jk_u)blockDim.x;\n"
                "  for (_jk_u _jk_k0 = blockIdx.x * (_jk_u)blockDim.x + threadIdx.x; _jk_k0 < "
                "_jk_units;\n"
                "       _jk_k0 += %d * _jk_stride) {\n",
                stepped ? "(_jk_n - 1)" : "_jk_n", v, u);
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    const char *t = ctype_of(in, p);
    if (!d->output && s->inner_bcast[p])
      jk_buf_printf(b, "    %s _jk_b_%s[%d];\n", t, d->name, u);
    else
      jk_buf_printf(b, "    jitk::ew::vec<%s, %d> _jk_v_%s[%d];\n", t, v, d->name, u);
    /* Only outputs need their offsets again, for the stores. */
    if (d->output) jk_buf_printf(b, "    _jk_s _jk_o_%s_u[%d];\n", d->name, u);
  }
  /* Loads of every group first. */
  jk_buf_printf(b, "#pragma unroll\n    for (int _jk_j = 0; _jk_j < %d; ++_jk_j) {\n", u);
  jk_buf_puts(b,
              "    const _jk_u _jk_k = _jk_k0 + _jk_j * _jk_stride;\n"
              "    if (_jk_k >= _jk_units) break;\n");
  emit_offsets(b, in, "_jk_k", v);
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    const char *t = ctype_of(in, p);
    if (d->output) jk_buf_printf(b, "    _jk_o_%s_u[_jk_j] = _jk_o_%s;\n", d->name, d->name);
    /* A reversed array's elements of the group go down from its offset:
     * one element at a time when unaligned, else the vector below it with
     * its lanes turned around. */
    const char *dir = s->reversed[p] ? "-" : "+";
    if (!d->output && s->inner_bcast[p])
      jk_buf_printf(b, "    _jk_b_%s[_jk_j] = _jk_p_%s[_jk_o_%s];\n", d->name, d->name, d->name);
    else if (!d->output && s->step[p] > 1 && s->unaligned[p])
      jk_buf_printf(b,
                    "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) "
                    "_jk_v_%s[_jk_j].v[_jk_l] = _jk_p_%s[_jk_o_%s + _jk_l * %d];\n",
                    v, d->name, d->name, d->name, s->step[p]);
    else if (!d->output && s->step[p] > 1)
      /* A stepped input: its group spans step vectors, read whole (the
       * memory moves them anyway), and every step-th element kept. */
      jk_buf_printf(
          b,
          "    {\n    jitk::ew::vec<%s, %d> _jk_t[%d];\n"
          "#pragma unroll\n    for (int _jk_q = 0; _jk_q < %d; ++_jk_q) _jk_t[_jk_q] = "
          "*reinterpret_cast<const jitk::ew::vec<%s, %d> *>(_jk_p_%s + _jk_o_%s + _jk_q * "
          "%d);\n"
          "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) "
          "_jk_v_%s[_jk_j].v[_jk_l] = _jk_t[_jk_l * %d / %d].v[_jk_l * %d %% %d];\n    }\n",
          t, v, s->step[p], s->step[p], t, v, d->name, d->name, v, v, d->name, s->step[p], v,
          s->step[p], v);
    else if ((!d->output || in->load_output[p]) && s->unaligned[p])
      jk_buf_printf(b,
                    "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) "
                    "_jk_v_%s[_jk_j].v[_jk_l] = _jk_p_%s[_jk_o_%s %s _jk_l];\n",
                    v, d->name, d->name, d->name, dir);
    else if ((!d->output || in->load_output[p]) && s->reversed[p])
      jk_buf_printf(b,
                    "    {\n    const jitk::ew::vec<%s, %d> _jk_t = *reinterpret_cast<const "
                    "jitk::ew::vec<%s, %d> *>(_jk_p_%s + _jk_o_%s - %d);\n"
                    "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) "
                    "_jk_v_%s[_jk_j].v[_jk_l] = _jk_t.v[%d - _jk_l];\n    }\n",
                    t, v, t, v, d->name, d->name, v - 1, v, d->name, v - 1);
    else if (!d->output || in->load_output[p])
      jk_buf_printf(b,
                    "    _jk_v_%s[_jk_j] = *reinterpret_cast<const jitk::ew::vec<%s, %d> "
                    "*>(_jk_p_%s + _jk_o_%s);\n",
                    d->name, t, v, d->name, d->name);
  }
  jk_buf_puts(b, "    }\n");
  /* Then compute and store each group. */
  jk_buf_printf(b, "#pragma unroll\n    for (int _jk_j = 0; _jk_j < %d; ++_jk_j) {\n", u);
  jk_buf_puts(b,
              "    const _jk_u _jk_k = _jk_k0 + _jk_j * _jk_stride;\n"
              "    if (_jk_k >= _jk_units) break;\n");
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    const char *t = ctype_of(in, p);
    if (!d->output && s->inner_bcast[p])
      jk_buf_printf(b, "    const %s _jk_b1_%s = _jk_b_%s[_jk_j];\n", t, d->name, d->name);
    else
      jk_buf_printf(b, "    %sjitk::ew::vec<%s, %d> &_jk_w_%s = _jk_v_%s[_jk_j];\n",
                    d->output ? "" : "const ", t, v, d->name, d->name);
  }
  jk_buf_printf(b, "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l)\n", v);
  /* The element index counts from the loop's start, before a peel. */
  const char *from = s->peel ? "_jk_h + " : "";
  char index[64];
  snprintf(index, sizeof index, "%s_jk_k * %d + _jk_l", from, v);
  emit_element(b, in, file, "_jk_l", index);
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    if (s->kind[p] != JK_EW_ARRAY || !d->output) continue;
    const char *t = ctype_of(in, p);
    if (s->unaligned[p])
      jk_buf_printf(b,
                    "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) "
                    "_jk_p_%s[_jk_o_%s_u[_jk_j] %s _jk_l] = _jk_w_%s.v[_jk_l];\n",
                    v, d->name, d->name, s->reversed[p] ? "-" : "+", d->name);
    else if (s->reversed[p])
      jk_buf_printf(b,
                    "    {\n    jitk::ew::vec<%s, %d> _jk_t;\n"
                    "#pragma unroll\n    for (int _jk_l = 0; _jk_l < %d; ++_jk_l) "
                    "_jk_t.v[%d - _jk_l] = _jk_w_%s.v[_jk_l];\n"
                    "    *reinterpret_cast<jitk::ew::vec<%s, %d> *>(_jk_p_%s + _jk_o_%s_u[_jk_j] - "
                    "%d) = _jk_t;\n    }\n",
                    t, v, v, v - 1, d->name, t, v, d->name, d->name, v - 1);
    else
      jk_buf_printf(b,
                    "    *reinterpret_cast<jitk::ew::vec<%s, %d> *>(_jk_p_%s + _jk_o_%s_u[_jk_j]) "
                    "= _jk_w_%s;\n",
                    t, v, d->name, d->name, d->name);
  }
  jk_buf_puts(b, "    }\n  }\n");
  if (s->ndim == 1) {
    /* The remainder of a one-dimensional loop, one element at a time. */
    jk_buf_printf(b,
                  "  for (_jk_u _jk_k = _jk_units * %d + blockIdx.x * (_jk_u)blockDim.x + "
                  "threadIdx.x; _jk_k < _jk_n;\n"
                  "       _jk_k += gridDim.x * (_jk_u)blockDim.x) {\n",
                  v);
    emit_offsets(b, in, "_jk_k", 1);
    snprintf(index, sizeof index, "%s_jk_k", from);
    emit_element(b, in, file, NULL, index);
    jk_buf_puts(b, "  }\n");
  }
}

/* The peel of a one-dimensional vector loop: the first _jk_h elements, by
 * the threads of the first block, through the arrays' own pointers (the
 * loop's are moved past them). A loop, as the rest of the kernel is: a
 * launch may give fewer threads a block than the peel has elements (a
 * block_size of 1), and the operation may `continue`. */
static void emit_peel(jk_buf *b, const jk_ew_source_in *in, const char *file) {
  const jk_ew_spec *s = in->spec;
  jk_buf_puts(b,
              "  for (_jk_u _jk_k = threadIdx.x; blockIdx.x == 0 && _jk_k < _jk_h;\n"
              "       _jk_k += blockDim.x) {\n");
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    jk_buf_printf(b, "    %s%s *const _jk_p_%s = _jk_p0_%s;\n", d->output ? "" : "const ",
                  ctype_of(in, p), d->name, d->name);
  }
  emit_offsets(b, in, "_jk_k", 1);
  emit_element(b, in, file, NULL, "_jk_k");
  jk_buf_puts(b, "  }\n");
}

/* The tiled path: square tiles of `tile` (64 or 32) elements a side over
 * two dimensions of the loop, the tile's rows along dimension `tile_dim`
 * and its columns along the innermost, 256 threads as rows of `tile`
 * threads, each thread taking tile * tile / 256 elements of one column of
 * the tile. Inputs that walk the tile's rows contiguously are read into
 * shared memory with consecutive threads on consecutive rows, then read
 * back transposed; everything else is read and written along the inner
 * dimension, as the outputs are laid out. With more than two dimensions
 * (a permuted 3-D or 4-D view that no collapsing brings down to two) the
 * other dimensions number batches of tiles: a block finds its batch's
 * coordinates with a few divisions per tile, not per element. With pairs
 * (tpair: 2-byte arrays that allow 4-byte accesses) a thread takes two
 * neighbouring columns of each of its rows, transposed inputs two
 * neighbouring rows of each of its columns, and rows of the block are
 * tile / 2 threads wide.
 *
 * Shaped after what measured fastest on the H200 in hand-written kernels
 * (docs/PERFORMANCE.md): a thread issues all its loads before its first
 * shared-memory or global store (the compiler may not move a load above a
 * store through pointers that could alias, and one load per store in turn
 * measured 0.80 of copy where loads first reach 0.90), and a row of the
 * block spans a whole row of the tile, so a block reads and writes 256
 * contiguous bytes at a time (0.95). Arrays with a stride of 0 along the
 * tile's rows (a bias along the rows) are loaded once per tile. */
static void emit_tiled_loop(jk_buf *b, const jk_ew_source_in *in, const char *file) {
  const jk_ew_spec *s = in->spec;
  /* With pairs (tpair), a row of the block is half a row of the tile. */
  bool pair = s->tpair != 0;
  int side = s->tile == 64 ? 64 : 32, tpr = pair ? side / 2 : side, pass = JK_EW_BLOCK / tpr,
      nq = side / pass;
  int nd = s->ndim, k = s->tile_dim, last = nd - 1;
  bool batched = nd > 2;
  /* A tile of pairs holds columns ([column][row]), each row of it written
   * a pair of rows at a time, so it is padded by a pair. Pairs need 4-byte
   * alignment; wider elements keep their own, since an alignment below
   * the type's would have each element moved 4 bytes at a time. */
  for (int p = 0; p < s->nparams; p++)
    if (s->kind[p] == JK_EW_ARRAY && s->transposed[p]) {
      size_t align = jk_dtype((jitk_dtype)s->dtype[p])->align;
      jk_buf_printf(b, "  __shared__ __align__(%d) %s _jk_t_%s[%d][%d];\n",
                    align > 4 ? (int)align : 4, ctype_of(in, p), in->params->params[p].name, side,
                    side + (pair ? 2 : 1));
    }
  /* The extents of the tile's dimensions; dimension 0's is no parameter
   * and follows from the element count. */
  if (k == 0) {
    jk_buf_puts(b, "  const _jk_u _jk_rows = _jk_n / (_jk_ext1");
    for (int d = 2; d < nd; d++) jk_buf_printf(b, " * _jk_ext%d", d);
    jk_buf_puts(b, ");\n");
  } else {
    jk_buf_printf(b, "  const _jk_u _jk_rows = _jk_ext%d;\n", k);
  }
  jk_buf_printf(b, "  const _jk_u _jk_cols = _jk_ext%d;\n", last);
  jk_buf_printf(b,
                "  const _jk_u _jk_tr = (_jk_rows + %d) / %d;\n"
                "  const _jk_u _jk_tc = (_jk_cols + %d) / %d;\n"
                "  const unsigned int _jk_tx = threadIdx.x %% %d, _jk_ty = threadIdx.x / %d;\n",
                side - 1, side, side - 1, side, tpr, tpr);
  if (batched)
    jk_buf_puts(b,
                "  const _jk_u _jk_tpb = _jk_tr * _jk_tc;\n"
                "  const _jk_u _jk_tiles = _jk_n / (_jk_rows * _jk_cols) * _jk_tpb;\n");
  else
    jk_buf_puts(b, "  const _jk_u _jk_tiles = _jk_tr * _jk_tc;\n");
  jk_buf_puts(
      b, "  for (_jk_u _jk_tile = blockIdx.x; _jk_tile < _jk_tiles; _jk_tile += gridDim.x) {\n");
  if (batched) {
    jk_buf_puts(b,
                "    const _jk_u _jk_bt = _jk_tile / _jk_tpb;\n"
                "    const _jk_u _jk_tl = _jk_tile - _jk_bt * _jk_tpb;\n"
                "    _jk_u _jk_br = _jk_bt;\n");
    /* The batch's coordinates, innermost first; the outermost batch
     * dimension takes what is left. */
    int outer = k == 0 ? 1 : 0;
    for (int d = last - 1; d >= 0; d--) {
      if (d == k) continue;
      if (d == outer)
        jk_buf_printf(b, "    const _jk_s _jk_bc%d = (_jk_s)_jk_br;\n", d);
      else
        jk_buf_printf(b,
                      "    const _jk_u _jk_bq%d = _jk_br / _jk_ext%d;\n"
                      "    const _jk_s _jk_bc%d = (_jk_s)(_jk_br - _jk_bq%d * _jk_ext%d);\n"
                      "    _jk_br = _jk_bq%d;\n",
                      d, d, d, d, d, d);
    }
    for (int p = 0; p < s->nparams; p++) {
      if (s->kind[p] != JK_EW_ARRAY) continue;
      const char *name = in->params->params[p].name;
      jk_buf_printf(b, "    const _jk_s _jk_bo_%s = 0", name);
      for (int d = 0; d < last; d++)
        if (d != k) jk_buf_printf(b, " + _jk_bc%d * _jk_s_%s_%d", d, name, d);
      jk_buf_puts(b, ";\n");
    }
  } else {
    jk_buf_puts(b, "    const _jk_u _jk_tl = _jk_tile;\n");
  }
  jk_buf_printf(b,
                "    const _jk_u _jk_tile_r = _jk_tl / _jk_tc;\n"
                "    const _jk_u _jk_r0 = _jk_tile_r * %d;\n"
                "    const _jk_u _jk_c0 = (_jk_tl - _jk_tile_r * _jk_tc) * %d;\n",
                side, side);
  /* An array's offset in a batch starts from the batch's, printed as
   * "%s%s%s" with BASE(name). */
#define BASE(name) batched ? "_jk_bo_" : "", batched ? (name) : "", batched ? " + " : ""
  /* Every load of the tile first: transposed inputs with threads along
   * the tile's rows, the rest along the inner dimension. */
  bool any = false;
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY) continue;
    const jk_param_decl *d = &in->params->params[p];
    if (d->output && !in->load_output[p]) continue;
    const char *t = ctype_of(in, p), *name = d->name;
    if (pair && s->outer_bcast[p]) {
      jk_buf_printf(b,
                    "    jitk::ew::vec<%s, 2> _jk_l_%s;\n"
                    "    _jk_l_%s.v[0] = _jk_l_%s.v[1] = %s();\n"
                    "    if (_jk_c0 + 2 * _jk_tx < _jk_cols)\n"
                    "      _jk_l_%s = *reinterpret_cast<const jitk::ew::vec<%s, 2> *>(_jk_p_%s + "
                    "%s%s%s(_jk_s)(_jk_c0 + 2 * _jk_tx) * _jk_s_%s_%d);\n",
                    t, name, name, name, t, name, t, name, BASE(name), name, last);
      continue;
    }
    if (s->outer_bcast[p]) {
      jk_buf_printf(
          b,
          "    %s _jk_l_%s = %s();\n"
          "    if (_jk_c0 + _jk_tx < _jk_cols) _jk_l_%s = _jk_p_%s[%s%s%s(_jk_s)(_jk_c0 + "
          "_jk_tx) * _jk_s_%s_%d];\n",
          t, name, t, name, name, BASE(name), name, last);
      continue;
    }
    bool tr = s->transposed[p];
    any |= tr;
    char along[48];
    snprintf(along, sizeof along, "_jk_ty + _jk_qi * %d", pass);
    if (pair) {
      /* Two columns of a row, or (transposed) two rows of a column. */
      jk_buf_printf(b,
                    "    jitk::ew::vec<%s, 2> _jk_l_%s[%d];\n"
                    "#pragma unroll\n"
                    "    for (int _jk_qi = 0; _jk_qi < %d; ++_jk_qi) {\n"
                    "      const _jk_u _jk_r = _jk_r0 + %s, _jk_c = _jk_c0 + %s;\n"
                    "      _jk_l_%s[_jk_qi].v[0] = _jk_l_%s[_jk_qi].v[1] = %s();\n"
                    "      if (_jk_r < _jk_rows && _jk_c < _jk_cols)\n"
                    "        _jk_l_%s[_jk_qi] = *reinterpret_cast<const jitk::ew::vec<%s, 2> *>("
                    "_jk_p_%s + %s%s%s(_jk_s)_jk_r * _jk_s_%s_%d + (_jk_s)_jk_c * _jk_s_%s_%d);\n"
                    "    }\n",
                    t, name, nq, nq, tr ? "2 * _jk_tx" : along, tr ? along : "2 * _jk_tx", name,
                    name, t, name, t, name, BASE(name), name, k, name, last);
      continue;
    }
    jk_buf_printf(
        b,
        "    %s _jk_l_%s[%d];\n"
        "#pragma unroll\n"
        "    for (int _jk_qi = 0; _jk_qi < %d; ++_jk_qi) {\n"
        "      const _jk_u _jk_r = _jk_r0 + %s, _jk_c = _jk_c0 + %s;\n"
        "      _jk_l_%s[_jk_qi] = %s();\n"
        "      if (_jk_r < _jk_rows && _jk_c < _jk_cols)\n"
        "        _jk_l_%s[_jk_qi] = _jk_p_%s[%s%s%s(_jk_s)_jk_r * _jk_s_%s_%d + (_jk_s)_jk_c * "
        "_jk_s_%s_%d];\n"
        "    }\n",
        t, name, nq, nq, tr ? "_jk_tx" : along, tr ? along : "_jk_tx", name, t, name, name,
        BASE(name), name, k, name, last);
  }
  for (int p = 0; p < s->nparams; p++) {
    if (s->kind[p] != JK_EW_ARRAY || !s->transposed[p]) continue;
    const char *name = in->params->params[p].name;
    if (pair) {
      jk_buf_printf(b,
                    "#pragma unroll\n"
                    "    for (int _jk_qi = 0; _jk_qi < %d; ++_jk_qi)\n"
                    "      *reinterpret_cast<jitk::ew::vec<%s, 2> *>(&_jk_t_%s[_jk_ty + _jk_qi * "
                    "%d][2 * _jk_tx]) = _jk_l_%s[_jk_qi];\n",
                    nq, ctype_of(in, p), name, pass, name);
      continue;
    }
    jk_buf_printf(b,
                  "#pragma unroll\n"
                  "    for (int _jk_qi = 0; _jk_qi < %d; ++_jk_qi)\n"
                  "      _jk_t_%s[_jk_tx][_jk_ty + _jk_qi * %d] = _jk_l_%s[_jk_qi];\n",
                  nq, name, pass, name);
  }
  if (any) jk_buf_puts(b, "    __syncthreads();\n");
  jk_buf_printf(b,
                "#pragma unroll\n"
                "    for (int _jk_qi = 0; _jk_qi < %d; ++_jk_qi) {\n"
                "      const int _jk_q = _jk_qi * %d;\n"
                "      const _jk_u _jk_r = _jk_r0 + _jk_ty + _jk_q, _jk_cc = _jk_c0 + %s;\n"
                "      if (_jk_r >= _jk_rows || _jk_cc >= _jk_cols) continue;\n",
                nq, pass, pair ? "2 * _jk_tx" : "_jk_tx");
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    if (s->kind[p] != JK_EW_ARRAY || !d->output) continue;
    jk_buf_printf(b,
                  "      const _jk_s _jk_o_%s = %s%s%s(_jk_s)_jk_r * _jk_s_%s_%d + (_jk_s)_jk_cc * "
                  "_jk_s_%s_%d;\n",
                  d->name, BASE(d->name), d->name, k, d->name, last);
  }
  /* The element's index in the loop, by Horner's rule over the
   * coordinates of every dimension (the compiler drops it when the
   * operation does not read i). */
  if (pair)
    for (int p = 0; p < s->nparams; p++)
      if (s->kind[p] == JK_EW_ARRAY && in->params->params[p].output)
        jk_buf_printf(b, "      jitk::ew::vec<%s, 2> _jk_w_%s;\n", ctype_of(in, p),
                      in->params->params[p].name);
  const char *lane = pair ? "_jk_l" : NULL;
  if (pair) jk_buf_puts(b, "#pragma unroll\n      for (int _jk_l = 0; _jk_l < 2; ++_jk_l) {\n");
  if (!batched) {
    emit_element(b, in, file, lane,
                 pair ? "_jk_r * _jk_ext1 + _jk_cc + _jk_l" : "_jk_r * _jk_ext1 + _jk_cc");
  } else {
    for (int d = 0; d < nd; d++) {
      char c[24];
      if (d == k)
        snprintf(c, sizeof c, "_jk_r");
      else if (d == last)
        snprintf(c, sizeof c, "_jk_cc");
      else
        snprintf(c, sizeof c, "(_jk_u)_jk_bc%d", d);
      if (d == 0)
        jk_buf_printf(b, "      _jk_u _jk_ix = %s;\n", c);
      else
        jk_buf_printf(b, "      _jk_ix = _jk_ix * _jk_ext%d + %s;\n", d, c);
    }
    emit_element(b, in, file, lane, pair ? "_jk_ix + _jk_l" : "_jk_ix");
  }
  if (pair) {
    jk_buf_puts(b, "      }\n");
    for (int p = 0; p < s->nparams; p++)
      if (s->kind[p] == JK_EW_ARRAY && in->params->params[p].output)
        jk_buf_printf(b,
                      "      *reinterpret_cast<jitk::ew::vec<%s, 2> *>(_jk_p_%s + _jk_o_%s) = "
                      "_jk_w_%s;\n",
                      ctype_of(in, p), in->params->params[p].name, in->params->params[p].name,
                      in->params->params[p].name);
  }
  jk_buf_puts(b, "    }\n");
  if (any) jk_buf_puts(b, "    __syncthreads();\n");
  jk_buf_puts(b, "  }\n");
#undef BASE
}

jitk_status jk_ew_generate(jitk_engine *e, const jk_ew_source_in *in, char **source) {
  const jk_ew_spec *s = in->spec;
  jk_buf b;
  jk_buf_init(&b, e);
  char file[128];
  snprintf(file, sizeof file, "%s.cu", in->name);

  jk_buf_printf(&b,
                "// Generated by jitk: elementwise kernel %s, %d dimension%s, %d-bit index, %s\n",
                in->name, s->ndim, s->ndim == 1 ? "" : "s", s->idx64 ? 64 : 32,
                s->tiled && s->tpair ? "tiled path, element pairs"
                : s->tiled           ? "tiled path"
                : s->vec > 1         ? "vector path"
                                     : "scalar path");
  jk_buf_puts(&b, "#include <jitk/elementwise.cuh>\n");
  const char *const code[] = {in->operation, in->preamble, in->loop_prep, in->after_loop};
  jk_cg_prologue(&b, in->params, s->nparams, s->dtype, s->kind, s->idx64, JITK_DTYPE_NONE, code,
                 sizeof code / sizeof code[0]);
  jk_cg_user_section(&b, "preamble", in->preamble, file);

  /* A peeled loop takes the arrays' pointers and the element count as
   * _jk_p0_ and _jk_n0, and moves its own _jk_p_ and _jk_n past the peel. */
  bool peel = s->peel && s->vec > 1 && s->ndim == 1 && !s->tiled;
  jk_buf_printf(&b, "extern \"C\" __global__ void %s(_jk_u _jk_n%s", in->name,
                peel ? "0, _jk_u _jk_h" : "");
  for (int d = 1; d < s->ndim; d++)
    jk_buf_printf(&b, ", _jk_u _jk_ext%d, _jk_u _jk_mag%d, unsigned int _jk_shf%d", d, d, d);
  for (int p = 0; p < s->nparams; p++) {
    const jk_param_decl *d = &in->params->params[p];
    const char *t = ctype_of(in, p);
    if (s->kind[p] == JK_EW_ARRAY) {
      jk_buf_printf(&b, ",\n    %s%s *_jk_p%s_%s", d->output ? "" : "const ", t, peel ? "0" : "",
                    d->name);
      for (int k = 0; k < s->ndim; k++) jk_buf_printf(&b, ", _jk_s _jk_s_%s_%d", d->name, k);
    } else if (s->kind[p] == JK_EW_RAW) {
      jk_buf_printf(&b, ",\n    jitk::array<%s%s, %d> %s", d->output ? "" : "const ", t,
                    s->raw_ndim[p], d->name);
    } else {
      jk_buf_printf(&b, ",\n    const %s %s", t, d->name);
    }
  }
  jk_buf_printf(&b, ") {\n  const jitk::ew::index<_jk_s> _ind = {(_jk_s)_jk_n%s};\n  (void)_ind;\n",
                peel ? "0" : "");
  jk_cg_user_section(&b, "loop_prep", in->loop_prep, file);
  if (peel) {
    emit_peel(&b, in, file);
    jk_buf_puts(&b, "  const _jk_u _jk_n = _jk_n0 - _jk_h;\n");
    for (int p = 0; p < s->nparams; p++) {
      if (s->kind[p] != JK_EW_ARRAY) continue;
      const jk_param_decl *d = &in->params->params[p];
      jk_buf_printf(&b, "  %s%s *const _jk_p_%s = _jk_p0_%s + (_jk_s)_jk_h * _jk_s_%s_0;\n",
                    d->output ? "" : "const ", ctype_of(in, p), d->name, d->name, d->name);
    }
  }
  if (s->tiled) {
    emit_tiled_loop(&b, in, file);
  } else if (s->vec > 1) {
    emit_vector_loop(&b, in, file);
  } else {
    jk_buf_puts(
        &b,
        "  for (_jk_u _jk_k = blockIdx.x * (_jk_u)blockDim.x + threadIdx.x; _jk_k < _jk_n;\n"
        "       _jk_k += gridDim.x * (_jk_u)blockDim.x) {\n");
    emit_offsets(&b, in, "_jk_k", 1);
    emit_element(&b, in, file, NULL, "_jk_k");
    jk_buf_puts(&b, "  }\n");
  }
  jk_cg_user_section(&b, "after_loop", in->after_loop, file);
  jk_buf_puts(&b, "}\n");
  char *src = jk_buf_take(&b);
  if (src == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory generating a kernel");
  *source = src;
  return JITK_OK;
}
