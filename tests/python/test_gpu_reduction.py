"""ReductionKernel on CuPy arrays and PyTorch tensors against NumPy: axes
(one, several, negative, all), keepdims, out=, transposed inputs, several
dtypes, reduce_type, no identity, and the size of each reduction.

Integer data keep sums exact in every order, so results compare equal
element by element; float data compare to float64 NumPy within the
rounding that reordering a float32 sum allows.
"""

import numpy as np
import pytest

import jitk
from jitk_testutil import assert_equal, numpy_dtype

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(34)
SUM = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "jsum")

AXES = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1, 2), ()]


def test_reduction_arguments_as_cupy_takes_them(lib):
    """identity as any object's str() ("" is none), the first output
    returned whatever the number of outputs, a scalar the integer
    parameter cannot hold refused, and the names the kernel declares
    refused as parameters."""
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    dx = lib.asarray(x)
    k = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", 0, "rsum_int_identity")
    assert_equal(lib.asnumpy(k(dx, axis=1)), x.sum(axis=1))
    none = jitk.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", "", "rmax_no_identity")
    assert none.identity is None
    assert_equal(lib.asnumpy(none(dx, axis=0)), x.max(axis=0))
    two = jitk.ReductionKernel("T x", "T s, T m", "x", "a + b", "s = a; m = a / _in_ind.size()",
                               "0", "rsum_and_mean")
    m = lib.asarray(np.full(3, np.nan, np.float32))
    s = two(dx, None, m, axis=1)
    assert lib.is_native(s) and tuple(s.shape) == (3,)
    assert_equal(lib.asnumpy(s), x.sum(axis=1))
    assert_equal(lib.asnumpy(m), x.mean(axis=1))
    w = jitk.ReductionKernel("T x, int32 w", "T y", "x * w", "a + b", "y = a", "0", "rwsum")
    assert_equal(lib.asnumpy(w(dx, 2.5, axis=1)), 2 * x.sum(axis=1))
    for value, error in ((float("nan"), ValueError), (1e10, OverflowError),
                         (np.int64(2**40), OverflowError)):
        with pytest.raises(error):
            w(dx, value, axis=1)
    with pytest.raises(ValueError, match="cannot be named `_j`"):
        jitk.ReductionKernel("T x, float32 _j", "T y", "x * _j", "a + b", "y = a", "0", "rj")


def test_post_map_sees_each_output_as_its_element(lib):
    """As under CuPy, an output in post_map_expr is its element: read by
    `y += a`, kept where an `if` does not assign it, and kept where the
    post-map never names it (those outputs are loaded first)."""
    x = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
    dx = lib.asarray(x)
    sums = x.sum(axis=1)
    cases = [("y += a", 100 + sums), ("if (a > 20) y = a", np.where(sums > 20, sums, 100)),
             ("#if 0\ny = a;\n#endif\ny += 2 * a", 100 + 2 * sums)]
    for i, (post, want) in enumerate(cases):
        k = jitk.ReductionKernel("T x", "T y", "x", "a + b", post, "0", f"rpost_{i}")
        y = lib.asarray(np.full(4, 100, np.float32))
        k(dx, y, axis=1)
        assert_equal(lib.asnumpy(y), want.astype(np.float32))
    two = jitk.ReductionKernel("T x", "T y, T z", "x", "a + b", "y = a", "0", "rpost_keep_z")
    y, z = (lib.asarray(np.full(4, v, np.float32)) for v in (100, -1))
    two(dx, y, z, axis=1)
    assert_equal(lib.asnumpy(y), sums)
    assert_equal(lib.asnumpy(z), np.full(4, -1, np.float32))


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_axes_keepdims(lib, axis, keepdims):
    x = RNG.integers(-50, 50, size=(6, 7, 33)).astype(np.int32)
    got = SUM(lib.asarray(x), axis=axis, keepdims=keepdims)
    want = x.sum(axis=axis, keepdims=keepdims, dtype=np.int32)
    assert lib.is_native(got)
    assert tuple(got.shape) == np.shape(want)
    assert_equal(lib.asnumpy(got), want)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "uint64",
                                   "float32", "float64"])
def test_sum_dtypes_and_transposed_input(lib, dtype):
    lib.check_dtype(dtype)
    x = RNG.integers(0, 9, size=(40, 300)).astype(numpy_dtype(dtype))
    dx = lib.asarray(x)
    for axis in (0, 1, None):
        want = x.sum(axis=axis, dtype=numpy_dtype(dtype))
        assert_equal(lib.asnumpy(SUM(dx, axis=axis)), want)
        assert_equal(lib.asnumpy(SUM(lib.transpose(dx), axis=axis)),
                     x.T.sum(axis=axis, dtype=numpy_dtype(dtype)))


def test_out_given_and_poisoned(lib):
    x = RNG.integers(-9, 9, size=(5, 64, 3)).astype(np.int64)
    dx = lib.asarray(x)
    for keepdims, shape in ((False, (5, 3)), (True, (5, 1, 3))):
        for poison in (111, 77):
            out = lib.asarray(np.full(shape, poison, dtype=np.int64))
            r = SUM(dx, axis=1, keepdims=keepdims, out=out)
            assert r is out or lib.is_native(r)
            assert_equal(lib.asnumpy(out), x.sum(axis=1, keepdims=keepdims))
    # An output of the wrong shape is refused and left alone.
    out = lib.asarray(np.full((3, 5), 111, dtype=np.int64))
    with pytest.raises(ValueError):
        SUM(dx, axis=1, out=out)
    assert_equal(lib.asnumpy(out), np.full((3, 5), 111))


