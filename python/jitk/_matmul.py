"""Fused matmul plans: D = epilogue(alpha * A @ B + beta * C) in one kernel.

A plan is made once for a shape, dtypes, layouts and epilogue (generated,
compiled and cached as the C library's jitk_matmul plans are), then run many
times, in the spirit of nvmath-python's plan and execute. The epilogue is an
expression over ``acc`` (the accumulator), ``row``, ``col``, ``batch`` and
the named epilogue inputs: arrays are read as the accumulator's type
(``bias[col]``), scalars are values; ``relu``, ``gelu``, ``sigmoid`` and
``silu`` are there to use, and ``max`` and ``min`` take an int beside the
accumulator (``max(acc + bias[col], 0)``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from . import _jitk

_COMPUTE = {
    None: 0,
    "default": 0,
    "float32": 1,
    "tf32": 2,
    "float16": 3,
    "bfloat16": 4,
    "float64": 5,
    "float32_fast_accum": 6,
}


_REDUCE_OPS = {"sum": 0, "max": 1, "min": 2}
_REDUCE_AXES = {"rows": 0, "columns": 1, "all": 2}


def _named(given: Mapping[str, Any] | None, what: str) -> Mapping[str, Any]:
    """``given`` when it is a mapping whose keys are all str (None: an
    empty one); a TypeError naming ``what`` otherwise."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise TypeError(f"{what} must be a mapping of names, not {type(given).__name__}")
    for name in given:
        if not isinstance(name, str):
            raise TypeError(f"{what} has a name of type {type(name).__name__}: names are str")
    return given


def _extras(given: Mapping[str, tuple] | None, size: int, what: str, form: str) -> list:
    """``outputs`` or ``reductions`` as a list of (name, tuple), checked
    for their form (the library checks names, dtypes and expressions)."""
    items = []
    for name, spec in _named(given, what).items():
        if not isinstance(spec, tuple) or len(spec) != size or not all(isinstance(x, str) for x in spec):
            raise TypeError(f"{what} maps names to {form} tuples of str, not "
                            f"{name!r}: {spec!r}")
        items.append((name, spec))
    return items


def _layout(array: Any, what: str, described: tuple | None = None):
    """(device, dtype, batch, rows, cols, order, leading dimension, batch
    stride) of a matrix or a batch of matrices of any library (from
    ``_jitk._describe(array)`` when it was read already)."""
    device, dtype, shape, strides = (described or _jitk._describe(array))[:4]
    if len(shape) < 2:
        raise ValueError(f"{what} must be a matrix or a batch of matrices, not {len(shape)}-D")
    shape, strides = _one_batch_dimension(shape, strides, what)
    batch = shape[0] if len(shape) == 3 else 1
    # A single matrix's batch stride is never followed.
    batch_stride = strides[0] if len(shape) == 3 and batch > 1 else 0
    rows, cols = shape[-2], shape[-1]
    rs, cs = strides[-2], strides[-1]
    if cs == 1 and (rows == 1 or rs >= cols):
        return device, dtype, batch, rows, cols, 0, (rs if rows > 1 else cols), batch_stride
    if rs == 1 and (cols == 1 or cs >= rows):
        return device, dtype, batch, rows, cols, 1, (cs if cols > 1 else rows), batch_stride
    if rs < 0 or cs < 0:
        raise ValueError(f"{what} has strides {tuple(strides)[-2:]}: a plan reads rows and "
                         f"columns forward, so pass a copy of a reversed view")
    raise ValueError(f"{what} needs a unit stride along its rows or its columns")


def _one_batch_dimension(shape: tuple, strides: tuple, what: str) -> tuple:
    """(shape, strides) with the batch dimensions of an array of more than
    three (as NumPy's matmul takes them: all but the last two) made one,
    where each lies a whole step of the next apart (as a contiguous
    array's do); a ValueError otherwise."""
    if len(shape) <= 3:
        return tuple(shape), tuple(strides)
    lead, lead_strides = shape[:-2], strides[:-2]
    count = 1
    for n in lead:
        count *= n
    inner = 0  # the stride of the innermost batch dimension of extent > 1
    step = None  # (stride, extent) of the last one met, going outward
    for n, st in zip(reversed(lead), reversed(lead_strides)):
        if n == 1 or count == 0:
            continue
        if step is None:
            inner = st
        elif st != step[0] * step[1]:
            raise ValueError(f"{what}'s batch dimensions {tuple(lead)} (strides "
                             f"{tuple(lead_strides)}) are not one after another, so they "
                             f"cannot be one batch dimension: pass a contiguous copy")
        step = (st, n)
    return (count,) + tuple(shape[-2:]), (inner,) + tuple(strides[-2:])


