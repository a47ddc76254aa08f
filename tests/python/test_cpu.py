"""jitk's Python package on a machine without a GPU (CI's): it imports,
counts no device where there is no driver, parses parameter lists, generates
and compiles kernels for a named architecture, and reports errors with the
types CuPy uses and NVRTC's log pointing at the user's own line.

These tests never need a GPU; they run on the GPU machine too.
"""

import ctypes
import io
import pickle
import re

import pytest

import jitk
from jitk_testutil import LINK_MAIN, STD_HEADERS_SOURCE

ARCH = "sm_90"


def driver_device_count():
    """What the CUDA driver itself says, or 0 without one."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if cuda.cuInit(0) != 0:
        return 0
    n = ctypes.c_int(0)
    return n.value if cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


# ---- the package ---------------------------------------------------------

def test_imports_and_names():
    assert isinstance(jitk.__version__, str) and jitk.__version__
    for name in ("ElementwiseKernel", "ReductionKernel", "RawKernel",
                 "RawModule", "MatmulPlan", "matmul", "CompileError",
                 "JitkError", "cache_stats", "device_count"):
        assert hasattr(jitk, name), name
    assert issubclass(jitk.JitkError, RuntimeError)
    assert issubclass(jitk.CompileError, Exception)


def test_device_count_matches_the_driver():
    # 0 on CI, where there is no driver; the driver's own count elsewhere.
    assert jitk.device_count() == driver_device_count()


def test_cache_stats_is_a_dict_of_counts():
    stats = jitk.cache_stats()
    assert isinstance(stats, dict)
    counts = stats.get("process", stats)
    for key in ("memory_hits", "disk_hits", "misses", "compiles"):
        assert isinstance(counts[key], int) and counts[key] >= 0, key


# ---- parameter lists -----------------------------------------------------

def test_elementwise_attributes():
    k = jitk.ElementwiseKernel("T x, raw T y, float32 a", "T z, U w",
                               "z = x + a; w = 0", "attrs", preamble="// p")
    assert k.name == "attrs"
    assert (k.nin, k.nout, k.nargs) == (3, 2, 5)
    assert k.operation == "z = x + a; w = 0"
    assert k.preamble == "// p"
    assert "raw T y" in str(k.in_params) or "y" in str(k.in_params)


def test_keywords_as_cupy_names_them():
    k = jitk.ElementwiseKernel(in_params="T x", out_params="T y",
                               operation="y = x", name="kw", reduce_dims=False,
                               preamble="", no_return=False,
                               return_tuple=True, loop_prep="",
                               after_loop="", options=("-DX=1",))
    assert k.name == "kw"
    r = jitk.ReductionKernel("T x", "T y", map_expr="x", reduce_expr="a + b",
                             post_map_expr="y = a", identity="0",
                             name="kw_sum", reduce_type=None, reduce_dims=True,
                             preamble="", options=())
    assert (r.name, r.nin, r.nout) == ("kw_sum", 1, 1)


def test_empty_lists_and_operation_are_allowed():
    # CuPy's tests build kernels with no outputs, no inputs, or an empty
    # operation (test_userkernel.py, TestElementwiseKernelSize).
    jitk.ElementwiseKernel("float32 x0", "", "", "no_outputs")
    jitk.ElementwiseKernel("", "float32 y0", "", "no_inputs")


@pytest.mark.parametrize("in_params, out_params, bad", [
    ("T x, T x", "T z", "x"),          # a name twice
    ("T x", "T x", "x"),               # an input and an output of one name
    ("T i", "T z", "i"),               # the index's name
    ("T 1x", "T z", "1x"),             # not an identifier
    ("T x,", "T z", ","),              # an empty entry
    ("T int", "T z", "int"),           # a C++ keyword
    ("raw", "T z", "raw"),             # no type and name
    ("T x y z", "T z", "x y z"),       # too many words
    ("T x", "T _jk_out", "_jk_out"),   # a name jitk keeps for itself
])
def test_bad_parameter_lists_are_value_errors(in_params, out_params, bad):
    with pytest.raises(ValueError) as e:
        jitk.ElementwiseKernel(in_params, out_params, "", "bad_params")
    # The message shows the offending text, whatever else it says.
    assert bad.split()[0].rstrip(",") in str(e.value) or bad in str(e.value)


def test_numpy_type_names_need_no_numpy_and_keep_the_text():
    """CuPy's NumPy type names (f4, int_, ...) are those dtypes even where
    NumPy cannot be imported (a PyTorch-only process), and a list the
    library refuses is quoted as written, spacing and all."""
    import subprocess
    import sys
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import jitk\n"
            "k = jitk.ElementwiseKernel('f4 x, int_  n', 'double y', 'y = x * n', 'no_numpy')\n"
            "print([p[3] for p in k.params])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['float32', 'int64', 'float64']"
    for params, quoted in [("f4 x, unsigned int  y", "unsigned int  y"),
                           ("const float x", "const float x")]:
        with pytest.raises(ValueError) as e:
            jitk.ElementwiseKernel(params, "T z", "", "quoted")
        assert quoted in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["1", "a-b", "", "two words", "k()"])
def test_invalid_kernel_names(name):
    with pytest.raises(ValueError, match="Invalid kernel name"):
        jitk.ElementwiseKernel("T x", "T y", "y = x", name)
    with pytest.raises(ValueError, match="Invalid kernel name"):
        jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", name)


def test_bad_reduction_lists_are_value_errors():
    with pytest.raises(ValueError):
        jitk.ReductionKernel("T x, T x", "T y", "x", "a + b", "y = a", "0")


def test_line_directives_are_refused():
    # jitk numbers the lines of the user's code itself (compile errors cite
    # operation:LINE:COL), so a #line of the user's would lie.
    with pytest.raises(ValueError):
        k = jitk.ElementwiseKernel("T x", "T y", '#line 7 "x.cu"\ny = x', "k")
        k.compile("T=float32", arch=ARCH)


# ---- generating and compiling without a GPU -------------------------------

SAXPY = ("T a, T x, T y", "T z", "z = a * x + y", "saxpy")


@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "uint8",
                                   "uint64", "float16", "bfloat16", "float32",
                                   "float64", "complex64", "complex128",
                                   "float8_e4m3fn", "float8_e5m2"])
def test_elementwise_compile_each_dtype(dtype):
    k = jitk.ElementwiseKernel(*SAXPY)
    src = k.compile(f"T={dtype}", arch=ARCH)
    assert isinstance(src, str)
    assert "z = a * x + y" in src
    assert "saxpy" in src


def test_elementwise_compile_specializations_differ():
    k = jitk.ElementwiseKernel(*SAXPY)
    sources = {
        k.compile("T=float32", arch=ARCH),
        k.compile("T=float64", arch=ARCH),
        k.compile("T=float32", arch=ARCH, ndim=3),
        k.compile("T=float32", arch=ARCH, ndim=2, index_bits=64),
    }
    assert len(sources) == 4


def test_elementwise_compile_raw_and_fixed_types():
    k = jitk.ElementwiseKernel("raw T x, int32 n", "raw T y",
                               "y[i] = x[n - 1 - i]", "reverse")
    assert "y[i] = x[n - 1 - i]" in k.compile("T=float16", arch=ARCH)


def test_elementwise_compile_with_preamble_and_loop_code():
    k = jitk.ElementwiseKernel(
        "T x", "T y", "y = twice(x) + bias", "with_preamble",
        preamble="template <typename U> __device__ U twice(U v) { return v + v; }",
        loop_prep="T bias = 1;", after_loop="(void)bias;")
    src = k.compile("T=float32", arch=ARCH)
    assert "twice" in src and "T bias = 1;" in src


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64",
                                   "complex128"])
def test_reduction_compile(dtype):
    k = jitk.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0",
                             "sum_sq")
    for kept, reduced in ((0, 1), (1, 1), (2, 3)):
        src = k.compile(f"T={dtype}", arch=ARCH, kept_ndim=kept,
                        reduced_ndim=reduced)
        assert "x * x" in src and "a + b" in src


def test_reduction_compile_with_reduce_type_and_no_identity():
    k = jitk.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None,
                             "amax", reduce_type="float32")
    assert "max(a, b)" in k.compile("T=float16", arch=ARCH)


def test_raw_module_compiles_for_an_arch():
    m = jitk.RawModule(code=r'''
        template <typename T>
        __global__ void scale(T *x, T a, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) x[i] *= a;
        }
        extern "C" __global__ void fill(float *x, float v, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) x[i] = v;
        }''', options=("-DUNUSED=1",),
        name_expressions=("scale<float>", "scale<double>"))
    m.compile(arch=ARCH)


def test_raw_module_compile_writes_nvrtc_log():
    # An unused variable makes NVRTC warn; the warning reaches log_stream.
    m = jitk.RawModule(code=r'''
        extern "C" __global__ void k(float *y) { int unused; y[0] = 1; }''')
    log = io.StringIO()
    m.compile(log_stream=log, arch=ARCH)
    assert "warning" in log.getvalue()
    # A stream that cannot be written to is refused before compiling.
    for bad in ("log.txt", 5):
        with pytest.raises(TypeError, match="write method"):
            m.compile(log_stream=bad, arch=ARCH)


# ---- pickling ----------------------------------------------------------------

class MyKernel(jitk.ElementwiseKernel):
    """A subclass, which pickling must keep (module level, so pickle finds it)."""


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_kernels_and_modules_pickle_as_their_arguments(protocol, tmp_path):
    """As CuPy's RawKernel and RawModule: each class pickles as what it was
    made with, and the copy compiles the same source (GPU:
    test_gpu_raw.py runs unpickled kernels in another process)."""
    def again(obj):
        copy = pickle.loads(pickle.dumps(obj, protocol=protocol))
        assert type(copy) is type(obj) and copy is not obj
        return copy

    ew = jitk.ElementwiseKernel("T x, raw T y", "T z", "z = x + y[i] + W", "pick_ew",
                                reduce_dims=False, preamble="#define W 2",
                                no_return=True, return_tuple=True, loop_prep="int unused = 0;",
                                after_loop="(void)unused;", options=("-DQ=1",))
    for k in (ew, MyKernel("T x", "T y", "y = x", "pick_sub")):
        c = again(k)
        for attr in ("in_params", "out_params", "operation", "name", "preamble", "loop_prep",
                     "after_loop", "options", "reduce_dims", "no_return", "return_tuple",
                     "params"):
            assert getattr(c, attr) == getattr(k, attr), attr
        assert c.compile("T=float32", arch=ARCH) == k.compile("T=float32", arch=ARCH)
    for identity, reduce_type in (("0", "float64"), (None, None)):
        red = jitk.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", identity,
                                   "pick_red", reduce_type=reduce_type, reduce_dims=False,
                                   preamble="// p", options=("-DQ=2",))
        c = again(red)
        for attr in ("in_params", "out_params", "map_expr", "reduce_expr", "post_map_expr",
                     "identity", "name", "reduce_type", "preamble", "options", "params"):
            assert getattr(c, attr) == getattr(red, attr), attr
        assert c.compile("T=float32", arch=ARCH) == red.compile("T=float32", arch=ARCH)

    code = 'template <typename T> __global__ void f(T *x) { x[0] = 1; }\n'
    mod = jitk.RawModule(code=code, options=("-DQ=3",), name_expressions=["f<float>"],
                         enable_cooperative_groups=True)
    c = again(mod)
    for attr in ("code", "path", "options", "backend", "name_expressions",
                 "enable_cooperative_groups"):
        assert getattr(c, attr) == getattr(mod, attr), attr
    c.compile(arch=ARCH)
    k = again(mod.get_function("f<float>"))
    assert (k.name, k.code, k.options, k.enable_cooperative_groups) == (
        "f<float>", code, ("-DQ=3",), True)
    raw = jitk.RawKernel('extern "C" __global__ void g(float *x) { x[0] = 2; }', "g",
                         options=("-DQ=4",), backend="nvcc", translate_cucomplex=True)
    k = again(raw)
    assert (k.name, k.code, k.options, k.backend, k.enable_cooperative_groups) == (
        raw.name, raw.code, raw.options, "nvcc", False)
    k.compile(arch=ARCH)
    # A module of a file pickles as its path, read again when it is used.
    path = tmp_path / "m.ptx"
    path.write_text("// not read until the module is used\n")
    c = again(jitk.RawModule(path=str(path)))
    assert (c.path, c.code, c.options, c.backend) == (str(path), None, (), "nvcc")
    # CuPy's names: file_path, on both classes, and a kernel's __name__
    # (GPU: test_gpu_raw.py reads them from kernels of a file).
    assert c.file_path == str(path) and mod.file_path is None
    assert (raw.file_path, raw.__name__) == (None, "g")


# ---- linked programs ---------------------------------------------------------

LINK_HELPER = "__device__ float helper(float x) { return 2.0f * x + 1.0f; }\n"
LINK_HELPER2 = "__device__ float helper2(float x) { return x * x; }\n"


@pytest.mark.parametrize("lto", [None, True, False])
def test_raw_module_links_pieces(lto):
    """RawModule(link=...) links the code with other pieces (the C
    library's jitk_module_link): device functions of one source called from
    a kernel of another, with or without link-time optimization. GPU:
    test_gpu_raw.py runs linked programs, nvcc's pieces among them."""
    m = jitk.RawModule(code=LINK_MAIN, link=[("cuda", LINK_HELPER), ("cuda", LINK_HELPER2.encode())],
                       link_options=["-O3"], lto=lto)
    assert m.link == (("cuda", LINK_HELPER.encode(), None), ("cuda", LINK_HELPER2.encode(), None))
    assert (m.link_options, m.lto) == (("-O3",), lto)
    m.compile(arch=ARCH)
    copy = pickle.loads(pickle.dumps(m))
    assert (copy.link, copy.link_options, copy.lto) == (m.link, m.link_options, lto)
    copy.compile(arch=ARCH)


def test_raw_module_link_errors():
    # A symbol no piece defines: nvJitLink's log, naming it.
    with pytest.raises(jitk.CompileError, match="helper2"):
        jitk.RawModule(code=LINK_MAIN, link=[("cuda", LINK_HELPER)]).compile(arch=ARCH)
    # A piece's own compile error names the piece.
    with pytest.raises(jitk.CompileError, match="piece1"):
        jitk.RawModule(code=LINK_MAIN, link=[("cuda", "__device__ float helper(float x) { oops }")]
                       ).compile(arch=ARCH)
    # Bad pieces are refused where the module is made.
    for bad, error, words in [
            ([("pascal", b"x")], ValueError, "is not one of"),
            ([("cubin", "text")], TypeError, "must be bytes"),
            ([("cuda", None)], TypeError, "a str or bytes"),
            ([("ptx", b"")], ValueError, "empty"),
            ([("cuda", b"a\0b")], ValueError, "NUL"),
            ([("device_runtime", b"x")], ValueError, "takes None"),
            (["helpers.so"], ValueError, "extension"),
            ([5], TypeError, "neither a path nor"),
            ([("cuda", LINK_HELPER, "extra")], TypeError, "neither a path nor"),
            (5, TypeError, "sequence")]:
        with pytest.raises(error, match=words):
            jitk.RawModule(code=LINK_MAIN, link=bad)
    with pytest.raises(ValueError, match="not a module's path"):
        jitk.RawModule(path="m.cubin", link=[("cuda", LINK_HELPER)])
    for kw in (dict(lto=True), dict(link_options=["-O3"]), dict(link=[], link_options=["-O3"])):
        with pytest.raises(ValueError, match="need pieces"):
            jitk.RawModule(code=LINK_MAIN, **kw)
    # The defaults, given explicitly, need no pieces: code that passes its
    # settings through works with nothing to link.
    for kw in (dict(link=(), link_options=(), lto=None), dict(link_options=[], lto=False)):
        jitk.RawModule(code=LINK_MAIN, **kw)
    with pytest.raises(TypeError, match="not a str"):
        jitk.RawModule(code=LINK_MAIN, link=[("cuda", LINK_HELPER)], link_options="-O3")
    # A piece's file is read when the module is built: a missing one fails
    # then, with its path.
    m = jitk.RawModule(code=LINK_MAIN, link=["/no/such/helper.ptx", ("cuda", LINK_HELPER2)])
    assert m.link[0] == ("ptx", None, "/no/such/helper.ptx")
    with pytest.raises(jitk.JitkError, match="/no/such/helper.ptx"):
        m.compile(arch=ARCH)


# ---- compile errors --------------------------------------------------------

def test_compile_error_points_at_the_operation_line():
    k = jitk.ElementwiseKernel("T x", "T y", "y = x;\ny = y + q;", "bad_op")
    with pytest.raises(jitk.CompileError) as e:
        k.compile("T=float32", arch=ARCH)
    log = e.value.log
    assert "operation:2:9" in log, log
    assert "q" in log
    # NVRTC draws a caret under the culprit, on the line after the text.
    lines = log.splitlines()
    i = next(n for n, line in enumerate(lines) if "y = y + q" in line)
    assert lines[i + 1].strip() == "^"
    assert lines[i + 1].index("^") == lines[i].index("q")
    assert "y = y + q" in str(e.value) or "operation:2:9" in str(e.value)
    assert e.value.source and "y = y + q" in e.value.source
    assert isinstance(e.value.options, (tuple, list))


def test_compile_error_in_preamble_and_reduction_sections():
    k = jitk.ElementwiseKernel("T x", "T y", "y = f(x)", "bad_pre",
                               preamble="__device__ float f(float v) {\n"
                                        "  return v +;\n}")
    with pytest.raises(jitk.CompileError) as e:
        k.compile("T=float32", arch=ARCH)
    assert re.search(r"preamble:2:\d+", e.value.log), e.value.log
    r = jitk.ReductionKernel("T x", "T y", "x + nope", "a + b", "y = a", "0",
                             "bad_map")
    with pytest.raises(jitk.CompileError) as e:
        r.compile("T=float32", arch=ARCH)
    assert re.search(r"map_expr:1:\d+", e.value.log), e.value.log


def test_raw_module_compile_error_carries_the_log():
    m = jitk.RawModule(code='extern "C" __global__ void k() {\n'
                            '#error precision not supported\n}')
    with pytest.raises(jitk.CompileError) as e:
        m.compile(arch=ARCH)
    assert "precision not supported" in str(e.value)
    assert "precision not supported" in e.value.log


def test_missing_header_is_a_compile_error():
    m = jitk.RawModule(code="#include <type_traits>\n"
                            '__global__ void k() {}')
    with pytest.raises(jitk.CompileError, match="cannot open source file"):
        m.compile(arch=ARCH)


def test_unknown_name_expression_is_an_error():
    m = jitk.RawModule(code="template <typename T> __global__ void f(T *p) {}",
                       name_expressions=("g<int>",))
    with pytest.raises((jitk.JitkError, jitk.CompileError)):
        m.compile(arch=ARCH)


# ---- other errors ----------------------------------------------------------

def test_raw_module_needs_exactly_one_of_code_and_path():
    with pytest.raises(TypeError):
        jitk.RawModule()
    with pytest.raises(TypeError):
        jitk.RawModule(code="__global__ void k() {}", path="k.cubin")


def test_name_expressions_need_code():
    with pytest.raises(ValueError):
        jitk.RawModule(path="k.cubin", name_expressions=("k<int>",))


def test_unknown_arch_is_refused():
    k = jitk.ElementwiseKernel(*SAXPY)
    with pytest.raises((ValueError, jitk.JitkError)):
        k.compile("T=float32", arch="not_an_arch")


def test_unbound_placeholder_in_compile_types():
    k = jitk.ElementwiseKernel(*SAXPY)
    with pytest.raises((ValueError, TypeError, jitk.JitkError)):
        k.compile("U=float32", arch=ARCH)


@pytest.mark.skipif(jitk.device_count() > 0, reason="a GPU is present")
def test_launch_without_a_gpu_is_a_clear_error():
    class Fake:
        # A device array as far as its interface goes; no GPU holds it.
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4",
                                    "data": (0x10000, False), "version": 3,
                                    "strides": None}

    k = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        k(Fake(), Fake())
    raw = jitk.RawKernel('extern "C" __global__ void k() {}', "k")
    with pytest.raises((RuntimeError, TypeError, ValueError)):
        raw((1,), (1,), ())


