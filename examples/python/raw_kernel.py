"""A raw CUDA kernel on PyTorch tensors: a templated kernel compiled for two
types through name expressions, launched with tensors (passed as pointers)
and scalars, on the current PyTorch stream, checked against PyTorch.

Run: python examples/python/raw_kernel.py   (needs a GPU and PyTorch)
"""

import numpy as np
import torch

import jitk

code = r'''
template <typename T>
__global__ void axpby(T a, const T *x, T b, T *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + b * y[i];
}
'''
module = jitk.RawModule(code=code, name_expressions=("axpby<float>", "axpby<double>"))

n = 1 << 22
for dtype, expr, scalar in ((torch.float32, "axpby<float>", np.float32),
                            (torch.float64, "axpby<double>", np.float64)):
    x = torch.randn(n, device="cuda", dtype=dtype)
    y = torch.randn(n, device="cuda", dtype=dtype)
    want = 2.5 * x - 0.5 * y
    kernel = module.get_function(expr)
    # Scalars as NumPy scalars of the kernel's types; n as a Python int
    # (passed as a 64-bit integer, as CuPy does).
    kernel((1024,), (256,), (scalar(2.5), x, scalar(-0.5), y, n))
    # FMA contraction differs from PyTorch's two roundings by an ulp or so.
    assert torch.allclose(y, want, rtol=1e-5, atol=1e-5), expr
    print(f"{expr}: {n} elements, {kernel.num_regs} registers per thread")
