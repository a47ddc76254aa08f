// existing_cuda: jitk inside a program that already uses the CUDA runtime.
//
// The buffers come from cudaMalloc, the stream from cudaStreamCreate, and
// the program's own kernels (built by nvcc) run before and after a jitk
// kernel on the same buffers and the same stream. jitk uses the device's
// primary context, which is the runtime's, so nothing needs converting:
// a cudaStream_t is a jitk_stream, and a cudaMalloc pointer goes into a
// DLTensor as it is.
#include <jitk/jitk.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

// The program's own kernels, compiled ahead of time by nvcc.
__global__ void init(float *x, float *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    x[i] = sinf((float)i);
    y[i] = 0.001f * (float)(i % 1000);
  }
}

__global__ void square(float *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = y[i] * y[i];
}

// The jitk kernel, compiled at run time: it takes descriptors, so it would
// honour strides if the program passed views.
static const char *jit_source =
    "#include <jitk/array.cuh>\n"
    "extern \"C\" __global__ void axpy(float a, jitk::array<const float, 1> x,\n"
    "                                  jitk::array<float, 1> y) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < y.shape[0];\n"
    "       i += (long long)gridDim.x * blockDim.x)\n"
    "    y(i) = a * x(i) + y(i);\n"
    "}\n";

#define CUDA_CHECK(call)                                                          \
  do {                                                                            \
    cudaError_t err_ = (call);                                                    \
    if (err_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(err_));          \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

#define JITK_CHECK(e, call)                                                       \
  do {                                                                            \
    jitk_status st_ = (call);                                                     \
    if (st_ != JITK_OK) {                                                         \
      std::fprintf(stderr, "%s: %s\n", #call, jitk_errmsg(e));                    \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("existing_cuda: no CUDA device; this example needs a GPU\n");
    return 0;
  }
  const long long n = 10'000'019;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *x = nullptr, *y = nullptr;
  CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&y, n * sizeof(float)));

  init<<<264, 256, 0, stream>>>(x, y, n);
  CUDA_CHECK(cudaGetLastError());

  jitk_engine *e = nullptr;
  JITK_CHECK(nullptr, jitk_engine_create(nullptr, &e));
  jitk_module *m = nullptr;
  JITK_CHECK(e, jitk_module_create(e, jit_source, nullptr, &m));
  jitk_kernel *k = nullptr;
  JITK_CHECK(e, jitk_module_get_kernel(m, "axpy", &k));

  int64_t shape[1] = {n};
  DLTensor tx{}, ty{};
  tx.data = x;
  tx.device = {kDLCUDA, 0};
  tx.ndim = 1;
  tx.dtype = {kDLFloat, 32, 1};
  tx.shape = shape;
  ty = tx;
  ty.data = y;
  const float a = 3.0f;
  jitk_arg args[] = {jitk_arg_f32(a), jitk_arg_array(&tx), jitk_arg_array(&ty)};
  // The cudaStream_t goes in as it is: same object, same ordering.
  JITK_CHECK(e, jitk_kernel_launch(k, jitk_dim3{264, 1, 1}, jitk_dim3{256, 1, 1}, 0,
                                   (jitk_stream)stream, args, 3));

  square<<<264, 256, 0, stream>>>(y, n);
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> out(n);
  CUDA_CHECK(cudaMemcpyAsync(out.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  long long bad = 0;
  for (long long i = 0; i < n; i++) {
    double xi = std::sin((double)i), yi = 0.001 * (double)(i % 1000);
    double ref = (a * xi + yi) * (a * xi + yi);
    // sinf on the device differs from sin by a few ulps for large i.
    if (std::fabs(out[i] - ref) > 1e-4 * (std::fabs(ref) + 1.0)) bad++;
  }
  std::printf("existing_cuda: nvcc kernel -> jitk kernel -> nvcc kernel on one stream, "
              "%lld elements: %s\n",
              n, bad ? "WRONG" : "correct");

  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return bad ? 1 : 0;
}
