"""Macros of the checkout that could rewrite the host code porter reads.

porter reads a host's `REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)` and its
function's `lib.exec_binary_kernel(iter, "heaviside")` as they are written. A Mac compiles the
preprocessor's text: `#define heaviside_mps_kernel copysign_mps_kernel` before the registration,
or `#define exec_binary_kernel(IT, NAME) exec_binary_kernel(IT, "copysign")` before the function,
runs another kernel while porter ran the written one (review 23's H05, H06b: green). So every
identifier of those statements that the checkout defines as a macro makes the op not proven,
naming the `#define`: porter does not expand them. Read as the preprocessor reads them: a line
continued by `\\`, the `%:` digraph of `#` (review 24's M1, M4), `#undef`, and code an `#if 0`
drops (M5, M6). The files read are the `.mm` itself, up to the statement, every file of the
MPS backend's host folders (native/mps with its subfolders, ATen/mps; any extension but the
kernels' `.metal` and the hosts' `.mm`: a `.inc` or a header beside the hosts is included as
well, M2, M3), and every checkout header the `.mm` reads elsewhere (review 25's H21b, H21c). torch's c10 and ATen macros (TORCH_CHECK, REGISTER_DISPATCH) are the installed
torch's; a name upstream's own MPS headers define (none a host function porter reads uses
today) would be named too, rather than guessed at.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from porter.runtime import run_memo
from porter.source.cpp_scan import blank_inactive, code_mask

_DIRECTIVE = re.compile(r"^[ \t]*(?:#|%:)[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_HOST_FOLDERS = ("aten/src/ATen/native/mps", "aten/src/ATen/mps")
_NOT_HOST = (".metal", ".mm", ".md", ".txt", ".py", ".yaml", ".json")


def redefined(root: Path, mm: Path, text: str, spans: list[tuple[int, int]]) -> str | None:
    """"`name` (file:line)" for the first identifier of `text[start:end]` (each span: a
    statement porter reads) that the `.mm` file (`text`, before the span's end) or a file of
    the MPS host folders defines as a macro; None where none is."""
    live = _live(text)
    root = Path(root)
    headers = _folder_macros(root, _host_folders(root) + _included(root, mm, text))
    for start, end in spans:
        own = _macros(live[:end])
        for token in _IDENTIFIER.findall(live[start:end]):
            if token in own:
                return f"`{token}` ({_rel(mm, root)}:{own[token]})"
            if token in headers:
                return f"`{token}` ({headers[token]})"
    return None


def _live(text: str) -> str:
    """`text` as the compiler reads it: comments, literals' contents and what the
    preprocessor drops blanked (offsets and lines kept)."""
    return blank_inactive(code_mask(text))


def _macros(live: str) -> dict[str, int]:
    """Macro name -> the line of its `#define`, for those still defined at the end of `live`
    (its logical lines: a `\\` at a line's end continues it)."""
    return {name: line for name, (line, _) in _definitions(live).items()}


def _definitions(live: str) -> dict[str, tuple[int, str]]:
    """Macro name -> (the line of its `#define`, the directive's words), for those still
    defined at the end of `live`."""
    found: dict[str, tuple[int, str]] = {}
    lines = live.split("\n")
    i = 0
    while i < len(lines):
        first, logical = i, lines[i]
        while logical.endswith("\\") and i + 1 < len(lines):
            i += 1
            logical = logical[:-1] + lines[i]
        m = _DIRECTIVE.match(logical)
        if m:
            if m.group(1) == "define":
                found[m.group(2)] = (first + 1, " ".join(logical.split()))
            else:
                found.pop(m.group(2), None)
        i += 1
    return found


def _host_folders(root: Path) -> tuple:
    """_stamp, once a run (porter.runtime.run_memo)."""
    return run_memo.once(("host folders", root), lambda: _stamp(root))


def _stamp(root: Path) -> tuple:
    """The host folders' files and their times: a file edited since is read again."""
    found = []
    for folder in _HOST_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in _NOT_HOST or not path.is_file():
                continue
            try:
                found.append((str(path), path.stat().st_mtime_ns))
            except OSError:
                continue
    return tuple(found)


def computed_include(root: Path, mm: Path, text: str) -> str | None:
    """"`#include NAME` (file:line)" where the `.mm`, or a checkout file it reads, includes a
    file a macro names (review 26's M1): which file that is, and the macros it defines, the
    preprocessor decides; None where none does."""
    graph = _graph(root)
    for path in [Path(mm), *sorted(graph.reached(mm, text))]:
        if path in graph.computed:
            line, directive = graph.computed[path]
            return f"`{directive}` ({_rel(path, root)}:{line})"
    return None


def _graph(root: Path):
    """The checkout's include graph, one a run: every host file reads the same headers."""
    from porter.emulate.host_compile import wheel_include
    from porter.emulate.include_graph import IncludeGraph
    root = Path(root)
    return run_memo.once(("host include graph", root), lambda: IncludeGraph(root, wheel_include()))


def read_by_hosts(root: Path, mms: list[Path]) -> set[Path]:
    """Every file whose edit, and every folder where a file created or deleted, can change what
    these checks read for the host files `mms`: the MPS host folders' files and the folders
    themselves, each `.mm`'s checkout headers (porter.emulate.include_graph), and the folders its
    include lookups listed (a header created there is found by the next build): what `--watch`
    watches for them (review 48's F2: a `#define exec_binary_kernel` saved into the host folders'
    OperationUtils.h got no round)."""
    root = Path(root)
    found = {Path(name) for name, _ in _host_folders(root)}
    for folder in _HOST_FOLDERS:
        found.update(p for p in [root / folder, *(root / folder).rglob("*")] if p.is_dir())
    graph = _graph(root)
    for mm in mms:
        try:
            found.update(graph.reached(mm, mm.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    found.update(folder for folder in graph.listed() if folder.is_relative_to(root))
    return found


def _included(root: Path, mm: Path, text: str) -> tuple:
    """The checkout files outside the host folders that the `.mm` reads, directly or not
    (porter.emulate.include_graph), whatever their names, with their times (review 25's H21b:
    a `#define` of `exec_unary_kernel` in a new `aten/src/ATen/PorterSwap.h` the host includes;
    review 26's M5, M6: the same in a `.txt` or a `.mm` file)."""
    found = []
    for path in sorted(_graph(root).reached(mm, text)):
        rel = _rel(path, root)
        if rel.startswith(_HOST_FOLDERS) and path.suffix not in _NOT_HOST:
            continue                          # read with the host folders
        try:
            found.append((str(path), path.stat().st_mtime_ns))
        except OSError:
            continue
    return tuple(found)


@lru_cache(maxsize=4)
def _folder_macros(root: Path, stamp: tuple) -> dict[str, str]:
    """Macro name -> "file:line" of its `#define`, for each macro a file `stamp` lists still
    defines at its end."""
    from porter.emulate.host_compile import wheel_include
    wheel = wheel_include()
    found: dict[str, str] = {}
    for name, _ in stamp:
        path = Path(name)
        try:
            live = _live(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        # a header the installed torch has too: a macro it defines alike is torch's own
        # (ATen/native/DispatchStub.h's REGISTER_DISPATCH), which porter models
        rel = _rel(path, root)
        theirs = Path(wheel) / rel.removeprefix("aten/src/") if wheel and rel.startswith("aten/src/") else None
        torch_own = {}
        if theirs is not None and theirs.is_file():
            torch_own = _definitions(_live(theirs.read_text(encoding="utf-8", errors="replace")))
        for macro, (line, words) in _definitions(live).items():
            if macro in torch_own and torch_own[macro][1] == words:
                continue
            found.setdefault(macro, f"{rel}:{line}")
    return found


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return Path(path).name
