"""Arrays of libraries jitk has no special path for: JAX arrays (through
__dlpack__) and Numba device arrays (through __cuda_array_interface__).

Each test runs in a child process: JAX takes most of the GPU's memory when
it starts unless told not to, and neither library should be imported into
the process that runs the other GPU tests. A library that is not
installed, or that sees no GPU, skips its tests.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import jitk

pytestmark = pytest.mark.gpu


def run_child(code: str) -> None:
    if jitk.device_count() == 0:
        pytest.skip("no CUDA device")
    env = dict(os.environ)
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=300)
    out = r.stdout.strip().splitlines()
    if r.returncode == 0 and out and out[-1].startswith("skip: "):
        pytest.skip(out[-1][6:])
    assert r.returncode == 0, r.stdout + r.stderr
    assert out and out[-1] == "ok", r.stdout + r.stderr


def test_jax_arrays_as_inputs():
    run_child("""
        import numpy as np
        try:
            import jax, jax.numpy as jnp
            gpu = jax.devices("gpu")[0]
        except Exception as e:
            print("skip: JAX with a GPU is not available:", type(e).__name__, e)
            raise SystemExit(0)
        import cupy
        import jitk
        rng = np.random.default_rng(5)
        hx = rng.standard_normal((300, 7)).astype(np.float32)
        hy = rng.standard_normal((7,)).astype(np.float32)
        x = jax.device_put(hx, gpu)
        y = jax.device_put(hy, gpu)
        # JAX arrays cannot be written: the output is allocated, by CuPy (as
        # for any library jitk has no allocator of).
        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x * 2 + y", "jax_axpy")
        z = k(x, y)
        assert isinstance(z, cupy.ndarray) and z.shape == (300, 7), (type(z), z.shape)
        want = hx.astype(np.float64) * 2 + hy
        assert np.allclose(cupy.asnumpy(z), want, rtol=1e-6, atol=1e-6)
        # A transposed JAX view: jax gives a fresh array, still read through DLPack.
        zt = k(x.T, jnp.ones((300,), jnp.float32))
        assert np.allclose(cupy.asnumpy(zt), hx.T * 2 + 1, rtol=1e-6)
        # A reduction of a JAX array, and a raw kernel reading one.
        s = jitk.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "jax_sum")(x, axis=0)
        assert np.allclose(cupy.asnumpy(s), hx.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)
        raw = jitk.RawKernel(r'''extern "C" __global__ void twice(const float *x, float *y, int n)
            { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }''', "twice")
        out = cupy.full(hx.size, np.nan, np.float32)
        raw(((hx.size + 255) // 256,), (256,), (x, out, np.int32(hx.size)))
        assert np.array_equal(cupy.asnumpy(out), 2 * hx.ravel())
        # Integer and half dtypes keep their type.
        xi = jnp.arange(10, dtype=jnp.int16)
        zi = k(xi, xi)
        assert zi.dtype == np.int16 and cupy.asnumpy(zi).tolist() == [3 * i for i in range(10)]
        xh = jnp.asarray(hx[:, 0], jnp.float16)
        zh = k(xh, xh)
        assert zh.dtype == np.float16
        assert np.allclose(cupy.asnumpy(zh), 3 * np.asarray(xh, np.float32), rtol=2e-3)
        print("ok")
    """)


def test_numba_device_arrays_as_inputs_and_outputs():
    run_child("""
        import warnings
        import numpy as np
        warnings.simplefilter("ignore")
        try:
            from numba import cuda
            if not cuda.is_available():
                raise RuntimeError("numba.cuda sees no GPU")
            cuda.to_device(np.zeros(1))
        except Exception as e:
            print("skip: Numba's CUDA target is not available:", type(e).__name__, e)
            raise SystemExit(0)
        import jitk
        rng = np.random.default_rng(6)
        hx = rng.standard_normal((64, 33)).astype(np.float64)
        hy = rng.standard_normal((64, 33)).astype(np.float64)
        x, y = cuda.to_device(hx), cuda.to_device(hy)
        k = jitk.ElementwiseKernel("T x, T y", "T z", "z = x - y", "numba_sub")
        # A given Numba output, written in place.
        z = cuda.to_device(np.full(hx.shape, np.nan))
        k(x, y, z)
        assert np.array_equal(z.copy_to_host(), hx - hy)
        # Views through __cuda_array_interface__ strides.
        zv = cuda.to_device(np.full((64, 17), np.nan))
        k(x[:, ::2], y[:, ::2], zv)
        assert np.array_equal(zv.copy_to_host(), hx[:, ::2] - hy[:, ::2])
        # On a Numba stream, given by its handle: the result is there once
        # that stream is synchronized.
        s = cuda.stream()
        big = cuda.to_device(np.arange(1 << 20, dtype=np.float32), stream=s)
        out = cuda.to_device(np.full(1 << 20, np.nan, np.float32), stream=s)
        handle = s.handle  # a ctypes pointer, or cuda.bindings' CUstream
        handle = handle.value if hasattr(handle, "value") else int(handle)
        k(big, big, out, stream=handle)
        s.synchronize()
        assert (out.copy_to_host() == 0).all()
        # A raw kernel writing a Numba array.
        raw = jitk.RawKernel(r'''extern "C" __global__ void iota(double *y, int n)
            { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = i; }''', "iota")
        w = cuda.to_device(np.full(1000, np.nan))
        raw((4,), (256,), (w, np.int32(1000)))
        assert np.array_equal(w.copy_to_host(), np.arange(1000, dtype=np.float64))
        # A host array of Numba's kind is refused before anything runs.
        try:
            k(hx, hy)
        except TypeError as e:
            assert "host" in str(e) or "CPU" in str(e) or "device" in str(e), e
        else:
            raise AssertionError("a NumPy array was accepted")
        print("ok")
    """)
