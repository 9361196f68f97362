"""porter.source.git_base.default_base: the base `porter pr` and `porter test` compare with, the
first of origin/main, upstream/main, main, origin/master and master that names a commit, as
`git rev-parse --verify` resolves each, and its merge base with HEAD: two git runs, not one
per ref."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from porter.source import git_base


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def commit(root: Path, name: str) -> str:
    (root / name).write_text(name)
    git(root, "add", name)
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", name)
    return git(root, "rev-parse", "HEAD")


def one_ref_at_a_time(root: Path):
    """The base as a git run per ref finds it (rev-parse --verify), for the table."""
    def ok(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              text=True).returncode == 0
    if not ok("rev-parse", "--verify", "--quiet", "HEAD^{commit}"):
        return None
    for ref in git_base.DEFAULT_BASES:
        if ok("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"):
            return ref, git(root, "merge-base", "HEAD", ref)
    return None


def _repo(tmp_path: Path, layout: str) -> Path:
    root = tmp_path / layout
    root.mkdir()
    git(root, "init", "-q", "-b", "trunk")
    if layout == "no commit":
        return root
    first = commit(root, "a")
    if layout in ("main", "branch off main"):
        git(root, "branch", "main", first)
    if layout == "master and a remote main":
        git(root, "branch", "master", first)
        second = commit(root, "b")
        git(root, "update-ref", "refs/remotes/origin/main", second)
    if layout == "branch off main":
        git(root, "checkout", "-qb", "work")
        commit(root, "c")
    if layout == "main is a tag of a tree":       # names no commit: passed over
        tree = git(root, "rev-parse", "HEAD^{tree}")
        git(root, "tag", "main", tree)
        git(root, "branch", "master", first)
    if layout == "upstream main and master":
        git(root, "branch", "master", first)
        git(root, "update-ref", "refs/remotes/upstream/main", commit(root, "d"))
    return root


LAYOUTS = ["no commit", "none of the refs", "main", "branch off main", "master and a remote main",
           "main is a tag of a tree", "upstream main and master"]
# the base each layout has, by name (the merge base is checked against git's own)
WANT = {"no commit": None, "none of the refs": None, "main": "main", "branch off main": "main",
        "master and a remote main": "origin/main", "main is a tag of a tree": "master",
        "upstream main and master": "upstream/main"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_base_is_what_a_git_run_per_ref_finds(tmp_path, layout):
    root = _repo(tmp_path, layout)
    found = git_base.default_base(root)
    assert found == one_ref_at_a_time(root)
    assert (found[0] if found else None) == WANT[layout]


def test_no_repository_has_no_base(tmp_path):
    assert git_base.default_base(tmp_path) is None


def test_the_base_takes_two_git_runs(tmp_path, monkeypatch):
    """A git run per ref was seven a call, fourteen a `--watch` round (the hosts and the CPU
    references its branch changed each ask)."""
    root = _repo(tmp_path, "master and a remote main")
    runs = []
    real = subprocess.run
    monkeypatch.setattr(git_base, "subprocess", SimpleNamespace(
        run=lambda *a, **k: runs.append(a[0][3]) or real(*a, **k)))
    assert git_base.default_base(root)[0] == "origin/main"
    assert runs == ["cat-file", "merge-base"]
