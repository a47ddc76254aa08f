"""Bad input gets a clear Python exception, of the type CuPy raises, and
nothing is launched: outputs given to a refused call keep their poison.
"""

import numpy as np
import pytest

import jitk
from jitk_testutil import assert_equal, load_lib

pytestmark = pytest.mark.gpu

ADD = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")


def poisoned(lib, shape=(4,), dtype="float32"):
    return lib.asarray(np.full(shape, -777, dtype=dtype))


def assert_untouched(lib, out):
    assert_equal(lib.asnumpy(out), np.full(tuple(out.shape), -777,
                                           dtype=lib.asnumpy(out).dtype))


def test_wrong_number_of_arguments(lib):
    x, out = lib.asarray(np.ones(4, np.float32)), poisoned(lib)
    with pytest.raises(TypeError):
        ADD(x)
    with pytest.raises(TypeError):
        ADD(x, x, out, out)
    with pytest.raises(TypeError):
        ADD(x, x, out, bogus=1)
    assert_untouched(lib, out)


def test_dtype_mismatch(lib):
    f32 = lib.asarray(np.ones(4, np.float32))
    f64 = lib.asarray(np.ones(4, np.float64))
    out = poisoned(lib)
    with pytest.raises(TypeError):
        ADD(f32, f64)          # T bound to two dtypes
    with pytest.raises(TypeError):
        ADD(f64, f64, out)     # an output of another dtype than T
    fixed = jitk.ElementwiseKernel("float32 x", "float32 y", "y = x", "fixed")
    with pytest.raises(TypeError):
        fixed(lib.asarray(np.ones(4, np.int32)), out)
    assert_untouched(lib, out)


