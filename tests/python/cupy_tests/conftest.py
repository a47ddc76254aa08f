"""Runs CuPy's own tests of its user-kernel classes against jitk's classes.

pytest imports this file before the test modules beside it. By then it has
put jitk's classes where those modules look for CuPy's: every kernel the
tests build through `cupy.ElementwiseKernel`, `cupy.ReductionKernel`,
`cupy.RawKernel` or `cupy.RawModule` is jitk's. The test files build their
kernels by no other path: they never name `cupy._core.ElementwiseKernel` or
`cupy._core.ReductionKernel`, and `_core.create_reduction_func` and
`_core.elementwise_copy` are CuPy routines that jitk has no counterpart of
(applicability.py marks those tests as not applying). So `cupy._core` is left
alone; replacing its classes too would hand CuPy's own routines (which build
their kernels from it, on import and on first use) to jitk, and the tests'
helpers (random numbers, copies, comparisons) would no longer be CuPy's.

The tests also check errors through CuPy's classes:
`cupy.cuda.compiler.CompileException` for code that does not compile and
`cupy.cuda.driver.CUDADriverError` for a module file that cannot be loaded or
a kernel name that is not in the module. Both names are given a subclass of
CuPy's class that jitk's errors also count as instances of
(jitk.CompileError and jitk.JitkError respectively). Being a subclass, it
keeps CuPy's own raising and catching as they were.

When the runner (tests/python/run_cupy_conformance.py) sets them, the
JITK_CUPY_* variables below add a per-test time limit, a results log that
survives a crash, and the deselection of tests already run or not
applicable; run by hand with plain pytest, none of that happens.
"""

import faulthandler
import json
import os
import signal
import sys
import time

import pytest

import jitk

# cupy.testing reads this when it is first imported (by the test modules,
# after this file): with it, tests marked multi_gpu(2) skip on a machine
# with fewer GPUs instead of failing on cupy.cuda.Device(1).
os.environ.setdefault("CUPY_TEST_GPU_LIMIT", str(jitk.device_count()))

import cupy  # noqa: E402
from cupy.cuda import compiler as _cupy_compiler  # noqa: E402

import applicability  # noqa: E402


def _also_matching(cupy_class, jitk_class):
    """A subclass of `cupy_class` that instances of `jitk_class` match too.

    isinstance and issubclass (which pytest.raises uses) go through the
    metaclass; an `except` clause does not, so CuPy's own handlers catch
    exactly what they caught before.
    """
    both = (cupy_class, jitk_class)

    class Meta(type(cupy_class)):
        def __instancecheck__(cls, obj):
            return isinstance(obj, both)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, both)

    return Meta(cupy_class.__name__, (cupy_class,), {
        "__module__": cupy_class.__module__,
        "__doc__": f"{cupy_class.__doc__ or ''}\n(or {jitk_class.__name__})",
    })


cupy.ElementwiseKernel = jitk.ElementwiseKernel
cupy.ReductionKernel = jitk.ReductionKernel
cupy.RawKernel = jitk.RawKernel
cupy.RawModule = jitk.RawModule
_cupy_compiler.CompileException = _also_matching(
    _cupy_compiler.CompileException, jitk.CompileError)
cupy.cuda.driver.CUDADriverError = _also_matching(
    cupy.cuda.driver.CUDADriverError, jitk.JitkError)


def pytest_report_header(config):
    return (f"jitk {jitk.__version__} in place of CuPy {cupy.__version__}'s "
            f"ElementwiseKernel, ReductionKernel, RawKernel, RawModule; "
            f"CUPY_TEST_GPU_LIMIT={os.environ['CUPY_TEST_GPU_LIMIT']}")


# ---- what the runner asks for --------------------------------------------

_TIMEOUT = float(os.environ.get("JITK_CUPY_TIMEOUT", "0"))
_LOG = os.environ.get("JITK_CUPY_LOG")
# Where the stacks go when a stuck test ends the process: a file of its own,
# since pytest is capturing the standard error of the test at that moment.
_STACKS = open(_LOG + ".stacks", "a") if _LOG and _TIMEOUT > 0 else None
_SKIP_FILE = os.environ.get("JITK_CUPY_DESELECT")
_ONLY_APPLICABLE = os.environ.get("JITK_CUPY_ONLY_APPLICABLE") == "1"


def pytest_collection_modifyitems(config, items):
    """Leaves out tests the runner already has a result for (it restarts
    pytest after a crash or a hard time-out) and, when asked, those that do
    not apply to jitk."""
    done = set()
    if _SKIP_FILE and os.path.exists(_SKIP_FILE):
        with open(_SKIP_FILE) as f:
            done = {line.rstrip("\n") for line in f if line.strip()}
    keep, drop = [], []
    for item in items:
        if item.nodeid in done or (
                _ONLY_APPLICABLE
                and not applicability.applies(
                    applicability.classify(item.nodeid)[0])):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _TimedOut(Exception):
    pass


def _alarm(signum, frame):
    raise _TimedOut(f"over the per-test limit of {_TIMEOUT:g} s")


def _phase(item):
    """Bounds one phase (setup, call, teardown) of a test in time.

    SIGALRM raises inside the test's Python code, so a slow test fails and
    the run goes on. A test stuck inside C (a kernel that never ends, a
    blocked synchronization) never returns to Python for the signal to act;
    faulthandler then prints every thread's stack and ends the process, and
    the runner records that test as timed out and starts pytest again after
    it.
    """
    if _TIMEOUT <= 0:
        yield
        return
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
    faulthandler.dump_traceback_later(_TIMEOUT + 60, exit=True,
                                      file=_STACKS or sys.stderr)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _write({"event": "start", "nodeid": item.nodeid, "t": time.time()})
    yield from _phase(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _phase(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _phase(item)


_results = {}


def pytest_runtest_logreport(report):
    """One line per test, once its teardown is reported: its outcome (an
    error in setup or teardown is an "error"), the time of all three phases,
    and the first line of what failed."""
    r = _results.setdefault(report.nodeid, {"outcome": "passed", "s": 0.0,
                                            "message": ""})
    r["s"] += report.duration
    if report.failed:
        r["outcome"] = "failed" if report.when == "call" else "error"
    elif report.skipped and r["outcome"] == "passed":
        r["outcome"] = "skipped"
    if (report.failed or report.skipped) and not r["message"]:
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None:
            text = crash.message
        elif isinstance(report.longrepr, tuple):  # a skip: (file, line, why)
            text = report.longrepr[2]
        else:
            text = str(report.longrepr)
        r["message"] = text.strip().splitlines()[0][:300] if text else ""
    if report.when == "teardown":
        _write({"event": "result", "nodeid": report.nodeid, **r})
        del _results[report.nodeid]


def _write(record):
    if not _LOG:
        return
    with open(_LOG, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())
