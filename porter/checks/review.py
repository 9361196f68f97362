"""What an upstream reviewer asks of a Metal kernel and CI cannot see (PORTER050-PORTER053).

The MPS CI shard is correctness-only on the samples it has: a functor that uses `fast::` math,
drops a NaN through `metal::min`, re-implements a `c10/metal` helper, or registers bfloat where
an older Metal cannot compile it passes there and is sent back in review (pytorch#187827's
checklist). An MPSGraph implementation left beside the new kernel is PORTER003.
"""

from __future__ import annotations

import re
from pathlib import Path

from porter.checks.model import Finding
from porter.checks.tree import Tree
from porter.source.c10_metal import headers_dir
from porter.source.cpp_scan import code_mask, line_of, matching_close, split_top_level
from porter.source.metal_scan import CONDITIONAL_RE, MetalFile

FAST_RE = re.compile(r"(?<![\w:])(?:(?:::)?metal::)?fast::(\w+)")
# min/max/clamp as Metal's own (`min`, `metal::min`, `::metal::min`): not c10::metal's, whose
# floating overloads return NaN when either operand is one, as the CPU does
BARE_MINMAX_RE = re.compile(r"(?<![\w:.])(?:(?:::)?metal::)?(min|max|clamp)\s*\(")
OPERATOR_RE = re.compile(r"\boperator\s*\(\s*\)\s*\(")
INTEGRAL_ONLY_RE = re.compile(r"is_(?:scalar_)?integral_v|is_same_v<\s*T\s*,\s*bool\s*>")
TEMPLATE_PARAM_RE = re.compile(r"\b(?:typename|class)\s+(\w+)")
DEF_HEAD_RE = re.compile(r"(\w+)\s*$")
QUALIFIERS_RE = re.compile(r"\b(?:const|volatile|thread|device|constant|threadgroup|inline|static)\b|&")
VERSION_RE = re.compile(r"__METAL_VERSION__\s*>=?\s*\d+")


def check(tree: Tree) -> list[Finding]:
    found: list[Finding] = []
    c10 = c10_functions(tree)
    for rel, metal in sorted(tree.metals.items()):
        found += fast_math(tree, rel, metal)
        found += nan_dropping_min_max(tree, rel, metal)
        found += duplicate_helpers(rel, metal, c10, tree)
        found += bfloat_outside_guard(tree, rel, metal)
    return found


def _op(tree: Tree, functor: str) -> str:
    return tree.kernel_ops.get(functor) or tree.to_op(functor) or functor


# --- PORTER050: fast:: math ------------------------------------------------------------------

def fast_math(tree: Tree, rel: str, metal: MetalFile) -> list[Finding]:
    out = []
    for name, (start, end) in metal.functor_spans.items():
        for m in FAST_RE.finditer(metal.mask, start, end):
            out.append(Finding(
                "PORTER050", rel, line_of(metal.text, m.start()),
                f"{name}_functor calls fast::{m.group(1)}: fast math trades accuracy (and inf/NaN "
                "handling) for speed, and the CPU reference it is compared with does not",
                f"use precise::{m.group(1)} or the c10/metal routine", _op(tree, name)))
    return out


# --- PORTER051: NaN lost through Metal's min/max/clamp ---------------------------------------

def nan_dropping_min_max(tree: Tree, rel: str, metal: MetalFile) -> list[Finding]:
    out = []
    for name, (start, end) in metal.functor_spans.items():
        for head, body_start, body_end in _overloads(metal.mask, start, end):
            if INTEGRAL_ONLY_RE.search(head) and "floating" not in head and "complex" not in head:
                continue     # integers have no NaN to lose
            for m in BARE_MINMAX_RE.finditer(metal.mask, body_start, body_end):
                fn = m.group(1)
                out.append(Finding(
                    "PORTER051", rel, line_of(metal.text, m.start()),
                    f"{name}_functor calls Metal's {fn}() on floats, which returns the other operand "
                    "when one is NaN; the CPU kernel propagates NaN, so a NaN input gives a number here",
                    f"use c10::metal::{'min/max' if fn == 'clamp' else fn} (NaN-propagating)"
                    + (", or test isnan first" if fn == "clamp" else ""), _op(tree, name)))
    return out


