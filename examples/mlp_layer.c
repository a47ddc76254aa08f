/*
 * mlp_layer: the forward pass of a two-layer MLP in bfloat16 with fused
 * matmul epilogues.
 *
 *   build/examples/mlp_layer
 *
 * X (4096 x 1024) -> H = relu(X W1 + b1) (4096 x 4096)
 *                 -> Y = H W2 + b2 (4096 x 1024)
 * with bfloat16 X, W1, W2, H and Y, float32 accumulation and float32
 * biases. Two ways:
 *  - fused: one jitk_matmul plan per layer, whose epilogue adds the bias
 *    (and applies the ReLU) in registers before the single store of H or Y;
 *  - unfused: a plain plan per layer (no epilogue), then an elementwise
 *    kernel per layer that reads the product back, adds the bias (and
 *    applies the ReLU) and writes it again: four kernels.
 * Both are timed with CUDA events (median of 10 after 3 of warm-up) and
 * their Y compared element by element.
 *
 * Without a GPU it still plans both fused layers for sm_90 (generating and
 * compiling their kernels), prints what each plan chose, and says that
 * running them needs a GPU.
 */
#include <jitk/jitk.h>

#include <dlfcn.h>
#include <math.h>
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

enum { BATCH = 4096, IN = 1024, HIDDEN = 4096, OUT = 1024, WARMUP = 3, REPS = 10 };

/* The layers' plans: bfloat16 operands, float32 sums, row-major. With an
 * epilogue, its bias is a float32 array read at the output's column. */
static jitk_status plan_layer(jitk_engine *e, int64_t m, int64_t n, int64_t k, const char *epilogue,
                              const char *params, const char *name, jitk_matmul **plan) {
  jitk_matmul_desc desc;
  jitk_matmul_desc_init(&desc);
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.a_dtype = desc.b_dtype = desc.d_dtype = JITK_BFLOAT16;
  desc.compute = JITK_COMPUTE_FLOAT32;
  desc.epilogue = epilogue;
  desc.epilogue_params = params;
  desc.name = name;
  return jitk_matmul_create(e, &desc, plan);
}

static jitk_status plan_fused(jitk_engine *e, jitk_matmul **layer1, jitk_matmul **layer2) {
  jitk_status st = plan_layer(e, BATCH, HIDDEN, IN, "max(acc + b1[col], (T)0)", "raw float32 b1",
                              "mlp_layer1", layer1);
  if (st != JITK_OK) return st;
  return plan_layer(e, BATCH, OUT, HIDDEN, "acc + b2[col]", "raw float32 b2", "mlp_layer2", layer2);
}

static void print_plan(jitk_engine *e, const char *what, jitk_matmul *plan) {
  char buf[256];
  CHECK(e, jitk_matmul_describe(plan, buf, sizeof buf));
  printf("mlp_layer: %s: %s\n", what, buf);
}

static int compile_only(void) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  jitk_engine *e = NULL;
  CHECK(NULL, jitk_engine_create(&cfg, &e));
  jitk_matmul *layer1 = NULL, *layer2 = NULL;
  CHECK(e, plan_fused(e, &layer1, &layer2));
  print_plan(e, "layer 1, relu(X W1 + b1)", layer1);
  print_plan(e, "layer 2, H W2 + b2", layer2);
  printf("mlp_layer: planned both fused layers for sm_90; running them needs a GPU\n");
  jitk_matmul_destroy(layer1);
  jitk_matmul_destroy(layer2);
  jitk_engine_destroy(e);
  return 0;
}

/*
 * CUDA events, from the driver. jitk has no timing calls, and this program
 * must start without a driver (the path above), so the driver is loaded at
 * run time as jitk loads it rather than linked. The few types needed are
 * declared here, as cuda.h declares them; cuGetProcAddress gives each
 * entry point as CUDA 12.0 defined it.
 */
typedef struct cu_event_st *cu_event;
typedef int (*cu_get_proc_fn)(const char *symbol, void **fn, int cuda_version,
                              unsigned long long flags, int *status);

