/*
 * Several GPUs in one process (issue 17): an engine per device, sharing
 * images, so that each kernel is compiled once per architecture; threads
 * that drive their own devices at once on their own streams; arrays on
 * another device refused until peer access is enabled, then read through
 * it. Every result is checked against a double-precision reference on
 * the host. Needs two devices; skipped with fewer.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "engine.h"

enum { MOST = 16 };

/* An engine on every device, each sharing images with the first and none
 * with a disk cache, so that every image either is compiled or comes from
 * another engine. Skips the test below two devices. */
static int open_all(jitk_engine **e) {
  int version = 0, count = 0;
  jitk_status st = jitk_driver_query(NULL, &version, &count);
  if (st == JITK_ERR_NO_DRIVER || (st == JITK_OK && count == 0))
    cr_skip_test("no CUDA device (%s)", jitk_errmsg(NULL));
  cr_assert_eq(st, JITK_OK, "%s", jitk_errmsg(NULL));
  if (count < 2) cr_skip_test("needs two CUDA devices; this machine has %d", count);
  if (count > MOST) count = MOST;
  for (int d = 0; d < count; d++) {
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = d;
    cfg.cache_mode = JITK_CACHE_OFF;
    cfg.share_images_with = d ? e[0] : NULL;
    JT_OK(NULL, jitk_engine_create(&cfg, &e[d]));
  }
  return count;
}

static const char *arch_of(jitk_engine *e) {
  const char *a = NULL;
  JT_OK(e, jitk_engine_arch(e, &a));
  return a;
}

static DLTensor on_device(void *p, jitk_dtype t, int ndim, int64_t *shape, int device) {
  DLTensor x = jt_tensor(p, t, ndim, shape, NULL);
  x.device.device_id = device;
  return x;
}

/* The work one device does on its slice: z = a x + y over N elements,
 * the sum of squares of x, and D = relu(A B + bias[col]) in bfloat16 on
 * its M rows of A. */
enum { N = 1 << 18, M = 256, COLS = 192, K = 128 };

typedef struct slice {
  jitk_engine *e;
  int device;
  jitk_elementwise *axpy;
  jitk_reduction *ssq;
  jitk_matmul *mm;
  jitk_stream stream;
  int rounds;
  pthread_barrier_t *go;
  /* Host data and results. */
  float x[N], y[N], z[N], ssq_out;
  uint16_t a[M * K], b[K * COLS], d[M * COLS];
  float bias[COLS];
  char err[1024];
} slice;

static void fill(slice *s, uint64_t seed) {
  for (int i = 0; i < N; i++) {
    s->x[i] = (float)jt_uniform(&seed);
    s->y[i] = (float)jt_uniform(&seed);
  }
  for (int i = 0; i < M * K; i++) s->a[i] = jitk_float_to_bfloat16((float)jt_uniform(&seed));
  for (int i = 0; i < K * COLS; i++) s->b[i] = jitk_float_to_bfloat16((float)jt_uniform(&seed));
  for (int i = 0; i < COLS; i++) s->bias[i] = (float)jt_uniform(&seed);
}

static jitk_status make_kernels(slice *s) {
  jitk_engine *e = s->e;
  jitk_status st = jitk_elementwise_create(e, "float32 a, T x, T y", "T z", "z = a * x + y",
                                           "multi_axpy", NULL, &s->axpy);
  if (st == JITK_OK)
    st = jitk_reduction_create(e, "T x", "T y", "x * x", "a + b", "y = a", "0", NULL, "multi_ssq",
                               NULL, &s->ssq);
  if (st == JITK_OK) {
    jitk_matmul_desc d;
    jitk_matmul_desc_init(&d);
    d.m = M;
    d.n = COLS;
    d.k = K;
    d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
    d.compute = JITK_COMPUTE_FLOAT32;
    d.epilogue = "max(acc + bias[col], (T)0)";
    d.epilogue_params = "raw float32 bias";
    d.name = "multi_mm";
    st = jitk_matmul_create(e, &d, &s->mm);
  }
  return st;
}

static void free_kernels(slice *s) {
  jitk_elementwise_destroy(s->axpy);
  jitk_reduction_destroy(s->ssq);
  jitk_matmul_destroy(s->mm);
}

