// A study, not part of the library: hand-written reductions of float32 on
// the H200 in the shapes generated reduction kernels could take: a whole
// array (sum of squares, a device-filling grid of blocks, U accumulators
// of 16-byte loads, the last block combining the partial results), rows
// (a block or a warp per row) and columns (32 x TY threads, V columns a
// thread, the rows split over blockIdx.y, a second kernel over the splits),
// and the host cost of a stream-ordered allocation. src/codegen/reduction.c
// follows what it measured (docs/PERFORMANCE.md).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o reduce_shapes reduce_shapes.cu && ./reduce_shapes
#include "common.cuh"
#include <cuda.h>
#include <chrono>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <int NT> __device__ __forceinline__ float block_sum(float v) {
  __shared__ float s[NT / 32];
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) s[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) { v = threadIdx.x < NT / 32 ? s[threadIdx.x] : 0.f; v = warp_sum(v); }
  return v;
}
// Full reduction of x*x, last block sums partials in order.
template <int NT, int U>
__global__ void __launch_bounds__(NT) full(size_t n4, const float4 *__restrict__ x, float *part, unsigned *count, float *out) {
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; u++) acc[u] = 0.f;
  size_t stride = (size_t)gridDim.x * NT;
  size_t i = blockIdx.x * (size_t)NT + threadIdx.x;
  for (; i + (U - 1) * stride < n4; i += U * stride) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = x[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
  }
  for (; i < n4; i += stride) { float4 v = x[i]; acc[0] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
  float a = 0.f;
#pragma unroll
  for (int u = 0; u < U; u++) a += acc[u];
  a = block_sum<NT>(a);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    part[blockIdx.x] = a;
    __threadfence();
    last = atomicAdd(count, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float b = 0.f;
  for (unsigned k = threadIdx.x; k < gridDim.x; k += NT) b += ((volatile float *)part)[k];
  b = block_sum<NT>(b);
  if (threadIdx.x == 0) { *out = b; *count = 0; }
}
// Rows: one block per row, float4.
template <int NT, int U>
__global__ void __launch_bounds__(NT) rows_block(unsigned cols4, const float4 *__restrict__ x, float *out) {
  const float4 *row = x + (size_t)blockIdx.x * cols4;
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; u++) acc[u] = 0.f;
  unsigned i = threadIdx.x;
  for (; i + (U - 1) * NT < cols4; i += U * NT) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = row[i + u * NT];
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < cols4; i += NT) { float4 v = row[i]; acc[0] += v.x + v.y + v.z + v.w; }
  float a = 0.f;
#pragma unroll
  for (int u = 0; u < U; u++) a += acc[u];
  a = block_sum<NT>(a);
  if (threadIdx.x == 0) out[blockIdx.x] = a;
}
// Rows: one warp per row.
template <int NT, int U>
__global__ void __launch_bounds__(NT) rows_warp(unsigned rows, unsigned cols4, const float4 *__restrict__ x, float *out) {
  unsigned r = blockIdx.x * (NT / 32) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const float4 *row = x + (size_t)r * cols4;
  float acc[U];
#pragma unroll
  for (int u = 0; u < U; u++) acc[u] = 0.f;
  unsigned i = threadIdx.x & 31;
  for (; i + (U - 1) * 32 < cols4; i += U * 32) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = row[i + u * 32];
#pragma unroll
    for (int u = 0; u < U; u++) acc[u] += v[u].x + v[u].y + v[u].z + v[u].w;
  }
  for (; i < cols4; i += 32) { float4 v = row[i]; acc[0] += v.x + v.y + v.z + v.w; }
  float a = 0.f;
#pragma unroll
  for (int u = 0; u < U; u++) a += acc[u];
  a = warp_sum(a);
  if ((threadIdx.x & 31) == 0) out[r] = a;
}
// Columns: block 32 x TY; each thread V columns; blockIdx.y is a row split; partial[split][col].
template <int TY, int V, int U>
__global__ void __launch_bounds__(32 * TY) cols_part(unsigned rows, unsigned cols, const float *__restrict__ x, float *part, unsigned rows_per_split) {
  const unsigned c = (blockIdx.x * 32 + (threadIdx.x & 31)) * V;
  const unsigned ty = threadIdx.x >> 5;
  const unsigned r0 = blockIdx.y * rows_per_split, r1 = min(rows, r0 + rows_per_split);
  vec<float, V> acc[U];
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int j = 0; j < V; j++) acc[u].v[j] = 0.f;
  unsigned r = r0 + ty;
  for (; r + (U - 1) * TY < r1; r += U * TY) {
    vec<float, V> v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = *(const vec<float, V> *)(x + (size_t)(r + u * TY) * cols + c);
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int j = 0; j < V; j++) acc[u].v[j] += v[u].v[j];
  }
  for (; r < r1; r += TY) { vec<float, V> v = *(const vec<float, V> *)(x + (size_t)r * cols + c);
#pragma unroll
    for (int j = 0; j < V; j++) acc[0].v[j] += v.v[j]; }
  __shared__ float s[TY][32 * V + 1];
