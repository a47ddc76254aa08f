/*
 * Matmul plans: planning apart from execution, as nvmath-python's Matmul.
 * jitk_matmul_create checks the description, picks the kernel (tensor
 * cores where the dtypes and layouts allow 16-byte staging: wgmma with TMA
 * on sm_90, mma.sync elsewhere; FFMA otherwise), generates it with the
 * epilogue inlined and compiles it through the kernel cache;
 * jitk_matmul_execute only packs parameters (and, for wgmma, encodes the
 * operands' tensor maps, copying an operand whose rows are off 16 bytes)
 * and launches. An mma.sync plan that meets misaligned pointers at
 * execution compiles its FFMA twin once and uses that: slower, not wrong.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "kernels/matmul.h"

/* Tiles of 128 x bn of the product, all batches. */
static int64_t wave_tiles(const jitk_matmul *p, int64_t bn) {
  return (p->d.m + 127) / 128 * ((p->d.n + bn - 1) / bn) * p->d.batch;
}

/* Whether D is row-major with rows (or batches) that do not start on 16
 * bytes, so that TMA cannot store it (a pointer off 16 bytes is only
 * known at execution). */
static bool d_rows_off(const jitk_matmul_desc *d) {
  return d->d_order == JITK_ROW_MAJOR &&
         !jk_mm_tma_ready(NULL, (uint64_t)d->ldd, (uint64_t)d->stride_d, (uint64_t)d->batch,
                          jk_dtype(d->d_dtype)->size);
}

/* Whether the measuring knob `name` is set to "0" (a feature turned off). */
static bool knob_off(const char *name) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, "0") == 0;
}

/* Whether the measuring knob `name` is set to "1" (a feature asked for). */
static bool knob_on(const char *name) {
  const char *v = getenv(name);
  return v != NULL && strcmp(v, "1") == 0;
}

/* Phases in which a wgmma kernel may read a row-major A whose rows do
 * not start on 16 bytes in place (matmul_sm90.cuh's phase_tile), or 0
 * where it copies A onto 16 bytes first (the _pad kernel), as for every
 * other operand so placed. Phases need 16-bit inputs, A and B row-major
 * (B's row coordinate then follows a phase's shift of K), D row-major
 * (its rows, PH apart in a tile, stored by the threads), batches 16 bytes
 * apart, no reductions or outputs besides D (their per-tile work assumes
 * consecutive rows), and M of PH at least. A phase's tiles are 128 of its
 * rows, so M takes PH * ceil(M / PH / 128) tile-rows rather than ceil(M /
 * 128), and K one more K-tile where a shift pushes it past a multiple of
 * 64: `pays` says whether that extra work is under the copy's cost
 * (reading and writing A, about 200 * 2 / N of the product at the rates
 * jk_mm_line_pays assumes) and under half the product (a narrow N makes
 * the copy look dear, but a phase's tiles are then mostly empty rows). */
static int phase_layout(const jitk_matmul *p, bool *pays) {
  const jitk_matmul_desc *d = &p->d;
  const uint64_t es = jk_dtype(d->a_dtype)->size;
  *pays = false;
  if ((d->a_dtype != JITK_BFLOAT16 && d->a_dtype != JITK_FLOAT16) || d->b_dtype != d->a_dtype ||
      d->a_order != JITK_ROW_MAJOR || d->b_order != JITK_ROW_MAJOR ||
      d->d_order != JITK_ROW_MAJOR || ((uint64_t)d->lda * es) % 16 == 0 ||
      (d->batch > 1 && ((uint64_t)d->stride_a * es) % 16 != 0) || d->num_reductions > 0 ||
      d->num_outputs > 0)
    return 0;
  const int ph = (int)(16 / es);
  if (d->m < ph) return 0;
  /* Tile-rows and K-tiles, copied and by phases. */
  const int64_t rows = (d->m + 127) / 128, rows_ph = ph * (((d->m + ph - 1) / ph + 127) / 128),
                kt = (d->k + 63) / 64, kt_ph = (d->k + ph - 1 + 63) / 64;
  const double extra = (double)rows_ph * (double)kt_ph / ((double)rows * (double)kt) - 1.0,
               copy = 200.0 * (double)es / (double)d->n;
  *pays = extra < (copy < 0.5 ? copy : 0.5);
  return ph;
}

/* The phases a plan's kernel reads A in (0: A is copied). The tiles read
 * by phases have A's rows 16 lda bytes apart and off 128-byte lines,
 * which TMA reads a 32-byte sector a request: on an H100 (bf16 bias +
 * ReLU, docs/PERFORMANCE.md, 2026-12-07) the ping-pong kernel so made
 * 2.8 times the L2 requests of the one reading the copy and ran at 445
 * TFLOP/s against 650 at 4096 x 4096 x 4095, while the cooperative 128 x
 * 256 tiles, which read each A tile for twice the columns, ran ahead of
 * the copy and either schedule: 4096 x 4096 x 4095 692-700 against
 * 655-662 (0.92 of 4096^3), 4095^3 596-598 against 572-582, 4096 x 4096 x
 * 1001 502-508 against 482-483; 2048 x 11008 x 4095, whose 128 x 128
 * tiles fill the last wave better, kept ping-pong and the copy (694-698
 * against 632 by phases). So phases go with the cooperative schedule,
 * which the plan takes for them where they pay (jitk_matmul_create).
 * JITK_MM_PHASES=0 copies A, =1 reads by phases wherever the layout
 * allows, for measuring and testing. */
static int a_phases(const jitk_matmul *p, bool pingpong) {
  bool pays;
  const int ph = phase_layout(p, &pays);
  const char *env = getenv("JITK_MM_PHASES");
  if (ph == 0 || (env != NULL && strcmp(env, "0") == 0)) return 0;
  if (env != NULL && strcmp(env, "1") == 0) return ph;
  return pays && !pingpong ? ph : 0;
}

/* Dynamic shared memory of a wgmma kernel: matmul_sm90.cuh's smem_size;
 * a swapped kernel stores D from registers and stages none of it. */
static size_t wgmma_smem(int bn, int stages, bool swap) {
  return (size_t)stages * (128 * 128 + (size_t)bn * 128) + (swap ? 0 : 2 * 32768) +
         (size_t)stages * 16 + 16 + 1024;
}

/* The most stages of a swapped kernel: as many as shared memory holds, up
 * to 12 (with a 128 x 16 tile, 12 K-steps are 192 KiB of the large
 * operand in flight per multiprocessor; a decode shape is bound by
 * reading it). */
#define JK_MM_SWAP_MAX_STAGES 12

/* ... but a default of 8: the decode shapes' kernels read B (8192 x 8192)
 * in 33-34 us with 8 stages of 128 x 8 or 128 x 16 tiles on 64
 * multiprocessors, 35 with 6 and 37-38 with 12 (bf16, back to back on
 * the H200; docs/PERFORMANCE.md): more loads in flight than that only
 * queue at the memory. Autotuning still tries the most that fit. */
#define JK_MM_SWAP_DEFAULT_STAGES 8

void jitk_matmul_desc_init(jitk_matmul_desc *d) {
  if (d == NULL) return;
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->batch = 1;
  d->a_dtype = d->b_dtype = d->c_dtype = d->d_dtype = JITK_FLOAT32;
  d->alpha = 1.0;
}

void jk_mm_kernel_free(jitk_engine *e, mm_kernel *k) {
  jk_entry_release(e, k->entry);
  jk_free(e, k->source);
  memset(k, 0, sizeof *k);
}

void jitk_matmul_destroy(jitk_matmul *p) {
  if (p == NULL) return;
  jitk_engine *e = p->engine;
  jk_mm_kernel_free(e, &p->main);
  jk_mm_kernel_free(e, &p->fallback);
  jk_params_free(e, &p->params);
  jk_free(e, p->labels);
  jk_free(e, p->name);
  jk_free(e, p->epilogue);
  jk_free(e, p->epilogue_params);
  jk_free(e, p->preamble);
  for (size_t i = 0; i < p->num_outs; i++) {
    jk_free(e, (char *)p->outs[i].name);
    jk_free(e, (char *)p->outs[i].expr);
  }
  for (size_t i = 0; i < p->num_reds; i++) {
    jk_free(e, (char *)p->reds[i].name);
    jk_free(e, (char *)p->reds[i].expr);
  }
  pthread_mutex_destroy(&p->lock);
  jk_free(e, p);
}

static bool is_float(jitk_dtype t) {
  return t == JITK_FLOAT16 || t == JITK_BFLOAT16 || t == JITK_FLOAT32 || t == JITK_FLOAT64;
}

static const char *order_name(jitk_order o) { return o == JITK_ROW_MAJOR ? "row" : "column"; }

/* A dtype's name for messages, also for a number that is none. */
static const char *dt_name(jitk_dtype t) { return jk_dtype(t) ? jk_dtype(t)->name : "not a dtype"; }

static bool is_fp8(jitk_dtype t) { return t == JITK_FLOAT8_E4M3 || t == JITK_FLOAT8_E5M2; }

/* What an FP8 plan's C and D may be: what cuBLASLt's FP8 matmuls write. */
static bool fp8_out_ok(jitk_dtype t) {
  return t == JITK_FLOAT16 || t == JITK_BFLOAT16 || t == JITK_FLOAT32 || is_fp8(t);
}

/* Leading dimension and batch stride of an r x c matrix: given ones are
 * checked, 0 means packed. */
static jitk_status fill_layout(jitk_engine *e, const char *what, jitk_order o, int64_t rows,
                               int64_t cols, int64_t batch, jitk_dtype dtype, int64_t *ld,
                               int64_t *stride) {
  if (o != JITK_ROW_MAJOR && o != JITK_COL_MAJOR)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: %s's order is neither row- nor column-major", what);
  int64_t least = o == JITK_ROW_MAJOR ? cols : rows;
  int64_t outer = o == JITK_ROW_MAJOR ? rows : cols;
  if (*ld == 0) *ld = least > 0 ? least : 1;
  if (*ld < least)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: %s is %lld x %lld %s-major, so its leading dimension must be at "
                   "least %lld, not %lld",
                   what, (long long)rows, (long long)cols, order_name(o), (long long)least,
                   (long long)*ld);
  /* The kernels index each matrix with 64-bit element offsets (batch *
   * stride + row * ld + column) and the pointers move by bytes, so the
   * farthest element's byte offset must be a 64-bit number: 3037000500 x
   * 3037000500 already overflowed the packed batch stride. */
  int64_t packed;
  bool over = __builtin_mul_overflow(*ld, outer, &packed);
  if (!over && *stride == 0) *stride = packed;
  if (*stride < 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: %s's batch stride is negative", what);
  int64_t reach = 0, part;
  if (!over && rows > 0 && cols > 0) {
    over = __builtin_mul_overflow(batch - 1, *stride, &reach) ||
           __builtin_mul_overflow(outer - 1, *ld, &part) ||
           __builtin_add_overflow(reach, part, &reach) ||
           __builtin_add_overflow(reach, least - 1, &reach) ||
           __builtin_mul_overflow(reach, (int64_t)jk_dtype(dtype)->size, &reach);
  }
  if (over)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: %s (%lld x %lld, leading dimension %lld, %lld batch%s) spans more "
                   "than 2^63 bytes",
                   what, (long long)rows, (long long)cols, (long long)*ld, (long long)batch,
                   batch == 1 ? "" : "es");
  return JITK_OK;
}