def _overloads(mask: str, start: int, end: int):
    """(template/return head, body start, body end) of each operator() in a functor span."""
    previous = mask.find("{", start) + 1
    for m in OPERATOR_RE.finditer(mask, start, end):
        close = matching_close(mask, m.end() - 1)
        if close < 0:
            continue
        open_at = mask.find("{", close)
        body_end = matching_close(mask, open_at) if open_at >= 0 else -1
        if body_end < 0 or body_end > end:
            continue
        yield mask[previous:m.start()], open_at, body_end
        previous = body_end + 1


# --- PORTER052: a helper that c10/metal already has ------------------------------------------

class Function:
    __slots__ = ("name", "params", "line")

    def __init__(self, name: str, params: tuple[str, ...], line: int):
        self.name, self.params, self.line = name, params, line

    def same_signature(self, other: "Function") -> bool:
        """Same arity, each parameter the same type or a template parameter on either side."""
        return len(self.params) == len(other.params) and all(
            a == b or "*" in (a, b) for a, b in zip(self.params, other.params))

    def signature(self) -> str:
        return f"{self.name}({', '.join(p if p != '*' else 'T' for p in self.params)})"


def top_level_functions(text: str) -> list[Function]:
    """Function definitions at namespace scope (namespace braces are transparent): not the
    members of a struct, not `kernel` entry points, not macro invocations (no body)."""
    mask = code_mask(text)
    out: list[Function] = []
    boundary, i = 0, 0
    while True:
        brace = mask.find("{", i)
        closing = mask.find("}", i)
        if brace < 0 and closing < 0:
            break
        if closing >= 0 and (brace < 0 or closing < brace):    # a namespace closing
            boundary = i = closing + 1
            continue
        head = _statement(mask, boundary, brace)
        if re.search(r"\bnamespace\b[\w:\s]*$", head):
            boundary = i = brace + 1
            continue
        end = matching_close(mask, brace)
        if end < 0:
            break
        function = _definition(text, head, brace)
        if function is not None:
            out.append(function)
        boundary = i = end + 1
    return out


def _statement(mask: str, boundary: int, brace: int) -> str:
    """The declaration before `brace`: from the last `;` or preprocessor line on."""
    head = mask[boundary:brace]
    cut = max(head.rfind(";"), head.rfind("}"))
    head = head[cut + 1:]
    # preprocessor lines blanked, not removed: offsets stay those of the file
    return "\n".join(" " * len(line) if line.lstrip().startswith("#") else line
                     for line in head.split("\n"))


def _definition(text: str, head: str, brace: int) -> Function | None:
    stripped = re.sub(r"\bconst\s*$", "", head.rstrip()).rstrip()
    if not stripped.endswith(")") or re.search(r"\b(?:struct|class|enum|union|kernel)\b", head):
        return None
    # find the parameter list's opening parenthesis
    depth, j = 0, len(stripped) - 1
    while j >= 0:
        if stripped[j] == ")":
            depth += 1
        elif stripped[j] == "(":
            depth -= 1
            if depth == 0:
                break
        j -= 1
    if j < 0:
        return None
    name = DEF_HEAD_RE.search(stripped[:j])
    if name is None or name.group(1) in ("if", "for", "while", "switch", "return", "operator"):
        return None
    if not stripped[:name.start()].strip():          # a call or macro, not a definition
        return None
    templates = set(TEMPLATE_PARAM_RE.findall(stripped[:name.start()]))
    params = tuple(_param_type(p, templates) for p in split_top_level(stripped[j + 1:])
                   if p.strip() and p.strip() != "void")
    offset = brace - len(head) + name.start(1)
    return Function(name.group(1), params, line_of(text, offset))


