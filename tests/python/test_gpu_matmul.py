"""jitk.matmul and MatmulPlan on PyTorch tensors against PyTorch: a product
with a bias+ReLU epilogue fused into it, in bfloat16, float16 and float32,
with the output given (poisoned) or allocated, transposed operands, a
batch, and a plan autotuned and executed again. Then random products on
CuPy arrays and PyTorch tensors (and, under the emulator, on CuPy arrays
over host memory, on the FFMA and mma.sync kernels), exact against NumPy.
"""

import numpy as np
import pytest

import jitk
from jitk_testutil import assert_equal, random_seeds

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
    # An int literal beside acc (max(x, 0)) is as good as one of T.
    for epilogue in ("relu(acc + bias[col])", "max(acc + bias[col], (T)0)",
                     "max(acc + bias[col], 0)", "-min(0, -(acc + bias[col]))"):
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


def test_alpha_and_beta_of_each_execution(lib, monkeypatch):
    """alpha and beta given to an execution replace the plan's and compile
    nothing: jitk.matmul keeps one plan for every value, a plan made with
    beta = 0.5 runs with beta = 0 without reading C (C all NaN), and
    values that are not finite are refused. Small integers: exact."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    monkeypatch.setattr(jitk._matmul, "_plans", {})
    rng = np.random.default_rng(11)
    ha = rng.integers(-3, 4, (40, 24)).astype(np.float32)
    hb = rng.integers(-3, 4, (24, 56)).astype(np.float32)
    hc = rng.integers(-3, 4, (40, 56)).astype(np.float32)
    a, b, c = lib.asarray(ha), lib.asarray(hb), lib.asarray(hc)
    ab = ha.astype(np.float64) @ hb
    jitk.matmul(a, b, c, alpha=1.0, beta=1.0)
    compiles = jitk.cache_stats()["process"]["compiles"]
    for alpha, beta in ((2.0, 0.5), (-0.25, -3.0), (1.0, 0.0), (0.5, 1.0)):
        d = jitk.matmul(a, b, c, alpha=alpha, beta=beta)
        assert_equal(lib.asnumpy(d), (alpha * ab + beta * hc).astype(np.float32))
        d = jitk.matmul(a, b, alpha=alpha)  # no C: beta has nothing to scale
        assert_equal(lib.asnumpy(d), (alpha * ab).astype(np.float32))
    assert len(jitk._matmul._plans) == 2  # with C and without
    plan = jitk.MatmulPlan(a, b, c, alpha=1.0, beta=0.5)
    nan_c = lib.asarray(np.full((40, 56), np.nan, np.float32))
    assert_equal(lib.asnumpy(plan.execute(a, b, nan_c, alpha=3.0, beta=0.0)),
                 (3 * ab).astype(np.float32))
    assert_equal(lib.asnumpy(plan.execute(a, b, c)), (ab + 0.5 * hc).astype(np.float32))
    assert jitk.cache_stats()["process"]["compiles"] <= compiles + 1  # the plan without C
    for bad in (dict(alpha=float("nan")), dict(beta=float("inf"))):
        with pytest.raises(ValueError, match="finite"):
            plan.execute(a, b, c, **bad)
    with pytest.raises(ValueError, match="no C"):
        jitk.MatmulPlan(a, b).execute(a, b, beta=2.0)


def test_matmul_keeps_the_plans_used_last(lib, monkeypatch):
    """jitk.matmul keeps at most _PLANS_KEPT plans, dropping the least
    recently used, so shapes that keep changing do not pile plans up."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    monkeypatch.setattr(jitk._matmul, "_plans", {})
    monkeypatch.setattr(jitk._matmul, "_PLANS_KEPT", 3)
    b = lib.asarray(np.ones((8, 8), np.float32))
    rows = [lib.asarray(np.ones((m, 8), np.float32)) for m in (1, 2, 3, 4)]
    for a in rows[:3]:
        jitk.matmul(a, b)
    jitk.matmul(rows[0], b)  # used again: now the newest
    jitk.matmul(rows[3], b)  # a fourth: the oldest, rows[1]'s, goes
    kept = [key[0][2] for key in jitk._matmul._plans]  # A's shape
    assert kept == [(3, 8), (1, 8), (4, 8)], kept
    assert_equal(lib.asnumpy(jitk.matmul(rows[1], b)), np.full((2, 8), 8, np.float32))


