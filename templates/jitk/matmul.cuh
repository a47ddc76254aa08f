// jitk/matmul.cuh: the matrix-product kernels generated matmul plans
// instantiate. Each computes one BM x BN tile of A @ B per block and hands
// every accumulator to the plan's `store(row, col, acc)`, which applies
// alpha, beta * C and the user's epilogue in registers and writes D once.
//
//  simt: FFMA on any dtype and any layout, each thread 8 x 8 outputs,
//        the next K-tile loaded into registers while the current one is
//        used from shared memory.
//  mma:  tensor cores for float16 and bfloat16 (mma.sync m16n8k16) and
//        tf32 (m16n8k8), float32 accumulation: K-contiguous A, either
//        layout of B, tiles staged by cp.async through a STAGES-deep ring,
//        fragments read with ldmatrix from XOR-swizzled shared memory.
#pragma once

namespace jitk {
namespace mm {

// Activations the epilogue may use. The float forms are branch-free: one
// base-2 exponential and one reciprocal on the multi-function unit each
// (ex2.approx.ftz, rcp.approx.ftz), within 1e-5 relative of the exact
// functions where these are not tiny. tanhf and IEEE division cost an
// epilogue's warp tens of instructions a value, and with GELU the
// epilogue, not the tensor cores, set the speed (0.6 of the bias-only plan
// at 4096 x 4096 x 1024 on the H200; __expf and __fdividef 0.83). Those two
// without .ftz also scale subnormal arguments and results around each
// unit operation, a few instructions more a value; here a result below
// 2^-126 is 0 instead, which a float32 or narrower D rounds it to anyway
// but for the last bits of subnormals. tanh(u) = 1 - 2 / (1 + e^(2u)), so
// gelu(x) = x / (1 + e^(-2u)); at the ends the exponential goes to 0 or
// infinity and the reciprocal to 1 or 0. The constants fold log2(e) into
// GELU's sqrt(2 / pi) and 0.044715.
//
// Each piece of inline PTX in this header has a second form for
// JITK_EMULATOR: jitk's tests compile generated kernels for the CPU with
// the host's C++ compiler, which cannot assemble PTX, and their emulator
// supplies jitk_emu_* functions that do what the instruction does. NVRTC
// never defines JITK_EMULATOR.
__device__ __forceinline__ float exp2_ftz(float x) {
#ifdef JITK_EMULATOR
  return jitk_emu_exp2_ftz(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
__device__ __forceinline__ float rcp_ftz(float x) {
#ifdef JITK_EMULATOR
  return jitk_emu_rcp_ftz(x);
#else
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
// 1 / (1 + e^(2 sqrt(2 / pi) s (x + 0.044715 x^3))) for s = +-1: the
// logistic function of GELU's argument, one exponential and one
// reciprocal.
template <int S>
__device__ __forceinline__ float gelu_logistic(float x) {
  const float c1 = S * 2.302208198144325f, c3 = S * 0.1029432395800235f;
  return rcp_ftz(1.f + exp2_ftz(x * __fmaf_rn(c3, x * x, c1)));
}
__device__ __forceinline__ float relu(float x) { return x > 0.f ? x : 0.f; }
__device__ __forceinline__ double relu(double x) { return x > 0. ? x : 0.; }
__device__ __forceinline__ float sigmoid(float x) {
  return rcp_ftz(1.f + exp2_ftz(-1.4426950408889634f * x));
}
__device__ __forceinline__ double sigmoid(double x) { return 1. / (1. + exp(-x)); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }
__device__ __forceinline__ double silu(double x) { return x * sigmoid(x); }
__device__ __forceinline__ float gelu(float x) { return x * gelu_logistic<-1>(x); }
__device__ __forceinline__ double gelu(double x) {
  return 0.5 * x * (1. + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

// Their derivatives, for backward passes (gelu's is that of the tanh
// approximation above).
__device__ __forceinline__ float drelu(float x) { return x > 0.f ? 1.f : 0.f; }
__device__ __forceinline__ double drelu(double x) { return x > 0. ? 1. : 0.; }
__device__ __forceinline__ float dgelu(float x) {
  const float t = 1.f - 2.f * gelu_logistic<1>(x);
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * 0.7978845608f * (1.f + 0.134145f * x * x);
}
__device__ __forceinline__ double dgelu(double x) {
  const double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1. + t) + 0.5 * x * (1. - t * t) * 0.7978845608028654 * (1. + 0.134145 * x * x);
}

// max and min of the accumulator's type and an int, as in max(acc +
// bias[col], 0): CUDA declares max(float, float), max(float, double),
// max(int, int) and max(unsigned, int), none closer than the others to
// (float, int), so without these the call is ambiguous. The value compared
// is the int converted to the float type, as the float overloads would
// take it; NaN handling is fmax's and fmin's, as in those overloads.
// They live in a namespace of their own, which the generated code brings
// in with using-declarations after this header: inside namespace mm they
// would hide CUDA's overloads from this header's own calls.
namespace mixed {
__device__ __forceinline__ float max(float a, int b) { return ::fmaxf(a, (float)b); }
__device__ __forceinline__ float max(int a, float b) { return ::fmaxf((float)a, b); }
__device__ __forceinline__ double max(double a, int b) { return ::fmax(a, (double)b); }
__device__ __forceinline__ double max(int a, double b) { return ::fmax((double)a, b); }
__device__ __forceinline__ float min(float a, int b) { return ::fminf(a, (float)b); }
__device__ __forceinline__ float min(int a, float b) { return ::fminf((float)a, b); }
__device__ __forceinline__ double min(double a, int b) { return ::fmin(a, (double)b); }
__device__ __forceinline__ double min(int a, double b) { return ::fmin((double)a, b); }
}  // namespace mixed

// An extra operand of the epilogue, read in the accumulator's type
// whatever its dtype.
template <typename S, typename A>
struct rd {
  const S *p;
  __device__ __forceinline__ A operator[](long long i) const { return static_cast<A>(p[i]); }
};

// Which tile a block computes: groups of 8 tile-rows walk the columns
// together, so that the B tiles they share stay in L2.
__device__ __forceinline__ void tile_of(unsigned int id, unsigned int tiles_m,
                                        unsigned int tiles_n, unsigned int &tm,
                                        unsigned int &tn) {
  const unsigned int group = 8, in_group = group * tiles_n;
  const unsigned int g = id / in_group, first = g * group;
  const unsigned int rows = tiles_m - first < group ? tiles_m - first : group;
  const unsigned int r = id - g * in_group;
  tm = first + r % rows;
  tn = r / rows;
}

// D's amax in FP8 plans: each thread keeps the largest |value| of the
// elements it stored (a NaN, once met, stays), then amax_commit combines
// the block's into *out, which the launch zeroed. Non-negative floats,
// and NaN with its sign cleared (above infinity), order as their bits do
// as unsigned integers, so an atomicMax on the bits gives the exact
// maximum in any order: the result is the same at every execution. Every
// thread of a warp calls amax_commit.
__device__ __forceinline__ void amax_fold(float &m, float v) {
  const float a = fabsf(v);
  m = a > m || a != a ? a : m;
}
__device__ __forceinline__ void amax_commit(float *out, float m) {
  unsigned int u = __float_as_uint(m);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned int w = __shfl_xor_sync(0xffffffffu, u, o);
    u = w > u ? w : u;
  }
  if ((threadIdx.x & 31) == 0 && u != 0) atomicMax(reinterpret_cast<unsigned int *>(out), u);
}

// --- operand transposes -----------------------------------------------------
// tf32 wgmma reads A and B K-major only: a column-major A or a row-major B is
// transposed first into a pooled buffer (about 8 % of a 4096^3 product).

// One R x C row-major matrix x[r * ld + c] (U: the elements' bits, 2 or 4
// bytes) into t[c * ldt + r], 64 x 64 tiles through shared memory, 256
// threads: each thread has its 16 loads in flight before its first store,
// and a warp reads and writes 32 consecutive elements. gridDim.y steps over
// the rows, so R has no limit of its own.
template <typename U>
__device__ __forceinline__ void transpose_tiles(const U *__restrict__ x, U *__restrict__ t,
                                                long long R, long long C, long long ld,
                                                long long ldt) {
  __shared__ U tile[64][65];
  const int tx = threadIdx.x % 64, ty = threadIdx.x / 64;
  const long long c0 = (long long)blockIdx.x * 64;
  for (long long r0 = (long long)blockIdx.y * 64; r0 < R; r0 += (long long)gridDim.y * 64) {
    U v[16];
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const long long r = r0 + ty + 4 * i;
      v[i] = r < R && c0 + tx < C ? x[r * ld + c0 + tx] : U(0);
    }
#pragma unroll
    for (int i = 0; i < 16; i++) tile[ty + 4 * i][tx] = v[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const long long c = c0 + ty + 4 * i;
      if (c < C && r0 + tx < R) t[c * ldt + r0 + tx] = tile[tx][ty + 4 * i];
    }
    __syncthreads();
  }
}

// --- operand copies onto 16 bytes -------------------------------------------
// TMA reads rows that start on 16 bytes only: an operand whose rows do not
// (an odd K or N, an odd leading dimension, a pointer off 16 bytes) is
// copied first into a pooled buffer whose rows start on 128-byte lines.

// Row r of an R x C row-major matrix x (rows ld_bytes apart, each `bytes`
// = C x the element size long) into y + r * ldy_bytes, for every r from
// blockIdx.y in steps of gridDim.y. Each thread writes whole 16-byte
// chunks of y's row, which measured faster than copying element by
// element (2-byte loads for 16-bit operands; docs/PERFORMANCE.md,
// 2026-12-04): chunk j is the 16 bytes at offset 16 j of x's row, which
// spans two 16-byte-aligned chunks of x when the row starts off 16 bytes
// (at byte s of its chunk); the thread loads both and shifts them by s
// bytes in registers. Only aligned chunks that hold bytes of the row are
// read: the first one's s bytes before the row lie in the same 16 bytes,
// so in the same allocation. A chunk of y whose source chunks would reach
// past the row's last byte goes byte by byte. Each of a block's THREADS
// threads (the launch's block, 128 in jitk's modules) has the loads of
// four chunks in flight before its first store, so a block of 128 takes
// 512 chunks (8 KiB) of a row: a row of a 4096-wide
// 16-bit operand is one block whose every thread is busy, and eight
// blocks fit a multiprocessor. Blocks of 256, half of whose chunk slots
// such rows left empty, three a multiprocessor at 80 registers, copied a
// 4096 x 4095 bf16 operand in 20.6-21.4 us against 17.7-17.8 (ncu; DRAM
// at 46-48 % of its peak against 53 %); twice the loads in flight again
// (cp.async into shared memory) gained nothing more (docs/PERFORMANCE.md,
// 2026-12-04, 17:25 UTC on).
template <int THREADS>
__device__ __forceinline__ void pad_rows(const unsigned char *__restrict__ x,
                                         unsigned char *__restrict__ y, long long R,
                                         long long bytes, long long ld_bytes, long long ldy_bytes) {
  const long long chunks = (bytes + 15) / 16;
  for (long long r = blockIdx.y; r < R; r += gridDim.y) {
    const unsigned char *const src = x + r * ld_bytes;
    unsigned char *const dst = y + r * ldy_bytes;
    const unsigned int s = static_cast<unsigned int>(reinterpret_cast<unsigned long long>(src) & 15u);
    const uint4 *const al = reinterpret_cast<const uint4 *>(src - s); /* src's aligned chunks */
    for (long long j0 = static_cast<long long>(blockIdx.x) * (4 * THREADS); j0 < chunks;
         j0 += static_cast<long long>(gridDim.x) * (4 * THREADS)) {
      uint4 lo[4], hi[4];
      bool whole[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const long long j = j0 + i * THREADS + threadIdx.x;
        /* Whole when the aligned chunks it spans end inside the row. */
        whole[i] = j < chunks && (s == 0 ? 16 * (j + 1) <= bytes : 16 * j + 32 - s <= bytes);
        if (whole[i]) {
          lo[i] = al[j];
          hi[i] = s ? al[j + 1] : lo[i];
        }
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const long long j = j0 + i * THREADS + threadIdx.x;
        if (j >= chunks) continue;
        if (whole[i]) {
          /* The 32 bytes lo:hi as eight words, shifted right by s bytes:
           * first by whole words (s / 4), then by the bytes left. */
          unsigned int w[8] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w, hi[i].x, hi[i].y, hi[i].z, hi[i].w};
          const unsigned int q = s >> 2, b = (s & 3u) * 8u;
#pragma unroll
          for (int t = 0; t < 7; t++) {
            if (q & 1u) w[t] = w[t + 1];
          }
#pragma unroll
          for (int t = 0; t < 6; t++) {
            if (q & 2u) w[t] = w[t + 2];
          }
          uint4 o;
          o.x = __funnelshift_r(w[0], w[1], b);
          o.y = __funnelshift_r(w[1], w[2], b);
          o.z = __funnelshift_r(w[2], w[3], b);
          o.w = __funnelshift_r(w[3], w[4], b);
          reinterpret_cast<uint4 *>(dst)[j] = o;
        } else {
          for (long long c = 16 * j; c < 16 * j + 16 && c < bytes; c++) dst[c] = src[c];
        }
      }
    }
  }
}

// --- simt ------------------------------------------------------------------

// BM = BN = 128, BK = 16 (8 for double), 256 threads as 16 x 16, each 8 x 8
// outputs: rows ty*4 + i and 64 + ty*4 + i, columns tx*4 + j and 64 + tx*4 + j,
// so that a thread's fragments of one k are two 4-element (LDS.128) reads per
// operand. Both operands are staged K-major in shared memory, S[k][r],
// double-buffered, one __syncthreads per K-tile; the next K-tile's global
// loads are in flight in registers while this one is multiplied, and the
// fragments of step k + 1 are read while step k is. The first K-tile is the
// partial one (it starts at K - tiles * BK <= 0), so the others are whole: an
// operand whose 128 rows (of A) or columns (of B) are in range, with pointer
// and leading dimension 4-element aligned (and K too when it is the
// contiguous dimension), reads them with one vector load per 4 elements, any
// other element by element under a row mask. The index math is a pointer
// advanced by K-tile; the operand stored transposed (K-contiguous) is
// XOR-swizzled so the stores don't conflict. Registers for float: 159 to 167
// under __launch_bounds__(256), one block per SM; plans with more blocks
// than SMs ask for (256, 2), which caps them at 128 (12 bytes spilled
// outside the K loop) for two blocks per SM, 0.07 faster at 4096^3;
// tools/bench/study/sgemm.cu measures it.
// A_K: A is K-contiguous (row-major); B_N: B is N-contiguous (row-major).

// Four consecutive elements, the unit of the vector loads.
template <typename T>
struct alignas(4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16) simt_quad {
  T v[4];
};

// The 0, 4, 8 or 12 (BK 16; 0 or 16 with BK 8) columns that row k of a
// transposed-on-store operand is XOR-swizzled by: conflict-free scalar
// stores, still 4-aligned quads for the LDS.128 fragment reads.
template <int BK>
__device__ __forceinline__ int simt_swz(int k) {
  return ((k / 4) % (BK / 4)) * (128 / BK);
}

// One operand's 128 x BK slab in a thread's registers on its way to shared
// memory, X(r, k) at X[r * ld + k] (CK: K-contiguous) or X[k * ld + r].
// Each thread holds BK / 8 quads of 4 elements consecutive in memory: CK,
// rows r_ + i * (1024 / BK) and columns k_ .. k_ + 3; otherwise rows
// r_ .. r_ + 3 and columns k_ + i * 8. Element j of quad i is at
// p[i * qoff + j] whatever the layout; p moves one K-tile per load.
template <bool CK, int BK, typename T, typename ACC>
struct simt_slab {
  static constexpr int Q = BK / 8, STEP = CK ? 1024 / BK : 8;
  const T *p;
  long long qoff;
  unsigned int rows_in;  // bit i * 4 + j: element j of quad i is in a row < rows
  bool vec;              // whole rows, aligned: vector loads
  int r_, k_;
  ACC v[Q][4];

  __device__ __forceinline__ void init(const T *X, long long ld, long long rows, long long r0,
                                       long long K, long long k0, int tid) {
    r_ = CK ? tid / (BK / 4) : (tid % 32) * 4;
    k_ = CK ? (tid % (BK / 4)) * 4 : tid / 32;
    qoff = STEP * ld;
    p = X + (CK ? (r0 + r_) * ld + (k0 + k_) : (k0 + k_) * ld + (r0 + r_));
    const long long left = rows - r0;
    rows_in = 0;
#pragma unroll
    for (int i = 0; i < Q; i++)
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (r_ + (CK ? i * STEP : j) < left) rows_in |= 1u << (i * 4 + j);
    const unsigned long long al = 4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16;
    vec = left >= 128 && ld % 4 == 0 && (!CK || K % 4 == 0) &&
          reinterpret_cast<unsigned long long>(X) % al == 0;
  }
  // This K-tile element by element: rows in range and columns >= lo.
  __device__ __forceinline__ void load_checked(int lo) {
#pragma unroll
    for (int i = 0; i < Q; i++)
#pragma unroll
      for (int j = 0; j < 4; j++)
        v[i][j] = (rows_in >> (i * 4 + j) & 1) && k_ + (CK ? j : i * STEP) >= lo
                      ? static_cast<ACC>(p[i * qoff + j])
                      : ACC(0);
    p += CK ? (long long)BK : Q * qoff;
  }
  // A whole K-tile: 4-element vector loads where allowed.
  __device__ __forceinline__ void load() {
    if (vec) {
#pragma unroll
      for (int i = 0; i < Q; i++) {
        const simt_quad<T> q = *reinterpret_cast<const simt_quad<T> *>(p + i * qoff);
#pragma unroll
        for (int j = 0; j < 4; j++) v[i][j] = static_cast<ACC>(q.v[j]);
      }
      p += CK ? (long long)BK : Q * qoff;
    } else {
      load_checked(0);
    }
  }
  // Into S, one buffer of S[k][r] as BK rows of 128, r XOR-swizzled by
  // simt_swz(k) when CK (the same for the 4 k of a quad).
  __device__ __forceinline__ void stash(ACC *S) const {
    const int o = k_ * 128 + (CK ? r_ ^ simt_swz<BK>(k_) : r_);
#pragma unroll
    for (int i = 0; i < Q; i++) {
      if (CK) {
#pragma unroll
        for (int j = 0; j < 4; j++) S[o + j * 128 + i * STEP] = v[i][j];
      } else {
        simt_quad<ACC> q;
#pragma unroll
        for (int j = 0; j < 4; j++) q.v[j] = v[i][j];
        *reinterpret_cast<simt_quad<ACC> *>(S + o + i * STEP * 128) = q;
      }
    }
  }
};

// Row k's 8 fragment elements of a thread, c and 64 + c (c = ty * 4 or
// tx * 4), from a slab staged swizzled (SW) or not.
template <bool SW, int BK, typename ACC>
__device__ __forceinline__ void simt_frag(const ACC *S, int k, int c, ACC (&f)[8]) {
  const int o = k * 128 + (SW ? c ^ simt_swz<BK>(k) : c);
  const simt_quad<ACC> lo = *reinterpret_cast<const simt_quad<ACC> *>(S + o);
  const simt_quad<ACC> hi = *reinterpret_cast<const simt_quad<ACC> *>(S + o + 64);
#pragma unroll
  for (int j = 0; j < 4; j++) {
    f[j] = lo.v[j];
    f[j + 4] = hi.v[j];
  }
}

// The K loop: `tiles` K-tiles, the first of them from its column lo on.
template <bool A_K, bool B_N, int BK, typename SA, typename SB, typename ACC>
__device__ __forceinline__ void simt_loop(SA &a, SB &b, ACC *As, ACC *Bs, long long tiles, int lo,
                                          int ty, int tx, ACC (&acc)[8][8]) {
  a.load_checked(lo);
  b.load_checked(lo);
  a.stash(As);
  b.stash(Bs);
  __syncthreads();
  ACC fa[2][8], fb[2][8];
  simt_frag<A_K, BK>(As, 0, ty * 4, fa[0]);
  simt_frag<!B_N, BK>(Bs, 0, tx * 4, fb[0]);
  for (long long t = 0; t < tiles; t++) {
    const int buf = (int)(t & 1);
    const bool more = t + 1 < tiles;
    if (more) {
      a.load();
      b.load();
    }
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      if (kk == BK - 1) {
        if (more) {
          a.stash(As + (buf ^ 1) * (BK * 128));
          b.stash(Bs + (buf ^ 1) * (BK * 128));
          __syncthreads();
          simt_frag<A_K, BK>(As + (buf ^ 1) * (BK * 128), 0, ty * 4, fa[0]);
          simt_frag<!B_N, BK>(Bs + (buf ^ 1) * (BK * 128), 0, tx * 4, fb[0]);
        }
      } else {
        simt_frag<A_K, BK>(As + buf * (BK * 128), kk + 1, ty * 4, fa[(kk + 1) % 2]);
        simt_frag<!B_N, BK>(Bs + buf * (BK * 128), kk + 1, tx * 4, fb[(kk + 1) % 2]);
      }
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] += fa[kk % 2][i] * fb[kk % 2][j];
    }
  }
}

template <bool A_K, bool B_N, typename TA, typename TB, typename ACC, typename Store>
__device__ __forceinline__ void simt_gemm(const TA *__restrict__ A, const TB *__restrict__ B,
                                          long long M, long long N, long long K, long long lda,
                                          long long ldb, long long m0, long long n0,
                                          const Store &store) {
  constexpr int BK = sizeof(ACC) > 4 ? 8 : 16;
  __shared__ __align__(16) ACC As[2 * BK * 128];
  __shared__ __align__(16) ACC Bs[2 * BK * 128];
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  ACC acc[8][8];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++) acc[i][j] = ACC(0);
  const long long tiles = K > 0 ? (K + BK - 1) / BK : 0, k0 = K - tiles * BK;
  if (tiles > 0) {
    simt_slab<A_K, BK, TA, ACC> a;
    simt_slab<!B_N, BK, TB, ACC> b;
    a.init(A, lda, M, m0, K, k0, tid);
    b.init(B, ldb, N, n0, K, k0, tid);
    simt_loop<A_K, B_N, BK>(a, b, As, Bs, tiles, (int)-k0, ty, tx, acc);
  }
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 8; j++)
      store(m0 + (i < 4 ? ty * 4 + i : 60 + ty * 4 + i),
            n0 + (j < 4 ? tx * 4 + j : 60 + tx * 4 + j), acc[i][j]);
}

