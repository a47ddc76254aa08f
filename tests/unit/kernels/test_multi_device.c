/*
 * Several devices in one process, on the stand-in driver with two fake
 * devices (FAKECUDA_DEVICES=2): engines that share images compile each
 * kernel once for both; arrays of the other device are refused until peer
 * access is enabled; threads driving their own devices at once all
 * launch, each in its own device's context (issue 17). The stand-in runs
 * no kernel: results are checked on real GPUs (tests/gpu/test_multi.c);
 * here, what jitk compiles, refuses and hands the driver.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "engine.h"
#include "fakecuda/fixture.h"

/* An engine on fake device `d`, without a disk cache, sharing images with
 * `peer` (NULL: none). */
static jitk_engine *fake_device(int d, jitk_engine *peer) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.driver_library = JT_FAKE_PATH;
  cfg.device = d;
  cfg.cache_mode = JITK_CACHE_OFF;
  cfg.share_images_with = peer;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  cr_assert_eq(st, JITK_OK, "engine on fake device %d: %s", d, jitk_errmsg(NULL));
  return e;
}

static void two_devices(void) { cr_assert_eq(setenv("FAKECUDA_DEVICES", "2", 1), 0); }

static uint64_t compiles(jitk_engine *e) {
  jitk_cache_stats mine;
  JT_OK(e, jitk_cache_get_stats(e, &mine, NULL));
  return mine.compiles;
}

enum { N = 4096, MM = 256 };

/* One device's kernels and buffers. */
typedef struct work {
  jitk_engine *e;
  int device;
  jitk_elementwise *add;
  jitk_reduction *sum;
  jitk_matmul *mm;
  void *x, *y, *z, *s, *a, *b, *d, *bias;
  int64_t n;
  DLTensor tx, ty, tz, ts;
  jitk_stream stream;
  int rounds;
  pthread_barrier_t *go;
  jitk_status st;
  char err[512];
  unsigned long long launched;
} work;

static DLTensor tensor(void *p, int ndim, int64_t *shape, int device) {
  DLTensor t = jt_tensor(p, JITK_FLOAT32, ndim, shape, NULL);
  t.device.device_id = device;
  return t;
}

static jitk_status prepare(work *w) {
  jitk_engine *e = w->e;
  jitk_status st =
      jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "md_add", NULL, &w->add);
  if (st == JITK_OK)
    st = jitk_reduction_create(e, "T x", "T s", "x", "a + b", "s = a", "0", NULL, "md_sum", NULL,
                               &w->sum);
  if (st == JITK_OK) {
    jitk_matmul_desc d;
    jitk_matmul_desc_init(&d);
    d.m = d.n = d.k = MM;
    d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
    d.compute = JITK_COMPUTE_FLOAT32;
    d.epilogue = "max(acc + bias[col], (T)0)";
    d.epilogue_params = "raw float32 bias";
    st = jitk_matmul_create(e, &d, &w->mm);
  }
  void **bufs[] = {&w->x, &w->y, &w->z, &w->s, &w->a, &w->b, &w->d, &w->bias};
  size_t sizes[] = {N * 4, N * 4, N * 4, 4, MM * MM * 2, MM * MM * 2, MM * MM * 2, MM * 4};
  for (int i = 0; i < 8 && st == JITK_OK; i++) st = jitk_device_alloc(e, sizes[i], NULL, bufs[i]);
  w->n = N;
  w->tx = tensor(w->x, 1, &w->n, w->device);
  w->ty = tensor(w->y, 1, &w->n, w->device);
  w->tz = tensor(w->z, 1, &w->n, w->device);
  w->ts = tensor(w->s, 0, NULL, w->device);
  if (st != JITK_OK) snprintf(w->err, sizeof w->err, "%s", jitk_errmsg(e));
  return st;
}

/* Elementwise, reduction and matmul launches, `rounds` times. */
static jitk_status launch_all(work *w) {
  jitk_engine *e = w->e;
  jitk_arg ew[] = {jitk_arg_array(&w->tx), jitk_arg_array(&w->ty), jitk_arg_array(&w->tz)};
  jitk_arg red[] = {jitk_arg_array(&w->tx), jitk_arg_array(&w->ts)};
  jitk_arg bias = jitk_arg_ptr(w->bias, JITK_FLOAT32);
  jitk_status st = JITK_OK;
  for (int r = 0; r < w->rounds && st == JITK_OK; r++) {
    st = jitk_elementwise_launch(w->add, w->stream, ew, 3, -1, NULL);
    if (st == JITK_OK) st = jitk_reduction_launch(w->sum, w->stream, red, 2, NULL, -1, 0, NULL);
    if (st == JITK_OK) st = jitk_matmul_execute(w->mm, w->stream, w->a, w->b, NULL, w->d, &bias, 1);
  }
  if (st != JITK_OK) snprintf(w->err, sizeof w->err, "%s", jitk_errmsg(e));
  return st;
}

