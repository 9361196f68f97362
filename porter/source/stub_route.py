"""Which DispatchStub a structured kernel runs, per dtype, read from its TORCH_IMPL_FUNC.

Most run `<op>_stub(device_type(), *this)`. Some do not: `sub_out` runs `add_stub` with
`-alpha`, `sgn_out` runs `sgn_stub` for complex inputs and `sign_stub` for the others. On MPS
the kernel of a dtype is whatever the stub it reaches has registered, so a port (and the
emulator) must follow the same call. Branches porter cannot read are `unknown`: not modelled,
so nothing about them is proven.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import line_of, matching_close, split_top_level
from porter.source.native_definitions import native_definition

ALL, COMPLEX, REAL, UNKNOWN = "all", "complex", "real", "unknown"
STUB_CALL_RE = re.compile(r"\b(\w+_stub)\s*\(\s*(?:\w+\.)?device_type\(\)\s*,")
IF_COMPLEX_RE = re.compile(r"^\s*if\s*\(\s*(!?)\s*\w+\.is_complex\(\)\s*\)\s*\{")


class Route(NamedTuple):
    stub: str              # "add_stub"
    when: str              # all | complex | real | unknown
    arguments: tuple[str, ...]   # what the call passes after the iterator ("-alpha")
    path: str
    line: int


def routes(checkout: co.Checkout, cpu_kernel: str) -> list[Route]:
    """The stub calls of TORCH_IMPL_FUNC(`cpu_kernel`) in native/*.cpp, each with the inputs it
    serves; [] when no such body is found (a macro-made or plain function: `<op>_stub` as
    before)."""
    found = native_definition(checkout, "TORCH_IMPL_FUNC", cpu_kernel)
    if found is None or found.body_close < 0:
        return []
    return _routes_of(found.text, found.mask, found.body_open + 1, found.body_close, found.path)


def _routes_of(text: str, mask: str, start: int, end: int, rel: str) -> list[Route]:
    calls = list(STUB_CALL_RE.finditer(mask, start, end))
    if not calls:
        return []

    def route(m, when):
        close = matching_close(mask, mask.index("(", m.start()))
        args = split_top_level(text[m.end():close])[1:] if close > 0 else []
        return Route(m.group(1), when, tuple(" ".join(a.split()) for a in args), rel,
                     line_of(text, m.start()))

    body = mask[start:end]
    if len(calls) == 1 and not re.search(r"\b(if|switch|return)\b|\?", body[:calls[0].start() - start]):
        return [route(calls[0], ALL)]
    # `if (self.is_complex()) { A(...); } else { B(...); }` (or the negation)
    m = IF_COMPLEX_RE.match(body)
    if m and len(calls) == 2:
        then_open = start + m.end() - 1
        then_close = matching_close(mask, then_open)
        rest = mask[then_close + 1:end] if then_close > 0 else ""
        els = re.match(r"\s*else\s*\{", rest)
        if els and then_open < calls[0].start() < then_close < calls[1].start():
            first, second = (REAL, COMPLEX) if m.group(1) else (COMPLEX, REAL)
            return [route(calls[0], first), route(calls[1], second)]
    return [route(c, UNKNOWN) for c in calls]


def for_dtype(found: list[Route], is_complex: bool) -> Route | None:
    """The route a dtype takes (None: the function runs no stub for it)."""
    want = COMPLEX if is_complex else REAL
    return next((r for r in found if r.when in (ALL, want)), None) or \
        next((r for r in found if r.when == UNKNOWN), None)