// --- mma (tensor cores) ----------------------------------------------------

__device__ __forceinline__ unsigned int smem_u32(const void *p) {
  return static_cast<unsigned int>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared, zero-filled when `full` is false.
__device__ __forceinline__ void cp_async16(unsigned int dst, const void *src, bool full) {
#ifdef JITK_EMULATOR
  jitk_emu_cp_async(dst, src, 16, full ? 16 : 0);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(full ? 16 : 0));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifndef JITK_EMULATOR
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifndef JITK_EMULATOR
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// --- simt on cp.async (float32) ---------------------------------------------
// A 128 x BN tile a block, K-tiles of BK (16) moved by cp.async straight
// into a STAGES-deep ring of shared memory (no registers in between, so
// they go to the accumulators): float32 only, as cp.async moves bytes and
// cannot convert. The block's warps are WM x WN, each with a tile of
// (128 / WM) x (BN / WN) outputs, its lanes LR x LC (LR * LC = 32), and
// each lane 4 HA x 4 HB outputs: rows lr * 4 + 4 LR h + i, columns lc * 4 +
// 4 LC h + j of its warp's tile (lr = lane / LC, lc = lane % LC), whose
// fragments of one k are HA and HB 16-byte shared loads that a warp serves
// in one pass each (LR and LC distinct quads).
//
// The wide tile, 128 x 256 in 2 x 4 warps of 64 x 64, 16 x 8 a lane, is
// the one for products that fill the GPU: with 128 accumulators and 6 loads
// per 128 FFMA (the 8 x 8 routine above: 64 and 4) one block of 8 warps a
// multiprocessor issues FFMA on more of its cycles than two blocks of the
// 8 x 8 routine. The order of a k's FFMA matters as much: walking the
// columns back and forth (SNAKE), consecutive FFMA share an operand at
// every turn too, and 4096^3 on the H200 went from 46.2 to 49.9 TFLOP/s
// (tools/bench/study/sgemm.cu). Narrower tiles with fewer outputs a lane
// trade some of that rate for enough tiles to keep every multiprocessor
// busy on small products (tools/bench/study/sgemm_tiles.cu).
//
// Shared memory holds both operands K-major, S[k][r], a stage A's BK x 128
// then B's BK x BN, each row of k padded by 4 floats: a warp's stores of a
// K-contiguous operand, 4 rows x 8 k, then fall in 32 different banks, and
// every fragment read is the thread's base address plus a constant (an XOR
// swizzle would cost address arithmetic at each read). A K-contiguous
// operand is moved element by element (4 bytes), an MN-contiguous one 16
// bytes at a time where its whole tile is in range and aligned, else
// element by element. The first K-tile is the partial one, as in
// simt_gemm; elements out of range are zero-filled by the copies (source
// size 0). A block whose rows and columns are all in range runs a K loop
// whose copies check nothing.

// A tile shape of ffma_gemm: BN columns, WM x WN warps, LR rows of lanes.
template <int BN_, int WM_, int WN_, int LR_>
struct ffma_tile {
  static constexpr int BM = 128, BN = BN_, WM = WM_, WN = WN_, THREADS = WM_ * WN_ * 32;
  static constexpr int LR = LR_, LC = 32 / LR_;
  static constexpr int HA = BM / WM_ / (4 * LR), HB = BN_ / WN_ / (4 * LC);
  static constexpr int TM = 4 * HA, TN = 4 * HB;
  // Floats of a stage's A and of a whole stage, per k of a K-tile.
  static constexpr int A_ROW = BM + 4, STAGE_ROW = BM + 4 + BN_ + 4;
  static_assert(LR * LC == 32 && HA >= 1 && HB >= 1 && HA * 4 * LR * WM == BM &&
                    HB * 4 * LC * WN == BN,
                "ffma_tile: the lanes' quads must cover the tile");
};
using wide_tile = ffma_tile<256, 2, 4, 4>;

// 4 bytes from global to shared, zero-filled when `full` is false.
__device__ __forceinline__ void cp_async4(unsigned int dst, const void *src, bool full) {
#ifdef JITK_EMULATOR
  jitk_emu_cp_async(dst, src, 4, full ? 4 : 0);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
               "r"(full ? 4 : 0));
#endif
}
__device__ __forceinline__ void cp_async4(unsigned int dst, const void *src) {
#ifdef JITK_EMULATOR
  jitk_emu_cp_async(dst, src, 4, 4);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
#endif
}
__device__ __forceinline__ void cp_async16(unsigned int dst, const void *src) {
#ifdef JITK_EMULATOR
  jitk_emu_cp_async(dst, src, 16, 16);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#endif
}

