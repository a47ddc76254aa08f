/* Shared pieces of jitk-bench: clocks, medians and the result table. */
#ifndef JITK_TOOLS_BENCH_H
#define JITK_TOOLS_BENCH_H

#include <stddef.h>

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
int bench_cache_child(int argc, char **argv);

#endif
