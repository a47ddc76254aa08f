#include <jitk/jitk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "engine.h"

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

void bench_array_make(bench_array *a, jitk_engine *e, jitk_dtype d, int ndim, int64_t rows,
                      int64_t cols) {
  memset(a, 0, sizeof *a);
  jitk_dtype_info info;
  jitk_dtype_get_info(d, &info);
  a->dtype = d;
  a->ndim = ndim;
  a->shape[0] = rows;
  a->shape[1] = cols;
  BENCH_CHECK(e, jitk_device_alloc(e, bench_array_bytes(a), NULL, &a->data));
  a->t.data = a->data;
  a->t.device.device_type = kDLCUDA;
  a->t.device.device_id = 0;
  a->t.ndim = ndim;
  a->t.dtype = info.dl;
  a->t.shape = a->shape;
  a->t.strides = NULL;
}

size_t bench_array_count(const bench_array *a) {
  return (size_t)(a->ndim == 0 ? 1 : a->ndim == 1 ? a->shape[0] : a->shape[0] * a->shape[1]);
}

size_t bench_array_bytes(const bench_array *a) {
  jitk_dtype_info info;
  jitk_dtype_get_info(a->dtype, &info);
  return bench_array_count(a) * info.size;
}

double *bench_array_to_host(jitk_engine *e, const bench_array *a) {
  size_t n = bench_array_count(a);
  unsigned char *raw = malloc(bench_array_bytes(a));
  double *out = malloc(n * sizeof(double));
  if (raw == NULL || out == NULL) {
    fprintf(stderr, "jitk-bench: out of host memory\n");
    exit(1);
  }
  BENCH_CHECK(e, jitk_memcpy(e, raw, a->data, bench_array_bytes(a), NULL));
  BENCH_CHECK(e, jitk_stream_synchronize(e, NULL));
  for (size_t i = 0; i < n; i++) {
    if (a->dtype == JITK_FLOAT32)
      out[i] = ((float *)raw)[i];
    else if (a->dtype == JITK_FLOAT16)
      out[i] = jitk_half_to_float(((uint16_t *)raw)[i]);
    else
      out[i] = jitk_bfloat16_to_float(((uint16_t *)raw)[i]);
  }
  free(raw);
  return out;
}

jitk_elementwise *bench_fill_create(jitk_engine *e) {
  jitk_elementwise *fill = NULL;
  BENCH_CHECK(e, jitk_elementwise_create(e, "uint32 seed", "T x",
                                         "unsigned h = (unsigned)i * 2654435761u + seed;"
                                         "h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;"
                                         "x = (T)((float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f)",
                                         "fill_random", NULL, &fill));
  return fill;
}

void bench_fill_random(jitk_engine *e, jitk_elementwise *fill, bench_array *a, uint32_t seed) {
  jitk_arg args[] = {jitk_arg_u32(seed), jitk_arg_array(&a->t)};
  BENCH_CHECK(e, jitk_elementwise_launch(fill, NULL, args, 2, -1, NULL));
}

/* A pair of CUDA events for timing, or the end of the benchmark. */
static void events_make(jitk_engine *e, CUevent ev[2]) {
  if (e->drv.cuEventCreate(&ev[0], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      e->drv.cuEventCreate(&ev[1], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    fprintf(stderr, "jitk-bench: cuEventCreate failed\n");
    exit(1);
  }
}

/* Milliseconds from ev[0] to ev[1], once ev[1] has happened. A kernel that
 * failed shows here; a time read after that would be meaningless. */
static float events_ms(jitk_engine *e, CUevent ev[2]) {
  float ms = 0;
  if (e->drv.cuEventSynchronize(ev[1]) != CUDA_SUCCESS ||
      e->drv.cuEventElapsedTime(&ms, ev[0], ev[1]) != CUDA_SUCCESS) {
    fprintf(stderr, "jitk-bench: timing with CUDA events failed (a kernel failed?)\n");
    exit(1);
  }
  return ms;
}

/* Runs run(ctx) `reps` times back to back on the NULL stream (after one
 * untimed run): *host_us is the host's time a call to queue it, *gpu_us the
 * device's time a call between events around all of them. The difference
 * from bench_time_ms's figure is what a lone call waits for its host side. */
void bench_back_to_back(jitk_engine *e, int reps, void (*run)(void *ctx), void *ctx,
                        double *host_us, double *gpu_us) {
  CUevent ev[2];
  events_make(e, ev);
  run(ctx);
  e->drv.cuEventRecord(ev[0], NULL);
  double t0 = bench_now_us();
  for (int i = 0; i < reps; i++) run(ctx);
  double t1 = bench_now_us();
  e->drv.cuEventRecord(ev[1], NULL);
  *gpu_us = (double)events_ms(e, ev) * 1e3 / reps;
  *host_us = (t1 - t0) / reps;
  e->drv.cuEventDestroy(ev[0]);
  e->drv.cuEventDestroy(ev[1]);
}

double bench_time_ms(jitk_engine *e, int warmup, int reps, void (*run)(void *ctx), void *ctx) {
  /* Events on the NULL stream, which is also where jitk's launches and a
   * library given stream 0 (cudaStream_t) queue their work. */
  CUevent ev[2];
  events_make(e, ev);
  double *t = malloc((size_t)reps * sizeof *t);
  if (t == NULL) {
    fprintf(stderr, "jitk-bench: out of host memory\n");
    exit(1);
  }
  for (int i = 0; i < warmup; i++) run(ctx);
  for (int i = 0; i < reps; i++) {
    e->drv.cuEventRecord(ev[0], NULL);
    run(ctx);
    e->drv.cuEventRecord(ev[1], NULL);
    t[i] = events_ms(e, ev);
  }
  e->drv.cuEventDestroy(ev[0]);
  e->drv.cuEventDestroy(ev[1]);
  double median = bench_median(t, (size_t)reps);
  free(t);
  return median;
}
