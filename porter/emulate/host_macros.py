"""Macros of the checkout that could rewrite the host code porter reads.

porter reads a host's `REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)` and its
function's `lib.exec_binary_kernel(iter, "heaviside")` as they are written. A Mac compiles the
preprocessor's text: `#define heaviside_mps_kernel copysign_mps_kernel` before the registration,
or `#define exec_binary_kernel(IT, NAME) exec_binary_kernel(IT, "copysign")` before the function,
runs another kernel while porter ran the written one (review 23's H05, H06b: green). So every
identifier of those statements that the checkout defines as a macro (the `.mm` itself, or a
header of the MPS backend's, which its includes reach) makes the op not proven, naming the
`#define`: porter does not expand them. The headers are upstream's (torch's c10 and ATen
macros, TORCH_CHECK and REGISTER_DISPATCH among them, are the installed torch's); a name
upstream's own MPS headers define (none of those a host function porter reads uses today) would
be named too, rather than guessed at.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from porter.source.cpp_scan import code_mask

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
# the MPS backend's own headers, which a host `.mm` includes (OperationUtils.h and what it
# includes); the Metal kernels' headers under kernels/ are the kernels', not the host's
_HEADER_FOLDERS = ("aten/src/ATen/native/mps", "aten/src/ATen/mps")


def redefined(root: Path, mm: Path, text: str, spans: list[tuple[int, int]]) -> str | None:
    """"`name` (file:line)" for the first identifier of `text[start:end]` (each span: a
    statement porter reads) that the `.mm` file (`text`, before the span) or an MPS header of
    the checkout defines as a macro; None where none is."""
    mask = code_mask(text)
    own = {}
    for m in _DEFINE.finditer(mask):
        own.setdefault(m.group(1), m.start())
    headers = _header_macros(Path(root), _stamp(Path(root)))
    for start, end in spans:
        for token in _IDENTIFIER.findall(mask[start:end]):
            if token in own and own[token] < end:
                line = mask.count("\n", 0, own[token]) + 1
                return f"`{token}` ({_rel(mm, root)}:{line})"
            if token in headers:
                return f"`{token}` ({headers[token]})"
    return None


def _stamp(root: Path) -> tuple:
    """The headers' names and times: a header edited since is read again."""
    found = []
    for folder in _HEADER_FOLDERS:
        for path in sorted((root / folder).glob("*.h")):
            try:
                found.append((str(path), path.stat().st_mtime_ns))
            except OSError:
                continue
    return tuple(found)


@lru_cache(maxsize=4)
def _header_macros(root: Path, stamp: tuple) -> dict[str, str]:
    """Macro name -> "file:line" of its first `#define` in the MPS headers `stamp` lists."""
    found: dict[str, str] = {}
    for name, _ in stamp:
        path = Path(name)
        try:
            mask = code_mask(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        for m in _DEFINE.finditer(mask):
            found.setdefault(m.group(1), f"{_rel(path, root)}:{mask.count(chr(10), 0, m.start()) + 1}")
    return found


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name
