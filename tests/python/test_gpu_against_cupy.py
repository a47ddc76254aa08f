"""jitk's kernel classes against CuPy's, on the same random calls.

jitk's Python classes claim to be drop-ins for CuPy's: a user changes one
import. CuPy's own tests check what their authors thought of; these cases
check what a user may write. Each case draws one of a set of kernels (fixed
types, type placeholders, raw and scalar parameters, several outputs; some
made with return_tuple or no_return) and random arguments for it: arrays of
random dtypes and broadcastable or clashing shapes, zero-size ones among
them, strided views, Python and NumPy scalars, given outputs of any dtype
and shape, axes in and out of range, keepdims. The same call is made with
CuPy's class and with jitk's, and the outcomes must agree: both raise (the
same class of exception, or a compile error each), or both return results
of the same type, dtype, shape and values (the given output object where
one was given), but where jitk means to differ (known_difference says
where). Values are small integers, so every dtype holds them exactly and
sums are exact in any order.

A third kind of case gives a raw kernel a scalar of random type for a
parameter of random C type, followed by an int: where CuPy hands the kernel
what its parameter is, jitk's kernel must read the same; elsewhere jitk's
own rules hold (test_raw_kernel_scalars_agree_with_cupy). A last test
checks that float32 subnormals flush to zero as under CuPy.
JITK_TEST_CUPY_CASES sets how many cases there are of each random kind.
"""

import os

import numpy as np
import pytest

import jitk

pytestmark = [pytest.mark.gpu,
              pytest.mark.device_only("CuPy's own kernels run here too, and need a GPU")]
cp = pytest.importorskip("cupy")

CASES = int(os.environ.get("JITK_TEST_CUPY_CASES", "60"))
seeds = pytest.mark.parametrize("seed", range(CASES), ids=lambda s: f"seed{s}")

REAL = ("bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "float16",
        "float32", "float64")
ALL = REAL + ("complex64", "complex128")

# (in_params, out_params, operation, whether complex arguments make sense)
ELEMENTWISE = [
    ("T x, T y", "T z", "z = x + y", True),
    ("T x, U y", "T z", "z = x + (T)y", True),
    ("float32 x, T y", "T z", "z = (T)x * y", False),
    ("T x", "U z", "z = (U)x", False),
    ("T x, raw T y", "T z", "z = x + y[0]", True),
    ("T x, int32 n", "T z", "z = x * (T)n", False),
    ("", "T z", "z = (T)(i % 5)", False),
    ("T x, T y", "T z, T w", "z = x + y; w = x * y", True),
    ("T x", "bool z", "z = x > (T)1", False),
    ("int64 x, float64 y", "float64 z", "z = x + y", False),
    ("T x, T y", "float32 z", "z = (float)x + (float)y", False),
    ("int8 x, uint8 y", "int16 z", "z = x - y", False),
]

# (in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, complex)
REDUCTION = [
    ("T x", "T y", "x", "a + b", "y = a", "0", True),
    ("T x, T w", "T y", "x * w", "a + b", "y = a", "0", True),
    ("T x", "float64 y", "x", "a + b", "y = a", "0", False),
    ("T x", "T y", "x", "max(a, b)", "y = a", None, False),
    ("T x", "U y", "x", "a + b", "y = (U)a", "0", False),
    ("T x, float32 s", "T y", "x * (T)s", "a + b", "y = a", "0", False),
    ("T x", "int64 y", "x != (T)0", "a + b", "y = a", "0", False),
]


def kernels(kind, index, **options):
    """The CuPy kernel and the jitk kernel of one definition, made once."""
    key = (kind, index, tuple(sorted(options.items())))
    if key not in _made:
        if kind == "elementwise":
            ins, outs, op, _ = ELEMENTWISE[index]
            name = f"vs_cupy_ew{index}"
            _made[key] = (cp.ElementwiseKernel(ins, outs, op, name, **options),
                          jitk.ElementwiseKernel(ins, outs, op, name, **options))
        else:
            ins, outs, mapped, reduced, post, identity, _ = REDUCTION[index]
            name = f"vs_cupy_red{index}"
            _made[key] = (cp.ReductionKernel(ins, outs, mapped, reduced, post, identity, name),
                          jitk.ReductionKernel(ins, outs, mapped, reduced, post, identity,
                                               name))
    return _made[key]


_made = {}


