// jitk/fp8.cuh: the 8-bit floats of generated kernels, jitk::float8_e4m3
// (dtype float8_e4m3fn) and jitk::float8_e5m2, written as on float, so
// that `z = x * y + (T)1` compiles with T an 8-bit float.
//
// CUDA's __nv_fp8_e4m3 and __nv_fp8_e5m2 convert to and from float only
// explicitly and have no operators, so neither `x * y` nor `z = 1.0f`
// would compile on them, and a store is the user's own assignment, which
// the generator cannot cast. These types are the same bytes (CUDA's types
// are their bases and add nothing, so pointers and DLPack data of code 10
// and 12 hold them), converting implicitly:
// - to float, so every operator and math function computes in float with
//   the built-in operators (a double with a double, as float16 does in
//   jitk/half_math.cuh), and comparisons compare the values;
// - from a number, a float16 or bfloat16, or the other 8-bit float,
//   rounding to nearest even and saturating to the largest finite value as
//   CUDA's constructors do (__NV_SATFINITE), so a result is rounded once,
//   where it is stored.
// Included by generated kernels only when an 8-bit float is bound, since
// cuda_fp8.h costs NVRTC compile time.
#pragma once
#include <cuda_fp8.h>

namespace jitk {
namespace f8 {
// Declared only, for overload resolution in decltype: the number type a
// value converts to as a parameter would, as jitk::hm::plain does.
__device__ int plain(int);
__device__ unsigned int plain(unsigned int);
__device__ long plain(long);
__device__ unsigned long plain(unsigned long);
__device__ long long plain(long long);
__device__ unsigned long long plain(unsigned long long);
__device__ float plain(float);
__device__ double plain(double);
template <typename S>
__device__ S value();
}  // namespace f8

// One type per format, B being CUDA's. The converting constructor is a
// template constrained to what plain() accepts, so that a pointer or a
// class without a conversion to a number is no candidate in overload
// resolution, and each value is converted to the one of CUDA's explicit
// constructors it fits exactly.
#define JITK_FP8_TYPE(N, B)                                                                  \
  struct N : B {                                                                             \
    N() = default;                                                                           \
    __device__ __forceinline__ N(const B &v) : B(v) {}                                       \
    template <typename S, typename P = decltype(jitk::f8::plain(jitk::f8::value<S>()))>      \
    __device__ __forceinline__ N(S v) : B(static_cast<P>(v)) {}                              \
    __device__ __forceinline__ operator float() const {                                      \
      return static_cast<float>(static_cast<const B &>(*this));                              \
    }                                                                                        \
    /* Compound assignments compute in float, as `z = z + v` would. */                       \
    template <typename S>                                                                    \
    __device__ __forceinline__ N &operator+=(S v) {                                          \
      return *this = N(static_cast<float>(*this) + v);                                       \
    }                                                                                        \
    template <typename S>                                                                    \
    __device__ __forceinline__ N &operator-=(S v) {                                          \
      return *this = N(static_cast<float>(*this) - v);                                       \
    }                                                                                        \
    template <typename S>                                                                    \
    __device__ __forceinline__ N &operator*=(S v) {                                          \
      return *this = N(static_cast<float>(*this) * v);                                       \
    }                                                                                        \
    template <typename S>                                                                    \
    __device__ __forceinline__ N &operator/=(S v) {                                          \
      return *this = N(static_cast<float>(*this) / v);                                       \
    }                                                                                        \
  };                                                                                         \
  static_assert(sizeof(N) == 1 && alignof(N) == 1, "the bytes of " #B);
JITK_FP8_TYPE(float8_e4m3, __nv_fp8_e4m3)
JITK_FP8_TYPE(float8_e5m2, __nv_fp8_e5m2)
#undef JITK_FP8_TYPE

// The binary operators with an 8-bit float on either side. The built-in
// ones through the conversion to float would do alone, but where
// jitk/half_math.cuh is included too (a float16 in the same kernel), its
// operators between a half and a number are as good a match for `x * 2`
// (the 2 converting to a half) and the call is ambiguous. These take both
// operands as they are, so they win: an 8-bit float becomes a float, the
// other operand the number type plain() picks, and the built-in operator
// gives the result (a float, or a double with a double). A half meeting an
// 8-bit float still takes half_math's operator, which is more specialized
// and computes the same in float.
namespace f8 {
template <typename T>
struct is {
  static const bool value = false;
};
template <>
struct is<float8_e4m3> {
  static const bool value = true;
};
template <>
struct is<float8_e5m2> {
  static const bool value = true;
};
template <bool C, typename R>
struct when {};
template <typename R>
struct when<true, R> {
  typedef R type;
};
// An operand's value: float for an 8-bit float, else as plain() takes it.
__device__ __forceinline__ float num(float8_e4m3 v) { return static_cast<float>(v); }
__device__ __forceinline__ float num(float8_e5m2 v) { return static_cast<float>(v); }
template <typename S>
__device__ __forceinline__ auto num(S v) -> decltype(jitk::f8::plain(v)) {
  return v;
}
}  // namespace f8
#define JITK_FP8_BINARY(op)                                                       \
  template <typename A, typename B>                                              \
  __device__ __forceinline__ auto operator op(A a, B b)->typename jitk::f8::when< \
      jitk::f8::is<A>::value || jitk::f8::is<B>::value,                           \
      decltype(jitk::f8::num(a) op jitk::f8::num(b))>::type {                     \
    return jitk::f8::num(a) op jitk::f8::num(b);                                  \
  }
JITK_FP8_BINARY(+)
JITK_FP8_BINARY(-)
JITK_FP8_BINARY(*)
JITK_FP8_BINARY(/)
JITK_FP8_BINARY(<)
JITK_FP8_BINARY(>)
JITK_FP8_BINARY(<=)
JITK_FP8_BINARY(>=)
JITK_FP8_BINARY(==)
JITK_FP8_BINARY(!=)
#undef JITK_FP8_BINARY

}  // namespace jitk
