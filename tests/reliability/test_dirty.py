"""The dirty-tree rule: porter refuses to overwrite uncommitted work in the files it is about to
write, unless --allow-dirty (as cargo fix). Dry runs never refuse; a checkout outside git, or
a machine without git, is allowed (porter/vcs.py says why)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from porter.source.checkout import COMMON_MPS, NATIVE_YAML
from porter.testing.trees import fixture_root
from tests.reliability import harness
from tests.reliability.harness import git_init, one_line_error, porter, read_tree

UNARY_MM = "aten/src/ATen/native/mps/operations/UnaryOps.mm"
HEAVISIDE = ("new-op", "heaviside")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True,
                          text=True).stdout


def _append(path: Path, text: str = "# my uncommitted work\n") -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
def repo(mini_root: Path) -> Path:
    git_init(mini_root)
    return mini_root


def run(root: Path, *extra: str, cmd=HEAVISIDE) -> harness.Result:
    # the port's own test is not what the dirty-tree rule is about (47 s of this file's 52)
    quick = ["--no-test"] if cmd[0] in harness.OPS_FOR and "--dry-run" not in extra else []
    return porter(cmd[0], *extra, *quick, "--root", str(root), "--", cmd[1])


def test_a_clean_tree_is_edited(repo):
    assert run(repo).code == 0
    assert NATIVE_YAML in _git(repo, "status", "--porcelain")


def test_uncommitted_change_in_a_target_is_refused(repo):
    _append(repo / NATIVE_YAML)
    before = read_tree(repo)
    result = run(repo)
    assert one_line_error(result), result.err
    assert result.err == (f"porter: error: refusing to edit files with uncommitted changes: "
                          f"{NATIVE_YAML}; nothing was written (commit or stash them first, or "
                          "pass --allow-dirty)\n")
    assert read_tree(repo) == before


def test_allow_dirty_edits_and_keeps_the_users_work(repo):
    _append(repo / NATIVE_YAML)
    result = run(repo, "--allow-dirty")
    assert result.code == 0, result.err
    text = (repo / NATIVE_YAML).read_text()
    assert text.endswith("# my uncommitted work\n") and "MPS: heaviside_out" in text


def test_staged_and_untracked_targets_count_as_dirty(repo):
    _append(repo / NATIVE_YAML)
    _git(repo, "add", NATIVE_YAML)
    _git(repo, "rm", "-q", "--cached", COMMON_MPS)       # untracked now: not in git at all
    result = run(repo)
    assert one_line_error(result)
    assert f"changes: {NATIVE_YAML}, {COMMON_MPS}; nothing" in result.err


def test_a_truly_untracked_target_is_refused(mini_root):
    # never in git at all (not a staged deletion, which `git status` reports even with
    # --untracked-files=no): only an untracked-files query finds it, and overwriting it would
    # lose work no `git checkout` can bring back
    git_init(mini_root)
    _git(mini_root, "rm", "-q", "--cached", NATIVE_YAML)
    _git(mini_root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "untrack")
    assert _git(mini_root, "status", "--porcelain", "--", NATIVE_YAML) == f"?? {NATIVE_YAML}\n"
    before = read_tree(mini_root)
    result = run(mini_root)
    assert one_line_error(result), result.err
    assert f"changes: {NATIVE_YAML}; nothing" in result.err
    assert read_tree(mini_root) == before


def test_dirty_files_porter_does_not_write_do_not_matter(repo):
    _append(repo / UNARY_MM, "// unrelated work in progress\n")
    (repo / "scratch.txt").write_text("untracked, unrelated\n")
    assert run(repo).code == 0


def test_dry_run_never_refuses(repo):
    _append(repo / NATIVE_YAML)
    before = read_tree(repo)
    result = run(repo, "--dry-run")
    assert result.code == 0 and "+++ b/" + NATIVE_YAML in result.out
    assert read_tree(repo) == before


def test_json_error(repo):
    _append(repo / NATIVE_YAML)
    result = run(repo, "--json")
    assert result.code == 2
    data = json.loads(result.out)
    assert data["ok"] is False and NATIVE_YAML in data["error"] and "--allow-dirty" in data["hint"]


def _edited_keeping_the_users_work(root: Path, tmp_path: Path) -> None:
    """The tree is what the port writes on a clean copy, plus the user's uncommitted line."""
    clean = Path(shutil.copytree(fixture_root(), tmp_path / "clean"))
    assert run(clean).code == 0
    want = read_tree(clean)
    assert want != read_tree(fixture_root())
    want[NATIVE_YAML] += b"# my uncommitted work\n"
    assert read_tree(root) == want


