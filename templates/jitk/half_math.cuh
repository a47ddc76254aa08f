// jitk/half_math.cuh: math on float16 and bfloat16 written as on float, so
// that an operation such as `y = exp(x) * a` compiles whatever the dtype.
// Included by generated kernels when a float16 or bfloat16 is bound; needs
// cuda_fp16.h first, and cuda_bf16.h for its bfloat16 half. Each function
// computes in float and rounds once.
#pragma once

// A float16 kernel reads cuda_bf16.h only when its code names bfloat16
// (it costs NVRTC about 25 ms more than cuda_fp16.h alone), so what is
// here for bfloat16 is only there when that header is.
#ifdef __CUDA_BF16_TYPES_EXIST__
#define JITK_HALF_BF16(...) __VA_ARGS__
#else
#define JITK_HALF_BF16(...)
#endif

#define JITK_HALF_UNARY(name, fn)                                                                \
  __device__ __forceinline__ __half name(__half x) { return __float2half(fn(__half2float(x))); } \
  JITK_HALF_BF16(__device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 x) {                \
    return __float2bfloat16(fn(__bfloat162float(x)));                                            \
  })
JITK_HALF_UNARY(exp, expf)
JITK_HALF_UNARY(exp2, exp2f)
JITK_HALF_UNARY(log, logf)
JITK_HALF_UNARY(log2, log2f)
JITK_HALF_UNARY(log1p, log1pf)
JITK_HALF_UNARY(sqrt, sqrtf)
JITK_HALF_UNARY(rsqrt, rsqrtf)
JITK_HALF_UNARY(sin, sinf)
JITK_HALF_UNARY(cos, cosf)
JITK_HALF_UNARY(tanh, tanhf)
JITK_HALF_UNARY(erf, erff)
JITK_HALF_UNARY(abs, fabsf)
JITK_HALF_UNARY(fabs, fabsf)
JITK_HALF_UNARY(floor, floorf)
JITK_HALF_UNARY(ceil, ceilf)
#undef JITK_HALF_UNARY

#define JITK_HALF_BINARY(name, fn)                                                                 \
  __device__ __forceinline__ __half name(__half a, __half b) {                                     \
    return __float2half(fn(__half2float(a), __half2float(b)));                                     \
  }                                                                                                \
  JITK_HALF_BF16(__device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b) { \
    return __float2bfloat16(fn(__bfloat162float(a), __bfloat162float(b)));                         \
  })
JITK_HALF_BINARY(max, fmaxf)
JITK_HALF_BINARY(min, fminf)
JITK_HALF_BINARY(fmax, fmaxf)
JITK_HALF_BINARY(fmin, fminf)
JITK_HALF_BINARY(pow, powf)
#undef JITK_HALF_BINARY

// A float16 or bfloat16 meeting a plain number: `2 * y`, `x > 0`,
// `y / 3.0f`. CUDA's headers leave these ambiguous (the built-in operator
// through the conversion to float, or the half operator through the
// conversion from the number), so they would not compile. Here they take
// the value in float and apply the built-in operator, which is what CuPy's
// float16 gives for the same expression: a float (a double with a double),
// rounded once where it is stored.
//
// They are templates over the number's type, not one function per type:
// 320 functions (2 halves, 8 numbers, 10 operators, both sides) made
// every operator in the kernel, and the header itself, weigh each of them,
// which cost NVRTC about 100 ms of a float16 kernel's compile. A template
// is only weighed where its first argument deduces, and does what the
// functions did: plain() picks, by the same overload resolution, the one
// of the eight number types a value would have been passed as, and the
// value is converted to it as that parameter would have converted it, so
// every expression that compiled gives the same code (the bytes of 760
// such expressions were compared), and the halves among themselves keep
// CUDA's own operators.
namespace jitk {
namespace hm {
// Declared only, for overload resolution in decltype.
__device__ int plain(int);
__device__ unsigned int plain(unsigned int);
__device__ long plain(long);
__device__ unsigned long plain(unsigned long);
__device__ long long plain(long long);
__device__ unsigned long long plain(unsigned long long);
__device__ float plain(float);
__device__ double plain(double);
// The result type R, except for a half or bfloat16 on both sides.
template <typename S, typename R>
struct mixed {
  typedef R type;
};
template <typename R>
struct mixed<__half, R> {};
JITK_HALF_BF16(template <typename R> struct mixed<__nv_bfloat16, R> {};)
// The implicit conversion a parameter of type P would make.
template <typename P>
__device__ __forceinline__ P as(P v) {
  return v;
}
}  // namespace hm
}  // namespace jitk
#define JITK_HALF_MIXED(H, TOF, op)                                                 \
  template <typename S>                                                             \
  __device__ __forceinline__ auto operator op(H a, S b)                             \
      ->typename jitk::hm::mixed<S, decltype(TOF(a) op jitk::hm::plain(b))>::type { \
    return TOF(a) op jitk::hm::as<decltype(jitk::hm::plain(b))>(b);                 \
  }                                                                                 \
  template <typename S>                                                             \
  __device__ __forceinline__ auto operator op(S a, H b)                             \
      ->typename jitk::hm::mixed<S, decltype(jitk::hm::plain(a) op TOF(b))>::type { \
    return jitk::hm::as<decltype(jitk::hm::plain(a))>(a) op TOF(b);                 \
  }
#define JITK_HALF_MIXED_OPS(H, TOF)                                                   \
  JITK_HALF_MIXED(H, TOF, +) JITK_HALF_MIXED(H, TOF, -) JITK_HALF_MIXED(H, TOF, *)    \
  JITK_HALF_MIXED(H, TOF, /) JITK_HALF_MIXED(H, TOF, <) JITK_HALF_MIXED(H, TOF, >)    \
  JITK_HALF_MIXED(H, TOF, <=) JITK_HALF_MIXED(H, TOF, >=) JITK_HALF_MIXED(H, TOF, ==) \
  JITK_HALF_MIXED(H, TOF, !=)
JITK_HALF_MIXED_OPS(__half, __half2float)
JITK_HALF_BF16(JITK_HALF_MIXED_OPS(__nv_bfloat16, __bfloat162float))
#undef JITK_HALF_MIXED_OPS
#undef JITK_HALF_MIXED
#undef JITK_HALF_BF16
