"""porter.harness.opmath: a float16/bfloat16 row whose kernel computes in float32 (as upstream's
merged Metal kernels do) where torch's CPU rounds each step in the dtype stays red, and says that
a Mac is red there too; any other wrong answer gets no such note."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402

from porter.harness import opmath  # noqa: E402
from porter.harness.opinfo_run import OpDbSource  # noqa: E402

# traced on the real-size tree (docs/testing.md): the CPU rounds `1 - x`, `x * (1 - x)` and
# the quotient to float16 each (2944); float32 then one rounding gives 2940 (2940.977)
GRAD, SELF = 0.71923828125, 0.0002446174621582031


class Op:
    name = "logit_backward"

    def __call__(self, *args, **kwargs):
        return torch.ops.aten.logit_backward(*args, **kwargs)


def _sample(dtype):
    return SampleInput(torch.tensor([GRAD, 0.5], dtype=dtype), args=(torch.tensor([SELF, 0.25], dtype=dtype),))


def test_the_float32_reference_is_the_op_widened_and_rounded_once():
    sample = _sample(torch.float16)
    assert Op()(sample.input, *sample.args)[0].item() == 2944.0         # the CPU, step by step
    wide = opmath.float32_reference(Op(), sample, "float16")
    assert wide.dtype == torch.float16 and wide[0].item() == 2940.0
    # float32 and the integers are not reduced floats: nothing to say
    assert opmath.float32_reference(Op(), _sample(torch.float32), "float32") is None


@pytest.mark.parametrize("device_answer,noted", [
    (2940.0, True),        # the float32 computation, rounded once: a Mac is red too
    (2900.0, False),       # a kernel that is wrong otherwise: red, and no excuse
])
def test_the_note_is_given_only_where_the_kernel_matches_the_float32_computation(device_answer, noted):
    source = OpDbSource(Op(), SimpleNamespace(backend=SimpleNamespace(name="emulate")), reference=True)
    sample = _sample(torch.float16)
    reference = Op()(sample.input, *sample.args)
    device_out = torch.tensor([device_answer, reference[1].item()], dtype=torch.float16)
    tolerances = (1e-5, 1e-3, False)
    # the row is red against the CPU either way
    assert source.compare(sample, reference, device_out, tolerances, (0.0, 0.0), "float16") is not None
    note = source.opmath_note(sample, device_out, tolerances, (0.0, 0.0), "float16")
    assert (note == opmath.note("float16")) is noted, note
    if noted:
        assert "a Mac is red here too" in note and "opmath" in note
