"""Add a functor and its registrations to a `.metal` kernel file, in that file's conventions.

Where a new functor goes (docs/porting.md's "source order" rule): alphabetically among the file's
functors when they are in alphabetical order already; otherwise right after the functor of the op
whose registration comes just before the new op's own (its neighbour in the file's registration
order), so an op joins its family; with no registration yet, after the last functor (and the
registrations kept with it) before the file's registration section.

Unary files: a float-math op gets one line inside the `INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1)`
macro, whose REGISTER_UNARY_OP takes the output type first; other dtype pairs get their own block
of per-dtype REGISTER_UNARY_OP lines after the last such block.
Binary files: the registration uses the file-local REGISTER_*_BINARY_OP macros, beside atan2's (or
after the last), so it must follow their `#define`s.
"""

from __future__ import annotations

import re

from porter.source.dtypes import METAL, METAL_FLOATING, METAL_INTEGRAL
from porter.source.metal_scan import MetalFile

KERNELS2 = "INSTANTIATE_UNARY_KERNELS2"


def add_functor(text: str, op: str, functor: str, kind: str) -> str:
    metal = MetalFile(text)
    if op in metal.functors:
        return text
    at = _functor_anchor(metal, op, kind)
    before, after = text[:at], text[at:]
    # a blank line on each side, as between the file's own functors
    head = "" if not before or before.endswith("\n\n") else "\n"
    tail = "\n" if after and not after.startswith("\n") else ""
    return before + head + functor.rstrip("\n") + "\n" + tail + after


def _functor_anchor(metal: MetalFile, op: str, kind: str) -> int:
    """Offset where the new functor goes (see the module's docstring for the rule)."""
    spans = metal.functor_spans
    names = [n for n, _ in sorted(spans.items(), key=lambda item: item[1][0])]
    if len(names) >= 3 and names == sorted(names):
        later = [n for n in names if n > op]
        return spans[later[0]][0] if later else _unit_end(metal, names[-1])
    order = registration_order(metal)
    if op in order:
        for name in reversed(order[:order.index(op)]):
            if name in spans and name != op:
                return _unit_end(metal, name)
    return _legacy_anchor(metal, kind)


def registration_order(metal: MetalFile) -> list[str]:
    """The ops the file registers, in the order their first registration appears (inside a
    macro's body at the macro's place): `INSTANTIATE_UNARY_KERNELS2` lists its ops in order."""
    seen: list[str] = []
    for m in re.finditer(r"\b(?:REGISTER|INSTANTIATE)_\w+\(\s*(\w+)", metal.mask):
        if m.group(1) not in seen:
            seen.append(m.group(1))
    return seen


def _unit_end(metal: MetalFile, name: str) -> int:
    """End of `name`'s functor, and of the registrations of `name` that directly follow it
    (ActivationKernel.metal keeps each functor with its registrations)."""
    end = metal.functor_spans[name][1]
    block = re.compile(rf"\n?(?:[A-Z_]+\(\s*{re.escape(name)}\s*,[^\n]*\n)+")
    m = block.match(metal.mask, end)
    return _past_registrations(metal.text, m.end() if m else end)


def _legacy_anchor(metal: MetalFile, kind: str) -> int:
    """With no neighbour: after the last functor before the registration section."""
    text, mask = metal.text, metal.mask
    if kind == "binary":
        span = metal.functor_span("atan2")
        if span:
            return span[1]
        stop = mask.find("// Complex binary functors")
        stop = stop if stop >= 0 else _first(mask, r"^#define REGISTER_")
    else:
        stop = min(_first(mask, r"^DEFINE_UNARY_FLOATING_FUNCTOR\("),
                   _first(mask, r"^REGISTER_UNARY_OP\("), _first(mask, rf"^#define {KERNELS2}"))
    ends = [(end, name) for name, (_, end) in metal.functor_spans.items() if end <= stop]
    if not ends:
        return _line_start(text, stop) if stop < len(text) else len(text)
    return _unit_end(metal, max(ends)[1])


# A registration line, or the guard around one (`#if __METAL_VERSION__ >= 310` ... `#endif`)
_REGISTRATION_LINE = re.compile(r"(?:REGISTER_\w+\(.*|#\s*if\b.*|#\s*endif\b.*|\s*)")


