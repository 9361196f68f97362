"""What every command shares about the terminal: output format, verbosity, colour, width, progress.

One `--format` vocabulary for every command (`FORMATS`), each command taking the part it can
write; `--json` is `--format json`, and the two disagreeing is bad input. Notes and progress
go to stderr (stdout is the result, for pipes); `-q` silences them, `-v` shows progress off a
terminal and tables uncut. Colour only on a terminal, never with NO_COLOR set or
`--color never` (https://no-color.org); `--color always` forces it. Tables fit COLUMNS.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

from porter.errors import PorterError

# the whole vocabulary, in the order `--help` lists it
FORMATS = ("text", "json", "markdown", "junit", "lintrunner", "github")
ALIASES = {"human": "text"}          # `porter check --format human`, as lintrunner configs have it

_state = {"verbosity": 0, "color": "auto"}


def add_format(parser, formats: tuple[str, ...] = ("text", "json"), what: dict | None = None) -> None:
    """`--format` (the formats this command writes) and `--json`, its alias."""
    what = what or {}
    described = ", ".join(f"{f} ({what[f]})" if f in what else f for f in formats)
    parser.add_argument("--format", metavar="FORMAT", default=None, type=str.lower,
                        help=f"output format: {described}; default text")
    parser.add_argument("--json", action="store_true", help="the same as --format json")
    parser.set_defaults(_formats=formats)


def add_common(parser) -> None:
    """-q, -v and --color, on every command."""
    group = parser.add_argument_group("terminal")
    group.add_argument("-q", "--quiet", action="store_true", help="no notes or progress on stderr")
    group.add_argument("-v", "--verbose", action="count", default=0,
                       help="progress even off a terminal, tables not cut to the terminal's width")
    group.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                       help="colour: auto (on a terminal, unless NO_COLOR is set), always or never")


def only_with(args, base: str, *options: str, dest: str | None = None) -> None:
    """Options that do something only beside `base` (`--dry-run` of `--prune-xfails`): given
    without it they would be ignored in silence, so they are bad input (exit 2) instead."""
    if getattr(args, dest or base.lstrip("-").replace("-", "_")):
        return
    given = [o for o in options if getattr(args, o.lstrip("-").replace("-", "_"))]
    if given:
        raise PorterError(f"{given[0]} does nothing without {base}",
                          hint=f"add {base}, or drop {given[0]}")


def configure(args) -> None:
    """Settle the format and the terminal options of a parsed command line (exit 2 on a conflict)."""
    if getattr(args, "quiet", False) and getattr(args, "verbose", 0):
        raise PorterError("-q and -v contradict each other: pass one")
    _state["verbosity"] = -1 if getattr(args, "quiet", False) else min(getattr(args, "verbose", 0), 2)
    _state["color"] = getattr(args, "color", "auto")
    formats = getattr(args, "_formats", None)
    if formats is None:
        return
    fmt = ALIASES.get(args.format, args.format) if args.format else None
    if fmt is not None and fmt not in FORMATS:
        raise PorterError(f"--format {args.format}: unknown format",
                          hint=f"choose from {', '.join(formats)}")
    if fmt is not None and fmt not in formats:
        raise PorterError(f"--format {fmt}: porter {args.command} does not write it",
                          hint=f"choose from {', '.join(formats)}")
    if args.json and fmt not in (None, "json"):
        args.json = False           # which one the user wanted is unknown: the error goes to stderr
        raise PorterError(f"--json and --format {fmt} ask for two formats: pass one")
    args.format = "json" if args.json else (fmt or "text")
    args.json = args.format == "json"


def quiet() -> bool:
    return _state["verbosity"] < 0


def verbose() -> bool:
    return _state["verbosity"] > 0


def note(text: str) -> None:
    if not quiet():
        print(paint(f"note: {text}", "dim", sys.stderr), file=sys.stderr)


def color(stream=None) -> bool:
    stream = stream or sys.stdout
    mode = _state["color"]
    if mode == "never":
        return False
    if mode == "always":
        return True
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


STYLES = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36",
          "bold": "1", "dim": "2", "bold red": "1;31"}


def paint(text: str, style: str, stream=None) -> str:
    if not style or not color(stream):
        return text
    return f"\x1b[{STYLES[style]}m{text}\x1b[0m"


OUTCOME_STYLE = {"pass": "green", "fail": "bold red", "xpass": "yellow", "xfail": "cyan", "skip": "dim",
                 "yes": "green", "no": "red", "verified": "green", "fails": "bold red", "refused": "yellow"}


def width(stream=None) -> int | None:
    """Columns to fit: COLUMNS if set, else the terminal's; None (no limit) for a pipe or a
    file, or with -v, so that what scripts read is never cut."""
    if verbose():
        return None
    stream = stream or sys.stdout
    if os.environ.get("COLUMNS", "").isdigit():
        return max(int(os.environ["COLUMNS"]), 40)
    isatty = getattr(stream, "isatty", None)
    if isatty and isatty():
        return max(shutil.get_terminal_size().columns, 40)
    return None


def prose(limit: int | None):
    """print, wrapping each paragraph at `limit` columns (indented lines keep their indent)."""
    def say(text: str = "") -> None:
        if limit is None or len(text) <= limit:
            print(text)
            return
        lead = text[:len(text) - len(text.lstrip("\n"))]
        body = text.lstrip("\n")
        indent = " " * (len(body) - len(body.lstrip(" ")))
        print(lead + textwrap.fill(body.strip(), limit, initial_indent=indent,
                                   subsequent_indent=indent + ("  " if indent else ""),
                                   break_long_words=False, break_on_hyphens=False))
    return say


def table(rows: list[tuple[str, ...]], wrap: tuple[int, ...] = (), limit: int | None = None,
          style=None) -> list[str]:
    """Rows as aligned columns. Where they would pass `limit` columns, the columns in `wrap`
    (the wide free-text ones) wrap onto continuation lines, sharing what the others leave;
    `style(row, column)` names a colour for a cell."""
    n = len(rows[0])
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    if limit is not None and wrap:
        fixed = sum(widths[i] for i in range(n) if i not in wrap) + 2 * (n - 1)
        room = limit - fixed
        natural = sum(widths[i] for i in wrap)
        if natural > room:
            share = max(room, 12 * len(wrap))
            for i in wrap:
                widths[i] = max(12, min(widths[i], share * widths[i] // natural))
    lines = []
    for r in rows:
        # a word longer than its column (REGISTER_OPMATH_TERNARY_ALPHA_OP) is cut: the table fits
        cells = [textwrap.wrap(r[i], widths[i], break_on_hyphens=False, break_long_words=True) or [""]
                 if i in wrap and len(r[i]) > widths[i]
                 else [r[i]] for i in range(n)]
        for k in range(max(len(c) for c in cells)):
            parts = []
            for i in range(n):
                text = cells[i][k] if k < len(cells[i]) else ""
                padded = text.ljust(widths[i]) if i < n - 1 else text
                cell_style = style(r, i) if style and k == 0 else None
                parts.append(paint(padded, cell_style) if cell_style else padded)
            lines.append("  ".join(parts).rstrip())
    return lines


def paint_finding(line: str) -> str:
    """`path:line: PORTER021 name: message`, its id coloured as ruff colours a rule code."""
    import re

    m = re.match(r"^(\S+?: )(PORTER\d+)( .*)$", line)
    if not m or not color():
        return line
    return paint(m.group(1), "bold") + paint(m.group(2), "red") + m.group(3)


def paint_test_line(line: str) -> str:
    """A line of `porter test`'s text report with its verdicts coloured: the outcome cell of a
    table row, a FAIL / XPASS detail line's label, the counts of the summary."""
    import re

    m = re.match(r"^(  \S+\s+)(pass|fail|xfail|xpass|skip)(\s.*)$", line)
    if m:
        return m.group(1) + paint(m.group(2), OUTCOME_STYLE[m.group(2)]) + m.group(3)
    m = re.match(r"^(  )(FAIL|XPASS)( .*)$", line)
    if m:
        return m.group(1) + paint(m.group(2), OUTCOME_STYLE[m.group(2).lower()]) + m.group(3)
    if line.startswith("summary: "):
        return re.sub(r"\b([1-9]\d*) (fail|xpass)\b",
                      lambda c: paint(c.group(0), OUTCOME_STYLE[c.group(2)]), line)
    return line


