// A study, not part of the library: jitk::mm::ffma_gemm (the float32 FFMA
// routine on cp.async of templates/jitk/matmul.cuh) with each tile shape
// listed in TILES, against cuBLAS, on products small enough that the wide
// 128 x 256 tiles leave multiprocessors idle. Timings are medians of CUDA
// events (tools/bench/study/common.cuh); before each checked run D is
// NaN-poisoned, and a sample of its elements (every one when small) is
// compared with float64 host dot products. The edge shapes are checked in
// every layout, with leading dimensions and offsets that defeat the vector
// copies.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o sgemm_tiles tools/bench/study/sgemm_tiles.cu -lcublas
//   ./sgemm_tiles [M,N,K ...]
#include "common.cuh"
#include <cmath>
#include <cstring>
#include <cublas_v2.h>
#include "../../../templates/jitk/matmul.cuh"
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { printf("%s:%d cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1);} } while (0)

// name, BN, warps WM x WN, lane rows LR, stages, blocks a multiprocessor
// the launch bounds ask for.
#define TILES(X)                 \
  X(w256, 256, 2, 4, 4, 3, 1)    \
  X(t128x16x8, 128, 2, 2, 4, 3, 2) \
  X(t128x16x4, 128, 2, 4, 4, 3, 1) \
  X(t64x16x4, 64, 2, 2, 4, 3, 2) \
  X(t64x16x4s4, 64, 2, 2, 4, 4, 2) \
  X(t64x8x4, 64, 4, 2, 4, 3, 2)  \
  X(t32x8x4, 32, 4, 1, 4, 3, 4)  \
  X(t32x8x4s4, 32, 4, 1, 4, 4, 4) \
  X(t32x8x4b, 32, 2, 2, 8, 3, 4)

template <typename C, int STAGES, int MINB, bool A_K, bool B_N>
__global__ void __launch_bounds__(C::THREADS, MINB)
    kt(const float *a, const float *b, float *d, long long M, long long N, long long K, long long lda,
       long long ldb, long long ldd, unsigned tiles_m, unsigned tiles_n) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned tm, tn;
  jitk::mm::tile_of(blockIdx.x, tiles_m, tiles_n, tm, tn);
  auto store = [&](long long row, long long col, float v) {
    if (row >= M || col >= N) return;
    d[row * ldd + col] = v;
  };
  jitk::mm::ffma_gemm<C, A_K, B_N, STAGES>(a, b, M, N, K, lda, ldb, (long long)tm * 128,
                                           (long long)tn * C::BN, smem, store);
}
template <typename C, int STAGES, int MINB, bool A_K, bool B_N>
static void run_tile(const float *a, const float *b, float *d, int M, int N, int K, int lda, int ldb,
                     int ldd) {
  const unsigned tm = (M + 127) / 128, tn = (N + C::BN - 1) / C::BN;
  constexpr int bytes = jitk::mm::ffma_smem<C, STAGES>();
  static bool set = false;
  if (!set) {
    CK(cudaFuncSetAttribute(kt<C, STAGES, MINB, A_K, B_N>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    set = true;
  }
  if (tm * tn)
    kt<C, STAGES, MINB, A_K, B_N><<<tm * tn, C::THREADS, bytes>>>(a, b, d, M, N, K, lda, ldb, ldd,
                                                                 tm, tn);
}

static cublasHandle_t hb;
static void blas(bool A_K, bool B_N, const float *a, const float *b, float *d, int M, int N, int K,
                 int lda, int ldb, int ldd) {
  const float one = 1, zero = 0;  // D^T (N x M, col-major) = B^T A^T
  CB(cublasSgemm(hb, B_N ? CUBLAS_OP_N : CUBLAS_OP_T, A_K ? CUBLAS_OP_N : CUBLAS_OP_T, N, M, K,
                 &one, b, ldb, a, lda, &zero, d, ldd));
}

static int fails = 0;
template <bool A_K, bool B_N>
static void run_case(int M, int N, int K, int lda, int ldb, int off, bool timed) {
  if (!lda) lda = A_K ? K : M;
  if (!ldb) ldb = B_N ? N : K;
  if (lda < 1) lda = 1;
  if (ldb < 1) ldb = 1;
  const int ldd = N;
  const size_t na = (size_t)lda * (A_K ? M : K) + off + 8, nb = (size_t)ldb * (B_N ? K : N) + off + 8,
               nd = (size_t)M * N + 1;
  float *a, *b, *d;
  CK(cudaMalloc(&a, na * 4));
  CK(cudaMalloc(&b, nb * 4));
  CK(cudaMalloc(&d, nd * 4));
  fill_rand<<<1024, 256>>>(a, na, 1);
  fill_rand<<<1024, 256>>>(b, nb, 2);
  const float *pa = a + off, *pb = b + off;
  std::vector<float> ha(na), hbv(nb), hd(nd);
  CK(cudaMemcpy(ha.data(), a, na * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hbv.data(), b, nb * 4, cudaMemcpyDeviceToHost));
  const size_t total = (size_t)M * N;
  const size_t samples = total <= 200000 ? total : 4096;
  std::vector<size_t> sidx(samples);
  std::vector<double> sref(samples), smag(samples);
  unsigned h = 12345;
  for (size_t s = 0; s < samples; s++) {
    size_t idx = s;
    if (samples != total) {
      h = h * 1664525u + 1013904223u;
      idx = s == 0 ? total - 1 : (size_t)(h % (unsigned)total);
    }
    const int i = (int)(idx / N), j = (int)(idx % N);
    double ref = 0, mag = 0;
    for (int kk = 0; kk < K; kk++) {
      const double x = ha[off + (A_K ? (size_t)i * lda + kk : (size_t)kk * lda + i)];
      const double y = hbv[off + (B_N ? (size_t)kk * ldb + j : (size_t)j * ldb + kk)];
      ref += x * y;
      mag += fabs(x * y);
    }
    sidx[s] = idx;
    sref[s] = ref;
    smag[s] = mag;
  }
  // Worst error of D against the samples, relative to the sum of |products|;
  // a NaN (the poison left unwritten) counts as infinite.
  auto check = [&](auto launch) {
    CK(cudaMemset(d, 0xFF, nd * 4));
    launch();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    CK(cudaMemcpy(hd.data(), d, nd * 4, cudaMemcpyDeviceToHost));
    double w = 0;
    for (size_t s = 0; s < samples; s++) {
      const double e = fabs((double)hd[sidx[s]] - sref[s]) / (smag[s] > 0 ? smag[s] : 1.0);
      if (e != e) return (double)INFINITY;
      if (e > w) w = e;
    }
    return w;
  };
  printf("%5d %5d %5d lda %5d ldb %5d off %d %s%s", M, N, K, lda, ldb, off, A_K ? "A:row" : "A:col",
         B_N ? " B:row" : " B:col");
  bool ok = true;
  const double wb = check([&] { blas(A_K, B_N, pa, pb, d, M, N, K, lda, ldb, ldd); });
  if (!(wb <= 1e-6)) ok = false;
// A lambda launching the kernel of a tile of TILES on this case.
#define TILE_RUN(BN, WM, WN, LR, ST, MB)                                                          \
  [&] {                                                                                           \
    run_tile<jitk::mm::ffma_tile<BN, WM, WN, LR>, ST, MB, A_K, B_N>(pa, pb, d, M, N, K, lda, ldb, \
                                                                    ldd);                         \
  }
#define CHECK_TILE(NAME, BN, WM, WN, LR, ST, MB)              \
  {                                                           \
    const double w = check(TILE_RUN(BN, WM, WN, LR, ST, MB)); \
    if (!(w <= 1e-6)) {                                       \
      ok = false;                                             \
      printf("  %s FAIL %.1e", #NAME, w);                     \
    }                                                         \
  }
  TILES(CHECK_TILE)
  if (!ok) fails++;
  printf("  %s", ok ? "ok" : "FAIL");
  if (timed) {
    const double fl = 2.0 * M * N * K;
    const double tb = time_ms([&] { blas(A_K, B_N, pa, pb, d, M, N, K, lda, ldb, ldd); });
    printf("\n    cublas %7.1f us %5.1f TF |", tb * 1e3, fl / tb / 1e9);
#define TIME_TILE(NAME, BN, WM, WN, LR, ST, MB)                 \
  {                                                             \
    const double t = time_ms(TILE_RUN(BN, WM, WN, LR, ST, MB)); \
    printf(" %s %.1f (%.2f)", #NAME, t * 1e3, tb / t);          \
  }
    TILES(TIME_TILE)
  }
  printf("\n");
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(d));
}

int main(int argc, char **argv) {
  CB(cublasCreate(&hb));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs; per tile: time in us (cuBLAS's time / its time)\n", p.name,
         p.multiProcessorCount);
#define ATTR(NAME, BN, WM, WN, LR, ST, MB)                                                      \
  {                                                                                             \
    using C = jitk::mm::ffma_tile<BN, WM, WN, LR>;                                              \
    cudaFuncAttributes fa;                                                                      \
    int per = 0;                                                                                \
    constexpr int bytes = jitk::mm::ffma_smem<C, ST>();                                         \
    CK(cudaFuncSetAttribute(kt<C, ST, MB, true, true>,                                          \
                            cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));               \
    CK(cudaFuncGetAttributes(&fa, kt<C, ST, MB, true, true>));                                  \
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kt<C, ST, MB, true, true>,           \
                                                     C::THREADS, bytes));                       \
    printf("%-10s 128 x %3d, %3d threads, %2d x %d a lane, %d stages: %3d regs, %zu B local, " \
           "%6d B smem, %d blocks/SM\n",                                                        \
           #NAME, BN, C::THREADS, C::TM, C::TN, ST, fa.numRegs, fa.localSizeBytes, bytes, per); \
  }
  TILES(ATTR)
  // Each tile's rate with 1 to 4 of its blocks on every multiprocessor:
  // sms x c tiles (12 x 11 c for 132), K = 2048, A and B row-major.
  {
    const int sms = p.multiProcessorCount, rows = sms % 12 == 0 ? 12 : 1, cols = sms / rows;
    printf("rate (TFLOP/s) with c blocks on every multiprocessor, c = 1 2 3 4 (K = 2048)\n");
    const int K = 2048;
    const size_t most = (size_t)128 * rows * K + (size_t)K * 256 * cols * 4 + 8;
    float *a, *b, *d;
    CK(cudaMalloc(&a, most * 4));
    CK(cudaMalloc(&b, most * 4));
    CK(cudaMalloc(&d, (size_t)128 * rows * 256 * cols * 4 * 4));
    fill_rand<<<1024, 256>>>(a, most, 1);
    fill_rand<<<1024, 256>>>(b, most, 2);
#define RATE(NAME, BN, WM, WN, LR, ST, MB)                                                     \
  {                                                                                            \
    printf("  %-10s", #NAME);                                                                  \
    for (int c = 1; c <= 4; c++) {                                                             \
      const int M = 128 * rows, N = BN * cols * c;                                             \
      const double t = time_ms([&] {                                                           \
        run_tile<jitk::mm::ffma_tile<BN, WM, WN, LR>, ST, MB, true, true>(a, b, d, M, N, K, K, \
                                                                          N, N);               \
      });                                                                                      \
      printf(" %6.2f", 2.0 * M * N * K / t / 1e9);                                             \
    }                                                                                          \
    printf("\n");                                                                              \
  }
    TILES(RATE)
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(d));
  }
  if (argc > 1) {
    for (int i = 1; i < argc; i++) {
      int m, n, k;
      if (sscanf(argv[i], "%d,%d,%d", &m, &n, &k) == 3) run_case<true, true>(m, n, k, 0, 0, 0, true);
    }
  } else {
    const int shapes[][3] = {{1000, 1030, 999}, {1000, 1000, 1000}, {2000, 2000, 999},
                             {512, 512, 512},   {768, 768, 768},    {1024, 1024, 4096},
                             {1536, 1536, 1536}, {2048, 2048, 2048}, {3000, 3000, 3000},
                             {4096, 4096, 4096}, {256, 4096, 4096},  {4096, 256, 4096},
                             {640, 640, 640},   {2048, 512, 2048}};
    for (auto &s : shapes) run_case<true, true>(s[0], s[1], s[2], 0, 0, 0, true);
    run_case<false, true>(1000, 1030, 999, 0, 0, 0, true);
    run_case<true, false>(1000, 1030, 999, 0, 0, 0, true);
  }
  // edge shapes, checked only, every layout
  run_case<true, true>(130, 131, 1, 0, 0, 0, false);
  run_case<true, true>(129, 257, 0, 0, 0, 0, false);
  run_case<true, true>(256, 256, 36, 0, 0, 1, false);
  run_case<true, true>(256, 256, 36, 40, 260, 0, false);
  run_case<false, true>(256, 384, 20, 264, 388, 0, false);
  run_case<true, false>(384, 256, 44, 48, 52, 0, false);
  run_case<false, false>(257, 255, 33, 0, 0, 0, false);
  run_case<false, false>(256, 256, 32, 260, 36, 0, false);
  run_case<true, true>(1, 1, 5, 0, 0, 3, false);
  run_case<true, true>(384, 384, 7, 8, 384, 0, false);
  run_case<true, false>(200, 70, 300, 0, 0, 1, false);
  run_case<false, true>(33, 97, 65, 0, 0, 0, false);
  printf("%s\n", fails ? "SOME CHECKS FAILED" : "all checks ok");
  CB(cublasDestroy(hb));
  return fails ? 1 : 0;
}
