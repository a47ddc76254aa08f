// A study, not part of the library: how fast does one block copy an
// operand whose rows are off 16 bytes onto rows of whole lines when TMA's
// bulk copies move the bytes and the threads only shift them in shared
// memory? This is the rate a copier beside the product would need (docs/
// PERFORMANCE.md, 2026-12-05: several times the 7-13 GB/s a block that
// copying with plain loads reached). bf16 4096 x 4095 onto rows of 4096:
// each row's 16-byte chunks (8190 bytes from an offset of 2 * row mod 16)
// come in by one bulk copy into an input buffer, the block's threads write
// them shifted into an output buffer, and one bulk copy stores the row;
// each block taking rows blockIdx.x, blockIdx.x + gridDim.x, ... Four
// arrangements: NB rows in flight shifted one at a time between the
// block's barriers (shift_rows) or G at a time (shift_groups); shifted in
// place, one buffer a row (shift_in_place, also without any shift, the
// pipeline's own ceiling); and warp roles handing buffers on by mbarriers,
// with no block-wide barrier (shift_warps). Medians of 15 runs of CUDA events after 3
// warm-ups, against the library's way (one thread a 16-byte chunk of a
// row, loads shifted in registers, the whole GPU) in the same program; the
// copy is checked byte for byte.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o bulk_shift tools/bench/study/bulk_shift.cu && ./bulk_shift
#include "common.cuh"
#include "../../../templates/jitk/matmul.cuh"

__device__ __forceinline__ unsigned su32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

constexpr int IN = 8224;   // a row's chunks: at most 8190 + 15 bytes, rounded up to 16, and slack
constexpr int OUT = 8192;  // a row of the copy

// The 16 bytes starting s bytes (0 to 15) into the 32 of lo and hi: first
// whole words (s / 4), then the bytes left, as the library's pad_rows does.
__device__ __forceinline__ uint4 shift_chunk(const uint4 &lo, const uint4 &hi, unsigned s) {
  unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const unsigned q = s >> 2, sh = (s & 3u) * 8u;
#pragma unroll
  for (int t = 0; t < 7; t++)
    if (q & 1u) w[t] = w[t + 1];
#pragma unroll
  for (int t = 0; t < 6; t++)
    if (q & 2u) w[t] = w[t + 2];
  return make_uint4(__funnelshift_r(w[0], w[1], sh), __funnelshift_r(w[1], w[2], sh),
                    __funnelshift_r(w[2], w[3], sh), __funnelshift_r(w[3], w[4], sh));
}

// The chunks of stage k's G rows (rows k * G .. of the block's `rows`)
// into buffers st * G .. of `in` (IN bytes each), all on barrier `bar`.
template <int G>
__device__ __forceinline__ void load_group(const unsigned char *x, long long bytes, long long ld, long long rows,
                                           long long k, int st, unsigned char *in, unsigned long long *bar) {
  unsigned total = 0;
  unsigned long long a0[G], a1[G];
  for (int g = 0; g < G; g++) {
    const long long i = k * G + g;
    a0[g] = a1[g] = 0;
    if (i >= rows) continue;
    const long long r = blockIdx.x + i * gridDim.x;
    const unsigned long long at = reinterpret_cast<unsigned long long>(x + r * ld);
    a0[g] = at & ~15ull;
    a1[g] = (at + bytes + 15) & ~15ull;
    total += (unsigned)(a1[g] - a0[g]);
  }
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(su32(bar)), "r"(total) : "memory");
  for (int g = 0; g < G; g++)
    if (a1[g] > a0[g])
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       su32(in + (st * G + g) * IN)),
                   "l"(a0[g]), "r"((unsigned)(a1[g] - a0[g])), "r"(su32(bar))
                   : "memory");
}

