// Study of the Hopper matmul tile loop (templates/jitk/matmul_sm90.cuh)
// outside jitk: relu(A @ B + bias) for bfloat16, float16 and tf32 on the
// shapes of jitk-bench matmul, timed with CUDA events against cuBLAS's
// plain GEMM in the same run, checked on sampled outputs against float64.
//   nvcc -O3 -std=c++17 -arch=sm_90a -I templates -o wgmma tools/bench/study/wgmma.cu -lcuda -lcublas
#include <cuda.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cmath>
#include "common.cuh"
#include <jitk/matmul_sm90.cuh>

using jitk::mm90::tensor_map;

template <int KIND> struct in_t;
template <> struct in_t<0> { typedef __half T; };
template <> struct in_t<1> { typedef __nv_bfloat16 T; };
template <> struct in_t<2> { typedef float T; };

template <int KIND, bool B_MN, int BN, int STAGES, typename TD, bool PAIRS = true, int MODE = 0>
__global__ void __launch_bounds__(384, 1)
    kern(const __grid_constant__ tensor_map ta, const __grid_constant__ tensor_map tb,
         const __grid_constant__ tensor_map td, bool use_td, TD *D,
         const float *bias, long long M, long long N, long long K, unsigned tiles_m, unsigned tiles_n,
         unsigned work) {
  extern __shared__ unsigned char smem[];
  auto value = [&](long long b, long long row, long long col, float v) -> TD {
    if (row >= M || col >= N) return TD(0.f);
    float x = MODE == 1 ? v : v + bias[col];
    return static_cast<TD>(x > 0.f ? x : 0.f);
  };
  auto put2 = [&](long long b, long long row, long long col, TD v0, TD v1) {
    if (row >= M) return;
    TD *p = D + (b * M + row) * N + col;
    if (PAIRS && col + 1 < N) {
      struct __align__(2 * sizeof(TD)) two { TD x, y; };
      *reinterpret_cast<two *>(p) = two{v0, v1};
    } else {
      if (col < N) p[0] = v0;
      if (col + 1 < N) p[1] = v1;
    }
  };
  jitk::mm90::gemm<KIND, false, B_MN, BN, STAGES, MODE == 4>(&ta, &tb, use_td ? &td : nullptr, K, tiles_m, tiles_n, work, smem, value, put2);
}

template <typename T> __global__ void fill(T *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = static_cast<T>((float)(h & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f);
  }
}