@pytest.mark.parametrize("batch, d_order", [(1, "row"), (2, "row"), (1, "column")])
def test_outputs_and_reductions(lib, monkeypatch, batch, d_order):
    """MatmulPlan(outputs=..., reductions=...): other values of the
    epilogue kept beside D, and reductions of them in the same pass (a
    forward pass's pre-activation, a bias gradient), returned with D as a
    dict of new arrays, in D's order. Small integers: exact."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    rng = np.random.default_rng(12 + batch)
    lead = (batch,) if batch > 1 else ()
    ha = rng.integers(-3, 4, lead + (36, 20)).astype(np.float32)
    hb = rng.integers(-3, 4, lead + (20, 44)).astype(np.float32)
    hbias = rng.integers(-3, 4, 44).astype(np.float32)
    a, b, bias = lib.asarray(ha), lib.asarray(hb), lib.asarray(hbias)
    out = None
    if d_order == "column":
        out = lib.transpose(lib.asarray(np.full((44, 36), np.nan, np.float32)))
    plan = jitk.MatmulPlan(
        a, b, epilogue="max(acc + bias[col], (T)0)", epilogue_inputs={"bias": bias}, out=out,
        outputs={"pre": ("float32", "acc + bias[col]"), "twice": ("float64", "value * 2")},
        reductions={"colsum": ("float32", "value", "sum", "rows"),
                    "rowmax": ("float32", "acc", "max", "columns"),
                    "total": ("float64", "value", "sum", "all")})
    d, extras = plan.execute(a, b, epilogue_inputs={"bias": bias}, out=out)
    pre = ha.astype(np.float64) @ hb + hbias
    value = np.maximum(pre, 0)
    assert sorted(extras) == ["colsum", "pre", "rowmax", "total", "twice"]
    assert_equal(lib.asnumpy(d), value.astype(np.float32))
    assert_equal(lib.asnumpy(extras["pre"]), pre.astype(np.float32))
    assert_equal(lib.asnumpy(extras["twice"]), 2 * value)
    assert_equal(lib.asnumpy(extras["colsum"]), value.sum(axis=-2).astype(np.float32))
    assert_equal(lib.asnumpy(extras["rowmax"]), (pre - hbias).max(axis=-1).astype(np.float32))
    assert_equal(lib.asnumpy(extras["total"]), value.sum(axis=(-2, -1)))
    if d_order == "column":
        # Views of D's order: the transposes of the arrays made.
        assert tuple(extras["pre"].shape) == (36, 44)
    with pytest.raises(ValueError, match="autotune"):
        plan.autotune(a, b, epilogue_inputs={"bias": bias}, out=out)


def test_outputs_and_reductions_refused(lib):
    a = lib.asarray(np.ones((8, 8), np.float32))
    for kw, error, words in [
            (dict(outputs={"x": ("float32",)}), TypeError, "dtype, expression"),
            (dict(outputs={"x": "acc"}), TypeError, "dtype, expression"),
            (dict(reductions={"s": ("float32", "acc", "mean", "rows")}), ValueError, "op"),
            (dict(reductions={"s": ("float32", "acc", "sum", "diagonal")}), ValueError, "axis"),
            (dict(outputs={"x": ("float32", "acc +")}), jitk.CompileError, "output x"),
            (dict(outputs={"x": ("no_such_type", "acc")}), ValueError, "no dtype"),
            (dict(outputs={"acc": ("float32", "acc")}), ValueError, "acc")]:
        with pytest.raises(error, match=words):
            jitk.MatmulPlan(a, a, **kw).execute(a, a)


def test_fp8_scales_and_amax(torch_lib):
    """FP8 inputs with per-tensor scales and the amax of D, as Transformer
    Engine keeps them: D = d_scale * (a_scale * b_scale * A B), d_scale for
    an 8-bit D, amax_d the largest |a_scale * b_scale * A B| before
    d_scale. A row-major and B
    column-major (both K-major, as FP8 tensor cores read them); small
    integers, exact in e4m3 and in the float32 sums."""
    torch = torch_lib.m
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this PyTorch has no float8_e4m3fn")
    rng = np.random.default_rng(21)
    ha = rng.integers(-3, 4, (96, 64)).astype(np.float32)
    hbt = rng.integers(-3, 4, (80, 64)).astype(np.float32)
    a8 = torch.from_numpy(ha).cuda().to(torch.float8_e4m3fn)
    b8 = torch.from_numpy(hbt).cuda().to(torch.float8_e4m3fn).t()
    ab = ha.astype(np.float64) @ hbt.T
    sa, sb, sd = (torch.tensor([v], device="cuda") for v in (0.5, 4.0, 0.25))
    plan = jitk.MatmulPlan(a8, b8, out_dtype="float32", scales=("a", "b"), amax_d=True)
    d, extras = plan.execute(a8, b8, a_scale=sa, b_scale=sb)
    assert_equal(d.cpu().numpy(), (2 * ab).astype(np.float32))
    assert_equal(extras["amax_d"].cpu().numpy(), np.array([2 * np.abs(ab).max()], np.float32))
    # D's scale is for an 8-bit D: rounded to nearest even, as PyTorch
    # converts.
    plan8 = jitk.MatmulPlan(a8, b8, out_dtype="float8_e4m3", scales=("a", "b", "d"), amax_d=True)
    d8, extras = plan8.execute(a8, b8, a_scale=sa, b_scale=sb, d_scale=sd)
    want8 = torch.from_numpy((0.5 * ab).astype(np.float32)).to(torch.float8_e4m3fn)
    assert_equal(d8.cpu().view(torch.uint8).numpy(), want8.view(torch.uint8).numpy())
    assert_equal(extras["amax_d"].cpu().numpy(), np.array([2 * np.abs(ab).max()], np.float32))
    plain = jitk.MatmulPlan(a8, b8, out_dtype="float32").execute(a8, b8)
    assert_equal(plain.cpu().numpy(), ab.astype(np.float32))
    with pytest.raises(TypeError, match="takes d_scale"):
        plan8.execute(a8, b8, a_scale=sa, b_scale=sb)
    with pytest.raises(TypeError, match="without a_scale"):
        jitk.MatmulPlan(a8, b8, out_dtype="float32").execute(a8, b8, a_scale=sa)
    with pytest.raises(TypeError, match="one float32"):
        plan8.execute(a8, b8, a_scale=sa.double(), b_scale=sb, d_scale=sd)
    with pytest.raises(TypeError, match="one float32"):
        plan8.execute(a8, b8, a_scale=torch.ones(2, device="cuda"), b_scale=sb, d_scale=sd)
    with pytest.raises(ValueError, match="scales names"):
        jitk.MatmulPlan(a8, b8, scales=("c",))
    # D may not lie over a scale, which the kernel reads as it starts.
    buf = torch.zeros(96 * 80 + 1, device="cuda")
    out = buf[:-1].view(96, 80)
    plan = jitk.MatmulPlan(a8, b8, out=out, scales=("a", "b"))
    with pytest.raises(ValueError, match="shares memory with b_scale"):
        plan.execute(a8, b8, a_scale=sa, b_scale=buf[80:81], out=out)
    assert float(buf[80]) == 0.0


def test_batched(torch_lib):
    torch = torch_lib.m
    a = torch.randn(3, 32, 40, device="cuda")
    b = torch.randn(3, 40, 24, device="cuda")
    bias = torch.randn(24, device="cuda")
    d = jitk.matmul(a, b, epilogue="relu(acc + bias[col])",
                    epilogue_inputs={"bias": bias})
    check(torch, d, torch.relu(a.double() @ b.double() + bias.double()),
          "float32", 40)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_one_b_for_every_batch(lib, monkeypatch, dtype):
    """``x @ w`` with x of shape (batch, m, k) and w one k x n matrix (or
    an expanded view of one), as a linear layer takes it: one product of
    batch x m rows, with C, ``out`` given or made, outputs, a reduction
    over the columns, and A's rows padded; refused where that product
    would read or number something otherwise. Small integers: exact."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    rng = np.random.default_rng(31)
    batch, m, n, k = 3, 36, 44, 20
    ha = rng.integers(-3, 4, (batch, m, k + 4)).astype(np.float64)
    hb = rng.integers(-3, 4, (k, n)).astype(np.float64)
    hc = rng.integers(-3, 4, (batch, m, n)).astype(np.float64)
    hbias = rng.integers(-3, 4, n).astype(np.float32)
    a = lib.asarray(ha, dtype)[:, :, :k]  # rows k + 4 elements apart
    b, c, bias = lib.asarray(hb, dtype), lib.asarray(hc, dtype), lib.asarray(hbias)
    pre = ha[:, :, :k] @ hb + hbias
    epilogue, inputs = "max(acc + bias[col], (T)0)", {"bias": bias}
    for shared in (b, lib.m.broadcast_to(b, (batch, k, n))):
        d = jitk.matmul(a, shared, epilogue=epilogue, epilogue_inputs=inputs)
        assert tuple(d.shape) == (batch, m, n)
        assert_equal(lib.asnumpy(d).astype(np.float64), np.maximum(pre, 0))
    out = lib.asarray(np.full((batch, m, n), np.nan), dtype)
    plan = jitk.MatmulPlan(
        a, b, c, beta=1.0, epilogue=epilogue, epilogue_inputs=inputs, out=out,
        outputs={"pre": ("float32", "acc + bias[col]")},
        reductions={"rowmax": ("float32", "value", "max", "columns")})
    assert "batch 1" in plan.describe()
    d, extras = plan.execute(a, b, c, epilogue_inputs=inputs, out=out)
    value = np.maximum(pre + hc, 0)
    assert_equal(lib.asnumpy(out).astype(np.float64), value)
    assert_equal(lib.asnumpy(extras["pre"]), (pre + hc).astype(np.float32))
    assert_equal(lib.asnumpy(extras["rowmax"]), value.max(axis=-1).astype(np.float32))
    # Refused: what one product of batch x m rows would number, sum or
    # lay out otherwise.
    # Batches a row apart beyond their m rows.
    apart = lib.asarray(np.zeros((batch, m + 1, k)), dtype)[:, :m, :]
    out_apart = lib.asarray(np.zeros((batch, m + 1, n)), dtype)[:, :m, :]
    for kw, words in [
            (dict(epilogue="acc + row"), "row or batch"),
            (dict(epilogue="acc * batch"), "row or batch"),
            (dict(outputs={"r": ("float32", "value + row")}), "row or batch"),
            (dict(epilogue="acc + ro\\\nw"), "row or batch"),  # spliced: `row`
            (dict(epilogue="acc + PASTE(r, ow)", preamble="#define PASTE(x, y) x##y"),
             "row or batch"),
            # `row` from a macro of the preamble (or of a header it includes).
            (dict(epilogue="acc + ROWIDX", preamble="#define ROWIDX row"), "row or batch"),
            (dict(outputs={"r": ("float32", "value + BATCH")},
                  preamble="#define BATCH batch"), "row or batch"),
            (dict(reductions={"s": ("float32", "ROWIDX", "sum", "columns")},
                  preamble="#define ROWIDX row"), "row or batch"),
            (dict(reductions={"s": ("float32", "value", "sum", "rows")}), "across batches"),
            (dict(reductions={"s": ("float32", "value", "sum", "all")}), "across batches"),
            (dict(out=out_apart), "out must be row-major")]:
        with pytest.raises(ValueError, match=words):
            jitk.MatmulPlan(a, b, **kw)
    with pytest.raises(ValueError, match="A must be row-major"):
        jitk.MatmulPlan(apart, b)
    # Pasting that makes other names, and a preamble whose own code names
    # `row`, are fine; so is an epilogue that starts with a directive.
    preamble = ("#define CAT(x, y) x##y\n"
                "__device__ float twice(float row) { return 2 * row; }")
    for epilogue in ("CAT(tw, ice)(acc)", "#define TWICE(x) CAT(tw, ice)(x)\nTWICE(acc)"):
        d = jitk.MatmulPlan(a, b, epilogue=epilogue, preamble=preamble).execute(a, b)
        assert_equal(lib.asnumpy(d).astype(np.float64), 2 * (ha[:, :, :k] @ hb))
    with pytest.raises(ValueError, match="one matrix for 3 batches"):
        jitk.MatmulPlan(lib.asarray(np.ones((5, m)), dtype), a)  # one A for every batch
    with pytest.raises(ValueError, match="one matrix for 3 batches"):
        jitk.MatmulPlan(a, b, c[0], beta=1.0)  # one C for every batch