def _batch_shape(a: tuple, b: tuple) -> tuple:
    """The batch shape of A's and B's (their shapes but the last two), as
    NumPy's matmul broadcasts them: a ValueError where it would not."""
    la, lb = tuple(a[:-2]), tuple(b[:-2])
    width = max(len(la), len(lb))
    la, lb = (1,) * (width - len(la)) + la, (1,) * (width - len(lb)) + lb
    out = []
    for x, y in zip(la, lb):
        if x != y and 1 not in (x, y):
            raise ValueError(f"batch shapes {a[:-2]} and {b[:-2]} do not broadcast")
        out.append(x if y == 1 else y)
    return tuple(out)


def _trimmed(shape) -> tuple:
    """A batch shape without its leading dimensions of one, which do not
    change what broadcasts against it."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


def _device(placed: list) -> int:
    """The device of a plan whose operands are (name, device, elements):
    that of those with elements, which must agree; with none, A's. An empty
    array's device does not matter, as nothing of it is read or written."""
    full = [(what, device) for what, device, size in placed if size > 0]
    for what, device in full[1:]:
        if device != full[0][1]:
            raise ValueError(f"{full[0][0]} is on device {full[0][1]}, {what} on device {device}")
    return full[0][1] if full else placed[0][1]


def _placed(layout: tuple, device: int) -> tuple:
    """A layout (as _layout gives it) on `device` if it has no elements:
    where an empty array lies is not checked against the plan."""
    batch, rows, cols = layout[2:5]
    return (device,) + layout[1:] if batch * rows * cols == 0 else layout


def _scalar_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    dtype = getattr(value, "dtype", None)
    if dtype is not None and getattr(value, "ndim", 0) == 0 and hasattr(value, "item"):
        return str(dtype)
    raise TypeError(f"epilogue input of type {type(value).__name__} is neither an array nor a scalar")


# The kinds of scalar types, in the order values convert without loss
# (bool to an integer, an integer to a float); complex and others last.
_KINDS = {"boo": 0, "int": 1, "uin": 1, "flo": 2, "bfl": 2}


# Where each float type's rounding to nearest even reaches infinity: its
# largest finite value and half a unit of its last place.
_FLOAT_MAX = {"float16": 65520.0, "bfloat16": (2 - 2 ** -8) * 2.0 ** 127,
              "float32": (2 - 2 ** -24) * 2.0 ** 127}


def _fits(name: str, value: Any, kept: str) -> None:
    """Refuses a scalar that the plan's type for it cannot hold: an integer
    out of the range of an integer type (the kernel would take it wrapped,
    1000 as -24 in int8), or a finite number past a float type's largest
    (it would become infinity), as NumPy refuses 1000 for int8."""
    if kept.startswith(("int", "uint")):
        bits = int(kept[kept.index("t") + 1:])
        low, high = (0, 2 ** bits - 1) if kept[0] == "u" else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)
        if not low <= int(value) <= high:
            raise OverflowError(f"epilogue input {name!r} is {int(value)}, out of bounds for the "
                                f"plan's {kept}: make a plan with a wider type there")
    elif kept in _FLOAT_MAX:
        x = float(value)
        if math.isfinite(x) and abs(x) >= _FLOAT_MAX[kept]:
            raise OverflowError(f"epilogue input {name!r} is {x!r}, past the largest "
                                f"{kept}: make a plan with a wider type there")


def _packed(described: tuple, name: str) -> None:
    """Refuses an epilogue array whose elements are not packed in C order:
    the kernel gets its pointer and reads element i at i."""
    shape, strides = described[2], described[3]
    step = 1
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != step:
            raise ValueError(f"epilogue input {name!r} has strides {tuple(strides)}: the epilogue "
                             f"reads its arrays packed (element i at i), so pass a contiguous "
                             f"copy")
        step *= n


# The dtypes of the epilogue's arrays: each element is converted to the
# accumulator's type as it is read, so a bfloat16 bias beside bfloat16
# operands needs no float32 copy.
_EPILOGUE_ARRAY_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                         "uint64", "float16", "bfloat16", "float32", "float64")


def _is_array(value: Any) -> bool:
    return hasattr(value, "__dlpack__") or hasattr(value, "__cuda_array_interface__")


def _extent(described: tuple) -> tuple:
    """The bytes an array's elements lie in: (first, one past the last),
    and whether it is read-only (the reason, or None), from
    ``_jitk._describe(array)``."""
    _dev, _dtype, shape, strides, _lib, address, not_writable, item = described
    if any(n == 0 for n in shape):
        return (address, address), not_writable
    lo = hi = 0
    for n, st in zip(shape, strides):
        lo += min(0, (n - 1) * st)
        hi += max(0, (n - 1) * st)
    return (address + lo * item, address + (hi + 1) * item), not_writable


def _overlap(x: tuple, y: tuple) -> bool:
    return x[0] < y[1] and y[0] < x[1]


