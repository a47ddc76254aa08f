/*
 * Matmul plans on a GPU against a float64 host reference, as relative L2
 * errors the dtype allows (float32 1e-5, tf32 1e-3, float16 and bfloat16
 * 1e-2, float64 1e-12): tensor-core and FFMA kernels, odd sizes and K
 * tails, both layouts of A and B, column-major D, batches, C with alpha
 * and beta, epilogues (none, bias, bias+ReLU, GELU, one using row and
 * col), misaligned pointers, poisoned outputs checked everywhere. On an
 * H200 the tensor-core cases run the wgmma kernel (TMA stores of 16-bit,
 * float32 and float64 D, rows off 16 bytes staged through shared memory,
 * column-major D from registers, more tiles than blocks, tf32 with B
 * transposed first), and again as mma.sync kernels.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct mm_case {
  const char *what;
  jitk_dtype dt;
  jitk_compute compute;
  int64_t m, n, k, batch;
  jitk_order ao, bo, d_o;
  int has_c;
  double alpha, beta;
  const char *epilogue, *params;
  int misalign;     /* elements of offset added to A and B */
  const char *kind; /* "tensor cores" or "FFMA", expected in the description */
  jitk_dtype ddt;   /* D's dtype (C's too); JITK_DTYPE_NONE: dt */
  int64_t pad;      /* elements each row (or column) of A and B is padded by, poisoned */
} mm_case;

/* Set by a test whose run_case calls also bound every element's error,
 * not only the relative L2 error (each test runs in its own process). */
static bool strict_elements;

/* The host's value of element i after rounding to dt. */
static double rounded(jitk_dtype dt, double v) {
  unsigned char buf[8] = {0};
  jt_write_real(buf, dt, 0, v);
  return jt_read_real(buf, dt, 0);
}

/* The float64 products of every batch, acc[(b * M + i) * N + j], and where
 * mag is not NULL the sums of their terms' magnitudes beside. A (M x K)
 * and B (K x N) are packed, one batch after the other, in the orders
 * named. Each element sums its terms in ascending q, as a dot product
 * would; the loops run over rows of B and eight rows of D at a time so
 * that the host reads memory in order, since the largest shapes here
 * take billions of terms. */
static void ref_products(const double *ha, jitk_order ao, const double *hb, jitk_order bo,
                         int64_t M, int64_t N, int64_t K, int64_t B, double *acc, double *mag) {
  double *bt = bo == JITK_ROW_MAJOR ? NULL : malloc((size_t)(K * N) * sizeof(double));
  for (int64_t b = 0; b < B; b++) {
    const double *bb = hb + b * K * N, *ab = ha + b * M * K;
    if (bt != NULL) { /* column j of B is its row j, K long */
      for (int64_t j = 0; j < N; j++)
        for (int64_t q = 0; q < K; q++) bt[q * N + j] = bb[j * K + q];
      bb = bt;
    }
    for (int64_t i0 = 0; i0 < M; i0 += 8) {
      const int64_t rows = M - i0 < 8 ? M - i0 : 8;
      double *ar = acc + (b * M + i0) * N, *mr = mag ? mag + (b * M + i0) * N : NULL;
      memset(ar, 0, (size_t)(rows * N) * sizeof(double));
      if (mr != NULL) memset(mr, 0, (size_t)(rows * N) * sizeof(double));
      for (int64_t q = 0; q < K; q++) {
        const double *br = bb + q * N;
        for (int64_t r = 0; r < rows; r++) {
          const int64_t i = i0 + r;
          const double av = ab[ao == JITK_ROW_MAJOR ? i * K + q : q * M + i];
          double *out = ar + r * N;
          if (mr == NULL)
            for (int64_t j = 0; j < N; j++) out[j] += av * br[j];
          else
            for (int64_t j = 0; j < N; j++) {
              const double t = av * br[j];
              out[j] += t;
              mr[r * N + j] += fabs(t);
            }
        }
      }
    }
  }
  free(bt);
}

static double epilogue_ref(const mm_case *c, double acc, int64_t row, int64_t col,
                           const double *bias) {
  if (c->epilogue == NULL) return acc;
  if (strcmp(c->epilogue, "acc + bias[col]") == 0) return acc + bias[col];
  if (strcmp(c->epilogue, "max(acc + bias[col], (T)0)") == 0)
    return acc + bias[col] > 0 ? acc + bias[col] : 0;
  if (strcmp(c->epilogue, "gelu(acc)") == 0)
    return 0.5 * acc * (1 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
  if (strcmp(c->epilogue, "acc * s + (T)(row - 2 * col)") == 0)
    return acc * 0.5 + (double)(row - 2 * col);
  return NAN;
}

static void run_case(jitk_engine *e, const mm_case *c, uint64_t *seed) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = c->m;
  d.n = c->n;
  d.k = c->k;
  d.batch = c->batch;
  const jitk_dtype ddt = c->ddt != JITK_DTYPE_NONE ? c->ddt : c->dt;
  d.a_dtype = d.b_dtype = c->dt;
  d.c_dtype = d.d_dtype = ddt;
  d.compute = c->compute;
  d.a_order = c->ao;
  d.b_order = c->bo;
  /* Each operand as stored: outer rows of inner contiguous elements. */
  const bool a_row = c->ao == JITK_ROW_MAJOR, b_row = c->bo == JITK_ROW_MAJOR;
  const int64_t a_outer = a_row ? c->m : c->k, a_inner = a_row ? c->k : c->m;
  const int64_t b_outer = b_row ? c->k : c->n, b_inner = b_row ? c->n : c->k;
  d.lda = a_inner + c->pad;
  d.ldb = b_inner + c->pad;
  d.c_order = JITK_ROW_MAJOR;
  d.d_order = c->d_o;
  d.has_c = c->has_c;
  d.alpha = c->alpha;
  d.beta = c->beta;
  d.epilogue = c->epilogue;
  d.epilogue_params = c->params;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[1024];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  if (!c->misalign) cr_assert(strstr(desc, c->kind) != NULL, "%s: %s", c->what, desc);
  size_t es = jt_dtype_size(c->dt), des = jt_dtype_size(ddt);
  int64_t M = c->m, N = c->n, K = c->k, B = c->batch;
  size_t na = (size_t)(M * K * B), nb = (size_t)(K * N * B), nd = (size_t)(M * N * B);
  /* Stored with leading dimensions d.lda and d.ldb: the padding is NaN,
   * which would show in D if a kernel read it. */
  size_t sna = (size_t)(B * a_outer * d.lda), snb = (size_t)(B * b_outer * d.ldb);
  double *ha = malloc(na * 8), *hb = malloc(nb * 8), *hc = malloc(nd * 8),
         *hbias = malloc((size_t)N * 8);
  unsigned char *sa = malloc(sna * es + 64), *sb = malloc(snb * es + 64), *sc = malloc(nd * des),
                *sd = malloc(nd * des);
  for (size_t i = 0; i < sna + 64 / es; i++) jt_write_real(sa, c->dt, i, NAN);
  for (size_t i = 0; i < snb + 64 / es; i++) jt_write_real(sb, c->dt, i, NAN);
  for (size_t i = 0; i < na; i++) {
    ha[i] = rounded(c->dt, jt_uniform(seed));
    size_t o = i / (size_t)a_inner, in = i % (size_t)a_inner; /* o counts rows of all batches */
    jt_write_real(sa, c->dt, o * (size_t)d.lda + in + (size_t)c->misalign, ha[i]);
  }
  for (size_t i = 0; i < nb; i++) {
    hb[i] = rounded(c->dt, jt_uniform(seed));
    size_t o = i / (size_t)b_inner, in = i % (size_t)b_inner;
    jt_write_real(sb, c->dt, o * (size_t)d.ldb + in + (size_t)c->misalign, hb[i]);
  }
  /* With beta = 0, BLAS reads no C: it is NaN here, which would show. */
  for (size_t i = 0; i < nd; i++) {
    hc[i] = rounded(ddt, jt_uniform(seed));
    jt_write_real(sc, ddt, i, c->beta == 0 ? NAN : hc[i]);
  }
  float *fbias = malloc((size_t)N * 4);
  for (int64_t j = 0; j < N; j++) {
    fbias[j] = (float)jt_uniform(seed);
    hbias[j] = fbias[j];
  }
  void *da = jt_dev_alloc(e, sna * es + 64), *db = jt_dev_alloc(e, snb * es + 64),
       *dc = jt_dev_alloc(e, nd * des), *dd = jt_dev_alloc(e, nd * des),
       *dbias = jt_dev_alloc(e, (size_t)N * 4);
  jt_to_dev(e, da, sa, sna * es + 64);
  jt_to_dev(e, db, sb, snb * es + 64);
  jt_to_dev(e, dc, sc, nd * des);
  jt_to_dev(e, dbias, fbias, (size_t)N * 4);
  jt_poison(e, dd, nd * des);
  jitk_arg extra[1];
  size_t nextra = 0;
  if (c->params && strstr(c->params, "bias")) extra[nextra++] = jitk_arg_ptr(dbias, JITK_FLOAT32);
  if (c->params && strstr(c->params, " s")) extra[nextra++] = jitk_arg_f64(0.5);
  JT_OK(e,
        jitk_matmul_execute(p, NULL, (char *)da + c->misalign * es, (char *)db + c->misalign * es,
                            c->has_c ? dc : NULL, dd, extra, nextra));
  jt_to_host(e, sd, dd, nd * des);
  double err2 = 0, ref2 = 0, worst = 0;
  size_t nan_count = 0;
  double *prod = malloc(nd * 8);
  ref_products(ha, c->ao, hb, c->bo, M, N, K, B, prod, NULL);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = c->alpha * prod[(b * M + i) * N + j];
        if (c->has_c && c->beta != 0) acc += c->beta * hc[b * M * N + i * N + j];
        double want = epilogue_ref(c, acc, i, j, hbias);
        size_t o = (size_t)(b * M * N + (c->d_o == JITK_ROW_MAJOR ? i * N + j : j * M + i));
        double got = jt_read_real(sd, ddt, o);
        if (!isfinite(got)) nan_count++;
        if (fabs(got - want) > worst) worst = fabs(got - want);
        err2 += (got - want) * (got - want);
        ref2 += want * want;
      }
  double tol = c->dt == JITK_FLOAT64   ? 1e-12
               : c->dt == JITK_FLOAT32 ? (c->compute == JITK_COMPUTE_TF32 ? 1e-3 : 1e-5)
                                       : 1e-2;
  double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1));
  cr_assert(nan_count == 0 && rel <= tol,
            "%s (%s): relative L2 error %.3g (tolerance %.0e), %zu "
            "elements not finite (poison left)",
            c->what, desc, rel, tol, nan_count);
  /* A few wrong elements (one stale 16-byte chunk of an operand) hardly
   * move the L2 error; strict tests bound each element by a fiftieth of
   * D's root mean square, far above the rounding of 16-bit inputs and of
   * tf32, far below eight missing products of K. */
  const double rms = sqrt(ref2 / (double)(M * N * B));
  cr_assert(!strict_elements || worst <= 0.02 * (rms > 1 ? rms : 1),
            "%s (%s): an element off by %.3g (D's root mean square %.3g)", c->what, desc, worst,
            rms);
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dc, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dbias, NULL));
  free(ha);
  free(hb);
  free(hc);
  free(hbias);
  free(fbias);
  free(sa);
  free(sb);
  free(sc);
  free(sd);
  free(prod);
  jitk_matmul_destroy(p);
}

#define R JITK_ROW_MAJOR
#define C JITK_COL_MAJOR