def _past_registrations(text: str, at: int) -> int:
    """Where a file keeps each functor with its registrations (upstream's ActivationKernel.metal:
    hardsigmoid's functors, then their REGISTER_* lines, then hardswish's), a new functor after
    `at` would split a group: move past the registration lines that follow it."""
    end, pos, seen = at, at, False
    while pos < len(text):
        nl = text.find("\n", pos)
        line = text[pos:nl if nl >= 0 else len(text)]
        if not _REGISTRATION_LINE.fullmatch(line):
            break
        pos = len(text) if nl < 0 else nl + 1
        if line.strip():
            seen, end = True, pos
    return end if seen else at


def _first(mask: str, pattern: str) -> int:
    m = re.search(pattern, mask, re.M)
    return m.start() if m else len(mask)


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def unary_registration_plan(dtypes: frozenset[str], promotes: bool, returns_bool: bool) -> tuple[bool, list[tuple[str, str]]]:
    """(use the INSTANTIATE_UNARY_KERNELS2 line?, extra (in, out) Metal type pairs)."""
    metal = {METAL[d] for d in dtypes if d in METAL and d != "complex64"}
    floats = [t for t in METAL_FLOATING if t in metal]
    ints = [t for t in (*METAL_INTEGRAL, "bool") if t in metal]
    if promotes and not returns_bool and set(floats) == set(METAL_FLOATING):
        return True, []
    pairs = []
    for t in floats:
        pairs.append((t, "bool" if returns_bool else t))
    for t in ints:
        pairs.append((t, "bool" if returns_bool else ("float" if promotes else t)))
    return False, pairs


def add_unary_registration(text: str, op: str, use_kernels2: bool, pairs: list[tuple[str, str]]) -> str:
    metal = MetalFile(text)
    have = {(r.in_type, r.out_type) for r in metal.registrations if r.kernel == op}
    if use_kernels2 and ("float", "float") not in have:
        define = metal.defines.get(KERNELS2)
        if define is None:
            pairs = [("float", "float"), ("half", "half"), ("bfloat", "bfloat")] + [
                (t, "float") for t in (*METAL_INTEGRAL, "bool")]
        else:
            params = define.params        # (DTYPE0, DTYPE1): output first
            text = _append_to_macro(text, define, f"REGISTER_UNARY_OP({op}, {params[1]}, {params[0]});")
            metal = MetalFile(text)
    lines = guarded_bfloat(text, [f"REGISTER_UNARY_OP({op}, {i}, {o});" for i, o in pairs
                                  if (i, o) not in have])
    if not lines:
        return text
    span = metal.functor_span(op)
    if KERNELS2 not in metal.defines and span is not None:
        # a file without UnaryKernel.metal's macros (ActivationKernel.metal): each functor
        # with its own registrations, as add_alpha_registration writes them
        return text[:span[1]] + "\n" + "\n".join(lines) + "\n" + text[span[1]:]
    at = _after_last_top_level(metal, "REGISTER_UNARY_OP", before=KERNELS2)
    block = "\n".join(lines) + "\n"
    previous = text[_line_start(text, at - 1):at] if at else ""
    if previous.startswith("REGISTER_UNARY_OP(") and not _registers(previous, op):
        block = "\n" + block           # each op's per-dtype lines are a block of their own
    if text[at:at + 1] not in ("\n", ""):
        block += "\n"
    return text[:at] + block + text[at:]


def _registers(line: str, op: str) -> bool:
    return re.match(rf"[A-Z_]+\(\s*{re.escape(op)}\s*,", line) is not None


def _append_to_macro(text: str, define, statement: str) -> str:
    """Insert `statement` as the last-but-one line of a multi-line macro (a one-line diff)."""
    body_lines = text[define.start:define.end].split("\n")
    if len(body_lines) < 2:
        head = text[define.start:define.end]
        return text[:define.start] + head + "; \\\n  " + statement.rstrip(";") + text[define.end:]
    prev = body_lines[-2]
    column = len(prev.rstrip("\\").rstrip()) + 1 if prev.rstrip().endswith("\\") else 0
    slash_col = len(prev) - 1 if prev.endswith("\\") else column
    indent = re.match(r"\s*", body_lines[-1]).group()
    new_line = f"{indent}{statement}"
    new_line = new_line + " " * max(1, slash_col - len(new_line)) + "\\"
    body_lines.insert(len(body_lines) - 1, new_line)
    return text[:define.start] + "\n".join(body_lines) + text[define.end:]


