/*
 * jitk-bench matmul: fused matmul plans against cuBLASLt.
 *
 * For bfloat16 and float16 A, B and D (float32 accumulation, a float32
 * bias), row-major, at M x N x K = 4096^3, 8192^3 and 16384 x 4096 x 1024,
 * and the decode shapes M x 8192 x 8192 (M = 1, 8, 16, 32, 64, 128, 256) and
 * 64 x 28672 x 8192, on which jitk's plan swaps A and B (M <= 64) and
 * splits K where its tiles are few (the description printed as each case
 * starts says how),
 * D = relu(A @ B + bias[col]) three ways:
 *  - a jitk plan whose epilogue is "max(acc + bias[col], (T)0)";
 *  - cuBLASLt with CUBLASLT_EPILOGUE_RELU_BIAS;
 *  - cuBLASLt's plain product, then a jitk elementwise bias+ReLU in place
 *    over D: the extra pass over D that a fused epilogue saves.
 * Then tf32 and float32 at 4096^3 with no epilogue (D = A @ B), tf32 on
 * the decode shape 16 x 8192 x 8192 and float32 at 2048^3 and 1000 x 1030
 * x 999, jitk's plan against
 * CUBLAS_COMPUTE_32F_FAST_TF32 and CUBLAS_COMPUTE_32F. Then
 * FP8 (float8_e4m3fn A and B, bfloat16 D and bias) at 8192^3, D = A @ B +
 * bias[col], against cuBLASLt's FP8 product with its BIAS epilogue
 * (bench_fp8). Then bfloat16 bias+ReLU on shapes whose N or K is not a
 * multiple of 8 (4096 x 4095 x 4096, 4096 x 4096 x 4095, 4095^3, a
 * vocabulary projection 8192 x 50257 x 1024, 2048 x 11008 x 4095), each
 * after the nearest aligned shape, its jitk row saying what fraction of
 * that shape's throughput it keeps.
 *
 * Times are CUDA events around one product on the default stream, the
 * median of 10 after 3 of warm-up; TFLOP/s counts 2 M N K. At 4096^3 (and
 * the decode shapes with N = 8192) each
 * row's D is copied back, poisoned before every case, and 1000 random
 * elements are checked against a float64 dot product on the host of the
 * same rounded inputs, and jitk's elements against cuBLASLt's.
 *
 * cuBLASLt is loaded with dlopen when the benchmark runs, so that
 * jitk-bench builds and starts where it is missing; its rows are then left
 * out, with a note saying so. cublasLt.h is included for its types and
 * enums only.
 *
 *   jitk-bench matmul [--json FILE] [--only SECTION]
 *
 * --only runs one section: "large" (the three bias+ReLU shapes), "decode"
 * (the decode shapes, bfloat16 and float16; JITK_MM_SWAP=0 or 1 forces
 * the swap of A and B off or on, JITK_MM_SPLIT=N the split), "plain"
 * (tf32 and float32), "fp8" or "unaligned".
 *
 *   jitk-bench matmul --shapes MxNxK[,MxNxK...]
 *
 * runs bfloat16 bias+ReLU on the shapes listed instead of any section (up
 * to 16 of them), for measuring a rule of the plan's choices beyond the
 * fixed shapes (JITK_MM_SCHEDULE and JITK_MM_TILE force a choice); with
 * --float32 as well, float32 D = A @ B as in "plain" (JITK_MM_SPLIT,
 * JITK_MM_FFMA_BN and JITK_MM_WIDE=0 force a choice).
 *
 * With JITK_BENCH_HOST=1 each bias+ReLU case also prints, for jitk and
 * cuBLASLt, the one-call time the table's figure comes from, the time a
 * call of 50 queued back to back (where the host's time hides behind the
 * device's, as in a model's layers), and the host's time to queue a call:
 * a lone call's figure includes the host's time, which differs by a
 * factor of two between the two libraries.
 */
#include <jitk/jitk.h>

#include <cublasLt.h>
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine.h"

#define CHECK(e, call) BENCH_CHECK(e, call)

enum { WARMUP = 3, REPS = 10, SAMPLES = 1000, MAX_ROWS = 192 };

/* cuBLASLt's workspace: what its heuristic may plan for. */
#define LT_WORKSPACE ((size_t)32 << 20)

/* The cuBLASLt entry points this benchmark calls, with their prototypes
 * taken from cublasLt.h so that a changed signature fails to compile
 * instead of failing at run time. */
#define LT_FUNCS(X)                       \
  X(cublasLtCreate)                       \
  X(cublasLtDestroy)                      \
  X(cublasLtGetStatusName)                \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

typedef struct lt_lib {
  void *dl;
  cublasLtHandle_t handle;
  void *workspace;
#define LT_FIELD_(name) __typeof__(name) *name;
  LT_FUNCS(LT_FIELD_)
#undef LT_FIELD_
} lt_lib;

/*
 * One cuBLASLt product. cuBLASLt's matrices are column-major and a bias
 * runs along D's rows; a row-major m x n D is a column-major n x m one,
 * so the product is planned as D^T = B^T A^T: cuBLASLt's A is our B (n x k,
 * leading dimension n), its B our A (k x m, leading dimension k), its D
 * ours (n x m, leading dimension n), and its bias, one per row of D^T, is
 * one per column of D, as the jitk epilogue's bias[col] is.
 */
typedef struct lt_plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  cublasLtMatmulAlgo_t algo;
} lt_plan;

/* Loads cuBLASLt and creates its handle; 0 with the reason in `why` when
 * it is not there. */
static int lt_load(lt_lib *lt, char *why, size_t why_size) {
  memset(lt, 0, sizeof *lt);
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  char first[200] = "";
  for (size_t i = 0; i < sizeof names / sizeof names[0] && lt->dl == NULL; i++) {
    lt->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lt->dl == NULL && i == 0) {
      const char *err = dlerror();
      snprintf(first, sizeof first, "%s", err ? err : names[i]);
    }
  }
  if (lt->dl == NULL) {
    snprintf(why, why_size, "cuBLASLt not loaded (%s); its rows are skipped", first);
    return 0;
  }
#define LT_RESOLVE_(name)                                                      \
  *(void **)&lt->name = dlsym(lt->dl, #name);                                  \
  if (lt->name == NULL) {                                                      \
    snprintf(why, why_size, "cuBLASLt lacks %s; its rows are skipped", #name); \
    dlclose(lt->dl);                                                           \
    lt->dl = NULL;                                                             \
    return 0;                                                                  \
  }
  LT_FUNCS(LT_RESOLVE_)
#undef LT_RESOLVE_
  cublasStatus_t st = lt->cublasLtCreate(&lt->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    snprintf(why, why_size, "cublasLtCreate failed (%s); cuBLASLt rows are skipped",
             lt->cublasLtGetStatusName(st));
    /* Left loaded: the failed call may have started the CUDA runtime
     * inside it (see lt_unload). */
    lt->dl = NULL;
    return 0;
  }
  return 1;
}

static void lt_unload(jitk_engine *e, lt_lib *lt) {
  if (lt->dl == NULL) return;
  lt->cublasLtDestroy(lt->handle);
  CHECK(e, jitk_device_free(e, lt->workspace, NULL));
  /* cuBLASLt is not unloaded: it may have left the CUDA runtime running
   * in the process, which expects its code to stay mapped until exit. */
}

static void lt_plan_destroy(lt_lib *lt, lt_plan *p) {
  if (p->desc) lt->cublasLtMatmulDescDestroy(p->desc);
  if (p->a) lt->cublasLtMatrixLayoutDestroy(p->a);
  if (p->b) lt->cublasLtMatrixLayoutDestroy(p->b);
  if (p->d) lt->cublasLtMatrixLayoutDestroy(p->d);
  memset(p, 0, sizeof *p);
}

/*
 * Plans D = epilogue(A @ B) for row-major m x k A, k x n B and m x n D of
 * `type`, with the first algorithm cuBLASLt's heuristic gives for a
 * workspace of LT_WORKSPACE. `bias` and `bias_type` matter only with a
 * bias epilogue. CUBLAS_STATUS_NOT_SUPPORTED when the heuristic has no
 * algorithm for it.
 */
static cublasStatus_t lt_plan_create(lt_lib *lt, cublasComputeType_t compute, cudaDataType_t type,
                                     int64_t m, int64_t n, int64_t k, cublasLtEpilogue_t epilogue,
                                     const void *bias, cudaDataType_t bias_type, lt_plan *p) {
  memset(p, 0, sizeof *p);
  cublasStatus_t st = lt->cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                            sizeof epilogue);
  if (st == CUBLAS_STATUS_SUCCESS && bias != NULL) {
    int32_t bt = (int32_t)bias_type;
    st = lt->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = lt->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                              sizeof bt);
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatrixLayoutCreate(&p->a, type, (uint64_t)n, (uint64_t)k, n);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatrixLayoutCreate(&p->b, type, (uint64_t)k, (uint64_t)m, k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatrixLayoutCreate(&p->d, type, (uint64_t)n, (uint64_t)m, n);
  cublasLtMatmulPreference_t pref = NULL;
  if (st == CUBLAS_STATUS_SUCCESS) st = lt->cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = LT_WORKSPACE;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t result;
  memset(&result, 0, sizeof result);
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatmulAlgoGetHeuristic(lt->handle, p->desc, p->a, p->b, p->d, p->d, pref, 1,
                                            &result, &found);
  if (pref != NULL) lt->cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found < 1) st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (st != CUBLAS_STATUS_SUCCESS) {
    lt_plan_destroy(lt, p);
    return st;
  }
  p->algo = result.algo;
  return st;
}

