"""PyTorch on the cases of `jitk-bench sweep`: every elementwise and
reduction layout the sweep lists, run through torch on views built with
torch.as_strided over buffers of the case's sizes, timed as the other peers
time (median of 20 CUDA-event timings after 3 warm-up calls) and reported as
a ratio to the device-to-device copy bandwidth measured in this process.
Every output element is checked against a float64 (complex128) reference
computed on the GPU from the same input views.

    python3 tools/bench/peers/sweep.py [--bench PATH] [--cases FILE]
                                       [--json OUT] [--only REGEX]
    python3 tools/bench/peers/sweep.py --self-test

Without --cases the cases come from `<bench> sweep --list`. The bench is
$JITK_BENCH, else ../bin/jitk-bench beside this folder (the GPU bundle's
layout), else the newest <repo>/build*/bin/jitk-bench. The exit status is 1
when some output was outside its tolerance or some case was malformed, after
every case has run; 0 otherwise.

torch is imported inside main, so that --help and --self-test work on a
machine without it.
"""

import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Inputs each op takes, and whether it is an elementwise op or a reduction.
OPS = {"mul2": ("ew", 1), "add": ("ew", 2), "addmul": ("ew", 3), "sum": ("red", 1)}

# The dtype names the sweep uses, with the ones it may grow into. The values
# are the attribute names in torch, so this table needs no torch to import.
DTYPES = {
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
    "float64": "float64", "complex64": "complex64", "complex128": "complex128",
    "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32",
    "int64": "int64",
}
FLOATS = {"float16", "bfloat16", "float32", "float64"}
COMPLEXES = {"complex64", "complex128"}
INTS = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64}

# Relative precision of each float dtype (the gap between 1 and the next
# value); a complex dtype is checked per component with its parts' figure.
EPS = {"float16": 9.8e-4, "bfloat16": 7.9e-3, "float32": 1.2e-7,
       "float64": 2.3e-16, "complex64": 1.2e-7, "complex128": 2.3e-16}
# The smallest normal value of each float dtype: the absolute slack of an
# elementwise check, so that results near zero are not held to a relative
# bound they cannot meet.
TINY = {"float16": 6.1e-5, "bfloat16": 1.2e-38, "float32": 1.2e-38,
        "float64": 2.3e-308, "complex64": 1.2e-38, "complex128": 2.3e-308}

NEGATIVE_STRIDE_REASON = "PyTorch has no negative strides (flip copies)"
FOUR_GIB = 4 << 30


# ---------------------------------------------------------------- no torch

def describe_array(desc, what="array"):
    """Turns an ARRAY description into (shape, strides, offset, has_negative,
    alloc), checking that every element the view reaches lies inside its
    buffer of `alloc` elements. Raises ValueError saying what is wrong."""
    if not isinstance(desc, dict):
        raise ValueError(f"{what}: expected an object, got {type(desc).__name__}")
    for key in ("alloc", "shape", "strides", "offset"):
        if key not in desc:
            raise ValueError(f"{what}: missing '{key}'")
    alloc, shape, strides, offset = desc["alloc"], desc["shape"], desc["strides"], desc["offset"]
    if not _is_int(alloc) or alloc < 0:
        raise ValueError(f"{what}: alloc must be an integer >= 0, got {alloc!r}")
    if not _is_int(offset) or offset < 0:
        raise ValueError(f"{what}: offset must be an integer >= 0, got {offset!r}")
    if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
        raise ValueError(f"{what}: shape must be a list of integers >= 0, got {shape!r}")
    if not isinstance(strides, list) or not all(_is_int(s) for s in strides):
        raise ValueError(f"{what}: strides must be a list of integers, got {strides!r}")
    if len(shape) != len(strides):
        raise ValueError(f"{what}: shape {shape} and strides {strides} differ in length")
    has_negative = any(st < 0 for st in strides)
    # A view with no elements reaches no element, so any offset is in bounds
    # (as_strided still wants the offset inside the storage, which the run
    # does not rely on: such a case has nothing to time).
    if all(s > 0 for s in shape):
        low = offset + sum((s - 1) * st for s, st in zip(shape, strides) if st < 0)
        high = offset + sum((s - 1) * st for s, st in zip(shape, strides) if st > 0)
        if low < 0:
            raise ValueError(f"{what}: the view reaches element {low}, before its buffer "
                             f"(shape {shape}, strides {strides}, offset {offset})")
        if high >= alloc:
            raise ValueError(f"{what}: the view reaches element {high}, past its buffer of "
                             f"{alloc} (shape {shape}, strides {strides}, offset {offset})")
    return tuple(shape), tuple(strides), offset, has_negative, alloc


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _prod(values):
    n = 1
    for v in values:
        n *= v
    return n


