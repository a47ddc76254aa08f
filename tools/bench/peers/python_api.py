"""jitk's Python package beside CuPy's kernel classes and PyTorch, in the
same run: host time per call (rounds of 100 calls, the queue drained between
rounds, median per call) for small arrays, where the Python layer is all
there is to measure, and device bandwidth for 2^28 elements, where it should
be nothing. Fresh random data; every output is poisoned first and checked
element by element against a float64 reference. Needs the jitk wheel
installed (`pip install --no-deps jitk-*.whl`); without it, says so."""

import numpy
import torch

from _timing import per_launch, timed

SMALL = 1024
BIG = 1 << 28


def check(got, want, rtol, what):
    got = numpy.asarray(got.get() if hasattr(got, "get") else got.cpu(), dtype=numpy.float64)
    want = numpy.asarray(want, dtype=numpy.float64)
    if got.shape != want.shape or not numpy.allclose(got, want, rtol=rtol, atol=rtol):
        bad = numpy.argwhere(~numpy.isclose(got, want, rtol=rtol, atol=rtol))
        raise AssertionError(f"{what}: {len(bad)} elements differ, first at {bad[:1].tolist()}")


def main():
    try:
        import jitk
    except ImportError as ex:
        print("jitk's Python package not measured:", ex)
        return
    import cupy

    rows = []
    sync = cupy.cuda.Device().synchronize
    rng = cupy.random.default_rng(7)

    # Elementwise, small: host cost of one call with outputs given, then with
    # the output allocated by the call.
    src = ("T x, T y", "T z", "z = x + 2 * y")
    jk = jitk.ElementwiseKernel(*src, "jk_add2")
    ck = cupy.ElementwiseKernel(*src, "cp_add2")
    x = rng.random(SMALL, dtype=cupy.float32)
    y = rng.random(SMALL, dtype=cupy.float32)
    z = cupy.full(SMALL, numpy.nan, dtype=cupy.float32)
    jk(x, y, z)
    check(z, x.get().astype(numpy.float64) + 2 * y.get().astype(numpy.float64), 1e-6, "jitk elementwise")
    check(jk(x, y), x.get().astype(numpy.float64) + 2 * y.get().astype(numpy.float64), 1e-6,
          "jitk elementwise, allocated")
    rows.append(("jitk ElementwiseKernel, 1024 f32, out given", per_launch(lambda: jk(x, y, z), sync), "us/call"))
    rows.append(("CuPy ElementwiseKernel, same", per_launch(lambda: ck(x, y, z), sync), "us/call"))
    rows.append(("jitk ElementwiseKernel, output allocated", per_launch(lambda: jk(x, y), sync), "us/call"))
    rows.append(("CuPy ElementwiseKernel, output allocated", per_launch(lambda: ck(x, y), sync), "us/call"))
    # Where the time goes: the stream given (no question to CuPy), and the
    # question alone.
    sp = cupy.cuda.get_current_stream().ptr
    rows.append(("  jitk, out given, stream= given as an int", per_launch(lambda: jk(x, y, z, stream=sp), sync),
                 "us/call"))
    current = cupy.cuda.get_current_stream
    rows.append(("  CuPy's get_current_stream().ptr alone", per_launch(lambda: current().ptr, sync),
                 "us/call"))
    tx = torch.as_tensor(x, device="cuda")
    ty = torch.as_tensor(y, device="cuda")
    tz = torch.empty_like(tx)
    rows.append(("jitk ElementwiseKernel on torch tensors, out given",
                 per_launch(lambda: jk(tx, ty, tz), torch.cuda.synchronize), "us/call"))
    rows.append(("torch.add(x, y, alpha=2, out=z)",
                 per_launch(lambda: torch.add(tx, ty, alpha=2, out=tz), torch.cuda.synchronize), "us/call"))

    # Reduction, small.
    rsrc = ("T x", "T y", "x", "a + b", "y = a", "0")
    jr = jitk.ReductionKernel(*rsrc, "jk_sum")
    cr = cupy.ReductionKernel(*rsrc, "cp_sum")
    s = cupy.full((), numpy.nan, dtype=cupy.float32)
    jr(x, s)
    check(s, x.get().astype(numpy.float64).sum(), 1e-5, "jitk reduction")
    rows.append(("jitk ReductionKernel sum, 1024 f32, out given", per_launch(lambda: jr(x, s), sync), "us/call"))
    rows.append(("CuPy ReductionKernel sum, same", per_launch(lambda: cr(x, s), sync), "us/call"))
    rows.append(("jitk ReductionKernel sum, output allocated", per_launch(lambda: jr(x), sync), "us/call"))
    ts = torch.empty((), device="cuda")
    rows.append(("torch.sum(x, out=s)", per_launch(lambda: torch.sum(tx, 0, out=ts), torch.cuda.synchronize),
                 "us/call"))

    # RawKernel with four arguments.
    raw = ('extern "C" __global__ void four(float a, const float *x, float *y, long long n)'
           " { long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }")
    jraw = jitk.RawKernel(raw, "four")
    craw = cupy.RawKernel(raw, "four")
    a = numpy.float32(1.5)
    n = numpy.int64(SMALL)
    z[...] = numpy.nan
    jraw((SMALL // 256,), (256,), (a, x, z, n))
    check(z, 1.5 * x.get().astype(numpy.float64), 1e-6, "jitk RawKernel")
    rows.append(("jitk RawKernel, 4 arguments", per_launch(lambda: jraw((4,), (256,), (a, x, z, n)), sync),
                 "us/call"))
    rows.append(("CuPy RawKernel, same", per_launch(lambda: craw((4,), (256,), (a, x, z, n)), sync), "us/call"))

    # Bandwidth: a copy, then z = x + 2y at 2^28 elements through each.
    cs = torch.rand(BIG, device="cuda")
    cd = torch.empty_like(cs)
    copy_ms = timed(lambda: cd.copy_(cs))
    copy = 2 * BIG * 4 / (copy_ms * 1e-3) / 1e9
    rows.append(("torch copy_, 1 GiB", copy, "GB/s"))
    del cs, cd
    for dt in (cupy.float32, cupy.float16):
        bx = rng.random(BIG, dtype=cupy.float32).astype(dt) - dt(0.5)
        by = rng.random(BIG, dtype=cupy.float32).astype(dt) - dt(0.5)
        bz = cupy.full(BIG, numpy.nan, dtype=dt)
        jk(bx, by, bz)
        # Every element within one unit in the last place of the float64
        # result (the kernel computes in float and rounds once).
        want = bx.astype(cupy.float64) + 2 * by.astype(cupy.float64)
        ulp = cupy.abs(want) * float(numpy.finfo(dt).eps) + float(numpy.finfo(dt).smallest_subnormal)
        bad = int(cupy.count_nonzero(~(cupy.abs(bz.astype(cupy.float64) - want) <= ulp)))
        if bad:
            raise AssertionError(f"jitk elementwise {numpy.dtype(dt).name} 2^28: {bad} elements differ")
        del want, ulp
        name = numpy.dtype(dt).name
        nbytes = 3 * BIG * numpy.dtype(dt).itemsize
        for who, k in (("jitk", jk), ("CuPy", ck)):
            ms = timed(lambda: k(bx, by, bz))
            gbs = nbytes / (ms * 1e-3) / 1e9
            rows.append((f"{who} ElementwiseKernel z = x + 2y {name}, 2^28", gbs, "GB/s",
                         f"{gbs / copy:.3f} of copy"))
        del bx, by, bz
    bx = rng.random(BIG, dtype=cupy.float32) - numpy.float32(0.5)
    want = float(bx.astype(cupy.float64).sum())
    got = float(jr(bx))
    if abs(got - want) > 1e-3 * max(1.0, abs(want)) + 1e-2:
        raise AssertionError(f"jitk reduction 2^28: {got} against {want}")
    for who, k in (("jitk", jr), ("CuPy", cr)):
        ms = timed(lambda: k(bx, s))
        gbs = BIG * 4 / (ms * 1e-3) / 1e9
        rows.append((f"{who} ReductionKernel sum float32, 2^28", gbs, "GB/s", f"{gbs / copy:.3f} of copy"))

    for row in rows:
        print("%-56s %12.3f  %-8s %s" % (row[0], row[1], row[2], row[3] if len(row) > 3 else ""))
    small = {r[0]: r[1] for r in rows if r[2] == "us/call"}
    print("ratios: elementwise jitk/CuPy %.2f, allocated %.2f, reduction %.2f, raw %.2f" % (
        small["jitk ElementwiseKernel, 1024 f32, out given"] / small["CuPy ElementwiseKernel, same"],
        small["jitk ElementwiseKernel, output allocated"] / small["CuPy ElementwiseKernel, output allocated"],
        small["jitk ReductionKernel sum, 1024 f32, out given"] / small["CuPy ReductionKernel sum, same"],
        small["jitk RawKernel, 4 arguments"] / small["CuPy RawKernel, same"]))


if __name__ == "__main__":
    main()
