"""Read `native_functions.yaml` as text: the `- func:` entries of one op and their dispatch rows.

A full YAML load of the 600 KB file costs 0.15 s even with libyaml; porter only needs the
entries of one op family, so it scans lines and keeps line numbers for every message.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import NamedTuple

from porter.source.cpp_scan import LineNumbers

FUNC_RE = re.compile(r"^- func:\s*(?P<name>[A-Za-z0-9_]+)(?:\.(?P<overload>[A-Za-z0-9_]+))?\s*\(")
DISPATCH_LINE_RE = re.compile(r"^(?P<indent>\s{4,})(?P<keys>[A-Za-z0-9_]+(?:\s*,\s*[A-Za-z0-9_]+)*)\s*:\s*(?P<kernel>[A-Za-z0-9_:]+)\s*(?P<comment>#.*)?$")
FIELD_RE = re.compile(r"^  (?P<key>[a-z_]+):\s*(?P<value>.*?)\s*(#.*)?$")

# How a backward op names its out overload (`sigmoid_backward.grad_input`).
BACKWARD_OUT_OVERLOADS = ("grad_input", "grad_output")

# The dense backends whose kernels MPS shares when an op is ported natively.
DENSE_BACKENDS = ("CPU", "CUDA")


class DispatchLine(NamedTuple):
    lineno: int               # 1-based line in the file
    keys: tuple[str, ...]
    kernel: str
    text: str

    @property
    def is_dense_backend(self) -> bool:
        return any(k in DENSE_BACKENDS for k in self.keys)


class Entry:
    """One `- func:` item: lines [start, end) of the file (0-based indices)."""

    def __init__(self, name: str, overload: str, start: int, end: int, lines: tuple[str, ...]):
        self.name = name              # "heaviside" or "xlogy_"
        self.overload = overload      # "" or "out", "OutTensor"
        self.start = start
        self.end = end
        self.lines = lines

    def _key(self) -> tuple:
        return self.name, self.overload, self.start, self.end, self.lines

    def __eq__(self, other) -> bool:
        return isinstance(other, Entry) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Entry({self.full_name!r}, line {self.lineno})"

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name

    @property
    def lineno(self) -> int:
        return self.start + 1

    @property
    def schema(self) -> str:
        return self.lines[0].split("func:", 1)[1].strip()

    @cached_property
    def fields(self) -> dict[str, str]:
        out = {}
        for text in self.lines[1:]:
            m = FIELD_RE.match(text)
            if m:
                out[m["key"]] = m["value"]
        return out

    @cached_property
    def dispatch(self) -> tuple[DispatchLine, ...]:
        rows, inside = [], False
        for i, text in enumerate(self.lines):
            if text.startswith("  dispatch:"):
                inside = True
                continue
            if inside:
                m = DISPATCH_LINE_RE.match(text.rstrip("\r\n"))
                if m:
                    keys = tuple(k.strip() for k in m["keys"].split(","))
                    rows.append(DispatchLine(self.start + i + 1, keys, m["kernel"], text))
                elif text.strip() and not text.lstrip().startswith("#"):
                    inside = False
        return tuple(rows)

    @property
    def is_out(self) -> bool:
        return "Tensor(a!) out" in self.schema or self.overload.startswith("out")

    @property
    def is_backward(self) -> bool:
        """A backward op's entry (`sigmoid_backward.grad_input`, `gelu_backward`)."""
        return self.name.endswith("_backward") or self.overload in BACKWARD_OUT_OVERLOADS

    @property
    def structured_delegate(self) -> str | None:
        return self.fields.get("structured_delegate")

    def mps_rows(self) -> list[DispatchLine]:
        return [d for d in self.dispatch if "MPS" in d.keys]

    def dense_rows(self) -> list[DispatchLine]:
        return [d for d in self.dispatch if d.is_dense_backend]


TENSOR_TYPE_RE = re.compile(r"Tensor(?:\([^)]*\))?")      # Tensor, Tensor(a!), Tensor(a -> *)