def _broadcasts_to(shape, target):
    """Whether `shape` broadcasts to `target` under NumPy's rules."""
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target)):
        if s != t and s != 1:
            return False
    return True


def parse_case(obj):
    """Checks one case object from `jitk-bench sweep --list` and returns it
    as a dict with its arrays described (see describe_array) under
    'in_views' and 'out_view'. Raises ValueError for a malformed case."""
    if not isinstance(obj, dict):
        raise ValueError("a case must be a JSON object")
    cid = obj.get("id")
    if not isinstance(cid, str) or not cid:
        raise ValueError("a case needs a non-empty string 'id'")
    for key in ("kind", "op", "dtype", "out_dtype", "inputs", "output", "elements", "bytes"):
        if key not in obj:
            raise ValueError(f"{cid}: missing '{key}'")
    op = obj["op"]
    if op not in OPS:
        raise ValueError(f"{cid}: unknown op {op!r} (known: {', '.join(OPS)})")
    kind, n_inputs = OPS[op]
    if obj["kind"] != kind:
        raise ValueError(f"{cid}: op {op} is of kind {kind!r}, the case says {obj['kind']!r}")
    for key in ("dtype", "out_dtype"):
        if obj[key] not in DTYPES:
            raise ValueError(f"{cid}: unknown {key} {obj[key]!r}")
    inputs = obj["inputs"]
    if not isinstance(inputs, list) or len(inputs) != n_inputs:
        raise ValueError(f"{cid}: op {op} takes {n_inputs} input(s), the case has "
                         f"{len(inputs) if isinstance(inputs, list) else inputs!r}")
    in_views = [describe_array(a, f"{cid}: input {i}") for i, a in enumerate(inputs)]
    out_view = describe_array(obj["output"], f"{cid}: output")
    out_shape = out_view[0]
    if kind == "ew":
        for i, v in enumerate(in_views):
            if not _broadcasts_to(v[0], out_shape):
                raise ValueError(f"{cid}: input {i} of shape {list(v[0])} does not broadcast "
                                 f"to the output's {list(out_shape)}")
        loop = _prod(out_shape)
        axes = None
    else:
        in_shape = in_views[0][0]
        axes = obj.get("axes")
        if not isinstance(axes, list) or not all(_is_int(a) for a in axes):
            raise ValueError(f"{cid}: a reduction needs 'axes', a list of integers")
        if not axes:
            raise ValueError(f"{cid}: 'axes' is empty (torch.sum reads dim=() as every axis)")
        if len(set(axes)) != len(axes) or any(a < 0 or a >= len(in_shape) for a in axes):
            raise ValueError(f"{cid}: axes {axes} are not distinct axes of an input of "
                             f"{len(in_shape)} dimension(s)")
        kept = tuple(s for d, s in enumerate(in_shape) if d not in axes)
        if kept != out_shape:
            raise ValueError(f"{cid}: the output's shape {list(out_shape)} is not the input's "
                             f"kept axes {list(kept)}")
        loop = _prod(in_shape)
    if obj["elements"] != loop:
        raise ValueError(f"{cid}: 'elements' is {obj['elements']}, the shapes give {loop}")
    if not isinstance(obj["bytes"], (int, float)) or obj["bytes"] < 0:
        raise ValueError(f"{cid}: 'bytes' must be a number >= 0")
    case = dict(obj)
    case["axes"] = axes
    case["in_views"] = in_views
    case["out_view"] = out_view
    return case