/* Queues the product on the default stream: stream 0 of the CUDA runtime
 * is the driver's NULL stream, where jitk queues its work too. */
static cublasStatus_t lt_run(lt_lib *lt, const lt_plan *p, const void *a, const void *b, void *d) {
  const float alpha = 1.0f, beta = 0.0f;
  return lt->cublasLtMatmul(lt->handle, p->desc, &alpha, b, p->a, a, p->b, &beta, d, p->d, d, p->d,
                            &p->algo, lt->workspace, LT_WORKSPACE, (cudaStream_t)0);
}

/* One case's operands and its three ways of computing D, handed to the
 * timing loop. */
typedef struct mm_case {
  jitk_engine *e;
  lt_lib *lt;
  bench_array a, b, d, bias;
  jitk_matmul *plan;
  jitk_arg extra[1];
  size_t num_extra;
  lt_plan lt_fused, lt_plain;
  jitk_elementwise *bias_relu;
} mm_case;

static void run_jitk(void *ctx) {
  mm_case *c = ctx;
  CHECK(c->e, jitk_matmul_execute(c->plan, NULL, c->a.data, c->b.data, NULL, c->d.data, c->extra,
                                  c->num_extra));
}

static void run_lt_checked(mm_case *c, const lt_plan *p) {
  cublasStatus_t st = lt_run(c->lt, p, c->a.data, c->b.data, c->d.data);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "jitk-bench: cublasLtMatmul failed: %s\n", c->lt->cublasLtGetStatusName(st));
    exit(1);
  }
}

static void run_lt_fused(void *ctx) {
  mm_case *c = ctx;
  run_lt_checked(c, &c->lt_fused);
}

static void run_lt_plain(void *ctx) {
  mm_case *c = ctx;
  run_lt_checked(c, &c->lt_plain);
}

/* JITK_BENCH_HOST=1: what a call costs the host, and the product timed
 * back to back (50 calls queued), where the host's time hides behind the
 * device's; a lone call's figure, jitk_ms or lt_ms, includes the host's
 * time. lt_call is NULL where cuBLASLt has no such product. */
static void host_line(jitk_engine *e, const char *label, mm_case *c, double jitk_ms,
                      void (*lt_call)(void *ctx), double lt_ms) {
  const char *host = getenv("JITK_BENCH_HOST");
  if (host == NULL || strcmp(host, "1") != 0) return;
  double hj, gj, hl = 0, gl = 0;
  bench_back_to_back(e, 50, run_jitk, c, &hj, &gj);
  if (lt_call != NULL) bench_back_to_back(e, 50, lt_call, c, &hl, &gl);
  printf(
      "jitk-bench matmul: %s: one call %.1f us (cuBLASLt %.1f); back to back %.1f us a "
      "call (cuBLASLt %.1f); host %.2f us a call (cuBLASLt %.2f)\n",
      label, jitk_ms * 1e3, lt_ms * 1e3, gj, gl, hj, hl);
  fflush(stdout);
}

static void run_unfused(void *ctx) {
  mm_case *c = ctx;
  run_lt_checked(c, &c->lt_plain);
  jitk_arg args[] = {jitk_arg_array(&c->bias.t), jitk_arg_array(&c->d.t)};
  CHECK(c->e, jitk_elementwise_launch(c->bias_relu, NULL, args, 2, -1, NULL));
}

/* Poisons D with 0xFF bytes (NaN in every float dtype), so that elements
 * a product never writes cannot pass for results of an earlier one. */
static void poison(jitk_engine *e, const bench_array *d) {
  CHECK(e, jitk_memset(e, d->data, 0xFF, bench_array_bytes(d), NULL));
}

static double tflops(int64_t m, int64_t n, int64_t k, double ms) {
  return 2.0 * (double)m * (double)n * (double)k / (ms * 1e-3) / 1e12;
}

/* The elements the 4096^3 cases check: positions drawn once, and for each
 * the float64 reference of the product of the rounded inputs (want), the
 * same with bias and ReLU (want_fused), and the scale errors are measured
 * against: the sum of |a_i b_i|, plus |bias| for the fused results. */
typedef struct mm_samples {
  int64_t row[SAMPLES], col[SAMPLES];
  double want[SAMPLES], want_fused[SAMPLES], scale[SAMPLES], scale_fused[SAMPLES];
  double want_pre[SAMPLES]; /* acc + bias, before any activation */
} mm_samples;

/* A small xorshift generator: the sample is the same on every run and
 * every machine, which rand() does not promise. */
static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void samples_make(jitk_engine *e, const mm_case *c, int with_bias, mm_samples *s) {
  int64_t m = c->a.shape[0], k = c->a.shape[1], n = c->b.shape[1];
  double *ha = bench_array_to_host(e, &c->a), *hb = bench_array_to_host(e, &c->b);
  double *hbias = with_bias ? bench_array_to_host(e, &c->bias) : NULL;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < SAMPLES; i++) {
    int64_t r = (int64_t)(next_random(&state) % (uint64_t)m);
    int64_t col = (int64_t)(next_random(&state) % (uint64_t)n);
    double sum = 0, abs_sum = 0;
    for (int64_t j = 0; j < k; j++) {
      double p = ha[r * k + j] * hb[j * n + col];
      sum += p;
      abs_sum += fabs(p);
    }
    s->row[i] = r;
    s->col[i] = col;
    s->want[i] = sum;
    s->scale[i] = abs_sum;
    double bias = hbias ? hbias[col] : 0.0, fused = sum + bias;
    s->want_fused[i] = fused > 0 ? fused : 0;
    s->want_pre[i] = fused;
    s->scale_fused[i] = abs_sum + fabs(bias);
  }
  free(ha);
  free(hb);
  free(hbias);
}

/* Reads D's sampled elements into got[] and counts those farther from the
 * reference than tol times their scale; NaN (the poison) always is. */
static size_t check_sample(jitk_engine *e, const bench_array *d, const mm_samples *s, int fused,
                           double tol, double *got) {
  double *hd = bench_array_to_host(e, d);
  int64_t n = d->shape[1];
  size_t bad = 0;
  for (int i = 0; i < SAMPLES; i++) {
    got[i] = hd[s->row[i] * n + s->col[i]];
    double want = fused ? s->want_fused[i] : s->want[i];
    double scale = fused ? s->scale_fused[i] : s->scale[i];
    if (!(fabs(got[i] - want) <= tol * scale) && ++bad <= 5)
      printf("jitk-bench matmul: D[%lld][%lld] is %.9g, want %.9g (scale %.6g)\n",
             (long long)s->row[i], (long long)s->col[i], got[i], want, scale);
  }
  free(hd);
  return bad;
}

/* Sampled elements of two computations that differ by more than tol of
 * the scale: jitk's against cuBLASLt's. */
static size_t count_differ(const double *x, const double *y, const mm_samples *s, int fused,
                           double tol) {
  size_t bad = 0;
  for (int i = 0; i < SAMPLES; i++) {
    double scale = fused ? s->scale_fused[i] : s->scale[i];
    if (!(fabs(x[i] - y[i]) <= tol * scale)) bad++;
  }
  return bad;
}

/* The benchmark's table, filled as the cases run. Names and notes live in
 * the arrays beside the rows. */
typedef struct mm_table {
  bench_row rows[MAX_ROWS];
  char names[MAX_ROWS][96];
  char notes[MAX_ROWS][400];
  int n;
  size_t wrong;
} mm_table;

static void add_row(mm_table *t, const char *dname, const char *shape, const char *what,
                    double value, const char *note) {
  /* A row dropped would be a figure lost without a word (the whole run
   * once had more rows than the table, and its last section went missing). */
  if (t->n == MAX_ROWS) {
    fprintf(stderr, "jitk-bench: more than %d rows in the table; raise MAX_ROWS\n", MAX_ROWS);
    exit(1);
  }
  snprintf(t->names[t->n], sizeof t->names[t->n], "%s %s %s", dname, shape, what);
  snprintf(t->notes[t->n], sizeof t->notes[t->n], "%s", note);
  t->rows[t->n] = (bench_row){t->names[t->n], value, "TFLOP/s", t->notes[t->n]};
  t->n++;
}

