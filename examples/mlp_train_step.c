/*
 * mlp_train_step: one layer of an MLP trained in bfloat16, forward and
 * backward, with the work cuBLASLt's GELU_AUX_BIAS and DGELU_BGRAD
 * epilogues do fused into jitk's matmul plans, and cuBLASLt doing the same
 * on the same data.
 *
 *   build/examples/mlp_train_step
 *
 * Forward:  pre = X W1 + b1,  H = gelu(pre)              X: 4096 x 1024, W1: 1024 x 4096
 *           (one plan: D = H, and the output `pre` kept for the backward pass)
 * Backward: dH = dY W2^T,  dPre = dH * gelu'(pre),  db1 = sum of dPre over the rows
 *           dY: 4096 x 1024, W2: 4096 x 1024 (read transposed, column-major)
 *           (one plan: D = dPre, and the reduction `db1`)
 * bfloat16 matrices, float32 accumulation, float32 biases and bias
 * gradient. cuBLASLt (loaded with dlopen when it is there) runs the same
 * two products with CUBLASLT_EPILOGUE_GELU_AUX_BIAS and
 * CUBLASLT_EPILOGUE_DGELU_BGRAD. Each pass is timed with CUDA events
 * (median of 10 after 3 of warm-up), and jitk's H, pre, dPre and db1 are
 * compared with cuBLASLt's and with a float64 reference on sampled rows.
 *
 * Without a GPU it plans both passes for sm_90 (generating and compiling
 * their kernels), prints what each plan chose, and says that running them
 * needs a GPU.
 */
#include <jitk/jitk.h>

#include <cublasLt.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(e, call)                                                                  \
  do {                                                                                  \
    jitk_status st_ = (call);                                                           \
    if (st_ != JITK_OK) {                                                               \
      fprintf(stderr, "%s failed: %s\n%s\n", #call, jitk_errname(st_), jitk_errmsg(e)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

enum { M = 4096, IN = 1024, HID = 4096, OUT = 1024, WARMUP = 3, REPS = 10 };

/* --- the plans --- */

static const jitk_matmul_output keep_pre[] = {{"pre", JITK_BFLOAT16, "acc + b1[col]", 0, 0}};
static const jitk_matmul_reduction bias_grad[] = {
    {"db1", JITK_FLOAT32, "value", JITK_REDUCE_SUM, JITK_REDUCE_ROWS}};

static jitk_status plan_forward(jitk_engine *e, jitk_matmul **p) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = M;
  d.n = HID;
  d.k = IN;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  d.compute = JITK_COMPUTE_FLOAT32;
  d.epilogue = "gelu(acc + b1[col])";
  d.epilogue_params = "raw float32 b1";
  d.outputs = keep_pre;
  d.num_outputs = 1;
  d.name = "mlp_forward";
  return jitk_matmul_create(e, &d, p);
}

/* dH = dY W2^T: W2 (HID x OUT, row-major) read as the OUT x HID B in
 * column-major order; the epilogue multiplies by gelu' of the kept
 * pre-activation, and the bias gradient sums the result over the rows. */
static jitk_status plan_backward(jitk_engine *e, jitk_matmul **p) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = M;
  d.n = HID;
  d.k = OUT;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  d.compute = JITK_COMPUTE_FLOAT32;
  d.b_order = JITK_COL_MAJOR;
  d.epilogue = "acc * dgelu(pre[row * ld + col])";
  d.epilogue_params = "raw bfloat16 pre, int64 ld";
  d.reductions = bias_grad;
  d.num_reductions = 1;
  d.name = "mlp_backward";
  return jitk_matmul_create(e, &d, p);
}

static void print_plan(jitk_engine *e, const char *what, jitk_matmul *plan) {
  char buf[512];
  CHECK(e, jitk_matmul_describe(plan, buf, sizeof buf));
  printf("mlp_train_step: %s: %s\n", what, buf);
}

static int compile_only(void) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  jitk_engine *e = NULL;
  CHECK(NULL, jitk_engine_create(&cfg, &e));
  jitk_matmul *fwd = NULL, *bwd = NULL;
  CHECK(e, plan_forward(e, &fwd));
  CHECK(e, plan_backward(e, &bwd));
  print_plan(e, "forward", fwd);
  print_plan(e, "backward", bwd);
  printf("mlp_train_step: both plans compiled for sm_90; running them needs a GPU\n");
  jitk_matmul_destroy(fwd);
  jitk_matmul_destroy(bwd);
  jitk_engine_destroy(e);
  return 0;
}

