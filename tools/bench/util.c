#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double bench_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_print(const char *title, const bench_row *rows, size_t n, const char *json) {
  printf("\njitk-bench %s\n", title);
  printf("%-48s %12s  %-10s %s\n", "measure", "value", "unit", "");
  for (size_t i = 0; i < n; i++)
    printf("%-48s %12.3f  %-10s %s\n", rows[i].name, rows[i].value, rows[i].unit, rows[i].note);
  if (json == NULL) return;
  FILE *f = fopen(json, "a");
  if (f == NULL) return;
  for (size_t i = 0; i < n; i++)
    fprintf(f, "{\"bench\": \"%s\", \"name\": \"%s\", \"value\": %.6g, \"unit\": \"%s\"}\n", title,
            rows[i].name, rows[i].value, rows[i].unit);
  fclose(f);
}
