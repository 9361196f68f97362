"""Add MPS to the dispatch rows of an op in `native_functions.yaml`, as text.

Key lists are sets with no canonical order upstream (`CPU, CUDA, MTIA, XPU, MPS`), so MPS is
inserted before the first key that sorts after it and the list keeps its separator style.
Where CPU and CUDA name the kernel on separate lines, MPS gets a line of its own after them.
"""

from __future__ import annotations

import re

from porter.native_yaml import DENSE_BACKENDS, Entry, scan


def add_mps(text: str, entries: tuple[Entry, ...] | list[Entry]) -> str:
    """Route MPS through the shared dense kernel of every entry that has CPU/CUDA rows."""
    lines = text.splitlines(keepends=True)
    # Work bottom-up so inserted lines do not shift the entries still to edit.
    for entry in sorted(entries, key=lambda e: e.start, reverse=True):
        current = _entry_at(lines, entry)
        if current is None or current.mps_rows():
            continue
        rows = current.dense_rows()
        if not rows:
            continue
        shared = [r for r in rows if all(k in r.keys for k in DENSE_BACKENDS)]
        if shared:
            row = shared[0]
            lines[row.lineno - 1] = _with_key(row.text, "MPS")
        else:
            last = max(rows, key=lambda r: r.lineno)
            indent = re.match(r"\s*", last.text).group()
            newline = "\r\n" if last.text.endswith("\r\n") else "\n"
            lines.insert(last.lineno, f"{indent}MPS: {last.kernel}{newline}")
    return "".join(lines)


def _entry_at(lines: list[str], entry: Entry) -> Entry | None:
    found = scan("".join(lines[entry.start:entry.end]))
    if not found or found[0].full_name != entry.full_name:
        return None
    e = found[0]
    return Entry(e.name, e.overload, entry.start, entry.start + (e.end - e.start),
                 tuple(lines[entry.start:entry.start + (e.end - e.start)]))


def _with_key(line: str, key: str) -> str:
    m = re.match(r"^(\s*)([^:#]+?)(\s*:\s*.*)$", line, re.S)
    indent, keys_text, rest = m.groups()
    sep = ", " if ", " in keys_text or "," not in keys_text else ","
    keys = [k.strip() for k in keys_text.split(",")]
    position = next((i for i, k in enumerate(keys) if k > key), len(keys))
    keys.insert(position, key)
    return indent + sep.join(keys) + rest
