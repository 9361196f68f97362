"""The `c10/metal` headers a checkout's kernels compile against, and what they define."""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from porter.source import checkout as co

# A function definition's name: the word before its parameter list, whose `)` a `{` follows.
# The return type may sit on the line above (`::metal::enable_if_t<...>\nmax(T a, U b) {`).
CALL_HEAD_RE = re.compile(r"(?<![\w.:>])(?:operator\s*\S+?|[A-Za-z_]\w*)\s*\(")
NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "static_assert", "defined",
                 "decltype", "alignas", "catch"}


def headers_dir(checkout: co.Checkout) -> Path | None:
    """The checkout's `c10/metal`, else the installed torch's `include/c10/metal`."""
    own = checkout.root / co.C10_METAL
    if own.is_dir():
        return own
    spec = importlib.util.find_spec("torch")
    if spec and spec.submodule_search_locations:
        installed = Path(list(spec.submodule_search_locations)[0]) / "include" / "c10" / "metal"
        if installed.is_dir():
            return installed
    return None


def definitions(text: str) -> dict[str, list[str]]:
    """Function name -> the signatures (return type to `)`) of its definitions in a header."""
    from porter.source.cpp_scan import code_mask, matching_close

    mask = code_mask(text)
    found: dict[str, list[str]] = {}
    for m in CALL_HEAD_RE.finditer(mask):
        name = m.group().rstrip("( \t\n").strip()
        if name in NOT_FUNCTIONS or mask[:m.start()].rstrip().endswith(("#define", "=", "return")):
            continue
        close = matching_close(mask, m.end() - 1)
        if close < 0:
            continue
        after = mask[close + 1:close + 40].lstrip()
        if not after.startswith("{") and not after.startswith(("const {", "const{")):
            continue
        before = mask[:m.start()].rstrip()
        if not before or before[-1] in "(,=+-*/?:!&|" or before.endswith(("return", "else")):
            continue        # a call inside an expression, not a definition
        head = mask.rfind(";", 0, m.start())
        head = max(head, mask.rfind("}", 0, m.start()), mask.rfind("{", 0, m.start()))
        found.setdefault(name, []).append(" ".join(mask[head + 1:close + 1].split()))
    return found


def _definitions_in(directory: str) -> dict[str, tuple[str, ...]]:
    # by the headers' names, sizes and times too: one process (a --watch loop, a test suite)
    # sees a header edited at the same path
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                  for p in sorted(Path(directory).glob("*.h")))
    return _definitions_at(directory, stamp)


@lru_cache(maxsize=8)
def _definitions_at(directory: str, stamp: tuple) -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for header in sorted(Path(directory).glob("*.h")):
        for name, signatures in definitions(header.read_text(encoding="utf-8", errors="replace")).items():
            found.setdefault(name, []).extend(signatures)
    return {name: tuple(signatures) for name, signatures in found.items()}


def _functions_in(directory: str) -> frozenset[str]:
    return frozenset(_definitions_in(directory))


COMPLEX_SIGNATURE_RE = re.compile(r"\bfloat2\b|\bhalf2\b|\bis_complex_v\b")


def complex_functions(checkout: co.Checkout) -> frozenset[str]:
    """The c10::metal routines with an overload for complex values (float2, or a template
    enabled for `is_complex_v`)."""
    directory = headers_dir(checkout)
    if directory is None:
        return frozenset()
    return frozenset(name for name, signatures in _definitions_in(str(directory)).items()
                     if any(COMPLEX_SIGNATURE_RE.search(s) for s in signatures))


def available_functions(checkout: co.Checkout) -> frozenset[str]:
    directory = headers_dir(checkout)
    return _functions_in(str(directory)) if directory else frozenset()