/* --- CUDA events and cuBLASLt, both loaded with dlopen --- */

typedef void *cu_event;
typedef int (*cu_get_proc_fn)(const char *, void **, int, unsigned long long, int *);

typedef struct events {
  int (*create)(cu_event *event, unsigned int flags);
  int (*record)(cu_event event, jitk_stream stream);
  int (*synchronize)(cu_event event);
  int (*elapsed)(float *ms, cu_event start, cu_event end);
  int (*destroy)(cu_event event);
} events;

static int resolve(cu_get_proc_fn get_proc, const char *name, void **fn) {
  int status = -1;
  return get_proc(name, fn, 12000, 0, &status) == 0 && status == 0 && *fn != NULL;
}

static int events_load(events *ev) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return 0;
  cu_get_proc_fn get_proc;
  *(void **)&get_proc = dlsym(h, "cuGetProcAddress_v2");
  return get_proc != NULL && resolve(get_proc, "cuEventCreate", (void **)&ev->create) &&
         resolve(get_proc, "cuEventRecord", (void **)&ev->record) &&
         resolve(get_proc, "cuEventSynchronize", (void **)&ev->synchronize) &&
         resolve(get_proc, "cuEventElapsedTime", (void **)&ev->elapsed) &&
         resolve(get_proc, "cuEventDestroy", (void **)&ev->destroy);
}

/* cuBLASLt, loaded with dlopen so that the example runs without it;
 * cublasLt.h gives its types and the functions' signatures. */
#define LT_WORKSPACE ((size_t)32 << 20)

typedef struct lt_lib {
  cublasLtHandle_t handle;
  __typeof__(&cublasLtCreate) create;
  __typeof__(&cublasLtMatmulDescCreate) desc_create;
  __typeof__(&cublasLtMatmulDescSetAttribute) desc_set;
  __typeof__(&cublasLtMatrixLayoutCreate) layout_create;
  __typeof__(&cublasLtMatmulPreferenceCreate) pref_create;
  __typeof__(&cublasLtMatmulPreferenceSetAttribute) pref_set;
  __typeof__(&cublasLtMatmulPreferenceDestroy) pref_destroy;
  __typeof__(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  __typeof__(&cublasLtMatmul) matmul;
} lt_lib;

static int lt_load(lt_lib *lt) {
  static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  void *h = NULL;
  for (int i = 0; i < 3 && h == NULL; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return 0;
  *(void **)&lt->create = dlsym(h, "cublasLtCreate");
  *(void **)&lt->desc_create = dlsym(h, "cublasLtMatmulDescCreate");
  *(void **)&lt->desc_set = dlsym(h, "cublasLtMatmulDescSetAttribute");
  *(void **)&lt->layout_create = dlsym(h, "cublasLtMatrixLayoutCreate");
  *(void **)&lt->pref_create = dlsym(h, "cublasLtMatmulPreferenceCreate");
  *(void **)&lt->pref_set = dlsym(h, "cublasLtMatmulPreferenceSetAttribute");
  *(void **)&lt->pref_destroy = dlsym(h, "cublasLtMatmulPreferenceDestroy");
  *(void **)&lt->heuristic = dlsym(h, "cublasLtMatmulAlgoGetHeuristic");
  *(void **)&lt->matmul = dlsym(h, "cublasLtMatmul");
  return lt->create && lt->desc_create && lt->desc_set && lt->layout_create && lt->pref_create &&
         lt->pref_set && lt->pref_destroy && lt->heuristic && lt->matmul &&
         lt->create(&lt->handle) == CUBLAS_STATUS_SUCCESS;
}

/* One cuBLASLt product in its column-major terms: D (rows x cols, ld
 * rows) = op(A) op(B) with the epilogue, its bias (or bias gradient) and
 * its aux. */
typedef struct lt_plan {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulAlgo_t algo;
} lt_plan;

static int lt_plan_make(lt_lib *lt, lt_plan *p, cublasOperation_t transa, cublasOperation_t transb,
                        uint64_t rows, uint64_t cols, uint64_t k, cublasLtEpilogue_t epilogue,
                        const void *bias, const void *aux, int64_t aux_ld) {
  memset(p, 0, sizeof *p);
  /* The bias and the bias gradient in D's dtype, which cuBLASLt takes
   * for a bfloat16 D (float32 has no algorithm). */
  int32_t bt = CUDA_R_16BF, at = CUDA_R_16BF;
  int ok =
      lt->desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld) == 0 &&
      lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &at, sizeof at) == 0;
  const int ta = transa == CUBLAS_OP_T, tb = transb == CUBLAS_OP_T;
  ok = ok &&
       lt->layout_create(&p->la, CUDA_R_16BF, ta ? k : rows, ta ? rows : k,
                         (int64_t)(ta ? k : rows)) == 0 &&
       lt->layout_create(&p->lb, CUDA_R_16BF, tb ? cols : k, tb ? k : cols,
                         (int64_t)(tb ? cols : k)) == 0 &&
       lt->layout_create(&p->ld, CUDA_R_16BF, rows, cols, (int64_t)rows) == 0;
  cublasLtMatmulPreference_t pref = NULL;
  uint64_t ws = LT_WORKSPACE;
  cublasLtMatmulHeuristicResult_t h;
  memset(&h, 0, sizeof h);
  int found = 0;
  ok = ok && lt->pref_create(&pref) == 0 &&
       lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) == 0 &&
       lt->heuristic(lt->handle, p->desc, p->la, p->lb, p->ld, p->ld, pref, 1, &h, &found) == 0 &&
       found > 0;
  if (pref) lt->pref_destroy(pref);
  if (ok) p->algo = h.algo;
  return ok;
}