def small_values(rng, shape, dtype):
    values = rng.integers(0, 4, size=shape)
    if dtype == "bool":
        return values.astype(bool)
    return values.astype(dtype)


def random_array(rng, shape, dtype):
    """A CuPy array of `shape`, sometimes a strided view of a larger one."""
    if rng.random() < 0.3 and len(shape) > 0:
        # Every other element of a buffer twice as long on the last axis,
        # or the transpose of a contiguous array.
        if rng.random() < 0.5:
            big = small_values(rng, shape[:-1] + (2 * shape[-1],), dtype)
            return cp.asarray(big)[..., ::2]
        return cp.asarray(small_values(rng, shape[::-1], dtype)).T
    return cp.asarray(small_values(rng, shape, dtype))


def random_shape(rng, max_ndim=3):
    ndim = int(rng.integers(0, max_ndim + 1))
    return tuple(int(rng.choice([1, 2, 3, 4, 5, 0] if rng.random() < 0.1 else [1, 2, 3, 4, 5]))
                 for _ in range(ndim))


def broadcastable(rng, shape):
    """A shape that broadcasts to `shape` (or, rarely, one that clashes)."""
    if rng.random() < 0.08:
        return random_shape(rng)
    drop = int(rng.integers(0, len(shape) + 1))
    out = list(shape[drop:])
    for axis in range(len(out)):
        if rng.random() < 0.3:
            out[axis] = 1
    return tuple(out)


def random_scalar(rng, complex_ok):
    choice = rng.integers(0, 6 if complex_ok else 5)
    value = int(rng.integers(0, 4))
    if choice == 0:
        return value
    if choice == 1:
        return float(value)
    if choice == 2:
        return bool(value % 2)
    if choice == 3:
        return np.dtype(str(rng.choice(REAL))).type(value)
    if choice == 4:
        return cp.asarray(small_values(rng, (), str(rng.choice(REAL))))
    return complex(value, 1)


def outcome(call):
    """What a call did: ("ok", result) or ("raised", exception)."""
    try:
        return "ok", call()
    except Exception as e:  # noqa: BLE001 - every exception is compared
        return "raised", e


def is_compile_error(e):
    return isinstance(e, (jitk.CompileError, cp.cuda.compiler.CompileException))


def known_difference(in_params, args, cupy_out, jitk_out):
    """Whether the outcomes differ where jitk means to differ from CuPy.

    - CuPy binds type placeholders from arrays only; one that only a scalar
      could bind is left unbound, and the call fails with a KeyError of its
      internals. jitk binds it from the scalar (an array's dtype still wins
      over a scalar's) or, with no argument to bind it, raises a TypeError
      that names it.
    - A scalar given for a `raw` parameter reaches CuPy's compiler, which
      fails on the indexing; jitk refuses it with a TypeError first.
    """
    (ck, cv), (jk, jv) = cupy_out, jitk_out
    if ck == "raised" and type(cv) is KeyError:
        return jk == "ok" or isinstance(jv, (TypeError, jitk.CompileError))
    raw = [i for i, p in enumerate(in_params.split(",")) if p.split()[:1] == ["raw"]]
    scalar_for_raw = any(i < len(args) and not isinstance(args[i], cp.ndarray) for i in raw)
    return (scalar_for_raw and ck == "raised" and is_compile_error(cv) and jk == "raised"
            and type(jv) is TypeError and "must be an array" in str(jv))


def compare(cupy_out, jitk_out, given):
    """Nothing when the two outcomes agree, else what differs. `given`
    lists the outputs jitk's call was given, for each result in turn."""
    (ck, cv), (jk, jv) = cupy_out, jitk_out
    if ck != jk:
        return f"CuPy {ck} {cv!r}; jitk {jk} {jv!r}"
    if ck == "raised":
        if is_compile_error(cv) and is_compile_error(jv):
            return None
        if not isinstance(jv, type(cv)):
            return f"CuPy raised {type(cv).__name__}: {cv}; jitk raised {type(jv).__name__}: {jv}"
        return None
    if cv is None or jv is None:
        return None if cv is jv else f"CuPy returned {cv!r}, jitk {jv!r}"
    cres = cv if isinstance(cv, tuple) else (cv,)
    jres = jv if isinstance(jv, tuple) else (jv,)
    if isinstance(cv, tuple) != isinstance(jv, tuple) or len(cres) != len(jres):
        return f"CuPy returned {type(cv).__name__}, jitk {type(jv).__name__}"
    for k, (c, j) in enumerate(zip(cres, jres)):
        if type(c) is not type(j):
            return f"result {k}: CuPy's is {type(c).__name__}, jitk's {type(j).__name__}"
        if given and j is not given[k]:
            return f"result {k} is not the output given"
        if c.dtype != j.dtype or c.shape != j.shape:
            return f"result {k}: CuPy {c.dtype}{c.shape}, jitk {j.dtype}{j.shape}"
        if not np.array_equal(cp.asnumpy(c), cp.asnumpy(j), equal_nan=True):
            return f"result {k}: values differ: CuPy {cp.asnumpy(c)}, jitk {cp.asnumpy(j)}"
    return None