#define TRY(call)                                                                                \
  do {                                                                                           \
    jitk_status st_ = (call);                                                                    \
    if (st_ != JITK_OK) {                                                                        \
      snprintf(s->err, sizeof s->err, "device %d: %s: %s", s->device, #call, jitk_errmsg(s->e)); \
      return st_;                                                                                \
    }                                                                                            \
  } while (0)

/* Runs the slice's work `rounds` times on its stream and copies the
 * results back. */
static jitk_status run_slice(slice *s) {
  jitk_engine *e = s->e;
  jitk_stream st = s->stream;
  void *dx = NULL, *dy = NULL, *dz = NULL, *dsum = NULL, *da = NULL, *db = NULL, *dd = NULL,
       *dbias = NULL;
  TRY(jitk_device_alloc(e, sizeof s->x, st, &dx));
  TRY(jitk_device_alloc(e, sizeof s->y, st, &dy));
  TRY(jitk_device_alloc(e, sizeof s->z, st, &dz));
  TRY(jitk_device_alloc(e, sizeof(float), st, &dsum));
  TRY(jitk_device_alloc(e, sizeof s->a, st, &da));
  TRY(jitk_device_alloc(e, sizeof s->b, st, &db));
  TRY(jitk_device_alloc(e, sizeof s->d, st, &dd));
  TRY(jitk_device_alloc(e, sizeof s->bias, st, &dbias));
  TRY(jitk_memcpy(e, dx, s->x, sizeof s->x, st));
  TRY(jitk_memcpy(e, dy, s->y, sizeof s->y, st));
  TRY(jitk_memcpy(e, da, s->a, sizeof s->a, st));
  TRY(jitk_memcpy(e, db, s->b, sizeof s->b, st));
  TRY(jitk_memcpy(e, dbias, s->bias, sizeof s->bias, st));
  TRY(jitk_memset(e, dz, 0xFF, sizeof s->z, st));
  TRY(jitk_memset(e, dsum, 0xFF, sizeof(float), st));
  TRY(jitk_memset(e, dd, 0xFF, sizeof s->d, st));
  int64_t n = N;
  DLTensor tx = on_device(dx, JITK_FLOAT32, 1, &n, s->device);
  DLTensor ty = on_device(dy, JITK_FLOAT32, 1, &n, s->device);
  DLTensor tz = on_device(dz, JITK_FLOAT32, 1, &n, s->device);
  DLTensor tsum = on_device(dsum, JITK_FLOAT32, 0, NULL, s->device);
  float a = 0.5f + (float)s->device;
  jitk_arg ew[] = {jitk_arg_f32(a), jitk_arg_array(&tx), jitk_arg_array(&ty), jitk_arg_array(&tz)};
  jitk_arg red[] = {jitk_arg_array(&tx), jitk_arg_array(&tsum)};
  jitk_arg extra = jitk_arg_ptr(dbias, JITK_FLOAT32);
  for (int r = 0; r < s->rounds; r++) {
    TRY(jitk_elementwise_launch(s->axpy, st, ew, 4, -1, NULL));
    TRY(jitk_reduction_launch(s->ssq, st, red, 2, NULL, -1, 0, NULL));
    TRY(jitk_matmul_execute(s->mm, st, da, db, NULL, dd, &extra, 1));
  }
  TRY(jitk_memcpy(e, s->z, dz, sizeof s->z, st));
  TRY(jitk_memcpy(e, &s->ssq_out, dsum, sizeof(float), st));
  TRY(jitk_memcpy(e, s->d, dd, sizeof s->d, st));
  TRY(jitk_stream_synchronize(e, st));
  void *all[] = {dx, dy, dz, dsum, da, db, dd, dbias};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) TRY(jitk_device_free(e, all[i], st));
  TRY(jitk_stream_synchronize(e, st));
  return JITK_OK;
}

/* Every element against the double reference. */
static void check_slice(const slice *s) {
  double a = 0.5 + s->device, ssq = 0;
  for (int i = 0; i < N; i++) {
    double ref = a * s->x[i] + s->y[i];
    cr_assert(fabs(s->z[i] - ref) <= 1e-6 * (fabs(ref) + 1), "device %d: z[%d] = %g, not %g",
              s->device, i, (double)s->z[i], ref);
    ssq += (double)s->x[i] * s->x[i];
  }
  cr_assert(fabs(s->ssq_out - ssq) <= 1e-4 * ssq, "device %d: sum of squares %g, not %g", s->device,
            (double)s->ssq_out, ssq);
  for (int r = 0; r < M; r++)
    for (int c = 0; c < COLS; c++) {
      double acc = 0;
      for (int k = 0; k < K; k++)
        acc += (double)jitk_bfloat16_to_float(s->a[r * K + k]) *
               jitk_bfloat16_to_float(s->b[k * COLS + c]);
      double ref = acc + s->bias[c];
      if (ref < 0) ref = 0;
      double got = jitk_bfloat16_to_float(s->d[r * COLS + c]);
      cr_assert(fabs(got - ref) <= 1e-2 * fabs(ref) + 2e-2, "device %d: D[%d][%d] = %g, not %g",
                s->device, r, c, got, ref);
    }
}

