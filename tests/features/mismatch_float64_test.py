"""porter.harness.mismatches: the float64 value beside a mismatching row of porter's reference
inputs, and which side (the CPU's reference, the device's answer) is within the tolerance of
it. Rows are the three reds a real-size tree with upstream's CPU files gave (docs/testing.md),
and kernels wrong on purpose: the column explains a red, it never turns one green."""

from __future__ import annotations

import math

import numpy as np
import pytest

from porter.dispatch.numpy_tensors import PArray
from porter.harness.mismatches import reading, rows, text

F16, F32 = np.float16, np.float32

# (dtype, cpu, device, float64 value, atol, rtol, sides within tolerance of the float64 value)
_ROWS = (
    # logit_backward(grad 0x39c1, self 0x0c02) in float16: the CPU rounds 1 - x, x * (1 - x) and
    # the quotient to float16 step by step (2944, on x86 and a Mac's NEON alike); the kernel
    # divides in float (2940, the float64 value 2940.977 rounded): 4 apart, 3.44 allowed
    pytest.param(F16, 2944.0, 2940.0, 2940.9767242040616, 0.5, 1e-3, ["cpu", "device"],
                 id="logit_backward float16: per-step rounding"),
    # tanh_backward(65504, -0.999835372) in float32: x86's CPU fuses 1 - y*y (the float64
    # value's float); the unfused kernel is 8.2e-5 off it
    pytest.param(F32, 21.565813, 21.567589, 21.56581349, 1e-5, 1.3e-6, ["cpu"],
                 id="tanh_backward float32: unfused kernel off"),
    # laguerre_polynomial_l(-1, 127) in float32: the CPU's fused recurrence is 2.8e-6 off, the
    # unfused kernel 1.1e-6
    pytest.param(F32, 331195520.0, 331194240.0, 331194599.529, 1e-5, 1.3e-6, ["device"],
                 id="laguerre(-1, 127): the CPU's fma farther"),
    # laguerre_polynomial_l(55, 210): the recurrence loses 1e-5..2.5e-5 in float32 either way
    pytest.param(F32, -587775680.0, -587796736.0, -587782249.569, 1e-5, 1.3e-6, [],
                 id="laguerre(55, 210): both off"),
    # logit_backward(0.707, -0.0): the CPU's vector body divides by -0.0 (-inf), as float64's
    # does; the kernel took the scalar lambda's x == 0 branch (+inf)
    pytest.param(F32, -math.inf, math.inf, -math.inf, 1e-5, 1.3e-6, ["cpu"],
                 id="logit_backward -0.0: sign of the infinity"),
    # wrong on purpose: a formula off by 1e-5 relative, a NaN lost
    pytest.param(F32, 21.565813, 21.565813 * (1 + 1e-5), 21.56581349, 1e-5, 1.3e-6, ["cpu"],
                 id="wrong: formula 1e-5 off"),
    pytest.param(F32, math.nan, 0.0, math.nan, 1e-5, 1.3e-6, ["cpu"], id="wrong: NaN lost"),
    pytest.param(F16, math.nan, math.nan, 1.0, 0.5, 1e-3, [], id="NaN where float64 is finite"),
)


@pytest.mark.parametrize("dtype, cpu, device, wide, atol, rtol, within", _ROWS)
def test_the_float64_value_says_which_side_is_off(dtype, cpu, device, wide, atol, rtol, within):
    name = np.dtype(dtype).name
    x = PArray(name, np.array([0, 1], dtype=dtype))
    expected = PArray(name, np.array([1, cpu], dtype=dtype))
    actual = PArray(name, np.array([1, device], dtype=dtype))
    if math.isnan(cpu) and math.isnan(device):     # a NaN against a NaN is close: make it differ
        actual = PArray(name, np.array([1, 5.0], dtype=dtype))
        within = [s for s in within if s != "device"]
    found = rows([("input", x)], expected, actual, atol, rtol, wide=np.array([1.0, wide]))
    assert len(found) == 1 and found[0]["index"] == [1]
    assert found[0]["within"] == within
    shown = float(found[0]["float64"])            # ten digits: "2940.976724", "-inf", "nan"
    assert (math.isnan(shown) and math.isnan(wide)) or shown == pytest.approx(wide, rel=1e-9)


