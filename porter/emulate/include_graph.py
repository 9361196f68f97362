"""The checkout files a source file reads through its `#include` and `#import` lines.

Resolved as the MPS build resolves them: a quoted name beside the including file first, then
the checkout's `aten/src`; where the checkout lacks a header of the installed torch's MPS
folders (`ATen/native/mps/`, `ATen/mps/`: a checkout without its own OperationUtils.h), the
wheel's copy is read for what it includes in turn, since it brings checkout headers
(MetalShaderLibrary.h) to every `.mm` (review 25's H22). Lines are read whatever `#if` holds
them (a file that may read a header counts as reading it), `#include_next` as `#include`, and
an included file is followed whatever its name (`.txt`, `.mm`: the preprocessor reads any file,
review 26's M5, M6).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# a directive's `#`, or its digraph `%:`, and what may stand between its tokens: blanks, a
# comment, a line continued by `\` (review 48's F1: `%:include <x.h>` reached a header no cache
# key held)
_HASH = r"(?:#|%:)"
_GAP = r"(?:[ \t]|/\*.*?\*/|\\\r?\n)*"
_INCLUDE = re.compile(rf'^\s*{_HASH}{_GAP}(?:include_next|include|import){_GAP}([<"])([^>"]+)[>"]',
                      re.M)
# an include whose file a macro names (`#include PORTER_SWAP_H`): which file it is, the
# preprocessor decides (review 26's M1)
_COMPUTED = re.compile(rf'^\s*{_HASH}{_GAP}(?:include_next|include|import)\b{_GAP}'
                       r'(?![<"\s]|/\*|\\\r?\n)(\S.*)$', re.M)
WHEEL_MPS = ("ATen/native/mps/", "ATen/mps/")


class IncludeGraph:
    """One checkout's include lines, each file read once (a run asks for many sources)."""

    def __init__(self, root: Path, wheel: str | None = None, dirs: list[Path] | None = None):
        self.root = Path(root)
        self.src = self.root / "aten" / "src"
        self.wheel = wheel
        # where `<name>` is looked up: the host build's aten/src, or a Metal build's directories
        # (porter.emulate.headers.include_dirs)
        self.dirs = [Path(d) for d in dirs] if dirs is not None else [self.src]
        self._direct: dict[Path, list[Path]] = {}
        self._reached: dict[tuple[Path, str | None], set[Path]] = {}
        # directory -> (its files' names, the same lowercased): most include lookups miss (each
        # `<name>` is tried in every directory), and one listing answers a folder's misses where
        # a stat each cost ~0.1 ms (3,500 a `--watch` round on a real-size tree)
        self._listings: dict[str, tuple[frozenset, frozenset]] = {}
        # file -> (line, text) of its first include of a computed name
        self.computed: dict[Path, tuple[int, str]] = {}

    def _scan(self, path: Path, text: str) -> list[Path]:
        """The files `text` (as `path`'s) includes, resolved; an include of a computed name
        is kept in `computed`."""
        includes, computed = _live_directives(text)
        if computed is not None:
            self.computed.setdefault(path, computed)
        found = []
        for quote, name in includes:
            places = ([path.parent / name] if quote == '"' else []) + [d / name for d in self.dirs]
            if self.wheel and name.startswith(WHEEL_MPS):
                places.append(Path(self.wheel) / name)
            for where in places:
                if self._is_file(where):
                    found.append(Path(os.path.normpath(where)))
                    break
        return found

    def _is_file(self, path: Path) -> bool:
        folder, name = os.path.split(path)
        listing = self._listings.get(folder)
        if listing is None:
            try:
                with os.scandir(folder) as entries:
                    names = frozenset(e.name for e in entries if e.is_file())
            except OSError:
                names = frozenset()
            listing = self._listings[folder] = (names, frozenset(n.lower() for n in names))
        if name in listing[0]:
            return True
        # a file system that ignores case (macOS's) finds `Foo.H` as foo.h: ask it
        return name.lower() in listing[1] and path.is_file()

    def listed(self) -> set[Path]:
        """The folders the lookups so far have listed (existing or not)."""
        return {Path(os.path.normpath(folder)) for folder in self._listings}

    def _targets(self, path: Path) -> list[Path]:
        if path not in self._direct:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self._direct[path] = self._scan(path, text)
        return self._direct[path]

    def reached(self, source: Path, text: str | None = None) -> set[Path]:
        """Every checkout file `source` reads, directly or through the files it includes
        (`text`: its text, where not the disk's)."""
        source = Path(source)
        held = self._reached.get((source, text))
        if held is not None:
            return set(held)
        todo = list(self._scan(source, text) if text is not None else self._targets(source))
        seen: set[Path] = set()
        while todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            todo.extend(self._targets(path))
        found = self._reached[(source, text)] = {p for p in seen if p.is_relative_to(self.root)}
        return set(found)


# text -> what _live_directives read from it: a `--watch` round builds a new graph of the same
# files (0.45 s of a round's 1.6 s was this scan of unchanged .mm files); bounded, since a long
# watch sees many versions of the file being edited
_LIVE: dict[str, tuple[list[tuple[str, str]], tuple[int, str] | None]] = {}
_LIVE_MAX = 4096


def _live_directives(text: str) -> tuple[list[tuple[str, str]], tuple[int, str] | None]:
    """(quote, name) of each include the preprocessor reads, and (line, text) of the first
    include of a computed name (or None): not in a comment (one a backslash continues
    included) nor in `#if 0`; names are read from the text, where the mask blanks them."""
    held = _LIVE.get(text)
    if held is not None:
        return held
    from porter.source.cpp_scan import blank_inactive, code_mask
    mask = blank_inactive(code_mask(text))

    def live(m: re.Match) -> bool:
        return mask[m.start():m.end()].lstrip().startswith(("#", "%:"))

    computed = next(((text.count("\n", 0, m.start()) + 1, m.group(0).strip())
                     for m in _COMPUTED.finditer(text) if live(m)), None)
    includes = [m.groups() for m in _INCLUDE.finditer(text) if live(m)]
    if len(_LIVE) >= _LIVE_MAX:
        _LIVE.clear()
    _LIVE[text] = (includes, computed)
    return includes, computed
