"""Random views through the Python API, against NumPy on the same views.

Each case draws a dtype, a shape of up to four dimensions and, for every
array, a view of a larger buffer: axes permuted, sliced with steps (and
reversed where the library has negative strides), or broadcast. The
elementwise cases read two such inputs and a scalar and write a given
output view (of a poisoned buffer, whose bytes outside the view must
keep their poison) or one jitk allocates; the reduction cases sum, or
weight and sum, over random axes, with keepdims or not. Values are small
integers, so every dtype holds them and every sum is exact in any order:
results must equal NumPy's element for element. Reductions also take the
maximum (no identity) and sum float16 into float32. The seed is printed in
each case's name, and JITK_TEST_RANDOM_CASES sets how many there are.
"""

import numpy as np
import pytest

import jitk
from jitk_testutil import assert_equal, random_seeds

pytestmark = pytest.mark.gpu

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint32", "float16", "float32",
          "float64", "complex64", "complex128")
# Sums of up to a few thousand small integers stay exact in these.
SUM_DTYPES = ("int32", "int64", "uint32", "float32", "float64", "complex128")

AXPY = jitk.ElementwiseKernel("T x, T y, T s", "T z", "z = x * s + y; z -= (T)(i % 3)",
                              "random_axpy")
SUM = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "random_sum")
WSUM = jitk.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0",
                            "random_wsum")
# No identity: each output starts from its first element.
MAX = jitk.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None, "random_max")
MAX_DTYPES = ("int8", "int32", "uint8", "int64", "float16", "float32", "float64")
# float16 in, summed and stored in float32 (CuPy's reduce_type).
HSUM = jitk.ReductionKernel("T x", "float32 y", "x", "a + b", "y = a", "0", "random_hsum",
                            reduce_type="float32")


def random_shape(rng, max_ndim=4, max_elements=6000):
    ndim = int(rng.integers(0, max_ndim + 1))
    shape = []
    for _ in range(ndim):
        shape.append(int(rng.choice([1, 2, 3, 5, 8, 17, 32, 33, 64, 100])))
    while np.prod(shape, dtype=np.int64) > max_elements:
        shape[int(np.argmax(shape))] //= 2
    return tuple(shape)


class View:
    """How to cut a view of `shape` from a buffer: the buffer's shape, a
    slice per axis of it, then a permutation of the axes."""

    def __init__(self, rng, shape, negative):
        ndim = len(shape)
        self.perm = tuple(rng.permutation(ndim)) if rng.random() < 0.5 else tuple(range(ndim))
        inner = [shape[p] for p in np.argsort(self.perm)]  # the shape before permuting
        self.base, self.slices = [], []
        for n in inner:
            step = int(rng.choice([1, 1, 2, 3])) * (-1 if negative and rng.random() < 0.25 else 1)
            start = int(rng.integers(0, 3))
            size = start + (n - 1) * abs(step) + 1 + int(rng.integers(0, 2))
            self.base.append(size)
            if step > 0:
                self.slices.append(slice(start, start + (n - 1) * step + 1, step))
            else:
                first = size - 1 - start
                stop = first + (n - 1) * step - 1
                self.slices.append(slice(first, None if stop < 0 else stop, step))

    def cut(self, lib, buf):
        v = buf[tuple(self.slices)]
        return lib.permute(v, self.perm) if self.perm != tuple(range(len(self.perm))) else v


