// jitk/reduction.cuh: what generated reduction kernels stand on. A
// partial result carries whether it holds anything, because a reduction
// without an identity starts empty; partial results combine in a fixed
// tree, so the same input gives the same bits on every run.
//
// Kept free of CUB and of other includes: CUB's block reduce alone costs
// about a second of NVRTC time, and a generated float32 reduction should
// compile in a few tens of milliseconds.
#pragma once

namespace jitk {
namespace red {

template <typename T>
struct part {
  T v;
  int has;
};

// Folds (v, vhas) into (acc, has), acc on the left: op(acc, v).
template <typename T, typename Op>
__device__ __forceinline__ void merge(T &acc, int &has, const T &v, int vhas, const Op &op) {
  if (vhas) {
    acc = has ? op(acc, v) : v;
    has = 1;
  }
}

// A warp shuffle of any trivially copyable T, one 32-bit word at a time
// (the reduce type may be a struct of the user's preamble): `Sh` moves
// one word.
template <typename T, typename Sh>
__device__ __forceinline__ T shfl_words(const T &v, const Sh &sh) {
  constexpr int W = (int)((sizeof(T) + 3) / 4);
  unsigned int w[W];
  memcpy(w, &v, sizeof(T));
#pragma unroll
  for (int i = 0; i < W; i++) w[i] = sh(w[i]);
  T r;
  memcpy(&r, w, sizeof(T));
  return r;
}

struct sh_down {
  unsigned int d;
  __device__ unsigned int operator()(unsigned int x) const {
    return __shfl_down_sync(0xffffffffu, x, d);
  }
};
struct sh_idx {
  unsigned int src;
  __device__ unsigned int operator()(unsigned int x) const {
    return __shfl_sync(0xffffffffu, x, src);
  }
};
struct sh_xor {
  unsigned int mask;
  __device__ unsigned int operator()(unsigned int x) const {
    return __shfl_xor_sync(0xffffffffu, x, mask);
  }
};

// __shfl_down_sync, __shfl_sync of lane `src`, __shfl_xor_sync.
template <typename T>
__device__ __forceinline__ T shfl_down(const T &v, unsigned int delta) {
  return shfl_words(v, sh_down{delta});
}
template <typename T>
__device__ __forceinline__ T shfl_idx(const T &v, unsigned int src) {
  return shfl_words(v, sh_idx{src});
}
template <typename T>
__device__ __forceinline__ T shfl_xor(const T &v, unsigned int mask) {
  return shfl_words(v, sh_xor{mask});
}

// The partial results of groups of G lanes (a power of two up to 32) into
// each group's first lane, in a fixed tree: that lane ends with
// ((l0 l1)(l2 l3))... for every input, so the result does not depend on
// timing. Every lane of the warp must call it.
template <int G, typename T, typename Op>
__device__ __forceinline__ void group_reduce(T &acc, int &has, const Op &op) {
  const unsigned int lane = threadIdx.x & 31;
#pragma unroll
  for (unsigned int d = 1; d < G; d <<= 1) {
    const T o = shfl_down(acc, d);
    const int oh = __shfl_down_sync(0xffffffffu, has, d);
    if ((lane & (2 * d - 1)) == 0) merge(acc, has, o, oh, op);
  }
}

// The warp's partial results into lane 0: one group of the whole warp.
template <typename T, typename Op>
__device__ __forceinline__ void warp_reduce(T &acc, int &has, const Op &op) {
  group_reduce<32>(acc, has, op);
}

// The block's partial results into thread 0: each warp's, then warp 0
// over the warps' in order. `scratch` holds NT / 32 parts. Every thread
// of the block must call it; it ends with a barrier, so the scratch may
// be used again at once.
template <int NT, typename T, typename Op>
__device__ __forceinline__ void block_reduce(T &acc, int &has, const Op &op, void *scratch) {
  part<T> *s = static_cast<part<T> *>(scratch);
  warp_reduce(acc, has, op);
  const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    s[warp].v = acc;
    s[warp].has = has;
  }
  __syncthreads();
  if (warp == 0) {
    has = 0;
    if (lane < NT / 32) {
      acc = s[lane].v;
      has = s[lane].has;
    }
    warp_reduce(acc, has, op);
  }
  __syncthreads();
}

// The same folds when every lane's partial result holds something, as
// when the reduction has an identity and every accumulator starts from
// it: the same tree, so the same bits in the first lane, without the
// flags. Half the shuffles and no selects; the other lanes end with other
// folds, which nothing reads. NVVM and ptxas see half the code, so a
// reduction with an identity also compiles faster.
template <int G, typename T, typename Op>
__device__ __forceinline__ void group_reduce_full(T &acc, const Op &op) {
#pragma unroll
  for (unsigned int d = 1; d < G; d <<= 1) acc = op(acc, shfl_down(acc, d));
}

// block_reduce without the flags. `scratch` holds NT / 32 values of T
// (the NT / 32 parts of block_reduce are room enough). Warp 0 folds only
// its first NT / 32 lanes: block_reduce's tree, where the other lanes
// would be empty.
template <int NT, typename T, typename Op>
__device__ __forceinline__ void block_reduce_full(T &acc, const Op &op, void *scratch) {
  T *s = static_cast<T *>(scratch);
  group_reduce_full<32>(acc, op);
  const unsigned int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) s[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    if (lane < NT / 32) acc = s[lane];
    group_reduce_full<NT / 32>(acc, op);
  }
  __syncthreads();
}

}  // namespace red
}  // namespace jitk
