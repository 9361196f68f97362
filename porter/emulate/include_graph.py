"""The checkout files a source file reads through its `#include` and `#import` lines.

Resolved as the MPS build resolves them: a quoted name beside the including file first, then
the checkout's `aten/src`; where the checkout lacks a header of the installed torch's MPS
folders (`ATen/native/mps/`, `ATen/mps/`: a checkout without its own OperationUtils.h), the
wheel's copy is read for what it includes in turn, since it brings checkout headers
(MetalShaderLibrary.h) to every `.mm` (review 25's H22). Lines are read whatever `#if` holds
them: a file that may read a header counts as reading it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_INCLUDE = re.compile(r'^\s*#\s*(?:include|import)\s*([<"])([^>"]+)[>"]', re.M)
WHEEL_MPS = ("ATen/native/mps/", "ATen/mps/")


class IncludeGraph:
    """One checkout's include lines, each file read once (a run asks for many sources)."""

    def __init__(self, root: Path, wheel: str | None = None):
        self.root = Path(root)
        self.src = self.root / "aten" / "src"
        self.wheel = wheel
        self._direct: dict[Path, list[Path]] = {}

    def _scan(self, path: Path, text: str) -> list[Path]:
        """The files `text` (as `path`'s) includes, resolved."""
        found = []
        for quote, name in _INCLUDE.findall(text):
            places = ([path.parent / name] if quote == '"' else []) + [self.src / name]
            if self.wheel and name.startswith(WHEEL_MPS):
                places.append(Path(self.wheel) / name)
            for where in places:
                if where.is_file():
                    found.append(Path(os.path.normpath(where)))
                    break
        return found

    def _targets(self, path: Path) -> list[Path]:
        if path not in self._direct:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self._direct[path] = self._scan(path, text)
        return self._direct[path]

    def reached(self, source: Path, text: str | None = None) -> set[Path]:
        """Every checkout file `source` reads, directly or through headers (`text`: its text,
        where not the disk's)."""
        source = Path(source)
        todo = list(self._scan(source, text) if text is not None else self._targets(source))
        seen: set[Path] = set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            if path.suffix in (".h", ".hpp", ".hh", ".inc"):
                todo.extend(self._targets(path))
        return {p for p in seen if p.is_relative_to(self.root)}
