/*
 * CUDA source for a matmul plan: one kernel that instantiates a tile
 * routine of templates/jitk/matmul.cuh and hands it a store that applies
 * alpha, beta * C and the user's epilogue to each accumulator, converts
 * once to D's dtype and writes D. The epilogue sits under `#line 1
 * "epilogue"`, so that NVRTC's messages cite the user's text.
 */
#include <stdio.h>
#include <string.h>

#include "array/array.h"
#include "codegen/codegen.h"

static const char *ct(jitk_dtype d) { return jk_dtype(d)->ctype; }

/* The cp.async FFMA tiles plans choose among (matmul_plan.c's
 * choose_ffma): the wide 128 x 256 tile, 16 x 8 a lane, for products
 * that fill the GPU, and narrower ones, 8 x 4 a lane, whose more numerous
 * tiles keep every multiprocessor busy on smaller products. A 128 x 64
 * tile of 4 warps, 16 x 4 a lane, and 128 x 128 ones of 4 and 8 warps
 * were measured too and left out (tools/bench/study/sgemm_tiles.cu,
 * docs/PERFORMANCE.md): the 4-warp 128 x 64 tile ran 1000^3 in 99 us on
 * the H200, where the 8-warp one here took 69. */
static const jk_mm_ffma_tile FFMA_TILES[JK_MM_FFMA_TILES] = {
    {256, 2, 4, 4, 1}, /* 256 threads, 16 x 8 a lane */
    {64, 4, 2, 4, 2},  /* 256 threads, 8 x 4 */
    {32, 4, 1, 4, 4},  /* 128 threads, 8 x 4 */
};

const jk_mm_ffma_tile *jk_mm_ffma_tile_at(int index) {
  return index >= 1 && index <= JK_MM_FFMA_TILES ? &FFMA_TILES[index - 1] : NULL;
}

/* The element type of raw operand p as the kernel declares it. */
static const char *col_type(const jk_mm_spec *s, const jk_mm_source_in *in, size_t p) {
  const jk_param_decl *d = &in->params->params[p];
  return d->placeholder >= 0 ? ct(s->acc) : ct(d->dtype);
}

/* The epilogue's raw operands read ahead at their columns (at most
 * JK_MM_COL_VECS, each BN / 32 registers a consumer thread holds through
 * the tile's MMAs): in the wgmma kernels that are not swapped, without
 * macros in the preamble. Their indices in the parameter
 * list go to idx; how many. */
#define JK_MM_COL_VECS 2
static size_t col_vecs(const jk_mm_spec *s, const jk_mm_source_in *in, size_t idx[JK_MM_COL_VECS]) {
  if (s->kind != JK_MM_WGMMA || s->swap || s->bn % 64 != 0 || s->no_col_vecs) return 0;
  if (in->preamble != NULL && strstr(in->preamble, "define") != NULL) return 0;
  size_t n = 0;
  for (size_t p = 0; p < in->params->count && n < JK_MM_COL_VECS; p++) {
    const jk_param_decl *d = &in->params->params[p];
    if (!d->raw) continue;
    /* Every element inside D evaluates each of these texts, so an
     * operand that one of them always reads at `col` has every column of a
     * tile read anyway, and the early loads touch nothing more. */
    bool at_col = jk_code_always_reads_at(in->epilogue, d->name, "col");
    for (size_t i = 0; !at_col && i < in->num_outputs; i++)
      at_col = jk_code_always_reads_at(in->outputs[i].expr, d->name, "col");
    for (size_t i = 0; !at_col && i < in->num_reductions; i++)
      at_col = jk_code_always_reads_at(in->reductions[i].expr, d->name, "col");
    if (at_col) idx[n++] = p;
  }
  return n;
}

/* Whether the kernel writes its outputs besides D in whole rows through
 * the reduction object (matmul_sm90.cuh's out_rows): a kernel that folds
 * reductions per tile, D (and so the outputs) row-major. */
static bool tile_outputs(const jk_mm_spec *s, const jk_mm_source_in *in) {
  return jk_mm_tile_reduces(s) && s->d_row && in->num_outputs > 0;
}

/* Whether the kernel has a reduction object (_jk_reds) at all. */
static bool has_red_struct(const jk_mm_spec *s, const jk_mm_source_in *in) {
  return jk_mm_tile_reduces(s) && (in->num_reductions > 0 || tile_outputs(s, in));
}

/* Whether the wgmma value lambda may compute every element, inside D or
 * not, and choose afterwards: its texts read memory through no operand
 * but those read ahead at `col` (which then read registers), C is not
 * read, no preamble declares anything they might read, and outputs and
 * reductions wait in the reduction object rather than being stored from
 * the lambda. The choice is then a select, where a branch around each
 * value cost five instructions a value (a convergence barrier and its
 * wait, the branch, two predicated moves: ncu, GELU with an output at
 * 4096 x 4096 x 1024), as many as GELU itself. cv: the operands read
 * ahead (col_vecs). */
static bool whole_values(const jk_mm_spec *s, const jk_mm_source_in *in, const size_t *cv,
                         size_t ncv) {
  if (s->kind != JK_MM_WGMMA || s->swap || s->has_c) return false;
  if (in->preamble != NULL && in->preamble[strspn(in->preamble, " \t\r\n")] != '\0') return false;
  if ((in->num_outputs > 0 && !tile_outputs(s, in)) ||
      (in->num_reductions > 0 && !jk_mm_tile_reduces(s)))
    return false;
  for (size_t p = 0; p < in->params->count; p++) {
    const jk_param_decl *d = &in->params->params[p];
    if (!d->raw) continue;
    bool ahead = false;
    for (size_t i = 0; i < ncv; i++) ahead = ahead || cv[i] == p;
    const char *index = ahead ? "col" : NULL;
    if (!jk_code_reads_only_at(in->epilogue, d->name, index)) return false;
    for (size_t i = 0; i < in->num_outputs; i++)
      if (!jk_code_reads_only_at(in->outputs[i].expr, d->name, index)) return false;
    for (size_t i = 0; i < in->num_reductions; i++)
      if (!jk_code_reads_only_at(in->reductions[i].expr, d->name, index)) return false;
  }
  return true;
}

/* With outputs or reductions: D's value first, then each output and each
 * reduction's term, which may use it, then D. */