/* The rules of FP8 plans (jitk.h, "FP8 plans"), and that scales and amax
 * belong to them only; all refused here rather than at execution. */
static jitk_status check_fp8(jitk_engine *e, const jitk_matmul_desc *d) {
  const bool fa = is_fp8(d->a_dtype), fb = is_fp8(d->b_dtype);
  const char *an = dt_name(d->a_dtype), *bn = dt_name(d->b_dtype);
  if (d->has_a_scale && !fa)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: has_a_scale is set but A is %s; scales are for float8 operands", an);
  if (d->has_b_scale && !fb)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: has_b_scale is set but B is %s; scales are for float8 operands", bn);
  if (d->has_d_scale && !is_fp8(d->d_dtype))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: has_d_scale is set but D is %s; D's scale is for a float8 D",
                   dt_name(d->d_dtype));
  if (d->has_amax_d && !(fa && fb))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: has_amax_d is set but A and B are %s and %s; D's amax is an output "
                   "of float8 plans (elsewhere, a reduction MAX of fabs(value) gives it)",
                   an, bn);
  if (!fa && !fb) return JITK_OK;
  if (fa != fb)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: A is %s but B is %s; a float8 operand takes a float8 partner", an, bn);
  if (d->a_dtype == JITK_FLOAT8_E5M2 && d->b_dtype == JITK_FLOAT8_E5M2)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: A and B are both float8_e5m2; at most one of them may be e5m2 (as "
                   "cuBLASLt's FP8 matmuls on Hopper): use float8_e4m3fn for the other");
  if (!fp8_out_ok(d->d_dtype) || (d->has_c && !fp8_out_ok(d->c_dtype)))
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: a float8 plan's %s is %s; it must be float16, bfloat16, float32, "
                   "float8_e4m3fn or float8_e5m2",
                   fp8_out_ok(d->d_dtype) ? "C" : "D",
                   dt_name(fp8_out_ok(d->d_dtype) ? d->c_dtype : d->d_dtype));
  if (d->a_order != JITK_ROW_MAJOR || d->b_order != JITK_COL_MAJOR)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: float8 A and B must both be K-major, A row-major and B "
                   "column-major (the layout Hopper's FP8 tensor cores read, and cuBLASLt's "
                   "\"TN\"); here A is %s-major and B %s-major",
                   d->a_order == JITK_COL_MAJOR ? "column" : "row",
                   d->b_order == JITK_COL_MAJOR ? "column" : "row");
  return JITK_OK;
}

static jitk_status check_desc(jitk_engine *e, jitk_matmul_desc *d, jitk_dtype *acc) {
  jitk_status st;
  if (d->m < 0 || d->n < 0 || d->k < 0 || d->batch < 1)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: m, n and k must be at least 0 and batch at least 1 (m %lld, n %lld, "
                   "k %lld, batch %lld)",
                   (long long)d->m, (long long)d->n, (long long)d->k, (long long)d->batch);
  if (d->batch > 65535)
    return jk_fail(e, JITK_ERR_UNSUPPORTED, "matmul: at most 65535 batches, not %lld",
                   (long long)d->batch);
  if (d->m > ((int64_t)1 << 31) * JK_MM_TILE || d->n > ((int64_t)1 << 31) * JK_MM_TILE)
    return jk_fail(e, JITK_ERR_UNSUPPORTED, "matmul: m or n too large");
  st = check_fp8(e, d);
  if (st != JITK_OK) return st;
  if (is_fp8(d->a_dtype)) {
    /* check_fp8 checked the rest; float32 products and sums. */
  } else if (!is_float(d->a_dtype) || !is_float(d->d_dtype) || (d->has_c && !is_float(d->c_dtype)))
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: A, B, C and D must be float16, bfloat16, float32 or float64");
  else if (d->b_dtype != d->a_dtype)
    /* B may be any number here (none of the table's dtypes, even). */
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: A is %s but B is %s; mixed inputs are not "
                   "supported",
                   dt_name(d->a_dtype), dt_name(d->b_dtype));
  /* alpha and beta must be finite: NaN and infinity would scale every
   * result to NaN or infinity. */
  if (!isfinite(d->alpha) || (d->has_c && !isfinite(d->beta)))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: %s is %g; it must be a finite number",
                   !isfinite(d->alpha) ? "alpha" : "beta",
                   !isfinite(d->alpha) ? d->alpha : d->beta);
  st = jk_code_check_directives(e, "epilogue", d->epilogue);
  if (st == JITK_OK) st = jk_code_check_directives(e, "preamble", d->preamble);
  if (st != JITK_OK) return st;
  jitk_dtype in = d->a_dtype;
  if (is_fp8(in) && d->compute != JITK_COMPUTE_DEFAULT && d->compute != JITK_COMPUTE_FLOAT32 &&
      d->compute != JITK_COMPUTE_FLOAT32_FAST_ACCUM)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: float8 inputs compute in float32 (JITK_COMPUTE_DEFAULT, "
                   "JITK_COMPUTE_FLOAT32 or JITK_COMPUTE_FLOAT32_FAST_ACCUM), not compute type %d",
                   (int)d->compute);
  if (!is_fp8(in) && d->compute == JITK_COMPUTE_FLOAT32_FAST_ACCUM)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: JITK_COMPUTE_FLOAT32_FAST_ACCUM is for float8 inputs, and A is %s",
                   jk_dtype(in)->name);
  switch (d->compute) {
    case JITK_COMPUTE_DEFAULT: *acc = in == JITK_FLOAT64 ? JITK_FLOAT64 : JITK_FLOAT32; break;
    case JITK_COMPUTE_FLOAT32_FAST_ACCUM: /* float8 inputs, checked above */
      *acc = JITK_FLOAT32;
      break;
    case JITK_COMPUTE_FLOAT32:
      if (in == JITK_FLOAT64)
        return jk_fail(e, JITK_ERR_UNSUPPORTED, "matmul: float64 inputs compute in float64");
      *acc = JITK_FLOAT32;
      break;
    case JITK_COMPUTE_TF32:
      if (in != JITK_FLOAT32)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: tf32 compute takes float32 inputs");
      *acc = JITK_FLOAT32;
      break;
    case JITK_COMPUTE_FLOAT16:
    case JITK_COMPUTE_BFLOAT16: {
      jitk_dtype want = d->compute == JITK_COMPUTE_FLOAT16 ? JITK_FLOAT16 : JITK_BFLOAT16;
      if (in != want)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: %s compute takes %s inputs",
                       jk_dtype(want)->name, jk_dtype(want)->name);
      *acc = JITK_FLOAT32;
      break;
    }
    case JITK_COMPUTE_FLOAT64:
      if (in != JITK_FLOAT64)
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                       "matmul: float64 compute takes float64 inputs");
      *acc = JITK_FLOAT64;
      break;
    default:
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: unknown compute type %d",
                     (int)d->compute);
  }
  st = fill_layout(e, "A", d->a_order, d->m, d->k, d->batch, d->a_dtype, &d->lda, &d->stride_a);
  if (st == JITK_OK)
    st = fill_layout(e, "B", d->b_order, d->k, d->n, d->batch, d->b_dtype, &d->ldb, &d->stride_b);
  if (st == JITK_OK && d->has_c)
    st = fill_layout(e, "C", d->c_order, d->m, d->n, d->batch, d->c_dtype, &d->ldc, &d->stride_c);
  if (st == JITK_OK)
    st = fill_layout(e, "D", d->d_order, d->m, d->n, d->batch, d->d_dtype, &d->ldd, &d->stride_d);
  /* TMA reads FP8 A and B in rows of 16-byte chunks. A pointer off 16
   * bytes is copied onto them at execution; a layout whose rows are off
   * for every execution is refused here instead, so that an FP8 plan never
   * pays that copy each time. */
  if (st == JITK_OK && is_fp8(d->a_dtype) && d->k > 0 &&
      (d->lda % 16 || d->ldb % 16 || d->stride_a % 16 || d->stride_b % 16))
    st = jk_fail(e, JITK_ERR_UNSUPPORTED,
                 "matmul: float8 A and B need leading dimensions and batch strides that are "
                 "multiples of 16 elements (lda %lld, ldb %lld, batch strides %lld and %lld)",
                 (long long)d->lda, (long long)d->ldb, (long long)d->stride_a,
                 (long long)d->stride_b);
  return st;
}

/* Tensor cores when the inputs are 16-bit floats (or float32 computed in
 * tf32); FFMA otherwise (float32, float64). On an sm_90 cubin target the
 * tensor cores are driven by wgmma with TMA, which takes either layout of
 * A and B and any M, N and K (TMA fills tails with zeros); an operand
 * whose rows do not start on 16 bytes (an odd K or N, an odd leading
 * dimension or batch stride, a pointer off 16 bytes) is first copied into
 * one whose rows do, by the module's `_pad` kernel at each execution: an
 * extra pass over that operand, where FFMA would cost the product most of
 * its speed. Elsewhere mma.sync, whose cp.async staging needs the leading
 * dimensions and batch strides of A and B in whole 16-byte chunks, A
 * row-major, and K (and N, for a row-major B) in whole chunks too.
 * JITK_MM_KIND=simt|mma forces a kind the description allows, for
 * measuring and testing. */
static jk_mm_kind choose_kind(const jitk_engine *e, const jitk_matmul_desc *d) {
  if (is_fp8(d->a_dtype)) {
    /* check_desc left only K-major A and B with 16-byte rows, which
     * wgmma's TMA reads with any K; elsewhere (and for forcing) FFMA in
     * float32, which has no mma.sync twin for 8-bit inputs. */
    bool hopper = !e->target.ptx && e->target.major == 9 && e->target.minor == 0 &&
                  (!e->has_device || jk_cu_has_tensor_map(e));
    return hopper && d->k > 0 && getenv("JITK_MM_KIND") == NULL ? JK_MM_WGMMA : JK_MM_SIMT;
  }
  bool half = d->a_dtype == JITK_FLOAT16 || d->a_dtype == JITK_BFLOAT16;
  bool tf32 = d->a_dtype == JITK_FLOAT32 && d->compute == JITK_COMPUTE_TF32;
  if (!(half || tf32) || d->k == 0) return JK_MM_SIMT;
  int64_t ch = half ? 8 : 4; /* elements in 16 bytes */
  bool aligned = !(d->lda % ch || d->ldb % ch || d->stride_a % ch || d->stride_b % ch);
  bool b_n = d->b_order == JITK_ROW_MAJOR;
  bool mma_ok = aligned && d->a_order == JITK_ROW_MAJOR && d->k % ch == 0 && !(b_n && d->n % ch);
  bool hopper = !e->target.ptx && e->target.major == 9 && e->target.minor == 0 &&
                (!e->has_device || jk_cu_has_tensor_map(e));
  jk_mm_kind k = hopper ? JK_MM_WGMMA : mma_ok ? JK_MM_MMA : JK_MM_SIMT;
  const char *force = getenv("JITK_MM_KIND");
  if (force != NULL) {
    if (strcmp(force, "simt") == 0) k = JK_MM_SIMT;
    if (strcmp(force, "mma") == 0) k = mma_ok ? JK_MM_MMA : JK_MM_SIMT;
  }
  return k;
}