# ---- CuPy's conventions for RawModule and RawKernel ------------------------

CUCOMPLEX = r'''
#include <cuComplex.h>
extern "C" __global__ void ops(cuDoubleComplex *a, cuComplex *b, double *m) {
  a[0] = cuCdiv(cuCadd(a[0], a[1]), make_cuDoubleComplex(1.0, -2.0));
  b[0] = cuCadd(b[0], b[1]);  /* cuCadd on single precision, as under CuPy */
  b[1] = cuCdivf(cuConjf(b[0]), make_cuFloatComplex(0.5f, 0.25f));
  m[0] = cuCabs(a[0]) + cuCabsf(b[1]);
}
'''


def test_translate_cucomplex_compiles_cucomplex_code():
    log = io.StringIO()
    jitk.RawModule(code=CUCOMPLEX, translate_cucomplex=True).compile(log, arch=ARCH)
    # Without the translation the single-precision cuCadd does not compile,
    # as with NVIDIA's own header.
    with pytest.raises(jitk.CompileError):
        jitk.RawModule(code=CUCOMPLEX).compile(arch=ARCH)


def test_raw_module_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        jitk.RawModule("__global__ void k() {}")


def test_backend_nvcc_is_taken_but_not_with_name_expressions():
    m = jitk.RawModule(code='extern "C" __global__ void k() {}', backend="nvcc")
    assert m.backend == "nvcc"
    m.compile(arch=ARCH)
    with pytest.raises(ValueError, match="nvrtc"):
        jitk.RawModule(code="template <int N> __global__ void k() {}",
                       backend="nvcc", name_expressions=("k<1>",))
    with pytest.raises(ValueError):
        jitk.RawModule(code='extern "C" __global__ void k() {}', backend="hipcc")


