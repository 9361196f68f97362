"""Which forward op's derivative formula calls a backward op, read from `derivatives.yaml`.

A backward op (`sigmoid_backward`) has no OpInfo of its own: upstream tests it through the
forward op whose formula calls it (`- name: sigmoid(Tensor self) -> Tensor` /
`self: sigmoid_backward(grad, result)`). The checkout's `tools/autograd/derivatives.yaml` is
read when it has one, else the copy torchgen packages (found without importing torch).
Like native_functions.yaml, the file is scanned as text: only one op's formulas are needed.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import NamedTuple

from porter.source import checkout as co
from porter.source import native_yaml
from porter.source.cpp_scan import matching_close, split_top_level

DERIVATIVES = "tools/autograd/derivatives.yaml"
NAME_RE = re.compile(r"^- name:\s*(?P<schema>.+?)\s*$", re.M)
# Formula keys that are not an input's gradient
NOT_INPUTS = {"result", "output_differentiability", "dispatch", "name"}


class Forward(NamedTuple):
    """The forward op of a backward op, and how its formula calls it."""

    op: str                   # "sigmoid" (the forward schema's base name)
    schema: str               # "sigmoid(Tensor self) -> Tensor"
    call_args: tuple[str, ...]  # the formula's arguments: ("grad", "result")
    path: str                 # where it was read: the checkout's file, or torchgen's copy
    line: int

    @property
    def forward_args(self) -> tuple[str, ...]:
        """The forward schema's argument names, in order (`self`, `eps`)."""
        args = native_yaml.arguments(self.schema)
        return tuple(native_yaml.argument_name(a) for a in args.positional + args.keyword)

    def default(self, name: str) -> str | None:
        """The forward schema's default for argument `name` (`'none'`, `1`), as written."""
        args = native_yaml.arguments(self.schema)
        for a in args.positional + args.keyword:
            if native_yaml.argument_name(a) == name and "=" in a:
                return a.split("=", 1)[1].strip()
        return None


def source(checkout: co.Checkout | None) -> tuple[str, str] | None:
    """(path shown to the user, text) of the derivatives.yaml in use, or None."""
    if checkout is not None and checkout.exists(DERIVATIVES):
        return DERIVATIVES, checkout.read(DERIVATIVES)
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        return None
    packaged = Path(next(iter(spec.submodule_search_locations))) / "packaged" / "autograd" / "derivatives.yaml"
    if not packaged.is_file():
        return None
    # shown as the wheel names it: the site-packages prefix says nothing to a reader
    return "torchgen/packaged/autograd/derivatives.yaml", packaged.read_text(encoding="utf-8")


def forward_of(checkout: co.Checkout | None, op: str) -> Forward | None:
    """The forward op whose formula for one of its inputs calls `op`.

    Where several do (threshold_backward: relu and threshold), the one named like the backward
    op (`threshold` for `threshold_backward`) wins, else the first in the file; entries of the
    backward op itself (its double backward) never count."""
    found = source(checkout)
    if found is None:
        return None
    path, text = found
    call = re.compile(rf"(?<![\w:]){re.escape(op)}\s*\(")
    matches: list[Forward] = []
    starts = [m for m in NAME_RE.finditer(text)]
    for k, m in enumerate(starts):
        schema = m["schema"]
        name = schema.split("(", 1)[0].split(".", 1)[0]
        if name == op:
            continue
        end = starts[k + 1].start() if k + 1 < len(starts) else len(text)
        block = text[m.end():end]
        for key, value in _formulas(block):
            if key in NOT_INPUTS:
                continue
            hit = call.search(value)
            if hit:
                close = matching_close(value, hit.end() - 1)
                if close < 0:
                    continue
                args = tuple(split_top_level(value[hit.end():close]))
                matches.append(Forward(name, schema, args, path, text.count("\n", 0, m.start()) + 1))
                break
    if not matches:
        return None
    stem = op.removesuffix("_backward")
    return next((f for f in matches if f.op == stem), matches[0])


def _formulas(block: str) -> list[tuple[str, str]]:
    """(key, formula) of an entry's `  key: value` lines; quoted values may span lines."""
    out: list[tuple[str, str]] = []
    for line in block.splitlines():
        m = re.match(r"^  (?P<key>[\w, ]+):\s*(?P<value>.*)$", line)
        if m:
            out.append((m["key"].strip(), m["value"]))
        elif out and line.startswith("   "):
            key, value = out[-1]
            out[-1] = (key, value + " " + line.strip())
    return [(k, v.strip().strip('"')) for k, v in out]


def calls_of(checkout: co.Checkout | None, op: str) -> list[str]:
    """The functions the formulas of forward op `op` call first (`sigmoid` ->
    `sigmoid_backward`), for each of its inputs, in order and without duplicates."""
    found = source(checkout)
    if found is None:
        return []
    _, text = found
    names: list[str] = []
    for m in NAME_RE.finditer(text):
        if m["schema"].split("(", 1)[0].split(".", 1)[0] != op:
            continue
        end = text.find("\n- name:", m.end())
        for key, value in _formulas(text[m.end():end if end > 0 else len(text)]):
            if key in NOT_INPUTS:
                continue
            for call in re.finditer(r"(?<![\w:])([A-Za-z_]\w*)\s*\(", value):
                names.append(call.group(1))
    return list(dict.fromkeys(names))
