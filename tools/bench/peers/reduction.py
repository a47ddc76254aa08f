"""PyTorch and CuPy on the cases of `jitk-bench reduction`, in the same
run, as ratios to the device-to-device copy bandwidth measured here the
same way (bytes read plus written, 1 GiB, median of 20 CUDA-event timings
after warm-up). A reduction's figure is the bytes it reads per second: its
input once. Fresh random data; results checked against float64 sums, to
1e-5 of the sum of the terms' magnitudes, and the count of outputs beyond
that printed as "N wrong"."""

import torch

from _timing import per_launch, timed

N = 1 << 28
R = C = 16384
TOL = 1e-5


def wrong(got, want, abs_sum):
    """Outputs further from the float64 sum than TOL of the sum of the
    terms' magnitudes (NaN counts as wrong); torch tensors, any device."""
    got = torch.as_tensor(got, device="cuda").double().reshape(-1)
    ok = (got - want.reshape(-1)).abs() <= TOL * abs_sum.reshape(-1)
    return int((~ok).sum().item())


def note(gbs, bad, extra=""):
    return f"{gbs / copy:.3f} of copy; {bad} wrong" + (f"; {extra}" if extra else "")


rows = []
src = torch.rand(1 << 28, device="cuda")
dst = torch.empty_like(src)
copy_ms = timed(lambda: dst.copy_(src))
copy = 2 * src.numel() * 4 / (copy_ms * 1e-3) / 1e9
rows.append(("torch copy_, 1 GiB", copy, "GB/s", ""))
del src, dst

# Every axis of 2^28 float32: sum(x * x) and sum(x). torch.sum(x * x)
# writes x * x to memory first and reads it back; the bytes counted are
# still only the input's, as for jitk, so the figure is what a user gets.
# dim=0 of a 1-D tensor is the whole reduction; it is given so that `out=`
# (an output allocated and poisoned beforehand, as jitk's are) is accepted.
x = torch.rand(N, device="cuda") - 0.5
xd = x.double()
want_sq = (xd * xd).sum()
want_sum = xd.sum()
abs_sum = xd.abs().sum()
del xd
out = torch.full((), float("nan"), device="cuda")
ms = timed(lambda: torch.sum(x * x, dim=0, out=out))
gbs = N * 4 / (ms * 1e-3) / 1e9
rows.append(("torch.sum(x * x) float32, 2^28", gbs, "GB/s",
             note(gbs, wrong(out, want_sq, want_sq), "materializes x*x")))
out.fill_(float("nan"))
ms = timed(lambda: torch.sum(x, dim=0, out=out))
gbs = N * 4 / (ms * 1e-3) / 1e9
rows.append(("torch.sum(x) float32, 2^28", gbs, "GB/s", note(gbs, wrong(out, want_sum, abs_sum))))

# Rows (dim 1) and columns (dim 0) of a 16384 x 16384 float32 array.
m = torch.rand(R, C, device="cuda") - 0.5
md = m.double()
row_want, row_abs = md.sum(1), md.abs().sum(1)
col_want, col_abs = md.sum(0), md.abs().sum(0)
del md
for dim, label, want, absd in [(1, "dim=1 (rows)", row_want, row_abs),
                               (0, "dim=0 (columns)", col_want, col_abs)]:
    y = torch.full((R,), float("nan"), device="cuda")
    ms = timed(lambda: torch.sum(m, dim=dim, out=y))
    gbs = R * C * 4 / (ms * 1e-3) / 1e9
    rows.append((f"torch.sum {label}, 16384^2", gbs, "GB/s", note(gbs, wrong(y, want, absd))))

try:
    import cupy

    sumsq = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "cp_sumsq")
    csum = cupy.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "cp_sum")
    cx = cupy.asarray(x)
    cy = cupy.full((), cupy.nan, dtype=cupy.float32)
    ms = timed(lambda: sumsq(cx, cy))
    gbs = N * 4 / (ms * 1e-3) / 1e9
    rows.append(("CuPy ReductionKernel sum(x*x) float32, 2^28", gbs, "GB/s",
                 note(gbs, wrong(torch.as_tensor(cy, device="cuda"), want_sq, want_sq))))
    cy.fill(cupy.nan)
    ms = timed(lambda: cupy.sum(cx, out=cy))
    gbs = N * 4 / (ms * 1e-3) / 1e9
    rows.append(("cupy.sum float32, 2^28", gbs, "GB/s",
                 note(gbs, wrong(torch.as_tensor(cy, device="cuda"), want_sum, abs_sum))))
    cm = cupy.asarray(m)
    for axis, label, want, absd in [(1, "axis=1 (rows)", row_want, row_abs),
                                    (0, "axis=0 (columns)", col_want, col_abs)]:
        cyv = cupy.full((R,), cupy.nan, dtype=cupy.float32)
        ms = timed(lambda: csum(cm, cyv, axis=axis))
        gbs = R * C * 4 / (ms * 1e-3) / 1e9
        rows.append((f"CuPy ReductionKernel sum {label}, 16384^2", gbs, "GB/s",
                     note(gbs, wrong(torch.as_tensor(cyv, device="cuda"), want, absd))))
    del cx, cm
    sx = cupy.random.random(1024, dtype=cupy.float32) - 0.5
    sy = cupy.full((), cupy.nan, dtype=cupy.float32)
    us = per_launch(lambda: csum(sx, sy), cupy.cuda.Device().synchronize)
    sd = torch.as_tensor(sx, device="cuda").double()
    bad = wrong(torch.as_tensor(sy, device="cuda"), sd.sum(), sd.abs().sum())
    rows.append(("CuPy ReductionKernel launch, 1024 elements", us, "us/launch", f"{bad} wrong"))
except Exception as ex:  # a peer we could not measure is said, not hidden
    print("CuPy not measured:", ex)

tx = torch.rand(1024, device="cuda") - 0.5
ty = torch.full((), float("nan"), device="cuda")
us = per_launch(lambda: torch.sum(tx, dim=0, out=ty), torch.cuda.synchronize)
txd = tx.double()
bad = wrong(ty, txd.sum(), txd.abs().sum())
rows.append(("torch.sum launch, 1024 elements", us, "us/launch", f"{bad} wrong"))

for name, value, unit, text in rows:
    print("%-48s %12.3f  %-10s %s" % (name, value, unit, text))