def test_jitify_argument_warns_as_cupy_does():
    src = 'extern "C" __global__ void k() {}'
    with pytest.warns(DeprecationWarning, match="Avoid passing.*jitify=False"):
        jitk.RawKernel(src, "k", jitify=False)
    with pytest.warns(DeprecationWarning, match="Avoid passing.*jitify=False"):
        jitk.RawModule(code=src, jitify=False)
    with pytest.warns(DeprecationWarning, match="jitify=True is deprecated"):
        jitk.RawModule(code=src, jitify=True)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jitk.RawKernel(src, "k")  # not given: no warning


# CuPy's code for Jitify (its test_raw.py): a template kept to integral types
# through <type_traits>.
SHIFT = r'''
#include <type_traits>
template<typename T, typename = typename std::enable_if<std::is_integral<T>::value>::type>
__global__ void shift(T *a, int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] += 100;
}
'''


@pytest.mark.filterwarnings("ignore:jitify=True is deprecated:DeprecationWarning")
def test_jitify_gives_the_standard_headers():
    """What CuPy's Jitify gave code: the C++ standard headers, which NVRTC
    lacks; jitk takes them from libcu++. Without jitify=True they are not
    there, as under CuPy. GPU: test_gpu_raw.py runs such kernels."""
    m = jitk.RawModule(code=SHIFT, jitify=True, name_expressions=("shift<int>",))
    m.compile(arch=ARCH)
    # The same code without jitify=True is another kernel to the cache: it
    # fails, though the one above compiled.
    with pytest.raises(jitk.CompileError, match="cannot open source file"):
        jitk.RawModule(code=SHIFT, name_expressions=("shift<int>",)).compile(arch=ARCH)
    # enable_if leaves no shift<float>.
    with pytest.raises(jitk.CompileError, match="shift"):
        jitk.RawModule(code=SHIFT, jitify=True, name_expressions=("shift<float>",)).compile(arch=ARCH)
    # Every header jitk gives, each used (<cfloat>'s macros checked against
    # numeric_limits), through RawModule and RawKernel.
    jitk.RawModule(code=STD_HEADERS_SOURCE, jitify=True).compile(arch=ARCH)
    k = jitk.RawKernel(STD_HEADERS_SOURCE, "std_headers", jitify=True)
    k.compile(arch=ARCH)
    # As in CuPy: no Jitify for a file, nor for the nvcc backend.
    with pytest.raises(ValueError, match="from a file"):
        jitk.RawModule(path="m.cubin", jitify=True)
    with pytest.raises(ValueError, match="nvrtc"):
        jitk.RawModule(code=SHIFT, backend="nvcc", jitify=True)
    # Pickled, a module or kernel keeps jitify=True, and its copy does not
    # warn again.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(pickle.dumps(m)).compile(arch=ARCH)
        pickle.loads(pickle.dumps(k)).compile(arch=ARCH)


