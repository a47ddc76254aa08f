/*
 * Executing a matmul plan: checking the operands, packing the parameters
 * (and, for wgmma, encoding the operands' tensor maps, transposing a tf32
 * operand the tensor cores cannot read as it lies, copying one whose rows
 * are off 16 bytes) and launching; an mma.sync plan that meets misaligned
 * pointers compiles its FFMA twin once and uses that.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array/array.h"
#include "kernels/matmul.h"

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* A pooled buffer of a * b * c * d bytes (plus `extra`) on `stream` for
 * `what`, refused where that product passes what a size_t holds: the
 * factors come from the plan's shape, whose batches may overlap (a batch
 * stride of 1 is allowed), so that batches and slices multiply without
 * any memory behind them. */
static jitk_status temp_alloc_n(jitk_matmul *p, jitk_stream stream, const char *what, uint64_t a,
                                uint64_t b, uint64_t c, uint64_t d, size_t extra, void **out) {
  uint64_t n = 0;
  *out = NULL;
  if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
      __builtin_mul_overflow(n, d, &n) || __builtin_add_overflow(n, (uint64_t)extra, &n) ||
      n > SIZE_MAX)
    return jk_fail(p->engine, JITK_ERR_OUT_OF_MEMORY,
                   "matmul %s: %s would take %llu x %llu x %llu x %llu bytes, more than any "
                   "memory holds",
                   p->name, what, (unsigned long long)a, (unsigned long long)b,
                   (unsigned long long)c, (unsigned long long)d);
  return jk_temp_alloc(p->engine, (size_t)n, stream, out);
}