def test_several_batch_dimensions(lib, monkeypatch):
    """Batch dimensions as NumPy's matmul takes them: (2, 3, m, k) @ (2, 3,
    k, n) pairs them, (2, 3, m, k) @ (k, n) shares B (one product of 6 m
    rows), D and the outputs of shape (2, 3, m, n); batch dimensions not
    one after another, shapes that do not broadcast, and an execution
    with other batch dimensions are refused. Small integers: exact."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    rng = np.random.default_rng(51)
    m, n, k = 12, 20, 8
    ha = rng.integers(-3, 4, (2, 3, m, k)).astype(np.float64)
    hb = rng.integers(-3, 4, (2, 3, k, n)).astype(np.float64)
    a, b = lib.asarray(ha, "float32"), lib.asarray(hb, "float32")
    d = jitk.matmul(a, b)
    assert tuple(d.shape) == (2, 3, m, n)
    assert_equal(lib.asnumpy(d).astype(np.float64), ha @ hb)
    w = lib.asarray(hb[0, 0], "float32")
    plan = jitk.MatmulPlan(a, w, outputs={"twice": ("float32", "acc * 2")})
    assert "batch 1" in plan.describe()
    d, extras = plan.execute(a, w)
    assert tuple(d.shape) == (2, 3, m, n) and tuple(extras["twice"].shape) == (2, 3, m, n)
    assert_equal(lib.asnumpy(d).astype(np.float64), ha @ hb[0, 0])
    assert_equal(lib.asnumpy(extras["twice"]).astype(np.float64), 2 * (ha @ hb[0, 0]))
    # (2, 3) batches whose second dimension is not the inner one in memory.
    apart = lib.permute(lib.asarray(ha.transpose(1, 0, 2, 3), "float32"), (1, 0, 2, 3))
    with pytest.raises(ValueError, match="one after another"):
        jitk.MatmulPlan(apart, b)
    with pytest.raises(ValueError, match="do not broadcast"):
        jitk.MatmulPlan(a, lib.asarray(hb.reshape(6, k, n), "float32"))
    with pytest.raises(ValueError, match="batch shape"):
        plan.execute(lib.asarray(ha.reshape(3, 2, m, k), "float32"), w)


def test_shapes_and_layouts_as_numpy_takes_them(lib, monkeypatch):
    """What NumPy's matmul would compute otherwise is refused, never
    computed wrong: batch dimensions that broadcast against each other in
    part ((3, 1) beside (1, 3): nine products, where a plan pairs batches),
    an ``out`` or a C whose batch shape is not D's. Outputs of a batch of
    one keep D's shape. A plan made with a column-major ``out`` gives, when
    executed without one, D in that layout; with a padded ``out``, it needs
    one (its kernel writes rows that far apart). A scalar of the epilogue
    that its type at the plan cannot hold is refused (it would wrap, or
    become infinity). Small integers: exact."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    rng = np.random.default_rng(61)
    m, n, k = 4, 5, 6

    def arr(*shape):
        return lib.asarray(rng.integers(-3, 4, shape).astype(np.float64), "float32")

    for sa, sb in [((3, 1), (1, 3)), ((3,), (3, 1)), ((2, 1, 3), (1, 2, 3)), ((2, 3), (1, 3))]:
        with pytest.raises(ValueError, match="only in part"):
            jitk.matmul(arr(*sa, m, k), arr(*sb, k, n))
    with pytest.raises(ValueError, match="holds no matrix"):
        jitk.matmul(arr(0, m, k), arr(k, n))
    with pytest.raises(ValueError, match="pass a copy of a reversed view"):
        jitk.matmul(arr(m, k)[::-1], arr(k, n))
    a, b = arr(3, m, k), arr(3, k, n)
    for shape in [(1, 3, m, n), (3, 1, m, n)]:
        with pytest.raises(ValueError, match="out must be of shape"):
            jitk.MatmulPlan(a, b, out=arr(*shape))
    with pytest.raises(ValueError, match="out must be of shape"):
        jitk.MatmulPlan(a[0], b[0], out=arr(1, m, n))
    a4, b4 = arr(2, 3, m, k), arr(2, 3, k, n)
    for shape in [(3, 2, m, n), (6, m, n)]:
        with pytest.raises(ValueError, match="C's batch shape"):
            jitk.matmul(a4, b4, arr(*shape), beta=1.0)
    with pytest.raises(ValueError, match="C's batch shape is \\(2,\\)"):
        jitk.MatmulPlan(a, b, arr(2, m, n), beta=1.0)
    c = arr(1, 3, m, n)  # broadcasts to D's (3,) as in NumPy
    want = lib.asnumpy(a).astype(np.float64) @ lib.asnumpy(b) + lib.asnumpy(c)[0]
    assert_equal(lib.asnumpy(jitk.matmul(a, b, c, beta=1.0)).astype(np.float64), want)
    one_a, one_b = arr(1, m, k), arr(1, k, n)
    d, extras = jitk.MatmulPlan(
        one_a, one_b, outputs={"o": ("float32", "acc")},
        reductions={"s": ("float32", "acc", "sum", "all")}).execute(one_a, one_b)
    assert tuple(d.shape) == tuple(extras["o"].shape) == (1, m, n)
    assert tuple(extras["s"].shape) == (1,)
    ha, hb = lib.asnumpy(a[0]).astype(np.float64), lib.asnumpy(b[0]).astype(np.float64)
    column_major = lib.transpose(lib.asarray(np.zeros((n, m)), "float32"))
    plan = jitk.MatmulPlan(a[0], b[0], out=column_major)
    d = plan.execute(a[0], b[0])
    assert tuple(d.shape) == (m, n)
    assert_equal(lib.asnumpy(d).astype(np.float64), ha @ hb)
    padded = lib.asarray(np.zeros((m, 64)), "float32")[:, :n]
    plan = jitk.MatmulPlan(a[0], b[0], out=padded)
    with pytest.raises(TypeError, match="execute needs one of that layout"):
        plan.execute(a[0], b[0])
    assert_equal(lib.asnumpy(plan.execute(a[0], b[0], out=padded)).astype(np.float64), ha @ hb)
    for kept, given, error in [(np.int8(2), 1000, "out of bounds for the plan's int8"),
                               (np.uint8(2), -1, "out of bounds for the plan's uint8"),
                               (np.float16(2), 65520.0, "past the largest float16"),
                               (np.float32(2), 1e39, "past the largest float32")]:
        plan = jitk.MatmulPlan(a[0], b[0], epilogue="acc * s", epilogue_inputs={"s": kept})
        with pytest.raises(OverflowError, match=error):
            plan.execute(a[0], b[0], epilogue_inputs={"s": given})
    plan = jitk.MatmulPlan(a[0], b[0], epilogue="acc * s", epilogue_inputs={"s": np.float16(2)})
    d = plan.execute(a[0], b[0], epilogue_inputs={"s": 65504.0})
    assert_equal(lib.asnumpy(d).astype(np.float64), (ha @ hb * 65504.0).astype(np.float32))


