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
};

template <typename T>
__host__ __device__ inline complex<T> operator+(complex<T> a, complex<T> b) {
  return complex<T>(a.re + b.re, a.im + b.im);
}
template <typename T>
__host__ __device__ inline complex<T> operator-(complex<T> a, complex<T> b) {
  return complex<T>(a.re - b.re, a.im - b.im);
}
template <typename T>
__host__ __device__ inline complex<T> operator*(complex<T> a, complex<T> b) {
  return complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <typename T>
__host__ __device__ inline complex<T> operator-(complex<T> a) {
  return complex<T>(-a.re, -a.im);
}
template <typename T>
__host__ __device__ inline bool operator==(complex<T> a, complex<T> b) {
  return a.re == b.re && a.im == b.im;
}
template <typename T>
__host__ __device__ inline bool operator!=(complex<T> a, complex<T> b) {
  return !(a == b);
}
template <typename T>
__host__ __device__ inline complex<T> conj(complex<T> a) {
  return complex<T>(a.re, -a.im);
}

}  // namespace jitk
