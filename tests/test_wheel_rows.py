"""porter.source.wheel_rows: an op whose yaml entries the checkout declares otherwise than the
installed torch, beyond the MPS rows a port changes, is not proven under the emulator (review
17's Y05 and Y11, green before). A before/after table over edits of the wheel's own file."""

from __future__ import annotations

import pytest

from porter.source.wheel_rows import _wheel_text, unlike_the_wheel

HEAVISIDE = {"heaviside", "heaviside_"}


@pytest.fixture(scope="module")
def wheel() -> str:
    text = _wheel_text()
    if text is None:
        pytest.skip("no torchgen in the installed torch")
    return text


def _edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


OUT = "- func: heaviside.out(Tensor self, Tensor values, *, Tensor(a!) out) -> Tensor(a!)\n"
FUNC = "- func: heaviside(Tensor self, Tensor values) -> Tensor\n"
INPLACE = "- func: heaviside_(Tensor(a!) self, Tensor values) -> Tensor(a!)\n"

# (edit of the wheel's heaviside entries, what unlike_the_wheel says: None or the start of it)
CASES = [
    ("unchanged", lambda t: t, None),
    ("MPS joins the shared row (a port)",
     lambda t: _edit(t, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, MPS: heaviside_out\n"), None),
    ("an MPS row of its own (an MPSGraph impl)",
     lambda t: _edit(t, "    CPU, CUDA: heaviside_out\n",
                     "    CPU, CUDA: heaviside_out\n    MPS: heaviside_out_mps\n"), None),
    ("another backend's key (XPU), no MPS meaning",
     lambda t: _edit(t, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, XPU: heaviside_out\n"), None),
    ("the in-place overload deleted",
     lambda t: _edit(t, t[t.index(INPLACE):t.index("\n\n", t.index(INPLACE)) + 2], ""), None),
    ("Y05: structured_inherits dropped",
     lambda t: _edit(t, OUT + "  structured: True\n  structured_inherits: TensorIteratorBase\n",
                     OUT + "  structured: True\n"),
     "heaviside.out's `structured_inherits` is absent where the installed torch's is "
     "`TensorIteratorBase`"),
    ("Y11: variants: method",
     lambda t: _edit(t, FUNC + "  device_check: NoCheck   # TensorIterator\n  variants: function, method\n",
                     FUNC + "  device_check: NoCheck   # TensorIterator\n  variants: method\n"),
     "heaviside's `variants` is `method` where the installed torch's is `function, method`"),
    ("a CPU kernel renamed",
     lambda t: _edit(t, "    CPU, CUDA: heaviside_out\n", "    CPU: heaviside_out_cpu\n    CUDA: heaviside_out\n"),
     "heaviside.out's `dispatch CPU` is `heaviside_out_cpu` where the installed torch's is `heaviside_out`"),
    ("a schema's default changed",
     lambda t: _edit(t, FUNC, "- func: heaviside(Tensor self, Tensor values=None) -> Tensor\n"),
     "heaviside's `func` is"),
    ("the function the OpInfo calls deleted",
     lambda t: _edit(t, t[t.index(FUNC):t.index("\n\n", t.index(FUNC)) + 2], ""),
     "heaviside, in the installed torch's yaml, is not in the checkout's"),
    ("an overload the wheel lacks",
     lambda t: _edit(t, FUNC, "- func: heaviside.Scalar(Tensor self, Scalar values) -> Tensor\n"
                              "  variants: function\n\n" + FUNC),
     "heaviside.Scalar is not in the installed torch's yaml"),
]


@pytest.mark.parametrize("edit,said", [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_rows_unlike_the_wheels_are_named(wheel, edit, said):
    found = unlike_the_wheel(edit(wheel), HEAVISIDE)
    if said is None:
        assert found is None
    else:
        assert found is not None and found[1].startswith(said), found
        # the line is the checkout's entry that differs (or the family's first)
        assert edit(wheel).split("\n")[found[0] - 1].startswith("- func: heaviside")


COPYSIGN_ROW = "    CPU, CUDA, MPS: copysign_out\n"


@pytest.mark.parametrize("new,mps,other", [
    pytest.param(COPYSIGN_ROW, [], None, id="unchanged"),
    # review 20's Y07: another op's MPS row naming a function (the mps/ sources must define it)
    pytest.param("    CPU, CUDA: copysign_out\n    MPS: copysign_out_mps_typo\n",
                 ["copysign.out", "copysign_out_mps_typo"], None, id="an-mps-row-of-its-own"),
    # a port: MPS joins the shared kernel's row, or leaves it for an MPS impl of its own
    pytest.param("    CPU, CUDA: copysign_out\n    MPS: copysign_out\n", [], None, id="mps-on-the-shared-kernel"),
    # review 20's Y08: another op's CPU kernel renamed: a libtorch porter did not run
    pytest.param("    CPU: copysign_out_cpu_typo\n    CUDA, MPS: copysign_out\n", [],
                 "copysign.out's `dispatch CPU` is `copysign_out_cpu_typo`", id="a-cpu-kernel-renamed"),
])
def test_the_whole_file_against_the_wheels(wheel, new, mps, other):
    from porter.source.wheel_rows import all_unlike
    found = all_unlike(_edit(wheel, COPYSIGN_ROW, new))
    assert [row[1:] for row in found["mps"]] == ([mps] if mps else [])
    if other is None:
        assert found["other"] is None
    else:
        assert found["other"][1].startswith(other), found["other"]
