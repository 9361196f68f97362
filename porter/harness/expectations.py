"""MPS expectations (xfail / skip lists) read statically from `common_mps.py`.

The dicts in `common_mps.py` only exist when MPS is available (they sit under
`if torch.backends.mps.is_available():`), so on Linux they can never be imported: they are
parsed with `ast`, scoped to the body of `mps_ops_modifier` (the grad and error-input lists
live in sibling functions and reuse names such as `ON_MPS_XFAILLIST`). Older checkouts keep
the same function in `test/test_mps.py`; that file is the fallback.

Torch-free on purpose: dtypes are kept as names (`"float16"`), so that parsing and pruning
work (and are tested) without importing torch.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from porter.source.ast_offsets import AstOffsets
from porter.source.checkout import COMMON_MPS, TEST_MPS, Checkout
from porter.errors import PorterError
from porter.source.xfail_lists import assignment

MODIFIER = "mps_ops_modifier"
GRAD_MODIFIER = "mps_ops_grad_modifier"       # test_output_grad_match's lists

XFAIL, SKIP, XFAIL_OLD_MACOS = "xfail", "skip", "xfail-old-macos"

_MACOS_BEFORE = re.compile(r"MACOS_BEFORE_(\d+)_(\d+)")
# dtype attribute aliases as written in upstream lists -> canonical torch dtype names
DTYPE_ALIASES = {
    "half": "float16", "float": "float32", "double": "float64", "cfloat": "complex64",
    "cdouble": "complex128", "chalf": "complex32", "long": "int64", "int": "int32",
    "short": "int16", "bfloat16": "bfloat16",
}


def canonical_dtype(name: str) -> str:
    return DTYPE_ALIASES.get(name, name)


@dataclass(frozen=True)
class Entry:
    """One `"key": value` item of an expectation dict, with its place in the source."""

    dict_name: str
    kind: str                      # XFAIL, SKIP or XFAIL_OLD_MACOS
    key: str                       # op.name + op.variant_test_name
    dtypes: tuple[str, ...] | None  # None: every dtype
    line: int                      # 1-based line of the key
    # character offsets into the file text (for surgical edits)
    key_start: int
    value_start: int
    value_end: int
    macos_before: tuple[int, int] | None = None

    def covers(self, dtype: str) -> bool:
        return self.dtypes is None or dtype in self.dtypes

    @property
    def where(self) -> str:
        return f"{self.dict_name}[{self.key!r}]"


@dataclass
class Expectations:
    path: str | None                                  # relative path of the parsed file
    entries: list[Entry] = field(default_factory=list)
    complex_supported: frozenset[str] | None = None   # None: no SUPPORTED_COMPLEX_OPS found
    text: str = ""

    def for_key(self, key: str) -> list[Entry]:
        return [e for e in self.entries if e.key == key]

    def keys(self) -> list[str]:
        """Keys with an xfail or skip entry, sorted (the audit's op list)."""
        return sorted({e.key for e in self.entries})

    def active(self, key: str, dtype: str, *, macos: tuple[int, int] | None = None) -> list[Entry]:
        """Entries that apply to (key, dtype). MACOS_BEFORE_X_Y entries apply only when the
        macOS version is known and older than X.Y (never on emulate or CUDA)."""
        out = []
        for e in self.for_key(key):
            if not e.covers(dtype):
                continue
            if e.kind == XFAIL_OLD_MACOS and (macos is None or macos >= e.macos_before):
                continue
            out.append(e)
        return out

    def complex_xfail(self, key: str, dtype: str) -> bool:
        return (self.complex_supported is not None and dtype in ("complex64", "complex32")
                and key not in self.complex_supported)


def load(checkout: Checkout) -> Expectations:
    """Expectations of the checkout; empty when it has neither file."""
    for rel in (COMMON_MPS, TEST_MPS):
        if checkout.exists(rel):
            exp = parse(checkout.read(rel), rel)
            if exp is not None:
                return exp
    return Expectations(path=None)


def load_grad(checkout: Checkout) -> Expectations:
    """The expectations of upstream's test_output_grad_match (`mps_ops_grad_modifier`)."""
    for rel in (COMMON_MPS, TEST_MPS):
        if checkout.exists(rel):
            exp = parse(checkout.read(rel), rel, GRAD_MODIFIER)
            if exp is not None:
                return exp
    return Expectations(path=None)


def parse(text: str, rel: str = COMMON_MPS, modifier: str = None) -> Expectations | None:
    """Parse the expectation dicts of `mps_ops_modifier` (or `modifier`) in `text`; None if
    it has none."""
    modifier = modifier or MODIFIER
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        raise PorterError(f"cannot parse: {err.msg}", path=rel, line=err.lineno) from None
    func = _find_modifier(tree, modifier)
    if func is None:
        return None
    offsets = AstOffsets(text)
    exp = Expectations(path=rel, text=text)
    complex_ops: set[str] | None = None
    for stmt in func.body:
        target, value = _assignment(stmt)
        if target is None:
            continue
        if isinstance(value, ast.Set) and target.endswith("SUPPORTED_COMPLEX_OPS"):
            # AFTER_MACOS_14_0_SUPPORTED_COMPLEX_OPS (older trees) is unioned upstream too
            complex_ops = (complex_ops or set()) | {
                e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            continue
        kind = _kind(target, grad=modifier == GRAD_MODIFIER)
        if kind is None or not isinstance(value, ast.Dict):
            continue
        macos = _MACOS_BEFORE.search(target)
        for k, v in zip(value.keys, value.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                continue
            exp.entries.append(Entry(
                dict_name=target, kind=kind, key=k.value, dtypes=_dtypes(v, rel),
                line=k.lineno, key_start=offsets.at(k.lineno, k.col_offset),
                value_start=offsets.at(v.lineno, v.col_offset),
                value_end=offsets.at(v.end_lineno, v.end_col_offset),
                macos_before=(int(macos.group(1)), int(macos.group(2))) if macos else None))
    exp.complex_supported = frozenset(complex_ops) if complex_ops is not None else None
    return exp


def _find_modifier(tree: ast.Module, name: str = MODIFIER) -> ast.FunctionDef | None:
    """The first `mps_ops_modifier` that defines dicts (the `else:` stub defines none)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            if any(_assignment(s)[0] for s in node.body):
                return node
    return None


def _assignment(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    name, value = assignment(stmt)
    if not isinstance(value, (ast.Dict, ast.Set)):
        return None, None
    return name, value


def _kind(name: str, grad: bool = False) -> str | None:
    if "SPARSE" in name or ("GRAD" in name and not grad):
        return None   # sparse / grad tests, not test_output_match
    if grad:          # mps_ops_grad_modifier: XFAILLIST_GRAD, SKIPLIST_GRAD, ON_MPS_XFAILLIST
        name = name.removesuffix("_GRAD")
    if name.endswith("SKIPLIST"):
        return SKIP
    if name.endswith("XFAILLIST"):
        return XFAIL_OLD_MACOS if _MACOS_BEFORE.search(name) else XFAIL
    return None


def _dtypes(node: ast.expr, rel: str) -> tuple[str, ...] | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        names = []
        for elt in node.elts:
            if isinstance(elt, ast.Attribute) and isinstance(elt.value, ast.Name) and elt.value.id == "torch":
                names.append(canonical_dtype(elt.attr))
            else:
                raise PorterError(f"unsupported dtype expression {ast.unparse(elt)!r}",
                                  path=rel, line=elt.lineno, hint="write dtypes as torch.<dtype>")
        return tuple(names)
    raise PorterError(f"unsupported expectation value {ast.unparse(node)!r}", path=rel,
                      line=node.lineno, hint="use None or a list of torch dtypes")


