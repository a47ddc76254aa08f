"""What jitk's Python tests need from CuPy and PyTorch, behind one face.

Each GPU test is written once against `Lib` and runs with CuPy arrays and
with PyTorch tensors. Test data are made in NumPy, so that the references
are NumPy's; bfloat16, which NumPy lacks, is carried as float32 holding
values that bfloat16 represents exactly.
"""

import contextlib
import importlib
import os

import numpy as np
import pytest

LIBS = ("cupy", "torch")

# The random tests' cases, each with its seed in its name;
# JITK_TEST_RANDOM_CASES sets how many each test has.
RANDOM_CASES = int(os.environ.get("JITK_TEST_RANDOM_CASES", "24"))
random_seeds = pytest.mark.parametrize("seed", range(RANDOM_CASES), ids=lambda s: f"seed{s}")

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "float16", "bfloat16", "float32", "float64",
          "complex64", "complex128")

# Sleeping on the GPU lets a test put a launch behind a slow one: if jitk
# used another stream than the one it was given, it would run too early and
# read stale data, and the test would see it.
_SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) { }
}
"""
SLEEP_CYCLES = 100_000_000  # about 50 ms at 2 GHz


def numpy_dtype(name):
    """The NumPy dtype that carries `name` in tests (float32 for bfloat16)."""
    return np.dtype("float32" if name == "bfloat16" else name)


def load_lib(name):
    try:
        module = importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} is not installed")
    return CupyLib(module) if name == "cupy" else TorchLib(module)


class CupyLib:
    name = "cupy"
    negative_strides = True

    def __init__(self, cp):
        self.m = cp
        self._spin = None

    def check_dtype(self, dtype):
        if dtype == "bfloat16":
            pytest.skip("bfloat16 is tested with PyTorch")

    def asarray(self, a, dtype=None):
        """A device copy of NumPy array `a` (as `dtype`, a jitk dtype name)."""
        return self.m.asarray(np.asarray(a, dtype=dtype and numpy_dtype(dtype)))

    def asnumpy(self, x):
        return self.m.asnumpy(x)

    def dtype_name(self, x):
        return str(x.dtype)

    def is_native(self, x):
        return isinstance(x, self.m.ndarray)

    def device(self, x):
        return x.device.id

    def transpose(self, x):
        return x.T

    def permute(self, x, perm):
        return x.transpose(perm)

    def flip(self, x, axis):
        return self.m.flip(x, axis)

    def synchronize(self):
        self.m.cuda.Device().synchronize()

    def new_stream(self):
        # Non-blocking: no implicit ordering with the legacy default stream,
        # so a launch on the wrong stream is not hidden by it.
        return self.m.cuda.Stream(non_blocking=True)

    def handle(self, stream):
        return stream.ptr

    def using(self, stream):
        return stream  # a CuPy stream is a context manager that makes it current

    def sleep(self):
        """Keeps the current stream busy for a while (CuPy's own kernel)."""
        if self._spin is None:
            self._spin = self.m.RawKernel(_SPIN, "spin")
        self._spin((1,), (1,), (np.int64(SLEEP_CYCLES),))

    def add_(self, x, value):
        x += value  # CuPy's own kernel, on the current stream

    def mul(self, x, value):
        return x * value

    def poison_pool(self, nbytes):
        """Leaves a block of garbage in the pool, where the next allocation
        of that size is likely to come from, so that an output jitk
        allocates and then fails to write does not look right by chance."""
        junk = self.m.full(max(nbytes, 1), 0xA5, dtype=np.uint8)
        del junk


class EmulatedCupyLib(CupyLib):
    """CuPy arrays over host memory, for the GPU tests run without a GPU:
    on the stand-in driver (tests/fakecuda), whose "device memory" is host
    memory, with jitk's kernels run on the CPU by the emulator (tests/emu).
    CuPy's own kernels cannot run there, so tests that need them skip."""
    name = "cupy-emulated"

    def __init__(self, cp):
        super().__init__(cp)
        self.hosts = []  # the host memory under the arrays, kept alive
        self.allocate_from_host()

    def allocate_from_host(self):
        """CuPy's allocations (the outputs jitk allocates among them) come
        from host memory filled with 0xA5 bytes, as poison_pool leaves on
        a GPU; the current device is 0 and the current stream the legacy
        default, which CuPy's runtime would say."""
        cp = self.m

        def alloc(size):
            h = np.full(max(size, 1), 0xA5, dtype=np.uint8)
            self.hosts.append(h)
            return cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(h.ctypes.data, size, h,
                                                               device_id=0), 0)

        cp.cuda.set_allocator(alloc)
        cp.cuda.runtime.getDevice = lambda: 0
        cp.cuda.stream.get_current_stream_ptr = lambda: 0

    def asarray(self, a, dtype=None):
        h = np.array(a, dtype=dtype and numpy_dtype(dtype), order="C")
        self.hosts.append(h)
        mem = self.m.cuda.UnownedMemory(h.ctypes.data, max(h.nbytes, 1), h, device_id=0)
        return self.m.ndarray(h.shape, h.dtype, self.m.cuda.MemoryPointer(mem, 0),
                              strides=h.strides)

    def asnumpy(self, x):
        """A copy of the elements of view `x`, read where they lie."""
        import ctypes
        if x.size == 0:
            return np.empty(x.shape, x.dtype)
        lo = sum(min(0, (n - 1) * s) for n, s in zip(x.shape, x.strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(x.shape, x.strides)) + x.itemsize
        buf = (ctypes.c_char * (hi - lo)).from_address(x.data.ptr + lo)
        view = np.ndarray(x.shape, x.dtype, buffer=buf, offset=-lo, strides=x.strides)
        return view.copy()

    def synchronize(self):
        pass  # the emulator runs each launch before it returns

    def _no_library_kernels(self, *args, **kwargs):
        pytest.skip("CuPy's own kernels do not run on the emulator")

    new_stream = sleep = add_ = mul = _no_library_kernels

    def poison_pool(self, nbytes):
        pass  # every allocation is poisoned (allocate_from_host)


class TorchLib:
    name = "torch"
    negative_strides = False  # PyTorch tensors have no negative strides

    def __init__(self, torch):
        self.m = torch

    def _torch_dtype(self, name):
        dt = getattr(self.m, name, None)
        if dt is None:
            pytest.skip(f"this PyTorch has no {name} tensors")
        return dt

    def check_dtype(self, dtype):
        self._torch_dtype(dtype)

    def asarray(self, a, dtype=None):
        # np.array(order="C") keeps a 0-d array 0-d; np.ascontiguousarray
        # would make it of shape (1,).
        a = np.array(a, dtype=dtype and numpy_dtype(dtype), order="C")
        t = self.m.from_numpy(a).to("cuda")
        if dtype == "bfloat16":
            t = t.to(self.m.bfloat16)
        return t

    def asnumpy(self, x):
        if x.dtype == self.m.bfloat16:
            x = x.float()
        return x.cpu().numpy()

    def dtype_name(self, x):
        return str(x.dtype).removeprefix("torch.")

    def is_native(self, x):
        return isinstance(x, self.m.Tensor)

    def device(self, x):
        return x.device.index

    def transpose(self, x):
        return x.t()

    def permute(self, x, perm):
        return x.permute(perm)

    def flip(self, x, axis):
        pytest.skip("PyTorch tensors have no negative strides")

    def synchronize(self):
        self.m.cuda.synchronize()

    def new_stream(self):
        return self.m.cuda.Stream()  # PyTorch's streams are non-blocking

    def handle(self, stream):
        return stream.cuda_stream

    def using(self, stream):
        return self.m.cuda.stream(stream)

    def sleep(self):
        self.m.cuda._sleep(SLEEP_CYCLES)

    def add_(self, x, value):
        x.add_(value)

    def mul(self, x, value):
        return x * value

    def poison_pool(self, nbytes):
        junk = self.m.full((max(nbytes, 1),), 0xA5, dtype=self.m.uint8,
                           device="cuda")
        del junk


def poisons(dtype):
    """Two distinct values that no test writes, for outputs checked twice:
    an element the kernel skipped keeps one of them and fails the test."""
    if dtype == "bool":
        return True, False
    kind = numpy_dtype(dtype).kind
    if kind in "iu":
        return 111, 77
    if kind == "c":
        return complex(np.nan, np.nan), complex(-777, 777)
    return np.nan, -777.0


def assert_equal(got, want):
    """Every element equal (NaN equal to NaN), shapes and all."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


class CudaStream:
    """A stream of no library: only the __cuda_stream__ protocol."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@contextlib.contextmanager
def nothing():
    yield


# A kernel of a linked program (RawModule(link=...)): it calls two device
# functions that other pieces define, helper(x) = 2x + 1 and
# helper2(x) = x * x.
LINK_MAIN = r'''
extern __device__ float helper(float x);
extern __device__ float helper2(float x);
extern "C" __global__ void use(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = helper2(helper(x[i]));
}
'''


# The C++ standard library's headers that a RawModule made with jitify=True
# may include (libcu++'s, in namespace std, and C's in the global one), each
# used by one kernel: std_headers(y, x) with x = (3, 5, 7) and y[0] = 16
# sets y[0] to 45. The static assertions check the C macros of <cfloat> and
# <climits> against numeric_limits.
STD_HEADER_NAMES = ("array", "atomic", "bit", "bitset", "cassert", "cfloat", "chrono", "climits",
                    "cmath", "complex", "concepts", "cstddef", "cstdint", "cstdlib", "cstring",
                    "functional", "initializer_list", "iterator", "limits", "memory", "numbers",
                    "numeric", "optional", "ratio", "span", "tuple", "type_traits", "utility",
                    "variant", "version", "assert.h", "float.h", "limits.h", "math.h", "stddef.h",
                    "stdint.h", "stdlib.h", "string.h")
STD_HEADERS_SOURCE = "".join(f"#include <{n}>\n" for n in STD_HEADER_NAMES) + r'''
#define SAME(a, b) static_assert((a) == (b), #a)
SAME(FLT_MAX, std::numeric_limits<float>::max());
SAME(DBL_MAX, std::numeric_limits<double>::max());
SAME(FLT_MIN, std::numeric_limits<float>::min());
SAME(DBL_MIN, std::numeric_limits<double>::min());
SAME(FLT_EPSILON, std::numeric_limits<float>::epsilon());
SAME(DBL_EPSILON, std::numeric_limits<double>::epsilon());
SAME(FLT_TRUE_MIN, std::numeric_limits<float>::denorm_min());
SAME(DBL_TRUE_MIN, std::numeric_limits<double>::denorm_min());
SAME(FLT_MANT_DIG, std::numeric_limits<float>::digits);
SAME(DBL_MANT_DIG, std::numeric_limits<double>::digits);
SAME(FLT_DIG, std::numeric_limits<float>::digits10);
SAME(DBL_DIG, std::numeric_limits<double>::digits10);
SAME(FLT_DECIMAL_DIG, std::numeric_limits<float>::max_digits10);
SAME(DBL_DECIMAL_DIG, std::numeric_limits<double>::max_digits10);
SAME(FLT_MIN_EXP, std::numeric_limits<float>::min_exponent);
SAME(DBL_MIN_EXP, std::numeric_limits<double>::min_exponent);
SAME(FLT_MIN_10_EXP, std::numeric_limits<float>::min_exponent10);
SAME(DBL_MIN_10_EXP, std::numeric_limits<double>::min_exponent10);
SAME(FLT_MAX_EXP, std::numeric_limits<float>::max_exponent);
SAME(DBL_MAX_EXP, std::numeric_limits<double>::max_exponent);
SAME(FLT_MAX_10_EXP, std::numeric_limits<float>::max_exponent10);
SAME(DBL_MAX_10_EXP, std::numeric_limits<double>::max_exponent10);
SAME(FLT_RADIX, std::numeric_limits<float>::radix);
SAME(INT_MAX, std::numeric_limits<int>::max());
SAME(CHAR_BIT, 8);
SAME(INT32_MAX, std::numeric_limits<int32_t>::max());
SAME(sizeof(int64_t), 8);
SAME(sizeof(uint_least16_t), 2);
SAME(sizeof(intptr_t), sizeof(void *));
SAME(sizeof(size_t), sizeof(std::size_t));
SAME(std::chrono::seconds(2), std::chrono::milliseconds(2000));
SAME(sizeof(std::atomic<int>), 4);
static_assert(std::is_same<std::uint32_t, unsigned int>::value, "uint32_t");
static_assert(std::is_same_v<std::tuple_element_t<1, std::tuple<int, float>>, float>, "tuple");
extern "C" __global__ void std_headers(float *y, const int *x) {
  assert(x[0] == 3);
  std::array<int, 3> a{x[0], x[1], x[2]};
  std::tuple<int, float> t(x[0], 2.5f);
  std::optional<int> o = x[1];
  std::complex<float> c(1.f, 2.f);
  std::pair<int, double> p = std::make_pair(x[2], 0.5);
  std::bitset<8> bits(x[0]);
  y[0] = std::sqrt(y[0]) + std::get<0>(t) + std::get<1>(t) + *o + c.imag() + (float)p.second
         + (float)std::popcount((unsigned)x[0]) + (float)std::accumulate(a.begin(), a.end(), 0)
         + (float)std::ratio<3, 6>::den + (float)bits.count() + (float)std::abs(-x[2])
         + (float)(std::addressof(a) == &a) - 1.0f;
}
'''