Test(matmul, tensor_cores) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x3A7;
  const mm_case cases[] = {
      {"bf16 bias+ReLU", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 256, 384, 512, 1, R, R, R, 0, 1, 0,
       "max(acc + bias[col], (T)0)", "raw float32 bias", 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"f16 odd m, n, K tail", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 301, 264, 136, 1, R, R, R, 0, 1,
       0, NULL, NULL, 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"bf16 B column-major, gelu", JITK_BFLOAT16, JITK_COMPUTE_BFLOAT16, 200, 130, 72, 1, R, C, R,
       0, 1, 0, "gelu(acc)", NULL, 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"f16 batch 3, C, alpha, beta, D column-major", JITK_FLOAT16, JITK_COMPUTE_FLOAT16, 130, 136,
       64, 3, R, R, C, 1, 0.5, -2.0, NULL, NULL, 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"bf16 row and col in the epilogue", JITK_BFLOAT16, JITK_COMPUTE_FLOAT32, 64, 64, 8, 1, R, R,
       R, 0, 1, 0, "acc * s + (T)(row - 2 * col)", "float32 s", 0, "tensor cores", JITK_DTYPE_NONE,
       0},
      {"tf32, B column-major, batch 2", JITK_FLOAT32, JITK_COMPUTE_TF32, 128, 256, 96, 2, R, C, R,
       0, 1, 0, NULL, NULL, 0, "tensor cores tf32", JITK_DTYPE_NONE, 0},
      {"tf32, B row-major, bias+ReLU", JITK_FLOAT32, JITK_COMPUTE_TF32, 100, 132, 36, 1, R, R, R, 0,
       1, 0, "max(acc + bias[col], (T)0)", "raw T bias", 0, "tensor cores tf32", JITK_DTYPE_NONE,
       0},
      {"bf16 128 x 64 tiles (few of 128 x 128), N tail, bias+ReLU", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 256, 330, 200, 1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)",
       "raw float32 bias", 0, "tile 128x64x64", JITK_DTYPE_NONE, 0},
      {"f16 128 x 64 tiles, B and D column-major, batch 2", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 128,
       100, 72, 2, R, C, C, 0, 1, 0, NULL, NULL, 0, "tile 128x64x64", JITK_DTYPE_NONE, 0},
      {"bf16 large, K tail", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1030, 1288, 200, 1, R, R, R, 0, 1,
       0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"bf16 more tiles than blocks, batch 2, tails", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1100,
       2056, 72, 2, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       "tensor cores", JITK_DTYPE_NONE, 0},
      {"bf16 in, float32 D and C (two rounds of TMA stores)", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       300, 512, 64, 1, R, R, R, 1, 1, 0.5, "acc + bias[col]", "raw float32 bias", 0,
       "tensor cores", JITK_FLOAT32, 0},
      {"f16 in, float64 D, B column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 200, 320, 40, 1, R,
       C, R, 0, 1, 0, NULL, NULL, 0, "tensor cores", JITK_FLOAT64, 0},
      {"tf32, B row-major transposed first, batch 2, K tail", JITK_FLOAT32, JITK_COMPUTE_TF32, 260,
       264, 52, 2, R, R, R, 0, 1, 0, "gelu(acc)", NULL, 0, "tensor cores tf32", JITK_DTYPE_NONE, 0},
      {"bf16 A column-major (M-major wgmma), tails", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 304, 264,
       136, 1, C, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       "tensor cores", JITK_DTYPE_NONE, 0},
      {"f16 A and B column-major, batch 2, C", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 136, 200, 72, 2,
       C, C, R, 1, 1, 0.5, NULL, NULL, 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"bf16 K = 100 from padded rows: TMA fills the K tail", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       200, 260, 100, 1, R, R, R, 0, 1, 0, NULL, NULL, 0, "tensor cores", JITK_DTYPE_NONE, 4},
      {"tf32 A column-major and B row-major, both transposed first", JITK_FLOAT32,
       JITK_COMPUTE_TF32, 140, 264, 60, 2, C, R, R, 0, 1, 0, "acc + bias[col]", "raw T bias", 0,
       "A column-major (transposed first), B row-major (transposed first)", JITK_DTYPE_NONE, 4},
      {"bf16 misaligned pointers: copied onto 16 bytes", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 128,
       128, 64, 1, R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 1, "tensor cores",
       JITK_DTYPE_NONE, 0},
      {"bf16 C of NaN with beta = 0, bias+ReLU", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 256, 264, 128,
       1, R, R, R, 1, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, "tensor cores",
       JITK_DTYPE_NONE, 0},
      {"f16 C of NaN with beta = 0, D column-major", JITK_FLOAT16, JITK_COMPUTE_FLOAT16, 130, 136,
       64, 2, R, R, C, 1, 0.5, 0, NULL, NULL, 0, "tensor cores", JITK_DTYPE_NONE, 0},
      {"tf32 C of NaN with beta = 0", JITK_FLOAT32, JITK_COMPUTE_TF32, 128, 256, 96, 1, R, C, R, 1,
       1, 0, NULL, NULL, 0, "tensor cores tf32", JITK_DTYPE_NONE, 0},
      {"bf16 C of NaN with beta = 0, misaligned: copied onto 16 bytes", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 128, 128, 64, 1, R, R, R, 1, 1, 0, NULL, NULL, 1, "tensor cores",
       JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* Operands whose rows do not start on 16 bytes (odd K or N, odd leading
 * dimensions, misaligned pointers) stay on wgmma: each is copied onto 16
 * bytes first (the module's _pad kernel; tf32's transposes write such
 * rows themselves). */
Test(matmul, unaligned_rows_on_tensor_cores) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5B1;
  const mm_case cases[] = {
      {"bf16 odd K, bias+ReLU", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 200, 264, 101, 1, R, R, R, 0,
       1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       "tensor cores bfloat16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 0},
      {"f16 odd N, B row-major, D rows off 16 bytes", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 130, 99,
       64, 1, R, R, R, 0, 1, 0, NULL, NULL, 0, "tensor cores float16 m64nNk16 (wgmma",
       JITK_DTYPE_NONE, 0},
      {"bf16 odd M, N, K, A and B column-major, batch 2, C", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       131, 77, 93, 2, C, C, R, 1, 1, 0.5, NULL, NULL, 0, "tensor cores bfloat16 m64nNk16 (wgmma",
       JITK_DTYPE_NONE, 0},
      {"f16 rows padded by 1 (odd leading dimensions), batch 3", JITK_FLOAT16, JITK_COMPUTE_DEFAULT,
       140, 136, 64, 3, R, R, R, 0, 1, 0, "gelu(acc)", NULL, 0,
       "tensor cores float16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 1},
      {"bf16 odd K and misaligned pointers", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 128, 136, 77, 1,
       R, C, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 1,
       "tensor cores bfloat16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 0},
      {"tf32 odd K, A row-major", JITK_FLOAT32, JITK_COMPUTE_TF32, 100, 68, 37, 1, R, C, R, 0, 1, 0,
       NULL, NULL, 0, "tensor cores tf32 m64nNk8 (wgmma", JITK_DTYPE_NONE, 0},
      {"tf32 odd M and N, A column-major and B row-major transposed first", JITK_FLOAT32,
       JITK_COMPUTE_TF32, 67, 66, 40, 2, C, R, R, 0, 1, 0, "acc + bias[col]", "raw T bias", 0,
       "tensor cores tf32 m64nNk8 (wgmma", JITK_DTYPE_NONE, 0},
      {"f16 K = 40 with odd leading dimensions: copied onto 16 bytes", JITK_FLOAT16,
       JITK_COMPUTE_DEFAULT, 96, 80, 40, 1, C, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias",
       0, "tensor cores float16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 3},
      {"bf16 odd K, more tiles than blocks", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1100, 2056, 203,
       1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       "tensor cores bfloat16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* Operands whose rows are off 16 bytes, copied onto lines before the
 * product (the module's _pad kernel), on shapes of more tiles than blocks
 * in every layout the copy sees: A row-major with an odd K, column-major
 * with an odd M; B row-major with an odd N, column-major with an odd K;
 * both at once, misaligned pointers, the cooperative schedule, tf32,
 * and long K with D's rows off 16 bytes, which the plan keeps on
 * ping-pong.
 * Each shape runs twice on fresh data, so that a product that read its
 * pooled copy before the copy was made would find the earlier run's
 * operand there; every element is checked. */
Test(matmul, unaligned_rows_every_layout) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5C3;
  strict_elements = true;
  const char *wg = "(wgmma";
  const mm_case cases[] = {
      {"bf16 odd K, A row-major", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 2100, 1800, 203, 1, R, R, R,
       0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, wg, JITK_FLOAT32, 0},
      {"f16 odd N, B row-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 2048, 1999, 136, 1, R, R, R, 0,
       1, 0, "acc + bias[col]", "raw float32 bias", 0, wg, JITK_FLOAT32, 0},
      {"bf16 odd M, A column-major", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1999, 2048, 72, 1, C, R,
       R, 0, 1, 0, NULL, NULL, 0, wg, JITK_FLOAT32, 0},
      {"bf16 odd K, B column-major", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1536, 2100, 141, 1, R, C,
       R, 0, 1, 0, NULL, NULL, 0, wg, JITK_FLOAT32, 0},
      {"bf16 odd M, N, K, both copied, bf16 D off 16 bytes", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       1501, 1703, 777, 1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       wg, JITK_DTYPE_NONE, 0},
      {"f16 misaligned pointers, A and B column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 1600,
       1800, 200, 1, C, C, R, 0, 1, 0, NULL, NULL, 1, wg, JITK_FLOAT32, 0},
      {"bf16 odd N, cooperative (forced)", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1024, 1001, 4104, 1,
       R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 0, "cooperative", JITK_FLOAT32, 0},
      {"bf16 odd N, long K, bf16 D rows off 16 bytes (ping-pong by default)", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 1920, 1025, 4104, 1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)",
       "raw float32 bias", 0, "(ping-pong)", JITK_DTYPE_NONE, 0},
      {"tf32 odd K, A row-major, B column-major", JITK_FLOAT32, JITK_COMPUTE_TF32, 1500, 1800, 99,
       1, R, C, R, 0, 1, 0, NULL, NULL, 0, wg, JITK_DTYPE_NONE, 0},
      {"bf16 rows padded by 3, one tile", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 100, 120, 64, 1, R,
       R, R, 0, 1, 0, NULL, NULL, 0, wg, JITK_FLOAT32, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bool coop = strcmp(cases[i].kind, "cooperative") == 0;
    if (coop) setenv("JITK_MM_SCHEDULE", "cooperative", 1);
    run_case(e, &cases[i], &seed);
    run_case(e, &cases[i], &seed);
    unsetenv("JITK_MM_SCHEDULE");
  }
  jitk_engine_destroy(e);
}

/* A row-major 16-bit A whose rows are off 16 bytes, with a row-major B,
 * read where it is in 8 row phases (matmul_sm90.cuh's phase_tile; forced
 * with JITK_MM_PHASES=1 on shapes the plan would copy A for): M of every
 * remainder mod 8 (9 included, so that a phase has a single row), K of
 * every remainder, rows padded with NaN and pointers off 16 bytes with
 * NaN before them (the first K-tile's elements before k = 0 are zeroed, or
 * 0 * NaN would show), batches, C, both schedules, the drain on and off,
 * D of 16 and 32 bits, and B copied too (odd N). Each shape runs twice
 * on fresh data; every element is checked. */
Test(matmul, unaligned_a_read_by_phases) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5C7;
  strict_elements = true;
  const char *ph = "A read in place by 8 row phases";
  setenv("JITK_MM_PHASES", "1", 1);
  static const struct {
    const char *schedule, *drain;
  } knobs[] = {{NULL, NULL}, {NULL, "0"}, {"cooperative", "1"}};
  const mm_case cases[] = {
      {"bf16 M 2100, K 203, bias+ReLU, float32 D", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 2100, 1800,
       203, 1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, ph,
       JITK_FLOAT32, 0},
      {"f16 M 131, K 77, misaligned pointers, C", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 131, 136, 77,
       1, R, R, R, 1, 1, 0.5, NULL, NULL, 1, ph, JITK_DTYPE_NONE, 0},
      {"bf16 M 100, rows padded by 3 (NaN), D off 16 bytes", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       100, 120, 64, 1, R, R, R, 0, 1, 0, NULL, NULL, 0, ph, JITK_DTYPE_NONE, 3},
      {"bf16 M 136, K 93, batch 3, gelu", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 136, 264, 93, 3, R,
       R, R, 0, 1, 0, "gelu(acc)", NULL, 0, ph, JITK_FLOAT32, 0},
      {"f16 M 9, N 64, K 70, rows padded by 1", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 9, 64, 70, 1, R,
       R, R, 0, 1, 0, NULL, NULL, 0, ph, JITK_FLOAT32, 1},
      {"bf16 M 1027, N 999, K 1001 (B copied too), bias", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1027,
       999, 1001, 1, R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 0, ph,
       JITK_DTYPE_NONE, 0},
      {"bf16 M 1030, K 4101 (long K), misaligned", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1030, 512,
       4101, 1, R, R, R, 0, 1, 0, NULL, NULL, 3, ph, JITK_FLOAT32, 0},
  };
  for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
    if (knobs[k].schedule != NULL) setenv("JITK_MM_SCHEDULE", knobs[k].schedule, 1);
    if (knobs[k].drain != NULL) setenv("JITK_MM_DRAIN", knobs[k].drain, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      run_case(e, &cases[i], &seed);
      if (k == 0) run_case(e, &cases[i], &seed);
    }
    unsetenv("JITK_MM_SCHEDULE");
    unsetenv("JITK_MM_DRAIN");
  }
  unsetenv("JITK_MM_PHASES");
  jitk_engine_destroy(e);
}

/* A row-major 16-bit B whose rows are off 16 bytes, copied onto 128-byte
 * lines by the product's own idle warps as its MMAs run
 * (matmul_sm90.cuh's feed_copy, JITK_MM_FEED=1) rather than by a kernel
 * before it: on the cooperative schedule (128 x 256 tiles, and 128 x 128
 * where N is a tile), with A read by phases or copied, and on ping-pong
 * in four stages (JITK_MM_TILE), the drain off. Rows of one unit (4096
 * bytes), of two, of a unit and one element, of three elements (a unit
 * the lanes load alone), K of 1 and K past 4096, batches, padded rows,
 * pointers off 16 bytes, C, D of 16 and 32 bits. Each shape runs twice on
 * fresh data, so that a product that read its pooled copy before it was
 * made would find the last run's operand there; every element is
 * checked. */
Test(matmul, unaligned_b_fed) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5CB;
  strict_elements = true;
  const char *fed = "by the kernel's own idle warps";
  static const struct {
    const char *schedule, *tile, *phases;
  } knobs[] = {{"cooperative", NULL, "1"}, {"cooperative", NULL, "0"}, {NULL, "128x128x4", "0"}};
  const mm_case cases[] = {
      {"bf16 M 1027, N 999, K 1001, bias", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1027, 999, 1001, 1,
       R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 0, fed, JITK_DTYPE_NONE, 0},
      {"f16 N 4001 (two units a row), K 136, float32 D", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 2048,
       4001, 136, 1, R, R, R, 0, 1, 0, NULL, NULL, 0, fed, JITK_FLOAT32, 0},
      {"bf16 N 2049 (a unit of one element), K 77, batch 3, C", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       300, 2049, 77, 3, R, R, R, 1, 1, 0.5, NULL, NULL, 0, fed, JITK_DTYPE_NONE, 0},
      {"bf16 N 3, K 320 (units in the lanes)", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 200, 3, 320, 1,
       R, R, R, 0, 1, 0, NULL, NULL, 0, fed, JITK_FLOAT32, 0},
      {"f16 M 1030, N 1025, K 4101, misaligned pointers", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 1030,
       1025, 4101, 1, R, R, R, 0, 1, 0, NULL, NULL, 1, fed, JITK_FLOAT32, 0},
      {"bf16 K 1, N 1001", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 300, 1001, 1, 1, R, R, R, 0, 1, 0,
       "max(acc + bias[col], (T)0)", "raw float32 bias", 0, fed, JITK_FLOAT32, 0},
      {"bf16 rows padded by 3, batch 2, gelu", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 640, 264, 200,
       2, R, R, R, 0, 1, 0, "gelu(acc)", NULL, 0, fed, JITK_DTYPE_NONE, 3},
  };
  setenv("JITK_MM_DRAIN", "0", 1);
  setenv("JITK_MM_FEED", "1", 1);
  for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
    if (knobs[k].schedule != NULL) setenv("JITK_MM_SCHEDULE", knobs[k].schedule, 1);
    if (knobs[k].tile != NULL) setenv("JITK_MM_TILE", knobs[k].tile, 1);
    setenv("JITK_MM_PHASES", knobs[k].phases, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      run_case(e, &cases[i], &seed);
      run_case(e, &cases[i], &seed);
    }
    unsetenv("JITK_MM_SCHEDULE");
    unsetenv("JITK_MM_TILE");
    unsetenv("JITK_MM_PHASES");
  }
  unsetenv("JITK_MM_DRAIN");
  unsetenv("JITK_MM_FEED");
  jitk_engine_destroy(e);
}

/* tf32 with a row-major B swaps A and B and reads B M-major through
 * registers instead of transposing it: by default where 128 x 256 swapped
 * tiles fill the GPU (and for decode shapes), forced (JITK_MM_SWAP=1) on
 * small shapes with 128 columns and the decode widths, and 256 columns
 * (JITK_MM_TILE); split-K, tails in every dimension, odd N (B copied onto
 * 16 bytes first), padded rows, misaligned pointers, batches, C, bias,
 * and the unswapped transpose (JITK_MM_SWAP=0) beside, every element
 * against float64. */
Test(matmul, tf32_b_through_registers) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5BA;
  const char *sw = "B row-major, D stored from registers";
  const mm_case wide = {"tf32 M 1100, N 3500, K 72: swapped by default, 256 columns, bias",
                        JITK_FLOAT32,
                        JITK_COMPUTE_TF32,
                        1100,
                        3500,
                        72,
                        1,
                        R,
                        R,
                        R,
                        0,
                        1,
                        0,
                        "acc + bias[col]",
                        "raw T bias",
                        0,
                        "M along its 256 columns",
                        JITK_DTYPE_NONE,
                        0};
  run_case(e, &wide, &seed);
  setenv("JITK_MM_SWAP", "1", 1);
  const mm_case cases[] = {
      {"tf32 M 300, N 264, K 100, batch 2, bias+ReLU", JITK_FLOAT32, JITK_COMPUTE_TF32, 300, 264,
       100, 2, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw T bias", 0, sw, JITK_DTYPE_NONE,
       0},
      {"tf32 M 1030 (more tiles than blocks), N 1288, K 72", JITK_FLOAT32, JITK_COMPUTE_TF32, 1030,
       1288, 72, 1, R, R, R, 0, 1, 0, "acc + bias[col]", "raw T bias", 0, sw, JITK_DTYPE_NONE, 0},
      {"tf32 M 128, N 131 (odd: B copied onto 16 bytes), C, D column-major", JITK_FLOAT32,
       JITK_COMPUTE_TF32, 128, 131, 40, 1, R, R, C, 1, 1, 0.5, NULL, NULL, 0, sw, JITK_DTYPE_NONE,
       0},
      {"tf32 M 5, N 256, K 4100, padded rows", JITK_FLOAT32, JITK_COMPUTE_TF32, 5, 256, 4100, 1, R,
       R, R, 0, 1, 0, NULL, NULL, 0, sw, JITK_DTYPE_NONE, 3},
      {"tf32 M 70, misaligned pointers, gelu", JITK_FLOAT32, JITK_COMPUTE_TF32, 70, 200, 64, 2, R,
       R, R, 0, 1, 0, "gelu(acc)", NULL, 1, sw, JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  /* 256 columns forced on the first two, and the transpose the swap
   * replaces. */
  setenv("JITK_MM_TILE", "256x128x4", 1);
  for (size_t i = 0; i < 2; i++) {
    mm_case c = cases[i];
    c.kind = "M along its 256 columns";
    run_case(e, &c, &seed);
  }
  unsetenv("JITK_MM_TILE");
  setenv("JITK_MM_SWAP", "0", 1);
  mm_case off = wide;
  off.kind = "B row-major (transposed first)";
  run_case(e, &off, &seed);
  unsetenv("JITK_MM_SWAP");
  jitk_engine_destroy(e);
}

/* tf32 transposes a row-major B first, 64 rows of B (values of k) a tile
 * and at most 65535 tiles down the grid: K past 4194240 takes the
 * transpose's blocks round again, once for the rows past the grid. */
Test(matmul, tf32_transpose_long_k) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5B9;
  const mm_case c[] = {
      {"tf32 K = 4200000, B row-major transposed first", JITK_FLOAT32, JITK_COMPUTE_TF32, 8, 8,
       4200000, 1, R, R, R, 0, 1, 0, NULL, NULL, 0, "tensor cores tf32 m64nNk8 (wgmma",
       JITK_DTYPE_NONE, 0},
  };
  run_case(e, &c[0], &seed);
  jitk_engine_destroy(e);
}

/* A row-major B whose rows start on 16 bytes but off 128-byte lines is
 * copied onto lines first where the product is long enough to pay for the
 * copy (matmul_execute.c's jk_mm_line_pays: M of 4096 here), and read as it is
 * otherwise (M of 1024, or an A whose K is off the lines). Each shape runs
 * with the copies and again without (JITK_MM_LINES=0), every element
 * checked. */
Test(matmul, rows_off_lines) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5B7;
  const mm_case cases[] = {
      {"bf16 B row-major, N 1000 (2000-byte rows): copied", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       4096, 1000, 136, 1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       "tensor cores bfloat16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 0},
      {"f16 B row-major, N 520, M 4100, batch 2, C: copied", JITK_FLOAT16, JITK_COMPUTE_DEFAULT,
       4100, 520, 72, 2, R, R, R, 1, 1, 0.5, "acc + bias[col]", "raw float32 bias", 0,
       "tensor cores float16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 0},
      {"bf16 B row-major, N 1000, M 1024: read as it is", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1024,
       1000, 136, 1, R, R, R, 0, 1, 0, NULL, NULL, 0, "tensor cores bfloat16 m64nNk16 (wgmma",
       JITK_DTYPE_NONE, 0},
      {"f16 A row-major, K 1000: read as it is", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 264, 2048,
       1000, 1, R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 0,
       "tensor cores float16 m64nNk16 (wgmma", JITK_DTYPE_NONE, 0},
  };
  for (int lines = 0; lines < 2; lines++) {
    if (lines == 1) setenv("JITK_MM_LINES", "0", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  }
  unsetenv("JITK_MM_LINES");
  jitk_engine_destroy(e);
}

/*
 * D whose rows TMA cannot store (odd N, an odd leading dimension or batch
 * stride, a pointer off 16 bytes): a row-major D goes through shared
 * memory and out in whole rows (matmul_sm90.cuh's stage_rows), a
 * column-major one from registers. Every element is checked against a
 * float64 product of the same rounded inputs, within D's rounding plus
 * the sum's error bound; every other byte of D's buffer (before the
 * pointer, the gaps a leading dimension or batch stride beyond the matrix
 * leaves, and after it) must keep its poison.
 */
typedef struct dlayout_case {
  const char *what;
  jitk_dtype dt, ddt; /* A and B's dtype; D's (and C's) */
  jitk_compute compute;
  int64_t m, n, k, batch;
  jitk_order bo, d_o;
  int64_t ldd, sd, off; /* D's leading dimension and batch stride (0: packed), pointer offset */
  int with_c;           /* C (row-major, packed) with alpha 1.5 and beta -0.5, else alpha 1 */
  int bias_relu;        /* epilogue max(acc + bias[col], (T)0) */
  const char *kind;     /* expected in the description */
} dlayout_case;

static void run_dlayout(jitk_engine *e, const dlayout_case *c, uint64_t *seed) {
  const int64_t M = c->m, N = c->n, K = c->k, B = c->batch;
  const bool d_row = c->d_o == JITK_ROW_MAJOR, b_row = c->bo == JITK_ROW_MAJOR;
  const int64_t d_outer = d_row ? M : N, d_inner = d_row ? N : M;
  const int64_t ldd = c->ldd ? c->ldd : d_inner, sd = c->sd ? c->sd : d_outer * ldd;
  const size_t es = jt_dtype_size(c->dt), des = jt_dtype_size(c->ddt);
  const size_t na = (size_t)(B * M * K), nb = (size_t)(B * K * N), nc = (size_t)(B * M * N);
  /* D's buffer: the offset, the batches, and 64 bytes of poison after. */
  const size_t nd = (size_t)(c->off + (B - 1) * sd + d_outer * ldd) + 64 / des;
  double *ha = malloc(na * 8), *hb = malloc(nb * 8), *hc = malloc(nc * 8);
  unsigned char *sa = malloc(na * es), *sb = malloc(nb * es), *sc = malloc(nc * des);
  unsigned char *sd_host = malloc(nd * des), *is_d = calloc(nd, 1);
  float *fbias = malloc((size_t)N * 4);
  for (size_t i = 0; i < na; i++) { /* A row-major, packed */
    ha[i] = rounded(c->dt, jt_uniform(seed));
    jt_write_real(sa, c->dt, i, ha[i]);
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t q = 0; q < K; q++)
      for (int64_t j = 0; j < N; j++) {
        const size_t i = (size_t)((b * K + q) * N + j);
        hb[i] = rounded(c->dt, jt_uniform(seed));
        jt_write_real(sb, c->dt, (size_t)(b * K * N + (b_row ? q * N + j : j * K + q)), hb[i]);
      }
  for (size_t i = 0; i < nc; i++) {
    hc[i] = rounded(c->ddt, jt_uniform(seed));
    jt_write_real(sc, c->ddt, i, hc[i]);
  }
  for (int64_t j = 0; j < N; j++) fbias[j] = (float)jt_uniform(seed);
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = M;
  d.n = N;
  d.k = K;
  d.batch = B;
  d.a_dtype = d.b_dtype = c->dt;
  d.c_dtype = d.d_dtype = c->ddt;
  d.compute = c->compute;
  d.a_order = JITK_ROW_MAJOR;
  d.b_order = c->bo;
  d.c_order = JITK_ROW_MAJOR;
  d.d_order = c->d_o;
  d.ldd = ldd;
  d.stride_d = sd;
  d.has_c = c->with_c;
  d.alpha = c->with_c ? 1.5 : 1.0;
  d.beta = c->with_c ? -0.5 : 0.0;
  if (c->bias_relu) {
    d.epilogue = "max(acc + bias[col], (T)0)";
    d.epilogue_params = "raw float32 bias";
  }
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[512], what[768];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  snprintf(what, sizeof what, "%s: ldd %lld, stride %lld, offset %lld (%s)", c->what,
           (long long)ldd, (long long)sd, (long long)c->off, desc);
  cr_assert(strstr(desc, c->kind) != NULL, "%s", what);
  void *da = jt_dev_alloc(e, na * es), *db = jt_dev_alloc(e, nb * es),
       *dc = jt_dev_alloc(e, nc * des), *dd = jt_dev_alloc(e, nd * des),
       *dbias = jt_dev_alloc(e, (size_t)N * 4);
  jt_to_dev(e, da, sa, na * es);
  jt_to_dev(e, db, sb, nb * es);
  jt_to_dev(e, dc, sc, nc * des);
  jt_to_dev(e, dbias, fbias, (size_t)N * 4);
  jt_poison(e, dd, nd * des);
  jitk_arg bias = jitk_arg_ptr(dbias, JITK_FLOAT32);
  JT_OK(e, jitk_matmul_execute(p, NULL, da, db, c->with_c ? dc : NULL,
                               (char *)dd + (size_t)c->off * des, &bias, c->bias_relu ? 1 : 0));
  jt_to_host(e, sd_host, dd, nd * des);
  /* Each element's bound: D's rounding (twice its unit roundoff) and the
   * sum's (float32 accumulation of K terms, or tf32's rounding of the
   * inputs), relative to the sum of the terms' magnitudes. */
  const double out_rel = c->ddt == JITK_BFLOAT16  ? 1.0 / 128
                         : c->ddt == JITK_FLOAT16 ? 1.0 / 1024
                         : c->ddt == JITK_FLOAT32 ? 1e-6
                                                  : 1e-12;
  const double sum_rel = c->compute == JITK_COMPUTE_TF32 ? 2e-3 : 2e-5;
  double *prod = malloc(nc * 8), *mags = malloc(nc * 8);
  ref_products(ha, JITK_ROW_MAJOR, hb, JITK_ROW_MAJOR, M, N, K, B, prod, mags);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        const double mag = mags[(b * M + i) * N + j];
        double acc = d.alpha * prod[(b * M + i) * N + j];
        if (c->with_c) acc += d.beta * hc[(b * M + i) * N + j];
        if (c->bias_relu) acc = acc + fbias[j] > 0 ? acc + fbias[j] : 0;
        const double bound = out_rel * fabs(acc) + sum_rel * d.alpha * mag + 1e-6;
        const size_t at = (size_t)(c->off + b * sd + (d_row ? i * ldd + j : j * ldd + i));
        is_d[at] = 1;
        const double got = jt_read_real(sd_host, c->ddt, at);
        cr_assert(isfinite(got) && fabs(got - acc) <= bound,
                  "%s: D[%lld][%lld][%lld] is %.9g, want %.9g (bound %.3g)", what, (long long)b,
                  (long long)i, (long long)j, got, acc, bound);
      }
  for (size_t at = 0; at < nd; at++) {
    if (is_d[at]) continue;
    for (size_t x = 0; x < des; x++)
      cr_assert(sd_host[at * des + x] == 0xFF,
                "%s: element %zu of D's buffer (offset %lld, outside the matrix) was written", what,
                at, (long long)c->off);
  }
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dc, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dbias, NULL));
  jitk_matmul_destroy(p);
  free(ha);
  free(hb);
  free(hc);
  free(sa);
  free(sb);
  free(sc);
  free(sd_host);
  free(is_d);
  free(fbias);
  free(prod);
  free(mags);
}

#define WG "(wgmma"
static const dlayout_case dlayout_cases[] = {
    {"bf16 odd N, tails in M and N", JITK_BFLOAT16, JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 300, 263,
     136, 1, R, R, 0, 0, 0, 0, 1, WG},
    {"bf16 odd ldd (gaps), odd batch stride, C with beta", JITK_BFLOAT16, JITK_BFLOAT16,
     JITK_COMPUTE_DEFAULT, 200, 264, 72, 2, C, R, 265, 200 * 265 + 3, 0, 1, 1, WG},
    {"f16 D pointer off by one element, batch 3", JITK_FLOAT16, JITK_FLOAT16, JITK_COMPUTE_DEFAULT,
     200, 256, 64, 3, R, R, 0, 0, 1, 0, 0, WG},
    {"f16 odd N, ldd 140, pointer off by 3, batch 2, C", JITK_FLOAT16, JITK_FLOAT16,
     JITK_COMPUTE_DEFAULT, 131, 131, 80, 2, R, R, 140, 0, 3, 1, 1, WG},
    {"f16 N = 5 (less than a round), M = 1", JITK_FLOAT16, JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 1, 5,
     64, 1, C, R, 7, 0, 1, 0, 1, WG},
    {"tf32 odd N, odd ldd, pointer off by 1, batch 2, bias", JITK_FLOAT32, JITK_FLOAT32,
     JITK_COMPUTE_TF32, 190, 133, 40, 2, C, R, 137, 0, 1, 0, 1, WG},
    {"tf32 ldd 258 (rows 8 bytes off in turn), C with beta", JITK_FLOAT32, JITK_FLOAT32,
     JITK_COMPUTE_TF32, 130, 256, 36, 1, C, R, 258, 0, 0, 1, 0, WG},
    {"bf16 in, float32 D, odd N, pointer off by 2", JITK_BFLOAT16, JITK_FLOAT32,
     JITK_COMPUTE_DEFAULT, 129, 201, 64, 1, R, R, 0, 0, 2, 1, 1, WG},
    {"f16 in, float64 D, odd N and ldd", JITK_FLOAT16, JITK_FLOAT64, JITK_COMPUTE_DEFAULT, 70, 127,
     40, 2, C, R, 129, 0, 1, 0, 1, WG},
    {"bf16 more tiles than blocks, odd N and ldd, batch 2", JITK_BFLOAT16, JITK_BFLOAT16,
     JITK_COMPUTE_DEFAULT, 1100, 2055, 72, 2, R, R, 2057, 0, 1, 0, 1, WG},
    {"bf16 column-major D, odd ldd (from registers)", JITK_BFLOAT16, JITK_BFLOAT16,
     JITK_COMPUTE_DEFAULT, 131, 77, 64, 2, R, C, 133, 0, 1, 1, 1, WG},
    /* N a multiple of 64 with rows off 16 bytes: stage_rows' rounds are
     * whole up to N, and the rows' last elements before N (or before the
     * tile's end) share their 16 bytes with what follows in D. */
    {"bf16 N = 384, odd ldd: whole rounds up to N", JITK_BFLOAT16, JITK_BFLOAT16,
     JITK_COMPUTE_DEFAULT, 150, 384, 64, 1, R, R, 385, 0, 0, 0, 1, WG},
    {"f16 N = 192, ldd 195, pointer off by 5, C", JITK_FLOAT16, JITK_FLOAT16, JITK_COMPUTE_DEFAULT,
     70, 192, 48, 2, R, R, 195, 0, 5, 1, 0, WG},
};

Test(matmul, unaligned_d_on_tensor_cores) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xD0D;
  for (size_t i = 0; i < sizeof dlayout_cases / sizeof dlayout_cases[0]; i++)
    run_dlayout(e, &dlayout_cases[i], &seed);
  jitk_engine_destroy(e);
}

/* The cooperative schedule's 128 x 256 tiles take the same path. */
Test(matmul, unaligned_d_on_tensor_cores_cooperative) {
  setenv("JITK_MM_SCHEDULE", "cooperative", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xD0E;
  for (size_t i = 0; i < sizeof dlayout_cases / sizeof dlayout_cases[0]; i++) {
    dlayout_case c = dlayout_cases[i];
    c.kind = "(cooperative)";
    run_dlayout(e, &c, &seed);
  }
  jitk_engine_destroy(e);
}

/* D's rows that TMA cannot store go out through the producer warpgroup's
 * idle warps (matmul_sm90.cuh's drain). The same cases with the
 * consumers storing them themselves (JITK_MM_DRAIN=0), with split-K
 * (items whose epilogue another slice runs, so that a consumer hands its
 * drain rounds only for some of its items), and with clusters of two
 * blocks: each poisons D's buffer and checks every element in and
 * around D. */
static void run_dlayouts_with(const char *name, const char *value, uint64_t seed) {
  setenv(name, value, 1);
  jitk_engine *e = jt_gpu_engine();
  for (size_t i = 0; i < sizeof dlayout_cases / sizeof dlayout_cases[0]; i++)
    run_dlayout(e, &dlayout_cases[i], &seed);
  jitk_engine_destroy(e);
  unsetenv(name);
}
Test(matmul, unaligned_d_undrained) { run_dlayouts_with("JITK_MM_DRAIN", "0", 0xD0F); }
Test(matmul, unaligned_d_drained_split_k) { run_dlayouts_with("JITK_MM_SPLIT", "2", 0xD10); }
Test(matmul, unaligned_d_drained_clusters) { run_dlayouts_with("JITK_MM_CLUSTER", "2", 0xD11); }

/* The wgmma kernel's other schedule: both consumers on each 128 x 256 tile. */
Test(matmul, tensor_cores_cooperative) {
  setenv("JITK_MM_SCHEDULE", "cooperative", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x6C2;
  const mm_case cases[] = {
      {"cooperative bf16 128 x 256 tile, tails", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1030, 1288,
       200, 1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0,
       "tile 128x256x64, 3 stages (TMA), persistent, 1 producer and 2 consumer warpgroups "
       "(cooperative)",
       JITK_DTYPE_NONE, 0},
      {"cooperative bf16, more tiles than blocks, batch 2", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT,
       1100, 2056, 72, 2, R, C, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 0,
       "(cooperative)", JITK_DTYPE_NONE, 0},
      {"cooperative f16 in, float32 D, C", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 300, 512, 64, 1, R,
       R, R, 1, 1, 0.5, NULL, NULL, 0, "(cooperative)", JITK_FLOAT32, 0},
      {"cooperative tf32, B transposed first", JITK_FLOAT32, JITK_COMPUTE_TF32, 260, 264, 52, 2, R,
       R, C, 0, 1, 0, NULL, NULL, 0, "(cooperative)", JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* jitk_matmul_autotune: times the candidates on real operands, keeps the
 * fastest, and stores the choice where later plans of the shape class, in
 * this engine or another, find it (and compute correctly with it). */
Test(matmul, autotune) {
  char dir[] = "/tmp/jitk-tune-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  setenv("JITK_CACHE_DIR", dir, 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x7D4;
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = 1000;
  d.n = 1504;
  d.k = 200;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  d.epilogue = "max(acc + bias[col], (T)0)";
  d.epilogue_params = "raw float32 bias";
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, "tuned") == NULL, "a fresh cache has no choice: %s", desc);
  size_t na = 1000 * 200, nb = 200 * 1504, nd = 1000 * 1504;
  unsigned char *h = malloc(nb * 2);
  void *da = jt_dev_alloc(e, na * 2), *db = jt_dev_alloc(e, nb * 2), *dd = jt_dev_alloc(e, nd * 2),
       *dbias = jt_dev_alloc(e, 1504 * 4);
  for (size_t i = 0; i < nb; i++) jt_write_real(h, JITK_BFLOAT16, i, jt_uniform(&seed));
  jt_to_dev(e, da, h, na * 2);
  jt_to_dev(e, db, h, nb * 2);
  float fbias[1504];
  for (int j = 0; j < 1504; j++) fbias[j] = (float)jt_uniform(&seed);
  jt_to_dev(e, dbias, fbias, sizeof fbias);
  jitk_arg bias = jitk_arg_ptr(dbias, JITK_FLOAT32);
  JT_OK(e, jitk_matmul_autotune(p, NULL, da, db, NULL, dd, &bias, 1));
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, "; tuned") != NULL, "%s", desc);
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "16-byte aligned",
           jitk_matmul_autotune(p, NULL, (char *)da + 2, db, NULL, dd, &bias, 1));
  jitk_matmul_destroy(p);

  /* Another shape of the class (M, N, K rounded up to powers of two). */
  const mm_case tuned = {"a tuned plan of the class",
                         JITK_BFLOAT16,
                         JITK_COMPUTE_DEFAULT,
                         1020,
                         1600,
                         136,
                         1,
                         R,
                         R,
                         R,
                         0,
                         1,
                         0,
                         "max(acc + bias[col], (T)0)",
                         "raw float32 bias",
                         0,
                         "; tuned",
                         JITK_DTYPE_NONE,
                         0};
  run_case(e, &tuned, &seed);
  jitk_engine *e2 = jt_gpu_engine(); /* reads the choice from the database */
  run_case(e2, &tuned, &seed);
  jitk_engine_destroy(e2);

  /* FFMA plans have one configuration: nothing to time, nothing stored. */
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_FLOAT32;
  d.m = d.n = d.k = 100; /* within the buffers above */
  d.epilogue = NULL;
  d.epilogue_params = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  JT_OK(e, jitk_matmul_autotune(p, NULL, da, db, NULL, dd, NULL, 0));
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, "FFMA") != NULL && strstr(desc, "tuned") == NULL, "%s", desc);
  jitk_matmul_destroy(p);
  free(h);
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dbias, NULL));
  jitk_engine_destroy(e);
}