def test_a_checkout_outside_git_is_allowed(mini_root, tmp_path):
    _append(mini_root / NATIVE_YAML)
    result = run(mini_root)
    assert result.code == 0, result.err
    _edited_keeping_the_users_work(mini_root, tmp_path)


def test_a_checkout_in_a_subdirectory_of_a_repository(tmp_path, mini_root):
    outer = tmp_path / "outer"
    (outer / "third_party").mkdir(parents=True)
    root = Path(mini_root.rename(outer / "third_party" / "pytorch"))
    git_init(outer)
    _append(root / COMMON_MPS)
    result = run(root)
    assert one_line_error(result) and f"changes: {COMMON_MPS}; nothing" in result.err
    assert run(root, "--allow-dirty").code == 0


def test_no_git_installed_is_allowed(repo, monkeypatch, tmp_path):
    _append(repo / NATIVE_YAML)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    # the compiler porter builds the planned kernel with stays reachable (CXX), git does not
    monkeypatch.setenv("CXX", shutil.which("g++") or shutil.which("c++"))
    monkeypatch.setenv("PATH", str(empty))
    result = run(repo)
    assert result.code == 0, result.err
    _edited_keeping_the_users_work(repo, tmp_path)


def test_git_that_cannot_answer_refuses(repo, monkeypatch, tmp_path):
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\necho \"fatal: detected dubious ownership in repository at '$PWD'\" >&2\n"
                    "echo 'more detail' >&2\nexit 128\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    before = read_tree(repo)
    result = run(repo)
    assert one_line_error(result), result.err
    assert "cannot ask git which files have uncommitted changes: fatal: detected dubious" in result.err
    assert "--allow-dirty" in result.err
    assert read_tree(repo) == before
    assert run(repo, "--allow-dirty").code == 0


def test_many_dirty_files_are_counted(repo):
    from porter.apply.vcs import refuse_dirty
    from porter.errors import PorterError

    rels = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.mm"))
    for rel in rels:
        _append(repo / rel, "// wip\n")
    with pytest.raises(PorterError) as err:
        refuse_dirty(repo, rels)
    assert f"and {len(rels) - 4} more" in str(err.value) and "\n" not in str(err.value)


def test_only_files_still_to_write_are_asked_about(repo):
    """After a killed run wrote some files (dirty now, but porter's own edit), the re-run
    writes the others and is not refused."""
    sc_old = read_tree(repo)
    assert run(repo).code == 0
    new = read_tree(repo)
    _git(repo, "checkout", "--", ".")
    assert read_tree(repo) == sc_old
    (repo / NATIVE_YAML).write_bytes(new[NATIVE_YAML])
    result = run(repo)
    assert result.code == 0, result.err
    assert read_tree(repo) == new


@pytest.mark.slow
def test_every_editing_command_honours_the_rule(mini_scenarios):
    by_command = {}
    for sc in mini_scenarios:
        by_command.setdefault(sc.command, sc)
    assert "new-op" in by_command
    for sc in by_command.values():
        sc.reset()
        rel = sc.targets[0]
        _append(sc.tree / rel, "\n")
        dirty = read_tree(sc.tree)
        result = porter(*sc.argv)
        assert one_line_error(result) and f"uncommitted changes: {rel};" in result.err, (sc.name, result)
        assert read_tree(sc.tree) == dirty
        result = porter(sc.command, "--allow-dirty", *sc.argv[1:])
        assert result.code == 0, (sc.name, result.err)
        sc.reset()