// Rows of `bytes` bytes, `ld` apart in x, into rows `ldy` apart in y.
template <int NB, int T>
__global__ void __launch_bounds__(T, 1) shift_rows(const unsigned char *x, unsigned char *y, long long R,
                                                   long long bytes, long long ld, long long ldy) {
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long bar[NB];
  unsigned char *in = sm, *out = sm + NB * IN;
  long long mine = 0;
  for (long long r = blockIdx.x; r < R; r += gridDim.x) mine++;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NB; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&bar[i])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // The 16-byte chunks of row k of this block into input buffer k % NB.
  auto load = [&](long long k) {
    const long long r = blockIdx.x + k * gridDim.x;
    const unsigned long long at = reinterpret_cast<unsigned long long>(x + r * ld);
    const unsigned long long a0 = at & ~15ull, a1 = (at + bytes + 15) & ~15ull;
    const int b = (int)(k % NB);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(su32(&bar[b])), "r"((unsigned)(a1 - a0))
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     su32(in + b * IN)),
                 "l"(a0), "r"((unsigned)(a1 - a0)), "r"(su32(&bar[b]))
                 : "memory");
  };
  if (threadIdx.x == 0)
    for (long long k = 0; k < mine && k < NB; k++) load(k);
  unsigned phase = 0;
  for (long long k = 0; k < mine; k++) {
    const int b = (int)(k % NB);
    const long long r = blockIdx.x + k * gridDim.x;
    const unsigned s = (unsigned)(reinterpret_cast<unsigned long long>(x + r * ld) & 15u);
    // The store made from this output buffer NB rows ago has read it.
    if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(NB - 1) : "memory");
    __syncthreads();
    unsigned ok = 0;
    while (!ok)
      asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p;}"
                   : "=r"(ok)
                   : "r"(su32(&bar[b])), "r"(phase)
                   : "memory");
    const uint4 *src = reinterpret_cast<const uint4 *>(in + b * IN);
    uint4 *dst = reinterpret_cast<uint4 *>(out + b * OUT);
    for (int j = threadIdx.x; j < OUT / 16; j += T) {
      const uint4 lo = src[j], hi = src[j + 1];
      dst[j] = shift_chunk(lo, hi, s);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(y + r * ldy),
                   "r"(su32(out + b * OUT)), "r"((unsigned)OUT)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      if (k + NB < mine) load(k + NB);
    }
    if (b == NB - 1) phase ^= 1;
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// The same with G rows a stage: G rows' chunks come in on one barrier,
// the threads shift all G between the same two barriers, and G bulk
// copies store them; S = NB / G stages in flight.
template <int NB, int T, int G>
__global__ void __launch_bounds__(T, 1) shift_groups(const unsigned char *x, unsigned char *y, long long R,
                                                     long long bytes, long long ld, long long ldy) {
  constexpr int S = NB / G;
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long bar[S];
  unsigned char *in = sm, *out = sm + NB * IN;
  long long rows = 0;
  for (long long r = blockIdx.x; r < R; r += gridDim.x) rows++;
  const long long stages = (rows + G - 1) / G;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&bar[i])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto load = [&](long long k) {
    load_group<G>(x, bytes, ld, rows, k, (int)(k % S), in, &bar[k % S]);
  };
  if (threadIdx.x == 0)
    for (long long k = 0; k < stages && k < S; k++) load(k);
  unsigned phase = 0;
  for (long long k = 0; k < stages; k++) {
    const int st = (int)(k % S);
    if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(S - 1) : "memory");
    __syncthreads();
    unsigned ok = 0;
    while (!ok)
      asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p;}"
                   : "=r"(ok)
                   : "r"(su32(&bar[st])), "r"(phase)
                   : "memory");
    for (int j = threadIdx.x; j < G * (OUT / 16); j += T) {
      const int g = j / (OUT / 16), c = j % (OUT / 16);
      const long long i = k * G + g;
      if (i >= rows) continue;
      const long long r = blockIdx.x + i * gridDim.x;
      const unsigned s = (unsigned)(reinterpret_cast<unsigned long long>(x + r * ld) & 15u);
      const uint4 *src = reinterpret_cast<const uint4 *>(in + (st * G + g) * IN);
      const uint4 lo = src[c], hi = src[c + 1];
      reinterpret_cast<uint4 *>(out + (st * G + g) * OUT)[c] = shift_chunk(lo, hi, s);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int g = 0; g < G; g++) {
        const long long i = k * G + g;
        if (i >= rows) continue;
        const long long r = blockIdx.x + i * gridDim.x;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(y + r * ldy),
                     "r"(su32(out + (st * G + g) * OUT)), "r"((unsigned)OUT)
                     : "memory");
      }
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      if (k + S < stages) load(k + S);
    }
    if (st == S - 1) phase ^= 1;
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// The same, G rows a stage, shifted in place: each thread loads its
// chunks into registers, the block waits, and each writes them back
// shifted, so that a row needs one buffer, not two, and twice the rows
// fit in flight (S stages). ALIGNED: no shift at all (the rows' own
// chunks stored as they came), the ceiling of the bulk copies.
template <int S, int T, int G, bool ALIGNED = false>
__global__ void __launch_bounds__(T, 1) shift_in_place(const unsigned char *x, unsigned char *y, long long R,
                                                       long long bytes, long long ld, long long ldy) {
  constexpr int PER = (G * (OUT / 16) + T - 1) / T; /* chunks a thread a stage */
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long bar[S];
  long long rows = 0;
  for (long long r = blockIdx.x; r < R; r += gridDim.x) rows++;
  const long long stages = (rows + G - 1) / G;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&bar[i])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto load = [&](long long k) {
    load_group<G>(x, bytes, ld, rows, k, (int)(k % S), sm, &bar[k % S]);
  };
  if (threadIdx.x == 0)
    for (long long k = 0; k < stages && k < S - 1; k++) load(k);
  unsigned phase = 0;
  for (long long k = 0; k < stages; k++) {
    const int st = (int)(k % S);
    /* The buffer of stage k + S - 1 is the one stage k - 1 stored from:
     * once that store has read it, it is filled again. */
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      if (k + S - 1 < stages) load(k + S - 1);
    }
    unsigned ok = 0;
    while (!ok)
      asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p;}"
                   : "=r"(ok)
                   : "r"(su32(&bar[st])), "r"(phase)
                   : "memory");
    if (!ALIGNED) {
      uint4 v[PER];
#pragma unroll
      for (int u = 0; u < PER; u++) {
        const int j = threadIdx.x + u * T;
        if (j >= G * (OUT / 16)) continue;
        const int g = j / (OUT / 16), c = j % (OUT / 16);
        const long long i = k * G + g;
        if (i >= rows) continue;
        const long long r = blockIdx.x + i * gridDim.x;
        const unsigned s = (unsigned)(reinterpret_cast<unsigned long long>(x + r * ld) & 15u);
        const uint4 *src = reinterpret_cast<const uint4 *>(sm + (st * G + g) * IN);
        const uint4 lo = src[c], hi = src[c + 1];
        v[u] = shift_chunk(lo, hi, s);
      }
      __syncthreads(); /* every chunk read before any is written back */
#pragma unroll
      for (int u = 0; u < PER; u++) {
        const int j = threadIdx.x + u * T;
        if (j >= G * (OUT / 16)) continue;
        const int g = j / (OUT / 16), c = j % (OUT / 16);
        if (k * G + g >= rows) continue;
        reinterpret_cast<uint4 *>(sm + (st * G + g) * IN)[c] = v[u];
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int g = 0; g < G; g++) {
        const long long i = k * G + g;
        if (i >= rows) continue;
        const long long r = blockIdx.x + i * gridDim.x;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(y + r * ldy),
                     "r"(su32(sm + (st * G + g) * IN)), "r"((unsigned)OUT)
                     : "memory");
      }
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    if (st == S - 1) phase ^= 1;
  }
  if (threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Warp-specialized, with no block-wide barrier: lane 0 of warp 0 loads
// rows into free buffers, warps 1 .. W shift them from the input buffer
// into the output one, lane 0 of warp W + 1 stores them, and per-buffer
// mbarriers hand each buffer on: full (its chunks are in), shifted (every
// shifting warp is done) and empty (its store has read it, LAG rows
// later, so that the storer need not wait for each store).
template <int NB, int W, int LAG>
__global__ void __launch_bounds__(32 * (W + 2), 1) shift_warps(const unsigned char *x, unsigned char *y, long long R,
                                                              long long bytes, long long ld, long long ldy) {
  extern __shared__ __align__(1024) unsigned char sm[];
  __shared__ __align__(8) unsigned long long full[NB], shifted[NB], empty[NB];
  unsigned char *in = sm, *out = sm + NB * IN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  long long rows = 0;
  for (long long r = blockIdx.x; r < R; r += gridDim.x) rows++;
  if (threadIdx.x == 0) {
    for (int i = 0; i < NB; i++) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&full[i])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(su32(&shifted[i])), "r"(W));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(su32(&empty[i])));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto wait = [](unsigned long long *bar, unsigned phase) {
    unsigned ok = 0;
    while (!ok)
      asm volatile("{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0,1,0,p;}"
                   : "=r"(ok)
                   : "r"(su32(bar)), "r"(phase)
                   : "memory");
  };
  auto arrive = [](unsigned long long *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(su32(bar)) : "memory");
  };
  if (warp == 0) {
    if (lane != 0) return;
    for (long long k = 0; k < rows; k++) {
      const int b = (int)(k % NB);
      if (k >= NB) wait(&empty[b], (unsigned)((k / NB - 1) & 1));
      const long long r = blockIdx.x + k * gridDim.x;
      const unsigned long long at = reinterpret_cast<unsigned long long>(x + r * ld);
      const unsigned long long a0 = at & ~15ull, a1 = (at + bytes + 15) & ~15ull;
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(su32(&full[b])),
                   "r"((unsigned)(a1 - a0))
                   : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       su32(in + b * IN)),
                   "l"(a0), "r"((unsigned)(a1 - a0)), "r"(su32(&full[b]))
                   : "memory");
    }
  } else if (warp <= W) {
    for (long long k = 0; k < rows; k++) {
      const int b = (int)(k % NB);
      wait(&full[b], (unsigned)((k / NB) & 1));
      const long long r = blockIdx.x + k * gridDim.x;
      const unsigned s = (unsigned)(reinterpret_cast<unsigned long long>(x + r * ld) & 15u);
      const uint4 *src = reinterpret_cast<const uint4 *>(in + b * IN);
      uint4 *dst = reinterpret_cast<uint4 *>(out + b * OUT);
      for (int j = (warp - 1) * 32 + lane; j < OUT / 16; j += 32 * W) {
        const uint4 lo = src[j], hi = src[j + 1];
        dst[j] = shift_chunk(lo, hi, s);
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncwarp();
      if (lane == 0) arrive(&shifted[b]);
    }
  } else if (lane == 0) {
    for (long long k = 0; k < rows; k++) {
      const int b = (int)(k % NB);
      wait(&shifted[b], (unsigned)((k / NB) & 1));
      const long long r = blockIdx.x + k * gridDim.x;
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(y + r * ldy),
                   "r"(su32(out + b * OUT)), "r"((unsigned)OUT)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
      /* The store LAG rows back has read its buffer: hand it back. */
      asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(LAG) : "memory");
      if (k >= LAG) arrive(&empty[(int)((k - LAG) % NB)]);
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  }
}

