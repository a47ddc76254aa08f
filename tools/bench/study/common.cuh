// Helpers of the hand-written study kernels in this folder: a random fill,
// CUDA-event timing (median of 20 after 3 of warm-up) and the
// device-to-device copy bandwidth the figures are ratios to.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
template <typename T, int V> struct alignas(sizeof(T) * V) vec { T v[V]; };
__global__ void fill_rand(float *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = (float)(h & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f;
  }
}
template <typename F> static double time_ms(F f, int reps = 20) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) f();
  std::vector<float> t;
  for (int i = 0; i < reps; i++) { CK(cudaEventRecord(a)); f(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms); }
  std::sort(t.begin(), t.end()); CK(cudaGetLastError());
  return t[t.size() / 2];
}
static double copy_bw(size_t bytes) {
  void *a, *b; CK(cudaMalloc(&a, bytes)); CK(cudaMalloc(&b, bytes));
  double ms = time_ms([&] { CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
  CK(cudaFree(a)); CK(cudaFree(b));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}
