"""The front end's findings per functor struct, kept between checks of one kernel file.

An edit of one functor's body changes that functor alone, yet every check walked the whole
file's AST in Python, under the GIL that the verdict's own thread needs. The file-level walks
(porter.emulate.frontend: the AST rules, unsequenced calls, narrow multiply-adds, lone
products, mixed halves) read each of the file's top-level declarations on its own, so each
functor struct's rows are kept, keyed as porter.emulate.groups keys a functor's object: the
file with every other functor struct blanked out (its own text, the functors it names, all
code outside functors and the functors that code names), the Metal version, the front end's
mode and the checkout's headers. The blanked structs keep their line count, so an edit that
moves a functor's lines changes its key, and kept rows carry their own lines. A file whose
functors reach others' text without spelling their names (groups.sealed: a macro's expansion,
a pasted name, a friend function) keeps nothing. A functor not
written as a column-0 `struct NAME_functor` (a macro's) is walked every time, as is all code
outside functors.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict

from porter.emulate import groups, kernel_cache
from porter.emulate.toolchain import cache_dir
from porter.runtime.whole_file import write_whole

# every walk a functor's entry holds: an entry missing one is walked again whole
WALKS = ("rules", "late", "unsequenced", "mul_adds", "products", "free", "mixed")
_HELD: OrderedDict[str, dict] = OrderedDict()     # key -> entry, this process's (--watch)
_HELD_MAX = 512
_LOCK = threading.Lock()      # the versions are checked in threads


class DeclarationMemo:
    """The kept rows of one file's functors under one version. `replay_or_walk` gives a
    top-level cursor's kept rows or walks it and records what the walk found; `flush` keeps
    the entries whose every walk was recorded."""

    def __init__(self, text: str, context: str, where, sealed: bool = False):
        # where(location) -> (file, line) in the kernel file, as the front end names them
        self._where = where
        spans = groups.functor_spans(text)
        lines = text.split("\n")
        bodies = {n: "\n".join(lines[a:b + 1]) for n, (a, b) in spans.items()}
        outside = re.sub(r"^struct \w+_functor;$", "", groups._masked(lines, spans, set()),
                         flags=re.M)
        named = set(re.findall(r"\b(\w+)_functor\b", outside)) & set(spans)
        everywhere = set().union(*(groups._closure(n, bodies) for n in named)) if named else set()
        self._start: dict[str, int] = {}
        self._keys: dict[str, str] = {}
        self._entries: dict[str, dict | None] = {}
        self._fresh: dict[str, dict] = {}
        # sealed: groups.sealed of the file, as this version preprocesses it
        if not sealed or not _keyable(text, lines, spans):
            return              # every declaration walked, as without a memo
        for name, (a, b) in spans.items():
            if lines[b].strip() != "};":
                continue        # the closing line holds more than the struct: not its alone
            keep = everywhere | groups._closure(name, bodies)
            h = hashlib.sha256(f"frontend-decl2\0{_code_digest()}\0{context}\0{name}\0".encode())
            h.update(groups._masked(lines, spans, keep).encode())
            self._keys[name], self._start[name] = h.hexdigest()[:32], a + 1

    def _name(self, top, display: str) -> str | None:
        """The functor a top-level cursor is, where its rows may be kept."""
        spelling = top.spelling or ""
        if not spelling.endswith("_functor"):
            return None
        name = spelling[:-len("_functor")]
        if name not in self._keys:
            return None
        file, line = self._where(top.location)
        return name if file == display and line == self._start[name] else None

    def _entry(self, name: str) -> dict | None:
        if name not in self._entries:
            key = self._keys[name]
            with _LOCK:
                entry = _HELD.get(key)
            if entry is None:
                path = cache_dir() / f"frontend-decl-{key}.json"
                try:
                    entry = json.loads(path.read_text())
                    kernel_cache.touch(path)
                except (OSError, ValueError):
                    entry = None
                if entry is not None and not all(w in entry for w in WALKS):
                    entry = None
                if entry is not None:
                    _hold(key, entry)
            self._entries[name] = entry
        return self._entries[name]

    def replay_or_walk(self, top, display: str, into: dict[str, list], walk) -> None:
        """Extend each list of `into` (a walk's name -> the rows it finds) with `top`'s kept
        rows; or, none kept, run `walk()` (which appends to those lists) and keep what it
        appended, for `flush`."""
        name = self._name(top, display)
        entry = self._entry(name) if name is not None else None
        if entry is not None:
            for kind, rows in into.items():
                rows += [_restored(kind, r) for r in entry[kind]]
            return
        starts = {kind: len(rows) for kind, rows in into.items()}
        walk()
        if name is not None:
            fresh = self._fresh.setdefault(name, {})
            for kind, rows in into.items():
                fresh[kind] = list(rows[starts[kind]:])

    def walked(self, top, display: str) -> bool:
        """Whether every walk of `top` is kept: its nodes need not be read at all."""
        name = self._name(top, display)
        return name is not None and self._entry(name) is not None

    def flush(self) -> None:
        for name, entry in self._fresh.items():
            if all(w in entry for w in WALKS):
                key = self._keys[name]
                _hold(key, entry)
                write_whole(cache_dir() / f"frontend-decl-{key}.json", json.dumps(entry))
        self._fresh.clear()


# a call of a compiler builtin (`__builtin_popcount(`): clang declares it where it is first
# called, and the rule that refuses it speaks at that call alone, so one functor's finding
# depends on another's text
_BUILTIN_CALL = re.compile(r"\b__(?!attribute__\b)(?![A-Z0-9_]+__\b)\w+")
# a function-like macro whose body pastes tokens: where a functor expands one, the names it
# makes (`CAT(b, _functor)`) are not in the text the key reads
_PASTING_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(((?:[^\n]*\\\n)*[^\n]*)", re.M)


def _keyable(text: str, lines: list[str], spans: dict[str, tuple[int, int]]) -> bool:
    """Whether every functor's findings follow from its key: no directive inside a functor
    struct (a macro another one expands), no functor name made by pasting tokens (which the
    key's reading of names cannot see), no compiler builtin named, and each struct's braces
    closing on the line its span ends (an indented `};` ends it sooner: what follows it is
    outside the struct, not in its key)."""
    from porter.source.cpp_scan import code_mask
    if _BUILTIN_CALL.search(text) or any("##" in ln and "functor" in ln for ln in lines):
        return False
    pasting = [m.group(1) for m in _PASTING_MACRO.finditer(text) if "##" in m.group(2)]
    calls = (re.compile(r"\b(?:" + "|".join(map(re.escape, pasting)) + r")\s*\(")
             if pasting else None)
    for a, b in spans.values():
        if any(ln.lstrip().startswith("#") for ln in lines[a:b + 1]):
            return False
        if calls is not None and calls.search("\n".join(lines[a:b + 1])):
            return False
        depth, opened = 0, False
        for k, ln in enumerate(code_mask("\n".join(lines[a:b + 1])).split("\n")):
            for ch in ln:
                if ch in "{}":
                    depth += 1 if ch == "{" else -1
                    opened = True
            if opened and depth == 0 and k != b - a:
                return False
    return True


_CODE_DIGEST: list[str] = []


def _code_digest() -> str:
    """This module's and groups.py's text: how a key is made and what it covers."""
    if not _CODE_DIGEST:
        h = hashlib.sha256()
        for module in (__file__, groups.__file__):
            with open(module, "rb") as f:
                h.update(f.read())
        _CODE_DIGEST.append(h.hexdigest()[:16])
    return _CODE_DIGEST[0]


def _restored(walk: str, row):
    """A kept row as the walk made it (JSON and the kept lists hold lists for tuples)."""
    if walk == "free":
        return row
    if walk == "products":              # (line, tokens, lone, left)
        return (row[0], tuple(row[1]), row[2], row[3])
    return tuple(row)


def _hold(key: str, entry: dict) -> None:
    with _LOCK:
        _HELD[key] = entry
        _HELD.move_to_end(key)
        while len(_HELD) > _HELD_MAX:
            _HELD.popitem(last=False)


class NoMemo:
    """A check that keeps nothing (`use_cache=False`, a header's own walk)."""

    def replay_or_walk(self, top, display, into, walk) -> None:
        walk()

    def walked(self, top, display) -> bool:
        return False

    def flush(self) -> None:
        pass
