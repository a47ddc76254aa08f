"""jitk: CUDA kernels compiled at run time, on the GPU arrays you have.

CuPy's user-kernel classes, on CuPy arrays, PyTorch tensors and anything
with ``__dlpack__`` or ``__cuda_array_interface__``::

    import torch, jitk
    saxpy = jitk.ElementwiseKernel("T a, T x, T y", "T z", "z = a * x + y", "saxpy")
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    z = saxpy(2.0, x, y)   # a torch tensor, on torch's current stream

Kernels are compiled with NVRTC once and kept in the kernel cache that the
C library uses too (the same JITK_CACHE_* variables and database).
"""

from __future__ import annotations

import ctypes as _ctypes
import glob as _glob
import os as _os
import sys as _sys

__all__ = [
    "ElementwiseKernel",
    "ReductionKernel",
    "RawKernel",
    "RawModule",
    "MatmulPlan",
    "matmul",
    "CompileError",
    "JitkError",
    "PerformanceWarning",
    "cache_stats",
    "device_count",
    "device_arch",
    "nvrtc_version",
]

__version__ = "0.1.0"


def _nvrtc_candidates() -> list[str]:
    """Where libnvrtc may be: the CUDA toolkit named by CUDA_HOME or
    CUDA_PATH, /usr/local/cuda, and NVIDIA's wheels (nvidia-cuda-nvrtc) in
    every site-packages folder, as cuda-pathfinder looks for them."""
    found: list[str] = []
    roots = [_os.environ.get("CUDA_HOME"), _os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if root:
            for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
                found += sorted(_glob.glob(_os.path.join(root, sub, "libnvrtc.so.*")))
    for entry in _sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"):
            found += sorted(_glob.glob(_os.path.join(entry, sub, "libnvrtc.so.*")))
    # The builtins library sits beside, with a longer name: only the main one.
    return [f for f in found if "builtins" not in _os.path.basename(f)]


def _load_nvrtc() -> None:
    """Loads NVRTC before the extension, which links it: from the system's
    library path if it is there, else from the first candidate found. The
    extension's own reference is then resolved to the loaded copy."""
    mode = getattr(_os, "RTLD_GLOBAL", 0) | getattr(_os, "RTLD_NOW", 0)
    try:
        _ctypes.CDLL("libnvrtc.so.13", mode=mode)
        return
    except OSError:
        pass
    for path in _nvrtc_candidates():
        if _os.path.basename(path).startswith("libnvrtc.so.13"):
            try:
                _ctypes.CDLL(path, mode=mode)
                return
            except OSError:
                continue
    # Left to the extension's import, whose error names the library.


_load_nvrtc()

from ._jitk import (  # noqa: E402
    CompileError,
    ElementwiseKernel,
    JitkError,
    PerformanceWarning,
    RawKernel,
    RawModule,
    ReductionKernel,
    cache_stats,
    device_arch,
    device_count,
    nvrtc_version,
)
from ._matmul import MatmulPlan, matmul  # noqa: E402
