"""ElementwiseKernel on CuPy arrays and PyTorch tensors against NumPy.

Every test runs with both libraries (the `lib` fixture). Data are small
integers, which every dtype holds exactly and whose sums and products are
exact, so results are compared element by element for equality. Given
outputs are filled with a poison value first, and the kernel runs twice
with two different poisons, so an element it failed to write cannot match.
Outputs jitk allocates are checked for their library, device, dtype and
shape, after a block of garbage was left in the library's memory pool.
"""

import numpy as np
import pytest

import jitk
from jitk_testutil import (DTYPES, CudaStream, assert_equal, nothing,
                           numpy_dtype, poisons)

pytestmark = pytest.mark.gpu

ADD = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")
RNG = np.random.default_rng(12)


def ints(shape, dtype, lo=0, hi=10):
    """Small integers as `dtype` (as float32 for bfloat16)."""
    a = RNG.integers(lo, hi, size=shape)
    if dtype == "bool":
        return a % 2 == 1
    return a.astype(numpy_dtype(dtype))


def np_add(x, y, dtype):
    """NumPy's x + y in `dtype`, wrapping as C does for integers."""
    if dtype == "bool":
        return x | y
    return (x + y).astype(numpy_dtype(dtype))


def run_poisoned(lib, dtype, shape, call, want):
    """Calls `call(out)` on an output poisoned twice, and compares."""
    for p in poisons(dtype):
        out = lib.asarray(np.full(shape, p, dtype=numpy_dtype(dtype)), dtype)
        result = call(out)
        assert result is out or result is None or lib.is_native(result)
        assert_equal(lib.asnumpy(out), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_given_and_allocated(lib, dtype):
    lib.check_dtype(dtype)
    x, y = ints((7, 33), dtype), ints((7, 33), dtype)
    dx, dy = lib.asarray(x, dtype), lib.asarray(y, dtype)
    want = np_add(x, y, dtype)
    run_poisoned(lib, dtype, x.shape, lambda out: ADD(dx, dy, out), want)

    lib.poison_pool(x.nbytes)
    z = ADD(dx, dy)
    assert lib.is_native(z), type(z)
    assert lib.device(z) == lib.device(dx)
    assert lib.dtype_name(z) == dtype
    assert tuple(z.shape) == x.shape
    assert_equal(lib.asnumpy(z), want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64",
                                   "float16", "bfloat16", "float32"])
def test_fixed_types_and_mixed_placeholders(lib, dtype):
    # A fixed-type parameter beside two placeholders bound to different
    # dtypes; the output takes a third.
    lib.check_dtype(dtype)
    k = jitk.ElementwiseKernel("T x, U y, int16 s", "V z",
                               "z = (V)(x * (T)s) + (V)y", "mixed")
    x, y = ints((5, 6), dtype), ints((5, 6), "int32")
    want = (x.astype(np.float64) * 3 + y).astype(numpy_dtype("float64"))
    out = lib.asarray(np.full(x.shape, np.nan), "float64")
    k(lib.asarray(x, dtype), lib.asarray(y, "int32"), np.int16(3), out)
    assert_equal(lib.asnumpy(out), want)


def test_views_transposes_and_slices(lib):
    a = ints((6, 8), "float32")
    b = ints((8, 6), "float32")
    da, db = lib.asarray(a), lib.asarray(b)
    # A transposed view against a contiguous array, and a strided slice.
    assert_equal(lib.asnumpy(ADD(da, lib.transpose(db))), a + b.T)
    assert_equal(lib.asnumpy(ADD(da[::2, 1::3], da[1::2, ::3])),
                 a[::2, 1::3] + a[1::2, ::3])
    # An output that is a view: only its elements change.
    parent = lib.asarray(np.full((6, 16), -5.0, dtype=np.float32))
    view = parent[:, ::2]
    ADD(da, da, view)
    want = np.full((6, 16), -5.0, dtype=np.float32)
    want[:, ::2] = a + a
    assert_equal(lib.asnumpy(parent), want)
    # A transposed output.
    out = lib.asarray(np.full((8, 6), np.nan, dtype=np.float32))
    ADD(da, da, lib.transpose(out))
    assert_equal(lib.asnumpy(out), (a + a).T)