static void emit_extras(jk_buf *b, const jk_mm_spec *s, const jk_mm_source_in *in, const char *file,
                        const char *d_at, bool whole) {
  jk_buf_puts(b, "    const T value = static_cast<T>(\n");
  if (in->epilogue != NULL && *in->epilogue)
    jk_cg_user_code(b, "epilogue", in->epilogue, ");", file);
  else
    jk_buf_puts(b, "acc);\n");
  jk_buf_puts(b, "    (void)value;\n");
  char label[160];
  for (size_t i = 0; i < in->num_outputs; i++) {
    const jitk_matmul_output *o = &in->outputs[i];
    /* In whole rows, a value waits in _jk_rs for store_rows to write it. */
    if (tile_outputs(s, in))
      jk_buf_printf(b, "    _jk_rs.u%zu = static_cast<%s>(\n", i, ct(o->dtype));
    else
      jk_buf_printf(b, "    _jk_o%zu[batch * %lldLL + %s * %lldLL + %s] = static_cast<%s>(\n", i,
                    (long long)o->stride, s->d_row ? "row" : "col", (long long)o->ld,
                    s->d_row ? "col" : "row", ct(o->dtype));
    snprintf(label, sizeof label, "output %s", o->name);
    jk_cg_user_code(b, label, o->expr, ");", file);
  }
  for (size_t i = 0; i < in->num_reductions; i++) {
    const jitk_matmul_reduction *r = &in->reductions[i];
    /* Folded per tile, a term waits in _jk_rs for store_rows to fold it. */
    if (jk_mm_tile_reduces(s))
      jk_buf_printf(b, "    _jk_rs.t%zu = static_cast<%s>(\n", i,
                    ct(jk_mm_work_dtype(s->acc, r->dtype)));
    else
      jk_buf_printf(b, "    _jk_w%zu[(batch * _jk_m + row) * _jk_n + col] = static_cast<%s>(\n", i,
                    ct(jk_mm_work_dtype(s->acc, r->dtype)));
    snprintf(label, sizeof label, "reduction %s", r->name);
    jk_cg_user_code(b, label, r->expr, ");", file);
  }
  /* whole_values: outside D, the reductions' terms are their identities,
   * the outputs' values 0, and amax sees 0. */
  if (whole && in->num_outputs + in->num_reductions > 0)
    jk_buf_puts(b, "    if (!_jk_in) _jk_rs.none();\n");
  if (s->amax)
    jk_buf_printf(b, "    jitk::mm::amax_fold(_jk_amax_v, %s);\n",
                  whole ? "_jk_in ? value : static_cast<T>(0)" : "value");
  const char *scaled = s->d_scale ? "value * static_cast<T>(_jk_dscale)" : "value";
  if (s->kind == JK_MM_WGMMA && whole)
    jk_buf_printf(b, "    return _jk_in ? static_cast<%s>(%s) : static_cast<%s>(0.f);\n", ct(s->d),
                  scaled, ct(s->d));
  else if (s->kind == JK_MM_WGMMA)
    jk_buf_printf(b, "    return static_cast<%s>(%s);\n", ct(s->d), scaled);
  else
    jk_buf_printf(b, "    _jk_pd[%s] = static_cast<%s>(%s);\n", d_at, ct(s->d), scaled);
}

/* The reduction object of a kernel that folds its reductions per tile
 * (jk_mm_tile_reduces), which matmul_sm90.cuh's store_rows drives (it
 * also carries the outputs written in whole rows, tile_outputs: each
 * one's last value, the current group's four and four groups' values
 * before out_rows writes them): each
 * reduction's workspace and last term (the value lambda sets it), and
 * its running values: over the rows, the thread's four terms of the
 * current 8-column group and the warp's results it keeps until eight
 * groups are done; over the columns (and the whole matrix, whose
 * second steps start from per-row results), the thread's two rows folded
 * over the tile's columns so far. */
static void emit_red_struct(jk_buf *b, const jk_mm_spec *s, const jk_mm_source_in *in) {
  static const char *const ops[] = {"sum", "max", "min"};
  jk_buf_printf(b,
                "static_assert(%d %% 64 == 0, \"red_tile_over_rows and out_rows write blocks "
                "of 64 and 32 columns\");\n"
                "struct _jk_reds {\n  long long m, n, parts, tn;\n",
                s->bn);
  const bool outs = tile_outputs(s, in);
  for (size_t i = 0; outs && i < in->num_outputs; i++) {
    const char *o = ct(in->outputs[i].dtype);
    jk_buf_printf(b, "  %s *o%zu;\n  %s u%zu;\n  %s e%zu[4];\n  %s h%zu[16];\n", o, i, o, i, o, i,
                  o, i);
  }
  for (size_t i = 0; i < in->num_reductions; i++) {
    const jitk_matmul_reduction *r = &in->reductions[i];
    const char *w = ct(jk_mm_work_dtype(s->acc, r->dtype));
    jk_buf_printf(b, "  %s *w%zu;\n  %s t%zu;\n  %s %c%zu[%d];\n", w, i, w, i, w,
                  r->axis == JITK_REDUCE_ROWS ? 'g' : 'q', i, r->axis == JITK_REDUCE_ROWS ? 4 : 2);
    if (r->axis == JITK_REDUCE_ROWS) jk_buf_printf(b, "  %s k%zu[2];\n", w, i);
  }
  /* Outside D, an output's value is 0: never stored, but defined, so
   * that the other element of a pair the transpose moves as one word is
   * not lost to an undefined neighbour. */
  jk_buf_puts(b, "  __device__ __forceinline__ void none() {\n");
  for (size_t i = 0; outs && i < in->num_outputs; i++)
    jk_buf_printf(b, "    u%zu = static_cast<%s>(0.f);\n", i, ct(in->outputs[i].dtype));
  for (size_t i = 0; i < in->num_reductions; i++)
    jk_buf_printf(b, "    t%zu = jitk::mm::op_%s::first<%s>();\n", i,
                  ops[(int)in->reductions[i].op],
                  ct(jk_mm_work_dtype(s->acc, in->reductions[i].dtype)));
  jk_buf_puts(b, "  }\n  __device__ __forceinline__ void start() {\n");
  for (size_t i = 0; i < in->num_reductions; i++)
    if (in->reductions[i].axis != JITK_REDUCE_ROWS)
      jk_buf_printf(b, "    q%zu[0] = q%zu[1] = jitk::mm::op_%s::first<%s>();\n", i, i,
                    ops[(int)in->reductions[i].op],
                    ct(jk_mm_work_dtype(s->acc, in->reductions[i].dtype)));
  jk_buf_puts(b, "  }\n  __device__ __forceinline__ void fold(int v) {\n    (void)v;\n");
  for (size_t i = 0; outs && i < in->num_outputs; i++)
    jk_buf_printf(b, "    e%zu[v] = u%zu;\n", i, i);
  for (size_t i = 0; i < in->num_reductions; i++)
    if (in->reductions[i].axis == JITK_REDUCE_ROWS)
      jk_buf_printf(b, "    g%zu[v] = t%zu;\n", i, i);
    else
      jk_buf_printf(b, "    q%zu[v >> 1] = jitk::mm::op_%s::apply(q%zu[v >> 1], t%zu);\n", i,
                    ops[(int)in->reductions[i].op], i, i);
  jk_buf_puts(b,
              "  }\n  __device__ __forceinline__ void group(long long b, long long wrow, long "
              "long c, int i) {\n    (void)b;\n    (void)wrow;\n    (void)c;\n    (void)i;\n");
  /* Outputs: four groups' values, then their rows (the block's first
   * column is c less the thread's offset and three groups). */
  for (size_t i = 0; outs && i < in->num_outputs; i++) {
    const jitk_matmul_output *o = &in->outputs[i];
    jk_buf_printf(b,
                  "    for (int v = 0; v < 4; v++) h%zu[(i & 3) * 4 + v] = e%zu[v];\n"
                  "    if ((i & 3) == 3)\n"
                  "      jitk::mm90::out_rows(h%zu, o%zu + b * %lldLL, %lldLL, m, n, wrow + "
                  "((threadIdx.x & 31) >> 2), c - (threadIdx.x & 3) * 2 - 24);\n",
                  i, i, i, i, (long long)o->stride, (long long)o->ld);
  }
  for (size_t i = 0; i < in->num_reductions; i++)
    if (in->reductions[i].axis == JITK_REDUCE_ROWS)
      jk_buf_printf(b,
                    "    jitk::mm90::red_tile_over_rows<jitk::mm::op_%s>(g%zu, k%zu, w%zu + (b * "
                    "parts + wrow / 16) * n, n, c, i, wrow < m);\n",
                    ops[(int)in->reductions[i].op], i, i, i);
  jk_buf_puts(b,
              "  }\n  __device__ __forceinline__ void finish(long long b, long long row, long "
              "long tile) {\n    (void)b;\n    (void)row;\n    (void)tile;\n");
  for (size_t i = 0; i < in->num_reductions; i++)
    if (in->reductions[i].axis != JITK_REDUCE_ROWS)
      jk_buf_printf(b,
                    "    jitk::mm90::red_tile_over_cols<jitk::mm::op_%s>(q%zu, w%zu + b * m * tn "
                    "+ tile, m, tn, row);\n",
                    ops[(int)in->reductions[i].op], i, i);
  jk_buf_puts(b, "  }\n};\n");
}