/* Kernels the cases share: the random fill, the unfused bias+ReLU (a
 * float32 bias onto D of any float dtype, in place), and the conversion
 * of the bias to D's dtype for a cuBLASLt that wants it so. */
typedef struct mm_kernels {
  jitk_elementwise *fill, *bias_relu, *convert;
} mm_kernels;

/*
 * Plans cuBLASLt's bias+ReLU product with a float32 bias, or where this
 * cuBLASLt refuses that (cublasLt.h documents the bias as D's type outside
 * its integer and fp8 kernels), with a copy of the bias converted to D's
 * type, made into *bias_copy. A trial run checks that the product is accepted. The
 * bias's type goes into `used`; 0 when neither works.
 */
static int lt_fused_create(mm_case *c, const mm_kernels *k, cudaDataType_t type,
                           bench_array *bias_copy, char *used, size_t used_size,
                           cublasStatus_t *why) {
  int64_t m = c->a.shape[0], kk = c->a.shape[1], n = c->b.shape[1];
  *why = lt_plan_create(c->lt, CUBLAS_COMPUTE_32F, type, m, n, kk, CUBLASLT_EPILOGUE_RELU_BIAS,
                        c->bias.data, CUDA_R_32F, &c->lt_fused);
  if (*why == CUBLAS_STATUS_SUCCESS) {
    *why = lt_run(c->lt, &c->lt_fused, c->a.data, c->b.data, c->d.data);
    if (*why == CUBLAS_STATUS_SUCCESS) {
      snprintf(used, used_size, "float32 bias");
      return 1;
    }
    lt_plan_destroy(c->lt, &c->lt_fused);
  }
  bench_array_make(bias_copy, c->e, c->d.dtype, 1, n, 0);
  jitk_arg args[] = {jitk_arg_array(&c->bias.t), jitk_arg_array(&bias_copy->t)};
  CHECK(c->e, jitk_elementwise_launch(k->convert, NULL, args, 2, -1, NULL));
  *why = lt_plan_create(c->lt, CUBLAS_COMPUTE_32F, type, m, n, kk, CUBLASLT_EPILOGUE_RELU_BIAS,
                        bias_copy->data, type, &c->lt_fused);
  if (*why == CUBLAS_STATUS_SUCCESS) {
    *why = lt_run(c->lt, &c->lt_fused, c->a.data, c->b.data, c->d.data);
    if (*why == CUBLAS_STATUS_SUCCESS) {
      jitk_dtype_info info;
      jitk_dtype_get_info(c->d.dtype, &info);
      snprintf(used, used_size, "%s bias (float32 refused)", info.name);
      return 1;
    }
    lt_plan_destroy(c->lt, &c->lt_fused);
  }
  return 0;
}

/* The jitk plan of a case: D = epilogue(A @ B), row-major, D of A's
 * dtype. Its description is printed as the case starts. */
static jitk_matmul *plan_create(jitk_engine *e, const mm_case *c, jitk_compute compute,
                                const char *epilogue, const char *params, const char *label) {
  jitk_matmul_desc desc;
  jitk_matmul_desc_init(&desc);
  desc.m = c->a.shape[0];
  desc.k = c->a.shape[1];
  desc.n = c->b.shape[1];
  desc.a_dtype = desc.b_dtype = desc.d_dtype = c->a.dtype;
  desc.compute = compute;
  desc.epilogue = epilogue;
  desc.epilogue_params = params;
  jitk_matmul *plan = NULL;
  CHECK(e, jitk_matmul_create(e, &desc, &plan));
  char described[512];
  CHECK(e, jitk_matmul_describe(plan, described, sizeof described));
  printf("jitk-bench matmul: %s: %s\n", label, described);
  fflush(stdout);
  return plan;
}

static void case_make(mm_case *c, jitk_engine *e, lt_lib *lt, const mm_kernels *k, jitk_dtype d,
                      int64_t m, int64_t n, int64_t kk, uint32_t seed) {
  memset(c, 0, sizeof *c);
  c->e = e;
  c->lt = lt;
  bench_array_make(&c->a, e, d, 2, m, kk);
  bench_array_make(&c->b, e, d, 2, kk, n);
  bench_array_make(&c->d, e, d, 2, m, n);
  bench_array_make(&c->bias, e, JITK_FLOAT32, 1, n, 0);
  bench_fill_random(e, k->fill, &c->a, seed);
  bench_fill_random(e, k->fill, &c->b, seed + 1);
  bench_fill_random(e, k->fill, &c->bias, seed + 2);
  c->bias_relu = k->bias_relu;
}