static CUtensorMapDataType map_type(jitk_dtype t) {
  switch (t) {
    case JITK_FLOAT16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case JITK_BFLOAT16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case JITK_FLOAT64: return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    /* TMA only moves the bytes; the wgmma reads them as 8-bit floats. */
    case JITK_FLOAT8_E4M3:
    case JITK_FLOAT8_E5M2: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    default: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
}

/* A 3-D tensor map over p (dims innermost first, strides of dims 1 and 2
 * in bytes) whose box is b0 x b1 x 1, 128-byte swizzled, as
 * matmul_sm90.cuh reads and writes its tiles. `promote`: whether L2
 * fetches 256 bytes around each line a box reads. */
static CUresult encode_map(jitk_engine *e, CUtensorMap *m, jitk_dtype t, const void *p, uint64_t d0,
                           uint64_t d1, uint64_t d2, uint64_t s1, uint64_t s2, uint32_t b0,
                           uint32_t b1, bool promote) {
  cuuint64_t dims[3] = {d0, d1, d2}, strides[2] = {s1, s2};
  cuuint32_t box[3] = {b0, b1, 1}, unit[3] = {1, 1, 1};
  return jk_cu_tensor_map(
      e, m, map_type(t), 3, (void *)p, dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B,
      promote ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_NONE,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* Rounds n elements of `es` bytes up to whole runs of `bytes` bytes: 16
 * (what TMA needs of a leading dimension), or 128, a line, on which the
 * rows of every copy the plan makes of an operand start (see
 * jk_mm_line_pays). */
static uint64_t round_bytes(uint64_t n, uint64_t es, uint64_t bytes) {
  const uint64_t ch = bytes / es;
  return (n + ch - 1) / ch * ch;
}

/* Whether copying a row-major B (K x N, elements of es bytes, per batch)
 * onto rows of whole 128-byte lines pays, its rows being 16-byte aligned
 * but off the lines: TMA then reads each 128-byte row of a box from two
 * lines. bf16 on the H200 (docs/PERFORMANCE.md, 2026-12-03, evening),
 * each against the aligned neighbour: 4096 x 4104 x 4096 ran at 0.64 of
 * it, 16384 x 4104 x 1024 at 0.68, 8192 x 50264 x 1024 at 0.70, and with
 * B copied first at 0.81, 0.89 and 0.93. The copy reads and writes B once
 * (about 3 TB/s); at M = 2048 (8200 x 4096) it cost more than it saved
 * (0.77 of the aligned shape against 0.83 read as it is), so it is made
 * when it costs under a tenth of the product at the tensor cores' pace
 * (600 TFLOP/s for 16-bit inputs, twice that for 8-bit), M of about 4000
 * and more for 16-bit inputs: decode shapes, which read B once anyway,
 * keep it as it is. A row-major A whose K is off the lines lost less than
 * its copy cost (4096 x 4096 x 4104: 664 TFLOP/s as it is, 606 copied),
 * and is read as it is. JITK_MM_LINES=0 turns the copies off, for
 * measuring. */
bool jk_mm_line_pays(const jitk_matmul *p, uint64_t ldb, uint64_t es) {
  /* Rows on lines, the common case, cost no look at the environment. */
  if ((ldb * es) % 128 == 0) return false;
  const char *env = getenv("JITK_MM_LINES");
  if (env != NULL && strcmp(env, "0") == 0) return false;
  const double rate = es == 1 ? 1.2e9 : 6e8; /* FLOP a microsecond */
  const double m = (double)p->d.m, n = (double)p->d.n, k = (double)p->d.k;
  return 2.0 * k * n * (double)es / 3e6 < 0.1 * 2.0 * m * n * k / rate;
}

/* A pooled transpose of x (each batch's R x C row-major matrix, leading
 * dimension ld, batch stride sx, elements of es bytes: float32, or 16-bit
 * for a swapped plan's A) made by the plan's "_tr" kernel on `stream`,
 * with leading dimension *ldt (R rounded up to 128 bytes) and batch stride
 * C * *ldt; *t is freed by the caller with jk_temp_free. */
static jitk_status transpose_first(jitk_matmul *p, const mm_kernel *k, CUstream stream,
                                   const void *x, uint64_t R, uint64_t C, uint64_t ld, uint64_t sx,
                                   uint64_t es, void **t, uint64_t *ldt) {
  jitk_engine *e = p->engine;
  const uint64_t nb = (uint64_t)p->d.batch;
  *t = NULL;
  *ldt = round_bytes(R, es, 128);
  jitk_status st =
      temp_alloc_n(p, (jitk_stream)stream, "the transpose of an operand", nb, C, *ldt, es, 0, t);
  if (st != JITK_OK) return st;
  long long args[5] = {(long long)R, (long long)C, (long long)ld, (long long)sx, (long long)*ldt};
  void *kp[7] = {(void *)&x, t, &args[0], &args[1], &args[2], &args[3], &args[4]};
  const uint64_t gy = ceil_div(R, 64); /* the kernel steps over rows past 65535 tiles */
  return jk_launch_fn(e, (jitk_stream)stream, k->tr, "the tf32 operand transpose",
                      (unsigned int)ceil_div(C, 64), (unsigned int)(gy < 65535 ? gy : 65535),
                      (unsigned int)nb, 256, 1, 1, 0, kp);
}

bool jk_mm_tma_ready(const void *p, uint64_t ld, uint64_t sx, uint64_t nb, uint64_t es) {
  return ((uintptr_t)p & 15) == 0 && (ld * es) % 16 == 0 && (nb == 1 || (sx * es) % 16 == 0);
}

/* An operand the plan's "_pad" kernel copies: x, each batch's R x C
 * row-major matrix (leading dimension ld, batch stride sx), into y,
 * whose rows start on 128-byte lines (leading dimension ldy, batch stride
 * R * ldy). R = 0: no operand. */
typedef struct pad_job {
  const void *x;
  void *y;
  uint64_t R, C, ld, sx, ldy;
} pad_job;

/* The pooled buffer of job j's copy, elements of es bytes: j->y and
 * j->ldy. j->y is freed by the caller with jk_temp_free. */
static jitk_status pad_alloc(jitk_matmul *p, CUstream stream, pad_job *j, uint64_t es) {
  j->y = NULL;
  j->ldy = round_bytes(j->C, es, 128);
  return temp_alloc_n(p, (jitk_stream)stream, "the copy of an operand", (uint64_t)p->d.batch, j->R,
                      j->ldy, es, 0, &j->y);
}

/* What a kernel that copies its B itself (jk_mm_spec's feed) is told:
 * matmul_sm90.cuh's feed_args, field for field (strides in bytes). */
typedef struct feed_args {
  const void *b;
  void *bf;
  long long ldb, sb, ldf;
  unsigned int *count;
  unsigned int units, segs, chunks, k, row_bytes;
} feed_args;
_Static_assert(sizeof(feed_args) == 72, "feed_args as the kernel declares it");

/* B's copy for a kernel that makes it itself (job j: B, each batch's K x
 * N row-major), elements of es bytes, after its counters (f->count: a
 * ticket, then one per 64 rows of each batch), which a clear on `stream`
 * zeroes; j->y and j->ldy as pad_alloc sets them. f->count is the pooled
 * allocation, freed by the caller with jk_temp_free. */
static jitk_status feed_alloc(jitk_matmul *p, CUstream stream, pad_job *j, uint64_t es,
                              feed_args *f) {
  const uint64_t nb = (uint64_t)p->d.batch, chunks = ceil_div(j->R, 64),
                 segs = ceil_div(j->C * es, JK_MM_FEED_SEG);
  const size_t counts = (size_t)((1 + nb * chunks) * 4 + 255) / 256 * 256;
  void *mem = NULL;
  j->y = NULL;
  j->ldy = round_bytes(j->C, es, 128);
  jitk_status st = temp_alloc_n(p, (jitk_stream)stream, "the copy of an operand", nb, j->R, j->ldy,
                                es, counts, &mem);
  if (st != JITK_OK) return st;
  j->y = (char *)mem + counts;
  *f = (feed_args){.b = j->x,
                   .bf = j->y,
                   .ldb = (long long)(j->ld * es),
                   .sb = (long long)(j->sx * es),
                   .ldf = (long long)(j->ldy * es),
                   .count = mem,
                   .units = (unsigned int)(segs * j->R * nb),
                   .segs = (unsigned int)segs,
                   .chunks = (unsigned int)chunks,
                   .k = (unsigned int)j->R,
                   .row_bytes = (unsigned int)(j->C * es)};
  jk_launch_op clear = {.name = p->name, .clear = mem, .clear_bytes = counts};
  st = jk_launch_ops(p->engine, (jitk_stream)stream, &clear, 1);
  if (st != JITK_OK) {
    jk_temp_free(p->engine, mem, (jitk_stream)stream);
    f->count = NULL;
    j->y = NULL;
  }
  return st;
}

/* Copies the operands of jobs j0 and j1 (either with R = 0: none) in one
 * launch of the "_pad" kernel on `stream`: one launch's ramp and tail
 * where A and B are both copied, not two. A single operand goes first,
 * and the grid's z then covers its batches only, so that no block is
 * launched for the absent one. */
static jitk_status pad_launch(jitk_matmul *p, const mm_kernel *k, CUstream stream,
                              const pad_job *j0, const pad_job *j1, uint64_t es) {
  const uint64_t nb = (uint64_t)p->d.batch;
  long long args[2][5], batches = (long long)nb;
  const pad_job *jobs[2] = {j0->R > 0 ? j0 : j1, j0->R > 0 ? j1 : j0};
  void *kp[15];
  uint64_t chunks = 0, rows = 0;
  for (int i = 0; i < 2; i++) {
    const pad_job *j = jobs[i];
    const uint64_t vals[5] = {j->R, j->C, j->ld, j->sx, j->ldy};
    for (int v = 0; v < 5; v++) args[i][v] = (long long)vals[v];
    kp[7 * i] = (void *)&j->x;
    kp[7 * i + 1] = (void *)&j->y;
    for (int v = 0; v < 5; v++) kp[7 * i + 2 + v] = &args[i][v];
    const uint64_t c = ceil_div(j->C * es, 16);
    chunks = c > chunks ? c : chunks;
    rows = j->R > rows ? j->R : rows;
  }
  kp[14] = &batches;
  /* Each block copies four chunks of 16 bytes of a row a thread; the
   * grid's z runs over the operands' batches (the kernel's loop over z
   * reaches the second operand's only when it is there). */
  const uint64_t gx = ceil_div(chunks, 4 * JK_MM_PAD_THREADS), gz = (jobs[1]->R > 0 ? 2 : 1) * nb;
  return jk_launch_fn(
      p->engine, (jitk_stream)stream, k->pad, "the copy of an operand onto 16 bytes",
      (unsigned int)(gx < 65535 ? gx : 65535), (unsigned int)(rows < 65535 ? rows : 65535),
      (unsigned int)(gz < 65535 ? gz : 65535), JK_MM_PAD_THREADS, 1, 1, 0, kp);
}

/* The tensor maps of an A read by phases (matmul_sm90.cuh's phase_tile):
 * map p covers rows p, p + aph, ... of each batch's row-major M x K A
 * (leading dimension lda, batch stride sa, in elements), from the 16 bytes
 * that hold its first row's element 0, `shift` elements before it:
 * columns 0 .. K + shift - 1, rows aph lda elements apart (16 lda bytes),
 * boxes of 128 bytes of k by 128 rows. Each phase's shift goes into 4
 * bits of *ashift. The plan reads by phases only where M >= aph, so no
 * phase is empty, and where a batch's A starts on the same bytes of 16
 * as the first's. */
static CUresult phase_maps(jitk_engine *e, const jk_mm_spec *s, const void *a, uint64_t M,
                           uint64_t K, uint64_t nb, uint64_t lda, uint64_t sa, CUtensorMap *maps,
                           unsigned int *ashift) {
  const uint64_t es = jk_dtype(s->a)->size, ph = (uint64_t)s->aph;
  CUresult r = CUDA_SUCCESS;
  *ashift = 0;
  for (uint64_t p = 0; p < ph && r == CUDA_SUCCESS; p++) {
    const uint64_t shift = ((uintptr_t)a / es + p * lda) % ph;
    const void *base = (const void *)((uintptr_t)a + p * lda * es - shift * es);
    r = encode_map(e, &maps[p], s->a, base, K + shift, (M - p + ph - 1) / ph, nb, ph * lda * es,
                   sa * es, (uint32_t)(128 / es), 128, true);
    *ashift |= (unsigned int)shift << (4 * p);
  }
  return r;
}

/* The wgmma launch: tensor maps of A and B (for tf32, a column-major A or
 * a row-major B transposed first into pooled buffers) and, where TMA can
 * store it, D; one resident block per multiprocessor working through all
 * tiles. */
static jitk_status launch_wgmma(jitk_matmul *p, const mm_kernel *k, CUstream stream, const void *a,
                                const void *b, void *d, void **kp, int np, unsigned int tm,
                                unsigned int tn) {
  jitk_engine *e = p->engine;
  const jitk_matmul_desc *ds = &p->d;
  const jk_mm_spec *s = &k->spec;
  const uint64_t es = jk_dtype(s->a)->size, des = jk_dtype(s->d)->size;
  const uint64_t M = (uint64_t)ds->m, N = (uint64_t)ds->n, K = (uint64_t)ds->k,
                 nb = (uint64_t)ds->batch;
  const uint64_t splits = (uint64_t)k->splits;
  /* With clusters, a work item is a group of `cl` tile-rows, one a block. */
  const unsigned int cl = s->cluster > 1 ? (unsigned int)s->cluster : 1u;
  uint64_t work64 = (uint64_t)((tm + cl - 1) / cl) * tn * nb * splits;
  if (work64 > UINT32_MAX)
    return jk_fail(e, JITK_ERR_UNSUPPORTED, "matmul %s: more than 2^32 tiles", p->name);
  unsigned int work = (unsigned int)work64;
  int use_td = 0;
  CUtensorMap maps[3], amaps[JK_MM_MAX_PHASES];
  memset(maps, 0, sizeof maps);
  unsigned int ashift = 0;
  void *at = NULL, *bt = NULL;
  const void *ak = a, *bk = b; /* A and B as the kernel reads them */
  uint64_t lda = (uint64_t)ds->lda, sa = (uint64_t)ds->stride_a;
  uint64_t ldb = (uint64_t)ds->ldb, sb = (uint64_t)ds->stride_b;
  bool a_k = s->a_k, b_n = s->b_n;
  CUresult r = CUDA_SUCCESS;
  jitk_status st = JITK_OK;
  /* Operands whose rows are off 16 bytes (or, for a row-major B, off the
   * lines where that pays) are copied onto lines first, both in one
   * launch; tf32's transposes run after that copy. */
  pad_job ja = {0}, jb = {0};
  const bool tr_a = jk_mm_transposes_a(s), tr_b = jk_mm_transposes_b(s);
  /* An A read by phases is read where it is (phase_maps). */
  if (!tr_a && s->aph == 0 && !jk_mm_tma_ready(a, lda, sa, nb, es))
    ja = (pad_job){a, NULL, a_k ? M : K, a_k ? K : M, lda, sa, 0};
  if (!tr_b && (!jk_mm_tma_ready(b, ldb, sb, nb, es) || (b_n && jk_mm_line_pays(p, ldb, es))))
    jb = (pad_job){b, NULL, b_n ? K : N, b_n ? N : K, ldb, sb, 0};
  /* A kernel that copies B itself copies it at every execution: the
   * plan gives it one only where B's rows are off 16 bytes. */
  feed_args fa = {0};
  const pad_job none = {0};
  if (s->feed && jb.R == 0) {
    st = jk_fail(e, JITK_ERR_INTERNAL, "matmul %s: the kernel copies a B that needs no copy",
                 p->name);
    goto done;
  }
  if (ja.R > 0) st = pad_alloc(p, stream, &ja, es);
  if (st == JITK_OK && jb.R > 0)
    st = s->feed ? feed_alloc(p, stream, &jb, es, &fa) : pad_alloc(p, stream, &jb, es);
  at = ja.y;
  bt = s->feed ? (void *)fa.count : jb.y;
  if (st == JITK_OK && (ja.R > 0 || (jb.R > 0 && !s->feed)))
    st = pad_launch(p, k, stream, &ja, s->feed ? &none : &jb, es);
  if (st == JITK_OK && ja.R > 0) {
    ak = ja.y;
    lda = ja.ldy;
    sa = ja.R * lda;
  }
  if (st == JITK_OK && jb.R > 0) {
    bk = jb.y;
    ldb = jb.ldy;
    sb = jb.R * ldb;
  }
  if (st == JITK_OK && tr_a) { /* A[k * lda + m] into A'[m * ldt + k] */
    st = transpose_first(p, k, stream, a, K, M, lda, sa, es, &at, &lda);
    ak = at;
    sa = M * lda;
    a_k = true;
  }
  if (st == JITK_OK && tr_b) { /* B[k * ldb + n] into B'[n * ldt + k] */
    st = transpose_first(p, k, stream, b, K, N, ldb, sb, es, &bt, &ldb);
    bk = bt;
    sb = N * ldb;
    b_n = false;
  }
  if (st != JITK_OK) goto done;
  /* A single matrix's batch stride is never followed; TMA still checks
   * it. */
  if (nb == 1) {
    sa = round_bytes(lda, es, 16) * (a_k ? M : K);
    sb = round_bytes(ldb, es, 16) * (b_n ? K : N);
  }
  /* L2 fetches 256 bytes around each line TMA reads, except for the
   * swapped (decode) kernels, which stream B once at the memory's pace: there
   * the wider fetches made reading an 8192 x 8192 B 5-10 % slower (bf16, M
   * = 1 to 64, back to back on the H200: 34.7-35.9 us a call without them
   * against 37.6-38.4 with them; docs/PERFORMANCE.md), while the products
   * that reuse their tiles measured the same either way. */
  const bool promote = !s->swap;
  if (s->swap) {
    /* D^T = B^T A^T: the kernel's A is B, K-major when B is column-major
     * (boxes of 128 n by 128 bytes of k), else N-major (boxes of 128
     * bytes of n by as many k: 64 by 64 for 16-bit inputs, 32 by 32 for
     * tf32); its B is A, K-major now (boxes of bn m by 128 bytes of k). */
    if (!b_n)
      r = encode_map(e, &maps[0], s->b, bk, K, N, nb, ldb * es, sb * es, (uint32_t)(128 / es), 128,
                     promote);
    else
      r = encode_map(e, &maps[0], s->b, bk, N, K, nb, ldb * es, sb * es, (uint32_t)(128 / es),
                     (uint32_t)(128 / es), promote);
    if (r == CUDA_SUCCESS)
      r = encode_map(e, &maps[1], s->a, ak, K, M, nb, lda * es, sa * es, (uint32_t)(128 / es),
                     (uint32_t)s->bn, promote);
  } else if (s->aph > 0) {
    r = phase_maps(e, s, a, M, K, nb, lda, sa, amaps, &ashift);
  } else if (a_k) /* K-major: one box of 128 m by 128 bytes of k */
    r = encode_map(e, &maps[0], s->a, ak, K, M, nb, lda * es, sa * es, (uint32_t)(128 / es), 128,
                   promote);
  else /* M-major: boxes of 64 m by 64 k */
    r = encode_map(e, &maps[0], s->a, ak, M, K, nb, lda * es, sa * es, 64, 64, promote);
  if (r == CUDA_SUCCESS && !s->swap) {
    if (b_n) /* N-major: boxes of 64 n by 64 k */
      r = encode_map(e, &maps[1], s->b, bk, N, K, nb, ldb * es, sb * es, 64, 64, promote);
    else /* K-major: boxes of bn n (a cluster's share of them) by 128 bytes of k */
      r = encode_map(e, &maps[1], s->b, bk, K, N, nb, ldb * es, sb * es, (uint32_t)(128 / es),
                     (uint32_t)s->bn / cl, promote);
  }
  /* D through TMA when row-major with 16-byte aligned rows. A swapped
   * kernel stores from registers (its tiles' rows are D's columns). */
  uint64_t ldd = (uint64_t)ds->ldd * des, sd = nb > 1 ? (uint64_t)ds->stride_d * des : ldd * M;
  if (s->swap || s->aph > 0) {
    /* no tensor map of D: a swapped kernel's tiles' rows are D's columns,
     * and a tile read by phases has D's rows aph apart */
  } else if (r == CUDA_SUCCESS && s->d_row &&
             jk_mm_tma_ready(d, (uint64_t)ds->ldd, (uint64_t)ds->stride_d, nb, des) &&
             encode_map(e, &maps[2], s->d, d, N, M, nb, ldd, sd, (uint32_t)(128 / des), 64,
                        promote) == CUDA_SUCCESS) {
    use_td = 1;
  }
  if (r != CUDA_SUCCESS) {
    st = jk_cuda_fail(e, r, "cuTensorMapEncodeTiled");
    goto done;
  }
  /* A read by phases: one parameter of its aph maps, and the shifts
   * after the others. */
  kp[np++] = s->aph > 0 ? (void *)amaps : (void *)&maps[0];
  for (int i = 1; i < 3; i++) kp[np++] = &maps[i];
  kp[np++] = &work;
  kp[np++] = &use_td;
  if (s->aph > 0) kp[np++] = &ashift;
  if (s->feed) kp[np++] = &fa;
  unsigned int sms = (unsigned int)e->info.multiprocessors / cl;
  jk_launch_op op = {.fn = k->fn,
                     .name = p->name,
                     .grid = {(work < sms ? work : sms) * cl, 1, 1},
                     .block = {384, 1, 1},
                     .shared = (unsigned int)k->smem,
                     .params = kp,
                     .cluster = {cl > 1 ? cl : 0, cl > 1 ? 1 : 0, cl > 1 ? 1 : 0},
                     .pdl = p->pdl};
  st = jk_launch_ops(e, (jitk_stream)stream, &op, 1);
done:
  if (at != NULL) jk_temp_free(e, at, (jitk_stream)stream);
  if (bt != NULL) jk_temp_free(e, bt, (jitk_stream)stream);
  return st;
}

/* Refuses a pointer that is not aligned to the elements the kernels read
 * or write through it as dtype `dt`: the GPU faults on a misaligned
 * element, and the fault ends the CUDA context. */
static jitk_status check_aligned(const jitk_matmul *p, const void *ptr, jitk_dtype dt,
                                 const char *what) {
  if (JK_LIKELY(jk_dtype_aligned(ptr, dt))) return JITK_OK;
  return jk_fail(p->engine, JITK_ERR_INVALID_ARGUMENT,
                 "matmul %s: %s (%p) is not aligned to %zu bytes, as %s elements must be", p->name,
                 what, ptr, jk_dtype(dt)->align, jk_dtype(dt)->name);
}

/* Every pointer of an execution aligned to the elements read or written
 * through it (check_aligned). */
static jitk_status check_pointers(const jitk_matmul *p, const jitk_matmul_operands *o) {
  const jitk_matmul_desc *d = &p->d;
  jitk_status st = check_aligned(p, o->a, d->a_dtype, "A");
  if (st == JITK_OK) st = check_aligned(p, o->b, d->b_dtype, "B");
  if (st == JITK_OK && d->has_c) st = check_aligned(p, o->c, d->c_dtype, "C");
  if (st == JITK_OK) st = check_aligned(p, o->d, d->d_dtype, "D");
  /* The outputs' and reductions' names go into a label only for the
   * message, not at every execution. */
  char what[96];
  for (size_t i = 0; st == JITK_OK && i < p->num_outs; i++)
    if (!jk_dtype_aligned(o->outputs[i], p->outs[i].dtype)) {
      snprintf(what, sizeof what, "output `%s`", p->outs[i].name);
      st = check_aligned(p, o->outputs[i], p->outs[i].dtype, what);
    }
  for (size_t i = 0; st == JITK_OK && i < p->num_reds; i++)
    if (!jk_dtype_aligned(o->reductions[i], p->reds[i].dtype)) {
      snprintf(what, sizeof what, "reduction `%s`", p->reds[i].name);
      st = check_aligned(p, o->reductions[i], p->reds[i].dtype, what);
    }
  if (st == JITK_OK && d->has_a_scale) st = check_aligned(p, o->a_scale, JITK_FLOAT32, "a_scale");
  if (st == JITK_OK && d->has_b_scale) st = check_aligned(p, o->b_scale, JITK_FLOAT32, "b_scale");
  if (st == JITK_OK && d->has_d_scale) st = check_aligned(p, o->d_scale, JITK_FLOAT32, "d_scale");
  if (st == JITK_OK && d->has_amax_d) st = check_aligned(p, o->amax_d, JITK_FLOAT32, "amax_d");
  return st;
}

/* What execute and autotune both require: a plan, a device, the
 * epilogue's operand count, and the matrices' pointers, each aligned to
 * its elements. */
jitk_status jk_mm_check_operands(jitk_matmul *p, const char *who, const jitk_matmul_operands *o) {
  if (JK_UNLIKELY(p == NULL || o == NULL))
    return jk_fail(p ? p->engine : NULL, JITK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who,
                   p == NULL ? "plan" : "operands");
  jitk_engine *e = p->engine;
  jitk_status st = jk_require_device(e, who);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  if (JK_UNLIKELY(o->num_extra != p->params.count || (o->num_extra > 0 && o->extra == NULL)))
    return jk_fail(e, JITK_ERR_ARGUMENT_COUNT,
                   "matmul %s: the epilogue takes %zu operands, not %zu", p->name, p->params.count,
                   o->num_extra);
  /* A matrix with no elements may be NULL, as an empty array's data is
   * in CuPy and PyTorch: nothing reads or writes it. */
  const jitk_matmul_desc *d = &p->d;
  const bool no_a = d->m == 0 || d->k == 0, no_b = d->k == 0 || d->n == 0,
             no_d = d->m == 0 || d->n == 0;
  if (JK_UNLIKELY((o->a == NULL && !no_a) || (o->b == NULL && !no_b) || (o->d == NULL && !no_d) ||
                  (d->has_c && o->c == NULL && !no_d)))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT, "matmul %s: a matrix pointer is NULL", p->name);
  for (size_t i = 0; i < p->num_outs; i++)
    if (JK_UNLIKELY(o->outputs == NULL || o->outputs[i] == NULL))
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "matmul %s: output `%s` has no array (operands->outputs[%zu])", p->name,
                     p->outs[i].name, i);
  for (size_t i = 0; i < p->num_reds; i++)
    if (JK_UNLIKELY(o->reductions == NULL || o->reductions[i] == NULL))
      return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                     "matmul %s: reduction `%s` has no array (operands->reductions[%zu])", p->name,
                     p->reds[i].name, i);
  if (JK_UNLIKELY((d->has_a_scale && o->a_scale == NULL) ||
                  (d->has_b_scale && o->b_scale == NULL) ||
                  (d->has_d_scale && o->d_scale == NULL) || (d->has_amax_d && o->amax_d == NULL)))
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul %s: the plan takes %s%s%s%s but operands->%s is NULL (execute it with "
                   "jitk_matmul_execute_ex)",
                   p->name, d->has_a_scale ? "a_scale " : "", d->has_b_scale ? "b_scale " : "",
                   d->has_d_scale ? "d_scale " : "", d->has_amax_d ? "amax_d " : "",
                   d->has_a_scale && o->a_scale == NULL   ? "a_scale"
                   : d->has_b_scale && o->b_scale == NULL ? "b_scale"
                   : d->has_d_scale && o->d_scale == NULL ? "d_scale"
                                                          : "amax_d");
  if (JK_UNLIKELY((o->alpha != NULL && !isfinite(*o->alpha)) ||
                  (o->beta != NULL && d->has_c && !isfinite(*o->beta)))) {
    const bool a = o->alpha != NULL && !isfinite(*o->alpha);
    return jk_fail(e, JITK_ERR_INVALID_ARGUMENT,
                   "matmul %s: operands->%s is %g; it must be a finite number", p->name,
                   a ? "alpha" : "beta", a ? *o->alpha : *o->beta);
  }
  return check_pointers(p, o);
}

