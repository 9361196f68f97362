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
from functools import cached_property

from porter.source.checkout import COMMON_MPS, TEST_MPS, Checkout
from porter.errors import PorterError
from porter.source.xfail_lists import assignment

MODIFIER = "mps_ops_modifier"
GRAD_MODIFIER = "mps_ops_grad_modifier"       # test_output_grad_match's lists

# what an entry says of its dtypes (Entry.kind), not a test's outcome (verdicts.Outcome): a
# dtype of a KIND_XFAIL entry comes out xfail when it fails and xpass when it passes
KIND_XFAIL, KIND_SKIP, KIND_XFAIL_OLD_MACOS = "xfail", "skip", "xfail-old-macos"

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
    kind: str                      # KIND_XFAIL, KIND_SKIP or KIND_XFAIL_OLD_MACOS
    key: str                       # op.name + op.variant_test_name
    dtypes: tuple[str, ...] | None  # None: every dtype
    line: int                      # 1-based line of the key
    # ast positions (line, UTF-8 byte column) of the key, the value and the value's end; an
    # edit turns them into offsets of the text (Expectations.offset), a test run never does
    key_at: tuple[int, int]
    value_at: tuple[int, int]
    value_end_at: tuple[int, int]
    macos_before: tuple[int, int] | None = None
    # the literal gives the key again later: Python's dict holds that value, not this one (an
    # edit still sees this entry, so that removing the key removes it too)
    shadowed: bool = False

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
    # dict name -> the condition under which upstream's `for op in ops` loop applies it,
    # over the macOS version; None where the loop could not be read (every list applies,
    # MACOS_BEFORE_X_Y by its name)
    gates: dict[str, ast.expr] | None = None
    # `file:line: why` of test code that changes a Mac's test beyond these lists
    # (porter.harness.test_code), or None
    unread: str | None = None
    # op name (OpInfo.name, test_mps.py's `op.name`) -> `file:line: why` of such code that runs
    # for that op alone (a branch of `_run_op` under `op.name == "x"`)
    unread_ops: dict[str, str] = field(default_factory=dict)

    def unread_verdict(self, op_name: str | None = None) -> str | None:
        """Every dtype's "not proven" where the test code does what porter does not model, for
        every op or for `op_name`."""
        unread = self.unread or (self.unread_ops.get(op_name) if op_name is not None else None)
        return None if unread is None else f"not proven: {unread}"

    @cached_property
    def _offsets(self):
        from porter.source.ast_offsets import AstOffsets
        return AstOffsets(self.text)

    def offset(self, position: tuple[int, int]) -> int:
        """The character offset into `text` of an Entry's ast position (for surgical edits)."""
        return self._offsets.at(*position)

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
            if e.shadowed or not e.covers(dtype) or not self.applies(e, macos):
                continue
            out.append(e)
        return out

    def applies(self, e: Entry, macos: tuple[int, int] | None) -> bool:
        """Whether upstream's modifier applies e's list on `macos` (None: the newest)."""
        version = macos or NEWEST_MACOS
        if self.gates is not None:
            gate = self.gates.get(e.dict_name, False)
            return gate is not False and _truth(gate, version, e.key)
        return not (e.kind == KIND_XFAIL_OLD_MACOS and version >= e.macos_before)

    def complex_xfail(self, key: str, dtype: str) -> bool:
        return (self.complex_supported is not None and dtype in ("complex64", "complex32")
                and key not in self.complex_supported)


def load(checkout: Checkout) -> Expectations:
    """Expectations of the checkout; empty when it has neither file."""
    from porter.harness import test_code
    run_op, run_op_ops = test_code.run_op_unmodelled(checkout)
    unread = test_code.unmodelled(checkout) or run_op
    for rel in (COMMON_MPS, TEST_MPS):
        if checkout.exists(rel):
            exp = parse(checkout.read(rel), rel)
            if exp is not None:
                exp.unread, exp.unread_ops = unread or exp.unread, run_op_ops
                return exp
    return Expectations(path=None, unread=unread, unread_ops=run_op_ops)


