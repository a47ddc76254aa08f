/*
 * raw_saxpy: compile a CUDA kernel from a string at run time, launch it on
 * fresh data, and check the result.
 *
 *   build/examples/raw_saxpy [N]
 *
 * Without a GPU it still compiles the kernel, then says so and exits 0.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *source =
    "extern \"C\" __global__ void saxpy(float a, const float *x, float *y, long long n) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    y[i] = a * x[i] + y[i];\n"
    "}\n";

#define CHECK(e, call)                                                                  \
  do {                                                                                  \
    jitk_status st_ = (call);                                                           \
    if (st_ != JITK_OK) {                                                               \
      fprintf(stderr, "%s failed: %s\n%s\n", #call, jitk_errname(st_), jitk_errmsg(e)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

int main(int argc, char **argv) {
  long long n = argc > 1 ? atoll(argv[1]) : 1 << 24;
  if (n <= 0) {
    fprintf(stderr, "usage: raw_saxpy [N > 0]\n");
    return 2;
  }

  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    /* Still show that compiling works here. */
    printf("raw_saxpy: %s\n", jitk_errmsg(NULL));
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = "sm_90";
    CHECK(NULL, jitk_engine_create(&cfg, &e));
    jitk_module *m = NULL;
    CHECK(e, jitk_module_create(e, source, NULL, &m));
    const void *img;
    size_t size;
    CHECK(e, jitk_module_image(m, &img, &size, NULL));
    printf("raw_saxpy: compiled saxpy for sm_90 (%zu bytes of cubin); launching it needs a GPU\n",
           size);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
    return 0;
  }
  CHECK(NULL, st);

  jitk_module *m = NULL;
  CHECK(e, jitk_module_create(e, source, NULL, &m));
  jitk_kernel *k = NULL;
  CHECK(e, jitk_module_get_kernel(m, "saxpy", &k));
  CHECK(e, jitk_kernel_set_signature(k, "float32 a, float32* x, float32* y, int64 n"));

  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *out = malloc(n * sizeof *out);
  if (!x || !y || !out) return 1;
  srand(12345);
  for (long long i = 0; i < n; i++) {
    x[i] = (float)rand() / RAND_MAX - 0.5f;
    y[i] = (float)rand() / RAND_MAX - 0.5f;
  }
  void *dx, *dy;
  CHECK(e, jitk_device_alloc(e, n * sizeof(float), NULL, &dx));
  CHECK(e, jitk_device_alloc(e, n * sizeof(float), NULL, &dy));
  CHECK(e, jitk_memcpy(e, dx, x, n * sizeof(float), NULL));
  CHECK(e, jitk_memcpy(e, dy, y, n * sizeof(float), NULL));

  int block, grid;
  CHECK(e, jitk_kernel_suggest_block_size(k, 0, &block, &grid));
  const float a = 2.0f;
  jitk_arg args[] = {jitk_arg_f32(a), jitk_arg_ptr(dx, JITK_FLOAT32),
                     jitk_arg_ptr(dy, JITK_FLOAT32), jitk_arg_i64(n)};
  jitk_dim3 g = {(unsigned)grid, 1, 1}, b = {(unsigned)block, 1, 1};
  CHECK(e, jitk_kernel_launch(k, g, b, 0, NULL, args, 4));
  CHECK(e, jitk_memcpy(e, out, dy, n * sizeof(float), NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));

  long long bad = 0;
  for (long long i = 0; i < n; i++) {
    double ref = (double)a * x[i] + y[i];
    if (fabs(out[i] - ref) > 1e-6 * (fabs(ref) + 1e-6)) bad++;
  }
  printf("raw_saxpy: %lld elements, grid %d x block %d: %s\n", n, grid, block,
         bad ? "WRONG" : "correct");
  CHECK(e, jitk_device_free(e, dx, NULL));
  CHECK(e, jitk_device_free(e, dy, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  free(x);
  free(y);
  free(out);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return bad ? 1 : 0;
}