typedef struct events {
  int (*create)(cu_event *event, unsigned int flags);
  int (*record)(cu_event event, jitk_stream stream);
  int (*synchronize)(cu_event event);
  int (*elapsed)(float *ms, cu_event start, cu_event end);
  int (*destroy)(cu_event event);
} events;

/* One entry point as CUDA 12.0 defined it; 0 when the driver lacks it. */
static int resolve(cu_get_proc_fn get_proc, const char *name, void **fn) {
  int status = -1;
  return get_proc(name, fn, 12000, 0, &status) == 0 && status == 0 && *fn != NULL;
}

static int events_load(events *ev) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return 0;
  cu_get_proc_fn get_proc;
  *(void **)&get_proc = dlsym(h, "cuGetProcAddress_v2");
  /* The driver stays loaded for the events' lifetime: to the exit. */
  return get_proc != NULL && resolve(get_proc, "cuEventCreate", (void **)&ev->create) &&
         resolve(get_proc, "cuEventRecord", (void **)&ev->record) &&
         resolve(get_proc, "cuEventSynchronize", (void **)&ev->synchronize) &&
         resolve(get_proc, "cuEventElapsedTime", (void **)&ev->elapsed) &&
         resolve(get_proc, "cuEventDestroy", (void **)&ev->destroy);
}

/* The whole forward pass, one way or the other, on the default stream. */
typedef struct mlp {
  jitk_engine *e;
  int fused;
  jitk_matmul *fused1, *fused2, *plain1, *plain2;
  jitk_elementwise *bias_relu, *bias;
  void *x, *w1, *w2, *h, *y, *b1, *b2;
  DLTensor th, ty, tb1, tb2;
} mlp;

