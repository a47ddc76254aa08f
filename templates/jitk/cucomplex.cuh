// jitk/cucomplex.cuh: cuComplex.h's names over jitk::complex, for code
// written against <cuComplex.h> and compiled with translate_cucomplex (the
// Python package's RawKernel and RawModule put this header in place of
// <cuComplex.h>, as CuPy's option of that name does with its own).
//
// Each function computes what cuComplex.h's function of that name computes,
// with two differences that make such code agree with array libraries:
// the magnitude is hypot(re, im), as abs() of a complex array gives it, and
// the functions are templates over the precision, so a single-precision
// operand given to the double-precision name (cuCadd on cuComplex) keeps
// its precision instead of failing to compile. Division scales both
// operands by |re| + |im| of the divisor first, as cuCdiv does, which is
// also how CuPy divides complex arrays, so results match those bit for bit.
#pragma once

#include <jitk/complex.cuh>

typedef jitk::complex<float> cuFloatComplex;
typedef jitk::complex<float> cuComplex;
typedef jitk::complex<double> cuDoubleComplex;

namespace jitk {
namespace cucomplex {

template <typename T>
__host__ __device__ inline T magnitude_sum(complex<T> z) {
  return (z.re < T(0) ? -z.re : z.re) + (z.im < T(0) ? -z.im : z.im);
}

template <typename T>
__host__ __device__ inline complex<T> scaled_div(complex<T> x, complex<T> y) {
  T s = magnitude_sum(y);
  T oos = T(1.0) / s;
  T ars = x.re * oos;
  T ais = x.im * oos;
  T brs = y.re * oos;
  T bis = y.im * oos;
  s = (brs * brs) + (bis * bis);
  oos = T(1.0) / s;
  return complex<T>(((ars * brs) + (ais * bis)) * oos, ((ais * brs) - (ars * bis)) * oos);
}

}  // namespace cucomplex
}  // namespace jitk

// Parts and construction.
template <typename T>
__host__ __device__ inline T cuCreal(jitk::complex<T> z) { return z.re; }
template <typename T>
__host__ __device__ inline T cuCimag(jitk::complex<T> z) { return z.im; }
__host__ __device__ inline float cuCrealf(cuFloatComplex z) { return z.re; }
__host__ __device__ inline float cuCimagf(cuFloatComplex z) { return z.im; }
__host__ __device__ inline cuFloatComplex make_cuFloatComplex(float r, float i) {
  return cuFloatComplex(r, i);
}
__host__ __device__ inline cuComplex make_cuComplex(float r, float i) { return cuComplex(r, i); }
__host__ __device__ inline cuDoubleComplex make_cuDoubleComplex(double r, double i) {
  return cuDoubleComplex(r, i);
}
__host__ __device__ inline cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex z) {
  return cuDoubleComplex(double(z.re), double(z.im));
}
__host__ __device__ inline cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex z) {
  return cuFloatComplex(float(z.re), float(z.im));
}

// Arithmetic: the double-precision names are templates, so they serve
// both precisions; the f-suffixed names are single precision only.
template <typename T>
__host__ __device__ inline jitk::complex<T> cuConj(jitk::complex<T> z) {
  return jitk::complex<T>(z.re, -z.im);
}
template <typename T>
__host__ __device__ inline jitk::complex<T> cuCadd(jitk::complex<T> x, jitk::complex<T> y) {
  return jitk::complex<T>(x.re + y.re, x.im + y.im);
}
template <typename T>
__host__ __device__ inline jitk::complex<T> cuCsub(jitk::complex<T> x, jitk::complex<T> y) {
  return jitk::complex<T>(x.re - y.re, x.im - y.im);
}
template <typename T>
__host__ __device__ inline jitk::complex<T> cuCmul(jitk::complex<T> x, jitk::complex<T> y) {
  return jitk::complex<T>(x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re);
}
template <typename T>
__host__ __device__ inline jitk::complex<T> cuCdiv(jitk::complex<T> x, jitk::complex<T> y) {
  return jitk::cucomplex::scaled_div(x, y);
}
template <typename T>
__device__ inline T cuCabs(jitk::complex<T> z) { return ::hypot(z.re, z.im); }
template <typename T>
__host__ __device__ inline jitk::complex<T> cuCfma(jitk::complex<T> x, jitk::complex<T> y,
                                                   jitk::complex<T> d) {
  return cuCadd(cuCmul(x, y), d);
}

__host__ __device__ inline cuFloatComplex cuConjf(cuFloatComplex z) { return cuConj(z); }
__host__ __device__ inline cuFloatComplex cuCaddf(cuFloatComplex x, cuFloatComplex y) {
  return cuCadd(x, y);
}
__host__ __device__ inline cuFloatComplex cuCsubf(cuFloatComplex x, cuFloatComplex y) {
  return cuCsub(x, y);
}
__host__ __device__ inline cuFloatComplex cuCmulf(cuFloatComplex x, cuFloatComplex y) {
  return cuCmul(x, y);
}
__host__ __device__ inline cuFloatComplex cuCdivf(cuFloatComplex x, cuFloatComplex y) {
  return cuCdiv(x, y);
}
__device__ inline float cuCabsf(cuFloatComplex z) { return ::hypotf(z.re, z.im); }
__host__ __device__ inline cuFloatComplex cuCfmaf(cuFloatComplex x, cuFloatComplex y,
                                                  cuFloatComplex d) {
  return cuCfma(x, y, d);
}
