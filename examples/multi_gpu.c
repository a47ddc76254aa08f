/*
 * multi_gpu: one problem split over every GPU of the machine, an engine
 * and a host thread per device.
 *
 *   build/examples/multi_gpu
 *
 * The problem: z = a x + y over 2^24 float32 elements, and
 * D = relu(X W + bias) with X (8192 x 1024), W (1024 x 1024) and D in
 * bfloat16, float32 sums and a float32 bias. Each device takes a slice of
 * z and a block of X's rows (W and the bias go to every device), runs the
 * same elementwise kernel and a fused matmul plan for its rows on its own
 * thread, and copies its part of the results back. The host then checks
 * every element of z and sampled rows of D against double-precision
 * references.
 *
 * The engines are made sharing images (jitk_engine_config.
 * share_images_with): the first device to need a kernel compiles it, and
 * every other device of the same architecture loads that image, or waits
 * for it when it is still being compiled. The program prints each
 * engine's compiles: with devices of one architecture, only one engine
 * compiles each kernel (none at all on a warm disk cache).
 *
 * Without a GPU it makes two compile-only engines for sm_90 sharing images,
 * plans the matmul on both, and shows that the second compiled nothing.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <pthread.h>
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

enum { N = 1 << 24, ROWS = 8192, K = 1024, COLS = 1024, MOST = 64, SAMPLES = 32 };

static const float A = 1.75f;

/* The fused plan for `rows` rows of X. */
static jitk_status plan(jitk_engine *e, int64_t rows, jitk_matmul **p) {
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = rows;
  d.n = COLS;
  d.k = K;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  d.compute = JITK_COMPUTE_FLOAT32;
  d.epilogue = "max(acc + bias[col], (T)0)";
  d.epilogue_params = "raw float32 bias";
  d.name = "multi_gpu_layer";
  return jitk_matmul_create(e, &d, p);
}

static uint64_t compiles(jitk_engine *e) {
  jitk_cache_stats mine;
  CHECK(e, jitk_cache_get_stats(e, &mine, NULL));
  return mine.compiles;
}

static int compile_only(void) {
  jitk_engine *e[2] = {NULL, NULL};
  for (int i = 0; i < 2; i++) {
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = "sm_90";
    cfg.share_images_with = e[0];
    CHECK(NULL, jitk_engine_create(&cfg, &e[i]));
  }
  jitk_matmul *p[2];
  for (int i = 0; i < 2; i++) CHECK(e[i], plan(e[i], ROWS / 2, &p[i]));
  printf("multi_gpu: two sm_90 engines sharing images planned the layer: %llu and %llu compiles\n",
         (unsigned long long)compiles(e[0]), (unsigned long long)compiles(e[1]));
  printf("multi_gpu: running it needs a GPU\n");
  for (int i = 0; i < 2; i++) {
    jitk_matmul_destroy(p[i]);
    jitk_engine_destroy(e[i]);
  }
  return 0;
}

/* The whole problem on the host. */
typedef struct problem {
  float *x, *y, *z, *bias;
  uint16_t *xm, *w, *d;
} problem;

/* One device's part: elements [lo, hi) of the vectors, rows [r0, r1) of
 * X and D. */
typedef struct part {
  jitk_engine *e;
  int device;
  const problem *p;
  int64_t lo, hi, r0, r1;
  uint64_t compiles;
} part;

static void *upload(jitk_engine *e, const void *host, size_t bytes) {
  void *d = NULL;
  CHECK(e, jitk_device_alloc(e, bytes, NULL, &d));
  CHECK(e, jitk_memcpy(e, d, host, bytes, NULL));
  return d;
}

static void *run_part(void *arg) {
  part *t = arg;
  jitk_engine *e = t->e;
  const problem *p = t->p;
  int64_t n = t->hi - t->lo, rows = t->r1 - t->r0;

  /* z = a x + y on this slice, through DLPack arrays on this device. */
  jitk_elementwise *axpy = NULL;
  CHECK(e, jitk_elementwise_create(e, "float32 a, T x, T y", "T z", "z = a * x + y", "axpy", NULL,
                                   &axpy));
  void *dx = upload(e, p->x + t->lo, (size_t)n * 4), *dy = upload(e, p->y + t->lo, (size_t)n * 4);
  void *dz = NULL;
  CHECK(e, jitk_device_alloc(e, (size_t)n * 4, NULL, &dz));
  DLTensor v[3];
  void *ptrs[3] = {dx, dy, dz};
  for (int i = 0; i < 3; i++) {
    memset(&v[i], 0, sizeof v[i]);
    v[i].data = ptrs[i];
    v[i].device.device_type = kDLCUDA;
    v[i].device.device_id = t->device;
    v[i].ndim = 1;
    v[i].dtype.code = kDLFloat;
    v[i].dtype.bits = 32;
    v[i].dtype.lanes = 1;
    v[i].shape = &n;
  }
  jitk_arg args[] = {jitk_arg_f32(A), jitk_arg_array(&v[0]), jitk_arg_array(&v[1]),
                     jitk_arg_array(&v[2])};
  CHECK(e, jitk_elementwise_launch(axpy, NULL, args, 4, -1, NULL));

  /* relu(X W + bias) on this block of rows. */
  jitk_matmul *mm = NULL;
  CHECK(e, plan(e, rows, &mm));
  void *dxm = upload(e, p->xm + t->r0 * K, (size_t)(rows * K) * 2);
  void *dw = upload(e, p->w, (size_t)K * COLS * 2);
  void *db = upload(e, p->bias, COLS * 4);
  void *dd = NULL;
  CHECK(e, jitk_device_alloc(e, (size_t)(rows * COLS) * 2, NULL, &dd));
  jitk_arg bias = jitk_arg_ptr(db, JITK_FLOAT32);
  CHECK(e, jitk_matmul_execute(mm, NULL, dxm, dw, NULL, dd, &bias, 1));

  CHECK(e, jitk_memcpy(e, p->z + t->lo, dz, (size_t)n * 4, NULL));
  CHECK(e, jitk_memcpy(e, p->d + t->r0 * COLS, dd, (size_t)(rows * COLS) * 2, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  void *all[] = {dx, dy, dz, dxm, dw, db, dd};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    CHECK(e, jitk_device_free(e, all[i], NULL));
  jitk_elementwise_destroy(axpy);
  jitk_matmul_destroy(mm);
  t->compiles = compiles(e);
  return NULL;
}

static float uniform(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) * (2.0 / 16777216.0) - 1.0);
}