/*
 * The float32 FFMA kernels' time model, which picks a plan's tile
 * (choose_ffma) and, with it, its split of K (jk_mm_auto_split): the
 * tiles, the slices' copies of them included, go to the multiprocessors
 * evenly, so the busiest one computes ceil(tiles / SMs) of them, at the
 * rate FFMA_RATE gives for that many at once (the fourth figure for
 * more), each its K-tiles of 16 long plus FFMA_FIXED more for filling
 * the pipeline and storing the tile; a split adds its fix-up's launch
 * and its pass over the workspace (8 bytes per element and slice, at
 * about 3 TB/s), in microseconds.
 *
 * FFMA_RATE is each kernel's rate in TFLOP/s on 132 multiprocessors with
 * 1 to 4 of its tiles on every one (tools/bench/study/sgemm_tiles.cu, K =
 * 2048, on the H200), row 0 simt_gemm's 128 x 128 tiles (derived from
 * tools/bench/study/sgemm.cu at 4096^3: a block alone at 0.82 of the rate
 * of two, whose registers are capped at 128; a third block runs alone
 * after two), the others jk_mm_ffma_tile_at's. Against 26 kernels timed on
 * products from 512^3 to 4096^3 on the H200, split or not, the model's
 * times fell within 0.86 to 1.13 of the measured ones (docs/PERFORMANCE.md,
 * "2026-12-06, 22:15 UTC").
 */
static const double FFMA_RATE[1 + JK_MM_FFMA_TILES][4] = {
    {37.3, 45.5, 42.4, 45.5},
    {49.1, 49.7, 49.8, 49.9},
    {32.1, 37.7, 36.6, 38.2},
    {24.3, 27.9, 32.5, 34.6},
};
#define FFMA_FIXED 6

/* Whether plan p may run on the cp.async FFMA tiles: float32 A, B and
 * accumulation on sm_80 and later. JITK_MM_WIDE=0 keeps simt_gemm's 128 x
 * 128 tiles, for measuring. */
static bool ffma_ok(const jitk_matmul *p) {
  const jitk_matmul_desc *d = &p->d;
  return d->a_dtype == JITK_FLOAT32 && d->b_dtype == JITK_FLOAT32 && p->engine->target.major >= 8 &&
         !knob_off("JITK_MM_WIDE");
}

/* Whether an FFMA plan on this engine sums `splits` slices of K across a
 * thread-block cluster (jk_mm_spec's csplit) when its cp.async tile `tile`
 * (jk_mm_ffma_tile_at) is split so: sm_90 and later, 2 to
 * JK_MM_CLUSTER_SLICES slices (3 of the wide tile, whose block fills a
 * multiprocessor), more blocks than multiprocessors, and no more than two
 * a multiprocessor (four of the 128 x 32 tile's): one round of the blocks
 * the multiprocessors hold at once, two of the wide tile's.
 *
 * The wide tile in clusters of 4 took about 1.4 times as long as in 2
 * slices through the fix-up kernel: 64 tiles in 4 slices (256 blocks) at
 * 1024 x 2048 x 2048, 2048 x 1024 x 4096 and 4096 x 512 x 2048 ran at
 * 28.7-30.4 TFLOP/s, 2 slices through the fix-up at 41.0-45.1, within 3 %
 * of the model (H100, 2026-12-07, two runs each); 3 slices (216 blocks,
 * 1536^3, 768 x 3072 x 2048) ran as the model says. As if fewer clusters
 * of four whole multiprocessors fit the GPCs at once than 132 / 4, so
 * that the blocks took a third round.
 *
 * On an H100 (jitk-bench matmul, 2026-12-07; docs/PERFORMANCE.md) 768^3
 * on 128 x 64 tiles in 3 slices (216 blocks) gained 24 % over the fix-up
 * kernel's best plan and 1536^3 on the wide tiles in 3 slices 25 %. With
 * fewer blocks than multiprocessors a launch without clusters gives each
 * block a multiprocessor of its own, where clusters, whose blocks must
 * fit a GPC together and may share a multiprocessor, lost: the wide
 * tiles in 4 slices (128 blocks) at 1000^3 ran at 0.64 of the fix-up
 * plan's rate, and 512^3 on 128 x 64 tiles in 4 slices took 1.8 times its
 * model's time. With more blocks than a round they lost too: 1000^3,
 * 1024 x 1024 x 4096 and 2048 x 512 x 2048 on 128 x 64 or 128 x 32 tiles
 * in 3 and 4 slices ran up to 23 % slower than the same tiles through the
 * fix-up, as if the last round's clusters shared multiprocessors rather
 * than spreading over all of them, and the wide tiles in 4 slices at 768
 * x 4096 x 2048 and 1536 x 2048 x 2048 (3 rounds) ran 8 % slower than
 * unsplit. simt_gemm's tiles (tile 0) keep the fix-up kernel: across
 * clusters they ran at 0.75 of the model's rate at 1000^3 and 2048 x 512
 * x 2048 in 4 slices (256 blocks), perhaps as the stage's 66 KiB leave
 * less of the multiprocessor's memory to L1, through which they load A
 * and B (the cp.async tiles bypass it). JITK_MM_CSPLIT=0 keeps the
 * workspace and fix-up kernel, for measuring, and JITK_MM_CSPLIT=1 takes
 * clusters with any count of blocks. */
static bool cluster_split(const jitk_matmul *p, int tile, int64_t splits) {
  if (tile <= 0 || splits < 2 || splits > JK_MM_CLUSTER_SLICES || p->engine->target.major < 9)
    return false;
  /* JITK_MM_CSPLIT=0 keeps the fix-up kernel, and =1 sums across
   * clusters whatever the count of blocks, for measuring (with
   * JITK_MM_CLUSTER_POLICY, say). */
  const char *force = getenv("JITK_MM_CSPLIT");
  if (force != NULL && strcmp(force, "0") == 0) return false;
  if (force != NULL && strcmp(force, "1") == 0) return true;
  const jk_mm_ffma_tile *t = jk_mm_ffma_tile_at(tile);
  if (t->blocks == 1 && splits > 3) return false;
  const int64_t blocks = wave_tiles(p, t->bn) * splits, sms = jk_mm_sms(p->engine);
  return blocks > sms && blocks <= sms * (t->blocks > 2 ? t->blocks : 2);
}

/* The FFMA and mma.sync split's fix-up in the split models' microseconds:
 * its launch and its pass over the workspace (8 bytes per element of D and
 * slice, at about 3 TB/s). */
static double fixup_cost(double slices, double elems) {
  return slices > 1 ? 4 + slices * elems * 8 / 3e6 : 0;
}

/* The model's microseconds for plan p on FFMA tile `tile` (0: simt_gemm)
 * with K cut into `splits` slices. */
static double ffma_time(const jitk_matmul *p, int tile, int64_t splits, int64_t sms) {
  const jitk_matmul_desc *d = &p->d;
  const int64_t bn = tile > 0 ? jk_mm_ffma_tile_at(tile)->bn : JK_MM_TILE;
  const int64_t kt = d->k > 0 ? (d->k + 15) / 16 : 0;
  const double tiles = (double)wave_tiles(p, bn) * (double)splits;
  const double most = ceil(tiles / (double)sms);
  if (most < 1) return 0;
  const int at_once = most < 4 ? (int)most : 4;
  /* The K-tiles of the longest slice. */
  const int64_t slice = (kt + splits - 1) / splits;
  const double flop = 2.0 * JK_MM_TILE * (double)bn * 16.0 * (double)(slice + FFMA_FIXED);
  const double rate = FFMA_RATE[tile][at_once - 1] * 1e6 / 132.0; /* FLOP/us a multiprocessor */
  /* Slices summed across a cluster: each tile's 128 x bn partial sums
   * staged in shared memory and read across the cluster, a guess of
   * half a microsecond and 100 GB/s a block, in place of the workspace's
   * pass and the fix-up kernel. The cluster's blocks ran faster than the
   * rates fitted without clusters: over 21 cluster splits of a round at
   * most (H100, 2026-12-07, 512^3 to 1536^3 and K from 512 to 4096) the
   * measured times were a median 0.955 of this model's, from 0.90 to 1.33,
   * so their products are priced at 0.95. The 128 x 32 tile with three or
   * four blocks a multiprocessor in turn is the exception: eight such
   * splits (H100, 2026-12-07: 256 to 2048 by 384 to 1536, K from 512 to
   * 2048) took 1.11 to 1.35 times the time so priced, a median 1.17, and
   * they are priced at 1.1 (docs/PERFORMANCE.md). */
  if (cluster_split(p, tile, splits)) {
    const double fit = jk_mm_ffma_tile_at(tile)->blocks > 2 && most >= 3 ? 1.1 : 0.95;
    return fit * most * flop / rate + most * (0.5 + 128.0 * (double)bn * 4 / 1e5);
  }
  return most * flop / rate +
         fixup_cost((double)splits, (double)d->m * (double)d->n * (double)d->batch);
}

/* The FFMA tile of plan p with `splits` slices of K: the one the model
 * finds fastest, 0 (simt_gemm) where the cp.async tiles may not run.
 * JITK_MM_FFMA_BN=N forces the tile N columns wide (0: simt_gemm), for
 * measuring; any other value is ignored. */
static int choose_ffma(const jitk_matmul *p, int64_t splits) {
  if (!ffma_ok(p)) return 0;
  const char *force = getenv("JITK_MM_FFMA_BN");
  if (force != NULL) {
    if (strcmp(force, "0") == 0) return 0;
    for (int i = 1; i <= JK_MM_FFMA_TILES; i++)
      if (atoi(force) == jk_mm_ffma_tile_at(i)->bn) return i;
  }
  const int64_t sms = jk_mm_sms(p->engine);
  int best = 0;
  double best_t = ffma_time(p, 0, splits, sms);
  for (int i = 1; i <= JK_MM_FFMA_TILES; i++) {
    const double t = ffma_time(p, i, splits, sms);
    if (t < best_t) {
      best_t = t;
      best = i;
    }
  }
  return best;
}

