/*
 * jitk-bench small: what a cached launch costs on small arrays, 2^10 to
 * 2^18 float32 elements, where launch and latency rather than bandwidth
 * decide: z = x + y and a whole-array sum, each measured three ways.
 *
 *   host        the caller's time per launch: rounds of 100 launches timed
 *               on the host, the stream drained between rounds (untimed),
 *               the median over 400 rounds;
 *   GPU, one    CUDA events around a single launch on an idle stream, the
 *               median of 200: what one small operation takes end to end;
 *   GPU, batch  CUDA events around 100 launches back to back, per launch,
 *               the median of 50: what each costs in a loop of them.
 *
 * Inputs are fresh random values; outputs are poisoned first and every
 * element checked against a double-precision reference. The PyTorch peer,
 * tools/bench/peers/small.py, measures torch.add and torch.sum the same
 * way in its own process.
 *
 *   jitk-bench small [--json FILE]
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "engine.h"

#define CHECK(e, call) BENCH_CHECK(e, call)

typedef struct small_case {
  jitk_engine *e;
  jitk_elementwise *add;
  jitk_reduction *sum;
  jitk_arg args[3];
  int batch; /* launches per run */
} small_case;

static void run_add(void *ctx) {
  small_case *c = ctx;
  for (int i = 0; i < c->batch; i++)
    CHECK(c->e, jitk_elementwise_launch(c->add, NULL, c->args, 3, -1, NULL));
}

static void run_sum(void *ctx) {
  small_case *c = ctx;
  for (int i = 0; i < c->batch; i++)
    CHECK(c->e, jitk_reduction_launch(c->sum, NULL, c->args, 2, NULL, -1, 0, NULL));
}

/* Host microseconds per launch: rounds of 100, the stream drained between
 * rounds. */
static double host_us(small_case *c, void (*run)(void *)) {
  enum { ROUNDS = 400 };
  double t[ROUNDS];
  c->batch = 100;
  for (int r = 0; r < 20; r++) run(c);
  CHECK(c->e, jitk_stream_synchronize(c->e, NULL));
  for (int r = 0; r < ROUNDS; r++) {
    double t0 = bench_now_us();
    run(c);
    t[r] = (bench_now_us() - t0) / 100.0;
    CHECK(c->e, jitk_stream_synchronize(c->e, NULL));
  }
  return bench_median(t, ROUNDS);
}

int bench_small(int argc, char **argv) {
  bench_session bs;
  int skipped = bench_open("small", argc, argv, &bs);
  if (skipped) return skipped;
  jitk_engine *e = bs.engine;
  jitk_elementwise *fill = bench_fill_create(e);
  small_case c = {e, NULL, NULL, {{0}}, 1};
  CHECK(e, jitk_elementwise_create(e, "T x, T y", "T z", "z = x + y", "add", NULL, &c.add));
  CHECK(e, jitk_reduction_create(e, "T x", "T s", "x", "a + b", "s = a", "0", NULL, "sum", NULL,
                                 &c.sum));
  double bare_us, raw_us;
  bench_launch_overhead(e, bs.empty, NULL, 0, NULL, &bare_us, &raw_us);

  enum { NSIZES = 5, PER = 6 };
  bench_row rows[2 + NSIZES * PER];
  char names[NSIZES * PER][80];
  int nr = 0;
  rows[nr++] = (bench_row){"bare cuLaunchKernel, empty kernel", bare_us, "us/launch", ""};
  size_t bad = 0;
  for (int s = 0; s < NSIZES; s++) {
    int lg = 10 + 2 * s;
    int64_t n = (int64_t)1 << lg;
    bench_array x, y, z, sum;
    bench_array_make(&x, e, JITK_FLOAT32, 1, n, 0);
    bench_array_make(&y, e, JITK_FLOAT32, 1, n, 0);
    bench_array_make(&z, e, JITK_FLOAT32, 1, n, 0);
    bench_array_make(&sum, e, JITK_FLOAT32, 0, 0, 0);
    bench_fill_random(e, fill, &x, 101u + (uint32_t)s);
    bench_fill_random(e, fill, &y, 211u + (uint32_t)s);
    for (int op = 0; op < 2; op++) {
      void (*run)(void *) = op == 0 ? run_add : run_sum;
      bench_array *out = op == 0 ? &z : &sum;
      c.args[0] = jitk_arg_array(&x.t);
      c.args[1] = op == 0 ? jitk_arg_array(&y.t) : jitk_arg_array(&sum.t);
      c.args[2] = jitk_arg_array(&z.t);
      /* The check first, on a poisoned output. */
      CHECK(e, jitk_memset(e, out->data, 0xFF, bench_array_bytes(out), NULL));
      c.batch = 1;
      run(&c);
      double *hx = bench_array_to_host(e, &x), *hy = bench_array_to_host(e, &y);
      double *ho = bench_array_to_host(e, out);
      if (op == 0) {
        for (int64_t i = 0; i < n; i++)
          if (!(fabs(ho[i] - (hx[i] + hy[i])) <= 2.4e-7 * fabs(hx[i] + hy[i]) + 1e-30)) bad++;
      } else {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) want += hx[i], mag += fabs(hx[i]);
        if (!(fabs(ho[0] - want) <= 1.2e-7 * (double)lg * mag + 1e-30)) bad++;
      }
      free(hx);
      free(hy);
      free(ho);
      double h = host_us(&c, run);
      c.batch = 1;
      double one = bench_time_ms(e, 20, 200, run, &c) * 1e3;
      c.batch = 100;
      double many = bench_time_ms(e, 2, 50, run, &c) * 1e3 / 100.0;
      const char *what = op == 0 ? "z = x + y" : "sum(x)";
      const char *kind[3] = {"host", "GPU, one launch", "GPU, 100 back to back"};
      double v[3] = {h, one, many};
      for (int k = 0; k < 3; k++) {
        int j = nr - 1;
        snprintf(names[j], sizeof names[j], "%s, 2^%d float32: %s", what, lg, kind[k]);
        rows[nr++] = (bench_row){names[j], v[k], "us/launch", ""};
      }
    }
    CHECK(e, jitk_device_free(e, x.data, NULL));
    CHECK(e, jitk_device_free(e, y.data, NULL));
    CHECK(e, jitk_device_free(e, z.data, NULL));
    CHECK(e, jitk_device_free(e, sum.data, NULL));
  }
  CHECK(e, jitk_stream_synchronize(e, NULL));
  char title[300];
  snprintf(title, sizeof title, "small arrays on %s (%d SMs)", e->info.name,
           e->info.multiprocessors);
  bench_print(title, rows, (size_t)nr, bs.json);
  if (bad) printf("jitk-bench small: %zu WRONG RESULTS\n", bad);
  jitk_elementwise_destroy(fill);
  jitk_elementwise_destroy(c.add);
  jitk_reduction_destroy(c.sum);
  bench_close(&bs);
  return bad ? 1 : 0;
}
