"""What the branch changed: the base it forked from, the files it touches, their base texts.

`porter pr` describes a port as a reviewer sees it: `git diff BASE` of the tree it reads (for
`porter pr`, a clean worktree of HEAD: porter.review.tip, so the diff is the commits) plus
untracked files where a port writes (a created ActivationKernel.h), never an unrelated one (the
`pr.md` that `porter pr OP > pr.md` creates).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

from porter.errors import PorterError
from porter.source import checkout as co
from porter.source.git_base import DEFAULT_BASES

# where a port writes, and so where an untracked file may be one the port created (a new
# ActivationKernel.h); any other untracked file (pr.md, notes, a build folder) is not the PR's
PORT_SOURCES = (f"{co.NATIVE}/", f"{co.C10_METAL}/", f"{co.TESTING}/", "test/")


def port_source(path: str) -> bool:
    return path.startswith(PORT_SOURCES)


class FileChange(NamedTuple):
    path: str
    status: str          # "added", "modified", "deleted"
    added: int
    removed: int


class Branch:
    def __init__(self, root: Path, base: str | None = None):
        self.root = Path(root)
        self.base_ref = base or self._default_base()
        self.base = self._git("rev-parse", "--verify", "--quiet", f"{self.base_ref}^{{commit}}",
                              error=f"--base {self.base_ref}: unknown revision",
                              hint="pass the branch the port forks from, e.g. --base origin/main").strip()
        if base is None:      # the fork point, not main's newest commit
            self.base = self._git("merge-base", "HEAD", self.base).strip()

    def _default_base(self) -> str:
        self._git("rev-parse", "--git-dir", error=f"{self.root} is not in a git repository",
                  hint="porter pr describes what the branch changed: run it in the checkout's git repository")
        for ref in DEFAULT_BASES:
            if subprocess.run(["git", "-C", str(self.root), "rev-parse", "--verify", "--quiet",
                               f"{ref}^{{commit}}"], capture_output=True).returncode == 0:
                return ref
        return "HEAD"

    def head(self) -> str:
        return self._git("rev-parse", "--verify", "--quiet", "HEAD^{commit}",
                         error="the repository has no commit yet").strip()

    def files(self) -> list[FileChange]:
        out: list[FileChange] = []
        status = {}
        for line in self._git("diff", "--name-status", "--no-renames", self.base, "--").splitlines():
            code, _, path = line.partition("\t")
            status[path] = {"A": "added", "D": "deleted"}.get(code[:1], "modified")
        for line in self._git("diff", "--numstat", "--no-renames", self.base, "--").splitlines():
            added, removed, path = line.split("\t", 2)
            out.append(FileChange(path, status.get(path, "modified"),
                                  int(added) if added.isdigit() else 0,
                                  int(removed) if removed.isdigit() else 0))
        for path in self._git("ls-files", "--others", "--exclude-standard").splitlines():
            if not port_source(path):
                continue        # `porter pr OP > pr.md` creates pr.md: no file of the port
            text = (self.root / path).read_text(encoding="utf-8", errors="replace")
            out.append(FileChange(path, "added", text.count("\n"), 0))
        return sorted(out)

    def base_text(self, rel: str) -> str | None:
        proc = subprocess.run(["git", "-C", str(self.root), "show", f"{self.base}:{rel}"],
                              capture_output=True, text=True)
        return proc.stdout if proc.returncode == 0 else None

    def base_checkout(self) -> "BaseCheckout":
        return BaseCheckout(self)

    def _git(self, *args: str, error: str | None = None, hint: str | None = None) -> str:
        try:
            proc = subprocess.run(["git", "-C", str(self.root), "-c", "core.quotepath=off", *args],
                                  capture_output=True, text=True)
        except FileNotFoundError:
            raise PorterError("porter pr needs git, which is not on PATH") from None
        if proc.returncode != 0:
            detail = (proc.stderr.strip().splitlines() or [""])[0]
            raise PorterError(error or f"git {args[0]} failed: {detail}", hint=hint)
        return proc.stdout


class BaseCheckout(co.Checkout):
    """The checkout as the base commit has it, read through git (nothing is checked out)."""

    def __init__(self, branch: Branch):
        super().__init__(branch.root)
        self._branch = branch
        self._listing: list[str] | None = None

    def exists(self, rel: str) -> bool:
        return rel in self._files()

    def read(self, rel: str) -> str:
        text = self._texts.get(rel)
        if text is None:
            text = self._branch.base_text(rel)
            if text is None:
                raise PorterError(f"{rel}: not in {self._branch.base_ref}")
            self._texts[rel] = text
        return text

    def glob(self, rel_dir: str, pattern: str) -> list[str]:
        import fnmatch
        prefix = rel_dir.rstrip("/") + "/"
        recursive = pattern.startswith("**/")
        name = pattern[3:] if recursive else pattern
        return sorted(p for p in self._files() if p.startswith(prefix)
                      and (recursive or "/" not in p[len(prefix):])
                      and fnmatch.fnmatchcase(p.rsplit("/", 1)[-1], name))

    def _files(self) -> list[str]:
        if self._listing is None:
            self._listing = self._branch._git("ls-tree", "-r", "--name-only", self._branch.base).splitlines()
        return self._listing