def load_grad(checkout: Checkout) -> Expectations:
    """The expectations of upstream's test_output_grad_match (`mps_ops_grad_modifier`)."""
    from porter.harness import test_code
    # the grad test runs the op through `_run_op` too
    run_op, run_op_ops = test_code.run_op_unmodelled(checkout)
    for rel in (COMMON_MPS, TEST_MPS):
        if checkout.exists(rel):
            exp = parse(checkout.read(rel), rel, GRAD_MODIFIER)
            if exp is not None:
                exp.unread, exp.unread_ops = run_op or exp.unread, run_op_ops
                return exp
    return Expectations(path=None, unread=run_op, unread_ops=run_op_ops)


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
    exp = Expectations(path=rel, text=text)
    complex_ops: set[str] | None = None
    lists: set[str] = set()     # every list the modifier defines, an empty one too
    for stmt in func.body:
        target, value = _assignment(stmt)
        if target is None:
            continue
        if _kind(target, grad=modifier == GRAD_MODIFIER) or target.endswith("SUPPORTED_COMPLEX_OPS"):
            lists.add(target)
        if isinstance(value, ast.Set) and target.endswith("SUPPORTED_COMPLEX_OPS"):
            # AFTER_MACOS_14_0_SUPPORTED_COMPLEX_OPS (older trees) is unioned upstream too
            for e in value.elts:
                if not (isinstance(e, ast.Constant) and isinstance(e.value, str)):
                    raise PorterError(
                        f"the list {target} has an element porter does not read: "
                        f"`{ast.unparse(e)[:60]}`: write it as a string literal", path=rel, line=e.lineno)
            complex_ops = (complex_ops or set()) | {e.value for e in value.elts}
            continue
        kind = _kind(target, grad=modifier == GRAD_MODIFIER)
        if kind is None or not isinstance(value, ast.Dict):
            continue
        macos = _MACOS_BEFORE.search(target)
        # where each key is given last: Python keeps that value alone (review 27's E2: a key
        # given twice had both values applied here)
        last = {k.value: i for i, k in enumerate(value.keys) if isinstance(k, ast.Constant)}
        for i, (k, v) in enumerate(zip(value.keys, value.values)):
            if k is None:
                continue            # `**{...}`: refused below, with the line
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                # a key Python computes (`"heavi" + "side"`): a Mac's test applies it (review
                # 27's E1: dropped here, the dtype an unexpected success there)
                raise PorterError(
                    f"the expectation list {target} has a key porter does not read: "
                    f"`{ast.unparse(k)[:60]}`: write it as a string literal", path=rel, line=k.lineno)
            exp.entries.append(Entry(
                dict_name=target, kind=kind, key=k.value, dtypes=_dtypes(v, rel),
                line=k.lineno, key_at=(k.lineno, k.col_offset), value_at=(v.lineno, v.col_offset),
                value_end_at=(v.end_lineno, v.end_col_offset),
                macos_before=(int(macos.group(1)), int(macos.group(2))) if macos else None,
                shadowed=last[k.value] != i))
    exp.complex_supported = frozenset(complex_ops) if complex_ops is not None else None
    exp.gates = _gates(func)
    _refuse_unread_changes(func, lists, rel)
    exp.unread = _loop_unmodelled(func, {t for t in lists if not t.endswith("SUPPORTED_COMPLEX_OPS")},
                                  rel, modifier)
    return exp


