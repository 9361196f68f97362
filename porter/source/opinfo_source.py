"""OpInfo definitions found in the checkout's test sources, without importing them.

`common_methods_invocations.py` is 1.3 MB; importing it costs seconds and a LibCST parse
seven. porter finds each `...Info("name", ...)` call by a regex, takes the call's span by
tokenizing from its first line only until the parentheses close, and parses that slice
alone with `ast`.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import LineNumbers
from porter.source.dtypes import MPS_DTYPES, evaluate_dtypes

# The head of an Info call whose first argument starts at the end of the matched window.
CALL_HEAD_RE = re.compile(r"[^\w](?P<cls>[A-Z]\w*Info)\(\s*$")
# Info classes whose first argument is not the op's name (`ForeachFuncInfo("sign")` is _foreach_sign).
NOT_OPS = {"ForeachFuncInfo", "ForeachRightmostArgTypeInfo", "ForeachSampleInput"}


class OpInfoSource(NamedTuple):
    """One OpInfo (or python-ref info) call in a source file."""

    cls: str                  # "BinaryUfuncInfo", "ElementwiseBinaryPythonRefInfo", ...
    name: str                 # "heaviside", "special.log_ndtr", "_refs.heaviside"
    path: str                 # relative to the checkout
    start: int                # offset of the class name
    end: int                  # offset just past the closing parenthesis
    line: int
    kwargs: dict              # keyword name -> ast node
    node: ast.Call

    @property
    def variant_test_name(self) -> str:
        node = self.kwargs.get("variant_test_name")
        return node.value if isinstance(node, ast.Constant) else ""

    @property
    def aten_name(self) -> str:
        node = self.kwargs.get("aten_name")
        if isinstance(node, ast.Constant):
            return node.value
        return self.name.replace(".", "_")

    @property
    def torch_opinfo_name(self) -> str | None:
        node = self.kwargs.get("torch_opinfo_name")
        return node.value if isinstance(node, ast.Constant) else None

    @property
    def is_ref(self) -> bool:
        return self.name.startswith("_refs.") or self.torch_opinfo_name is not None

    @property
    def xfail_key(self) -> str:
        """Key spelling of common_mps.py: name + variant_test_name, no separator."""
        return self.name + self.variant_test_name

    def flag(self, name: str) -> bool:
        node = self.kwargs.get(name)
        return isinstance(node, ast.Constant) and node.value is True

    def dtypes(self, key: str) -> frozenset[str] | None:
        """Dtype names of `dtypes`/`dtypesIfMPS`, or None when absent or not statically known."""
        node = self.kwargs.get(key)
        return None if node is None else evaluate_dtypes(node)


def mps_dtypes(opinfos) -> frozenset[str]:
    """The MPS dtypes an op's OpInfos test: `dtypesIfMPS`, else `dtypes` (never double)."""
    dtypes: set[str] = set()
    for o in opinfos:
        found = o.dtypes("dtypesIfMPS") or o.dtypes("dtypes")
        if found:
            dtypes |= found
    return frozenset(d for d in dtypes if d in MPS_DTYPES)


PY_LEXEME_RE = re.compile(r"#[^\n]*|[rRbBfFuU]{0,2}(\'\'\'|\"\"\"|\'|\")|[()\[\]{}]")


def call_span(text: str, start: int) -> int:
    """Offset just past the `)` closing the call whose name starts at `start`, or -1.

    Scans only the call itself, skipping brackets inside strings and comments.
    """
    open_at = text.find("(", start)
    depth, pos = 0, open_at
    while open_at >= 0:
        m = PY_LEXEME_RE.search(text, pos)
        if not m:
            return -1
        token = m.group()
        if token[0] == "#":
            pos = m.end()
        elif m.group(1):
            pos = _string_end(text, m.end(), m.group(1))
            if pos < 0:
                return -1
        else:
            depth += 1 if token in "([{" else -1
            pos = m.end()
            if depth == 0:
                return pos
    return -1


