/*
 * link: build one module from several pieces with jitk_module_link.
 *
 *   build/examples/link [activations.o]
 *
 * 1. Device functions in one CUDA source (math.cu) called from a kernel in
 *    another (kernel.cu), both compiled by NVRTC and linked by nvJitLink
 *    with link-time optimization, so the functions are inlined into the
 *    kernel as if they were one file.
 * 2. An existing file, activations.cu, built by nvcc as a project's build
 *    would (nvcc -rdc=true -dlto -c), linked with a kernel jitk compiles
 *    at run time that calls its gelu() and softplus(). The build makes
 *    the object when it finds nvcc and passes its path.
 * 3. The same object linked with a kernel jitk generates: an elementwise
 *    kernel whose operation, y = gelu(x), calls the object's function.
 *
 * Each result is checked against a double-precision reference on the CPU.
 * The linked images go through the kernel cache: a second run compiles
 * and links nothing. Without a GPU the pieces are still compiled and
 * linked (nvJitLink needs none), and the example says so and exits 0.
 */
#include <jitk/jitk.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(e, call)                                                                  \
  do {                                                                                  \
    jitk_status st_ = (call);                                                           \
    if (st_ != JITK_OK) {                                                               \
      fprintf(stderr, "%s failed: %s\n%s\n", #call, jitk_errname(st_), jitk_errmsg(e)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

static const char *math_src =
    "__device__ float smooth_step(float x) {\n"
    "  float t = fminf(fmaxf(x, 0.0f), 1.0f);\n"
    "  return t * t * (3.0f - 2.0f * t);\n"
    "}\n";

static const char *kernel_src =
    "extern __device__ float smooth_step(float x);\n"
    "extern \"C\" __global__ void blend(const float *x, float *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = smooth_step(x[i]);\n"
    "}\n";

static const char *uses_activations_src =
    "extern __device__ float gelu(float x);\n"
    "extern __device__ float softplus(float x);\n"
    "extern \"C\" __global__ void activate(const float *x, float *g, float *s, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) {\n"
    "    g[i] = gelu(x[i]);\n"
    "    s[i] = softplus(x[i]);\n"
    "  }\n"
    "}\n";

static double smooth_step(double x) {
  double t = x < 0 ? 0 : x > 1 ? 1 : x;
  return t * t * (3 - 2 * t);
}
static double gelu(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double softplus(double x) { return log1p(exp(x)); }

static jitk_link_piece cuda(const char *src, const char *name) {
  jitk_link_piece p;
  memset(&p, 0, sizeof p);
  p.kind = JITK_LINK_CUDA;
  p.data = src;
  p.name = name;
  return p;
}

/* Fresh values in [-4, 4). */
static void fill(float *v, int n, unsigned seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = (float)((seed >> 8) * (8.0 / 16777216.0) - 4.0);
  }
}

static int check(const char *what, const float *got, const float *x, int n, double (*f)(double)) {
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    double want = f(x[i]);
    if (fabs(got[i] - want) > 2e-6 * (1 + fabs(want))) {
      if (wrong++ < 5) printf("WRONG %s[%d] = %.9g, expected %.9g\n", what, i, got[i], want);
    }
  }
  printf("%s: %s (%d elements)\n", what, wrong ? "WRONG" : "correct", n);
  return wrong;
}

static void *dev_copy(jitk_engine *e, const float *h, int n) {
  void *d;
  CHECK(e, jitk_device_alloc(e, (size_t)n * 4, NULL, &d));
  CHECK(e, jitk_memcpy(e, d, h, (size_t)n * 4, NULL));
  return d;
}

int main(int argc, char **argv) {
  const char *object = argc > 1 ? argv[1] : NULL;
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(NULL, &e);
  int gpu = st == JITK_OK;
  if (st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE) {
    printf("link: %s\n", jitk_errmsg(NULL));
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = "sm_90";
    CHECK(NULL, jitk_engine_create(&cfg, &e));
  } else {
    CHECK(NULL, st);
  }

  /* 1. Two sources, one program. */
  jitk_link_piece two[] = {cuda(math_src, "math.cu"), cuda(kernel_src, "kernel.cu")};
  jitk_link_options o;
  CHECK(e, jitk_link_options_init(&o));
  o.program_name = "blend";
  jitk_module *m1 = NULL;
  st = jitk_module_link(e, two, 2, &o, &m1);
  if (st == JITK_ERR_UNSUPPORTED) {
    /* No nvJitLink on this machine: the message says what to install. */
    printf("link: %s\n", jitk_errmsg(e));
    jitk_engine_destroy(e);
    return 0;
  }
  CHECK(e, st);
  const void *img;
  size_t size;
  CHECK(e, jitk_module_image(m1, &img, &size, NULL));
  printf("math.cu + kernel.cu: linked with LTO, %zu bytes of cubin\n", size);

  /* 2. An object built by nvcc, and a kernel jitk compiles. */
  jitk_module *m2 = NULL;
  if (object != NULL) {
    jitk_link_piece p[] = {cuda(uses_activations_src, "activate.cu"),
                           {JITK_LINK_OBJECT, NULL, 0, object, NULL, NULL}};
    o.program_name = "activate";
    CHECK(e, jitk_module_link(e, p, 2, &o, &m2));
    CHECK(e, jitk_module_image(m2, &img, &size, NULL));
    printf("activate.cu + %s: linked, %zu bytes of cubin\n", object, size);
  } else {
    printf("no object given (the build passes activations.o when it finds nvcc)\n");
  }

  /* 3. A kernel jitk generates, an ElementwiseKernel, calling the
   * object's gelu(): declared in the preamble, linked at each compile. */
  jitk_elementwise *ew = NULL;
  if (object != NULL) {
    jitk_elementwise_options eo;
    memset(&eo, 0, sizeof eo);
    eo.preamble = "extern __device__ float gelu(float x);";
    CHECK(e,
          jitk_elementwise_create(e, "float32 x", "float32 y", "y = gelu(x)", "gelu_ew", &eo, &ew));
    jitk_link_piece obj = {JITK_LINK_OBJECT, NULL, 0, object, NULL, NULL};
    CHECK(e, jitk_elementwise_link(ew, &obj, 1, NULL));
    const char *src;
    CHECK(e, jitk_elementwise_compile(ew, "", NULL, &src, NULL));
    printf("elementwise y = gelu(x) + %s: linked\n", object);
  }

  int wrong = 0;
  if (!gpu) {
    printf("linked; running them needs a GPU\n");
  } else {
    enum { N = 1 << 20 };
    float *x = malloc(N * 4), *a = malloc(N * 4), *b = malloc(N * 4);
    fill(x, N, 12345u);
    void *dx = dev_copy(e, x, N), *da, *db;
    CHECK(e, jitk_device_alloc(e, N * 4, NULL, &da));
    CHECK(e, jitk_device_alloc(e, N * 4, NULL, &db));
    jitk_dim3 grid = {(N + 255) / 256, 1, 1}, block = {256, 1, 1};
    jitk_kernel *k;
    CHECK(e, jitk_module_get_kernel(m1, "blend", &k));
    jitk_arg args[] = {jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_ptr(da, JITK_FLOAT32),
                       jitk_arg_i32(N)};
    CHECK(e, jitk_kernel_launch(k, grid, block, 0, NULL, args, 3));
    CHECK(e, jitk_memcpy(e, a, da, N * 4, NULL));
    CHECK(e, jitk_stream_synchronize(e, NULL));
    wrong += check("smooth_step", a, x, N, smooth_step);
    if (m2 != NULL) {
      CHECK(e, jitk_module_get_kernel(m2, "activate", &k));
      jitk_arg args2[] = {jitk_arg_ptr(dx, JITK_FLOAT32), jitk_arg_ptr(da, JITK_FLOAT32),
                          jitk_arg_ptr(db, JITK_FLOAT32), jitk_arg_i32(N)};
      CHECK(e, jitk_kernel_launch(k, grid, block, 0, NULL, args2, 4));
      CHECK(e, jitk_memcpy(e, a, da, N * 4, NULL));
      CHECK(e, jitk_memcpy(e, b, db, N * 4, NULL));
      CHECK(e, jitk_stream_synchronize(e, NULL));
      wrong += check("gelu from activations.o", a, x, N, gelu);
      wrong += check("softplus from activations.o", b, x, N, softplus);
      int64_t shape[1] = {N};
      DLTensor tx = {.data = dx,
                     .device = {kDLCUDA, 0},
                     .ndim = 1,
                     .dtype = {kDLFloat, 32, 1},
                     .shape = shape};
      DLTensor ty = tx;
      ty.data = db;
      jitk_arg ea[] = {jitk_arg_array(&tx), jitk_arg_array(&ty)};
      CHECK(e, jitk_elementwise_launch(ew, NULL, ea, 2, -1, NULL));
      CHECK(e, jitk_memcpy(e, b, db, N * 4, NULL));
      CHECK(e, jitk_stream_synchronize(e, NULL));
      wrong += check("elementwise gelu from activations.o", b, x, N, gelu);
    }
    CHECK(e, jitk_device_free(e, dx, NULL));
    CHECK(e, jitk_device_free(e, da, NULL));
    CHECK(e, jitk_device_free(e, db, NULL));
    free(x);
    free(a);
    free(b);
  }
  jitk_elementwise_destroy(ew);
  jitk_module_destroy(m1);
  jitk_module_destroy(m2);
  jitk_engine_destroy(e);
  return wrong ? 1 : 0;
}