static void case_free(mm_case *c) {
  jitk_engine *e = c->e;
  jitk_matmul_destroy(c->plan);
  if (c->lt->dl != NULL) {
    lt_plan_destroy(c->lt, &c->lt_fused);
    lt_plan_destroy(c->lt, &c->lt_plain);
  }
  CHECK(e, jitk_device_free(e, c->a.data, NULL));
  CHECK(e, jitk_device_free(e, c->b.data, NULL));
  CHECK(e, jitk_device_free(e, c->d.data, NULL));
  CHECK(e, jitk_device_free(e, c->bias.data, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
}

/* bfloat16 or float16 D = relu(A @ B + bias[col]): the jitk plan, cuBLASLt
 * fused, cuBLASLt and a jitk bias+ReLU. */
static void bench_fused(jitk_engine *e, lt_lib *lt, const char *lt_why, const mm_kernels *k,
                        jitk_dtype d, const char *dname, int64_t m, int64_t n, int64_t kk,
                        const char *shape, mm_table *t) {
  const double tol = 1e-2;
  /* Sampled checks at 4096^3 and 8192^3 (many tiles a block); on the
   * shapes whose rows are off 16 bytes, which go through another path;
   * and on the decode shapes of N = 8192 (split-K's partial sums and fix-up checked too; B of 28672 x
   * 8192 in float64 would take 1.9 GB of host memory). */
  int check = (m == 4096 && n == 4096 && kk == 4096) || (m == 8192 && n == 8192 && kk == 8192) ||
              n % 8 != 0 || kk % 8 != 0 || (m <= 256 && n == 8192);
  cudaDataType_t type = d == JITK_BFLOAT16 ? CUDA_R_16BF : CUDA_R_16F;
  mm_case c;
  case_make(&c, e, lt, k, d, m, n, kk, d == JITK_BFLOAT16 ? 101u : 201u);
  char label[96];
  snprintf(label, sizeof label, "%s %s", dname, shape);
  c.plan = plan_create(e, &c, JITK_COMPUTE_FLOAT32, "max(acc + bias[col], (T)0)",
                       "raw float32 bias", label);
  c.extra[0] = jitk_arg_ptr(c.bias.data, JITK_FLOAT32);
  c.num_extra = 1;

  mm_samples s;
  double got_jitk[SAMPLES], got_lt[SAMPLES], got_unfused[SAMPLES];
  if (check) samples_make(e, &c, 1, &s);

  poison(e, &c.d);
  const double jitk_ms = bench_time_ms(e, WARMUP, REPS, run_jitk, &c),
               jitk_tf = tflops(m, n, kk, jitk_ms);
  size_t jitk_bad = check ? check_sample(e, &c.d, &s, 1, tol, got_jitk) : 0;

  if (lt->dl == NULL) {
    char note[400];
    if (check)
      snprintf(note, sizeof note, "%zu wrong; %s", jitk_bad, lt_why);
    else
      snprintf(note, sizeof note, "%s", lt_why);
    add_row(t, dname, shape, "jitk fused", jitk_tf, note);
    t->wrong += jitk_bad;
    case_free(&c);
    return;
  }

  bench_array bias_copy;
  memset(&bias_copy, 0, sizeof bias_copy);
  char bias_used[64] = "";
  cublasStatus_t why = CUBLAS_STATUS_SUCCESS;
  poison(e, &c.d);
  int have_fused = lt_fused_create(&c, k, type, &bias_copy, bias_used, sizeof bias_used, &why);
  double lt_ms = 0, lt_tf = 0;
  size_t lt_bad = 0;
  if (have_fused) {
    poison(e, &c.d);
    lt_ms = bench_time_ms(e, WARMUP, REPS, run_lt_fused, &c);
    lt_tf = tflops(m, n, kk, lt_ms);
    lt_bad = check ? check_sample(e, &c.d, &s, 1, tol, got_lt) : 0;
  }

  double un_tf = 0;
  size_t un_bad = 0;
  cublasStatus_t plain_st =
      lt_plan_create(lt, CUBLAS_COMPUTE_32F, type, m, n, kk, CUBLASLT_EPILOGUE_DEFAULT, NULL,
                     CUDA_R_32F, &c.lt_plain);
  if (plain_st == CUBLAS_STATUS_SUCCESS) {
    poison(e, &c.d);
    un_tf = tflops(m, n, kk, bench_time_ms(e, WARMUP, REPS, run_unfused, &c));
    /* Every run multiplies afresh before the bias+ReLU, so D holds one
     * application of it, as the fused products' D does. */
    un_bad = check ? check_sample(e, &c.d, &s, 1, tol, got_unfused) : 0;
  }

  char note[200];
  size_t differ = check && have_fused ? count_differ(got_jitk, got_lt, &s, 1, tol) : 0;
  if (have_fused && check)
    snprintf(note, sizeof note,
             "%.2f of cuBLASLt fused (goal >= 0.60); %zu wrong; %zu differ from cuBLASLt",
             jitk_tf / lt_tf, jitk_bad, differ);
  else if (have_fused)
    snprintf(note, sizeof note, "%.2f of cuBLASLt fused (goal >= 0.60)", jitk_tf / lt_tf);
  else
    snprintf(note, sizeof note, "%zu wrong; cuBLASLt has no RELU_BIAS product here (%s)", jitk_bad,
             lt->cublasLtGetStatusName(why));
  add_row(t, dname, shape, "jitk fused", jitk_tf, note);
  if (have_fused) {
    if (check)
      snprintf(note, sizeof note, "%s; %zu wrong", bias_used, lt_bad);
    else
      snprintf(note, sizeof note, "%s", bias_used);
    add_row(t, dname, shape, "cuBLASLt RELU_BIAS", lt_tf, note);
  }
  if (plain_st == CUBLAS_STATUS_SUCCESS) {
    if (have_fused)
      snprintf(note, sizeof note, "%.2f of cuBLASLt fused", un_tf / lt_tf);
    else
      snprintf(note, sizeof note, "no cuBLASLt fused to compare with");
    if (check) {
      size_t used = strlen(note);
      snprintf(note + used, sizeof note - used, "; %zu wrong", un_bad);
    }
    add_row(t, dname, shape, "cuBLASLt + jitk bias+ReLU (unfused)", un_tf, note);
  } else {
    printf("jitk-bench matmul: %s: cuBLASLt has no plain product (%s)\n", label,
           lt->cublasLtGetStatusName(plain_st));
  }
  host_line(e, label, &c, jitk_ms, have_fused ? run_lt_fused : NULL, lt_ms);
  t->wrong += jitk_bad + lt_bad + un_bad + differ;
  if (bias_copy.data != NULL) CHECK(e, jitk_device_free(e, bias_copy.data, NULL));
  case_free(&c);
}

/* What an epilogue costs: bfloat16 plans at the MLP layer's shape (4096
 * x 4096 x 1024, as examples/mlp_train_step's forward pass) with bias and
 * ReLU or GELU, each with and without an auxiliary output of the
 * pre-activation, and GELU written out with one exponential (x sigmoid(2
 * u), the same function as 0.5 x (1 + tanh u)). D and the auxiliary output
 * are poisoned first and sampled against float64. Last, the product alone
 * (D = acc): what reading the bias costs. */
static double gelu_ref(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static size_t check_epilogue(jitk_engine *e, const bench_array *d, const mm_samples *s, int act,
                             double tol) {
  double *hd = bench_array_to_host(e, d);
  int64_t n = d->shape[1];
  size_t bad = 0;
  for (int i = 0; i < SAMPLES; i++) {
    /* act 3: the product alone, without the bias. */
    double x = act == 3 ? s->want[i] : s->want_pre[i], got = hd[s->row[i] * n + s->col[i]];
    double want = act == 0 || act == 3 ? x : act == 1 ? (x > 0 ? x : 0) : gelu_ref(x);
    double scale = act == 3 ? s->scale[i] : s->scale_fused[i];
    if (!(fabs(got - want) <= tol * scale) && ++bad <= 5)
      printf("jitk-bench matmul: epilogue %d: [%lld][%lld] is %.9g, want %.9g\n", act,
             (long long)s->row[i], (long long)s->col[i], got, want);
  }
  free(hd);
  return bad;
}

typedef struct epi_case {
  mm_case *c;
  bench_array *aux;
} epi_case;

static void run_epi(void *ctx) {
  epi_case *x = ctx;
  void *outs[1] = {x->aux ? x->aux->data : NULL};
  jitk_matmul_operands o;
  jitk_matmul_operands_init(&o);
  o.a = x->c->a.data;
  o.b = x->c->b.data;
  o.d = x->c->d.data;
  o.extra = x->c->extra;
  o.num_extra = x->c->num_extra;
  o.outputs = x->aux ? outs : NULL;
  CHECK(x->c->e, jitk_matmul_execute_ex(x->c->plan, NULL, &o));
}

static void bench_epilogue(jitk_engine *e, lt_lib *lt, const mm_kernels *k, mm_table *t) {
  static const struct {
    const char *name, *expr, *preamble;
    int act, aux;
  } v[] = {
      {"bias", "acc + bias[col]", NULL, 0, 0},
      {"bias+ReLU", "relu(acc + bias[col])", NULL, 1, 0},
      {"bias+GELU", "gelu(acc + bias[col])", NULL, 2, 0},
      {"bias+ReLU, aux pre", "relu(acc + bias[col])", NULL, 1, 1},
      {"bias+GELU, aux pre", "gelu(acc + bias[col])", NULL, 2, 1},
      {"bias+GELU by one exp, aux pre", "gelu1(acc + bias[col])",
       "__device__ __forceinline__ float gelu1(float x) {\n"
       "  return x / (1.f + __expf(-1.5957691216f * (x + 0.044715f * x * x * x)));\n}\n",
       2, 1},
      {"bias+GELU by one exp, fast division", "gelu2(acc + bias[col])",
       "__device__ __forceinline__ float gelu2(float x) {\n"
       "  return __fdividef(x, 1.f + __expf(-1.5957691216f * (x + 0.044715f * x * x * x)));\n}\n",
       2, 0},
      {"bias+GELU by tanh.approx", "gelu3(acc + bias[col])",
       "__device__ __forceinline__ float gelu3(float x) {\n"
       "  float t, u = 0.7978845608f * (x + 0.044715f * x * x * x);\n"
       "  asm(\"tanh.approx.f32 %0, %1;\" : \"=f\"(t) : \"f\"(u));\n"
       "  return 0.5f * x * (1.f + t);\n}\n",
       2, 0},
      {"bias+ReLU, aux acc", "relu(acc + bias[col])", NULL, 1, 2},
      {"no bias (D = acc)", "acc", NULL, 3, 0},
  };
  const int64_t m = 4096, n = 4096, kk = 1024;
  mm_case c;
  case_make(&c, e, lt, k, JITK_BFLOAT16, m, n, kk, 301u);
  bench_array aux;
  bench_array_make(&aux, e, JITK_BFLOAT16, 2, m, n);
  mm_samples s;
  samples_make(e, &c, 1, &s);
  c.extra[0] = jitk_arg_ptr(c.bias.data, JITK_FLOAT32);
  c.num_extra = 1;
  static const jitk_matmul_output pre[] = {{"pre", JITK_BFLOAT16, "acc + bias[col]", 0, 0}},
                                  acc[] = {{"pre", JITK_BFLOAT16, "acc", 0, 0}};
  double base = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    jitk_matmul_desc desc;
    jitk_matmul_desc_init(&desc);
    desc.m = m;
    desc.n = n;
    desc.k = kk;
    desc.a_dtype = desc.b_dtype = desc.d_dtype = JITK_BFLOAT16;
    desc.compute = JITK_COMPUTE_FLOAT32;
    desc.epilogue = v[i].expr;
    desc.epilogue_params = "raw float32 bias";
    desc.preamble = v[i].preamble;
    desc.outputs = v[i].aux == 2 ? acc : v[i].aux ? pre : NULL;
    desc.num_outputs = v[i].aux ? 1 : 0;
    CHECK(e, jitk_matmul_create(e, &desc, &c.plan));
    epi_case x = {&c, v[i].aux ? &aux : NULL};
    poison(e, &c.d);
    poison(e, &aux);
    double tf = tflops(m, n, kk, bench_time_ms(e, WARMUP, REPS, run_epi, &x));
    size_t bad = check_epilogue(e, &c.d, &s, v[i].act, 1e-2);
    if (v[i].aux != 0) bad += check_epilogue(e, &aux, &s, v[i].aux == 1 ? 0 : 3, 1e-2);
    if (i == 0) base = tf;
    char note[200];
    snprintf(note, sizeof note, "%.2f of the bias alone; %zu wrong", tf / base, bad);
    add_row(t, "bfloat16", "4096x4096x1024", v[i].name, tf, note);
    t->wrong += bad;
    jitk_matmul_destroy(c.plan);
    c.plan = NULL;
  }
  CHECK(e, jitk_device_free(e, aux.data, NULL));
  case_free(&c);
}

/* float32 D = A @ B of m x n x kk, no epilogue, with the compute type tf32
 * (JITK_COMPUTE_TF32 against CUBLAS_COMPUTE_32F_FAST_TF32) or float32
 * (JITK_COMPUTE_FLOAT32 against CUBLAS_COMPUTE_32F). */
static void bench_plain(jitk_engine *e, lt_lib *lt, const char *lt_why, const mm_kernels *k,
                        int tf32, int64_t m, int64_t n, int64_t kk, mm_table *t) {
  const char *dname = tf32 ? "tf32" : "float32";
  char shape[64];
  if (m == n && n == kk)
    snprintf(shape, sizeof shape, "%lld^3", (long long)m);
  else
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)kk);
  const double tol = tf32 ? 1e-3 : 1e-5, goal = tf32 ? 0.60 : 0.80;
  mm_case c;
  case_make(&c, e, lt, k, JITK_FLOAT32, m, n, kk, tf32 ? 301u : 401u);
  char label[96];
  snprintf(label, sizeof label, "%s %s", dname, shape);
  c.plan = plan_create(e, &c, tf32 ? JITK_COMPUTE_TF32 : JITK_COMPUTE_FLOAT32, NULL, NULL, label);

  mm_samples s;
  double got_jitk[SAMPLES], got_lt[SAMPLES];
  samples_make(e, &c, 0, &s);
  poison(e, &c.d);
  const double jitk_ms = bench_time_ms(e, WARMUP, REPS, run_jitk, &c);
  const double jitk_tf = tflops(m, n, kk, jitk_ms);
  size_t jitk_bad = check_sample(e, &c.d, &s, 0, tol, got_jitk);

  char note[200];
  cublasStatus_t st = CUBLAS_STATUS_NOT_INITIALIZED;
  if (lt->dl != NULL)
    st = lt_plan_create(lt, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F, m,
                        n, kk, CUBLASLT_EPILOGUE_DEFAULT, NULL, CUDA_R_32F, &c.lt_plain);
  if (st != CUBLAS_STATUS_SUCCESS) {
    if (lt->dl == NULL)
      snprintf(note, sizeof note, "%zu wrong; %s", jitk_bad, lt_why);
    else
      snprintf(note, sizeof note, "%zu wrong; cuBLASLt has no product here (%s)", jitk_bad,
               lt->cublasLtGetStatusName(st));
    add_row(t, dname, shape, "jitk", jitk_tf, note);
    t->wrong += jitk_bad;
    case_free(&c);
    return;
  }
  poison(e, &c.d);
  const double lt_ms = bench_time_ms(e, WARMUP, REPS, run_lt_plain, &c);
  const double lt_tf = tflops(m, n, kk, lt_ms);
  size_t lt_bad = check_sample(e, &c.d, &s, 0, tol, got_lt);
  size_t differ = count_differ(got_jitk, got_lt, &s, 0, tol);
  host_line(e, label, &c, jitk_ms, run_lt_plain, lt_ms);
  snprintf(note, sizeof note,
           "%.2f of cuBLASLt (goal >= %.2f); %zu wrong; %zu differ from cuBLASLt", jitk_tf / lt_tf,
           goal, jitk_bad, differ);
  add_row(t, dname, shape, "jitk", jitk_tf, note);
  snprintf(note, sizeof note, "%s; %zu wrong",
           tf32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F", lt_bad);
  add_row(t, dname, shape, "cuBLASLt", lt_tf, note);
  t->wrong += jitk_bad + lt_bad + differ;
  case_free(&c);
}

/*
 * FP8: bfloat16 D = A @ B + bias[col] at 8192^3, A and B float8_e4m3fn
 * (A row-major, B column-major: both K-major, cuBLASLt's "TN"), a
 * bfloat16 bias, scales of A and B of 1 on the device. jitk's plan with
 * promotion (the default: each K-tile's sum added into a separate float32
 * sum) and with JITK_COMPUTE_FLOAT32_FAST_ACCUM, against cuBLASLt's FP8
 * product without and with CUBLASLT_MATMUL_DESC_FAST_ACCUM: the like-for-
 * like pairs. Sampled elements of each D are checked against float64 with
 * jitk.h's bound for its accumulation ("FP8 plans"), and cuBLASLt's
 * elements against jitk's.
 *
 * What cuBLASLt's documentation requires of an FP8 product on sm_90
 * (cublasLtMatmul, "FP8" in the cuBLAS docs, and cublasLt.h's attribute
 * notes): CUBLAS_COMPUTE_32F with scale type CUDA_R_32F; A transposed and
 * B not ("TN"), which in its column-major terms is our product planned as
 * D^T = B^T A^T (see lt_plan): its A is our column-major B, stored k x n
 * with leading dimension k and CUBLASLT_MATMUL_DESC_TRANSA = CUBLAS_OP_T,
 * its B our row-major A, k x m with leading dimension k, CUBLAS_OP_N;
 * leading dimensions multiples of 16 and pointers on 16 bytes; A and B not
 * both e5m2; scales as device pointers to one float32 each
 * (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, B_SCALE_POINTER, ...); for a
 * bfloat16 D, C bfloat16 too (C may be 8-bit only when D is), and the
 * bias of D's type, bfloat16 (float32 and 8-bit D are the exceptions
 * whose bias is bfloat16 or float16, cublasLt.h on BIAS_DATA_TYPE).
 *
 * cuBLASLt refused the bench's first such configuration on the H200
 * (cuBLASLt 13.0, CUBLAS_STATUS_NOT_SUPPORTED) without saying where, so
 * each product is now planned from a list of configurations, the one most
 * like jitk's first, each with up to 8 of the heuristic's algorithms tried
 * in turn; every refusal prints the configuration's attributes, the step
 * that refused it (heuristic or run), its status and cuBLASLt's own error
 * log lines; the row says which configuration ran. The last configuration
 * has no bias in cuBLASLt (CUBLASLT_EPILOGUE_DEFAULT): its time is the
 * plain product's, a bound on what any fused bias could reach, and its D
 * gets the bias from a jitk elementwise pass before it is checked.
 */
typedef struct fp8_bench {
  jitk_engine *e;
  lt_lib *lt;
  jitk_matmul *plan, *plan_fast;
  jitk_matmul_operands ops;
  jitk_arg extra[1];
  lt_plan plan_lt;
  const void *lt_c; /* cuBLASLt's C pointer: D, or NULL */
  void *a, *b, *d, *bias, *scales;
  int64_t m, n, k;
} fp8_bench;

static void run_fp8_jitk(void *ctx) {
  fp8_bench *f = ctx;
  CHECK(f->e, jitk_matmul_execute_ex(f->plan, NULL, &f->ops));
}

static void run_fp8_jitk_fast(void *ctx) {
  fp8_bench *f = ctx;
  CHECK(f->e, jitk_matmul_execute_ex(f->plan_fast, NULL, &f->ops));
}

static cublasStatus_t lt_fp8_run(fp8_bench *f, const lt_plan *p) {
  const float alpha = 1.0f, beta = 0.0f;
  return f->lt->cublasLtMatmul(f->lt->handle, p->desc, &alpha, f->b, p->a, f->a, p->b, &beta,
                               f->lt_c, p->d, f->d, p->d, &p->algo, f->lt->workspace, LT_WORKSPACE,
                               (cudaStream_t)0);
}

static void run_fp8_lt(void *ctx) {
  fp8_bench *f = ctx;
  cublasStatus_t st = lt_fp8_run(f, &f->plan_lt);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "jitk-bench: cublasLtMatmul (FP8) failed: %s\n",
            f->lt->cublasLtGetStatusName(st));
    exit(1);
  }
}

