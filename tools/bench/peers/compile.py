"""CuPy's first call of the kernels `jitk-bench compile` compiles: the time
from the call to its result, a compile included, beside CuPy's own bare
RawKernel in the same run.

Each kernel's first call in a fresh process (this script run again with
--child, its CUDA context made before the clock starts, so the figure is
the compile and the launch), median of 3 processes; then, in this process,
the median first call of 7 new kernels of each kind (a new name makes a new
source, so each is a compile). CUPY_CACHE_DIR is a fresh folder for every
process and CUPY_CACHE_IN_MEMORY is unset, so that neither of CuPy's caches
serves a kernel. Needs a GPU; prints "CuPy not measured" without CuPy.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

KINDS = [
    ("bare", 'extern "C" RawKernel, bare'),
    ("f32", "float32 z = x + y"),
    ("f16", "float16 z = x + y"),
    ("bf16", "bfloat16 z = x + y"),
    ("c64", "complex64 z = x * y"),
    ("red", "float32 sum(x*x)"),
]
N = 1 << 20


def first_call(cupy, kind, name):
    """Makes a new kernel of `kind` named `name` and times its first call
    to the end of its work, in ms."""
    if kind == "bare":
        k = cupy.RawKernel(
            'extern "C" __global__ void %s(float *x) { x[threadIdx.x] += 1; }' % name, name)
        x = cupy.zeros(256, dtype=cupy.float32)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        k((1,), (256,), (x,))
        cupy.cuda.Device().synchronize()
        return (time.perf_counter() - t0) * 1e3
    if kind == "red":
        k = cupy.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", name)
        x = cupy.ones(N, dtype=cupy.float32)
        cupy.cuda.Device().synchronize()
        t0 = time.perf_counter()
        k(x)
        cupy.cuda.Device().synchronize()
        return (time.perf_counter() - t0) * 1e3
    dtype = {"f32": cupy.float32, "f16": cupy.float16, "c64": cupy.complex64}.get(kind)
    if kind == "bf16":
        # CuPy takes bfloat16 arrays where its build knows ml_dtypes' type.
        import ml_dtypes

        dtype = ml_dtypes.bfloat16
    op = "z = x * y" if kind == "c64" else "z = x + y"
    k = cupy.ElementwiseKernel("T x, T y", "T z", op, name)
    x = cupy.ones(N, dtype=dtype)
    y = cupy.ones(N, dtype=dtype)
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    k(x, y)
    cupy.cuda.Device().synchronize()
    return (time.perf_counter() - t0) * 1e3


def child(kind):
    import cupy

    cupy.zeros(1).sum()  # the context and CuPy's own kernels, before the clock
    cupy.cuda.Device().synchronize()
    print("%.3f" % first_call(cupy, kind, "first_" + kind))


def fresh_env():
    env = dict(os.environ)
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    env["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-compile-")
    return env


def main():
    try:
        import cupy
    except Exception as ex:  # a peer we could not measure is said, not hidden
        print("CuPy not measured:", ex)
        return
    rows = []
    firsts = {}
    for kind, label in KINDS:
        times = []
        for _ in range(3):
            out = subprocess.run([sys.executable, __file__, "--child", kind], env=fresh_env(),
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print("CuPy %s not measured: %s" % (label, out.stderr.strip().splitlines()[-1:]))
                break
            times.append(float(out.stdout.strip().splitlines()[-1]))
        if times:
            firsts[kind] = statistics.median(times)
    os.environ.pop("CUPY_CACHE_IN_MEMORY", None)
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-compile-")
    # In this process: its context and NVRTC are warm; every kernel is new.
    cupy.zeros(1).sum()
    first_call(cupy, "bare", "warm_up")
    warm = {}
    for kind, label in KINDS:
        try:
            warm[kind] = statistics.median(
                first_call(cupy, kind, "k_%s_%d" % (kind, r)) for r in range(7))
        except Exception as ex:
            print("CuPy %s not measured: %s" % (label, ex))
    for kind, label in KINDS:
        if kind in firsts:
            note = ""
            if "bare" in firsts:
                note = "%.2fx the bare kernel's" % (firsts[kind] / firsts["bare"])
            rows.append(("CuPy %s, first call of a process" % label, firsts[kind], "ms", note))
        if kind in warm:
            note = ""
            if "bare" in warm:
                note = "median of 7 new kernels; %.2fx the bare kernel's" % (warm[kind] / warm["bare"])
            rows.append(("CuPy %s, first call" % label, warm[kind], "ms", note))
    print("\npeer compile: CuPy %s, first calls (compile included), cache folders fresh" %
          cupy.__version__)
    print("%-52s %12s  %-6s %s" % ("measure", "value", "unit", ""))
    for name, value, unit, note in rows:
        print("%-52s %12.3f  %-6s %s" % (name, value, unit, note))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