def _refuse_unread_changes(func: ast.FunctionDef, lists: set[str], rel: str) -> None:
    """Refuse (exit 2, the line named) a change of an expectation list other than its top-level
    literal: `ON_MPS_XFAILLIST["sign"] = [torch.float32]`, `.update(...)`, `del`, `|=`, `**`
    inside the literal, or a literal assigned under an `if`. porter reads the top-level literals
    only; a Mac's test applies the change too, so a run that ignored it could be green where
    the Mac reports an unexpected success. The one change upstream writes,
    `if sparse: UNIMPLEMENTED_XFAILLIST.update(..._SPARSE)`, is for the sparse tests, which are
    not test_output_match: read as such, and left out."""
    top = set(func.body)

    def refuse(node: ast.AST, name: str):
        raise PorterError(
            f"the expectation list {name} is changed by `{ast.unparse(node)[:80]}`, which porter "
            f"does not read: write the entry inside the `{name} = {{...}}` literal",
            path=rel, line=node.lineno)

    def list_of(target: ast.AST) -> str | None:
        base = target
        while isinstance(base, (ast.Subscript, ast.Attribute)):
            base = base.value
        return base.id if isinstance(base, ast.Name) and base.id in lists else None

    def check(stmt: ast.stmt, sparse: bool):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                name = list_of(target)
                if name is None:
                    continue
                if not isinstance(target, ast.Name) or stmt not in top or (
                        isinstance(stmt.value, ast.Dict) and None in stmt.value.keys):
                    refuse(stmt, name)
        elif isinstance(stmt, (ast.AugAssign, ast.Delete)):
            for target in stmt.targets if isinstance(stmt, ast.Delete) else [stmt.target]:
                if list_of(target):
                    refuse(stmt, list_of(target))
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _CHANGING_METHODS and list_of(node.func.value) \
                    and not sparse:
                refuse(stmt, list_of(node.func.value))

    def visit(stmts, sparse: bool):
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.If):
                visit(stmt.body, sparse or (isinstance(stmt.test, ast.Name) and stmt.test.id == "sparse"))
                visit(stmt.orelse, sparse)
            elif isinstance(stmt, (ast.For, ast.While, ast.With, ast.Try)):
                for block in ("body", "orelse", "finalbody", "handlers"):
                    for inner in getattr(stmt, block, []):
                        visit(inner.body if isinstance(inner, ast.ExceptHandler) else [inner], sparse)
            else:
                check(stmt, sparse)

    visit(func.body, False)


_CHANGING_METHODS = frozenset({"update", "pop", "popitem", "setdefault", "clear", "add", "discard",
                               "remove", "append", "extend", "insert", "__setitem__", "__delitem__"})


# The macOS assumed off a Mac unless --macos says otherwise: the newest, whose run has no
# old-macOS list active.
NEWEST_MACOS = (26, 0)
_VERSION_NAMES = {"MACOS_VERSION", "product_version"}


def _gates(func: ast.FunctionDef) -> dict[str, ast.expr] | None:
    """{dict name: condition} for each list the modifier's `for op in ops:` loop applies:
    `if key in NAME and <cond>:` and `for lst in [A, B]: if key in lst and <cond>:`."""
    loop = next((n for n in func.body if isinstance(n, ast.For)), None)
    if loop is None:
        return None
    gates: dict[str, ast.expr] = {}

    def visit(stmts, aliases: dict[str, list[str]]):
        for stmt in stmts:
            if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and \
                    isinstance(stmt.iter, (ast.List, ast.Tuple)):
                names = [e.id for e in stmt.iter.elts if isinstance(e, ast.Name)]
                visit(stmt.body, {**aliases, stmt.target.id: names})
            elif isinstance(stmt, ast.If):
                for name in _key_in(stmt.test):
                    for real in aliases.get(name, [name]):
                        gates.setdefault(real, stmt.test)
                visit(stmt.body, aliases)
                visit(stmt.orelse, aliases)
    visit(loop.body, {})
    return gates


def _key_in(test: ast.expr) -> list[str]:
    """NAMEs of `key in NAME` tested (positively) in `test`."""
    out = []
    for node in ast.walk(test):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)
                and node.left.id == "key" and isinstance(node.ops[0], ast.In)
                and isinstance(node.comparators[0], ast.Name)):
            out.append(node.comparators[0].id)
    return out


