"""Whether the checkout's kernel templates are the ones porter's emulator stands in for.

The emulator does not run c10/metal/indexing.h's kernels (unary_dense, binary_strided, ...)
nor its REGISTER_* macros: porter's prelude replaces the macros, and its own loop
(porter/emulate/include/porter/prelude.h, run_loop) plays the part of those templates as the
installed torch's indexing.h writes them. A Mac runs the checkout's. So the verdict holds only
where the checkout's indexing.h is the installed torch's (review 21's X01, X02: an operand
swapped in binary_dense, or the second operand read with the first one's strides in
binary_strided, left every dtype green). Another indexing.h is "not proven", whatever it
changes: porter has no model of another one.

Compared as C++ tokens: comments, layout (line continuations too) and the wheel's packaging guard
(`#if !defined(TORCH_STABLE_ONLY) ...`, which the wheel wraps every header in and a checkout
does not have) are not differences.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

INDEXING = "c10/metal/indexing.h"

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|##|::|->|<<|>>|"
                    r"[<>!=]=|&&|\|\||\+\+|--|\S")
_GUARD_OPEN = re.compile(r"\A\s*#if !defined\(TORCH_STABLE_ONLY\)[^\n]*\n")
_GUARD_CLOSE = re.compile(r"#else\s*\n\s*#error[^\n]*TORCH_STABLE_ONLY[^\n]*\n\s*#endif[^\n]*\s*\Z")


def _tokens(text: str) -> list[tuple[str, int]]:
    """(token, line) of `text` without comments and the wheel's packaging guard; a line is
    counted in the text as written."""
    opened = _GUARD_OPEN.match(text)
    closed = _GUARD_CLOSE.search(text) if opened else None
    if opened and closed:
        # blanked, not cut: the line numbers stay those of the file
        text = (re.sub(r"[^\n]", " ", opened.group()) + text[opened.end():closed.start()]
                + re.sub(r"[^\n]", " ", closed.group()))
    text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    # a line continuation is layout too (clang-format wraps a long macro line)
    text = text.replace("\\\n", " \n")
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        found += [(token, number) for token in _TOKEN.findall(line)]
    return found


@lru_cache(maxsize=8)
def _unlike(mine: str, theirs: str) -> int | None:
    """The line of `mine` where its tokens first differ from `theirs`', or None."""
    a, b = _tokens(mine), _tokens(theirs)
    for (token, line), (other, _) in zip(a, b):
        if token != other:
            return line
    if len(a) == len(b):
        return None
    return a[len(b)][1] if len(a) > len(b) else (a[-1][1] if a else 1)


def unlike_the_model(root: Path) -> str | None:
    """"not proven" with the first line where the checkout's indexing.h leaves the installed
    torch's, or None (the same, or the checkout has none: the build then uses the wheel's)."""
    from porter.emulate.headers import _torch_version, torch_include_dir
    mine_path = Path(root) / INDEXING
    wheel = torch_include_dir()
    try:
        mine = mine_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return _deleted(Path(root), wheel)
    try:
        theirs = (wheel / INDEXING).read_text(encoding="utf-8", errors="replace") if wheel else None
    except OSError:
        theirs = None
    if theirs is None:
        return (f"not proven: the installed torch has no {INDEXING}, and porter's emulator "
                f"stands in for its kernel templates; install the torch the checkout was cut from")
    line = _unlike(mine, theirs)
    if line is None:
        return None
    # porter's own addition (migrate-from-mpsgraph addcmul: the ternary kernels with a scalar
    # and their macros, porter.port.ternary_alpha), which the prelude models as it models the
    # installed torch's macros (review 22's C4: the port was not proven)
    from porter.port.ternary_alpha import add_macros
    if _unlike(mine, add_macros(theirs)) is None:
        return None
    return (f"not proven: {INDEXING}:{line} differs from the installed torch "
            f"{_torch_version()}'s: a Mac runs the checkout's kernel templates (unary_dense, "
            f"binary_strided, ...) and REGISTER_* macros, porter's emulator its model of the "
            f"installed torch's; install the torch the checkout was cut from, or test on a Mac "
            f"(`--device mps`)")


def _deleted(root: Path, wheel: Path | None) -> str | None:
    """Where the checkout has a c10/metal folder of its own but no indexing.h (review 22's B04:
    the header deleted, every dtype green on the wheel's): a Mac's kernel build includes it
    from the checkout and stops. None for a checkout with no c10/metal at all (a miniature:
    its builds use the installed torch's, as porter.emulate.headers says)."""
    folder = root / "c10" / "metal"
    if not folder.is_dir() or not any(folder.glob("*.h")):
        return None
    return (f"'{INDEXING}' file not found: the checkout's c10/metal lacks it, and every kernel "
            f"file includes it; a Mac's build stops there, before any test (porter's build used "
            f"the installed torch's)")
