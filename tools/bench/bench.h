/* Shared pieces of jitk-bench: clocks, medians and the result table. */
#ifndef JITK_TOOLS_BENCH_H
#define JITK_TOOLS_BENCH_H

#include <stddef.h>

/* Any failure of a jitk call ends the benchmark with the engine's message:
 * a figure measured after an error would mean nothing. Needs <stdio.h>,
 * <stdlib.h> and <jitk/jitk.h>. */
#define BENCH_CHECK(e, call)                                                  \
  do {                                                                        \
    jitk_status st_ = (call);                                                 \
    if (st_ != JITK_OK) {                                                     \
      fprintf(stderr, "jitk-bench: %s failed: %s\n", #call, jitk_errmsg(e));  \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

typedef struct bench_row {
  const char *name;
  double value;
  const char *unit;
  const char *note;
} bench_row;

double bench_now_us(void);
/* Sorts v in place and returns its median. */
double bench_median(double *v, size_t n);
/* Prints the rows as a table under a title, and appends them as JSON
 * lines to `json` when it is not NULL. */
void bench_print(const char *title, const bench_row *rows, size_t n, const char *json);

int bench_cache(const char *self, int argc, char **argv);
int bench_elementwise(int argc, char **argv);
int bench_compile(int argc, char **argv);

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

#endif
