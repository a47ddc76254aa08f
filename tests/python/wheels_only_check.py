"""What a machine with the driver and pip alone must be able to do.

Run by tests/python/wheels_only.sh inside a mount namespace where the CUDA
toolkit's folders are empty, in a venv holding jitk and NVIDIA's wheels
(``pip install 'jitk[cuda]'``). Everything up to the cubin is checked, so
no GPU is needed: NVRTC, the CUDA headers, CCCL and the device runtime must
all come from the wheels. Prints one line per check and exits non-zero at
the first that fails.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile

ARCH = "sm_90"


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"{'ok' if ok else 'FAILED'}: {what}{': ' + detail if detail else ''}")
    if not ok:
        sys.exit(1)


def loaded(fragment: str) -> list[str]:
    """The files of this process's mappings whose path holds `fragment`."""
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if fragment in line and "/" in line})


def main() -> None:
    toolkit = [p for p in glob.glob("/usr/local/cuda*/include/cuda_fp16.h")]
    check("no CUDA toolkit headers are visible", not toolkit, ", ".join(toolkit))
    check("CUDA_HOME and CUDA_PATH are unset",
          "CUDA_HOME" not in os.environ and "CUDA_PATH" not in os.environ)

    os.environ["JITK_CACHE_DIR"] = tempfile.mkdtemp(prefix="jitk-wheels-only-")
    import jitk

    nvrtc = loaded("libnvrtc.so")
    check("NVRTC comes from NVIDIA's wheel",
          bool(nvrtc) and all("/nvidia/" in p for p in nvrtc), ", ".join(nvrtc))
    major, minor = jitk.nvrtc_version()
    check("nvrtc_version()", major >= 13, f"{major}.{minor}")
    check("device_count() is 0 without a driver", jitk.device_count() == 0)

    # Generated kernels include cuda_fp16.h, cuda_bf16.h and jitk's complex
    # header: the headers come from the nvidia-cuda-runtime wheel, found
    # beside the loaded NVRTC.
    k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x + y * (T)2", "add2")
    for t in ("float16", "bfloat16", "float32", "complex64", "float64"):
        src = k.compile(f"T={t}", arch=ARCH)
        check(f"ElementwiseKernel compiles for {t}", "z = x + y * (T)2" in src)

    r = jitk.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)", "0", "l2norm")
    check("ReductionKernel compiles for float16", bool(r.compile("T=float16", arch=ARCH)))

    # CCCL's headers (libcu++), from the nvidia-cuda-cccl wheel.
    code = r"""
#include <cuda/std/complex>
#include <cuda/std/cstdint>
#include <cuda_fp16.h>
extern "C" __global__ void scale(cuda::std::complex<float> *z, __half h, cuda::std::int64_t n) {
  cuda::std::int64_t i = blockIdx.x * (cuda::std::int64_t)blockDim.x + threadIdx.x;
  if (i < n) z[i] *= __half2float(h);
}
"""
    jitk.RawModule(code=code).compile(arch=ARCH)
    check("RawModule with CCCL and cuda_fp16.h compiles", True)

    # Relocatable code linked with the device runtime (nvJitLink and
    # libcudadevrt from the wheels): a kernel that launches a kernel.
    dyn = r"""
extern "C" __global__ void child(int *p) { p[threadIdx.x] += 1; }
extern "C" __global__ void parent(int *p) { child<<<1, 32>>>(p); }
"""
    jitk.RawModule(code=dyn, options=("-dc",)).compile(arch=ARCH)
    check("RawModule -dc links with the device runtime", True)
    linker = loaded("nvJitLink")
    check("nvJitLink comes from NVIDIA's wheel",
          bool(linker) and all("/nvidia/" in p for p in linker), ", ".join(linker))

    # A compile error is still reported as one, with NVRTC's log.
    try:
        jitk.RawKernel('extern "C" __global__ void bad() { undefined_name; }',
                       "bad").compile(arch=ARCH)
    except jitk.CompileError as e:
        check("a compile error raises CompileError with the log", "undefined_name" in str(e))
    else:
        check("a compile error raises CompileError with the log", False, "nothing raised")


if __name__ == "__main__":
    main()