def test_epilogue_arrays_of_their_own_dtype(lib, monkeypatch):
    """An epilogue array of any real dtype is read with each element
    converted to the accumulator's type (a float16 or int32 bias beside
    float32 operands); an execution must give the dtype the plan was made
    with, and a complex array is refused. Small integers: exact."""
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    rng = np.random.default_rng(41)
    ha = rng.integers(-3, 4, (24, 16)).astype(np.float64)
    hb = rng.integers(-3, 4, (16, 40)).astype(np.float64)
    hbias = rng.integers(-3, 4, 40).astype(np.float64)
    a, b = lib.asarray(ha, "float32"), lib.asarray(hb, "float32")
    epilogue = "relu(acc + bias[col])"
    for dtype in ("float16", "int32", "float64"):
        bias = lib.asarray(hbias, dtype)
        plan = jitk.MatmulPlan(a, b, epilogue=epilogue, epilogue_inputs={"bias": bias})
        d = plan.execute(a, b, epilogue_inputs={"bias": bias})
        assert_equal(lib.asnumpy(d), np.maximum(ha @ hb + hbias, 0).astype(np.float32))
        other = lib.asarray(hbias, "float32")
        with pytest.raises(TypeError, match=f"made with {dtype}"):
            plan.execute(a, b, epilogue_inputs={"bias": other})
    with pytest.raises(TypeError, match="real dtypes"):
        jitk.MatmulPlan(a, b, epilogue=epilogue,
                        epilogue_inputs={"bias": lib.asarray(hbias, "complex64")})


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




