"""The CPU reference follows the checkout: where a change since REF edits an op's CPU kernel (or
CPU code porter cannot tie to one op), `porter test --changed-since REF` says the reference is
not this checkout's and exits 1 ("not proven"), where before it compared with the installed
torch's CPU and said green. Without --changed-since, REF is the base `porter pr` uses (the merge
base with origin/main, main, master, ...) where the repository has one."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.porter_run import git_init, porter

CPU = "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


def _gaps(root, ops, ref="HEAD"):
    from porter.checks import changed, cpu_reference
    from porter.source.checkout import Checkout
    changes = changed.since(root, ref)
    return cpu_reference.not_this_checkouts(Checkout(root), changes, ops,
                                            changed.OldCheckout(root, changes).read)


def _edit(root, rel, old, new):
    path = root / rel
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


# a changed file -> whether the CPU reference may depend on it: the sources the CPU build compiles
# do; the MPS backend's (parsed as a Mac builds them), c10/metal (the Metal front end's), the
# CUDA-only ones, the yaml and Python do not (review 26's CP2: a new aten/src/ATen/*.cpp was read
# by nothing, and its port was green)
CPU_SIDES = [
    ("aten/src/ATen/native/cpu/BinaryOpsKernel.cpp", True),
    ("aten/src/ATen/native/BinaryOps.cpp", True),
    ("aten/src/ATen/native/Math.h", True),
    ("aten/src/ATen/cpu/vec/vec_base.h", True),
    ("c10/util/complex.h", True),
    ("aten/src/ATen/PorterNew.cpp", True),
    ("aten/src/ATen/core/Tensor.cpp", True),
    ("aten/src/ATen/native/sparse/SparseTensor.cpp", True),
    ("c10/core/ScalarType.h", True),
    ("torch/csrc/autograd/engine.cpp", True),
    ("aten/src/ATen/native/mps/operations/BinaryKernel.mm", False),
    ("aten/src/ATen/native/mps/OperationUtils.h", False),
    ("aten/src/ATen/native/mps/kernels/BinaryKernel.metal", False),
    ("aten/src/ATen/mps/MPSDevice.h", False),
    ("c10/metal/utils.h", False),
    ("aten/src/ATen/native/cuda/BinaryMiscOpsKernels.cu", False),
    ("aten/src/ATen/native/cuda/Loops.cuh", False),
    ("aten/src/ATen/cuda/CUDAContext.h", False),
    ("c10/cuda/CUDAStream.cpp", False),
    ("torch/csrc/cuda/Module.cpp", False),
    # a `cuda` folder of CPU code: upstream's build_variables.bzl compiles it into libtorch_cpu
    # (review 28's C03)
    ("torch/csrc/jit/codegen/cuda/interface.cpp", True),
    ("aten/src/ATen/native/native_functions.yaml", False),
    ("torch/testing/_internal/common_mps.py", False),
]


@pytest.mark.parametrize(("rel", "side"), CPU_SIDES)
def test_which_files_the_cpu_reference_is_built_from(rel, side):
    from porter.checks.cpu_reference import cpu_side
    assert cpu_side(rel) is side


def test_which_cpu_changes_reach_an_op(real_root):
    git_init(real_root)
    ops = ["hypot", "heaviside"]
    assert _gaps(real_root, ops) == {}                     # nothing changed: the reference stands
    # hypot's lambda given `+ 1`: hypot's reference is not this checkout's, heaviside's is
    _edit(real_root, CPU, "return std::hypot(a, b);", "return std::hypot(a, b) + 1;")
    gaps = _gaps(real_root, ops)
    assert set(gaps) == {"hypot"}
    assert gaps["hypot"].startswith("the CPU reference is not this checkout's: the change since "
                                    f"HEAD edits hypot's CPU kernel ({CPU}:26 (now))")
    # a deleted line counts on REF's side
    _git(real_root, "commit", "-qam", "hypot + 1")
    _edit(real_root, CPU, "return std::hypot(a, b) + 1;\n", "")
    assert set(_gaps(real_root, ops)) == {"hypot"}
    _git(real_root, "checkout", "-q", CPU)
    # a comment alone is no change a build sees (review 25's H9: every op was not proven)
    _edit(real_root, "aten/src/ATen/native/cpu/zmath.h", "#pragma once", "#pragma once\n// edited")
    assert _gaps(real_root, ops) == {}
    _git(real_root, "checkout", "-q", "aten/src/ATen/native/cpu/zmath.h")
    # a header porter cannot tie to one op's kernel: neither op is proven
    _edit(real_root, "aten/src/ATen/native/cpu/zmath.h", "#pragma once",
          "#pragma once\nstatic constexpr int porter_edited = 1;")
    gaps = _gaps(real_root, ops)
    assert set(gaps) == {"hypot", "heaviside"}
    assert "edits CPU code porter cannot tie to one op's kernel (aten/src/ATen/native/cpu/zmath.h:" \
        in gaps["heaviside"]
    # a Metal or yaml change (what a port edits) is no CPU change
    _git(real_root, "checkout", "-q", "aten/src/ATen/native/cpu/zmath.h")
    _edit(real_root, "aten/src/ATen/native/native_functions.yaml", "- func:", "# x\n- func:")
    assert _gaps(real_root, ops) == {}


@pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
@pytest.mark.slow
def test_porter_test_changed_since_is_not_proven_when_the_pr_edits_the_cpu_kernel(real_root, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    git_init(real_root)
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-qm", "heaviside")
    _git(real_root, "tag", "base")
    # the PR changes heaviside's CPU kernel: the wheel's CPU still agrees with the Metal port
    _edit(real_root, CPU, "heaviside_cpu\", [&]() {", "heaviside_cpu\", [&]() {\n    (void)0;  // changed")
    args = ("test", "heaviside", "--device", "emulate", "--dtype", "float32", "--json")
    plain = porter(*args, root=real_root)
    # without --changed-since, the base is master's merge base with HEAD (HEAD itself here): the
    # uncommitted edit leaves the reference unproven too (it said green before)
    assert plain.code == 1, plain.out
    assert json.loads(plain.out)["not_proven"][0].startswith(
        "heaviside: the CPU reference is not this checkout's: the change since master (merge base "), plain.out
    result = porter(*args, "--changed-since", "base", root=real_root)
    assert result.code == 1, result.out
    data = json.loads(result.out)
    assert data["ok"] is False
    [gap] = data["not_proven"]
    assert gap.startswith("heaviside: the CPU reference is not this checkout's: the change since "
                          f"base edits heaviside's CPU kernel ({CPU}:")
    assert f"not proven: {gap}" in data["why"]
    text = porter("test", "heaviside", "--device", "emulate", "--dtype", "float32",
                  "--changed-since", "base", root=real_root)
    assert text.code == 1 and f"not proven: {gap}\n" in text.out
    # --watch cannot honour it: an error, never dropped
    watched = porter("test", "heaviside", "--watch", "--changed-since", "base", root=real_root)
    assert watched.code == 2 and "--watch cannot honour --changed-since" in watched.err


@pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
@pytest.mark.slow
def test_plain_porter_test_on_a_branch_that_changed_the_cpu_kernel_is_not_proven(real_root):
    # review34 finding 5: a branch commits a change to heaviside's CPU lambda; plain `porter test`
    # compared the port with the installed torch's CPU and said green (exit 0, no note), where a
    # Mac build of this checkout compares with the changed kernel
    git_init(real_root)                                   # on master
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-qm", "heaviside")
    _git(real_root, "checkout", "-qb", "cpu-change")
    _edit(real_root, CPU, "return a == 0 ? b : static_cast<scalar_t>(a > 0);",
          "return a == 0 ? b : static_cast<scalar_t>(a > 0) + 1;")
    _git(real_root, "commit", "-qam", "heaviside's CPU kernel + 1")
    args = ("test", "heaviside", "--device", "emulate", "--dtype", "int32", "--samples-only")
    result = porter(*args, "--json", root=real_root)
    assert result.code == 1, result.out
    data = json.loads(result.out)
    assert data["ok"] is False
    [gap] = data["not_proven"]
    base = subprocess.run(["git", "merge-base", "HEAD", "master"], cwd=real_root, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert gap == ("heaviside: the CPU reference is not this checkout's: the change since master "
                   f"(merge base {base[:12]}) edits heaviside's CPU kernel ({CPU}:34 (now)), and "
                   "porter compares with the installed torch's CPU"), gap
    # the port's rows themselves pass: the wheel's CPU is the old kernel, which the port matches
    assert {c["outcome"] for o in data["ops"] for c in o["dtypes"]} == {"pass"}, data["ops"]
    text = porter(*args, root=real_root)
    assert text.code == 1 and f"not proven: {gap}\n" in text.out, text.out
    # the port command's rerun tests as `porter test` does (review 42's F1: "nothing to do (the
    # port is written, and green)", exit 0), and a dry run says it tests nothing (F8)
    again = porter("new-op", "heaviside", "--test", "--device", "emulate", root=real_root)
    assert again.code == 1 and f"not proven: {gap}\n" in again.out, again.out + again.err
    assert "nothing to do" not in again.out and "written before and is not proven" in again.err, again.err
    dry = porter("new-op", "heaviside", "--dry-run", root=real_root)
    assert dry.code == 0 and "nothing to do" not in dry.out, dry.out
    assert ("every file is already as planned; --dry-run does not test it (`porter test heaviside "
            "--device emulate` gives its verdict)") in dry.out, dry.out
    # a --watch round asks again every round (F2: asked once when the loop started)
    import io

    from porter.checks.reference_base import default_reference_gaps
    from porter.harness import watch
    from porter.harness.session import Options
    asked = []

    def gaps():
        asked.append(1)
        return default_reference_gaps(real_root, ["heaviside"])
    opts = Options(ops=["heaviside"], root=str(real_root), device="emulate", dtypes=["int32"])
    for _ in range(2):
        out = io.StringIO()
        assert watch._round(opts, real_root, out, gaps) == 1, out.getvalue()
        assert f"not proven: {gap}\n" in out.getvalue(), out.getvalue()
    assert len(asked) == 2
    # a repository with none of porter pr's bases (no origin/main, main, master): no base to
    # compare with, the reference is the installed torch's as before
    _git(real_root, "branch", "-m", "master", "trunk")
    assert porter(*args, root=real_root).code == 0
    # and no git at all: the same
    shutil.rmtree(real_root / ".git")
    assert porter(*args, root=real_root).code == 0


def test_a_cpu_change_committed_on_main_since_the_wheels_commit_is_not_proven(real_root, monkeypatch):
    """Review 31's H05: a CPU kernel edit committed on master itself (the merge base is then
    HEAD, and nothing seemed changed): where the repository holds the commit the installed
    torch was built from, that commit is the base, and the edit is a change of the reference."""
    from porter.checks.reference_base import default_reference_gaps
    from porter.source import git_base
    git_init(real_root)                                   # on master
    wheel = subprocess.run(["git", "rev-parse", "HEAD"], cwd=real_root, capture_output=True,
                           text=True, check=True).stdout.strip()
    _edit(real_root, CPU, "return a == 0 ? b : static_cast<scalar_t>(a > 0);",
          "return a == 0 ? 0 : static_cast<scalar_t>(a > 0);")
    _git(real_root, "commit", "-qam", "heaviside's CPU kernel at zero")
    # the installed torch's commit unknown here: the merge base (HEAD) is all porter has
    monkeypatch.setattr(git_base, "wheel_git_version", lambda: None)
    assert default_reference_gaps(real_root, ["heaviside"]) == []
    monkeypatch.setattr(git_base, "wheel_git_version", lambda: wheel)
    [gap] = default_reference_gaps(real_root, ["heaviside"])
    assert gap.startswith("heaviside: the CPU reference is not this checkout's: the change since "
                          f"the installed torch's commit (merge base {wheel[:12]}) edits "
                          f"heaviside's CPU kernel ({CPU}:"), gap
    # a commit the repository lacks is no base
    monkeypatch.setattr(git_base, "wheel_git_version", lambda: "0" * 40)
    assert default_reference_gaps(real_root, ["heaviside"]) == []


def test_candidates_verify_never_says_yes_where_the_cpu_reference_is_not_this_checkouts(real_root,
                                                                                      monkeypatch):
    """Review 42's F1: `candidates --verify` measured the port against the installed torch's CPU
    and said AUTO `yes` where the command's own test (and `porter test`) say not proven: a
    branch edits the op's CPU kernel. The measurement itself is stood in for (each op's port is
    green against the wheel's CPU); what is tested is what --verify makes of it."""
    from types import SimpleNamespace

    from porter.commands import candidates
    from porter.harness import measure_port
    from porter.source.checkout import Checkout
    git_init(real_root)                                   # on master
    _git(real_root, "checkout", "-qb", "cpu-change")
    _edit(real_root, CPU, "return a == 0 ? b : static_cast<scalar_t>(a > 0);",
          "return a == 0 ? b : static_cast<scalar_t>(a > 0) + 1;")
    _git(real_root, "commit", "-qam", "heaviside's CPU kernel + 1")
    monkeypatch.setattr(measure_port, "verify", lambda checkout, op, state: measure_port.Verdict(
        op, measure_port.VERIFIED, "9/9 dtypes", 9, 9))
    found = [SimpleNamespace(op="heaviside", state="no-mps"), SimpleNamespace(op="hypot", state="no-mps")]
    verdicts = candidates._verify(Checkout(real_root), found)
    assert verdicts["hypot"].status == measure_port.VERIFIED           # its CPU kernel is as based
    heaviside = verdicts["heaviside"]
    assert heaviside.status == measure_port.FAILS, heaviside
    assert heaviside.detail.startswith("not proven: the CPU reference is not this checkout's"), heaviside