/* Whether the wgmma kernel of `s` copies B itself as its MMAs run
 * (jk_mm_spec's feed) rather than the `_pad` kernel copying it first:
 * only with JITK_MM_FEED=1, for measuring, as its first form ran slower
 * than the copy first (4095^3 on an H200: 527-539 TFLOP/s against
 * 616-620; docs/PERFORMANCE.md, "2026-12-07, 18:10 UTC"). It takes a
 * 16-bit row-major B whose rows are off 16 bytes (so every execution
 * copies it, whatever the pointer), on a kernel whose producer warpgroup
 * has its idle warps free (no drain) and whose shared memory holds the
 * feed's buffers beside its ring, unswapped, with no cluster or split,
 * and with counts of 32 bits. */
static bool feeds_b(const jitk_matmul *p, const jk_mm_spec *s) {
  const jitk_matmul_desc *d = &p->d;
  const uint64_t es = jk_dtype(d->b_dtype)->size;
  const uint64_t row = (uint64_t)d->n * es, units = (row + JK_MM_FEED_SEG - 1) / JK_MM_FEED_SEG *
                                                    (uint64_t)d->k * (uint64_t)d->batch;
  return s->kind == JK_MM_WGMMA && !s->swap && s->cluster == 1 && !s->split && !s->promote &&
         s->no_drain && es == 2 && s->b_n && ((uint64_t)d->ldb * es) % 16 != 0 && d->k > 0 &&
         d->n > 0 && d->k < INT32_MAX && row < UINT32_MAX && units < UINT32_MAX &&
         wgmma_smem(s->bn, s->stages, false) + JK_MM_FEED_SMEM <= 227 * 1024 &&
         knob_on("JITK_MM_FEED");
}

jitk_status jk_mm_build(jitk_matmul *p, jk_mm_kind kind, jitk_dtype acc, mm_kernel *out) {
  jitk_engine *e = p->engine;
  const jitk_matmul_desc *d = &p->d;
  memset(out, 0, sizeof *out);
  jk_mm_spec *s = &out->spec;
  s->kind = kind;
  s->a = d->a_dtype;
  s->b = d->b_dtype;
  s->c = d->c_dtype;
  s->d = d->d_dtype;
  s->acc = acc;
  s->a_k = d->a_order == JITK_ROW_MAJOR;
  s->b_n = d->b_order == JITK_ROW_MAJOR;
  s->c_row = d->c_order == JITK_ROW_MAJOR;
  s->d_row = d->d_order == JITK_ROW_MAJOR;
  s->has_c = d->has_c != 0;
  s->stages = p->stages;
  s->bn = p->bn;
  s->arow = p->arow;
  s->pingpong = kind == JK_MM_WGMMA && p->pingpong;
  s->a_scale = d->has_a_scale != 0;
  s->b_scale = d->has_b_scale != 0;
  s->d_scale = d->has_d_scale != 0;
  s->amax = d->has_amax_d != 0;
  s->promote = jk_mm_promotes(p, kind);
  s->split = p->split > 1 && acc == JITK_FLOAT32;
  s->swap = kind == JK_MM_WGMMA && p->swap;
  s->cluster = kind == JK_MM_WGMMA && !s->swap && p->cluster > 1 ? p->cluster : 1;
  s->no_col_vecs = knob_off("JITK_MM_COL_VECS");
  s->aph = kind == JK_MM_WGMMA && !s->swap && s->cluster == 1 && !s->split && !s->promote
               ? a_phases(p, s->pingpong)
               : 0;
  out->splits = s->split ? p->split : 1;
  /* The producer's idle warps store D's rows off 16 bytes (the drain)
   * where each multiprocessor has many tiles in turn: the consumers then
   * start the next tile while the last one's rows go out. With a few
   * tiles each there is little to overlap, and the handoff costs. On an
   * H100 (jitk-bench matmul --shapes, bfloat16 bias+ReLU, 2026-12-05):
   * +2.5 to +5.5 % at 2048 to 8192 x 50257 (24 to 95 tiles a
   * multiprocessor), -3 to -6 % at 4096 and 8192 x 4095 (4 to 8). Only
   * where D's rows are off 16 bytes: an aligned D is TMA's, and its
   * kernel built with the drain ran 3.5 % slower on an H200 (8192 x
   * 50264 x 1024: 679 against 696-705 TFLOP/s). A swapped kernel stores
   * D from registers. JITK_MM_DRAIN=0 or 1 forces it off or on, for
   * measuring. */
  const uint64_t tiles = (uint64_t)wave_tiles(p, p->bn > 0 ? p->bn : 128) * (uint64_t)out->splits;
  const char *drain = getenv("JITK_MM_DRAIN");
  s->no_drain =
      drain != NULL && strcmp(drain, "1") == 0 ? false
      : drain != NULL && strcmp(drain, "0") == 0
          ? true
          : s->swap || !(d_rows_off(d) || s->aph > 0) || tiles < 16 * (uint64_t)jk_mm_sms(e);
  s->feed = feeds_b(p, s);
  /* FFMA with float32 inputs on sm_80 and later: one of ffma_gemm's
   * cp.async tiles where the model finds one faster than simt_gemm's
   * (choose_ffma). Otherwise, unbounded, the float FFMA
   * kernel holds 159 registers, one block of 8 warps a multiprocessor;
   * capped at 128 two fit, which ran 0.07 faster at 4096^3, but where
   * every block has a multiprocessor of its own the cap only costs
   * (0.94-0.97 at 1000 x 1030 x 999 in tools/bench/study/sgemm.cu). */
  s->ffma = kind == JK_MM_SIMT ? choose_ffma(p, out->splits) : 0;
  s->csplit = kind == JK_MM_SIMT && s->split && cluster_split(p, s->ffma, out->splits);
  /* JITK_MM_CLUSTER_POLICY=spread (each block of a cluster on a
   * multiprocessor of its own) or =balance (the hardware's load
   * balancing) sets how a split across clusters is placed, for measuring
   * whether the driver's default placement is what made such splits with
   * few or many blocks lose (cluster_split); any other value is ignored. */
  const char *policy = getenv("JITK_MM_CLUSTER_POLICY");
  if (s->csplit && policy != NULL)
    out->cluster_policy = strcmp(policy, "spread") == 0 ? CU_CLUSTER_SCHEDULING_POLICY_SPREAD
                          : strcmp(policy, "balance") == 0
                              ? CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING
                              : 0;
  /* The cp.async kernels' K-tiles in flight; JITK_MM_WIDE_STAGES=2..4
   * sets them, for measuring. */
  const char *ws = getenv("JITK_MM_WIDE_STAGES");
  if (s->ffma > 0)
    s->stages = ws != NULL && atoi(ws) >= 2 && atoi(ws) <= 4 ? atoi(ws) : JK_MM_FFMA_STAGES;
  const uint64_t blocks = (uint64_t)((d->m + 127) / 128) * (uint64_t)((d->n + 127) / 128) *
                          (uint64_t)d->batch * (uint64_t)out->splits;
  s->two_blocks =
      kind == JK_MM_SIMT && acc == JITK_FLOAT32 && s->ffma == 0 && blocks > (uint64_t)jk_mm_sms(e);
  jk_mm_source_in in = {p->name, s,           p->epilogue, &p->params, p->preamble,
                        p->outs, p->num_outs, p->reds,     p->num_reds};
  char *src = NULL;
  jitk_status st = jk_mm_generate(e, &in, &src);
  if (st != JITK_OK) return st;
  st = jk_gen_cache(e, p->name, src, NULL, 0, JK_MM_GENERATOR, kind == JK_MM_WGMMA, NULL,
                    &out->entry);
  out->source = src;
  if (st != JITK_OK) return st;
  out->smem = kind == JK_MM_MMA ? (size_t)s->stages * s->arow * (128 + s->bn)
              : kind == JK_MM_WGMMA
                  ? wgmma_smem(s->bn, s->stages, s->swap) + (s->feed ? JK_MM_FEED_SMEM : 0)
              : s->ffma > 0 ? jk_mm_ffma_smem(jk_mm_tile_n(s), s->stages)
                            : 0;
  if (s->csplit) out->smem += jk_mm_stage_smem(jk_mm_tile_n(s));
  if (e->has_device) {
    CUcontext saved;
    st = jk_ctx_enter(e, &saved);
    if (st != JITK_OK) return st;
    CUresult r = jk_cu_get_function(e, (CUmodule)out->entry->cu, p->name, &out->fn);
    if (r == CUDA_SUCCESS && (jk_mm_transposes_a(s) || jk_mm_transposes_b(s))) {
      char tr[512];
      if (snprintf(tr, sizeof tr, "%s_tr", p->name) >= (int)sizeof tr) {
        jk_ctx_leave(e, saved);
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: the kernel's name is too long");
      }
      r = jk_cu_get_function(e, (CUmodule)out->entry->cu, tr, &out->tr);
    }
    if (r == CUDA_SUCCESS && kind == JK_MM_WGMMA) {
      char pad[512];
      if (snprintf(pad, sizeof pad, "%s_pad", p->name) >= (int)sizeof pad) {
        jk_ctx_leave(e, saved);
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: the kernel's name is too long");
      }
      r = jk_cu_get_function(e, (CUmodule)out->entry->cu, pad, &out->pad);
    }
    if (r == CUDA_SUCCESS && jk_mm_fixup(s)) {
      char fn[512];
      if (snprintf(fn, sizeof fn, "%s_sk", p->name) >= (int)sizeof fn) {
        jk_ctx_leave(e, saved);
        return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: the kernel's name is too long");
      }
      r = jk_cu_get_function(e, (CUmodule)out->entry->cu, fn, &out->fix);
    }
    for (size_t i = 0; r == CUDA_SUCCESS && i < p->num_reds; i++)
      for (int step = 0; r == CUDA_SUCCESS && step < 2; step++) {
        if (step == 1 && p->reds[i].axis == JITK_REDUCE_COLUMNS) continue;
        char fn[512];
        if (snprintf(fn, sizeof fn, "%s_r%zu%c", p->name, i, 'a' + step) >= (int)sizeof fn) {
          jk_ctx_leave(e, saved);
          return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: the kernel's name is too long");
        }
        r = jk_cu_get_function(e, (CUmodule)out->entry->cu, fn, &out->red[i][step]);
      }
    if (r == CUDA_SUCCESS && out->smem > 48 * 1024)
      r = jk_cu_set_func_attribute(e, out->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   (int)out->smem);
    jk_ctx_leave(e, saved);
    if (r != CUDA_SUCCESS) return jk_cuda_fail(e, r, "preparing the matmul kernel");
  }
  return JITK_OK;
}

/* The exponent of the power of two v rounds up to. */
static int log2_up(int64_t v) {
  int l = 0;
  while (l < 62 && ((int64_t)1 << l) < v) l++;
  return l;
}

/* The tuning table's key of plan p: generator, target, device, kernel kind,
 * dtypes, compute, layouts, C, batching, and M, N, K rounded up to powers
 * of two (the shape class). The epilogue is left out, so that one tuning
 * serves every epilogue of a shape: it runs once per output whatever the
 * tile, while the tile decides the MMAs' speed. */
