/*
 * The jitk demo: compile a templated CUDA kernel at run time, report what
 * the compiler made of it, then run it on a strided view of a matrix and
 * check every element.
 *
 * On a machine without a GPU it still compiles everything, then says that
 * launching needs a GPU, and exits 0.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One kernel template over any element type: y(i, j) = x(i, j) * f[j],
 * where x and y are descriptors that carry their own strides. */
static const char *source =
    "#include <jitk/array.cuh>\n"
    "template <typename T>\n"
    "__global__ void scale_columns(jitk::array<const T, 2> x, const T *f, jitk::array<T, 2> y) {\n"
    "  const long long n = x.size(), cols = x.shape[1];\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    const long long r = i / cols, c = i - r * cols;\n"
    "    y(r, c) = x(r, c) * f[c];\n"
    "  }\n"
    "}\n";

static const char *names[] = {"scale_columns<float>", "scale_columns<double>"};

#define CHECK(e, call)                                                                        \
  do {                                                                                        \
    jitk_status st_ = (call);                                                                 \
    if (st_ != JITK_OK) {                                                                     \
      fprintf(stderr, "demo: %s failed: %s\n%s\n", #call, jitk_errname(st_), jitk_errmsg(e)); \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static jitk_module *compile(jitk_engine *e) {
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.name_expressions = names;
  o.num_name_expressions = 2;
  o.program_name = "demo.cu";
  jitk_module *m = NULL;
  CHECK(e, jitk_module_create(e, source, &o, &m));
  const char *arch;
  CHECK(e, jitk_engine_arch(e, &arch));
  const jitk_kernel_resources *res;
  size_t n;
  CHECK(e, jitk_module_resources(m, &res, &n));
  printf("compiled demo.cu for %s:\n", arch);
  for (size_t i = 0; i < n; i++)
    printf("  %-48s %3d registers, %zu bytes stack, %zu bytes spilled\n", res[i].name,
           res[i].registers, res[i].stack_bytes, res[i].spill_stores + res[i].spill_loads);
  for (int i = 0; i < 2; i++) {
    const char *lowered;
    CHECK(e, jitk_module_lowered_name(m, names[i], &lowered));
    printf("  %s is %s\n", names[i], lowered);
  }
  return m;
}

int main(void) {
  int major, minor;
  CHECK(NULL, jitk_nvrtc_version(&major, &minor));
  printf("jitk %s with NVRTC %d.%d\n", jitk_version(), major, minor);

  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    char why[1024];
    snprintf(why, sizeof why, "%s", jitk_errmsg(NULL));
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = "sm_90";
    CHECK(NULL, jitk_engine_create(&cfg, &e));
    jitk_module *m = compile(e);
    jitk_module_destroy(m);
    jitk_engine_destroy(e);
    printf("\nLaunching needs a GPU, and this machine has none: %s\n", why);
    printf(
        "Everything up to the cubin worked; run this demo on a machine with an NVIDIA GPU "
        "to see the kernels run.\n");
    return 0;
  }
  CHECK(NULL, st);
  jitk_device_info info;
  CHECK(e, jitk_engine_device_info(e, &info));
  printf("device 0: %s (compute capability %d.%d, %d SMs)\n", info.name, info.cc_major,
         info.cc_minor, info.multiprocessors);
  jitk_module *m = compile(e);
  jitk_kernel *k = NULL;
  CHECK(e, jitk_module_get_kernel(m, "scale_columns<float>", &k));

  /* x is the transpose of a rows x cols matrix stored row-major: a view
   * with strides (1, rows), which a kernel that ignored strides would get
   * wrong. */
  enum { ROWS = 1500, COLS = 700 };
  const size_t count = (size_t)ROWS * COLS;
  float *a = malloc(count * sizeof *a), *f = malloc(ROWS * sizeof *f),
        *y = malloc(count * sizeof *y);
  srand(7);
  for (size_t i = 0; i < count; i++) a[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int j = 0; j < ROWS; j++) f[j] = (float)(j % 13) - 6.0f;
  void *da, *df, *dy;
  CHECK(e, jitk_device_alloc(e, count * sizeof(float), NULL, &da));
  CHECK(e, jitk_device_alloc(e, ROWS * sizeof(float), NULL, &df));
  CHECK(e, jitk_device_alloc(e, count * sizeof(float), NULL, &dy));
  CHECK(e, jitk_memcpy(e, da, a, count * sizeof(float), NULL));
  CHECK(e, jitk_memcpy(e, df, f, ROWS * sizeof(float), NULL));
  CHECK(e, jitk_memset(e, dy, 0xFF, count * sizeof(float), NULL));

  int64_t xshape[2] = {COLS, ROWS}, xstrides[2] = {1, COLS};
  int64_t yshape[2] = {COLS, ROWS};
  DLTensor x = {da, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, xshape, xstrides, 0};
  DLTensor yt = {dy, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, yshape, NULL, 0};
  jitk_arg args[] = {jitk_arg_array(&x), jitk_arg_ptr(df, JITK_FLOAT32), jitk_arg_array(&yt)};
  int block, grid;
  CHECK(e, jitk_kernel_suggest_block_size(k, 0, &block, &grid));
  CHECK(e, jitk_kernel_launch(k, (jitk_dim3){(unsigned)grid, 1, 1},
                              (jitk_dim3){(unsigned)block, 1, 1}, 0, NULL, args, 3));
  CHECK(e, jitk_memcpy(e, y, dy, count * sizeof(float), NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));

  size_t bad = 0;
  for (int r = 0; r < COLS; r++)
    for (int c = 0; c < ROWS; c++) {
      double ref = (double)a[(size_t)c * COLS + r] * f[c];
      if (fabs(y[(size_t)r * ROWS + c] - ref) > 1e-6 * fabs(ref) || isnan(y[(size_t)r * ROWS + c]))
        bad++;
    }
  printf("scale_columns<float> on a %d x %d transposed view: %s (%zu of %zu elements wrong)\n",
         COLS, ROWS, bad ? "WRONG" : "correct", bad, count);
  CHECK(e, jitk_device_free(e, da, NULL));
  CHECK(e, jitk_device_free(e, df, NULL));
  CHECK(e, jitk_device_free(e, dy, NULL));
  CHECK(e, jitk_stream_synchronize(e, NULL));
  free(a);
  free(f);
  free(y);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  return bad ? 1 : 0;
}