/* One configuration of cuBLASLt's FP8 product, from most to least like
 * jitk's: the product is the same in all (the bench's scales are 1). */
typedef struct lt_fp8_config {
  const char *what;
  int bias;      /* CUBLASLT_EPILOGUE_BIAS with the bfloat16 bias; 0: DEFAULT */
  int bias_type; /* CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE set to CUDA_R_16BF; 0: left unset */
  int scales;    /* A_SCALE_POINTER and B_SCALE_POINTER set; 0: unset (1) */
  int c_null;    /* C passed as NULL (beta is 0) rather than D, in place */
} lt_fp8_config;

static const lt_fp8_config lt_fp8_configs[] = {
    {"EPILOGUE_BIAS, BIAS_DATA_TYPE CUDA_R_16BF, A/B_SCALE_POINTER, C = D (bf16, in place)", 1, 1,
     1, 0},
    {"EPILOGUE_BIAS, BIAS_DATA_TYPE left to D's (bf16), A/B_SCALE_POINTER, C = D", 1, 0, 1, 0},
    {"EPILOGUE_BIAS, BIAS_DATA_TYPE CUDA_R_16BF, A/B_SCALE_POINTER, C NULL", 1, 1, 1, 1},
    {"EPILOGUE_BIAS, BIAS_DATA_TYPE CUDA_R_16BF, no scale pointers (1), C = D", 1, 1, 0, 0},
    {"EPILOGUE_BIAS, BIAS_DATA_TYPE left to D's, no scale pointers, C NULL", 1, 0, 0, 1},
    {"EPILOGUE_DEFAULT (no bias: the plain product; bias added afterwards by jitk, untimed), "
     "A/B_SCALE_POINTER, C = D",
     0, 0, 1, 0},
};