def read_cases(lines, source):
    """Parses JSON lines into case objects (blank lines skipped); the
    checking is left to parse_case, so that one bad case does not stop the
    others."""
    cases = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            cases.append(json.loads(line))
        except json.JSONDecodeError as ex:
            raise SystemExit(f"{source}:{n}: not a JSON object: {ex}")
    return cases


def find_bench():
    """The jitk-bench to ask for cases: $JITK_BENCH, the GPU bundle's
    bin/jitk-bench beside this folder, or the newest build*/bin/jitk-bench
    of the repository this script is in."""
    env = os.environ.get("JITK_BENCH")
    if env:
        return env
    bundled = os.path.normpath(os.path.join(HERE, "..", "bin", "jitk-bench"))
    if os.access(bundled, os.X_OK):
        return bundled
    repo = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
    built = [p for p in glob.glob(os.path.join(repo, "build*", "bin", "jitk-bench"))
             if os.access(p, os.X_OK)]
    if built:
        # Several build folders may hold one; the one built last is the
        # likeliest to match the source.
        return max(built, key=os.path.getmtime)
    return None


def wrap_int(v, bits, signed=True):
    """A Python integer wrapped as C stores it in an integer of `bits` bits
    (two's complement when signed): the rule the int reference follows."""
    m = 1 << bits
    v %= m
    if signed and v >= m >> 1:
        v -= m
    return v


def first_line(ex):
    text = str(ex).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(ex).__name__}: {line}" if line else type(ex).__name__