// The library's copy (matmul.cuh's pad_rows), for the whole GPU's rate.
__global__ void __launch_bounds__(128) pad(const unsigned char *x, unsigned char *y, long long R, long long bytes,
                                           long long ld, long long ldy) {
  jitk::mm::pad_rows<128>(x, y, R, bytes, ld, ldy);
}

template <typename F>
static float timeit(F f) { return (float)(time_ms(f, 15) * 1000); }

// Runs launch(blocks) at 20, 40, 66 and 132 blocks on a cleared y and
// prints each time and rate after `label`, with the wrong bytes of the
// copy unless `check` is false.
template <typename L>
static void measure(const char *label, L launch, const unsigned char *y, long long R, long long bytes,
                    long long ld, long long ldy, const std::vector<unsigned char> &h, bool check = true) {
  const double mb = (double)R * bytes / 1e6;
  for (int nb : {20, 40, 66, 132}) {
    CK(cudaMemset((void *)y, 0, R * ldy));
    float t = timeit([&] { launch(nb); });
    std::vector<unsigned char> g(R * ldy);
    CK(cudaMemcpy(g.data(), y, R * ldy, cudaMemcpyDeviceToHost));
    long long bad = 0;
    for (long long r = 0; r < R && check; r++)
      for (long long c = 0; c < bytes; c++) bad += g[r * ldy + c] != h[r * ld + c];
    printf("%s, %3d blocks: %6.1f us, %5.1f GB/s read a block, %s%lld wrong bytes\n", label, nb, t,
           mb * 1e3 / t / nb, check ? "" : "unchecked, ", bad);
  }
}

