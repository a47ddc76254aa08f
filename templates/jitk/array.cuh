// jitk/array.cuh: the descriptor jitk passes for an array argument
// (jitk_arg_array on the host side).
//
// Layout, which the host packs byte for byte: the address of the first
// element, then N extents, then N strides, all 64-bit. Strides count
// elements, not bytes, as DLPack does; they may be zero (broadcast) or
// negative (reversed views).
#pragma once

namespace jitk {

template <typename T, int N>
struct array {
  T *data;
  long long shape[N > 0 ? N : 1];
  long long strides[N > 0 ? N : 1];

  // The number of elements.
  __device__ __forceinline__ long long size() const {
    long long n = 1;
#pragma unroll
    for (int d = 0; d < N; ++d) n *= shape[d];
    return n;
  }

  // The element at one index per dimension: a(i, j).
  template <typename... I>
  __device__ __forceinline__ T &operator()(I... idx) const {
    static_assert(sizeof...(I) == N, "jitk::array: one index per dimension");
    const long long ix[] = {static_cast<long long>(idx)...};
    long long off = 0;
#pragma unroll
    for (int d = 0; d < N; ++d) off += ix[d] * strides[d];
    return data[off];
  }

  // x[i]: the element at position i in C order, as CuPy's raw arrays index.
  __device__ __forceinline__ T &operator[](long long i) const { return flat(i); }

  // The element at linear position i of the array in C (row-major) order,
  // whatever its strides: for one flat loop over any view.
  __device__ __forceinline__ T &flat(long long i) const {
    long long off = 0;
#pragma unroll
    for (int d = N - 1; d >= 0; --d) {
      const long long q = i / shape[d];
      off += (i - q * shape[d]) * strides[d];
      i = q;
    }
    return data[off];
  }
};

// A rank-0 array is one element.
template <typename T>
struct array<T, 0> {
  T *data;
  __device__ __forceinline__ long long size() const { return 1; }
  __device__ __forceinline__ T &operator()() const { return *data; }
  // x[i] as for any rank: a raw parameter (an output jitk allocated for a
  // loop over rank-0 arrays, say) is written z[i] = ... whatever its rank.
  __device__ __forceinline__ T &operator[](long long) const { return *data; }
  __device__ __forceinline__ T &flat(long long) const { return *data; }
};

}  // namespace jitk
