"""The package's launch path on a machine without a GPU.

A stand-in driver (tests/fakecuda, built as libcuda.so.1) answers as one
Hopper device whose "device memory" is host memory and whose launches only
record what they were given. Each test runs in a child process whose
LD_LIBRARY_PATH puts the stand-in first, since the driver is loaded once
per process; JITK_TEST_FAKECUDA names it (the README's test command sets
it), and without it the tests skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

FAKE = os.environ.get("JITK_TEST_FAKECUDA")
pytestmark = pytest.mark.skipif(
    not FAKE, reason="JITK_TEST_FAKECUDA names no stand-in driver (tests/fakecuda)")

PRELUDE = r'''
import ctypes, struct, sys
import numpy as np
import jitk

class Launch(ctypes.Structure):
    _fields_ = [("function", ctypes.c_char_p), ("grid", ctypes.c_uint * 3),
                ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("num_params", ctypes.c_int),
                ("param_offset", ctypes.c_size_t * 64), ("param_bytes", ctypes.c_ubyte * 4096),
                ("device", ctypes.c_int), ("cluster", ctypes.c_uint * 3),
                ("cluster_policy", ctypes.c_int), ("cooperative", ctypes.c_int),
                ("programmatic", ctypes.c_int)]

fake = ctypes.CDLL(FAKE)
fake.fakecuda_last_launch.restype = ctypes.POINTER(Launch)
fake.fakecuda_launch_count.restype = ctypes.c_ulonglong

def record(*sizes):
    arr = (ctypes.c_size_t * len(sizes))(*sizes)
    fake.fakecuda_record_params(arr, len(sizes))

def raises(error, call, taken):
    """The exception call() raised, which must be an `error` (a class or a
    tuple of them); any other propagates. Exits with the message `taken`
    when the call returned."""
    try:
        call()
    except error as e:
        return e
    sys.exit(taken)

def param(i, fmt):
    l = fake.fakecuda_last_launch().contents
    assert l.num_params > i, l.num_params
    off = l.param_offset[i]
    return struct.unpack_from(fmt, bytes(l.param_bytes), off)[0]

class CudaArray:
    """An array of a library jitk does not know, through
    __cuda_array_interface__ only; its memory is host memory, which the
    stand-in driver calls device memory."""
    def __init__(self, host):
        self.host = host
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str,
            "data": (host.ctypes.data, False), "version": 3,
            "strides": None, "stream": None}

    @property
    def ptr(self):
        return self.host.ctypes.data

# DLPack's structures, to hand jitk capsules no library would make.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]
class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
class DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]
class DLVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]
new_capsule = ctypes.pythonapi.PyCapsule_New
new_capsule.restype = ctypes.py_object
new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
kept = []  # what the capsules point at, kept alive

def dl_tensor(t, host, device=0, shape=True):
    """Fills a DLTensor over a float32 NumPy array's memory (contiguous)."""
    dims = (ctypes.c_int64 * host.ndim)(*host.shape)
    t.data = host.ctypes.data
    t.device = DLDevice(2, device)
    t.ndim = host.ndim
    t.dtype = DLDataType(2, 32, 1)
    t.shape = dims if shape else None
    kept.append(dims)

def dl_capsule(host, device=0, shape=True):
    """An unversioned DLPack capsule over a float32 NumPy array."""
    m = DLManaged()
    dl_tensor(m.dl_tensor, host, device, shape)
    kept.append(m)
    return new_capsule(ctypes.addressof(m), b"dltensor", None)

hosts = []  # the host memory under CuPy arrays and allocations, kept alive

def cupy_array(host):
    """A cupy.ndarray over a NumPy array's memory: CuPy makes one without a
    GPU, and the stand-in driver calls that memory device memory."""
    import cupy
    hosts.append(host)
    mem = cupy.cuda.UnownedMemory(host.ctypes.data, max(host.nbytes, 1), host, device_id=0)
    return cupy.ndarray(host.shape, host.dtype, cupy.cuda.MemoryPointer(mem, 0),
                        strides=host.strides)

def cupy_host_allocation():
    """CuPy's memory pool and current device need its runtime, which the
    stand-in cannot serve: allocations come from host memory, and the
    current device is 0."""
    import cupy
    def alloc(size):
        h = np.empty(max(size, 1), np.uint8)
        hosts.append(h)
        return cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(h.ctypes.data, size, h, device_id=0), 0)
    cupy.cuda.set_allocator(alloc)
    cupy.cuda.runtime.getDevice = lambda: 0
