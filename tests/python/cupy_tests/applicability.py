"""Which of CuPy's tests in this folder apply to jitk, and why not when not.

One entry per test function, with how many pytest items it makes and the
verdict for them. A test applies when it builds one of the classes that
conftest.py replaces (ElementwiseKernel, ReductionKernel, RawKernel,
RawModule) and checks what that class does. It does not apply when it only
exercises CuPy's own routines (its ufuncs, copies and internal reduction
functions), CuPy's own kernel cache or compiler helpers, Jitify, or HIP. Tests that apply but cannot run on a machine with one GPU, or that skip
themselves on the toolkit at hand, keep a verdict that says so, so that a
skip is never mistaken for a pass.

The runner labels every result with `classify`, and `--doc` renders the
table of docs/CONFORMANCE.md from ENTRIES, so the two never disagree.
"""

import re
from typing import NamedTuple

YES = "yes"
TWO_GPUS = "yes, needs two GPUs"
SELF_SKIP = "yes, skips itself here"
NO = "no"


class Variant(NamedTuple):
    """Items of an entry whose parameter id matches `pattern` (re.search)."""
    pattern: str
    count: int
    verdict: str
    reason: str


class Entry(NamedTuple):
    file: str
    cls: str  # the class as written; parameterized copies add a suffix
    func: str
    count: int  # pytest items in all
    verdict: str  # for the items no variant matches
    reason: str
    variants: tuple = ()


# TestRaw is parametrized over seven compilers and caches. Jitify (a
# header-rewriting preprocessor that CuPy bundles and has deprecated) is not
# in jitk, which compiles with NVRTC alone; but with jitify=True jitk gives
# the code the C++ standard headers, as Jitify did, so the three variants
# that turn it on test that path and apply as the others do, except where a
# test expects Jitify's own JitifyException. The in-memory and re-compile
# variants change only CuPy's own cache, so under jitk they run the same code
# again, from jitk's cache. The NVCC variant asks for nvcc; jitk compiles the
# same source with NVRTC, so it applies.
_JITIFY = r"(?<!no-)jitify\)"
_RAW = "test_raw.py"
_HIP = "HIP only (CuPy skips it on CUDA)"


def _raw(func, reason, *variants, verdict=YES, jitify=None):
    """A TestRaw entry; its Jitify variants take `jitify` (verdict, reason),
    by default the entry's own verdict, said of jitify=True."""
    verdict_j, reason_j = jitify or (
        verdict, reason if verdict != YES else "With jitify=True (jitk's standard headers "
        "given): the same.")
    return Entry(_RAW, "TestRaw", func, 7, verdict, reason,
                 tuple(variants) + (Variant(_JITIFY, 3, verdict_j, reason_j),))