def test_reduce_type_defaults_to_the_first_outputs_type():
    k = jitk.ReductionKernel("T x", "float64 y", "x", "a + b", "y = a", "0", "s")
    assert k.reduce_type == "float64"
    assert "typedef double _type_reduce" in k.compile("T=float32", arch=ARCH)
    k = jitk.ReductionKernel("T x", "U y", "x", "a + b", "y = a", "0", "s2")
    assert k.reduce_type == "U"


def test_cupy_headers_are_found_when_cupy_is_installed():
    pytest.importorskip("cupy")
    m = jitk.RawModule(code="#include <cupy/complex.cuh>\n"
                            "template <typename T> __global__ void sq(T *x) { x[0] *= x[0]; }",
                       name_expressions=("sq<complex<double>>",))
    m.compile(arch=ARCH)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_types_meet_plain_numbers(dtype):
    # `2 * y`, `x > 0` and `y / 3.0f` are ambiguous with CUDA's own half
    # types; jitk's operators compute them in float, as CuPy's float16 does.
    k = jitk.ElementwiseKernel(
        "T x, T y", "T z",
        "z = x + 2 * y; if (z > 0) z = z * 0.5; if (1.5f < x) z = 3 / y; "
        "if (x == 1u || y != 2LL) z = z - 1.0;", "mixed")
    k.compile(f"T={dtype}", arch=ARCH)