def test_out_dtype(lib, monkeypatch):
    # D in float32 from float16 operands, through jitk.matmul and a plan:
    # exact, as the small integers make every product and sum.
    if lib.name == "cupy-emulated":
        monkeypatch.setenv("JITK_MM_KIND", "simt")
    rng = np.random.default_rng(77)
    ha = rng.integers(-3, 4, size=(70, 40)).astype(np.float64)
    hb = rng.integers(-3, 4, size=(40, 50)).astype(np.float64)
    a, b = lib.asarray(ha, "float16"), lib.asarray(hb, "float16")
    d = jitk.matmul(a, b, out_dtype="float32", epilogue="max(acc, 0) * 1000")
    assert lib.dtype_name(d) == "float32"
    # 1000 times a dot product of up to 360 is past float16's integers.
    assert_equal(lib.asnumpy(d).astype(np.float64), np.maximum(ha @ hb, 0) * 1000)
    plan = jitk.MatmulPlan(a, b, out_dtype="float32")
    assert plan.out_dtype == "float32"
    assert_equal(lib.asnumpy(plan.execute(a, b)).astype(np.float64), ha @ hb)
    with pytest.raises(ValueError, match="out_dtype"):
        jitk.matmul(a, b, out=lib.asarray(np.zeros((70, 50)), "float16"), out_dtype="float32")


