"""RawKernel and RawModule on CuPy arrays and PyTorch tensors: arguments
(arrays as pointers, Python and NumPy scalars of each kind, None), grid and
block forms, shared memory, attributes, name expressions with the spellings
users write, loading a cubin, and NVRTC's log.
"""

import io
import os
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

import jitk
from jitk_testutil import LINK_MAIN, STD_HEADERS_SOURCE, assert_equal, random_seeds

pytestmark = pytest.mark.gpu

SAXPY = r'''
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
'''

TEMPLATES = r'''
template <typename T>
__global__ void scale(T *x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a;
}
__global__ void twice(double *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2;
}
'''


def test_raw_kernel_saxpy(lib):
    n = 1000
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 1.5, dtype=np.float32)
    dx, dy = lib.asarray(x), lib.asarray(y)
    k = jitk.RawKernel(SAXPY, "saxpy")
    # A Python float for `float a` and a Python int for `int n`, as CuPy's
    # own tests pass them.
    k(((n + 127) // 128,), (128,), (2.0, dx, dy, n))
    assert_equal(lib.asnumpy(dy), 2 * x + 1.5)
    # Ints for grid and block, NumPy scalars, a list of arguments.
    k((n + 255) // 256, 256, [np.float32(1.0), dx, dy, np.int32(n)])
    assert_equal(lib.asnumpy(dy), 3 * x + 1.5)


@pytest.mark.parametrize("ctype, value, dtype", [
    ("signed char", -3, np.int8), ("unsigned char", 200, np.uint8),
    ("short", -300, np.int16), ("unsigned short", 60000, np.uint16),
    ("int", -70000, np.int32), ("unsigned int", 4000000000, np.uint32),
    ("long long", -(1 << 40), np.int64), ("unsigned long long", 1 << 63, np.uint64),
    ("float", 0.25, np.float32), ("double", 1e-300, np.float64),
    ("bool", True, np.bool_),
])
def test_numpy_scalars_by_value(lib, ctype, value, dtype):
    src = f'''extern "C" __global__ void put({ctype} v, {ctype} *out) {{
      out[0] = v; }}'''
    k = jitk.RawKernel(src, "put")
    out = lib.asarray(np.zeros(1, dtype=dtype))
    k(1, 1, (dtype(value), out))
    assert_equal(lib.asnumpy(out), np.array([value], dtype=dtype))


def test_python_scalars_follow_cupy(lib):
    # CuPy passes a Python int as int64 (uint64 from 2**63), a float as
    # double, a complex as complex128 and a bool as bool.
    src = r'''
    extern "C" __global__ void take(long long i, unsigned long long u,
                                    double f, double2 c, bool b,
                                    double *out) {
      out[0] = (double)i; out[1] = (double)(u >> 32); out[2] = f;
      out[3] = c.x; out[4] = c.y; out[5] = b ? 1 : 0;
    }'''
    k = jitk.RawKernel(src, "take")
    out = lib.asarray(np.zeros(6))
    k(1, 1, (-5, 1 << 63, 0.5, 1.5 - 2j, True, out))
    assert_equal(lib.asnumpy(out), [-5, 1 << 31, 0.5, 1.5, -2, 1])


def test_none_is_a_null_pointer(lib):
    src = r'''extern "C" __global__ void isnull(const float *p, int *out) {
      out[0] = p == nullptr; }'''
    out = lib.asarray(np.zeros(1, dtype=np.int32))
    jitk.RawKernel(src, "isnull")(1, 1, (None, out))
    assert_equal(lib.asnumpy(out), [1])


def test_grid_block_3d_and_shared_memory(lib):
    src = r'''
    extern "C" __global__ void where(int *out) {
      extern __shared__ int tile[];
      int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
      tile[t] = t;
      __syncthreads();
      int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      int nt = blockDim.x * blockDim.y * blockDim.z;
      out[b * nt + t] = tile[nt - 1 - t] + 1000 * b;
    }'''
    k = jitk.RawKernel(src, "where")
    grid, block = (2, 3, 4), (4, 2, 8)
    nb, nt = 24, 64
    out = lib.asarray(np.full(nb * nt, -1, dtype=np.int32))
    k(grid, block, (out,), shared_mem=nt * 4)
    want = np.array([(nt - 1 - t) + 1000 * b for b in range(nb)
                     for t in range(nt)], dtype=np.int32)
    assert_equal(lib.asnumpy(out), want)


def test_attributes_and_dynamic_shared_memory(lib):
    # A source of this library's own: kernels of one source share one
    # loaded module, and so the carveout set below.
    k = jitk.RawKernel(f"// {lib.name}\n" + SAXPY, "saxpy")
    attrs = k.attributes
    for key in ("max_threads_per_block", "shared_size_bytes",
                "const_size_bytes", "local_size_bytes", "num_regs",
                "ptx_version", "binary_version", "cache_mode_ca",
                "max_dynamic_shared_size_bytes",
                "preferred_shared_memory_carveout"):
        assert key in attrs, key
        assert getattr(k, key) == attrs[key], key
    assert k.num_regs > 0
    assert k.max_threads_per_block > 0
    assert k.shared_size_bytes == 0
    # jitk reads the cache preference and carveout from the driver (CuPy
    # reports the same two): the carveout is -1 until set.
    assert k.cache_mode_ca in (0, 1)
    assert k.preferred_shared_memory_carveout == -1
    k.preferred_shared_memory_carveout = 50
    assert k.preferred_shared_memory_carveout == 50
    with pytest.raises(ValueError):
        k.preferred_shared_memory_carveout = 101
    # The source names the library: kernels of one source share one loaded
    # module (in jitk as in CuPy), so the other library's run would already
    # have raised this kernel's limit.
    big = jitk.RawKernel(f"// {lib.name}\n" + r'''extern "C" __global__ void big(float *y) {
        extern __shared__ float s[]; s[threadIdx.x] = 1; __syncthreads();
        y[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x]; }''', "big")
    out = lib.asarray(np.zeros(32, dtype=np.float32))
    # Past the default 48 KiB with no opt-in: jitk raises the kernel's
    # limit itself (CuPy would fail with CUDA_ERROR_INVALID_VALUE), and
    # the attribute shows the new limit.
    big(1, 32, (out,), shared_mem=100 * 1024)
    assert_equal(lib.asnumpy(out), np.ones(32, dtype=np.float32))
    assert big.max_dynamic_shared_size_bytes >= 100 * 1024
    big.max_dynamic_shared_size_bytes = 120 * 1024
    assert big.max_dynamic_shared_size_bytes == 120 * 1024
    out = lib.asarray(np.zeros(32, dtype=np.float32))
    big(1, 32, (out,), shared_mem=120 * 1024)
    assert_equal(lib.asnumpy(out), np.ones(32, dtype=np.float32))
    # More than a block can have on the device is still refused.
    with pytest.raises((ValueError, jitk.JitkError)):
        big(1, 32, (out,), shared_mem=1024 * 1024)


def test_module_name_expressions(lib):
    m = jitk.RawModule(code=TEMPLATES, options=("-std=c++17",),
                       name_expressions=("scale<float>", "scale<double>",
                                         "scale<int>", "twice"))
    for expr, dtype, a in (("scale<float>", np.float32, np.float32(0.5)),
                           ("scale<double>", np.float64, np.float64(3)),
                           ("scale<int>", np.int32, np.int32(-2))):
        x = np.arange(50).astype(dtype)
        dx = lib.asarray(x)
        m.get_function(expr)(1, 64, (dx, a, 50))
        assert_equal(lib.asnumpy(dx), x * a)
    x = np.arange(10, dtype=np.float64)
    dx = lib.asarray(x)
    m.get_function("twice")(1, 32, (dx, 10))
    assert_equal(lib.asnumpy(dx), 2 * x)
    with pytest.raises(jitk.JitkError):
        m.get_function("scale<char>")


SPELLINGS = r'''
namespace mylib { enum class Tag { A, B }; }
template <typename Tv, typename Tp> __global__ void multi_param(int *o) { o[0] = sizeof(Tv) + 10 * sizeof(Tp); }
template <typename T> __global__ void ptr_param(T *p) { }
template <typename T, int N> __global__ void non_type_param(int *o) { o[0] = N; }
template <mylib::Tag t> __global__ void enum_param(int *o) { o[0] = (int)t; }
'''


@pytest.mark.parametrize("expr", [
    "multi_param<float, double>", "multi_param<float,double>",
    "ptr_param<float *>", "ptr_param<float*>",
    "non_type_param<float, (int)3>", "non_type_param<float, 3>",
    "ptr_param<unsigned long>", "ptr_param<size_t>",
    "enum_param<(mylib::Tag)1>", "enum_param<mylib::Tag::B>",
])
def test_name_expression_spellings_and_the_cache(lib, expr):
    # The spellings of CuPy's TestRawNameExpressionCache: each works, and a
    # second module of the same source and expression is served by jitk's
    # cache instead of NVRTC.
    def compiles():
        s = jitk.cache_stats()
        return s.get("process", s)["compiles"]

    out = lib.asarray(np.full(1, -1, dtype=np.int32))
    m = jitk.RawModule(code=SPELLINGS, name_expressions=[expr],
                       options=("-std=c++17",))
    f = m.get_function(expr)
    if not expr.startswith("ptr_param"):
        f(1, 1, (out,))
        want = {"multi": 84, "non_t": 3, "enum_": 1}[expr[:5]]
        assert_equal(lib.asnumpy(out), [want])
    before = compiles()
    again = jitk.RawModule(code=SPELLINGS, name_expressions=[expr],
                           options=("-std=c++17",))
    again.get_function(expr)
    assert compiles() == before


def test_compile_log_also_from_the_cache(lib):
    src = r'''extern "C" __global__ void warn(float *y) {
      int j;  // unused: NVRTC warns
      y[0] = 1; }'''
    for _ in range(2):  # the second time the kernel comes from the cache
        log = io.StringIO()
        k = jitk.RawKernel(src, "warn")
        k.compile(log_stream=log)
        assert "warning" in log.getvalue()
        log = io.StringIO()
        jitk.RawModule(code=src).compile(log_stream=log)
        assert "warning" in log.getvalue()


def test_compile_error_at_first_use(lib):
    k = jitk.RawKernel('extern "C" __global__ void k(float *y) { y[0] = q; }',
                       "k")
    out = lib.asarray(np.zeros(1, dtype=np.float32))
    with pytest.raises(jitk.CompileError) as e:
        k(1, 1, (out,))
    assert "q" in e.value.log


def test_unknown_kernel_name(lib):
    m = jitk.RawModule(code=SAXPY)
    with pytest.raises(jitk.JitkError):
        m.get_function("no_such_kernel")


@pytest.mark.device_only("cubins and PTX built by nvcc")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_load_cubin_and_ptx(lib, tmp_path):
    src = tmp_path / "div.cu"
    src.write_text(SAXPY)
    for kind in ("cubin", "ptx"):
        path = tmp_path / f"div.{kind}"
        flag = "-cubin" if kind == "cubin" else "-ptx"
        subprocess.run(["nvcc", "-arch=native", flag, str(src), "-o",
                        str(path)], check=True)
        m = jitk.RawModule(path=str(path))
        x = np.arange(100, dtype=np.float32)
        dy = lib.asarray(np.ones(100, dtype=np.float32))
        k = m.get_function("saxpy")
        k(1, 128, (2.0, lib.asarray(x), dy, 100))
        assert_equal(lib.asnumpy(dy), 2 * x + 1)
        # CuPy's names for where a module and its kernels came from.
        assert (m.file_path, k.file_path, k.__name__) == (str(path), str(path), "saxpy")


def test_missing_file(lib):
    with pytest.raises((jitk.JitkError, OSError)):
        m = jitk.RawModule(path=os.path.expanduser("~/no_such_file.cubin"))
        m.get_function("k")


# ---- CuPy's conventions: integers, globals, pointers, cuComplex ------------

def test_python_int_narrows_to_an_int_parameter_only_when_it_fits(lib):
    src = r'''extern "C" __global__ void put(int v, unsigned short w, int *out) {
      out[0] = v; out[1] = w; }'''
    k = jitk.RawKernel(src, "put")
    out = lib.asarray(np.zeros(2, dtype=np.int32))
    k(1, 1, (-123456, 65535, out))
    assert_equal(lib.asnumpy(out), [-123456, 65535])
    k(1, 1, (np.int64(7), np.uint64(9), out))
    assert_equal(lib.asnumpy(out), [7, 9])
    # -1 fits 16 bits as a signed number: its bits reach the unsigned
    # short as 65535, as in C.
    k(1, 1, (5, -1, out))
    assert_equal(lib.asnumpy(out), [5, 65535])
    # What does not fit is refused, and nothing runs.
    with pytest.raises(OverflowError):
        k(1, 1, (1 << 40, 1, out))
    with pytest.raises(OverflowError):
        k(1, 1, (1, 70000, out))
    assert_equal(lib.asnumpy(out), [5, 65535])


def test_floats_for_a_float_parameter(lib):
    # A Python float for a 4-byte parameter is a float32 (CuPy would pass
    # 8 bytes of double and the kernel would read half of them); a NumPy
    # float64 is typed, and its size is refused.
    k = jitk.RawKernel(r'''extern "C" __global__ void f(float a, float *y) { y[0] = a; }''', "f")
    out = lib.asarray(np.zeros(1, dtype=np.float32))
    k(1, 1, (1.5, out))
    assert_equal(lib.asnumpy(out), [1.5])
    with pytest.raises(TypeError):
        k(1, 1, (np.float64(2.5), out))
    k(1, 1, (np.float32(3.5), out))
    assert_equal(lib.asnumpy(out), [3.5])


# Scalar parameter types and the NumPy type of their values.
SCALARS = (("signed char", np.int8), ("unsigned char", np.uint8), ("short", np.int16),
           ("unsigned short", np.uint16), ("int", np.int32), ("unsigned int", np.uint32),
           ("long long", np.int64), ("unsigned long long", np.uint64), ("float", np.float32),
           ("double", np.float64), ("bool", np.bool_), ("float2", np.complex64),
           ("double2", np.complex128))


def random_scalar(rng, dtype):
    """A random value of `dtype`, sometimes as the Python object a user
    would pass for it (an int, a float or a complex that the parameter's
    type holds exactly), and the bytes the kernel must receive."""
    kind = np.dtype(dtype).kind
    if kind in "iu":
        info = np.iinfo(dtype)
        v = dtype(rng.integers(info.min, info.max, endpoint=True, dtype=dtype))
    elif kind == "b":
        v = dtype(rng.random() < 0.5)
    elif kind == "f":
        v = dtype(rng.standard_normal() * 10.0 ** int(rng.integers(-5, 6)))
    else:
        v = dtype(complex(rng.standard_normal(), rng.standard_normal()))
    want = np.array(v, dtype).tobytes()
    if rng.random() < 0.5 and dtype not in (np.float32, np.complex64):
        # A float parameter takes a Python float as float32 (see above);
        # float2 takes no Python complex (CuPy passes those as complex128).
        v = {"i": int, "u": int, "b": bool, "f": float, "c": complex}[kind](v)
    elif rng.random() < 0.5 and dtype is np.float32:
        v = float(v)  # exact in float32: it came from one
    return v, want


@random_seeds
def test_random_signatures(lib, seed):
    # One to eight scalars of mixed sizes and alignments, with arrays
    # among them: the kernel copies each scalar's bytes to the output and
    # writes a mark through each array, so a parameter read at the wrong
    # offset or with the wrong size shows as wrong bytes.
    rng = np.random.default_rng(3000 + seed)
    scalars = [SCALARS[int(i)] for i in rng.integers(0, len(SCALARS), int(rng.integers(1, 9)))]
    params, body, args, want = [], [], [], []
    for j, (ctype, dtype) in enumerate(scalars):
        v, b = random_scalar(rng, dtype)
        params.append(f"{ctype} a{j}")
        body.append(f"put(out + {2 * j}, &a{j}, sizeof a{j});")
        args.append(v)
        want.append(b + bytes(16 - len(b)))
    marks = []
    for j in range(int(rng.integers(0, 3))):
        at = int(rng.integers(0, len(params) + 1))
        params.insert(at, f"int *m{j}")
        body.append(f"m{j}[0] = {1000 + j};")
        marks.append(lib.asarray(np.full(1, -1, dtype=np.int32)))
        args.insert(at, marks[-1])
    at = int(rng.integers(0, len(params) + 1))
    params.insert(at, "unsigned long long *out")
    out = lib.asarray(np.full(2 * len(scalars), 0xA5A5A5A5A5A5A5A5, dtype=np.uint64))
    args.insert(at, out)
    src = (
        "__device__ void put(unsigned long long *o, const void *v, unsigned int n) {\n"
        "  unsigned char b[16] = {0};\n"
        "  for (unsigned int i = 0; i < n; i++) b[i] = ((const unsigned char *)v)[i];\n"
        "  for (int w = 0; w < 2; w++) {\n"
        "    unsigned long long x = 0;\n"
        "    for (int i = 7; i >= 0; i--) x = x << 8 | b[8 * w + i];\n"
        "    o[w] = x;\n"
        "  }\n"
        "}\n"
        f'extern "C" __global__ void sig({", ".join(params)}) {{\n  '
        + "\n  ".join(body) + "\n}\n")
    jitk.RawKernel(src, "sig")(1, 1, tuple(args))
    got = lib.asnumpy(out).astype("<u8").tobytes()
    for j, (ctype, _) in enumerate(scalars):
        assert got[16 * j:16 * j + 16] == want[j], f"parameter {j} ({ctype}) of {src}"
    for j, m in enumerate(marks):
        assert_equal(lib.asnumpy(m), [1000 + j])


@pytest.mark.device_only("CuPy's own arrays and kernels")
def test_get_global_constant_memory_with_cupy():
    cupy = pytest.importorskip("cupy")
    mod = jitk.RawModule(code=r'''
    extern "C" {
    __constant__ float table[100];
    __global__ void times_table(float *x, int n) {
      int i = threadIdx.x + blockIdx.x * blockDim.x;
      if (i < n) x[i] *= table[i];
    }
    }''')
    ptr = mod.get_global("table")
    assert isinstance(ptr, cupy.cuda.MemoryPointer)
    const = cupy.ndarray((100,), cupy.float32, ptr)
    data = cupy.arange(100, dtype=cupy.float32)
    const[...] = data
    x = cupy.full(100, 2, dtype=cupy.float32)
    mod.get_function("times_table")(1, 100, (x, 100))
    assert_equal(x.get(), 2 * data.get())
    with pytest.raises(jitk.JitkError, match="named symbol not found"):
        mod.get_global("no_such_table")


@pytest.mark.device_only("CuPy's own arrays and kernels")
def test_memory_pointer_argument_with_cupy():
    cupy = pytest.importorskip("cupy")
    mem = cupy.cuda.alloc(16 * 8)
    a = cupy.ndarray((16,), cupy.float64, memptr=mem)
    a[...] = 1
    jitk.RawKernel(r'''extern "C" __global__ void f(double *p, int n) {
        int i = threadIdx.x; if (i < n) p[i] = 3 * p[i] - 8; }''', "f")(1, 16, (mem, 16))
    assert_equal(a.get(), np.full(16, -5.0))


@pytest.mark.device_only("CuPy's own arrays and kernels")
def test_translate_cucomplex_matches_cupy_bit_for_bit():
    cupy = pytest.importorskip("cupy")
    src = r'''
    #include <cuComplex.h>
    extern "C" __global__ void ops(const cuDoubleComplex *a, const cuDoubleComplex *b,
                                   cuDoubleComplex *q, double *m, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) { q[i] = cuCdiv(a[i], b[i]); m[i] = cuCabs(a[i]); }
    }
    extern "C" __global__ void opsf(const cuComplex *a, const cuComplex *b,
                                    cuComplex *q, float *m, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) { q[i] = cuCdivf(a[i], b[i]); m[i] = cuCabsf(cuCadd(a[i], b[i])); }
    }'''
    mod = jitk.RawModule(code=src, translate_cucomplex=True)
    n = 4096
    rng = np.random.default_rng(3)
    for dtype, real, name in ((np.complex128, np.float64, "ops"), (np.complex64, np.float32, "opsf")):
        a = cupy.asarray((rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype))
        b = cupy.asarray((rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype))
        q = cupy.full(n, np.nan, dtype=dtype)
        m = cupy.full(n, np.nan, dtype=real)
        mod.get_function(name)((n + 255) // 256, 256, (a, b, q, m, n))
        assert bool((q == a / b).all()), name
        want = cupy.abs(a) if name == "ops" else cupy.abs(a + b)
        assert bool((m == want).all()), name


@pytest.mark.device_only("CuPy's own arrays and kernels")
def test_cupy_headers_in_raw_code_with_cupy():
    cupy = pytest.importorskip("cupy")
    mod = jitk.RawModule(code=r'''
    #include <cupy/complex.cuh>
    template <typename T> __global__ void sq(T *x, int n) {
      int i = threadIdx.x; if (i < n) x[i] *= x[i]; }''',
        name_expressions=["sq<complex<double>>"])
    x = cupy.asarray(np.array([1 + 2j, -3j, 0.5], dtype=np.complex128))
    mod.get_function("sq<complex<double>>")(1, 32, (x, 3))
    assert_equal(x.get(), np.array([1 + 2j, -3j, 0.5]) ** 2)


DEVICE_LAUNCH = r'''
extern "C" __global__ void child(float *x, int start) { x[start + threadIdx.x] = 1.0f; }
extern "C" __global__ void parent(float *x, int n, int chunk) {
  int start = threadIdx.x * chunk;
  if (start < n) child<<<1, chunk>>>(x, start);
}
'''


@pytest.mark.device_only("launches from the device")
def test_dynamic_parallelism_with_dc(lib):
    # -dc: relocatable code, linked with the device runtime by jitk.
    k = jitk.RawKernel(DEVICE_LAUNCH, "parent", options=("-dc",))
    x = lib.asarray(np.zeros(169, dtype=np.float32))
    k(1, 13, (x, 169, 13))
    assert_equal(lib.asnumpy(x), np.ones(169, dtype=np.float32))
    # Without it NVRTC refuses the device-side launch, at the first call.
    with pytest.raises(jitk.CompileError):
        jitk.RawKernel(DEVICE_LAUNCH, "parent")(1, 13, (x, 169, 13))


GRID_SYNC = r'''
#include <cooperative_groups.h>
extern "C" __global__ void two_phase(const float *x, float *y, float *z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2 * x[i];
  cooperative_groups::this_grid().sync();
  // Every y is written before any is read, across blocks.
  if (i < n) z[i] = y[n - 1 - i];
}
'''


@pytest.mark.device_only("grid-wide synchronization")
@pytest.mark.parametrize("where", ["module", "call"])
def test_cooperative_launch_and_grid_sync(lib, where):
    n = 64 * 256
    x = np.arange(n, dtype=np.float32)
    dx = lib.asarray(x)
    dy = lib.asarray(np.zeros(n, dtype=np.float32))
    dz = lib.asarray(np.full(n, np.nan, dtype=np.float32))
    if where == "module":
        k = jitk.RawKernel(GRID_SYNC, "two_phase", enable_cooperative_groups=True)
        k(64, 256, (dx, dy, dz, n))
    else:
        k = jitk.RawKernel(GRID_SYNC, "two_phase")
        k(64, 256, (dx, dy, dz, n), enable_cooperative_groups=True)
    assert_equal(lib.asnumpy(dz), 2 * x[::-1])
    # A grid larger than the GPU holds at once cannot be cooperative.
    with pytest.raises((ValueError, jitk.JitkError)):
        k(1 << 20, 256, (dx, dy, dz, n), enable_cooperative_groups=True)


UNPICKLE = r'''
import pickle, sys
import numpy as np
import jitk
if sys.argv[2] == "cupy":
    import cupy
    dev, host = cupy.asarray, cupy.asnumpy
else:
    import torch
    dev, host = (lambda a: torch.from_numpy(a).cuda()), (lambda t: t.cpu().numpy())
with open(sys.argv[1], "rb") as f:
    k = pickle.load(f)
x, y = np.arange(1000, dtype=np.float32), np.full(1000, 3, np.float32)
assert (host(k["ew"](dev(x), dev(y))) == x * 3 + 1).all()
assert float(host(k["red"](dev(x)))) == x.sum()
dy = dev(y.copy())
k["raw"]((8,), (128,), (np.float32(2), dev(x), dy, np.int32(1000)))
assert (host(dy) == 2 * x + 3).all()
dx = dev(x.copy())
k["mod"]((8,), (128,), (dx, np.float32(0.5), np.int32(1000)))
assert (host(dx) == x * 0.5).all()
print("unpickled and ran")
'''


@pytest.mark.device_only("the unpickling process runs its kernels on a GPU")
def test_pickled_kernels_run_in_another_process(lib, tmp_path):
    """Kernels pickle as what they were made with, as CuPy's RawKernel and
    RawModule do, and another process that unpickles them compiles (or
    finds in the cache) and runs them: one of each kind, the elementwise
    kernel used before it was pickled, the others not."""
    kernels = {
        "ew": jitk.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "pickled_ew"),
        "red": jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "pickled_red"),
        "raw": jitk.RawKernel(SAXPY, "saxpy"),
        "mod": jitk.RawModule(code=TEMPLATES,
                              name_expressions=["scale<float>"]).get_function("scale<float>"),
    }
    x = lib.asarray(np.ones(4, np.float32))
    assert_equal(lib.asnumpy(kernels["ew"](x, x)), np.full(4, 2, np.float32))
    path = tmp_path / "kernels.pkl"
    with open(path, "wb") as f:
        pickle.dump(kernels, f)
    r = subprocess.run([sys.executable, "-c", UNPICKLE, str(path), lib.name],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "unpickled and ran" in r.stdout, r.stdout + r.stderr


CLUSTERS = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Each block writes its rank in its cluster to shared memory, then reads
// the next block's through distributed shared memory.
extern "C" __global__ void cluster_ring(int *out) {
  __shared__ int rank;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) rank = (int)cluster.block_rank();
  cluster.sync();
  int next = (int)((cluster.block_rank() + 1) % cluster.num_blocks());
  int *theirs = cluster.map_shared_rank(&rank, next);
  if (threadIdx.x == 0) {
    out[2 * blockIdx.x] = (int)cluster.num_blocks();
    out[2 * blockIdx.x + 1] = *theirs;
  }
  cluster.sync();  // no block leaves while another reads its shared memory
}

// A long first kernel, and a second launched as its programmatic
// dependent, which must wait for the first's writes before it reads them.
extern "C" __global__ void slow_fill(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = 0;
    for (int k = 0; k < 2000; k++) v = v * 0.5f + 1.0f;
    x[i] = v + i;
  }
}
extern "C" __global__ void add_after(const float *x, float *y, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");  // cudaGridDependencySynchronize()
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
'''


@pytest.mark.device_only("thread-block clusters and programmatic dependent launch")
def test_cluster_and_programmatic_launches(lib):
    """RawKernel's keyword-only cluster= and programmatic_dependent_launch=,
    cuda.core's launch options: blocks of a cluster read each other's
    shared memory, and a dependent kernel waits for the one before it."""
    m = jitk.RawModule(code=CLUSTERS)
    ring = m.get_function("cluster_ring")
    for cluster, grid in ((4, (8,)), ((2, 1, 1), (6,)), (None, (3,))):
        out = lib.asarray(np.full(2 * grid[0], -1, np.int32))
        ring(grid, (32,), (out,), cluster=cluster)
        size = 1 if cluster is None else cluster if isinstance(cluster, int) else cluster[0]
        got = lib.asnumpy(out).reshape(-1, 2)
        want = [(size, (b % size + 1) % size) for b in range(grid[0])]
        assert got.tolist() == [list(w) for w in want], (cluster, got.tolist())
    with pytest.raises(jitk.JitkError, match="not a whole number of clusters"):
        ring((6,), (32,), (out,), cluster=4)
    n = 1 << 20
    x = lib.asarray(np.zeros(n, np.float32))
    y = lib.asarray(np.full(n, np.nan, np.float32))
    m.get_function("slow_fill")(((n + 255) // 256,), (256,), (x, np.int32(n)))
    m.get_function("add_after")(((n + 255) // 256,), (256,), (x, y, np.int32(n)),
                                programmatic_dependent_launch=True)
    first = np.float32(0)
    for _ in range(2000):
        first = first * np.float32(0.5) + np.float32(1)
    assert_equal(lib.asnumpy(y), (first + np.arange(n, dtype=np.float32)) + np.float32(1))




@pytest.mark.device_only("pieces built by nvcc")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
@pytest.mark.parametrize("how", ["ptx file", "ptx bytes", "object", "ltoir"])
def test_linked_programs_run(lib, tmp_path, how):
    """RawModule(link=...): the kernel calls a device function of a CUDA
    source piece and one of a piece nvcc built (relocatable PTX, from a file
    or as bytes; an object of -dc; LTO-IR of -dlto), and computes
    (2x + 1)^2."""
    src = tmp_path / "helper2.cu"
    src.write_text("__device__ float helper2(float x) { return x * x; }\n")
    flags, out = {"ptx file": (["-rdc=true", "-ptx"], "helper2.ptx"),
                  "ptx bytes": (["-rdc=true", "-ptx"], "helper2.ptx"),
                  "object": (["-dc"], "helper2.o"),
                  "ltoir": (["-dc", "-dlto"], "helper2.o")}[how]
    subprocess.run(["nvcc", "-arch=native", *flags, str(src), "-o", str(tmp_path / out)],
                   check=True)
    piece = (("ptx", (tmp_path / out).read_bytes()) if how == "ptx bytes"
             else tmp_path / out)  # an os.PathLike: its extension names its kind
    m = jitk.RawModule(code=LINK_MAIN, link=[
        ("cuda", "__device__ float helper(float x) { return 2.0f * x + 1.0f; }\n"), piece])
    x = np.arange(-500, 500, dtype=np.float32)
    dx = lib.asarray(x)
    m.get_function("use")((8,), (128,), (dx, np.int32(x.size)))
    assert_equal(lib.asnumpy(dx), (2 * x + 1) * (2 * x + 1))


@pytest.mark.device_only("the emulator compiles kernels with the host's C++ library")
@pytest.mark.filterwarnings("ignore:jitify=True is deprecated:DeprecationWarning")
def test_jitify_standard_headers_run(lib):
    """jitify=True gives the code the C++ standard headers (libcu++'s, in
    namespace std), as CuPy's Jitify did: CuPy's own Jitify kernel, a
    template kept to integral types by std::enable_if, and a kernel using
    every header jitk gives, each result checked."""
    m = jitk.RawModule(code=r'''
        #include <type_traits>
        template<typename T, typename = typename std::enable_if<std::is_integral<T>::value>::type>
        __global__ void shift(T *a, int n) {
          unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) a[i] += 100;
        }''', jitify=True, name_expressions=("shift<int>",))
    a = np.arange(256, dtype=np.int32)
    da = lib.asarray(a)
    m.get_function("shift<int>")((1,), (256,), (da, np.int32(a.size)))
    assert_equal(lib.asnumpy(da), a + 100)
    k = jitk.RawKernel(STD_HEADERS_SOURCE, "std_headers", jitify=True)
    y = lib.asarray(np.array([16.0], dtype=np.float32))
    k((1,), (1,), (y, lib.asarray(np.array([3, 5, 7], dtype=np.int32))))
    assert_equal(lib.asnumpy(y), np.array([45.0], dtype=np.float32))
