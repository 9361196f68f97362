"""Character offsets of `ast` positions, for edits that cut exactly what a node spans."""

from __future__ import annotations

import io


class AstOffsets:
    """ast positions (line, UTF-8 byte column) -> character offsets into the parsed text."""

    def __init__(self, text: str):
        # ast counts lines by \n, \r\n and \r only (str.splitlines also splits on \f etc.)
        self.lines = io.StringIO(text, newline="").readlines()
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def at(self, lineno: int, col_byte: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col_byte].decode("utf-8"))
