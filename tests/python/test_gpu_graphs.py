"""jitk's kernels in CUDA graphs captured from Python, with CuPy's and
PyTorch's own capture calls, in the driver's global mode, where a call
unsafe during a capture would end it: every kind (RawKernel,
ElementwiseKernel, ReductionKernel, jitk.matmul) captured and replayed on
new inputs with every element checked, launched before the capture or
first called inside it (compiled and loaded then, as CuPy's kernels are);
outputs allocated during the capture; and autotuning, which times runs,
refused during a capture with a clear error, the capture going on.

The values are small integers, so every result is exact in float32 whatever
order the kernels add in, and compared for equality. A graph object is
deleted before the next capture begins: destroying one during a capture is
itself an unsafe call.
"""

import numpy as np
import pytest

import jitk
from jitk_testutil import assert_equal

pytestmark = [pytest.mark.gpu, pytest.mark.device_only("capturing a CUDA graph needs a GPU")]

TWICE = r'''
extern "C" __global__ void twice(const float *x, float *w, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) w[i] = 2.0f * x[i];
}
'''

# x and y are R x C; the reduction sums z's columns. A is MM x MK, B MK x MN:
# none a multiple of a matmul tile, so the tiles' tails are captured too.
R, C = 512, 384
MM, MN, MK = 96, 72, 80


def kernels(tag):
    """Fresh kernel objects, whose specializations nothing has compiled or
    loaded in this process: `tag` keeps each test's names its own."""
    return (jitk.RawKernel(TWICE + f"// {tag}\n", "twice"),
            jitk.ElementwiseKernel("T w, T y", "T z", "z = w + y", f"graph_add_{tag}"),
            jitk.ReductionKernel("T z", "T s", "z", "a + b", "s = a", "0", f"graph_colsum_{tag}"))


class Capture:
    """Captures what is launched inside it on `stream`, made the current
    stream, in the driver's global capture mode (PyTorch's default; CuPy's
    is relaxed, named with relaxed=True). replay() launches the graph on
    the stream and waits for it."""

    def __init__(self, lib, stream, relaxed=False):
        self.lib, self.stream, self.relaxed = lib, stream, relaxed

    def __enter__(self):
        m = self.lib.m
        if self.lib.name == "cupy":
            self.stream.__enter__()
            mode = (m.cuda.runtime.streamCaptureModeRelaxed if self.relaxed
                    else m.cuda.runtime.streamCaptureModeGlobal)
            self.stream.begin_capture(mode=mode)
        else:
            self.graph = m.cuda.CUDAGraph()
            self.ctx = m.cuda.graph(self.graph, stream=self.stream,
                                    capture_error_mode="relaxed" if self.relaxed else "global")
            self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self.lib.name == "cupy":
            try:
                self.graph = self.stream.end_capture()
            finally:
                self.stream.__exit__(*exc)
            return False
        return self.ctx.__exit__(*exc)

    def replay(self):
        if self.lib.name == "cupy":
            self.graph.launch(self.stream)
        else:
            self.graph.replay()
        self.stream.synchronize()


def integers(rng, shape):
    return rng.integers(-8, 9, size=shape).astype(np.float32)


def fill(lib, array, values):
    """Writes new values into a captured input, in place, and waits."""
    if lib.name == "cupy":
        array.set(values)
    else:
        array.copy_(lib.m.from_numpy(values))
    lib.synchronize()


def expected(x, y, a, b):
    w = 2 * x
    z = w + y
    return w, z, z.sum(axis=0), a.astype(np.float64) @ b


def check_replays(lib, graph, rng, inputs, outputs):
    """Replays `graph` three times on new values of x, y, A and B, its
    outputs w, z, s and D poisoned before each, and checks every element."""
    (x, y, a, b), (w, z, s, d) = inputs, outputs
    m = a.shape[0]
    for rep in range(3):
        hx, hy, ha, hb = (integers(rng, (R, C)), integers(rng, (R, C)),
                          integers(rng, (m, MK)), integers(rng, (MK, MN)))
        for array, values in ((x, hx), (y, hy), (a, ha), (b, hb)):
            fill(lib, array, values)
        for out, shape in ((w, (R, C)), (z, (R, C)), (s, (C,)), (d, (m, MN))):
            fill(lib, out, np.full(shape, np.nan, np.float32))
        graph.replay()
        for got, want in zip((w, z, s, d), expected(hx, hy, ha, hb)):
            assert_equal(lib.asnumpy(got), want.astype(np.float32))


