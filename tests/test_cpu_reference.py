"""The CPU reference follows the checkout: where a change since REF edits an op's CPU kernel (or
CPU code porter cannot tie to one op), `porter test --changed-since REF` says the reference is
not this checkout's and exits 1 ("not proven"), where before it compared with the installed
torch's CPU and said green."""

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
    # a header porter cannot tie to one op's kernel: neither op is proven
    _edit(real_root, "aten/src/ATen/native/cpu/zmath.h", "#pragma once", "#pragma once\n// edited")
    gaps = _gaps(real_root, ops)
    assert set(gaps) == {"hypot", "heaviside"}
    assert "edits CPU code porter cannot tie to one op's kernel (aten/src/ATen/native/cpu/zmath.h:" \
        in gaps["heaviside"]
    # a Metal or yaml change (what a port edits) is no CPU change
    _git(real_root, "checkout", "-q", "aten/src/ATen/native/cpu/zmath.h")
    _edit(real_root, "aten/src/ATen/native/native_functions.yaml", "- func:", "# x\n- func:")
    assert _gaps(real_root, ops) == {}


@pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
def test_porter_test_changed_since_is_not_proven_when_the_pr_edits_the_cpu_kernel(real_root, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    git_init(real_root)
    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-qm", "heaviside")
    _git(real_root, "tag", "base")
    # the PR changes heaviside's CPU kernel: the wheel's CPU still agrees with the Metal port
    _edit(real_root, CPU, "heaviside_cpu\", [&]() {", "heaviside_cpu\", [&]() {\n    // changed")
    args = ("test", "heaviside", "--device", "emulate", "--dtype", "float32", "--json")
    plain = porter(*args, root=real_root)
    assert plain.code == 0, plain.out          # what it said before: green
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