'''


def run(code: str, tmp_path, prelude: str = "", **extra_env: str) -> str:
    env = dict(os.environ)
    env.update(extra_env)
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(FAKE))
    env["JITK_CACHE_DIR"] = str(tmp_path / "cache")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    script = f"FAKE = {os.path.abspath(FAKE)!r}\n" + PRELUDE + prelude + textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_the_stand_in_is_the_driver(tmp_path):
    out = run("""
        print(jitk.device_count(), jitk.device_arch(0))
    """, tmp_path)
    assert out.split() == ["1", "sm_90"]


def test_raw_kernel_parameters_are_packed_as_cuda_c_reads_them(tmp_path):
    run("""
        k = jitk.RawKernel(r'''
        extern "C" __global__ void f(float a, const float *x, float *y, long long n, int m,
                                     double d) {}''', "f")
        x = CudaArray(np.arange(8, dtype=np.float32))
        y = CudaArray(np.zeros(8, dtype=np.float32))
        record(4, 8, 8, 8, 4, 8)
        before = fake.fakecuda_launch_count()
        # NumPy scalars keep their type; a Python int is narrowed to the
        # 4-byte int and a Python float to the float32 parameter, as CuPy
        # does; the double parameter takes a Python float whole.
        k((3, 2), (64,), (np.float32(2.5), x, y, np.int64(1 << 40), 7, 0.1), shared_mem=256)
        assert fake.fakecuda_launch_count() == before + 1
        l = fake.fakecuda_last_launch().contents
        assert l.function == b"f"
        assert (list(l.grid), list(l.block), l.shared) == ([3, 2, 1], [64, 1, 1], 256)
        assert param(0, "<f") == 2.5
        assert param(1, "<Q") == x.ptr and param(2, "<Q") == y.ptr
        assert param(3, "<q") == 1 << 40
        assert param(4, "<i") == 7
        assert param(5, "<d") == 0.1
        k((1,), (32,), (1.5, x, y, -1, -2, 2))
        assert param(0, "<f") == 1.5 and param(3, "<q") == -1 and param(4, "<i") == -2
        # A cubin gives parameter sizes, not types: a Python int for an
        # 8-byte parameter goes as an int64, as CuPy passes it.
        assert param(5, "<q") == 2
    """, tmp_path)


def test_raw_kernel_bad_launches_raise_and_launch_nothing(tmp_path):
    run("""
        k = jitk.RawKernel('extern "C" __global__ void g(int *p, int n) {}', "g")
        p = CudaArray(np.zeros(4, dtype=np.int32))
        before = fake.fakecuda_launch_count()
        for args, exc in [((p,), Exception),                  # too few
                          ((p, 1, 2), Exception),             # too many
                          ((p, 1 << 40), OverflowError),      # does not fit an int
                          ((p, "x"), TypeError)]:
            raises(exc, lambda: k((1,), (32,), args), f"{args!r} launched")
        e = raises(Exception, lambda: k((1,), (2048,), (p, 1)),  # past the block limit
                   "a block of 2048 threads launched")
        assert "2048" in str(e) or "block" in str(e).lower(), e
        assert fake.fakecuda_launch_count() == before
    """, tmp_path)


def test_elementwise_on_arrays_of_a_third_library(tmp_path):
    run("""
        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "add2")
        x = CudaArray(np.arange(1000, dtype=np.float32))
        y = CudaArray(np.arange(1000, dtype=np.float32))
        z = CudaArray(np.zeros(1000, dtype=np.float32))
        before = fake.fakecuda_launch_count()
        for _ in range(3):
            k(x, y, z)
        assert fake.fakecuda_launch_count() == before + 3
        assert b"add2" in fake.fakecuda_last_launch().contents.function

        # jitk remembers which protocol a type answers; an instance of the
        # same type that lacks it still gets a clear error, and the next
        # good call works.
        bad = CudaArray(np.zeros(1000, dtype=np.float32))
        del bad.__cuda_array_interface__
        e = raises(TypeError, lambda: k(x, bad, z),
                   "an object without an array protocol was taken")
        assert "Unsupported type" in str(e), e
        k(x, y, z)
        assert fake.fakecuda_launch_count() == before + 4

        # A dtype the kernel's other arguments contradict.
        w = CudaArray(np.zeros(1000, dtype=np.float64))
        try:
            k(x, w, z)
        except TypeError:
            pass
        assert fake.fakecuda_launch_count() == before + 4
    """, tmp_path)


def test_arrays_off_their_alignment_raise_and_launch_nothing(tmp_path):
    # An array whose first element is off its dtype's alignment would make
    # the kernel fault on the GPU, which ends the CUDA context: refused
    # with ValueError before any launch, through either interface. A raw
    # kernel given the pointer gets it as CuPy would pass it.
    run("""
        k = jitk.ElementwiseKernel("T x", "T y", "y = x + x", "twice")
        r = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        raw = jitk.RawKernel('extern "C" __global__ void f(const float *x) {}', "f")
        buf = np.zeros(64, dtype=np.uint8)
        base = buf.ctypes.data
        start = (16 - base % 16) % 16
        class Off:
            def __init__(self, offset, typestr, n):
                self.__cuda_array_interface__ = {
                    "shape": (n,), "typestr": typestr, "data": (base + start + offset, False),
                    "version": 3, "strides": None, "stream": None}
        before = fake.fakecuda_launch_count()
        for offset, typestr in [(2, "<f4"), (1, "<f2"), (4, "<f8"), (8, "<c16")]:
            dt = np.dtype(typestr)
            y, s = CudaArray(np.zeros(2, dt)), CudaArray(np.zeros((), dt))
            for call in (lambda a: k(a, y, stream=0), lambda a: r(a, s, stream=0)):
                e = raises(ValueError, lambda: call(Off(offset, typestr, 2)),
                           f"{typestr} at +{offset} was launched")
                assert "is not aligned to" in str(e), e
        assert fake.fakecuda_launch_count() == before
        k(Off(0, "<f8", 2), CudaArray(np.zeros(2, np.float64)), stream=0)
        k(Off(16, "<c16", 2), CudaArray(np.zeros(2, np.complex128)), stream=0)
        raw((1,), (32,), (Off(2, "<f4", 2),), stream=0)
        assert fake.fakecuda_launch_count() == before + 3
    """, tmp_path)


def test_array_interface_strides_as_a_list(tmp_path):
    # Strides written as a list, as some producers write them, are read as
    # the tuple the interface names (the launch is the same as with one);
    # strides that are no sequence are a TypeError that says so.
    run("""
        k = jitk.ElementwiseKernel("T x", "T y", "y = x + x", "twice")
        h = np.arange(12, dtype=np.float32).reshape(3, 4)
        y = CudaArray(np.zeros((4, 3), np.float32))
        class View:
            def __init__(self, strides):
                self.__cuda_array_interface__ = {
                    "shape": (4, 3), "typestr": "<f4", "data": (h.ctypes.data, False),
                    "version": 3, "strides": strides, "stream": None}
        launches = []
        for strides in [(4, 16), [4, 16]]:
            k(View(strides), y, stream=0)
            launch = fake.fakecuda_last_launch().contents
            launches.append(bytes(launch.param_bytes))
        assert launches[0] == launches[1]
        e = raises(TypeError, lambda: k(View(16), y, stream=0), "strides of 16 were taken")
        assert "strides are a int, not a tuple" in str(e), e
    """, tmp_path)


def test_reduction_launches(tmp_path):
    run("""
        r = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        x = CudaArray(np.arange(4096, dtype=np.float32).reshape(64, 64))
        y = CudaArray(np.zeros(64, dtype=np.float32))
        before = fake.fakecuda_launch_count()
        r(x, y, axis=1)
        assert fake.fakecuda_launch_count() > before
        assert b"total" in fake.fakecuda_last_launch().contents.function
    """, tmp_path)


def test_reduction_autotune_times_strategies_and_keeps_one(tmp_path):
    run("""
        r = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "tuned_total")
        x = CudaArray(np.ones((512, 48), dtype=np.float32))
        y = CudaArray(np.zeros(48, dtype=np.float32))
        before = fake.fakecuda_launch_count()
        r.autotune(x, y, axis=0)
        # Several strategies, each launched nine times, then the winner once.
        assert fake.fakecuda_launch_count() >= before + 3 * 9 + 1
        before = fake.fakecuda_launch_count()
        r(x, y, axis=0)
        assert fake.fakecuda_launch_count() == before + 1
        e = raises(TypeError, lambda: r.autotune(x, y, axis=0, bogus=1),
                   "an unknown keyword was accepted")
        assert "bogus" in str(e)
    """, tmp_path)


def test_raw_kernel_call_binds_arguments_as_cupy_does(tmp_path):
    run("""
        k = jitk.RawKernel('extern "C" __global__ void h(int *p) {}', "h")
        p = CudaArray(np.zeros(4, dtype=np.int32))
        record(8)
        before = fake.fakecuda_launch_count()
        # shared_mem and stream by position or by keyword, as CuPy's
        # Function.__call__ takes them.
        k((2,), (32,), (p,), 128, 0)
        assert fake.fakecuda_last_launch().contents.shared == 128
        k(grid=(2,), block=(32,), args=[p], shared_mem=64, stream=None)
        assert fake.fakecuda_last_launch().contents.shared == 64
        assert param(0, "<Q") == p.ptr
        assert fake.fakecuda_launch_count() == before + 2
        bad = [((), {}, "missing required argument 'grid'"),
               (((1,), (32,)), {}, "missing required argument 'args'"),
               (((1,), (32,), (p,)), {"grid": (1,)}, "multiple values for argument 'grid'"),
               (((1,), (32,), (p,)), {"shared": 4}, "unexpected keyword argument 'shared'"),
               (((1,), (32,), (p,), 0, None, False, 7), {}, "at most 6 arguments"),
               (((1,), (32,), (p,), "4"), {}, "shared_mem must be an int"),
               (((1,), (32,), (p,), -1), {}, "")]
        for args, kwargs, message in bad:
            e = raises((TypeError, OverflowError), lambda: k(*args, **kwargs),
                       f"{args!r} {kwargs!r} launched")
            assert message in str(e), (message, str(e))
        assert fake.fakecuda_launch_count() == before + 2
    """, tmp_path)


def test_matmul_batch_of_one_stays_a_batch(tmp_path):
    # (1, M, K) @ (1, K, N) gives (1, M, N), as NumPy and PyTorch do; an out
    # of that shape is taken by a plan made without one (a single matrix's
    # batch stride is never read).
    pytest.importorskip("cupy")
    run("""
        import cupy
        cupy_host_allocation()
        a = cupy_array(np.zeros((1, 16, 32), np.float32))
        b = cupy_array(np.zeros((1, 32, 8), np.float32))
        d = jitk.matmul(a, b, stream=0)
        assert d.shape == (1, 16, 8), d.shape
        plan = jitk.MatmulPlan(a, b)
        plan.execute(a, b, out=cupy_array(np.zeros((1, 16, 8), np.float32)), stream=0)
        flat = jitk.matmul(a[0], b[0], stream=0)
        assert flat.shape == (16, 8), flat.shape
        print("ok")
    """, tmp_path)


def test_outputs_allocated_with_cupy(tmp_path):
    pytest.importorskip("cupy")
    run("""
        import cupy
        cupy_host_allocation()
        array = cupy_array

        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "add2")
        x = array(np.arange(12, dtype=np.float32).reshape(3, 4))
        y = array(np.arange(4, dtype=np.float32))
        z = k(x, y, stream=0)
        assert isinstance(z, cupy.ndarray)
        assert (z.shape, z.dtype) == ((3, 4), np.float32)
        assert z.strides == (16, 4)
        # The launch got the new array's address (the first of its
        # parameters that is an output's pointer).
        assert fake.fakecuda_last_launch().contents.function is not None
        r = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        s = r(x, axis=0, stream=0)
        assert (s.shape, s.dtype) == ((4,), np.float32)
        h = jitk.ElementwiseKernel("T x", "float16 z", "z = x", "to_half")
        assert h(x, stream=0).dtype == np.float16

        # CuPy's attributes are read through their getters for exactly
        # cupy.ndarray, and as attributes for a subclass: both give a raw
        # kernel the array's address, and a view its offset address.
        class Sub(cupy.ndarray):
            pass
        raw = jitk.RawKernel('extern "C" __global__ void f(const float *a, float *b) {}', "f")
        record(8, 8)
        sub = x.view(Sub)
        assert type(sub) is Sub
        for a, b in [(x, z), (sub, z), (x[1:], z[2:])]:
            raw((1,), (32,), (a, b), stream=0)
            assert param(0, "<Q") == a.data.ptr and param(1, "<Q") == b.data.ptr
        z2 = k(sub, y, stream=0)
        assert z2.shape == (3, 4)
        # A transposed view is not C-contiguous: its strides are read.
        zt = k(x.T, y[:3].reshape(3, 1).T, stream=0)
        assert zt.shape == (4, 3)
    """, tmp_path)


def test_launches_go_on_the_stream_given(tmp_path):
    run("""
        class CudaStream:                       # CUDA Python's protocol
            def __init__(self, h): self.h = h
            def __cuda_stream__(self): return (0, self.h)
        class CupyLikeStream:                   # CuPy's Stream: .ptr
            def __init__(self, h): self.ptr = h
        class TorchLikeStream:                  # PyTorch's Stream: .cuda_stream
            def __init__(self, h): self.cuda_stream = h

        k = jitk.ElementwiseKernel("T x", "T z", "z = x", "copy1")
        rk = jitk.RawKernel('extern "C" __global__ void r(float *p) {}', "r")
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        x = CudaArray(np.arange(256, dtype=np.float32))
        z = CudaArray(np.zeros(256, dtype=np.float32))
        s = CudaArray(np.zeros((), dtype=np.float32))
        last = lambda: fake.fakecuda_last_launch().contents.stream or 0
        for stream, handle in [(0x1234, 0x1234), (CudaStream(0x5678), 0x5678),
                               (CupyLikeStream(0x9abc), 0x9abc),
                               (TorchLikeStream(0xdef0), 0xdef0), (None, 0), (0, 0)]:
            k(x, z, stream=stream)
            assert last() == handle, (stream, hex(last()))
            rk((1,), (32,), (z,), stream=stream)
            assert last() == handle, (stream, hex(last()))
            red(x, s, stream=stream)
            assert last() == handle, (stream, hex(last()))
        before = fake.fakecuda_launch_count()
        for bad in ["s", 1.5, object(), CudaStream("h")]:
            raises(TypeError, lambda: k(x, z, stream=bad), f"stream={bad!r} was taken")
        assert fake.fakecuda_launch_count() == before
    """, tmp_path)


def test_first_calls_during_a_capture_compile_then_launch(tmp_path):
    """As CuPy's kernels do, a call whose specialization is not loaded yet,
    made while its stream captures a graph, compiles and loads it first (the
    library refuses that inside a launch, so the package prepares it and
    launches again): the stand-in driver records one launch on the stream.
    Autotuning, which times runs, stays refused there, and launches
    nothing. GPU: test_gpu_graphs.py."""
    run("""
        fake.fakecuda_set_capturing.argtypes = [ctypes.c_void_p, ctypes.c_bool]
        k = jitk.ElementwiseKernel("T x", "T z", "z = x * 2", "captured_first")
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "captured_sum")
        x = CudaArray(np.arange(256, dtype=np.float32))
        z = CudaArray(np.zeros(256, dtype=np.float32))
        s = CudaArray(np.zeros((), dtype=np.float32))
        fake.fakecuda_set_capturing(0x77, True)
        for call in (lambda: k(x, z, stream=0x77), lambda: red(x, s, stream=0x77)):
            before = fake.fakecuda_launch_count()
            call()
            assert fake.fakecuda_launch_count() == before + 1
            assert fake.fakecuda_last_launch().contents.stream == 0x77
        before = fake.fakecuda_launch_count()
        e = raises(jitk.JitkError, lambda: red.autotune(x, s, stream=0x77),
                   "autotune ran during a capture")
        assert "autotune before the capture" in str(e), e
        assert fake.fakecuda_launch_count() == before
        fake.fakecuda_set_capturing(None, False)
    """, tmp_path)


def test_calls_from_several_threads(tmp_path):
    """Fresh kernels called from eight threads at once: their first calls
    race to compile (the GIL released), then each thread launches every
    kind in turn on its own arrays and stream, two dtypes each. Every call
    must launch its own kernel on its thread's stream (the stand-in records
    each thread's last launch apart). GPU: test_gpu_threads.py."""
    run("""
        import threading
        ew = jitk.ElementwiseKernel("T x", "T z", "z = x * 2", "threads_ew")
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "threads_red")
        raw = jitk.RawKernel('extern "C" __global__ void threads_raw(float *p) {}',
                             "threads_raw")
        start = threading.Barrier(8)
        failures = []
        def work(t):
            try:
                stream = 0x1000 + t
                start.wait()
                for r in range(25):
                    dtype = np.float32 if (t + r) % 2 else np.float64
                    x = CudaArray(np.arange(300, dtype=dtype))
                    z = CudaArray(np.zeros(300, dtype=dtype))
                    s = CudaArray(np.zeros((), dtype=dtype))
                    for call, name in ((lambda: ew(x, z, stream=stream), "threads_ew"),
                                       (lambda: red(x, s, stream=stream), "threads_red"),
                                       (lambda: raw((1,), (32,), (z,), stream=stream),
                                        "threads_raw")):
                        call()
                        l = fake.fakecuda_last_launch().contents
                        assert name in l.function.decode(), (name, l.function)
                        assert l.stream == stream, (hex(l.stream or 0), hex(stream))
            except BaseException as e:
                failures.append((t, repr(e)))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not failures, failures
        assert len(ew._cached_codes) == 2 and len(red._cached_codes) == 2
    """, tmp_path)


def test_raw_launch_options_reach_the_driver(tmp_path):
    """RawKernel's keyword-only cluster= and programmatic_dependent_launch=
    (cuda.core's options) and enable_cooperative_groups reach
    cuLaunchKernelEx as its attributes; a plain call stays a plain launch;
    bad values are refused before anything is launched. GPU:
    test_gpu_raw.py runs such launches."""
    run("""
        rk = jitk.RawKernel('extern "C" __global__ void opts(float *p) {}', "opts")
        z = CudaArray(np.zeros(64, dtype=np.float32))
        def last():
            l = fake.fakecuda_last_launch().contents
            return tuple(l.cluster), l.cooperative, l.programmatic, tuple(l.grid)
        rk((8,), (32,), (z,))
        assert last() == ((0, 0, 0), 0, 0, (8, 1, 1)), last()
        rk((8,), (32,), (z,), cluster=2)
        assert last() == ((2, 1, 1), 0, 0, (8, 1, 1)), last()
        rk((4, 2), (32,), (z,), cluster=(2, 2))
        assert last() == ((2, 2, 1), 0, 0, (4, 2, 1)), last()
        rk((8,), (32,), (z,), programmatic_dependent_launch=True)
        assert last() == ((0, 0, 0), 0, 1, (8, 1, 1)), last()
        rk((8,), (32,), (z,), enable_cooperative_groups=True, cluster=None)
        assert last() == ((0, 0, 0), 1, 0, (8, 1, 1)), last()
        before = fake.fakecuda_launch_count()
        for kw, error, words in [
                (dict(cluster=3), jitk.JitkError, "not a whole number of clusters"),
                (dict(cluster=(1, 1, 16)), jitk.JitkError, "at most 8"),
                # A cluster of 0 blocks along an axis, even all three (once
                # launched without clusters), as cuda.core refuses it.
                (dict(cluster=0), ValueError, "at least 1"),
                (dict(cluster=(0, 0, 0)), ValueError, "cluster=None"),
                (dict(cluster=(1, 2, 3, 4)), ValueError, "1 to 3 ints"),
                (dict(cluster=-1), ValueError, "positive"),
                (dict(cluster="2"), TypeError, "")]:
            e = raises(error, lambda: rk((8, 1, 16), (32,), (z,), **kw), f"{kw} was launched")
            assert words in str(e), (kw, str(e))
        e = raises(TypeError, lambda: rk((8,), (32,), (z,), 0, None, False, 2),
                   "cluster was taken by position")
        assert "keyword-only" in str(e), e
        assert fake.fakecuda_launch_count() == before
        # NumPy's integers wherever an int goes, as grids computed with
        # NumPy give them: grid, block, shared_mem, cluster, and a
        # reduction's axis.
        rk(np.int64(8), np.uint32(32), (z,), shared_mem=np.int64(16), cluster=np.int16(4))
        l = fake.fakecuda_last_launch().contents
        assert (tuple(l.grid), tuple(l.block), l.shared, tuple(l.cluster)) == (
            (8, 1, 1), (32, 1, 1), 16, (4, 1, 1)), last()
        rk((np.int64(4), np.int32(2)), (np.int64(64),), (z,))
        assert tuple(fake.fakecuda_last_launch().contents.grid) == (4, 2, 1)
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "np_axis")
        x2 = CudaArray(np.ones((4, 8), dtype=np.float32))
        s2 = CudaArray(np.zeros(8, dtype=np.float32))
        red(x2, s2, axis=np.int64(0))
        red(x2, s2, axis=(np.int32(0),))
        for bad in (2.0, "8"):
            raises((TypeError, ValueError), lambda: rk(bad, (32,), (z,)),
                   f"grid={bad!r} was taken")
    """, tmp_path)


def test_cupy_arrays_of_every_dtype_and_layout(tmp_path):
    pytest.importorskip("cupy")
    run("""
        array = cupy_array

        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "addt")
        raw = jitk.RawKernel('extern "C" __global__ void f(const void *a) {}', "f")
        record(8)
        n = 0
        for dt in ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                   "uint64", "float16", "float32", "float64", "complex64", "complex128"]:
            base = np.zeros((6, 8), dtype=dt)
            for name, h in [("contiguous", base), ("F-order", np.asfortranarray(base)),
                            ("transposed", base.T), ("sliced", base[::2, 1::3]),
                            ("reversed", base[::-1]), ("0-d", base[:1, :1].reshape(())),
                            ("empty", base[:0])]:
                x = array(h)
                z = array(np.zeros(h.shape, dtype=dt))
                before = fake.fakecuda_launch_count()
                k(x, x, z, stream=0)
                # An empty array launches nothing; every other launches once.
                assert fake.fakecuda_launch_count() == before + (h.size > 0), (dt, name)
                raw((1,), (1,), (x,), stream=0)
                assert param(0, "<Q") == x.data.ptr, (dt, name)
                n += 1
        print(n)
    """, tmp_path)


def test_arrays_on_devices_past_the_last_raise(tmp_path):
    # An array whose DLPack capsule or CuPy memory names a device outside
    # those jitk keeps engines for (0 to 63) gets a ValueError and nothing
    # is launched: a large number once indexed the kernels' per-device
    # tables unchecked, and a negative one read as "no device", so the
    # array was taken as the current device's. The matmul plans' reader
    # (_describe) refuses them too.
    run("""
        class Far:
            # float32 host memory (device memory to the stand-in) that says
            # it is on CUDA device `device`.
            def __init__(self, host, device):
                self.host, self.device = host, device
            def __dlpack_device__(self):
                return (2, self.device)
            def __dlpack__(self, stream=None, max_version=None):
                return dl_capsule(self.host, self.device)

        host = np.arange(256, dtype=np.float32)
        z = CudaArray(np.zeros(256, dtype=np.float32))
        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy_far")
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "sum_far")
        raw = jitk.RawKernel('extern "C" __global__ void f(float *p) {}', "f")
        ew(Far(host, 0), z)  # device 0 is the stand-in's
        try:
            import cupy
            import types
            class FarCupy(cupy.ndarray):
                # CuPy asks its runtime for the device when memory is made
                # on another, which the stand-in cannot serve: the memory
                # is device 0's, and `data` says it is `device`'s.
                @property
                def data(self):
                    return types.SimpleNamespace(ptr=host.ctypes.data, device_id=self.device_number)
            def on_cupy(device):
                a = cupy_array(host).view(FarCupy)
                a.device_number = device
                return a
            makers = [Far, lambda h, device: on_cupy(device)]
        except ImportError:
            makers = [Far]
        before = fake.fakecuda_launch_count()
        checked = 0
        for make in makers:
            for device in (-1, -2**31, 64, 1000, 2**31 - 1):
                for call in (lambda: ew(make(host, device), z),
                             lambda: red(make(host, device)),
                             lambda: raw((1,), (32,), (make(host, device),)),
                             lambda: jitk._jitk._describe(make(host, device))):
                    e = raises(ValueError, call, f"device {device} was taken")
                    want = f"is on CUDA device {device}; jitk works with devices 0 to 63"
                    assert want in str(e), e
                    checked += 1
        assert fake.fakecuda_launch_count() == before
        assert checked == len(makers) * 5 * 4, checked
        print("ok", len(makers), checked)
    """, tmp_path)


# What the random calls below share: arrays of CuPy over host memory where
# CuPy is installed (else arrays of the interface alone), and the errors a
# call may raise.
RANDOM = r'''
try:
    import cupy
    cupy_host_allocation()
    wrap = cupy_array
