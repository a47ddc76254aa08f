// A study, not part of the library: jitk::mm::simt_gemm (the FFMA tile
// routine of templates/jitk/matmul.cuh) in a kernel shaped like the one
// jitk generates, against cuBLAS and against the routine it replaced (kept
// below as simt_gemm_old for an A/B). Timings are medians of CUDA events;
// D is NaN-poisoned before each checked run; correctness is the relative L2
// distance to cuBLAS and a sample of elements against float64 host dot
// products (plus small edge shapes against the host only).
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o sgemm tools/bench/study/sgemm.cu -lcublas -lcuda && ./sgemm
//   ./sgemm cubin FILE.cubin...   (a plan's kernel `matmul`, 4096^3, beside the routine here)
#include "common.cuh"
#include <cmath>
#include <cstring>
#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cuda.h>
#include "../../../templates/jitk/matmul.cuh"
#define CB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) { printf("%s:%d cublas %d\n", __FILE__, __LINE__, (int)s_); exit(1);} } while (0)

namespace oldk {
// BM = BN = 128, BK = 8, 256 threads as 16 x 16, each 8 x 8 outputs.
// A_K: A is K-contiguous (row-major); B_N: B is N-contiguous (row-major).
template <bool A_K, bool B_N, typename TA, typename TB, typename ACC, typename Store>
__device__ __forceinline__ void simt_gemm_old(const TA *__restrict__ A, const TB *__restrict__ B,
                                          long long M, long long N, long long K, long long lda,
                                          long long ldb, long long m0, long long n0,
                                          const Store &store) {
  constexpr int BM = 128, BN = 128, BK = 8;
  __shared__ ACC As[2][BK][BM], Bs[2][BK][BN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  ACC acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = ACC(0);
  ACC ra[4], rb[4];
  // Element e of a tile, in the order that walks global memory.
  auto load = [&](long long k0) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int e = tid + i * 256;
      const int am = A_K ? e / BK : e % BM, ak = A_K ? e % BK : e / BM;
      const long long gm = m0 + am, gk = k0 + ak;
      ra[i] = gm < M && gk < K ? static_cast<ACC>(A_K ? A[gm * lda + gk] : A[gk * lda + gm])
                               : ACC(0);
      const int bn = B_N ? e % BN : e / BK, bk = B_N ? e / BN : e % BK;
      const long long gn = n0 + bn, gk2 = k0 + bk;
      rb[i] = gn < N && gk2 < K ? static_cast<ACC>(B_N ? B[gk2 * ldb + gn] : B[gn * ldb + gk2])
                                : ACC(0);
    }
  };
  auto stash = [&](int buf) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int e = tid + i * 256;
      As[buf][A_K ? e % BK : e / BM][A_K ? e / BK : e % BM] = ra[i];
      Bs[buf][B_N ? e / BN : e % BK][B_N ? e % BN : e / BK] = rb[i];
    }
  };
  const long long tiles = (K + BK - 1) / BK;
  load(0);
  stash(0);
  __syncthreads();
  for (long long t = 0; t < tiles; t++) {
    const int buf = (int)(t & 1);
    if (t + 1 < tiles) load((t + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      ACC a[8], b[8];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        a[i] = As[buf][kk][ty * 4 + i];
        a[i + 4] = As[buf][kk][64 + ty * 4 + i];
        b[i] = Bs[buf][kk][tx * 4 + i];
        b[i + 4] = Bs[buf][kk][64 + tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] += a[i] * b[j];
    }
    if (t + 1 < tiles) stash(buf ^ 1);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
      store(m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4),
            n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4), acc[i][j]);
}

}  // namespace oldk

