// A study, not part of the library: hand-written kernels for
// y(r, c) = max(x(r, c) + b(c), 0) where x(r, c) = X[r + c * rows] is a
// transposed view, 16384^2 float32, in the shapes the tiled path of
// generated elementwise kernels could take: tile side S, V elements per
// access, NT threads, a device-filling or one-shot grid. It measured what
// src/codegen/elementwise.c now generates (docs/PERFORMANCE.md).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o transpose_tiles transpose_tiles.cu && ./transpose_tiles
#include "common.cuh"
template <int S, int V, int NT>
__global__ void __launch_bounds__(NT) tk(unsigned rows, unsigned cols, const float *__restrict__ X,
                                         const float *__restrict__ B, float *__restrict__ Y, unsigned ntr, unsigned ntc) {
  __shared__ float t[S][S + 1];
  constexpr int GR = S / V, CP = NT / GR;
  const int g = threadIdx.x % GR, cc = threadIdx.x / GR;
  const unsigned ntiles = ntr * ntc;
  for (unsigned tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    unsigned tr = tile / ntc, r0 = tr * S, c0 = (tile - tr * ntc) * S;
    vec<float, V> in[S / CP];
#pragma unroll
    for (int k = 0; k < S / CP; k++) {
      int c = cc + k * CP;
      in[k] = *(const vec<float, V> *)(X + (size_t)(c0 + c) * rows + r0 + g * V);
    }
#pragma unroll
    for (int k = 0; k < S / CP; k++) {
      int c = cc + k * CP;
#pragma unroll
      for (int j = 0; j < V; j++) t[g * V + j][c] = in[k].v[j];
    }
    __syncthreads();
    vec<float, V> bv = *(const vec<float, V> *)(B + c0 + g * V);
#pragma unroll
    for (int k = 0; k < S / CP; k++) {
      int r = cc + k * CP;
      vec<float, V> o;
#pragma unroll
      for (int j = 0; j < V; j++) o.v[j] = fmaxf(t[r][g * V + j] + bv.v[j], 0.f);
      *(vec<float, V> *)(Y + (size_t)(r0 + r) * cols + c0 + g * V) = o;
    }
    __syncthreads();
  }
}
int main() {
  const unsigned N = 16384;
  size_t n = (size_t)N * N;
  float *X, *B, *Y;
  CK(cudaMalloc(&X, n * 4)); CK(cudaMalloc(&B, N * 4)); CK(cudaMalloc(&Y, n * 4));
  fill_rand<<<1024, 256>>>(X, n, 1); fill_rand<<<64, 256>>>(B, N, 2);
  double copy = copy_bw(n * 4);
  printf("copy %.1f GB/s\n", copy);
  std::vector<float> hx(n), hb(N), hy(n);
  CK(cudaMemcpy(hx.data(), X, n * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(hb.data(), B, N * 4, cudaMemcpyDeviceToHost));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto run = [&](const char *name, auto kern, int S, int NT) {
    int per; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, NT, 0));
    unsigned nt = N / S;
    for (int mode = 0; mode < 2; mode++) {
      unsigned grid = mode == 0 ? sms * per : nt * nt;
      CK(cudaMemset(Y, 0xFF, n * 4));
      double ms = time_ms([&] { kern<<<grid, NT>>>(N, N, X, B, Y, nt, nt); });
      CK(cudaMemcpy(hy.data(), Y, n * 4, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t r = 0; r < N; r += 7) for (size_t c = 0; c < N; c++) { float w = fmaxf(hx[r + c * N] + hb[c], 0.f); if (hy[r * N + c] != w) bad++; }
      printf("%-28s %-7s per=%d  %.3f of copy  bad=%zu\n", name, mode ? "oneshot" : "fill", per, 2.0 * n * 4 / (ms * 1e-3) / 1e9 / copy, bad);
    }
  };
  run("S32 V1 NT256", tk<32, 1, 256>, 32, 256);
  run("S32 V4 NT256", tk<32, 4, 256>, 32, 256);
  run("S32 V4 NT128", tk<32, 4, 128>, 32, 128);
  run("S64 V4 NT256", tk<64, 4, 256>, 64, 256);
  run("S64 V4 NT512", tk<64, 4, 512>, 64, 512);
  run("S64 V1 NT256", tk<64, 1, 256>, 64, 256);
  run("S32 V2 NT256", tk<32, 2, 256>, 32, 256);
  run("S64 V2 NT256", tk<64, 2, 256>, 64, 256);
  return 0;
}