// One operand's R x BK slab of a K-tile (R = 128 rows of A or BN columns of
// B), X(r, k) at X[r * ld + k] (CK) or X[k * ld + r], moved by T threads.
// A thread's copies: CK, 8 R / T elements of each group of 8 columns,
// column k_ + 8 g of rows r + (T / 8) i; vector, BK R / (4 T) quads of 4
// consecutive rows, column k_ + (4 T / R) i; otherwise BK R / T elements,
// column k_ + (T / R) i of one row. Copy i reads p plus a multiple of step
// (and, CK, 8 g) and writes byte dst plus a constant of the stage.
template <bool CK, int R, int BK, int T>
struct ffma_slab {
  static constexpr int E = R * 8 / T, G = BK / 8, RP = R + 4;
  static constexpr int VK = 4 * T / R, NV = BK / VK, EK = T / R, NE = BK / EK;
  static_assert(R % (T / 8) == 0 && T % R == 0 && VK <= BK && BK % VK == 0 && BK % 8 == 0,
                "ffma_slab: the threads must divide the slab evenly");
  const float *p, *x;
  long long step, adv;
  unsigned int dst, rows_in, all;
  int k_;
  bool vec;

  __device__ __forceinline__ void init(const float *X, long long ld, long long rows, long long r0,
                                       long long k0, int tid) {
    const long long left = rows - r0;
    x = X;
    rows_in = 0;
    vec = !CK && left >= R && ld % 4 == 0 && reinterpret_cast<unsigned long long>(X) % 16 == 0;
    int r;
    if (CK) {
      all = (1u << E) - 1;
      k_ = tid % 8;
      r = tid / 8;
      step = (T / 8) * ld;
      adv = BK;
#pragma unroll
      for (int i = 0; i < E; i++)
        if (r + (T / 8) * i < left) rows_in |= 1u << i;
      dst = (k_ * RP + r) * 4;
      p = X + (r0 + r) * ld + (k0 + k_);
      return;
    }
    all = 1;
    if (vec) {
      k_ = tid / (R / 4);
      r = (tid % (R / 4)) * 4;
      step = VK * ld;
      rows_in = 1;
    } else {
      k_ = tid / R;
      r = tid % R;
      step = EK * ld;
      if (r < left) rows_in = 1;
    }
    adv = BK * ld;
    dst = (k_ * RP + r) * 4;
    p = X + (k0 + k_) * ld + (r0 + r);
  }
  // This K-tile into the stage at byte address s: CHECK, only elements of
  // rows in range and of columns >= lo; otherwise all of them.
  template <bool CHECK>
  __device__ __forceinline__ void load(unsigned int s, int lo) {
    if (CK) {
#pragma unroll
      for (int g = 0; g < G; g++)
#pragma unroll
        for (int i = 0; i < E; i++) {
          const unsigned int d = s + dst + (i * (T / 8) + g * 8 * RP) * 4;
          const float *q = p + i * step + g * 8;
          if (CHECK) {
            const bool in = (rows_in >> i & 1) && k_ + 8 * g >= lo;
            cp_async4(d, in ? q : x, in);
          } else {
            cp_async4(d, q);
          }
        }
    } else if (vec) {
#pragma unroll
      for (int i = 0; i < NV; i++) {
        const unsigned int d = s + dst + i * VK * RP * 4;
        if (CHECK) {
          const bool in = k_ + i * VK >= lo;
          cp_async16(d, in ? p + i * step : x, in);
        } else {
          cp_async16(d, p + i * step);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < NE; i++) {
        const unsigned int d = s + dst + i * EK * RP * 4;
        if (CHECK) {
          const bool in = rows_in && k_ + i * EK >= lo;
          cp_async4(d, in ? p + i * step : x, in);
        } else {
          cp_async4(d, p + i * step);
        }
      }
    }
    p += adv;
  }
};

// The fragments of row k of a stage's operand of R rows: H quads GAP apart
// from c. The loads take 32-bit shared addresses: NVRTC, unlike nvcc,
// computes the address of a plain load through a shared pointer in 64
// bits, and the loop ptxas then scheduled ran at 47.8 TFLOP/s at 4096^3 on
// the H200, against 49.8-50.0 with these (0.99 of cuBLAS, where nvcc's
// build of plain loads made 49.1-49.2). Not volatile, so that the compiler
// schedules them among the FFMA; the memory clobber and the barrier after
// each wait for the copies keep them behind it.
template <int R, int H, int GAP>
__device__ __forceinline__ void ffma_frag(const float *S, int k, int c, float (&f)[4 * H]) {
#pragma unroll
  for (int h = 0; h < H; h++) {
    const unsigned int a = static_cast<unsigned int>(__cvta_generic_to_shared(S)) +
                           4 * (k * (R + 4) + c + GAP * h);
#ifdef JITK_EMULATOR
    jitk_emu_ld_shared(a, &f[4 * h], 16);
#else
    asm("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
        : "=f"(f[4 * h]), "=f"(f[4 * h + 1]), "=f"(f[4 * h + 2]), "=f"(f[4 * h + 3])
        : "r"(a)
        : "memory");
#endif
  }
}

// K-tiles 0 to tiles - 1 (tile 0 and the next STAGES - 2 are in flight),
// copies checked (CHECK) or not. Each K-tile refills the slot read one
// K-tile before, free since the last barrier; at its last k it waits for
// the next K-tile's copies and the barrier, and reads that K-tile's first
// fragments while the FFMA of its last k run. SNAKE: the FFMA of one k
// walk the columns back and forth, so that consecutive ones share an
// operand at each turn too.
template <typename C, int BK, int STAGES, bool SNAKE, bool CHECK, typename SA, typename SB>
__device__ __forceinline__ void ffma_loop(SA &a, SB &b, const float *S, unsigned int base,
                                          long long tiles, int ra, int cb,
                                          float (&acc)[C::TM][C::TN]) {
  constexpr int A_FLOATS = C::A_ROW * BK, STAGE_FLOATS = C::STAGE_ROW * BK;
  constexpr int GA = 4 * C::LR, GB = 4 * C::LC;
  float fa[2][C::TM], fb[2][C::TN];
  ffma_frag<C::BM, C::HA, GA>(S, 0, ra, fa[0]);
  ffma_frag<C::BN, C::HB, GB>(S + A_FLOATS, 0, cb, fb[0]);
  int st = 0;
  for (long long t = 0; t < tiles; t++) {
    const int free_st = st == 0 ? STAGES - 1 : st - 1;
    if (t + STAGES - 1 < tiles) {
      a.template load<CHECK>(base + free_st * STAGE_FLOATS * 4, 0);
      b.template load<CHECK>(base + (free_st * STAGE_FLOATS + A_FLOATS) * 4, 0);
    }
    cp_async_commit();
    const float *sa = S + st * STAGE_FLOATS;
    st = st == STAGES - 1 ? 0 : st + 1;
#pragma unroll
    for (int kk = 0; kk < BK; kk++) {
      if (kk == BK - 1) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const float *sn = S + st * STAGE_FLOATS;
        ffma_frag<C::BM, C::HA, GA>(sn, 0, ra, fa[0]);
        ffma_frag<C::BN, C::HB, GB>(sn + A_FLOATS, 0, cb, fb[0]);
      } else {
        ffma_frag<C::BM, C::HA, GA>(sa, kk + 1, ra, fa[(kk + 1) % 2]);
        ffma_frag<C::BN, C::HB, GB>(sa + A_FLOATS, kk + 1, cb, fb[(kk + 1) % 2]);
      }
#pragma unroll
      for (int i = 0; i < C::TM; i++)
#pragma unroll
        for (int jj = 0; jj < C::TN; jj++) {
          const int j = SNAKE && (i & 1) ? C::TN - 1 - jj : jj;
          acc[i][j] += fa[kk % 2][i] * fb[kk % 2][j];
        }
    }
  }
}

