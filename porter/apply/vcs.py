"""Which of the files porter is about to write hold uncommitted work (git), for the dirty-tree rule.

porter refuses to overwrite uncommitted changes unless told (`--allow-dirty`, as `cargo fix`),
so that `git diff` shows exactly porter's edit and `git checkout -- FILE` undoes it. Only the
files about to be written are asked about, in one `git status` call limited to them (~10 ms
even in a full PyTorch checkout).

A checkout that is not in a git work tree (an unpacked source archive, a test's copy of a
fixture), or a machine without git, is allowed: there is no version to protect or to undo
to, and porter's own writes are all or nothing. If git is there but cannot answer (for
example "dubious ownership"), porter refuses: it cannot tell whether work would be lost.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from porter.errors import PorterError

NOT_A_REPO = "not a git repository"


def dirty_files(root: Path, rels: list[str]) -> list[str] | None:
    """Those of `rels` (paths relative to `root`) that differ from HEAD: modified, staged,
    deleted or untracked. None when `root` is not inside a git work tree or git is missing."""
    if not rels:
        return []
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(name, None)     # the checkout's own repository, not the caller's
    cmd = ["git", "--literal-pathspecs", "-C", str(root), "status", "--porcelain=v1", "-z",
           "--untracked-files=all", "--ignore-submodules=all", "--", *rels]
    try:
        proc = subprocess.run(cmd, capture_output=True, env=env, timeout=60,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PorterError(f"cannot ask git which files have uncommitted changes: {err}",
                          path=root, hint="pass --allow-dirty to edit anyway") from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        if NOT_A_REPO in message:
            return None
        first = message.splitlines()[0] if message else f"exit status {proc.returncode}"
        raise PorterError(f"cannot ask git which files have uncommitted changes: {first}",
                          path=root, hint="pass --allow-dirty to edit anyway")
    return _matching(_porcelain_paths(proc.stdout), rels)


def _porcelain_paths(out: bytes) -> list[str]:
    """Paths of `git status --porcelain=v1 -z` records ("XY PATH", renames add "ORIG")."""
    paths = []
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if len(record) < 4:
            continue
        paths.append(os.fsdecode(record[3:]))
        if record[:1] in (b"R", b"C"):
            paths.append(os.fsdecode(fields[i]) if i < len(fields) else "")
            i += 1
    return paths


def _matching(paths: list[str], rels: list[str]) -> list[str]:
    # git prints paths from the top of the repository, which may lie above the checkout
    # root; the pathspec limits them to our files, so a suffix match is exact enough.
    return [rel for rel in rels
            if any(p == rel or p.endswith("/" + rel) for p in paths)]


def refuse_dirty(root: Path, rels: list[str], flag: str = "--allow-dirty") -> None:
    """PorterError naming the files of `rels` that hold uncommitted changes, if any; `flag`
    is the command's option that allows them."""
    dirty = dirty_files(root, rels)
    if not dirty:
        return
    shown = ", ".join(dirty[:4]) + (f" and {len(dirty) - 4} more" if len(dirty) > 4 else "")
    raise PorterError(f"refusing to edit files with uncommitted changes: {shown}; nothing was written",
                      hint=f"commit or stash them first, or pass {flag}")
