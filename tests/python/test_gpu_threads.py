"""jitk's kernels called from several Python threads at once, as thread
pools in servers and data loaders call them: fresh kernel objects whose
first calls race (each compiles with the GIL released, and the first
module or specialization kept is everyone's), then many calls of every
kind, each thread on its own arrays and stream, every element checked.
"""

import threading

import numpy as np
import pytest

import jitk
from jitk_testutil import assert_equal

pytestmark = [pytest.mark.gpu,
              pytest.mark.device_only("the emulator runs one launch at a time")]

SCALE = r'''
extern "C" __global__ void scale_add(const float *x, float *y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''
THREADS, ROUNDS, N = 8, 12, 3000


def test_every_kind_from_several_threads(lib):
    ew = jitk.ElementwiseKernel("T x, T y", "T z", "z = x * 2 + y", "threads_ew")
    red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "threads_red")
    raw = jitk.RawKernel(SCALE, "scale_add")
    mod = jitk.RawModule(code=SCALE.replace("scale_add", "scale_add2"))
    start = threading.Barrier(THREADS)
    failures = []

    def work(t):
        try:
            rng = np.random.default_rng(t)
            stream = lib.new_stream()
            start.wait()  # every thread's first calls at once
            with lib.using(stream):
                for r in range(ROUNDS):
                    # float32 and float64 alternate: two specializations each.
                    dtype = np.float32 if (t + r) % 2 else np.float64
                    hx = rng.integers(-50, 50, N).astype(dtype)
                    hy = rng.integers(-50, 50, N).astype(dtype)
                    x, y = lib.asarray(hx), lib.asarray(hy)
                    z = ew(x, y)
                    s = red(z.reshape(30, 100), axis=1)
                    f = lib.asarray(hx.astype(np.float32))
                    g = lib.asarray(hy.astype(np.float32))
                    raw(((N + 127) // 128,), (128,), (f, g, np.float32(3), np.int32(N)))
                    mod.get_function("scale_add2")(((N + 255) // 256,), (256,),
                                                   (f, g, np.float32(-1), np.int32(N)))
                    a = lib.asarray(rng.integers(-4, 5, (24, 40)).astype(np.float32))
                    b = lib.asarray(rng.integers(-4, 5, (40, 16)).astype(np.float32))
                    d = jitk.matmul(a, b)
                    stream.synchronize()
                    want = 2 * hx + hy
                    assert_equal(lib.asnumpy(z), want)
                    assert_equal(lib.asnumpy(s), want.reshape(30, 100).sum(axis=1))
                    assert_equal(lib.asnumpy(g), (2 * hx + hy).astype(np.float32))
                    assert_equal(lib.asnumpy(d),
                                 lib.asnumpy(a).astype(np.float64) @ lib.asnumpy(b))
        except BaseException as e:  # reported by the main thread
            failures.append((t, repr(e)))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=600)
    assert not any(th.is_alive() for th in threads), "a thread did not finish"
    assert not failures, failures
    # One entry per dtype signature, whichever thread compiled it.
    assert len(ew._cached_codes) == 2 and len(red._cached_codes) == 2