int main(void) {
  int version = 0, count = 0;
  jitk_status st = jitk_driver_query(NULL, &version, &count);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE || (st == JITK_OK && count == 0)) {
    printf("multi_gpu: no CUDA device: %s\n",
           st == JITK_OK ? "the driver sees none" : jitk_errmsg(NULL));
    return compile_only();
  }
  CHECK(NULL, st);
  if (count > MOST) count = MOST;

  /* An engine per device, each sharing images with the first. */
  jitk_engine *e[MOST];
  for (int d = 0; d < count; d++) {
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = d;
    cfg.share_images_with = d ? e[0] : NULL;
    CHECK(NULL, jitk_engine_create(&cfg, &e[d]));
  }

  problem p;
  p.x = malloc((size_t)N * 4);
  p.y = malloc((size_t)N * 4);
  p.z = malloc((size_t)N * 4);
  p.bias = malloc(COLS * 4);
  p.xm = malloc((size_t)ROWS * K * 2);
  p.w = malloc((size_t)K * COLS * 2);
  p.d = malloc((size_t)ROWS * COLS * 2);
  if (!p.x || !p.y || !p.z || !p.bias || !p.xm || !p.w || !p.d) {
    fprintf(stderr, "multi_gpu: out of host memory\n");
    return 1;
  }
  uint64_t seed = 0x6D756C7469ull;
  for (size_t i = 0; i < N; i++) {
    p.x[i] = uniform(&seed);
    p.y[i] = uniform(&seed);
  }
  /* W scaled by 1/sqrt(K) keeps D of the order of X. */
  for (size_t i = 0; i < (size_t)ROWS * K; i++) p.xm[i] = jitk_float_to_bfloat16(uniform(&seed));
  for (size_t i = 0; i < (size_t)K * COLS; i++)
    p.w[i] = jitk_float_to_bfloat16(uniform(&seed) / 32.0f);
  for (int i = 0; i < COLS; i++) p.bias[i] = uniform(&seed) / 4.0f;
  /* NaN everywhere a device fails to write. */
  memset(p.z, 0xFF, (size_t)N * 4);
  memset(p.d, 0xFF, (size_t)ROWS * COLS * 2);

  part parts[MOST];
  pthread_t threads[MOST];
  for (int d = 0; d < count; d++) {
    parts[d] = (part){.e = e[d],
                      .device = d,
                      .p = &p,
                      .lo = (int64_t)N * d / count,
                      .hi = (int64_t)N * (d + 1) / count,
                      .r0 = (int64_t)ROWS * d / count,
                      .r1 = (int64_t)ROWS * (d + 1) / count};
    if (pthread_create(&threads[d], NULL, run_part, &parts[d]) != 0) {
      fprintf(stderr, "multi_gpu: cannot start a thread\n");
      return 1;
    }
  }
  for (int d = 0; d < count; d++) pthread_join(threads[d], NULL);

  for (int d = 0; d < count; d++) {
    const char *arch = NULL;
    CHECK(e[d], jitk_engine_arch(e[d], &arch));
    printf("multi_gpu: device %d (%s): elements %lld-%lld, rows %lld-%lld, %llu compiles\n", d,
           arch, (long long)parts[d].lo, (long long)parts[d].hi - 1, (long long)parts[d].r0,
           (long long)parts[d].r1 - 1, (unsigned long long)parts[d].compiles);
  }

  long wrong = 0;
  for (size_t i = 0; i < N; i++) {
    double ref = (double)A * p.x[i] + p.y[i];
    if (!(fabs(p.z[i] - ref) <= 1e-6 * (fabs(ref) + 1))) wrong++;
  }
  double worst = 0;
  for (int s = 0; s < SAMPLES; s++) {
    int64_t r = (int64_t)((uint64_t)s * 2654435761u % ROWS);
    for (int c = 0; c < COLS; c++) {
      double acc = 0;
      for (int k = 0; k < K; k++)
        acc += (double)jitk_bfloat16_to_float(p.xm[r * K + k]) *
               jitk_bfloat16_to_float(p.w[(size_t)k * COLS + c]);
      double ref = acc + p.bias[c] > 0 ? acc + p.bias[c] : 0;
      double got = jitk_bfloat16_to_float(p.d[r * COLS + c]);
      double err = fabs(got - ref) / (fabs(ref) + 0.05);
      if (!(err <= 1.6e-2)) wrong++;
      if (err > worst || err != err) worst = err;
    }
  }
  printf("multi_gpu: z checked everywhere, D on %d sampled rows (worst relative error %.2g): %s\n",
         SAMPLES, worst, wrong ? "WRONG" : "correct");
  for (int d = count - 1; d >= 0; d--) jitk_engine_destroy(e[d]);
  free(p.x);
  free(p.y);
  free(p.z);
  free(p.bias);
  free(p.xm);
  free(p.w);
  free(p.d);
  return wrong ? 1 : 0;
}
