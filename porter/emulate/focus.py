"""Build only the registrations a run needs: the edit-to-verdict loop compiles one functor's
kernels, not the whole file's.

g++ spends its time instantiating the REGISTER_* lines (57 in the real-size tree's
BinaryKernel.metal: 0.7 s at -O0; the same file with heaviside's 9 only: 0.25 s; upstream's
files register hundreds). `focused_source` blanks every top-level `REGISTER_*(name, ...)` line
whose kernel is not wanted, keeping every other line (functors, helpers, macros, lines it
cannot read) and the line count, so that diagnostics point at the user's lines and a wanted
registration is built exactly as in the whole file. The library cache is content-addressed, so
a focused build is cached under its own key.
"""

from __future__ import annotations

import re

_REGISTER = re.compile(r"^\s*REGISTER_\w+\s*\(\s*(\w+)\s*[,)]")


def focused_source(text: str, kernels: set[str]) -> str:
    lines = text.split("\n")
    out = []
    continued = False                 # inside a multi-line #define: never touched
    for line in lines:
        m = None if continued or line.lstrip().startswith("#") else _REGISTER.match(line)
        keep = m is None or m.group(1) in kernels or line.rstrip().endswith("\\")
        out.append(line if keep else "")
        continued = line.rstrip().endswith("\\")
    return "\n".join(out)
