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


def test_a_sample_function_of_the_checkouts_own_makes_the_run_not_proven(real_root):
    path = real_root / CMI
    text = path.read_text()
    path.write_text(text.replace(HYPOT, EDITS[0][3], 1))
    result = porter("test", "hypot", "--device", "emulate", "--samples-only", "--dtype", "float32",
                    root=real_root)
    assert result.code == 1, result.out
    assert "not proven: the checkout's OpInfo for hypot" in result.out, result.out
    assert "`sample_inputs_func=` only the checkout's has" in result.out, result.out
