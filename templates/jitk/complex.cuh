// jitk/complex.cuh: jitk::complex<T>, the kernel-side type of the complex64
// and complex128 dtypes. Layout-compatible with cuFloatComplex,
// cuDoubleComplex, std::complex and NumPy: real part first, aligned to its
// own size. It stays small on purpose: <cuda/std/complex> costs NVRTC
// about 750 ms per compile.
#pragma once

namespace jitk {

template <typename T>
struct alignas(2 * sizeof(T)) complex {
  T re, im;

  __host__ __device__ complex() : re(0), im(0) {}
  __host__ __device__ complex(T r, T i = T(0)) : re(r), im(i) {}
  template <typename U>
  __host__ __device__ explicit complex(const complex<U> &o) : re(T(o.re)), im(T(o.im)) {}

  __host__ __device__ T real() const { return re; }
  __host__ __device__ T imag() const { return im; }

  __host__ __device__ complex &operator+=(complex o) { re += o.re; im += o.im; return *this; }
  __host__ __device__ complex &operator-=(complex o) { re -= o.re; im -= o.im; return *this; }
  __host__ __device__ complex &operator*=(complex o) {
    T r = re * o.re - im * o.im;
    im = re * o.im + im * o.re;
    re = r;
    return *this;
  }
  __host__ __device__ complex &operator/=(complex o) { return *this = *this / o; }
  friend __host__ __device__ complex operator/(complex a, complex b) {
    // Smith's algorithm: no overflow for large |b|, no needless underflow.
    T abr = b.re < 0 ? -b.re : b.re, abi = b.im < 0 ? -b.im : b.im;
    if (abr >= abi) {
      if (abr == T(0)) return complex(a.re / abr, a.im / abr);
      T r = b.im / b.re, d = b.re + b.im * r;
      return complex((a.re + a.im * r) / d, (a.im - a.re * r) / d);
    }
    T r = b.re / b.im, d = b.im + b.re * r;
    return complex((a.re * r + a.im) / d, (a.im * r - a.re) / d);
  }
};

template <typename T>
__host__ __device__ inline complex<T> operator+(complex<T> a, complex<T> b) { return a += b; }
template <typename T>
__host__ __device__ inline complex<T> operator-(complex<T> a, complex<T> b) { return a -= b; }
template <typename T>
__host__ __device__ inline complex<T> operator*(complex<T> a, complex<T> b) { return a *= b; }
template <typename T>
__host__ __device__ inline complex<T> operator-(complex<T> a) { return complex<T>(-a.re, -a.im); }
template <typename T>
__host__ __device__ inline complex<T> operator+(complex<T> a) { return a; }

// With real numbers on either side.
template <typename T>
__host__ __device__ inline complex<T> operator+(complex<T> a, T b) { return complex<T>(a.re + b, a.im); }
template <typename T>
__host__ __device__ inline complex<T> operator+(T a, complex<T> b) { return complex<T>(a + b.re, b.im); }
template <typename T>
__host__ __device__ inline complex<T> operator-(complex<T> a, T b) { return complex<T>(a.re - b, a.im); }
template <typename T>
__host__ __device__ inline complex<T> operator-(T a, complex<T> b) { return complex<T>(a - b.re, -b.im); }
template <typename T>
__host__ __device__ inline complex<T> operator*(complex<T> a, T b) { return complex<T>(a.re * b, a.im * b); }
template <typename T>
__host__ __device__ inline complex<T> operator*(T a, complex<T> b) { return complex<T>(a * b.re, a * b.im); }
template <typename T>
__host__ __device__ inline complex<T> operator/(complex<T> a, T b) { return complex<T>(a.re / b, a.im / b); }
template <typename T>
__host__ __device__ inline complex<T> operator/(T a, complex<T> b) { return complex<T>(a) / b; }

template <typename T>
__host__ __device__ inline bool operator==(complex<T> a, complex<T> b) {
  return a.re == b.re && a.im == b.im;
}
template <typename T>
__host__ __device__ inline bool operator!=(complex<T> a, complex<T> b) { return !(a == b); }

template <typename T>
__host__ __device__ inline T real(complex<T> a) { return a.re; }
template <typename T>
__host__ __device__ inline T imag(complex<T> a) { return a.im; }
template <typename T>
__host__ __device__ inline complex<T> conj(complex<T> a) { return complex<T>(a.re, -a.im); }
template <typename T>
__device__ inline T abs(complex<T> a) { return ::hypot(a.re, a.im); }
template <typename T>
__device__ inline T arg(complex<T> a) { return ::atan2(a.im, a.re); }
template <typename T>
__host__ __device__ inline T norm(complex<T> a) { return a.re * a.re + a.im * a.im; }
template <typename T>
__device__ inline complex<T> polar(T r, T theta) {
  return complex<T>(r * ::cos(theta), r * ::sin(theta));
}
template <typename T>
__device__ inline complex<T> exp(complex<T> a) {
  T m = ::exp(a.re);
  return complex<T>(m * ::cos(a.im), m * ::sin(a.im));
}
template <typename T>
__device__ inline complex<T> log(complex<T> a) { return complex<T>(::log(abs(a)), arg(a)); }
template <typename T>
__device__ inline complex<T> sqrt(complex<T> a) {
  // The principal root, computed without cancellation.
  T m = abs(a);
  if (m == T(0)) return complex<T>(T(0), a.im);
  T r = ::sqrt((m + (a.re < 0 ? -a.re : a.re)) / T(2));
  if (a.re >= T(0)) return complex<T>(r, a.im / (T(2) * r));
  return complex<T>((a.im < 0 ? -a.im : a.im) / (T(2) * r), a.im < T(0) ? -r : r);
}
template <typename T>
__device__ inline complex<T> sin(complex<T> a) {
  return complex<T>(::sin(a.re) * ::cosh(a.im), ::cos(a.re) * ::sinh(a.im));
}
template <typename T>
__device__ inline complex<T> cos(complex<T> a) {
  return complex<T>(::cos(a.re) * ::cosh(a.im), -::sin(a.re) * ::sinh(a.im));
}
// NumPy's rules where exp(b log a) has no value: a ** 0 is 1 (whatever a
// is), 0 ** b is 0 for a real, positive b, and NaN otherwise (0 ** -1,
// 0 ** 1j).
template <typename T>
__device__ inline complex<T> pow(complex<T> a, complex<T> b) {
  if (b.re == T(0) && b.im == T(0)) return complex<T>(T(1), T(0));
  if (a.re == T(0) && a.im == T(0)) {
    if (b.im == T(0) && b.re > T(0)) return complex<T>(T(0), T(0));
    const T nan = T(::nan(""));
    return complex<T>(nan, nan);
  }
  return exp(b * log(a));
}
template <typename T>
__device__ inline complex<T> pow(complex<T> a, T b) { return pow(a, complex<T>(b)); }

}  // namespace jitk

// Unqualified calls in users' operations (abs(z), exp(z), real(z)) find
// these through argument-dependent lookup.
