"""`fast::` functions porter does not model, in the functor a host call runs.

porter's Metal library models the fast-math functions whose answers it knows: fast::tanh as
Apple's formula (upstream #186286), and min/max/fmin/fmax/fmin3/fmax3/clamp/fmedian3, whose NaN
answer Metal leaves undefined (both readings run). Every other `fast::` function runs as the
precise one (porter/emulate/include/porter/metal.h), while a Mac's answers only stay within the
bound Metal's specification gives fast math (fast::sin: 2^-13 absolute in [-pi, pi]). A
kernel green here on such a call is not proven (review 23's N02): the op says so, naming the
call, where `porter check` only warned (PORTER050).
"""

from __future__ import annotations

import re
from pathlib import Path

from porter.emulate import groups
from porter.source.cpp_scan import code_mask

# the fast:: functions porter/metal.h answers as a Mac does, or runs both ways
MODELLED = frozenset({"tanh", "max", "min", "fmax", "fmin", "fmax3", "fmin3", "clamp", "fmedian3"})
_FAST_CALL = re.compile(r"\bfast\s*::\s*([A-Za-z_]\w*)")


def unmodelled(text: str, kernel: str) -> tuple[int, str] | None:
    """(line, function) of the first `fast::` call porter does not model in the functor of the
    registered kernel `kernel` (`struct <kernel>_functor`) of a kernel file's `text`, or None
    (none there, or no such functor: a kernel made otherwise is not read)."""
    span = groups.functor_spans(text).get(kernel)
    if span is None:
        return None
    lines = code_mask(text).split("\n")
    for number in range(span[0], span[1] + 1):
        for m in _FAST_CALL.finditer(lines[number]):
            if m.group(1) not in MODELLED:
                return number + 1, m.group(1)
    return None


def reason(metal: Path, rel: str, kernel: str) -> str | None:
    try:
        text = Path(metal).read_text(encoding="utf-8")
    except OSError:
        return None
    found = unmodelled(text, kernel)
    if found is None:
        return None
    line, name = found
    return (f"not proven: {rel}:{line}: `fast::{name}` answers on a Mac only within the bound "
            f"Metal's specification gives fast math, and porter runs it as the precise {name}: "
            f"whether a Mac's answers pass is not known here; call `precise::{name}`, or test "
            "it on a Mac (`--device mps`)")
