// jitk/half_math.cuh: math on float16 and bfloat16 written as on float, so
// that an operation such as `y = exp(x) * a` compiles whatever the dtype.
// Included by generated kernels when a float16 or bfloat16 is bound; needs
// cuda_fp16.h and cuda_bf16.h first. Each function computes in float and
// rounds once.
#pragma once

#define JITK_HALF_UNARY(name, fn)                                                     \
  __device__ __forceinline__ __half name(__half x) { return __float2half(fn(__half2float(x))); } \
  __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 x) {                     \
    return __float2bfloat16(fn(__bfloat162float(x)));                                 \
  }
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

#define JITK_HALF_BINARY(name, fn)                                                    \
  __device__ __forceinline__ __half name(__half a, __half b) {                        \
    return __float2half(fn(__half2float(a), __half2float(b)));                        \
  }                                                                                   \
  __device__ __forceinline__ __nv_bfloat16 name(__nv_bfloat16 a, __nv_bfloat16 b) {   \
    return __float2bfloat16(fn(__bfloat162float(a), __bfloat162float(b)));            \
  }
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
#define JITK_HALF_MIXED(H, TOF, S, op)                                                    \
  __device__ __forceinline__ auto operator op(H a, S b)->decltype(TOF(a) op b) {          \
    return TOF(a) op b;                                                                   \
  }                                                                                       \
  __device__ __forceinline__ auto operator op(S a, H b)->decltype(a op TOF(b)) {          \
    return a op TOF(b);                                                                   \
  }
#define JITK_HALF_MIXED_OPS(H, TOF, S)                                                    \
  JITK_HALF_MIXED(H, TOF, S, +) JITK_HALF_MIXED(H, TOF, S, -) JITK_HALF_MIXED(H, TOF, S, *) \
  JITK_HALF_MIXED(H, TOF, S, /) JITK_HALF_MIXED(H, TOF, S, <) JITK_HALF_MIXED(H, TOF, S, >) \
  JITK_HALF_MIXED(H, TOF, S, <=) JITK_HALF_MIXED(H, TOF, S, >=)                            \
  JITK_HALF_MIXED(H, TOF, S, ==) JITK_HALF_MIXED(H, TOF, S, !=)
#define JITK_HALF_MIXED_TYPES(H, TOF)                                                     \
  JITK_HALF_MIXED_OPS(H, TOF, int) JITK_HALF_MIXED_OPS(H, TOF, unsigned int)              \
  JITK_HALF_MIXED_OPS(H, TOF, long) JITK_HALF_MIXED_OPS(H, TOF, unsigned long)            \
  JITK_HALF_MIXED_OPS(H, TOF, long long) JITK_HALF_MIXED_OPS(H, TOF, unsigned long long)  \
  JITK_HALF_MIXED_OPS(H, TOF, float) JITK_HALF_MIXED_OPS(H, TOF, double)
JITK_HALF_MIXED_TYPES(__half, __half2float)
JITK_HALF_MIXED_TYPES(__nv_bfloat16, __bfloat162float)
#undef JITK_HALF_MIXED_TYPES
#undef JITK_HALF_MIXED_OPS
#undef JITK_HALF_MIXED