def _no_broadcast(batch: int, operands: tuple) -> None:
    """Refuses an operand of one matrix, or of batches 0 elements apart
    (an expanded view), for a product of several batches: ``operands``
    holds (name, batches, batch stride)."""
    for what, n, stride in operands:
        if batch > 1 and (n != batch or stride == 0):
            raise ValueError(f"{what} is one matrix for {batch} batches: a plan reads each "
                             f"batch's own {what}, so pass {batch} of them (for example "
                             f"{what.lower()} expanded to the batch and made contiguous)")


# The epilogue's names that a product folded into one of batch x M rows
# would number otherwise (_fold): `row` would run past M, `batch` be 0.
_ROW_OR_BATCH = re.compile(r"(?<![A-Za-z0-9_$])(row|batch)(?![A-Za-z0-9_$])")


def _may_name_row_or_batch(text: str) -> bool:
    """Whether ``text`` names ``row`` or ``batch`` as a word once its lines
    are spliced (``ro\\<newline>w`` is ``row``): the plain case, refused
    with a clear message before anything is compiled. Names that only the
    preprocessor makes (a macro of the preamble or of a header, a pasting of
    tokens) are caught by _hide_row_and_batch as the kernel compiles."""
    spliced = text.replace("\\\r\n", "").replace("\\\n", "")
    return bool(_ROW_OR_BATCH.search(spliced))


# The type of `row` and `batch` in the epilogue's texts of a product folded
# into batch x M rows: it has no operation, so any use of either fails to
# compile, however the preprocessor came to spell the name; the compiler's
# message names the type, which the plan turns into _fold's ValueError.
_FOLDED = "_jitk_row_and_batch_are_not_kept_when_one_B_serves_every_batch"


def _hide_row_and_batch(text: str | None) -> str | None:
    """``text`` (an expression of the epilogue) as the body of a lambda
    whose parameters ``row`` and ``batch`` shadow the kernel's: the
    compiler resolves every ``row`` the text comes to hold after
    preprocessing to the parameter. The wrapper goes on the text's first
    line, so the compiler's messages keep citing the user's lines (a text
    that starts with a directive is moved down one line, as a directive
    must start its line)."""
    if not text:
        return text
    first = "\n" if text.lstrip(" \t").startswith(("#", "%:")) else ""
    return (f"[&]() {{ struct {_FOLDED} {{}}; return [&]({_FOLDED} row, {_FOLDED} batch) "
            f"{{ (void)row; (void)batch; return ({first}{text}\n); }}({_FOLDED}{{}}, "
            f"{_FOLDED}{{}}); }}()")


def _fold(batch: int, m: int, a: tuple, c: tuple | None, d: tuple, texts: list,
          reductions: list) -> None:
    """Refuses one B for every batch where the product cannot be computed
    as one product of ``batch * m`` rows: A, C and D (layouts as _layout
    gives them) must be row-major with each batch's rows right after the
    last batch's (batch stride m times the leading dimension), no text of
    the epilogue may name ``row`` or ``batch`` (they would be numbered over
    all batches' rows), and no reduction may run over rows or the whole
    matrix (it would sum across batches)."""
    why = None
    for what, layout in (("A", a), ("C", c), ("out", d)):
        # An array without elements is neither read nor written.
        if layout is not None and why is None and layout[2] * layout[3] * layout[4] > 0:
            order, ld, stride = layout[5:]
            if order != 0 or stride != m * ld:
                why = (f"{what} must be row-major with each batch's rows right after the last "
                       f"batch's (batch stride {m} x its leading dimension)")
    if why is None and any(text and _may_name_row_or_batch(text) for text in texts):
        why = "the epilogue, its outputs and reductions may not name row or batch"
    if why is None and any(axis != "columns" for _, (_, _, _, axis) in reductions):
        why = "a reduction over rows or the whole matrix would sum across batches"
    if why is not None:
        raise _fold_refused(batch, m, why)


def _fold_refused(batch: int, m: int, why: str) -> ValueError:
    return ValueError(f"B is one matrix for {batch} batches, which a plan reads as one "
                      f"product of {batch} x {m} rows: {why}")


