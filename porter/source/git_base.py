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
    def git(*args: str) -> str | None:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else None
    if git("rev-parse", "--verify", "--quiet", "HEAD^{commit}") is None:
        return None
    for ref in DEFAULT_BASES:
        if git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}") is not None:
            base = git("merge-base", "HEAD", ref)
            return (ref, base) if base else None
    return None
