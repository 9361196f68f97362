"""The first mismatching elements of a failed sample, as a small table to fix a functor by.

"Mismatched elements: 2 / 5 ... at index (3,)" says that a kernel is wrong, not how: this module
lists, for the first few elements that are not close, their index, the sample's tensor inputs at
that index (broadcast to the output's shape) and its scalar arguments, the CPU's and the device's values and,
for floating and integer dtypes, their bit patterns (a sign bit, a NaN payload, a rounding step
and an overflow show there, not in the decimals). Rows are plain dicts: the text report, `--json`
and JUnit carry the same.

On porter's own reference inputs (which upstream's test never sends, so no Mac has judged them)
a row also carries the op's value in float64 (`wide`: the same inputs widened, on this CPU) and
which of the CPU's and the device's values are within the tolerance of it: whether the kernel is
off, or the CPU rounds otherwise than the kernel (per operation in float16, a fused
multiply-add), which docs/testing.md tells apart. The verdict does not change: a Mac's test
compares with its CPU.

The verdict pipeline (porter.harness.verdicts) asks for it on the first failing sample of a
dtype, whichever source ran it: the op_db run's tensors are converted (`numpy_tensors.from_torch`),
the cached run has them as `PArray`s already; closeness is `numpy_tensors.isclose`, in the
tensors' own dtype, as the comparison that failed.
"""

from __future__ import annotations

import math

import numpy as np

from porter.dispatch import numpy_tensors as portable
from porter.harness import lost_precision

LIMIT = 4            # rows per failing dtype: enough to see a pattern, few enough to read
BITS = {"float16": (np.uint16, 4), "bfloat16": (np.uint16, 4), "float32": (np.uint32, 8),
        "float64": (np.uint64, 16), "int8": (np.uint8, 2), "uint8": (np.uint8, 2),
        "int16": (np.uint16, 4), "int32": (np.uint32, 8), "int64": (np.uint64, 16)}


def sample_inputs(sample) -> list[tuple[str, object]]:
    """(name, value) of a sample's tensor-like inputs: `input`, `args[i]`, keyword names."""
    if not hasattr(sample, "input"):            # not a SampleInput-shaped sample: no table
        return []
    named = [("input", sample.input)] + [(f"args[{i}]", a) for i, a in enumerate(getattr(sample, "args", ()))]
    return named + list(getattr(sample, "kwargs", {}).items())


def rows(inputs: list[tuple[str, object]], expected, actual, atol: float | None, rtol: float | None,
         floors: tuple[float, float] = (0.0, 0.0), limit: int = LIMIT, wide=None,
         lost=None) -> list[dict]:
    """Up to `limit` rows {index, inputs: {name: value}, cpu, device[, cpu_bits, device_bits]
    [, float64, within]} for the elements of `actual` (the device's) not close to `expected`
    (the CPU's); [] where there is no element-wise story to tell (shapes or dtypes differ, or
    nothing mismatches). `wide`: the op's float64 value of the same inputs (a tensor or
    array of the output's shape), shown as `float64` with `within`, the sides ("cpu",
    "device") within the tolerance of it. `lost`: the flat mask of the elements that lost
    their precision (porter.harness.lost_precision), listed instead of the elements not close;
    their `within` names the sides that keep the float64 value (nonzero, of its sign)."""
    try:
        expected, actual = _parray(expected), _parray(actual)
    except portable.Unsupported:
        return []
    if expected is None or actual is None or expected.shape != actual.shape or expected.dtype != actual.dtype:
        return []
    if rtol is None or atol is None:
        rtol, atol = portable.DEFAULT_TOLERANCES.get(actual.dtype, (0.0, 0.0))
    rtol, atol = max(rtol, floors[1]), max(atol, floors[0])      # as the comparison's floors
    if lost is not None:
        wrong = np.flatnonzero(lost)[:limit]
    else:
        close = portable.isclose(actual, expected, rtol, atol).reshape(-1)
        wrong = np.flatnonzero(~close)[:limit]
    if not len(wrong):
        return []
    shape = actual.shape
    spread = []             # (name, dtype, values, raw) of a tensor; (name, None, shown, None) of a scalar
    for name, value in inputs:
        if isinstance(value, (bool, int, float, complex)):
            # a scalar argument (threshold's threshold and value): the same in every row, and
            # as much a part of the story as the tensor's element
            spread.append((name, None, repr(value), None))
            continue
        try:
            p = _parray(value)
        except portable.Unsupported:
            continue
        if p is None:
            continue
        try:
            spread.append((name, p.dtype, np.broadcast_to(portable.widened(p), shape).reshape(-1),
                           np.broadcast_to(p.data, shape).reshape(-1)))
        except ValueError:           # not broadcastable to the output (a reduction's input)
            continue
    wide = _wide(wide, shape, actual.dtype)
    out = []
    for flat in wrong:
        flat = int(flat)
        # keys named by where each value comes from, as the text table's columns: torch's
        # message calls the device's value "Expected" (assertEqual(cpu_out, mps_out))
        row = {"index": list(portable.unravel(flat, shape)),
               "inputs": {name: values if dtype is None else _show(values[flat], dtype, raw[flat])
                          for name, dtype, values, raw in spread},
               "cpu": _show(portable.widened(expected).reshape(-1)[flat], expected.dtype,
                            expected.data.reshape(-1)[flat]),
               "device": _show(portable.widened(actual).reshape(-1)[flat], actual.dtype,
                               actual.data.reshape(-1)[flat])}
        if actual.dtype in BITS:
            row["cpu_bits"] = _bits(expected.data.reshape(-1)[flat], actual.dtype)
            row["device_bits"] = _bits(actual.data.reshape(-1)[flat], actual.dtype)
        if wide is not None:
            exact = float(wide[flat])
            row["float64"] = _float(exact, "float64", WIDE_DIGITS)
            kept = (lambda v: lost_precision.side_kept(v, exact, actual.dtype)) if lost is not None \
                else (lambda v: _within(v, exact, atol, rtol))
            row["within"] = [side for side, p in (("cpu", expected), ("device", actual))
                             if kept(float(portable.widened(p).reshape(-1)[flat]))]
        out.append(row)
    return out


