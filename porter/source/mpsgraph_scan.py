"""Where an op's MPSGraph implementation sits in a host `.mm` file, in each of its shapes.

Shapes, all anchored at column 0 so that the bodies of `#define`s never match:
- `impl`:     `TORCH_IMPL_FUNC(fn)(...) { ... }`; the parameter list may wrap onto the next line
- `macro`:    `CREATE_MPS_<...>(fn, selector[, ...])` one-line macro instance
- `function`: `Tensor& fn(...) { ... }` (also `Tensor`, `std::tuple<...>`, `void`)
- `stub`:     `REGISTER_MPS_UNARY_STUB(op, selector)` (the yaml row is already shared)

Spans are found on a code mask (porter.source.cpp_scan), so braces in strings, chars and comments
do not count and ObjC blocks `^{...}` nest like any other braces.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from typing import NamedTuple

from porter.source.cpp_scan import SourceFile, in_define, line_of, matching_close

IMPL, MACRO, FUNCTION, STUB = "impl", "macro", "function", "stub"

IMPL_RE = re.compile(r"^TORCH_IMPL_FUNC\(\s*(\w+)\s*\)", re.M)
MACRO_RE = re.compile(r"^(CREATE_MPS_\w+)\(\s*(\w+)\s*,", re.M)
FUNCTION_RE = re.compile(
    r"^(?:(?:static|inline)\s+)*(?:const\s+)?"
    r"(?:(?:at::)?Tensor\s*&?|std::tuple\s*<[^;{}()]*>\s*&?|void)\s*\b(\w+)\s*\(", re.M)
STUB_RE = re.compile(r"^REGISTER_MPS_UNARY_STUB\(\s*(\w+)\s*,\s*(\w+)\s*\)", re.M)
STATIC_RE = re.compile(r"^[ \t]*static\s+(?:inline\s+)?[\w:<>,\*&\s]*?\b(\w+)\s*\(", re.M)
GRAPH_CALL_RE = re.compile(r"\[\s*[\w\->().]+\s+(\w+?)With(Tensor|PrimaryTensor)\s*:")
METAL_CALL_RE = re.compile(r"\bexec_(?:unary|binary|ternary)_kernel\w*\s*[<(]")
# an impl that runs a DispatchStub's MPS kernel (upstream's gelu: `GeluKernel(kMPS, *this, ...)`)
STUB_CALL_RE = re.compile(r"\b\w+\s*\(\s*(?:at::|c10::)?(?:DeviceType::)?kMPS\s*,\s*\*this\b")
GRAPH_HINT_RE = re.compile(r"\bMPSGraph\w*\b|\bmpsGraph\b|\bLookUpOrCreateCachedGraph\b")


class Definition(NamedTuple):
    name: str             # function name, or the op of a REGISTER_MPS_UNARY_STUB line
    shape: str            # impl | macro | function | stub
    start: int            # offset of its first character (column 0)
    end: int              # offset just past its last character (`}`, `)` or `;`)
    line: int
    selector: str | None  # macro/stub: their selector argument; impl/function: see selectors()
    macro: str | None = None

    def body(self, text: str) -> str:
        return text[self.start:self.end]


class StaticFunction(NamedTuple):
    name: str
    start: int
    end: int
    line: int


class HostSource(SourceFile):
    """Definitions and static helpers of one host file."""

    @cached_property
    def identifiers(self) -> dict[str, list[int]]:
        """Offsets of every identifier of the code (comments and strings excluded), by name."""
        return identifier_index(self.mask)

    def uses(self, name: str) -> list[int]:
        return self.identifiers.get(name, [])

    @cached_property
    def definitions(self) -> list[Definition]:
        """Every top-level definition in the four shapes, in file order."""
        text, mask = self.text, self.mask
        found: list[Definition] = []
        for m in IMPL_RE.finditer(mask):
            end = _function_end(mask, m.end())
            if end is not None:
                found.append(Definition(m.group(1), IMPL, m.start(), end, line_of(text, m.start()), None))
        for m in MACRO_RE.finditer(mask):
            close = matching_close(mask, m.end(1))
            if close < 0:
                continue
            args = [a.strip() for a in mask[m.end(1) + 1:close].split(",")]
            end = close + 1
            if mask[end:end + 1] == ";":
                end += 1
            found.append(Definition(m.group(2), MACRO, m.start(), end, line_of(text, m.start()),
                                    args[1] if len(args) > 1 and args[1] else None, m.group(1)))
        for m in FUNCTION_RE.finditer(mask):
            if mask.startswith("TORCH_IMPL_FUNC", m.start()):
                continue
            end = _function_end(mask, m.end() - 1)
            if end is not None:
                found.append(Definition(m.group(1), FUNCTION, m.start(), end, line_of(text, m.start()), None))
        for m in STUB_RE.finditer(mask):
            end = m.end()
            if mask[end:end + 1] == ";":
                end += 1
            found.append(Definition(m.group(1), STUB, m.start(), end, line_of(text, m.start()),
                                    m.group(2), "REGISTER_MPS_UNARY_STUB"))
        found = [d for d in found if not in_define(mask, d.start)]
        return sorted(found, key=lambda d: d.start)

    def named(self, names: set[str]) -> list[Definition]:
        return [d for d in self.definitions if d.shape != STUB and d.name in names]

    def stubs_of(self, op: str) -> list[Definition]:
        return [d for d in self.definitions if d.shape == STUB and d.name == op]

    def enclosing(self, offset: int) -> Definition | StaticFunction | None:
        for d in (*self.definitions, *self.statics):
            if d.start <= offset < d.end:
                return d
        return None

    @cached_property
    def statics(self) -> list[StaticFunction]:
        """`static` functions with a body (helpers such as those in `namespace mps {}`)."""
        out = []
        for m in STATIC_RE.finditer(self.mask):
            head = self.mask[m.start():m.end()]
            if "=" in head or self.in_define(m.start()):
                continue
            end = _function_end(self.mask, m.end() - 1)
            if end is not None:
                out.append(StaticFunction(m.group(1), m.start(), end, line_of(self.text, m.start())))
        return out

    def is_metal(self, d: Definition) -> bool:
        """A definition that already runs a Metal kernel and builds no graph (an MPS impl behind its own yaml row)."""
        body = self.mask[d.start:d.end]
        return bool(METAL_CALL_RE.search(body) or STUB_CALL_RE.search(body)) and not GRAPH_HINT_RE.search(body)

    def selectors(self, d: Definition) -> list[str]:
        """MPSGraph selectors the definition uses, in order, without duplicates.

        For a macro or a stub line, its selector argument; for a body, every
        `[graph <selector>WithTensor:` / `WithPrimaryTensor:` message it sends."""
        if d.selector:
            return [d.selector]
        body = self.mask[d.start:d.end]
        return list(dict.fromkeys(m.group(1) for m in GRAPH_CALL_RE.finditer(body)))


@lru_cache(maxsize=64)
def source_of(text: str) -> HostSource:
    """One HostSource per distinct text: a migration reads the same old and new texts in
    several steps, and each mask and index costs a pass over the file."""
    return HostSource(text)


def _function_end(mask: str, open_paren: int) -> int | None:
    """Given the `(` opening a parameter list (or the offset just before it, after a
    `TORCH_IMPL_FUNC(name)`), the offset past the body's closing brace; None for a
    declaration or anything that is not `(...) [qualifiers] {...}`."""
    k = open_paren
    while k < len(mask) and mask[k] in " \t\r\n":
        k += 1
    if k >= len(mask) or mask[k] != "(":
        return None
    close = matching_close(mask, k)
    if close < 0:
        return None
    m = re.compile(r"[\s\w:&*<>,\->]*?\{").match(mask, close + 1)
    if not m or ";" in mask[close + 1:m.end()]:
        return None
    body_close = matching_close(mask, m.end() - 1)
    return None if body_close < 0 else body_close + 1


def identifier_index(mask: str) -> dict[str, list[int]]:
    """One pass over a code mask instead of one regex search per name looked up."""
    index: dict[str, list[int]] = {}
    for m in WORD_RE.finditer(mask):
        index.setdefault(m.group(), []).append(m.start())
    return index


WORD_RE = re.compile(r"\w+")