/* cuBLASLt's error log lines while a configuration is tried, through its
 * logger callback where the library has one. */
static char lt_log[1024];
static void lt_log_cb(int level, const char *fn, const char *msg) {
  size_t used = strlen(lt_log);
  if (used + 8 < sizeof lt_log)
    snprintf(lt_log + used, sizeof lt_log - used, "%s[%d %s] %s", used ? "; " : "", level,
             fn ? fn : "?", msg ? msg : "");
}

/* Plans config `cf` with fast accumulation on or off and runs it once,
 * trying up to 8 of the heuristic's algorithms; on failure, `where` says
 * which step refused it. */
static cublasStatus_t lt_fp8_create(fp8_bench *f, const lt_fp8_config *cf, int fast,
                                    const char **where) {
  lt_lib *lt = f->lt;
  lt_plan *p = &f->plan_lt;
  memset(p, 0, sizeof *p);
  *where = "cublasLtMatmulDescCreate";
  cublasStatus_t st = lt->cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  const cublasLtEpilogue_t epi = cf->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const int32_t bias_type = CUDA_R_16BF;
  const int8_t fast_accum = (int8_t)fast;
  const float *sa = f->scales, *sb = (const float *)f->scales + 1;
#define LT_SET_(attr, value)                                                                \
  if (st == CUBLAS_STATUS_SUCCESS) {                                                        \
    *where = "cublasLtMatmulDescSetAttribute(" #attr ")";                                   \
    st = lt->cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_##attr, &(value), \
                                            sizeof(value));                                 \
  }
  LT_SET_(TRANSA, op_t)
  LT_SET_(TRANSB, op_n)
  LT_SET_(EPILOGUE, epi)
  if (cf->bias) {
    LT_SET_(BIAS_POINTER, f->bias)
    if (cf->bias_type) LT_SET_(BIAS_DATA_TYPE, bias_type)
  }
  LT_SET_(FAST_ACCUM, fast_accum)
  if (cf->scales) { /* cuBLASLt's A is our B */
    LT_SET_(A_SCALE_POINTER, sb)
    LT_SET_(B_SCALE_POINTER, sa)
  }
#undef LT_SET_
  if (st == CUBLAS_STATUS_SUCCESS) {
    *where = "cublasLtMatrixLayoutCreate";
    st =
        lt->cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8F_E4M3, (uint64_t)f->k, (uint64_t)f->n, f->k);
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st =
        lt->cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8F_E4M3, (uint64_t)f->k, (uint64_t)f->m, f->k);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatrixLayoutCreate(&p->d, CUDA_R_16BF, (uint64_t)f->n, (uint64_t)f->m, f->n);
  cublasLtMatmulPreference_t pref = NULL;
  if (st == CUBLAS_STATUS_SUCCESS) st = lt->cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = LT_WORKSPACE;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t results[8];
  memset(results, 0, sizeof results);
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    *where = "cublasLtMatmulAlgoGetHeuristic";
    st = lt->cublasLtMatmulAlgoGetHeuristic(lt->handle, p->desc, p->a, p->b, p->d, p->d, pref, 8,
                                            results, &found);
  }
  if (pref != NULL) lt->cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found < 1) {
    *where = "cublasLtMatmulAlgoGetHeuristic (no algorithm)";
    st = CUBLAS_STATUS_NOT_SUPPORTED;
  }
  f->lt_c = cf->c_null ? NULL : f->d;
  for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found; i++) {
    p->algo = results[i].algo;
    *where = "cublasLtMatmul (each of the heuristic's algorithms)";
    cublasStatus_t run = lt_fp8_run(f, p);
    if (run == CUBLAS_STATUS_SUCCESS) return run;
    if (i + 1 == found) st = run;
  }
  lt_plan_destroy(lt, p);
  return st;
}

/* Sampled elements of D against float64 within jitk.h's FP8 bound for a
 * bfloat16 D (its accumulation term for promotion or, with `fast`, for
 * fast accumulation), and against `other` (another D, when given) within
 * both bounds; the elements outside counted. `d` is copied into `keep`
 * when that is given. */
static size_t fp8_check(fp8_bench *f, const uint8_t *ha, const uint8_t *hb, const uint16_t *hbias,
                        int fast, const uint16_t *other, uint16_t *keep, const char *who) {
  const size_t nd = (size_t)(f->m * f->n);
  uint16_t *hd = keep != NULL ? keep : malloc(nd * 2);
  if (hd == NULL) return SAMPLES;
  CHECK(f->e, jitk_memcpy(f->e, hd, f->d, nd * 2, NULL));
  CHECK(f->e, jitk_stream_synchronize(f->e, NULL));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  size_t bad = 0;
  /* Every element finite (D was poisoned with NaN before the runs): a
   * tile left unwritten shows here whatever the sample. */
  size_t nonfinite = 0, first = 0;
  for (size_t i = 0; i < nd; i++)
    if (!isfinite(jitk_bfloat16_to_float(hd[i])) && nonfinite++ == 0) first = i;
  if (nonfinite > 0) {
    printf("jitk-bench matmul: FP8 %s: D has %zu elements not finite, the first D[%lld][%lld]\n",
           who, nonfinite, (long long)(first / (size_t)f->n), (long long)(first % (size_t)f->n));
    bad += nonfinite;
  }
  /* jitk.h's accumulation term: 2^-10 per k32 step, over the four of a
   * K-tile with promotion, over all of them without; float32's sums. */
  const int64_t steps = (f->k + 31) / 32;
  const double acc_eps = ldexp(1, -10) * (double)(fast ? steps : 4) + ldexp(1, -24) * (double)f->k;
  double worst = 0;
  for (int i = 0; i < SAMPLES; i++) {
    const int64_t r = (int64_t)(next_random(&state) % (uint64_t)f->m);
    const int64_t c = (int64_t)(next_random(&state) % (uint64_t)f->n);
    double sum = 0, abs_sum = 0;
    for (int64_t q = 0; q < f->k; q++) {
      const double p = (double)jitk_float8_e4m3_to_float(ha[r * f->k + q]) *
                       (double)jitk_float8_e4m3_to_float(hb[c * f->k + q]);
      sum += p;
      abs_sum += fabs(p);
    }
    const double bias = jitk_bfloat16_to_float(hbias[c]), want = sum + bias;
    const double got = jitk_bfloat16_to_float(hd[r * f->n + c]);
    const double bound =
        acc_eps * abs_sum + ldexp(1, -8) * fabs(want) + ldexp(1, -22) * (fabs(sum) + fabs(bias));
    if (abs_sum > 0 && fabs(got - want) / abs_sum > worst) worst = fabs(got - want) / abs_sum;
    if (!(fabs(got - want) <= bound) && ++bad <= 5)
      printf(
          "jitk-bench matmul: FP8 %s: D[%lld][%lld] is %.9g, want %.9g (sum of |a b| %.6g, "
          "bound %.3g)\n",
          who, (long long)r, (long long)c, got, want, abs_sum, bound);
    if (other != NULL) {
      const double o = jitk_bfloat16_to_float(other[r * f->n + c]);
      /* Both within their bounds of `want` (jitk's promoted one is the
       * tighter): within the sum of the two of each other. */
      const double both = bound + (ldexp(1, -8) + ldexp(1, -24) * (double)f->k) * abs_sum +
                          ldexp(1, -8) * fabs(want) + ldexp(1, -22) * (fabs(sum) + fabs(bias));
      if (!(fabs(got - o) <= both) && ++bad <= 5)
        printf("jitk-bench matmul: FP8 %s: D[%lld][%lld] is %.9g, jitk's %.9g\n", who, (long long)r,
               (long long)c, got, o);
    }
  }
  printf(
      "jitk-bench matmul: FP8 %s: largest sampled |D - ref| is %.3g of sum |a b| "
      "(the accumulation's bound: %.3g)\n",
      who, worst, acc_eps);
  if (keep == NULL) free(hd);
  return bad;
}