def _after_last_top_level(metal: MetalFile, macro: str, before: str) -> int:
    """Offset after the last top-level `macro(...)` line preceding `#define before`."""
    limit = metal.defines[before].start if before in metal.defines else len(metal.text)
    last = None
    for m in re.finditer(rf"^{macro}\([^\n]*\n", metal.mask, re.M):
        if m.start() < limit:
            last = m.end()
    if last is not None:
        return last
    return _line_start(metal.text, limit) if limit < len(metal.text) else len(metal.text)


COMPLEX_TYPES = ("float2", "half2")      # complex64 and complex32 as Metal sees them
VEC2 = "INSTANTIATE_UNARY_KERNELS_VEC2"


def add_complex_registration(text: str, op: str, kind: str, returns_bool: bool = False) -> str:
    """Register `op` for complex inputs: a unary op joins the `INSTANTIATE_UNARY_KERNELS_VEC2(DTYPE)`
    macro (`REGISTER_UNARY_OP(op, DTYPE##2, DTYPE##2)`) where the file has one; otherwise, and
    for binary ops, one `REGISTER_*_OP(op, T, T)` line per complex type, after the file's last.
    A unary op returning bool (logical_not) writes bool: `REGISTER_UNARY_OP(op, float2, bool)`."""
    metal = MetalFile(text)
    have = {r.in_type for r in metal.registrations if r.kernel == op}
    if all(t in have for t in COMPLEX_TYPES):
        return text
    macro = "REGISTER_UNARY_OP" if kind == "unary" else "REGISTER_BINARY_OP"
    define = metal.defines.get(VEC2) if kind == "unary" else None
    if define is not None and len(define.params) == 1:
        if re.search(rf"\b{macro}\(\s*{re.escape(op)}\s*,", define.body):
            return text         # in the macro already, for DTYPEs the file does not instantiate
        param = define.params[0]
        out = "bool" if returns_bool else f"{param}##2"
        return _append_to_macro(text, define, f"{macro}({op}, {param}##2, {out});")
    lines = [f"{macro}({op}, {t}, {'bool' if returns_bool and kind == 'unary' else t});"
             for t in COMPLEX_TYPES if t not in have]
    at = _after_last_top_level(metal, macro, before="")
    return text[:at] + "\n".join(lines) + "\n" + text[at:]


BINARY_FLOAT_MACROS = ("REGISTER_FLOAT_BINARY_OP", "REGISTER_OPMATH_FLOAT_BINARY_OP")
BINARY_INT_MACROS = ("REGISTER_INT2FLOAT_BINARY_OP", "REGISTER_INTEGER_BINARY_OP")


def binary_registration_macros(dtypes: frozenset[str], promotes: bool) -> list[str]:
    metal = {METAL[d] for d in dtypes if d in METAL}
    macros = []
    if metal & set(METAL_FLOATING):
        macros.append("REGISTER_FLOAT_BINARY_OP")
    if metal & set((*METAL_INTEGRAL, "bool")):
        macros.append("REGISTER_INT2FLOAT_BINARY_OP" if promotes else "REGISTER_INTEGER_BINARY_OP")
    return macros


# What each file-local macro registers, for files that have none (ActivationKernel.metal
# registers with the base macro, a line per dtype, after each functor)
MACRO_PAIRS = {
    "REGISTER_FLOAT_BINARY_OP": [(t, t) for t in METAL_FLOATING],
    "REGISTER_INT2FLOAT_BINARY_OP": [(t, "float") for t in (*METAL_INTEGRAL, "bool")],
    "REGISTER_INTEGER_BINARY_OP": [(t, t) for t in (*METAL_INTEGRAL, "bool")],
}


def add_binary_registration(text: str, op: str, macros: list[str]) -> str:
    metal = MetalFile(text)
    missing = [m for m in macros if m not in metal.defines]
    if missing and not any(m in metal.defines for m in MACRO_PAIRS):
        return _add_base_binary_registration(metal, op, [p for m in macros for p in MACRO_PAIRS[m]])
    if missing:
        raise ValueError(f"the file-local macro {missing[0]} is not defined in this file")
    have = _invocations(metal, op)
    lines = [f"{m}({op});" for m in macros if m not in have]
    if not lines:
        return text
    last_define_end = max(metal.defines[m].end for m in macros)
    registered = [m for m in re.finditer(
        rf"^(?:{'|'.join(BINARY_FLOAT_MACROS + BINARY_INT_MACROS)})\((\w+)\);[^\n]*\n", metal.mask, re.M)
        if m.start() > last_define_end]
    beside_atan2 = [m for m in registered if m.group(1) == "atan2"]
    at = (beside_atan2 or registered or [None])[-1]
    at = at.end() if at is not None else None
    if at is None:
        at = metal.text.index("\n", last_define_end) + 1
    return text[:at] + "\n".join(lines) + "\n" + text[at:]


