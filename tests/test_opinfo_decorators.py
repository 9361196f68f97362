"""A Mac's test_mps.py applies the checkout's OpInfo decorators; porter's run applies those of
the installed torch's op database. Where the two differ in a decorator that can act on
test_output_match on MPS (an expectedFailure, a skip, a tolerance), the verdict is not proven:
exit 1, never green. Before, an `expectedFailure` planted in the checkout's OpInfo of a ported
op was green in `porter test` (a Mac reports an unexpected success)."""

from __future__ import annotations

import ast
import shutil

import pytest

from porter.harness.opinfo_agreement import mps_decorators
from tests.porter_run import porter

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
OPINFOS = "torch/testing/_internal/common_methods_invocations.py"
HEAD = "    BinaryUfuncInfo('heaviside',\n"
XFAIL = ("                        DecorateInfo(unittest.expectedFailure, 'TestConsistency', "
         "'test_output_match', device_type='mps'),\n")


@needs_compiler
@pytest.mark.slow
def test_a_decorator_the_checkout_adds_to_a_tested_opinfo_is_not_proven(real_root):
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    path = real_root / OPINFOS
    text = path.read_text()
    at = text.index("skips=(\n", text.index(HEAD)) + len("skips=(\n")
    line = text.count("\n", 0, text.index(HEAD)) + 1

    # the clean twin first: the file differs from the installed one's, the OpInfo does not
    path.write_text(text.replace(HEAD, "    # a comment of the checkout's own\n" + HEAD, 1))
    clean = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32",
                   "--samples-only", root=real_root)
    assert clean.code == 0 and "not proven" not in clean.out, clean.out

    path.write_text(text[:at] + XFAIL + text[at:])
    planted = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32",
                     "--samples-only", root=real_root)
    assert planted.code == 1, planted.out
    assert (f"not proven: the checkout's OpInfo for heaviside ({OPINFOS}:{line}) and the installed "
            "torch") in planted.out, planted.out
    assert "the checkout adds `DecorateInfo(unittest.expectedFailure, 'TestConsistency', " \
           "'test_output_match', device_type='mps')`" in planted.out, planted.out


def _decorators(call: str) -> list[str]:
    return [source for _, source in mps_decorators(ast.parse(call).body[0].value)]


@pytest.mark.parametrize("decorator, acts", [
    ("DecorateInfo(unittest.expectedFailure, 'TestConsistency', 'test_output_match', "
     "device_type='mps')", True),
    ("DecorateInfo(unittest.expectedFailure, 'TestConsistency', device_type='mps')", True),
    ("DecorateInfo(unittest.skip('x'), 'TestConsistency', 'test_output_grad_match')", True),
    ("DecorateInfo(toleranceOverride({torch.float32: tol(atol=1e-4, rtol=0)}))", True),
    ("precisionOverride({torch.bfloat16: 0.07})", True),
    ("DecorateInfo(unittest.expectedFailure, cls_name, 'test_output_match')", True),
    ("unittest.expectedFailure", True),
    # another test, another class, another device: no part of test_output_match on MPS
    ("DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_out', device_type='mps')", False),
    ("DecorateInfo(unittest.expectedFailure, 'TestConsistency', 'test_output_match', "
     "device_type='cuda')", False),
    ("DecorateInfo(unittest.skip('x'), 'TestConsistency', 'test_error_inputs_match')", False),
    ("skipCPUIfNoLapack", False),
    ("skipCUDAIfNoMagma", False),
], ids=lambda v: v if isinstance(v, bool) else v[:60])
def test_which_decorators_can_act_on_test_output_match_on_mps(decorator, acts):
    for keyword in ("decorators", "skips"):
        found = _decorators(f"OpInfo('op', {keyword}=({decorator},))")
        assert found == ([ast.unparse(ast.parse(decorator).body[0].value)] if acts else []), found


def test_an_empty_decorator_list_is_no_decorator():
    # the installed torch's frexp spells `decorators=[]` where a checkout may have none
    assert _decorators("OpInfo('frexp', decorators=[])") == _decorators("OpInfo('frexp')") == []


@needs_compiler
@pytest.mark.slow
def test_a_backward_op_reads_its_forward_opinfos_decorators(real_root):
    """softplus_backward is tested through nn.functional.softplus's OpInfo: a decorator the
    checkout adds there for test_output_grad_match acts on it on a Mac."""
    assert porter("migrate-from-mpsgraph", "softplus_backward", "--no-test", root=real_root).code == 0
    path = real_root / OPINFOS
    text = path.read_text()
    head = text.index('        "nn.functional.softplus",\n')
    at = text.index("decorators=(\n", head) + len("decorators=(\n")
    path.write_text(text[:at] + "            DecorateInfo(unittest.expectedFailure, 'TestConsistency', "
                    "'test_output_grad_match', device_type='mps'),\n" + text[at:])
    res = porter("test", "softplus_backward", "--device", "emulate", "--dtype", "float32",
                 "--samples-only", root=real_root)
    assert res.code == 1, res.out
    assert "not proven: the checkout's OpInfo for nn.functional.softplus" in res.out, res.out


@needs_compiler
@pytest.mark.slow
def test_porter_pr_says_the_same_not_proven_as_porter_test(real_root):
    """One verdict: `porter pr` read only the verdict table and said green (exit 0) for the
    planted decorator that `porter test` calls not proven."""
    from tests.porter_run import git_init
    git_init(real_root)
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    git_init(real_root)
    path = real_root / OPINFOS
    text = path.read_text()
    at = text.index("skips=(\n", text.index(HEAD)) + len("skips=(\n")
    path.write_text(text[:at] + XFAIL + text[at:])
    git_init(real_root)
    res = porter("pr", "heaviside", "--dtype", "float32", "--base", "HEAD~2", root=real_root)
    assert res.code == 1, res.out[-1500:]
    assert "not proven: the checkout's OpInfo for heaviside" in res.out
    assert "the verdict is proven" in res.err


@needs_compiler
@pytest.mark.parametrize(("where", "added", "says"), [
    # review 32's D05b: module code at the end of the file giving heaviside other samples
    ("end", "\n\nfor _o in op_db:\n    if _o.name == 'heaviside':\n        _o.supports_out = False\n",
     "the checkout's OpInfo file runs `for _o in op_db:` at import"),
    # D20: a variant of the tested op the installed torch lacks
    ("before", "    BinaryUfuncInfo('heaviside',\n                    variant_test_name='subnormal',\n"
     "                    dtypes=floating_types_and(torch.float16, torch.bfloat16),\n"
     "                    supports_autograd=False),\n",
     "adds a variant of heaviside, 'subnormal'"),
    # the clean twin: a definition alone (read through the OpInfo that names it, none does)
    ("end", "\n\ndef _porter_unused(op_info, device, dtype, requires_grad, **kwargs):\n    yield None\n",
     None),
])
@pytest.mark.slow
def test_module_code_or_a_variant_the_checkout_adds_is_not_proven(real_root, where, added, says):
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    path = real_root / OPINFOS
    text = path.read_text()
    path.write_text(text + added if where == "end" else text.replace(HEAD, added + HEAD, 1))
    result = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32",
                    "--samples-only", root=real_root)
    if says is None:
        assert result.code == 0 and "not proven" not in result.out, result.out
    else:
        assert result.code == 1 and says in result.out, result.out