/* FP8 plans' scales, read once per thread before the tile loop: A's and
 * B's folded into alpha, D's kept for the store; and the thread's running
 * amax of D, which amax_commit combines after the loop. */
static void emit_scales(jk_buf *b, const jk_mm_spec *s) {
  if (s->a_scale || s->b_scale)
    jk_buf_printf(b, "  const float _jk_ab = static_cast<float>(_jk_alpha)%s%s;\n",
                  s->a_scale ? " * *_jk_scale_a" : "", s->b_scale ? " * *_jk_scale_b" : "");
  if (s->d_scale) jk_buf_puts(b, "  const float _jk_dscale = *_jk_scale_d;\n");
  if (s->amax) jk_buf_puts(b, "  float _jk_amax_v = 0.f;\n");
}

/* The store of the mma and simt kernels: alpha, beta * C and the epilogue
 * applied to one accumulator, written to D. The wgmma kernel's value
 * lambda computes the same and returns it; its put2 writes pairs of a
 * column-major D, and _jk_rowp gives the rows of a row-major D that TMA
 * cannot store (rows off 16 bytes), which go through shared memory.
 * Whether it defined _jk_pre, which loads the operands read ahead
 * (col_vecs) and which the tile loop must then be given. */
static bool emit_output(jk_buf *b, const jk_mm_spec *s, const jk_mm_source_in *in, const char *file,
                        const char *acc_type) {
  const char *acc = ct(s->acc);
  size_t cv[JK_MM_COL_VECS], ncv = col_vecs(s, in, cv);
  const bool whole = whole_values(s, in, cv, ncv);
  for (size_t i = 0; i < ncv; i++)
    jk_buf_printf(b, "  jitk::mm90::col_vec<%s, %d> _jk_cv%zu;\n", col_type(s, in, cv[i]), s->bn,
                  i);
  if (ncv > 0) {
    jk_buf_puts(b, "  auto _jk_pre = [&](long long batch, long long _jk_c0) {\n    (void)batch;\n");
    for (size_t i = 0; i < ncv; i++)
      jk_buf_printf(b, "    _jk_cv%zu.load(%s.p, _jk_c0, _jk_n);\n", i,
                    in->params->params[cv[i]].name);
    jk_buf_puts(b, "  };\n");
  }
  /* A swapped kernel's rows are the user's columns and its columns the
   * user's rows: the lambdas take the kernel's and name the user's. */
  if (s->kind == JK_MM_WGMMA && s->swap) {
    jk_buf_printf(
        b,
        "  auto _jk_value = [&](long long batch, long long _jk_kr, long long _jk_kc, float _jk_v, "
        "int, bool) -> %s {\n"
        "    const long long row = _jk_kc, col = _jk_kr;\n"
        "    if (row >= _jk_m || col >= _jk_n) return static_cast<%s>(0.f);\n",
        ct(s->d), ct(s->d));
  } else if (s->kind == JK_MM_WGMMA) {
    jk_buf_printf(b,
                  "  auto _jk_value = [&](long long batch, long long row, long long col, float "
                  "_jk_v, int _jk_slot, bool _jk_fresh) -> %s {\n"
                  "    (void)_jk_slot;\n    (void)_jk_fresh;\n",
                  ct(s->d));
    /* The operands read ahead: the first value of each 8-column group
     * fetches the group's columns (shuffles, before any lane leaves), and
     * inside the lambda the operand's name is a view that gives the
     * element's own column from them. */
    for (size_t i = 0; i < ncv; i++)
      jk_buf_printf(b,
                    "    if (_jk_fresh) _jk_cv%zu.fetch(_jk_slot >> 1);\n"
                    "    const %s _jk_h%zu = _jk_cv%zu.cur[_jk_slot & 1];\n",
                    i, col_type(s, in, cv[i]), i, i);
    /* Outside D, the reductions' terms are their identities. */
    if (whole)
      jk_buf_puts(b, "    const bool _jk_in = row < _jk_m && col < _jk_n;\n");
    else
      jk_buf_printf(b,
                    "    if (row >= _jk_m || col >= _jk_n) {\n"
                    "      _jk_rs.none();\n"
                    "      return static_cast<%s>(0.f);\n"
                    "    }\n",
                    ct(s->d));
    for (size_t i = 0; i < ncv; i++)
      jk_buf_printf(b,
                    "    const jitk::mm90::col_view<%s, %s> _jk_cw%zu{%s.p, col, _jk_h%zu};\n"
                    "    const auto &%s = _jk_cw%zu;\n",
                    col_type(s, in, cv[i]), acc, i, in->params->params[cv[i]].name, i,
                    in->params->params[cv[i]].name, i);
  } else {
    jk_buf_printf(b,
                  "  auto _jk_store = [&](long long row, long long col, %s _jk_v) {\n"
                  "    if (row >= _jk_m || col >= _jk_n) return;\n",
                  acc_type);
  }
  jk_buf_printf(b, "    typedef %s T;\n", acc);
  /* alpha and beta are the kernel's parameters, so that an execution
   * may give its own without a compile: one multiply an element, and a
   * test of beta that every thread takes the same way. */
  if (s->a_scale || s->b_scale)
    jk_buf_puts(b, "    T acc = static_cast<T>(_jk_v) * static_cast<T>(_jk_ab);\n");
  else
    jk_buf_puts(b, "    T acc = static_cast<T>(_jk_v) * static_cast<T>(_jk_alpha);\n");
  /* BLAS's rule: with beta = 0, C is not read, so a C of NaN or of
   * memory never written gives the D of alpha * A * B alone (0 * NaN
   * would be NaN). */
  if (s->has_c)
    jk_buf_printf(b,
                  "    if (_jk_beta != 0.0)\n"
                  "      acc += static_cast<T>(_jk_beta) * static_cast<T>((_jk_c + batch * "
                  "_jk_sc)[%s]);\n",
                  s->c_row ? "row * _jk_ldc + col" : "col * _jk_ldc + row");
  jk_buf_puts(b, "    (void)acc;\n");
  const char *d_at = s->d_row ? "row * _jk_ldd + col" : "col * _jk_ldd + row";
  if (in->num_outputs == 0 && in->num_reductions == 0 && !s->d_scale && !s->amax) {
    if (whole)
      jk_buf_printf(b, "    const %s _jk_r = static_cast<%s>(static_cast<T>(\n", ct(s->d),
                    ct(s->d));
    else if (s->kind == JK_MM_WGMMA)
      jk_buf_printf(b, "    return static_cast<%s>(static_cast<T>(\n", ct(s->d));
    else
      jk_buf_printf(b, "    _jk_pd[%s] = static_cast<%s>(static_cast<T>(\n", d_at, ct(s->d));
    if (in->epilogue != NULL && *in->epilogue)
      jk_cg_user_code(b, "epilogue", in->epilogue, "));", file);
    else
      jk_buf_puts(b, "acc));\n");
    if (whole) jk_buf_printf(b, "    return _jk_in ? _jk_r : static_cast<%s>(0.f);\n", ct(s->d));
  } else {
    emit_extras(b, s, in, file, d_at, whole);
  }
  jk_buf_puts(b, "  };\n");
  if (s->kind == JK_MM_WGMMA && s->swap) /* The pair is two of the user's rows in one column. */
    jk_buf_printf(b,
                  "  auto _jk_put2 = [&](long long batch, long long _jk_kr, long long _jk_kc, "
                  "%s _jk_v0, %s _jk_v1) {\n"
                  "    if (_jk_kr >= _jk_n) return;\n"
                  "    %s *_jk_pd = _jk_d + batch * _jk_sd;\n"
                  "    if (_jk_kc < _jk_m) _jk_pd[%s] = _jk_v0;\n"
                  "    if (_jk_kc + 1 < _jk_m) _jk_pd[%s] = _jk_v1;\n"
                  "  };\n",
                  ct(s->d), ct(s->d), ct(s->d),
                  s->d_row ? "_jk_kc * _jk_ldd + _jk_kr" : "_jk_kr * _jk_ldd + _jk_kc",
                  s->d_row ? "(_jk_kc + 1) * _jk_ldd + _jk_kr" : "_jk_kr * _jk_ldd + _jk_kc + 1");
  else if (s->kind == JK_MM_WGMMA)
    jk_buf_printf(b,
                  "  auto _jk_put2 = [&](long long batch, long long row, long long col, %s _jk_v0, "
                  "%s _jk_v1) {\n"
                  "    if (row >= _jk_m) return;\n"
                  "    %s *_jk_pd = _jk_d + batch * _jk_sd;\n"
                  "    if (col < _jk_n) _jk_pd[%s] = _jk_v0;\n"
                  "    if (col + 1 < _jk_n) _jk_pd[%s] = _jk_v1;\n"
                  "  };\n",
                  ct(s->d), ct(s->d), ct(s->d),
                  s->d_row ? "row * _jk_ldd + col" : "col * _jk_ldd + row",
                  s->d_row ? "row * _jk_ldd + col + 1" : "(col + 1) * _jk_ldd + row");
  /* Where a row of a row-major D starts, for the stores that go through
   * shared memory when TMA cannot take D (matmul_sm90.cuh's stage_rows);
   * a column-major D keeps put2. */
  if (s->kind == JK_MM_WGMMA)
    jk_buf_printf(b,
                  "  auto _jk_rowp = [&](long long batch, long long row) -> %s * {\n"
                  "    return _jk_d + batch * _jk_sd + row * _jk_ldd;\n"
                  "  };\n",
                  ct(s->d));
  return ncv > 0;
}

