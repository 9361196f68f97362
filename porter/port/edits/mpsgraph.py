"""Delete an op's MPSGraph implementation from a host `.mm` file, and what only it needed.

Deletion recipe (what a migration removes from a host file):
- each definition exactly (porter.source.mpsgraph_scan spans), extended up over the `//` comment
  lines attached to it and down over one trailing blank line, where that blank line only
  separated it from what follows (a definition inside a run of lines keeps the blank that
  ends the run);
- `static` functions that the deleted code was the last user of, repeatedly (a helper of a
  helper); -Werror builds reject unused statics. Statics already unused are not ours to touch;
- `#include <ATen/ops/<op>_native.h>` once no remaining code names a kernel it declares;
- a namespace block (`namespace mps {`) the deletion left empty, with its attached comments.
MPSFallback.mm: `m.impl("<op>[.overload]", ...mps_fallback...)` lines of the op.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source.cpp_scan import line_of
from porter.source.mpsgraph_scan import Definition, HostSource, source_of


class Removed(NamedTuple):
    name: str
    what: str          # impl | macro | function | stub | static helper | include | fallback
    line: int          # in the old text


def delete_definitions(text: str, definitions: list[Definition], op: str,
                       header_kernels: set[str]) -> tuple[str, list[Removed]]:
    """`text` without `definitions`, their orphaned static helpers and, if nothing else needs
    it, `<op>_native.h` (which declares `header_kernels`)."""
    if not definitions:
        return text, []
    source = source_of(text)
    removed = [Removed(d.name, d.shape, d.line) for d in definitions]
    spans = [_extended(text, d.start, d.end) for d in definitions]
    helpers = orphaned_statics(text, source, spans)
    spans += [span for span, _ in helpers]
    removed += [Removed(s.name, "static helper", s.line) for _, s in helpers]
    new = _drop_emptied_namespaces(text, cut(text, spans))
    new, include = _drop_native_include(new, op, header_kernels)
    if include:
        removed.append(Removed(f"ATen/ops/{op}_native.h", "include", line_of(text, text.find(include))))
    return new, removed


# a namespace block with nothing left inside, with the `//` lines attached above it
EMPTY_NAMESPACE_RE = re.compile(r"(?:^[ \t]*//[^\n]*\n)*^namespace (\w+(?:::\w+)*) \{\s*\}[ \t]*"
                                r"(?://[^\n]*)?\n(?:[ \t]*\n)?", re.M)


def _drop_emptied_namespaces(old: str, new: str) -> str:
    """`new` without the namespace blocks the deletion emptied (upstream's `namespace mps {`
    around the MPSGraph helpers); a block already empty in `old` is not ours to touch."""
    already = {m.group(0) for m in EMPTY_NAMESPACE_RE.finditer(old)}

    def drop(m: re.Match) -> str:
        if m.group(0) in already:
            return m.group(0)
        # one blank line goes with it, where one stays above to separate what it separated
        above_blank = new[:m.start()].endswith("\n\n") or m.start() == 0
        return "" if above_blank or not m.group(0).endswith("\n\n") else "\n"
    return EMPTY_NAMESPACE_RE.sub(drop, new)


def orphaned_statics(text: str, source: HostSource, spans: list[tuple[int, int]]) -> list:
    """[(span to cut, static)] for the `static` functions that cutting `spans` leaves unused,
    repeatedly (a helper of a helper). Statics already unused are not ours to touch."""
    spans = list(spans)
    found = []
    used_before = {s.name for s in source.statics if _used_outside(source, s, [])}
    while True:
        orphans = [s for s in source.statics
                   if s.name in used_before and not any(a <= s.start < b for a, b in spans)
                   and not _used_outside(source, s, spans)]
        if not orphans:
            return found
        for s in orphans:
            span = _extended(text, s.start, s.end)
            spans.append(span)
            found.append((span, s))


def _used_outside(source: HostSource, s, spans: list[tuple[int, int]]) -> bool:
    return any(not (s.start <= p < s.end) and not any(a <= p < b for a, b in spans)
               for p in source.uses(s.name))


def _extended(text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) grown to whole lines, attached `//` comments above, and the blank line
    after when the definition stands alone between blank lines (or at a block's edge)."""
    first = text.rfind("\n", 0, start) + 1
    while first > 0:
        prev = text.rfind("\n", 0, first - 1) + 1
        if text[prev:first].lstrip().startswith("//"):
            first = prev
        else:
            break
    nl = text.find("\n", end)
    last = len(text) if nl < 0 else nl + 1
    if text[end:last].strip() and not text[end:last].strip().startswith("//"):
        # code after the definition on its own last line: keep the line, cut the definition only
        return start, end
    before = text[text.rfind("\n", 0, first - 1) + 1:first] if first > 0 else ""
    alone_above = first == 0 or not before.strip() or before.rstrip().endswith("{")
    nl = text.find("\n", last)
    after = text[last:len(text) if nl < 0 else nl + 1]
    if alone_above and after and not after.strip():
        last += len(after)
    return first, last


def cut(text: str, spans: list[tuple[int, int]], inserts: dict[int, str] | None = None) -> str:
    """`text` without `spans`; `inserts` maps a span's start to the text that replaces it."""
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, pos = [], 0
    for a, b in merged:
        out.append(text[pos:a])
        out.append((inserts or {}).get(a, ""))
        pos = b
    out.append(text[pos:])
    return "".join(out)


def _drop_native_include(text: str, op: str, header_kernels: set[str]) -> tuple[str, str | None]:
    m = re.search(rf"^[ \t]*#include\s*<ATen/ops/{re.escape(op)}_native\.h>[^\n]*\n", text, re.M)
    if not m:
        return text, None
    source = source_of(text)
    if any(_names_native(source.mask, p) for kernel in header_kernels for p in source.uses(kernel)):
        return text, None
    return text[:m.start()] + text[m.end():], m.group()


def _names_native(mask: str, pos: int) -> bool:
    """A kernel name the header declares, used unqualified or as at::native:: (`at::sign_out`
    and `at::mps::sign_outf` come from other headers)."""
    before = mask[max(0, pos - 40):pos].rstrip()
    return not before.endswith("::") or before.endswith("native::")


FALLBACK_RE = re.compile(r'^[ \t]*m\.impl\(\s*"(?:aten::)?(?P<name>[\w.]+)"[^\n]*mps_fallback[^\n]*\n', re.M)


def drop_fallbacks(text: str, op: str) -> tuple[str, list[Removed]]:
    """MPSFallback.mm without the op's `m.impl("<op>...", ...mps_fallback...)` lines."""
    removed, out, pos = [], [], 0
    for m in FALLBACK_RE.finditer(text):
        base = m["name"].split(".")[0]
        if base == op or base == op + "_":
            removed.append(Removed(m["name"], "fallback", line_of(text, m.start())))
            out.append(text[pos:m.start()])
            pos = m.end()
    out.append(text[pos:])
    return "".join(out), removed
