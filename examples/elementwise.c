/*
 * elementwise: CuPy's ElementwiseKernel from C.
 *
 *   build/examples/elementwise [ROWS COLS]
 *
 * Two kernels written as expression strings over typed parameter lists:
 * saxpy, z = a * x + y, with T bound from the arrays (float32 here, float16
 * or any other dtype just as well); and a fused bias+ReLU over a matrix
 * whose bias row is broadcast down the columns, with the output allocated
 * by jitk and handed back as a DLManagedTensor. Both results are checked
 * against a double-precision reference on the host.
 *
 * Without a GPU it still generates and compiles both kernels for sm_90,
 * prints the generated source of the first, and says that launching needs
 * a GPU.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(e, call)                                                                  \
  do {                                                                                  \
    jitk_status st_ = (call);                                                           \
    if (st_ != JITK_OK) {                                                               \
      fprintf(stderr, "%s failed: %s\n%s\n", #call, jitk_errname(st_), jitk_errmsg(e)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* A C-contiguous float32 DLTensor over device memory (strides NULL: C
 * order). */
static DLTensor tensor(void *data, int ndim, int64_t *shape) {
  DLTensor t = {data, {kDLCUDA, 0}, ndim, {kDLFloat, 32, 1}, shape, NULL, 0};
  return t;
}

static int compile_only(void) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  jitk_engine *e = NULL;
  CHECK(NULL, jitk_engine_create(&cfg, &e));
  jitk_elementwise *saxpy = NULL, *bias_relu = NULL;
  CHECK(e,
        jitk_elementwise_create(e, "T a, T x, T y", "T z", "z = a * x + y", "saxpy", NULL, &saxpy));
  CHECK(e, jitk_elementwise_create(e, "T x, T b", "T y", "y = max(x + b, (T)0)", "bias_relu", NULL,
                                   &bias_relu));
  /* The specializations a launch would pick: `a` a scalar, the rest
   * contiguous float32 arrays read 16 bytes at a time. */
  jitk_elementwise_layout layout = {1, 32, 0, "a"};
  const char *source = NULL;
  jitk_module *m = NULL;
  CHECK(e, jitk_elementwise_compile(saxpy, "T=float32", &layout, &source, &m));
  printf("elementwise: generated source of saxpy for float32:\n%s\n", source);
  jitk_module_destroy(m);
  layout.scalars = NULL;
  CHECK(e, jitk_elementwise_compile(bias_relu, "T=float32", &layout, NULL, &m));
  jitk_module_destroy(m);
  printf("elementwise: compiled saxpy and bias_relu for sm_90; launching them needs a GPU\n");
  jitk_elementwise_destroy(saxpy);
  jitk_elementwise_destroy(bias_relu);
  jitk_engine_destroy(e);
  return 0;
}

int main(int argc, char **argv) {
  int64_t rows = argc > 2 ? atoll(argv[1]) : 1000, cols = argc > 2 ? atoll(argv[2]) : 4097;
  if (rows <= 0 || cols <= 0) {
    fprintf(stderr, "usage: elementwise [ROWS COLS]\n");
    return 2;
  }
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    printf("elementwise: %s\n", jitk_errmsg(NULL));
    return compile_only();
  }
  CHECK(NULL, st);

  jitk_elementwise *saxpy = NULL, *bias_relu = NULL;
  CHECK(e,
        jitk_elementwise_create(e, "T a, T x, T y", "T z", "z = a * x + y", "saxpy", NULL, &saxpy));
  CHECK(e, jitk_elementwise_create(e, "T x, T b", "T y", "y = max(x + b, (T)0)", "bias_relu", NULL,
                                   &bias_relu));

  /* Host data: a rows x cols matrix and a bias row. */
  size_t n = (size_t)(rows * cols);
  float *hx = malloc(n * 4), *hy = malloc(n * 4), *hb = malloc((size_t)cols * 4),
        *out = malloc(n * 4);
  if (!hx || !hy || !hb || !out) return 1;
  srand(2026);
  for (size_t i = 0; i < n; i++) {
    hx[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    hy[i] = (float)rand() / (float)RAND_MAX - 0.5f;
  }
  for (int64_t j = 0; j < cols; j++) hb[j] = (float)rand() / (float)RAND_MAX - 0.5f;
  void *dx, *dy, *dz, *db;
  CHECK(e, jitk_device_alloc(e, n * 4, NULL, &dx));
  CHECK(e, jitk_device_alloc(e, n * 4, NULL, &dy));
  CHECK(e, jitk_device_alloc(e, n * 4, NULL, &dz));
  CHECK(e, jitk_device_alloc(e, (size_t)cols * 4, NULL, &db));
  CHECK(e, jitk_memcpy(e, dx, hx, n * 4, NULL));
  CHECK(e, jitk_memcpy(e, dy, hy, n * 4, NULL));
  CHECK(e, jitk_memcpy(e, db, hb, (size_t)cols * 4, NULL));

  /* saxpy into an output the caller owns; the double 2.5 is converted to
   * the parameter's type, T = float32, as CuPy would. */
  int64_t shape[2] = {rows, cols}, bshape[1] = {cols};
  DLTensor x = tensor(dx, 2, shape), y = tensor(dy, 2, shape), z = tensor(dz, 2, shape),
           b = tensor(db, 1, bshape);
  jitk_arg sargs[] = {jitk_arg_f64(2.5), jitk_arg_array(&x), jitk_arg_array(&y),
                      jitk_arg_array(&z)};
  CHECK(e, jitk_elementwise_launch(saxpy, NULL, sargs, 4, -1, NULL));
  CHECK(e, jitk_memcpy(e, out, dz, n * 4, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    double want = 2.5 * hx[i] + hy[i];
    if (fabs(out[i] - want) > 1e-6 * (fabs(want) + 1.0)) bad++;
  }
  printf("elementwise: saxpy on %lld x %lld float32: %s\n", (long long)rows, (long long)cols,
         bad ? "WRONG" : "correct");

  /* bias+ReLU with b broadcast along the rows; the output is left out, so
   * jitk allocates it (stream-ordered) and returns it. */
  DLManagedTensor *allocated[1] = {NULL};
  jitk_arg bargs[] = {jitk_arg_array(&x), jitk_arg_array(&b)};
  CHECK(e, jitk_elementwise_launch(bias_relu, NULL, bargs, 2, -1, allocated));
  DLTensor *r = &allocated[0]->dl_tensor;
  CHECK(e, jitk_memcpy(e, out, (char *)r->data + r->byte_offset, n * 4, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  size_t bad2 = 0;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      double s = (double)(hx[i * cols + j] + hb[j]);
      if (out[i * cols + j] != (float)(s > 0 ? s : 0)) bad2++;
    }
  printf("elementwise: bias+ReLU into a %lld x %lld output jitk allocated: %s\n",
         (long long)r->shape[0], (long long)r->shape[1], bad2 ? "WRONG" : "correct");
  allocated[0]->deleter(allocated[0]);

  CHECK(e, jitk_device_free(e, dx, NULL));
  CHECK(e, jitk_device_free(e, dy, NULL));
  CHECK(e, jitk_device_free(e, dz, NULL));
  CHECK(e, jitk_device_free(e, db, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  free(hx);
  free(hy);
  free(hb);
  free(out);
  jitk_elementwise_destroy(saxpy);
  jitk_elementwise_destroy(bias_relu);
  jitk_engine_destroy(e);
  return bad || bad2 ? 1 : 0;
}