def twin_outputs(rng, count, shape):
    """Outputs to give both libraries, equal at first: for each output
    None (allocated by the call) or a pair of arrays."""
    given = []
    for _ in range(count):
        if rng.random() < 0.5:
            given.append(None)
            continue
        dtype = str(rng.choice(ALL))
        out_shape = shape if rng.random() < 0.85 else random_shape(rng)
        data = small_values(rng, out_shape, dtype)
        given.append((cp.asarray(data), cp.asarray(data)))
    return given


@seeds
def test_elementwise_calls_agree_with_cupy(seed):
    rng = np.random.default_rng(seed + 41_000)
    index = int(rng.integers(0, len(ELEMENTWISE)))
    ins, outs, _, complex_ok = ELEMENTWISE[index]
    dtypes = ALL if complex_ok else REAL
    shape = random_shape(rng)
    args = []
    n_in = len([p for p in ins.split(",") if p.strip()])
    for _ in range(n_in):
        if rng.random() < 0.25:
            args.append(random_scalar(rng, complex_ok))
        else:
            args.append(random_array(rng, broadcastable(rng, shape), str(rng.choice(dtypes))))
    n_out = len(outs.split(","))
    given = twin_outputs(rng, n_out, shape)
    # Outputs are passed positionally; a None after a given one is not
    # allowed by either, so only a prefix of them is given.
    while given and given[-1] is None:
        given.pop()
    if any(g is None for g in given):
        given = []
    kwargs = {}
    if n_in == 0 and (not given or rng.random() < 0.5):
        kwargs["size"] = int(rng.integers(0, 7))
    options = {}
    if rng.random() < 0.2:
        options[str(rng.choice(["return_tuple", "no_return"]))] = True
    ck, jk = kernels("elementwise", index, **options)
    cupy_out = outcome(lambda: ck(*args, *[g[0] for g in given], **kwargs))
    jitk_out = outcome(lambda: jk(*args, *[g[1] for g in given], **kwargs))
    if known_difference(ins, args, cupy_out, jitk_out):
        return
    problem = compare(cupy_out, jitk_out, [g[1] for g in given])
    if problem is None and cupy_out[0] == "ok":
        # The given outputs hold the same values after the calls.
        for c, j in given:
            if not np.array_equal(cp.asnumpy(c), cp.asnumpy(j), equal_nan=True):
                problem = "the given outputs differ after the calls"
    assert problem is None, describe(ELEMENTWISE[index], args, given, {**kwargs, **options},
                                     problem)


@seeds
def test_reduction_calls_agree_with_cupy(seed):
    rng = np.random.default_rng(seed + 42_000)
    index = int(rng.integers(0, len(REDUCTION)))
    ins, *_, complex_ok = REDUCTION[index]
    dtypes = ALL if complex_ok else REAL
    if REDUCTION[index][5] is None:  # max(a, b) of bools is ambiguous in both
        dtypes = tuple(d for d in REAL if d != "bool")
    shape = random_shape(rng, 4)
    args = [random_array(rng, shape, str(rng.choice(dtypes)))]
    if "w" in ins:
        args.append(random_array(rng, broadcastable(rng, shape), str(rng.choice(dtypes))))
    if "s" in ins:
        args.append(random_scalar(rng, False))
    kwargs = {}
    draw = rng.random()
    ndim = len(shape)
    if draw < 0.25:
        pass
    elif draw < 0.7:
        kwargs["axis"] = int(rng.integers(-ndim - 1, ndim + 1))
    elif draw < 0.9:
        axes = rng.permutation(ndim)[: int(rng.integers(0, ndim + 1))]
        kwargs["axis"] = tuple(int(a) - (ndim if rng.random() < 0.3 else 0) for a in axes)
    else:
        kwargs["axis"] = (0, 0) if ndim else 0
    if rng.random() < 0.4:
        kwargs["keepdims"] = bool(rng.random() < 0.5)
    ck, jk = kernels("reduction", index)
    given = None
    if rng.random() < 0.35:
        # An output of the shape the call would allocate (CuPy's), or not.
        want = outcome(lambda: ck(*args, **kwargs))
        want_shape = want[1].shape if want[0] == "ok" else ()
        if rng.random() < 0.15:
            want_shape = random_shape(rng)
        dtype = str(rng.choice(REAL))
        data = small_values(rng, want_shape, dtype)
        given = (cp.asarray(data), cp.asarray(data))
    cupy_out = outcome(lambda: ck(*args, **kwargs, **({"out": given[0]} if given else {})))
    jitk_out = outcome(lambda: jk(*args, **kwargs, **({"out": given[1]} if given else {})))
    if known_difference(ins, args, cupy_out, jitk_out):
        return
    problem = compare(cupy_out, jitk_out, [given[1]] if given else [])
    assert problem is None, describe(REDUCTION[index], args, given, kwargs, problem)


