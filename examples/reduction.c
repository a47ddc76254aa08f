/*
 * reduction: CuPy's ReductionKernel from C.
 *
 *   build/examples/reduction [N ROWS COLS]
 *
 * Two kernels written as expression strings over typed parameter lists:
 * the L2 norm of a float32 vector (map x * x, reduce a + b, post-map
 * y = sqrt(a)), and the argmax of every column of a float32 matrix, which
 * reduces a struct of value and row index that the preamble defines. Both
 * write into outputs this program allocated, and both are checked on the
 * host: the norm against a double-precision sum, the argmax column by
 * column.
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

/*
 * The argmax's reduce type: a value and the row it came from. The reduce
 * expression keeps the larger value and, between equal ones, the smaller
 * row, so the result is NumPy's (the first maximum) whatever order the
 * kernel combines partial results in.
 */
static const char argmax_preamble[] =
    "struct vi { float v; long long i; };\n"
    "__device__ __forceinline__ vi make_vi(float v, long long i) {\n"
    "  vi r; r.v = v; r.i = i; return r;\n"
    "}\n";

/*
 * The identity starts every partial result: -inf loses to every real value,
 * and a row index above every real one loses the tie when a column's
 * maximum is -inf itself. NVRTC defines no INFINITY without <cmath>, which
 * would cost compile time, so -inf is spelled by its bits.
 */
static const char argmax_identity[] = "make_vi(-__int_as_float(0x7f800000), 0x7fffffffffffffffLL)";

static jitk_status create_kernels(jitk_engine *e, jitk_reduction **l2norm,
                                  jitk_reduction **argmax) {
  jitk_status st = jitk_reduction_create(e, "T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0",
                                         "float32", "l2norm", NULL, l2norm);
  if (st != JITK_OK) return st;
  jitk_reduction_options ro = {argmax_preamble, NULL, 0};
  return jitk_reduction_create(e, "float32 x", "int64 y", "make_vi(x, _j)",
                               "(b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a", "y = a.i",
                               argmax_identity, "vi", "argmax", &ro, argmax);
}

/* A C-contiguous DLTensor over device memory (strides NULL: C order). */
static DLTensor tensor(void *data, int ndim, int64_t *shape, DLDataType dtype) {
  DLTensor t = {data, {kDLCUDA, 0}, ndim, dtype, shape, NULL, 0};
  return t;
}

static int compile_only(void) {
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = "sm_90";
  jitk_engine *e = NULL;
  CHECK(NULL, jitk_engine_create(&cfg, &e));
  jitk_reduction *l2norm = NULL, *argmax = NULL;
  CHECK(e, create_kernels(e, &l2norm, &argmax));
  /* The specializations the launches below would pick: the whole
   * contiguous vector reduced to one value, and a C-contiguous matrix
   * reduced along its rows, across contiguous outputs. */
  jitk_reduction_layout whole = {0, 1, 32, 'i', 0}, columns = {1, 1, 32, 'o', 0};
  const char *source = NULL;
  jitk_module *m = NULL;
  CHECK(e, jitk_reduction_compile(l2norm, "T=float32", &whole, &source, &m));
  printf("reduction: generated source of l2norm for float32:\n%s\n", source);
  jitk_module_destroy(m);
  CHECK(e, jitk_reduction_compile(argmax, "", &columns, NULL, &m));
  jitk_module_destroy(m);
  printf("reduction: compiled l2norm and argmax for sm_90; launching them needs a GPU\n");
  jitk_reduction_destroy(l2norm);
  jitk_reduction_destroy(argmax);
  jitk_engine_destroy(e);
  return 0;
}

static float uniform(void) { return (float)rand() / (float)RAND_MAX - 0.5f; }

