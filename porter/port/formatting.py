"""Planned C++/Metal/ObjC++ edits in the form PyTorch's clang-format leaves unchanged.

The changed line ranges of each planned `.metal`, `.mm`, `.cpp` or `.h` file go through the
`clang-format` binary of the PyPI package (`pip install 'porter[format]'`), with the checkout's
`.clang-format` when it has one (upstream's lint runs exactly that) and PyTorch's style
otherwise; lines porter did not touch are left as they are. A `.metal` file is C++ to
clang-format (Metal is C++14 with attributes).
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess

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
                "(pip install 'porter[format]')")
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
        proc = subprocess.run(cmd, input=change.new, capture_output=True, text=True)
        if proc.returncode != 0:
            return f"{change.path}: clang-format failed: {proc.stderr.strip()[:200]}"
        if proc.stdout != change.new:
            changes.set(change.path, change.old, proc.stdout)
    return None
