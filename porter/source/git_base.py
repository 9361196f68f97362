"""The base a fork's branch forked from: the merge base of HEAD with the first of the usual
upstream refs the repository has (`porter pr`'s base, `porter test`'s by default)."""

from __future__ import annotations

import subprocess
from pathlib import Path

# where a fork's branch usually comes from, in the order tried
DEFAULT_BASES = ("origin/main", "upstream/main", "main", "origin/master", "master")


def default_base(root: Path) -> tuple[str, str] | None:
    """(ref, its merge base with HEAD) for the first of DEFAULT_BASES the repository has, as
    `porter pr` picks its base; None where `root` is in no git repository, has no commit, or
    has none of those refs."""
    def git(*args: str, given: str | None = None) -> str | None:
        proc = subprocess.run(["git", "-C", str(root), *args], input=given, capture_output=True,
                              text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None
    # every ref resolved in one run, as `rev-parse --verify` resolves each (a run per ref was
    # seven git processes a call, fourteen a `--watch` round): "<sha> commit <size>" for one
    # that names a commit, "<name> missing" (or "ambiguous") for one that does not
    asked = ["HEAD", *DEFAULT_BASES]
    answer = git("cat-file", "--batch-check",
                 given="".join(f"{ref}^{{commit}}\n" for ref in asked))
    if answer is None:
        return None
    commits = [line.split()[1:2] == ["commit"] for line in answer.splitlines()]
    if len(commits) != len(asked) or not commits[0]:
        return None
    for ref, found in zip(DEFAULT_BASES, commits[1:]):
        if found:
            base = git("merge-base", "HEAD", ref)
            return (ref, base) if base else None
    return None


def wheel_commit(root: Path) -> str | None:
    """The commit the installed torch was built from (torch/version.py's git_version), where the
    repository of `root` holds it: the CPU kernels porter's reference runs are that commit's,
    so a change since it, committed on the branch itself included, is a change of the
    reference (review 31's H05: a CPU edit committed on main, the merge base then HEAD, left
    the wheel's CPU standing for the checkout's). None: no torch, or no such commit here."""
    sha = wheel_git_version()
    if sha is None:
        return None
    proc = subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{sha}^{{commit}}"],
                          capture_output=True, text=True)
    return sha if proc.returncode == 0 else None


def wheel_git_version() -> str | None:
    """torch/version.py's git_version of the installed torch, read without importing torch."""
    import importlib.util
    import re
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"^git_version\s*=\s*['\"]([0-9a-f]{40})['\"]", text, re.M)
    return found.group(1) if found else None
