"""porter.harness.lost_precision: on the reference-input rows, a normal CPU value the device
flushes to zero or gives the other sign fails, though upstream's atol passes it. erfc's Metal
kernel before pytorch#187806's fix returned 0 above x ~ 3.9 (the CPU: erfc(4) = 1.54e-8 in
float32), within atol 1e-5 of the CPU's value: red here."""

from __future__ import annotations

import numpy as np
import pytest

from porter.dispatch.numpy_tensors import PArray
from porter.harness import lost_precision
from porter.harness.mismatches import rows

F16, F32 = np.float16, np.float32

# (dtype, cpu, device, lost?)
_CASES = (
    pytest.param(F32, 1.5417257e-08, 0.0, True, id="erfc(4) flushed to zero (187806)"),
    pytest.param(F32, 1.5229979e-12, 0.0, True, id="erfc(5) flushed to zero"),
    pytest.param(F32, 1.5417257e-08, -1.5e-08, True, id="sign flipped"),
    pytest.param(F32, 1.5417257e-08, 1.54e-08, False, id="kept, a little off"),
    pytest.param(F32, 1e-40, 0.0, False, id="a subnormal reference: not normal, upstream's rule"),
    pytest.param(F32, 0.0, -0.0, False, id="zero against minus zero"),
    pytest.param(F32, np.nan, np.nan, False, id="NaN both"),
    pytest.param(F16, 6.2e-05, 0.0, True, id="float16 normal flushed"),
    pytest.param(F16, 5.9e-08, 0.0, False, id="float16 subnormal flushed: not judged"),
)


# (cpu, device, float64 value, lost?): the float64 value decides whether the CPU is trusted
_BESIDE_FLOAT64 = (
    pytest.param(1.5417257e-08, 0.0, 1.541725790028002e-08, True, id="erfc(4): float64 agrees with the CPU"),
    # sinc(3) in float32: sin of a rounded 3*pi; the true value is 0 and float64's is 3.9e-17
    pytest.param(2.7827534e-08, 0.0, 3.898171832519376e-17, False, id="sinc(3): the CPU is the one off"),
    pytest.param(2.7827534e-08, -1e-09, 3.898171832519376e-17, False, id="sinc(3) flipped: not judged"),
)


@pytest.mark.parametrize("cpu, device, wide, lost", _BESIDE_FLOAT64)
def test_lost_precision_beside_float64(cpu, device, wide, lost):
    expected = PArray("float32", np.array([cpu], dtype=F32))
    actual = PArray("float32", np.array([device], dtype=F32))
    assert (lost_precision.check(expected, actual, np.array([wide])) is not None) == lost


@pytest.mark.parametrize("dtype, cpu, device, lost", _CASES)
def test_lost_precision(dtype, cpu, device, lost):
    name = {F16: "float16", F32: "float32"}[dtype]
    expected = PArray(name, np.array([1.0, cpu], dtype=dtype))
    actual = PArray(name, np.array([1.0, device], dtype=dtype))
    found = lost_precision.check(expected, actual)
    assert (found is not None) == lost, found
    if lost:
        message, mask = found
        assert message.startswith("lost precision: 1 element(s)") and "flat index 1" in message
        # the mismatch table lists the lost element, the float64 column naming the side kept
        table = rows([("input", PArray("float32", np.array([0.0, 4.0], dtype=F32)))], expected,
                     actual, 1e-5, 1.3e-6, wide=np.array([1.0, float(cpu)]), lost=mask)
        assert [r["index"] for r in table] == [[1]] and table[0]["within"] == ["cpu"]


# (cpu, device, the CPU's answer on the inputs as an Apple GPU reads them, lost?)
_BESIDE_FLUSHED = (
    pytest.param(1e-20, 0.0, 0.0, False, id="sqrt(1e-40): the GPU reads 0, sqrt(0) is 0"),
    pytest.param(1e-20, 0.0, None, True, id="no subnormal input: nothing excuses it"),
    pytest.param(1.5417257e-08, 0.0, 1.5417257e-08, True, id="erfc(4): the same answer flushed"),
    pytest.param(1e-20, -1e-20, 0.0, True, id="flipped where the flushed answer is zero"),
)


@pytest.mark.parametrize("cpu, device, flushed, lost", _BESIDE_FLUSHED)
def test_lost_precision_beside_the_answer_on_flushed_inputs(cpu, device, flushed, lost):
    """upstream's sqrt was red on a float32 subnormal input (1e-40: the CPU 1e-20, the device
    0), although an Apple GPU reads that input as zero and no kernel can see it."""
    expected, actual = PArray("float32", np.array([cpu], F32)), PArray("float32", np.array([device], F32))
    given = None if flushed is None else PArray("float32", np.array([flushed], F32))
    assert (lost_precision.check(expected, actual, None, given) is not None) == lost


def test_upstream_tolerance_alone_passes_erfc_flushed():
    """What upstream's comparison says of the same row: close (why this check exists)."""
    from porter.dispatch.numpy_tensors import compare
    expected = PArray("float32", np.array([1.5417257e-08], dtype=F32))
    actual = PArray("float32", np.array([0.0], dtype=F32))
    assert compare(expected, actual, 1e-5, 1.3e-6, (0.0, 0.0)) is None


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_large_row_finds_each_lost_element_at_its_own_index(dtype):
    """Only the elements whose values differ are judged (a passing row's equal millions are
    not widened): each lost one is found at its flat index, beside the float64 value and the
    flushed answer taken at that same index, and an equal row loses nothing."""
    from porter.dispatch.numpy_tensors import narrowed
    n = 4096
    cpu = np.linspace(0.5, 3.0, n)
    device = cpu.copy()
    device[500] = 0.0               # lost to zero
    device[900] = -device[900]      # of the other sign
    device[1000] *= 1.001           # a little off: not lost
    device[1500] = 0.0              # the float64 value says the CPU is the side off
    device[2500] = 0.0              # the answer on the flushed inputs is zero: not lost
    wide = cpu.copy()
    wide[1500] = 1e-30
    flushed = cpu.copy()
    flushed[2500] = 0.0
    expected, actual = narrowed(cpu, dtype), narrowed(device, dtype)
    mask = lost_precision.lost(expected, actual, wide, narrowed(flushed, dtype))
    assert np.flatnonzero(mask).tolist() == [500, 900]
    assert not lost_precision.lost(expected, narrowed(cpu, dtype)).any()
    message, _ = lost_precision.check(expected, actual)
    assert message.startswith("lost precision: 4 element(s)") and "flat index 500" in message