def test_negative_strides(lib):
    if not lib.negative_strides:
        pytest.skip("PyTorch tensors have no negative strides")
    a = ints((5, 9), "int64")
    da = lib.asarray(a)
    assert_equal(lib.asnumpy(ADD(da[::-1], da[:, ::-1])), a[::-1] + a[:, ::-1])
    out = lib.asarray(np.zeros((5, 9), dtype=np.int64))
    ADD(da, da, out[::-1, ::-1])
    assert_equal(lib.asnumpy(out), (a + a)[::-1, ::-1])


def test_broadcasting(lib):
    col, row = ints((4, 1), "int32"), ints((1, 5), "int32")
    z = ADD(lib.asarray(col), lib.asarray(row))
    assert tuple(z.shape) == (4, 5)
    assert_equal(lib.asnumpy(z), col + row)
    # Against a 3-D array, and into a given output of the full shape.
    cube = ints((3, 4, 5), "int32")
    out = lib.asarray(np.full((3, 4, 5), 111, dtype=np.int32))
    ADD(lib.asarray(cube), lib.asarray(row), out)
    assert_equal(lib.asnumpy(out), cube + row)
    # A 0-d array broadcasts like a scalar.
    z = ADD(lib.asarray(np.int32(4)), lib.asarray(cube))
    assert_equal(lib.asnumpy(z), cube + 4)


@pytest.mark.parametrize("scalar, dtype", [
    (3, "int8"), (3, "int64"), (3, "uint32"), (3, "float16"),
    (2.5, "float32"), (2.5, "float64"), (True, "bool"), (2, "bool"),
    (1.5 + 2j, "complex64"), (3, "complex128"), (2.0, "bfloat16"),
    (np.int16(3), "int32"), (np.float64(2.5), "float32"),
    (np.float32(0.5), "float64"), (np.uint8(7), "int8"),
    (np.complex64(1 + 1j), "complex128"), (np.bool_(True), "int32"),
    (np.longlong(5), "int64"), (np.float16(1.5), "float16"),
])
def test_scalars_take_the_arrays_type(lib, scalar, dtype):
    # As in CuPy: T is bound by the array, the scalar is converted to it.
    lib.check_dtype(dtype)
    x = ints((3, 4), dtype)
    ref_dtype = numpy_dtype(dtype)
    want = np_add(x, np.asarray(scalar).astype(ref_dtype), dtype)
    z = ADD(lib.asarray(x, dtype), scalar)
    assert lib.dtype_name(z) == dtype
    assert_equal(lib.asnumpy(z), want)


def test_scalar_for_a_fixed_type_and_alone(lib):
    k = jitk.ElementwiseKernel("float32 a, T x", "T y", "y = a * x", "scale")
    x = ints((10,), "float64")
    assert_equal(lib.asnumpy(k(2, lib.asarray(x))), 2 * x)
    assert_equal(lib.asnumpy(k(np.float64(0.5), lib.asarray(x))), 0.5 * x)


def test_python_int_out_of_range_is_refused(lib):
    # CuPy converts a Python int with NumPy's rules, which refuse 300 for
    # int8 rather than wrap it.
    x = lib.asarray(ints((4,), "int8"))
    with pytest.raises(OverflowError):
        ADD(x, 300)