// The generated kernel, simplified: one 128 x 128 tile per block. VER 0: the
// routine as jitk emits it; 1: the old routine; 2: the routine under
// __launch_bounds__(256, 2), registers capped at 128 for 2 blocks per SM.
template <int VER, bool A_K, bool B_N, typename T, typename ACC>
__global__ void __launch_bounds__(256, VER == 2 ? 2 : 1) k(const T *a, const T *b, T *d, long long M, long long N, long long K,
                                         long long lda, long long ldb, long long ldd, unsigned tiles_m,
                                         unsigned tiles_n) {
  unsigned tm, tn;
  jitk::mm::tile_of(blockIdx.x, tiles_m, tiles_n, tm, tn);
  auto store = [&](long long row, long long col, ACC v) {
    if (row >= M || col >= N) return;
    d[row * ldd + col] = static_cast<T>(v);
  };
  if (VER != 1)
    jitk::mm::simt_gemm<A_K, B_N, T, T, ACC>(a, b, M, N, K, lda, ldb, (long long)tm * 128, (long long)tn * 128, store);
  else
    oldk::simt_gemm_old<A_K, B_N, T, T, ACC>(a, b, M, N, K, lda, ldb, (long long)tm * 128, (long long)tn * 128, store);
}

// The wide tile of the cp.async routine (float32 only): one 128 x 256 tile
// per block, STAGES K-tiles of BK in flight in dynamic shared memory;
// SNAKE: the FFMA order.
template <int STAGES, int BK, bool SNAKE, bool A_K, bool B_N>
__global__ void __launch_bounds__(256, 1) kw(const float *a, const float *b, float *d, long long M, long long N,
                                             long long K, long long lda, long long ldb, long long ldd,
                                             unsigned tiles_m, unsigned tiles_n) {
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned tm, tn;
  jitk::mm::tile_of(blockIdx.x, tiles_m, tiles_n, tm, tn);
  auto store = [&](long long row, long long col, float v) {
    if (row >= M || col >= N) return;
    d[row * ldd + col] = v;
  };
  jitk::mm::ffma_gemm<jitk::mm::wide_tile, A_K, B_N, STAGES, BK, SNAKE>(
      a, b, M, N, K, lda, ldb, (long long)tm * 128, (long long)tn * 256, smem, store);
}
template <int STAGES, int BK, bool SNAKE, bool A_K, bool B_N>
static void wide(const float *a, const float *b, float *d, int M, int N, int K, int lda, int ldb, int ldd) {
  const unsigned tm = (M + 127) / 128, tn = (N + 255) / 256;
  const int bytes = STAGES * 392 * BK * 4;
  static bool set = false;
  if (!set) { CK(cudaFuncSetAttribute(kw<STAGES, BK, SNAKE, A_K, B_N>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)); set = true; }
  if (tm * tn) kw<STAGES, BK, SNAKE, A_K, B_N><<<tm * tn, 256, bytes>>>(a, b, d, M, N, K, lda, ldb, ldd, tm, tn);
}
template <int STAGES, int BK, bool SNAKE, bool A_K, bool B_N, typename T>
static void wide(const T *, const T *, T *, int, int, int, int, int, int) {}
// The variants measured: (stages, BK, snake).
#define WIDE_VARIANTS(X) X(4, 8, false) X(4, 8, true) X(3, 16, false) X(3, 16, true) X(4, 16, true)

__global__ void fill_rand_d(double *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = (double)(h & 0xFFFFFF) / 16777216.0 * 2.0 - 1.0;
  }
}
__global__ void to_half(const float *s, __half *d, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x) d[i] = __float2half(s[i]);
}
static double hval(float x) { return x; }
static double hval(double x) { return x; }
static double hval(__half x) { return (double)__half2float(x); }
static void fill(float *p, size_t n, unsigned s) { fill_rand<<<1024, 256>>>(p, n, s); }
static void fill(double *p, size_t n, unsigned s) { fill_rand_d<<<1024, 256>>>(p, n, s); }
static void fill(__half *p, size_t n, unsigned s) {
  float *t; CK(cudaMalloc(&t, n * 4)); fill_rand<<<1024, 256>>>(t, n, s); to_half<<<1024, 256>>>(t, p, n); CK(cudaDeviceSynchronize()); CK(cudaFree(t));
}