static void finish(work *w) {
  void *bufs[] = {w->x, w->y, w->z, w->s, w->a, w->b, w->d, w->bias};
  for (int i = 0; i < 8; i++) JT_OK(w->e, jitk_device_free(w->e, bufs[i], NULL));
  jitk_elementwise_destroy(w->add);
  jitk_reduction_destroy(w->sum);
  jitk_matmul_destroy(w->mm);
}

Test(multi_device, the_second_device_compiles_nothing) {
  two_devices();
  jitk_engine *e0 = fake_device(0, NULL), *e1 = fake_device(1, e0);
  jitk_device_info info;
  JT_OK(e1, jitk_engine_device_info(e1, &info));
  cr_assert_eq(info.ordinal, 1);
  fakecuda_api f;
  cr_assert(fakecuda_api_open(JT_FAKE_PATH, &f));
  work w[2] = {{.e = e0, .device = 0, .rounds = 3}, {.e = e1, .device = 1, .rounds = 3}};
  for (int d = 0; d < 2; d++) {
    cr_assert_eq(prepare(&w[d]), JITK_OK, "device %d: %s", d, w[d].err);
    unsigned long long before = f.count();
    cr_assert_eq(launch_all(&w[d]), JITK_OK, "device %d: %s", d, w[d].err);
    cr_assert_geq(f.count() - before, 9, "device %d launched %llu kernels", d, f.count() - before);
    cr_assert_eq(f.last()->device, d, "the last launch ran in device %d's context",
                 f.last()->device);
  }
  cr_assert_gt(compiles(e0), 0);
  cr_assert_eq(compiles(e1), 0, "device 1 compiled %llu kernels device 0 had",
               (unsigned long long)compiles(e1));
  jitk_cache_stats s1;
  JT_OK(e1, jitk_cache_get_stats(e1, &s1, NULL));
  cr_assert_eq(s1.memory_hits, compiles(e0), "%llu images taken, %llu compiled",
               (unsigned long long)s1.memory_hits, (unsigned long long)compiles(e0));
  size_t engines = 0, images = 0;
  jk_share_counts(e0, &engines, &images, NULL);
  cr_assert_eq(engines, 2);
  cr_assert_eq(images, compiles(e0));
  for (int d = 0; d < 2; d++) finish(&w[d]);
  /* Either engine may go first. */
  jitk_engine_destroy(e0);
  jitk_engine_destroy(e1);
}