def test_scalars_an_integer_parameter_cannot_hold_are_refused(lib):
    """A scalar for an integer parameter is converted as NumPy 2 and CuPy
    convert it: floats cut toward zero, then every value checked against
    the parameter's range. What would not fit is refused (the library
    alone would convert as a C cast does, NaN to 0, 1e10 to 1410065408)."""
    x32 = lib.asarray(ints((4,), "int32"))
    x8 = lib.asarray(ints((4,), "int8"))
    scale = jitk.ElementwiseKernel("T x, uint32 s", "T y", "y = x + (T)s", "add_u32")
    bound = jitk.ElementwiseKernel("T a, T b", "raw int64 y", "y[i] = (long long)(T)(a + b)",
                                   "add_scalars")
    y = lib.asarray(np.zeros(1, np.int64))
    for call, error, words in [
            (lambda: ADD(x32, float("nan")), ValueError, "NaN"),
            (lambda: ADD(x32, np.float32("nan")), ValueError, "NaN"),
            (lambda: ADD(x32, float("inf")), OverflowError, "infinity"),
            (lambda: ADD(x32, 1e10), OverflowError, "10000000000 out of bounds for int32"),
            (lambda: ADD(x8, np.int64(300)), OverflowError, "300 out of bounds for int8"),
            (lambda: ADD(x8, np.float16(300)), OverflowError, "300 out of bounds for int8"),
            (lambda: ADD(x32, np.uint64(2**64 - 1)), OverflowError, "out of bounds for int32"),
            (lambda: scale(x32, -1.0), OverflowError, "-1 out of bounds for uint32"),
            (lambda: scale(x32, np.int64(-1)), OverflowError, "-1 out of bounds for uint32"),
            # T bound by the first scalar of it, an int8: 300 is past it.
            (lambda: bound(np.int8(1), 300, y, size=1), OverflowError,
             "300 out of bounds for int8")]:
        with pytest.raises(error, match=words):
            call()
    # What fits is taken, a float cut toward zero as int() cuts it.
    hx = lib.asnumpy(x32)
    assert_equal(lib.asnumpy(ADD(x32, 2.9)), hx + 2)
    assert_equal(lib.asnumpy(ADD(x32, -2.9)), hx - 2)
    assert_equal(lib.asnumpy(ADD(x8, np.int64(-100))), (lib.asnumpy(x8) - 100).astype(np.int8))
    assert_equal(lib.asnumpy(scale(x32, np.float32(7.5))), hx + 7)
    assert_equal(lib.asnumpy(scale(x32, -0.5)), hx)
    bound(300, np.int8(1), y, size=1)  # T is int64, from 300, the first
    assert_equal(lib.asnumpy(y), np.array([301]))


def test_outputs_read_through_directives_are_loaded(lib):
    """An output the operation seems to overwrite first is loaded all the
    same where a directive may change that: conditional compilation around
    the assignment, or a macro of the preamble that reads the output."""
    x = ints((4,), "int32")
    cases = [("#ifdef OVERWRITE\nz = x;\n#else\nz += x;\n#endif\n", ""),
             ("#if 0\nz = x;\n#endif\nz += x;\n", ""),
             ("z = ADD(x);", "#define ADD(v) (z + (v))"),
             ("z = x + OLD;", "#define OLD z")]
    for i, (op, preamble) in enumerate(cases):
        k = jitk.ElementwiseKernel("T x", "T z", op, f"ppload_{i}", preamble=preamble)
        z = lib.asarray(np.full(4, 100, np.int32))
        k(lib.asarray(x), z)
        assert_equal(lib.asnumpy(z), 100 + x)