def self_test():
    """Checks the parts that need no torch; prints what it checked."""
    ok = describe_array({"alloc": 12, "shape": [3, 4], "strides": [4, 1], "offset": 0})
    assert ok == ((3, 4), (4, 1), 0, False, 12), ok
    # The last element reachable is exactly alloc - 1.
    describe_array({"alloc": 13, "shape": [3, 4], "strides": [4, 1], "offset": 1})
    # Broadcast: stride 0 reaches only the first row.
    bcast = describe_array({"alloc": 4, "shape": [1000, 4], "strides": [0, 1], "offset": 0})
    assert bcast[0] == (1000, 4)
    # Reversed: a negative stride starting at the last element.
    neg = describe_array({"alloc": 8, "shape": [8], "strides": [-1], "offset": 7})
    assert neg[3] is True
    # Transposed and reversed together.
    describe_array({"alloc": 12, "shape": [4, 3], "strides": [-1, 4], "offset": 3})
    # A scalar and an empty view.
    assert describe_array({"alloc": 1, "shape": [], "strides": [], "offset": 0})[0] == ()
    describe_array({"alloc": 0, "shape": [0, 5], "strides": [5, 1], "offset": 0})
    bad = [
        ({"alloc": 12, "shape": [3, 4], "strides": [4, 1], "offset": 1}, "past its buffer"),
        ({"alloc": 8, "shape": [8], "strides": [-1], "offset": 6}, "before its buffer"),
        ({"alloc": 12, "shape": [4, 3], "strides": [-1, 4], "offset": 2}, "before its buffer"),
        ({"alloc": 1, "shape": [], "strides": [], "offset": 1}, "past its buffer"),
        ({"alloc": 12, "shape": [3, 4], "strides": [4], "offset": 0}, "differ in length"),
        ({"alloc": 12, "shape": [3, 4], "strides": [4, 1]}, "missing 'offset'"),
        ({"alloc": -1, "shape": [], "strides": [], "offset": 0}, "alloc"),
        ({"alloc": 4, "shape": [2.0], "strides": [1], "offset": 0}, "shape"),
    ]
    for desc, words in bad:
        try:
            describe_array(desc, "t")
        except ValueError as ex:
            assert words in str(ex), (words, str(ex))
        else:
            raise AssertionError(f"accepted {desc}")

    def arr(shape, strides=None, offset=0, alloc=None):
        if strides is None:
            strides, acc = [], 1
            for s in reversed(shape):
                strides.insert(0, acc)
                acc *= s
        if alloc is None:
            alloc = offset + sum((s - 1) * st for s, st in zip(shape, strides) if st > 0) + 1
        return {"alloc": alloc, "shape": shape, "strides": strides, "offset": offset}

    ew = {"id": "ew/t", "family": "ew-t", "kind": "ew", "op": "add", "dtype": "float32",
          "out_dtype": "float32", "inputs": [arr([4, 8]), arr([4, 8], [0, 1], alloc=8)],
          "output": arr([4, 8]), "elements": 32, "bytes": 4 * (32 + 8 + 32), "size_log2": 5.0}
    c = parse_case(ew)
    assert c["in_views"][1][1] == (0, 1) and c["axes"] is None
    red = {"id": "red/t", "family": "red-t", "kind": "red", "op": "sum", "dtype": "float16",
           "out_dtype": "float32", "inputs": [arr([4, 8, 2])], "output": arr([8]), "axes": [0, 2],
           "elements": 64, "bytes": 64 * 2 + 8 * 4, "size_log2": 6.0}
    assert parse_case(red)["axes"] == [0, 2]
    flip = dict(ew, inputs=[arr([4, 8], [-8, 1], offset=24), arr([4, 8])])
    assert parse_case(flip)["in_views"][0][3] is True
    bad_cases = [
        (dict(ew, op="sub"), "unknown op"),
        (dict(ew, kind="red"), "of kind"),
        (dict(ew, inputs=[arr([4, 8])]), "takes 2 input"),
        (dict(ew, inputs=[arr([4, 8]), arr([3, 8])]), "does not broadcast"),
        (dict(ew, elements=31), "'elements'"),
        (dict(ew, dtype="float8"), "unknown dtype"),
        (dict(red, axes=[0, 3]), "not distinct axes"),
        (dict(red, axes=[0, 0]), "not distinct axes"),
        (dict(red, axes=[]), "empty"),
        (dict(red, output=arr([4, 2])), "kept axes"),
        ({k: v for k, v in red.items() if k != "axes"}, "'axes'"),
        (dict(ew, output={"alloc": 31, "shape": [4, 8], "strides": [8, 1], "offset": 0}),
         "past its buffer"),
    ]
    for obj, words in bad_cases:
        try:
            parse_case(obj)
        except ValueError as ex:
            assert words in str(ex), (words, str(ex))
        else:
            raise AssertionError(f"accepted {obj['id']}: {words}")
    lines = [json.dumps(ew), "", json.dumps(red)]
    assert [o["id"] for o in read_cases(lines, "t")] == ["ew/t", "red/t"]

    assert wrap_int(127 + 1, 8) == -128 and wrap_int(-129, 8) == 127
    assert wrap_int(-50 * 2, 8) == -100 and wrap_int(100 * 2, 8) == -56
    assert wrap_int(300, 8, signed=False) == 44
    # The tensor rule in the run is ((v + 128) % 256) - 128, with a floor
    # modulo as torch's % has: it must agree with wrap_int.
    for v in range(-1000, 1000, 7):
        assert ((v + 128) % 256) - 128 == wrap_int(v, 8)
    reason = first_line(RuntimeError("no kernel for Half\nmore"))
    assert reason == "RuntimeError: no kernel for Half", reason
    assert set(EPS) == FLOATS | COMPLEXES and set(TINY) == set(EPS)
    print("sweep.py self-test: describe_array, parse_case, read_cases, wrap_int passed")
    return 0


# ------------------------------------------------------------------- torch