static void forward(mlp *p) {
  jitk_engine *e = p->e;
  if (p->fused) {
    jitk_arg a1 = jitk_arg_ptr(p->b1, JITK_FLOAT32), a2 = jitk_arg_ptr(p->b2, JITK_FLOAT32);
    CHECK(e, jitk_matmul_execute(p->fused1, NULL, p->x, p->w1, NULL, p->h, &a1, 1));
    CHECK(e, jitk_matmul_execute(p->fused2, NULL, p->h, p->w2, NULL, p->y, &a2, 1));
    return;
  }
  /* The bias is a vector of the output's columns: it broadcasts along the
   * rows, as b1[col] does in the epilogue. */
  CHECK(e, jitk_matmul_execute(p->plain1, NULL, p->x, p->w1, NULL, p->h, NULL, 0));
  jitk_arg r[] = {jitk_arg_array(&p->tb1), jitk_arg_array(&p->th)};
  CHECK(e, jitk_elementwise_launch(p->bias_relu, NULL, r, 2, -1, NULL));
  CHECK(e, jitk_matmul_execute(p->plain2, NULL, p->h, p->w2, NULL, p->y, NULL, 0));
  jitk_arg b[] = {jitk_arg_array(&p->tb2), jitk_arg_array(&p->ty)};
  CHECK(e, jitk_elementwise_launch(p->bias, NULL, b, 2, -1, NULL));
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Median milliseconds of one forward pass, or -1 when the events fail. */
static float time_forward(mlp *p, const events *ev) {
  cu_event start, end;
  if (ev->create(&start, 0) != 0 || ev->create(&end, 0) != 0) return -1;
  for (int i = 0; i < WARMUP; i++) forward(p);
  float t[REPS];
  for (int i = 0; i < REPS; i++) {
    ev->record(start, NULL);
    forward(p);
    ev->record(end, NULL);
    if (ev->synchronize(end) != 0 || ev->elapsed(&t[i], start, end) != 0) return -1;
  }
  ev->destroy(start);
  ev->destroy(end);
  qsort(t, REPS, sizeof t[0], cmp_float);
  return 0.5f * (t[REPS / 2 - 1] + t[REPS / 2]);
}

/* Uniform in [-scale, scale): weights scaled by 1/sqrt(fan-in) keep H and
 * Y of the order of X, well inside bfloat16's range. */
static void fill_bf16(uint16_t *v, size_t n, float scale) {
  for (size_t i = 0; i < n; i++)
    v[i] = jitk_float_to_bfloat16(scale * (2.0f * (float)rand() / (float)RAND_MAX - 1.0f));
}

static void *upload(jitk_engine *e, const void *host, size_t bytes) {
  void *d = NULL;
  CHECK(e, jitk_device_alloc(e, bytes, NULL, &d));
  CHECK(e, jitk_memcpy(e, d, host, bytes, NULL));
  return d;
}

int main(void) {
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    printf("mlp_layer: no CUDA device: %s\n", jitk_errmsg(NULL));
    return compile_only();
  }
  CHECK(NULL, st);
  events ev;
  if (!events_load(&ev)) {
    fprintf(stderr, "mlp_layer: cannot load CUDA events from libcuda.so.1\n");
    return 1;
  }

  mlp p;
  memset(&p, 0, sizeof p);
  p.e = e;
  CHECK(e, plan_fused(e, &p.fused1, &p.fused2));
  CHECK(e, plan_layer(e, BATCH, HIDDEN, IN, NULL, NULL, "mlp_layer1_plain", &p.plain1));
  CHECK(e, plan_layer(e, BATCH, OUT, HIDDEN, NULL, NULL, "mlp_layer2_plain", &p.plain2));
  print_plan(e, "layer 1, relu(X W1 + b1)", p.fused1);
  print_plan(e, "layer 2, H W2 + b2", p.fused2);
  /* In place over the product, which is bfloat16: the bias is added in
   * float32 and the sum rounded once, as the epilogue does it, though
   * from a product already rounded to bfloat16. */
  CHECK(e, jitk_elementwise_create(e, "float32 b", "T y", "y = (T)fmaxf((float)y + b, 0.0f)",
                                   "mlp_bias_relu", NULL, &p.bias_relu));
  CHECK(e, jitk_elementwise_create(e, "float32 b", "T y", "y = (T)((float)y + b)", "mlp_bias", NULL,
                                   &p.bias));

  size_t nx = (size_t)BATCH * IN, nw1 = (size_t)IN * HIDDEN, nw2 = (size_t)HIDDEN * OUT;
  size_t ny = (size_t)BATCH * OUT;
  uint16_t *hx = malloc(nx * 2), *hw1 = malloc(nw1 * 2), *hw2 = malloc(nw2 * 2);
  uint16_t *y_fused = malloc(ny * 2), *y_unfused = malloc(ny * 2);
  float *hb1 = malloc(HIDDEN * 4), *hb2 = malloc(OUT * 4);
  if (!hx || !hw1 || !hw2 || !y_fused || !y_unfused || !hb1 || !hb2) return 1;
  srand(2026);
  fill_bf16(hx, nx, 1.0f);
  fill_bf16(hw1, nw1, 1.0f / 32.0f); /* 1/sqrt(1024) */
  fill_bf16(hw2, nw2, 1.0f / 64.0f); /* 1/sqrt(4096) */
  for (int i = 0; i < HIDDEN; i++) hb1[i] = 0.1f * (2.0f * (float)rand() / (float)RAND_MAX - 1.0f);
  for (int i = 0; i < OUT; i++) hb2[i] = 0.1f * (2.0f * (float)rand() / (float)RAND_MAX - 1.0f);
  p.x = upload(e, hx, nx * 2);
  p.w1 = upload(e, hw1, nw1 * 2);
  p.w2 = upload(e, hw2, nw2 * 2);
  p.b1 = upload(e, hb1, HIDDEN * 4);
  p.b2 = upload(e, hb2, OUT * 4);
  CHECK(e, jitk_device_alloc(e, (size_t)BATCH * HIDDEN * 2, NULL, &p.h));
  CHECK(e, jitk_device_alloc(e, ny * 2, NULL, &p.y));

  /* DLTensors of H, Y and the biases for the elementwise kernels. */
  const DLDataType bf16 = {kDLBfloat, 16, 1}, f32 = {kDLFloat, 32, 1};
  int64_t sh[2] = {BATCH, HIDDEN}, sy[2] = {BATCH, OUT}, sb1[1] = {HIDDEN}, sb2[1] = {OUT};
  p.th = (DLTensor){p.h, {kDLCUDA, 0}, 2, bf16, sh, NULL, 0};
  p.ty = (DLTensor){p.y, {kDLCUDA, 0}, 2, bf16, sy, NULL, 0};
  p.tb1 = (DLTensor){p.b1, {kDLCUDA, 0}, 1, f32, sb1, NULL, 0};
  p.tb2 = (DLTensor){p.b2, {kDLCUDA, 0}, 1, f32, sb2, NULL, 0};

  /* Each Y is poisoned first (0xFF bytes: a bfloat16 NaN), so that a pass
   * that wrote nothing cannot agree with the other. */
  float ms[2];
  uint16_t *outs[2] = {y_fused, y_unfused};
  for (int way = 0; way < 2; way++) {
    p.fused = way == 0;
    CHECK(e, jitk_memset(e, p.y, 0xFF, ny * 2, NULL));
    ms[way] = time_forward(&p, &ev);
    if (ms[way] < 0) {
      fprintf(stderr, "mlp_layer: timing with CUDA events failed\n");
      return 1;
    }
    CHECK(e, jitk_memcpy(e, outs[way], p.y, ny * 2, NULL));
    CHECK(e, jitk_stream_synchronize(e, NULL));
  }

  /* The two differ by the unfused pass's extra rounding of each product to
   * bfloat16 before its bias: a few bfloat16 steps of the largest values
   * at most, well inside 2e-2 of the largest |Y|. */
  double max_abs = 0;
  for (size_t i = 0; i < ny; i++) {
    double v = fabs(jitk_bfloat16_to_float(y_unfused[i]));
    if (v > max_abs) max_abs = v;
  }
  size_t bad = 0;
  for (size_t i = 0; i < ny; i++) {
    double a = jitk_bfloat16_to_float(y_fused[i]), b = jitk_bfloat16_to_float(y_unfused[i]);
    if (!(fabs(a - b) <= 2e-2 * max_abs)) {
      if (bad++ < 5)
        printf("mlp_layer: Y[%zu][%zu]: %g fused, %g unfused: WRONG\n", i / OUT, i % OUT, a, b);
    }
  }
  if (bad == 0 && max_abs > 0)
    printf(
        "mlp_layer: fused: %.3f ms, unfused: %.3f ms, outputs agree (%zu elements within "
        "2e-2 of max |Y| = %.3f)\n",
        (double)ms[0], (double)ms[1], ny, max_abs);
  else
    printf(
        "mlp_layer: fused: %.3f ms, unfused: %.3f ms, outputs WRONG: %zu of %zu elements "
        "differ (max |Y| = %.3f)\n",
        (double)ms[0], (double)ms[1], bad, ny, max_abs);

  CHECK(e, jitk_device_free(e, p.x, NULL));
  CHECK(e, jitk_device_free(e, p.w1, NULL));
  CHECK(e, jitk_device_free(e, p.w2, NULL));
  CHECK(e, jitk_device_free(e, p.b1, NULL));
  CHECK(e, jitk_device_free(e, p.b2, NULL));
  CHECK(e, jitk_device_free(e, p.h, NULL));
  CHECK(e, jitk_device_free(e, p.y, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  free(hx);
  free(hw1);
  free(hw2);
  free(y_fused);
  free(y_unfused);
  free(hb1);
  free(hb2);
  jitk_elementwise_destroy(p.bias_relu);
  jitk_elementwise_destroy(p.bias);
  jitk_matmul_destroy(p.fused1);
  jitk_matmul_destroy(p.fused2);
  jitk_matmul_destroy(p.plain1);
  jitk_matmul_destroy(p.plain2);
  jitk_engine_destroy(e);
  return bad || max_abs == 0 ? 1 : 0;
}
