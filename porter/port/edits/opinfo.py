"""Remove the MPS `expectedFailure` DecorateInfos of an OpInfo, with their "not implemented" comments.

Only the OpInfo's own call span is touched: its DecorateInfo nodes come from an `ast` parse of
that slice, and each is cut out together with its trailing comma and, when it owned its
lines, the lines themselves.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

from porter.source.ast_offsets import AstOffsets
from porter.source.opinfo_source import OpInfoSource, parse_call

TRAILING_COMMA_RE = re.compile(r"[ \t]*,?[ \t]*")
NOT_IMPLEMENTED_RE = re.compile(r"not (currently |yet )?implemented\b[^\n]*\bMPS\b|\bMPS\b[^\n]*\bnot (currently |yet )?implemented", re.I)


class MpsDecorator(NamedTuple):
    start: int          # offsets in the file
    end: int
    line: int
    expected_failure: bool
    text: str
    test_class: str = ""      # 'TestCommon'
    test_name: str = ""       # 'test_out', or "" for every test of the class
    dtypes: tuple[str, ...] = ()
    opinfo: str = ""          # the OpInfo's test-name spelling: '_refs_nn_functional_mish'


# Where upstream's OpInfo-based test classes live (test/<file>): the command that checks a
# decorator on a Mac runs that file.
TEST_FILES = {
    "TestCommon": "test_ops.py", "TestCompositeCompliance": "test_ops.py",
    "TestMathBits": "test_ops.py", "TestTags": "test_ops.py", "TestFakeTensor": "test_ops.py",
    "TestRefsOpsInfo": "test_ops.py", "TestForwardADWithScalars": "test_ops.py",
    "TestUnaryUfuncs": "test_unary_ufuncs.py", "TestBinaryUfuncs": "test_binary_ufuncs.py",
    "TestConsistency": "test_mps.py", "TestGradients": "test_ops_gradients.py",
    "TestFwdGradients": "test_ops_fwd_gradients.py", "TestBwdGradients": "test_ops_gradients.py",
    "TestJit": "test_ops_jit.py", "TestDecomp": "test_decomp.py", "TestMeta": "test_meta.py",
    "TestReductions": "test_reductions.py", "TestSchemaCheckModeOpInfo": "test_schema_check.py",
    "TestProxyTensorOpInfo": "test_proxy_tensor.py", "TestNNCOpInfo": "test_jit_fuser_te.py",
    "TestSparseUnaryUfuncs": "test_sparse.py", "TestShapeFuncs": "test_shape_ops.py",
}


def mac_command(deco: MpsDecorator) -> str:
    """The command that runs the decorated test on a Mac (device-type tests end in `_mps`)."""
    file = TEST_FILES.get(deco.test_class, "test_ops.py")
    name = f"{deco.test_name}_{deco.opinfo}_mps" if deco.test_name else f"{deco.opinfo}_mps"
    if len(deco.dtypes) == 1:
        name += f"_{deco.dtypes[0]}"
    if deco.test_class == "TestConsistency":        # instantiated for the CPU device upstream
        name = name.removesuffix("_mps").replace("_mps_", "_cpu_") if deco.test_name else name
    return f"python test/{file} -k {name}"


def mps_decorators(text: str, source: OpInfoSource, every: bool = False) -> list[MpsDecorator]:
    """The MPS DecorateInfos of an OpInfo call; `every`: those of any device too."""
    node = parse_call(text, source.start, source.end)
    if node is None:
        return []
    snippet = text[source.start:source.end]
    offsets = AstOffsets("(" + snippet + "\n)")        # the text parse_call parsed
    found = []
    opinfo = (source.name + ("_" + source.variant_test_name if source.variant_test_name else "")
              ).replace(".", "_")
    for call in ast.walk(node):
        if not (isinstance(call, ast.Call) and _name(call.func) == "DecorateInfo"):
            continue
        device = next((k.value for k in call.keywords if k.arg == "device_type"), None)
        if not every and not (isinstance(device, ast.Constant) and device.value == "mps"):
            continue
        # minus the "(" that parse_call put in front of the slice
        start = source.start + offsets.at(call.lineno, call.col_offset) - 1
        end = source.start + offsets.at(call.end_lineno, call.end_col_offset) - 1
        decorator = call.args[0] if call.args else None
        xfail = decorator is not None and _name(decorator) == "expectedFailure"
        line = source.line + snippet.count("\n", 0, start - source.start)
        names = [a.value for a in call.args[1:3] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        dtypes_node = next((k.value for k in call.keywords if k.arg == "dtypes"), None)
        dtypes = tuple(_name(e) for e in getattr(dtypes_node, "elts", ()) if _name(e))
        found.append(MpsDecorator(start, end, line, xfail, text[start:end],
                                  names[0] if names else "", names[1] if len(names) > 1 else "",
                                  dtypes, opinfo))
    return sorted(found)


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def remove_expected_failures(text: str, sources: list[OpInfoSource]) -> tuple[str, list[MpsDecorator]]:
    """(new text, MPS decorators left in place, reported).

    Only the MPS decorators that say the op is not implemented on MPS go: their own text (a
    skip reason) or the comment block that explains them says so. Every other one (a wrong
    result, a missing warning) describes behaviour a port does not change: it stays. A comment
    block goes only with every decorator it explains; a `skips=(...)`/`decorators=[...]`
    emptied by the cuts goes too."""
    kept: list[MpsDecorator] = []
    edits: list[tuple[int, int, str]] = []       # (start, end, new text) of each edited call
    for source in sources:
        every = mps_decorators(text, source, every=True)
        mps = mps_decorators(text, source)
        blocks = {d.start: _comment_block(text, d, every) for d in mps}
        doomed = [d for d in mps if (d.expected_failure or _says_skip(d))
                  and (NOT_IMPLEMENTED_RE.search(d.text) or says_not_implemented(blocks[d.start][2]))]
        kept += [d for d in mps if d not in doomed]
        if not doomed:
            continue
        explained: dict[tuple[int, int], list[MpsDecorator]] = {}
        for d in every:
            block = _comment_block(text, d, every)
            if block[0] < block[1]:
                explained.setdefault(block[:2], []).append(d)
        cuts = []
        for deco in doomed:
            block = blocks[deco.start]
            if block[0] < block[1] and all(d in doomed for d in explained.get(block[:2], [])):
                cuts.append((block[0], block[1]))
            cuts.append(_cut_span(text, deco))
        # the call's own lines (cuts may take whole lines that start before the class name)
        lo = min([source.start] + [c[0] for c in cuts])
        hi = max([source.end] + [c[1] for c in cuts])
        pieces, pos = [], lo
        for start, end in sorted(set(cuts)):
            start = max(start, pos)
            pieces.append(text[pos:start])
            pos = max(pos, end)
        pieces.append(text[pos:hi])
        edits.append((lo, hi, EMPTY_CONTAINER_RE.sub("", "".join(pieces))))
    out, pos = [], 0
    for lo, hi, new in sorted(edits):
        out.append(text[pos:lo])
        out.append(new)
        pos = hi
    out.append(text[pos:])
    return "".join(out), kept


EMPTY_CONTAINER_RE = re.compile(r"^[ \t]*(?:skips|decorators)[ \t]*=[ \t]*(?:\([ \t\n]*\)|\[[ \t\n]*\]),?[ \t]*\n",
                                re.M)


def says_not_implemented(comment: str) -> bool:
    """A comment block (its sentence may wrap onto the next `#` line) saying MPS lacks the op."""
    return bool(NOT_IMPLEMENTED_RE.search(re.sub(r"\s*\n\s*#\s*", " ", comment)))


def _says_skip(deco: MpsDecorator) -> bool:
    return "skip" in deco.text.split(",", 1)[0].lower()


def _comment_block(text: str, deco: MpsDecorator, every: list[MpsDecorator]) -> tuple[int, int, str]:
    """(start, end, text) of the `#` lines that explain `deco`: the comment block right above
    it, or above the run of decorators it continues (one comment often explains several)."""
    starts = {text.rfind("\n", 0, d.start) + 1: d for d in every}
    pos = text.rfind("\n", 0, deco.start) + 1
    while True:
        prev_end = pos
        prev_start = text.rfind("\n", 0, max(prev_end - 1, 0)) + 1
        if prev_start >= prev_end:
            return pos, pos, ""
        line = text[prev_start:prev_end]
        if line.strip().startswith("#"):
            break
        # the line ends a decorator of the same run: go above that decorator
        above = next((d for s, d in starts.items() if d.end <= prev_end and d.end >= prev_start
                      and s < prev_end), None)
        if above is None or text[above.end:prev_end].strip(" \t,\n"):
            return pos, pos, ""
        pos = text.rfind("\n", 0, above.start) + 1
    end = prev_end
    start = prev_start
    while True:
        before = text.rfind("\n", 0, max(start - 1, 0)) + 1
        if before >= start or not text[before:start].strip().startswith("#"):
            break
        start = before
    return start, end, text[start:end]


def _cut_span(text: str, deco: MpsDecorator) -> tuple[int, int]:
    start, end = deco.start, deco.end
    end = TRAILING_COMMA_RE.match(text, end).end()
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end + 1
    if text[line_start:start].strip() or text[end:line_end].strip():
        return start, end        # shares its line: cut the call and its comma only
    return line_start, line_end