template <int NB, int W, int LAG>
static void run_warps(const unsigned char *x, unsigned char *y, long long R, long long bytes, long long ld,
                      long long ldy, const std::vector<unsigned char> &h) {
  const int smem = NB * (IN + OUT);
  auto kernel = shift_warps<NB, W, LAG>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char label[128];
  snprintf(label, sizeof label, "warp roles, %2d rows in flight, %2d shifting warps, stores %d behind", NB, W, LAG);
  measure(label, [&](int nb) { kernel<<<nb, 32 * (W + 2), smem>>>(x, y, R, bytes, ld, ldy); }, y, R, bytes, ld,
          ldy, h);
}

template <int S, int T, int G, bool ALIGNED>
static void run_in_place(const unsigned char *x, unsigned char *y, long long R, long long bytes, long long ld,
                         long long ldy, const std::vector<unsigned char> &h) {
  const int smem = S * G * IN;
  auto kernel = shift_in_place<S, T, G, ALIGNED>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char label[128];
  snprintf(label, sizeof label, "in place%s, %2d stages of %d rows, %4d threads", ALIGNED ? " (no shift)" : "", S,
           G, T);
  measure(label, [&](int nb) { kernel<<<nb, T, smem>>>(x, y, R, bytes, ld, ldy); }, y, R, bytes, ld, ldy, h,
          !ALIGNED);
}