// The bytes of shared memory ffma_gemm takes with STAGES K-tiles of BK.
template <typename C, int STAGES, int BK = 16>
__host__ __device__ constexpr int ffma_smem() {
  return STAGES * C::STAGE_ROW * BK * 4;
}

// One 128 x C::BN tile of A @ B by C::THREADS threads, STAGES K-tiles of BK
// in flight in `smem` (ffma_smem bytes).
template <typename C, bool A_K, bool B_N, int STAGES, int BK = 16, bool SNAKE = true,
          typename Store>
__device__ __forceinline__ void ffma_gemm(const float *__restrict__ A, const float *__restrict__ B,
                                          long long M, long long N, long long K, long long lda,
                                          long long ldb, long long m0, long long n0,
                                          unsigned char *smem, const Store &store) {
  constexpr int A_BYTES = C::A_ROW * BK * 4, STAGE_BYTES = C::STAGE_ROW * BK * 4;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ra = (warp / C::WN) * (C::BM / C::WM) + (lane / C::LC) * 4,
            cb = (warp % C::WN) * (C::BN / C::WN) + (lane % C::LC) * 4;
  const unsigned int base = smem_u32(smem);
  float acc[C::TM][C::TN];
#pragma unroll
  for (int i = 0; i < C::TM; i++)
#pragma unroll
    for (int j = 0; j < C::TN; j++) acc[i][j] = 0.f;
  const long long tiles = K > 0 ? (K + BK - 1) / BK : 0, k0 = K - tiles * BK;
  if (tiles > 0) {
    ffma_slab<A_K, C::BM, BK, C::THREADS> a;
    ffma_slab<!B_N, C::BN, BK, C::THREADS> b;
    a.init(A, lda, M, m0, k0, tid);
    b.init(B, ldb, N, n0, k0, tid);
    const int lo = (int)-k0;
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < tiles) {
        a.template load<true>(base + s * STAGE_BYTES, s == 0 ? lo : 0);
        b.template load<true>(base + s * STAGE_BYTES + A_BYTES, s == 0 ? lo : 0);
      }
      cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    const float *S = reinterpret_cast<const float *>(smem);
    /* Whether every row and column of the block's tile is in range: the
     * same for all its threads, so the block takes one loop. */
    if (__syncthreads_and(a.rows_in == a.all && b.rows_in == b.all))
      ffma_loop<C, BK, STAGES, SNAKE, false>(a, b, S, base, tiles, ra, cb, acc);
    else
      ffma_loop<C, BK, STAGES, SNAKE, true>(a, b, S, base, tiles, ra, cb, acc);
    cp_async_wait<0>();
  }