def test_numpy_type_names_as_cupy_reads_them(lib):
    """CuPy takes a one-letter type for a placeholder and a longer one for
    a NumPy dtype name: `f4 x` is a float32 parameter, which a float64
    array does not match (it once became a placeholder, which any array
    bound); `float` is NumPy's float64."""
    x = ints((6,), "float32")
    k = jitk.ElementwiseKernel("f4 x, single s", "double y", "y = x * s", "numpy_names")
    assert_equal(lib.asnumpy(k(lib.asarray(x), 2)), (x * 2).astype(np.float64))
    with pytest.raises(TypeError):
        k(lib.asarray(x.astype(np.float64)), 2)
    assert [p[3] for p in k.params] == ["float32", "float32", "float64"]
    r = jitk.ReductionKernel("float x", "int_ n", "x > 0", "a + b", "n = a", "0", "count_pos")
    assert [p[3] for p in r.params] == ["float64", "int64"]
    assert k.in_params == "f4 x, single s"  # as given, as CuPy keeps it


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_pow_of_zero_and_to_zero(lib, dtype):
    """pow of complex values where exp(b log a) has no value, as NumPy
    gives it: a ** 0 is 1, 0 ** b is 0 for a real positive b and NaN
    otherwise; elsewhere exp(b log a)."""
    b = np.array([0, 0j, 2, 0.5, -1, 1j, -1 + 1j, 2, 0, 1 + 1j], dtype)
    a = np.array([0, 3 + 4j, 0, 0, 0, 0, 0, 1 + 1j, np.inf, 2 - 1j], dtype)
    k = jitk.ElementwiseKernel("T a, T b", "T z", "z = pow(a, b)", "cpow")
    got = lib.asnumpy(k(lib.asarray(a), lib.asarray(b)))
    with np.errstate(all="ignore"):
        want = a ** b
    assert_equal(got[:7], want[:7])
    assert_equal(got[8], 1)  # inf ** 0
    np.testing.assert_allclose(got[[7, 9]], want[[7, 9]], rtol=1e-5)


def test_size_minus_one_is_no_size(lib):
    """size=-1 is CuPy's own default, "not given"; below it is refused."""
    x = ints((5,), "int32")
    k = jitk.ElementwiseKernel("T x", "T y", "y = x + 1", "size_default")
    assert_equal(lib.asnumpy(k(lib.asarray(x), size=-1)), x + 1)
    with pytest.raises(ValueError, match="negative"):
        k(lib.asarray(x), size=-2)


def test_kernels_named_as_library_functions(lib):
    """A kernel may have any C name, `bind` and `socket` as others (the
    emulator once ran libc's functions of those names instead)."""
    x = ints((5,), "int64")
    for name in ("bind", "socket", "bindx"):
        k = jitk.ElementwiseKernel("T x", "T y", "y = x + 1", name)
        assert_equal(lib.asnumpy(k(lib.asarray(x))), x + 1)