def describe(kernel, args, given, kwargs, problem):
    def one(a):
        if isinstance(a, cp.ndarray):
            return f"array({a.dtype}, {a.shape}, strides={a.strides})"
        return f"{type(a).__name__}({a!r})"

    outs = []
    if given:
        for g in (given if isinstance(given, list) else [given]):
            outs.append(one(g[0]) if g is not None else "None")
    return (f"kernel {kernel[:-1]}; args {[one(a) for a in args]}; outputs {outs}; "
            f"{kwargs}: {problem}")


# A raw kernel reads what a call packs: a scalar of each C type, then an
# int after it (which shows whether the scalar took the parameter's bytes),
# both written out as doubles.
RAW_TYPES = (("signed char", "int8"), ("short", "int16"), ("int", "int32"),
             ("unsigned int", "uint32"), ("long long", "int64"), ("float", "float32"),
             ("double", "float64"), ("bool", "bool"))
RAW_SOURCE = "\n".join(
    f'extern "C" __global__ void take{n}({t} a, int tail, double *out) {{'
    " out[0] = (double)a; out[1] = (double)tail; }"
    for n, (t, _) in enumerate(RAW_TYPES))
_raw = {}


def raw_kernels(index):
    if index not in _raw:
        _raw[index] = (cp.RawModule(code=RAW_SOURCE).get_function(f"take{index}"),
                       jitk.RawModule(code=RAW_SOURCE).get_function(f"take{index}"))
    return _raw[index]


def random_raw_scalar(rng):
    choice = int(rng.integers(0, 5))
    value = int(rng.choice([0, 1, 3, -2, 100, 2**31 + 5, 2**40]))
    if choice == 0:
        return value
    if choice == 1:
        return float(value) + 0.5
    if choice == 2:
        return bool(value % 2)
    dtype = str(rng.choice(REAL))
    with np.errstate(over="ignore"):
        return np.array(value).astype(dtype)[()] if dtype != "bool" else np.bool_(value % 2)


def fits(value, size):
    """Whether an int fits `size` bytes as a signed or an unsigned number."""
    return -(1 << (8 * size - 1)) <= value < (1 << (8 * size))