class Runner:
    """Builds, times and checks cases in torch. The torch module is passed
    in, so that importing this file never needs it."""

    def __init__(self, torch, timed):
        self.torch = torch
        self.timed = timed
        self.copy_gbs = self.measure_copy()

    def dt(self, name):
        return getattr(self.torch, DTYPES[name])

    def measure_copy(self):
        """The same measure as the other peers and as jitk-bench: 1 GiB of
        float32 copied device to device, bytes read plus written, in GB/s.
        The 2 GiB it takes go back to the driver before the cases run."""
        ms = self._copy_ms()
        self.torch.cuda.empty_cache()
        return 2 * (1 << 28) * 4 / (ms * 1e-3) / 1e9

    def _copy_ms(self):
        # Its own function, so that the buffers are gone when it returns.
        torch = self.torch
        src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
        dst = torch.empty_like(src)
        return self.timed(lambda: dst.copy_(src))

    def random_buffer(self, name, n):
        """n fresh random elements of dtype `name` on the GPU: floats (and
        each part of a complex) uniform in [-0.5, 0.5), integers in
        [-50, 50) (a signed integer) or [0, 100) (an unsigned one)."""
        torch = self.torch
        if name in FLOATS:
            return torch.rand(n, dtype=self.dt(name), device="cuda").sub_(0.5)
        if name in COMPLEXES:
            part = torch.float32 if name == "complex64" else torch.float64
            re_ = torch.rand(n, dtype=part, device="cuda").sub_(0.5)
            im = torch.rand(n, dtype=part, device="cuda").sub_(0.5)
            return torch.complex(re_, im)
        low, high = (0, 100) if name == "uint8" else (-50, 50)
        return torch.randint(low, high, (n,), dtype=self.dt(name), device="cuda")

    def poisoned_buffer(self, name, n):
        """n elements that no correct output equals by chance: NaN for
        floats and complexes, 0x7f in every byte for integers."""
        torch = self.torch
        if name in FLOATS or name in COMPLEXES:
            fill = complex(math.nan, math.nan) if name in COMPLEXES else math.nan
            return torch.full((n,), fill, dtype=self.dt(name), device="cuda")
        bits = INTS[name]
        fill = int.from_bytes(b"\x7f" * (bits // 8), "little")
        return torch.full((n,), fill, dtype=self.dt(name), device="cuda")

    def view(self, buf, desc):
        shape, strides, offset, _, _ = desc
        return self.torch.as_strided(buf, shape, strides, offset)

    def run_case(self, case):
        """Times one parsed case; returns the result object."""
        torch = self.torch
        cid = case["id"]
        if any(v[3] for v in case["in_views"]) or case["out_view"][3]:
            return {"id": cid, "who": "torch", "skipped": NEGATIVE_STRIDE_REASON}
        dtype, out_dtype = case["dtype"], case["out_dtype"]
        bufs = [self.random_buffer(dtype, v[4]) for v in case["in_views"]]
        xs = [self.view(b, v) for b, v in zip(bufs, case["in_views"])]
        out_buf = self.poisoned_buffer(out_dtype, case["out_view"][4])
        z = self.view(out_buf, case["out_view"])
        op = case["op"]
        # One function per op, so that the timed call does no choosing.
        if op == "mul2":
            def fn():
                torch.mul(xs[0], 2, out=z)
        elif op == "add":
            def fn():
                torch.add(xs[0], xs[1], out=z)
        elif op == "addmul":
            def fn():
                torch.addcmul(xs[0], xs[1], xs[2], out=z)
        else:
            dims = tuple(case["axes"])
            out_dt = self.dt(out_dtype)

            def fn():
                torch.sum(xs[0], dim=dims, dtype=out_dt, out=z)
        # One call outside the timing, so that an op torch cannot do for
        # these dtypes or views is a skip with torch's own words.
        try:
            fn()
            torch.cuda.synchronize()
        except Exception as ex:  # noqa: BLE001 (any refusal is a skip)
            if is_oom(torch, ex):
                raise
            return {"id": cid, "who": "torch", "skipped": first_line(ex)}
        ms = self.timed(fn)
        gbs = case["bytes"] / (ms * 1e-3) / 1e9
        wrong = self.count_wrong(case, xs, z)
        return {"id": cid, "who": "torch", "ms": ms, "gbs": gbs, "copy_gbs": self.copy_gbs,
                "ratio": gbs / self.copy_gbs, "wrong": wrong}

    def reference(self, case, xs):
        """The exact (float64, complex128 or int64) result, and the scale
        its error is measured against where |result| is not enough (None
        elsewhere): for a sum, the sum of the terms' magnitudes; for addmul,
        |x| + |y*w| (see count_wrong). A complex scale holds the real
        components' scale in its real part and the imaginary ones' in its
        imaginary part."""
        torch = self.torch
        dtype = case["dtype"]
        if dtype in COMPLEXES:
            wide = torch.complex128
        elif dtype in INTS and case["out_dtype"] in INTS:
            wide = torch.int64
        else:
            wide = torch.float64
        ws = [x.to(wide) for x in xs]
        op = case["op"]
        if op == "mul2":
            return ws[0] * 2, None
        if op == "add":
            return ws[0] + ws[1], None
        if op == "addmul":
            ref = ws[0] + ws[1] * ws[2]
            if wide == torch.int64:
                return ref, None
            if wide == torch.complex128:
                x, y, w = ws
                re_ = x.real.abs() + (y.real * w.real).abs() + (y.imag * w.imag).abs()
                im = x.imag.abs() + (y.real * w.imag).abs() + (y.imag * w.real).abs()
                return ref, torch.complex(re_, im)
            return ref, ws[0].abs() + (ws[1] * ws[2]).abs()
        dims = tuple(case["axes"])
        ref = ws[0].sum(dim=dims)
        if wide == torch.complex128:
            mag = torch.complex(ws[0].real.abs().sum(dim=dims), ws[0].imag.abs().sum(dim=dims))
        elif wide == torch.float64:
            mag = ws[0].abs().sum(dim=dims)
        else:
            mag = None
        return ref, mag

    def count_wrong(self, case, xs, z):
        """Output elements outside their tolerance; NaN is always wrong."""
        torch = self.torch
        ref, mag = self.reference(case, xs)
        out_dtype = case["out_dtype"]
        if out_dtype in INTS:
            bits = INTS[out_dtype]
            if bits < 64:
                if out_dtype == "uint8":
                    ref = ref % 256
                else:
                    half = 1 << (bits - 1)
                    ref = ((ref + half) % (2 * half)) - half
            bad = z.to(torch.int64) != ref
            return int(bad.sum().item())
        got = z.to(torch.complex128 if out_dtype in COMPLEXES else torch.float64)
        if ref.is_complex() and not got.is_complex():
            raise RuntimeError(f"a complex result written to {out_dtype}")
        if got.is_complex():
            # Each component is held to the bound a real of the parts'
            # precision would be.
            if not ref.is_complex():
                ref = ref.to(torch.complex128)
            got, ref = torch.view_as_real(got), torch.view_as_real(ref)
            if mag is not None:
                mag = torch.view_as_real(mag.to(torch.complex128))
        eps_out = EPS[out_dtype]
        if case["kind"] == "ew":
            # Where the inputs' dtype is coarser than the output's (float16
            # in, float32 out), torch may round in the inputs' dtype before
            # widening, so the coarser of the two precisions bounds the
            # error; integer inputs round nothing of their own.
            eps = max(eps_out, EPS.get(case["dtype"], 0.0))
            tiny = max(TINY[out_dtype], TINY.get(case["dtype"], 0.0))
            # x * 2 and x + y are rounded once, so |result| bounds their
            # error. x + y*w may round the product before the sum (a
            # complex product always rounds its two real products before
            # subtracting them), and where the terms cancel that error is
            # far above eps * |result|: it is bounded by eps times the
            # terms' magnitudes instead.
            scale = ref.abs() if mag is None else mag
            tol = 2 * eps * scale + tiny
        else:
            tol = 64 * eps_out * mag + eps_out * ref.abs()
        ok = (got - ref).abs() <= tol
        if got.dim() > z.dim():
            ok = ok.all(dim=-1)
        return int((~ok).sum().item())


def is_oom(torch, ex):
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(ex, oom):
        return True
    return isinstance(ex, RuntimeError) and "out of memory" in str(ex)


def load_cases(args):
    if args.cases:
        with open(args.cases, encoding="utf-8") as f:
            return read_cases(f, args.cases)
    bench = args.bench or find_bench()
    if not bench:
        raise SystemExit("sweep.py: no jitk-bench found: "
                         "give --bench or --cases, or set JITK_BENCH")
    try:
        proc = subprocess.run([bench, "sweep", "--list"], capture_output=True, text=True,
                              check=False)
    except OSError as ex:
        raise SystemExit(f"sweep.py: cannot run {bench}: {ex}") from None
    if proc.returncode != 0:
        raise SystemExit(f"sweep.py: `{bench} sweep --list` failed ({proc.returncode}):\n"
                         f"{proc.stderr.strip()}")
    return read_cases(proc.stdout.splitlines(), f"{bench} sweep --list")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="PyTorch on the cases of `jitk-bench sweep`, as ratios to the copy bandwidth.")
    ap.add_argument("--bench", help="jitk-bench to ask for the cases (default: $JITK_BENCH, "
                    "../bin/jitk-bench, then the newest build*/bin/jitk-bench)")
    ap.add_argument("--cases", help="read the cases from this file (the output of "
                    "`jitk-bench sweep --list`) instead of running the bench")
    ap.add_argument("--json", help="write one JSON result per line to this file")
    ap.add_argument("--only", help="run only the cases whose id matches this regular expression")
    ap.add_argument("--self-test", action="store_true",
                    help="check the case parsing, which needs no torch, and exit")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()

    objs = load_cases(args)
    only = re.compile(args.only) if args.only else None

    import torch  # here, so that --help and --self-test need no torch
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    from _timing import timed

    runner = Runner(torch, timed)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: "
          f"copy_, 1 GiB: {runner.copy_gbs:.1f} GB/s", flush=True)
    out = open(args.json, "w", encoding="utf-8") if args.json else None
    failed = False
    try:
        for obj in objs:
            cid = obj.get("id") if isinstance(obj, dict) else None
            if only and not (isinstance(cid, str) and only.search(cid)):
                continue
            try:
                case = parse_case(obj)
            except ValueError as ex:
                # A malformed case is the benchmark's error: said, counted
                # in the exit status, and the other cases still run.
                failed = True
                result = {"id": cid or "?", "who": "torch", "skipped": f"invalid case: {ex}"}
            else:
                torch.cuda.reset_peak_memory_stats()
                try:
                    result = runner.run_case(case)
                except Exception as ex:  # noqa: BLE001 (one case's failure is its own)
                    reason = first_line(ex)
                    if is_oom(torch, ex):
                        reason = "out of memory: " + reason
                    result = {"id": cid, "who": "torch", "skipped": reason}
                # The case's tensors are gone once run_case returns; the
                # cache is handed back only after a large case, since
                # emptying it costs a synchronization and fresh allocations.
                oom = "out of memory" in result.get("skipped", "")
                if oom or torch.cuda.max_memory_allocated() > FOUR_GIB:
                    torch.cuda.empty_cache()
            if "skipped" in result:
                print(f"{result['id']:<56} skipped: {result['skipped']}", flush=True)
            else:
                if result["wrong"] > 0:
                    failed = True
                print(f"{result['id']:<56} {result['gbs']:9.1f} GB/s"
                      f"  {result['ratio']:6.3f} of copy  {result['wrong']} wrong", flush=True)
            if out:
                out.write(json.dumps(result) + "\n")
                out.flush()
    finally:
        if out:
            out.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
