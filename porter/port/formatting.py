"""Planned C++/Metal/ObjC++ edits in the form PyTorch's clang-format leaves unchanged.

The changed line ranges of each planned `.metal`, `.mm`, `.cpp` or `.h` file go through the
`clang-format` binary of the PyPI package (a dependency of porter-mps), with the checkout's
`.clang-format` when it has one (upstream's lint runs exactly that) and PyTorch's style
otherwise; lines porter did not touch are left as they are, even where clang-format reflows
the construct around a changed line (`only_within`). A `.metal` file is C++ to
clang-format (Metal is C++14 with attributes).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import subprocess

from porter.runtime.cache_dir import cache_dir
from porter.runtime.whole_file import write_whole

FORMATTED = (".metal", ".mm", ".cpp", ".h", ".cu")
STYLE_FILE = ".clang-format"

# PyTorch's style, in the options that decide what porter's edits look like (the checkout's
# own .clang-format is used whenever there is one).
PYTORCH_CPP = ("{BasedOnStyle: Google, ColumnLimit: 80, IndentWidth: 2, ContinuationIndentWidth: 4,"
               " AccessModifierOffset: -1, AlignAfterOpenBracket: AlwaysBreak, AlignOperands: false,"
               " AlignTrailingComments: false, AlignEscapedNewlines: Left,"
               " AllowShortFunctionsOnASingleLine: Empty, AllowShortIfStatementsOnASingleLine: false,"
               " AllowShortLoopsOnASingleLine: false, AllowShortBlocksOnASingleLine: false,"
               " BinPackArguments: false, BinPackParameters: false, DerivePointerAlignment: false,"
               " PointerAlignment: Left, SpacesBeforeTrailingComments: 1,"
               " PenaltyBreakBeforeFirstCallParameter: 1, PenaltyReturnTypeOnItsOwnLine: 2000000,"
               " BreakStringLiterals: false, Standard: c++17}")
PYTORCH_OBJC = PYTORCH_CPP.replace("ColumnLimit: 80", "ColumnLimit: 120").replace(
    "AlignAfterOpenBracket: AlwaysBreak", "AlignAfterOpenBracket: Align")


def binary() -> str | None:
    """The clang-format of the `clang-format` PyPI package (or $PORTER_CLANG_FORMAT)."""
    chosen = os.environ.get("PORTER_CLANG_FORMAT")
    if chosen is not None:
        return chosen or None           # empty: formatting off
    try:
        import clang_format     # the PyPI package ships the binary inside it
    except ImportError:
        return shutil.which("clang-format")
    path = clang_format.get_executable("clang-format")
    return path if os.path.isfile(path) else shutil.which("clang-format")


def changed_ranges(old: str | None, new: str) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of `new` that differ from `old`."""
    new_lines = new.split("\n")
    if old is None:
        return [(1, len(new_lines))]
    matcher = difflib.SequenceMatcher(None, old.split("\n"), new_lines, autojunk=False)
    return [(j1 + 1, j2) for tag, _, _, j1, j2 in matcher.get_opcodes()
            if tag in ("replace", "insert") and j2 > j1]


def format_changes(root, changes) -> str | None:
    """Format the changed lines of each planned C++-family file in `changes` in place.
    Returns a note when formatting could not run (no clang-format installed)."""
    targets = [c for c in changes.pending if c.path.endswith(FORMATTED)]
    if not targets:
        return None
    exe = binary()
    if exe is None:
        return ("generated C++/Metal not clang-formatted: no clang-format found "
                "(pip install clang-format)")
    style_path = os.path.join(str(root), STYLE_FILE)
    has_style = os.path.isfile(style_path)
    for change in targets:
        ranges = changed_ranges(change.old, change.new)
        if not ranges:
            continue
        objc = change.path.endswith(".mm")
        style = f"file:{style_path}" if has_style else (PYTORCH_OBJC if objc else PYTORCH_CPP)
        cmd = [exe, f"--style={style}", f"--assume-filename=porter.{'mm' if objc else 'cpp'}",
               "--sort-includes=false", *(f"--lines={a}:{b}" for a, b in ranges)]
        style_text = _read(style_path) if has_style else style
        key = _key(exe, cmd[2:], style_text, change.new)
        formatted = _cached(key)
        if formatted is None:
            proc = subprocess.run(cmd, input=change.new, capture_output=True, text=True)
            if proc.returncode != 0:
                return f"{change.path}: clang-format failed: {proc.stderr.strip()[:200]}"
            formatted = only_within(change.new, proc.stdout, ranges)
            _store(key, formatted)
        if formatted != change.new:
            changes.set(change.path, change.old, formatted)
    return None


def only_within(text: str, formatted: str, ranges: list[tuple[int, int]]) -> str:
    """`formatted` where it differs from `text` on lines inside `ranges` (1-based, inclusive),
    `text` everywhere else. clang-format's --lines still reflows a whole construct around a
    changed line (the escaped newlines of a `#define`, a wrapped call), and porter must leave
    the lines it did not write byte-identical."""
    changed = {n for a, b in ranges for n in range(a - 1, b)}       # 0-based
    old, new = text.split("\n"), formatted.split("\n")
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        mine = [i in changed for i in range(i1, i2)] or [i1 in changed or i1 - 1 in changed]
        if tag == "equal" or not any(mine):
            out += old[i1:i2]
        elif all(mine):
            out += new[j1:j2]
        elif i2 - i1 == j2 - j1:        # line for line: porter's lines formatted, the rest kept
            out += [_in_step(old[i1 + k], new[j1 + k]) if mine[k] else old[i1 + k]
                    for k in range(i2 - i1)]
        else:
            out += old[i1:i2]           # a reflow that mixes porter's lines with others: keep
    return "\n".join(out)


def _in_step(mine: str, formatted: str) -> str:
    """Porter's line inside a construct whose other lines stay: where clang-format only moved
    its escaped newline (to realign the whole `#define`), keep it in line with its neighbours."""
    if re.sub(r"\s*\\$", "", mine) == re.sub(r"\s*\\$", "", formatted):
        return mine
    return formatted


# A dry run and the real run that follows format the same texts: the second reads the result
# back (~1 ms) instead of starting clang-format again (~20 ms a file).
def _key(exe: str, args: list[str], style: str, text: str) -> str:
    st = os.stat(exe)
    h = hashlib.sha256(f"format-v3\0{os.path.realpath(exe)}:{st.st_size}:{int(st.st_mtime)}".encode())
    for part in (*args, style, text):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:32]


def _cached(key: str) -> str | None:
    path = cache_dir("format") / key
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _store(key: str, text: str) -> None:
    directory = cache_dir("format")
    try:
        write_whole(directory / key, text)
    except OSError:
        pass        # a read-only cache only costs the next run a clang-format


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
