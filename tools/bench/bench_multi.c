/*
 * jitk-bench multi: what a launch costs the host when several threads
 * drive several devices at once, an engine per device (the engines
 * sharing images), against one thread on one device.
 *
 * Each thread launches on its own stream of its own device: z = x + y and
 * sum(x) on 2^16 float32 elements, and a 256 x 256 x 256 bfloat16 matmul
 * with a bias and ReLU, all small enough that the launch, not the GPU,
 * sets the pace. Host microseconds per launch: rounds of 100 launches
 * timed on the host, the stream drained between rounds (untimed), the
 * median of 300 rounds, every thread measuring at the same time. One
 * thread and all threads take turns, five times each, and each figure is
 * the median of its five, so that a machine's drift lands on both. A lock
 * shared by the engines on the launch path would show as the slowest
 * thread's time growing with the threads; the figure to watch is its
 * ratio to one thread's.
 *
 * Before timing, each thread's outputs are poisoned, computed once and
 * checked against double-precision references (every element of z, the
 * sum, sampled rows of the matmul).
 *
 *   jitk-bench multi [--json FILE] [--devices N]
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine.h"

#define CHECK(e, call) BENCH_CHECK(e, call)

enum { MOST = 16, ROUNDS = 300, BATCH = 100, REPEATS = 5, ELEMS = 1 << 16, MM = 256, OPS = 3 };

typedef struct driver {
  jitk_engine *e;
  int device;
  CUstream stream;
  jitk_elementwise *add, *fill;
  jitk_reduction *sum;
  jitk_matmul *mm;
  bench_array x, y, z, s;
  void *a, *b, *d, *bias;
  jitk_arg add_args[3], sum_args[2], bias_arg;
  pthread_barrier_t *go;
  double us[OPS];
  size_t wrong;
} driver;

static const char *op_names[OPS] = {"z = x + y, 2^16 float32", "sum(x), 2^16 float32",
                                    "matmul 256^3 bf16 + bias + ReLU"};

static void launch(driver *t, int op) {
  jitk_stream st = (jitk_stream)t->stream;
  if (op == 0) CHECK(t->e, jitk_elementwise_launch(t->add, st, t->add_args, 3, -1, NULL));
  if (op == 1) CHECK(t->e, jitk_reduction_launch(t->sum, st, t->sum_args, 2, NULL, -1, 0, NULL));
  if (op == 2) CHECK(t->e, jitk_matmul_execute(t->mm, st, t->a, t->b, NULL, t->d, &t->bias_arg, 1));
}

static void setup(driver *t) {
  jitk_engine *e = t->e;
  CUcontext saved;
  CHECK(e, jk_ctx_enter(e, &saved));
  if (e->drv.cuStreamCreate(&t->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    fprintf(stderr, "jitk-bench multi: cuStreamCreate failed on device %d\n", t->device);
    exit(1);
  }
  t->fill = bench_fill_create(e);
  CHECK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "add", NULL, &t->add));
  CHECK(e, jitk_reduction_create(e, "T x", "T s", "x", "a + b", "s = a", "0", NULL, "sum", NULL,
                                 &t->sum));
  jitk_matmul_desc d;
  jitk_matmul_desc_init(&d);
  d.m = d.n = d.k = MM;
  d.a_dtype = d.b_dtype = d.d_dtype = JITK_BFLOAT16;
  d.compute = JITK_COMPUTE_FLOAT32;
  d.epilogue = "max(acc + bias[col], (T)0)";
  d.epilogue_params = "raw float32 bias";
  CHECK(e, jitk_matmul_create(e, &d, &t->mm));
  bench_array_make(&t->x, e, JITK_FLOAT32, 1, ELEMS, 0);
  bench_array_make(&t->y, e, JITK_FLOAT32, 1, ELEMS, 0);
  bench_array_make(&t->z, e, JITK_FLOAT32, 1, ELEMS, 0);
  bench_array_make(&t->s, e, JITK_FLOAT32, 0, 0, 0);
  bench_array *arrays[] = {&t->x, &t->y, &t->z, &t->s};
  for (int i = 0; i < 4; i++) arrays[i]->t.device.device_id = t->device;
  bench_fill_random(e, t->fill, &t->x, 11u + (uint32_t)t->device);
  bench_fill_random(e, t->fill, &t->y, 23u + (uint32_t)t->device);
  t->add_args[0] = jitk_arg_array(&t->x.t);
  t->add_args[1] = jitk_arg_array(&t->y.t);
  t->add_args[2] = jitk_arg_array(&t->z.t);
  t->sum_args[0] = jitk_arg_array(&t->x.t);
  t->sum_args[1] = jitk_arg_array(&t->s.t);

  uint16_t *ha = malloc(MM * MM * 2), *hb = malloc(MM * MM * 2), *hd = malloc(MM * MM * 2);
  float hbias[MM];
  uint64_t seed = 0xB0B + (uint64_t)t->device;
  for (int i = 0; i < MM * MM; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    ha[i] = jitk_float_to_bfloat16((float)((seed >> 40) * (2.0 / 16777216.0) - 1.0));
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    hb[i] = jitk_float_to_bfloat16((float)((seed >> 40) * (2.0 / 16777216.0) - 1.0) / 16.0f);
  }
  for (int i = 0; i < MM; i++) hbias[i] = (float)(i % 7) / 8.0f - 0.4f;
  CHECK(e, jitk_device_alloc(e, MM * MM * 2, NULL, &t->a));
  CHECK(e, jitk_device_alloc(e, MM * MM * 2, NULL, &t->b));
  CHECK(e, jitk_device_alloc(e, MM * MM * 2, NULL, &t->d));
  CHECK(e, jitk_device_alloc(e, sizeof hbias, NULL, &t->bias));
  CHECK(e, jitk_memcpy(e, t->a, ha, MM * MM * 2, NULL));
  CHECK(e, jitk_memcpy(e, t->b, hb, MM * MM * 2, NULL));
  CHECK(e, jitk_memcpy(e, t->bias, hbias, sizeof hbias, NULL));
  t->bias_arg = jitk_arg_ptr(t->bias, JITK_FLOAT32);

  /* Each output poisoned, computed once, checked; on the stand-in driver
   * (tests/fakecuda), which runs no kernel, launched only: there the
   * figures are jitk's own host time, the driver's left out. */
  bool fake = strstr(e->info.name, "fake") != NULL;
  CHECK(e, jitk_memset(e, t->z.data, 0xFF, bench_array_bytes(&t->z), NULL));
  CHECK(e, jitk_memset(e, t->s.data, 0xFF, bench_array_bytes(&t->s), NULL));
  CHECK(e, jitk_memset(e, t->d, 0xFF, MM * MM * 2, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  for (int op = 0; op < OPS; op++) launch(t, op);
  CHECK(e, jitk_stream_synchronize(e, (jitk_stream)t->stream));
  if (fake) {
    free(ha);
    free(hb);
    free(hd);
    jk_ctx_leave(e, saved);
    return;
  }
  double *hx = bench_array_to_host(e, &t->x), *hy = bench_array_to_host(e, &t->y);
  double *hz = bench_array_to_host(e, &t->z), *hs = bench_array_to_host(e, &t->s);
  double want = 0, mag = 0;
  for (int i = 0; i < ELEMS; i++) {
    if (!(fabs(hz[i] - (hx[i] + hy[i])) <= 2.4e-7 * fabs(hx[i] + hy[i]) + 1e-30)) t->wrong++;
    want += hx[i];
    mag += fabs(hx[i]);
  }
  if (!(fabs(hs[0] - want) <= 1.2e-7 * 16 * mag + 1e-30)) t->wrong++;
  CHECK(e, jitk_memcpy(e, hd, t->d, MM * MM * 2, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  for (int r = 0; r < MM; r += 17)
    for (int c = 0; c < MM; c++) {
      double acc = hbias[c];
      for (int k = 0; k < MM; k++)
        acc +=
            (double)jitk_bfloat16_to_float(ha[r * MM + k]) * jitk_bfloat16_to_float(hb[k * MM + c]);
      double ref = acc > 0 ? acc : 0, got = jitk_bfloat16_to_float(hd[r * MM + c]);
      if (!(fabs(got - ref) <= 1e-2 * fabs(ref) + 1e-2)) t->wrong++;
    }
  free(hx);
  free(hy);
  free(hz);
  free(hs);
  free(ha);
  free(hb);
  free(hd);
  jk_ctx_leave(e, saved);
}

/* Host microseconds per launch of `op`, measured while every other thread
 * measures the same op. */
static double host_us(driver *t, int op) {
  double v[ROUNDS];
  jitk_stream st = (jitk_stream)t->stream;
  for (int i = 0; i < 20; i++) launch(t, op);
  CHECK(t->e, jitk_stream_synchronize(t->e, st));
  pthread_barrier_wait(t->go);
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    for (int i = 0; i < BATCH; i++) launch(t, op);
    v[r] = (bench_now_us() - t0) / BATCH;
    CHECK(t->e, jitk_stream_synchronize(t->e, st));
  }
  return bench_median(v, ROUNDS);
}

static void *measure(void *p) {
  driver *t = p;
  for (int op = 0; op < OPS; op++) t->us[op] = host_us(t, op);
  return NULL;
}

/* Times every op on the first `n` drivers at once; *slowest gets the
 * slowest thread's figure per op. */
static void run_threads(driver *t, int n, double *slowest) {
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, (unsigned)n);
  pthread_t th[MOST];
  for (int i = 0; i < n; i++) {
    t[i].go = &go;
    if (pthread_create(&th[i], NULL, measure, &t[i]) != 0) {
      fprintf(stderr, "jitk-bench multi: cannot start a thread\n");
      exit(1);
    }
  }
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
  for (int op = 0; op < OPS; op++) {
    slowest[op] = 0;
    for (int i = 0; i < n; i++)
      if (t[i].us[op] > slowest[op]) slowest[op] = t[i].us[op];
  }
}

int bench_multi(int argc, char **argv) {
  const char *json = NULL;
  int want = 0;
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
      json = argv[++i];
    else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc)
      want = atoi(argv[++i]);
    else {
      fprintf(stderr, "jitk-bench multi: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  int version = 0, count = 0;
  jitk_status st = jitk_driver_query(NULL, &version, &count);
  if (st != JITK_OK || count == 0) {
    printf("jitk-bench multi: skipped: no CUDA device (%s)\n",
           st == JITK_OK ? "the driver sees none" : jitk_errmsg(NULL));
    return 77;
  }
  if (want > 0 && want < count) count = want;
  if (count > MOST) count = MOST;
  driver *t = calloc((size_t)count, sizeof *t);
  for (int d = 0; d < count; d++) {
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = d;
    cfg.share_images_with = d ? t[0].e : NULL;
    CHECK(NULL, jitk_engine_create(&cfg, &t[d].e));
    t[d].device = d;
    setup(&t[d]);
  }
  size_t wrong = 0;
  uint64_t compiles = 0;
  for (int d = 0; d < count; d++) {
    jitk_cache_stats mine;
    CHECK(t[d].e, jitk_cache_get_stats(t[d].e, &mine, NULL));
    compiles += mine.compiles;
    wrong += t[d].wrong;
  }

  double one[OPS], all[OPS], one_r[OPS][REPEATS], all_r[OPS][REPEATS];
  for (int r = 0; r < REPEATS; r++) {
    double v[OPS];
    run_threads(t, 1, v);
    for (int op = 0; op < OPS; op++) one_r[op][r] = v[op];
    if (count > 1) run_threads(t, count, v);
    for (int op = 0; op < OPS; op++) all_r[op][r] = v[op];
  }
  for (int op = 0; op < OPS; op++) {
    one[op] = bench_median(one_r[op], REPEATS);
    all[op] = bench_median(all_r[op], REPEATS);
  }

  bench_row rows[3 * OPS];
  char names[3 * OPS][120], notes[OPS][64];
  int nr = 0;
  for (int op = 0; op < OPS; op++) {
    snprintf(names[nr], sizeof names[nr], "%s: 1 thread, device 0", op_names[op]);
    rows[nr] = (bench_row){names[nr], one[op], "us/launch", ""};
    nr++;
    if (count > 1) {
      snprintf(names[nr], sizeof names[nr], "%s: %d threads on %d devices, slowest", op_names[op],
               count, count);
      snprintf(notes[op], sizeof notes[op], "%.3fx one thread", all[op] / one[op]);
      rows[nr] = (bench_row){names[nr], all[op], "us/launch", notes[op]};
      nr++;
    }
  }
  char title[400];
  snprintf(title, sizeof title,
           "host time per launch, an engine and a thread per device, %d x %s (%llu compiles in "
           "all engines)",
           count, t[0].e->info.name, (unsigned long long)compiles);
  bench_print(title, rows, (size_t)nr, json);
  if (count == 1) printf("jitk-bench multi: one device: the scaling rows need two or more\n");
  if (strstr(t[0].e->info.name, "fake") != NULL)
    printf("jitk-bench multi: the stand-in driver runs no kernel: results not checked\n");
  if (wrong) printf("jitk-bench multi: %zu WRONG RESULTS\n", wrong);
  for (int d = count - 1; d >= 0; d--) {
    driver *x = &t[d];
    jitk_engine *e = x->e;
    CHECK(e, jitk_stream_synchronize(e, (jitk_stream)x->stream));
    void *mem[] = {x->x.data, x->y.data, x->z.data, x->s.data, x->a, x->b, x->d, x->bias};
    for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
      CHECK(e, jitk_device_free(e, mem[i], NULL));
    CHECK(e, jitk_stream_synchronize(e, NULL));
    CUcontext saved;
    CHECK(e, jk_ctx_enter(e, &saved));
    e->drv.cuStreamDestroy(x->stream);
    jk_ctx_leave(e, saved);
    jitk_elementwise_destroy(x->add);
    jitk_elementwise_destroy(x->fill);
    jitk_reduction_destroy(x->sum);
    jitk_matmul_destroy(x->mm);
    jitk_engine_destroy(e);
  }
  free(t);
  return wrong ? 1 : 0;
}
