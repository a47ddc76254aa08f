"""A reduction on PyTorch tensors: the L2 norm of every row of a matrix and
of every column of its transpose, with the output given (out=) or allocated,
checked against torch.linalg.vector_norm.

Run: python examples/python/reduction.py   (needs a GPU and PyTorch)
"""

import torch

import jitk

# map each element to its square, add the squares in float32 (so float16
# inputs do not overflow or lose the small terms), take the square root.
l2norm = jitk.ReductionKernel(
    "T x", "T y", "(float)x * (float)x", "a + b", "y = (T)sqrtf(a)", "0",
    "l2norm", reduce_type="float32")

x = torch.randn(2048, 3000, device="cuda", dtype=torch.float16)

rows = l2norm(x, axis=1)                      # 2048 norms, allocated by jitk
cols = torch.empty(2048, 1, device="cuda", dtype=torch.float16)
l2norm(x.t(), axis=0, keepdims=True, out=cols.t())   # the same, down columns

want = torch.linalg.vector_norm(x.float(), dim=1)
for got in (rows, cols[:, 0]):
    err = ((got.float() - want).abs() / want).max().item()
    assert err < 2e-3, err
print(f"row norms {tuple(rows.shape)}, column norms {tuple(cols.shape)}; "
      f"relative error < 2e-3 against torch")
