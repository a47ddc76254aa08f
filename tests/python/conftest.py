"""Shared set-up of jitk's own Python tests.

CPU tests run everywhere, CI included (no GPU, no driver, CuPy but not
PyTorch; the README's test command installs CuPy, whose arrays over host
memory test_fake_driver.py launches on a stand-in driver). GPU tests take the `lib` fixture, which gives each test once with
CuPy arrays and once with PyTorch tensors, and skip with "no CUDA device"
when jitk sees no GPU, or when that library is not installed.
"""

import pytest

import jitk

from jitk_testutil import LIBS, load_lib

# CuPy's own tests (tests/python/cupy_tests/) need CuPy and a GPU and run through
# tests/python/run_cupy_conformance.py, with settings of their own.
collect_ignore = ["cupy_tests"]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA device (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if jitk.device_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=LIBS)
def lib(request):
    """The array library of a GPU test: CuPy, then PyTorch."""
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    return load_lib(request.param)


@pytest.fixture
def torch_lib():
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    return load_lib("torch")


@pytest.fixture
def cupy_lib():
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    return load_lib("cupy")
