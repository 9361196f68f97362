"""A hand-edited host `.mm` is tested as a Mac would run it (issue: false greens from host
edits). porter writes the host function of a port; a contributor may then edit it. Each case
here is an edit after which a Mac fails (or porter cannot tell), on the real-size tree with
logit, nan_to_num and threshold_backward migrated: `porter test --device emulate` must not
pass it. Before the fix each printed every dtype pass, exit 0."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from porter.source.checkout import OPERATIONS  # noqa: E402
from tests.porter_run import porter  # noqa: E402

if shutil.which(os.environ.get("CXX", "g++")) is None:
    pytest.skip("no C++ compiler for the Metal emulator", allow_module_level=True)

UNARY = f"{OPERATIONS}/UnaryKernel.mm"
ACTIVATION = f"{OPERATIONS}/ActivationKernel.mm"
LOGIT_CALL = '  lib.exec_unary_kernel(iter, "logit", eps);\n'


@pytest.fixture(scope="module")
def ported(real_tree_template: Path, tmp_path_factory) -> Path:
    """The real-size tree with three ports as porter writes them, shared by this module's tests:
    each edit is undone by `edited`."""
    root = Path(shutil.copytree(real_tree_template, tmp_path_factory.mktemp("host-calls") / "pytorch"))
    for op in ("logit", "nan_to_num", "threshold_backward"):
        assert porter("migrate-from-mpsgraph", op, root=root).code == 0, op
    return root


@contextlib.contextmanager
def edited(root: Path, rel: str, old: str, new: str):
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    try:
        yield
    finally:
        path.write_text(text)


def outcomes(root: Path, op: str, *dtypes: str) -> tuple[int, dict[str, dict]]:
    args = [a for d in dtypes for a in ("--dtype", d)]
    res = porter("test", op, "--device", "emulate", "--json", *args, root=root)
    data = json.loads(res.out)
    return res.code, {d["dtype"]: d for o in data["ops"] for d in o["dtypes"]}


def test_the_ports_as_written_pass(ported):
    """The baseline each edit below breaks."""
    for op, dtypes in (("logit", ("float16", "float32")), ("nan_to_num", ("bfloat16", "float32")),
                       ("threshold_backward", ("float32",))):
        code, by = outcomes(ported, op, *dtypes)
        assert code == 0 and {d["outcome"] for d in by.values()} == {"pass"}, (op, by)


@pytest.mark.parametrize(("new", "says"), [
    pytest.param("  // " + LOGIT_CALL.lstrip(), "is in a comment or in code the preprocessor drops",
                 id="line-comment"),
    pytest.param("  /* " + LOGIT_CALL.strip() + " */\n", "is in a comment or in code the preprocessor drops",
                 id="block-comment"),
    pytest.param("#if 0\n" + LOGIT_CALL + "#endif\n", "is in a comment or in code the preprocessor drops",
                 id="if-0"),
    pytest.param("  return;\n" + LOGIT_CALL, "follows the unconditional return on line 42", id="after-return"),
])
def test_a_host_function_whose_call_never_runs_fails(ported, new, says):
    """A Mac runs no kernel: the output is never written. porter read the call from the raw
    text and ran the kernel: every dtype passed."""
    with edited(ported, UNARY, LOGIT_CALL, new):
        code, by = outcomes(ported, "logit", "float16", "float32")
    assert code == 1
    for d in by.values():
        assert d["outcome"] == "fail", d
        assert d["message"].startswith("logit_mps_kernel (operations/UnaryKernel.mm:41) runs no Metal "
                                       "kernel: its exec_"), d["message"]
        assert says in d["message"] and "on a Mac the output is never written" in d["message"]


def test_a_call_under_an_undecidable_condition_is_not_proven(ported):
    with edited(ported, UNARY, LOGIT_CALL, "#if PORTER_FLAG\n" + LOGIT_CALL + "#endif\n"):
        code, by = outcomes(ported, "logit", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail"
    assert by["float32"]["message"].startswith(
        "not proven: the exec_unary_kernel call of logit_mps_kernel (operations/UnaryKernel.mm:41) is "
        "under `#if PORTER_FLAG` (operations/UnaryKernel.mm:43)"), by["float32"]["message"]
