"""`fast::` functions porter does not model, in the functor a host call runs.

porter's Metal library models the fast-math functions whose answers it knows: fast::tanh as
Apple's formula (upstream #186286), and min/max/fmin/fmax/fmin3/fmax3/clamp/fmedian3, whose NaN
answer Metal leaves undefined (both readings run). Every other `fast::` function runs as the
precise one (porter/emulate/include/porter/metal.h), while a Mac's answers only stay within the
bound Metal's specification gives fast math (fast::sin: 2^-13 absolute in [-pi, pi]). A
kernel green here on such a call is not proven (review 23's N02): the op says so, naming the
call, where `porter check` only warned (PORTER050). This reading of the functor's text finds the
call before any sample runs; the shim itself notes every unmodelled fast:: function a sample
runs (`ran`), however it is spelled (review 30's F04: a using-declaration).
"""

from __future__ import annotations

import re
from pathlib import Path

from porter.emulate import groups
from porter.source.cpp_scan import blank_inactive, code_mask

# the fast:: functions porter/metal.h answers as a Mac does, or runs both ways
MODELLED = frozenset({"tanh", "max", "min", "fmax", "fmin", "fmax3", "fmin3", "clamp", "fmedian3"})
_FAST = r"(?:::\s*)?(?:metal\s*::\s*)?fast\b"
_ALIAS = re.compile(r"\bnamespace\s+([A-Za-z_]\w*)\s*=\s*" + _FAST)
_USING = re.compile(r"\busing\s+namespace\s+" + _FAST)
_DEFINE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*define[ \t]+([A-Za-z_]\w*)(.*)$", re.M)
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def unmodelled(text: str, kernel: str) -> tuple[int, str] | None:
    """(line, function) of the first `fast::` call porter does not model in the functor of the
    registered kernel `kernel` (`struct <kernel>_functor`) of a kernel file's `text`, or None
    (none there, or no such functor: a kernel made otherwise is not read). A call through a
    namespace alias of `metal::fast`, a macro of the file whose text calls one, or any call
    where the file says `using namespace metal::fast` counts (review 24's F1, F3)."""
    span = groups.functor_spans(text).get(kernel)
    if span is None:
        return None
    # as the compiler reads it: comments, literals and what an `#if 0` drops blanked
    mask = blank_inactive(code_mask(text))
    fast = "|".join(["fast", *(re.escape(a) for a in _ALIAS.findall(mask))])
    qualified = re.compile(rf"\b(?:{fast})\s*::\s*([A-Za-z_]\w*)")
    macros = {m.group(1) for m in _DEFINE.finditer(mask.replace("\\\n", " "))
              if any(c not in MODELLED for c in qualified.findall(m.group(2)))}
    everywhere = _USING.search(mask) is not None
    lines = mask.split("\n")
    for number in range(span[0], span[1] + 1):
        line = lines[number]
        for m in qualified.finditer(line):
            if m.group(1) not in MODELLED:
                return number + 1, " ".join(m.group(0).split())
        for m in _CALL.finditer(line):
            if m.group(1) in macros or (everywhere and m.group(1) in METAL_MATH
                                        and m.group(1) not in MODELLED):
                return number + 1, m.group(1)
    return None


# Metal's math functions that have a fast:: version (MSL's math functions table)
METAL_MATH = frozenset({
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "cos", "cosh", "cospi",
    "divide", "exp", "exp10", "exp2", "fabs", "fdim", "floor", "fma", "fmod", "fract", "frexp",
    "ldexp", "log", "log10", "log2", "modf", "pow", "powr", "rint", "round", "rsqrt", "sin",
    "sincos", "sinh", "sinpi", "sqrt", "tan", "tanh", "tanpi", "trunc"})


def ran(name: str) -> str:
    """Why a sample on which the kernel ran the fast:: function `name` (porter/metal.h's
    detail::fast_ran, whichever way the call was spelled: a using-declaration, a helper outside
    the functor) is not proven."""
    return (f"the kernel ran `fast::{name}`, whose answers on a Mac are only within the bound "
            "Metal's specification gives fast math, and porter runs it as the precise one: "
            "whether a Mac's answers pass is not known here; call the precise:: one, or test it "
            "on a Mac (`--device mps`)")


def reason(metal: Path, rel: str, kernel: str) -> str | None:
    try:
        text = Path(metal).read_text(encoding="utf-8")
    except OSError:
        return None
    found = unmodelled(text, kernel)
    if found is None:
        return None
    line, call = found
    return (f"not proven: {rel}:{line}: `{call}` is a fast:: function, whose answers on a Mac "
            "are only within the bound Metal's specification gives fast math, and porter runs "
            "it as the precise one: whether a Mac's answers pass is not known here; call the "
            "precise:: one, or test it on a Mac (`--device mps`)")
