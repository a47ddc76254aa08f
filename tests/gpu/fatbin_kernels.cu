// Built by nvcc into a fatbin (sm_80 and sm_90 cubins, compute_90 PTX) that
// the tests embed, to load the way a program ships precompiled kernels.
extern "C" __global__ void fill(float a, float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * (float)i;
}