/* The mma.sync kernels, which GPUs before Hopper use: forced on this one. */
Test(matmul, tensor_cores_mma_sync) {
  setenv("JITK_MM_KIND", "mma", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x4B1;
  const mm_case cases[] = {
      {"mma.sync bf16 bias+ReLU, tails", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1030, 1288, 200, 1, R,
       R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, "(mma.sync)",
       JITK_DTYPE_NONE, 0},
      {"mma.sync f16 batch 3, C, D column-major", JITK_FLOAT16, JITK_COMPUTE_FLOAT16, 130, 136, 64,
       3, R, R, C, 1, 0.5, -2.0, NULL, NULL, 0, "(mma.sync)", JITK_DTYPE_NONE, 0},
      {"mma.sync tf32 B row-major", JITK_FLOAT32, JITK_COMPUTE_TF32, 100, 132, 36, 1, R, R, R, 0, 1,
       0, "max(acc + bias[col], (T)0)", "raw T bias", 0, "(mma.sync)", JITK_DTYPE_NONE, 0},
      {"mma.sync bf16 C of NaN with beta = 0", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 200, 136, 72, 1,
       R, R, C, 1, 2, 0, NULL, NULL, 0, "(mma.sync)", JITK_DTYPE_NONE, 0},
      {"mma.sync bf16 misaligned pointers: the FFMA twin", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 128,
       128, 64, 1, R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias", 1, "(mma.sync)",
       JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

Test(matmul, ffma) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5F3;
  const mm_case cases[] = {
      {"f32 bias+ReLU", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 257, 129, 75, 1, R, R, R, 0, 1, 0,
       "max(acc + bias[col], (T)0)", "raw T bias", 0, "FFMA", JITK_DTYPE_NONE, 0},
      {"f32 A and B column-major, K = 1", JITK_FLOAT32, JITK_COMPUTE_FLOAT32, 70, 90, 1, 1, C, C, R,
       0, 1, 0, NULL, NULL, 0, "FFMA", JITK_DTYPE_NONE, 0},
      {"f32 whole tiles (vector loads), K tail", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 384, 256, 100,
       1, R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw T bias", 0, "FFMA", JITK_DTYPE_NONE,
       0},
      {"f32 A and B column-major, tails", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 260, 300, 37, 1, C, C,
       R, 0, 1, 0, NULL, NULL, 0, "FFMA", JITK_DTYPE_NONE, 0},
      {"f32 column-major D", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 128, 96, 40, 1, R, R, C, 0, 1, 0,
       NULL, NULL, 0, "FFMA", JITK_DTYPE_NONE, 0},
      {"f64 C, alpha, beta", JITK_FLOAT64, JITK_COMPUTE_DEFAULT, 100, 77, 33, 2, R, R, R, 1, 2.0,
       0.25, NULL, NULL, 0, "FFMA", JITK_DTYPE_NONE, 0},
      {"f32 padded rows", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 130, 140, 33, 1, R, C, R, 0, 1, 0,
       NULL, NULL, 0, "FFMA", JITK_DTYPE_NONE, 5},
      {"f32 C of NaN with beta = 0, bias+ReLU", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 257, 129, 75, 1,
       R, R, R, 1, 1, 0, "max(acc + bias[col], (T)0)", "raw T bias", 0, "FFMA", JITK_DTYPE_NONE, 0},
      {"f64 C of NaN with beta = 0", JITK_FLOAT64, JITK_COMPUTE_DEFAULT, 100, 77, 33, 2, R, R, C, 1,
       2.0, 0, NULL, NULL, 0, "FFMA", JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* float32 FFMA on each of ffma_gemm's cp.async tiles (JITK_MM_FFMA_BN
 * forces it; plans take the one their model finds fastest): 13 batches
 * of 3 x 3 to 3 x 22 tiles. Blocks with rows or columns out of range and
 * blocks wholly in range (copies unchecked), a partial first K-tile,
 * every layout, rows off 16 bytes and padded with NaN, C with beta and a
 * C of NaN with beta = 0; then the plan's own choice on a small product
 * and a large one. */
Test(matmul, ffma_tiles) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x71DE;
  static const int bns[] = {256, 64, 32};
  for (size_t t = 0; t < sizeof bns / sizeof bns[0]; t++) {
    char bn[16], tile[32];
    snprintf(bn, sizeof bn, "%d", bns[t]);
    snprintf(tile, sizeof tile, "tile 128x%dx16,", bns[t]);
    setenv("JITK_MM_FFMA_BN", bn, 1);
    const mm_case cases[] = {
        {"bias+ReLU, tails", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 300, 700, 75, 13, R, R, R, 0, 1, 0,
         "max(acc + bias[col], (T)0)", "raw T bias", 0, tile, JITK_DTYPE_NONE, 0},
        {"whole tiles, C, alpha, beta", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 384, 768, 64, 13, R, R,
         R, 1, 2.0, 0.25, NULL, NULL, 0, tile, JITK_DTYPE_NONE, 0},
        {"A column-major", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 300, 700, 37, 13, C, R, R, 0, 1, 0,
         NULL, NULL, 0, tile, JITK_DTYPE_NONE, 0},
        {"B column-major, D column-major", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 300, 700, 37, 13, R,
         C, C, 0, 1, 0, "acc + bias[col]", "raw T bias", 0, tile, JITK_DTYPE_NONE, 0},
        {"A and B column-major, whole tiles", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 384, 768, 48, 13,
         C, C, R, 0, 1, 0, NULL, NULL, 0, tile, JITK_DTYPE_NONE, 0},
        {"misaligned pointers", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 384, 768, 33, 13, R, R, R, 0, 1,
         0, NULL, NULL, 1, tile, JITK_DTYPE_NONE, 0},
        {"padded rows", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 300, 700, 40, 13, R, C, R, 0, 1, 0,
         NULL, NULL, 0, tile, JITK_DTYPE_NONE, 5},
        {"C of NaN with beta = 0", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 300, 700, 75, 13, R, R, R, 1,
         1, 0, "max(acc + bias[col], (T)0)", "raw T bias", 0, tile, JITK_DTYPE_NONE, 0},
        {"K = 1", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 384, 768, 1, 13, R, R, R, 0, 1, 0, NULL, NULL,
         0, tile, JITK_DTYPE_NONE, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      cr_log_info("tile 128 x %d: %s", bns[t], cases[i].what);
      run_case(e, &cases[i], &seed);
    }
  }
  unsetenv("JITK_MM_FFMA_BN");
  const mm_case own[] = {
      {"the plan's tile, 1000 x 1030 x 999", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 1000, 1030, 999, 1,
       R, R, R, 0, 1, 0, "max(acc + bias[col], (T)0)", "raw T bias", 0, "FFMA (simt) float32",
       JITK_DTYPE_NONE, 0},
      {"the plan's tile, 2048^3", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 2048, 2048, 2048, 1, R, R, R,
       0, 1, 0, NULL, NULL, 0, "tile 128x256x16,", JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) run_case(e, &own[i], &seed);
  jitk_engine_destroy(e);
}

/* Outputs besides D and reductions of the epilogue's values (issue 16):
 * D = gelu(acc + bias[col]) with its pre-activation (float32 and
 * bfloat16) and a mask kept, and the column sums of D (a bias gradient),
 * the row sums of D squared (float64), the amax and the column minimums,
 * each checked against float64 from the same rounded inputs, and two
 * executions giving the same bits. */
typedef struct extras_case {
  const char *what;
  jitk_dtype dt;
  jitk_compute compute;
  int64_t m, n, k, batch;
  jitk_order ao, bo, d_o;
  int misalign;
  const char *kind;
  int split_k; /* the description's split_k (0: jitk's choice) */
} extras_case;

static double gelu_ref(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static void run_extras(jitk_engine *e, const extras_case *c, uint64_t *seed) {
  static const jitk_matmul_output outs[] = {
      {"pre", JITK_FLOAT32, "acc + bias[col]", 0, 0},
      {"pre16", JITK_BFLOAT16, "acc + bias[col]", 0, 0},
      {"mask", JITK_UINT8, "acc + bias[col] > (T)0", 0, 0},
  };
  static const jitk_matmul_reduction reds[] = {
      {"dbias", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS},
      {"rowsq", JITK_FLOAT64, "value * value", JITK_REDUCE_SUM, JITK_REDUCE_COLUMNS},
      {"amax", JITK_FLOAT32, "fabs(value)", JITK_REDUCE_MAX, JITK_REDUCE_ALL},
      {"colmin", JITK_FLOAT32, "value", JITK_REDUCE_MIN, JITK_REDUCE_ROWS},
  };
  enum { NO = 3, NR = 4 };
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = c->m;
  d.n = c->n;
  d.k = c->k;
  d.batch = c->batch;
  d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = c->dt;
  d.compute = c->compute;
  d.a_order = c->ao;
  d.b_order = c->bo;
  d.d_order = c->d_o;
  d.epilogue = "gelu(acc + bias[col])";
  d.epilogue_params = "raw float32 bias";
  d.outputs = outs;
  d.num_outputs = NO;
  d.reductions = reds;
  d.num_reductions = NR;
  d.split_k = c->split_k;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, c->kind) != NULL, "%s: %s", c->what, desc);
  const int64_t M = c->m, N = c->n, K = c->k, B = c->batch;
  const size_t es = jt_dtype_size(c->dt), na = (size_t)(B * M * K), nb = (size_t)(B * K * N),
               nd = (size_t)(B * M * N);
  double *ha = malloc(na * 8), *hb = malloc(nb * 8), *hbias = malloc((size_t)N * 8);
  unsigned char *sa = malloc(na * es + 64), *sb = malloc(nb * es + 64);
  float *fbias = malloc((size_t)N * 4);
  for (size_t i = 0; i < na; i++) {
    ha[i] = rounded(c->dt, jt_uniform(seed));
    jt_write_real(sa, c->dt, i + (size_t)c->misalign, ha[i]);
  }
  for (size_t i = 0; i < nb; i++) {
    hb[i] = rounded(c->dt, jt_uniform(seed));
    jt_write_real(sb, c->dt, i + (size_t)c->misalign, hb[i]);
  }
  for (int64_t j = 0; j < N; j++) hbias[j] = fbias[j] = (float)jt_uniform(seed);
  void *da = jt_dev_alloc(e, na * es + 64), *db = jt_dev_alloc(e, nb * es + 64),
       *dd = jt_dev_alloc(e, nd * es), *dbias = jt_dev_alloc(e, (size_t)N * 4);
  jt_to_dev(e, da, sa, na * es + 64);
  jt_to_dev(e, db, sb, nb * es + 64);
  jt_to_dev(e, dbias, fbias, (size_t)N * 4);
  const size_t osz[NO] = {4, 2, 1};
  const size_t rlen[NR] = {(size_t)(B * N), (size_t)(B * M), (size_t)B, (size_t)(B * N)};
  const size_t rsz[NR] = {4, 8, 4, 4};
  void *dout[NO], *dred[NR];
  unsigned char *hout[NO], *hred[2][NR];
  for (int i = 0; i < NO; i++) {
    dout[i] = jt_dev_alloc(e, nd * osz[i]);
    jt_poison(e, dout[i], nd * osz[i]);
    hout[i] = malloc(nd * osz[i]);
  }
  for (int i = 0; i < NR; i++) {
    dred[i] = jt_dev_alloc(e, rlen[i] * rsz[i]);
    hred[0][i] = malloc(rlen[i] * rsz[i]);
    hred[1][i] = malloc(rlen[i] * rsz[i]);
  }
  unsigned char *sd = malloc(nd * es), *sd2 = malloc(nd * es);
  jitk_arg extra[1] = {jitk_arg_ptr(dbias, JITK_FLOAT32)};
  jitk_matmul_operands ops;
  JT_OK(e, jitk_matmul_operands_init(&ops));
  ops.a = (char *)da + c->misalign * es;
  ops.b = (char *)db + c->misalign * es;
  ops.d = dd;
  ops.extra = extra;
  ops.num_extra = 1;
  ops.outputs = dout;
  ops.reductions = dred;
  /* The plain call refuses a plan with outputs. */
  JT_FAILS(e, JITK_ERR_INVALID_ARGUMENT, "jitk_matmul_execute_ex",
           jitk_matmul_execute(p, NULL, ops.a, ops.b, NULL, dd, extra, 1));
  for (int run = 0; run < 2; run++) {
    for (int i = 0; i < NR; i++) jt_poison(e, dred[i], rlen[i] * rsz[i]);
    jt_poison(e, dd, nd * es);
    JT_OK(e, jitk_matmul_execute_ex(p, NULL, &ops));
    jt_to_host(e, run ? sd2 : sd, dd, nd * es);
    for (int i = 0; i < NR; i++) jt_to_host(e, hred[run][i], dred[i], rlen[i] * rsz[i]);
  }
  for (int i = 0; i < NO; i++) jt_to_host(e, hout[i], dout[i], nd * osz[i]);
  cr_assert(memcmp(sd, sd2, nd * es) == 0, "%s: D differs between two executions", c->what);
  for (int i = 0; i < NR; i++)
    cr_assert(memcmp(hred[0][i], hred[1][i], rlen[i] * rsz[i]) == 0,
              "%s: reduction %s differs between two executions", c->what, reds[i].name);
  /* The float64 reference. */
  double *val = malloc(nd * 8), *pre = malloc(nd * 8);
  ref_products(ha, c->ao, hb, c->bo, M, N, K, B, pre, NULL);
  for (size_t r = 0; r < nd; r++) {
    pre[r] += hbias[r % (size_t)N];
    val[r] = gelu_ref(pre[r]);
  }
  const double tol = c->dt == JITK_FLOAT64   ? 1e-12
                     : c->dt == JITK_FLOAT32 ? (c->compute == JITK_COMPUTE_TF32 ? 1e-3 : 1e-5)
                                             : 1e-2;
  double e_d = 0, e_pre = 0, e_pre16 = 0, r2 = 0, p2 = 0;
  size_t mask_bad = 0, nonfinite = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        size_t r = (size_t)((b * M + i) * N + j);
        size_t o = (size_t)(b * M * N + (c->d_o == JITK_ROW_MAJOR ? i * N + j : j * M + i));
        double gd = jt_read_real(sd, c->dt, o), gp = jt_read_real(hout[0], JITK_FLOAT32, o),
               gp16 = jt_read_real(hout[1], JITK_BFLOAT16, o);
        if (!isfinite(gd) || !isfinite(gp) || !isfinite(gp16)) nonfinite++;
        e_d += (gd - val[r]) * (gd - val[r]);
        e_pre += (gp - pre[r]) * (gp - pre[r]);
        e_pre16 += (gp16 - pre[r]) * (gp16 - pre[r]);
        r2 += val[r] * val[r];
        p2 += pre[r] * pre[r];
        /* The mask may differ where the pre-activation is within rounding of 0. */
        if (hout[2][o] > 1 ||
            (hout[2][o] != (pre[r] > 0) && fabs(pre[r]) > 4 * tol * sqrt((double)K)))
          mask_bad++;
      }
  cr_assert(nonfinite == 0, "%s: %zu elements not finite (poison left)", c->what, nonfinite);
  cr_assert(sqrt(e_d / r2) <= tol, "%s (%s): D's relative error %.3g", c->what, desc,
            sqrt(e_d / r2));
  cr_assert(sqrt(e_pre / p2) <= (tol < 1e-6 ? 1e-6 : tol), "%s: pre's relative error %.3g", c->what,
            sqrt(e_pre / p2));
  cr_assert(sqrt(e_pre16 / p2) <= 1e-2, "%s: pre16's relative error %.3g", c->what,
            sqrt(e_pre16 / p2));
  cr_assert(mask_bad == 0, "%s: %zu mask elements wrong", c->what, mask_bad);
  /* The reductions, from the reference's values. */
  double e_r[NR] = {0}, n_r[NR] = {0};
  for (int64_t b = 0; b < B; b++) {
    double amax = 0;
    for (int64_t j = 0; j < N; j++) {
      double s = 0, mn = INFINITY, sq = 0;
      for (int64_t i = 0; i < M; i++) {
        double v = val[(b * M + i) * N + j];
        s += v;
        sq += v * v;
        mn = v < mn ? v : mn;
        amax = fabs(v) > amax ? fabs(v) : amax;
      }
      double g0 = ((float *)hred[0][0])[b * N + j], g3 = ((float *)hred[0][3])[b * N + j];
      e_r[0] += (g0 - s) * (g0 - s);
      n_r[0] += s * s;
      /* A column's minimum carries the error of one of its elements, which
       * is D's relative error times D's magnitude, not the minimum's: GELU's
       * minima sit near -0.17 whatever the column's scale. */
      e_r[3] += (g3 - mn) * (g3 - mn);
      n_r[3] += sq / (double)M;
    }
    for (int64_t i = 0; i < M; i++) {
      double s = 0;
      for (int64_t j = 0; j < N; j++) s += val[(b * M + i) * N + j] * val[(b * M + i) * N + j];
      double g1 = ((double *)hred[0][1])[b * M + i];
      e_r[1] += (g1 - s) * (g1 - s);
      n_r[1] += s * s;
    }
    double g2 = ((float *)hred[0][2])[b];
    e_r[2] += (g2 - amax) * (g2 - amax);
    n_r[2] += amax * amax;
  }
  /* The terms carry D's error, and a square twice it. */
  for (int i = 0; i < NR; i++)
    cr_assert(sqrt(e_r[i] / n_r[i]) <= 2 * (tol < 1e-6 ? 1e-6 : tol),
              "%s: reduction %s: error %.3g", c->what, reds[i].name, sqrt(e_r[i] / n_r[i]));
  for (int i = 0; i < NO; i++) {
    JT_OK(e, jitk_device_free(e, dout[i], NULL));
    free(hout[i]);
  }
  for (int i = 0; i < NR; i++) {
    JT_OK(e, jitk_device_free(e, dred[i], NULL));
    free(hred[0][i]);
    free(hred[1][i]);
  }
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dbias, NULL));
  free(ha);
  free(hb);
  free(hbias);
  free(fbias);
  free(sa);
  free(sb);
  free(sd);
  free(sd2);
  free(val);
  free(pre);
  jitk_matmul_destroy(p);
}

Test(matmul, outputs_and_reductions) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x6C1;
  const extras_case cases[] = {
      {"bf16 wgmma, tails, batch 2", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 300, 264, 136, 2, R, R, R,
       0, "tensor cores bfloat16", 0},
      {"f16 wgmma, B column-major, D column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 256, 200,
       72, 1, R, C, C, 0, "tensor cores float16", 0},
      {"tf32 wgmma", JITK_FLOAT32, JITK_COMPUTE_TF32, 130, 136, 40, 1, R, R, R, 0,
       "tensor cores tf32", 0},
      {"bf16 misaligned: copied onto 16 bytes", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 129, 136, 64,
       1, R, R, R, 1, "tensor cores bfloat16", 0},
      {"f32 FFMA", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 257, 129, 75, 2, R, C, R, 0, "FFMA", 0},
      {"f32 FFMA on cp.async tiles", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 300, 700, 75, 13, R, R, R,
       0, "(cp.async)", 0},
      {"f64 FFMA, D column-major", JITK_FLOAT64, JITK_COMPUTE_DEFAULT, 100, 77, 33, 1, C, R, C, 0,
       "FFMA", 0},
      {"one row, the whole matrix a row", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1, 264, 64, 1, R, R,
       R, 0, "tensor cores bfloat16", 0},
      {"bf16 wgmma, odd N: D through shared memory, outputs as they are", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 300, 263, 136, 2, R, R, R, 0, "tensor cores bfloat16", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_extras(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

Test(matmul, outputs_and_reductions_mma_sync) {
  setenv("JITK_MM_KIND", "mma", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x6C3;
  const extras_case cases[] = {
      {"mma.sync bf16, tails", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 300, 264, 136, 2, R, R, R, 0,
       "(mma.sync)", 0},
      {"mma.sync f16, D column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 130, 136, 64, 1, R, C, C,
       0, "(mma.sync)", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_extras(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* Outputs and reductions on the final sums of split-K: once per element,
 * after the slices are added, the same bits twice. */
Test(matmul, split_k_outputs_and_reductions) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5C1;
  const extras_case cases[] = {
      {"split-K 3 bf16 wgmma, M 7, tails, batch 2", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 7, 1000,
       4104, 2, R, R, R, 0, "; split-K 3 (", 3},
      {"split-K 5 f16 wgmma, B and D column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 64, 264,
       1032, 1, R, C, C, 0, "; split-K 5 (", 5},
      {"split-K 4 tf32 wgmma", JITK_FLOAT32, JITK_COMPUTE_TF32, 16, 136, 1000, 1, R, R, R, 0,
       "; split-K 4 (", 4},
      {"split-K 2 bf16 misaligned: copied, then split", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 16,
       136, 640, 1, R, R, R, 1, "; split-K 2 (", 2},
      {"split-K 6 f32 FFMA", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 1, 129, 1000, 2, R, C, R, 0,
       "; split-K 6 (", 6},
      {"split-K 8 f32 FFMA on cp.async tiles", JITK_FLOAT32, JITK_COMPUTE_DEFAULT, 130, 1000, 2000,
       2, R, R, R, 0, "(cp.async)", 8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_extras(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* Reductions folded per tile on wgmma (issue 16): each tile reduces its
 * rows (16 a warp) and its columns in registers before anything leaves
 * the multiprocessor, and small kernels finish from those partial
 * results. Every operation and axis at once, of float32, float64, and
 * 16-bit results, on a float32 D that holds the values exactly, so that
 * the host reduces the kernel's own values: maxima and minima must match
 * to the bit (16-bit ones within their rounding), sums within float32's
 * (float64's) rounding of the sum of magnitudes. D itself against float64
 * within tf32's or 16-bit inputs' rounding; tails in M (a warp's rows cut
 * by M) and N, batches, every way D leaves (TMA, staged rows, column-major
 * from registers), both schedules, and the kernels that keep writing
 * every term (split, swapped, mma.sync) for comparison. Outputs of D's
 * values (bfloat16, float32 with rows off 16 bytes, a byte mask), which
 * wgmma plans with D row-major write in whole rows, must equal D's. Two
 * executions give the same bits. */
static const jitk_matmul_reduction fold_reds[] = {
    {"s_rows", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS},
    {"x_rows", JITK_FLOAT32, "value", JITK_REDUCE_MAX, JITK_REDUCE_ROWS},
    {"n_rows", JITK_BFLOAT16, "value", JITK_REDUCE_MIN, JITK_REDUCE_ROWS},
    {"s_cols", JITK_FLOAT64, "value * value", JITK_REDUCE_SUM, JITK_REDUCE_COLUMNS},
    {"x_cols", JITK_FLOAT32, "value", JITK_REDUCE_MAX, JITK_REDUCE_COLUMNS},
    {"n_cols", JITK_FLOAT32, "value + row", JITK_REDUCE_MIN, JITK_REDUCE_COLUMNS},
    {"s_all", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ALL},
    {"n_all", JITK_FLOAT16, "value", JITK_REDUCE_MIN, JITK_REDUCE_ALL},
};
enum { FOLD_NR = sizeof fold_reds / sizeof fold_reds[0] };

typedef struct fold_case {
  const char *what;
  jitk_dtype dt;
  jitk_compute compute;
  int64_t m, n, k, batch;
  jitk_order ao, bo, d_o;
  const char *env, *env_value; /* set while the plan is made (NULL: none) */
  const char *kind;            /* expected in the description */
  int split_k;
} fold_case;

/* Checks reduction value g against the host's h: exactly (tol 0), or
 * within tol * scale. */
static void fold_check(const fold_case *c, int i, int64_t at, double g, double h, double tol,
                       double scale) {
  const bool ok = tol == 0 ? g == h : fabs(g - h) <= tol * scale + 1e-30;
  cr_assert(ok, "%s: reduction %s [%lld]: %.9g, the host's %.9g (tolerance %.3g x %.3g)", c->what,
            fold_reds[i].name, (long long)at, g, h, tol, scale);
}

static void run_folds(jitk_engine *e, const fold_case *c, uint64_t *seed) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = c->m;
  d.n = c->n;
  d.k = c->k;
  d.batch = c->batch;
  d.a_dtype = d.b_dtype = c->dt;
  d.c_dtype = d.d_dtype = JITK_FLOAT32;
  d.compute = c->compute;
  d.a_order = c->ao;
  d.b_order = c->bo;
  d.d_order = c->d_o;
  d.epilogue = "gelu(acc + bias[col])";
  d.epilogue_params = "raw float32 bias";
  d.reductions = fold_reds;
  d.num_reductions = FOLD_NR;
  d.split_k = c->split_k;
  /* Outputs of D's values in D's layout: bfloat16 packed, float32 with
   * rows (or columns) one element longer than D's, so off 16 bytes, and
   * a byte mask. Each must hold exactly what D does. */
  const int64_t least = c->d_o == JITK_ROW_MAJOR ? c->n : c->m,
                outer = c->d_o == JITK_ROW_MAJOR ? c->m : c->n;
  const jitk_matmul_output outs[3] = {{"o16", JITK_BFLOAT16, "value", 0, 0},
                                      {"o32", JITK_FLOAT32, "value", least + 1, 0},
                                      {"o8", JITK_UINT8, "value > (T)0", 0, 0}};
  const size_t ono[3] = {(size_t)(least * outer), (size_t)((least + 1) * outer),
                         (size_t)(least * outer)};
  const size_t osz[3] = {2, 4, 1};
  d.outputs = outs;
  d.num_outputs = 3;
  if (c->env != NULL) setenv(c->env, c->env_value, 1);
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  if (c->env != NULL) unsetenv(c->env);
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, c->kind) != NULL, "%s: %s", c->what, desc);
  const int64_t M = c->m, N = c->n, K = c->k, B = c->batch;
  const size_t es = jt_dtype_size(c->dt), na = (size_t)(B * M * K), nb = (size_t)(B * K * N),
               nd = (size_t)(B * M * N);
  double *ha = malloc(na * 8), *hb = malloc(nb * 8);
  unsigned char *sa = malloc(na * es), *sb = malloc(nb * es);
  float *fbias = malloc((size_t)N * 4), *hd = malloc(nd * 4), *hd2 = malloc(nd * 4);
  for (size_t i = 0; i < na; i++) {
    ha[i] = rounded(c->dt, jt_uniform(seed));
    jt_write_real(sa, c->dt, i, ha[i]);
  }
  for (size_t i = 0; i < nb; i++) {
    hb[i] = rounded(c->dt, jt_uniform(seed));
    jt_write_real(sb, c->dt, i, hb[i]);
  }
  for (int64_t j = 0; j < N; j++) fbias[j] = (float)jt_uniform(seed);
  void *da = jt_dev_alloc(e, na * es), *db = jt_dev_alloc(e, nb * es),
       *dd = jt_dev_alloc(e, nd * 4), *dbias = jt_dev_alloc(e, (size_t)N * 4);
  jt_to_dev(e, da, sa, na * es);
  jt_to_dev(e, db, sb, nb * es);
  jt_to_dev(e, dbias, fbias, (size_t)N * 4);
  size_t rlen[FOLD_NR], rsz[FOLD_NR];
  void *dred[FOLD_NR];
  unsigned char *hred[2][FOLD_NR];
  for (int i = 0; i < FOLD_NR; i++) {
    rlen[i] = (size_t)B * (fold_reds[i].axis == JITK_REDUCE_ROWS      ? (size_t)N
                           : fold_reds[i].axis == JITK_REDUCE_COLUMNS ? (size_t)M
                                                                      : 1);
    rsz[i] = jt_dtype_size(fold_reds[i].dtype);
    dred[i] = jt_dev_alloc(e, rlen[i] * rsz[i]);
    hred[0][i] = malloc(rlen[i] * rsz[i]);
    hred[1][i] = malloc(rlen[i] * rsz[i]);
  }
  void *dout[3];
  unsigned char *hout[3];
  for (int i = 0; i < 3; i++) {
    dout[i] = jt_dev_alloc(e, (size_t)B * ono[i] * osz[i]);
    hout[i] = malloc((size_t)B * ono[i] * osz[i]);
  }
  jitk_arg extra[1] = {jitk_arg_ptr(dbias, JITK_FLOAT32)};
  jitk_matmul_operands ops;
  JT_OK(e, jitk_matmul_operands_init(&ops));
  ops.a = da;
  ops.b = db;
  ops.d = dd;
  ops.extra = extra;
  ops.num_extra = 1;
  ops.reductions = dred;
  ops.outputs = dout;
  for (int run = 0; run < 2; run++) {
    for (int i = 0; i < 3; i++) jt_poison(e, dout[i], (size_t)B * ono[i] * osz[i]);
    for (int i = 0; i < FOLD_NR; i++) jt_poison(e, dred[i], rlen[i] * rsz[i]);
    jt_poison(e, dd, nd * 4);
    JT_OK(e, jitk_matmul_execute_ex(p, NULL, &ops));
    jt_to_host(e, run ? hd2 : hd, dd, nd * 4);
    for (int i = 0; i < FOLD_NR; i++) jt_to_host(e, hred[run][i], dred[i], rlen[i] * rsz[i]);
  }
  for (int i = 0; i < 3; i++) jt_to_host(e, hout[i], dout[i], (size_t)B * ono[i] * osz[i]);
  cr_assert(memcmp(hd, hd2, nd * 4) == 0, "%s: D differs between two executions", c->what);
  /* The outputs, element by element (the gaps of o32's longer rows are
   * not written and not read). */
  size_t out_bad[3] = {0, 0, 0};
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        const int64_t x = c->d_o == JITK_ROW_MAJOR ? i : j, y = c->d_o == JITK_ROW_MAJOR ? j : i;
        const float v = hd[b * M * N + x * least + y];
        const double g16 =
            jt_read_real(hout[0], JITK_BFLOAT16, (size_t)(b * (int64_t)ono[0] + x * least + y));
        const float g32 = ((float *)hout[1])[b * (int64_t)ono[1] + x * (least + 1) + y];
        const unsigned char g8 = hout[2][b * (int64_t)ono[2] + x * least + y];
        if (!(fabs(g16 - v) <= fabs(v) / 256)) out_bad[0]++;
        if (!(g32 == v)) out_bad[1]++;
        if (g8 != (v > 0)) out_bad[2]++;
      }
  for (int i = 0; i < 3; i++)
    cr_assert(out_bad[i] == 0, "%s (%s): output %s: %zu elements wrong", c->what, desc,
              outs[i].name, out_bad[i]);
  for (int i = 0; i < FOLD_NR; i++)
    cr_assert(memcmp(hred[0][i], hred[1][i], rlen[i] * rsz[i]) == 0,
              "%s (%s): reduction %s differs between two executions", c->what, desc,
              fold_reds[i].name);
  /* D against float64, then the reductions of D's own values (its
   * element (b, i, j) as the epilogue saw it). */
  double e2 = 0, r2 = 0;
  double *prod = malloc((size_t)(B * M * N) * 8);
  ref_products(ha, c->ao, hb, c->bo, M, N, K, B, prod, NULL);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        const double want = gelu_ref(prod[(b * M + i) * N + j] + fbias[j]);
        const double got = hd[b * M * N + (c->d_o == JITK_ROW_MAJOR ? i * N + j : j * M + i)];
        e2 += (got - want) * (got - want);
        r2 += want * want;
      }
  free(prod);
  const double tol = c->compute == JITK_COMPUTE_TF32 ? 1e-3 : 1e-2;
  cr_assert(sqrt(e2 / r2) <= tol, "%s (%s): D's relative error %.3g", c->what, desc, sqrt(e2 / r2));
#define DV(b, i, j) hd[(b) * M * N + (c->d_o == JITK_ROW_MAJOR ? (i) * N + (j) : (j) * M + (i))]
  for (int64_t b = 0; b < B; b++) {
    double all_s = 0, all_a = 0;
    float all_n = INFINITY;
    for (int64_t j = 0; j < N; j++) {
      double s = 0, a = 0;
      float x = -INFINITY, n = INFINITY;
      for (int64_t i = 0; i < M; i++) {
        const float v = DV(b, i, j);
        s += v;
        a += fabs(v);
        x = v > x ? v : x;
        n = v < n ? v : n;
      }
      const int64_t at = b * N + j;
      fold_check(c, 0, at, ((float *)hred[0][0])[at], s, 1e-5, a);
      fold_check(c, 1, at, ((float *)hred[0][1])[at], x, 0, 1);
      fold_check(c, 2, at, jt_read_real(hred[0][2], JITK_BFLOAT16, (size_t)at), n, 4e-3, fabs(n));
      all_s += s;
      all_a += a;
      all_n = n < all_n ? n : all_n;
    }
    for (int64_t i = 0; i < M; i++) {
      double sq = 0;
      float x = -INFINITY, n = INFINITY;
      for (int64_t j = 0; j < N; j++) {
        const float v = DV(b, i, j), v2 = v * v, vr = v + (float)i;
        sq += v2;
        x = v > x ? v : x;
        n = vr < n ? vr : n;
      }
      const int64_t at = b * M + i;
      fold_check(c, 3, at, ((double *)hred[0][3])[at], sq, 1e-13, sq);
      fold_check(c, 4, at, ((float *)hred[0][4])[at], x, 0, 1);
      fold_check(c, 5, at, ((float *)hred[0][5])[at], n, 0, 1);
    }
    fold_check(c, 6, b, ((float *)hred[0][6])[b], all_s, 1e-5, all_a);
    fold_check(c, 7, b, jt_read_real(hred[0][7], JITK_FLOAT16, (size_t)b), all_n, 1e-3,
               fabs(all_n));
  }
#undef DV
  for (int i = 0; i < 3; i++) {
    JT_OK(e, jitk_device_free(e, dout[i], NULL));
    free(hout[i]);
  }
  for (int i = 0; i < FOLD_NR; i++) {
    JT_OK(e, jitk_device_free(e, dred[i], NULL));
    free(hred[0][i]);
    free(hred[1][i]);
  }
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dbias, NULL));
  free(ha);
  free(hb);
  free(sa);
  free(sb);
  free(fbias);
  free(hd);
  free(hd2);
  jitk_matmul_destroy(p);
}

Test(matmul, tile_folded_reductions) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xF01D;
  const jitk_compute DF = JITK_COMPUTE_DEFAULT;
  const fold_case cases[] = {
      {"bf16 ping-pong, tails, batch 3, D by TMA", JITK_BFLOAT16, DF, 300, 264, 136, 3, R, R, R,
       NULL, NULL, "(ping-pong)", 0},
      {"bf16, rows off 16 bytes: D staged by rows", JITK_BFLOAT16, DF, 300, 263, 136, 2, R, R, R,
       NULL, NULL, "(ping-pong)", 0},
      {"bf16 128 x 64 tiles, tails, batch 2", JITK_BFLOAT16, DF, 256, 200, 136, 2, R, R, R, NULL,
       NULL, "tile 128x64x64", 0},
      {"f16, B and D column-major: D from registers", JITK_FLOAT16, DF, 129, 200, 72, 2, R, C, C,
       NULL, NULL, "(ping-pong)", 0},
      {"tf32", JITK_FLOAT32, JITK_COMPUTE_TF32, 130, 136, 40, 1, R, R, R, NULL, NULL,
       "tensor cores tf32", 0},
      {"bf16 M 2100: 132 partial rows", JITK_BFLOAT16, DF, 2100, 300, 64, 1, R, R, R, NULL, NULL,
       "(ping-pong)", 0},
      {"bf16 M 1, not swapped", JITK_BFLOAT16, DF, 1, 264, 64, 2, R, R, R, "JITK_MM_SWAP", "0",
       "(ping-pong)", 0},
      {"bf16 M 17, not swapped: one row in a warp", JITK_BFLOAT16, DF, 17, 130, 64, 1, R, R, R,
       "JITK_MM_SWAP", "0", "(ping-pong)", 0},
      {"bf16 cooperative 128 x 256, tails, batch 2", JITK_BFLOAT16, DF, 200, 520, 136, 2, R, R, R,
       "JITK_MM_SCHEDULE", "cooperative", "(cooperative)", 0},
      {"bf16 cooperative, D column-major", JITK_BFLOAT16, DF, 200, 300, 72, 1, C, R, C,
       "JITK_MM_SCHEDULE", "cooperative", "(cooperative)", 0},
      {"split-K 3 (every term)", JITK_BFLOAT16, DF, 20, 300, 4104, 2, R, R, R, "JITK_MM_SWAP", "0",
       "; split-K 3 (", 3},
      {"swapped (every term)", JITK_BFLOAT16, DF, 7, 1000, 136, 2, R, R, R, "JITK_MM_SWAP", "1",
       "; A and B swapped", 0},
      {"mma.sync (every term)", JITK_BFLOAT16, DF, 300, 264, 136, 2, R, R, R, "JITK_MM_KIND", "mma",
       "(mma.sync)", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_folds(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/*
 * Split-K on decode shapes (issue 16): M 1 to 200 against N = 1000 and
 * K = 4100 (neither a multiple of a tile), every layout of A and B (rows
 * padded to 16 bytes, the padding NaN), bias+ReLU, and C with alpha and
 * beta, at several slice counts (jitk's choice, none, 2, 5, as many as
 * K-tiles). Each element is checked against a float64 product of the same
 * rounded inputs, within D's rounding plus a float32 (or tf32) sum's error
 * bound; the poison D starts as must all be overwritten; and a second
 * execution must give the same bits.
 */
typedef struct split_case {
  jitk_dtype dt;
  jitk_compute compute;
  int64_t m, n, k, batch;
  jitk_order ao, bo, d_o;
  int with_c;       /* C with alpha 1.5 and beta -0.5, else alpha 1 and no C */
  const char *kind; /* expected in the description */
} split_case;

static int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

/* How many of run_split's plans summed their slices across clusters. */
static int cluster_runs;

static void run_split(jitk_engine *e, const split_case *c, const int *splits, size_t nsplits,
                      uint64_t *seed) {
  const int64_t M = c->m, N = c->n, K = c->k, B = c->batch;
  const bool a_row = c->ao == JITK_ROW_MAJOR, b_row = c->bo == JITK_ROW_MAJOR;
  const int64_t a_outer = a_row ? M : K, a_inner = a_row ? K : M;
  const int64_t b_outer = b_row ? K : N, b_inner = b_row ? N : K;
  const int64_t lda = round8(a_inner), ldb = round8(b_inner);
  const size_t es = jt_dtype_size(c->dt), nd = (size_t)(B * M * N);
  const size_t sna = (size_t)(B * a_outer * lda), snb = (size_t)(B * b_outer * ldb);
  double *ha = malloc((size_t)(B * M * K) * 8), *hb = malloc((size_t)(B * K * N) * 8);
  double *hc = malloc(nd * 8), *want = malloc(nd * 8), *bound = malloc(nd * 8);
  unsigned char *sa = malloc(sna * es), *sb = malloc(snb * es), *sc = malloc(nd * es);
  unsigned char *sd = malloc(nd * es), *sd2 = malloc(nd * es);
  float *fbias = malloc((size_t)N * 4);
  for (size_t i = 0; i < sna; i++) jt_write_real(sa, c->dt, i, NAN);
  for (size_t i = 0; i < snb; i++) jt_write_real(sb, c->dt, i, NAN);
  for (int64_t b = 0; b < B; b++)
    for (int64_t o = 0; o < a_outer; o++)
      for (int64_t in = 0; in < a_inner; in++) {
        double v = rounded(c->dt, jt_uniform(seed));
        int64_t i = a_row ? o : in, q = a_row ? in : o;
        ha[(b * M + i) * K + q] = v;
        jt_write_real(sa, c->dt, (size_t)((b * a_outer + o) * lda + in), v);
      }
  for (int64_t b = 0; b < B; b++)
    for (int64_t o = 0; o < b_outer; o++)
      for (int64_t in = 0; in < b_inner; in++) {
        double v = rounded(c->dt, jt_uniform(seed));
        int64_t q = b_row ? o : in, j = b_row ? in : o;
        hb[(b * K + q) * N + j] = v;
        jt_write_real(sb, c->dt, (size_t)((b * b_outer + o) * ldb + in), v);
      }
  for (size_t i = 0; i < nd; i++) {
    hc[i] = rounded(c->dt, jt_uniform(seed));
    jt_write_real(sc, c->dt, i, hc[i]);
  }
  for (int64_t j = 0; j < N; j++) fbias[j] = (float)jt_uniform(seed);
  /* The reference, and each element's error bound: D's rounding (twice
   * its unit roundoff, relative), and the sum's: float32 accumulation
   * (K terms) or tf32's rounding of the inputs, relative to the sum of
   * the terms' magnitudes. */
  const bool tf32 = c->compute == JITK_COMPUTE_TF32;
  const double out_rel = c->dt == JITK_BFLOAT16  ? 1.0 / 128
                         : c->dt == JITK_FLOAT16 ? 1.0 / 1024
                                                 : 1e-6;
  const double sum_rel = tf32 ? 2e-3 : 2e-5;
  const double alpha = c->with_c ? 1.5 : 1.0, beta = c->with_c ? -0.5 : 0.0;
  /* The products and their terms' magnitudes first, in place. */
  ref_products(ha, JITK_ROW_MAJOR, hb, JITK_ROW_MAJOR, M, N, K, B, want, bound);
  for (size_t o = 0; o < nd; o++) {
    const double acc = alpha * want[o] + beta * hc[o] + fbias[o % (size_t)N];
    want[o] = acc > 0 ? acc : 0;
    bound[o] = out_rel * fabs(want[o]) + sum_rel * alpha * bound[o] + 1e-6;
  }
  void *da = jt_dev_alloc(e, sna * es), *db = jt_dev_alloc(e, snb * es),
       *dc = jt_dev_alloc(e, nd * es), *dd = jt_dev_alloc(e, nd * es),
       *dbias = jt_dev_alloc(e, (size_t)N * 4);
  jt_to_dev(e, da, sa, sna * es);
  jt_to_dev(e, db, sb, snb * es);
  jt_to_dev(e, dc, sc, nd * es);
  jt_to_dev(e, dbias, fbias, (size_t)N * 4);
  for (size_t si = 0; si < nsplits; si++) {
    jitk_matmul_desc d;
    jitk_matmul_desc_init(&d);
    d.m = M;
    d.n = N;
    d.k = K;
    d.batch = B;
    d.a_dtype = d.b_dtype = d.c_dtype = d.d_dtype = c->dt;
    d.compute = c->compute;
    d.a_order = c->ao;
    d.b_order = c->bo;
    d.c_order = JITK_ROW_MAJOR;
    d.d_order = c->d_o;
    d.lda = lda;
    d.ldb = ldb;
    d.has_c = c->with_c;
    d.alpha = alpha;
    d.beta = beta;
    d.epilogue = "max(acc + bias[col], (T)0)";
    d.epilogue_params = "raw float32 bias";
    /* -1: as many slices as the kernel has K-tiles. */
    d.split_k = splits[si];
    jitk_matmul *p = NULL;
    if (splits[si] < 0) {
      d.split_k = 1;
      JT_OK(e, jitk_matmul_create(e, &d, &p));
      char one[512];
      JT_OK(e, jitk_matmul_describe(p, one, sizeof one));
      jitk_matmul_destroy(p);
      /* The K-tile: 64 (16-bit wgmma), 32 (tf32 wgmma), 16 (FFMA), or
       * mma.sync's, from "tile 128xBNxBK". */
      const char *t = strstr(one, "tile 128x");
      int bk = 16;
      if (t != NULL && strchr(t + 9, 'x') != NULL) bk = atoi(strchr(t + 9, 'x') + 1);
      if (strstr(one, "FFMA") != NULL) bk = 16;
      d.split_k = (int)((K + bk - 1) / bk);
    }
    JT_OK(e, jitk_matmul_create(e, &d, &p));
    char desc[512];
    JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
    char what[640];
    snprintf(what, sizeof what,
             "%lld x %lld x %lld batch %lld, A %s, B %s, D %s, %s, split_k %d: %s", (long long)M,
             (long long)N, (long long)K, (long long)B, a_row ? "row" : "col", b_row ? "row" : "col",
             c->d_o == JITK_ROW_MAJOR ? "row" : "col", c->with_c ? "C" : "no C", d.split_k, desc);
    cr_assert(strstr(desc, c->kind) != NULL, "%s", what);
    if (d.split_k > 1) {
      char need[64];
      snprintf(need, sizeof need, "; split-K %d (", d.split_k);
      cr_assert(strstr(desc, need) != NULL, "%s", what);
    }
    jitk_arg bias = jitk_arg_ptr(dbias, JITK_FLOAT32);
    for (int run = 0; run < 2; run++) {
      jt_poison(e, dd, nd * es);
      JT_OK(e, jitk_matmul_execute(p, NULL, da, db, c->with_c ? dc : NULL, dd, &bias, 1));
      jt_to_host(e, run ? sd2 : sd, dd, nd * es);
    }
    cr_assert(memcmp(sd, sd2, nd * es) == 0, "%s: D differs between two executions", what);
    if (strstr(desc, "across the cluster") != NULL) {
      cluster_runs++;
      /* The same split through the workspace and the fix-up kernel
       * (JITK_MM_CSPLIT=0): the slices summed in the same order, so the
       * same bits. */
      setenv("JITK_MM_CSPLIT", "0", 1);
      jitk_matmul *q = NULL;
      JT_OK(e, jitk_matmul_create(e, &d, &q));
      unsetenv("JITK_MM_CSPLIT");
      char qdesc[512];
      JT_OK(e, jitk_matmul_describe(q, qdesc, sizeof qdesc));
      cr_assert(strstr(qdesc, "summed by a fix-up kernel") != NULL, "%s: %s", what, qdesc);
      jt_poison(e, dd, nd * es);
      JT_OK(e, jitk_matmul_execute(q, NULL, da, db, c->with_c ? dc : NULL, dd, &bias, 1));
      jt_to_host(e, sd2, dd, nd * es);
      cr_assert(memcmp(sd, sd2, nd * es) == 0, "%s: D differs from the fix-up kernel's", what);
      jitk_matmul_destroy(q);
    }
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
          const size_t o = (size_t)((b * M + i) * N + j);
          const size_t at =
              (size_t)(b * M * N + (c->d_o == JITK_ROW_MAJOR ? i * N + j : j * M + i));
          const double got = jt_read_real(sd, c->dt, at);
          cr_assert(isfinite(got) && fabs(got - want[o]) <= bound[o],
                    "%s: D[%lld][%lld][%lld] is %.9g, want %.9g (bound %.3g)", what, (long long)b,
                    (long long)i, (long long)j, got, want[o], bound[o]);
        }
    jitk_matmul_destroy(p);
  }
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dc, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  JT_OK(e, jitk_device_free(e, dbias, NULL));
  free(ha);
  free(hb);
  free(hc);
  free(want);
  free(bound);
  free(sa);
  free(sb);
  free(sc);
  free(sd);
  free(sd2);
  free(fbias);
}

static const int split_counts[] = {0, 1, 2, 5, -1};
#define NSPLITS (sizeof split_counts / sizeof split_counts[0])

/* wgmma (on an H200): bf16 and f16 in every layout of A and B, M from 1
 * to 200; column-major D; a batch of 3. */
Test(matmul, split_k_decode) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5D1;
  static const int64_t ms[] = {1, 7, 16, 64, 200};
  static const jitk_dtype dts[] = {JITK_BFLOAT16, JITK_FLOAT16};
  for (int t = 0; t < 2; t++)
    for (int lay = 0; lay < 4; lay++)
      for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
        /* Every M on row-major A and B; two on the other layouts. */
        if (lay > 0 && ms[mi] != 7 && ms[mi] != 64) continue;
        const split_case c = {dts[t],
                              JITK_COMPUTE_DEFAULT,
                              ms[mi],
                              1000,
                              4100,
                              1,
                              lay & 1 ? C : R,
                              lay & 2 ? C : R,
                              R,
                              (int)((mi + (size_t)lay) & 1),
                              "tensor cores"};
        run_split(e, &c, split_counts, NSPLITS, &seed);
      }
  const split_case more[] = {
      {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 16, 1000, 4100, 3, R, C, R, 1, "tensor cores"},
      {JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 64, 1000, 4100, 1, R, R, C, 1, "tensor cores"},
      {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 200, 1001, 4100, 1, R, R, R, 0, "tensor cores"},
  };
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
    run_split(e, &more[i], split_counts, NSPLITS, &seed);
  jitk_engine_destroy(e);
}

/* tf32 (wgmma, transposing a column-major A and a row-major B first) and
 * float32 on CUDA cores. */
Test(matmul, split_k_decode_float32) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5D2;
  for (int lay = 0; lay < 4; lay++) {
    const split_case c = {JITK_FLOAT32,
                          JITK_COMPUTE_TF32,
                          lay == 0 ? 1 : 16,
                          1000,
                          4100,
                          1,
                          lay & 1 ? C : R,
                          lay & 2 ? C : R,
                          R,
                          lay & 1,
                          "tensor cores tf32"};
    run_split(e, &c, split_counts, NSPLITS, &seed);
  }
  const split_case ffma[] = {
      {JITK_FLOAT32, JITK_COMPUTE_FLOAT32, 7, 1000, 4100, 1, R, R, R, 1, "FFMA"},
      {JITK_FLOAT32, JITK_COMPUTE_FLOAT32, 64, 1000, 4100, 2, C, C, C, 0, "FFMA"},
  };
  for (size_t i = 0; i < sizeof ffma / sizeof ffma[0]; i++)
    run_split(e, &ffma[i], split_counts, NSPLITS, &seed);
  jitk_engine_destroy(e);
}

/* float32 FFMA split across clusters (sm_90): each cp.async tile
 * (JITK_MM_FFMA_BN) with 2, 3 and 4 slices, each a block of a cluster
 * (the 128 x 256 tile with 2 and 3 only), and with 5, beyond a cluster,
 * through the workspace (the wide tile's 4 too), as simt_gemm's 128 x 128
 * (0) always is; tails in every dimension, every layout of A and B,
 * column-major D, C. Clusters need more blocks than multiprocessors, and
 * at most a round of the multiprocessors' blocks (matmul_plan.c's
 * cluster_split), so each case takes the batches that put its blocks just
 * past the multiprocessors. Each split summed across clusters also runs
 * with JITK_MM_CSPLIT=0 and must give the same bits (run_split). */
Test(matmul, cluster_split) {
  jitk_engine *e = jt_gpu_engine();
  jitk_device_info info;
  JT_OK(e, jitk_engine_device_info(e, &info));
  uint64_t seed = 0xC5B;
  static const int splits[] = {2, 3, 4, 5};
  static const int bns[] = {0, 256, 64, 32};
  cluster_runs = 0;
  for (size_t t = 0; t < sizeof bns / sizeof bns[0]; t++) {
    char bn[8];
    snprintf(bn, sizeof bn, "%d", bns[t]);
    setenv("JITK_MM_FFMA_BN", bn, 1);
    const int64_t wide = bns[t] > 0 ? bns[t] : 128;
    for (int lay = 0; lay < 4; lay++)
      for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        const int64_t m = 517 - 40 * lay, n = 3 * wide - 5 - 11 * lay;
        const int64_t blocks = (m + 127) / 128 * ((n + wide - 1) / wide) * splits[s];
        const split_case c = {JITK_FLOAT32,
                              JITK_COMPUTE_FLOAT32,
                              m,
                              n,
                              203 + lay,
                              info.multiprocessors / blocks + 1,
                              lay & 1 ? C : R,
                              lay & 2 ? C : R,
                              lay == 3 ? C : R,
                              lay & 1,
                              "FFMA"};
        cr_log_info("tile %s, layout %d, split %d, batch %lld", bn, lay, splits[s],
                    (long long)c.batch);
        run_split(e, &c, &splits[s], 1, &seed);
      }
  }
  unsetenv("JITK_MM_FFMA_BN");
  cr_assert_eq(cluster_runs, 3 * 4 * 3 - 4, "%d plans summed across clusters", cluster_runs);
  jitk_engine_destroy(e);
}

/* The mma.sync kernels (forced on an H200): K a multiple of 8, A
 * row-major, B either way. */
Test(matmul, split_k_decode_mma_sync) {
  setenv("JITK_MM_KIND", "mma", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5D3;
  const split_case cases[] = {
      {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 7, 1000, 4104, 1, R, R, R, 1, "(mma.sync)"},
      {JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 64, 1000, 4104, 2, R, C, R, 0, "(mma.sync)"},
      {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 200, 1000, 4104, 1, R, C, C, 1, "(mma.sync)"},
      {JITK_FLOAT32, JITK_COMPUTE_TF32, 16, 1000, 4100, 1, R, R, R, 1, "(mma.sync)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_split(e, &cases[i], split_counts, NSPLITS, &seed);
  jitk_engine_destroy(e);
}

/* Split-K's choice on the device and autotuning among split counts: a
 * decode shape, bound by reading B, is kept whole by default, the tuned
 * choice (with its split) is stored and found again, and the tuned plan
 * computes correctly. */
Test(matmul, split_k_autotune) {
  char dir[] = "/tmp/jitk-tune-sk-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  setenv("JITK_CACHE_DIR", dir, 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5D4;
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = 16;
  d.n = 8192;
  d.k = 8192;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, "; split-K ") == NULL, "a decode shape is kept whole: %s", desc);
  const size_t na = 16 * 8192, nb = (size_t)8192 * 8192, nd = 16 * 8192;
  unsigned char *h = malloc(nb * 2);
  for (size_t i = 0; i < nb; i++) jt_write_real(h, JITK_BFLOAT16, i, jt_uniform(&seed));
  void *da = jt_dev_alloc(e, na * 2), *db = jt_dev_alloc(e, nb * 2), *dd = jt_dev_alloc(e, nd * 2);
  jt_to_dev(e, da, h, na * 2);
  jt_to_dev(e, db, h, nb * 2);
  JT_OK(e, jitk_matmul_autotune(p, NULL, da, db, NULL, dd, NULL, 0));
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, "; tuned") != NULL, "%s", desc);
  char tuned[512];
  snprintf(tuned, sizeof tuned, "%s", desc);
  jitk_matmul_destroy(p);
  /* A new engine finds the same choice, split included. */
  jitk_engine *e2 = jt_gpu_engine();
  JT_OK(e2, jitk_matmul_create(e2, &d, &p));
  JT_OK(e2, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert_str_eq(desc, tuned);
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e2);
  JT_OK(e, jitk_device_free(e, da, NULL));
  JT_OK(e, jitk_device_free(e, db, NULL));
  JT_OK(e, jitk_device_free(e, dd, NULL));
  free(h);
  /* A tuned plan of the class computes correctly (M 16, K 4100 is the
   * class of 8192 only in N; this checks a plan whatever it found). */
  const split_case c = {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 16, 8000, 8000, 1, R, R, R, 1,
                        "tensor cores"};
  const int auto_only[] = {0};
  run_split(e, &c, auto_only, 1, &seed);
  jitk_engine_destroy(e);
}

/* --- FP8 plans (issue 16) ---
 *
 * Each element of D against a float64 reference of the dequantized inputs
 * (8-bit values converted exactly, times their scales), with the bound
 * jitk.h states ("FP8 plans"): (2^-10 min(ceil(K / 32), 4) + 2^-24 K)
 * |alpha| scale_d S for the accumulation with promotion (the default, and
 * FFMA), (2^-10 ceil(K / 32) + 2^-24 K) |alpha| scale_d S with fast
 * accumulation, S the sum of |a b|, plus the rounding of D's dtype, plus
 * float32's rounding of the epilogue's terms; the
 * relative L2 error besides, which a wrong tile or K offset would blow
 * up. amax_d exactly against the host's max |D| (see jitk.h), D and amax
 * the same bits at a second execution, amax poisoned before each (the
 * plan must clear it). */
typedef struct fp8_case {
  const char *what;
  jitk_dtype a, b, d;
  int64_t m, n, k, batch;
  jitk_order d_o;
  jitk_dtype c; /* JITK_DTYPE_NONE: no C */
  double alpha, beta;
  float sa, sb, sd; /* 0: the plan has no such scale */
  int bias_relu;    /* epilogue max(acc + bias[col], (T)0), bias bfloat16 */
  int amax;
  int misalign;     /* bytes added to A and B: copied onto 16 bytes */
  const char *kind; /* expected in the description */
} fp8_case;

/* run_fp8's flags. JITK_COMPUTE_FLOAT32_FAST_ACCUM: no promotion. */
#define FP8_FAST 1
/* A and B in [0, 2): |D| is S, the hardest case for the accumulation. */
#define FP8_POSITIVE 2
/* jitk_matmul_desc's split_k (absent: 0, jitk's choice). */
#define FP8_SPLIT(n) ((n) << 8)

/* The accumulation's share of jitk.h's FP8 bound, as a multiple of
 * |alpha| scale_d S: the tensor cores' loss (2^-10 per k32 step, over at
 * most the four steps of one K-tile with promotion, over every step
 * without) and float32's sums (2^-24 per term, a bound of FFMA's K FMAs
 * and of promotion's ceil(K / 128) FADDs alike). */
static double fp8_acc_eps(int64_t K, int fast) {
  const int64_t steps = (K + 31) / 32;
  return ldexp(1, -10) * (double)(fast || steps < 4 ? steps : 4) + ldexp(1, -24) * (double)K;
}

/* Unit roundoff and half the smallest subnormal of D's dtype. */
static void fp8_rounding(jitk_dtype t, double *u, double *sub) {
  *sub = 0;
  switch (t) {
    case JITK_FLOAT8_E4M3: *u = ldexp(1, -4), *sub = ldexp(1, -10); break;
    case JITK_FLOAT8_E5M2: *u = ldexp(1, -3), *sub = ldexp(1, -17); break;
    case JITK_BFLOAT16: *u = ldexp(1, -8), *sub = ldexp(1, -134); break;
    case JITK_FLOAT16: *u = ldexp(1, -11), *sub = ldexp(1, -25); break;
    default: *u = ldexp(1, -24), *sub = ldexp(1, -150); break;
  }
}

static double fp8_finite_max(jitk_dtype t) {
  return t == JITK_FLOAT8_E4M3 ? 448 : t == JITK_FLOAT8_E5M2 ? 57344 : INFINITY;
}

static void run_fp8(jitk_engine *e, const fp8_case *c, int flags, uint64_t *seed) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  const int64_t M = c->m, N = c->n, K = c->k, B = c->batch;
  d.m = M;
  d.n = N;
  d.k = K;
  d.batch = B;
  d.a_dtype = c->a;
  d.b_dtype = c->b;
  d.d_dtype = c->d;
  d.has_c = c->c != JITK_DTYPE_NONE;
  d.c_dtype = d.has_c ? c->c : c->d;
  d.a_order = JITK_ROW_MAJOR;
  d.b_order = JITK_COL_MAJOR;
  d.d_order = c->d_o;
  /* Rows of A and B padded to 16 elements, the padding NaN (0x7F in both
   * formats), which would show if a kernel read it. */
  const int64_t ld = (K + 15) / 16 * 16;
  d.lda = d.ldb = ld;
  d.alpha = c->alpha;
  d.beta = c->beta;
  if (c->bias_relu) {
    d.epilogue = "max(acc + bias[col], (T)0)";
    d.epilogue_params = "raw bfloat16 bias";
  }
  d.has_a_scale = c->sa != 0;
  d.has_b_scale = c->sb != 0;
  d.has_d_scale = c->sd != 0;
  d.has_amax_d = c->amax;
  d.compute = (flags & FP8_FAST) ? JITK_COMPUTE_FLOAT32_FAST_ACCUM : JITK_COMPUTE_DEFAULT;
  d.split_k = flags >> 8;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, c->kind) != NULL, "%s: %s", c->what, desc);
  if (d.split_k > 1) {
    char split[64];
    snprintf(split, sizeof split, "; split-K %d (", d.split_k);
    cr_assert(strstr(desc, split) != NULL, "%s: %s", c->what, desc);
  }
  const size_t sna = (size_t)(B * M * ld), snb = (size_t)(B * N * ld), nd = (size_t)(B * M * N);
  const size_t des = jt_dtype_size(c->d), ces = jt_dtype_size(d.c_dtype);
  uint8_t *sa = malloc(sna + 64), *sb = malloc(snb + 64);
  memset(sa, 0x7F, sna + 64);
  memset(sb, 0x7F, snb + 64);
  double *ha = malloc(sizeof(double) * (size_t)(B * M * K)),
         *hb = malloc(sizeof(double) * (size_t)(B * N * K));
  for (int64_t r = 0; r < B * M; r++)
    for (int64_t q = 0; q < K; q++) {
      const size_t at = (size_t)(r * ld + q) + (size_t)c->misalign;
      const double x = 2 * jt_uniform(seed);
      jt_write_real(sa, c->a, at, (flags & FP8_POSITIVE) ? fabs(x) : x);
      ha[r * K + q] = jt_read_real(sa, c->a, at);
    }
  for (int64_t r = 0; r < B * N; r++) /* B column-major: column j of batch b is row b * N + j */
    for (int64_t q = 0; q < K; q++) {
      const size_t at = (size_t)(r * ld + q) + (size_t)c->misalign;
      const double x = 2 * jt_uniform(seed);
      jt_write_real(sb, c->b, at, (flags & FP8_POSITIVE) ? fabs(x) : x);
      hb[r * K + q] = jt_read_real(sb, c->b, at);
    }
  unsigned char *sc = malloc(nd * ces), *sd = malloc(nd * des), *sd2 = malloc(nd * des);
  double *hc = malloc(nd * sizeof(double));
  for (size_t i = 0; i < nd; i++) { /* row-major C */
    jt_write_real(sc, d.c_dtype, i, 4 * jt_uniform(seed));
    hc[i] = jt_read_real(sc, d.c_dtype, i);
  }
  uint16_t *sbias = malloc((size_t)N * 2);
  double *hbias = malloc((size_t)N * sizeof(double));
  for (int64_t j = 0; j < N; j++) {
    jt_write_real(sbias, JITK_BFLOAT16, (size_t)j, 8 * jt_uniform(seed));
    hbias[j] = jt_read_real(sbias, JITK_BFLOAT16, (size_t)j);
  }
  float scales[3] = {c->sa, c->sb, c->sd};
  void *da = jt_dev_alloc(e, sna + 64), *db = jt_dev_alloc(e, snb + 64),
       *dc = jt_dev_alloc(e, nd * ces), *dd = jt_dev_alloc(e, nd * des),
       *dbias = jt_dev_alloc(e, (size_t)N * 2), *dscales = jt_dev_alloc(e, sizeof scales),
       *damax = jt_dev_alloc(e, 4);
  jt_to_dev(e, da, sa, sna + 64);
  jt_to_dev(e, db, sb, snb + 64);
  jt_to_dev(e, dc, sc, nd * ces);
  jt_to_dev(e, dbias, sbias, (size_t)N * 2);
  jt_to_dev(e, dscales, scales, sizeof scales);
  jitk_arg extra[1] = {jitk_arg_ptr(dbias, JITK_BFLOAT16)};
  jitk_matmul_operands o;
  JT_OK(e, jitk_matmul_operands_init(&o));
  o.a = (char *)da + c->misalign;
  o.b = (char *)db + c->misalign;
  o.c = d.has_c ? dc : NULL;
  o.d = dd;
  o.extra = extra;
  o.num_extra = c->bias_relu ? 1 : 0;
  o.a_scale = c->sa != 0 ? (float *)dscales : NULL;
  o.b_scale = c->sb != 0 ? (float *)dscales + 1 : NULL;
  o.d_scale = c->sd != 0 ? (float *)dscales + 2 : NULL;
  o.amax_d = c->amax ? damax : NULL;
  float amax = 0, amax2 = 0;
  for (int run = 0; run < 2; run++) {
    jt_poison(e, dd, nd * des);
    jt_poison(e, damax, 4);
    JT_OK(e, jitk_matmul_execute_ex(p, NULL, &o));
    jt_to_host(e, run ? sd2 : sd, dd, nd * des);
    if (c->amax) jt_to_host(e, run ? &amax2 : &amax, damax, 4);
  }
  cr_assert(memcmp(sd, sd2, nd * des) == 0, "%s: D differs between two executions", c->what);
  cr_assert(memcmp(&amax, &amax2, 4) == 0, "%s: amax differs between two executions", c->what);
  double u, sub;
  fp8_rounding(c->d, &u, &sub);
  const double sa_ = c->sa != 0 ? c->sa : 1, sb_ = c->sb != 0 ? c->sb : 1,
               sd_ = c->sd != 0 ? c->sd : 1, dmax = fp8_finite_max(c->d);
  const double acc_eps = fp8_acc_eps(K, flags & FP8_FAST);
  double err2 = 0, ref2 = 0, max_d = 0, ref_amax = 0, amax_slack = 0, worst = 0;
  size_t bad = 0;
  double *dots = malloc(nd * sizeof(double)), *mags = malloc(nd * sizeof(double));
  ref_products(ha, JITK_ROW_MAJOR, hb, JITK_COL_MAJOR, M, N, K, B, dots, mags);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        const double dot = dots[(b * M + i) * N + j] * (sa_ * sb_),
                     s = mags[(b * M + i) * N + j] * (sa_ * sb_);
        double v = c->alpha * dot, terms = fabs(c->alpha * dot);
        if (d.has_c && c->beta != 0) {
          v += c->beta * hc[(b * M + i) * N + j];
          terms += fabs(c->beta * hc[(b * M + i) * N + j]);
        }
        if (c->bias_relu) {
          terms += fabs(hbias[j]);
          v = v + hbias[j] > 0 ? v + hbias[j] : 0;
        }
        if (fabs(v) > ref_amax) ref_amax = fabs(v);
        const double acc_err = acc_eps * fabs(c->alpha) * s + 8 * ldexp(1, -24) * terms;
        if (acc_err > amax_slack) amax_slack = acc_err;
        double ref = sd_ * v;
        ref = ref > dmax ? dmax : ref < -dmax ? -dmax : ref;
        const size_t at = (size_t)(b * M * N + (c->d_o == JITK_ROW_MAJOR ? i * N + j : j * M + i));
        const double got = jt_read_real(sd, c->d, at);
        const double bound = fabs(sd_) * acc_err + u * fabs(ref) + sub;
        /* The error as a fraction of the accumulation's scale, |alpha|
         * scale_d S (D's rounding included): what the bound's first term
         * must cover, printed below for the record. */
        const double scale = fabs(sd_ * c->alpha) * s;
        if (scale > 0 && fabs(got - ref) / scale > worst) worst = fabs(got - ref) / scale;
        if (!(fabs(got - ref) <= bound)) {
          if (bad++ < 5)
            cr_log_error("%s: D[%lld][%lld][%lld] = %.9g, reference %.9g, bound %.3g", c->what,
                         (long long)b, (long long)i, (long long)j, got, ref, bound);
        }
        if (fabs(got) > max_d) max_d = fabs(got);
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
      }
  free(dots);
  free(mags);
  cr_log_info("%s: max |D - ref| / (|alpha| scale_d S) = %.3g; the accumulation's bound is %.3g",
              c->what, worst, acc_eps);
  const double rel = sqrt(err2 / (ref2 > 0 ? ref2 : 1)), rel_tol = u > 1e-3 ? 2 * u : 1e-2;
  cr_assert(bad == 0 && rel <= rel_tol,
            "%s (%s): %zu elements outside the bound, relative L2 error %.3g (tolerance %.3g)",
            c->what, desc, bad, rel, rel_tol);
  if (c->amax) {
    /* Exact: max |D| is amax itself (float32 D, no scale of D), or amax
     * times scale_d in float32 rounded to D's dtype, rounding being
     * monotonic (and saturating alike). */
    unsigned char want[8];
    jt_write_real(want, c->d, 0, (double)(float)((float)amax * (float)fabs(sd_)));
    const double want_d =
        c->d == JITK_FLOAT32 && c->sd == 0 ? (double)amax : jt_read_real(want, c->d, 0);
    cr_assert(want_d == max_d, "%s: amax %.9g (as D: %.9g) but max |D| is %.9g", c->what,
              (double)amax, want_d, max_d);
    cr_assert(fabs((double)amax - ref_amax) <= amax_slack + ldexp(1, -24) * ref_amax,
              "%s: amax %.9g, reference %.9g (bound %.3g)", c->what, (double)amax, ref_amax,
              amax_slack);
  }
  void *bufs[] = {da, db, dc, dd, dbias, dscales, damax};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    JT_OK(e, jitk_device_free(e, bufs[i], NULL));
  free(sa);
  free(sb);
  free(ha);
  free(hb);
  free(sc);
  free(sd);
  free(sd2);
  free(hc);
  free(sbias);
  free(hbias);
  jitk_matmul_destroy(p);
}

