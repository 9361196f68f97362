"""porter.harness.opinfo_run.float64_reference: the op on a sample's inputs widened to float64,
the value the mismatch table of porter's reference inputs shows beside the CPU's and the
device's (porter.harness.mismatches)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402

from porter.harness.opinfo_run import float64_reference  # noqa: E402


def _op(name):
    return lambda *args, **kwargs: getattr(torch.ops.aten, name)(*args, **kwargs)


def test_float16_inputs_are_widened_not_rounded_step_by_step():
    # logit_backward's CPU reference rounds each step to float16 (2944); in float64 the same
    # inputs give 2940.977, which the kernel's float division rounds to 2940
    grad = torch.tensor([0.71923828125], dtype=torch.float16)
    x = torch.tensor([0.0002446174621582031], dtype=torch.float16)
    sample = SampleInput(grad, args=(x,))
    assert _op("logit_backward")(grad, x).item() == 2944.0
    wide = float64_reference(_op("logit_backward"), sample)
    assert wide.dtype == torch.float64 and wide.item() == pytest.approx(2940.9767242040616, rel=1e-12)


def test_integer_inputs_of_a_floating_op_are_widened_too():
    # laguerre_polynomial_l on uint8 computes in float32 (the default dtype): its float64 value
    # needs the integers as float64
    sample = SampleInput(torch.tensor([55, 255], dtype=torch.uint8),
                         args=(torch.tensor([210, 3], dtype=torch.uint8),))
    wide = float64_reference(_op("special_laguerre_polynomial_l"), sample)
    assert wide.dtype == torch.float64
    assert wide[0].item() == pytest.approx(-587782249.569, rel=1e-9)


def test_bools_stay_and_what_is_no_float64_tensor_gives_none():
    cond = torch.tensor([True, False])
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])
    assert float64_reference(_op("where"), SampleInput(cond, args=(x, y))).tolist() == [1.0, 4.0]

    def refuses(*args, **kwargs):
        raise RuntimeError("\"op\" not implemented for 'Double'")
    assert float64_reference(refuses, SampleInput(x)) is None
    assert float64_reference(lambda t: (t, t), SampleInput(x)) is None
    assert float64_reference(lambda t: t.to(torch.int64), SampleInput(x)) is None