void jk_mm_tuning_key(const jitk_matmul *p, jk_mm_kind kind, char *buf, size_t size) {
  const jitk_engine *e = p->engine;
  const jitk_matmul_desc *d = &p->d;
  snprintf(buf, size,
           "%s %s %s kind=%d a=%s c=%s d=%s compute=%d order=%c%c%c%c batched=%d m=2^%d n=2^%d "
           "k=2^%d",
           JK_MM_GENERATOR, e->target.arch, e->has_device ? e->info.name : "none", (int)kind,
           jk_dtype(d->a_dtype)->name, d->has_c ? jk_dtype(d->c_dtype)->name : "none",
           jk_dtype(d->d_dtype)->name, (int)d->compute, order_name(d->a_order)[0],
           order_name(d->b_order)[0], order_name(d->c_order)[0], order_name(d->d_order)[0],
           d->batch > 1, log2_up(d->m), log2_up(d->n), log2_up(d->k));
}

/* A configuration as the tuning table spells it, and back; a choice that
 * does not parse or does not fit the kind is ignored. */
void jk_mm_choice_format(const jitk_matmul *p, char *buf, size_t size) {
  snprintf(buf, size, "bn=%d arow=%d stages=%d pingpong=%d split=%d", p->bn, p->arow, p->stages,
           (int)p->pingpong, p->split > 1 ? p->split : 1);
  size_t used = strlen(buf);
  if (p->swap && used + 1 < size) snprintf(buf + used, size - used, " swap=1");
}

bool jk_mm_swap_allowed(const jitk_matmul *p, jk_mm_kind kind) {
  const jitk_dtype a = p->d.a_dtype;
  return kind == JK_MM_WGMMA && (a == JITK_FLOAT16 || a == JITK_BFLOAT16 ||
                                 (a == JITK_FLOAT32 && p->d.compute == JITK_COMPUTE_TF32));
}

int jk_mm_swap_bn(int64_t m) {
  static const int widths[] = {8, 16, 32, 64};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
    if (m <= widths[i]) return widths[i];
  return 128;
}

int jk_mm_swap_stages(int bn) {
  int stages = JK_MM_SWAP_MAX_STAGES;
  while (stages > 2 && wgmma_smem(bn, stages, true) > 227 * 1024) stages--;
  return stages;
}

int jk_mm_swap_default_stages(int bn) {
  int most = jk_mm_swap_stages(bn);
  return most < JK_MM_SWAP_DEFAULT_STAGES ? most : JK_MM_SWAP_DEFAULT_STAGES;
}

bool jk_mm_promotes(const jitk_matmul *p, jk_mm_kind kind) {
  return kind == JK_MM_WGMMA && is_fp8(p->d.a_dtype) &&
         p->d.compute != JITK_COMPUTE_FLOAT32_FAST_ACCUM;
}

/* Whether a tile configuration fits the plan's kind (and shared memory):
 * swapped wgmma kernels (16-bit and tf32 inputs only, so never promoted)
 * also take the narrow tiles, up to 12 stages, and no ping-pong. */
bool jk_mm_choice_fits(const jitk_matmul *p, jk_mm_kind kind, int bn, int arow, int stages,
                       int pingpong, bool swap) {
  if (swap)
    return jk_mm_swap_allowed(p, kind) && arow == 128 && !pingpong && stages >= 2 &&
           stages <= JK_MM_SWAP_MAX_STAGES &&
           (bn == 8 || bn == 16 || bn == 32 || bn == 64 || bn == 128 || bn == 256) &&
           wgmma_smem(bn, stages, true) <= 227 * 1024;
  /* 128 x 64 wgmma tiles (cooperative, 16-bit inputs, the ones measured):
   * twice the tiles of 128 x 128, for the products whose 128 x 128 tiles
   * are fewer than the multiprocessors. */
  const bool narrow = bn == 64 && kind == JK_MM_WGMMA && !pingpong &&
                      (p->d.a_dtype == JITK_BFLOAT16 || p->d.a_dtype == JITK_FLOAT16);
  if ((bn != 128 && bn != 256 && !narrow) || (arow != 64 && arow != 128) || stages < 2 ||
      stages > 6)
    return false;
  /* Promotion's second accumulator fits the registers at 64 x 128 a
   * consumer only (matmul_sm90.cuh, PROMOTE). */
  if (jk_mm_promotes(p, kind) && (bn != 128 || pingpong)) return false;
  if (kind == JK_MM_WGMMA)
    return arow == 128 && (!pingpong || bn == 128) && wgmma_smem(bn, stages, false) <= 227 * 1024;
  return !pingpong && (size_t)stages * (size_t)arow * (128 + (size_t)bn) <= 227 * 1024;
}

bool jk_mm_choice_parse(jitk_matmul *p, jk_mm_kind kind, const char *s) {
  int bn, arow, stages, pp, split = 0, swap = 0;
  int got = sscanf(s, "bn=%d arow=%d stages=%d pingpong=%d split=%d swap=%d", &bn, &arow, &stages,
                   &pp, &split, &swap);
  /* A choice stored before swapped plans has no swap=: unswapped. */
  if (got < 4 || (got >= 5 && split < 1) || (got == 6 && swap != 0 && swap != 1)) return false;
  if (!jk_mm_choice_fits(p, kind, bn, arow, stages, pp, swap != 0)) return false;
  p->bn = bn;
  p->arow = arow;
  p->stages = stages;
  p->pingpong = pp != 0;
  p->swap = swap != 0;
  /* The class's K is rounded up to a power of two: a split tuned on a
   * longer K may not fit this one. */
  int64_t kt = jk_mm_ktiles(p, kind);
  p->split = got >= 5 ? (int)(split > kt ? (kt > 0 ? kt : 1) : split) : 0;
  if (p->d.a_dtype == JITK_FLOAT64 && p->split > 1) p->split = 1;
  return true;
}

int64_t jk_mm_ktiles(const jitk_matmul *p, jk_mm_kind kind) {
  jk_mm_spec s;
  memset(&s, 0, sizeof s);
  s.kind = kind;
  s.a = p->d.a_dtype;
  s.acc = p->d.a_dtype == JITK_FLOAT64 ? JITK_FLOAT64 : JITK_FLOAT32;
  s.arow = p->arow;
  const int64_t bk = jk_mm_ktile(&s);
  return p->d.k > 0 ? (p->d.k + bk - 1) / bk : 0;
}

int jk_mm_sms(const jitk_engine *e) {
  if (e->has_device && e->info.multiprocessors > 0) return e->info.multiprocessors;
  return e->target.major == 8 && e->target.minor == 0 ? 108 : 132;
}

/* The share of the persistent kernel's rounds of tiles (one a
 * multiprocessor each) that are busy, for 128 x bn tiles: the last
 * round's idle multiprocessors are what a wider tile can lose. */
static double wave_use(const jitk_engine *e, const jitk_matmul *p, int64_t bn) {
  const int64_t sms = jk_mm_sms(e);
  const int64_t tiles = wave_tiles(p, bn);
  const int64_t rounds = (tiles + sms - 1) / sms;
  return rounds > 0 ? (double)tiles / (double)(rounds * sms) : 1.0;
}

/*
 * Split-K's choice: a model of the time a plan takes with s slices of K.
 * Unsplit, the tiles run in rounds over the multiprocessors (one block
 * each; two for the smaller mma.sync tiles), each tile all K-steps long;
 * cut into s slices, s times as many items run in their own rounds, each
 * K-steps / s long, and the fix-up adds its launch and its pass over the
 * workspace (8 bytes per element and slice, at about 3 TB/s). A split is
 * taken when the model saves a tenth at least; slices keep 4 K-steps at
 * least, and 64 slices at most.
 *
 * wgmma kernels, in microseconds, fitted to the H200 (docs/PERFORMANCE.md,
 * 2026-12-03, decode shapes with each split forced): a multiprocessor
 * takes about 0.37 us for a K-step of a 128 x 128 tile (32 KiB of A and
 * B, and its MMAs), a narrower swapped tile less in proportion to its
 * bytes, and all of them together read A and B from memory at about 3.5
 * TB/s: a plan takes the longer of its busiest multiprocessor's steps and
 * that one read. Decode shapes are bound by the read, which 64 busy
 * multiprocessors of 132 already pull (1 to 64 x 8192 x 8192 unsplit:
 * 1.00-1.07 of cuBLASLt; cut in two, 0.86-0.96), so a split, which
 * shortens only the steps, no longer pays there. A split costs 8 us
 * besides its kernel (the workspace's allocation and the zeroing of its
 * counters, in stream order: 128 x 8192 x 8192 in two slices took 56 us
 * against 48 whole, though ncu timed both kernels at 44.5 us), and its
 * slices' copies of the tiles go through L2 (written once, read once, at
 * about 5 TB/s).
 *
 * The other kinds, in K-steps of one multiprocessor (a step of a 128 x
 * 128 tile moves 32 KiB of 16-bit A and B, about a microsecond when every
 * multiprocessor streams at once): the launch costs 4.
 */
typedef struct split_model {
  bool wgmma;
  double tiles, slots, ktiles, step, read, elems, bn;
} split_model;

static double split_cost(const split_model *m, double slices) {
  const double steps = ceil(m->tiles * slices / m->slots) * ceil(m->ktiles / slices);
  const double busy = steps * m->step;
  if (m->wgmma)
    return (busy > m->read ? busy : m->read) +
           (slices > 1 ? 8 + slices * m->tiles * JK_MM_TILE * m->bn * 8 / 5e6 : 0);
  return steps + fixup_cost(slices, m->elems);
}

static double model_cost(const void *ctx, int64_t slices) {
  return split_cost((const split_model *)ctx, (double)slices);
}

/* float32 FFMA: the time of the tile the model finds fastest with these
 * slices. */
typedef struct ffma_split {
  const jitk_matmul *p;
  int64_t sms;
} ffma_split;

static double ffma_split_cost(const void *ctx, int64_t slices) {
  const ffma_split *f = ctx;
  return ffma_time(f->p, choose_ffma(f->p, slices), slices, f->sms);
}

/* The number of slices, 1 to 64 and each 4 of the kt K-tiles at least,
 * that cost(ctx, slices) finds cheapest; its cost to *best_cost and the
 * unsplit cost to *plain, for the caller to weigh. */
static int cheapest_split(double (*cost)(const void *ctx, int64_t slices), const void *ctx,
                          int64_t kt, double *best_cost, double *plain) {
  *plain = cost(ctx, 1);
  *best_cost = *plain;
  int best = 1;
  for (int64_t sp = 2; sp <= 64 && sp * 4 <= kt; sp++) {
    const double c = cost(ctx, sp);
    if (c < *best_cost) {
      *best_cost = c;
      best = (int)sp;
    }
  }
  return best;
}

