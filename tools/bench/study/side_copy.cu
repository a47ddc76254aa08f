// A study, not part of the library: how fast do copying blocks (one a
// multiprocessor, as in the matmul kernel's copies beside the product on
// the branch wip/side-copy) copy an operand whose rows are off 16 bytes,
// against the _pad kernel on the whole GPU? bf16 4096 x 4095 onto rows of
// 4096, in units of 128 rows by 1 KiB (A-like) or 512 rows by 256 bytes
// (B-like), claimed with an atomic counter; 384 threads with 8 chunks of
// 16 bytes in flight each (with and without the per-unit fence and flag),
// or 1024 threads with 4. The times include a 16 KiB cudaMemsetAsync of
// the counters (timed alone at the end). Then the ceilings: an aligned
// copy with the same threads and chunks in flight, and one through shared
// memory by TMA bulk copies (8 pieces of 16 KiB in flight a block).
// Medians of 15 runs of CUDA events after 3 warm-ups; the copy is checked
// byte for byte.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o side_copy tools/bench/study/side_copy.cu && ./side_copy
#include "common.cuh"
#include "../../../templates/jitk/matmul.cuh"

__device__ __forceinline__ bool pad_get(const uint4 *al, unsigned s, long long j, long long bytes, uint4 &lo, uint4 &hi) {
  const bool whole = s == 0 ? 16 * (j + 1) <= bytes : 16 * j + 32 - s <= bytes;
  if (whole) { lo = al[j]; hi = s ? al[j + 1] : lo; }
  return whole;
}
__device__ __forceinline__ void pad_put(unsigned char *dst, unsigned s, long long j, const uint4 &lo, const uint4 &hi) {
  unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const unsigned q = s >> 2, b = (s & 3u) * 8u;
#pragma unroll
  for (int t = 0; t < 7; t++) if (q & 1u) w[t] = w[t + 1];
#pragma unroll
  for (int t = 0; t < 6; t++) if (q & 2u) w[t] = w[t + 2];
  uint4 o;
  o.x = __funnelshift_r(w[0], w[1], b); o.y = __funnelshift_r(w[1], w[2], b);
  o.z = __funnelshift_r(w[2], w[3], b); o.w = __funnelshift_r(w[3], w[4], b);
  reinterpret_cast<uint4 *>(dst)[j] = o;
}
__device__ __forceinline__ void tail_bytes(const unsigned char *src, unsigned char *dst, long long j, long long bytes) {
  unsigned char v[16];
#pragma unroll
  for (int c = 0; c < 16; c++) if (16 * j + c < bytes) v[c] = src[16 * j + c];
#pragma unroll
  for (int c = 0; c < 16; c++) if (16 * j + c < bytes) dst[16 * j + c] = v[c];
}

struct op_t { const unsigned char *x; unsigned char *y; long long rows, bytes, ld, ldy; unsigned by_rows, ts, kx, tiles, chunks; };

template <int U, int T>
__device__ __forceinline__ void rect(const op_t op, long long r0, long long r1, long long c0, long long c1) {
  const unsigned nc = (unsigned)((c1 - c0 + 15) / 16);
  unsigned lg = 0;
  while ((1u << lg) < nc && lg < 7) lg++;
  const unsigned per = T >> lg, c = threadIdx.x & ((1u << lg) - 1u);
  for (unsigned cb = 0; cb < nc; cb += 1u << lg) {
    const bool in = cb + c < nc;
    const long long j = c0 / 16 + cb + c;
    for (long long rb = r0 + (threadIdx.x >> lg); rb < r1; rb += (long long)per * U) {
      uint4 lo[U], hi[U]; bool whole[U];
#pragma unroll
      for (int q = 0; q < U; q++) {
        const long long r = rb + q * per;
        const unsigned char *src = op.x + r * op.ld;
        const unsigned s = (unsigned)((unsigned long long)src & 15u);
        whole[q] = false;
        if (in && r < r1) whole[q] = pad_get((const uint4 *)(src - s), s, j, op.bytes, lo[q], hi[q]);
      }
#pragma unroll
      for (int q = 0; q < U; q++) {
        const long long r = rb + q * per;
        const unsigned char *src = op.x + r * op.ld;
        const unsigned s = (unsigned)((unsigned long long)src & 15u);
        if (whole[q]) pad_put(op.y + r * op.ldy, s, j, lo[q], hi[q]);
      }
    }
  }
  if (16 * (c0 / 16 + nc) + 32 <= op.bytes) return;
  for (long long r = r0 + threadIdx.x; r < r1; r += T) {
    const unsigned char *src = op.x + r * op.ld;
    const unsigned s = (unsigned)((unsigned long long)src & 15u);
    for (long long j = c0 / 16 + nc - 1; j >= c0 / 16 && j + 2 >= (op.bytes + 15) / 16; j--)
      if (s == 0 ? 16 * (j + 1) > op.bytes : 16 * j + 32 - s > op.bytes) tail_bytes(src, op.y + r * op.ldy, j, op.bytes);
  }
}