template <int NB, int T, int G = 1>
static void run(const unsigned char *x, unsigned char *y, long long R, long long bytes, long long ld, long long ldy,
                const std::vector<unsigned char> &h) {
  const int smem = NB * (IN + OUT);
  auto kernel = G == 1 ? shift_rows<NB, T> : shift_groups<NB, T, G>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  char label[128];
  snprintf(label, sizeof label, "%2d rows in flight, %d a stage, %4d threads", NB, G, T);
  measure(label, [&](int nb) { kernel<<<nb, T, smem>>>(x, y, R, bytes, ld, ldy); }, y, R, bytes, ld, ldy, h);
}

int main() {
  const long long R = 4096, C = 4095, es = 2, ld = C * es, ldy = 4096 * es, bytes = C * es;
  unsigned char *x, *y;
  CK(cudaMalloc(&x, R * ld + 64));
  CK(cudaMalloc(&y, R * ldy));
  std::vector<unsigned char> h(R * ld);
  for (size_t i = 0; i < h.size(); i++) h[i] = (unsigned char)(rand() & 255);
  CK(cudaMemcpy(x, h.data(), R * ld, cudaMemcpyHostToDevice));
  const double mb = (double)R * bytes / 1e6;
  float tp = timeit([&] { pad<<<dim3(1, (unsigned)R), 128>>>(x, y, R, bytes, ld, ldy); });
  printf("pad_rows, whole GPU: %.1f us, %.0f GB/s read\n", tp, mb * 1e3 / tp);
  run<6, 256>(x, y, R, bytes, ld, ldy, h);
  run<12, 512, 6>(x, y, R, bytes, ld, ldy, h);
  run_in_place<6, 512, 4, false>(x, y, R, bytes, ld, ldy, h);
  run_in_place<6, 512, 4, true>(x, y, R, bytes, ld, ldy, h);
  run_warps<12, 4, 2>(x, y, R, bytes, ld, ldy, h);
  run_warps<12, 8, 2>(x, y, R, bytes, ld, ldy, h);
  run_warps<12, 4, 6>(x, y, R, bytes, ld, ldy, h);
  return 0;
}
