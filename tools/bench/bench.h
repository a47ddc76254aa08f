/* Shared pieces of jitk-bench: clocks, medians and the result table. */
#ifndef JITK_TOOLS_BENCH_H
#define JITK_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <jitk/jitk.h>

/* Any failure of a jitk call ends the benchmark with the engine's message:
 * a figure measured after an error would mean nothing. Needs <stdio.h>,
 * <stdlib.h> and <jitk/jitk.h>. */
#define BENCH_CHECK(e, call)                                                 \
  do {                                                                       \
    jitk_status st_ = (call);                                                \
    if (st_ != JITK_OK) {                                                    \
      fprintf(stderr, "jitk-bench: %s failed: %s\n", #call, jitk_errmsg(e)); \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

typedef struct bench_row {
  const char *name;
  double value;
  const char *unit;
  const char *note;
} bench_row;

double bench_now_us(void);
/* Median milliseconds of run(ctx) over `reps` runs, each timed with CUDA
 * events on the NULL stream, after `warmup` untimed runs. run exits on
 * failure, as BENCH_CHECK does. */
double bench_time_ms(jitk_engine *e, int warmup, int reps, void (*run)(void *ctx), void *ctx);
/* Back to back: the host's microseconds to queue a call, and the device's
 * microseconds a call over `reps` calls queued without waiting. */
void bench_back_to_back(jitk_engine *e, int reps, void (*run)(void *ctx), void *ctx,
                        double *host_us, double *gpu_us);
/* Sorts v in place and returns its median. */
double bench_median(double *v, size_t n);
/* Prints the rows as a table under a title, and appends them as JSON
 * lines to `json` when it is not NULL. */
void bench_print(const char *title, const bench_row *rows, size_t n, const char *json);

int bench_cache(const char *self, int argc, char **argv);
int bench_elementwise(int argc, char **argv);
int bench_reduction(int argc, char **argv);
int bench_matmul(int argc, char **argv);
int bench_autotune(int argc, char **argv);
int bench_compile(int argc, char **argv);
int bench_sweep(int argc, char **argv);
int bench_small(int argc, char **argv);
int bench_graph(int argc, char **argv);
int bench_remote(int argc, char **argv);
int bench_warm(int argc, char **argv);
int bench_multi(int argc, char **argv);

/* A device array of zero, one or two dimensions (C order) with the
 * DLTensor that passes it. The DLTensor points at the struct's own shape,
 * so a bench_array must stay where bench_array_make put it. */
typedef struct bench_array {
  void *data;
  jitk_dtype dtype;
  int ndim;
  int64_t shape[2];
  DLTensor t;
} bench_array;

/* Allocates rows (ndim 1) or rows x cols (ndim 2) elements; ndim 0 is one
 * element, the output of a reduction over every axis. */
void bench_array_make(bench_array *a, jitk_engine *e, jitk_dtype d, int ndim, int64_t rows,
                      int64_t cols);
size_t bench_array_count(const bench_array *a);
size_t bench_array_bytes(const bench_array *a);
/* Copies a float32, float16 or bfloat16 array to a malloc'd array of
 * doubles, exactly. */
double *bench_array_to_host(jitk_engine *e, const bench_array *a);
/* The generated elementwise kernel (uint32 seed, T x) that writes
 * pseudo-random values in [-0.5, 0.5) into any float array, and its
 * launch: inputs are never zeros, which some hardware paths compress. */
jitk_elementwise *bench_fill_create(jitk_engine *e);
void bench_fill_random(jitk_engine *e, jitk_elementwise *fill, bench_array *a, uint32_t seed);

struct jitk_engine;
struct jitk_kernel;
struct jitk_arg;
/* The empty, four-argument and fill kernels of the limits benchmark. */
extern const char *bench_kernels_src;
/* Device-to-device copy of 1 GiB: bytes read plus written per second
 * (GB/s), median of 20 after warm-up; `fill` is the kernel named fill. */
double bench_copy_bandwidth(struct jitk_engine *e, struct jitk_kernel *fill);
/* Host microseconds per launch, bare cuLaunchKernel against
 * jitk_kernel_launch of the same kernel, median over 100,000 launches. */
void bench_launch_overhead(struct jitk_engine *e, struct jitk_kernel *k,
                           const struct jitk_arg *args, size_t nargs, void **bare_params,
                           double *bare_us, double *jitk_us);
int bench_cache_child(int argc, char **argv);

/* What the bandwidth benchmarks start from: their options (--json FILE,
 * --elements N), an engine on the default device, the module of bench
 * kernels (a fill and an empty kernel) and the copy bandwidth measured in
 * this process. */
typedef struct bench_session {
  const char *json;
  int64_t elements; /* default 2^28 */
  struct jitk_engine *engine;
  struct jitk_module *module;
  struct jitk_kernel *fill, *empty;
  double copy_gbs;
} bench_session;

/* 0 when ready; 77 (skipped) after saying so when there is no device. */
int bench_open(const char *what, int argc, char **argv, bench_session *s);
void bench_close(bench_session *s);

#endif