Test(multi_device, arrays_of_the_other_device) {
  two_devices();
  jitk_engine *e0 = fake_device(0, NULL), *e1 = fake_device(1, e0);
  work w = {.e = e0, .device = 0, .rounds = 1};
  cr_assert_eq(prepare(&w), JITK_OK, "%s", w.err);
  void *x1 = NULL;
  JT_OK(e1, jitk_device_alloc(e1, N * 4, NULL, &x1));
  int64_t n = N;
  DLTensor t1 = tensor(x1, 1, &n, 1);
  jitk_arg ew[] = {jitk_arg_array(&t1), jitk_arg_array(&w.ty), jitk_arg_array(&w.tz)};
  JT_FAILS(e0, JITK_ERR_INVALID_ARRAY, "on device 1 but the engine uses device 0",
           jitk_elementwise_launch(w.add, NULL, ew, 3, -1, NULL));
  cr_assert(strstr(jitk_errmsg(e0), "jitk_engine_enable_peer_access") != NULL);
  jitk_arg red[] = {jitk_arg_array(&t1), jitk_arg_array(&w.ts)};
  JT_FAILS(e0, JITK_ERR_INVALID_ARRAY, "on device 1",
           jitk_reduction_launch(w.sum, NULL, red, 2, NULL, -1, 0, NULL));
  /* A raw kernel's plain pointer argument from a DLTensor too. */
  jitk_module *m = NULL;
  JT_OK(e0,
        jitk_module_create(e0, "extern \"C\" __global__ void k(float *p) { p[0] = 1; }", NULL, &m));
  jitk_kernel *k = NULL;
  JT_OK(e0, jitk_module_get_kernel(m, "k", &k));
  jitk_arg raw[] = {jitk_arg_tensor_ptr(&t1)};
  jitk_dim3 one = {1, 1, 1};
  JT_FAILS(e0, JITK_ERR_INVALID_ARRAY, "on device 1",
           jitk_kernel_launch(k, one, one, 0, NULL, raw, 1));

  JT_FAILS(e0, JITK_ERR_NO_DEVICE, "no CUDA device 2", jitk_engine_enable_peer_access(e0, 2));
  JT_OK(e0, jitk_engine_enable_peer_access(e0, 1));
  JT_OK(e0, jitk_engine_enable_peer_access(e0, 1));
  JT_OK(e0, jitk_elementwise_launch(w.add, NULL, ew, 3, -1, NULL));
  JT_OK(e0, jitk_reduction_launch(w.sum, NULL, red, 2, NULL, -1, 0, NULL));
  JT_OK(e0, jitk_kernel_launch(k, one, one, 0, NULL, raw, 1));
  /* One way only: device 1's engine still refuses device 0's arrays. */
  jitk_elementwise *add1 = NULL;
  JT_OK(e1, jitk_elementwise_create(e1, "T x", "T z", "z = x", "copy1", NULL, &add1));
  jitk_arg back[] = {jitk_arg_array(&w.tx), jitk_arg_array(&t1)};
  JT_FAILS(e1, JITK_ERR_INVALID_ARRAY, "on device 0 but the engine uses device 1",
           jitk_elementwise_launch(add1, NULL, back, 2, -1, NULL));
  /* Devices that cannot reach each other. */
  cr_assert_eq(setenv("FAKECUDA_NO_PEER", "1", 1), 0);
  JT_FAILS(e1, JITK_ERR_UNSUPPORTED, "cannot reach", jitk_engine_enable_peer_access(e1, 0));
  JT_FAILS(e1, JITK_ERR_INVALID_ARRAY, "on device 0",
           jitk_elementwise_launch(add1, NULL, back, 2, -1, NULL));
  unsetenv("FAKECUDA_NO_PEER");
  jitk_elementwise_destroy(add1);
  jitk_module_destroy(m);
  JT_OK(e1, jitk_device_free(e1, x1, NULL));
  finish(&w);
  jitk_engine_destroy(e1);
  jitk_engine_destroy(e0);
}

static void *drive(void *p) {
  work *w = p;
  CUcontext saved;
  CUstream s = NULL;
  w->st = jk_ctx_enter(w->e, &saved);
  if (w->st == JITK_OK && w->e->drv.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
    w->st = JITK_ERR_CUDA;
  w->stream = (jitk_stream)s;
  if (w->st == JITK_OK) w->st = prepare(w);
  pthread_barrier_wait(w->go);
  if (w->st == JITK_OK) w->st = launch_all(w);
  if (s != NULL) w->e->drv.cuStreamDestroy(s);
  return NULL;
}

Test(multi_device, a_thread_per_device_at_once) {
  two_devices();
  jitk_engine *e[2];
  e[0] = fake_device(0, NULL);
  e[1] = fake_device(1, e[0]);
  fakecuda_api f;
  cr_assert(fakecuda_api_open(JT_FAKE_PATH, &f));
  unsigned long long before = f.count();
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, 2);
  work w[2];
  pthread_t t[2];
  for (int d = 0; d < 2; d++) {
    w[d] = (work){.e = e[d], .device = d, .rounds = 500, .go = &go};
    cr_assert_eq(pthread_create(&t[d], NULL, drive, &w[d]), 0);
  }
  for (int d = 0; d < 2; d++) pthread_join(t[d], NULL);
  for (int d = 0; d < 2; d++)
    cr_assert_eq(w[d].st, JITK_OK, "device %d: %s: %s", d, jitk_errname(w[d].st), w[d].err);
  unsigned long long launched = f.count() - before;
  cr_assert_geq(launched, 2 * 500 * 3, "%llu launches", launched);

  /* The same kernels on one engine alone: as many compiles as both
   * engines made together. */
  jitk_engine *alone = fake_device(0, NULL);
  work a = {.e = alone, .device = 0, .rounds = 1};
  cr_assert_eq(prepare(&a), JITK_OK, "%s", a.err);
  cr_assert_eq(launch_all(&a), JITK_OK, "%s", a.err);
  uint64_t together = compiles(e[0]) + compiles(e[1]);
  cr_assert_eq(together, compiles(alone), "%llu compiles for two devices, %llu for one",
               (unsigned long long)together, (unsigned long long)compiles(alone));
  finish(&a);
  jitk_engine_destroy(alone);
  for (int d = 0; d < 2; d++) finish(&w[d]);
  pthread_barrier_destroy(&go);
  jitk_engine_destroy(e[1]);
  jitk_engine_destroy(e[0]);
}