def _truth(node: ast.expr, version: tuple[int, int], key: str | None = None) -> bool:
    """A gate's value on `version` for the entry `key`: membership tests hold (the entry decides
    them), `key == "x"`/`key != "x"`, macOS comparisons and is_macos*_or_newer() are evaluated;
    anything else is taken as true (`_loop_unmodelled` has made such a gate not proven)."""
    if isinstance(node, ast.BoolOp):
        values = [_truth(v, version, key) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _truth(node.operand, version, key)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        if key is not None and _is_key(left) and isinstance(node.ops[0], (ast.Eq, ast.NotEq)) \
                and _string(right) is not None:
            return (key == _string(right)) == isinstance(node.ops[0], ast.Eq)
        if isinstance(left, ast.Name) and left.id in _VERSION_NAMES and _number(right) is not None:
            return _compare(version, node.ops[0], _number(right))
        if isinstance(right, ast.Name) and right.id in _VERSION_NAMES and _number(left) is not None:
            flipped = {ast.Lt: ast.Gt(), ast.LtE: ast.GtE(), ast.Gt: ast.Lt(), ast.GtE: ast.LtE()}
            op = flipped.get(type(node.ops[0]), node.ops[0])
            return _compare(version, op, _number(left))
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        name = node.func.attr
        m = re.fullmatch(r"is_macos(\d+)_or_newer", name)
        if m:
            return version >= (int(m.group(1)), 0)
        if name == "is_macos_or_newer" and len(node.args) == 2:
            nums = [a.value for a in node.args if isinstance(a, ast.Constant)]
            if len(nums) == 2:
                return version >= (int(nums[0]), int(nums[1]))
    return True


def _is_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "key"


def _string(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _unmodelled_gate(test: ast.expr, lists: set[str]) -> ast.expr | None:
    """The first part of an `if` of the modifier's loop that `_truth` does not evaluate, or
    None: `key in NAME`/`key not in NAME` of a list porter reads, `key not in
    xfail_exclusion` (the test calls the modifier with the op list alone: test_code),
    `key == "x"`, macOS comparisons, is_macos*_or_newer()."""
    if isinstance(test, ast.BoolOp):
        return next(filter(None, (_unmodelled_gate(v, lists) for v in test.values)), None)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _unmodelled_gate(test.operand, lists)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if _is_key(left) and isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Name) \
                and (right.id in lists or right.id == "xfail_exclusion" and isinstance(op, ast.NotIn)
                     or right.id.endswith("SUPPORTED_COMPLEX_OPS")):
            return None
        if _is_key(left) and isinstance(op, (ast.Eq, ast.NotEq)) and _string(right) is not None:
            return None
        names = {n.id for n in (left, right) if isinstance(n, ast.Name)}
        if names & _VERSION_NAMES and (_number(left) or _number(right)):
            return None
        return test
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
            re.fullmatch(r"is_macos(\d+)?_or_newer", test.func.attr):
        return None
    return test


# what an `addDecorator` of the loop may hold as literal dtypes, and under which test: the
# float64 one every op gets (never sent: porter's dtypes leave them out) and the complex one of
# an op not in SUPPORTED_COMPLEX_OPS (Expectations.complex_xfail)
_LITERAL_DECORATIONS = {None: {"float64", "complex128"},
                        "SUPPORTED_COMPLEX_OPS": {"complex32", "complex64"}}


def _decorator_kind(node: ast.expr) -> str | None:
    """xfail for `unittest.expectedFailure`, skip for `unittest.skip(...)`, else None."""
    if isinstance(node, ast.Attribute) and node.attr == "expectedFailure":
        return "xfail"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "skip":
        return "skip"
    if isinstance(node, ast.Attribute) and node.attr == "skip":
        return "skip"                       # `DecorateInfo(unittest.skip, ...)`, the grad lists'
    return None


_KINDS_OF = {"xfail": (KIND_XFAIL, KIND_XFAIL_OLD_MACOS), "skip": (KIND_SKIP,)}


def _upstreams_add(fn: ast.FunctionDef) -> bool:
    """Whether `addDecorator` only appends the DecorateInfo to the op's decorators, with the
    device type set where the modifier has one, as upstream's does."""
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    shapes = {"op.decorators = op.decorators + (d,)",
              "if device_type is not None:\n    d.device_type = device_type"}
    return bool(body) and all(ast.unparse(s) in shapes for s in body) and \
        ast.unparse(body[-1]) == "op.decorators = op.decorators + (d,)"


def _loop_unmodelled(func: ast.FunctionDef, lists: set[str], rel: str, modifier: str) -> str | None:
    """`file:line: why` of a statement of the modifier's `for op in ops:` loop that decorates
    ops otherwise than porter reads (review 29's X01: `if key == "heaviside": addDecorator(...)`;
    X02: a list of another name in the `for xfaillist in [...]` loop; X03: a gate porter cannot
    evaluate), else None. The loop porter models: `key = ...`; `if key in LIST [and gate]:
    addDecorator(op, DecorateInfo(<skip or expectedFailure>, dtypes=LIST[key]))`, directly or
    through `for xfaillist in [LIST, ...]`; the float64 and complex decorations; an `if sparse:`
    branch (the sparse tests')."""
    loop = next((n for n in func.body if isinstance(n, ast.For)), None)
    if loop is None:
        return None

    def why(node: ast.AST, what: str) -> str:
        return (f"{rel}:{node.lineno}: {modifier}'s `{ast.unparse(node).splitlines()[0][:70]}` "
                f"{what}, which porter does not model (docs/testing.md)")

    # the function's head as upstream's (review 35's T22: `device_type="cuda"` by default
    # stamps every DecorateInfo with CUDA, which a Mac's MPS test ignores), the loop over every
    # op (T18, T19, T21: `ops[:10]`, a filter), upstream's key (T20), and each list bound
    # once, before the loop, which reads the binding of its time (T15: a list bound again after
    # it decorates nothing)
    odd = _head_unmodelled(func, loop, lists)
    if odd is not None:
        return why(*odd)

    # the modifier's own statements: the lists, `addDecorator` as upstream writes it, the one
    # loop, the sparse tests' `if sparse:`, `return ops` (review 30's X04: a second loop; X01:
    # an addDecorator that returns early for one op)
    for stmt in func.body:
        if stmt is loop or isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if _assignment(stmt)[0] is not None or isinstance(stmt, ast.Return) or \
                isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "sparse":
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, (ast.List, ast.Tuple)):
            continue
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "addDecorator" and _upstreams_add(stmt):
            continue
        if ast.unparse(stmt) == "if xfail_exclusion is None:\n    xfail_exclusion = []":
            continue
        return why(stmt, "is a statement of the modifier")

    def decoration(call: ast.Call, aliases: dict[str, list[str]], tested: str | None) -> str | None:
        info = call.args[1] if len(call.args) == 2 and isinstance(call.args[1], ast.Call) else None
        if info is None or not (isinstance(info.func, ast.Name) and info.func.id == "DecorateInfo"):
            return why(call, "decorates an op")
        # the decorator the list's kind says, and no other argument (review 30's X02:
        # `active_if=False`; X03, X07: a skip list applied as an expected failure, or the reverse)
        if any(k.arg != "dtypes" for k in info.keywords) or len(info.args) != 1:
            return why(call, "decorates with other arguments than the dtypes")
        applied = _decorator_kind(info.args[0])
        given = next((k.value for k in info.keywords if k.arg == "dtypes"), None)
        if isinstance(given, ast.Subscript) and isinstance(given.value, ast.Name) and \
                _is_key(given.slice):
            named = aliases.get(given.value.id, [given.value.id])
            if not all(n in lists for n in named):
                return why(call, "decorates with a list")
            if any(_kind(n, grad=modifier == GRAD_MODIFIER) not in _KINDS_OF.get(applied, ())
                   for n in named):
                return why(call, "applies another decorator than its list's name says")
            return None
        if isinstance(given, (ast.List, ast.Tuple)):
            dtypes = {canonical_dtype(e.attr) for e in given.elts if isinstance(e, ast.Attribute)}
            allowed = _LITERAL_DECORATIONS.get(tested, set())
            if len(dtypes) == len(given.elts) and dtypes <= allowed and applied == "xfail":
                return None
        return why(call, "decorates an op")

    def visit(stmts, aliases: dict[str, list[str]], tested: str | None) -> str | None:
        for stmt in stmts:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_key(stmt.targets[0]):
                continue
            if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "sparse":
                found = visit(stmt.orelse, aliases, tested)    # the body: the sparse tests'
            elif isinstance(stmt, ast.If):
                odd = _unmodelled_gate(stmt.test, lists | set(aliases))
                if odd is not None:
                    return why(stmt.test, f"decides with `{ast.unparse(odd)[:60]}`")
                complex_test = any(isinstance(n, ast.Name) and n.id.endswith("SUPPORTED_COMPLEX_OPS")
                                   for n in ast.walk(stmt.test))
                found = visit(stmt.body, aliases, "SUPPORTED_COMPLEX_OPS" if complex_test else
                              "gated") or visit(stmt.orelse, aliases, "gated")
            elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and \
                    isinstance(stmt.iter, (ast.List, ast.Tuple)) and not stmt.orelse:
                names = [e.id for e in stmt.iter.elts if isinstance(e, ast.Name)]
                unread = [n for n in names if n not in lists]
                if len(names) != len(stmt.iter.elts) or unread:
                    return why(stmt, f"applies {unread[0] if unread else 'a list'} porter does not "
                                     "read as an expectation list")
                found = visit(stmt.body, {**aliases, stmt.target.id: names}, tested)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
                    isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "addDecorator":
                found = decoration(stmt.value, aliases, tested)
            else:
                found = why(stmt, "does more")
            if found is not None:
                return found
        return None

    return visit(loop.body, {}, None)


