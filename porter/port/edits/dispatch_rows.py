"""Add MPS to the dispatch rows of an op in `native_functions.yaml`, as text.

Key lists are sets with no canonical order upstream (`CPU, CUDA, MTIA, XPU, MPS`), so MPS is
inserted before the first key that sorts after it and the list keeps its separator style.
Where CPU and CUDA name the kernel on separate lines, MPS gets a line of its own after them.
"""

from __future__ import annotations

import re

from porter.source.native_yaml import DENSE_BACKENDS, Entry, scan


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


class NoSharedKernel(ValueError):
    """An entry whose MPS row cannot join a CPU/CUDA kernel: `entry` and why."""

    def __init__(self, entry: Entry, message: str):
        super().__init__(message)
        self.entry = entry


def mps_specific_rows(entry: Entry) -> list:
    """MPS rows naming a kernel of their own (`MPS: sign_out_mps`), not the CPU/CUDA one."""
    dense = {r.kernel for r in entry.dense_rows()}
    return [r for r in entry.mps_rows() if r.kernel not in dense]


def share_mps(text: str, entries: tuple[Entry, ...] | list[Entry]) -> str:
    """Make MPS run the CPU/CUDA kernel in every entry whose MPS row names its own kernel.

    `CPU, CUDA: sign_out` + `MPS: sign_out_mps` -> `CPU, CUDA, MPS: sign_out` (the MPS line
    goes); `CPU: signbit_out` / `CUDA: signbit_out` / `MPS: signbit_out_mps` -> the MPS line
    names `signbit_out` in place. Raises NoSharedKernel where CPU and CUDA differ or lack.
    """
    lines = text.splitlines(keepends=True)
    for entry in sorted(entries, key=lambda e: e.start, reverse=True):
        current = _entry_at(lines, entry)
        if current is None:
            continue
        own = mps_specific_rows(current)
        if not own:
            continue
        rows = current.dense_rows()
        kernels = {r.kernel for r in rows}
        keys = {k for r in rows for k in r.keys}
        if len(kernels) != 1 or not all(k in keys for k in DENSE_BACKENDS):
            found = ", ".join(f"{', '.join(r.keys)}: {r.kernel}" for r in rows) or "no CPU/CUDA row"
            raise NoSharedKernel(current, f"'{current.full_name}' has no kernel shared by CPU and "
                                          f"CUDA for MPS to join ({found})")
        kernel = kernels.pop()
        shared = [r for r in rows if all(k in r.keys for k in DENSE_BACKENDS)]
        edits = [(row, "own") for row in own] + [(row, "shared") for row in shared[:1]]
        # Bottom-up, so the line numbers of the rows above stay valid.
        for row, role in sorted(edits, key=lambda e: e[0].lineno, reverse=True):
            at = row.lineno - 1
            rest = [k for k in row.keys if k != "MPS"]
            if role == "shared":
                lines[at] = _with_key(row.text, "MPS")
            elif shared:
                if rest:
                    lines[at] = _without_key(row.text, "MPS")
                else:
                    del lines[at]
            else:
                indent = re.match(r"\s*", row.text).group()
                newline = "\r\n" if row.text.endswith("\r\n") else "\n"
                mps_line = f"{indent}MPS: {kernel}{newline}"
                if rest:
                    lines[at] = _without_key(row.text, "MPS")
                    lines.insert(at + 1, mps_line)
                else:
                    lines[at] = mps_line
    return "".join(lines)


def _without_key(line: str, key: str) -> str:
    m = re.match(r"^(\s*)([^:#]+?)(\s*:\s*.*)$", line, re.S)
    indent, keys_text, rest = m.groups()
    sep = ", " if ", " in keys_text or "," not in keys_text else ","
    return indent + sep.join(k.strip() for k in keys_text.split(",") if k.strip() != key) + rest