static void map3(tensor_map *m, CUtensorMapDataType dt, void *p, unsigned long long d0, unsigned long long d1,
                 unsigned long long d2, unsigned long long s1, unsigned long long s2, unsigned b0, unsigned b1) {
  cuuint64_t dims[3] = {d0, d1, d2}, strides[2] = {s1, s2};
  cuuint32_t box[3] = {b0, b1, 1}, es[3] = {1, 1, 1};
  CUresult r = cuTensorMapEncodeTiled((CUtensorMap *)m, dt, 3, p, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled failed %d\n", (int)r); exit(1); }
}

static int sms;

template <int KIND, bool B_MN, int BN, int STAGES, int MODE = 0>
static void run(const char *label, long long M, long long N, long long K, long long batch, bool timed) {
  typedef typename in_t<KIND>::T T;
  typedef typename std::conditional<KIND == 2, float, T>::type TD;
  const int ES = sizeof(T), BK = 128 / ES;
  T *A, *B; TD *D; float *bias;
  CK(cudaMalloc(&A, batch * M * K * ES)); CK(cudaMalloc(&B, batch * K * N * ES));
  CK(cudaMalloc(&D, batch * M * N * sizeof(TD))); CK(cudaMalloc(&bias, N * 4));
  fill<<<1024, 256>>>(A, batch * M * K, 11); fill<<<1024, 256>>>(B, batch * K * N, 22); fill<<<64, 256>>>(bias, N, 33);
  CK(cudaMemset(D, 0xff, batch * M * N * sizeof(TD)));  /* NaN poison */
  CUtensorMapDataType dt = KIND == 0 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : KIND == 1 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  tensor_map ta, tb;
  map3(&ta, dt, A, K, M, batch, K * ES, M * K * ES, BK, 128);
  if (B_MN) map3(&tb, dt, B, N, K, batch, N * ES, K * N * ES, 64, BK);   /* B[k][n] */
  else map3(&tb, dt, B, K, N, batch, K * ES, K * N * ES, BK, BN);       /* B[n][k] */
  tensor_map tdm;
  bool use_td = (N * sizeof(TD)) % 16 == 0 && MODE != 3;
  if (use_td)
    map3(&tdm, KIND == 2 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : dt, D, N, M, batch, N * sizeof(TD), M * N * sizeof(TD),
         128 / sizeof(TD), 64);
  unsigned tm = (M + 127) / 128, tn = (N + BN - 1) / BN, work = tm * tn * batch;
  unsigned grid = work < (unsigned)sms ? work : sms;
  int smem = jitk::mm90::smem_size<BN, STAGES>::value;
  auto k = kern<KIND, B_MN, BN, STAGES, TD, true, MODE>;
  CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  auto launch = [&] { k<<<grid, 384, smem>>>(ta, tb, tdm, use_td, D, bias, M, N, K, tm, tn, work); };
  launch(); CK(cudaDeviceSynchronize());
  double ms = timed ? time_ms(launch, 20) : 0;
  /* Sampled float64 check. */
  std::vector<T> hA(batch * M * K), hB(batch * K * N); std::vector<TD> hD(batch * M * N); std::vector<float> hb(N);
  CK(cudaMemcpy(hA.data(), A, hA.size() * ES, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hB.data(), B, hB.size() * ES, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hD.data(), D, hD.size() * sizeof(TD), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), bias, N * 4, cudaMemcpyDeviceToHost));
  int wrong = 0, nan = 0; double err2 = 0, ref2 = 0;
  const int samples = 3000;
  for (int s = 0; s < samples; s++) {
    unsigned h = s * 2654435761u + 7; h ^= h >> 15; h *= 0x2c1b3c6d; h ^= h >> 12;
    long long b = h % batch, i = (h / 7) % M, j = (h / 13) % N;
    if (s < 4) { i = s & 1 ? M - 1 : 0; j = s & 2 ? N - 1 : 0; }
    double r = 0;
    for (long long kk = 0; kk < K; kk++) {
      double a = (double)(float)hA[(b * M + i) * K + kk];
      double bb = B_MN ? (double)(float)hB[(b * K + kk) * N + j] : (double)(float)hB[(b * N + j) * K + kk];
      r += a * bb;
    }
    r += hb[j]; r = r > 0 ? r : 0;
    double d = (double)(float)hD[(b * M + i) * N + j];
    if (d != d) nan++;
    err2 += (d - r) * (d - r); ref2 += r * r;
    if (fabs(d - r) > 2e-2 * (fabs(r) + sqrt((double)K) * 0.1)) wrong++;
  }
  /* Every element written (no NaN left from the poison). */
  long long left = 0;
  for (size_t q = 0; q < hD.size(); q++) { float v = (float)hD[q]; if (v != v) left++; }
  double tf = timed ? 2.0 * M * N * K * batch / (ms * 1e-3) / 1e12 : 0;
  printf("%-34s %6lldx%-6lldx%-6lld b%-3lld %8.1f TFLOP/s  relL2 %.2e  wrong %d  unwritten %lld\n", label, M, N, K,
         batch, tf, sqrt(err2 / (ref2 + 1e-300)), wrong, left);
  CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D)); CK(cudaFree(bias));
}