#pragma unroll
  for (int i = 0; i < C::TM; i++)
#pragma unroll
    for (int j = 0; j < C::TN; j++)
      store(m0 + ra + (i / 4) * 4 * C::LR + i % 4, n0 + cb + (j / 4) * 4 * C::LC + j % 4,
            acc[i][j]);
}

// --- split-K summed across a cluster ---------------------------------------
// A split FFMA plan on sm_90 launches the slices of a tile as one
// thread-block cluster of (1, 1, S) blocks (jk_mm_spec's csplit). Each
// block stages its partial 128 x BN tile in its own shared memory (rows LD
// = BN + 4 floats apart, so that the scattered stores of a thread's
// fragment spread over the banks while float4 reads along a row stay
// aligned); then block q of the cluster sums rows q * 128 / S up to (q + 1)
// * 128 / S over the S blocks' stages through distributed shared memory,
// slice 0 first, which is the order (and so the bits) of the fix-up
// kernel's sum, and hands each sum to the plan's store. The split thus
// needs no workspace in global memory, no zeroed counters and no second
// kernel: each of those cost microseconds that a small product, the kind
// that splits K, cannot hide.

// The rank of this block in its cluster, and the cluster's barrier for
// every thread of every block, with release and acquire semantics (every
// block's shared-memory stores before it are seen by every block's loads
// after it); matmul_sm90.cuh's clustered kernels use them too.
__device__ __forceinline__ unsigned int cluster_rank() {
#ifdef JITK_EMULATOR
  return jitk_emu_cluster_rank();
#else
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#endif
}
__device__ __forceinline__ void cluster_barrier() {
#ifdef JITK_EMULATOR
  jitk_emu_cluster_barrier();
#else
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}
// The four floats at `p` in this block's shared memory, read from the
// same place in the shared memory of the cluster's block `rank`.
__device__ __forceinline__ float4 cluster_load4(const float *p, unsigned int rank) {
#ifdef JITK_EMULATOR
  return jitk_emu_cluster_load4(p, rank);
#else
  unsigned int a;
  float4 v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(smem_u32(p)), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(a)
               : "memory");
  return v;
