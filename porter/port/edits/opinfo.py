"""Remove the MPS `expectedFailure` DecorateInfos of an OpInfo, with their "not implemented" comments.

Only the OpInfo's own call span is touched: its DecorateInfo nodes come from an `ast` parse of
that slice, and each is cut out together with its trailing comma and, when it owned its
lines, the lines themselves.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from porter.source.ast_offsets import AstOffsets
from porter.source.opinfo_source import OpInfoSource, parse_call

TRAILING_COMMA_RE = re.compile(r"[ \t]*,?[ \t]*")
NOT_IMPLEMENTED_RE = re.compile(r"^\s*#.*(not (currently |yet )?implemented|NotImplementedError).*MPS", re.I)


class MpsDecorator(NamedTuple):
    start: int          # offsets in the file
    end: int
    line: int
    expected_failure: bool
    text: str


def mps_decorators(text: str, source: OpInfoSource) -> list[MpsDecorator]:
    node = parse_call(text, source.start, source.end)
    if node is None:
        return []
    snippet = text[source.start:source.end]
    offsets = AstOffsets("(" + snippet + "\n)")        # the text parse_call parsed
    found = []
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and _name(call.func) == "DecorateInfo"):
            continue
        device = next((k.value for k in call.keywords if k.arg == "device_type"), None)
        if not (isinstance(device, ast.Constant) and device.value == "mps"):
            continue
        # minus the "(" that parse_call put in front of the slice
        start = source.start + offsets.at(call.lineno, call.col_offset) - 1
        end = source.start + offsets.at(call.end_lineno, call.end_col_offset) - 1
        decorator = call.args[0] if call.args else None
        xfail = decorator is not None and _name(decorator) == "expectedFailure"
        line = source.line + snippet.count("\n", 0, start - source.start)
        found.append(MpsDecorator(start, end, line, xfail, text[start:end]))
    return found


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def remove_expected_failures(text: str, sources: list[OpInfoSource]) -> tuple[str, list[MpsDecorator]]:
    """(new text, MPS decorators left in place: skips and tolerance overrides, reported)."""
    cuts: list[tuple[int, int]] = []
    kept: list[MpsDecorator] = []
    for source in sources:
        for deco in mps_decorators(text, source):
            if deco.expected_failure:
                cuts.append(_cut_span(text, deco))
            else:
                kept.append(deco)
    pieces, pos = [], 0
    for start, end in sorted(cuts):
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces), kept


def _cut_span(text: str, deco: MpsDecorator) -> tuple[int, int]:
    start, end = deco.start, deco.end
    end = TRAILING_COMMA_RE.match(text, end).end()
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if text[line_start:start].strip() or text[end:line_end].strip():
        return start, end        # shares its line: cut the call and its comma only
    start, end = line_start, line_end
    # Comment lines right above that explain the missing MPS kernel go too, unless they also
    # explain a decorator that stays (the next non-comment line must be this one).
    while True:
        prev_end = start
        prev_start = text.rfind("\n", 0, prev_end - 1) + 1
        if prev_start >= prev_end or not NOT_IMPLEMENTED_RE.match(text[prev_start:prev_end]):
            break
        start = prev_start
    return start, end