int jk_mm_auto_split(const jitk_matmul *p, jk_mm_kind kind, int sms) {
  const jitk_matmul_desc *d = &p->d;
  if (d->a_dtype == JITK_FLOAT64 || d->m == 0 || d->n == 0 || sms < 1) return 1;
  const int64_t kt = jk_mm_ktiles(p, kind);
  /* float32 FFMA: the split whose best tile the model finds fastest,
   * where it saves a tenth of the unsplit time, or 7 % where the slices
   * are summed across a cluster. Such splits on the 128 x 64 tile, two
   * blocks a multiprocessor, ran within 1.5 % of the model in all four
   * products measured (H100, 2026-12-07: 1000^3, 512 x 1536 x 1536, 2048
   * x 512 x 2048, 1024 x 1024 x 4096, two slices), and at 1000^3, which
   * the model put at 0.91 of the unsplit time, they ran at 0.92 of it
   * (29.5 TFLOP/s against 27.0; docs/PERFORMANCE.md). A split through the
   * workspace and the fix-up kernel keeps the wider margin (which a
   * split across clusters may also meet).
   * JITK_MM_CSPLIT_MARGIN=x (0.5 to 1) sets the cluster splits' margin,
   * for measuring. */
  double best_cost, plain;
  if (kind == JK_MM_SIMT && ffma_ok(p)) {
    const ffma_split f = {p, sms};
    const int sp = cheapest_split(ffma_split_cost, &f, kt, &best_cost, &plain);
    const char *cm = getenv("JITK_MM_CSPLIT_MARGIN");
    const double want = cm != NULL ? atof(cm) : 0.0;
    const double margin = want >= 0.5 && want <= 1.0 ? want : 0.93;
    if (sp > 1 && best_cost <= margin * plain && cluster_split(p, choose_ffma(p, sp), sp))
      return sp;
    return best_cost <= 0.9 * plain ? sp : 1;
  }
  const int64_t bn = kind == JK_MM_SIMT ? JK_MM_TILE : p->bn;
  /* A swapped kernel's 128-row tiles run along N, its bn columns along M. */
  const bool swap = kind == JK_MM_WGMMA && p->swap;
  const int64_t rows = swap ? d->n : d->m, cols = swap ? d->m : d->n;
  const int64_t tiles_m = (rows + JK_MM_TILE - 1) / JK_MM_TILE, tiles_n = (cols + bn - 1) / bn;
  split_model m;
  m.wgmma = kind == JK_MM_WGMMA;
  m.tiles = (double)tiles_m * (double)tiles_n * (double)d->batch;
  size_t smem = (size_t)p->stages * (size_t)p->arow * (JK_MM_TILE + (size_t)bn);
  m.slots = (double)sms * (kind == JK_MM_MMA && smem <= 113 * 1024 ? 2 : 1);
  if (m.tiles >= 4 * m.slots || kt < 8) return 1;
  m.ktiles = (double)kt;
  const double narrow = (double)(JK_MM_TILE + bn) / (2.0 * JK_MM_TILE),
               wide = (double)bn / JK_MM_TILE;
  m.step = 0.37 * (narrow > wide ? narrow : wide);
  m.read = ((double)d->m * (double)jk_dtype(d->a_dtype)->size +
            (double)d->n * (double)jk_dtype(d->b_dtype)->size) *
           (double)d->k * (double)d->batch / 3.5e6;
  m.elems = (double)d->m * (double)d->n * (double)d->batch;
  m.bn = (double)bn;
  const int sp = cheapest_split(model_cost, &m, kt, &best_cost, &plain);
  return best_cost <= 0.9 * plain ? sp : 1;
}

/* The names the epilogue has of its own: an operand, output or reduction
 * of one of these names would be shadowed by it in the generated code. */
static const char *const epilogue_own[] = {"acc", "value", "row", "col", "batch", "T", NULL};

static bool epilogue_owns(const char *name) {
  for (int i = 0; epilogue_own[i]; i++)
    if (strcmp(name, epilogue_own[i]) == 0) return true;
  return false;
}

/* Whether `name` is free for an output or a reduction: an identifier,
 * not a C++ word, not a name the epilogue already has. */
static jitk_status check_extra_name(jitk_matmul *p, const char *what, size_t index,
                                    const char *name) {
  jitk_engine *e = p->engine;
  if (name == NULL || !jk_gen_is_identifier(name) || jk_is_reserved_word(name, strlen(name)) ||
      strncmp(name, "_jk", 3) == 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: %s %zu's name %s%s%s is not a C identifier the plan can use", what,
                   index, name ? "`" : "", name ? name : "(NULL)", name ? "`" : "");
  if (epilogue_owns(name))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: %s `%s`: the epilogue already has a `%s` (acc, value, row, col, "
                   "batch and T are the epilogue's own)",
                   what, name, name);
  for (size_t i = 0; i < p->params.count; i++)
    if (strcmp(name, p->params.params[i].name) == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "matmul: %s `%s` has the name of an epilogue operand", what, name);
  for (size_t i = 0; i < p->num_outs; i++)
    if (strcmp(name, p->outs[i].name) == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: two outputs or reductions are `%s`",
                     name);
  for (size_t i = 0; i < p->num_reds; i++)
    if (strcmp(name, p->reds[i].name) == 0)
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: two outputs or reductions are `%s`",
                     name);
  return JITK_OK;
}

static bool is_real(jitk_dtype t) {
  jitk_dtype_info info;
  return jitk_dtype_get_info(t, &info) == JITK_OK && info.kind != 'c';
}

/* The description's outputs and reductions, checked and copied into the
 * plan (an error names the first that is wrong), with each output's
 * leading dimension and batch stride filled in. */
static jitk_status copy_extras(jitk_matmul *p, const jitk_matmul_desc *d) {
  jitk_engine *e = p->engine;
  if (d->num_outputs > JK_MM_MAX_EXTRA || d->num_reductions > JK_MM_MAX_EXTRA)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: at most %d outputs and %d reductions besides D, not %zu and %zu",
                   JK_MM_MAX_EXTRA, JK_MM_MAX_EXTRA, d->num_outputs, d->num_reductions);
  if ((d->num_outputs > 0 && d->outputs == NULL) ||
      (d->num_reductions > 0 && d->reductions == NULL))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: num_%s is %zu but %s is NULL",
                   d->outputs == NULL && d->num_outputs ? "outputs" : "reductions",
                   d->outputs == NULL && d->num_outputs ? d->num_outputs : d->num_reductions,
                   d->outputs == NULL && d->num_outputs ? "outputs" : "reductions");
  for (size_t i = 0; i < d->num_outputs; i++) {
    const jitk_matmul_output *o = &d->outputs[i];
    jitk_status st = check_extra_name(p, "output", i, o->name);
    if (st == JITK_OK && !is_real(o->dtype))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: output `%s`'s dtype is %s: outputs take a real dtype (bool, an "
                   "integer or a float)",
                   o->name, jk_dtype(o->dtype) ? jk_dtype(o->dtype)->name : "not of the table");
    if (st == JITK_OK && (o->expr == NULL || o->expr[strspn(o->expr, " \t\n")] == '\0'))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: output `%s` has no expression", o->name);
    char label[96];
    snprintf(label, sizeof label, "output %s", o->name ? o->name : "");
    if (st == JITK_OK) st = jk_code_check_directives(e, label, o->expr);
    jitk_matmul_output c = *o;
    if (st == JITK_OK) {
      char what[96];
      snprintf(what, sizeof what, "output `%s`", o->name);
      st = fill_layout(e, what, d->d_order, d->m, d->n, d->batch, o->dtype, &c.ld, &c.stride);
    }
    if (st != JITK_OK) return st;
    bool oom = false;
    c.name = jk_gen_dup(e, o->name, &oom);
    c.expr = jk_gen_dup(e, o->expr, &oom);
    p->outs[p->num_outs++] = c;
    if (oom) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < d->num_reductions; i++) {
    const jitk_matmul_reduction *r = &d->reductions[i];
    jitk_status st = check_extra_name(p, "reduction", i, r->name);
    if (st == JITK_OK && !is_float(r->dtype))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: reduction `%s`'s dtype must be float16, bfloat16, float32 or float64",
                   r->name);
    if (st == JITK_OK && (r->op < JITK_REDUCE_SUM || r->op > JITK_REDUCE_MIN))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: reduction `%s`'s op %d is not SUM, MAX or MIN", r->name, (int)r->op);
    if (st == JITK_OK && (r->axis < JITK_REDUCE_ROWS || r->axis > JITK_REDUCE_ALL))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: reduction `%s`'s axis %d is not ROWS, COLUMNS or ALL", r->name,
                   (int)r->axis);
    if (st == JITK_OK && (r->expr == NULL || r->expr[strspn(r->expr, " \t\n")] == '\0'))
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul: reduction `%s` has no expression",
                   r->name);
    char label[96];
    snprintf(label, sizeof label, "reduction %s", r->name ? r->name : "");
    if (st == JITK_OK) st = jk_code_check_directives(e, label, r->expr);
    if (st != JITK_OK) return st;
    jitk_matmul_reduction c = *r;
    bool oom = false;
    c.name = jk_gen_dup(e, r->name, &oom);
    c.expr = jk_gen_dup(e, r->expr, &oom);
    p->reds[p->num_reds++] = c;
    if (oom) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  return JITK_OK;
}

static const char *kind_name(jk_mm_kind kind) {
  return kind == JK_MM_WGMMA ? "wgmma" : kind == JK_MM_MMA ? "mma.sync" : "FFMA";
}

/* The plan's K slices: the description's split_k, checked against the
 * kernel it got (every slice must have a K-tile), else a choice the tuning
 * table gave, else jk_mm_auto_split's. */
static jitk_status choose_split(jitk_matmul *p, jk_mm_kind kind) {
  jitk_engine *e = p->engine;
  const jitk_matmul_desc *d = &p->d;
  const int64_t kt = jk_mm_ktiles(p, kind);
  if (d->split_k < 0)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: split_k is %d; it must be 0 (jitk chooses), 1 (no split) or the "
                   "number of slices of K",
                   d->split_k);
  if (d->split_k > 1 && d->a_dtype == JITK_FLOAT64)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul: split_k is %d, but a float64 plan does not split K: its slices' "
                   "partial sums would go through a float32 workspace",
                   d->split_k);
  if (d->split_k > 1 && d->split_k > kt) {
    jk_mm_spec s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.a = d->a_dtype;
    s.acc = JITK_FLOAT32;
    s.arow = p->arow;
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul: split_k is %d, but K = %lld makes only %lld K-tile%s of %d for this "
                   "plan's %s kernel, and every slice needs one",
                   d->split_k, (long long)d->k, (long long)kt, kt == 1 ? "" : "s", jk_mm_ktile(&s),
                   kind_name(kind));
  }
  if (d->split_k > 65535)
    return jk_fail(e, JITK_ERR_UNSUPPORTED, "matmul: split_k is %d; at most 65535 slices",
                   d->split_k);
  /* JITK_MM_SPLIT=N sets the split of plans that leave it to jitk, for
   * measuring (as JITK_MM_TILE sets the tile); one that does not fit is
   * ignored. */
  const char *force = getenv("JITK_MM_SPLIT");
  int forced = force != NULL ? atoi(force) : 0;
  if (d->split_k >= 1)
    p->split = d->split_k;
  else if (forced >= 1 && forced <= (kt > 0 ? kt : 1) &&
           (forced == 1 || d->a_dtype != JITK_FLOAT64))
    p->split = forced;
  else if (p->split < 1)
    p->split = jk_mm_auto_split(p, kind, jk_mm_sms(e));
  /* A tuned split may not fit a tile JITK_MM_TILE changed afterwards. */
  if (p->split > kt) p->split = kt > 0 ? (int)kt : 1;
  return JITK_OK;
}