#endif
}

// After every thread of the block has stored its partial sums into
// `stage` (stage[r * (BN + 4) + c] for the tile's row r and column c):
// this block's rows of the tile summed over the cluster and stored as
// store(m0 + r, n0 + c, sum). Every thread of every block of the cluster
// calls it, as it holds two cluster-wide barriers: the second keeps each
// block's stage alive until the others have read it.
template <int BN, int THREADS, typename Store>
__device__ __forceinline__ void cluster_sum(const float *stage, long long m0, long long n0,
                                            const Store &store) {
  constexpr int LD = BN + 4, QUADS = BN / 4;
  const unsigned int slices = gridDim.z, q = cluster_rank();
  const int r0 = static_cast<int>(128 * q / slices), r1 = static_cast<int>(128 * (q + 1) / slices);
  cluster_barrier();
  for (int i = static_cast<int>(threadIdx.x); i < (r1 - r0) * QUADS; i += THREADS) {
    const int r = r0 + i / QUADS, c = (i % QUADS) * 4;
    const float *p = stage + r * LD + c;
    float4 sum = cluster_load4(p, 0);
    for (unsigned int z = 1; z < slices; z++) {
      const float4 v = cluster_load4(p, z);
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    store(m0 + r, n0 + c, sum.x);
    store(m0 + r, n0 + c + 1, sum.y);
    store(m0 + r, n0 + c + 2, sum.z);
    store(m0 + r, n0 + c + 3, sum.w);
  }
  cluster_barrier();
}

__device__ __forceinline__ void ldmatrix_x4(unsigned int &r0, unsigned int &r1, unsigned int &r2,
                                            unsigned int &r3, unsigned int addr) {
#ifdef JITK_EMULATOR
  jitk_emu_ldmatrix_x4(r0, r1, r2, r3, addr, false);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned int &r0, unsigned int &r1,
                                                  unsigned int &r2, unsigned int &r3,
                                                  unsigned int addr) {
#ifdef JITK_EMULATOR
  jitk_emu_ldmatrix_x4(r0, r1, r2, r3, addr, true);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
#endif
}

// D = A B + D on one tile: m16n8k16 for float16 (KIND 0) and bfloat16
// (KIND 1), m16n8k8 for tf32 (KIND 2, float32 bits whose low mantissa
// bits the tensor cores ignore).
template <int KIND>
__device__ __forceinline__ void mma_tile(float (&d)[4], const unsigned int (&a)[4],
                                         unsigned int b0, unsigned int b1) {
#ifdef JITK_EMULATOR
  jitk_emu_mma(KIND, d, a, b0, b1);
#else
  if (KIND == 1)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else if (KIND == 0)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Tile 128 x BN x BK, 8 warps as 2 (m) x 4 (n), each 64 x BN / 4 outputs;
// STAGES tiles in flight. Elements are 2 bytes (KIND 0, 1) or 4 (KIND 2,
// tf32); a tile row of A is AROW bytes (64 or 128: BK = AROW / element
// size) either way. A is K-contiguous with lda a multiple of a 16-byte
// chunk; B_N: B is N-contiguous, else K-contiguous, ldb likewise; K and,
// with B_N, N are multiples of a chunk, so that every chunk is wholly in
// range or out. The block needs STAGES * AROW * (128 + BN) bytes of dynamic
// shared memory.
//
// Shared memory, per stage: A as [128 rows][AROW bytes], chunk c of row r
// stored at c ^ ((r >> 1) & 3) (64-byte rows) or c ^ (r & 7) (128-byte
// rows); B as [BK rows][BN] with chunk c of row k at c ^ (k & 7) when B_N,
// else as [BN rows][AROW bytes] like A. The eight rows one ldmatrix reads
// then fall in eight different bank groups.
template <int STAGES, int KIND, bool B_N, int BN, int AROW, typename T, typename Store>
__device__ __forceinline__ void mma_gemm(const T *__restrict__ A, const T *__restrict__ B,
                                         long long M, long long N, long long K, long long lda,
                                         long long ldb, long long m0, long long n0,
                                         unsigned char *smem, const Store &store) {
  constexpr int ES = KIND == 2 ? 4 : 2, CH = 16 / ES; /* element bytes, elements a chunk */
  constexpr int BM = 128, BK = AROW / ES, KSTEP = KIND == 2 ? 8 : 16;
  constexpr int CA = AROW / 16;                        /* chunks in a row of A */
  constexpr int B_ROW = BN * ES, B_CHUNKS = B_ROW / 16; /* B_N rows */
  constexpr int WN = BN / 4, NJ = WN / 8;               /* warp tile width, n8 tiles */
  constexpr int A_BYTES = BM * AROW, STAGE_BYTES = A_BYTES + BK * B_ROW;
  constexpr int A_LOADS = BM * CA / 256, B_LOADS = (B_N ? BK * B_CHUNKS : BN * CA) / 256;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3; /* warp tile at (wm * 64, wn * WN) */
  const unsigned int base = smem_u32(smem);
  float acc[4][NJ][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
      for (int v = 0; v < 4; v++) acc[i][j][v] = 0.f;

  // Byte offsets of (row, chunk) in the A-like layout and in B_N's.
  auto a_off = [](int r, int c) {
    return r * AROW + ((c ^ (AROW == 64 ? ((r >> 1) & 3) : (r & 7))) << 4);
  };
  auto bn_off = [](int k, int c) { return k * B_ROW + ((c ^ (k & 7)) << 4); };

  auto load_stage = [&](int stage, long long k0) {
    const unsigned int sa = base + stage * STAGE_BYTES, sb = sa + A_BYTES;
#pragma unroll
    for (int i = 0; i < A_LOADS; i++) {
      const int e = tid + i * 256;
      const int r = e / CA, c = e % CA;
      const long long gm = m0 + r, gk = k0 + c * CH;
      const bool in = gm < M && gk < K;
      cp_async16(sa + a_off(r, c), A + (in ? gm * lda + gk : 0), in);
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; i++) {
      const int e = tid + i * 256;
      if (B_N) { /* BK rows x B_CHUNKS chunks of n */
        const int k = e / B_CHUNKS, c = e % B_CHUNKS;
        const long long gk = k0 + k, gn = n0 + c * CH;
        const bool in = gk < K && gn < N;
        cp_async16(sb + bn_off(k, c), B + (in ? gk * ldb + gn : 0), in);
      } else { /* BN rows x CA chunks of k */
        const int r = e / CA, c = e % CA;
        const long long gn = n0 + r, gk = k0 + c * CH;
        const bool in = gn < N && gk < K;
        cp_async16(sb + a_off(r, c), B + (in ? gn * ldb + gk : 0), in);
      }
    }
  };

  const long long tiles = (K + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < STAGES - 1; s++) {
    if (s < tiles) load_stage(s, s * BK);
    cp_async_commit();
  }
  for (long long t = 0; t < tiles; t++) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    /* The ring slot read one step ago is free now: refill it. */
    const long long next = t + STAGES - 1;
    if (next < tiles) load_stage((int)(next % STAGES), next * BK);
    cp_async_commit();
    const int stage = (int)(t % STAGES);
    const unsigned int sa = base + stage * STAGE_BYTES, sb = sa + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / KSTEP; kk++) { /* each step spans two chunks of k */
      unsigned int af[4][4], bf[NJ][2];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int r = wm * 64 + i * 16 + (lane & 15), c = kk * 2 + (lane >> 4);
        ldmatrix_x4(af[i][0], af[i][1], af[i][2], af[i][3], sa + a_off(r, c));
      }
      if (KIND == 2 && B_N) {
        /* 32-bit elements cannot be transposed by ldmatrix: b0 is (k = t,
         * n = g) and b1 (k = t + 4, n = g), read one by one. */
        const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
        for (int j = 0; j < NJ; j++) {
          const int n = wn * WN + j * 8 + g, c = n >> 2, w = (n & 3) * 4;
          const int k0 = kk * 8 + t4, k1 = k0 + 4;
#ifdef JITK_EMULATOR
          jitk_emu_ld_shared(sb + bn_off(k0, c) + w, &bf[j][0], 4);
          jitk_emu_ld_shared(sb + bn_off(k1, c) + w, &bf[j][1], 4);
#else
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(bf[j][0]) : "r"(sb + bn_off(k0, c) + w));
          asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(bf[j][1]) : "r"(sb + bn_off(k1, c) + w));
#endif
        }
      } else {
#pragma unroll
        for (int j = 0; j < NJ; j += 2) { /* two n8 tiles per ldmatrix.x4 */
          if (B_N) {
            const int k = kk * 16 + (lane & 15), c = (wn * WN + j * 8) / 8 + (lane >> 4);
            ldmatrix_x4_trans(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], sb + bn_off(k, c));
          } else {
            const int r = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3),
                      c = kk * 2 + ((lane >> 3) & 1);
            ldmatrix_x4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1], sb + a_off(r, c));
          }
        }
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < NJ; j++) mma_tile<KIND>(acc[i][j], af[i], bf[j][0], bf[j][1]);
    }
  }
  cp_async_wait<0>();
  /* Accumulator v of tile (i, j): row lane / 4 (+ 8 for v >= 2), column
   * (lane % 4) * 2 + v % 2. */
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
      for (int v = 0; v < 4; v++)
        store(m0 + wm * 64 + i * 16 + (lane >> 2) + (v >> 1) * 8,
              n0 + wn * WN + j * 8 + (lane & 3) * 2 + (v & 1), acc[i][j][v]);
}