ENTRIES = (
    # ---- test_elementwise.py -------------------------------------------
    Entry("test_elementwise.py", "TestElementwise", "test_copy", 1, NO,
          "CuPy's own `_core.elementwise_copy`; no user kernel is built."),
    Entry("test_elementwise.py", "TestElementwise",
          "test_copy_multigpu_nopeer", 1, NO,
          "CuPy's own `_core.elementwise_copy` between two devices."),
    Entry("test_elementwise.py", "TestElementwise",
          "test_copy_multigpu_peer", 1, NO,
          "CuPy's own `_core.elementwise_copy` between two devices."),
    Entry("test_elementwise.py", "TestElementwise",
          "test_copy_zero_sized_array1", 1, NO, "`cupy.copy`, CuPy's own."),
    Entry("test_elementwise.py", "TestElementwise",
          "test_copy_zero_sized_array2", 1, NO, "`cupy.copy`, CuPy's own."),
    Entry("test_elementwise.py", "TestElementwise", "test_copy_orders", 1,
          NO, "`cupy.copy` and its strides, CuPy's own."),
    Entry("test_elementwise.py", "TestElementwiseInvalidShape",
          "test_invalid_shape", 1, YES,
          "An output of shape (4,) for a (3, 4) input: ValueError matching "
          "'Out shape is mismatched'."),
    Entry("test_elementwise.py", "TestElementwiseInvalidArgument",
          "test_invalid_kernel_name", 1, YES,
          "name='1' (with empty out_params and operation): ValueError "
          "matching 'Invalid kernel name' from the constructor."),
) + tuple(
    Entry("test_elementwise.py", "TestElementwiseType",
          f"test_large_int_{side}_{n}", 1, NO,
          "CuPy's `+` on an array and a large scalar (its ufunc and NEP 50 "
          "typing); no user kernel.")
    for side in ("upper", "lower") for n in (1, 2, 3, 4)
) + (
    # ---- test_userkernel.py --------------------------------------------
    Entry("test_userkernel.py", "TestUserkernel", "test_manual_indexing", 1,
          YES, "`z = x + y` against all-raw `z[i] = x[i] + y[i]` with size=n "
          "(the raw output allocated with shape (n,))."),
    Entry("test_userkernel.py", "TestUserkernel", "test_python_scalar", 1,
          YES, "Python int, float and bool scalars for `T y`, T bound by an "
          "int64, float64 or bool array."),
    Entry("test_userkernel.py", "TestUserkernel", "test_numpy_scalar", 1,
          YES, "A NumPy scalar of each of 16 dtypes (int64 and longlong both) "
          "for `T y`."),
    Entry("test_userkernel.py", "TestUserkernel", "test_cached_code", 1, YES,
          "`_cached_codes` has one entry per distinct dtype signature: 0, "
          "then 1 after two float32 calls, then 2 after a float64 call."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_all_raws", 1, YES,
          "All-raw inputs need size= (ValueError matching '^Loop size is "
          "undecided\\.' without it)."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_all_nonraws", 1, YES,
          "size= with non-raw arrays: ValueError matching "
          "\"^Specified 'size' can\"."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_some_nonraws", 1, YES,
          "size= with any non-raw array, input or output: the same error."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_scalars_and_nonraws", 1, YES,
          "A scalar for a non-raw input does not make size= legal."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_scalars_and_raws_and_nonraws", 1, YES,
          "Scalars, raw and non-raw arrays with size=: refused."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_scalars_and_raws", 1, YES,
          "Scalars and raw arrays only: size= required and used."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_size_determined_by_output", 1, YES,
          "A given non-raw output decides the size (also with no inputs); "
          "size= is then refused."),
    Entry("test_userkernel.py", "TestElementwiseKernelSize",
          "test_no_input_and_raw_output", 1, YES,
          "No inputs and a raw output: size= required."),
    Entry("test_userkernel.py", "TestUserkernelScalar", "test_scalar", 4,
          YES, "NumPy scalars made from -1, 2**32, 2**63-1 and -2**63 cast to "
          "each of 16 dtypes, added to a (2, 3, 4) array; exact equality "
          "with NumPy."),
    Entry("test_userkernel.py", "TestUserkernelManualBlockSize",
          "test_invalid_block_size", 1, YES, "block_size=0: ValueError."),
    Entry("test_userkernel.py", "TestUserkernelManualBlockSize",
          "test_block_size", 1, YES, "block_size=1 gives the right result."),
    Entry("test_userkernel.py", "TestElementwiseKernelTexture",
          "test_texture_input", 3, YES,
          "A CuPy TextureObject for `U texObj` (1-D, 2-D, 3-D textures read "
          "with tex1D/tex2D/tex3D at the index `i`), uint64 scalars."),
    # ---- test_reduction.py ---------------------------------------------
) + tuple(
    Entry("test_reduction.py", "TestSimpleReductionFunction", f"test_shape{n}",
          1, NO, "CuPy's internal `_core.create_reduction_func`, not "
          "ReductionKernel.")
    for n in range(1, 6)
) + (
    Entry("test_reduction.py", "TestSimpleReductionFunctionNonContiguous",
          "test_noncontiguous", 5, NO,
          "CuPy's internal `_core.create_reduction_func`."),
    Entry("test_reduction.py", "TestSimpleReductionFunctionComplexWarning",
          "test_warns", 2, NO,
          "`ndarray.sum(dtype=float)` of complex arrays, CuPy's own, with "
          "and without CUB."),
    Entry("test_reduction.py", "TestSimpleReductionFunctionInvalidAxis",
          "test_axis_overrun", 3, NO, "`ndarray.sum`, CuPy's own."),
    Entry("test_reduction.py", "TestSimpleReductionFunctionInvalidAxis",
          "test_axis_repeated", 2, NO, "`ndarray.sum`, CuPy's own."),
) + tuple(
    Entry("test_reduction.py", "TestReductionKernel", f"test_shape{n}", 1,
          YES, what)
    for n, what in (
        (1, "int8 sums (wrapping) of 1-D arrays of 1 to 513 elements."),
        (2, "int8 sums over axis 0 of (1..513, 1000) arrays."),
        (3, "int8 sums over axis 1 of (1..513, 1000) arrays."),
        (4, "(512, 65536) and (513, 65537) int8 arrays over each axis."))
) + (
    Entry("test_reduction.py", "TestReductionKernelNonContiguous",
          "test_noncontiguous", 5, YES,
          "Transposed inputs reduced over head, middle, tail and all axes, "
          "and a zero-size output."),
    Entry("test_reduction.py", "TestReductionKernelInvalidArgument",
          "test_invalid_kernel_name", 1, YES,
          "name='1': ValueError matching 'Invalid kernel name'."),
    Entry("test_reduction.py", "TestReductionKernelCachedCode",
          "test_cached_code", 1, YES,
          "`_cached_codes`: 0, then 1 after two int64 calls, then 2 after "
          "a float32 call."),
    Entry("test_reduction.py", "TestReductionKernelCachedCode",
          "test_simple_cached_code", 1, NO,
          "CuPy's internal `_core.create_reduction_func`."),
    Entry("test_reduction.py", "TestLargeMultiDimReduction",
          "test_large_dims_keep_kernels", 1, YES,
          "A 7-D int8 array over axes (1, 4, 3, 6) with keepdims=True."),
    Entry("test_reduction.py", "TestArgumentTypes",
          "test_cupy_like_protocols", 2, NO,
          "CuPy's internal `_core.create_reduction_func` on "
          "__cuda_array_interface__ and __cupy_get_ndarray__ objects (jitk's "
          "own tests cover such objects)."),
    Entry("test_reduction.py", "TestArgumentTypes", "test_bad_argument", 1,
          NO, "CuPy's internal `_core.create_reduction_func`."),
    # ---- test_raw.py: TestRaw, 7 parameter sets each -------------------
    _raw("test_basic", "RawKernel launch, Python int for `unsigned int N`."),
    _raw("test_kernel_attributes", "`attributes` has CuPy's ten keys; "
         "`num_regs` > 0, `max_threads_per_block` > 0, "
         "`shared_size_bytes` == 0 as properties."),
    _raw("test_module", "RawModule with two extern \"C\" kernels."),
    _raw("test_compiler_flag", "options=('-DPRECISION=2',) pick double."),
    _raw("test_invalid_compiler_flag", "#error under -DPRECISION=3: "
         "CompileException whose text has 'precision not supported'.",
         jitify=(NO, "Jitify's JitifyException")),
    _raw("test_load_cubin", "RawModule(path=) of an nvcc-built cubin."),
    _raw("test_load_ptx", "RawModule(path=) of an nvcc-built PTX file (skips "
         "itself when the driver is older than nvcc)."),
    _raw("test_load_hsaco", _HIP, verdict=NO),
    _raw("test_module_load_failure", "RawModule(path=) of a missing file: "
         "CUDADriverError naming CUDA_ERROR_FILE_NOT_FOUND."),
    _raw("test_module_neither_code_nor_path", "RawModule(): TypeError."),
    _raw("test_module_both_code_and_path", "code= and path=: TypeError."),
    _raw("test_get_function_failure", "get_function of an unknown name: "
         "CUDADriverError naming CUDA_ERROR_NOT_FOUND."),
    _raw("test_dynamical_parallelism", "A kernel launching a kernel, "
         "options=('-dc',): needs the device runtime linked."),
    _raw("test_dynamical_parallelism_compile_failure", "The same without "
         "-dc: CompileException at the first launch.",
         jitify=(NO, "Jitify's JitifyException")),
    _raw("test_cuFloatComplex", "translate_cucomplex=True: cuComplex.h "
         "functions on complex64, compared exactly with CuPy's own "
         "arithmetic (division and abs included); NumPy complex64 scalar."),
    _raw("test_cuDoubleComplex", "The same on complex128, with NumPy and "
         "Python complex scalars."),
    _raw("test_const_memory", "`get_global('some_array')` returns a "
         "cupy.cuda.MemoryPointer to __constant__ memory."),
    _raw("test_template_specialization", "name_expressions with "
         "`#include <cupy/complex.cuh>`: my_sqrt<int>, <float>, "
         "<complex<double>> and the non-template my_func.",
         Variant(r"^NVCC", 1, SELF_SKIP, "skips itself for nvcc")),
    _raw("test_template_failure", "get_function of an expression not given: "
         "CUDADriverError matching 'named symbol not found'; for nvcc, "
         "name_expressions give a ValueError naming nvrtc."),
    _raw("test_raw_pointer", "A cupy.cuda.MemoryPointer as a kernel "
         "argument."),
) + tuple(
    _raw(f"test_context_switch_{what}", "The kernel or module used again "
         "under cupy.cuda.Device(1).", verdict=TWO_GPUS)
    for what in ("RawKernel", "RawModule1", "RawModule2", "RawModule3",
                 "RawModule4", "RawModule5", "RawModule6")
) + (
    _raw("test_compile_kernel", "RawKernel.compile(log_stream=) writes "
         "NVRTC's log with its 'warning' (an unused variable), also when the "
         "kernel comes from a cache."),
    _raw("test_compile_module", "RawModule.compile(log_stream=), the same."),
    # ---- test_raw.py: the other classes --------------------------------
) + tuple(
    Entry(_RAW, "TestCachePayload", f, n, NO,
          "CuPy's compiler cache payload format (`compiler._encode_cache_"
          "payload`); no kernel class is used.")
    for f, n in (("test_round_trip", 1), ("test_no_names", 1),
                 ("test_count_mismatch_is_rejected", 1),
                 ("test_foreign_payload_is_rejected", 3),
                 ("test_truncated_payload_is_rejected", 1))
) + (
    Entry(_RAW, "TestRawNameExpressionCache", "test_cubin_cache_is_reused",
          10, NO, "Counts saves into CuPy's own disk cache backend, which "
          "jitk never uses (jitk's own tests check these name expressions "
          "and jitk's cache)."),
    Entry(_RAW, "TestRawNameExpressionCache",
          "test_bare_cubin_entry_is_not_loaded_as_payload", 1, NO,
          "Rewrites an entry of CuPy's own disk cache."),
    Entry(_RAW, "TestRawGridSync", "test_grid_sync_rawkernel", 6, SELF_SKIP,
          "enable_cooperative_groups with backend='nvcc'; CuPy skips the "
          "class when nvcc is 12.2 or newer (its fp16 headers)."),
    Entry(_RAW, "TestRawGridSync", "test_grid_sync_rawmodule", 6, SELF_SKIP,
          "The same through RawModule."),
    Entry(_RAW, "TestRawPicklable", "test_raw_picklable", 6, YES,
          "A RawKernel, a RawModule and a kernel of a module (backend='nvcc', "
          "enable_cooperative_groups=True), each pickled before or after its "
          "first call, unpickled in another process that runs it on CuPy "
          "arrays and reads enable_cooperative_groups."),
) + tuple(
    Entry(_RAW, "TestRawJitify", f"test_jitify{n}", 2, YES, what,
          (Variant(r"^jitify$", 1, *jitify),))
    for n, what, jitify in (
        (1, "#include <cub/block/block_reduce.cuh> compiles (CCCL found).",
         (YES, "jitify=True: the same, with jitk's standard headers given")),
        (2, "#include <type_traits>: CompileException with 'cannot open "
            "source file'.",
         (YES, "jitify=True: <type_traits> is there (libcu++'s, in namespace "
               "std), and shift<int> runs")),
        (3, "The same through a name expression.",
         (YES, "jitify=True: shift<float>, which std::enable_if leaves out, fails "
               "with NVRTC's 'Error in parsing name expression'")),
        (4, "Broken code: CompileException.", (NO, "Jitify's JitifyException")),
        (5, "A header including a missing one: 'cannot open source "
            "file'.", (NO, "Jitify, which comments out a missing header")))
) + (
    Entry(_RAW, "", "test_jitify_deprecation_warning", 2, YES,
          "RawKernel and RawModule given jitify=False warn "
          "DeprecationWarning matching 'Avoid passing.*jitify=False' (the "
          "third call is CuPy's own compile_using_nvrtc).",
          (Variant(r"^True-", 1, NO, "CuPy's own Jitify (its third call)"),)),
)

