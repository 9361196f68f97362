"""User-facing errors.

A `PorterError` is bad input or an inconsistent tree, never a porter bug: the CLI prints it
as one line (`path:line: message (hint)`) and exits 2, with no traceback and no file touched.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from porter import exit_codes


class PorterError(Exception):
    exit_code = exit_codes.BAD_INPUT

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
        return one_line(text)

    def to_json(self) -> dict:
        return {"error": self.message, "path": self.path, "line": self.line, "hint": self.hint}


class Incomplete(PorterError):
    """A port porter cannot finish as asked (no functor body): exit 1, nothing written."""

    exit_code = exit_codes.FAILED


class NotAnOp(PorterError):
    """The name is not one op of native_functions.yaml: malformed, misspelt, or one overload."""


def one_line(text: str) -> str:
    """Line breaks and tabs become spaces; other control and format characters (hostile input:
    an op name holding a terminal escape or a bidi override) are shown escaped."""
    out = []
    for ch in text:
        if ch in "\n\r\t\v\f\x85\u2028\u2029":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(ascii(ch)[1:-1])
        else:
            out.append(ch)
    return "".join(out)