static uint64_t compiles(jitk_engine *e) {
  jitk_cache_stats mine;
  JT_OK(e, jitk_cache_get_stats(e, &mine, NULL));
  return mine.compiles;
}

/* Whether an engine before `d` has the same target: its images serve d. */
static bool arch_seen(jitk_engine **e, int d) {
  for (int i = 0; i < d; i++)
    if (strcmp(arch_of(e[i]), arch_of(e[d])) == 0) return true;
  return false;
}

Test(multi, every_architecture_compiles_once) {
  jitk_engine *e[MOST];
  int count = open_all(e);
  slice *s = calloc((size_t)count, sizeof *s);
  for (int d = 0; d < count; d++) {
    s[d].e = e[d];
    s[d].device = d;
    s[d].rounds = 2;
    fill(&s[d], 0x5EED + (uint64_t)d);
    JT_OK(e[d], make_kernels(&s[d]));
    cr_assert_eq(run_slice(&s[d]), JITK_OK, "%s", s[d].err);
    check_slice(&s[d]);
    if (d == 0) cr_assert_gt(compiles(e[0]), 0);
    if (arch_seen(e, d))
      cr_assert_eq(compiles(e[d]), 0, "device %d (%s) compiled %llu kernels another device had", d,
                   arch_of(e[d]), (unsigned long long)compiles(e[d]));
  }
  for (int d = 0; d < count; d++) free_kernels(&s[d]);
  for (int d = count - 1; d >= 0; d--) jitk_engine_destroy(e[d]);
  free(s);
}

static void *drive(void *p) {
  slice *s = p;
  CUcontext saved;
  CUstream cs = NULL;
  if (jk_ctx_enter(s->e, &saved) != JITK_OK ||
      s->e->drv.cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    snprintf(s->err, sizeof s->err, "device %d: no stream", s->device);
    pthread_barrier_wait(s->go);
    return NULL;
  }
  s->stream = (jitk_stream)cs;
  if (make_kernels(s) != JITK_OK)
    snprintf(s->err, sizeof s->err, "device %d: %s", s->device, jitk_errmsg(s->e));
  /* Every thread launches from here at once; the first launches compile
   * the elementwise and reduction kernels, at the same time on every
   * device. */
  pthread_barrier_wait(s->go);
  if (s->err[0] == '\0') run_slice(s);
  s->e->drv.cuStreamDestroy(cs);
  return NULL;
}

Test(multi, a_thread_per_device) {
  jitk_engine *e[MOST];
  int count = open_all(e);
  slice *s = calloc((size_t)count, sizeof *s);
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)count);
  pthread_t t[MOST];
  for (int d = 0; d < count; d++) {
    s[d].e = e[d];
    s[d].device = d;
    s[d].rounds = 50;
    s[d].go = &go;
    fill(&s[d], 0xD21E + (uint64_t)d);
    cr_assert_eq(pthread_create(&t[d], NULL, drive, &s[d]), 0);
  }
  for (int d = 0; d < count; d++) pthread_join(t[d], NULL);
  /* The kernels were asked for at once: one compile of each per
   * architecture, whichever engine made it. */
  uint64_t total = 0, first = 0;
  int archs = 0;
  for (int d = 0; d < count; d++) {
    cr_assert_eq(s[d].err[0], '\0', "%s", s[d].err);
    check_slice(&s[d]);
    total += compiles(e[d]);
    if (!arch_seen(e, d)) archs++;
  }
  /* Make them once more on a fresh engine alone, to count one device's. */
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = 0;
  cfg.cache_mode = JITK_CACHE_OFF;
  jitk_engine *alone = NULL;
  JT_OK(NULL, jitk_engine_create(&cfg, &alone));
  slice *one = calloc(1, sizeof *one);
  one->e = alone;
  one->rounds = 1;
  fill(one, 0xA10E);
  JT_OK(alone, make_kernels(one));
  cr_assert_eq(run_slice(one), JITK_OK, "%s", one->err);
  first = compiles(alone);
  free_kernels(one);
  free(one);
  jitk_engine_destroy(alone);
  if (archs == 1)
    cr_assert_eq(total, first, "%llu compiles on %d devices of one architecture, %llu on one",
                 (unsigned long long)total, count, (unsigned long long)first);
  for (int d = 0; d < count; d++) free_kernels(&s[d]);
  pthread_barrier_destroy(&go);
  for (int d = 0; d < count; d++) jitk_engine_destroy(e[d]);
  free(s);
}

Test(multi, arrays_of_another_device) {
  jitk_engine *e[MOST];
  int count = open_all(e);
  const int64_t n = 100000;
  float *hx = malloc(n * 4), *hz = malloc(n * 4);
  uint64_t seed = 0x9EE4;
  for (int64_t i = 0; i < n; i++) hx[i] = (float)jt_uniform(&seed);
  /* x lives on device 1, z on device 0. */
  void *x1 = jt_dev_alloc(e[1], n * 4), *z0 = jt_dev_alloc(e[0], n * 4);
  jt_to_dev(e[1], x1, hx, n * 4);
  jt_poison(e[0], z0, n * 4);
  int64_t shape[1] = {n};
  DLTensor tx = on_device(x1, JITK_FLOAT32, 1, shape, 1);
  DLTensor tz = on_device(z0, JITK_FLOAT32, 1, shape, 0);
  jitk_elementwise *k = NULL;
  JT_OK(e[0], jitk_elementwise_create(e[0], "T x", "T z", "z = 3 * x", "triple", NULL, &k));
  jitk_arg args[] = {jitk_arg_array(&tx), jitk_arg_array(&tz)};
  JT_FAILS(e[0], JITK_ERR_INVALID_ARRAY, "on device 1 but the engine uses device 0",
           jitk_elementwise_launch(k, NULL, args, 2, -1, NULL));
  jitk_module *m = NULL;
  JT_OK(e[0],
        jitk_module_create(e[0],
                           "extern \"C\" __global__ void add1(const float *x, float *z, "
                           "long long n) {\n"
                           "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                           "  if (i < n) z[i] += x[i];\n}\n",
                           NULL, &m));
  jitk_kernel *add1 = NULL;
  JT_OK(e[0], jitk_module_get_kernel(m, "add1", &add1));
  jitk_arg raw[] = {jitk_arg_tensor_ptr(&tx), jitk_arg_tensor_ptr(&tz), jitk_arg_i64(n)};
  jitk_dim3 grid = {(unsigned)((n + 255) / 256), 1, 1}, block = {256, 1, 1};
  JT_FAILS(e[0], JITK_ERR_INVALID_ARRAY, "jitk_engine_enable_peer_access",
           jitk_kernel_launch(add1, grid, block, 0, NULL, raw, 3));

  jitk_status st = jitk_engine_enable_peer_access(e[0], 1);
  if (st == JITK_ERR_UNSUPPORTED) {
    cr_log_warn("devices 0 and 1 cannot reach each other: %s", jitk_errmsg(e[0]));
  } else {
    JT_OK(e[0], st);
    JT_OK(e[0], jitk_engine_enable_peer_access(e[0], 1)); /* again: no error */
    JT_OK(e[0], jitk_elementwise_launch(k, NULL, args, 2, -1, NULL));
    JT_OK(e[0], jitk_kernel_launch(add1, grid, block, 0, NULL, raw, 3));
    jt_to_host(e[0], hz, z0, n * 4);
    for (int64_t i = 0; i < n; i++) {
      double ref = 4.0 * hx[i];
      cr_assert(fabs(hz[i] - ref) <= 1e-6 * fabs(ref), "z[%lld] = %g, not %g", (long long)i,
                (double)hz[i], ref);
    }
    /* Peer access goes one way: device 1's engine still refuses device 0's
     * arrays. */
    DLTensor tz1 = on_device(z0, JITK_FLOAT32, 1, shape, 0);
    jitk_elementwise *k1 = NULL;
    JT_OK(e[1], jitk_elementwise_create(e[1], "T x", "T z", "z = 3 * x", "triple", NULL, &k1));
    jitk_arg back[] = {jitk_arg_array(&tz1), jitk_arg_array(&tx)};
    JT_FAILS(e[1], JITK_ERR_INVALID_ARRAY, "on device 0 but the engine uses device 1",
             jitk_elementwise_launch(k1, NULL, back, 2, -1, NULL));
    jitk_elementwise_destroy(k1);
  }
  jitk_module_destroy(m);
  jitk_elementwise_destroy(k);
  JT_OK(e[1], jitk_device_free(e[1], x1, NULL));
  JT_OK(e[0], jitk_device_free(e[0], z0, NULL));
  for (int d = 0; d < count; d++) jitk_engine_destroy(e[d]);
  free(hx);
  free(hz);
}