# file::[Class[_param_N_{...}]::]test_name[[param id]]; parameter ids may
# hold "::" and "[" themselves (name expressions, lists), so the pattern
# anchors on the shapes of the parts rather than splitting on separators.
_NODEID = re.compile(
    r"^(?:.*/)?(?P<file>[^/:]+)::"
    r"(?:(?P<cls>[A-Za-z_]\w*?)(?P<cparam>_param_\d+_\{[^}]*\})?::)?"
    r"(?P<func>test\w*)(?:\[(?P<param>.*)\])?$")


def _split(nodeid):
    """(file, class as written, function, parameter id) of a node id."""
    m = _NODEID.match(nodeid)
    if m is None:
        return "", "", nodeid, ""
    param = m.group("param") or m.group("cparam") or ""
    return m.group("file"), m.group("cls") or "", m.group("func"), param


_BY_KEY = {(e.file, e.cls, e.func): e for e in ENTRIES}


def entry_of(nodeid):
    file, cls, func, _ = _split(nodeid)
    return _BY_KEY.get((file, cls, func))


def classify(nodeid):
    """(verdict, reason) of one pytest item; verdict None when unknown."""
    e = entry_of(nodeid)
    if e is None:
        return None, "not in applicability.py"
    param = _split(nodeid)[3]
    for v in e.variants:
        if re.search(v.pattern, param):
            return v.verdict, v.reason
    return e.verdict, e.reason


def verdict_counts(e):
    """[(verdict, count, reason)] of one entry, default verdict first."""
    rest = e.count - sum(v.count for v in e.variants)
    out = [(e.verdict, rest, e.reason)] if rest else []
    return out + [(v.verdict, v.count, v.reason) for v in e.variants]


def applies(verdict):
    return verdict is not None and verdict.startswith(YES)