static void cublas_ref(const char *label, cudaDataType dt, cublasComputeType_t ct, int es, long long M, long long N, long long K) {
  cublasHandle_t h; cublasCreate(&h);
  void *A, *B, *D;
  CK(cudaMalloc(&A, M * K * es)); CK(cudaMalloc(&B, K * N * es)); CK(cudaMalloc(&D, M * N * es));
  CK(cudaMemset(A, 0x3c, M * K * es)); CK(cudaMemset(B, 0x3c, K * N * es));
  float one = 1, zero = 0;
  void *ws; size_t wsz = 32 << 20; CK(cudaMalloc(&ws, wsz)); cublasSetWorkspace(h, ws, wsz);
  auto f = [&] { cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, dt, N, A, dt, K, &zero, D, dt, N, ct, CUBLAS_GEMM_DEFAULT); };
  double ms = time_ms(f, 20);
  printf("%-34s %6lldx%-6lldx%-6lld      %8.1f TFLOP/s\n", label, M, N, K, 2.0 * M * N * K / (ms * 1e-3) / 1e12);
  cublasDestroy(h); CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(D)); CK(cudaFree(ws));
}

int main(int argc, char **argv) {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const char *only = argc > 1 ? argv[1] : "all";
  bool all = !strcmp(only, "all");
  /* Correctness on tails, K = 1 and batches. */
  run<1, true, 256, 3>("bf16 B row-major 128x256 3st", 1000, 1032, 200, 1, false);
  run<1, false, 256, 3>("bf16 B col-major 128x256 3st", 1000, 1032, 200, 1, false);
  run<0, true, 128, 4>("f16 B row-major 128x128 4st", 333, 136, 8, 3, false);
  run<1, true, 256, 3>("bf16 K=8 (TMA zero tail)", 130, 264, 8, 2, false);
  run<2, false, 256, 3>("tf32 B col-major 128x256 3st", 1000, 1030, 196, 2, false);
  run<2, false, 256, 3>("tf32 B col-major 3st TMA st", 1000, 1032, 196, 2, false);
  run<1, true, 256, 3, 3>("bf16 B row-major no TMA st", 1000, 1032, 200, 1, false);
  run<2, false, 128, 4>("tf32 B col-major 128x128 4st", 129, 260, 36, 1, false);
  if (!all && !strcmp(only, "check")) return 0;
  if (!strcmp(only, "modes")) {
    const long long shapes[2][3] = {{16384, 4096, 1024}, {4096, 4096, 4096}};
    for (auto &s : shapes) {
      run<1, true, 256, 3>("bf16 Brow 3st bias+relu", s[0], s[1], s[2], 1, true);
      run<1, true, 256, 3, 1>("bf16 Brow 3st relu only", s[0], s[1], s[2], 1, true);
      run<1, true, 128, 5, 4>("bf16 Brow 128x128 5st ping-pong", s[0], s[1], s[2], 1, true);
    }
    return 0;
  }
  cublas_ref("cuBLAS bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 8192, 8192, 8192);
  cublas_ref("cuBLAS bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 16384, 4096, 1024);
  cublas_ref("cuBLAS tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4096, 4096, 4096);
  const long long shapes[3][3] = {{4096, 4096, 4096}, {8192, 8192, 8192}, {16384, 4096, 1024}};
  for (auto &s : shapes) {
    run<1, false, 256, 3>("bf16 Bcol 128x256x64 3st", s[0], s[1], s[2], 1, true);
    run<1, true, 256, 3>("bf16 Brow 128x256x64 3st", s[0], s[1], s[2], 1, true);
    run<1, true, 128, 4>("bf16 Brow 128x128x64 4st", s[0], s[1], s[2], 1, true);
    run<1, true, 128, 5, 4>("bf16 Brow 128x128x64 5st ping-pong", s[0], s[1], s[2], 1, true);
    run<0, true, 256, 3>("f16 Brow 128x256x64 3st", s[0], s[1], s[2], 1, true);
  }
  run<2, false, 256, 3>("tf32 Bcol 128x256x32 3st", 4096, 4096, 4096, 1, true);
  run<2, false, 128, 4>("tf32 Bcol 128x128x32 4st", 4096, 4096, 4096, 1, true);
  return 0;
}
