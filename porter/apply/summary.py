"""Markdown for GitHub job summaries: table cells, inline code, and appending a section.

Shared by `porter check` and the harness reports (`porter test`, `audit-xfails`); it imports
nothing else of porter's, so `porter check --summary` stays as light as `porter check`.
"""

from __future__ import annotations

from pathlib import Path

from porter.errors import PorterError

MESSAGE_CHARS = 160


def cell(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    """`text` safe inside a table cell: one line, pipes escaped, cut to `limit` characters."""
    if not text:
        return "-"
    flat = " ".join(str(text).split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat.replace("|", "\\|")


def code(text: str) -> str:
    """Inline code that survives backticks inside it."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}".replace("|", "\\|")


def append(path: str | Path, section: str) -> None:
    """Append `section` to `path`, as Actions' job summary expects (several steps share it)."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(section + "\n")
    except OSError as err:
        raise PorterError(f"--summary: cannot write ({err.strerror})", path=str(path)) from None
