"""A planned set of file edits: shown as status lines and a diff, applied all or nothing.

Nothing else in porter writes to the checkout. `apply` re-reads every target first and
refuses if one changed since it was planned (stale plan), writes each new text to a
temporary file beside its target, then replaces the targets one by one; if a replace fails
the targets already replaced are restored, so the tree ends either all old or all new.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from porter.errors import PorterError
from porter.linediff import unified_diff_text


@dataclass(frozen=True)
class FileChange:
    path: str          # relative to the checkout root
    old: str | None    # None: the file does not exist yet
    new: str

    @property
    def status(self) -> str:
        if self.old is None:
            return "create"
        return "identical" if self.old == self.new else "update"

    def diff(self) -> str:
        if self.old == self.new:
            return ""
        out = []
        for line in unified_diff_text(self.old or "", self.new,
                                 "/dev/null" if self.old is None else f"a/{self.path}",
                                 f"b/{self.path}"):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return "".join(out)


@dataclass
class ChangeSet:
    root: Path
    changes: dict[str, FileChange] = field(default_factory=dict)

    def set(self, path: str, old: str | None, new: str) -> None:
        """Record the final text of `path`; `old` is its text when planning began."""
        if path in self.changes:
            old = self.changes[path].old
        self.changes[path] = FileChange(path, old, new)

    def current(self, path: str, read) -> str:
        """The planned text of `path` so far, else what `read(path)` returns."""
        change = self.changes.get(path)
        return change.new if change else read(path)

    @property
    def pending(self) -> list[FileChange]:
        return [c for c in self.changes.values() if c.status != "identical"]

    def __bool__(self) -> bool:
        return bool(self.pending)

    def status_lines(self) -> list[str]:
        return [f"{c.status:>9}  {c.path}" for c in self.changes.values()]

    def diff(self) -> str:
        return "".join(c.diff() for c in self.pending)

    def apply(self) -> list[str]:
        """Write every pending change, all or nothing. Returns the paths written."""
        pending = self.pending
        for change in pending:
            target = self.root / change.path
            try:
                with open(target, encoding="utf-8", newline="") as f:
                    on_disk = f.read()
            except FileNotFoundError:
                on_disk = None
            if on_disk != change.old:
                raise PorterError(f"{change.path} changed on disk while porter was planning; "
                                  "nothing was written", hint="run the command again")
        staged: list[tuple[FileChange, Path, str]] = []
        try:
            for change in pending:
                target = self.root / change.path
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".porter-tmp",
                                           dir=target.parent)
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                    f.write(change.new)
                    f.flush()
                    os.fsync(f.fileno())
                if change.old is not None:
                    os.chmod(tmp, os.stat(target).st_mode & 0o7777)
                staged.append((change, target, tmp))
        except OSError as err:
            for _, _, tmp in staged:
                _unlink_quietly(tmp)
            _unlink_quietly(locals().get("tmp"))
            raise PorterError(f"could not stage the edit of {change.path}: {err.strerror}; "
                              "nothing was written") from None
        done: list[tuple[FileChange, Path]] = []
        try:
            for change, target, tmp in staged:
                os.replace(tmp, target)
                done.append((change, target))
        except OSError as err:
            failed = change.path
            for change, target in reversed(done):
                _restore(target, change.old)
            for _, _, tmp in staged:
                _unlink_quietly(tmp)
            raise PorterError(f"could not write {failed}: {err.strerror}; "
                              "every file was restored") from None
        return [c.path for c in pending]


def _restore(target: Path, old: str | None) -> None:
    if old is None:
        _unlink_quietly(str(target))
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".porter-tmp", dir=target.parent)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(old)
    os.replace(tmp, target)


def _unlink_quietly(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