def test_raw_inputs_and_outputs_with_size(lib):
    n = 1000
    x = RNG.standard_normal(n).astype(np.float32)
    rev = jitk.ElementwiseKernel("raw T x", "raw T y",
                                 "y[i] = x[_ind.size() - 1 - i]", "reverse")
    # Given output.
    out = lib.asarray(np.full(n, np.nan, dtype=np.float32))
    rev(lib.asarray(x), out, size=n)
    assert_equal(lib.asnumpy(out), x[::-1])
    # Allocated raw output: shape (size,).
    lib.poison_pool(x.nbytes)
    y = rev(lib.asarray(x), size=n)
    assert lib.is_native(y) and tuple(y.shape) == (n,)
    assert_equal(lib.asnumpy(y), x[::-1])
    # Half the size: only the first half of a given output is written.
    out = lib.asarray(np.full(n, -1.0, dtype=np.float32))
    rev(lib.asarray(x[: n // 2]), out, size=n // 2)
    want = np.full(n, -1.0, dtype=np.float32)
    want[: n // 2] = x[: n // 2][::-1]
    assert_equal(lib.asnumpy(out), want)


def test_raw_input_beside_non_raw_output(lib):
    x = ints((50,), "int64", 0, 1000)
    rot = jitk.ElementwiseKernel("raw T x, int64 n", "T y",
                                 "y = x[(i + 1) % n]", "rotate")
    out = lib.asarray(np.full(50, 111, dtype=np.int64))
    rot(lib.asarray(x), 50, out)
    assert_equal(lib.asnumpy(out), np.roll(x, -1))
    # A raw 2-D input indexed by its shape.
    m = ints((6, 7), "float32")
    tr = jitk.ElementwiseKernel("raw T m", "T y",
                                "y = m[(i % m.shape[0]) * m.shape[1] + i / m.shape[0]]",
                                "transpose_flat")
    out = lib.asarray(np.full(42, np.nan, dtype=np.float32))
    tr(lib.asarray(m), out)
    assert_equal(lib.asnumpy(out), m.T.reshape(-1))


def test_size_rules(lib):
    x = lib.asarray(np.arange(4, dtype=np.float32))
    raw = jitk.ElementwiseKernel("raw T x", "T y", "y = x[i]", "raw_in")
    with pytest.raises(ValueError, match=r"^Loop size is undecided\."):
        raw(x)
    nonraw = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
    with pytest.raises(ValueError, match=r"^Specified 'size' can"):
        nonraw(x, size=4)


def test_several_outputs_no_return_and_return_tuple(lib):
    x = ints((9,), "int32")
    dx = lib.asarray(x)
    two = jitk.ElementwiseKernel("T x", "T a, T b", "a = x + 1; b = x * 2",
                                 "two")
    a, b = two(dx)
    assert_equal(lib.asnumpy(a), x + 1)
    assert_equal(lib.asnumpy(b), x * 2)
    one = jitk.ElementwiseKernel("T x", "T a", "a = x + 1", "one",
                                 return_tuple=True)
    r = one(dx)
    assert isinstance(r, tuple) and len(r) == 1
    out = lib.asarray(np.zeros(9, dtype=np.int32))
    silent = jitk.ElementwiseKernel("T x", "T a", "a = x + 1", "silent",
                                    no_return=True)
    assert silent(dx, out) is None
    assert_equal(lib.asnumpy(out), x + 1)


def test_in_place_and_index(lib):
    x = ints((3, 5), "float64")
    dx = lib.asarray(x)
    inc = jitk.ElementwiseKernel("T x", "T y", "y = x + i", "plus_index")
    inc(dx, dx)  # an output that is exactly an input
    assert_equal(lib.asnumpy(dx), x + np.arange(15).reshape(3, 5))


def test_preamble_loop_prep_after_loop_options(lib):
    k = jitk.ElementwiseKernel(
        "T x", "T y", "y = twice(x) + OFFSET + base", "preamble_kernel",
        preamble="template <typename U> __device__ U twice(U v) { return v + v; }",
        loop_prep="T base = 100;", after_loop="", options=("-DOFFSET=7",))
    x = ints((64,), "float32")
    assert_equal(lib.asnumpy(k(lib.asarray(x))), 2 * x + 107)


def test_reduce_dims_false_and_block_size(lib):
    x = ints((4, 5, 6), "int16")
    k = jitk.ElementwiseKernel("T x", "T y", "y = x * 3", "triple",
                               reduce_dims=False)
    assert_equal(lib.asnumpy(k(lib.asarray(x), block_size=32)), x * 3)
    with pytest.raises(ValueError):
        k(lib.asarray(x), block_size=0)


def test_large_array_every_element(lib):
    # 2^24 + 3 elements: the vector loop's tail and several waves of blocks.
    n = (1 << 24) + 3
    x = np.arange(n, dtype=np.int32) % 1013
    dx = lib.asarray(x)
    out = lib.asarray(np.full(n, -1, dtype=np.int32))
    ADD(dx, dx, out)
    assert_equal(lib.asnumpy(out), 2 * x)


def test_cached_codes_count_dtype_signatures(lib):
    k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "counted")
    assert len(k._cached_codes) == 0
    x = lib.asarray(ints((100,), "float32"))
    k(x, x)
    k(x[::2], x[1::2])  # another layout, the same dtypes
    assert len(k._cached_codes) == 1
    y = lib.asarray(ints((100,), "float64"))
    k(y, y)
    assert len(k._cached_codes) == 2


def test_other_array_protocols(cupy_lib):
    # An object with only __cuda_array_interface__, and one with only
    # __dlpack__, are arrays too.
    cp = cupy_lib.m
    x = cp.arange(12, dtype=cp.float32)

    class CAI:
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__
            self.keep = a

    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    out = cp.full(12, cp.nan, dtype=cp.float32)
    ADD(CAI(x), DL(x), out)
    assert_equal(cp.asnumpy(out), 2 * np.arange(12, dtype=np.float32))


def test_stream_argument_forms(lib):
    # Each form of stream= must put the launch on that stream: the stream is
    # kept busy and its input written late, so a launch elsewhere would read
    # the input too early.
    n = 1 << 20
    s = lib.new_stream()
    for form in (s, lib.handle(s), CudaStream(lib.handle(s))):
        x = lib.asarray(np.zeros(n, dtype=np.float32))
        y = lib.asarray(np.full(n, 2.0, dtype=np.float32))
        lib.synchronize()
        with lib.using(s):
            lib.sleep()
            lib.add_(x, 1.0)
        z = ADD(x, y, stream=form)
        with lib.using(s):
            w = lib.mul(z, 3.0)
        s.synchronize()
        assert_equal(lib.asnumpy(w), np.full(n, 9.0, dtype=np.float32))


@pytest.mark.parametrize("on", ["default stream", "a stream made current"])
def test_current_stream_ordering_without_synchronization(lib, on):
    # The library's own kernels and jitk's, interleaved on the library's
    # current stream with no synchronization between them.
    n = 1 << 20
    s = lib.new_stream() if on != "default stream" else None
    x = lib.asarray(np.zeros(n, dtype=np.float32))
    y = lib.asarray(np.full(n, 2.0, dtype=np.float32))
    lib.synchronize()
    with lib.using(s) if s is not None else nothing():
        lib.sleep()
        lib.add_(x, 1.0)         # the library: x = 1, late
        z = ADD(x, y)            # jitk: z = 3
        w = lib.mul(z, 2.0)      # the library: w = 6
        ADD(w, w, z)             # jitk again, into z: 12
        v = lib.mul(z, 0.5)      # the library: 6
    lib.synchronize()
    assert_equal(lib.asnumpy(v), np.full(n, 6.0, dtype=np.float32))


def test_cache_stats_count_compiles_and_hits(lib):
    def counts():
        s = jitk.cache_stats()
        return s.get("process", s)

    before = counts()
    k = jitk.ElementwiseKernel("T x", "T y", "y = x * 5 + 1",
                               "stats_probe_%d" % RNG.integers(1 << 30))
    x = lib.asarray(ints((8,), "int32"))
    k(x)
    middle = counts()
    assert (middle["compiles"] + middle["disk_hits"] + middle["memory_hits"]
            > before["compiles"] + before["disk_hits"] + before["memory_hits"])


def test_half_types_with_plain_numbers(lib):
    # `2 * y` and `x > 0` on float16 compute in float and round once where
    # stored, as CuPy's float16 does.
    k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y; if (z > 0) z = z * 0.5",
                               "half_mixed")
    x = RNG.standard_normal(1000).astype(np.float16)
    y = RNG.standard_normal(1000).astype(np.float16)
    z = k(lib.asarray(x), lib.asarray(y))
    f = x.astype(np.float32) + 2 * y.astype(np.float32)
    want = np.where(f > 0, f.astype(np.float16).astype(np.float32) * 0.5, f).astype(np.float16)
    assert_equal(lib.asnumpy(z), want)


def test_python_ints_at_the_edges_of_uint64(lib):
    lib.check_dtype("uint64")
    x = lib.asarray(np.zeros(4, dtype=np.uint64))
    z = ADD(x, (1 << 64) - 1)
    assert_equal(lib.asnumpy(z), np.full(4, (1 << 64) - 1, dtype=np.uint64))
    with pytest.raises(OverflowError):
        ADD(x, 1 << 64)
    with pytest.raises(OverflowError):
        ADD(x, -1)