class Arguments(NamedTuple):
    """The arguments of a `func:` schema, each as written (`Tensor self`, `int[1]? dim`)."""

    positional: tuple[str, ...]
    keyword: tuple[str, ...]        # after `*`, outputs excluded
    outputs: tuple[str, ...]        # `Tensor(a!) out`

    @property
    def tensors(self) -> tuple[str, ...]:
        """Positional tensors (`Tensor self`, `Tensor(a!) self`): an elementwise op's inputs."""
        return tuple(a for a in self.positional if TENSOR_TYPE_RE.fullmatch(argument_type(a)))

    @property
    def others(self) -> tuple[str, ...]:
        """Every input but the positional tensors (dims, scalars, options)."""
        tensors = self.tensors          # once: a property, recomputed on every access
        return tuple(a for a in self.positional + self.keyword if a not in tensors)


def argument_type(arg: str) -> str:
    """`int[2] stride=[1, 1]` -> `int[2]`; `Tensor(a -> *) self` -> `Tensor(a -> *)`."""
    declaration = arg.split("=", 1)[0].strip()      # types and names never hold `=`
    return declaration.rsplit(None, 1)[0] if " " in declaration else declaration


def argument_name(arg: str) -> str:
    """`Scalar alpha=1` -> `alpha`."""
    return arg.split("=", 1)[0].split()[-1]


SCHEMA_PUNCTUATION_RE = re.compile(r"[()\[\],]")


def arguments(schema: str) -> Arguments:
    """Split `name.overload(ARGS) -> RET` into its arguments (as torchgen's FunctionSchema)."""
    parts, depth, start = [], 0, schema.index("(") + 1
    for m in SCHEMA_PUNCTUATION_RE.finditer(schema, start - 1):     # hop, not every character
        ch, k = m.group(), m.start()
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                parts.append(schema[start:k])
                break
        elif depth == 1:
            parts.append(schema[start:k])
            start = k + 1
    positional, keyword, outputs, after_star = [], [], [], False
    for arg in (p.strip() for p in parts):
        if not arg:
            continue            # `f()`: no arguments
        if arg == "*":
            after_star = True
        elif after_star and "!" in argument_type(arg):
            outputs.append(arg)
        else:
            (keyword if after_star else positional).append(arg)
    return Arguments(tuple(positional), tuple(keyword), tuple(outputs))


def scan(text: str) -> list[Entry]:
    """Every `- func:` entry of the file, in order."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("- func:")]
    entries = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        # Blank and comment lines before the next entry belong to the gap, not to this entry.
        while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
            end -= 1
        m = FUNC_RE.match(lines[start])
        if not m:
            continue
        entries.append(Entry(m["name"], m["overload"] or "", start, end, tuple(lines[start:end])))
    return entries


def entries_named(text: str, names: set[str]) -> list[Entry]:
    """The entries whose base name is in `names`, found without splitting the whole file."""
    # A literal "\n" prefix, not `^` under re.M: re then skips ahead by the literal (8x faster
    # on the 600 KB file). The padding "\n" makes match offsets those of "- func:" in `text`.
    pattern = re.compile(r"\n- func:\s*(?:%s)[.(]" % "|".join(re.escape(n) for n in sorted(names)))
    found = []
    lines = LineNumbers(text)
    for m in pattern.finditer("\n" + text):
        start = m.start()
        end = text.find("\n- func:", start)
        end = len(text) if end < 0 else end + 1
        first_line = lines.of(start) - 1        # entry offsets are 0-based lines
        for entry in scan(text[start:end]):
            found.append(Entry(entry.name, entry.overload, entry.start + first_line,
                               entry.end + first_line, entry.lines))
            break
    return found


def family(entries: list[Entry], op: str) -> list[Entry]:
    """The entries of `op`: its functional, in-place (`op_`) and overload rows."""
    return [e for e in entries if e.name in (op, op + "_")]


def op_names(entries: list[Entry]) -> set[str]:
    return {e.name.rstrip("_") if e.name.endswith("_") and not e.name.startswith("_") else e.name
            for e in entries}
