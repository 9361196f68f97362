"""Complex routines of the CPU's `<complex>` as float2 functions for c10/metal/utils.h.

A CPU kernel whose one lambda serves complex dtypes too (`std::acosh(a)` under
AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES) computes glibc's cacoshf there: no source to
translate. Where the checkout's c10/metal has no float2 overload of the routine, porter writes
its own (`templates/c10_complex/<name>.metal`: float opmath, C99 Annex G's branch cuts, NaN and
infinities, no overflow of z * z) into c10/metal/utils.h, beside the float2 helpers upstream
keeps there (`log1p`, `conj`, `pow`).
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, matching_close

UTILS = f"{co.C10_METAL}/utils.h"
# CPU spelling of a complex routine -> the c10::metal name of the float2 function porter writes
ROUTINES = {"std::acosh": "acosh", "std::asinh": "asinh", "std::atanh": "atanh"}


def text(name: str) -> str:
    """porter's Metal definition of the float2 routine `name` (one of ROUTINES' values)."""
    from porter.port.templates import template_dir
    return (template_dir() / "c10_complex" / f"{name}.metal").read_text(encoding="utf-8")


def writes(name: str) -> bool:
    return name in ROUTINES.values()


# a function of utils.h that takes or returns a float2: `inline float2 log1p(float2 in) {`
FLOAT2_HEAD_RE = re.compile(r"^inline\s+[\w:<>, ]*\bfloat2\b[^;{]*\(", re.M)


def add_to_utils(text_of_utils: str, names: list[str]) -> str:
    """utils.h with porter's float2 routines `names` defined after its last float2 function
    (each once: a routine the header already defines for float2 is left alone)."""
    new = [n for n in names if not re.search(rf"\bfloat2\s+{re.escape(n)}\s*\(\s*float2\b", text_of_utils)]
    if not new:
        return text_of_utils
    block = "\n".join(text(n) for n in new)
    mask = code_mask(text_of_utils)
    at = -1
    for m in FLOAT2_HEAD_RE.finditer(mask):
        open_at = mask.find("{", m.end())
        close = matching_close(mask, open_at) if open_at >= 0 else -1
        if close > 0 and mask.rfind(";", m.end(), open_at) < 0:
            at = mask.find("\n", close) + 1 or len(text_of_utils)
    if at < 0:
        end = re.search(r"^\}\s*//\s*namespace metal\s*$", text_of_utils, re.M)
        if end is None:
            return text_of_utils.rstrip("\n") + "\n\n" + block
        at = end.start()
        return text_of_utils[:at] + block + "\n" + text_of_utils[at:]
    return text_of_utils[:at] + "\n" + block + text_of_utils[at:]