// FENCE: the per-unit fence + flag of the real code.
template <int U, int T, bool FENCE>
__global__ void __launch_bounds__(T, 1) copier(const __grid_constant__ op_t op, unsigned *flags) {
  extern __shared__ unsigned smem[];
  const unsigned total = op.tiles * op.chunks;
  for (;;) {
    if (threadIdx.x == 0) smem[0] = atomicAdd(flags, 1u);
    __syncthreads();
    const unsigned u = smem[0];
    if (u >= total) break;
    const unsigned i = u / op.chunks, kc = u % op.chunks;
    const op_t o = op;
    const long long a = (long long)i * o.ts, b = (long long)kc * o.kx;
    if (o.by_rows) rect<U, T>(o, a, a + o.ts < o.rows ? a + o.ts : o.rows, b, b + o.kx < o.bytes ? b + o.kx : o.bytes);
    else rect<U, T>(o, b, b + o.kx < o.rows ? b + o.kx : o.rows, a, a + o.ts < o.bytes ? a + o.ts : o.bytes);
    if (FENCE) __threadfence();
    __syncthreads();
    if (FENCE && threadIdx.x == 0) asm volatile("st.release.gpu.global.u32 [%0], 1;\n" ::"l"(flags + 4 + u) : "memory");
  }
}

// The library's copy (matmul.cuh's pad_rows) as a module's "_pad" kernel
// runs it, for one matrix.
__global__ void __launch_bounds__(128) pad(const unsigned char *x, unsigned char *y, long long R, long long bytes, long long ld, long long ldy) {
  jitk::mm::pad_rows<128>(x, y, R, bytes, ld, ldy);
}