WIDE_DIGITS = 10     # the float64 value's digits: enough to see which float16/float32 it rounds to


def _wide(wide, shape, dtype: str):
    """The float64 values flat, or None where they cannot stand beside the row (another shape,
    a complex or integer output: its float64 value is not the question)."""
    if wide is None or dtype not in ("float16", "bfloat16", "float32"):
        return None
    try:
        p = _parray(wide) if not isinstance(wide, np.ndarray) else portable.PArray("float64", wide)
    except portable.Unsupported:
        return None
    if p is None or p.dtype != "float64" or tuple(p.shape) != tuple(shape):
        return None
    return p.data.reshape(-1)


def _finite(shown: str) -> bool:
    return math.isfinite(float(shown))


def _within(value: float, exact: float, atol: float, rtol: float) -> bool:
    """torch.isclose's rule (NaN equal to NaN, an infinity only to itself) against `exact`."""
    if math.isnan(exact) or math.isnan(value):
        return math.isnan(exact) and math.isnan(value)
    if math.isinf(exact) or math.isinf(value):
        return value == exact
    return abs(value - exact) <= atol + rtol * abs(exact)


SHOWN = 12          # values of a tensor `--sample N` prints in full; longer ones are cut


def describe(sample) -> dict[str, str]:
    """`--sample N`: each input of the sample, a tensor as dtype, shape and values
    (`int32 (5,) [0, 1, -3, 0, 0]`), anything else as written."""
    out = {}
    for name, value in sample_inputs(sample):
        try:
            p = _parray(value)
        except portable.Unsupported:
            p = None
        if p is None:
            out[name] = repr(value) if not hasattr(value, "shape") else f"{type(value).__name__} {tuple(value.shape)}"
            continue
        flat_values, flat_raw = portable.widened(p).reshape(-1), p.data.reshape(-1)
        shown = [_show(flat_values[i], p.dtype, flat_raw[i]) for i in range(min(len(flat_values), SHOWN))]
        more = ", ..." if len(flat_values) > SHOWN else ""
        out[name] = f"{p.dtype} {_shape(p.shape)} [{', '.join(shown)}{more}]"
    return out