def add_missing_registrations(text: str, op: str, kind: str, pairs: list[tuple[str, str]]) -> str:
    """`REGISTER_{UNARY,BINARY}_OP(op, in, out);` per missing pair, after the op's last
    top-level registration line (or, where its registrations all sit inside a macro, as a new
    block after the last per-dtype one)."""
    metal = MetalFile(text)
    have = {(r.in_type, r.out_type) for r in metal.registrations if r.kernel == op}
    pairs = [p for p in pairs if p not in have]
    macro = "REGISTER_UNARY_OP" if kind == "unary" else "REGISTER_BINARY_OP"
    lines = []
    for name, group in MACRO_PAIRS.items():     # a whole group the file has a macro for
        if kind != "unary" and name in metal.defines and group and set(group) <= set(pairs):
            lines.append(f"{name}({op});")
            pairs = [p for p in pairs if p not in group]
    lines += [f"{macro}({op}, {i}, {o});" for i, o in pairs]
    if not lines:
        return text
    if _own_registration_lines(metal, op):
        return add_after_own_registrations(text, op, lines)
    if kind == "unary":
        return add_unary_registration(text, op, False, list(pairs))
    at = _after_last_top_level(metal, macro, before="")
    return text[:at] + "\n".join(lines) + "\n" + text[at:]


def _own_registration_lines(metal: MetalFile, op: str) -> list[re.Match]:
    dead = metal.dead_spans         # not after a line `#if 0` leaves out: that one is dead too
    return [m for m in re.finditer(rf"^[A-Z_]+\(\s*{re.escape(op)}\s*[,)][^\n]*\n", metal.mask, re.M)
            if not any(s <= m.start() < e for s, e in dead)]


def add_after_own_registrations(text: str, op: str, lines: list[str]) -> str:
    """`lines` after the op's last top-level registration line (at the end where it has none)."""
    own = _own_registration_lines(MetalFile(text), op)
    at = own[-1].end() if own else len(text)
    return text[:at] + "\n".join(lines) + "\n" + text[at:]


def registers_beside_functor(text: str, kind: str) -> bool:
    """Does the op's registration go right after its functor (a binary file with none of the
    file-local macros, as ActivationKernel.metal)? Then the functor is placed first."""
    defines = MetalFile(text).defines
    if kind == "unary":     # UnaryKernel.metal's instantiation macros keep their own order
        return UNARY_FILE_MACRO not in defines
    return not any(m in defines for m in MACRO_PAIRS)


# The macro that makes a file a UnaryKernel.metal (its kernels instantiated in one place)
UNARY_FILE_MACRO = "INSTANTIATE_UNARY_KERNELS2"


def _invocations(metal: MetalFile, op: str) -> set[str]:
    return {m.group(1) for m in re.finditer(rf"^(\w+)\(\s*{re.escape(op)}\s*\)", metal.mask, re.M)}


def _add_base_binary_registration(metal: MetalFile, op: str, pairs: list[tuple[str, str]]) -> str:
    """`REGISTER_BINARY_OP(op, in, out);` per pair, right after the op's functor."""
    have = {(r.in_type, r.out_type) for r in metal.registrations if r.kernel == op}
    lines = guarded_bfloat(metal.text, [f"REGISTER_BINARY_OP({op}, {i}, {o});" for i, o in pairs
                                        if (i, o) not in have])
    if not lines:
        return metal.text
    span = metal.functor_span(op)
    at = span[1] if span else len(metal.text)
    return metal.text[:at] + "\n" + "\n".join(lines) + "\n" + metal.text[at:]


ALPHA_MACROS = {"unary": "REGISTER_UNARY_ALPHA_OP", "binary": "REGISTER_BINARY_ALPHA_OP"}


def add_alpha_registration(text: str, op: str, kind: str, rows: list[tuple[str, str, str]]) -> str:
    """`REGISTER_{UNARY,BINARY}_ALPHA_OP(op, in, alpha, out);` per (in, alpha, out) row, right
    after the op's functor (as ActivationKernel.metal keeps each functor with its registrations)."""
    metal = MetalFile(text)
    macro = ALPHA_MACROS[kind]
    have = {(r.in_type, r.out_type) for r in metal.registrations if r.kernel == op}
    lines = guarded_bfloat(text, [f"{macro}({op}, {i}, {a}, {o});" for i, a, o in rows
                                  if (i, o) not in have])
    if not lines:
        return text
    span = metal.functor_span(op)
    at = span[1] if span else len(text)       # the span ends after the functor's newline
    return text[:at] + "\n" + "\n".join(lines) + "\n" + text[at:]