static cublasHandle_t hb;
static void blas(bool A_K, bool B_N, const float *a, const float *b, float *d, int M, int N, int K, int lda, int ldb, int ldd) {
  const float one = 1, zero = 0;  // D^T (N x M, col-major) = B^T A^T
  CB(cublasSgemm(hb, B_N ? CUBLAS_OP_N : CUBLAS_OP_T, A_K ? CUBLAS_OP_N : CUBLAS_OP_T, N, M, K, &one, b, ldb, a, lda, &zero, d, ldd));
}
static void blas(bool A_K, bool B_N, const double *a, const double *b, double *d, int M, int N, int K, int lda, int ldb, int ldd) {
  const double one = 1, zero = 0;
  CB(cublasDgemm(hb, B_N ? CUBLAS_OP_N : CUBLAS_OP_T, A_K ? CUBLAS_OP_N : CUBLAS_OP_T, N, M, K, &one, b, ldb, a, lda, &zero, d, ldd));
}
static void blas(bool, bool, const __half *, const __half *, __half *, int, int, int, int, int, int) {}

static int fails = 0;
// One case: M x N x K, the layouts, leading dimensions (0: tight), an element
// offset of A and B from their allocations (misalignment), whether to time.
template <bool A_K, bool B_N, typename T, typename ACC>
static void run_case(const char *name, int M, int N, int K, int lda, int ldb, int off, bool timed, bool with_blas) {
  if (!lda) lda = A_K ? K : M;
  if (!ldb) ldb = B_N ? N : K;
  if (lda < 1) lda = 1;
  if (ldb < 1) ldb = 1;
  const int ldd = N;
  const size_t na = (size_t)lda * (A_K ? M : K) + off + 8, nb = (size_t)ldb * (B_N ? K : N) + off + 8, nd = (size_t)M * N + 1;
  T *a, *b, *d, *r;
  CK(cudaMalloc(&a, na * sizeof(T))); CK(cudaMalloc(&b, nb * sizeof(T)));
  CK(cudaMalloc(&d, nd * sizeof(T))); CK(cudaMalloc(&r, nd * sizeof(T)));
  fill(a, na, 1); fill(b, nb, 2);
  const T *pa = a + off, *pb = b + off;
  const unsigned tm = (M + 127) / 128, tn = (N + 127) / 128;
  const unsigned grid = tm * tn;
  auto mine = [&](int ver) {
    if (grid == 0) return;
    if (ver == 0) k<0, A_K, B_N, T, ACC><<<grid, 256>>>(pa, pb, d, M, N, K, lda, ldb, ldd, tm, tn);
    else if (ver == 2) k<2, A_K, B_N, T, ACC><<<grid, 256>>>(pa, pb, d, M, N, K, lda, ldb, ldd, tm, tn);
    else k<1, A_K, B_N, T, ACC><<<grid, 256>>>(pa, pb, d, M, N, K, lda, ldb, ldd, tm, tn);
  };
  // correctness of the new kernel
  CK(cudaMemset(d, 0xFF, nd * sizeof(T)));
  mine(0);
  CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
  std::vector<T> hd(nd), hr(nd), ha(na), hbv(nb);
  CK(cudaMemcpy(hd.data(), d, nd * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ha.data(), a, na * sizeof(T), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hbv.data(), b, nb * sizeof(T), cudaMemcpyDeviceToHost));
  double l2 = 0;
  if (with_blas && M > 0 && N > 0) {
    CK(cudaMemset(r, 0xFF, nd * sizeof(T)));
    blas(A_K, B_N, pa, pb, r, M, N, K, lda, ldb, ldd);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hr.data(), r, nd * sizeof(T), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) { double x = hval(hd[i]) - hval(hr[i]); num += x * x; den += hval(hr[i]) * hval(hr[i]); }
    l2 = den > 0 ? sqrt(num / den) : sqrt(num);
  }
  // Float64 host dot products of a sample of elements (every element when
  // small), computed once; worst_of gives an output's largest error against
  // them, relative to the sum of |products| (a NaN counts as infinite).
  const size_t total = (size_t)M * N;
  const size_t samples = total <= 300000 ? total : 4096;
  std::vector<size_t> sidx(samples);
  std::vector<double> sref(samples), smag(samples);
  unsigned h = 12345;
  for (size_t s = 0; s < samples; s++) {
    size_t idx;
    if (samples == total) idx = s;
    else { h = h * 1664525u + 1013904223u; idx = (size_t)(h % (unsigned)total); }
    if (s == 0 && samples != total) idx = total - 1;
    const int i = (int)(idx / N), j = (int)(idx % N);
    double ref = 0, mag = 0;
    for (int kk = 0; kk < K; kk++) {
      const double x = hval(ha[off + (A_K ? (size_t)i * lda + kk : (size_t)kk * lda + i)]);
      const double y = hval(hbv[off + (B_N ? (size_t)kk * ldb + j : (size_t)j * ldb + kk)]);
      ref += x * y; mag += fabs(x * y);
    }
    sidx[s] = idx; sref[s] = ref; smag[s] = mag;
  }
  auto worst_of = [&](const std::vector<T> &out) {
    double w = 0;
    for (size_t s = 0; s < samples; s++) {
      const double got = hval(out[sidx[s]]);
      const double e = fabs(got - sref[s]) / (smag[s] > 0 ? smag[s] : 1.0);
      if (e != e) return (double)INFINITY;
      if (e > w) w = e;
    }
    return w;
  };
  const double worst = worst_of(hd);
  // The wide variants, float32: poisoned, then the same samples.
  bool wide_ok = true;
  double wide_worst = 0;
  if (sizeof(T) == 4 && total > 0) {
    auto check = [&](auto launch) {
      CK(cudaMemset(d, 0xFF, nd * sizeof(T)));
      launch();
      CK(cudaDeviceSynchronize()); CK(cudaGetLastError());
      std::vector<T> hw(nd);
      CK(cudaMemcpy(hw.data(), d, nd * sizeof(T), cudaMemcpyDeviceToHost));
      const double w = worst_of(hw);
      if (!(w <= 1e-6)) wide_ok = false;
      if (w > wide_worst) wide_worst = w;
    };
#define WIDE_CHECK(S, BK, SN) check([&] { wide<S, BK, SN, A_K, B_N>(pa, pb, d, M, N, K, lda, ldb, ldd); });
    WIDE_VARIANTS(WIDE_CHECK)
  }
  const double tol_l2 = sizeof(ACC) == 8 ? 1e-13 : 1e-5, tol_s = sizeof(T) == 2 ? 2e-3 : sizeof(ACC) == 8 ? 1e-14 : 1e-6;
  const bool ok = (!with_blas || total == 0 || l2 <= tol_l2) && worst <= tol_s &&
                  wide_ok;
  if (!ok) fails++;
  printf("%-10s %5d %5d %5d lda %5d ldb %5d off %d  %s%s", name, M, N, K, lda, ldb, off, A_K ? "A:row" : "A:col", B_N ? " B:row" : " B:col");
  printf("  l2 %.2e  sample %.2e  wide %.1e %s", with_blas ? l2 : 0.0, worst, wide_worst, ok ? "ok  " : "FAIL");
  if (timed) {
    const double fl = 2.0 * M * N * K;
    double t_new = time_ms([&] { mine(0); });
    double t_lb2 = time_ms([&] { mine(2); });
    double t_old = time_ms([&] { mine(1); });
    double t_blas = time_ms([&] { blas(A_K, B_N, pa, pb, r, M, N, K, lda, ldb, ldd); });
    if (sizeof(T) == 4) {
      printf("\n    wide (stages, BK, snake):");
#define WIDE_TIME(S, BK, SN) printf(" %d/%d/%d %6.2f", S, BK, (int)SN, fl / time_ms([&] { wide<S, BK, SN, A_K, B_N>(pa, pb, d, M, N, K, lda, ldb, ldd); }) / 1e9);
      WIDE_VARIANTS(WIDE_TIME)
      const double t_blas2 = time_ms([&] { blas(A_K, B_N, pa, pb, r, M, N, K, lda, ldb, ldd); });
      printf("  cublas %6.2f TFLOP/s", fl / t_blas2 / 1e9);
    }
    // the old kernel's result too, as a sanity check of the A/B
    CK(cudaMemset(d, 0xFF, nd * sizeof(T))); mine(1); CK(cudaDeviceSynchronize());
    std::vector<T> ho(nd);
    CK(cudaMemcpy(ho.data(), d, nd * sizeof(T), cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < total; i++) { double x = hval(ho[i]) - hval(hr[i]); num += x * x; den += hval(hr[i]) * hval(hr[i]); }
    printf("  | new %6.2f  new/lb2 %6.2f  old %6.2f  cublas %6.2f TFLOP/s  new/cublas %.3f  new/old %.3f  (old l2 %.1e)",
           fl / t_new / 1e9, fl / t_lb2 / 1e9, fl / t_old / 1e9, fl / t_blas / 1e9, t_blas / t_new, t_old / t_new, sqrt(num / (den > 0 ? den : 1)));
  }
  printf("\n");
  CK(cudaFree(a)); CK(cudaFree(b)); CK(cudaFree(d)); CK(cudaFree(r));
}