def values(rng, shape, dtype, lo=0, hi=9):
    a = rng.integers(lo, hi, size=shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.integers(lo, hi, size=shape)
    return a.astype(dtype)


def poison(dtype):
    return {"i": 77, "u": 77, "f": np.nan, "c": complex(np.nan, np.nan)}[np.dtype(dtype).kind]


def input_view(lib, rng, shape, dtype, lo=0, hi=9):
    """A random view of `shape` (or a broadcast of a smaller one) with its
    NumPy twin, of integers in [lo, hi)."""
    if shape and rng.random() < 0.3:
        small = tuple(1 if rng.random() < 0.5 else n for n in shape)
        if rng.random() < 0.3:
            small = small[int(rng.integers(0, len(small) + 1)):]  # fewer dimensions
    else:
        small = shape
    v = View(rng, small, lib.negative_strides)
    host = values(rng, v.base, dtype, lo, hi)
    return v.cut(lib, lib.asarray(host)), v.cut(NumpyLib, host)


class NumpyLib:
    @staticmethod
    def permute(x, perm):
        return x.transpose(perm)


def output_view(lib, rng, shape, dtype):
    """A view of `shape` into a poisoned buffer: the device view, the
    buffer, and a NumPy mask of the buffer's elements the view holds."""
    v = View(rng, shape, lib.negative_strides)
    buf = lib.asarray(np.full(v.base, poison(dtype), dtype=dtype))
    index = np.arange(int(np.prod(v.base, dtype=np.int64))).reshape(v.base)
    mask = np.zeros(index.size, bool)
    mask[v.cut(NumpyLib, index).ravel()] = True
    return v.cut(lib, buf), buf, mask.reshape(v.base)


def check_output(lib, out, buf, mask, want, dtype):
    assert_equal(lib.asnumpy(out), want)
    rest = lib.asnumpy(buf)[~mask]
    if np.dtype(dtype).kind in "fc":
        assert np.all(np.isnan(rest)), "an element outside the output's view was written"
    else:
        assert np.all(rest == poison(dtype)), "an element outside the output's view was written"


@random_seeds
def test_elementwise(lib, seed):
    rng = np.random.default_rng(1000 + seed)
    dtype = str(rng.choice(DTYPES))
    lib.check_dtype(dtype)
    shape = random_shape(rng)
    x, hx = input_view(lib, rng, shape, dtype)
    y, hy = input_view(lib, rng, shape, dtype)
    s = np.dtype(dtype).type(int(rng.integers(1, 4)))
    full = np.broadcast_shapes(hx.shape, hy.shape)
    idx = np.arange(int(np.prod(full, dtype=np.int64))).reshape(full)
    want = (hx * s + hy - (idx % 3).astype(dtype)).astype(dtype)
    if rng.random() < 0.6:
        out, buf, mask = output_view(lib, rng, full, dtype)
        AXPY(x, y, s, out)
        check_output(lib, out, buf, mask, want, dtype)
    else:
        got = AXPY(x, y, s)
        assert lib.is_native(got) and tuple(got.shape) == full
        assert_equal(lib.asnumpy(got), want)


@random_seeds
def test_reduction(lib, seed):
    rng = np.random.default_rng(2000 + seed)
    kind = str(rng.choice(["sum", "sum", "weighted", "max", "half"]))
    dtype = str(rng.choice({"max": MAX_DTYPES, "half": ("float16",)}.get(kind, SUM_DTYPES)))
    lib.check_dtype(dtype)
    shape = random_shape(rng, max_elements=20000)
    # The maximum of negative numbers (of large ones, unsigned) is not
    # what a reduction that starts from 0 gives.
    lo, hi = ((100, 200) if dtype.startswith("u") else (-60, -2)) if kind == "max" else (0, 9)
    x, hx = input_view(lib, rng, shape, dtype, lo, hi)
    ndim = hx.ndim
    axis = None if ndim == 0 or rng.random() < 0.2 else tuple(
        int(a) for a in np.flatnonzero(rng.random(ndim) < 0.5))
    if axis is not None and len(axis) == 1 and rng.random() < 0.5:
        axis = axis[0] - ndim if rng.random() < 0.5 else axis[0]  # an int, maybe negative
    keepdims = bool(rng.random() < 0.3)
    args, k, out_dtype = (x,), SUM, dtype
    if kind == "weighted":
        w, hw = input_view(lib, rng, hx.shape, dtype)
        hx = hx * hw
        args, k = (x, w), WSUM
    if kind == "max":
        k = MAX
        want = np.asarray(hx.max(axis=axis, keepdims=keepdims))
    elif kind == "half":
        k, out_dtype = HSUM, "float32"
        want = np.asarray(hx.astype(np.float32).sum(axis=axis, keepdims=keepdims))
    else:
        want = np.asarray(hx.sum(axis=axis, keepdims=keepdims, dtype=dtype))
    if rng.random() < 0.5:
        out, buf, mask = output_view(lib, rng, want.shape, out_dtype)
        k(*args, out, axis=axis, keepdims=keepdims)
        check_output(lib, out, buf, mask, want, out_dtype)
    else:
        got = k(*args, axis=axis, keepdims=keepdims)
        assert lib.is_native(got) and tuple(got.shape) == want.shape
        assert_equal(lib.asnumpy(got), want)