jitk_status jitk_matmul_create(jitk_engine *e, const jitk_matmul_desc *desc, jitk_matmul **out) {
  if (e == NULL || desc == NULL || out == NULL)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_create: an argument is NULL");
  /* A caller compiled before the FP8 fields, or before split_k, passes
   * the size up to them; those fields are then 0. */
  const size_t before_fp8 = offsetof(jitk_matmul_desc, has_a_scale),
               before_split = offsetof(jitk_matmul_desc, split_k);
  if (desc->struct_size != sizeof *desc && desc->struct_size != before_fp8 &&
      desc->struct_size != before_split)
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_matmul_create: desc->struct_size is %zu, not %zu; call "
                   "jitk_matmul_desc_init before setting fields",
                   desc->struct_size, sizeof *desc);
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  memcpy(&d, desc, desc->struct_size);
  d.struct_size = sizeof d;
  jitk_dtype acc = JITK_FLOAT32;
  jitk_status st = check_desc(e, &d, &acc);
  if (st != JITK_OK) return st;
  jitk_matmul *p = jk_calloc(e, 1, sizeof *p);
  if (p == NULL) return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  p->engine = e;
  pthread_mutex_init(&p->lock, NULL);
  bool oom = false;
  p->name = jk_gen_dup(e, d.name ? d.name : "matmul", &oom);
  p->epilogue = jk_gen_dup(e, d.epilogue, &oom);
  p->epilogue_params = jk_gen_dup(e, d.epilogue_params, &oom);
  p->preamble = jk_gen_dup(e, d.preamble, &oom);
  d.name = p->name;
  d.epilogue = p->epilogue;
  d.epilogue_params = p->epilogue_params;
  d.preamble = p->preamble;
  p->d = d;
  if (oom) {
    jitk_matmul_destroy(p);
    return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
  }
  if (!jk_gen_is_identifier(p->name) || jk_is_reserved_word(p->name, strlen(p->name))) {
    st = jk_fail_caret(e, JITK_ERR_PARSE, "name", p->name, 0, strlen(p->name) ? strlen(p->name) : 1,
                       "the kernel's name must be a C identifier");
    jitk_matmul_destroy(p);
    return st;
  }
  /* The epilogue's operands: T is the accumulator's type; other
   * placeholders could not be bound before execution, so they are refused. */
  if (p->epilogue_params != NULL) {
    st = jk_params_parse(e, p->epilogue_params, "epilogue_params", false, &p->params);
    /* As many as an elementwise kernel takes, which the execution's list
     * of kernel parameters is sized for. */
    if (st == JITK_OK && p->params.count > JK_MAX_EW_PARAMS)
      st = jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "epilogue_params: %zu operands; at most %d",
                   p->params.count, JK_MAX_EW_PARAMS);
    for (size_t h = 0; st == JITK_OK && h < p->params.num_placeholders; h++)
      if (strcmp(p->params.placeholders[h], "T") != 0)
        st = jk_fail(e, JITK_ERR_PARSE,
                     "epilogue_params: placeholder %s cannot be bound when the plan is made; "
                     "use T (the accumulator's type) or a dtype name",
                     p->params.placeholders[h]);
    /* An operand named as one of the epilogue's own would be shadowed by
     * it: the epilogue would read the row, the column or the accumulator,
     * and the value passed at execution never. */
    for (size_t i = 0; st == JITK_OK && i < p->params.count; i++)
      if (epilogue_owns(p->params.params[i].name))
        st = jk_fail(e, JITK_ERR_PARSE,
                     "epilogue_params: operand `%s` has the name of the epilogue's own `%s` "
                     "(acc, value, row, col, batch and T are the epilogue's own)",
                     p->params.params[i].name, p->params.params[i].name);
    if (st != JITK_OK) {
      jitk_matmul_destroy(p);
      return st;
    }
    /* Labels for messages, written once rather than at every execution. */
    p->labels = jk_calloc(e, p->params.count ? p->params.count : 1, sizeof *p->labels);
    if (p->labels == NULL) {
      jitk_matmul_destroy(p);
      return jk_fail(e, JITK_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (size_t i = 0; i < p->params.count; i++)
      snprintf(p->labels[i], sizeof p->labels[i], "epilogue operand `%s`",
               p->params.params[i].name);
  }
  st = copy_extras(p, desc);
  if (st != JITK_OK) {
    jitk_matmul_destroy(p);
    return st;
  }
  /* The tensor-core tile: the default measured fastest on the H200
   * (docs/PERFORMANCE.md), then a choice jitk_matmul_autotune stored, then
   * JITK_MM_SCHEDULE=cooperative (or pingpong) or
   * JITK_MM_TILE=BNxAROWxSTAGES ("256x64x3") for measuring. */
  jk_mm_kind kind = choose_kind(e, &p->d);
  bool big = p->d.m >= 1024 && p->d.n >= 1024;
  if (kind == JK_MM_WGMMA) {
    /* Ping-pong consumers on 128 x 128 x 64 tiles in five stages (plus
     * 64 KiB staging D for TMA stores) measured faster than the
     * cooperative 128 x 256 x 64 in three at 4096^3, 8192^3 and 16384 x
     * 4096 x 1024 (bf16 734/767/545 TFLOP/s against 675/757/467) while
     * the epilogue read its operands as it stored; with them read ahead,
     * long K takes the cooperative tile (below). */
    p->bn = 128;
    p->arow = 128;
    p->stages = 5;
    p->pingpong = true;
    const char *sched = getenv("JITK_MM_SCHEDULE");
    /* A row-major A off 16 bytes read by phases, which pays on the
     * cooperative tiles only (a_phases). */
    bool phases_pay = false;
    phase_layout(p, &phases_pay);
    if (jk_mm_promotes(p, kind)) {
      /* FP8 with promotion: its partial sums double the accumulator
       * registers, which fit a consumer of 64 x 128 only, so cooperative
       * consumers on 128 x 128 tiles, in five stages (the most that fit
       * beside the staging of D). */
      p->pingpong = false;
    } else if ((sched != NULL && strcmp(sched, "cooperative") == 0) ||
               (sched == NULL && big && p->d.k >= 4096 &&
                (p->d.a_dtype == JITK_BFLOAT16 || p->d.a_dtype == JITK_FLOAT16 ||
                 p->d.a_dtype == JITK_FLOAT32) &&
                !(p->d.a_dtype != JITK_FLOAT32 && d_rows_off(&p->d)) &&
                wave_use(e, p, 256) + 0.01 >= wave_use(e, p, 128)) ||
               (sched == NULL && big && phases_pay &&
                wave_use(e, p, 256) + 0.01 >= wave_use(e, p, 128))) {
      /* Cooperative consumers on 128 x 256 tiles in three stages: for
       * 16-bit and tf32 inputs with K of 4096 or more (tf32 4096^3: 335
       * TFLOP/s against 314 ping-pong and 321 cooperative 128 x 128 in
       * five stages, same run), faster than ping-pong since
       * the epilogue reads its column operands ahead (bf16 + bias + ReLU:
       * 8192^3 788-800 TFLOP/s against 748-759, 4096^3 742-748 against
       * 733-737), while at K = 1024, where the epilogue weighs more,
       * ping-pong stays ahead (16384 x 4096 x 1024: 664 against 642), as
       * it does where its smaller tiles fill the last wave better (2048 x
       * 11008 x 4096: 729 against 682, 0.95 of the multiprocessors' tile
       * rounds busy against 0.87). A copied A with an odd K just short
       * of 4096 did no better cooperative (4095^3 571-572 against 581-586
       * ping-pong, docs/PERFORMANCE.md, "2026-12-04, 14:50 UTC on"), but
       * such an A read in place by phases does, on any K, where the
       * cooperative tiles fill the waves as well (a_phases: 4095^3 596-598,
       * 4096 x 4096 x 4095 692-700 against 655-662 on an H100). A 16-bit
       * product whose D rows are off 16 bytes, stored by the threads
       * (stage_rows) rather than by TMA, stays on ping-pong otherwise: its
       * epilogue weighs more, and ping-pong runs it beside the other
       * consumer's MMAs (bf16 4096 x 4095 x 4096: 661-668 TFLOP/s against
       * 648-650 cooperative, "2026-12-04, 20:40 UTC on"). */
      p->bn = p->d.n > 128 ? 256 : 128;
      p->stages = p->bn == 256 ? 3 : 4;
      p->pingpong = false;
    }
    /* An M of one or two whole 128-row tiles whose 128 x 128 tiles would
     * keep no more than half the multiprocessors busy (M = 128 x 8192 x
     * 8192: 64 of them on 132) takes 128 x 64 tiles, cooperative, in six
     * stages: twice the tiles, each reading B in 128-byte rows, where
     * such shapes are bound by reading B. On the H200 (bf16 bias + ReLU,
     * back to back) 128 x 8192 x 8192 went from 43.8 to 39.3 us a call
     * (cuBLASLt 37.1-37.5), 128 x 4096 x 4096 from 20.2 to 16.2 (14.2);
     * M = 96 measured slower that way (45.2 against 51.5 us), so M must
     * fill its tiles, and 256 x 8192 x 8192 (128 tiles of 128 x 128)
     * slower too (50.2 against 68.3). A larger M with few tiles has a long
     * K, which split-K serves. */
    if (sched == NULL && p->pingpong && p->d.m % 128 == 0 && p->d.m <= 256 &&
        wave_tiles(p, 128) * 2 <= jk_mm_sms(e) &&
        jk_mm_choice_fits(p, kind, 64, 128, 6, 0, false)) { /* 16-bit inputs only */
      p->bn = 64;
      p->stages = 6;
      p->pingpong = false;
    }
    /* Decode shapes (M up to 64, N of a tile at least) swap A and B: D^T
     * = B^T A^T puts N along the tile's 128 rows and M along a narrow
     * tile of 8 to 64 columns, so that no MMA is mostly padding, and the
     * smaller tiles of the user's A leave shared memory for more stages
     * of B, the operand these shapes are bound by reading.
     * JITK_MM_SWAP=1 or 0 forces it on (where the dtypes allow it) or
     * off, for measuring and testing. */
    const char *force = getenv("JITK_MM_SWAP");
    /* tf32 with a row-major B swaps too where the swapped tiles are 256
     * columns of M that fill the multiprocessors: the swapped kernel reads
     * B M-major through registers (matmul_sm90.cuh's wgmma_rs), where the
     * unswapped one reads B K-major only, so that B is transposed first, a
     * pass that reads and writes B once more (4096^3 on the H200: 386-395
     * TFLOP/s, 1.02-1.05 of cuBLASLt, against 345, 0.92, transposed first;
     * in 3 stages 359). With 128 columns the fragments' loads weigh twice as
     * much against the MMAs and the swapped kernel ran slower than the
     * transpose and the unswapped one (326 TFLOP/s at 4096^3), so other
     * shapes keep the transpose, except decode shapes, swapped above, for
     * which the transpose would cost more than the product. Not with
     * reductions, which only the unswapped kernels fold per tile. */
    const int64_t wide = (p->d.n + 127) / 128 * ((p->d.m + 255) / 256) * p->d.batch;
    const bool tf32_rows = p->d.a_dtype == JITK_FLOAT32 && p->d.compute == JITK_COMPUTE_TF32 &&
                           p->d.b_order == JITK_ROW_MAJOR && p->d.m > 128 && wide >= jk_mm_sms(e) &&
                           p->d.num_reductions == 0;
    bool swap = (p->d.m <= 64 && p->d.n >= 128 && p->d.m < p->d.n) || tf32_rows;
    if (force != NULL && (strcmp(force, "0") == 0 || strcmp(force, "1") == 0))
      swap = force[0] == '1';
    if (swap && jk_mm_swap_allowed(p, kind)) {
      p->swap = true;
      p->bn = tf32_rows ? 256 : jk_mm_swap_bn(p->d.m);
      p->stages = jk_mm_swap_default_stages(p->bn);
      p->pingpong = false;
    }
  } else {
    /* mma.sync: 128 x 256 tiles with 128 bytes of K per stage in three
     * stages measured fastest on large products (8192^3 bf16: 342 TFLOP/s
     * against 299 for 128 x 128 x 32 in four stages); smaller products
     * keep the smaller tile, which leaves fewer idle threads at the edges. */
    p->bn = big ? 256 : 128;
    p->arow = big ? 128 : 64;
    p->stages = big ? 3 : JK_MM_STAGES;
  }
  /* A choice jitk_matmul_autotune stored for this device and class,
   * unless a configuration is being forced for measuring. */
  if (kind != JK_MM_SIMT && e->has_device && getenv("JITK_MM_KIND") == NULL &&
      getenv("JITK_MM_SCHEDULE") == NULL && getenv("JITK_MM_TILE") == NULL &&
      getenv("JITK_MM_SWAP") == NULL) {
    char key[512], choice[128];
    bool found = false;
    jk_mm_tuning_key(p, kind, key, sizeof key);
    jk_tuning_get(e, key, choice, sizeof choice, &found);
    if (found) p->tuned = jk_mm_choice_parse(p, kind, choice);
  }
  const char *tile = getenv("JITK_MM_TILE");
  int tbn, tar, tst;
  if (tile != NULL && sscanf(tile, "%dx%dx%d", &tbn, &tar, &tst) == 3 &&
      jk_mm_choice_fits(p, kind, tbn, tar, tst, tbn == 128 && p->pingpong, p->swap)) {
    p->bn = tbn;
    p->arow = tar;
    p->stages = tst;
    p->pingpong = tbn == 128 && p->pingpong;
  }
  /* Clusters of two blocks sharing each B tile (JITK_MM_CLUSTER=2), for
   * measuring. */
  const char *cl = getenv("JITK_MM_CLUSTER");
  p->cluster = cl != NULL && strcmp(cl, "2") == 0 ? 2 : 1;
  /* wgmma kernels are launched as programmatic dependents (their blocks
   * set up while the kernel before them on the stream finishes, and wait
   * for it before touching memory: matmul_sm90.cuh), where the driver has
   * cuLaunchKernelEx; JITK_MM_PDL=0 launches them plainly, for measuring. */
  p->pdl = kind == JK_MM_WGMMA && jk_cu_has_launch_ex(&e->drv) && !knob_off("JITK_MM_PDL");
  st = choose_split(p, kind);
  /* A split swapped tf32 kernel keeps to 128 columns, which leave the
   * registers the fix-up needs besides the A fragments (ptxas spilled
   * 568 bytes of a split 256-column one). */
  if (st == JITK_OK && p->swap && p->bn == 256 && p->split > 1 && p->d.a_dtype == JITK_FLOAT32) {
    p->bn = 128;
    p->stages = jk_mm_swap_default_stages(p->bn);
  }
  if (st == JITK_OK) st = jk_mm_build(p, kind, acc, &p->main);
  if (st != JITK_OK) {
    jitk_matmul_destroy(p);
    return st;
  }
  *out = p;
  return JITK_OK;
}

