// A study, not part of the library: can the copy engines copy an operand
// whose rows are off 16 bytes (bf16 4095 x 4095 onto rows of 4096, one
// cudaMemcpy2DAsync) while a kernel holds every multiprocessor, and tell
// it through a flag written by cuStreamWriteValue32 after the copy? The
// kernel's blocks (one a multiprocessor, 200 KiB of shared memory each)
// spin on the flag for at most half a second and record when they saw it.
// The argument picks where the source and the copy live: "mm" both from
// cudaMalloc, "pm", "mp", "pp" with the source, the copy or both from
// cudaMallocAsync's pool. The copy is checked element by element.
//
//   nvcc -O2 -arch=sm_90 -o ce_copy tools/bench/study/ce_copy.cu -lcuda && ./ce_copy pp
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>

__global__ void spin(volatile unsigned int *flag, unsigned long long limit_ns, unsigned long long *seen) {
  extern __shared__ unsigned char smem[];
  if (threadIdx.x == 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    t = t0;
    unsigned int v = 0;
    while ((v = *flag) == 0) {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      if (t - t0 > limit_ns) break;
    }
    smem[0] = (unsigned char)v;
    seen[blockIdx.x] = v ? t - t0 : ~0ull;
  }
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { const char *s; cuGetErrorString(e_, &s); printf("%s: %s\n", #x, s); return 1; } } while (0)

int main(int argc, char **argv) {
  const size_t R = 4095, C = 4095, es = 2, sp = C * es, dp = 4096 * es;
  void *src, *dst;
  const char *kind = argc > 1 ? argv[1] : "mm";
  printf("src %s, dst %s\n", kind[0] == 'p' ? "pool" : "cudaMalloc", kind[1] == 'p' ? "pool" : "cudaMalloc");
  if (kind[0] == 'p') CK(cudaMallocAsync(&src, R * sp + 64, 0)); else CK(cudaMalloc(&src, R * sp + 64));
  if (kind[1] == 'p') CK(cudaMallocAsync(&dst, R * dp, 0)); else CK(cudaMalloc(&dst, R * dp));
  CK(cudaDeviceSynchronize());
  std::vector<unsigned short> h(R * C);
  for (size_t i = 0; i < h.size(); i++) h[i] = (unsigned short)(i * 2654435761u >> 7);
  CK(cudaMemcpy(src, h.data(), R * sp, cudaMemcpyHostToDevice));
  unsigned int *flag;
  unsigned long long *seen;
  CK(cudaMalloc(&flag, 4));
  CK(cudaMalloc(&seen, 132 * 8 * 4));
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int attr = 0;
  cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
  printf("SMs %d, stream mem ops attribute %d\n", sms, attr);
  // The copy alone, several times.
  for (int i = 0; i < 2; i++) {
    CK(cudaEventRecord(a, s2));
    CK(cudaMemcpy2DAsync(dst, dp, src, sp, sp, R, cudaMemcpyDeviceToDevice, s2));
    CK(cudaEventRecord(b, s2));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    printf("2D copy alone: %.1f us, %.2f TB/s read+written\n", ms * 1e3, 2.0 * R * sp / (ms * 1e-3) / 1e12);
  }
  // Checked.
  std::vector<unsigned short> g(R * 4096);
  CK(cudaMemcpy(g.data(), dst, R * dp, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t r = 0; r < R; r++) for (size_t c = 0; c < C; c++) bad += g[r * 4096 + c] != h[r * C + c];
  printf("wrong elements: %zu\n", bad);
  // Beside a kernel that holds every multiprocessor until it sees the flag.
  CK(cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  for (int i = 0; i < 2; i++) {
    CK(cudaMemsetAsync(flag, 0, 4, s1));
    CK(cudaStreamSynchronize(s1));
    spin<<<sms, 384, 200 * 1024, s1>>>(flag, 500000000ull, seen);
    CK(cudaGetLastError());
    CK(cudaEventRecord(a, s2));
    CK(cudaMemcpy2DAsync(dst, dp, src, sp, sp, R, cudaMemcpyDeviceToDevice, s2));
    CK(cudaEventRecord(b, s2));
    CD(cuStreamWriteValue32((CUstream)s2, (CUdeviceptr)flag, 1, 0));
    CK(cudaStreamSynchronize(s2));
    CK(cudaStreamSynchronize(s1));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    std::vector<unsigned long long> hs(sms);
    CK(cudaMemcpy(hs.data(), seen, sms * 8, cudaMemcpyDeviceToHost));
    unsigned long long lo = ~0ull, hi = 0; int missed = 0;
    for (int k = 0; k < sms; k++) { if (hs[k] == ~0ull) missed++; else { lo = hs[k] < lo ? hs[k] : lo; hi = hs[k] > hi ? hs[k] : hi; } }
    printf("beside the spinning kernel: copy %.1f us; blocks that saw the flag %d of %d, after %.1f-%.1f us\n",
           ms * 1e3, sms - missed, sms, lo / 1e3, hi / 1e3);
  }
  printf("done\n");
  return 0;
}