# upstream's parameters and the defaults porter reads them with: the device the DecorateInfos
# act on (None: any, the MPS test included), the exclusions, the sparse tests' switch
_PARAMETER_DEFAULTS = {"device_type": ("mps", None), "xfail_exclusion": (None,), "sparse": (False,)}
_KEY = "key = op.name + op.variant_test_name"


def _head_unmodelled(func: ast.FunctionDef, loop: ast.For, lists: set[str]) -> tuple[ast.AST, str] | None:
    """(node, what) where the modifier's head, loop header, key or list bindings are not
    upstream's, else None."""
    args = func.args
    params = [a.arg for a in args.posonlyargs + args.args]
    if not params or args.vararg or args.kwarg or args.kwonlyargs:
        return func, "takes other parameters"
    defaults = dict(zip(params[len(params) - len(args.defaults):], args.defaults))
    for name in params[1:]:
        given = defaults.get(name)
        if name not in _PARAMETER_DEFAULTS or not isinstance(given, ast.Constant) or not any(
                given.value is a or type(given.value) is type(a) and given.value == a
                for a in _PARAMETER_DEFAULTS[name]):
            return func, f"takes `{name}`{' = ' + ast.unparse(given) if given is not None else ''}"
    if not (isinstance(loop.target, ast.Name) and loop.target.id == "op" and
            isinstance(loop.iter, ast.Name) and loop.iter.id == params[0]) or loop.orelse:
        return loop, "loops over other ops than every op it is given"
    keys = [s for s in loop.body if isinstance(s, ast.Assign) and len(s.targets) == 1 and _is_key(s.targets[0])]
    if len(keys) != 1 or ast.unparse(keys[0]) != _KEY or loop.body[0] is not keys[0]:
        odd = next((k for k in keys if ast.unparse(k) != _KEY), keys[0] if keys else loop)
        return odd, f"keys the lists otherwise than `{_KEY}`"
    bound: set[str] = set()
    after = False
    for stmt in func.body:
        if stmt is loop:
            after = True
            continue
        name, _ = _assignment(stmt)
        if name in lists and (after or name in bound):
            return stmt, "binds a list after the loop" if after else "binds a list again"
        bound.add(name)
    last = func.body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name) and last.value.id == params[0]):
        return last, "returns other ops than it was given"
    return None


def _number(node: ast.expr) -> tuple[int, int] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        major, _, minor = f"{node.value}".partition(".")
        return int(major), int(minor or 0)
    return None


def _compare(version: tuple[int, int], op: ast.cmpop, bound: tuple[int, int]) -> bool:
    return {ast.Lt: version < bound, ast.LtE: version <= bound, ast.Gt: version > bound,
            ast.GtE: version >= bound, ast.Eq: version == bound,
            ast.NotEq: version != bound}.get(type(op), True)


def parse_macos(text: str) -> tuple[int, int]:
    """`--macos 14.4` -> (14, 4); bad input is a PorterError."""
    m = re.fullmatch(r"\s*(\d+)(?:\.(\d+))?\s*", text or "")
    if not m:
        raise PorterError(f"--macos {text!r}: not a macOS version", hint="write it as 14.4 or 15")
    return int(m.group(1)), int(m.group(2) or 0)


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
        return KIND_SKIP
    if name.endswith("XFAILLIST"):
        return KIND_XFAIL_OLD_MACOS if _MACOS_BEFORE.search(name) else KIND_XFAIL
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


