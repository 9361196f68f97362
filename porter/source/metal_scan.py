"""What a `.metal` kernel file defines: functors, file-local macros, and registered kernels.

Registrations are found by expanding the file's own `#define`s (INSTANTIATE_UNARY_KERNELS2,
REGISTER_FLOAT_BINARY_OP, ...) down to the c10/metal base macros, so every (kernel, input
dtype, output dtype) triple is known without a Metal compiler.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from typing import NamedTuple

from porter.source.cpp_scan import SourceFile, line_of, matching_close, split_top_level

# Base macros from c10/metal/indexing.h: name -> (index of input type, index of output type).
BASE_MACROS = {
    "REGISTER_UNARY_OP": (1, 2),
    "REGISTER_UNARY_ALPHA_OP": (1, 3),
    "REGISTER_BINARY_OP": (1, 2),
    "REGISTER_OPMATH_BINARY_OP": (1, 2),
    "REGISTER_BINARY_ALPHA_OP": (1, 3),
    "REGISTER_BINARY_CASTOUT_OP": (1, 2),
    "REGISTER_TERNARY_OP": (1, 2),
    "REGISTER_OPMATH_TERNARY_OP": (1, 2),
    "REGISTER_TERNARY_ALPHA_OP": (1, 3),
    "REGISTER_OPMATH_TERNARY_ALPHA_OP": (1, 3),
}
DEFINE_RE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
FUNCTOR_RE = re.compile(r"^struct\s+(\w+)_functor\b", re.M)
# the static_assert message of porter's skeleton functor (templates/skeleton_functor.metal.j2)
SKELETON_MARK = "porter: write the Metal body of"
FLOATING_FUNCTOR_RE = re.compile(r"^DEFINE_UNARY_FLOATING_FUNCTOR\((\w+)\)", re.M)
INVOCATION_RE = re.compile(r"^[ \t]*([A-Z][A-Z0-9_]+)\(", re.M)
MACRO_CALL_RE = re.compile(r"\b([A-Z][A-Z0-9_]+)\(")
TOKEN_PASTE_RE = re.compile(r"\s*##\s*")
KERNEL_HEADER_RE = re.compile(r"^#include\s*<(ATen/native/mps/kernels/\w+\.h)>", re.M)


def kernel_headers(metal_text: str) -> list[str]:
    """The kernels headers a .metal file includes (`ATen/native/mps/kernels/Activation.h`), in
    order: where its params structs live."""
    return KERNEL_HEADER_RE.findall(metal_text)


CONDITIONAL_RE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b([^\n]*)", re.M)


@lru_cache(maxsize=64)
def _word_re(word: str) -> re.Pattern:
    return re.compile(rf"\b{re.escape(word)}\b")


# Base macros with a scalar argument: name -> index of its type (alpha, decimals, ...).
ALPHA_MACROS = {"REGISTER_UNARY_ALPHA_OP": 2, "REGISTER_BINARY_ALPHA_OP": 2,
                "REGISTER_TERNARY_ALPHA_OP": 2, "REGISTER_OPMATH_TERNARY_ALPHA_OP": 2}


class Registration(NamedTuple):
    kernel: str
    in_type: str
    out_type: str
    macro: str          # the base macro
    line: int           # line of the top-level invocation in the file
    alpha_type: str = ""    # the scalar argument's type, for ALPHA_MACROS
    # the preprocessor condition porter cannot decide that holds it (`#ifdef FLAG`; a
    # `__METAL_VERSION__` condition is every Metal's own), or "": not proven to be compiled
    condition: str = ""


class Define(NamedTuple):
    name: str
    params: tuple[str, ...]
    body: str
    start: int          # offset of `#define`
    end: int            # offset just past the last line of the define
    line: int


class MetalFile(SourceFile):
    @cached_property
    def defines(self) -> dict[str, Define]:
        out = {}
        for m in DEFINE_RE.finditer(self.mask):
            params = tuple(p.strip() for p in m.group(2).split(",") if p.strip())
            body = self.text[m.start(3):m.end(3)].replace("\\\n", " ")
            out[m.group(1)] = Define(m.group(1), params, body, m.start(), m.end(),
                                     line_of(self.text, m.start()))
        return out

    @cached_property
    def functors(self) -> dict[str, int]:
        """Functor name (without `_functor`) -> line, including DEFINE_UNARY_FLOATING_FUNCTOR ones."""
        found = {m.group(1): line_of(self.text, m.start()) for m in FUNCTOR_RE.finditer(self.mask)}
        for m in FLOATING_FUNCTOR_RE.finditer(self.mask):
            found.setdefault(m.group(1), line_of(self.text, m.start()))
        return found

    @cached_property
    def functor_spans(self) -> dict[str, tuple[int, int]]:
        """Functor name -> offsets of `struct name_functor {...};` with its trailing newline."""
        spans = {}
        for m in FUNCTOR_RE.finditer(self.mask):
            open_at = self.mask.find("{", m.end())
            close = matching_close(self.mask, open_at) if open_at >= 0 else -1
            if close < 0:
                continue
            end = self.mask.find(";", close) + 1
            if 0 < end < len(self.text) and self.text[end] == "\n":
                end += 1
            spans[m.group(1)] = (m.start(), end)
        return spans

    def functor_span(self, name: str) -> tuple[int, int] | None:
        return self.functor_spans.get(name)

    @cached_property
    def dead_spans(self) -> list[tuple[int, int]]:
        """Offsets of code that `#if 0` (or the `#else` of an `#if 1`) leaves out: a Mac
        compiles no registration there. Any other condition (`#if __METAL_VERSION__ >= 310`)
        is taken as true, as the newest Metal has it."""
        spans: list[tuple[int, int]] = []
        stack: list[list] = []          # per #if: [literal value or None, dead since offset]
        for m in CONDITIONAL_RE.finditer(self.mask):
            kind, cond = m.group(1), m.group(2).strip()
            if kind in ("if", "ifdef", "ifndef"):
                value = {"0": False, "1": True}.get(cond) if kind == "if" else None
                stack.append([value, m.end() if value is False else None])
                continue
            if not stack:
                continue
            frame = stack[-1]
            if frame[1] is not None:
                spans.append((frame[1], m.start()))
                frame[1] = None
            if kind == "endif":
                stack.pop()
            elif kind == "else" and frame[0] is not None:
                frame[1] = m.end() if frame[0] else None
                frame[0] = not frame[0]
            elif kind == "elif" and frame[0] is not None:
                taken = frame[0]
                value = {"0": False, "1": True}.get(cond)
                frame[0] = True if taken else value
                if taken or value is False:
                    frame[1] = m.end()
        for frame in stack:
            if frame[1] is not None:
                spans.append((frame[1], len(self.mask)))
        return spans

    @cached_property
    def registrations(self) -> list[Registration]:
        out: list[Registration] = []
        inside_define = [(d.start, d.end) for d in self.defines.values()]
        skipped = inside_define + self.dead_spans
        for m in INVOCATION_RE.finditer(self.mask):
            if any(s <= m.start() < e for s, e in skipped):
                continue
            name = m.group(1)
            if name not in BASE_MACROS and name not in self.defines:
                continue
            open_at = m.end() - 1
            close = matching_close(self.mask, open_at)
            if close < 0:
                continue
            args = split_top_level(self.mask[open_at + 1:close])
            found: list[Registration] = []
            self._expand(name, args, line_of(self.text, m.start()), found, depth=0)
            condition = self._undecided_at(m.start())
            out += [r._replace(condition=condition) for r in found] if condition else found
        return out

    @cached_property
    def _undecided(self) -> list[tuple[int, int, str]]:
        from porter.source.cpp_scan import undecided_spans
        return [s for s in undecided_spans(self.mask) if "__METAL_VERSION__" not in s[2]]

    def _undecided_at(self, offset: int) -> str:
        return next((c for start, end, c in self._undecided if start <= offset < end), "")

    def _expand(self, name: str, args: list[str], line: int, out: list, depth: int) -> None:
        if depth > 8:
            return
        if name in BASE_MACROS:
            i_in, i_out = BASE_MACROS[name]
            if len(args) > max(i_in, i_out):
                alpha = args[ALPHA_MACROS[name]] if name in ALPHA_MACROS else ""
                out.append(Registration(args[0], args[i_in], args[i_out], name, line, alpha))
            return
        define = self.defines[name]
        body = define.body
        for param, arg in zip(define.params, args):
            body = _word_re(param).sub(arg, body)
        body = TOKEN_PASTE_RE.sub("", body)
        for m in MACRO_CALL_RE.finditer(body):
            inner = m.group(1)
            if inner not in BASE_MACROS and inner not in self.defines:
                continue
            open_at = m.end() - 1
            close = matching_close(body, open_at)
            if close > 0:
                self._expand(inner, split_top_level(body[open_at + 1:close]), line, out, depth + 1)

    def kernels(self) -> dict[str, list[Registration]]:
        by_kernel: dict[str, list[Registration]] = {}
        for reg in self.registrations:
            by_kernel.setdefault(reg.kernel, []).append(reg)
        return by_kernel