def _shape(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _parray(value):
    if isinstance(value, portable.PArray):
        return value
    if type(value).__module__.startswith("torch"):
        import torch
        if isinstance(value, torch.Tensor):
            return portable.from_torch(value)
    return None




def _show(value, dtype: str, raw=None) -> str:
    """A value as torch prints an element: integers plainly, floats to their dtype's precision."""
    item = value.item() if hasattr(value, "item") else value
    if dtype == "bool":
        return str(bool(item))
    if isinstance(item, complex):
        return f"{_float(item.real, dtype)}{'+' if item.imag >= 0 or math.isnan(item.imag) else '-'}{_float(abs(item.imag), dtype)}j"
    if isinstance(item, float):
        return _float(item, dtype)
    return str(item)


def _float(x: float, dtype: str, digits: int | None = None) -> str:
    if math.isnan(x) or math.isinf(x):
        return str(x)
    digits = digits or {"float16": 5, "bfloat16": 4, "float32": 9, "complex64": 9}.get(dtype, 17)
    shown = f"{x:.{digits}g}"
    return shown if any(c in shown for c in ".en") else shown + ".0"     # 2.0, not 2: a float


def _bits(raw, dtype: str) -> str:
    """The element's bit pattern in hex (two's complement for signed integers)."""
    unsigned, width = BITS[dtype]
    return "0x" + format(int(np.asarray(raw).reshape(1).view(unsigned)[0]), f"0{width}x")


def text(rows_: list[dict], indent: str = "    ") -> list[str]:
    """The rows as an aligned table: index, each input, the CPU's (expected) and the device's
    (actual) value, and their bits."""
    if not rows_:
        return []
    names = list(rows_[0]["inputs"])
    bits = "cpu_bits" in rows_[0]
    wide = "float64" in rows_[0]
    # named by where each value comes from: torch's own message above the table calls the
    # device's value "expected" (test_output_match compares assertEqual(cpu_out, mps_out))
    head = ["index", *names, "cpu", "device"] + (["float64"] if wide else []) \
        + (["cpu bits", "device bits"] if bits else [])
    body = [[_index(r["index"]), *(r["inputs"].get(n, "") for n in names), r["cpu"], r["device"]]
            + ([r.get("float64", "")] if wide else [])
            + ([r["cpu_bits"], r["device_bits"]] if bits else []) for r in rows_]
    widths = [max(len(str(line[i])) for line in [head, *body]) for i in range(len(head))]
    return [indent + "  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip()
            for line in [head, *body]] + [indent + line for line in reading(rows_)]


# what the float64 value says of each row, by which sides are within the tolerance of it
_ROUNDS = ("the CPU rounds otherwise than the kernel (each step in the dtype, or a fused "
           "multiply-add), and a Mac's test compares with its CPU: compute as the CPU's code does")
_SIDES = {
    ("device",): "the device is within tolerance of it, the CPU reference is not",
    ("cpu",): "the CPU reference is within tolerance of it, the device is not",
    (): "neither the CPU reference nor the device is within tolerance of it",
    ("cpu", "device"): "both are within tolerance of it, not of each other",
}
_CAUSES = {
    ("device",): _ROUNDS,
    ("cpu",): "the kernel's formula or precision",
    (): "the op loses precision here in this dtype; follow the CPU's order of operations and "
        "its fused multiply-adds",
    ("cpu", "device"): _ROUNDS,
}
# an infinity, a NaN or a zero's sign is no rounding: the CPU's vector body and its scalar loop
# may answer one apart (logit_backward at -0.0), at positions that differ between x86 and a Mac
_SPECIAL = ("a special value (a zero's sign, an infinity, a NaN): the CPU's vector body and its "
            "scalar loop may answer it apart, by position")


def reading(rows_: list[dict]) -> list[str]:
    """One line per kind of row that carries a float64 value: which side is off it, at which
    indices, and what that points at (docs/testing.md, "the float64 column")."""
    groups: dict[tuple, list[str]] = {}
    for r in rows_:
        if "within" in r:
            sides = tuple(r["within"])
            # the kernel off an agreeing CPU and float64 is the kernel's, a lost NaN included
            special = sides != ("cpu",) and not all(_finite(r[k]) for k in ("cpu", "device", "float64"))
            groups.setdefault((sides, special), []).append(_index(r["index"]))
    return [f"float64 (these inputs widened, this CPU) at {', '.join(where)}: {_SIDES[sides]}: "
            f"{_SPECIAL if special else _CAUSES[sides]} (docs/testing.md)"
            for (sides, special), where in groups.items()]


def in_one_line(row: dict) -> str:
    """A row with its float64 value as a clause for a one-line verdict (`candidates --verify`):
    "at (1,): cpu 2944.0, device 2940.0, float64 2940.976724 (both are within ...)"; "" for a
    row without one."""
    if "within" not in row:
        return ""
    return (f"at {_index(row['index'])}: cpu {row['cpu']}, device {row['device']}, float64 "
            f"{row['float64']} ({_SIDES[tuple(row['within'])]})")


def _index(index: list[int]) -> str:
    return "(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + ")"
