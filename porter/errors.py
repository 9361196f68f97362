"""User-facing errors.

A `PorterError` is bad input or an inconsistent tree, never a porter bug: the CLI prints it
as one line (`path:line: message (hint)`) and exits 2, with no traceback and no file touched.
"""

from __future__ import annotations

from pathlib import Path


class PorterError(Exception):
    exit_code = 2

    def __init__(self, message: str, *, path: str | Path | None = None,
                 line: int | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.hint = hint

    def __str__(self) -> str:
        where = ""
        if self.path:
            where = f"{self.path}:{self.line}: " if self.line else f"{self.path}: "
        text = f"{where}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text.replace("\n", " ")

    def to_json(self) -> dict:
        return {"error": self.message, "path": self.path, "line": self.line, "hint": self.hint}