@seeds
def test_raw_kernel_scalars_agree_with_cupy(seed):
    """Where CuPy hands the kernel what its parameter is (a NumPy scalar of
    that type, a Python int for an integer, a float for a double, a bool for
    a bool), the kernel reads the same under jitk. Where CuPy hands over
    other bytes (8 for a Python int, a double's for a float, one byte for a
    bool, whatever the parameter), jitk narrows an int that fits, makes a
    float a float32 for a 4-byte parameter, and otherwise refuses a scalar
    whose size is not the parameter's: TypeError, or OverflowError for an
    int too wide. A Python number of the other kind than a parameter of the
    same size (an int for a float) is not caught by either: sizes are all
    the driver tells of a kernel's parameters."""
    rng = np.random.default_rng(seed + 43_000)
    index = int(rng.integers(0, len(RAW_TYPES)))
    ctype, dtype = RAW_TYPES[index]
    size = np.dtype(dtype).itemsize
    scalar = random_raw_scalar(rng)
    tail = np.int32(7) if rng.random() < 0.5 else 7
    ck, jk = raw_kernels(index)
    outs = (cp.full(2, np.nan), cp.full(2, np.nan))
    cupy_out = outcome(lambda: ck((1,), (1,), (scalar, tail, outs[0])))
    jitk_out = outcome(lambda: jk((1,), (1,), (scalar, tail, outs[1])))
    what = f"{ctype} a given {type(scalar).__name__}({scalar!r}): CuPy {cupy_out}, jitk {jitk_out}"
    got, want = cp.asnumpy(outs[1]), cp.asnumpy(outs[0])
    integer = dtype != "float32" and dtype != "float64"
    if isinstance(scalar, np.generic):
        have = scalar.dtype.itemsize
        if scalar.dtype.kind in "iu" and have > size:
            # Narrowed as a Python int is.
            scalar = int(scalar)
        elif have != size:
            assert jitk_out[0] == "raised" and type(jitk_out[1]) is TypeError, what
            return
        elif scalar.dtype.kind == np.dtype(dtype).kind or (integer and scalar.dtype.kind in "iub"):
            assert jitk_out[0] == "ok" and np.array_equal(got, want, equal_nan=True), what
            return
        else:  # a float's bits for an integer, or the other way: read as under CuPy
            assert jitk_out[0] == "ok" and got[1] == 7, what
            return
    if type(scalar) is bool:
        if size == 1:
            assert jitk_out[0] == "ok" and np.array_equal(got, want), what
        else:
            assert jitk_out[0] == "raised" and type(jitk_out[1]) is TypeError, what
        return
    if isinstance(scalar, int):
        if not fits(scalar, size):
            assert jitk_out[0] == "raised" and type(jitk_out[1]) is OverflowError, what
        elif not integer:
            assert jitk_out[0] == "ok" and got[1] == 7, what  # the int's bits, as under CuPy
        else:
            assert jitk_out[0] == "ok" and np.array_equal(got, want), what
        return
    # A Python float.
    if dtype == "float64":
        assert jitk_out[0] == "ok" and np.array_equal(got, want), what
    elif dtype == "float32":
        assert jitk_out[0] == "ok" and got[0] == np.float32(scalar) and got[1] == 7, what
    elif size == 8 or size == 4:
        assert jitk_out[0] == "ok" and got[1] == 7, what
    else:
        assert jitk_out[0] == "raised" and type(jitk_out[1]) is TypeError, what


def test_float32_subnormals_flush_to_zero_as_under_cupy():
    """CuPy compiles every kernel with -ftz=true, so float32 subnormals are
    zero in its kernels' arithmetic; jitk's CuPy classes do the same, so
    that results agree bit for bit, and -ftz=false among a kernel's options
    keeps them."""
    x = cp.full(4, 1e-30, dtype=cp.float32)
    y = cp.full(4, 1e-10, dtype=cp.float32)
    assert np.float32(1e-30) * np.float32(1e-10) != 0  # a subnormal without the flush
    mul = ("float32 x, float32 y", "float32 z", "z = x * y", "subnormal_mul")
    for kernel in (cp.ElementwiseKernel(*mul), jitk.ElementwiseKernel(*mul)):
        assert kernel(x, y).get().tolist() == [0.0] * 4, kernel
    # -ftz=false keeps them, although the same source was just compiled
    # with -ftz=true: NVRTC's own cache, whose key leaves -ftz out, is off
    # for jitk's compiles.
    kept = [float(np.float32(1e-30) * np.float32(1e-10))] * 4
    assert jitk.ElementwiseKernel(*mul, options=("-ftz=false",))(x, y).get().tolist() == kept
    dot = ("float32 x, float32 y", "float32 z", "x * y", "a + b", "z = a", "0", "subnormal_dot")
    for kernel in (cp.ReductionKernel(*dot), jitk.ReductionKernel(*dot)):
        assert kernel(x, y).get() == 0, kernel
    code = r"""extern "C" __global__ void mul(const float *x, const float *y, float *z) {
        z[threadIdx.x] = x[threadIdx.x] * y[threadIdx.x]; }"""
    for kernel in (cp.RawKernel(code, "mul"), jitk.RawKernel(code, "mul")):
        z = cp.full(4, np.nan, dtype=cp.float32)
        kernel((1,), (4,), (x, y, z))
        assert z.get().tolist() == [0.0] * 4, kernel
    z = cp.full(4, np.nan, dtype=cp.float32)
    jitk.RawKernel(code, "mul", options=("-ftz=false",))((1,), (4,), (x, y, z))
    assert z.get().tolist() == kept