/* --- the program --- */

typedef struct step {
  jitk_engine *e;
  jitk_matmul *fwd, *bwd;
  lt_lib *lt;
  lt_plan lfwd, lbwd;
  void *lt_ws;
  /* X, W1, b1, dY, W2; jitk's H, pre, dPre, db1; cuBLASLt's the same. */
  void *x, *w1, *b1, *dy, *w2;
  void *h, *pre, *dpre, *db1;
  void *lh, *lpre, *ldpre, *ldb1;
} step;

static void jitk_forward(step *s) {
  jitk_arg b1 = jitk_arg_ptr(s->b1, JITK_FLOAT32);
  void *outs[1] = {s->pre};
  jitk_matmul_operands o;
  jitk_matmul_operands_init(&o);
  o.a = s->x;
  o.b = s->w1;
  o.d = s->h;
  o.extra = &b1;
  o.num_extra = 1;
  o.outputs = outs;
  CHECK(s->e, jitk_matmul_execute_ex(s->fwd, NULL, &o));
}

static void jitk_backward(step *s) {
  jitk_arg args[2] = {jitk_arg_ptr(s->pre, JITK_BFLOAT16), jitk_arg_i64(HID)};
  void *reds[1] = {s->db1};
  jitk_matmul_operands o;
  jitk_matmul_operands_init(&o);
  o.a = s->dy;
  o.b = s->w2;
  o.d = s->dpre;
  o.extra = args;
  o.num_extra = 2;
  o.reductions = reds;
  CHECK(s->e, jitk_matmul_execute_ex(s->bwd, NULL, &o));
}

/* cuBLASLt computes D^T = B^T A^T in column-major terms: the row-major
 * H (M x HID) is column-major HID x M, the product of W1 (HID x IN,
 * column-major, ld HID) and X (IN x M, ld IN). Backward: dH^T (HID x M) =
 * W2 (row-major HID x OUT: column-major OUT x HID, transposed) times dY^T
 * (OUT x M, ld OUT). */