int main(int argc, char **argv) {
  const bool quick = argc > 1 && !strcmp(argv[1], "quick");
  CB(cublasCreate(&hb));
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  {
    int per; cudaFuncAttributes fa;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k<0, true, true, float, float>, 256, 0));
    CK(cudaFuncGetAttributes(&fa, k<0, true, true, float, float>));
    printf("new f32 kernel: %d regs, %zu B static smem, %zu B local, %d blocks/SM\n", fa.numRegs, fa.sharedSizeBytes, fa.localSizeBytes, per);
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k<2, true, true, float, float>, 256, 0));
    CK(cudaFuncGetAttributes(&fa, k<2, true, true, float, float>));
    printf("lb2 f32 kernel: %d regs, %zu B static smem, %zu B local, %d blocks/SM\n", fa.numRegs, fa.sharedSizeBytes, fa.localSizeBytes, per);
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k<1, true, true, float, float>, 256, 0));
    CK(cudaFuncGetAttributes(&fa, k<1, true, true, float, float>));
    printf("old f32 kernel: %d regs, %zu B static smem, %zu B local, %d blocks/SM\n", fa.numRegs, fa.sharedSizeBytes, fa.localSizeBytes, per);
  }
  if (argc > 2 && !strcmp(argv[1], "cubin")) {
    // Each cubin named (a jitk plan's kernel `matmul`, compiled by NVRTC or
    // nvcc from the plan's source) timed at 4096^3, A and B row-major,
    // beside the wide routine compiled here and cuBLAS, same buffers.
    const int n = 4096;
    float *a, *b, *d;
    CK(cudaMalloc(&a, (size_t)n * n * 4)); CK(cudaMalloc(&b, (size_t)n * n * 4)); CK(cudaMalloc(&d, (size_t)n * n * 4));
    fill(a, (size_t)n * n, 1); fill(b, (size_t)n * n, 2);
    const double fl = 2.0 * n * n * n;
    for (int round = 0; round < 2; round++) {
      printf("wide here %.2f  cublas %.2f", fl / time_ms([&] { wide<3, 16, true, true, true>(a, b, d, n, n, n, n, n, n); }) / 1e9,
             fl / time_ms([&] { blas(true, true, a, b, d, n, n, n, n, n, n); }) / 1e9);
      for (int i = 2; i < argc; i++) {
        CUmodule mod;
        CUfunction fn;
        if (cuModuleLoad(&mod, argv[i]) != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, "matmul") != CUDA_SUCCESS) {
          printf("  %s: not loaded\n", argv[i]);
          continue;
        }
        const int smem = 3 * 392 * 16 * 4;
        cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
        long long v[11] = {n, n, n, n, n, n, n, 0, 0, 0, 0};
        unsigned tm = n / 128, tn = n / 256;
        const float *c = nullptr;
        void *args[] = {&a, &b, &c, &d, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &tm, &tn};
        const double ms = time_ms([&] { cuLaunchKernel(fn, tm * tn, 1, 1, 256, 1, 1, smem, 0, args, nullptr); });
        printf("  %s %.2f", argv[i], fl / ms / 1e9);
        cuModuleUnload(mod);
      }
      printf("\n");
    }
    CB(cublasDestroy(hb));
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "prof")) {
    // One launch each of the capped routine, cuBLAS and the wide routine at 4096^3 (A and B
    // row-major), for a profiler to compare.
    const int n = 4096;
    float *a, *b, *d;
    CK(cudaMalloc(&a, (size_t)n * n * 4)); CK(cudaMalloc(&b, (size_t)n * n * 4)); CK(cudaMalloc(&d, (size_t)n * n * 4));
    fill(a, (size_t)n * n, 1); fill(b, (size_t)n * n, 2);
    const unsigned t = n / 128;
    k<2, true, true, float, float><<<t * t, 256>>>(a, b, d, n, n, n, n, n, n, t, t);
    blas(true, true, a, b, d, n, n, n, n, n, n);
    wide<4, 8, false, true, true>(a, b, d, n, n, n, n, n, n);
    wide<3, 16, true, true, true>(a, b, d, n, n, n, n, n, n);
    CK(cudaDeviceSynchronize());
    CB(cublasDestroy(hb));
    return 0;
  }
  // timed shapes
  run_case<true, true, float, float>("f32", 4096, 4096, 4096, 0, 0, 0, true, true);
  run_case<false, true, float, float>("f32", 4096, 4096, 4096, 0, 0, 0, true, true);
  if (!quick) {
    run_case<true, false, float, float>("f32", 4096, 4096, 4096, 0, 0, 0, true, true);
    run_case<false, false, float, float>("f32", 4096, 4096, 4096, 0, 0, 0, true, true);
    run_case<true, true, float, float>("f32", 2048, 2048, 2048, 0, 0, 0, true, true);
  }
  run_case<true, true, float, float>("f32", 1000, 1030, 999, 0, 0, 0, true, true);
  run_case<true, true, float, float>("f32", 1000, 1032, 1000, 0, 0, 0, true, true);
  run_case<true, true, double, double>("f64", 512, 512, 512, 0, 0, 0, true, true);
  // edge shapes, checked only
  run_case<true, true, float, float>("f32", 130, 131, 1, 0, 0, 0, false, true);
  run_case<true, true, float, float>("f32", 129, 257, 0, 0, 0, 0, false, true);
  run_case<true, true, float, float>("f32", 256, 256, 36, 0, 0, 1, false, true);
  run_case<true, true, float, float>("f32", 256, 256, 36, 40, 260, 0, false, true);
  run_case<false, true, float, float>("f32", 256, 384, 20, 264, 388, 0, false, true);
  run_case<true, false, float, float>("f32", 384, 256, 44, 48, 52, 0, false, true);
  run_case<false, false, float, float>("f32", 257, 255, 33, 0, 0, 0, false, true);
  run_case<false, false, float, float>("f32", 256, 256, 32, 260, 36, 0, false, true);
  run_case<true, true, float, float>("f32", 1, 1, 5, 0, 0, 3, false, true);
  run_case<true, true, float, float>("f32", 384, 384, 7, 8, 384, 0, false, true);
  run_case<true, true, double, double>("f64", 300, 260, 37, 0, 0, 0, false, true);
  run_case<false, false, double, double>("f64", 256, 256, 40, 0, 0, 0, false, true);
  run_case<true, true, double, double>("f64", 256, 256, 40, 0, 0, 1, false, true);
  run_case<true, true, __half, float>("f16", 256, 384, 96, 0, 0, 0, false, false);
  run_case<false, false, __half, float>("f16", 200, 300, 77, 0, 0, 0, false, false);
  run_case<true, false, __half, float>("f16", 256, 256, 64, 0, 0, 2, false, false);
  printf("%s\n", fails ? "SOME CHECKS FAILED" : "all checks ok");
  CB(cublasDestroy(hb));
  return fails ? 1 : 0;
}