// The ceilings: an aligned copy (no shift) with U chunks in flight a
// thread, and one through shared memory by TMA bulk copies (thread 0
// issues 16 KiB pieces into a ring of NB buffers, then stores each back).
template <int U, int T>
__global__ void __launch_bounds__(T, 1) plain(const uint4 *x, uint4 *y, long long n) {
  for (long long i0 = (long long)blockIdx.x * T * U + threadIdx.x; i0 < n; i0 += (long long)gridDim.x * T * U) {
    uint4 v[U];
#pragma unroll
    for (int q = 0; q < U; q++) if (i0 + q * T < n) v[q] = x[i0 + q * T];
#pragma unroll
    for (int q = 0; q < U; q++) if (i0 + q * T < n) y[i0 + q * T] = v[q];
  }
}
__device__ __forceinline__ unsigned su32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
template <int NB>
__global__ void __launch_bounds__(32, 1) bulk(const unsigned char *x, unsigned char *y, long long bytes) {
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long bar[NB];
  const long long piece = 16384, pieces = bytes / piece;
  if (threadIdx.x != 0) return;
  for (int i = 0; i < NB; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(su32(&bar[i])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  long long mine = 0;
  for (long long p = blockIdx.x; p < pieces; p += gridDim.x) mine++;
  unsigned phase[NB] = {0};
  long long issued = 0, done = 0;
  auto issue = [&](long long k) {
    const long long p = blockIdx.x + k * gridDim.x; const int b = (int)(k % NB);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(su32(&bar[b])), "r"((unsigned)piece) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(su32(sm + b * piece)), "l"(x + p * piece), "r"((unsigned)piece), "r"(su32(&bar[b])) : "memory");
  };
  /* Loads run NB - 4 pieces ahead; a buffer is refilled once the store
   * made from it four pieces before has read it. */
  for (; issued < mine && issued < NB - 4; issued++) issue(issued);
  for (; done < mine; done++) {
    const int b = (int)(done % NB);
    unsigned ok = 0;
    while (!ok) asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p;}" : "=r"(ok) : "r"(su32(&bar[b])), "r"(phase[b]) : "memory");
    phase[b] ^= 1;
    const long long p = blockIdx.x + done * gridDim.x;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(y + p * piece), "r"(su32(sm + b * piece)), "r"((unsigned)piece) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (issued < mine) {
      asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory");
      issue(issued++);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Microseconds: common.cuh's median of CUDA events, over 15 runs.
template <typename F>
static float timeit(F f) { return (float)(time_ms(f, 15) * 1000); }

int main() {
  const long long R = 4096, C = 4095, es = 2, ld = C * es, ldy = 4096 * es, bytes = C * es;
  unsigned char *x, *y; unsigned *flags;
  CK(cudaMalloc(&x, R * ldy)); CK(cudaMalloc(&y, R * ldy)); CK(cudaMalloc(&flags, 4096 * 4));
  std::vector<unsigned char> h(R * ld); for (size_t i = 0; i < h.size(); i++) h[i] = (unsigned char)(rand() & 255);
  CK(cudaMemcpy(x, h.data(), R * ld, cudaMemcpyHostToDevice));
  const int smem = 200 * 1024;
  CK(cudaFuncSetAttribute(copier<8, 384, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(copier<8, 384, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(copier<4, 1024, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double mb = (double)R * bytes / 1e6;
  float tp = timeit([&] { pad<<<dim3(1, (unsigned)R), 128>>>(x, y, R, bytes, ld, ldy); });
  printf("pad kernel, whole GPU: %.1f us, %.0f GB/s read\n", tp, mb * 1e3 / tp);
  op_t a = {x, y, R, bytes, ld, ldy, 1, 128, 1024, 32, 8};          // A-like: tiles of 128 rows, chunks of 1 KiB
  op_t b = {x, y, R, bytes, ld, ldy, 0, 256, 512, 32, 8};           // B-like: tiles of 256 bytes, chunks of 512 rows
  const int blocks[] = {20, 40, 66, 132};
  for (int v = 0; v < 2; v++) {
    const op_t o = v ? b : a;
    for (int nb : blocks) {
      float t1 = timeit([&] { cudaMemsetAsync(flags, 0, 4096 * 4); copier<8, 384, true><<<nb, 384, smem>>>(o, flags); });
      float t2 = timeit([&] { cudaMemsetAsync(flags, 0, 4096 * 4); copier<8, 384, false><<<nb, 384, smem>>>(o, flags); });
      float t3 = timeit([&] { cudaMemsetAsync(flags, 0, 4096 * 4); copier<4, 1024, true><<<nb, 1024, smem>>>(o, flags); });
      printf("%s units, %3d blocks: 384x8 %.1f us (%.1f GB/s a block), no fence %.1f us, 1024x4 %.1f us (%.1f GB/s a block)\n",
             v ? "B-like" : "A-like", nb, t1, mb * 1e3 / t1 / nb, t2, t3, mb * 1e3 / t3 / nb);
    }
  }
  std::vector<unsigned char> g(R * ldy); CK(cudaMemcpy(g.data(), y, R * ldy, cudaMemcpyDeviceToHost));
  long long bad = 0; for (long long r = 0; r < R; r++) for (long long c = 0; c < bytes; c++) bad += g[r * ldy + c] != h[r * ld + c];
  printf("check: %lld wrong bytes\n", bad);
  float tm = timeit([&] { cudaMemsetAsync(flags, 0, 4096 * 4); });
  printf("memset alone: %.1f us\n", tm);
  CK(cudaFuncSetAttribute(plain<8, 384>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(plain<4, 1024>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(bulk<12>, cudaFuncAttributeMaxDynamicSharedMemorySize, 12 * 16384));
  {
    const long long n = R * ldy / 16;
    for (int nb : blocks) {
      float t1 = timeit([&] { plain<8, 384><<<nb, 384, smem>>>((const uint4 *)y, (uint4 *)x, n); });
      float t2 = timeit([&] { plain<4, 1024><<<nb, 1024, smem>>>((const uint4 *)y, (uint4 *)x, n); });
      float t3 = timeit([&] { bulk<12><<<nb, 32, 12 * 16384>>>(y, x, R * ldy); });
      if (nb == 132) {
        std::vector<unsigned char> gx(R * ldy), gy(R * ldy);
        CK(cudaMemcpy(gx.data(), x, R * ldy, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(gy.data(), y, R * ldy, cudaMemcpyDeviceToHost));
        long long d = 0; for (long long i = 0; i < R * ldy; i++) d += gx[i] != gy[i];
        printf("bulk check: %lld bytes differ\n", d);
      }
      printf("aligned, %3d blocks: 384x8 %.1f us (%.1f GB/s a block), 1024x4 %.1f us (%.1f), bulk 12 x 16 KiB %.1f us (%.1f)\n",
             nb, t1, R * ldy / 1e3 / t1 / nb, t2, R * ldy / 1e3 / t2 / nb, t3, R * ldy / 1e3 / t3 / nb);
    }
  }
  return 0;
}