static void lt_forward(step *s) {
  const float one = 1.f, zero = 0.f;
  s->lt->matmul(s->lt->handle, s->lfwd.desc, &one, s->w1, s->lfwd.la, s->x, s->lfwd.lb, &zero,
                s->lh, s->lfwd.ld, s->lh, s->lfwd.ld, &s->lfwd.algo, s->lt_ws, LT_WORKSPACE, 0);
}

static void lt_backward(step *s) {
  const float one = 1.f, zero = 0.f;
  s->lt->matmul(s->lt->handle, s->lbwd.desc, &one, s->w2, s->lbwd.la, s->dy, s->lbwd.lb, &zero,
                s->ldpre, s->lbwd.ld, s->ldpre, s->lbwd.ld, &s->lbwd.algo, s->lt_ws, LT_WORKSPACE,
                0);
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static float time_ms(step *s, const events *ev, void (*run)(step *)) {
  cu_event start, end;
  if (ev->create(&start, 0) != 0 || ev->create(&end, 0) != 0) return -1;
  for (int i = 0; i < WARMUP; i++) run(s);
  float t[REPS];
  for (int i = 0; i < REPS; i++) {
    ev->record(start, NULL);
    run(s);
    ev->record(end, NULL);
    ev->synchronize(end);
    ev->elapsed(&t[i], start, end);
  }
  ev->destroy(start);
  ev->destroy(end);
  qsort(t, REPS, sizeof t[0], cmp_float);
  return t[REPS / 2];
}

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void *upload_bf16(jitk_engine *e, double *host, size_t n, float scale, uint64_t *seed) {
  uint16_t *v = malloc(n * 2);
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    float f = ((float)(*seed >> 40) / (float)(1 << 24) * 2.f - 1.f) * scale;
    v[i] = to_bf16(f);
    host[i] = from_bf16(v[i]);
  }
  void *d = NULL;
  CHECK(e, jitk_device_alloc(e, n * 2, NULL, &d));
  CHECK(e, jitk_memcpy(e, d, v, n * 2, NULL));
  free(v);
  return d;
}

static void *device_zeros(jitk_engine *e, size_t bytes) {
  void *d = NULL;
  CHECK(e, jitk_device_alloc(e, bytes, NULL, &d));
  CHECK(e, jitk_memset(e, d, 0xFF, bytes, NULL)); /* poisoned: NaN until written */
  return d;
}

static uint16_t *download16(jitk_engine *e, const void *d, size_t n) {
  uint16_t *h = malloc(n * 2);
  CHECK(e, jitk_memcpy(e, h, d, n * 2, NULL));
  return h;
}

static double gelu(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double dgelu(double x) {
  double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 0.134145 * x * x);
}

/* Largest difference relative to the largest magnitude, over n pairs. */
static double rel_diff(const double *a, const double *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
    d = fmax(d, fabs(a[i] - b[i]));
    m = fmax(m, fabs(b[i]));
  }
  return d / (m > 0 ? m : 1);
}