except ImportError:
    wrap = CudaArray
clear = (TypeError, ValueError, OverflowError, MemoryError, jitk.JitkError)
if wrap is not CudaArray:
    # A CuPy array asked for its value (int(x), bool(x)) needs CuPy's
    # runtime, which fails on the stand-in: CuPy's error, not jitk's.
    clear += (cupy.cuda.runtime.CUDARuntimeError,)
'''


def test_random_calls_raise_only_clear_errors(tmp_path):
    # 20,000 calls of the kernel classes with random arguments and keywords
    # (arrays of every kind, views, scalars, strings, nested sequences,
    # malformed __cuda_array_interface__ dicts, streams of any value):
    # each launches or raises TypeError, ValueError, OverflowError or
    # JitkError, and the process survives. A seed per run, printed, makes a
    # failure reproducible.
    seed = int.from_bytes(os.urandom(4), "little")
    out = run(f"""
        import random
        seed = {seed}
        rng = random.Random(seed)

        class Cai:
            def __init__(self, d): self.__cuda_array_interface__ = d
        class Stream:
            def __init__(self, v): self.v = v
            def __cuda_stream__(self): return self.v

        buffers = [np.zeros(s, dtype=d) for d in ["bool", "int8", "int32", "int64", "uint64",
                   "float16", "float32", "float64", "complex64"]
                   for s in [(4,), (2, 3), (), (0,), (3, 1)]]
        arrays = [wrap(h) for h in buffers] + [CudaArray(h) for h in buffers]

        def value(depth=0, with_arrays=True):
            c = rng.randrange(16)
            if not with_arrays and c in (2, 3):
                c = 0
            if c == 0: return rng.choice([0, 1, -1, 7, 2**31, -2**63, 2**64 - 1, 2**64, 10**30])
            if c == 1: return rng.choice([0.5, -2.0, float("nan"), float("inf"), 1e300])
            if c in (2, 3): return rng.choice(arrays)
            if c == 4: return None
            if c == 5: return rng.choice(["", "x", "float32", "\\0"])
            if c == 6: return np.float32(rng.random())
            if c == 7: return np.int64(rng.randrange(-2**63, 2**63))
            if c == 8 and depth < 2: return tuple(value(depth + 1) for _ in range(rng.randrange(5)))
            if c == 9 and depth < 2: return [value(depth + 1) for _ in range(rng.randrange(5))]
            if c == 10 and depth < 2:
                keys = ["shape", "typestr", "data", "version", "strides", "stream", "mask"]
                return Cai({{k: value(depth + 1) for k in rng.sample(keys, rng.randrange(8))}})
            if c == 11: return Stream(value(depth + 1) if depth < 2 else 0)
            if c == 12: return complex(rng.random(), -1.0)
            if c == 13: return rng.choice([True, False])
            if c == 14: return Cai({{"shape": (4,), "typestr": rng.choice(["<f4", "<f2", "|b1",
                                   "<c16", ">f4", "f4", "<x9"]), "data": (rng.randrange(2**64), False),
                                   "version": 3}})
            return object()

        kernels = [jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "a"),
                   jitk.ElementwiseKernel("raw T x, int32 n", "raw T y", "y[i] = x[n - 1 - i]", "rev"),
                   jitk.ElementwiseKernel("T x", "float32 y", "y = (float)x", "cvt"),
                   jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "s"),
                   jitk.RawKernel('extern "C" __global__ void f(float a, const float *x, '
                                  'long long n, int m) {{}}', "f")]
        keywords = ["size", "block_size", "stream", "axis", "keepdims", "out", "shared_mem",
                    "enable_cooperative_groups", "grid", "args"]
        # MemoryError: an output too large for the allocator (a size= of
        # 2^62 elements), as CuPy's OutOfMemoryError is on a GPU.
        launched = 0
        for i in range(20000):
            k = rng.choice(kernels)
            args = [value() for _ in range(rng.randrange(6))]
            # Only out= takes arrays among the keywords: the truth of a
            # CuPy array (keepdims=x) needs CuPy's runtime.
            names = [rng.choice(keywords) for _ in range(rng.randrange(3))]
            kw = {{n: value(with_arrays=n == "out") for n in names}}
            # CuPy's current stream needs its runtime, which the stand-in
            # cannot serve: a stream is always given, random or 0.
            if kw.get("stream") is None:
                kw["stream"] = 0
            try:
                k(*args, **kw)
                launched += 1
            except clear:
                pass
            except Exception as e:
                sys.exit(f"seed {{seed}}, call {{i}}: {{type(e).__name__}}: {{e}} from "
                         f"{{k!r}}{{args!r}} {{kw!r}}")
        print("seed", seed, "launched", launched)
    """, tmp_path, prelude=RANDOM)
    # Some calls must have been valid, or the test exercised only refusals.
    assert int(out.split()[-1]) > 0, out


def test_random_constructions_raise_only_clear_errors(tmp_path):
    # The constructors, compile(), pickling, RawModule's linking and
    # functions, RawKernel's launch options, MatmulPlan and jitk.matmul
    # given random arguments. Half the calls are clean (each argument one
    # of a few values, most of them valid, so that kernels are made and
    # launched); the other half are noisy (values cut or grown by a
    # character, or of the wrong kind). Each call succeeds or raises
    # TypeError, ValueError, OverflowError, MemoryError or JitkError (a
    # compile error among them), and the process survives; sanitized.sh
    # runs this under AddressSanitizer. Whatever constructs also pickles and
    # unpickles with the same attributes. A seed per run, printed, makes a
    # failure reproducible; every distinct failure is reported.
    seed = int.from_bytes(os.urandom(4), "little")
    out = run(f"""
        import io, os, pickle, random, traceback, warnings
        warnings.simplefilter("ignore")  # jitify= warns, as CuPy's does
        seed = {seed}
        rng = random.Random(seed)

        folder = {str(tmp_path)!r}
        def file(name, data):
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                f.write(data)
            return path
        paths = [file("junk.cubin", os.urandom(200)), file("empty.ptx", b""),
                 file("text.fatbin", b"not a fatbin"), file("junk.o", os.urandom(64)),
                 file("junk.a", b"!<arch>\\n" + os.urandom(64)), file("x.ltoir", os.urandom(32)),
                 file("a.unknown", b"x"), folder, os.path.join(folder, "missing.ptx"), ""]

        def arr(dtype, *shape): return wrap(np.ones(shape, dtype))
        f32, f16, f64 = np.float32, np.float16, np.float64
        same = [arr(f32, 8, 6) for _ in range(3)]  # elementwise operands of one shape
        products = [(arr(f32, 8, 4), arr(f32, 4, 6)), (arr(f32, 8, 4), arr(f32, 4, 6), arr(f32, 8, 6)),
                    (arr(f16, 8, 4), arr(f16, 4, 6)), (arr(f64, 8, 4), arr(f64, 4, 6)),
                    (arr(f32, 2, 8, 4), arr(f32, 2, 4, 6)), (arr(f32, 4, 8).T, arr(f32, 4, 6))]
        bias = arr(f32, 6)
        arrays = same + [a for p in products for a in p] + [
            bias, arr(f32), arr(f32, 0, 4), arr(np.int32, 8, 4), CudaArray(np.ones((8, 6), f32))]

        def junk():
            return rng.choice([None, 0, -1, 2**64, 1.5, float("nan"), "", "\\0", "x" * 3000,
                               b"bytes", (), [], {{}}, object(), True, np.int64(3),
                               np.float32(2), ("cuda",), ("cuda", None, None), {{"a": 1}},
                               rng.choice(arrays)])

        def pick(valid):
            # In a clean call one of the values given, often the first (a
            # valid one); in a noisy one, sometimes such a value cut or grown
            # by a character, or a value of the wrong kind.
            c = rng.randrange(8)
            if not noisy and c < 3:
                return valid[0]
            if c < 5 or not noisy:
                return rng.choice(valid)
            if c < 7:
                s = rng.choice([v for v in valid if isinstance(v, str)] or ["x"])
                i = rng.randrange(len(s) + 1)
                return s[:i] + rng.choice(["", "\\0", "(", ")", ",", "raw ", "T", "\\u00e9", "\\n",
                                           ";", "{{", "}}", '"', "%s", "\\\\"]) + s[i + rng.randrange(3):]
            return junk()

        def keywords(table):
            kw = {{k: pick(v) for k, v in table.items() if rng.random() < 0.3}}
            # CuPy's current stream needs its runtime, which the stand-in
            # cannot serve: a stream is always given, random or 0.
            if "stream" in table and kw.get("stream") is None:
                kw["stream"] = 0
            return kw

        def some(n):
            # n arguments when clean, arrays of one shape; any when noisy.
            if not noisy:
                return [rng.choice(same) for _ in range(n)]
            return [rng.choice(arrays) if rng.random() < 0.7 else junk()
                    for _ in range(rng.randrange(5))]


        EW = dict(name=["k", "k_2", "", "2k", "k" * 300], reduce_dims=[True, False],
                  preamble=["", "#define Q 1", "__device__ int f() {{ return 1; }}", "#error no"],
                  no_return=[True, False], return_tuple=[True, False],
                  loop_prep=["", "int q = 0;"], after_loop=["", ";"],
                  options=[(), ("-DX=1",), ("--no-such-flag",), ["-O3"]])
        def elementwise():
            k = jitk.ElementwiseKernel(
                *pick([("T x, T y", "T z", "z = x + y"), ("float32 x", "float32 z, T w", "z = x; w = x"),
                       ("raw T x, int32 n", "raw T y", "y[i] = x[n - 1 - i]"), ("T x", "T z", "z = q")]),
                **keywords(EW)) if not noisy else jitk.ElementwiseKernel(
                pick(["T x, T y", "raw T x, int32 n", "float32 x", "", "T x, raw U y"]),
                pick(["T z", "float32 z", "raw T z", "", "T z, T w"]),
                pick(["z = x + y", "z = x", "z = (T)n", "", "w = z", "z = x[i]"]), **keywords(EW))
            args = some(k.nin + rng.randrange(k.nout + 1))
            if "int32 n" in k.in_params and not noisy:
                args[1] = np.int32(3)
            return k, args, keywords(dict(size=[48, 0, -1, 2**40], block_size=[64, 0, 1025, 7],
                                          stream=[0]))

        RED = dict(name=["r", "", "2r"], reduce_type=["float32", "T", "nope", None],
                   reduce_dims=[True, False], preamble=["", "#error no"], options=[(), ("-DX=1",)])
        def reduction():
            k = jitk.ReductionKernel(
                pick(["T x", "T x, T y", "float32 x", "raw T x"]), pick(["T y", "float32 y", ""]),
                pick(["x", "x * y", "x * 2", "x +"]), pick(["a + b", "max(a, b)", "a +"]),
                pick(["y = a", "y = a / _in_ind.size()", ""]), pick(["0", "-1", None, ""]),
                **keywords(RED))
            return k, some(k.nin), keywords(dict(axis=[0, 1, -1, (0, 1), 5, None],
                                                 keepdims=[True, False], out=[bias], stream=[0]))

        CODES = {{'extern "C" __global__ void f(float a, const float *x, long long n, int m) {{}}':
                     lambda: (1.5, same[0], 48, 2),
                 'template<typename T> __global__ void t(T *x) {{}}\\n'
                 'extern "C" __global__ void f(float *x) {{}}\\n__device__ float g_value;':
                     lambda: (same[0],),
                 'extern "C" __global__ void f(int *p) {{ oops }}': lambda: (same[0],),
                 "": lambda: ()}}
        RAW = dict(options=[(), ("-DX=1",), ("-dc",), ("--no-such-flag",)],
                   backend=["nvrtc", "nvcc", "hip"], translate_cucomplex=[True, False],
                   enable_cooperative_groups=[True, False], jitify=[False, True])
        LAUNCH = dict(shared_mem=[0, 256, 2**20, -1], stream=[0],
                      enable_cooperative_groups=[True, False],
                      cluster=[None, 1, 2, (2, 1), (1, 2, 3, 4), 0],
                      programmatic_dependent_launch=[True, False])
        def launch(k, code):
            args = CODES[code]() if not noisy and code in CODES else tuple(some(0))
            return k, (pick([2, (2, 2), (1, 1, 1), 0, (1, 2**40)]), pick([32, (8, 4), 2048, 0]),
                       args), keywords(LAUNCH)
        def raw_kernel():
            code = pick(list(CODES))
            return launch(jitk.RawKernel(code, pick(["f", "t<float>", "g", ""]), **keywords(RAW)),
                          code)

        LINKS = [("cuda", 'extern "C" __device__ float h(float x) {{ return x; }}'),
                 ("cuda", b"__device__ int q;"), ("ptx", b"junk"), ("cubin", None),
                 ("device_runtime", None), ("nope", b"x"), ("cuda",), ("cuda", 5)]
        MOD = dict(options=RAW["options"], backend=RAW["backend"],
                   translate_cucomplex=[True, False], enable_cooperative_groups=[True, False],
                   name_expressions=[None, ["t<float>"], ["t<int>", "f"], ["t<"], [1]],
                   jitify=[False, True], link_options=[(), ["-O3"], ["--bogus"]],
                   lto=[None, True, False])
        def raw_module():
            kw = keywords(MOD)
            if rng.random() < 0.3:
                kw["link"] = [rng.choice(LINKS + paths) for _ in range(rng.randrange(3))]
            c = rng.random()
            code = pick(list(CODES))
            if c < 0.9:
                kw["code"] = code
            if c > 0.8:
                kw["path"] = rng.choice(paths)
            m = jitk.RawModule(**kw)
            if rng.random() < 0.3:
                m.compile(pick([None, io.StringIO()]), **keywords(dict(arch=["sm_90", "sm_1", ""])))
            if rng.random() < 0.3:
                m.get_global(pick(["g_value", "nothing", ""]))
            return launch(m.get_function(pick(["f", "t<float>", "t<int>", "none", ""])), code)

        EPILOGUES = ["acc", "relu(acc + bias[col])", "acc * s", "", "undefined_thing", "acc +",
                     "value", "gelu(acc)"]
        INPUTS = [{{}}, {{"bias": bias}}, {{"s": 2.0}}, {{"": 1}}, {{"bias": "x"}}, {{"bias": bias, "s": 2}}]
        PLAN = dict(alpha=[1.0, 2, -0.5, "x"], beta=[0.0, 1.0], epilogue=EPILOGUES,
                    epilogue_inputs=INPUTS, out_dtype=[None, "float32", "float16", "int8", "nope"],
                    compute=[None, "tf32", "float32", "fast"], preamble=[None, "", "#error no"],
                    outputs=[None, {{"pre": ("float32", "acc")}}, {{"m": ("uint8", "acc > 0")}},
                             {{"acc": ("float32", "acc")}}, {{"p": ("float32",)}}],
                    reductions=[None, {{"db": ("float32", "value", "sum", "rows")}},
                                {{"am": ("float32", "fabs(value)", "max", "all")}},
                                {{"x": ("float32", "value", "mean", "rows")}}],
                    scales=[(), ("a", "b"), ("a", "b", "d"), ("q",)], amax_d=[False, True])
        def operands():
            return rng.choice(products) if not noisy else [
                rng.choice(arrays + [None]) for _ in range(rng.randrange(1, 4))]

        launched = constructed = 0
        failures = {{}}
        for i in range(1500):
            what = rng.randrange(6)
            noisy = rng.random() < 0.5
            try:
                if what < 4:
                    k, args, kw = [elementwise, reduction, raw_kernel, raw_module][what]()
                    constructed += 1
                    if what < 3 and rng.random() < 0.2:
                        copy = pickle.loads(pickle.dumps(k))
                        assert type(copy) is type(k), (k, copy)
                        for name in ("in_params", "out_params", "operation", "map_expr",
                                     "reduce_expr", "name", "code", "options", "backend",
                                     "enable_cooperative_groups"):
                            assert getattr(copy, name, None) == getattr(k, name, None), name
                    if what < 2 and rng.random() < 0.2:
                        k.compile(pick(["float32", "float32,float32", "float16", "int8", "",
                                        "nope"]), **keywords(dict(arch=["sm_90", "sm_0"])))
                    k(*args, **kw)
                elif what == 4:
                    given = operands()
                    kw = keywords(PLAN)
                    plan = jitk.MatmulPlan(*given, **kw)
                    constructed += 1
                    plan.describe()
                    run = keywords(dict(alpha=[None, 3.0, "x"], beta=[None, 0.0], stream=[0],
                                        out=[None, rng.choice(arrays)]))
                    run["epilogue_inputs"] = kw.get("epilogue_inputs") if not noisy else pick(INPUTS)
                    if noisy:
                        given = operands()
                        run.update(keywords(dict(a_scale=[bias, 1.0], d_scale=[bias])))
                    plan.execute(*given, **run)
                else:
                    jitk.matmul(*operands(), **keywords(dict(
                        alpha=PLAN["alpha"], beta=PLAN["beta"], epilogue=EPILOGUES,
                        epilogue_inputs=INPUTS, compute=PLAN["compute"], stream=[0],
                        out=[None, rng.choice(arrays)])))
                launched += 1
            except clear:
                pass
            except Exception as e:
                # Every kind of failure once, where it was raised.
                where = traceback.extract_tb(e.__traceback__)[-1]
                failures.setdefault((type(e).__name__, where.filename, where.lineno),
                                    f"call {{i}} ({{what}}): {{type(e).__name__}}: {{e}}\\n"
                                    + "".join(traceback.format_exception(e)[-4:]))
        if failures:
            sys.exit(f"seed {{seed}}:\\n" + "\\n".join(failures.values()))
        print("seed", seed, "constructed", constructed, "launched", launched)
    """, tmp_path, prelude=RANDOM)
    # Some constructions and launches must have been valid, or the test
    # exercised only refusals.
    words = out.split()
    assert int(words[-3]) > 0 and int(words[-1]) > 0, out


# Memory of the second stand-in device: the stand-in tags what cuMemAlloc
# makes with the device whose context is current, and tells jitk so when
# asked about the pointer. on_device1(n) is an array of n float32 there,
# through __cuda_array_interface__ (which names no device).
ON_DEVICE1 = r'''
proc, status = ctypes.c_void_p(), ctypes.c_int()

