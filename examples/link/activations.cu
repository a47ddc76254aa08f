// An existing CUDA file of a project, built by its own build with nvcc:
//
//   nvcc -rdc=true -dlto -arch=sm_90 -c activations.cu -o activations.o
//
// -rdc=true keeps its device functions callable from other files; -dlto
// stores them as LTO-IR, so the link can inline them into the kernels
// that call them. examples/link/link.c links the object with a kernel
// jitk compiles at run time.
#include <math.h>

// GELU, tanh approximation.
__device__ float gelu(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// log(1 + e^x), without overflow for large x.
__device__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
