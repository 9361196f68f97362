"""`porter pr`: after porting heaviside and threshold on the real-size tree, the description's
verdict table is `porter test`'s, its commands run upstream's tests by their real names, and a
wrong port or a review-check finding turns it red (exit 1)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.porter_run import git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

THRESHOLD_BODY = "x <= threshold ? value : x"
KINDS = {"samples": "samples", "reference": "reference", "shapes": "shapes"}


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def _on_a_branch(root):
    """The tree committed on `main`, and a branch `mps-ports` checked out for the ports."""
    git_init(root)
    _git(root, "branch", "-M", "main")
    _git(root, "checkout", "-q", "-b", "mps-ports")


def _commit_all(root, message: str):
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", message)


def _port_both(root, tmp_path, monkeypatch, threshold_body=THRESHOLD_BODY, commit=True):
    """heaviside and threshold ported on a branch, each in its commit (`commit=False`: threshold
    left uncommitted, which `porter pr` does not describe)."""
    _on_a_branch(root)
    assert porter("new-op", "heaviside", root=root).code == 0
    _commit_all(root, "heaviside")
    ported = porter("migrate-from-mpsgraph", "threshold", "--body", threshold_body, "--no-test",
                    root=root)
    assert ported.code == 0, ported.err
    if commit:
        _commit_all(root, "threshold")


def _test_verdicts(root, *ops, dtypes=()):
    result = porter("test", *ops, "--device", "emulate", "--reference-inputs", "--shapes", "--json",
                    *(a for d in dtypes for a in ("--dtype", d)), root=root)
    report = json.loads(result.out)
    out = {}
    for op in report["ops"]:
        kind = "reference" if op["reference"] else "shapes" if op["shapes"] else "samples"
        for d in op["dtypes"]:
            out[(op["op"], d["dtype"], kind)] = (d["outcome"], d["samples"])
    return result.code, out


def _pr_verdicts(data):
    return {(v["opinfo"], v["dtype"], kind): (v[kind], v[f"{kind}_count"])
            for v in data["verdicts"] for kind in KINDS if v[kind] is not None}


@pytest.mark.slow
def test_pr_of_heaviside_and_threshold(real_root, tmp_path, monkeypatch):
    _port_both(real_root, tmp_path, monkeypatch)
    result = porter("pr", "heaviside", "threshold", "--format", "json", root=real_root)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    # the verdict table is porter test's, row for row (upstream samples, reference inputs, shapes)
    code, tested = _test_verdicts(real_root, "heaviside", "threshold")
    assert code == 0
    assert _pr_verdicts(data) == tested
    assert len(tested) == 2 * 9 * 3 and {v[0] for v in tested.values()} == {"pass"}
    assert data["shapes"] == ["transposed", "sliced with step", "broadcast", "0-dim", "empty", "large"]
    # the Mac commands, by upstream's test names
    assert data["commands"] == [
        "python test/test_mps.py -v -k test_output_match_heaviside_mps_ -k test_output_grad_match_heaviside_mps_",
        "python test/test_ops.py -v -k _heaviside_mps_",
        "python test/test_mps.py -v -k test_output_match_nn_functional_threshold_mps_"
        " -k test_output_grad_match_nn_functional_threshold_mps_",
        "python test/test_ops.py -v -k _nn_functional_threshold_mps_"]
    _assert_upstream_names(data)
    # what moved, and what the port removed
    moved = {m["op"]: m for m in data["moved"]}
    assert not moved["heaviside"]["was_mpsgraph"] and moved["threshold"]["was_mpsgraph"]
    assert [r["what"] for r in moved["threshold"]["mpsgraph_removed"]] == ["TORCH_IMPL_FUNC(threshold_out_mps)"]
    assert [(y["before"], y["after"]) for y in moved["threshold"]["yaml"]] == [
        ("MPS: threshold_out_mps", "CPU, CUDA, MPS: threshold_out")]
    assert [e["text"] for e in data["removed_xfails"]] == ['UNIMPLEMENTED_XFAILLIST["heaviside"]']
    assert {re.search(r"'(test_\w+)'", e["text"]).group(1) for e in data["removed_decorators"]} == {
        "test_variant_consistency_eager", "test_out_warning", "test_out", "test_noncontiguous_samples",
        "test_dtypes", "test_python_ref_torch_fallback", "test_python_ref"}
    assert {f["path"].rsplit("/", 1)[-1] for f in data["files"]} == {
        "ActivationKernel.h", "ActivationKernel.metal", "BinaryKernel.metal", "Activation.mm",
        "ActivationKernel.mm", "BinaryKernel.mm", "native_functions.yaml",
        "common_methods_invocations.py", "common_mps.py"}
    assert data["not_proven"] == []
    assert [(i["item"], i["status"]) for i in data["checklist"]] == [
        ("the CPU reference is this checkout's CPU kernel", "ok"), ("MPSGraph path removed", "ok"), ("no `fast::` math in the functors", "ok"),
        ("no bespoke helper where c10/metal has one", "ok"),
        ("bfloat registrations inside the file's version guard", "n/a"), ("NaN propagation", "ok"),
        ("edge values: ±0, ±inf, subnormals, each dtype's limits (reference inputs)", "ok"),
        # the shapes passed through porter's kernel loop, not the checkout's strided kernels
        ("shapes and dtypes Metal kernels break on", "todo"), ("before/after benchmark", "todo")]
    shapes = next(i for i in data["checklist"] if i["item"].startswith("shapes"))
    assert "the checkout's strided kernels (c10/metal/indexing.h) did not run here" in shapes["finding"]
    bfloat = next(i for i in data["checklist"] if i["item"].startswith("bfloat"))
    assert bfloat["finding"].startswith("not applicable: ActivationKernel.metal, BinaryKernel.metal has no")
    # the Markdown carries the same table and commands
    text = data["markdown"]
    assert text.startswith("[MPS] Move `heaviside` and `threshold` to Metal\n")
    # reference inputs: upstream's 41, porter.harness.edges' one sample of float32's limits and
    # its one where threshold's scalars meet NaN and their own boundaries
    assert ("| `nn.functional.threshold` | float32 | pass (4) | pass (43) | pass (6) | "
            "`TestConsistencyMPS.test_output_match_nn_functional_threshold_mps_float32` |") in text
    for command in data["commands"]:
        assert command in text
    assert porter("pr", "heaviside", "threshold", root=real_root).out == text


def _assert_upstream_names(data):
    """The names are the ones torch's own instantiation gives (on CPU here: MPS is a Mac's)."""
    from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_utils import TestCase

    infos = [o for o in op_db if o.name in ("heaviside", "nn.functional.threshold")]

    class TestConsistency(TestCase):
        @ops(infos)
        def test_output_match(self, device, dtype, op):
            pass

    class TestCommon(TestCase):
        @ops(infos)
        def test_out(self, device, dtype, op):
            pass

    scope: dict = {"TestConsistency": TestConsistency, "TestCommon": TestCommon}
    instantiate_device_type_tests(TestConsistency, scope, only_for="cpu")
    instantiate_device_type_tests(TestCommon, scope, only_for="cpu")
    names = set(dir(scope["TestConsistencyCPU"]))
    common = [n for n in dir(scope["TestCommonCPU"]) if n.startswith("test_out_")]
    for v in data["verdicts"]:
        cls, test = v["upstream_test"].split(".")
        assert cls == "TestConsistencyMPS"
        on_cpu = test.replace("_mps_", "_cpu_")
        if v["dtype"] in ("float32", "int64"):      # dtypes every one of them has on CPU
            assert on_cpu in names, (on_cpu, sorted(names)[:5])
    for command in data["commands"]:
        pattern = command.split(" -k ")[1].split()[0].replace("_mps_", "_cpu_")
        haystack = names if "test_mps.py" in command else common
        assert any(pattern in n for n in haystack), pattern


@pytest.mark.slow
def test_pr_of_a_wrong_port_is_red(real_root, tmp_path, monkeypatch):
    # `<` for `<=`: wrong exactly where x equals the threshold, which only the integer
    # dtypes' samples hit (the float samples' thresholds are not among their values)
    _port_both(real_root, tmp_path, monkeypatch, threshold_body="x < threshold ? value : x")
    result = porter("pr", "threshold", "--format", "json", "--dtype", "int64", "--dtype", "float32",
                    root=real_root)
    data = json.loads(result.out)
    assert result.code == 1
    rows = {v["dtype"]: v for v in data["verdicts"]}
    assert set(rows) == {"int64", "float32"} and rows["float32"]["samples"] == "pass"
    assert [rows["int64"][k] for k in KINDS] == ["fail", "fail", "fail"]
    assert rows["int64"]["message"].startswith("samples: Tensor-likes are not equal!")
    assert "**fail**" in data["markdown"]
    # why the exit status is 1, on stderr in one line (the description is stdout's)
    assert result.err.splitlines()[-1].startswith(
        "porter: error: the pull request is not green: nn.functional.threshold red on the tested "
        "commit (the verdict table)"), result.err
    code, tested = _test_verdicts(real_root, "threshold", dtypes=("int64", "float32"))
    assert code == 1 and _pr_verdicts(data) == tested


@pytest.mark.slow
def test_pr_names_a_review_finding(real_root, tmp_path, monkeypatch):
    _port_both(real_root, tmp_path, monkeypatch)
    metal = real_root / "aten/src/ATen/native/mps/kernels/ActivationKernel.metal"
    text = metal.read_text()
    start = text.index("struct threshold_functor")
    at = text.index("return", start)
    metal.write_text(text[:at] + "(void)metal::fast::exp(0.0f);\n    " + text[at:])
    _git(real_root, "commit", "-qam", "threshold with fast::exp")     # what the PR sends
    result = porter("pr", "threshold", "--format", "json", "--dtype", "float32", root=real_root)
    data = json.loads(result.out)
    assert result.code == 1
    item = next(i for i in data["checklist"] if "fast" in i["item"])
    assert item["status"] == "fail" and "PORTER050 threshold_functor calls fast::exp" in item["finding"]
    assert "checklist item(s) open: " in result.err.splitlines()[-1] and item["item"] in result.err


def test_pr_outside_git_or_of_an_unported_op_is_bad_input(real_root, tmp_path, monkeypatch):
    result = porter("pr", "heaviside", root=real_root)
    assert result.code == 2 and "not in a git repository" in result.err
    git_init(real_root)
    result = porter("pr", "heaviside", root=real_root)
    assert result.code == 2 and "heaviside: the branch changed nothing of it" in result.err


@pytest.mark.slow
def test_pr_after_committing_on_main_is_bad_input_naming_the_base(real_root, tmp_path, monkeypatch):
    """The port committed on main itself: main's merge base with HEAD is HEAD, so the
    description listed no file and said the op "had no MPS kernel" (a warning on stderr only:
    review 40). It is bad input now, naming how to pass the base (the commit before the port)."""
    git_init(real_root)
    _git(real_root, "branch", "-M", "main")
    assert porter("new-op", "heaviside", root=real_root).code == 0
    _git(real_root, "commit", "-qam", "heaviside")
    result = porter("pr", "heaviside", "--format", "json", "--dtype", "float32", root=real_root)
    error = json.loads(result.out)
    assert result.code == 2 and error["ok"] is False, result.out
    assert error["error"].startswith("the base main is HEAD itself (") and "--base HEAD~1" in error["hint"]
    result = porter("pr", "heaviside", "--dtype", "float32", root=real_root)
    assert result.code == 2 and result.out == "" and "is HEAD itself" in result.err
    assert "Traceback" not in result.err
    # with the base passed, the port's files are there and nothing is warned
    result = porter("pr", "heaviside", "--format", "json", "--dtype", "float32", "--base", "HEAD~1",
                    root=real_root)
    data = json.loads(result.out)
    assert data["warnings"] == [] and data["files"] and "warning" not in result.err


def test_the_shapes_item_says_not_run_when_no_shape_reached_a_kernel():
    """It said "[x] shapes ...: no shapes ran" (ok) with no shape measured."""
    from porter.harness.verdicts import DtypeResult, OpResult
    from porter.review.description import NOT_RUN, _checklist

    def result(shapes, outcome, samples):
        r = OpResult(op="heaviside", name="heaviside", variant="", key="heaviside",
                     device="emulate", shapes=shapes)
        r.dtypes.append(DtypeResult("float32", outcome, samples=samples,
                                    message="" if outcome == "pass" else "no sample inputs"))
        return r

    def shapes_item(results):
        items = _checklist([], results, [], set())
        return next(i for i in items if i["item"].startswith("shapes"))

    # no shape rows at all, then shape rows whose every dtype skipped: not run, never ok
    for results in ([result([], "pass", 9)], [result([], "pass", 9), result(["transposed"], "skip", 0)]):
        item = shapes_item(results)
        assert item["status"] == NOT_RUN and item["finding"].startswith("not run: "), item
    # measured on a Mac's full build: the checkout's strided kernels ran, ok
    measured = [result([], "pass", 9), result(["transposed"], "pass", 3)]
    item = next(i for i in _checklist([], measured, [], set(), "mps") if i["item"].startswith("shapes"))
    assert item == {"item": "shapes and dtypes Metal kernels break on", "status": "ok",
                    "finding": "transposed pass on float32 (on mps: the checkout's kernels, views "
                               "through their strided entry point)"}
    # emulated: porter's own loop ran, not indexing.h's strided kernels: unticked, and where to run them
    item = shapes_item(measured)
    assert item["status"] == "todo" and item["finding"] == (
        "the functors pass transposed on float32 through porter's own kernel loop (emulate); the "
        "checkout's strided kernels (c10/metal/indexing.h) did not run here: on a Mac, run "
        "`porter test heaviside --device mps`")
    # a failing shape is red whatever the device
    item = shapes_item([result([], "pass", 9), result(["transposed"], "fail", 3)])
    assert item["status"] == "fail"


def test_pr_files_are_the_ports_not_every_untracked_file(tmp_path):
    # the README's `porter pr heaviside > pr.md` created pr.md before porter ran: the Files
    # table listed `| pr.md | added | 0 | 0 |`
    from porter.review.branch import Branch

    kernels = tmp_path / "aten/src/ATen/native/mps/kernels"
    kernels.mkdir(parents=True)
    (kernels / "BinaryKernel.metal").write_text("// base\n")
    git_init(tmp_path)
    (kernels / "BinaryKernel.metal").write_text("// base\n// port\n")
    (kernels / "ActivationKernel.h").write_text("#pragma once\n")      # created by the port
    (tmp_path / "pr.md").write_text("")
    (tmp_path / "notes.txt").write_text("mine\n")
    assert [(f.path, f.status) for f in Branch(tmp_path).files()] == [
        ("aten/src/ATen/native/mps/kernels/ActivationKernel.h", "added"),
        ("aten/src/ATen/native/mps/kernels/BinaryKernel.metal", "modified")]


@pytest.mark.slow
def test_pr_takes_device_auto_as_every_command_does(mini_root, tmp_path, monkeypatch):
    # `--device auto` is every command's default; pr answered "unknown device 'auto'"
    git_init(mini_root)
    assert porter("new-op", "heaviside", "--no-test", "--allow-dirty", root=mini_root).code == 0
    _git(mini_root, "add", "-A")
    _git(mini_root, "commit", "-qm", "heaviside")
    result = porter("pr", "heaviside", "--device", "auto", "--dtype", "float32", "--base", "HEAD~1",
                    root=mini_root)
    assert "unknown device" not in result.err and "| `heaviside` | float32 | pass" in result.out
    # one dtype of the nine the pull request sends: not proven (review 42's F3), the only gap
    assert result.code == 1 and "checklist item(s) open: the verdict is proven" in result.err, result.err
    assert (f"not proven: {DTYPE_GAP}") in result.out, result.out


# what a description of some dtypes says (--dtype): not proven, whatever they show
DTYPE_GAP = "only float32 tested (--dtype); the Mac test commands below run every dtype the MPS test sends"
HEAVISIDE_RIGHT = "return a == 0 ? b : static_cast<T>(a > 0);"
HEAVISIDE_WRONG_AT_ZERO = "return static_cast<T>(a >= 0);"


@pytest.mark.slow
def test_pr_tests_the_commit_not_the_working_tree(real_root, tmp_path, monkeypatch):
    """The committed heaviside is wrong at zero (float samples never hit 0, the reference
    inputs do); the fix sits uncommitted. Before, porter pr tested the working tree and said
    every dtype passes, of a PR that sends the wrong functor. Now it tests HEAD apart: red,
    with a warning naming what it left out; committing the fix turns it green."""
    _on_a_branch(real_root)
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    right = metal.read_text()
    assert HEAVISIDE_RIGHT in right
    metal.write_text(right.replace(HEAVISIDE_RIGHT, HEAVISIDE_WRONG_AT_ZERO))
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-qm", "heaviside, wrong at zero")
    metal.write_text(right)                 # the fix, uncommitted
    (real_root / "pr.md").write_text("")    # not the port's: not warned about
    result = porter("pr", "heaviside", "--format", "json", "--dtype", "float32", root=real_root)
    assert result.code == 1, result.err
    data = json.loads(result.out)
    [row] = data["verdicts"]
    assert row["samples"] == "pass" and row["reference"] == "fail", row
    [warning] = data["warnings"]
    assert warning.startswith("1 uncommitted change(s) are not in this description, which tests "
                              "the commit HEAD (")
    assert warning.endswith(": aten/src/ATen/native/mps/kernels/BinaryKernel.metal; commit them "
                            "to describe them")
    assert data["commit"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=real_root, text=True,
                                            capture_output=True).stdout.strip()
    # the worktree is gone, and the user's files are as they were
    assert metal.read_text() == right
    listed = subprocess.run(["git", "worktree", "list"], cwd=real_root, text=True, capture_output=True)
    assert len(listed.stdout.splitlines()) == 1, listed.stdout
    # committed, the fix is what the PR sends: every row green, and only --dtype's gap open
    _git(real_root, "commit", "-qam", "heaviside at zero")
    result = porter("pr", "heaviside", "--format", "json", "--dtype", "float32", root=real_root)
    data = json.loads(result.out)
    assert data["warnings"] == [] and data["not_proven"] == [DTYPE_GAP], data["not_proven"]
    assert {row[k] for row in data["verdicts"] for k in KINDS} == {"pass"}, data["verdicts"]
    assert result.code == 1 and data["ok"] is False
    # the branch also edits heaviside's CPU kernel: porter's reference (the installed torch's
    # CPU) is not the PR's, so the PR is not proven, never green
    cpu = real_root / "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"
    cpu.write_text(cpu.read_text().replace("static_cast<scalar_t>(a > 0);", "static_cast<scalar_t>(a > 0) + 1;", 1))
    _git(real_root, "commit", "-qam", "heaviside's CPU kernel changed")
    result = porter("pr", "heaviside", "--format", "json", "--dtype", "float32", root=real_root)
    assert result.code == 1, result.out
    data = json.loads(result.out)
    [gap, dtype_gap] = data["not_proven"]
    assert dtype_gap == DTYPE_GAP
    assert gap.startswith("heaviside: the CPU reference is not this checkout's: the change since "
                          "main edits heaviside's CPU kernel (aten/src/ATen/native/cpu/BinaryOpsKernel.cpp:")
    item = next(i for i in data["checklist"] if gap in i["finding"])
    assert item["status"] == "not run" and item["finding"] == f"not proven: {gap}"


def test_pr_of_an_uncommitted_port_says_to_commit_it(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    result = porter("pr", "heaviside", "--dtype", "float32", root=real_root)
    assert result.code == 2 and result.out == ""
    assert "heaviside: the branch changed nothing of it since master and HEAD registers no Metal" in result.err
    assert "commit the port first: porter pr describes the commit HEAD" in result.err


@pytest.mark.slow
def test_pr_of_a_green_backward_port_is_green_as_porter_test_says(real_root, tmp_path, monkeypatch):
    """One verdict: `porter pr threshold_backward` exited 1 ("shapes ...: not run: no shape
    sample reached a kernel") where `porter test` and the port command said green, because a
    backward op had no shapes row. It has one now, in every command."""
    _on_a_branch(real_root)
    assert porter("migrate-from-mpsgraph", "threshold_backward", root=real_root).code == 0
    _commit_all(real_root, "threshold_backward")
    code, tested = _test_verdicts(real_root, "threshold_backward")
    assert code == 0
    assert {(dtype, kind) for (_, dtype, kind) in tested} == {
        (d, k) for d in ("float16", "bfloat16", "float32") for k in KINDS}
    result = porter("pr", "threshold_backward", "--format", "json", "--base", "main", root=real_root)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert _pr_verdicts(data) == tested
    shapes = next(i for i in data["checklist"] if i["item"].startswith("shapes"))
    assert shapes["status"] == "todo" and shapes["finding"].startswith(
        "the functors pass transposed, sliced with step, broadcast, 0-dim, empty, large on "
        "bfloat16, float16, float32 through porter's own kernel loop (emulate)"), shapes


def test_a_backward_op_is_named_by_its_forward_ops_gradient_test():
    """softplus_backward has no test_output_match_softplus_backward_mps_* upstream (a Mac's -k of
    that name selects nothing): its kernel runs in the forward OpInfo's test_output_grad_match,
    for float16 and float32 only."""
    from porter.harness.verdicts import DtypeResult, OpResult
    from porter.review.description import _commands, _rows

    r = OpResult(op="softplus_backward", name="softplus_backward", variant="", key="softplus_backward",
                 device="emulate", test="backward_output_match",
                 via="nn.functional.softplus (tools/autograd/derivatives.yaml:9: "
                     "softplus_backward(grad, self, beta, threshold))")
    r.dtypes += [DtypeResult(d, "pass", samples=3) for d in ("bfloat16", "float16", "float32")]
    rows = {v["dtype"]: v["upstream_test"] for v in _rows([r], "mps")}
    assert rows == {
        "bfloat16": None,
        "float16": "TestConsistencyMPS.test_output_grad_match_nn_functional_softplus_mps_float16",
        "float32": "TestConsistencyMPS.test_output_grad_match_nn_functional_softplus_mps_float32"}
    assert _commands([r], "mps") == [
        "python test/test_mps.py -v -k test_output_grad_match_nn_functional_softplus_mps_"]


def test_the_bfloat_item_is_ticked_only_for_a_file_with_a_guard():
    from porter.review.description import NOT_APPLICABLE, _checklist

    def bfloat(guarded, findings=()):
        items = _checklist([], [], list(findings), set(), "emulate", guarded)
        return next(i for i in items if i["item"].startswith("bfloat"))

    item = bfloat({"aten/src/ATen/native/mps/kernels/BinaryKernel.metal": False})
    assert item["status"] == NOT_APPLICABLE and "BinaryKernel.metal has no __METAL_VERSION__" in item["finding"]
    item = bfloat({"aten/src/ATen/native/mps/kernels/UnaryKernel.metal": True})
    assert item == {"item": "bfloat registrations inside the file's version guard", "status": "ok",
                    "finding": "PORTER053 clean (UnaryKernel.metal: inside its __METAL_VERSION__ guard)"}


def test_nan_propagation_is_unticked_when_no_floating_dtype_ran():
    """It said "[x] NaN propagation: ... pass on no floating dtype" with nothing measured."""
    from porter.harness.verdicts import DtypeResult, OpResult
    from porter.review.description import _checklist

    r = OpResult(op="heaviside", name="heaviside", variant="", key="heaviside", device="emulate",
                 reference=True)
    r.dtypes.append(DtypeResult("int64", "pass", samples=9))
    item = next(i for i in _checklist([], [r], [], set()) if i["item"] == "NaN propagation")
    assert item["status"] == "todo" and "not measured" in item["finding"]
    r.dtypes.append(DtypeResult("float32", "pass", samples=9))
    item = next(i for i in _checklist([], [r], [], set()) if i["item"] == "NaN propagation")
    assert item["status"] == "ok" and item["finding"].endswith("pass on float32")


def test_a_reference_input_failure_is_filed_under_the_cause_its_values_show():
    # review34 item 3: heaviside wrong at ±0 was ticked "[ ] NaN propagation: heaviside float16:
    # reference inputs fail", though no failing value was a NaN
    from porter.harness.verdicts import DtypeResult, OpResult
    from porter.review.description import NOT_RUN, _checklist

    def items(*dtypes):
        r = OpResult(op="heaviside", name="heaviside", variant="", key="heaviside", device="emulate",
                     reference=True)
        r.dtypes.extend(dtypes)
        return {i["item"].split(":")[0]: i for i in _checklist([], [r], [], set())}

    at_zero = DtypeResult("float16", "fail", samples=9, mismatches=[
        {"index": [3], "inputs": {"input": "-0", "values": "0.5"}, "cpu": "0.5", "device": "1"}])
    on_nan = DtypeResult("float32", "fail", samples=9, mismatches=[
        {"index": [0], "inputs": {"input": "nan", "values": "2"}, "cpu": "nan", "device": "1"}])
    wrong_int = DtypeResult("int64", "fail", samples=9, mismatches=[
        {"index": [1], "inputs": {"input": "2147483648", "values": "0"}, "cpu": "1", "device": "0"}])
    found = items(at_zero, DtypeResult("bfloat16", "pass", samples=9))
    # float16's table shows its first failing sample only: its NaN values are not proven
    assert found["NaN propagation"] == {
        "item": "NaN propagation", "status": NOT_RUN,
        "finding": "not proven on float16: its reference inputs fail for another reason (edge "
                   "values below), which hides the NaN values' answers; pass on bfloat16"}
    assert found["edge values"]["status"] == "fail"
    assert found["edge values"]["finding"] == ("heaviside float16: reference inputs fail (input -0, "
                                               "values 0.5: cpu 0.5, device 1)"), found["edge values"]
    # a kernel file that does not build fails every dtype with no element table: nothing ran
    # (it was ticked "[x] NaN propagation: ... pass on float32")
    unbuilt = "BinaryKernel.metal does not build: use of undeclared identifier 'x'"
    found = items(DtypeResult("float32", "fail", samples=9, message=unbuilt))
    assert found["NaN propagation"]["status"] == NOT_RUN
    assert found["NaN propagation"]["finding"].startswith("not proven on float32: ")
    assert found["edge values"]["status"] == "fail"
    # every failure a NaN one: the edge values are hidden, not unmeasured (review 27's N06 read
    # "not measured: no dtype's reference inputs ran" beside the table of their failures)
    found = items(on_nan)
    assert found["edge values"] == {
        "item": "edge values: ±0, ±inf, subnormals, each dtype's limits (reference inputs)",
        "status": NOT_RUN,
        "finding": "not proven on float32: the reference inputs fail on NaN or ±inf values (NaN "
                   "propagation above), which hides the other edge values' answers"}
    found = items(on_nan, wrong_int)
    assert found["NaN propagation"]["status"] == "fail"
    assert found["NaN propagation"]["finding"].startswith("heaviside float32: reference inputs fail (input nan")
    # an integer dtype's failure at its limits is an edge value's (it was on no item)
    assert found["edge values"]["status"] == "fail" and "heaviside int64" in found["edge values"]["finding"]
    assert "float32" not in found["edge values"]["finding"]
    found = items(DtypeResult("int64", "pass", samples=9))
    assert found["edge values"] == {"item": "edge values: ±0, ±inf, subnormals, each dtype's limits "
                                            "(reference inputs)", "status": "ok",
                                    "finding": "reference inputs pass on int64"}
    assert items()["edge values"]["status"] == "todo"


def test_the_last_line_says_not_proven_where_every_failing_row_does():
    # review 37's note: `porter pr` called a port red whose rows all said "not proven", where
    # `porter test` and the port commands say "is not proven, so not green"
    from porter.commands.pr import _why_red
    row = {"opinfo": "heaviside", "samples": "fail", "reference": "pass", "shapes": "pass"}
    data = {"verdicts": [dict(row, proven_red=False)], "checklist": []}
    assert "heaviside not proven on the tested commit" in _why_red(data)
    assert "red on" not in _why_red(data)
    data = {"verdicts": [dict(row, proven_red=True)], "checklist": []}
    assert "heaviside red on the tested commit" in _why_red(data)


def test_a_row_is_proven_red_unless_its_failure_says_not_proven():
    from porter.harness.verdicts import DtypeResult, OpResult
    from porter.review.description import _rows

    def result(message):
        return OpResult(op="heaviside", name="heaviside", variant="", key="heaviside",
                        device="emulate", dtypes=[DtypeResult("float32", "fail", message=message)])
    assert [r["proven_red"] for r in _rows([result("not proven: a check porter does not "
                                                   "evaluate")], "mps")] == [False]
    assert [r["proven_red"] for r in _rows([result("3 != 2")], "mps")] == [True]


def test_a_kernel_two_stubs_share_is_each_ops_kernel(real_root):
    """Upstream's shrink_backward kernel runs hardshrink_backward's and softshrink_backward's
    stubs: `porter pr` of either describes that kernel (review 42's F5 refused the second:
    "HEAD registers no Metal kernel for it")."""
    from porter.checks.tree import Tree
    from porter.review.facts import _kernels
    from porter.source.checkout import KERNELS, OPERATIONS, Checkout

    metal = real_root / KERNELS / "ActivationKernel.metal"
    metal.write_text(metal.read_text().replace("hardshrink", "shrink"))
    host = real_root / OPERATIONS / "ActivationKernel.mm"
    host.write_text(host.read_text().replace('"hardshrink"', '"shrink"')
                    .replace('"leaky_relu"', '"shrink"'))
    tree = Tree(Checkout(real_root))
    assert tree.kernel_op_lists["shrink"] == ["hardshrink", "leaky_relu"]
    assert [k.name for k in _kernels(tree, "hardshrink")] == ["shrink"]
    assert "shrink" in [k.name for k in _kernels(tree, "leaky_relu")]