@pytest.mark.parametrize("first_call", ["before", "inside"])
def test_every_kind_replays_on_new_inputs(lib, first_call):
    """Each kind's first call made before the capture, or inside it: then
    the call compiles (or finds in the cache) and loads its kernel during
    the capture, and the graph holds only the launches."""
    rng = np.random.default_rng(5)
    raw, add, colsum = kernels(f"every_{first_call}")
    x, y = lib.asarray(integers(rng, (R, C))), lib.asarray(integers(rng, (R, C)))
    # A matmul shape of each test's own, so that "inside" makes a new plan.
    m = MM if first_call == "before" else MM + 24
    a = lib.asarray(integers(rng, (m, MK)))
    b = lib.asarray(integers(rng, (MK, MN)))
    w, z = lib.asarray(np.zeros((R, C), np.float32)), lib.asarray(np.zeros((R, C), np.float32))
    s, d = lib.asarray(np.zeros(C, np.float32)), lib.asarray(np.zeros((m, MN), np.float32))

    def work():
        raw(((R * C + 255) // 256,), (256,), (x, w, R * C))
        add(w, y, z)
        colsum(z, s, axis=0)
        jitk.matmul(a, b, out=d)

    stream = lib.new_stream()
    if first_call == "before":
        with lib.using(stream):
            work()
        stream.synchronize()
    with Capture(lib, stream) as graph:
        work()
    check_replays(lib, graph, rng, (x, y, a, b), (w, z, s, d))
    del graph


def test_outputs_allocated_during_the_capture(lib):
    """Outputs jitk allocates inside a capture come from the library's
    allocator as the capture allows it (PyTorch: the graph's own pool; CuPy:
    its pool, in its default relaxed mode), and each replay writes them."""
    rng = np.random.default_rng(6)
    _, add, colsum = kernels("allocated")
    x, y = lib.asarray(integers(rng, (R, C))), lib.asarray(integers(rng, (R, C)))
    a, b = lib.asarray(integers(rng, (MM, MK))), lib.asarray(integers(rng, (MK, MN)))
    stream = lib.new_stream()
    with lib.using(stream):
        add(x, y)
        colsum(x, axis=0)
        jitk.matmul(a, b)
    stream.synchronize()
    with Capture(lib, stream, relaxed=lib.name == "cupy") as graph:
        z = add(x, y)
        s = colsum(z, axis=0)
        d = jitk.matmul(a, b)
    for rep in range(2):
        hx, hy, ha, hb = (integers(rng, (R, C)), integers(rng, (R, C)),
                          integers(rng, (MM, MK)), integers(rng, (MK, MN)))
        for array, values in ((x, hx), (y, hy), (a, ha), (b, hb)):
            fill(lib, array, values)
        graph.replay()
        assert_equal(lib.asnumpy(z), hx + hy)
        assert_equal(lib.asnumpy(s), (hx + hy).sum(axis=0))
        assert_equal(lib.asnumpy(d), (ha.astype(np.float64) @ hb).astype(np.float32))
    del graph


def test_autotune_is_refused_during_a_capture_and_the_capture_goes_on(lib):
    """Autotuning times runs with events, which a capture cannot do: it
    raises JitkError saying to tune before the capture, writes nothing,
    and the capture ends normally with the launch before it."""
    rng = np.random.default_rng(7)
    raw, _, colsum = kernels("refused")
    x = lib.asarray(integers(rng, (R, C)))
    w = lib.asarray(np.zeros((R, C), np.float32))
    s = lib.asarray(np.full(C, -777, np.float32))
    stream = lib.new_stream()
    grid = ((R * C + 255) // 256,)
    with pytest.raises(jitk.JitkError, match="autotune before the capture") as caught:
        with Capture(lib, stream) as graph:
            raw(grid, (256,), (x, w, R * C))
            colsum.autotune(x, s, axis=0)
    assert "capturing a CUDA graph" in str(caught.value)
    hx = integers(rng, (R, C))
    fill(lib, x, hx)
    graph.replay()
    assert_equal(lib.asnumpy(w), 2 * hx)
    assert_equal(lib.asnumpy(s), np.full(C, -777, np.float32))
    del graph
    # Tuned before the capture, the reduction is captured with its choice.
    with lib.using(stream):
        colsum.autotune(x, s, axis=0)
    stream.synchronize()
    with Capture(lib, stream) as graph:
        colsum(x, s, axis=0)
    hx = integers(rng, (R, C))
    fill(lib, x, hx)
    graph.replay()
    assert_equal(lib.asnumpy(s), hx.sum(axis=0))
    del graph