class MatmulPlan:
    """A planned product ``D = epilogue(alpha * A @ B + beta * C)``.

    Made from example operands (their shapes, dtypes and layouts; the values
    are not read), then executed on any operands of the same description::

        plan = jitk.MatmulPlan(a, b, epilogue="relu(acc + bias[col])",
                               epilogue_inputs={"bias": bias})
        d = plan.execute(a, b, epilogue_inputs={"bias": bias})

    ``out_dtype`` is D's dtype (default: A's); ``compute`` one of
    ``"default"``, ``"float32"``, ``"tf32"``, ``"float16"``, ``"bfloat16"``,
    ``"float64"``, ``"float32_fast_accum"`` (float8 inputs: the tensor cores'
    accumulator over the whole K, without promotion).

    ``outputs`` keeps other values of the epilogue besides D, as cuBLASLt's
    ``*_AUX`` epilogues do: ``{name: (dtype, expression)}``, the expression
    over ``acc``, ``value`` (D's element as the epilogue made it, before its
    conversion to D's dtype), ``row``, ``col``, ``batch`` and the epilogue's
    inputs; each is an array of D's shape and order. ``reductions`` reduces
    such expressions in the same pass, deterministically, as ``BGRADB`` and
    ``BGRADA`` do: ``{name: (dtype, expression, op, axis)}``, op ``"sum"``,
    ``"max"`` or ``"min"``, axis ``"rows"`` (one value per column, a bias
    gradient), ``"columns"`` (one per row) or ``"all"`` (one per batch); the
    dtype float16, bfloat16, float32 or float64. With either, ``execute``
    returns ``(D, extras)``, ``extras`` a dict of the new arrays by name.

    FP8 inputs (PyTorch's ``float8_e4m3fn`` and ``float8_e5m2``) may come
    with per-tensor scales, as Transformer Engine keeps them:
    ``scales=("a", "b", "d")`` names those the plan takes, ``D =
    d_scale * epilogue(alpha * a_scale * b_scale * A B + beta * C)``, each
    scale an array of one float32 given to ``execute`` (``a_scale=``,
    ``b_scale=``, ``d_scale=``; ``d_scale`` for an 8-bit D, which rounds to
    nearest even and saturates); ``amax_d=True`` adds the maximum of ``|D|``
    before ``d_scale``, ``extras["amax_d"]``, a float32 array of one element.
    A must be row-major and B column-major (both K-major, as FP8 tensor
    cores read them).

    A batched product takes each batch's own A and C (``(batch, rows,
    cols)`` arrays, or several batch dimensions as NumPy's matmul takes
    them, ``(2, 3, rows, cols)``, each a whole step of the next apart as in
    a contiguous array; D then has that batch shape). B may be one matrix
    for every batch (a matrix, or an
    expanded view of one: batch stride 0), as in ``x @ w`` with ``x`` of
    shape ``(batch, m, k)``: the plan then computes one product of ``batch
    * m`` rows, which needs A, C and ``out`` row-major with each batch's
    rows right after the last batch's (as contiguous arrays are), an
    epilogue, outputs and reductions that name neither ``row`` nor
    ``batch`` (not even through a macro), and no reduction over ``"rows"``
    or ``"all"``; otherwise, and for one A or one C for every batch, the
    plan raises ``ValueError`` (expand and copy it first). So does an
    operand whose batch dimensions broadcast against the other's only in
    part (``(3, 1)`` beside ``(1, 3)``), and a C or ``out`` whose batch
    shape is not D's.

    ``execute`` checks its operands against the plan's description (shape,
    dtype, layout, device; C given exactly when the plan was made with one)
    and raises ``ValueError`` or ``TypeError`` otherwise. Arrays among the
    epilogue's inputs (of any real dtype: a bfloat16 bias beside bfloat16
    operands) are read with each element converted to the accumulator's
    type (float32; float64 for float64 products), must keep the dtype they
    had when the plan was made, and must be contiguous;
    a scalar input may not be of a kind its type at the plan would lose
    (a float where an int was; ``TypeError``), nor a value that type cannot
    hold (1000 where an int8 was, 1e6 where a float16 was; ``OverflowError``);
    ``out`` may share no memory with A, B or those arrays (it may be C
    itself, except for ``autotune``). Without ``out``, D is a new array in
    the layout the plan was made for (the transpose of a packed array for a
    plan made with a column-major ``out``); a plan made with a padded
    ``out`` takes one of that layout each time.
    """

    def __init__(
        self,
        a: Any,
        b: Any,
        c: Any = None,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        epilogue: str | None = None,
        epilogue_inputs: Mapping[str, Any] | None = None,
        out: Any = None,
        out_dtype: str | None = None,
        compute: str | None = None,
        preamble: str | None = None,
        outputs: Mapping[str, tuple] | None = None,
        reductions: Mapping[str, tuple] | None = None,
        scales: tuple = (),
        amax_d: bool = False,
    ) -> None:
        described_a, described_b = _jitk._describe(a), _jitk._describe(b)
        da, ta, batch_a, m, k, oa, lda, sa = _layout(a, "A", described_a)
        db, tb, batch_b, k2, n, ob, ldb, sb = _layout(b, "B", described_b)
        if k != k2:
            raise ValueError(f"A is {m}x{k} but B is {k2}x{n}: the inner sizes differ")
        # The batch shape D takes (NumPy's matmul's), whose dimensions the
        # plan runs as one.
        lead = _batch_shape(described_a[2], described_b[2])
        # An empty array's device does not matter (nothing of it is read or
        # written): the plan is on the others' device (_device).
        placed = [("A", da, batch_a * m * k), ("B", db, batch_b * k * n)]
        batch = max(batch_a, batch_b)
        if batch == 0 or math.prod(lead) == 0:
            raise ValueError("the batch shape holds no matrix: a plan computes at least one")
        # The plan's batch i is A's i and B's i (or B's one matrix): an
        # operand whose batch dimensions broadcast against the other's in
        # part (A's (3, 1) beside B's (1, 3)) would pair the wrong
        # matrices, and D's other batches would be left unwritten.
        for what, shape in (("A", described_a[2][:-2]), ("B", described_b[2][:-2])):
            if math.prod(shape) not in (1, math.prod(lead)):
                raise ValueError(f"{what}'s batch shape {tuple(shape)} broadcasts to D's "
                                 f"{lead} only in part: a plan takes each operand's batches "
                                 f"whole, or one B for all of them (expand and copy it first)")
        if batch_a not in (1, batch) or batch_b not in (1, batch):
            raise ValueError(f"batches of {batch_a} and {batch_b} matrices do not match")
        # The plans read each batch's own matrices: one matrix for every
        # batch (a batch stride of 0) is not something they can express,
        # except one B, where the batches fold into rows (_fold).
        shared_b = batch > 1 and (batch_b == 1 or sb == 0)
        _no_broadcast(batch, (("A", batch_a, sa),) + ((("B", batch_b, sb),) if not shared_b else ()))
        want = {"A": (da, ta, batch_a, m, k, oa, lda, sa), "B": (db, tb, batch_b, k, n, ob, ldb, sb)}
        tc, oc, ldc, sc = None, 0, 0, 0
        described_c = None if c is None else _jitk._describe(c)
        if c is not None:
            dc, tc, batch_c, mc, nc, oc, ldc, sc = _layout(c, "C", described_c)
            if (mc, nc) != (m, n):
                raise ValueError(f"C must be {m}x{n}, not {mc}x{nc}")
            # C is added to D as NumPy would add it: its batch shape is D's
            # (leading dimensions of one aside).
            if _trimmed(described_c[2][:-2]) not in ((), _trimmed(lead)):
                raise ValueError(f"C's batch shape is {tuple(described_c[2][:-2])}, D's {lead}")
            placed.append(("C", dc, batch_c * mc * nc))
            _no_broadcast(batch, (("C", batch_c, sc),))
            want["C"] = (dc, tc, batch_c, m, n, oc, ldc, sc)
        if compute not in _COMPUTE:
            raise ValueError(f"compute must be one of {sorted(k for k in _COMPUTE if k)}")
        if out is not None:
            described_out = _jitk._describe(out)
            dd, td, batch_d, md, nd, od, ldd, sd = _layout(out, "out", described_out)
            if (md, nd) != (m, n) or tuple(described_out[2][:-2]) != lead:
                raise ValueError(f"out must be of shape {lead + (m, n)}, not "
                                 f"{tuple(described_out[2])}")
            placed.append(("out", dd, batch_d * md * nd))
            if out_dtype is not None and out_dtype != td:
                raise ValueError(f"out is {td}, not the out_dtype given ({out_dtype})")
            # Each batch's D is written whole: matrices that share elements
            # would race.
            span = (m - 1) * ldd + n if od == 0 else (n - 1) * ldd + m
            if batch > 1 and abs(sd) < span:
                raise ValueError(f"out's {batch} matrices overlap (batch stride {sd}, each "
                                 f"spans {span} elements)")
            want["D"] = (dd, td, batch_d, m, n, od, ldd, sd)
        else:
            td = out_dtype or ta
            od, ldd, sd = 0, n, (m * n if batch > 1 else 0)
        device = _device(placed)
        for what in want:
            want[what] = (device,) + want[what][1:]
        # Raw arrays of the epilogue are read as the accumulator's type.
        acc = "float64" if compute == "float64" or (compute in (None, "default") and ta == "float64") else "float32"
        epilogue_inputs = _named(epilogue_inputs, "epilogue_inputs")
        self._inputs = list(epilogue_inputs)
        self._input_types = {}
        params = []
        self._scalar_types = {}
        for name, value in epilogue_inputs.items():
            if _is_array(value):
                described = _jitk._describe(value)
                dt = described[1]
                if dt not in _EPILOGUE_ARRAY_TYPES:
                    raise TypeError(f"epilogue input {name!r} is {dt}; the epilogue reads arrays of "
                                    f"real dtypes ({', '.join(_EPILOGUE_ARRAY_TYPES)}), each "
                                    f"element converted to the accumulator's {acc}")
                _packed(described, name)
                self._input_types[name] = dt
                params.append(f"raw {'T' if dt == acc else dt} {name}")
            else:
                self._input_types[name] = None
                self._scalar_types[name] = _scalar_type(value)
                params.append(f"{self._scalar_types[name]} {name}")
        self._want = want
        self.m, self.n, self.k, self.batch = m, n, k, batch
        self.out_dtype = td
        # A batch of one stays a batch, as in NumPy and PyTorch.
        self._lead = lead
        self._shape = lead + (m, n)
        # Each operand's batch shape, checked again at execution where one
        # has several batch dimensions.
        self._batch_shapes = {"A": tuple(described_a[2][:-2]), "B": tuple(described_b[2][:-2]),
                              "out": lead}
        if c is not None:
            self._batch_shapes["C"] = tuple(described_c[2][:-2])
        self._d_order = od
        if isinstance(scales, str) or not set(scales) <= {"a", "b", "d"}:
            raise ValueError(f"scales names some of 'a', 'b' and 'd', not {scales!r}")
        self._scales = tuple(x for x in ("a", "b", "d") if x in scales)
        self._amax = bool(amax_d)
        self._outputs = _extras(outputs, 2, "outputs", "(dtype, expression)")
        self._reductions = _extras(reductions, 4, "reductions", "(dtype, expression, op, axis)")
        if self._amax and "amax_d" in dict(self._outputs + self._reductions):
            raise ValueError("amax_d=True names extras['amax_d']: another output or reduction "
                             "takes that name")
        flags = sum(1 << i for i, x in enumerate(("a", "b", "d")) if x in scales) | (8 * self._amax)
        reds = []
        for name, (dtype, expr, op, axis) in self._reductions:
            if op not in _REDUCE_OPS:
                raise ValueError(f"reduction {name!r}: op {op!r} is not one of {list(_REDUCE_OPS)}")
            if axis not in _REDUCE_AXES:
                raise ValueError(f"reduction {name!r}: axis {axis!r} is not one of "
                                 f"{list(_REDUCE_AXES)}")
            reds.append((name, dtype, expr, _REDUCE_OPS[op], _REDUCE_AXES[axis]))
        # One B for every batch: the library's plan is one product of
        # batch x m rows, each batch's A, C and D rows following the last's.
        rows, batches, strides = m, batch, (sa, sb, sc, sd)
        outs = [(name, dtype, expr) for name, (dtype, expr) in self._outputs]
        if shared_b:
            _fold(batch, m, want["A"], want.get("C"), (None, None, batch, m, n, od, ldd, sd),
                  [epilogue] + [expr for _, _, expr in outs] + [red[2] for red in reds],
                  self._reductions)
            rows, batches, strides = batch * m, 1, (0, 0, 0, 0)
            epilogue = _hide_row_and_batch(epilogue)
            outs = [(name, dtype, _hide_row_and_batch(expr)) for name, dtype, expr in outs]
            reds = [red[:2] + (_hide_row_and_batch(red[2]),) + red[3:] for red in reds]
        try:
            self._plan = _jitk._MatmulPlan(
                device, rows, n, k, batches, ta, tb, tc, td, _COMPUTE[compute],
                (oa, ob, oc, od), (lda, ldb, ldc, ldd), strides,
                c is not None, float(alpha), float(beta), epilogue,
                ", ".join(params) if params else None, preamble, len(params),
                outputs=outs, reductions=reds, scales=flags,
            )
        except _jitk.CompileError as err:
            if shared_b and _FOLDED in str(err):
                raise _fold_refused(batch, m, "the epilogue, its outputs and reductions may not "
                                              "name row or batch, even through a macro") from None
            raise

    def _extra(self, epilogue_inputs: Mapping[str, Any] | None) -> tuple:
        """The epilogue's inputs in the plan's order, and the description
        of each array among them (by name)."""
        given = dict(_named(epilogue_inputs, "epilogue_inputs"))
        if sorted(given) != sorted(self._inputs):
            raise TypeError(f"the epilogue takes inputs {self._inputs}, not {sorted(given)}")
        described = {}
        for name, acc in self._input_types.items():
            value = given[name]
            if (acc is None) == _is_array(value):
                kind = "an array" if acc else "a scalar"
                raise TypeError(f"epilogue input {name!r} was {kind} when the plan was made")
            if acc is not None:
                described[name] = _jitk._describe(value)
                if described[name][1] != acc:
                    raise TypeError(f"epilogue input {name!r} is {described[name][1]}; the plan "
                                    f"was made with {acc} there")
                _packed(described[name], name)
            else:
                got, kept = _scalar_type(value), self._scalar_types[name]
                if _KINDS.get(got[:3], 3) > _KINDS.get(kept[:3], 3):
                    raise TypeError(f"epilogue input {name!r} is {got}, and the plan was made "
                                    f"with {kept}, which would lose what it holds: make a plan "
                                    f"with a {got} there")
                _fits(name, value, kept)
        return tuple(given[name] for name in self._inputs), described

    def _operands(self, a: Any, b: Any, c: Any, out: Any, inputs: dict) -> Any:
        """Checks the operands against the plan's description, and that D
        shares no memory with what the kernel reads (C may be D itself, and
        ``inputs`` describes the epilogue's arrays); returns D (``out``, or
        a new array)."""
        if (c is None) != ("C" not in self._want):
            raise TypeError("the plan was made with C: execute needs one" if c is None
                            else "the plan was made without C: it takes none")
        described = {what: _jitk._describe(array)
                     for what, array in (("A", a), ("B", b), ("C", c)) if array is not None}
        layouts = {what: _placed(_layout(None, what, desc), self._want[what][0])
                   for what, desc in described.items()}
        for what, layout in layouts.items():
            if layout != self._want[what]:
                raise ValueError(f"{what} is {_say(layout)}; the plan is for "
                                 f"{_say(self._want[what])}")
        # Batch dimensions made one (_one_batch_dimension) must also be the
        # plan's one by one, as D's shape follows them.
        shapes = {what: tuple(desc[2]) for what, desc in described.items()}
        if out is not None:
            out_desc = _jitk._describe(out)
            shapes["out"] = tuple(out_desc[2])
        for what, shape in shapes.items():
            made = self._batch_shapes.get(what)
            if made is not None and (len(made) > 1 or len(shape) > 3) and shape[:-2] != made:
                raise ValueError(f"{what}'s batch shape is {shape[:-2]}; the plan is for {made}")
        if out is None:
            return self._new_d(a)
        got = _placed(_layout(out, "out", out_desc), self._want["A"][0])
        want = self._want.get("D", (self._want["A"][0], self.out_dtype, self.batch, self.m, self.n,
                                    0, self.n, self.m * self.n if self.batch > 1 else 0))
        if got != want:
            raise ValueError(f"out is {_say(got)}; the plan is for {_say(want)}")
        d, not_writable = _extent(out_desc)
        if not_writable:
            raise ValueError(f"out is {not_writable}")
        reads = [("A", described["A"]), ("B", described["B"])] + [
            (f"epilogue input {name!r}" if name in self._input_types else name, desc)
            for name, desc in inputs.items()]
        for what, desc in reads:
            if _overlap(d, _extent(desc)[0]):
                raise ValueError(f"out shares memory with {what}, which the product reads")
        if c is not None:
            cx = _extent(described["C"])[0]
            if _overlap(d, cx) and (cx != d or layouts["C"][5:] != got[5:]):
                raise ValueError("out shares memory with C other than being C itself")
        return out

    def _new_d(self, a: Any) -> Any:
        """A new D in the layout the plan writes: packed row-major, or, for a
        plan made with a column-major ``out``, the transpose of a packed
        array. The kernel writes the layout it was made for, so a plan made
        with a padded ``out`` needs one."""
        made = self._want.get("D")
        if made is None or made[5:] == (0, self.n, self.m * self.n if self.batch > 1 else 0):
            return _jitk._empty(a, self._shape, self.out_dtype)
        if made[5:] == (1, self.m, self.m * self.n if self.batch > 1 else 0):
            return _jitk._empty(a, self._lead + (self.n, self.m), self.out_dtype).swapaxes(-1, -2)
        raise TypeError(f"the plan was made with an out that is {_say(made)}: execute needs "
                        f"one of that layout")

    def execute(self, a: Any, b: Any, c: Any = None, *, epilogue_inputs=None, out=None, stream=None,
                alpha: float | None = None, beta: float | None = None, a_scale: Any = None,
                b_scale: Any = None, d_scale: Any = None) -> Any:
        """Runs the plan on operands of its description; returns D (``out``,
        or a new array of A's library). ``alpha`` and ``beta``, when given,
        replace the plan's for this execution; they are the kernel's
        parameters, so a new value compiles nothing."""
        if beta is not None and c is None and float(beta) != 0.0:
            raise ValueError("beta scales C, and this plan has no C")
        given = {"a": a_scale, "b": b_scale, "d": d_scale}
        for x, value in given.items():
            if (value is not None) != (x in self._scales):
                raise TypeError(f"the plan takes {x}_scale" if value is None
                                else f"the plan was made without {x}_scale")
            if value is not None:
                _, dtype, shape = _jitk._describe(value)[:3]
                if dtype != "float32" or any(size != 1 for size in shape):
                    raise TypeError(f"{x}_scale must be an array of one float32, not "
                                    f"{dtype} of shape {tuple(shape)}")
        extra, inputs = self._extra(epilogue_inputs)
        # The scales are read as the kernel starts: D may not share them.
        inputs = dict(inputs, **{f"{x}_scale": _jitk._describe(value)
                                 for x, value in given.items() if value is not None})
        d = self._operands(a, b, c, out, inputs)
        # The outputs in D's order: a column-major D's are made as their
        # transposes and handed back as views.
        lead = self._lead
        outs, views = [], {}
        for name, (dtype, _) in self._outputs:
            if self._d_order == 0:
                outs.append(_jitk._empty(a, lead + (self.m, self.n), dtype))
                views[name] = outs[-1]
            else:
                outs.append(_jitk._empty(a, lead + (self.n, self.m), dtype))
                views[name] = outs[-1].swapaxes(-1, -2)
        reds = []
        for name, (dtype, _, _, axis) in self._reductions:
            size = {"rows": (self.n,), "columns": (self.m,), "all": ()}[axis]
            reds.append(_jitk._empty(a, lead + size, dtype))
            views[name] = reds[-1]
        amax = None
        if self._amax:
            amax = _jitk._empty(a, (1,), "float32")
            views["amax_d"] = amax
        scales = None
        if self._scales or self._amax:
            scales = (a_scale, b_scale, d_scale, amax)
        self._plan.execute(a, b, c, d, extra, stream,
                           None if alpha is None else float(alpha),
                           None if beta is None else float(beta), outs, reds, scales)
        return (d, views) if views else d

    def autotune(self, a: Any, b: Any, c: Any = None, *, epilogue_inputs=None, out=None, stream=None) -> "MatmulPlan":
        """Times the plan's candidate configurations on these operands, keeps
        the fastest, and stores the choice in the kernel cache's database."""
        if self._outputs or self._reductions or self._scales or self._amax:
            raise ValueError("autotune times plans without outputs, reductions, scales or "
                             "amax: tune a plan without them (the choice, stored by shape, "
                             "serves this one too)")
        extra, inputs = self._extra(epilogue_inputs)
        d = self._operands(a, b, c, out, inputs)
        # Each timed run would read the run before's D as its C.
        if c is not None and _overlap(_extent(_jitk._describe(d))[0],
                                      _extent(_jitk._describe(c))[0]):
            raise ValueError("autotune runs the product many times, so out must not share "
                             "memory with C: pass an out of its own")
        self._plan.autotune(a, b, c, d, extra, stream)
        return self

    def describe(self) -> str:
        """The configuration chosen (kernel kind, tile, stages)."""
        return self._plan.describe()

    @property
    def source(self) -> str:
        """The generated CUDA source of the plan's kernel."""
        return self._plan.source()