jitk_status jitk_matmul_operands_init(jitk_matmul_operands *o) {
  if (o == NULL)
    return jk_fail(NULL, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_operands_init: operands is NULL");
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  return JITK_OK;
}

/* The kernel an execution uses: the plan's, or its FFMA twin when A or B
 * is not 16-byte aligned for mma.sync (compiled at the first such
 * execution; wgmma copies such an operand onto 16 bytes instead). */
static jitk_status pick_kernel(jitk_matmul *p, jitk_stream stream, const jitk_matmul_operands *o,
                               mm_kernel **out) {
  mm_kernel *k = &p->main;
  jitk_status st = JITK_OK;
  /* Tensor cores stage A and B in 16-byte chunks. */
  if (k->spec.kind == JK_MM_MMA && (((uintptr_t)o->a | (uintptr_t)o->b) & 15) != 0) {
    pthread_mutex_lock(&p->lock);
    bool built = p->fallback.entry != NULL, capturing = false;
    if (!built) st = jk_stream_capturing(p->engine, stream, &capturing);
    if (st == JITK_OK && capturing)
      st = jk_fail(p->engine, JITK_ERR_STREAM_CAPTURE,
                   "matmul %s: A or B is not 16-byte aligned, which takes a kernel of CUDA "
                   "cores that is not compiled yet, and the stream is capturing a CUDA graph, "
                   "during which jitk does not compile; execute the plan once with such "
                   "pointers before the capture",
                   p->name);
    if (st == JITK_OK && !built) st = jk_mm_build(p, JK_MM_SIMT, k->spec.acc, &p->fallback);
    pthread_mutex_unlock(&p->lock);
    if (st != JITK_OK) return st;
    k = &p->fallback;
  }
  *out = k;
  return JITK_OK;
}

jitk_status jitk_matmul_execute(jitk_matmul *p, jitk_stream stream, const void *a, const void *b,
                                const void *c, void *d, const jitk_arg *extra, size_t num_extra) {
  jitk_matmul_operands o;
  jitk_matmul_operands_init(&o);
  o.a = a;
  o.b = b;
  o.c = c;
  o.d = d;
  o.extra = extra;
  o.num_extra = num_extra;
  if (JK_UNLIKELY(p != NULL && (p->num_outs > 0 || p->num_reds > 0)))
    return jk_fail(p->engine, JITK_ERR_INVALID_ARGUMENT,
                   "matmul %s: the plan has outputs or reductions besides D; execute it with "
                   "jitk_matmul_execute_ex, which takes their arrays",
                   p->name);
  jitk_status st = jk_mm_check_operands(p, "jitk_matmul_execute", &o);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  if (p->d.m == 0 || p->d.n == 0) return JITK_OK;
  mm_kernel *k = NULL;
  st = pick_kernel(p, stream, &o, &k);
  if (st != JITK_OK) return st;
  return jk_mm_run_kernel(p, k, stream, &o, NULL);
}

/* The rows and columns of reduction i's workspace (per batch) with kernel
 * k: M x N terms, or where k folds them per tile (jk_mm_tile_reduces)
 * ceil(M / 16) partial rows of N over the rows, and M rows of one partial
 * per tile column over the columns or the whole matrix. */
static void work_shape(const jitk_matmul *p, const mm_kernel *k, size_t i, long long *rows,
                       long long *cols) {
  *rows = p->d.m;
  *cols = p->d.n;
  if (!jk_mm_tile_reduces(&k->spec)) return;
  if (p->reds[i].axis == JITK_REDUCE_ROWS)
    *rows = (p->d.m + 15) / 16;
  else
    *cols = (p->d.n + k->spec.bn - 1) / k->spec.bn;
}

/* Launches reduction i's kernels over its workspace w into `out`; the
 * first step over the rows writes a workspace of its own. The workspace
 * holds terms or per-tile partial results (work_shape), which reduce
 * alike. */
static jitk_status run_reduction(jitk_matmul *p, const mm_kernel *k, size_t i, jitk_stream stream,
                                 void *w, void *out) {
  jitk_engine *e = p->engine;
  const jitk_matmul_reduction *r = &p->reds[i];
  long long M = 0, N = 0;
  work_shape(p, k, i, &M, &N);
  const unsigned int B = (unsigned int)p->d.batch;
  const size_t ws = jk_dtype(jk_mm_work_dtype(k->spec.acc, r->dtype))->size;
  char what[160];
  snprintf(what, sizeof what, "the reduction `%s` of matmul %s", r->name, p->name);
  void *part = NULL;
  jitk_status st = JITK_OK;
  if (r->axis == JITK_REDUCE_ROWS) {
    if (N == 0) return JITK_OK;
    /* Chunks of at least 64 rows (of partial rows, 16), at most 65535
     * of them (a grid's y): few rows per thread in the first step, few
     * chunks in the second. */
    const long long least = jk_mm_tile_reduces(&k->spec) ? 16 : 64;
    long long chunk = M / 65535 + 1 > least ? M / 65535 + 1 : least;
    long long chunks = (M + chunk - 1) / chunk;
    const unsigned int gx = (unsigned int)ceil_div((uint64_t)N, 256);
    if (chunks > 0) {
      st = temp_alloc_n(p, stream, what, B, (uint64_t)chunks, (uint64_t)N, ws, 0, &part);
      if (st != JITK_OK) return st;
      void *kp[5] = {&w, &part, (void *)&M, (void *)&N, &chunk};
      st = jk_launch_fn(e, stream, k->red[i][0], what, gx, (unsigned int)chunks, B, 256, 1, 1, 0,
                        kp);
    }
    if (st == JITK_OK) {
      void *kp[4] = {&part, &out, &chunks, (void *)&N};
      st = jk_launch_fn(e, stream, k->red[i][1], what, gx, B, 1, 256, 1, 1, 0, kp);
    }
  } else {
    const bool all = r->axis == JITK_REDUCE_ALL;
    if (M > 0) {
      if (all) st = temp_alloc_n(p, stream, what, B, (uint64_t)M, ws, 1, 0, &part);
      void *dst = all ? part : out;
      void *kp[4] = {&w, &dst, (void *)&M, (void *)&N};
      if (st == JITK_OK)
        st = jk_launch_fn(e, stream, k->red[i][0], what, (unsigned int)ceil_div((uint64_t)M, 8), B,
                          1, 256, 1, 1, 0, kp);
    }
    if (st == JITK_OK && all) {
      void *kp[3] = {&part, &out, (void *)&M};
      st = jk_launch_fn(e, stream, k->red[i][1], what, B, 1, 1, 256, 1, 1, 0, kp);
    }
  }
  if (part != NULL) jk_temp_free(e, part, stream);
  return st;
}

jitk_status jitk_matmul_execute_ex(jitk_matmul *p, jitk_stream stream,
                                   const jitk_matmul_operands *o) {
  /* A caller compiled before the FP8 fields, or before alpha and beta,
   * passes the size up to them: its operands are read into a whole struct
   * whose new fields are NULL. */
  const size_t before_fp8 = offsetof(jitk_matmul_operands, a_scale),
               before_alpha = offsetof(jitk_matmul_operands, alpha);
  jitk_matmul_operands whole;
  if (o != NULL && o->struct_size != sizeof *o) {
    if (o->struct_size != before_fp8 && o->struct_size != before_alpha)
      return jk_fail(p ? p->engine : NULL, JITK_ERR_INVALID_ARGUMENT,
                     "jitk_matmul_execute_ex: operands->struct_size is %zu, not %zu; call "
                     "jitk_matmul_operands_init first",
                     o->struct_size, sizeof *o);
    memset(&whole, 0, sizeof whole);
    memcpy(&whole, o, o->struct_size);
    whole.struct_size = sizeof whole;
    o = &whole;
  }
  jitk_status st = jk_mm_check_operands(p, "jitk_matmul_execute_ex", o);
  if (JK_UNLIKELY(st != JITK_OK)) return st;
  jitk_engine *e = p->engine;
  const jitk_matmul_desc *ds = &p->d;
  mm_kernel *k = NULL;
  if (ds->m > 0 && ds->n > 0) st = pick_kernel(p, stream, o, &k);
  if (st != JITK_OK) return st;
  if (k == NULL) k = &p->main;
  /* Each reduction's terms, or its per-tile partial results, go to a
   * workspace of batch x work_shape. */
  void *work[JK_MM_MAX_EXTRA] = {NULL};
  const size_t mn = (size_t)ds->m * (size_t)ds->n * (size_t)ds->batch;
  for (size_t i = 0; st == JITK_OK && i < p->num_reds && mn > 0; i++) {
    long long rows = 0, cols = 0;
    work_shape(p, k, i, &rows, &cols);
    st = temp_alloc_n(p, stream, "a reduction's workspace", (uint64_t)rows, (uint64_t)cols,
                      (uint64_t)ds->batch,
                      jk_dtype(jk_mm_work_dtype(k->spec.acc, p->reds[i].dtype))->size, 0, &work[i]);
  }
  if (st == JITK_OK && mn > 0) st = jk_mm_run_kernel(p, k, stream, o, work);
  if (st == JITK_OK && mn == 0 && ds->has_amax_d) { /* the amax of nothing */
    jk_launch_op clear = {.name = p->name, .clear = o->amax_d, .clear_bytes = sizeof(float)};
    st = jk_launch_ops(e, stream, &clear, 1);
  }
  for (size_t i = 0; st == JITK_OK && i < p->num_reds; i++)
    st = run_reduction(p, k, i, stream, work[i], o->reductions[i]);
  for (size_t i = 0; i < p->num_reds; i++)
    if (work[i] != NULL) jk_temp_free(e, work[i], stream);
  return st;
}

/* Packs the parameters of kernel k of plan p and launches it. */
jitk_status jk_mm_run_kernel(jitk_matmul *p, mm_kernel *k, jitk_stream stream,
                             const jitk_matmul_operands *o, void *const *work) {
  jitk_engine *e = p->engine;
  const jitk_matmul_desc *ds = &p->d;
  jitk_status st;
  const void *a = o->a, *b = o->b, *c = o->c;
  void *d = o->d;
  const jitk_arg *extra = o->extra;
  const size_t num_extra = o->num_extra;
  /* Parameters: pointers, sizes, leading dimensions, strides, tiles, the
   * epilogue's operands, then the outputs' and the reductions' arrays. */
  _Alignas(16) unsigned char store[8 * 24 + JK_MAX_EW_PARAMS * 16 * 2 + 2 * JK_MM_MAX_EXTRA * 8];
  /* 31 at most besides the epilogue's operands (at most JK_MAX_EW_PARAMS,
   * as the plan checks), the outputs and the reductions: 4 matrices, 11
   * sizes, 2 tile counts, the 3 FP8 scales and the amax, 3 of split-K, 3
   * tensor maps, the work items, whether TMA stores D, the shifts of an A
   * read by phases and what a kernel that copies B itself is told. */
  void *kp[32 + JK_MAX_EW_PARAMS + 2 * JK_MM_MAX_EXTRA];
  int np = 0;
  unsigned char *cur = store;
  const void *cc = ds->has_c ? c : d;
  long long v[11] = {ds->m,   ds->n,        ds->k,        ds->lda,      ds->ldb,     ds->ldc,
                     ds->ldd, ds->stride_a, ds->stride_b, ds->stride_c, ds->stride_d};
  JK_PUSH(kp, np, cur, a);
  JK_PUSH(kp, np, cur, b);
  JK_PUSH(kp, np, cur, cc);
  JK_PUSH(kp, np, cur, d);
  for (int i = 0; i < 11; i++) JK_PUSH(kp, np, cur, v[i]);
  /* Tiles of the kernel's rows and columns: a swapped kernel's run along
   * N and M. */
  const uint64_t krows = (uint64_t)(k->spec.swap ? ds->n : ds->m),
                 kcols = (uint64_t)(k->spec.swap ? ds->m : ds->n);
  /* Read by phases, each phase's rows fill tiles of their own. */
  const uint64_t aph = (uint64_t)k->spec.aph;
  const uint64_t tiles_m = aph > 0 ? aph * ceil_div(ceil_div(krows, aph), JK_MM_TILE)
                                   : ceil_div(krows, JK_MM_TILE),
                 tiles_n = ceil_div(kcols, (uint64_t)jk_mm_tile_n(&k->spec));
  /* The FFMA and mma.sync kernels take a block a tile, along the grid's
   * x, which stops at 2^31 - 1 (a product past that wrapped the count). The
   * wgmma kernel's work items are counted apart. */
  if (k->spec.kind != JK_MM_WGMMA && tiles_m * tiles_n > INT32_MAX)
    return jk_fail(e, JITK_ERR_UNSUPPORTED,
                   "matmul %s: %llu x %llu tiles of D, more than one grid holds (2^31 - 1)",
                   p->name, (unsigned long long)tiles_m, (unsigned long long)tiles_n);
  unsigned int tm = (unsigned int)tiles_m, tn = (unsigned int)tiles_n;
  JK_PUSH(kp, np, cur, tm);
  JK_PUSH(kp, np, cur, tn);
  const double alpha = o->alpha != NULL ? *o->alpha : ds->alpha,
               beta = o->beta != NULL ? *o->beta : ds->beta;
  JK_PUSH(kp, np, cur, alpha);
  JK_PUSH(kp, np, cur, beta);
  for (size_t i = 0; i < num_extra; i++) {
    const jk_param_decl *pd = &p->params.params[i];
    jitk_dtype t = pd->placeholder >= 0 ? k->spec.acc : pd->dtype;
    if (pd->raw) {
      const jitk_arg *x = &extra[i];
      const void *ptr = NULL;
      if (x->kind == JITK_ARG_POINTER && x->tensor != NULL) {
        /* Memory the GPU cannot reach would fault in the kernel, and the
         * fault ends the CUDA context. */
        char what[192];
        snprintf(what, sizeof what, "matmul %s, %s", p->name, p->labels[i]);
        st = jk_tensor_reachable(e, x->tensor, what);
        if (st != JITK_OK) return st;
        ptr = (const char *)x->tensor->data + x->tensor->byte_offset;
      } else if (x->kind == JITK_ARG_POINTER) {
        ptr = x->value.ptr;
      }
      if (ptr == NULL)
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE,
                       "matmul %s: epilogue operand `%s` is an array: pass a device pointer "
                       "(jitk_arg_ptr or jitk_arg_tensor_ptr)",
                       p->name, pd->name);
      /* Read as t, whatever the argument says its dtype is. */
      st = check_aligned(p, ptr, t, p->labels[i]);
      if (st != JITK_OK) return st;
      JK_PUSH(kp, np, cur, ptr);
    } else {
      if (extra[i].kind != JITK_ARG_SCALAR)
        return jk_fail(e, JITK_ERR_ARGUMENT_TYPE, "matmul %s: epilogue operand `%s` is a scalar",
                       p->name, pd->name);
      st = jk_convert_scalar(e, &extra[i], t, cur, p->labels[i]);
      if (st != JITK_OK) return st;
      kp[np++] = cur;
      cur += 16;
    }
  }
  for (size_t i = 0; i < p->num_outs; i++) JK_PUSH(kp, np, cur, o->outputs[i]);
  for (size_t i = 0; i < p->num_reds; i++) JK_PUSH(kp, np, cur, work[i]);
  /* FP8 plans' scales and amax, as the kernel declares them. */
  if (k->spec.a_scale) JK_PUSH(kp, np, cur, o->a_scale);
  if (k->spec.b_scale) JK_PUSH(kp, np, cur, o->b_scale);
  if (k->spec.d_scale) JK_PUSH(kp, np, cur, o->d_scale);
  if (k->spec.amax) {
    JK_PUSH(kp, np, cur, o->amax_d);
    /* The kernel's blocks combine their maxima with atomicMax on the
     * zero this leaves, in stream order before them. */
    jk_launch_op clear = {.name = p->name, .clear = o->amax_d, .clear_bytes = sizeof(float)};
    st = jk_launch_ops(e, stream, &clear, 1);
    if (st != JITK_OK) return st;
  }
  if (!k->spec.split) {
    if (k->spec.kind == JK_MM_WGMMA)
      return launch_wgmma(p, k, (CUstream)stream, a, b, d, kp, np, tm, tn);
    return jk_launch_fn(e, stream, k->fn, p->name, tm * tn, (unsigned int)ds->batch, 1,
                        (unsigned int)jk_mm_threads(&k->spec), 1, 1, (unsigned int)k->smem, kp);
  }
  const unsigned int splits = (unsigned int)k->splits;
  if (k->spec.kind == JK_MM_WGMMA) {
    /* Split-K on wgmma: the slices' copies of their tiles (splits x
     * batches x tiles of 128 x bn float32, tile-rows rounded up to whole
     * clusters, as the kernel numbers them), after a counter per tile and
     * 64-row half, zeroed here; the last slice of a tile sums the copies
     * (matmul_sm90.cuh's SERIAL). */
    const uint64_t cl = k->spec.cluster > 1 ? (uint64_t)k->spec.cluster : 1;
    const uint64_t tiles = ceil_div(tm, cl) * cl * tn * (uint64_t)ds->batch;
    const size_t counts = (size_t)(tiles * 2 * sizeof(unsigned int) + 255) / 256 * 256;
    void *ws = NULL;
    st = temp_alloc_n(p, stream, "the split-K workspace", splits, tiles, 128 * (uint64_t)k->spec.bn,
                      4, counts, &ws);
    if (st != JITK_OK) return st;
    void *copies = (char *)ws + counts;
    JK_PUSH(kp, np, cur, copies);
    JK_PUSH(kp, np, cur, ws);
    JK_PUSH(kp, np, cur, splits);
    jk_launch_op clear = {.name = p->name, .clear = ws, .clear_bytes = counts};
    st = jk_launch_ops(e, stream, &clear, 1);
    if (st == JITK_OK) st = launch_wgmma(p, k, (CUstream)stream, a, b, d, kp, np, tm, tn);
    jk_temp_free(e, ws, stream);
    return st;
  }
  if (k->spec.csplit) {
    /* Split-K summed across clusters (FFMA on sm_90): the slices of a
     * tile are one cluster's blocks, which sum them in their shared
     * memory; no workspace. */
    jk_launch_op op = {.fn = k->fn,
                       .name = p->name,
                       .grid = {tm * tn, (unsigned int)ds->batch, splits},
                       .block = {(unsigned int)jk_mm_threads(&k->spec), 1, 1},
                       .shared = (unsigned int)k->smem,
                       .params = kp,
                       .cluster = {1, 1, splits},
                       .cluster_policy = k->cluster_policy};
    return jk_launch_ops(e, stream, &op, 1);
  }
  /* Split-K (FFMA, mma.sync): the slices' partial sums into a workspace of
   * splits x batches planes of M x N float32, then the fix-up kernel over
   * it, which takes the same parameters up to the reductions' and then the
   * workspace. */
  const size_t plane = (size_t)ds->m * (size_t)ds->n;
  void *ws = NULL;
  st = temp_alloc_n(p, stream, "the split-K workspace", plane, (uint64_t)ds->batch, splits,
                    sizeof(float), 0, &ws);
  if (st != JITK_OK) return st;
  JK_PUSH(kp, np, cur, ws);
  JK_PUSH(kp, np, cur, splits);
  char what[160];
  snprintf(what, sizeof what, "the split-K fix-up of matmul %s", p->name);
  st = jk_launch_fn(e, stream, k->fn, p->name, tm * tn, (unsigned int)ds->batch, splits,
                    (unsigned int)jk_mm_threads(&k->spec), 1, 1, (unsigned int)k->smem, kp);
  if (st == JITK_OK) {
    unsigned int rows = ds->m < 65535 ? (unsigned int)ds->m : 65535;
    st = jk_launch_fn(e, stream, k->fix, what, (unsigned int)ceil_div((uint64_t)ds->n, 256), rows,
                      (unsigned int)ds->batch, 256, 1, 1, 0, kp);
  }
  jk_temp_free(e, ws, stream);
  return st;
}
