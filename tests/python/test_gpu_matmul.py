"""jitk.matmul and MatmulPlan on PyTorch tensors against PyTorch: a product
with a bias+ReLU epilogue fused into it, in bfloat16, float16 and float32,
with the output given (poisoned) or allocated, transposed operands, a
batch, and a plan autotuned and executed again.
"""

import numpy as np
import pytest

import jitk

pytestmark = pytest.mark.gpu

TOL = {"bfloat16": 2e-2, "float16": 2e-3, "float32": 1e-4}


def operands(torch, m, n, k, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = getattr(torch, dtype)
    a = torch.randn(m, k, device="cuda", generator=g).to(dt)
    b = torch.randn(k, n, device="cuda", generator=g).to(dt)
    bias = torch.randn(n, device="cuda", generator=g)
    return a, b, bias


def reference(torch, a, b, bias):
    return torch.relu(a.double() @ b.double() + bias.double())


def check(torch, got, want, dtype, k):
    # Tolerances scale with the length of the dot products and the output
    # type's precision; every element is compared.
    assert got.shape == want.shape
    err = (got.double() - want).abs()
    bound = TOL[dtype] * (want.abs() + np.sqrt(k))
    assert bool(torch.all(err <= bound)), float((err - bound).max())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_bias_relu_epilogue(torch_lib, dtype):
    torch = torch_lib.m
    m, n, k = 256, 192, 320
    a, b, bias = operands(torch, m, n, k, dtype)
    want = reference(torch, a, b, bias)
    for epilogue in ("relu(acc + bias[col])", "max(acc + bias[col], (T)0)"):
        d = jitk.matmul(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias})
        assert isinstance(d, torch.Tensor) and d.device == a.device
        assert d.dtype == a.dtype and tuple(d.shape) == (m, n)
        check(torch, d, want, dtype, k)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=a.dtype)
        r = jitk.matmul(a, b, epilogue=epilogue,
                        epilogue_inputs={"bias": bias}, out=out)
        assert r is out or r.data_ptr() == out.data_ptr()
        check(torch, out, want, dtype, k)


def test_transposed_operands_and_odd_sizes(torch_lib):
    torch = torch_lib.m
    m, n, k = 131, 67, 45
    at = torch.randn(k, m, device="cuda").t()  # A column-major, m x k
    bt = torch.randn(n, k, device="cuda").t()  # B column-major, k x n
    bias = torch.randn(n, device="cuda")
    d = jitk.matmul(at, bt, epilogue="relu(acc + bias[col])",
                    epilogue_inputs={"bias": bias})
    check(torch, d, reference(torch, at, bt, bias), "float32", k)


def test_alpha_beta_and_c(torch_lib):
    torch = torch_lib.m
    m, n, k = 64, 48, 96
    a, b, _ = operands(torch, m, n, k, "float32", seed=2)
    c = torch.randn(m, n, device="cuda")
    d = jitk.matmul(a, b, c, alpha=0.5, beta=-2.0)
    want = 0.5 * (a.double() @ b.double()) - 2.0 * c.double()
    check(torch, d, want, "float32", k)


def test_batched(torch_lib):
    torch = torch_lib.m
    a = torch.randn(3, 32, 40, device="cuda")
    b = torch.randn(3, 40, 24, device="cuda")
    bias = torch.randn(24, device="cuda")
    d = jitk.matmul(a, b, epilogue="relu(acc + bias[col])",
                    epilogue_inputs={"bias": bias})
    check(torch, d, torch.relu(a.double() @ b.double() + bias.double()),
          "float32", 40)


def test_plan_autotune_execute(torch_lib):
    torch = torch_lib.m
    m, n, k = 512, 256, 384
    a, b, bias = operands(torch, m, n, k, "bfloat16", seed=3)
    plan = jitk.MatmulPlan(a, b, epilogue="relu(acc + bias[col])",
                           epilogue_inputs={"bias": bias})
    assert plan.autotune(a, b, epilogue_inputs={"bias": bias}) is plan
    a2, b2, bias2 = operands(torch, m, n, k, "bfloat16", seed=4)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    plan.execute(a2, b2, epilogue_inputs={"bias": bias2}, out=out)
    check(torch, out, reference(torch, a2, b2, bias2), "bfloat16", k)
    # On a stream of the caller's, ordered after PyTorch's work on it.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        a3 = a2 * 2
        d = plan.execute(a3, b2, epilogue_inputs={"bias": bias2}, stream=s)
        e = d * 1  # PyTorch reads jitk's output on the same stream
    s.synchronize()
    check(torch, e, reference(torch, a3, b2, bias2), "bfloat16", k)


def test_matmul_errors(torch_lib):
    torch = torch_lib.m
    a = torch.randn(8, 5, device="cuda")
    b = torch.randn(6, 4, device="cuda")
    with pytest.raises(ValueError):
        jitk.matmul(a, b)  # inner sizes differ
    with pytest.raises((TypeError, ValueError)):
        jitk.matmul(a.cpu(), torch.randn(5, 4).cpu())
    plan = jitk.MatmulPlan(a, torch.randn(5, 4, device="cuda"),
                           epilogue="relu(acc + bias[col])",
                           epilogue_inputs={"bias": torch.randn(4, device="cuda")})
    with pytest.raises(TypeError):
        plan.execute(a, torch.randn(5, 4, device="cuda"))  # bias missing
    with pytest.raises(jitk.CompileError) as e:
        jitk.MatmulPlan(a, torch.randn(5, 4, device="cuda"),
                        epilogue="acc + nope")
    assert "epilogue:1:" in e.value.log