def entry(name, *types):
    assert fake.cuGetProcAddress_v2(name.encode(), ctypes.byref(proc), 12000,
                                    ctypes.c_uint64(0), ctypes.byref(status)) == 0
    return ctypes.CFUNCTYPE(ctypes.c_int, *types)(proc.value)

retain = entry("cuDevicePrimaryCtxRetain", ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)
set_current = entry("cuCtxSetCurrent", ctypes.c_void_p)
mem_alloc = entry("cuMemAlloc", ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t)

class on_device1:
    def __init__(self, n):
        ctx, p = ctypes.c_void_p(), ctypes.c_uint64()
        assert retain(ctypes.byref(ctx), 1) == 0 and set_current(ctx) == 0
        assert mem_alloc(ctypes.byref(p), 4 * n) == 0
        assert set_current(None) == 0
        self.__cuda_array_interface__ = {
            "shape": (n,), "typestr": "<f4", "data": (p.value, False), "version": 3,
            "strides": None, "stream": None}
'''


def test_kernels_follow_the_device_of_their_arrays(tmp_path):
    # Two stand-in devices; memory the stand-in allocates in device 1's
    # context is device 1's, which the driver tells jitk from the pointer.
    run("""
        assert jitk.device_count() == 2
        x1, y1, z1 = on_device1(1000), on_device1(1000), on_device1(1000)
        x0 = CudaArray(np.arange(1000, dtype=np.float32))
        z0 = CudaArray(np.zeros(1000, dtype=np.float32))

        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "add2")
        before = fake.fakecuda_launch_count()
        k(x0, x0, z0)
        assert fake.fakecuda_last_launch().contents.device == 0
        compiled = jitk.cache_stats()["process"]["compiles"]
        assert compiled >= 1, jitk.cache_stats()
        k(x1, y1, z1)
        assert fake.fakecuda_launch_count() == before + 2
        assert fake.fakecuda_last_launch().contents.device == 1
        # Device 1's engine took device 0's image: no second compile.
        assert jitk.cache_stats()["process"]["compiles"] == compiled, jitk.cache_stats()

        # Arrays of both devices in one call run on the current device (0
        # here), as CuPy runs them, reading device 1's array through peer
        # access, which is enabled with a PerformanceWarning.
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            k(x0, y1, z0)
        assert fake.fakecuda_launch_count() == before + 3
        assert fake.fakecuda_last_launch().contents.device == 0
        assert [x.category for x in w] == [jitk.PerformanceWarning], w
        assert "(1)" in str(w[0].message) and "(0)" in str(w[0].message), w[0].message
        assert "activated" in str(w[0].message)
        assert issubclass(jitk.PerformanceWarning, RuntimeWarning)
        # Once enabled, peer access is not announced again.
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            k(x0, y1, z0)
        assert fake.fakecuda_launch_count() == before + 4
        assert w == [], w

        r = jitk.RawKernel('extern "C" __global__ void f(float *p, int n) {}', "f")
        r((1,), (32,), (z1, 1000))
        assert fake.fakecuda_last_launch().contents.device == 1
        r((1,), (32,), (z0, 1000))
        assert fake.fakecuda_last_launch().contents.device == 0
    """, tmp_path, ON_DEVICE1, FAKECUDA_DEVICES="2", JITK_CACHE="off")


def test_arrays_of_devices_that_cannot_reach_each_other(tmp_path):
    # As above, with devices that have no peer access between them: CuPy's
    # ValueError, and nothing launched.
    run("""
        x0 = CudaArray(np.arange(1000, dtype=np.float32))
        z0 = CudaArray(np.zeros(1000, dtype=np.float32))
        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "add2")
        k(x0, x0, z0)
        before = fake.fakecuda_launch_count()
        e = raises(ValueError, lambda: k(x0, on_device1(1000), z0),
                   "an array of a device out of reach was taken")
        assert "Peer access is unavailable" in str(e), e
        assert "(1)" in str(e) and "(0)" in str(e), e
        assert fake.fakecuda_launch_count() == before
        # The kernel still works afterwards.
        k(x0, x0, z0)
        assert fake.fakecuda_launch_count() == before + 1
    """, tmp_path, ON_DEVICE1, FAKECUDA_DEVICES="2", FAKECUDA_NO_PEER="1",
        JITK_CACHE="off")


def test_texts_the_library_cannot_take_raise(tmp_path):
    # The C library reads strings up to their first NUL: a name, code or
    # option holding a NUL was cut short without a word (a kernel of
    # another name launched), and one that cannot be encoded as UTF-8 (a
    # lone surrogate) crashed the interpreter or raised SystemError. Each
    # is a ValueError now, and nothing is launched.
    run(r"""
        src = 'extern "C" __global__ void f(float *p) {}'
        cases = [
            lambda: jitk.RawKernel(src, "\ud800"),
            lambda: jitk.RawKernel(src, "f\x00bogus"),
            lambda: jitk.RawKernel("// \ud800\n" + src, "f"),
            lambda: jitk.RawKernel(src + "\x00 garbage", "f"),
            lambda: jitk.RawKernel(src, "f", options=("-DX=\ud800",)),
            lambda: jitk.RawModule(code="// \ud800\n" + src),
            lambda: jitk.RawModule(code=src).get_function("\ud800"),
            lambda: jitk.RawModule(code=src).get_function("f\x00g"),
            lambda: jitk.RawModule(code=src, backend="nvrtc\x00"),
            lambda: jitk.ElementwiseKernel("T x", "T y", "y = x\x00 * 1000", "nul"),
            lambda: jitk.ElementwiseKernel("T x", "T y", "y = x", "k", preamble="\ud800"),
            lambda: jitk.ElementwiseKernel("T x", "T y", "y = x", "k", options=("-D\x00",)),
            lambda: jitk.ElementwiseKernel("T x", "T y", "y = x", "k\x00"),
            lambda: jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "\ud800", "total"),
            lambda: jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total",
                                         preamble="\x00"),
            lambda: jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total",
                                         reduce_type="float32\x00"),
        ]
        for i, make in enumerate(cases):
            try:
                k = make()
                if isinstance(k, jitk.RawKernel):
                    k((1,), (32,), (CudaArray(np.zeros(4, np.float32)),))
            except ValueError as e:
                assert "NUL" in str(e) or "UTF-8" in str(e), (i, e)
            else:
                raise AssertionError(f"case {i} was taken")
        assert fake.fakecuda_launch_count() == 0
        print("ok")
    """, tmp_path)


def test_axes_and_shapes_raise_as_under_cupy(tmp_path):
    # An axis out of range is NumPy's AxisError, as CuPy raises it; one
    # given twice is a ValueError of another kind. Arguments wrong in two
    # ways get CuPy's error: it broadcasts the inputs (and an elementwise
    # kernel's outputs), then binds types, then checks a reduction's axes
    # and the outputs' shapes. (An elementwise output that the inputs
    # broadcast to is taken, as by CuPy.)
    run("""
        x = CudaArray(np.ones((4, 8), np.float32))
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        wsum = jitk.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "wsum")
        add = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")
        fixed = jitk.ElementwiseKernel("int8 x", "int16 z", "z = x", "fixed")
        before = fake.fakecuda_launch_count()
        for axis in (2, -3, (0, 2), 2**40):
            e = raises(np.exceptions.AxisError, lambda: red(x, axis=axis),
                       f"axis {axis} was taken")
            assert "out of" in str(e), e
        e = raises(ValueError, lambda: red(x, axis=(1, -1)), "an axis given twice was taken")
        assert not isinstance(e, np.exceptions.AxisError) and "twice" in str(e), e
        odd = CudaArray(np.ones(3, np.int32))
        calls = ((lambda: add(x, odd), "broadcast"),
                 (lambda: wsum(x, odd, axis=0), "broadcast"),
                 (lambda: fixed(odd, CudaArray(np.zeros(4, np.float32))), "broadcast"),
                 (lambda: add(x, x, CudaArray(np.zeros((4, 1), np.int32))), "bound to both"),
                 (lambda: add(x, x, CudaArray(np.zeros((4, 1), np.float32))), "shape"),
                 (lambda: red(x, CudaArray(np.zeros(5, np.int32)), axis=0), "bound to both"),
                 (lambda: red(x, CudaArray(np.zeros(5, np.int32)), axis=7), "bound to both"),
                 (lambda: red(x, CudaArray(np.zeros(5, np.float32)), axis=(0, 0)), "twice"),
                 (lambda: red(x, CudaArray(np.zeros(5, np.float32)), axis=0), "reduced shape"))
        for call, words in calls:
            e = raises((TypeError, ValueError), call, "taken")
            assert words in str(e), f"{words!r} is not in {e!r}"
            assert isinstance(e, TypeError) == ("bound" in words), e
        assert fake.fakecuda_launch_count() == before
        add(x, x, CudaArray(np.zeros((2, 4, 8), np.float32)))
        assert fake.fakecuda_launch_count() == before + 1
        print("ok")
    """, tmp_path)


def test_cupy_classes_compile_with_ftz_as_cupy_does(tmp_path):
    # CuPy adds -ftz=true to every compile; so do jitk's four classes, after
    # the user's options, unless those set -ftz themselves. The options each
    # compile was given are read from JITK_DUMP_SOURCE's listing.
    out = run("""
        import os, tempfile
        log = tempfile.TemporaryFile()
        os.dup2(log.fileno(), 2)
        x = CudaArray(np.ones(4, np.float32))
        z = CudaArray(np.zeros(4, np.float32))
        y = CudaArray(np.zeros((), np.float32))
        jitk.ElementwiseKernel("T x", "T z", "z = x", "ftz_ew")(x, z)
        jitk.ElementwiseKernel("T x", "T z", "z = x", "own_ew", options=("-ftz=false",))(x, z)
        jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "ftz_red",
                             options=("-DX=1",))(x, y)
        code = 'extern "C" __global__ void %s(const float *x, float *z) { z[0] = x[0]; }'
        jitk.RawKernel(code % "ftz_raw", "ftz_raw")((1,), (1,), (x, z))
        jitk.RawModule(code=code % "own_raw", options=("--ftz=false",)).get_function("own_raw")
        jitk.RawModule(code=code % "fast_raw", options=("--use_fast_math",)).get_function(
            "fast_raw")
        log.seek(0)
        print(log.read().decode())
    """, tmp_path, JITK_DUMP_SOURCE="1")
    options = {}
    for block in out.split("jitk: ")[1:]:
        names = [n for n in ("ftz_ew", "own_ew", "ftz_red", "ftz_raw", "own_raw", "fast_raw")
                 if n in block]
        if block.startswith(("generated source of", "source of module")):
            assert len(names) == 1, block
            options.setdefault(names[0], []).append(
                [line[len("// NVRTC option: "):] for line in block.splitlines()
                 if line.startswith("// NVRTC option: ")])
    assert sorted(options) == ["fast_raw", "ftz_ew", "ftz_raw", "ftz_red", "own_ew", "own_raw"], out
    for name, lists in options.items():
        for opts in lists:
            ftz = [o for o in opts if "ftz" in o]
            want = {"own_ew": ["-ftz=false"], "own_raw": ["--ftz=false"]}.get(name, ["-ftz=true"])
            assert ftz == want, (name, opts)
            if name == "ftz_red":
                assert opts.index("-DX=1") < opts.index("-ftz=true"), opts


def test_integers_past_what_they_set_raise(tmp_path):
    # axis= and block_size= were cut to 32 bits (axis 2**32 reduced axis
    # 0), and subclasses of int (IntEnum members) skipped the check that a
    # Python int fits its parameter's dtype.
    run("""
        import enum
        x = CudaArray(np.ones((4, 8), np.float32))
        y = CudaArray(np.zeros((4, 8), np.float32))
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
        add = jitk.ElementwiseKernel("T x, int8 s", "T y", "y = x + s", "add_int8")
        class Small(enum.IntEnum):
            BIG = 300
            FITS = 100
        before = fake.fakecuda_launch_count()
        for call, error in ((lambda: red(x, axis=2**32), np.exceptions.AxisError),
                            (lambda: red(x, axis=(0, -2**32 + 1)), np.exceptions.AxisError),
                            (lambda: ew(x, y, block_size=2**32 + 128), ValueError),
                            (lambda: add(x, Small.BIG, y), OverflowError)):
            raises(error, call, "taken")
        assert fake.fakecuda_launch_count() == before
        add(x, Small.FITS, y)
        assert fake.fakecuda_launch_count() == before + 1
        print("ok")
    """, tmp_path)


def test_empty_arrays_of_the_interface_and_odd_streams(tmp_path):
    # The interface allows a null pointer for an empty array; jitk took it
    # for an array on device -1. A stream that is not an int, or is not a
    # stream number, is refused rather than ignored or waited on.
    run("""
        class Cai:
            def __init__(self, **d):
                base = dict(shape=(0,), typestr="<f4", data=(0, False), version=3,
                            strides=None, stream=None)
                base.update(d)
                self.__cuda_array_interface__ = base
        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
        raw = jitk.RawKernel('extern "C" __global__ void f(float *p, float *q) {}', "f")
        ew(Cai(), Cai())
        before = fake.fakecuda_launch_count()
        raw((1,), (32,), (Cai(), CudaArray(np.zeros(4, np.float32))))
        assert fake.fakecuda_launch_count() == before + 1
        host = np.zeros(4, np.float32)
        for stream, error in (("1", TypeError), (1.5, TypeError), (True, TypeError),
                              (-5, ValueError), (-2**70, ValueError)):
            given = Cai(shape=(4,), data=(host.ctypes.data, False), stream=stream)
            raises(error, lambda: ew(given, CudaArray(np.zeros(4, np.float32))),
                   f"stream {stream!r} was taken")
        # 0, which the interface disallows, is the legacy stream, as handle 0 is.
        ew(Cai(shape=(4,), data=(host.ctypes.data, False), stream=0),
           CudaArray(np.zeros(4, np.float32)))
        print("ok")
    """, tmp_path)


def test_matmul_plans_take_empty_arrays_of_the_interface(tmp_path):
    # An empty array of the interface may have a null pointer, which names
    # no device: MatmulPlan took it for one on device -1 and refused it
    # beside operands on device 0 ("A is on device -1, B on device 0").
    # Where an empty array lies does not matter; operands with elements on
    # two devices are still refused.
    run("""
        def null(*shape):
            o = type("Null", (), {})()
            o.__cuda_array_interface__ = dict(shape=shape, typestr="<f4", data=(0, False),
                                              version=3, strides=None, stream=None)
            return o
        b = CudaArray(np.zeros((32, 8), np.float32))
        plan = jitk.MatmulPlan(null(0, 32), b)
        plan.execute(null(0, 32), b, out=null(0, 8))
        # K = 0: nothing is read, D is written (zeros, or the epilogue of 0).
        d = CudaArray(np.full((16, 8), 7, np.float32))
        plan = jitk.MatmulPlan(null(16, 0), null(0, 8), out=d)
        before = fake.fakecuda_launch_count()
        plan.execute(null(16, 0), null(0, 8), out=d)
        assert fake.fakecuda_launch_count() == before + 1
        # A describes an empty array on the current device, as a call runs.
        assert jitk._jitk._describe(null(0, 32))[0] == 0
        print("ok")
    """, tmp_path)


def test_read_only_and_copied_arrays_are_not_outputs(tmp_path):
    # DLPack 1.0 marks an array read-only, or a copy whose writes would be
    # lost; the interface has a read-only bit. Such arrays are inputs, never
    # outputs.
    run("""
        class Versioned:
            def __init__(self, host, flags):
                self.host, self.flags = host, flags
            def __dlpack_device__(self):
                return (2, 0)
            def __dlpack__(self, stream=None, max_version=None):
                v = DLVersioned()
                v.major, v.minor, v.flags = 1, 0, self.flags
                dl_tensor(v.dl_tensor, self.host)
                kept.append(v)
                return new_capsule(ctypes.addressof(v), b"dltensor_versioned", None)
        class ReadOnly:
            def __init__(self, host):
                self.__cuda_array_interface__ = dict(
                    shape=host.shape, typestr="<f4", data=(host.ctypes.data, True), version=3,
                    strides=None, stream=None)
        host = np.arange(8, dtype=np.float32)
        out = np.zeros(8, np.float32)
        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
        red = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "total")
        before = fake.fakecuda_launch_count()
        for bad, why in ((Versioned(out, 1), "read-only"), (Versioned(out, 2), "a copy"),
                         (ReadOnly(out), "read-only")):
            for call in (lambda: ew(CudaArray(host), bad),
                         lambda: red(CudaArray(host), out=bad)):
                e = raises(ValueError, call, f"{why} output taken")
                assert "is an output, but the array is" in str(e) and why in str(e), e
        assert fake.fakecuda_launch_count() == before
        ew(Versioned(host, 1), CudaArray(out))  # as an input it is read
        ew(ReadOnly(host), CudaArray(out))
        assert fake.fakecuda_launch_count() == before + 2
        print("ok")
    """, tmp_path)


def test_dlpack_tensors_without_a_shape_raise(tmp_path):
    # A capsule of 2 dimensions and no shape was read through the null
    # pointer (a crash).
    run("""
        class NoShape:
            def __dlpack_device__(self):
                return (2, 0)
            def __dlpack__(self, stream=None, max_version=None):
                return dl_capsule(np.zeros((2, 3), np.float32), shape=False)
        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
        e = raises(ValueError, lambda: ew(NoShape(), CudaArray(np.zeros((2, 3), np.float32))),
                   "taken")
        assert "no shape" in str(e), e
        print("ok")
    """, tmp_path)


def test_arrays_that_fail_while_read_raise_their_own_errors(tmp_path):
    # An object whose protocol raises while jitk reads it (a property of
    # __cuda_array_interface__ that fails, __dlpack__ that raises, an
    # extent whose __index__ raises) gives its own exception, as getattr
    # and int() would, not "Unsupported type"; DLPack tensors no library
    # would make (dimensions out of range, vector lanes, odd bit widths, a
    # negative extent, a capsule of another name) are refused with a
    # message; nothing is launched.
    run("""
        class Boom(Exception):
            pass
        class RaisingInterface:
            @property
            def __cuda_array_interface__(self):
                raise Boom("interface")
        class RaisingDlpack:
            def __dlpack_device__(self):
                return (2, 0)
            def __dlpack__(self, stream=None, max_version=None):
                raise Boom("dlpack")
        class BadIndex:
            def __index__(self):
                raise Boom("index")
        host = np.zeros(4, np.float32)
        def interface(**fields):
            d = {"shape": (4,), "typestr": "<f4", "data": (host.ctypes.data, False), "version": 3}
            d.update(fields)
            class Cai:
                __cuda_array_interface__ = d
            return Cai()
        class Capsule:
            def __init__(self, capsule):
                self.capsule = capsule
            def __dlpack_device__(self):
                return (2, 0)
            def __dlpack__(self, stream=None, max_version=None):
                return self.capsule
        def capsule(ndim=1, code=2, bits=32, lanes=1, extent=4, name=b"dltensor"):
            m = DLManaged()
            dl_tensor(m.dl_tensor, host)
            m.dl_tensor.ndim = ndim
            m.dl_tensor.dtype = DLDataType(code, bits, lanes)
            dims = (ctypes.c_int64 * 1)(extent)
            m.dl_tensor.shape = dims
            kept.extend([m, dims])
            return Capsule(new_capsule(ctypes.addressof(m), name, None))

        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
        out = CudaArray(np.zeros(4, np.float32))
        calls = [lambda x: ew(x, out, stream=0), lambda x: jitk.MatmulPlan(x, x)]
        before = fake.fakecuda_launch_count()
        for x, error, words in [
                (RaisingInterface(), Boom, "interface"),
                (RaisingDlpack(), Boom, "dlpack"),
                (interface(shape=(BadIndex(),)), Boom, "index"),
                (interface(strides=(BadIndex(),)), Boom, "index"),
                (capsule(ndim=1000000), ValueError, "1000000 dimensions"),
                (capsule(ndim=-1), ValueError, "-1 dimensions"),
                (capsule(lanes=4), TypeError, "4 lanes"),
                (capsule(bits=7), TypeError, "7 bits"),
                (capsule(name=b"used_dltensor"), TypeError, "no DLPack tensor"),
                (capsule(extent=-5), ValueError, "negative extent")]:
            for call in calls[:1] if words == "negative extent" else calls:
                e = raises(error, lambda: call(x), f"{words}: taken")
                assert words in str(e), (words, str(e))
        assert fake.fakecuda_launch_count() == before
        print("ok")
    """, tmp_path)


def test_matmul_operands_are_checked_against_the_plan(tmp_path):
    # A plan is for operands of one description: anything else (another
    # shape or dtype, an out that is an input or whose matrices overlap, a
    # C the plan has no place for, an epilogue array of another dtype) was
    # launched, reading and writing past the arrays on a GPU.
    run("""
        def mat(rows, cols, dtype=np.float32, batch=None):
            shape = (rows, cols) if batch is None else (batch, rows, cols)
            return CudaArray(np.zeros(shape, dtype))
        a, b, bias = mat(64, 64), mat(64, 64), CudaArray(np.zeros(64, np.float32))
        plan = jitk.MatmulPlan(a, b, epilogue="relu(acc + bias[col])",
                               epilogue_inputs={"bias": bias})
        d = mat(64, 64)
        plan.execute(a, b, epilogue_inputs={"bias": bias}, out=d)
        strided = CudaArray(np.zeros(128, np.float32))
        strided.__cuda_array_interface__ = dict(strided.__cuda_array_interface__, shape=(64,),
                                                strides=(8,))
        int_plan = jitk.MatmulPlan(a, b, epilogue="acc * s", epilogue_inputs={"s": 2})
        bool_plan = jitk.MatmulPlan(a, b, epilogue="s ? acc : 0", epilogue_inputs={"s": True})
        with_c_plan = jitk.MatmulPlan(a, b, d, beta=1.0)
        # What converts without loss still runs: an int where a float was,
        # a bool where an int was.
        float_plan = jitk.MatmulPlan(a, b, epilogue="acc * s", epilogue_inputs={"s": 2.0})
        float_plan.execute(a, b, epilogue_inputs={"s": 3}, out=d)
        int_plan.execute(a, b, epilogue_inputs={"s": True}, out=d)
        before = fake.fakecuda_launch_count()
        small = mat(2, 2, np.float16)
        half_bias = CudaArray(np.zeros(64, np.float16))
        cases = [
            (lambda: plan.execute(small, small, epilogue_inputs={"bias": bias}, out=d), ValueError),
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": bias}, out=mat(64, 64, np.float16)),
             ValueError),
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": bias}, out=mat(2, 2)), ValueError),
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": bias}, out=a), ValueError),
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": bias}, out=bias), ValueError),
            (lambda: plan.execute(a, b, mat(64, 64), epilogue_inputs={"bias": bias}, out=d),
             TypeError),
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": half_bias}, out=d), TypeError),
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": 1.0}, out=d), TypeError),
            # An epilogue array of a dtype that is not real.
            (lambda: jitk.MatmulPlan(a, b, epilogue="acc + bias[col]",
                                     epilogue_inputs={"bias": CudaArray(np.zeros(64, np.complex64))}),
             TypeError),
            # Named arguments that are not mappings of str.
            (lambda: plan.execute(a, b, epilogue_inputs="bias", out=d), TypeError),
            (lambda: jitk.MatmulPlan(a, b, epilogue_inputs=[("bias", bias)]), TypeError),
            (lambda: jitk.MatmulPlan(a, b, epilogue_inputs={1: bias}), TypeError),
            (lambda: jitk.MatmulPlan(a, b, outputs="pre"), TypeError),
            (lambda: jitk.MatmulPlan(a, b, reductions=[("db", "float32", "value", "sum", "rows")]),
             TypeError),
            (lambda: jitk.matmul(a, b, epilogue="acc + s", epilogue_inputs="s", out=d), TypeError),
            # An out_dtype that is not out's.
            (lambda: jitk.matmul(a, b, out=d, out_dtype="float16"), ValueError),
            (lambda: jitk.MatmulPlan(a, b, out=d, out_dtype="float64"), ValueError),
            # An epilogue array not packed (every other element): the kernel
            # reads element i at i, so bias[col] would be the wrong element.
            (lambda: plan.execute(a, b, epilogue_inputs={"bias": strided}, out=d), ValueError),
            (lambda: jitk.MatmulPlan(a, b, epilogue="acc + bias[col]",
                                     epilogue_inputs={"bias": strided}), ValueError),
            # A scalar that the plan's type would change (2.5 into an int64).
            (lambda: int_plan.execute(a, b, epilogue_inputs={"s": 2.5}, out=d), TypeError),
            (lambda: int_plan.execute(a, b, epilogue_inputs={"s": np.float32(3.75)}, out=d),
             TypeError),
            (lambda: bool_plan.execute(a, b, epilogue_inputs={"s": 2}, out=d), TypeError),
            # Autotuning into C itself: each run would read the last one's D.
            (lambda: with_c_plan.autotune(a, b, d, out=d), ValueError),
        ]
        for i, (call, error) in enumerate(cases):
            raises(error, call, f"case {i} was taken")
        assert fake.fakecuda_launch_count() == before
        # D in place of C is allowed; C missing from a plan made with one is not.
        c = mat(64, 64)
        with_c = jitk.MatmulPlan(a, b, c, beta=1.0)
        with_c.execute(a, b, c, out=c)
        raises(TypeError, lambda: with_c.execute(a, b, out=d), "a plan with C ran without one")
        # Batches of D that share memory (batch stride 0) are refused.
        a3, b3 = mat(16, 16, batch=4), mat(16, 16, batch=4)
        flat = np.zeros((16, 16), np.float32)
        shared = CudaArray(flat)
        shared.__cuda_array_interface__ = dict(shared.__cuda_array_interface__,
                                               shape=(4, 16, 16), strides=(0, 64, 4))
        e = raises(ValueError, lambda: jitk.MatmulPlan(a3, b3, out=shared),
                   "overlapping batches of D taken")
        assert "overlap" in str(e), e
        # One A or one C for every batch (a single matrix, or batches 0
        # elements apart) is refused, before anything runs: the plans read
        # each batch's own, and a batch stride of 0 means packed batches to
        # them, which would read past the one matrix.
        expanded = CudaArray(np.zeros((16, 16), np.float32))
        expanded.__cuda_array_interface__ = dict(expanded.__cuda_array_interface__,
                                                 shape=(4, 16, 16), strides=(0, 64, 4))
        before = fake.fakecuda_launch_count()
        for i, call in enumerate((lambda: jitk.MatmulPlan(a3, b3, mat(16, 16, batch=1), beta=1.0),
                                  lambda: jitk.MatmulPlan(mat(16, 16), b3),
                                  lambda: jitk.MatmulPlan(expanded, b3))):
            e = raises(ValueError, call, f"broadcast {i} taken")
            assert "one matrix for 4 batches" in str(e), e
        # One B for every batch is one product of 4 x 16 rows in the
        # library, A's and D's batches following each other.
        for b1 in (mat(16, 16), expanded):
            plan = jitk.MatmulPlan(a3, b1)
            assert plan.describe().endswith("64 x 16 x 16, batch 1"), plan.describe()
        assert fake.fakecuda_launch_count() == before
        print("ok")
    """, tmp_path)


def test_dlpack_arrays_beside_a_library_stream_are_ordered(tmp_path):
    # Without stream=, a third library's array is asked for the legacy
    # default stream (1) before the call's stream is known; when the launch
    # then goes on CuPy's stream of its own, which that stream does not
    # order, the legacy stream is waited for first.
    run("""
        import cupy
        cupy_host_allocation()
        # CuPy's current stream, set here: its Stream objects need its runtime.
        current = [0]
        cupy.cuda.stream.get_current_stream_ptr = lambda: current[0]
        asked = []
        class Third:
            def __init__(self, host):
                self.host = host
            def __dlpack_device__(self):
                return (2, 0)
            def __dlpack__(self, stream=None, max_version=None):
                asked.append(stream)
                return dl_capsule(self.host)
        fake.fakecuda_sync_count.restype = ctypes.c_ulonglong
        fake.fakecuda_sync_count.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        def syncs():
            last = ctypes.c_void_p()
            n = fake.fakecuda_sync_count(ctypes.byref(last))
            return n, last.value
        add = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")
        x = cupy_array(np.ones(8, np.float32))
        z = cupy_array(np.zeros(8, np.float32))
        third = Third(np.ones(8, np.float32))
        n0, _ = syncs()
        add(x, third, z)  # CuPy's null stream: the legacy one, nothing to wait for
        assert syncs()[0] == n0 and asked[-1] == 1, asked
        current[0] = 0x1234  # a stream of CuPy's own
        add(x, third, z)
        n1, last = syncs()
        assert asked[-1] == 1 and n1 == n0 + 1 and last in (None, 0, 1), (asked, n1, last)
        assert fake.fakecuda_last_launch().contents.stream == 0x1234
        add(x, z, z)  # no third array: nothing waited for
        assert syncs()[0] == n1
        current[0] = 0
        add(x, third, z, stream=0x1234)  # the producer is asked for the call's stream
        assert asked[-1] == 0x1234 and syncs()[0] == n1, asked
        print("ok")
    """, tmp_path)


def test_an_interface_changed_while_it_is_read_is_read_as_it_was(tmp_path):
    # Reading __cuda_array_interface__ runs the producer's code: the
    # read-only flag's __bool__, each extent's __index__. Code there that
    # replaced the dict's shape or strides freed the tuples jitk was still
    # reading (a shape of 10**9 over a 16-element buffer was seen). jitk
    # reads a copy of the dict, so it sees the dict as it was asked for.
    run("""
        buf = np.zeros(16, dtype=np.float32)
        class Flag:
            def __init__(self, d): self.d = d
            def __bool__(self):
                self.d["shape"] = (2,)
                self.d["strides"] = (64,)
                junk = [tuple([10**9]) for _ in range(100)]
                return False
        class Extent:
            def __init__(self, d): self.d = d
            def __index__(self):
                self.d["shape"] = (3,)
                self.d["strides"] = (8,)
                junk = [tuple([10**9, 10**9]) for _ in range(100)]
                return 4
        class Arr:
            def __init__(self, hook):
                d = {"typestr": "<f4", "version": 3, "strides": (4,), "stream": None,
                     "shape": tuple([int("4")])}
                d["data"] = (buf.ctypes.data, Flag(d) if hook == "flag" else False)
                if hook == "extent":
                    d["shape"] = (Extent(d),)
                self.__cuda_array_interface__ = d
        for hook in ("flag", "extent"):
            got = jitk._jitk._describe(Arr(hook))
            assert got[2] == (4,) and got[3] == (1,), (hook, got)
            copy = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy_" + hook)
            copy(Arr(hook), CudaArray(np.zeros(4, np.float32)))
            l = fake.fakecuda_last_launch().contents
            assert l.function.decode().startswith("copy_" + hook), l.function
        print("ok")
    """, tmp_path)


def test_a_refused_kernel_setting_is_not_kept(tmp_path):
    # A value of max_dynamic_shared_size_bytes that the device refuses
    # raises, and the kernel keeps its old setting, whether or not it was
    # loaded when the value was given (it was kept, and every later call of
    # a kernel not yet loaded raised the same error).
    run("""
        z = CudaArray(np.zeros(4, np.float32))
        src = 'extern "C" __global__ void %s(float *p) { extern __shared__ float s[]; }'
        fresh = jitk.RawKernel(src % "fresh", "fresh")
        e = raises(jitk.JitkError, lambda: setattr(fresh, "max_dynamic_shared_size_bytes", 10**9),
                   "a billion bytes were taken")
        assert "dynamic shared memory" in str(e), e
        fresh((1,), (32,), (z,))
        default = fresh.max_dynamic_shared_size_bytes
        assert 0 < default < 10**9, default
        loaded = jitk.RawKernel(src % "loaded", "loaded")
        loaded((1,), (32,), (z,))
        loaded.max_dynamic_shared_size_bytes = 65536
        assert loaded.max_dynamic_shared_size_bytes == 65536
        raises(jitk.JitkError, lambda: setattr(loaded, "max_dynamic_shared_size_bytes", 10**9),
               "a billion bytes were taken")
        assert loaded.max_dynamic_shared_size_bytes == 65536
        loaded((1,), (32,), (z,), shared_mem=65536)
        assert fake.fakecuda_last_launch().contents.shared == 65536
        # The carveout keeps a value the device takes.
        loaded.preferred_shared_memory_carveout = 50
        assert loaded.preferred_shared_memory_carveout == 50
        raises(ValueError, lambda: setattr(loaded, "preferred_shared_memory_carveout", 101),
               "a carveout of 101 was taken")
        assert loaded.preferred_shared_memory_carveout == 50
        print("ok")
    """, tmp_path)


def test_options_given_as_one_string_raise(tmp_path):
    # options="-O3" was taken as ('-', 'O', '3'), and the compile then
    # failed on an option "-"; CuPy refuses a str (it adds a tuple to it).
    run("""
        src = 'extern "C" __global__ void f(float *p) {}'
        makers = [
            lambda o: jitk.ElementwiseKernel("T x", "T y", "y = x", "ew", options=o),
            lambda o: jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "red",
                                           options=o),
            lambda o: jitk.RawKernel(src, "f", options=o),
            lambda o: jitk.RawModule(code=src, options=o),
        ]
        for make in makers:
            for bad, words in (("-O3", "not a str"), (b"-G", "not a bytes"),
                               (("-G", 3), "item 1")):
                e = raises(TypeError, lambda: make(bad), f"options={bad!r} was taken")
                assert words in str(e), (bad, str(e))
            assert make(["--use_fast_math"]).options == ("--use_fast_math",)
            assert make(None).options == ()
        print("ok")
    """, tmp_path)


def test_stream_handles_that_are_not_handles_raise(tmp_path):
    # stream=-1 reached the driver as handle 0xffffffffffffffff, and
    # stream=True as handle 1.
    run("""
        x, y = CudaArray(np.ones(4, np.float32)), CudaArray(np.zeros(4, np.float32))
        ew = jitk.ElementwiseKernel("T x", "T y", "y = x", "copy")
        rk = jitk.RawKernel('extern "C" __global__ void f(float *p) {}', "f")
        before = fake.fakecuda_launch_count()
        for bad, error in ((-1, ValueError), (-2**63, ValueError), (2**64, ValueError),
                           (True, TypeError)):
            raises(error, lambda: ew(x, y, stream=bad), f"stream={bad!r} was taken")
            raises(error, lambda: rk((1,), (32,), (y,), stream=bad), f"stream={bad!r} was taken")
        assert fake.fakecuda_launch_count() == before
        ew(x, y, stream=2)
        assert fake.fakecuda_last_launch().contents.stream == 2
        rk((1,), (32,), (y,), stream=2**63)
        assert fake.fakecuda_last_launch().contents.stream == 2**63
        print("ok")
    """, tmp_path)