def _say(layout: tuple) -> str:
    device, dtype, batch, rows, cols, order, ld, stride = layout
    shape = f"{batch}x{rows}x{cols}" if batch > 1 else f"{rows}x{cols}"
    return (f"{shape} {dtype} on device {device}, {'column' if order else 'row'}-major with "
            f"leading dimension {ld}" + (f" and batch stride {stride}" if batch > 1 else ""))


# Plans of jitk.matmul by operand description, least recently used first;
# a program whose shapes keep changing (M of a varying batch) keeps only
# the newest. A plan holds host memory and a loaded module per kernel.
_plans: dict = {}
_PLANS_KEPT = 256


def matmul(
    a: Any,
    b: Any,
    c: Any = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    epilogue: str | None = None,
    epilogue_inputs: Mapping[str, Any] | None = None,
    out: Any = None,
    stream: Any = None,
    compute: str | None = None,
    out_dtype: str | None = None,
    preamble: str | None = None,
) -> Any:
    """``epilogue(alpha * a @ b + beta * c)`` in one kernel, through a plan
    kept for operands of the same description. ``alpha`` and ``beta`` are
    given to each execution, so other values reuse the plan. The most
    recently used plans are kept, at most ``_PLANS_KEPT`` of them.
    ``out_dtype``, ``compute`` and ``preamble`` are MatmulPlan's."""
    key = (
        _jitk._describe(a)[:4], _jitk._describe(b)[:4],
        None if c is None else _jitk._describe(c)[:4],
        None if out is None else _jitk._describe(out)[:4],
        epilogue, compute, out_dtype, preamble,
        tuple((name, _jitk._describe(v)[1] if _is_array(v) else _scalar_type(v))
              for name, v in _named(epilogue_inputs, "epilogue_inputs").items()),
    )
    plan = _plans.pop(key, None)
    if plan is None:
        plan = MatmulPlan(a, b, c, alpha=alpha, beta=beta, epilogue=epilogue,
                          epilogue_inputs=epilogue_inputs, out=out, compute=compute,
                          out_dtype=out_dtype, preamble=preamble)
        while len(_plans) >= _PLANS_KEPT:
            # The least recently used; another thread may be taking plans
            # out meanwhile.
            try:
                _plans.pop(next(iter(_plans)), None)
            except (StopIteration, RuntimeError):
                break
    _plans[key] = plan  # last in the dict's order: the most recently used
    return plan.execute(a, b, c, epilogue_inputs=epilogue_inputs, out=out, stream=stream,
                        alpha=alpha, beta=None if c is None else beta)