#define E4 JITK_FLOAT8_E4M3
#define E5 JITK_FLOAT8_E5M2
#define NO_C JITK_DTYPE_NONE

static const fp8_case fp8_cases[] = {
    {"fp8 e4m3 x e4m3, bf16 D, bias+ReLU, scales, amax, tails, batch 2", E4, E4, JITK_BFLOAT16, 200,
     264, 512, 2, R, NO_C, 1, 0, 0.37f, 1.9f, 0, 1, 1, 0, "wgmma"},
    {"fp8 e4m3 x e5m2, f32 D, bf16 C, alpha, beta, bias+ReLU, amax", E4, E5, JITK_FLOAT32, 1000,
     1000, 1024, 1, R, JITK_BFLOAT16, 0.75, 0.5, 0.5f, 1.25f, 0, 1, 1, 0, "wgmma"},
    {"fp8 e4m3 x e4m3, e4m3 D, scale D, bias+ReLU, amax", E4, E4, E4, 1000, 1000, 1024, 1, R, NO_C,
     1, 0, 0.3f, 0.7f, 0.25f, 1, 1, 0, "wgmma"},
    {"fp8 e5m2 x e4m3, e4m3 D saturating, amax", E5, E4, E4, 256, 384, 256, 1, R, NO_C, 1, 0, 1.5f,
     1.0f, 16.0f, 0, 1, 0, "wgmma"},
    {"fp8 e4m3 x e5m2, e5m2 D column-major, batch 2, signs", E4, E5, E5, 200, 264, 512, 2, C, NO_C,
     1, 0, 0.5f, 0.5f, 2.0f, 0, 1, 0, "wgmma"},
    {"fp8 e4m3 x e4m3, f16 D, K = 200 (tail of a 128-wide K tile), C e4m3", E4, E4, JITK_FLOAT16,
     136, 200, 200, 1, R, E4, 1, -1, 0.8f, 0.9f, 0, 1, 1, 0, "wgmma"},
    {"fp8 e4m3 x e4m3, f32 D, no scales, no amax", E4, E4, JITK_FLOAT32, 130, 136, 96, 1, R, NO_C,
     2, 0, 0, 0, 0, 0, 0, 0, "wgmma"},
    {"fp8 misaligned A and B: copied onto 16 bytes, bf16 D, amax", E4, E5, JITK_BFLOAT16, 200, 264,
     512, 1, R, NO_C, 1, 0, 0.37f, 1.9f, 0, 1, 1, 1, "wgmma"},
    {"fp8 odd K = 203: rows at every offset in 16 bytes, copied onto lines, bias+ReLU", E4, E4,
     JITK_BFLOAT16, 136, 264, 203, 1, R, NO_C, 1, 0, 0.5f, 0.75f, 0, 1, 1, 0, "wgmma"},
    {"fp8 e4m3 x e4m3, e4m3 D, odd N: D through shared memory, batch 2, amax", E4, E4, E4, 130, 263,
     256, 2, R, NO_C, 1, 0, 0.5f, 0.5f, 2.0f, 1, 1, 0, "wgmma"},
    /* Promotion uses two partial sums in turn, so odd and even counts of
     * K-tiles (of 128) end differently; fp8_split_cases below has slices
     * of both. */
    {"fp8 e4m3 x e4m3, bf16 D, K = 384: three K-tiles, bias+ReLU, scales, amax", E4, E4,
     JITK_BFLOAT16, 136, 264, 384, 1, R, NO_C, 1, 0, 0.5f, 0.75f, 0, 1, 1, 0, "wgmma"},
    {"fp8 e4m3 x e5m2, f32 D, K = 600: five K-tiles, the last a tail", E4, E5, JITK_FLOAT32, 200,
     136, 600, 1, R, NO_C, 1, 0, 0, 0, 0, 0, 0, 0, "wgmma"},
};

