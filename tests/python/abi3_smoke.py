"""A smoke test of the installed jitk under one Python version, without
NumPy: imports, compiles without a GPU, and (when JITK_TEST_FAKECUDA names
the stand-in driver, loaded through LD_LIBRARY_PATH) launches a raw and an
elementwise kernel on memory described by __cuda_array_interface__. Run by
tests/python/abi3_check.sh for each Python it finds."""

import ctypes
import os
import sys

import jitk

k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + 2 * y", "add2")
assert "z = x + 2 * y" in k.compile("T=float32", arch="sm_90")
jitk.RawKernel('extern "C" __global__ void f(float *p, int n) {}', "f").compile(arch="sm_90")
try:
    jitk.RawKernel('extern "C" __global__ void g() { nope; }', "g").compile(arch="sm_90")
except jitk.CompileError as e:
    assert "nope" in str(e)
else:
    sys.exit("a compile error was not raised")

launched = "no stand-in driver"
if os.environ.get("JITK_TEST_FAKECUDA"):
    buf = (ctypes.c_float * 64)()

    class Floats:
        __cuda_array_interface__ = {"shape": (64,), "typestr": "<f4",
                                    "data": (ctypes.addressof(buf), False), "version": 3}

    x = Floats()
    assert jitk.device_count() == 1
    k(x, x, x)
    jitk.RawKernel('extern "C" __global__ void f(float *p, int n) {}', "f")((1,), (64,), (x, 64))
    launched = "launched on the stand-in driver"
print(f"Python {sys.version.split()[0]}: jitk {jitk.__version__} imports and compiles; {launched}")
