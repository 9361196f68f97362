"""The expectation dicts of `common_mps.py`, read statically.

The dicts exist only when MPS is available at import time, so on Linux the file is parsed,
never imported. Each dict is scoped to the function that defines it (`ON_MPS_XFAILLIST` is
defined twice: once for output tests, once for gradients).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import NamedTuple

from porter.errors import PorterError

UNIMPLEMENTED = ("UNIMPLEMENTED_XFAILLIST", "UNIMPLEMENTED_XFAILLIST_SPARSE")
COMPLEX_SUPPORTED = "SUPPORTED_COMPLEX_OPS"     # its ops' MPS tests send complex64


class XfailEntry(NamedTuple):
    function: str          # "mps_ops_modifier"
    dict_name: str         # "UNIMPLEMENTED_XFAILLIST"
    key: str
    dtypes: tuple[str, ...] | None     # None: every dtype
    line: int              # first line of the key (1-based)
    end_line: int          # last line of the value
    key_col: int
    value_end_col: int
    in_set: bool = False   # an element of a set literal, not a dict key


@lru_cache(maxsize=4)
def parse(text: str, path: str) -> ast.Module:
    """The module's tree, parsed once per text: a port reads common_mps.py's lists twice
    (complex ops, then the entries to remove). Callers must not change the tree."""
    try:
        return ast.parse(text)
    except SyntaxError as err:
        raise PorterError(f"does not parse as Python: {err.msg}", path=path, line=err.lineno,
                          hint="fix the syntax error first") from None


def entries(text: str, path: str, tree: ast.Module | None = None,
            sets: bool = False) -> list[XfailEntry]:
    """Dict entries of the expectation lists; with `sets`, also the elements of set literals
    (SUPPORTED_COMPLEX_OPS, the error-input XFAILLIST), as entries for every dtype."""
    tree = tree or parse(text, path)
    found: list[XfailEntry] = []
    _collect(tree.body, "", found, sets)
    return found


def complex_supported(found: list[XfailEntry]) -> set[str]:
    """Keys in SUPPORTED_COMPLEX_OPS (of `entries(..., sets=True)`)."""
    return {e.key for e in found if e.dict_name == COMPLEX_SUPPORTED}


def _collect(body: list[ast.stmt], function: str, found: list[XfailEntry], sets: bool) -> None:
    """Assignments in statements, scoped to the enclosing function; expressions are not walked."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _collect(node.body, node.name, found, sets)
            continue
        target, value = assignment(node)
        if target is not None and isinstance(value, ast.Dict) and function:
            for k, v in zip(value.keys, value.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    found.append(XfailEntry(function, target, k.value, _dtypes(v), k.lineno,
                                            v.end_lineno, k.col_offset, v.end_col_offset))
        if sets and target is not None and isinstance(value, ast.Set) and function:
            for elt in value.elts:
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                    found.append(XfailEntry(function, target, elt.value, None, elt.lineno,
                                            elt.end_lineno, elt.col_offset, elt.end_col_offset,
                                            in_set=True))
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                _collect(inner, function, found, sets)


def assignment(node) -> tuple[str | None, ast.AST | None]:
    """(name, value) of `NAME = value` or `NAME: T = value`; (None, None) otherwise."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id, node.value
    return None, None


def _dtypes(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return tuple(_dtype_name(e) for e in node.elts)
    return (ast.unparse(node),)


def _dtype_name(node: ast.AST) -> str:
    # `torch.float16` is nearly every element: read it off the node (ast.unparse costs ~40 us)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr
    return ast.unparse(node).replace("torch.", "")


def remove_keys(text: str, found: list[XfailEntry]) -> str:
    """Delete each entry's lines (key through value); entries must own their lines."""
    lines = text.splitlines(keepends=True)
    for entry in sorted(found, key=lambda e: e.line, reverse=True):
        first, last = entry.line - 1, entry.end_line - 1
        if lines[first][:entry.key_col].strip():
            continue        # shares its line with another entry: leave it, reported by the caller
        rest = lines[last][entry.value_end_col:].strip()
        if rest not in ("", ",") and not rest.startswith(("#", ",#", ", #")):
            continue
        del lines[first:last + 1]
    return "".join(lines)