class Painted:
    """A stream that colours each whole line it is written through `paint_line`."""

    def __init__(self, stream, paint_line):
        self._stream, self._paint, self._pending = stream, paint_line, ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._stream.write(self._paint(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._paint(self._pending))
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def escape_github(text: str, property_value: bool = False) -> str:
    """A workflow command's message (or property) escaped as the Actions runner unescapes it."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


class Elapsed:
    """`what (12 s)` on a terminal's stderr while a long step runs (torch's op database import,
    a first build, a port's test): nothing for the first `after` seconds; the line is cleared
    at the end or at the first output on stdout, whichever comes first; off a terminal only
    with -v (one line per step); never with -q.

    `step(what)` names the next step (`porter pr`: the branch, each op's verdicts, the checks).
    `row(text)` prints a line that stays, above the timer: `porter test`'s rows as each dtype
    is decided (`live_rows`). When stdout is the same terminal, the rows are wiped before the
    report's first line, which prints the whole table again with its details; they stay when
    anything else was written to stderr in between (wiping would take the wrong lines)."""

    def __init__(self, what: str, after: float = 2.0):
        import threading

        self.what, self.after = what, after
        stream = sys.stderr
        self.tty = bool(getattr(stream, "isatty", None) and stream.isatty())
        self.on = not quiet() and (self.tty or verbose())
        self._stop = None
        self._lock = threading.RLock()
        self._shown = False           # the timer's line is on screen
        self._rows = 0                # lines row() wrote, to wipe
        self._foreign = False         # someone else wrote a line to stderr meanwhile

    def __enter__(self):
        import threading
        import time

        if not self.on:
            return self
        self._err = sys.stderr
        if not self.tty:
            self._err.write(f"{self.what} ...\n")
            return self
        self._stop = threading.Event()
        self._start = start = time.monotonic()

        def tick():
            while not self._stop.wait(0.5):
                seconds = time.monotonic() - start
                if seconds >= self.after:
                    with self._lock:
                        self._err.write(f"\r\x1b[K{self.what} ({seconds:.0f} s)")
                        self._err.flush()
                        self._shown = True
            self._clear_timer()

        self._thread = threading.Thread(target=tick, daemon=True)
        self._thread.start()
        self._stdout = sys.stdout
        sys.stdout = _StopOnWrite(self._stdout, self._finish)
        sys.stderr = _AboveTimer(self._err, self)
        return self

    def _clear_timer(self) -> None:
        with self._lock:
            if self._shown:
                self._err.write("\r\x1b[K")
                self._err.flush()
                self._shown = False

    def step(self, what: str) -> None:
        """The next step's name (the timer keeps counting the whole command's seconds)."""
        if not self.on or what == self.what:
            return
        self.what = what
        if not self.tty:
            self._err.write(f"{what} ...\n")

    def row(self, text: str) -> None:
        """A line that stays (cut to the terminal's width: one line each, so it can be wiped)."""
        if not self.on:
            return
        with self._lock:
            if not self.tty:
                self._err.write(text + "\n")
                return
            if self._stop is None or self._stop.is_set():
                return                      # the report has started: it has the rows
            cols = shutil.get_terminal_size().columns
            self._err.write("\r\x1b[K" + text[:max(cols - 1, 1)] + "\n")
            self._err.flush()
            self._rows += 1
            self._shown = False

    def _wipe_rows(self) -> None:
        with self._lock:
            if not self._rows or self._foreign or not _same_terminal():
                return
            if self._rows >= shutil.get_terminal_size().lines:
                return                      # scrolled off the top: cannot be reached
            self._err.write(f"\x1b[{self._rows}F\x1b[J")
            self._err.flush()
            self._rows = 0

    def _finish(self) -> None:
        if self._stop is not None and not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._wipe_rows()

    def __exit__(self, *exc):
        self._finish()
        if self._stop is not None:
            sys.stdout = self._stdout
            sys.stderr = self._err
        return False


def _same_terminal() -> bool:
    """stdout and stderr are one terminal (the rows on stderr sit just above stdout's report)."""
    try:
        return (sys.__stdout__.isatty() and sys.__stderr__.isatty()
                and os.ttyname(sys.__stdout__.fileno()) == os.ttyname(sys.__stderr__.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


class _AboveTimer:
    """stderr while the timer runs: a note clears the timer's line first (it would be written
    after its text), and marks the rows above as no longer the last lines."""

    def __init__(self, stream, elapsed: Elapsed):
        self._stream, self._elapsed = stream, elapsed

    def write(self, text):
        with self._elapsed._lock:
            if text:
                self._elapsed._clear_timer()
            if "\n" in text:
                self._elapsed._foreign = True
            return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _StopOnWrite:
    """stdout that stops the elapsed-time line before the first thing it writes."""

    def __init__(self, stream, stop):
        self._stream, self._stop = stream, stop

    def write(self, text):
        self._stop()
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class live_rows:
    """While it is open, each dtype's verdict is a row on `elapsed` the moment it is decided
    (porter.harness.verdicts.listeners): `  hypot  float32  pass  12 samples  0.41 s`, its
    outcome coloured as the table's (never with NO_COLOR). Off unless `elapsed` is on: nothing
    when piped without -v, with -q, or when the command writes JSON (it does not open one)."""

    def __init__(self, elapsed: Elapsed):
        self.elapsed = elapsed

    def _row(self, result, d) -> None:
        kind = " (reference inputs)" if result.reference else " (shapes)" if result.shapes else ""
        samples = f"{d.samples} samples" if d.samples else ""
        outcome = paint(d.outcome.value.ljust(5), OUTCOME_STYLE.get(d.outcome.value), sys.stderr)
        self.elapsed.row(f"  {result.op}{kind}  {d.dtype.ljust(10)}  {outcome}  {samples}"
                         f"{'  ' if samples else ''}{d.seconds:.2f} s".rstrip())

    def __enter__(self):
        from porter.harness import verdicts

        if self.elapsed.on:
            verdicts.listeners.append(self._row)
        return self

    def __exit__(self, *exc):
        from porter.harness import verdicts

        if self._row in verdicts.listeners:
            verdicts.listeners.remove(self._row)
        return False


class Progress:
    """`[k/n] item` on stderr, rewritten in place on a terminal; off a terminal only with -v; never
    with -q. A context manager: the line is cleared at the end."""

    def __init__(self, total: int, what: str):
        self.total, self.what, self.k = total, what, 0
        stream = sys.stderr
        self.tty = bool(getattr(stream, "isatty", None) and stream.isatty())
        self.on = not quiet() and (self.tty or verbose())

    def __enter__(self):
        return self

    def step(self, item: str) -> None:
        self.k += 1
        if not self.on:
            return
        line = f"{self.what} [{self.k}/{self.total}] {item}"
        if self.tty:
            cols = shutil.get_terminal_size().columns
            sys.stderr.write("\r\x1b[K" + line[:cols - 1])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def __exit__(self, *exc):
        if self.on and self.tty:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
        return False
