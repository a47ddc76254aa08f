// jitk/elementwise.cuh: what generated elementwise kernels stand on.
//
// Kept free of other includes: each one NVRTC must read costs compile
// time, and a generated float32 kernel should compile in a few tens of
// milliseconds.
#pragma once

namespace jitk {
namespace ew {

// The `_ind` of CuPy's kernels: _ind.size() is the number of elements the
// loop visits.
template <typename I>
struct index {
  I n;
  __device__ __forceinline__ I size() const { return n; }
};

// Division by a divisor fixed for the whole launch, without a divide
// instruction: q = (umulhi(x, magic) + x) >> shift, with magic and shift
// computed on the host. Exact whenever x + umulhi(x, magic) does not
// overflow, which holds for x below 2^31 (32-bit) or 2^63 (64-bit): the
// index widths jitk chooses guarantee it.
__device__ __forceinline__ unsigned int div_u32(unsigned int x, unsigned int magic,
                                                unsigned int shift) {
  return (__umulhi(x, magic) + x) >> shift;
}
__device__ __forceinline__ unsigned long long div_u64(unsigned long long x,
                                                      unsigned long long magic,
                                                      unsigned int shift) {
  return (__umul64hi(x, magic) + x) >> shift;
}

// V elements of T, aligned so that loading one is a single vector access.
template <typename T, int V>
struct alignas(sizeof(T) * V) vec {
  T v[V];
};

}  // namespace ew
}  // namespace jitk
