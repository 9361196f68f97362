"""What a tested OpInfo reaches must be the installed torch's for a run that imports the installed
op database to stand for a Mac's (review 21's E07: a `sample_inputs_func` only the checkout's
heaviside OpInfo had, holding the one input a planted kernel was wrong on, left it green)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.harness.opinfo_reach import first_difference
from porter.source.checkout import Checkout
from porter.source.opinfo_source import find
from tests.porter_run import porter

CMI = "torch/testing/_internal/common_methods_invocations.py"
CORE = "torch/testing/_internal/opinfo/core.py"
HYPOT = """    BinaryUfuncInfo('hypot',
                    dtypes=floating_types_and(torch.bfloat16, torch.half),
"""
SAMPLES = "def sample_inputs_elementwise_binary(op, device, dtype, requires_grad, **kwargs):\n"

# (id, file, the installed text, the checkout's, the difference named, None for none)
EDITS = [
    ("a sample function of its own", CMI, HYPOT,
     HYPOT + "                    sample_inputs_func=lambda op, device, dtype, requires_grad, **kw: [],\n",
     "`sample_inputs_func=` only the checkout's has"),
    ("the Info class's default samples changed", CORE, SAMPLES,
     SAMPLES + "    kwargs = {**kwargs, 'small_inputs_only': True}\n",
     "`sample_inputs_elementwise_binary` (torch/testing/_internal/opinfo/core.py:"),
    # review 22's B09: a line of OpInfo's docstring at column 0 cut the class short
    ("a method of OpInfo, the Info class's base", CORE,
     "    def sample_inputs(self, device, dtype, requires_grad=False, **kwargs):\n",
     "    def sample_inputs(self, device, dtype, requires_grad=False, **kwargs):\n"
     "        kwargs = {**kwargs, 'porter': 1}\n",
     "`OpInfo` (torch/testing/_internal/opinfo/core.py:"),
    ("a module constant the samples use", CORE, "\nS = 5\n", "\nS = 7\n",
     "`S` (torch/testing/_internal/opinfo/core.py:"),
    ("a comment and a line break", CMI, HYPOT,
     HYPOT.replace("dtypes=", "# the dtypes\n                    dtypes=\\\n    "), None),
    ("a function hypot does not reach", CORE, SAMPLES,
     "def sample_inputs_unused_by_hypot(*a):\n    return []\n\n\n" + SAMPLES, None),
    ("another device's dtypes", CMI, HYPOT,
     HYPOT + "                    dtypesIfXPU=floating_types(),\n", None),
]


def _installed() -> Checkout:
    import torch
    return Checkout(Path(torch.__file__).parent.parent)


@pytest.mark.parametrize(("rel", "old", "new", "named"), [e[1:] for e in EDITS],
                         ids=[e[0] for e in EDITS])
@pytest.mark.slow
def test_the_first_difference_of_what_hypots_opinfo_reaches(real_root, rel, old, new, named):
    path = real_root / rel
    text = path.read_text()
    assert old in text, f"the installed torch's {rel} has no {old.strip()[:40]!r}"
    path.write_text(text.replace(old, new, 1))
    checkout, installed = Checkout(real_root), _installed()
    [mine] = [o for o in find(checkout, {"hypot"}) if not o.is_ref]
    [theirs] = [o for o in find(installed, {"hypot"}) if not o.is_ref]
    said = first_difference(checkout, installed, mine, theirs)
    if named is None:
        assert said is None, said
    else:
        assert said is not None and said.startswith(named), said


@pytest.mark.slow
def test_a_sample_function_of_the_checkouts_own_makes_the_run_not_proven(real_root):
    path = real_root / CMI
    text = path.read_text()
    path.write_text(text.replace(HYPOT, EDITS[0][3], 1))
    result = porter("test", "hypot", "--device", "emulate", "--samples-only", "--dtype", "float32",
                    root=real_root)
    assert result.code == 1, result.out
    assert "not proven: the checkout's OpInfo for hypot" in result.out, result.out
    assert "`sample_inputs_func=` only the checkout's has" in result.out, result.out


def test_make_tensor_is_compared_where_the_checkout_has_its_module(real_root):
    """review 22's B14: the samples' tensors come from torch/testing/_creation.py's make_tensor."""
    import torch
    creation = "torch/testing/_creation.py"
    wheel = (Path(torch.__file__).parent / "testing" / "_creation.py").read_text()
    checkout, installed = Checkout(real_root), _installed()

    def said() -> str | None:
        [mine] = [o for o in find(Checkout(real_root), {"hypot"}) if not o.is_ref]
        [theirs] = [o for o in find(installed, {"hypot"}) if not o.is_ref]
        return first_difference(Checkout(real_root), installed, mine, theirs)

    (real_root / creation).write_text(wheel)
    assert said() is None
    anchor = "def make_tensor("
    assert anchor in wheel
    at = wheel.index(":\n", wheel.index(anchor)) + 2
    (real_root / creation).write_text(wheel[:at] + "    low = 0 if low is None else low\n" + wheel[at:])
    found = said()
    assert found is not None and found.startswith(f"`make_tensor` ({creation}:"), found
    assert checkout.root == real_root