jitk_status jitk_matmul_source(jitk_matmul *p, const char **source) {
  if (p == NULL || source == NULL)
    return jk_fail(p ? p->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                   "jitk_matmul_source: an argument is NULL");
  *source = p->main.source;
  return JITK_OK;
}

jitk_status jitk_matmul_describe(jitk_matmul *p, char *buf, size_t size) {
  if (p == NULL || buf == NULL || size == 0)
    return jk_fail(p ? p->engine : NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_describe: %s",
                   size == 0 && p != NULL && buf != NULL ? "size is 0, which holds no text"
                                                         : "an argument is NULL");
  const jk_mm_spec *s = &p->main.spec;
  const jitk_matmul_desc *d = &p->d;
  bool tf32 = s->a == JITK_FLOAT32;
  if (s->kind == JK_MM_WGMMA && is_fp8(s->a))
    /* 8-bit inputs: 128 of them in the 128 bytes of K a stage holds. */
    snprintf(
        buf, size,
        "tensor cores %s x %s m64nNk32 (wgmma, sm_90a), float32 accumulation (%s), tile "
        "128x%dx128, %d stages (TMA), persistent, 1 producer and 2 consumer warpgroups "
        "(%s), A row-major, B column-major, D %s stored %s%s%s%s%s; %lld x %lld x %lld, "
        "batch %lld",
        jk_dtype(s->a)->name, jk_dtype(s->b)->name,
        s->promote ? "each K-tile's sum promoted to a separate float32 sum"
                   : "fast: the tensor cores' accumulator over the whole K",
        s->bn, s->stages, s->pingpong ? "ping-pong" : "cooperative", jk_dtype(s->d)->name,
        s->d_row ? "by TMA where aligned, else in rows through shared memory" : "from registers",
        s->a_scale ? ", scale A" : "", s->b_scale ? ", scale B" : "", s->d_scale ? ", scale D" : "",
        s->amax ? ", amax D" : "", (long long)d->m, (long long)d->n, (long long)d->k,
        (long long)d->batch);
  else if (s->kind == JK_MM_WGMMA)
    snprintf(buf, size,
             "tensor cores %s %s (wgmma, sm_90a), float32 accumulation, tile 128x%dx%d, %d stages "
             "(TMA), persistent, 1 producer and 2 consumer warpgroups (%s), A %s-major%s, B "
             "%s-major%s, D stored %s; %lld x %lld x %lld, batch %lld",
             tf32 ? "tf32" : jk_dtype(s->a)->name, tf32 ? "m64nNk8" : "m64nNk16", s->bn,
             128 / (tf32 ? 4 : 2), s->stages, s->pingpong ? "ping-pong" : "cooperative",
             order_name(d->a_order), jk_mm_transposes_a(s) ? " (transposed first)" : "",
             order_name(d->b_order), jk_mm_transposes_b(s) ? " (transposed first)" : "",
             s->d_row && !s->swap ? "by TMA where aligned, else in rows through shared memory"
                                  : "from registers",
             (long long)d->m, (long long)d->n, (long long)d->k, (long long)d->batch);
  else if (s->kind == JK_MM_MMA)
    snprintf(buf, size,
             "tensor cores %s %s (mma.sync), float32 accumulation, tile 128x%dx%d, %d stages "
             "(cp.async), 8 warps, A %s-major, B %s-major; %lld x %lld x %lld, batch %lld",
             tf32 ? "tf32" : jk_dtype(s->a)->name, tf32 ? "m16n8k8" : "m16n8k16", s->bn,
             s->arow / (tf32 ? 4 : 2), s->stages, order_name(d->a_order), order_name(d->b_order),
             (long long)d->m, (long long)d->n, (long long)d->k, (long long)d->batch);
  else if (s->ffma > 0) {
    const jk_mm_ffma_tile *t = jk_mm_ffma_tile_at(s->ffma);
    snprintf(buf, size,
             "FFMA (simt) float32, float32 accumulation, tile 128x%dx16, %dx%d per thread, %d "
             "threads, %d stages (cp.async), A %s-major, B %s-major; %lld x %lld x %lld, batch "
             "%lld",
             t->bn, 128 / t->wm / t->lr, t->bn / t->wn / (32 / t->lr), jk_mm_threads(s), s->stages,
             order_name(d->a_order), order_name(d->b_order), (long long)d->m, (long long)d->n,
             (long long)d->k, (long long)d->batch);
  } else
    snprintf(buf, size,
             "FFMA (simt) %s%s%s, %s accumulation, tile 128x128x%d, 8x8 per thread, 256 threads, "
             "A %s-major, B %s-major; %lld x %lld x %lld, batch %lld",
             jk_dtype(s->a)->name, s->b != s->a ? " x " : "",
             s->b != s->a ? jk_dtype(s->b)->name : "", jk_dtype(s->acc)->name,
             s->acc == JITK_FLOAT64 ? 8 : 16, order_name(d->a_order), order_name(d->b_order),
             (long long)d->m, (long long)d->n, (long long)d->k, (long long)d->batch);
  size_t used = strlen(buf);
  if (s->swap && used + 1 < size)
    snprintf(buf + used, size - used,
             "; A and B swapped (D^T = B^T A^T: N along the tile's 128 rows, M along its %d "
             "columns)",
             s->bn);
  used = strlen(buf);
  if (s->aph > 0 && used + 1 < size)
    snprintf(buf + used, size - used,
             "; A read in place by %d row phases (rows %d apart a tile, D's rows stored by the "
             "threads)",
             s->aph, s->aph);
  used = strlen(buf);
  if (s->feed && used + 1 < size)
    snprintf(buf + used, size - used,
             "; B copied onto 16 bytes by the kernel's own idle warps as its MMAs run");
  used = strlen(buf);
  if (s->kind == JK_MM_WGMMA && s->cluster > 1 && used + 1 < size)
    snprintf(buf + used, size - used, "; clusters of %d blocks sharing B (TMA multicast)",
             s->cluster);
  used = strlen(buf);
  if (p->main.splits > 1 && used + 1 < size)
    snprintf(buf + used, size - used, "; split-K %d (K-tiles of %d, %s)", p->main.splits,
             jk_mm_ktile(s),
             jk_mm_fixup(s) ? "float32 workspace, summed by a fix-up kernel"
             : s->csplit ? "a cluster of blocks a tile, summed in shared memory across the cluster"
                         : "float32 workspace, summed by each tile's last slice");
  used = strlen(buf);
  if (p->tuned && used + 1 < size) snprintf(buf + used, size - used, "; tuned");
  return JITK_OK;
}
