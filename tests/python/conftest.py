"""Shared set-up of jitk's own Python tests.

CPU tests run everywhere, CI included (no GPU, no driver, CuPy but not
PyTorch; the README's test command installs CuPy, whose arrays over host
memory test_fake_driver.py launches on a stand-in driver). GPU tests take the `lib` fixture, which gives each test once with
CuPy arrays and once with PyTorch tensors, and skip with "no CUDA device"
when jitk sees no GPU, or when that library is not installed.
"""

import ctypes
import os

import numpy as np
import pytest

import jitk

from jitk_testutil import LIBS, EmulatedCupyLib, load_lib

# JITK_TEST_EMU names the emulator's library (tests/emu, built as
# tests/emu/libjt_emu.so): the GPU tests given run on the stand-in driver,
# which LD_LIBRARY_PATH must put first, with CuPy arrays over host memory
# and jitk's kernels run on the CPU. tools/emulated-python.sh runs the GPU
# tests of generated and raw kernels so, with --capture=sys: the emulator
# reads the sources the library prints to file descriptor 2, which
# pytest's default capture would take. Tests marked device_only skip there.
EMU_LIBRARY = os.environ.get("JITK_TEST_EMU")
emu = None


def start_emulator():
    global emu
    lib = ctypes.CDLL(EMU_LIBRARY)
    lib.jt_emu_open.restype = ctypes.c_void_p
    lib.jt_emu_open.argtypes = [ctypes.c_int]
    for name in ("jt_emu_capture_stderr", "jt_emu_close", "jt_emu_clear_error"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.jt_emu_error.restype = ctypes.c_char_p
    lib.jt_emu_error.argtypes = [ctypes.c_void_p]
    lib.jt_emu_runs.restype = ctypes.c_ulonglong
    lib.jt_emu_runs.argtypes = [ctypes.c_void_p]
    handle = lib.jt_emu_open(4)
    if not handle:
        pytest.exit("the emulator did not start (see stderr)", returncode=3)
    if lib.jt_emu_capture_stderr(handle) != 0:
        pytest.exit("the emulator cannot read stderr", returncode=3)
    emu = (lib, handle)

# CuPy's own tests (tests/python/cupy_tests/) need CuPy and a GPU and run through
# tests/python/run_cupy_conformance.py, with settings of their own.
collect_ignore = ["cupy_tests"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line(
        "markers", "device_only(why): runs on a GPU, never on the emulator (skipped under "
        "JITK_TEST_EMU, saying why)")
    if EMU_LIBRARY and emu is None:
        start_emulator()
        # One launch proves the wiring: jitk's driver is the stand-in the
        # emulator hooked, and the kernel ran on the CPU.
        lib = EmulatedCupyLib(load_cupy())
        x = lib.asarray(np.arange(5, dtype=np.int32))
        jitk.ElementwiseKernel("T x", "T y", "y = x * 3", "emulator_probe")(x, x)
        if emu[0].jt_emu_runs(emu[1]) != 1 or lib.asnumpy(x).tolist() != [0, 3, 6, 9, 12]:
            pytest.exit("JITK_TEST_EMU is set, but jitk's kernels do not run on the emulator: "
                        "is the stand-in driver first on LD_LIBRARY_PATH? "
                        + emu[0].jt_emu_error(emu[1]).decode(), returncode=3)


def pytest_unconfigure(config):
    global emu
    if emu is not None:
        emu[0].jt_emu_close(emu[1])
        emu = None


def load_cupy():
    try:
        import cupy
    except ImportError:
        pytest.exit("JITK_TEST_EMU needs CuPy, which makes arrays over host memory",
                    returncode=3)
    return cupy


@pytest.fixture(autouse=True)
def emulator_errors():
    """Under the emulator, a kernel that failed there fails its test, with
    the emulator's account of it, whatever the test made of the error."""
    yield
    if emu is not None:
        why = emu[0].jt_emu_error(emu[1]).decode()
        emu[0].jt_emu_clear_error(emu[1])
        assert not why, "a kernel failed on the emulator: " + why


def pytest_collection_modifyitems(config, items):
    if EMU_LIBRARY:
        for item in items:
            why = item.get_closest_marker("device_only")
            if why is not None:
                item.add_marker(pytest.mark.skip(reason="not on the emulator: " + why.args[0]))
    if jitk.device_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=("cupy-emulated",) if EMU_LIBRARY else LIBS)
def lib(request):
    """The array library of a GPU test: CuPy, then PyTorch (under the
    emulator, CuPy over host memory)."""
    if EMU_LIBRARY:
        return EmulatedCupyLib(load_cupy())
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    return load_lib(request.param)


@pytest.fixture
def torch_lib():
    if EMU_LIBRARY:
        pytest.skip("PyTorch's tensors need a GPU")
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    return load_lib("torch")


@pytest.fixture
def cupy_lib():
    if EMU_LIBRARY:
        pytest.skip("the test makes arrays with CuPy's own kernels")
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    return load_lib("cupy")