#pragma unroll
  for (int j = 0; j < V; j++) {
    float a = 0.f;
#pragma unroll
    for (int u = 0; u < U; u++) a += acc[u].v[j];
    s[ty][(threadIdx.x & 31) * V + j] = a;
  }
  __syncthreads();
  for (unsigned k = threadIdx.x; k < 32 * V; k += 32 * TY) {
    float a = 0.f;
    for (int y = 0; y < TY; y++) a += s[y][k];
    part[(size_t)blockIdx.y * cols + blockIdx.x * 32 * V + k] = a;
  }
}
__global__ void cols_final(unsigned cols, unsigned splits, const float *part, float *out) {
  unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float a = 0.f;
  for (unsigned s = 0; s < splits; s++) a += part[(size_t)s * cols + c];
  out[c] = a;
}
int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t n = (size_t)1 << 28;
  float *x; CK(cudaMalloc(&x, n * 4));
  fill_rand<<<1024, 256>>>(x, n, 5);
  double copy = copy_bw(n * 4);
  printf("copy %.1f GB/s\n", copy);
  std::vector<float> hx(n);
  CK(cudaMemcpy(hx.data(), x, n * 4, cudaMemcpyDeviceToHost));
  double want = 0; for (size_t i = 0; i < n; i++) want += (double)hx[i] * hx[i];
  float *part, *out; unsigned *count;
  CK(cudaMalloc(&part, 64 << 20)); CK(cudaMalloc(&out, 16384 * 4 * 2)); CK(cudaMalloc(&count, 4)); CK(cudaMemset(count, 0, 4));
  auto fullrun = [&](const char *nm, auto k, int NT) {
    int per; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, NT, 0));
    for (int m : {1, 2, 4}) {
      unsigned grid = sms * per * m / (m == 4 ? 1 : 1);
      if (m == 4) grid = sms * per * 4;
      double ms = time_ms([&] { k<<<grid, NT>>>(n / 4, (const float4 *)x, part, count, out); });
      float got; CK(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
      printf("full %-14s per=%d x%d  %.3f of copy  rel err %.2e\n", nm, per, m, n * 4 / (ms * 1e-3) / 1e9 / copy, fabs(got - want) / want);
    }
  };
  fullrun("NT256 U1", full<256, 1>, 256);
  fullrun("NT256 U2", full<256, 2>, 256);
  fullrun("NT256 U4", full<256, 4>, 256);
  fullrun("NT512 U4", full<512, 4>, 512);
  fullrun("NT1024 U2", full<1024, 2>, 1024);
  const unsigned R = 16384, C = 16384;
  std::vector<double> wr(R, 0), wc(C, 0);
  for (size_t r = 0; r < R; r++) for (size_t c = 0; c < C; c++) { wr[r] += hx[r * C + c]; wc[c] += hx[r * C + c]; }
  std::vector<float> ho(C);
  auto check = [&](std::vector<double> &w) { CK(cudaMemcpy(ho.data(), out, C * 4, cudaMemcpyDeviceToHost)); double e = 0; for (unsigned i = 0; i < C; i++) e = fmax(e, fabs(ho[i] - w[i])); return e; };
  auto rb = [&](const char *nm, auto k, int NT) {
    CK(cudaMemset(out, 0xFF, C * 4));
    double ms = time_ms([&] { k<<<R, NT>>>(C / 4, (const float4 *)x, out); });
    printf("rows block %-10s %.3f of copy  max err %.2e\n", nm, n * 4 / (ms * 1e-3) / 1e9 / copy, check(wr));
  };
  rb("NT128 U4", rows_block<128, 4>, 128);
  rb("NT256 U2", rows_block<256, 2>, 256);
  rb("NT256 U4", rows_block<256, 4>, 256);
  rb("NT512 U2", rows_block<512, 2>, 512);
  auto rw = [&](const char *nm, auto k, int NT) {
    CK(cudaMemset(out, 0xFF, C * 4));
    double ms = time_ms([&] { k<<<R / (NT / 32), NT>>>(R, C / 4, (const float4 *)x, out); });
    printf("rows warp %-10s %.3f of copy  max err %.2e\n", nm, n * 4 / (ms * 1e-3) / 1e9 / copy, check(wr));
  };
  rw("NT256 U4", rows_warp<256, 4>, 256);
  rw("NT256 U8", rows_warp<256, 8>, 256);
  rw("NT128 U8", rows_warp<128, 8>, 128);
  auto cr = [&](const char *nm, auto k, int TY, int V, unsigned splits) {
    CK(cudaMemset(out, 0xFF, C * 4));
    unsigned rps = (R + splits - 1) / splits;
    dim3 grid(C / (32 * V), splits);
    double ms = time_ms([&] { k<<<grid, 32 * TY>>>(R, C, x, part, rps); cols_final<<<(C + 255) / 256, 256>>>(C, splits, part, out); });
    printf("cols %-12s splits=%-3u blocks=%-6u %.3f of copy  max err %.2e\n", nm, splits, grid.x * grid.y, n * 4 / (ms * 1e-3) / 1e9 / copy, check(wc));
  };
  for (unsigned sp : {8u, 16u, 32u, 64u}) {
    cr("TY8 V4 U4", cols_part<8, 4, 4>, 8, 4, sp);
    cr("TY8 V1 U4", cols_part<8, 1, 4>, 8, 1, sp);
    cr("TY16 V2 U4", cols_part<16, 2, 4>, 16, 2, sp);
    cr("TY8 V2 U8", cols_part<8, 2, 8>, 8, 2, sp);
  }
  // Host cost of a stream-ordered allocation and free.
  cudaStream_t st; CK(cudaStreamCreate(&st));
  void *p;
  for (int i = 0; i < 100; i++) { CK(cudaMallocAsync(&p, 8192, st)); CK(cudaFreeAsync(p, st)); }
  CK(cudaStreamSynchronize(st));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000; i++) { CK(cudaMallocAsync(&p, 8192, st)); CK(cudaFreeAsync(p, st)); }
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaStreamSynchronize(st));
  printf("mallocAsync+freeAsync host %.2f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 10000);
  return 0;
}
