"""The commit `porter pr` describes, checked out apart: a temporary git worktree of HEAD.

A pull request sends the branch's commits, not the working tree. Testing the working tree
described code the PR does not contain: a branch whose committed `sign` was wrong on six integer
dtypes got a description saying every dtype passes, because the fix sat uncommitted. So the
verdicts, the files and the checks all read a detached worktree of HEAD (`git worktree add`),
removed afterwards; what is uncommitted is named in a warning, never tested.
"""

from __future__ import annotations

import subprocess
from contextlib import contextmanager
from pathlib import Path

from porter.errors import PorterError
from porter.runtime.scratch import reused_directory


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), "-c", "core.quotepath=off", *args],
                          capture_output=True, text=True)


@contextmanager
def checked_out(root: Path):
    """The checkout at `root` as HEAD has it, in a temporary worktree: yields its root."""
    top = _git(root, "rev-parse", "--show-toplevel")
    prefix = _git(root, "rev-parse", "--show-prefix")
    if top.returncode != 0 or prefix.returncode != 0:
        raise PorterError(f"{root} is not in a git repository",
                          hint="porter pr describes what the branch changed: run it in the checkout's git repository")
    top_dir = Path(top.stdout.strip())
    # a path that repeats from run to run: the emulator's preludes and front-end text built for
    # the last run's worktree serve this one (porter.runtime.scratch)
    with reused_directory("pr", top_dir) as scratch:
        tree = scratch / "tip"
        _git(top_dir, "worktree", "prune")        # a killed run's worktree, gone from disk
        added = _git(top_dir, "worktree", "add", "--detach", "--quiet", str(tree), "HEAD")
        if added.returncode != 0:
            detail = (added.stderr.strip().splitlines() or [""])[0]
            raise PorterError(f"cannot check out HEAD apart to test it: git worktree add: {detail}",
                              hint="porter pr tests the commit it describes; commit the port first")
        try:
            yield tree / prefix.stdout.strip()
        finally:
            _git(top_dir, "worktree", "remove", "--force", str(tree))
            _git(top_dir, "worktree", "prune")


def uncommitted(root: Path, keep) -> list[str]:
    """Paths whose working-tree text is not HEAD's (tracked changes, and untracked files for
    which `keep(path)` holds: where a port writes), relative to `root`."""
    tracked = _git(root, "diff", "--name-only", "--no-renames", "--relative", "HEAD", "--").stdout
    untracked = _git(root, "ls-files", "--others", "--exclude-standard").stdout
    # `porter pr OP > pr.md` created pr.md: no file of the port
    return sorted(set(tracked.splitlines()) | {p for p in untracked.splitlines() if keep(p)})
