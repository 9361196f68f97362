"""Every OpInfo name of the checkout, found statically and fast.

`ast.parse` of `common_methods_invocations.py` alone costs ~1 s here, too much for `porter
check`'s budget, so this index finds each `...Info(` call head with `str.find`, reads its
first (string) argument, and attributes each `variant_test_name=` / `aten_name=` literal to
the nearest call head before it. Heads and keywords on commented lines are skipped. Calls
built by factory functions (`make_mvlgamma_opinfo(variant_test_name=...)`) are resolved
through the factory's own definition, and `make_x(name="...")` factories by that literal. On
torch 2.13 the names equal those of an `ast` walk (1.3 s) plus the 14 factory-made ones an
`ast` walk cannot see (mvlgamma variants, signal.windows.*), in ~0.05 s.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from porter.source import checkout as co
from porter.source.opinfo_source import OpInfoSource, call_span, parse_call

FIRST_ARG_RE = re.compile(r"""\s*(?:#[^\n]*\n\s*)*(?:name\s*=\s*)?(?:(['"])([^'"\n]+)\1)?""")
KWARG_RE = re.compile(r"""(variant_test_name|aten_name)\s*=\s*(['"])([^'"\n]*)\2""")
NAME_VALUE_RE = re.compile(r"""name=(['"])([^'"\n]+)\1""")
IDENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
# Info classes that are not op definitions (decorators, foreach wrappers).
NOT_OPS = {"Decorate", "ForeachFunc", "ForeachRightmostArgType", ""}


@dataclass(frozen=True)
class Head:
    cls: str              # "UnaryUfuncInfo"
    name: str             # "special.log_ndtr"
    variant: str          # "" or "decimals_0"
    aten_name: str | None
    path: str
    offset: int           # of the class (or factory) name
    line: int

    @property
    def key(self) -> str:
        """common_mps.py spelling: name + variant_test_name."""
        return self.name + self.variant

    @property
    def aten(self) -> str:
        return self.aten_name or self.name.replace(".", "_")

    @property
    def is_ref(self) -> bool:
        return self.name.startswith("_refs.")


class OpInfoIndex:
    def __init__(self, checkout: co.Checkout):
        self.checkout = checkout
        self.heads: list[Head] = []
        for rel in co.opinfo_files(checkout):
            self.heads += _heads(checkout.read(rel), rel)
        self.by_key: dict[str, list[Head]] = {}
        self.by_aten: dict[str, list[Head]] = {}
        for head in self.heads:
            self.by_key.setdefault(head.key, []).append(head)
            if not head.is_ref:
                self.by_aten.setdefault(head.aten, []).append(head)

    @property
    def keys(self) -> set[str]:
        return set(self.by_key)

    def source(self, head: Head) -> OpInfoSource | None:
        """The parsed call (kwargs as ast nodes), or None when its slice does not parse."""
        text = self.checkout.read(head.path)
        start = head.offset
        end = call_span(text, start)
        node = parse_call(text, start, end) if end > 0 else None
        if node is None:
            return None
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        return OpInfoSource(head.cls, head.name, head.path, start, end, head.line, kwargs, node)

    def at_line(self, path: str, line: int) -> Head | None:
        """The call head at or before `line` of `path` (the OpInfo a changed line belongs to)."""
        if not hasattr(self, "_lines"):
            self._lines: dict[str, list[Head]] = {}
            for head in self.heads:
                self._lines.setdefault(head.path, []).append(head)
        heads = self._lines.get(path, [])
        i = bisect.bisect_right([h.line for h in heads], line) - 1
        return heads[i] if i >= 0 else None


def _commented(text: str, pos: int) -> bool:
    return "#" in text[text.rfind("\n", 0, pos) + 1:pos]


def _heads(text: str, rel: str) -> list[Head]:
    # (offset of the class name, offset just past "(", class or factory, op name or None)
    found: list[tuple[int, int, str, str | None]] = []
    pos = text.find("Info(")
    while pos >= 0:
        callee = _callee_before(text, pos + 5)
        if callee and callee[1][:-4] not in NOT_OPS and not _commented(text, pos):
            arg = FIRST_ARG_RE.match(text, pos + 5)
            found.append((callee[0], pos + 5, callee[1], arg.group(2)))
        pos = text.find("Info(", pos + 5)
    # Factory calls: `make_x_opinfo(variant_test_name=...)` or `make_x_opinfo(name="...", ...)`.
    pos = text.find("name=")
    while pos >= 0:
        start = pos - 13 if text.startswith("variant_test_name=", pos - 13) else pos
        callee = None if _word_before(text, start) else _callee_before(text, start)
        if callee and not callee[1].endswith("Info") and not _commented(text, pos):
            if start < pos:
                found.append((callee[0], start, callee[1], _factory_op(text, callee[1], found)))
            else:
                value = NAME_VALUE_RE.match(text, pos)
                if value:
                    found.append((callee[0], pos, callee[1], value.group(2)))
        pos = text.find("name=", pos + 5)
    found.sort()
    starts = [f[1] for f in found]
    kwargs: dict[int, dict[str, str]] = {}
    for keyword in ("variant_test_name", "aten_name"):
        pos = text.find(keyword + "=")
        while pos >= 0:
            m = KWARG_RE.match(text, pos)
            if m and not _word_before(text, pos) and not _commented(text, pos):
                i = bisect.bisect_right(starts, pos) - 1
                if i >= 0:
                    kwargs.setdefault(i, {}).setdefault(keyword, m.group(3))
            pos = text.find(keyword + "=", pos + 1)
    heads, line, counted = [], 1, 0
    for i, (start, _, cls, name) in enumerate(found):
        line += text.count("\n", counted, start)
        counted = start
        if name:
            kw = kwargs.get(i, {})
            heads.append(Head(cls, name, kw.get("variant_test_name", ""), kw.get("aten_name"),
                              rel, start, line))
    return heads


def _callee_before(text: str, pos: int) -> tuple[int, str] | None:
    """(offset, name) of `name(` when only whitespace separates its `(` from `pos`."""
    head = text[max(0, pos - 80):pos].rstrip()
    if not head.endswith("("):
        return None
    head = head[:-1]
    name = head[len(head.rstrip(IDENT_CHARS)):]
    if not name or name[0].isdigit():
        return None
    start = pos - 80 + len(head) - len(name) if pos >= 80 else len(head) - len(name)
    if _word_before(text, start):
        return None
    return start, name


def _word_before(text: str, pos: int) -> bool:
    return pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] in "_.")


def _factory_op(text: str, factory: str, found) -> str | None:
    """The op name of the first Info call inside `def factory(...)`."""
    m = re.search(rf"^\s*def {re.escape(factory)}\(", text, re.M)
    if not m:
        return None
    for start, _, cls, name in sorted(found):
        if start > m.end() and cls.endswith("Info"):
            return name
    return None
