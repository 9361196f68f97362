"""porter.port.scalars.through_call: a stub's scalar parameters as an op's function fills them
(threshold_backward_out runs threshold_stub with `threshold, 0`), as a table."""

from __future__ import annotations

import pytest

from porter.port.scalars import ScalarArg, through_call

THRESHOLD = ScalarArg("threshold", None)

_fixes = (
    pytest.param([THRESHOLD], ["threshold", "0"], ["threshold", "value"],
                 [THRESHOLD, ScalarArg("value", None, passed="0")], id="a number fills the other parameter"),
    pytest.param([THRESHOLD], ["0.5", "threshold"], ["value", "threshold"],
                 [ScalarArg("value", None, passed="0.5"), THRESHOLD], id="in the stub's order"),
)


@pytest.mark.parametrize(("scalars", "arguments", "names", "out"), _fixes)
def test_through_call(scalars, arguments, names, out):
    assert through_call(scalars, arguments, names) == out


_refusals = (
    pytest.param([THRESHOLD], ["threshold", "-threshold"], ["threshold", "value"], id="an expression"),
    pytest.param([THRESHOLD], ["0", "1"], ["threshold", "value"], id="the op's scalar not passed"),
    pytest.param([THRESHOLD], ["threshold", "threshold"], ["threshold", "value"], id="passed twice"),
    pytest.param([THRESHOLD], ["threshold", "0"], ["threshold"], id="a parameter without a name"),
    pytest.param([THRESHOLD], ["threshold", "0"], ["threshold", "threshold"],
                 id="a number under the op's own scalar's name"),
)


@pytest.mark.parametrize(("scalars", "arguments", "names"), _refusals)
def test_through_call_refuses(scalars, arguments, names):
    assert through_call(scalars, arguments, names) is None