def _string_end(text: str, pos: int, quote: str) -> int:
    while True:
        k = text.find(quote, pos)
        if k < 0 or (len(quote) == 1 and "\n" in text[pos:k]):
            return -1
        backslashes = len(text[pos:k]) - len(text[pos:k].rstrip("\\"))
        if backslashes % 2 == 0:
            return k + len(quote)
        pos = k + 1


def parse_call(text: str, start: int, end: int) -> ast.Call | None:
    snippet = text[start:end]
    try:
        tree = ast.parse("(" + snippet + "\n)", mode="eval")
    except SyntaxError:
        return None
    return tree.body if isinstance(tree.body, ast.Call) else None


def find(checkout: co.Checkout, names: set[str]) -> list[OpInfoSource]:
    """Every Info call in the OpInfo sources whose first argument is one of `names`."""
    found = []
    for rel in co.opinfo_files(checkout):
        text = checkout.read(rel)
        lines = LineNumbers(text)
        for start in sorted(_quoted_occurrences(text, names)):
            window = text[max(0, start - 80):start]
            m = CALL_HEAD_RE.search(window)
            if not m or m["cls"] in NOT_OPS:
                continue
            begin = start - len(window) + m.start("cls")
            end = call_span(text, begin)
            if end < 0:
                continue
            node = parse_call(text, begin, end)
            if node is None or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            kwargs = {k.arg: k.value for k in node.keywords if k.arg}
            found.append(OpInfoSource(m["cls"], node.args[0].value, rel, begin, end, lines.of(begin),
                                      kwargs, node))
    return found


def _quoted_occurrences(text: str, names: set[str]):
    """Offsets of each name in quotes (of the opening quote).

    The names of one op share their last dotted part (`sign`, `_refs.sign`,
    `nn.functional.sign`): one scan per such tail and quote finds them all, where a scan per
    name and quote read the 1.3 MB op database eight times."""
    tails = {name.rsplit(".", 1)[-1] for name in names}
    tails = {t for t in tails if not any(o != t and t.endswith(o) for o in tails)}
    for tail in tails:
        for quote in "\"'":
            needle = tail + quote
            pos = text.find(needle)
            while pos >= 0:
                end = pos + len(needle)
                for name in names:
                    begin = end - len(name) - 2
                    if begin >= 0 and text.startswith(quote + name + quote, begin):
                        yield begin
                pos = text.find(needle, pos + 1)


def for_op(checkout: co.Checkout, op: str) -> tuple[list[OpInfoSource], list[OpInfoSource]]:
    """The OpInfos of aten op `op` and their python-ref twins: (opinfos, refs)."""
    names = {op, f"nn.functional.{op}"}
    if "_" in op:
        prefix, rest = op.split("_", 1)
        names.add(f"{prefix}.{rest}")        # special_log_ndtr -> special.log_ndtr
    names |= {f"_refs.{n}" for n in names}
    candidates = find(checkout, names)
    opinfos = [c for c in candidates if not c.is_ref and
               op in (c.aten_name, c.name.replace(".", "_"), c.name.rsplit(".", 1)[-1])]
    infos = {o.name for o in opinfos}
    refs = [c for c in candidates
            if c.is_ref and (c.torch_opinfo_name or c.name[len("_refs."):]) in infos]
    return opinfos, refs


def aten_op(checkout: co.Checkout, name: str) -> str | None:
    """The aten op an OpInfo spelling names (nn.functional.mish -> mish, special.log_ndtr ->
    special_log_ndtr, round.decimals_0 -> round), or None when no OpInfo is spelled so
    (add.Tensor is a yaml overload, not an OpInfo)."""
    if "." not in name or name.startswith("_refs."):
        return None
    infos = [i for i in find(checkout, {name}) if not i.is_ref]
    base, _, variant = name.rpartition(".")
    if not infos:
        infos = [i for i in find(checkout, {base}) if not i.is_ref and i.variant_test_name == variant]
    if not infos:
        return None
    info = infos[0]
    given = info.kwargs.get("aten_name")
    if isinstance(given, ast.Constant) and isinstance(given.value, str):
        return given.value
    if info.name.startswith("nn.functional."):
        return info.name[len("nn.functional."):]
    return info.name.replace(".", "_")