/* Split-K over FP8 decode shapes: slices of two and three K-tiles, and
 * of one. */
static const struct {
  fp8_case c;
  int split_k;
} fp8_split_cases[] = {
    {{"fp8 bf16 D, M = 16, K = 1600: split-K 5 of 13 K-tiles (2 or 3 a slice), C", E4, E4,
      JITK_BFLOAT16, 16, 512, 1600, 1, R, JITK_BFLOAT16, 1, 0.5, 0.5f, 0.5f, 0, 1, 1, 0, "wgmma"},
     5},
    {{"fp8 e5m2 x e4m3, f32 D, M = 40, K = 1664: split-K 13, a K-tile a slice", E5, E4,
      JITK_FLOAT32, 40, 264, 1664, 1, R, NO_C, 1, 0, 0, 0, 0, 0, 1, 0, "wgmma"},
     13},
};

Test(matmul, fp8_wgmma) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xF8;
  for (size_t i = 0; i < sizeof fp8_cases / sizeof fp8_cases[0]; i++) {
    fp8_case c = fp8_cases[i];
    c.kind = "each K-tile's sum promoted"; /* the default on wgmma */
    run_fp8(e, &c, 0, &seed);
  }
  for (size_t i = 0; i < sizeof fp8_split_cases / sizeof fp8_split_cases[0]; i++) {
    fp8_case c = fp8_split_cases[i].c;
    c.kind = "each K-tile's sum promoted";
    run_fp8(e, &c, FP8_SPLIT(fp8_split_cases[i].split_k), &seed);
  }
  jitk_engine_destroy(e);
}

/* Fast accumulation (no promotion): the ping-pong kernel, with the
 * looser bound. */
Test(matmul, fp8_wgmma_fast_accum) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xFB;
  for (size_t i = 0; i < sizeof fp8_cases / sizeof fp8_cases[0]; i++) {
    fp8_case c = fp8_cases[i];
    c.kind = "(ping-pong)";
    run_fp8(e, &c, FP8_FAST, &seed);
  }
  for (size_t i = 0; i < sizeof fp8_split_cases / sizeof fp8_split_cases[0]; i++) {
    fp8_case c = fp8_split_cases[i].c;
    c.kind = "(ping-pong)";
    run_fp8(e, &c, FP8_FAST | FP8_SPLIT(fp8_split_cases[i].split_k), &seed);
  }
  jitk_engine_destroy(e);
}

/* The cooperative schedule's 128 x 256 tiles (the n256 8-bit wgmma),
 * which only fast accumulation uses: promotion's second accumulator does
 * not fit beside a 64 x 256 one. */
Test(matmul, fp8_wgmma_cooperative) {
  setenv("JITK_MM_SCHEDULE", "cooperative", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xF9;
  for (size_t i = 1; i < 5; i++) {
    fp8_case c = fp8_cases[i];
    c.kind = "tile 128x256x128";
    run_fp8(e, &c, FP8_FAST, &seed);
  }
  jitk_engine_destroy(e);
}

/* K = 8192, where jitk-bench matmul found an element of the old fast
 * accumulation outside the old bound (0.083 S against 2^-12 ceil(K / 32)
 * = 0.0625 S): every element of 256 x 256 outputs against float64, on
 * random signs and on positive inputs (|D| = S, where the accumulator's
 * truncation of its own running sum adds up), with promotion (the
 * default) within jitk.h's bound 2^-8 + 2^-24 K of S, and fast
 * accumulation within its own 2^-10 ceil(K / 32). Each prints its
 * largest error as a fraction of S. */
Test(matmul, fp8_long_k_promotion) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xFC;
  /* f32 D, no C, alpha 1, no scales, no epilogue, no amax. */
  fp8_case c = {"", E4, E4, JITK_FLOAT32, 256, 256, 8192, 1, R, NO_C, 1, 0, 0, 0, 0, 0, 0, 0, ""};
  for (int positive = 0; positive < 2; positive++)
    for (int fast = 0; fast < 2; fast++) {
      c.what =
          positive ? "fp8 K = 8192, positive inputs, f32 D" : "fp8 K = 8192, random signs, f32 D";
      c.kind = fast ? "(fast: the tensor cores'" : "each K-tile's sum promoted";
      run_fp8(e, &c, (fast ? FP8_FAST : 0) | (positive ? FP8_POSITIVE : 0), &seed);
    }
  /* The same through a bfloat16 D with a bias, scales and amax, as the
   * benchmark runs it. */
  c.what = "fp8 K = 8192, positive inputs, bf16 D, bias+ReLU, scales, amax";
  c.d = JITK_BFLOAT16;
  c.n = 384;
  c.sa = 0.5f;
  c.sb = 0.25f;
  c.bias_relu = c.amax = 1;
  c.kind = "each K-tile's sum promoted";
  run_fp8(e, &c, FP8_POSITIVE, &seed);
  jitk_engine_destroy(e);
}