static void bench_fp8(jitk_engine *e, lt_lib *lt, const char *lt_why, const mm_kernels *k,
                      mm_table *t) {
  fp8_bench f;
  memset(&f, 0, sizeof f);
  f.e = e;
  f.lt = lt;
  f.m = f.n = f.k = 8192;
  const char *dname = "float8_e4m3fn", *shape = "8192^3";
  bench_array a, b, bias;
  bench_array_make(&a, e, JITK_FLOAT8_E4M3, 2, f.m, f.k);
  bench_array_make(&b, e, JITK_FLOAT8_E4M3, 2, f.n, f.k); /* B column-major: n rows of k */
  bench_array_make(&bias, e, JITK_BFLOAT16, 1, f.n, 0);
  bench_fill_random(e, k->fill, &a, 501u);
  bench_fill_random(e, k->fill, &b, 502u);
  bench_fill_random(e, k->fill, &bias, 503u);
  f.a = a.data;
  f.b = b.data;
  f.bias = bias.data;
  const float ones[2] = {1.0f, 1.0f};
  CHECK(e, jitk_device_alloc(e, (size_t)(f.m * f.n) * 2, NULL, &f.d));
  CHECK(e, jitk_device_alloc(e, sizeof ones, NULL, &f.scales));
  CHECK(e, jitk_memcpy(e, f.scales, ones, sizeof ones, NULL));

  jitk_matmul_desc desc;
  jitk_matmul_desc_init(&desc);
  desc.m = f.m;
  desc.n = f.n;
  desc.k = f.k;
  desc.a_dtype = desc.b_dtype = JITK_FLOAT8_E4M3;
  desc.d_dtype = JITK_BFLOAT16;
  desc.b_order = JITK_COL_MAJOR;
  desc.epilogue = "acc + bias[col]";
  desc.epilogue_params = "raw bfloat16 bias";
  desc.has_a_scale = desc.has_b_scale = 1;
  CHECK(e, jitk_matmul_create(e, &desc, &f.plan));
  desc.compute = JITK_COMPUTE_FLOAT32_FAST_ACCUM;
  desc.name = "matmul_fast";
  CHECK(e, jitk_matmul_create(e, &desc, &f.plan_fast));
  char described[400];
  CHECK(e, jitk_matmul_describe(f.plan, described, sizeof described));
  printf("jitk-bench matmul: %s %s: %s\n", dname, shape, described);
  CHECK(e, jitk_matmul_describe(f.plan_fast, described, sizeof described));
  printf("jitk-bench matmul: %s %s, fast accumulation: %s\n", dname, shape, described);
  fflush(stdout);
  f.extra[0] = jitk_arg_ptr(f.bias, JITK_BFLOAT16);
  CHECK(e, jitk_matmul_operands_init(&f.ops));
  f.ops.a = f.a;
  f.ops.b = f.b;
  f.ops.d = f.d;
  f.ops.extra = f.extra;
  f.ops.num_extra = 1;
  f.ops.a_scale = f.scales;
  f.ops.b_scale = (const float *)f.scales + 1;

  const size_t na = (size_t)(f.m * f.k), nb = (size_t)(f.n * f.k), nd = (size_t)(f.m * f.n);
  uint8_t *ha = malloc(na), *hb = malloc(nb);
  uint16_t *hbias = malloc((size_t)f.n * 2), *hjitk = malloc(nd * 2);
  if (ha == NULL || hb == NULL || hbias == NULL || hjitk == NULL) {
    fprintf(stderr, "jitk-bench: out of host memory\n");
    exit(1);
  }
  CHECK(e, jitk_memcpy(e, ha, f.a, na, NULL));
  CHECK(e, jitk_memcpy(e, hb, f.b, nb, NULL));
  CHECK(e, jitk_memcpy(e, hbias, f.bias, (size_t)f.n * 2, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));

  bench_array dview = {0};
  dview.data = f.d;
  dview.dtype = JITK_BFLOAT16;
  dview.ndim = 2;
  dview.shape[0] = f.m;
  dview.shape[1] = f.n;
  dview.t.data = f.d;
  dview.t.device.device_type = kDLCUDA;
  dview.t.ndim = 2;
  dview.t.dtype = bias.t.dtype; /* bfloat16, as D */
  dview.t.shape = dview.shape;
  /* [0]: promotion / no FAST_ACCUM; [1]: fast accumulation. */
  double jitk_tf[2], lt_tf[2] = {0, 0};
  size_t jitk_bad[2], lt_bad[2] = {0, 0};
  const lt_fp8_config *lt_used[2] = {NULL, NULL};
  for (int fast = 0; fast < 2; fast++) {
    poison(e, &dview);
    jitk_tf[fast] = tflops(
        f.m, f.n, f.k, bench_time_ms(e, WARMUP, REPS, fast ? run_fp8_jitk_fast : run_fp8_jitk, &f));
    jitk_bad[fast] = fp8_check(&f, ha, hb, hbias, fast, fast ? hjitk : NULL, fast ? NULL : hjitk,
                               fast ? "jitk, fast accumulation" : "jitk");
  }
  /* cuBLASLt's logger, where it has one, records why a configuration is
   * refused. */
  cublasStatus_t (*set_cb)(cublasLtLoggerCallback_t) = NULL;
  cublasStatus_t (*set_level)(int) = NULL;
  if (lt->dl != NULL) {
    *(void **)&set_cb = dlsym(lt->dl, "cublasLtLoggerSetCallback");
    *(void **)&set_level = dlsym(lt->dl, "cublasLtLoggerSetLevel");
  }
  for (int fast = 0; fast < 2 && lt->dl != NULL; fast++) {
    const size_t ncf = sizeof lt_fp8_configs / sizeof lt_fp8_configs[0];
    for (size_t ci = 0; ci < ncf && lt_used[fast] == NULL; ci++) {
      const lt_fp8_config *cf = &lt_fp8_configs[ci];
      lt_log[0] = '\0';
      if (set_cb != NULL && set_level != NULL) {
        set_cb(lt_log_cb);
        set_level(1); /* errors */
      }
      const char *where = "";
      poison(e, &dview);
      cublasStatus_t st = lt_fp8_create(&f, cf, fast, &where);
      if (set_cb != NULL && set_level != NULL) {
        set_level(0);
        set_cb(NULL);
      }
      if (st != CUBLAS_STATUS_SUCCESS) {
        printf(
            "jitk-bench matmul: FP8: cuBLASLt refused configuration %zu (%s; "
            "CUBLAS_COMPUTE_32F, scale CUDA_R_32F, TRANSA T, TRANSB N, A/B CUDA_R_8F_E4M3, "
            "C/D CUDA_R_16BF, FAST_ACCUM %d) at %s: %s%s%s\n",
            ci + 1, cf->what, fast, where, lt->cublasLtGetStatusName(st),
            lt_log[0] ? "; its log: " : "", lt_log);
        continue;
      }
      printf("jitk-bench matmul: FP8: cuBLASLt%s runs configuration %zu: %s\n",
             fast ? " with FAST_ACCUM" : "", ci + 1, cf->what);
      lt_used[fast] = cf;
      poison(e, &dview);
      lt_tf[fast] = tflops(f.m, f.n, f.k, bench_time_ms(e, WARMUP, REPS, run_fp8_lt, &f));
      if (!cf->bias) {
        /* The bias the product left out, added in float32 as the fused
         * epilogues add it, so that the check sees the same D. */
        jitk_elementwise *add = NULL;
        CHECK(e, jitk_elementwise_create(e, "bfloat16 b", "T y", "y = (T)((float)y + (float)b)",
                                         "fp8_bias_add", NULL, &add));
        jitk_arg args[] = {jitk_arg_array(&bias.t), jitk_arg_array(&dview.t)};
        CHECK(e, jitk_elementwise_launch(add, NULL, args, 2, -1, NULL));
        jitk_elementwise_destroy(add);
      }
      lt_bad[fast] = fp8_check(&f, ha, hb, hbias, fast, hjitk, NULL,
                               fast ? "cuBLASLt, FAST_ACCUM" : "cuBLASLt");
      lt_plan_destroy(lt, &f.plan_lt);
    }
  }
  static const char *const jitk_rows[2] = {"jitk bias (bfloat16 D, promotion)",
                                           "jitk bias (bfloat16 D, fast accumulation)"};
  static const char *const lt_rows[2] = {"cuBLASLt (no FAST_ACCUM)", "cuBLASLt (FAST_ACCUM)"};
  for (int fast = 0; fast < 2; fast++) {
    char note[400];
    if (lt->dl == NULL)
      snprintf(note, sizeof note, "%zu wrong; %s", jitk_bad[fast], lt_why);
    else if (lt_tf[fast] > 0)
      snprintf(note, sizeof note, "%.2f of cuBLASLt %s (goal >= 0.95); %zu wrong",
               jitk_tf[fast] / lt_tf[fast], fast ? "with FAST_ACCUM" : "without FAST_ACCUM",
               jitk_bad[fast]);
    else
      snprintf(note, sizeof note, "%zu wrong; cuBLASLt refused every FP8 configuration (above)",
               jitk_bad[fast]);
    add_row(t, dname, shape, jitk_rows[fast], jitk_tf[fast], note);
  }
  for (int fast = 0; fast < 2; fast++)
    if (lt_tf[fast] > 0) {
      char note[400];
      snprintf(note, sizeof note, "%s; %zu wrong", lt_used[fast]->what, lt_bad[fast]);
      add_row(t, dname, shape, lt_rows[fast], lt_tf[fast], note);
    }
  t->wrong += jitk_bad[0] + jitk_bad[1] + lt_bad[0] + lt_bad[1];
  free(ha);
  free(hb);
  free(hbias);
  free(hjitk);
  jitk_matmul_destroy(f.plan);
  jitk_matmul_destroy(f.plan_fast);
  void *bufs[] = {f.a, f.b, f.d, f.bias, f.scales};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    CHECK(e, jitk_device_free(e, bufs[i], NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
}

int bench_matmul(int argc, char **argv) {
  bench_session bs;
  /* Which sections run: all, or the one --only names. */
  const char *only = NULL, *list = NULL;
  bool plain_list = false;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--only") == 0) only = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(argv[i], "--shapes") == 0) list = i + 1 < argc ? argv[i + 1] : "";
    if (strcmp(argv[i], "--float32") == 0) plain_list = true;
  }
  /* The shapes --shapes lists, parsed before any device work so that a
   * bad list costs nothing. */
  enum { MAX_SHAPES = 16 };
  int64_t user[MAX_SHAPES][3];
  char user_name[MAX_SHAPES][64];
  int nuser = 0;
  for (const char *c = list; c != NULL;) {
    long long um, un, uk;
    int used = 0;
    if (nuser == MAX_SHAPES || sscanf(c, "%lldx%lldx%lld%n", &um, &un, &uk, &used) != 3 ||
        um <= 0 || un <= 0 || uk <= 0 || (c[used] != ',' && c[used] != '\0')) {
      fprintf(stderr,
              "jitk-bench matmul: --shapes takes up to %d shapes MxNxK separated by commas, "
              "not '%s'\n",
              MAX_SHAPES, list);
      return 2;
    }
    user[nuser][0] = um;
    user[nuser][1] = un;
    user[nuser][2] = uk;
    snprintf(user_name[nuser], sizeof user_name[nuser], "%lldx%lldx%lld", um, un, uk);
    nuser++;
    c = c[used] == ',' ? c + used + 1 : NULL;
  }
  if (list != NULL) only = "shapes";
  static const char *const sections[] = {"large", "decode",    "plain",
                                         "fp8",   "unaligned", "epilogue"};
  bool known = only == NULL || list != NULL;
  for (size_t i = 0; !known && i < sizeof sections / sizeof sections[0]; i++)
    known = strcmp(only, sections[i]) == 0;
  if (!known) {
    fprintf(stderr,
            "jitk-bench matmul: --only takes large, decode, plain, fp8, unaligned or epilogue, "
            "not '%s'\n",
            only);
    return 2;
  }
#define SECTION(name) (only == NULL || strcmp(only, name) == 0)
  int skipped = bench_open("matmul", argc, argv, &bs);
  if (skipped) return skipped;
  jitk_engine *e = bs.engine;

  mm_kernels k;
  k.fill = bench_fill_create(e);
  /* D is bfloat16 or float16 and the bias float32: the sum is formed in
   * float32, as the fused epilogue forms it, and rounded once into D. */
  CHECK(e, jitk_elementwise_create(e, "float32 b", "T y", "y = (T)fmaxf((float)y + b, 0.0f)",
                                   "bias_relu_inplace", NULL, &k.bias_relu));
  CHECK(e, jitk_elementwise_create(e, "float32 x", "T y", "y = (T)x", "bias_convert", NULL,
                                   &k.convert));

  lt_lib lt;
  char lt_why[300] = "";
  if (lt_load(&lt, lt_why, sizeof lt_why)) {
    CHECK(e, jitk_device_alloc(e, LT_WORKSPACE, NULL, &lt.workspace));
  } else {
    printf("jitk-bench matmul: %s\n", lt_why);
  }

  static mm_table t;
  static const struct {
    int64_t m, n, k;
    const char *name;
  } shapes[] = {{4096, 4096, 4096, "4096^3"},
                {8192, 8192, 8192, "8192^3"},
                {16384, 4096, 1024, "16384x4096x1024"},
                /* Decode shapes: too few 128-row tiles to fill the device. */
                {1, 8192, 8192, "1x8192x8192"},
                {8, 8192, 8192, "8x8192x8192"},
                {16, 8192, 8192, "16x8192x8192"},
                {32, 8192, 8192, "32x8192x8192"},
                {64, 8192, 8192, "64x8192x8192"},
                {128, 8192, 8192, "128x8192x8192"},
                {256, 8192, 8192, "256x8192x8192"},
                {64, 28672, 8192, "64x28672x8192"}};
  static const jitk_dtype dtypes[] = {JITK_BFLOAT16, JITK_FLOAT16};
  static const char *const dnames[] = {"bfloat16", "float16"};
  for (int d = 0; d < 2; d++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      /* The first three are the large shapes, the rest decode shapes. */
      if (SECTION(s < 3 ? "large" : "decode"))
        bench_fused(e, &lt, lt_why, &k, dtypes[d], dnames[d], shapes[s].m, shapes[s].n, shapes[s].k,
                    shapes[s].name, &t);
  if (SECTION("plain")) {
    bench_plain(e, &lt, lt_why, &k, 1, 4096, 4096, 4096, &t);
    /* A decode shape: B read once, swapped, through registers. */
    bench_plain(e, &lt, lt_why, &k, 1, 16, 8192, 8192, &t);
    bench_plain(e, &lt, lt_why, &k, 0, 4096, 4096, 4096, &t);
    /* float32 on fewer blocks: 128 of 128 x 256 at 2048^3, and split-K 3
     * at 1000 x 1030 x 999. */
    bench_plain(e, &lt, lt_why, &k, 0, 2048, 2048, 2048, &t);
    bench_plain(e, &lt, lt_why, &k, 0, 1000, 1030, 999, &t);
  }
  if (SECTION("fp8")) bench_fp8(e, &lt, lt_why, &k, &t);
  for (int s = 0; s < nuser; s++) {
    if (plain_list)
      bench_plain(e, &lt, lt_why, &k, 0, user[s][0], user[s][1], user[s][2], &t);
    else
      bench_fused(e, &lt, lt_why, &k, JITK_BFLOAT16, "bfloat16", user[s][0], user[s][1], user[s][2],
                  user_name[s], &t);
  }
  if (SECTION("epilogue")) bench_epilogue(e, &lt, &k, &t);
  /* N or K off a multiple of 8 (rows off 16 bytes: the plan copies the
   * operand first), each beside the nearest aligned shape in the same run;
   * issue 16's goal is >= 0.85 of its throughput. */
  static const struct {
    int64_t m, n, k, am, an, ak;
    const char *name, *aligned;
  } odd[] = {{4096, 4095, 4096, 4096, 4096, 4096, "4096x4095x4096", "4096^3"},
             {4096, 4096, 4095, 4096, 4096, 4096, "4096x4096x4095", "4096^3"},
             {4095, 4095, 4095, 4096, 4096, 4096, "4095^3", "4096^3"},
             {8192, 50257, 1024, 8192, 50264, 1024, "8192x50257x1024", "8192x50264x1024"},
             {2048, 11008, 4095, 2048, 11008, 4096, "2048x11008x4095", "2048x11008x4096"}};
  double aligned_tf[sizeof odd / sizeof odd[0]];
  for (size_t s = 0; s < sizeof odd / sizeof odd[0] && SECTION("unaligned"); s++) {
    int row = t.n;
    bench_fused(e, &lt, lt_why, &k, JITK_BFLOAT16, "bfloat16", odd[s].am, odd[s].an, odd[s].ak,
                odd[s].aligned, &t);
    aligned_tf[s] = row < t.n ? t.rows[row].value : 0;
    row = t.n;
    bench_fused(e, &lt, lt_why, &k, JITK_BFLOAT16, "bfloat16", odd[s].m, odd[s].n, odd[s].k,
                odd[s].name, &t);
    if (row < t.n && aligned_tf[s] > 0) {
      size_t used = strlen(t.notes[row]);
      snprintf(t.notes[row] + used, sizeof t.notes[row] - used,
               "; %.2f of jitk on %s (goal >= 0.85)", t.rows[row].value / aligned_tf[s],
               odd[s].aligned);
    }
  }

  char title[300];
  snprintf(title, sizeof title, "matmul on %s (%d SMs)", e->info.name, e->info.multiprocessors);
  bench_print(title, t.rows, (size_t)t.n, bs.json);
  if (t.wrong) printf("jitk-bench matmul: %zu WRONG ELEMENTS\n", t.wrong);
  lt_unload(e, &lt);
  jitk_elementwise_destroy(k.fill);
  jitk_elementwise_destroy(k.bias_relu);
  jitk_elementwise_destroy(k.convert);
  bench_close(&bs);
  return t.wrong ? 1 : 0;
#undef SECTION
}
