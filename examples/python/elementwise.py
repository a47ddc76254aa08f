"""A custom elementwise kernel on PyTorch tensors: a fused bias + GELU over a
transposed view, in bfloat16, with the output allocated by jitk (a torch
tensor on the inputs' device) and checked against PyTorch.

Run: python examples/python/elementwise.py   (needs a GPU and PyTorch)
"""

import torch

import jitk

bias_gelu = jitk.ElementwiseKernel(
    "T x, T b", "T y",
    # The tanh form of GELU, computed in float whatever T is.
    "float v = (float)x + (float)b;"
    "y = (T)(0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));",
    "bias_gelu")

x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
b = torch.randn(4096, device="cuda", dtype=torch.bfloat16)

# x.t() is a transposed view (1024 x 4096); b broadcasts along its rows.
y = bias_gelu(x.t(), b)

want = torch.nn.functional.gelu(x.t().float() + b.float(), approximate="tanh")
err = (y.float() - want).abs().max().item()
print(f"{type(y).__name__} {tuple(y.shape)} {y.dtype} on {y.device}; max error {err:.3g}")
assert err < 0.05