def _param_type(param: str, templates: set[str]) -> str:
    param = re.sub(r"\[[^\]]*\]", "", param.split("=", 1)[0])      # `T idx[N]` is a T
    param = re.sub(r"::metal::|\bmetal::|\bc10::metal::", "", param)
    param = QUALIFIERS_RE.sub(" ", param)
    tokens = re.findall(r"[\w:<>,*]+", param)
    if len(tokens) > 1:
        tokens = tokens[:-1]       # the parameter's name
    kind = " ".join(tokens)
    return "*" if kind in templates else kind


def c10_functions(tree: Tree) -> dict[str, list[tuple[str, Function]]]:
    """Name -> (header, function) of every c10/metal function the kernels compile against."""
    directory = headers_dir(tree.checkout)
    out: dict[str, list[tuple[str, Function]]] = {}
    if directory is None:
        return out
    for header in sorted(Path(directory).glob("*.h")):
        text = header.read_text(encoding="utf-8", errors="replace")
        for fn in top_level_functions(text):
            out.setdefault(fn.name, []).append((f"c10/metal/{header.name}", fn))
    return out


def duplicate_helpers(rel: str, metal: MetalFile, c10: dict, tree: Tree) -> list[Finding]:
    out = []
    for fn in top_level_functions(metal.text):
        twin = next(((h, f) for h, f in c10.get(fn.name, []) if f.same_signature(fn)), None)
        if twin is None:
            continue
        header, theirs = twin
        out.append(Finding(
            "PORTER052", rel, fn.line,
            f"{fn.signature()} duplicates c10::metal::{theirs.signature()} ({header}:{theirs.line}); "
            "two copies drift apart, and with `using namespace c10::metal` a call may pick either",
            f"delete it and call c10::metal::{fn.name}", tree.to_op(fn.name)))
    return out


# --- PORTER053: bfloat outside the file's version guard --------------------------------------

def guard_spans(mask: str) -> list[tuple[int, int]]:
    """Offsets of the branches taken only on a new enough Metal (`#if __METAL_VERSION__ >= 310`
    up to its #else/#elif/#endif)."""
    spans: list[tuple[int, int]] = []
    stack: list[int | None] = []        # per open #if: where its version branch began, or None
    for m in CONDITIONAL_RE.finditer(mask):
        kind, cond = m.group(1), m.group(2)
        if kind in ("if", "ifdef", "ifndef"):
            stack.append(m.end() if kind == "if" and VERSION_RE.search(cond) else None)
            continue
        if not stack:
            continue
        if stack[-1] is not None:
            spans.append((stack[-1], m.start()))
        if kind == "endif":
            stack.pop()
        else:
            stack[-1] = m.end() if kind == "elif" and VERSION_RE.search(cond) else None
    return spans


def bfloat_outside_guard(tree: Tree, rel: str, metal: MetalFile) -> list[Finding]:
    """Only for a file that guards bfloat at all: one that does not targets a Metal that has
    it everywhere (upstream's files since Metal 3.1 became the minimum)."""
    spans = guard_spans(metal.mask)
    if not spans:
        return []
    inside = lambda offset: any(s <= offset < e for s, e in spans)  # noqa: E731
    starts = _line_starts(metal.text)
    out, seen = [], set()
    for reg in metal.registrations:
        if "bfloat" not in (reg.in_type, reg.out_type, reg.alpha_type) or reg.line in seen:
            continue
        offset = starts[reg.line - 1]
        if inside(offset):
            continue
        macro = re.match(r"\s*(\w+)", metal.mask[offset:])
        define = metal.defines.get(macro.group(1)) if macro else None
        if define is not None and inside(define.start):
            continue        # a macro whose bfloat lines exist only on a new enough Metal
        seen.add(reg.line)
        guard_line = line_of(metal.text, spans[0][0])      # the `#if` line (span starts at its end)
        out.append(Finding(
            "PORTER053", rel, reg.line,
            f"registers {reg.kernel} for bfloat outside the file's __METAL_VERSION__ guard "
            f"(line {guard_line}): a Metal without bfloat fails to compile the whole file",
            "move the registration inside the guard with the file's other bfloat lines",
            _op(tree, reg.kernel)))
    return out


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts
