"""Where things live in a PyTorch checkout, and reading them once per run."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path
from typing import NamedTuple

from porter.errors import PorterError
from porter.source.cpp_scan import code_mask

NATIVE = "aten/src/ATen/native"
NATIVE_YAML = f"{NATIVE}/native_functions.yaml"
TAGS_YAML = f"{NATIVE}/tags.yaml"
MPS = f"{NATIVE}/mps"
KERNELS = f"{MPS}/kernels"
OPERATIONS = f"{MPS}/operations"
CPU_KERNELS = f"{NATIVE}/cpu"
TESTING = "torch/testing/_internal"
COMMON_MPS = f"{TESTING}/common_mps.py"
OPINFO_DB = f"{TESTING}/common_methods_invocations.py"
OPINFO_DEFINITIONS = f"{TESTING}/opinfo/definitions"
C10_METAL = "c10/metal"
MPS_FALLBACK = "aten/src/ATen/mps/MPSFallback.mm"     # ops sent to the CPU on MPS
TEST_MPS = "test/test_mps.py"


class Definition(NamedTuple):
    """Where `Checkout.first_definition` found a head: the file, its text, the text with
    comments and strings blanked (same offsets), and the head's match in that mask."""
    rel: str
    text: str
    mask: str
    match: re.Match


def torch_is_importable(root: Path | None) -> bool:
    """Whether the checkout's own `torch` package is built in place (its `_C` extension is
    there): the op database and the reference cache then use it, not the installed torch."""
    if root is None:
        return False
    pkg = Path(root) / "torch"
    return (pkg / "__init__.py").is_file() and (any(pkg.glob("_C*.so")) or any(pkg.glob("_C*.pyd")))


def opinfo_files(checkout: "Checkout") -> list[str]:
    """The files that define OpInfos (`common_methods_invocations.py` and
    `opinfo/definitions/*.py`), relative to the checkout."""
    files = [OPINFO_DB] if checkout.exists(OPINFO_DB) else []
    return files + checkout.glob(OPINFO_DEFINITIONS, "*.py")


def find_root(start: Path | None = None) -> Path:
    """The checkout containing `start` (default: the current directory)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / NATIVE_YAML).is_file():
            return candidate
    raise PorterError(f"not inside a PyTorch checkout: no {NATIVE_YAML} above {here}",
                      hint="run from a checkout or pass --root DIR")


class Checkout:
    """A PyTorch source tree. Paths are relative to `root`; each file is read at most once."""

    def __init__(self, root: Path):
        self.root = root
        self._texts: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Checkout({str(self.root)!r})"

    @classmethod
    def at(cls, root: str | Path | None) -> "Checkout":
        if root is None:
            return cls(find_root())
        path = Path(root).resolve()
        if not path.is_dir():
            raise PorterError(f"--root {root}: no such directory")
        if not (path / NATIVE_YAML).is_file():
            raise PorterError(f"{root} is not a PyTorch checkout: {NATIVE_YAML} is missing",
                              hint="pass the directory that holds aten/ and torch/")
        return cls(path)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def read(self, rel: str) -> str:
        text = self._texts.get(rel)
        if text is None:
            path = self.root / rel
            try:
                with open(path, encoding="utf-8", newline="") as f:
                    text = f.read()
            except FileNotFoundError:
                raise PorterError(f"{rel}: file is missing from the checkout") from None
            except UnicodeDecodeError as err:
                raise PorterError(f"{rel}: not UTF-8 text ({err.reason})") from None
            self._texts[rel] = text
        return text

    def first_definition(self, rel_dir: str, pattern: str, name: str,
                         head: re.Pattern) -> Definition | None:
        """The first file of `rel_dir` matching `pattern` (sorted) whose code, comments and
        strings blanked, `head` matches: how a reader finds a function, macro or template the
        checkout defines once (a file that never spells `name` is not masked). None where no
        file does."""
        for rel in self.glob(rel_dir, pattern):
            text = self.read(rel)
            if name not in text:
                continue
            mask = code_mask(text)
            m = head.search(mask)
            if m is not None:
                return Definition(rel, text, mask, m)
        return None

    def glob(self, rel_dir: str, pattern: str) -> list[str]:
        """Files under `rel_dir` matching `pattern` (pathlib's syntax: `**/` recurses), sorted."""
        if "/" in pattern:
            base = self.root / rel_dir
            return sorted(str(p.relative_to(self.root)) for p in base.glob(pattern) if p.is_file())
        # One directory: os.scandir has each entry's type from the listing, where pathlib's
        # glob stats every file (~2 ms on aten/src/ATen/native, which a port lists four times).
        try:
            with os.scandir(self.root / rel_dir) as entries:
                return sorted(f"{rel_dir}/{e.name}" for e in entries
                              if fnmatch.fnmatchcase(e.name, pattern) and e.is_file())
        except (FileNotFoundError, NotADirectoryError):
            return []


def resolve_checkout(root: str | Path | None) -> Checkout | None:
    """--root, else the checkout around the working directory, else none (installed torch, no
    expectations)."""
    if root is not None:
        return Checkout.at(root)
    try:
        return Checkout.at(find_root())
    except PorterError:
        return None