def test_the_table_shows_the_column_and_one_reading_per_kind_of_row():
    x = PArray("float32", np.array([0, 1, 2], dtype=F32))
    cpu = PArray("float32", np.array([21.565813, 331195520.0, 5.0], dtype=F32))
    device = PArray("float32", np.array([21.567589, 331194240.0, 5.0], dtype=F32))
    found = rows([("input", x)], cpu, device, 1e-5, 1.3e-6,
                 wide=np.array([21.56581349, 331194599.529, 5.0]))
    lines = text(found)
    assert lines[0].split() == ["index", "input", "cpu", "device", "float64", "cpu", "bits",
                                "device", "bits"]
    assert lines[1].split()[:5] == ["(0,)", "0.0", "21.5658131", "21.5675888", "21.56581349"]
    assert lines[3].strip() == (
        "float64 (these inputs widened, this CPU) at (0,): the CPU reference is within tolerance "
        "of it, the device is not: the kernel's formula or precision (docs/testing.md)")
    assert lines[4].strip().startswith(
        "float64 (these inputs widened, this CPU) at (1,): the device is within tolerance of it, "
        "the CPU reference is not: the CPU rounds otherwise than the kernel (each step in the "
        "dtype, or a fused multiply-add), and a Mac's test compares with its CPU")
    assert len(lines) == 5


@pytest.mark.parametrize("wide, dtype", [
    (None, "float32"),                            # no float64 value (upstream's samples, a cache)
    (np.array([1.0, 2.0, 3.0]), "float32"),       # another shape
    (np.array([1.0, 2.0]), "int32"),              # an integer output: its float64 is no question
])
def test_no_column_without_a_float64_value_of_the_outputs_shape(wide, dtype):
    x = PArray(dtype, np.array([0, 1], dtype=dtype))
    cpu, device = PArray(dtype, np.array([1, 2], dtype=dtype)), PArray(dtype, np.array([1, 3], dtype=dtype))
    found = rows([("input", x)], cpu, device, 0.0, 0.0, wide=wide)
    assert found and "float64" not in found[0] and "within" not in found[0]
    assert reading(found) == [] and "float64" not in text(found)[0]


@pytest.mark.parametrize("cpu, device, wide, says", [
    # logit_backward float32 at self -0.0, element 64 of 81: x86's scalar tail says +inf, its
    # float64 vector body -inf (a Mac's vector body too): no rounding to blame
    (math.inf, -math.inf, -math.inf, "a special value (a zero's sign, an infinity, a NaN): the "
                                     "CPU's vector body and its scalar loop may answer it apart"),
    # wrong on purpose: a lost NaN where the CPU and float64 agree is the kernel's
    (math.nan, 0.0, math.nan, "the device is not: the kernel's formula or precision"),
    (-math.inf, math.inf, -math.inf, "the device is not: the kernel's formula or precision"),
])
def test_a_special_value_is_not_called_a_rounding(cpu, device, wide, says):
    x = PArray("float32", np.array([-0.0], dtype=F32))
    found = rows([("args[0]", x)], PArray("float32", np.array([cpu], dtype=F32)),
                 PArray("float32", np.array([device], dtype=F32)), 1e-5, 1.3e-6, wide=np.array([wide]))
    lines = reading(found)
    assert len(lines) == 1 and says in lines[0] and "rounds otherwise" not in lines[0]


def test_a_one_line_verdict_carries_the_first_rows_float64_value():
    # `porter candidates --verify` says one line per op: the float16 logit_backward red read
    # "1 element in 943,593 off" and nothing of which side was off
    from porter.harness.measure_port import FAILS, _verdict
    from porter.harness.mismatches import in_one_line
    from porter.harness.verdicts import FAIL, DtypeResult, OpResult

    x = PArray("float16", np.array([0.00024462], dtype=F16))
    row = rows([("args[0]", x)], PArray("float16", np.array([2944.0], dtype=F16)),
               PArray("float16", np.array([2940.0], dtype=F16)), 0.5, 1e-3,
               wide=np.array([2940.9767242040616]))[0]
    said = ("at (0,): cpu 2944.0, device 2940.0, float64 2940.976724 (both are within "
            "tolerance of it, not of each other)")
    assert in_one_line(row) == said
    failed = DtypeResult("float16", FAIL, message="Tensor-likes are not close!", mismatches=[row])
    result = OpResult("logit_backward", "logit_backward", "", "logit_backward", "emulate",
                      reference=True, dtypes=[failed])
    upstream = OpResult("logit_backward", "logit_backward", "", "logit_backward", "emulate",
                        dtypes=[DtypeResult("float16", "pass")])
    verdict = _verdict("logit_backward", [upstream, result])
    assert verdict.status == FAILS
    assert verdict.detail == f"float16 (reference inputs): Tensor-likes are not close!; {said}"
    # upstream's samples carry no float64 value: the line is torch's message alone
    assert in_one_line({k: v for k, v in row.items() if k not in ("float64", "within")}) == ""