def test_shapes_that_do_not_broadcast(lib):
    out = poisoned(lib, (3,))
    with pytest.raises(ValueError):
        ADD(lib.asarray(np.ones(3, np.float32)),
            lib.asarray(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="Out shape is mismatched"):
        ADD(lib.asarray(np.ones((2, 3), np.float32)),
            lib.asarray(np.ones(3, np.float32)), out)
    assert_untouched(lib, out)


def test_host_arrays(lib):
    out = poisoned(lib)
    host = np.ones(4, np.float32)
    with pytest.raises((TypeError, ValueError)) as e:
        ADD(host, host, out)
    # The message says what is wrong with the argument.
    text = str(e.value).lower()
    assert any(w in text for w in ("host", "cpu", "device", "gpu", "cuda"))
    assert_untouched(lib, out)
    if lib.name == "torch":
        with pytest.raises((TypeError, ValueError)):
            ADD(lib.m.ones(4), lib.m.ones(4), out)
        assert_untouched(lib, out)
    raw = jitk.RawKernel('extern "C" __global__ void k(float *p) { p[0] = 1; }',
                         "k")
    with pytest.raises((TypeError, ValueError)):
        raw(1, 1, (np.ones(3, np.float32),))


def test_unsupported_objects(lib):
    out = poisoned(lib)
    for bad in ([1.0, 2.0, 3.0, 4.0], "text", object()):
        with pytest.raises(TypeError):
            ADD(bad, bad, out)
    with pytest.raises(TypeError):
        ADD(lib.asarray(np.ones(4, np.float32)), 1.0, [0.0] * 4)
    assert_untouched(lib, out)


def test_bad_size_and_block_size(lib):
    x = lib.asarray(np.ones(4, np.float32))
    raw = jitk.ElementwiseKernel("raw T x", "raw T y", "y[i] = x[i]", "rcopy")
    with pytest.raises(ValueError):
        raw(x, size=-3)
    with pytest.raises(ValueError):
        ADD(x, x, block_size=0)
    with pytest.raises(ValueError):
        ADD(x, x, block_size=-1)


def test_bad_grid_and_block(lib):
    k = jitk.RawKernel('extern "C" __global__ void k() {}', "k")
    for grid, block in (((1,), (2048,)), ((1, 1, 1, 1), (1,)), ((1,), ())):
        with pytest.raises((ValueError, jitk.JitkError)):
            k(grid, block, ())
    with pytest.raises(TypeError):
        k(1, 1, 5)  # args must be a tuple or a list


def test_partial_overlap_is_refused_or_right(lib):
    # CuPy copies an input that partly overlaps an output; jitk may refuse
    # it instead. Either way, never a silently wrong answer.
    x = np.arange(10, dtype=np.float32)
    d = lib.asarray(x)
    try:
        ADD(d[:-1], d[:-1], d[1:])
    except (ValueError, TypeError):
        assert_equal(lib.asnumpy(d), x)
    else:
        want = x.copy()
        want[1:] = x[:-1] + x[:-1]
        assert_equal(lib.asnumpy(d), want)


def test_compile_errors_at_the_call(lib):
    k = jitk.ElementwiseKernel("T x", "T y", "y = x + undefined_name", "bad")
    out = poisoned(lib)
    with pytest.raises(jitk.CompileError) as e:
        k(lib.asarray(np.ones(4, np.float32)), out)
    assert "operation:1:" in e.value.log
    assert_untouched(lib, out)
    # A second call fails the same way (a failed compile is not cached as
    # a success).
    with pytest.raises(jitk.CompileError):
        k(lib.asarray(np.ones(4, np.float32)), out)


def test_another_device(lib):
    # Arrays of two devices: the call runs on the current device (0), as
    # CuPy's do, and reads device 1's array through peer access, enabled
    # with a PerformanceWarning; without a path between the devices,
    # CuPy's ValueError and nothing written.
    if jitk.device_count() < 2:
        pytest.skip("needs two GPUs")
    if lib.name == "cupy":
        with lib.m.cuda.Device(1):
            other = lib.m.ones(4, dtype=np.float32)
    else:
        other = lib.m.ones(4, device="cuda:1")
    here = lib.asarray(np.ones(4, np.float32))
    out = poisoned(lib)
    try:
        import cupy
        reach = cupy.cuda.runtime.deviceCanAccessPeer(0, 1)
    except ImportError:
        import torch
        reach = torch.cuda.can_device_access_peer(0, 1)
    if reach:
        with pytest.warns(jitk.PerformanceWarning):
            ADD(here, other, out)
        assert_equal(lib.asnumpy(out), np.full(4, 2, np.float32))
    else:
        with pytest.raises(ValueError, match="Peer access is unavailable"):
            ADD(here, other, out)
        assert_untouched(lib, out)


def test_arrays_of_two_libraries_together(lib):
    # A CuPy array beside a PyTorch tensor: both are GPU arrays, so the
    # call works, and the output jitk allocates is of one of the two.
    if lib.name == "cupy-emulated":
        pytest.skip("a second library's arrays need a GPU")
    other = load_lib("torch" if lib.name == "cupy" else "cupy")
    x = np.arange(6, dtype=np.float32)
    z = ADD(lib.asarray(x), other.asarray(x))
    assert lib.is_native(z) or other.is_native(z)
    owner = lib if lib.is_native(z) else other
    assert_equal(owner.asnumpy(z), 2 * x)


def test_lazy_complex_views_of_torch(torch_lib):
    # x.conj() and a negated view share x's memory and flip a bit instead of
    # the values: jitk, which reads the memory, would compute on x itself.
    torch = torch_lib.m
    x = torch.tensor([1 + 2j, 3 - 4j], device="cuda", dtype=torch.complex64)
    out = torch.full((2,), -777, device="cuda", dtype=torch.complex64)
    copy = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy_complex")
    for view, fix in ((x.conj(), "resolve_conj"), (torch._neg_view(x), "resolve_neg")):
        with pytest.raises(ValueError, match=fix):
            copy(view, out)
        assert bool(torch.all(out == -777))
    copy(x.conj().resolve_conj(), out)
    assert bool(torch.all(out == x.conj()))