int main(void) {
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) return compile_only();
  CHECK(NULL, st);
  step s;
  memset(&s, 0, sizeof s);
  s.e = e;
  CHECK(e, plan_forward(e, &s.fwd));
  CHECK(e, plan_backward(e, &s.bwd));
  print_plan(e, "forward", s.fwd);
  print_plan(e, "backward", s.bwd);

  uint64_t seed = 0x5EED;
  double *hx = malloc((size_t)M * IN * 8), *hw1 = malloc((size_t)IN * HID * 8),
         *hdy = malloc((size_t)M * OUT * 8), *hw2 = malloc((size_t)HID * OUT * 8);
  s.x = upload_bf16(e, hx, (size_t)M * IN, 1.f, &seed);
  s.w1 = upload_bf16(e, hw1, (size_t)IN * HID, 0.05f, &seed);
  s.dy = upload_bf16(e, hdy, (size_t)M * OUT, 1.f, &seed);
  s.w2 = upload_bf16(e, hw2, (size_t)HID * OUT, 0.05f, &seed);
  float *fb1 = malloc(HID * 4);
  /* Values bfloat16 holds exactly: cuBLASLt takes its bias in D's dtype. */
  uint16_t *b1_16 = malloc(HID * 2);
  for (int j = 0; j < HID; j++) {
    fb1[j] = (float)((j % 17) - 8) * 0.0625f;
    b1_16[j] = to_bf16(fb1[j]);
  }
  CHECK(e, jitk_device_alloc(e, HID * 4, NULL, &s.b1));
  CHECK(e, jitk_memcpy(e, s.b1, fb1, HID * 4, NULL));
  const size_t mh = (size_t)M * HID;
  s.h = device_zeros(e, mh * 2);
  s.pre = device_zeros(e, mh * 2);
  s.dpre = device_zeros(e, mh * 2);
  s.db1 = device_zeros(e, HID * 4);

  events ev;
  int have_events = events_load(&ev);
  jitk_forward(&s);
  jitk_backward(&s);
  CHECK(e, jitk_stream_synchronize(e, NULL));
  float t_fwd = have_events ? time_ms(&s, &ev, jitk_forward) : -1;
  float t_bwd = have_events ? time_ms(&s, &ev, jitk_backward) : -1;

  /* A float64 reference on sampled rows: every column of 64 rows. */
  uint16_t *gh = download16(e, s.h, mh), *gpre = download16(e, s.pre, mh),
           *gdpre = download16(e, s.dpre, mh);
  float *gdb1 = malloc(HID * 4);
  CHECK(e, jitk_memcpy(e, gdb1, s.db1, HID * 4, NULL));
  enum { SAMPLE = 64 };
  const size_t ns = (size_t)SAMPLE * HID;
  double *want = malloc(3 * ns * 8), *got = malloc(3 * ns * 8);
  for (int r = 0; r < SAMPLE; r++) {
    int i = r * (M / SAMPLE) + r % 7;
    for (int j = 0; j < HID; j++) {
      double pre = fb1[j], dh = 0;
      for (int q = 0; q < IN; q++) pre += hx[(size_t)i * IN + q] * hw1[(size_t)q * HID + j];
      for (int q = 0; q < OUT; q++) dh += hdy[(size_t)i * OUT + q] * hw2[(size_t)j * OUT + q];
      size_t at = (size_t)i * HID + j, k = (size_t)r * HID + j;
      /* The backward pass uses the pre-activation as stored (bfloat16). */
      want[k] = pre;
      want[ns + k] = gelu(pre);
      want[2 * ns + k] = dh * dgelu(from_bf16(gpre[at]));
      got[k] = from_bf16(gpre[at]);
      got[ns + k] = from_bf16(gh[at]);
      got[2 * ns + k] = from_bf16(gdpre[at]);
    }
  }
  double worst[3];
  for (int part = 0; part < 3; part++)
    worst[part] = rel_diff(got + part * ns, want + part * ns, ns);
  /* db1 against the sums of jitk's own dPre in float64: the reduction
   * itself, apart from the rounding of dPre to bfloat16. */
  double *colsum = calloc(HID, 8), *gsum = malloc(HID * 8);
  for (size_t i = 0; i < (size_t)M; i++)
    for (int j = 0; j < HID; j++) colsum[j] += from_bf16(gdpre[i * HID + j]);
  for (int j = 0; j < HID; j++) gsum[j] = gdb1[j];
  double worst_db1 = rel_diff(gsum, colsum, HID);
  int bad = !(worst[0] < 1e-2 && worst[1] < 1e-2 && worst[2] < 2e-2 && worst_db1 < 2e-2);
  printf(
      "mlp_train_step: jitk against float64 on %d rows: pre %.2e, H %.2e, dPre %.2e; db1 "
      "against float64 sums of dPre %.2e%s\n",
      SAMPLE, worst[0], worst[1], worst[2], worst_db1, bad ? " WRONG" : "");
  if (t_fwd > 0)
    printf("mlp_train_step: jitk forward %.3f ms (%.0f TFLOP/s), backward %.3f ms (%.0f TFLOP/s)\n",
           t_fwd, 2.0 * M * HID * IN / (t_fwd * 1e9), t_bwd, 2.0 * M * HID * OUT / (t_bwd * 1e9));

  /* cuBLASLt, on the same data. */
  lt_lib lt;
  memset(&lt, 0, sizeof lt);
  if (!lt_load(&lt)) {
    printf("mlp_train_step: cuBLASLt not found; jitk's results stand alone\n");
  } else {
    s.lt = &lt;
    CHECK(e, jitk_device_alloc(e, LT_WORKSPACE, NULL, &s.lt_ws));
    s.lh = device_zeros(e, mh * 2);
    s.lpre = device_zeros(e, mh * 2);
    s.ldpre = device_zeros(e, mh * 2);
    s.ldb1 = device_zeros(e, HID * 2);
    void *lb1 = NULL;
    CHECK(e, jitk_device_alloc(e, HID * 2, NULL, &lb1));
    CHECK(e, jitk_memcpy(e, lb1, b1_16, HID * 2, NULL));
    int ok = lt_plan_make(&lt, &s.lfwd, CUBLAS_OP_N, CUBLAS_OP_N, HID, M, IN,
                          CUBLASLT_EPILOGUE_GELU_AUX_BIAS, lb1, s.lpre, HID) &&
             lt_plan_make(&lt, &s.lbwd, CUBLAS_OP_T, CUBLAS_OP_N, HID, M, OUT,
                          CUBLASLT_EPILOGUE_DGELU_BGRAD, s.ldb1, s.lpre, HID);
    if (!ok) {
      printf("mlp_train_step: cuBLASLt has no algorithm for GELU_AUX_BIAS or DGELU_BGRAD here\n");
    } else {
      lt_forward(&s);
      lt_backward(&s);
      CHECK(e, jitk_stream_synchronize(e, NULL));
      float l_fwd = have_events ? time_ms(&s, &ev, lt_forward) : -1;
      float l_bwd = have_events ? time_ms(&s, &ev, lt_backward) : -1;
      uint16_t *lh = download16(e, s.lh, mh), *lpre = download16(e, s.lpre, mh),
               *ldpre = download16(e, s.ldpre, mh);
      uint16_t *ldb1 = download16(e, s.ldb1, HID);
      double *a = malloc(mh * 8), *b = malloc(mh * 8), d[4];
      uint16_t *pairs[3][2] = {{gpre, lpre}, {gh, lh}, {gdpre, ldpre}};
      for (int part = 0; part < 3; part++) {
        for (size_t i = 0; i < mh; i++) {
          a[i] = from_bf16(pairs[part][0][i]);
          b[i] = from_bf16(pairs[part][1][i]);
        }
        d[part] = rel_diff(a, b, mh);
      }
      for (int j = 0; j < HID; j++) {
        a[j] = gdb1[j];
        b[j] = from_bf16(ldb1[j]);
      }
      d[3] = rel_diff(a, b, HID);
      int differ = !(d[0] < 2e-2 && d[1] < 2e-2 && d[2] < 5e-2 && d[3] < 5e-2);
      printf(
          "mlp_train_step: jitk against cuBLASLt on every element: pre %.2e, H %.2e, dPre "
          "%.2e, db1 %.2e%s\n",
          d[0], d[1], d[2], d[3], differ ? " WRONG" : "");
      bad |= differ;
      if (l_fwd > 0)
        printf(
            "mlp_train_step: cuBLASLt GELU_AUX_BIAS %.3f ms, DGELU_BGRAD %.3f ms; jitk is "
            "%.2fx and %.2fx cuBLASLt's speed\n",
            l_fwd, l_bwd, l_fwd / t_fwd, l_bwd / t_bwd);
      free(lh);
      free(lpre);
      free(ldpre);
      free(ldb1);
      free(a);
      free(b);
    }
  }
  if (!bad) printf("mlp_train_step: forward and backward agree\n");
  free(hx);
  free(hw1);
  free(hdy);
  free(hw2);
  free(fb1);
  free(b1_16);
  free(gh);
  free(gpre);
  free(gdpre);
  free(gdb1);
  free(want);
  free(got);
  free(colsum);
  free(gsum);
  jitk_matmul_destroy(s.fwd);
  jitk_matmul_destroy(s.bwd);
  jitk_engine_destroy(e);
  return bad;
}
