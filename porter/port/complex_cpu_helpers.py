"""A complex CPU helper that a kernel's complex case calls (`sgn_impl` of cpu/zmath.h), as one
Metal expression of the functor's complex argument (a float2).

float2's operators are elementwise, so a complex formula maps onto them only where elementwise
is what the formula means: a complex built from two parts (`c10::complex<T>(0, 0)` ->
`T(0, 0)`), complex equality (both parts: `::metal::all(z == T(0, 0))`), and a complex scaled by
a real value. The last comes from helpers whose complex overload returns a complex with no
imaginary part (`zabs(z)` is `c10::complex<float>(std::abs(z))`): dividing by it, or
multiplying, is dividing or multiplying each part by the real value. `std::abs` of a complex is
its magnitude, `c10::metal::hypot` of its parts' magnitudes (no overflow where the parts'
squares would).
Anything else (complex products, sums with a real, calls porter cannot map) is refused by name.
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, matching_close, split_top_level

# where the CPU keeps its complex helpers
SOURCES = (f"{co.CPU_KERNELS}/zmath.h", f"{co.NATIVE}/Math.h")
COMPLEX_TYPE = r"c10::complex<\s*\w+\s*>"
# `if (C) { return A; } else { return B; }` (or without the else), or `return A;`
IF_ELSE_RE = re.compile(r"^\s*if\s*\((?P<c>.*)\)\s*\{\s*return\s+(?P<a>[^;]*);\s*\}\s*"
                        r"(?:else\s*\{\s*return\s+(?P<b>[^;]*);\s*\}|return\s+(?P<b2>[^;]*);)\s*$", re.S)
RETURN_RE = re.compile(r"^\s*return\s+(?P<a>[^;]*);\s*$", re.S)


class Refused(ValueError):
    """A complex helper whose formula is not elementwise on float2."""


def definition(checkout: co.Checkout, name: str) -> tuple[str, str, str] | None:
    """(source, parameter name, body) of the complex overload of helper `name`: one
    `c10::complex<T>` parameter, returning a complex."""
    head = re.compile(rf"(?:template\s*<[^>]*>\s*)?inline\s+{COMPLEX_TYPE}\s+{re.escape(name)}\s*"
                      rf"(?:<[^()]*>\s*)?\(\s*{COMPLEX_TYPE}\s+(\w+)\s*\)\s*\{{")
    for rel in SOURCES + tuple(sorted(checkout.glob(co.CPU_KERNELS, "*.cpp"))):
        if not checkout.exists(rel):
            continue
        text = checkout.read(rel)
        if name not in text:
            continue
        mask = code_mask(text)
        m = head.search(mask)
        if m:
            end = matching_close(mask, m.end() - 1)
            return rel, m.group(1), " ".join(text[m.end():end].split())
    return None


def expression(checkout: co.Checkout, name: str, c10: frozenset[str] | set[str]) -> str:
    """The Metal expression of `name(z)` for a complex z, with `{0}` standing for z; Refused
    naming what has no float2 meaning."""
    found = definition(checkout, name)
    if found is None:
        raise Refused(f"`{name}` has no complex definition in {', '.join(SOURCES)} or the CPU "
                      "kernel files")
    rel, z, body = found
    m = IF_ELSE_RE.match(body)
    if m:
        condition = _condition(m.group("c"), z, rel, name)
        then = _value(m.group("a"), z, checkout, c10, rel, name)
        otherwise = _value(m.group("b") or m.group("b2"), z, checkout, c10, rel, name)
        out = f"{condition} ? {then} : {otherwise}"
    else:
        m = RETURN_RE.match(body)
        if m is None:
            raise Refused(f"`{name}` ({rel}) is more than one selection between two returned values")
        out = _value(m.group("a"), z, checkout, c10, rel, name)
    return re.sub(rf"(?<![\w.:]){re.escape(z)}\b", "{0}", out.replace("{", "{{").replace("}", "}}"))


def _condition(text: str, z: str, rel: str, name: str) -> str:
    """`z == c10::complex<T>(0, 0)` -> `::metal::all(z == T(0, 0))` (`!=`: any)."""
    m = re.fullmatch(rf"\s*(\w+)\s*(==|!=)\s*{COMPLEX_TYPE}\s*\((.*)\)\s*", text)
    if m is None or m.group(1) != z:
        raise Refused(f"`{name}` ({rel}) tests `{text.strip()}`, not its argument against a complex value")
    parts = _parts(m.group(3), rel, name)
    reduce = "all" if m.group(2) == "==" else "any"
    return f"::metal::{reduce}({z} {m.group(2)} T({parts}))"


def _parts(args: str, rel: str, name: str) -> str:
    parts = [p.strip() for p in split_top_level(args)]
    if len(parts) != 2 or not all(re.fullmatch(r"[-+]?\d+(?:\.\d*)?[fF]?", p) for p in parts):
        raise Refused(f"`{name}` ({rel}) builds a complex of `{args}`, not of two numbers")
    return ", ".join(parts)


def _value(text: str, z: str, checkout, c10, rel: str, name: str) -> str:
    """A returned value: a complex of two numbers, the argument itself, or the argument divided
    or multiplied by a real-valued complex helper of it."""
    text = text.strip()
    m = re.fullmatch(rf"{COMPLEX_TYPE}\s*\((.*)\)", text)
    if m:
        return f"T({_parts(m.group(1), rel, name)})"
    if text == z:
        return z
    m = re.fullmatch(rf"{re.escape(z)}\s*([*/])\s*(\w+)\s*\(\s*{re.escape(z)}\s*\)", text)
    if m is None:
        raise Refused(f"`{name}` ({rel}) returns `{text}`, which is not elementwise on float2")
    real = _real_valued(checkout, m.group(2), c10)
    # c10::complex divides by (r, 0) as numpy does, each part times 1 / r; float2 divides each
    # part by r. On an Apple GPU, which flushes float32 subnormals (docs/testing.md
    # "Subnormals"), only the division is the CPU's answer: past r = 1 / FLT_MIN (8.5e37) the
    # CPU's 1 / r is a subnormal it keeps and the GPU's a zero (sgn of 8.5e37-8.5e37i: 0.707 on
    # the CPU, 0 times z), and the r < FLT_MIN where the CPU's 1 / r overflows to inf is an
    # input the GPU reads as zero. Elsewhere the two differ by a rounding.
    return f"{z} {m.group(1)} {real.format(z)}"


def _real_valued(checkout, helper: str, c10) -> str:
    """`zabs` -> `c10::metal::hypot(::metal::abs({0}.x), ::metal::abs({0}.y))`: a helper whose complex overload returns
    `c10::complex<float>(std::abs(z))`, a complex with no imaginary part."""
    found = definition(checkout, helper)
    if found is None:
        raise Refused(f"`{helper}` has no complex definition porter can read")
    rel, z, body = found
    m = re.fullmatch(rf"return\s+{COMPLEX_TYPE}\s*\(\s*std::abs\(\s*{re.escape(z)}\s*\)\s*\)\s*;", body)
    if m is None:
        raise Refused(f"`{helper}` ({rel}) is not a complex holding a real magnitude")
    if "hypot" not in c10:
        raise Refused(f"`{helper}` needs c10::metal::hypot for a complex magnitude, which this "
                      "checkout's c10/metal headers do not define")
    # c10::metal::hypot takes its arguments as the lengths of the legs (it orders them by max and
    # min, no abs): hypot(-3, -4) is -5 there, so the parts go in as magnitudes
    return "c10::metal::hypot(::metal::abs({0}.x), ::metal::abs({0}.y))"