_BFLOAT_GUARD = re.compile(r"^(#if\s+__METAL_VERSION__\s*>=\s*\d+)\s*\n(?:REGISTER_\w+\([^\n]*\bbfloat\b[^\n]*\n)+#endif",
                          re.M)


def guarded_bfloat(text: str, lines: list[str]) -> list[str]:
    """The registration lines, with those of bfloat inside the file's own guard where the file
    guards its bfloat registrations (`#if __METAL_VERSION__ >= 310`: bfloat is Metal 3.1's)."""
    m = _BFLOAT_GUARD.search(text)
    bfloat = [line for line in lines if re.search(r"\bbfloat\b", line)]
    if m is None or not bfloat:
        return lines
    return [line for line in lines if line not in bfloat] + [m.group(1), *bfloat, "#endif"]


def ensure_include(text: str, header: str) -> str:
    """`#include <header>` as the kernel file's first include, unless present."""
    line = f"#include <{header}>"
    if line in text:
        return text
    m = re.search(r"^#include ", text, re.M)
    at = m.start() if m else 0
    return text[:at] + line + "\n" + text[at:]


def bool_macros(metal: MetalFile) -> dict[str, set[str]]:
    """File-local macros of one parameter that register NAME for input types with a bool output
    (upstream's `REGISTER_COMPARISON_OP(NAME)`, `REGISTER_COMPLEX_EQ_OP(NAME)`): name -> those
    input types, each registered with its castout variant too (so a non-bool `out=` works)."""
    found = {}
    for name, define in metal.defines.items():
        if len(define.params) != 1:
            continue
        p = re.escape(define.params[0])
        plain = set(re.findall(rf"\bREGISTER_BINARY_OP\(\s*{p}\s*,\s*(\w+)\s*,\s*bool\s*\)", define.body))
        castout = set(re.findall(rf"\bREGISTER_BINARY_CASTOUT_OP\(\s*{p}\s*,\s*(\w+)\s*,\s*bool\s*\)",
                                 define.body))
        others = re.findall(r"\bREGISTER_\w+\(", define.body)
        if plain and plain == castout and len(others) == 2 * len(plain):
            found[name] = plain
    return found


def add_bool_registration(text: str, op: str, inputs: list[str], castout: bool) -> str:
    """Register `op` for each Metal input type in `inputs` with a bool output, as comparison ops
    are: through the file's own bool macros where one covers exactly the wanted real (or
    complex) types, else a `REGISTER_BINARY_OP(op, T, bool);` line per type, each followed by
    its `REGISTER_BINARY_CASTOUT_OP` where the checkout's c10/metal/indexing.h has it. Placed
    after the file's last bool registration (its comparison ops), else its last binary one."""
    metal = MetalFile(text)
    have = {r.in_type for r in metal.registrations if r.kernel == op and r.out_type == "bool"}
    wanted = [t for t in inputs if t not in have]
    if not wanted:
        return text
    macros = bool_macros(metal)
    lines = []
    for group in ([t for t in wanted if t not in COMPLEX_TYPES], [t for t in wanted if t in COMPLEX_TYPES]):
        if not group:
            continue
        macro = next((name for name, types in macros.items() if types == set(group)), None)
        if macro is not None:
            lines.append(f"{macro}({op});")
            continue
        for t in group:
            lines.append(f"REGISTER_BINARY_OP({op}, {t}, bool);")
            if castout:
                lines.append(f"REGISTER_BINARY_CASTOUT_OP({op}, {t}, bool);")
    bool_lines = [m for m in re.finditer(r"^(\w+)\((\w+)(?:, (\w+), bool)?\);[^\n]*\n", metal.mask, re.M)
                  if m.group(1) in macros or (m.group(3) and m.group(1).startswith("REGISTER_BINARY"))]
    if bool_lines:
        at = bool_lines[-1].end()
    else:
        at = _after_last_top_level(metal, r"REGISTER_\w*BINARY\w*_OP", before="")
    return text[:at] + "\n".join(lines) + "\n" + text[at:]