/* The head of one of the module's kernels, NAME then `suffix`, up to its
 * last common parameter: the matrices, sizes, leading dimensions,
 * strides, tile counts, alpha and beta, the epilogue's operands, the outputs, the
 * reductions' workspaces, and an FP8 plan's scales and amax. The main
 * kernel and split-K's fix-up take the same, so one packing serves
 * both. */
static void emit_head(jk_buf *b, const jk_mm_spec *s, const jk_mm_source_in *in, const char *bounds,
                      const char *suffix) {
  const char *acc = ct(s->acc);
  jk_buf_printf(b,
                "extern \"C\" __global__ void __launch_bounds__(%s) %s%s(\n"
                "    const %s *_jk_a, const %s *_jk_b, const %s *_jk_c, %s *_jk_d,\n"
                "    long long _jk_m, long long _jk_n, long long _jk_k, long long _jk_lda,\n"
                "    long long _jk_ldb, long long _jk_ldc, long long _jk_ldd, long long _jk_sa,\n"
                "    long long _jk_sb, long long _jk_sc, long long _jk_sd,\n"
                "    unsigned int _jk_tiles_m, unsigned int _jk_tiles_n, double _jk_alpha,\n"
                "    double _jk_beta",
                bounds, in->name, suffix, ct(s->a), ct(s->b), ct(s->has_c ? s->c : s->d), ct(s->d));
  for (size_t p = 0; p < in->params->count; p++) {
    const jk_param_decl *d = &in->params->params[p];
    const char *t = d->placeholder >= 0 ? acc : ct(d->dtype);
    if (d->raw)
      jk_buf_printf(b, ",\n    jitk::mm::rd<%s, %s> %s", t, acc, d->name);
    else
      jk_buf_printf(b, ",\n    const %s %s", t, d->name);
  }
  for (size_t i = 0; i < in->num_outputs; i++)
    jk_buf_printf(b, ",\n    %s *__restrict__ _jk_o%zu", ct(in->outputs[i].dtype), i);
  for (size_t i = 0; i < in->num_reductions; i++)
    jk_buf_printf(b, ",\n    %s *__restrict__ _jk_w%zu",
                  ct(jk_mm_work_dtype(s->acc, in->reductions[i].dtype)), i);
  if (s->a_scale) jk_buf_puts(b, ",\n    const float *__restrict__ _jk_scale_a");
  if (s->b_scale) jk_buf_puts(b, ",\n    const float *__restrict__ _jk_scale_b");
  if (s->d_scale) jk_buf_puts(b, ",\n    const float *__restrict__ _jk_scale_d");
  if (s->amax) jk_buf_puts(b, ",\n    float *__restrict__ _jk_amax");
}

jitk_status jk_mm_generate(jitk_engine *e, const jk_mm_source_in *in, char **source) {
  const jk_mm_spec *s = in->spec;
  jk_buf b;
  jk_buf_init(&b, e);
  char file[128];
  snprintf(file, sizeof file, "%s.cu", in->name);
  const char *acc = ct(s->acc);
  const bool wg = s->kind == JK_MM_WGMMA;
  jk_buf_printf(&b, "// Generated by jitk: matmul %s, %s\n", in->name,
                wg && s->swap          ? "tensor cores (wgmma, TMA), A and B swapped"
                : wg                   ? "tensor cores (wgmma, TMA)"
                : s->kind == JK_MM_MMA ? "tensor cores (mma.sync)"
                                       : "FFMA (simt)");
  /* The dtypes in play decide the includes; the extras are parameters. */
  unsigned char dts[JK_MAX_EW_PARAMS + 4 + 2 * JK_MM_MAX_EXTRA],
      kinds[JK_MAX_EW_PARAMS + 4 + 2 * JK_MM_MAX_EXTRA];
  int n = 0;
  const jitk_dtype mats[4] = {s->a, s->b, s->has_c ? s->c : s->d, s->d};
  for (int i = 0; i < 4; i++) {
    dts[n] = (unsigned char)mats[i];
    kinds[n++] = JK_EW_SCALAR;
  }
  for (size_t p = 0; p < in->params->count && n < (int)sizeof dts; p++)
    if (in->params->params[p].placeholder < 0) {
      dts[n] = (unsigned char)in->params->params[p].dtype;
      kinds[n++] = JK_EW_SCALAR;
    }
  for (size_t i = 0; i < in->num_outputs && n < (int)sizeof dts; i++) {
    dts[n] = (unsigned char)in->outputs[i].dtype;
    kinds[n++] = JK_EW_SCALAR;
  }
  for (size_t i = 0; i < in->num_reductions && n < (int)sizeof dts; i++) {
    dts[n] = (unsigned char)in->reductions[i].dtype;
    kinds[n++] = JK_EW_SCALAR;
  }
  jk_buf_puts(&b, "#include <jitk/matmul.cuh>\n");
  if (wg) jk_buf_puts(&b, "#include <jitk/matmul_sm90.cuh>\n");
  jk_param_list none;
  memset(&none, 0, sizeof none);
  const char *const code[] = {in->epilogue, in->preamble};
  jk_cg_prologue(&b, &none, n, dts, kinds, false, JITK_DTYPE_NONE, code,
                 sizeof code / sizeof code[0]);
  jk_buf_puts(&b,
              "using jitk::mm::relu;\nusing jitk::mm::gelu;\nusing jitk::mm::sigmoid;\n"
              "using jitk::mm::silu;\nusing jitk::mm::drelu;\nusing jitk::mm::dgelu;\n"
              "using jitk::mm::mixed::max;\nusing jitk::mm::mixed::min;\n");
  jk_cg_user_section(&b, "preamble", in->preamble, file);
  if (wg)
    jk_buf_puts(&b, "extern __shared__ __align__(1024) unsigned char _jk_smem[];\n");
  else if (s->kind == JK_MM_MMA || s->ffma > 0)
    jk_buf_puts(&b, "extern __shared__ __align__(16) unsigned char _jk_smem[];\n");
  if (jk_mm_transposes_a(s) || jk_mm_transposes_b(s)) {
    /* An R x C row-major matrix x[r * ld + c] of each batch (blockIdx.z)
     * into t[c * ldt + r], ldt >= R (R rounded up so that t's rows start on
     * 16 bytes, as TMA needs), elements moved as raw bits (matmul.cuh's
     * transpose_tiles). B (R = K, C = N) becomes K-major; a column-major A
     * (R = K, C = M) row-major. */
    const char *u = jk_dtype(s->a)->size == 2 ? "unsigned short" : "unsigned int";
    jk_buf_printf(
        &b,
        "extern \"C\" __global__ void __launch_bounds__(256) %s_tr(const %s *x, %s *t,\n"
        "    long long R, long long C, long long ld, long long sx, long long ldt) {\n"
        "  jitk::mm::transpose_tiles(x + (long long)blockIdx.z * sx,\n"
        "                            t + (long long)blockIdx.z * C * ldt, R, C, ld, ldt);\n"
        "}\n",
        in->name, u, u);
  }
  if (wg) {
    /* Two operands, each an R x C row-major matrix x[r * ld + c] of each
     * batch, into y[r * ldy + c], ldy a multiple of 128 bytes, batch
     * after batch: the operands TMA reads when the user's do not start
     * each row on 16 bytes (matmul.cuh's pad_rows: 16-byte chunks,
     * shifted in registers). The grid's z runs over the first operand's
     * batches, then the second's; an operand with R = 0 is not there. */
    size_t es = jk_dtype(s->a)->size;
    const char *u = es == 1 ? "unsigned char" : es == 2 ? "unsigned short" : "unsigned int";
    jk_buf_printf(
        &b,
        "extern \"C\" __global__ void __launch_bounds__(%d) %s_pad(\n"
        "    const %s *x0, %s *y0, long long R0, long long C0, long long ld0,\n"
        "    long long sx0, long long ldy0, const %s *x1, %s *y1, long long R1,\n"
        "    long long C1, long long ld1, long long sx1, long long ldy1, long long nb) {\n"
        "  const long long es = (long long)sizeof *x0;\n"
        "  for (long long z = blockIdx.z; z < 2 * nb; z += gridDim.z) {\n"
        "    const bool second = z >= nb;\n"
        "    const long long w = second ? z - nb : z, R = second ? R1 : R0;\n"
        "    if (R == 0) continue;\n"
        "    jitk::mm::pad_rows<%d>(\n"
        "        (const unsigned char *)(second ? x1 + w * sx1 : x0 + w * sx0),\n"
        "        (unsigned char *)(second ? y1 + w * R1 * ldy1 : y0 + w * R0 * ldy0), R,\n"
        "        (second ? C1 : C0) * es, (second ? ld1 : ld0) * es,\n"
        "        (second ? ldy1 : ldy0) * es);\n"
        "  }\n"
        "}\n",
        JK_MM_PAD_THREADS, in->name, u, u, u, u, JK_MM_PAD_THREADS);
  }
  if (has_red_struct(s, in)) emit_red_struct(&b, s, in);
  /* Two FFMA blocks a multiprocessor where the plan asks (matmul_plan.c
   * says when). */
  char bounds[32];
  const jk_mm_ffma_tile *ft = s->kind == JK_MM_SIMT ? jk_mm_ffma_tile_at(s->ffma) : NULL;
  if (ft != NULL)
    snprintf(bounds, sizeof bounds, "%d, %d", jk_mm_threads(s), ft->blocks);
  else
    snprintf(bounds, sizeof bounds, "%s", wg ? "384, 1" : s->two_blocks ? "256, 2" : "256");
  emit_head(&b, s, in, bounds, "");
  /* Split-K's workspace: planes of partial sums for the fix-up, or (wgmma)
   * the slices' partial tiles and a counter per tile and consumer, which
   * the launch zeroes. A split summed across clusters has none. */
  if (jk_mm_fixup(s))
    jk_buf_puts(&b, ",\n    float *__restrict__ _jk_ws, unsigned int _jk_splits");
  else if (s->split && wg)
    jk_buf_puts(&b,
                ",\n    float *__restrict__ _jk_ws, unsigned int *__restrict__ _jk_count,\n"
                "    unsigned int _jk_splits");
  /* A kernel whose slices the fix-up sums writes raw partial sums: the
   * fix-up applies the scales and takes the amax. */
  const char *amax_commit =
      s->amax && !jk_mm_fixup(s) ? "  jitk::mm::amax_commit(_jk_amax, _jk_amax_v);\n" : "";
  if (wg) {
    /* The tensor maps of A, B and D, the number of work items of all
     * batches and slices, and whether the result goes out through TMA
     * (_jk_td is valid); read by phases, A has a map a phase, and the
     * phases' shifts come last. */
    if (s->aph > 1)
      jk_buf_printf(&b,
                    ",\n    const __grid_constant__ jitk::mm90::tensor_maps<%d> _jk_tas,\n"
                    "    const __grid_constant__ jitk::mm90::tensor_map _jk_tb,\n"
                    "    const __grid_constant__ jitk::mm90::tensor_map _jk_td,\n"
                    "    unsigned int _jk_work, int _jk_use_td, unsigned int _jk_ashift",
                    s->aph);
    else
      jk_buf_puts(&b,
                  ",\n    const __grid_constant__ jitk::mm90::tensor_map _jk_ta0,\n"
                  "    const __grid_constant__ jitk::mm90::tensor_map _jk_tb,\n"
                  "    const __grid_constant__ jitk::mm90::tensor_map _jk_td,\n"
                  "    unsigned int _jk_work, int _jk_use_td");
    /* A B the kernel copies itself: where from and to, last. */
    if (s->feed) jk_buf_puts(&b, ",\n    const jitk::mm90::feed_args _jk_fa");
    jk_buf_puts(&b, ") {\n");
    if (s->aph > 1)
      jk_buf_puts(&b, "  const jitk::mm90::tensor_map *const _jk_ta = _jk_tas.m;\n");
    else
      jk_buf_puts(&b,
                  "  const jitk::mm90::tensor_map *const _jk_ta = &_jk_ta0;\n"
                  "  const unsigned int _jk_ashift = 0;\n");
    if (!s->feed) jk_buf_puts(&b, "  const jitk::mm90::feed_args _jk_fa = {};\n");
    jk_buf_puts(&b,
                "  (void)_jk_a;\n  (void)_jk_b;\n  (void)_jk_lda;\n  (void)_jk_ldb;\n"
                "  (void)_jk_sa;\n  (void)_jk_sb;\n  (void)_jk_ldc;\n  (void)_jk_sc;\n");
    emit_scales(&b, s);
    /* The reductions folded per tile, or nothing for store_rows to fold. */
    if (has_red_struct(s, in)) {
      jk_buf_puts(&b,
                  "  _jk_reds _jk_rs;\n  _jk_rs.m = _jk_m;\n  _jk_rs.n = _jk_n;\n"
                  "  _jk_rs.parts = (_jk_m + 15) / 16;\n  _jk_rs.tn = _jk_tiles_n;\n");
      for (size_t i = 0; i < in->num_reductions; i++)
        jk_buf_printf(&b, "  _jk_rs.w%zu = _jk_w%zu;\n", i, i);
      for (size_t i = 0; tile_outputs(s, in) && i < in->num_outputs; i++)
        jk_buf_printf(&b, "  _jk_rs.o%zu = _jk_o%zu;\n", i, i);
    } else {
      jk_buf_puts(&b, "  jitk::mm90::no_red _jk_rs;\n");
    }
    const bool pre = emit_output(&b, s, in, file, "float"); /* _jk_pre defined */
    /* matmul_sm90.cuh's KIND: the input types of the wgmma. */
    const bool e5a = s->a == JITK_FLOAT8_E5M2, e5b = s->b == JITK_FLOAT8_E5M2;
    const int wkind = s->a == JITK_BFLOAT16  ? 1
                      : s->a == JITK_FLOAT16 ? 0
                      : s->a == JITK_FLOAT32 ? 2
                      : !e5a && !e5b         ? 3
                      : e5b                  ? 4
                                             : 5;
    /* The kernel's A and B: the user's, or swapped, the user's B (M-major
     * when row-major, which tf32 reads through registers) and A (K-major:
     * transposed first when it is not). An unswapped tf32 kernel's
     * operands are K-major (transposed first where needed). A swapped
     * kernel's rows run along N, and it stores from registers, needing no
     * staging for TMA. */
    const bool a_mn = s->swap ? s->b_n : s->a != JITK_FLOAT32 && !s->a_k,
               b_mn = s->a != JITK_FLOAT32 && !s->swap && s->b_n;
    jk_buf_printf(
        &b,
        "  jitk::mm90::gemm<%d, %s, %s, %d, %d, %s, %d, %s, %s, %d, %s, %s, %d, %s>(_jk_ta, "
        "&_jk_tb, _jk_use_td ? &_jk_td : nullptr,\n"
        "      _jk_k, _jk_tiles_m, _jk_tiles_n, _jk_work, %s, _jk_ashift, _jk_fa, %s, %s, "
        "_jk_smem, "
        "_jk_value, _jk_put2, _jk_rowp, _jk_rs%s);\n"
        "%s}\n",
        wkind, a_mn ? "true" : "false", b_mn ? "true" : "false", s->bn, s->stages,
        s->pingpong ? "true" : "false", s->swap ? 0 : 32768,
        !s->swap && s->d_row ? "true" : "false", s->promote ? "true" : "false",
        s->cluster > 1 ? s->cluster : 1, s->split ? "true" : "false",
        s->no_drain ? "false" : "true", s->aph > 1 ? s->aph : 1, s->feed ? "true" : "false",
        s->split ? "_jk_splits, _jk_ws, _jk_count" : "1u, nullptr, nullptr",
        s->swap ? "_jk_n" : "_jk_m", s->swap ? "_jk_m" : "_jk_n", pre ? ", _jk_pre" : "",
        amax_commit);
  } else {
    jk_buf_printf(&b,
                  ") {\n"
                  "  unsigned int _jk_tm, _jk_tn;\n"
                  "  jitk::mm::tile_of(blockIdx.x, _jk_tiles_m, _jk_tiles_n, _jk_tm, _jk_tn);\n"
                  "  const long long batch = blockIdx.y;\n"
                  "  (void)batch;\n"
                  "  const %s *_jk_pa = _jk_a + batch * _jk_sa;\n"
                  "  const %s *_jk_pb = _jk_b + batch * _jk_sb;\n",
                  ct(s->a), ct(s->b));
    const char *kk = "_jk_k";
    if (s->split) {
      /* Slice blockIdx.z of K: K-tiles kt * z / splits up to kt * (z + 1) /
       * splits (every slice has one at least, as the plan allows no more
       * slices than K-tiles), A and B advanced to its start; its partial
       * sums go to plane (z * batches + batch) of the workspace, or (a
       * split summed across the cluster, of as many blocks as slices) to
       * the block's stage in shared memory, as _jk_part below. */
      if (s->csplit) jk_buf_puts(&b, "  const unsigned int _jk_splits = gridDim.z;\n");
      jk_buf_printf(
          &b,
          "  const long long _jk_kt = (_jk_k + %d) / %d;\n"
          "  const long long _jk_k0 = _jk_kt * blockIdx.z / _jk_splits * %d;\n"
          "  const long long _jk_k1 = _jk_kt * (blockIdx.z + 1) / _jk_splits * %d < _jk_k\n"
          "      ? _jk_kt * (blockIdx.z + 1) / _jk_splits * %d : _jk_k;\n"
          "  _jk_pa += _jk_k0 * %s;\n"
          "  _jk_pb += _jk_k0 * %s;\n",
          jk_mm_ktile(s) - 1, jk_mm_ktile(s), jk_mm_ktile(s), jk_mm_ktile(s), jk_mm_ktile(s),
          s->a_k ? "1" : "_jk_lda", s->b_n ? "_jk_ldb" : "1");
      kk = "_jk_k1 - _jk_k0";
    }
    if (jk_mm_fixup(s)) {
      jk_buf_puts(&b,
                  "  float *_jk_pw = _jk_ws + ((long long)blockIdx.z * gridDim.y + batch) * _jk_m "
                  "* _jk_n;\n"
                  "  auto _jk_store = [&](long long row, long long col, float _jk_v) {\n"
                  "    if (row >= _jk_m || col >= _jk_n) return;\n"
                  "    _jk_pw[row * _jk_n + col] = _jk_v;\n"
                  "  };\n");
    } else {
      jk_buf_printf(&b, "  %s *_jk_pd = _jk_d + batch * _jk_sd;\n", ct(s->d));
      emit_scales(&b, s);
      (void)emit_output(&b, s, in, file, s->kind == JK_MM_MMA ? "float" : acc);
    }
    jk_buf_printf(
        &b,
        "  const long long _jk_m0 = (long long)_jk_tm * 128, _jk_n0 = (long long)_jk_tn * "
        "%d;\n",
        jk_mm_tile_n(s));
    /* A split summed across the cluster (cp.async tiles only): the
     * kernel's partial sums go to the block's stage, after its K-tile
     * buffers, and cluster_sum sums the slices into the plan's store. */
    const bool csplit = s->csplit && ft != NULL;
    const char *store = "_jk_store";
    if (csplit) {
      jk_buf_printf(&b,
                    "  float *const _jk_stage = reinterpret_cast<float *>(_jk_smem + %zu);\n"
                    "  auto _jk_part = [&](long long row, long long col, float _jk_v) {\n"
                    "    _jk_stage[(row - _jk_m0) * %d + (col - _jk_n0)] = _jk_v;\n"
                    "  };\n",
                    jk_mm_ffma_smem(ft->bn, s->stages), ft->bn + 4);
      store = "_jk_part";
    }
    if (s->kind == JK_MM_MMA)
      jk_buf_printf(&b,
                    "  jitk::mm::mma_gemm<%d, %d, %s, %d, %d>(_jk_pa, _jk_pb, _jk_m, _jk_n, %s, "
                    "_jk_lda, _jk_ldb, _jk_m0, _jk_n0, _jk_smem, _jk_store);\n",
                    s->stages,
                    s->a == JITK_BFLOAT16  ? 1
                    : s->a == JITK_FLOAT16 ? 0
                                           : 2,
                    s->b_n ? "true" : "false", s->bn, s->arow, kk);
    else if (ft != NULL)
      jk_buf_printf(
          &b,
          "  jitk::mm::ffma_gemm<jitk::mm::ffma_tile<%d, %d, %d, %d>, %s, %s, %d>(_jk_pa, "
          "_jk_pb, _jk_m, _jk_n, %s, _jk_lda, _jk_ldb, _jk_m0, _jk_n0, _jk_smem, "
          "%s);\n",
          ft->bn, ft->wm, ft->wn, ft->lr, s->a_k ? "true" : "false", s->b_n ? "true" : "false",
          s->stages, kk, store);
    else
      jk_buf_printf(&b,
                    "  jitk::mm::simt_gemm<%s, %s, %s, %s, %s>(_jk_pa, _jk_pb, _jk_m, _jk_n, %s, "
                    "_jk_lda, _jk_ldb, _jk_m0, _jk_n0, %s);\n",
                    s->a_k ? "true" : "false", s->b_n ? "true" : "false", ct(s->a), ct(s->b), acc,
                    kk, store);
    if (csplit)
      jk_buf_printf(&b, "  jitk::mm::cluster_sum<%d, %d>(_jk_stage, _jk_m0, _jk_n0, _jk_store);\n",
                    ft->bn, jk_mm_threads(s));
    jk_buf_printf(&b, "%s}\n", amax_commit);
  }
  if (jk_mm_fixup(s)) {
    /* Split-K's fix-up: each element's slices summed in slice order (the
     * same bits every run), then alpha, beta * C, the epilogue, the
     * outputs and the reductions' terms applied once, by the store of the
     * FFMA kernel. Threads run along D's rows, as the workspace lies;
     * grid: (columns / 256, rows or 65535, batches). No thread returns
     * early: an FP8 plan's amax is combined by whole warps at the end. */
    jk_mm_spec fs = *s;
    fs.kind = JK_MM_SIMT;
    emit_head(&b, s, in, "256", "_sk");
    jk_buf_printf(&b,
                  ",\n    const float *__restrict__ _jk_ws, unsigned int _jk_splits) {\n"
                  "  (void)_jk_a;\n  (void)_jk_b;\n  (void)_jk_k;\n  (void)_jk_lda;\n"
                  "  (void)_jk_ldb;\n  (void)_jk_sa;\n  (void)_jk_sb;\n  (void)_jk_ldc;\n"
                  "  (void)_jk_sc;\n  (void)_jk_tiles_m;\n  (void)_jk_tiles_n;\n"
                  "  const long long batch = blockIdx.z;\n"
                  "  (void)batch;\n"
                  "  %s *_jk_pd = _jk_d + batch * _jk_sd;\n",
                  ct(s->d));
    emit_scales(&b, s);
    (void)emit_output(&b, &fs, in, file, "float");
    jk_buf_puts(&b,
                "  const long long _jk_col = (long long)blockIdx.x * 256 + threadIdx.x;\n"
                "  const long long _jk_plane = (long long)gridDim.z * _jk_m * _jk_n;\n"
                "  for (long long _jk_row = blockIdx.y; _jk_col < _jk_n && _jk_row < _jk_m;\n"
                "       _jk_row += gridDim.y) {\n"
                "    const float *_jk_p = _jk_ws + (batch * _jk_m + _jk_row) * _jk_n + _jk_col;\n"
                "    float _jk_sum = _jk_p[0];\n"
                "    for (unsigned int _jk_i = 1; _jk_i < _jk_splits; _jk_i++)\n"
                "      _jk_sum += _jk_p[_jk_i * _jk_plane];\n"
                "    _jk_store(_jk_row, _jk_col, _jk_sum);\n"
                "  }\n");
    if (s->amax) jk_buf_puts(&b, "  jitk::mm::amax_commit(_jk_amax, _jk_amax_v);\n");
    jk_buf_puts(&b, "}\n");
  }
  /* Each reduction's kernels over its workspace (matmul.cuh says how),
   * the operation and the result's dtype written in. */
  static const char *const ops[] = {"sum", "max", "min"};
  for (size_t i = 0; i < in->num_reductions; i++) {
    const jitk_matmul_reduction *r = &in->reductions[i];
    const char *w = ct(jk_mm_work_dtype(s->acc, r->dtype)), *o = ct(r->dtype),
               *op = ops[(int)r->op];
    if (r->axis == JITK_REDUCE_ROWS)
      jk_buf_printf(&b,
                    "extern \"C\" __global__ void __launch_bounds__(256) %s_r%zua(const %s *w, "
                    "%s *p, long long rows, long long cols, long long chunk) {\n"
                    "  jitk::mm::red_rows_part<jitk::mm::op_%s>(w, p, rows, cols, chunk);\n}\n"
                    "extern \"C\" __global__ void __launch_bounds__(256) %s_r%zub(const %s *p, "
                    "%s *out, long long chunks, long long cols) {\n"
                    "  jitk::mm::red_rows_final<jitk::mm::op_%s>(p, out, chunks, cols);\n}\n",
                    in->name, i, w, w, op, in->name, i, w, o, op);
    else
      jk_buf_printf(&b,
                    "extern \"C\" __global__ void __launch_bounds__(256) %s_r%zua(const %s *w, "
                    "%s *out, long long rows, long long cols) {\n"
                    "  jitk::mm::red_cols<jitk::mm::op_%s>(w, out, rows, cols);\n}\n",
                    in->name, i, w, r->axis == JITK_REDUCE_ALL ? w : o, op);
    if (r->axis == JITK_REDUCE_ALL)
      jk_buf_printf(&b,
                    "extern \"C\" __global__ void __launch_bounds__(256) %s_r%zub(const %s *p, "
                    "%s *out, long long n) {\n"
                    "  jitk::mm::red_all_final<jitk::mm::op_%s>(p, out, n);\n}\n",
                    in->name, i, w, o, op);
  }
  char *src = jk_buf_take(&b);
  if (src == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory generating a kernel");
  *source = src;
  return JITK_OK;
}