def rounded(x, dtype):
    """float64 values `x` rounded once to `dtype` (bfloat16: to nearest
    even from float32, which holds every value here exactly), as NumPy
    arrays the test compares with what the library gives back."""
    if dtype != "bfloat16":
        return x.astype(dtype)
    bits = x.astype(np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.view(np.float32)


@random_seeds
def test_random_matmuls(lib, seed, monkeypatch):
    # Small integers, so that every product and sum is exact in each input
    # type and in the float32 accumulator, and D is the exact value rounded
    # once to its type: results must equal NumPy's in float64, so rounded.
    rng = np.random.default_rng(4000 + seed)
    dtypes = ["float16", "float32", "float64"] + (["bfloat16"] if lib.name == "torch" else [])
    dtype = str(rng.choice(dtypes))
    if lib.name == "cupy-emulated":
        # The stand-in device is an sm_90, whose wgmma kernels the emulator
        # cannot run: the FFMA or mma.sync kernel instead.
        monkeypatch.setenv("JITK_MM_KIND", str(rng.choice(["simt", "mma"])))
    m, n, k = (int(rng.choice([1, 7, 16, 33, 64, 100, 136])) for _ in range(3))
    batch = int(rng.choice([0, 0, 2, 3]))  # 0: no batch dimension
    lead = (batch,) if batch else ()

    def operand(rows, cols):
        """A random operand and its values, row-major or a transposed view."""
        host = rng.integers(-3, 4, size=lead + (rows, cols)).astype(np.float64)
        if rng.random() < 0.5:
            return lib.asarray(host, dtype), host
        t = np.ascontiguousarray(np.swapaxes(host, -1, -2))
        dev = lib.asarray(t, dtype)
        return lib.permute(dev, tuple(range(len(lead))) + (len(lead) + 1, len(lead))), host

    a, ha = operand(m, k)
    b, hb = operand(k, n)
    want = ha @ hb
    kwargs = {}
    alpha = float(rng.choice([1.0, 0.5, 2.0]))
    if alpha != 1.0:
        kwargs["alpha"] = alpha
        want = alpha * want
    c = None
    if rng.random() < 0.4:
        beta = float(rng.choice([0.0, 1.0, -2.0]))
        hc = rng.integers(-3, 4, size=lead + (m, n)).astype(np.float64)
        if beta == 0.0:
            hc[...] = np.nan  # BLAS's rule: C is not read when beta is 0
        c = lib.asarray(hc, dtype)
        kwargs["beta"] = beta
        if beta != 0.0:
            want = want + beta * hc
    if dtype == "float32" and rng.random() < 0.5:
        kwargs["compute"] = "tf32"  # exact too: the values need few bits
    out_dtype = dtype
    if dtype in ("float16", "bfloat16") and rng.random() < 0.3:
        out_dtype = kwargs["out_dtype"] = "float32"  # D wider than A and B
    if rng.random() < 0.5:
        hbias = rng.integers(-3, 4, size=n).astype(np.float64)
        kwargs["epilogue"] = str(rng.choice(["relu(acc + bias[col])",
                                             "max(acc + bias[col], (T)0)",
                                             "max(acc + bias[col], 0)",
                                             "-min(0, -(acc + bias[col]))"]))
        # The epilogue reads its arrays of any real dtype, each element
        # converted to the accumulator's type: the accumulator's own, the
        # operands' (a bfloat16 bias beside bfloat16 operands) or an int.
        acc = "float64" if dtype == "float64" else "float32"
        kwargs["epilogue_inputs"] = {"bias": lib.asarray(hbias, str(rng.choice([acc, dtype,
                                                                               "int32"])))}
        want = np.maximum(want + hbias, 0)
    if rng.random() < 0.5:
        out = lib.asarray(np.full(lead + (m, n), np.nan), out_dtype)
        got = jitk.matmul(a, b, c, out=out, **kwargs)
        assert lib.asnumpy(got).shape == want.shape
        got = out
    else:
        got = jitk.matmul(a, b, c, **kwargs)
        assert lib.is_native(got) and lib.dtype_name(got) == out_dtype
    assert_equal(lib.asnumpy(got).astype(np.float64), rounded(want, out_dtype).astype(np.float64))
