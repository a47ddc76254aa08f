"""Host cost of the Python package's calls, on a machine without a GPU.

The calls run on the stand-in driver that the tests build
(build/tests/fakecuda/libcuda.so.1): its launches only record their
arguments, so what is measured is jitk's own work per call, from the
Python call to the driver's entry point, without the driver's. Arrays are
CuPy arrays over host memory (cupy.cuda.UnownedMemory, which CuPy makes
without a GPU) when CuPy is installed, else objects with
__cuda_array_interface__.

    python tools/bench/host_cpu.py --fake build/tests/fakecuda/libcuda.so.1
    python tools/bench/host_cpu.py --fake ... --callgrind

Without --callgrind: microseconds per call, the median of 25 rounds of
4000 calls each (CPU timings of this machine, noisy where other work runs).
With --callgrind: instructions per call counted by valgrind's callgrind (a
run of 20000 calls less a run of none), which are the same from run to run
whatever else the machine does, and so compare two versions of the
package exactly. Every case passes stream=0: CuPy's current stream needs
its runtime, which the stand-in driver cannot serve; for the same reason
outputs that jitk allocates (elementwise_alloc, CuPy only) come from an
allocator of host memory, and CuPy's current device is taken to be 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CASES = ["elementwise", "elementwise_alloc", "reduction", "raw"]


def workload(kind: str, calls: int) -> None:
    """Runs `calls` calls of one case; `kind` "none" sets up only."""
    import numpy as np

    import jitk

    try:
        import cupy

        def array(n, dtype=np.float32, shape=None):
            h = np.arange(n, dtype=dtype)
            mem = cupy.cuda.UnownedMemory(h.ctypes.data, h.nbytes, h, device_id=0)
            return cupy.ndarray(shape or (n,), dtype, cupy.cuda.MemoryPointer(mem, 0))

        # Outputs that jitk allocates come from an allocator of host
        # memory (a block kept for reuse, as a pool would), and the current
        # device is 0: CuPy's own pool and device query need its runtime.
        block = np.empty(1 << 20, np.uint8)

        def alloc(size):
            mem = cupy.cuda.UnownedMemory(block.ctypes.data, size, block, device_id=0)
            return cupy.cuda.MemoryPointer(mem, 0)
        cupy.cuda.set_allocator(alloc)
        cupy.cuda.runtime.getDevice = lambda: 0
        source = "CuPy arrays"
    except ImportError:
        class Array:
            def __init__(self, h):
                self.h = h
                self.__cuda_array_interface__ = {
                    "shape": h.shape, "typestr": h.dtype.str, "data": (h.ctypes.data, False),
                    "version": 3, "strides": None, "stream": None}

        def array(n, dtype=np.float32, shape=None):
            return Array(np.arange(n, dtype=dtype).reshape(shape or (n,)))
        source = "__cuda_array_interface__ objects"

    x, y, z = array(1024), array(1024), array(1024)
    m, s = array(1024 * 64, shape=(64, 1024)), array(64)
    add = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "add2")
    total = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
    raw = jitk.RawKernel(r'extern "C" __global__ void f(float a, const float *x, float *y, '
                         r'long long n) {}', "f")
    a, n = np.float32(2), np.int64(1024)
    fns = {
        "elementwise": lambda: add(x, y, z, stream=0),
        "elementwise_alloc": lambda: add(x, y, stream=0),
        "reduction": lambda: total(m, s, axis=1, stream=0),
        "raw": lambda: raw((1,), (128,), (a, x, z, n), stream=0),
    }
    if source != "CuPy arrays":
        del fns["elementwise_alloc"]  # jitk allocates with CuPy or PyTorch only
    for f in fns.values():
        f()  # compiled and loaded before anything is counted
    if kind == "none":
        print(source)
        return
    f = fns[kind]
    if calls > 0:
        for _ in range(calls):
            f()
        return
    rounds = []
    for _ in range(25):
        t = time.perf_counter()
        for _ in range(4000):
            f()
        rounds.append((time.perf_counter() - t) / 4000 * 1e6)
    print(f"{statistics.median(rounds):.3f}")


def child(fake: str, args: list[str], prefix: list[str] | None = None) -> str:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(fake))
    env.setdefault("JITK_CACHE_DIR", os.path.join(tempfile.gettempdir(), "jitk-host-cpu-cache"))
    cmd = (prefix or []) + [sys.executable, os.path.abspath(__file__), "--child"] + args
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def instructions(fake: str, kind: str, calls: int) -> int:
    with tempfile.NamedTemporaryFile(suffix=".cg") as out:
        text = child(fake, [kind, str(calls)],
                     ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out.name}"])
    for line in text.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1].strip())
    sys.exit("callgrind printed no count:\n" + text)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        workload(sys.argv[2], int(sys.argv[3]))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fake", required=True, help="the stand-in libcuda.so.1")
    p.add_argument("--callgrind", action="store_true", help="count instructions instead")
    o = p.parse_args()
    source = child(o.fake, ["none", "0"]).strip()
    print(f"arrays: {source}")
    cases = [c for c in CASES if c != "elementwise_alloc" or source == "CuPy arrays"]
    if o.callgrind:
        calls = 20000
        base = instructions(o.fake, "none", 0)
        for kind in cases:
            per = (instructions(o.fake, kind, calls) - base) / calls
            print(f"{kind:<20} {per:8.0f} instructions per call")
    else:
        for kind in cases:
            print(f"{kind:<20} {float(child(o.fake, [kind, '0'])):8.3f} us per call")


if __name__ == "__main__":
    main()
