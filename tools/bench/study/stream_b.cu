// Study of how fast TMA can stream a decode product's weights: B is K x N
// bfloat16, row-major (N contiguous), and each work item reads a strip of
// W bytes of every row (a swapped decode plan's 128 columns are W = 256)
// over its share of K, box by box into a ring of shared memory that one
// warp empties as fast as the loads land. Nothing is computed: the figure
// is the memory system's pace for that order of reads, beside a plain
// vectorized read of the same bytes and cudaMemcpy's copy bandwidth.
//   nvcc -O3 -std=c++17 -arch=sm_90a -o stream_b tools/bench/study/stream_b.cu -lcuda
#include <cuda.h>
#include "common.cuh"

__device__ __forceinline__ unsigned su32(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void bar_init(unsigned b, unsigned n) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_expect(unsigned b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b) : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned b, unsigned parity) {
  asm volatile(
      "{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}\n" ::"r"(b),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma2(unsigned dst, const CUtensorMap *m, unsigned bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(m)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// Item t of `items`: strip t % strips (W bytes wide) over K-slice t / strips.
// A stage is NB boxes side by side, each 64 columns (128 bytes) by R rows.
template <int NB, int R, int S>
__global__ void __launch_bounds__(64, 1) stream(const __grid_constant__ CUtensorMap m, int strips,
                                                int slices, int K, int order) {
  extern __shared__ __align__(1024) unsigned char smem[];
  constexpr unsigned STAGE = NB * R * 128;
  __shared__ __align__(8) unsigned long long full[S], empty[S];
  const unsigned base = (su32(smem) + 1023u) & ~1023u;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; s++) {
      bar_init(su32(&full[s]), 1);
      bar_init(su32(&empty[s]), 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int items = strips * slices, kper = (K / R + slices - 1) / slices;
  if (threadIdx.x == 0) {
    unsigned stage = 0, phase = 0;
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      /* order 0: consecutive items are neighbouring strips; 1: slices. */
      const int strip = order == 0 ? t % strips : t / slices, slice = order == 0 ? t / strips : t % slices;
      const int k0 = slice * kper, k1 = min(K / R, k0 + kper);
      for (int kt = k0; kt < k1; kt++) {
        bar_wait(su32(&empty[stage]), phase ^ 1);
        bar_expect(su32(&full[stage]), STAGE);
        for (int j = 0; j < NB; j++)
          tma2(base + stage * STAGE + j * R * 128, &m, su32(&full[stage]), (strip * NB + j) * 64, kt * R);
        if (++stage == S) { stage = 0; phase ^= 1; }
      }
    }
  } else if (threadIdx.x == 32) {
    unsigned stage = 0, phase = 0;
    for (int t = blockIdx.x; t < items; t += gridDim.x) {
      const int slice = order == 0 ? t / strips : t % slices;
      const int k0 = slice * kper, k1 = min(K / R, k0 + kper);
      for (int kt = k0; kt < k1; kt++) {
        bar_wait(su32(&full[stage]), phase);
        bar_arrive(su32(&empty[stage]));
        if (++stage == S) { stage = 0; phase ^= 1; }
      }
    }
  }
}

__global__ void read_all(const uint4 *p, size_t n, unsigned *sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += gridDim.x * (size_t)blockDim.x) {
    uint4 v = __ldg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x12345678u) *sink = x;
}

static void make_map(CUtensorMap *m, void *p, long long K, long long N, int R, CUtensorMapL2promotion prom) {
  cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)K}, strides[1] = {(cuuint64_t)N * 2};
  cuuint32_t box[2] = {64, (cuuint32_t)R}, es[2] = {1, 1};
  CUresult r = cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p, dims, strides, box, es,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, prom,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled failed %d\n", (int)r); exit(1); }
}

static int sms;

template <int NB, int R, int S>
static void one(void *B, long long K, long long N, int slices, int grid, int order, CUtensorMapL2promotion prom,
                const char *pname) {
  CUtensorMap m;
  make_map(&m, B, K, N, R, prom);
  const int strips = (int)(N / (NB * 64)), items = strips * slices;
  if (grid <= 0) grid = items < sms ? items : sms;
  const int smem = S * NB * R * 128 + 1024;
  CK(cudaFuncSetAttribute(stream<NB, R, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  double ms = time_ms([&] { stream<NB, R, S><<<grid, 64, smem>>>(m, strips, slices, (int)K, order); });
  double tbs = (double)K * N * 2 / (ms * 1e-3) / 1e12;
  printf("K %lld N %lld strip %d B, box rows %d, %d stages (%d KiB), slices %d, %d items on %d blocks, order %d, "
         "promotion %s: %.1f us, %.2f TB/s\n",
         K, N, NB * 128, R, S, S * NB * R * 128 / 1024, slices, items, grid, order, pname, ms * 1e3, tbs);
}

int main() {
  CK(cudaFree(0));
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("copy bandwidth %.0f GB/s\n", copy_bw(1ull << 30));
  for (long long N : {8192LL, 28672LL}) {
    const long long K = 8192;
    void *B;
    unsigned *sink;
    CK(cudaMalloc(&B, K * N * 2));
    CK(cudaMalloc(&sink, 4));
    fill_rand<<<1024, 256>>>((float *)B, K * N / 2, 7);
    double ms = time_ms([&] { read_all<<<sms * 4, 512>>>((const uint4 *)B, K * N * 2 / 16, sink); });
    printf("K %lld N %lld: plain vectorized read %.1f us, %.2f TB/s\n", K, N, ms * 1e3,
           (double)K * N * 2 / (ms * 1e-3) / 1e12);
    const CUtensorMapL2promotion P256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 PNONE = CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 P128 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    /* As jitk's swapped decode plan reads B: 256-byte strips, boxes of 64 rows, 12 stages. */
    one<2, 64, 12>(B, K, N, 1, 0, 0, P256, "256B");
    one<2, 64, 12>(B, K, N, 1, 0, 0, PNONE, "none");
    one<2, 64, 12>(B, K, N, 1, 0, 0, P128, "128B");
    one<2, 64, 6>(B, K, N, 1, 0, 0, P256, "256B");
    one<2, 64, 12>(B, K, N, 2, 0, 0, P256, "256B");
    one<2, 64, 12>(B, K, N, 2, 0, 1, P256, "256B");
    one<2, 64, 6>(B, K, N, 2, 0, 0, P256, "256B");
    one<2, 32, 12>(B, K, N, 2, 0, 0, P256, "256B");
    one<2, 64, 12>(B, K, N, 4, 0, 0, P256, "256B");
    /* Wider strips: 512 and 1024 bytes of each row an item. */
    one<4, 64, 6>(B, K, N, 1, 0, 0, P256, "256B");
    one<4, 32, 12>(B, K, N, 1, 0, 0, P256, "256B");
    one<4, 64, 6>(B, K, N, 2, 0, 0, P256, "256B");
    one<4, 32, 12>(B, K, N, 4, 0, 0, P256, "256B");
    one<8, 32, 6>(B, K, N, 4, 0, 0, P256, "256B");
    one<8, 16, 12>(B, K, N, 8, 0, 0, P256, "256B");
    one<8, 32, 6>(B, K, N, 8, 0, 1, P256, "256B");
    CK(cudaFree(B));
    CK(cudaFree(sink));
  }
  return 0;
}