/* The FFMA kernel (JITK_MM_KIND forces it; the path of GPUs without
 * wgmma) holds to the same bounds. */
Test(matmul, fp8_ffma) {
  setenv("JITK_MM_KIND", "simt", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xFA;
  for (size_t i = 0; i < 6; i++) {
    fp8_case c = fp8_cases[i];
    c.kind = "FFMA (simt) float8";
    run_fp8(e, &c, 0, &seed);
  }
  jitk_engine_destroy(e);
}

/*
 * Swapped A and B (D^T = B^T A^T) for decode shapes (issue 16): the
 * kernel's 128-row tiles run along N and its narrow tiles (8 to 64
 * columns, or 128) along M. jitk swaps by default for M <= 64 with N >=
 * 128 (split_k_decode above then runs swapped for M <= 64); here
 * JITK_MM_SWAP=1 forces it on small shapes with tails in every dimension,
 * every layout of A, B and D, batches, C with alpha and beta (and beta 0
 * with C of NaN), bias, an epilogue of row and col, misaligned and padded
 * operands, D of another dtype, bfloat16, float16 and tf32, every element
 * checked against float64.
 */
Test(matmul, swap_ab_forced) {
  setenv("JITK_MM_SWAP", "1", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5A1;
  const char *sw = "; A and B swapped";
  const mm_case cases[] = {
      {"swap bf16 M 1, bias+ReLU", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 1, 264, 136, 1, R, R, R, 0,
       1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, sw, JITK_DTYPE_NONE, 0},
      {"swap bf16 M 7, row and col in the epilogue", JITK_BFLOAT16, JITK_COMPUTE_FLOAT32, 7, 200,
       72, 1, R, R, R, 0, 1, 0, "acc * s + (T)(row - 2 * col)", "float32 s", 0, sw, JITK_DTYPE_NONE,
       0},
      {"swap f16 M 16, row and col, D column-major, B column-major", JITK_FLOAT16,
       JITK_COMPUTE_FLOAT32, 16, 136, 64, 1, R, C, C, 0, 1, 0, "acc * s + (T)(row - 2 * col)",
       "float32 s", 0, sw, JITK_DTYPE_NONE, 0},
      {"swap bf16 M 30, A column-major (transposed first), batch 3, C, alpha, beta", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 30, 130, 100, 3, C, R, R, 1, 0.5, -2.0, NULL, NULL, 0, sw,
       JITK_DTYPE_NONE, 0},
      {"swap f16 M 64, A and B column-major, D column-major, C", JITK_FLOAT16, JITK_COMPUTE_DEFAULT,
       64, 200, 136, 2, C, C, C, 1, 1, 0.5, "gelu(acc)", NULL, 0, sw, JITK_DTYPE_NONE, 0},
      {"swap bf16 M 200 (two 128-column tiles), N 77, K 93, bias", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 200, 77, 93, 1, R, R, R, 0, 1, 0, "acc + bias[col]",
       "raw float32 bias", 0, sw, JITK_DTYPE_NONE, 0},
      {"swap bf16 M 9, C of NaN with beta = 0", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 9, 264, 128, 1,
       R, C, R, 1, 1, 0, "max(acc + bias[col], (T)0)", "raw float32 bias", 0, sw, JITK_DTYPE_NONE,
       0},
      {"swap bf16 M 5, misaligned pointers: copied onto 16 bytes", JITK_BFLOAT16,
       JITK_COMPUTE_DEFAULT, 5, 128, 64, 1, R, R, R, 0, 1, 0, "acc + bias[col]", "raw float32 bias",
       1, sw, JITK_DTYPE_NONE, 0},
      {"swap f16 M 12, padded rows, odd K", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 12, 140, 77, 2, R,
       R, R, 0, 1, 0, "gelu(acc)", NULL, 0, sw, JITK_DTYPE_NONE, 1},
      {"swap bf16 in, float32 D and C, M 20", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 20, 512, 64, 1,
       R, R, R, 1, 1, 0.5, "acc + bias[col]", "raw float32 bias", 0, sw, JITK_FLOAT32, 0},
      {"swap tf32 M 3, B column-major", JITK_FLOAT32, JITK_COMPUTE_TF32, 3, 256, 96, 2, R, C, R, 0,
       1, 0, NULL, NULL, 0, sw, JITK_DTYPE_NONE, 0},
      {"swap tf32 M 40, A column-major (transposed first), B row-major through registers",
       JITK_FLOAT32, JITK_COMPUTE_TF32, 40, 264, 60, 2, C, R, C, 0, 1, 0, "acc + bias[col]",
       "raw T bias", 0, sw, JITK_DTYPE_NONE, 4},
      {"swap tf32 M 17, row and col, C", JITK_FLOAT32, JITK_COMPUTE_TF32, 17, 100, 36, 1, R, R, R,
       1, 1, 0.25, "acc * s + (T)(row - 2 * col)", "float32 s", 0, sw, JITK_DTYPE_NONE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* Swapped and split: each element within D's rounding and the sum's
 * bound, the same bits twice, at several slice counts; M = 200 (forced)
 * takes two tiles of 128 columns, M = 3 with N = 100 a single tile with
 * tails everywhere. */
Test(matmul, swap_ab_split_decode) {
  setenv("JITK_MM_SWAP", "1", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5A2;
  const char *sw = "; A and B swapped";
  const split_case cases[] = {
      {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 200, 1000, 4100, 1, R, R, R, 1, sw},
      {JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 200, 1000, 4100, 1, C, C, C, 0, sw},
      {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 3, 100, 1100, 2, C, R, C, 1, sw},
      {JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 33, 300, 2050, 3, R, C, R, 1, sw},
      {JITK_FLOAT32, JITK_COMPUTE_TF32, 64, 1000, 4100, 1, C, R, R, 1, sw},
      {JITK_FLOAT32, JITK_COMPUTE_TF32, 8, 1000, 4100, 2, R, C, C, 0, sw},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_split(e, &cases[i], split_counts, NSPLITS, &seed);
  jitk_engine_destroy(e);
}

/* Outputs (float32, bfloat16 and a byte mask), row, column and whole
 * reductions on swapped plans, split and not: the outputs keep D's
 * layout, the reductions the user's rows and columns. */
Test(matmul, swap_ab_outputs_and_reductions) {
  setenv("JITK_MM_SWAP", "1", 1);
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5A3;
  const char *sw = "; A and B swapped";
  const extras_case cases[] = {
      {"swap bf16 M 7, tails, batch 2", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 7, 1000, 136, 2, R, R,
       R, 0, sw, 0},
      {"swap f16 M 64, B and D column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 64, 264, 72, 1, R,
       C, C, 0, sw, 0},
      {"swap tf32 M 16", JITK_FLOAT32, JITK_COMPUTE_TF32, 16, 136, 40, 1, R, R, R, 0, sw, 0},
      {"swap bf16 M 130 misaligned: copied onto 16 bytes", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 130,
       136, 64, 1, R, R, R, 1, sw, 0},
      /* "columns); split-K": swapped, then split. */
      {"swap split-K 3 bf16 M 7, tails, batch 2", JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 7, 1000,
       4104, 2, R, R, R, 0, "columns); split-K 3 (", 3},
      {"swap split-K 4 f16 A column-major, D column-major", JITK_FLOAT16, JITK_COMPUTE_DEFAULT, 20,
       264, 1032, 1, C, R, C, 0, "columns); split-K 4 (", 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_extras(e, &cases[i], &seed);
  jitk_engine_destroy(e);
}

/* The swap by default: decode shapes of M <= 64 swap, M = 128 does not,
 * and JITK_MM_SWAP=0 turns it off; both ways give the same D within
 * rounding (each checked against float64 by run_split). */
Test(matmul, swap_ab_default_and_off) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0x5A4;
  const int auto_only[] = {0};
  const split_case on = {JITK_BFLOAT16,      JITK_COMPUTE_DEFAULT, 16, 2048, 4096, 1, R, R, R, 1,
                         "; A and B swapped"};
  run_split(e, &on, auto_only, 1, &seed);
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = 128;
  d.n = 8192;
  d.k = 8192;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  jitk_matmul *p = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p, desc, sizeof desc));
  cr_assert(strstr(desc, "swapped") == NULL, "M 128 is not swapped: %s", desc);
  jitk_matmul_destroy(p);
  jitk_engine_destroy(e);
  setenv("JITK_MM_SWAP", "0", 1);
  e = jt_gpu_engine();
  const split_case off = {JITK_BFLOAT16, JITK_COMPUTE_DEFAULT, 16, 2048, 4096, 1, R, R, R, 1,
                          "(ping-pong)"};
  run_split(e, &off, auto_only, 1, &seed);
  jitk_engine_destroy(e);
}

/* wgmma plans are launched as programmatic dependents: their blocks may
 * start while the kernel before them on the stream is finishing, and wait
 * for it before touching memory. A chain on one stream with no
 * synchronization between its steps shows that wait is where it must be:
 * D1 = A @ B, an elementwise kernel doubling D1 in place, D2 = D1 @ B2
 * (reads what the two kernels before it wrote), then D1 = A2 @ B (writes
 * what the product before it reads), each checked against float64 of the
 * rounded values, repeated so that a missing wait would show. */
static double chain_err(const double *want, const unsigned char *got, size_t n) {
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; i++) {
    double g = jt_read_real(got, JITK_BFLOAT16, i);
    if (!isfinite(g)) return INFINITY;
    err2 += (g - want[i]) * (g - want[i]);
    ref2 += want[i] * want[i];
  }
  return sqrt(err2 / (ref2 > 0 ? ref2 : 1));
}

Test(matmul, dependent_launches) {
  jitk_engine *e = jt_gpu_engine();
  uint64_t seed = 0xD3B;
  const int64_t M = 384, N = 512, K = 256, N2 = 264;
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = M;
  d.n = N;
  d.k = K;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  jitk_matmul *p1 = NULL, *p2 = NULL;
  JT_OK(e, jitk_matmul_create(e, &d, &p1));
  d.n = N2;
  d.k = N;
  JT_OK(e, jitk_matmul_create(e, &d, &p2));
  char desc[512];
  JT_OK(e, jitk_matmul_describe(p2, desc, sizeof desc));
  cr_assert(strstr(desc, "wgmma") != NULL, "%s", desc);
  jitk_elementwise *twice = NULL;
  JT_OK(e, jitk_elementwise_create(e, "", "T x", "x = x + x", "twice", NULL, &twice));
  const size_t na = (size_t)(M * K), nb = (size_t)(K * N), nb2 = (size_t)(N * N2),
               nd1 = (size_t)(M * N), nd2 = (size_t)(M * N2);
  double *ha = malloc(na * 8), *ha2 = malloc(na * 8), *hb = malloc(nb * 8), *hb2 = malloc(nb2 * 8),
         *w1 = malloc(nd1 * 8), *w2 = malloc(nd2 * 8), *w3 = malloc(nd1 * 8);
  unsigned char *sa = malloc(na * 2), *sa2 = malloc(na * 2), *sb = malloc(nb * 2),
                *sb2 = malloc(nb2 * 2), *got1 = malloc(nd1 * 2), *got2 = malloc(nd2 * 2);
  for (size_t i = 0; i < na; i++) {
    ha[i] = rounded(JITK_BFLOAT16, jt_uniform(&seed));
    ha2[i] = rounded(JITK_BFLOAT16, jt_uniform(&seed));
    jt_write_real(sa, JITK_BFLOAT16, i, ha[i]);
    jt_write_real(sa2, JITK_BFLOAT16, i, ha2[i]);
  }
  for (size_t i = 0; i < nb; i++) {
    hb[i] = rounded(JITK_BFLOAT16, jt_uniform(&seed));
    jt_write_real(sb, JITK_BFLOAT16, i, hb[i]);
  }
  for (size_t i = 0; i < nb2; i++) {
    hb2[i] = rounded(JITK_BFLOAT16, jt_uniform(&seed));
    jt_write_real(sb2, JITK_BFLOAT16, i, hb2[i]);
  }
  /* The references: D1 rounded to bfloat16 and doubled (exact), D2 from
   * that, and the last D1. */
  ref_products(ha, JITK_ROW_MAJOR, hb, JITK_ROW_MAJOR, M, N, K, 1, w1, NULL);
  for (size_t i = 0; i < nd1; i++) w1[i] = 2 * rounded(JITK_BFLOAT16, w1[i]);
  ref_products(w1, JITK_ROW_MAJOR, hb2, JITK_ROW_MAJOR, M, N2, N, 1, w2, NULL);
  ref_products(ha2, JITK_ROW_MAJOR, hb, JITK_ROW_MAJOR, M, N, K, 1, w3, NULL);
  void *da = jt_dev_alloc(e, na * 2), *da2 = jt_dev_alloc(e, na * 2), *db = jt_dev_alloc(e, nb * 2),
       *db2 = jt_dev_alloc(e, nb2 * 2), *dd1 = jt_dev_alloc(e, nd1 * 2),
       *dd2 = jt_dev_alloc(e, nd2 * 2);
  jt_to_dev(e, da, sa, na * 2);
  jt_to_dev(e, da2, sa2, na * 2);
  jt_to_dev(e, db, sb, nb * 2);
  jt_to_dev(e, db2, sb2, nb2 * 2);
  int64_t shape1[1] = {(int64_t)nd1};
  DLTensor t1 = jt_tensor(dd1, JITK_BFLOAT16, 1, shape1, NULL);
  jitk_arg arg = jitk_arg_array(&t1);
  for (int round = 0; round < 8; round++) {
    jt_poison(e, dd1, nd1 * 2);
    jt_poison(e, dd2, nd2 * 2);
    JT_OK(e, jitk_matmul_execute(p1, NULL, da, db, NULL, dd1, NULL, 0));
    JT_OK(e, jitk_elementwise_launch(twice, NULL, &arg, 1, -1, NULL));
    JT_OK(e, jitk_matmul_execute(p2, NULL, dd1, db2, NULL, dd2, NULL, 0));
    JT_OK(e, jitk_matmul_execute(p1, NULL, da2, db, NULL, dd1, NULL, 0));
    jt_to_host(e, got2, dd2, nd2 * 2);
    jt_to_host(e, got1, dd1, nd1 * 2);
    double r2 = chain_err(w2, got2, nd2), r3 = chain_err(w3, got1, nd1);
    cr_assert(r2 <= 1e-2 && r3 <= 1e-2,
              "round %d: relative L2 error of D2 %.3g, of the last D1 %.3g (tolerance 1e-2)", round,
              r2, r3);
  }
  void *bufs[] = {da, da2, db, db2, dd1, dd2};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    JT_OK(e, jitk_device_free(e, bufs[i], NULL));
  free(ha);
  free(ha2);
  free(hb);
  free(hb2);
  free(w1);
  free(w2);
  free(w3);
  free(sa);
  free(sa2);
  free(sb);
  free(sb2);
  free(got1);
  free(got2);
  jitk_elementwise_destroy(twice);
  jitk_matmul_destroy(p1);
  jitk_matmul_destroy(p2);
  jitk_engine_destroy(e);
}