int main(int argc, char **argv) {
  int64_t n = argc > 3 ? atoll(argv[1]) : (int64_t)1 << 20;
  int64_t rows = argc > 3 ? atoll(argv[2]) : 1000, cols = argc > 3 ? atoll(argv[3]) : 777;
  if (n <= 0 || rows <= 0 || cols <= 0) {
    fprintf(stderr, "usage: reduction [N ROWS COLS]\n");
    return 2;
  }
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    printf("reduction: no CUDA device: %s\n", jitk_errmsg(NULL));
    return compile_only();
  }
  CHECK(NULL, st);

  jitk_reduction *l2norm = NULL, *argmax = NULL;
  CHECK(e, create_kernels(e, &l2norm, &argmax));
  const DLDataType f32 = {kDLFloat, 32, 1}, i64 = {kDLInt, 64, 1};

  /* The L2 norm of n values, into a zero-dimensional output: every axis
   * is reduced. */
  size_t msize = (size_t)(rows * cols);
  float *hv = malloc((size_t)n * 4), *hm = malloc(msize * 4);
  long long *idx = malloc((size_t)cols * sizeof *idx);
  if (!hv || !hm || !idx) return 1;
  srand(2026);
  for (int64_t i = 0; i < n; i++) hv[i] = uniform();
  for (size_t i = 0; i < msize; i++) hm[i] = uniform();
  void *dv, *dnorm, *dm, *didx;
  CHECK(e, jitk_device_alloc(e, (size_t)n * 4, NULL, &dv));
  CHECK(e, jitk_device_alloc(e, 4, NULL, &dnorm));
  CHECK(e, jitk_device_alloc(e, msize * 4, NULL, &dm));
  CHECK(e, jitk_device_alloc(e, (size_t)cols * 8, NULL, &didx));
  CHECK(e, jitk_memcpy(e, dv, hv, (size_t)n * 4, NULL));
  CHECK(e, jitk_memcpy(e, dm, hm, msize * 4, NULL));

  int64_t vshape[1] = {n};
  DLTensor v = tensor(dv, 1, vshape, f32), norm = tensor(dnorm, 0, NULL, f32);
  jitk_arg nargs[] = {jitk_arg_array(&v), jitk_arg_array(&norm)};
  CHECK(e, jitk_reduction_launch(l2norm, NULL, nargs, 2, NULL, -1, 0, NULL));
  float got = 0;
  CHECK(e, jitk_memcpy(e, &got, dnorm, 4, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  double sum = 0;
  for (int64_t i = 0; i < n; i++) sum += (double)hv[i] * hv[i];
  double want = sqrt(sum);
  /* Float32 partial sums err by about the float epsilon times the longest
   * chain of additions into one partial; however the kernel splits 2^20
   * values between threads and blocks, that stays well below 1e-5. */
  int bad = fabs(got - want) > 1e-5 * want;
  printf("reduction: L2 norm of %lld float32: %.6f on the GPU, %.6f on the host (double): %s\n",
         (long long)n, (double)got, want, bad ? "WRONG" : "correct");

  /* The argmax of every column: axis 0 of a rows x cols matrix, into an
   * int64 vector of cols. */
  int64_t mshape[2] = {rows, cols}, ishape[1] = {cols};
  DLTensor mat = tensor(dm, 2, mshape, f32), out = tensor(didx, 1, ishape, i64);
  jitk_arg aargs[] = {jitk_arg_array(&mat), jitk_arg_array(&out)};
  const int axes[1] = {0};
  CHECK(e, jitk_reduction_launch(argmax, NULL, aargs, 2, axes, 1, 0, NULL));
  CHECK(e, jitk_memcpy(e, idx, didx, (size_t)cols * 8, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  int64_t mismatches = 0;
  for (int64_t j = 0; j < cols; j++) {
    int64_t best = 0;
    for (int64_t i = 1; i < rows; i++)
      if (hm[i * cols + j] > hm[best * cols + j]) best = i;
    if (idx[j] != best) {
      if (mismatches++ < 5)
        printf("reduction: column %lld: argmax %lld on the GPU, %lld on the host: WRONG\n",
               (long long)j, (long long)idx[j], (long long)best);
    }
  }
  if (mismatches == 0)
    printf("reduction: argmax of a %lld x %lld float32 matrix: all %lld columns match\n",
           (long long)rows, (long long)cols, (long long)cols);
  else
    printf("reduction: argmax: %lld of %lld columns WRONG\n", (long long)mismatches,
           (long long)cols);

  CHECK(e, jitk_device_free(e, dv, NULL));
  CHECK(e, jitk_device_free(e, dnorm, NULL));
  CHECK(e, jitk_device_free(e, dm, NULL));
  CHECK(e, jitk_device_free(e, didx, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  free(hv);
  free(hm);
  free(idx);
  jitk_reduction_destroy(l2norm);
  jitk_reduction_destroy(argmax);
  jitk_engine_destroy(e);
  return bad || mismatches ? 1 : 0;
}