def test_float_sum_close_to_float64(lib):
    x = RNG.standard_normal((257, 1031)).astype(np.float32)
    dx = lib.asarray(x)
    for axis in (None, 0, 1):
        got = lib.asnumpy(SUM(dx, axis=axis)).astype(np.float64)
        want = x.astype(np.float64).sum(axis=axis)
        scale = np.abs(x).astype(np.float64).sum(axis=axis)
        assert np.all(np.abs(got - want) <= 1e-6 * scale + 1e-6)


def test_float16_accumulates_in_reduce_type(lib):
    k = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0",
                             "half_sum", reduce_type="float32")
    x = np.full(4096, 1.0, dtype=np.float16)  # 4096 ones: past float16's 2048
    got = lib.asnumpy(k(lib.asarray(x)))
    assert float(got) == 4096.0


def test_mean_l2_and_max_without_identity(lib):
    x = RNG.integers(-20, 20, size=(8, 50)).astype(np.float64)
    dx = lib.asarray(x)
    mean = jitk.ReductionKernel("T x", "T y", "x", "a + b",
                                "y = a / _in_ind.size()", "0", "jmean")
    assert np.allclose(lib.asnumpy(mean(dx, axis=1)), x.mean(axis=1),
                       rtol=1e-15, atol=0)
    l2 = jitk.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)",
                              "0", "jl2")
    assert np.allclose(lib.asnumpy(l2(dx, axis=0)),
                       np.sqrt((x * x).sum(axis=0)), rtol=1e-14, atol=0)
    amax = jitk.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None,
                                "jmax")
    assert_equal(lib.asnumpy(amax(dx, axis=1)), x.max(axis=1))
    # Without an identity, reducing nothing is an error; with one, the
    # result is the identity.
    empty = lib.asarray(np.zeros((3, 0)))
    with pytest.raises(ValueError):
        amax(empty, axis=1)
    assert_equal(lib.asnumpy(SUM(empty, axis=1)), np.zeros(3))
    # An identity that is not neutral starts every partial result, so an
    # empty reduction is it once, whatever partial results the strategy
    # keeps (it was 7 folded over 8 warps: 56).
    seven = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "7", "jseven")
    for shape, axis in [((0, 3), 0), ((3, 0), 1), ((0, 16), 0), ((0, 4096), 0), ((4096, 0), 1)]:
        got = lib.asnumpy(seven(lib.asarray(np.zeros(shape)), axis=axis))
        assert_equal(got, np.full(shape[1 - axis], 7.0))


def test_two_inputs_broadcast_and_a_scalar(lib):
    dot = jitk.ReductionKernel("T x, T y, T w", "T z", "x * y * w", "a + b",
                               "z = a", "0", "wdot")
    x = RNG.integers(0, 5, size=(4, 100)).astype(np.float32)
    y = RNG.integers(0, 5, size=(100,)).astype(np.float32)
    got = dot(lib.asarray(x), lib.asarray(y), 2.0, axis=1)
    assert_equal(lib.asnumpy(got), (x * y * 2).sum(axis=1))


def test_index_in_map_expr(lib):
    # _j is the element's index among those reduced into its output: an
    # argmax through a struct of the preamble.
    argmax = jitk.ReductionKernel(
        "T x", "int64 y", "vi{(double)x, (long long)_j}",
        "(a.v > b.v || (a.v == b.v && a.i < b.i)) ? a : b", "y = a.i",
        "vi{-1e308, -1}", "jargmax", reduce_type="vi",
        preamble="struct vi { double v; long long i; };")
    x = RNG.standard_normal((6, 777)).astype(np.float32)
    assert_equal(lib.asnumpy(argmax(lib.asarray(x), axis=1)), x.argmax(axis=1))


def test_reduce_type_default_is_the_outputs(lib):
    # CuPy reduces in the first output's type when reduce_type is None:
    # int8 inputs summed into an int64 output do not wrap.
    k = jitk.ReductionKernel("T x", "int64 y", "x", "a + b", "y = a", "0",
                             "widen")
    x = np.full(1000, 100, dtype=np.int8)
    assert int(lib.asnumpy(k(lib.asarray(x)))) == 100000


def test_errors(lib):
    x = lib.asarray(np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(TypeError):
        SUM()
    with pytest.raises(TypeError):
        SUM(x, x, x)
    with pytest.raises((ValueError, IndexError)):  # numpy.AxisError is both
        SUM(x, axis=2)
    with pytest.raises(ValueError):
        SUM(x, axis=(0, 0))
    with pytest.raises(ValueError):
        SUM(x, x, out=x)


def test_cached_codes_count_dtype_signatures(lib):
    k = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0",
                             "cached_sum")
    assert len(k._cached_codes) == 0
    x = lib.asarray(np.arange(10, dtype=np.int64))
    k(x)
    k(x, axis=0)
    assert len(k._cached_codes) == 1
    k(lib.asarray(np.arange(10, dtype=np.float32)))
    assert len(k._cached_codes) == 2


@pytest.mark.parametrize("shape,axis", [((64, 512, 16), 1), ((512, 16, 16), (0, 2)),
                                        ((1000, 200), 0)], ids=str)
def test_autotune_leaves_outputs_and_later_calls_right(lib, shape, axis):
    k = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "jsum_tuned")
    x = RNG.integers(-50, 50, size=shape).astype(np.int32)
    want = x.sum(axis=axis, dtype=np.int32)
    dx = lib.asarray(x)
    tuned = k.autotune(dx, axis=axis)
    assert lib.is_native(tuned)
    assert_equal(lib.asnumpy(tuned), want)
    out = lib.asarray(np.full(want.shape, -7, dtype=np.int32))
    k.autotune(dx, axis=axis, out=out)
    assert_equal(lib.asnumpy(out), want)
    for _ in range(2):
        assert_equal(lib.asnumpy(k(dx, axis=axis)), want)
    with pytest.raises(TypeError):
        k.autotune()