// Reductions of the epilogue's values. The product's kernel writes each
// term (or, on wgmma, each tile's partial results: codegen.h's
// jk_mm_tile_reduces) to a workspace w (batch x rows x cols, row-major);
// these kernels reduce it in an order fixed by the shape alone, so that
// every execution gives the same bits, with no atomics.
template <typename W> __device__ __forceinline__ W infinity();
template <> __device__ __forceinline__ float infinity<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double infinity<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}
struct op_sum {
  template <typename W> __device__ static W first() { return W(0); }
  template <typename W> __device__ static W apply(W a, W b) { return a + b; }
};
// max and min keep a NaN: a term that is NaN makes the result NaN.
struct op_max {
  template <typename W> __device__ static W first() { return -infinity<W>(); }
  template <typename W> __device__ static W apply(W a, W b) { return (b > a || b != b) ? b : a; }
};
struct op_min {
  template <typename W> __device__ static W first() { return infinity<W>(); }
  template <typename W> __device__ static W apply(W a, W b) { return (b < a || b != b) ? b : a; }
};

// Over the rows, first step: block (x, chunk, batch), a thread per column,
// each reducing `chunk` rows in order into p (batch x chunks x cols).
template <typename OP, typename W>
__device__ __forceinline__ void red_rows_part(const W *w, W *p, long long rows, long long cols,
                                              long long chunk) {
  const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  const long long c = blockIdx.y, b = blockIdx.z, r1 = min(rows, (c + 1) * chunk);
  const W *src = w + b * rows * cols + col;
  W acc = OP::template first<W>();
#pragma unroll 8
  for (long long r = c * chunk; r < r1; r++) acc = OP::apply(acc, src[r * cols]);
  p[(b * gridDim.y + c) * cols + col] = acc;
}

