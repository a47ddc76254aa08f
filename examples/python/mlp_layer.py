"""A two-layer MLP on PyTorch tensors with jitk's fused matmul: each layer is
one kernel, its bias and ReLU applied in the product's epilogue, from plans
made once and executed many times. Checked against PyTorch and timed against
torch.relu(x @ w + b).

Run: python examples/python/mlp_layer.py   (needs a GPU and PyTorch)
"""

import torch

import jitk

batch, d_in, d_hidden, d_out = 4096, 1024, 4096, 1024
dt = torch.bfloat16
x = torch.randn(batch, d_in, device="cuda", dtype=dt)
w1 = torch.randn(d_in, d_hidden, device="cuda", dtype=dt) / d_in ** 0.5
b1 = torch.randn(d_hidden, device="cuda")
w2 = torch.randn(d_hidden, d_out, device="cuda", dtype=dt) / d_hidden ** 0.5
b2 = torch.randn(d_out, device="cuda")

# Plans are made from example operands (shapes, dtypes, layouts), then run.
h = torch.empty(batch, d_hidden, device="cuda", dtype=dt)
layer1 = jitk.MatmulPlan(x, w1, epilogue="relu(acc + bias[col])",
                         epilogue_inputs={"bias": b1})
layer2 = jitk.MatmulPlan(h, w2, epilogue="acc + bias[col]",
                         epilogue_inputs={"bias": b2})


def mlp(x):
    layer1.execute(x, w1, epilogue_inputs={"bias": b1}, out=h)
    return layer2.execute(h, w2, epilogue_inputs={"bias": b2})


def reference(x):
    return torch.relu(x @ w1 + b1).to(dt) @ w2 + b2


y, want = mlp(x), reference(x)
err = ((y.float() - want.float()).abs().max() / want.float().abs().max()).item()
assert err < 0.03, err


def ms(f, reps=20):
    f()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        f()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


print(f"MLP {batch}x{d_in} -> {d_hidden} -> {d_out} in bfloat16: relative error {err:.2g}; "
      f"jitk {ms(lambda: mlp(x)):.3f} ms, PyTorch {ms(lambda: reference(x)):.3f} ms")