// Second step: a thread per column and batch (block (x, batch)) reduces
// the chunks in order.
template <typename OP, typename W, typename O>
__device__ __forceinline__ void red_rows_final(const W *p, O *out, long long chunks,
                                               long long cols) {
  const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  const long long b = blockIdx.y;
  W acc = OP::template first<W>();
#pragma unroll 8
  for (long long c = 0; c < chunks; c++) acc = OP::apply(acc, p[(b * chunks + c) * cols + col]);
  out[b * cols + col] = static_cast<O>(acc);
}

// Over the columns: a warp per row (block (x, batch) of 8 warps), each
// lane reducing the columns lane, lane + 32, ... in order, then the lanes
// pairwise (a butterfly: every lane ends with the same bits).
template <typename OP, typename W, typename O>
__device__ __forceinline__ void red_cols(const W *w, O *out, long long rows, long long cols) {
  const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const long long b = blockIdx.y;
  const W *src = w + (b * rows + row) * cols;
  W acc = OP::template first<W>();
  for (long long c = lane; c < cols; c += 32) acc = OP::apply(acc, src[c]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc = OP::apply(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  if (lane == 0) out[b * rows + row] = static_cast<O>(acc);
}

// The whole matrix, second step: one block of 256 threads per batch
// reduces the n per-row results p[batch * n ...] in a fixed tree.
template <typename OP, typename W, typename O>
__device__ __forceinline__ void red_all_final(const W *p, O *out, long long n) {
  __shared__ W part[256];
  const long long b = blockIdx.x;
  W acc = OP::template first<W>();
  for (long long i = threadIdx.x; i < n; i += 256) acc = OP::apply(acc, p[b * n + i]);
  part[threadIdx.x] = acc;
  __syncthreads();
#pragma unroll
  for (int s = 128; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) part[threadIdx.x] = OP::apply(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[b] = static_cast<O>(part[0]);
}

}  // namespace mm
}  // namespace jitk
