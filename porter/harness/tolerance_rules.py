"""The checkout's own tolerance rules, isolated from its `test/test_mps.py` and run.

Upstream's `TestConsistency.test_output_match` decides (atol, rtol) per sample inside its
sample loop, and the shape of that code has changed over the years: an inline if/elif chain
(2022-2023: pow, interpolate and upsample_bilinear rules among the low-precision lists), then
`atol, rtol = self._compute_tolerances(op, dtype)` followed by sample-dependent overrides
(2024-: interpolate's bilinear uint8 sample, the anti-aliased upsample samples). Rather than
keep a copy of one of those shapes, porter cuts the statements that decide `atol`/`rtol` out of
the loop (with the assignments they read and the class constants and methods they call),
compiles them into one function `(self, op, dtype, sample) -> (atol, rtol)` and runs that.

test_mps.py itself cannot be imported off a Mac (it imports MPS-only code at module level),
which is why the rules are cut out rather than imported. Where they cannot be isolated (no
such loop, a rule reading a name porter cannot supply), `isolate` says why, and the caller
falls back to porter's built-in table and says so.

The rules run against real torch when the harness already has it loaded; a cached run, which
starts without torch, gives them a stand-in `torch` holding only the dtypes, and a rule that
needs anything more of torch gets the real one.
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

from porter.harness.mps_expectations import NEWEST_MACOS

TEST_NAME = "test_output_match"
_TOLS = frozenset({"atol", "rtol"})
# names the isolated function is given; the loop's own sample name is added per file
_GIVEN = frozenset({"self", "op", "dtype", "torch"})
# upstream spells the sample both ways (mps_sample in the loop, cpu_sample after _run_op)
_SAMPLE_ALIASES = ("mps_sample", "cpu_sample", "sample")


@dataclass(frozen=True)
class Isolated:
    """The tolerance statements of one test, ready to compile."""

    source: str                 # the generated module, for error messages and --debugging
    where: str                  # "TestConsistency.test_output_match"
    sample_dependent: frozenset[str]   # op names a per-sample branch tests for, for callers' tests


@dataclass(frozen=True)
class Refused:
    reason: str


def isolate(text: str, test_name: str = TEST_NAME, check: int = 0) -> Isolated | Refused:
    """Cut `test_name`'s tolerance statements out of a test_mps.py text: those that run
    before its `check`-th comparison of the sample (`self.assertEqual(..., atol=atol, ...)`
    in the loop itself; test_output_grad_match compares the output, then the gradients)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return Refused(f"test/test_mps.py does not parse (line {exc.lineno})")
    found = _find_test(tree, test_name)
    if found is None:
        return Refused(f"test/test_mps.py has no TestConsistency.{test_name}")
    cls, method = found
    loop = _sample_loop(method)
    if loop is None:
        return Refused(f"{cls.name}.{test_name} has no sample loop that sets atol/rtol")
    sample = loop.target.id
    compares = [i for i, s in enumerate(loop.body) if _is_comparison(s)]
    if check >= len(compares):
        return Refused(f"{cls.name}.{test_name} compares each sample {len(compares)} time(s), "
                       f"not {check + 1}")
    # the rules decide the names `atol`/`rtol`; a comparison passing anything else (`atol=0`)
    # compares with tolerances the rules do not give
    for kw in loop.body[compares[check]].value.keywords:
        if kw.arg in _TOLS and not (isinstance(kw.value, ast.Name) and kw.value.id == kw.arg):
            return Refused(f"{cls.name}.{test_name} compares with {kw.arg}={ast.unparse(kw.value)} "
                           f"(test/test_mps.py:{kw.value.lineno}), which porter does not model")
    kept = []
    for stmt in loop.body[:compares[check]]:
        if _is_tolerance_stmt(stmt):
            kept.append(stmt)
        elif _assigns_tolerance(stmt):
            part = _tolerance_part(stmt)
            if part is None:
                return Refused(f"{cls.name}.{test_name} sets atol/rtol inside a "
                               f"{type(stmt).__name__.lower()} (test/test_mps.py:{stmt.lineno}), "
                               "which porter cannot cut out")
            kept.append(part)
    given = _GIVEN | {sample, *_SAMPLE_ALIASES} | _module_names(tree) | {"product_version", "MACOS_VERSION"}
    # the plain assignments the rules read (`cpu_kwargs = cpu_sample.kwargs`): the nearest one
    # before the comparison in the loop body, else the nearest before the loop in the method
    outer = next(i for i, s in enumerate(method.body) if any(n is loop for n in ast.walk(s)))
    earlier = [s for s in reversed(loop.body[:compares[check]]) if s not in kept] + \
        list(reversed(method.body[:outer]))
    needed = _free_names(kept) - given - _TOLS - set(dir(builtins))
    prelude: list[ast.stmt] = []
    while needed:
        name = needed.pop()
        source = next((s for s in earlier if _assigns_plainly(s, name)), None)
        if source is None:
            return Refused(f"{cls.name}.{test_name}'s tolerance rules read {name!r}, "
                           "which porter cannot supply")
        prelude.insert(0, source)
        needed |= _free_names([source]) - given - _TOLS - set(dir(builtins)) - _assigned(prelude)
    methods = _methods_called(cls, kept)
    for method in methods:
        unknown = _free_names([method]) - given - set(dir(builtins))
        if unknown:
            return Refused(f"{cls.name}.{method.name} reads {sorted(unknown)[0]!r}, "
                           "which porter cannot supply")
    constants = [s for s in cls.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                 and s.value is not None and _is_literal(s.value)]
    aliases = "".join(f"    {a} = {sample}\n" for a in _SAMPLE_ALIASES if a != sample)
    body = "".join("    " + ast.unparse(s).replace("\n", "\n    ") + "\n" for s in prelude + kept)
    rules_cls = "class _Rules:\n" + "".join(
        "    " + ast.unparse(s).replace("\n", "\n    ") + "\n" for s in constants + methods) \
        + "    pass\n"
    module_consts = "".join(ast.unparse(s) + "\n" for s in tree.body
                            if isinstance(s, ast.Assign) and _is_literal(s.value))
    source = (module_consts + rules_cls +
              f"\n\ndef _tolerances(self, op, dtype, {sample}):\n{aliases}"
              "    atol, rtol = None, None\n" + body + "    return atol, rtol\n")
    dependent = frozenset(name for s in kept if _reads_sample(s, {sample, *_SAMPLE_ALIASES})
                          for name in _op_names_tested(s))
    return Isolated(source, f"{cls.name}.{test_name}", dependent)


class CheckoutRules:
    """`isolate`'s function, compiled on first use; call with (op name, variant, dtype name,
    sample or None, macOS version)."""

    def __init__(self, isolated: Isolated):
        self.isolated = isolated
        self._compiled: dict[bool, tuple[Callable, object, dict]] = {}

    def __call__(self, name: str, variant: str, dtype: str, sample=None,
                 macos: tuple[int, int] | None = None) -> tuple[float | None, float | None]:
        op = SimpleNamespace(name=name, variant_test_name=variant)
        sample = sample if sample is not None else _BLANK_SAMPLE
        real = "torch" in sys.modules
        try:
            return self._run(real, op, dtype, sample, macos)
        except _NeedsTorch:
            return self._run(True, op, dtype, sample, macos)

    def _run(self, real: bool, op, dtype: str, sample, macos):
        if real not in self._compiled:
            torch = __import__("torch") if real else _STAND_IN
            namespace: dict = {"torch": torch, "__name__": "porter_checkout_tolerances"}
            exec(compile(self.isolated.source, "test/test_mps.py (isolated)", "exec"),  # noqa: S102
                 namespace)
            self._compiled[real] = (namespace["_tolerances"], namespace["_Rules"](), namespace)
        fn, rules, namespace = self._compiled[real]
        version = float("{}.{}".format(*(macos or NEWEST_MACOS)))
        namespace["product_version"] = namespace["MACOS_VERSION"] = version
        torch_dtype = getattr(namespace["torch"], dtype)
        return fn(rules, op, torch_dtype, sample)


# -- reading the test ----------------------------------------------------------------------

def _find_test(tree: ast.Module, test_name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name.startswith("TestConsistency"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == test_name:
                    return node, item
    return None


def _sample_loop(method: ast.FunctionDef) -> ast.For | None:
    """The innermost `for <name> in ...:` loop that assigns atol/rtol."""
    loops = [n for n in ast.walk(method) if isinstance(n, ast.For)
             and isinstance(n.target, ast.Name) and any(_assigns_tolerance(s) for s in n.body)]
    return loops[-1] if loops else None


def _is_comparison(stmt) -> bool:
    """`self.assertEqual(expected, actual, atol=..., ...)` as a statement of the loop."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "assertEqual" and any(k.arg == "atol" for k in call.keywords))


def _tolerance_targets(stmt) -> set[str] | None:
    """The names an assignment binds, when it is `atol = ...`, `atol, rtol = ...` and the like."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    else:
        return None
    names: set[str] = set()
    for t in targets:
        elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
        if not all(isinstance(e, ast.Name) for e in elts):
            return None
        names |= {e.id for e in elts}
    return names


def _is_tolerance_stmt(stmt) -> bool:
    """An assignment of atol/rtol, or an if-chain made only of those (and `pass`)."""
    targets = _tolerance_targets(stmt)
    if targets is not None:
        return bool(targets) and targets <= _TOLS
    if isinstance(stmt, ast.If):
        parts = stmt.body + stmt.orelse
        return all(_is_tolerance_stmt(s) or isinstance(s, ast.Pass) for s in parts) and \
            any(not isinstance(s, ast.Pass) for s in parts)
    return False


def _assigns_tolerance(stmt) -> bool:
    return any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id in _TOLS
               for n in ast.walk(stmt))


def _tolerance_part(stmt):
    """An if-chain that sets atol/rtol among other statements (upstream's 2023 chain has
    `elif op.name == "unique" and ...: continue` among its rules; a branch may check something
    too), cut down to its tests and tolerance assignments: dropping the chain whole left those
    ops the default tolerances, looser than an exact `atol, rtol = 0, 0` rule. None where atol/
    rtol are set in a shape porter does not cut (a loop, a with, a try)."""
    if _is_tolerance_stmt(stmt):
        return stmt
    if not isinstance(stmt, ast.If):
        return None
    body, orelse = _tolerance_block(stmt.body), _tolerance_block(stmt.orelse)
    if body is None or orelse is None:
        return None
    return ast.If(test=stmt.test, body=body or [ast.Pass()], orelse=orelse)


def _tolerance_block(stmts):
    """A branch's tolerance statements up to its own comparison of the sample, if it has one
    (what it assigns after comparing decides nothing)."""
    out = []
    for stmt in stmts:
        if _is_comparison(stmt):
            break
        if not _assigns_tolerance(stmt):
            continue
        part = _tolerance_part(stmt)
        if part is None:
            return None
        out.append(part)
    return out


def _assigns_plainly(stmt, name: str) -> bool:
    """`name = <expression without calls other than .get(...)>`: safe to replay off a device."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name):
        return False
    for node in ast.walk(stmt.value):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute)
                                               and node.func.attr == "get"):
            return False
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield)):
            return False
    return True


def _free_names(stmts) -> set[str]:
    """Names read and bound nowhere in the statements (a function's or lambda's parameters
    count as bound)."""
    loaded = {n.id for s in stmts for n in ast.walk(s)
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    params = {a.arg for s in stmts for a in ast.walk(s) if isinstance(a, ast.arg)}
    return loaded - _assigned(stmts) - params


def _assigned(stmts) -> set[str]:
    return {n.id for s in stmts for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _module_names(tree: ast.Module) -> set[str]:
    return {t.id for s in tree.body if isinstance(s, ast.Assign) and _is_literal(s.value)
            for t in s.targets if isinstance(t, ast.Name)}


def _methods_called(cls: ast.ClassDef, stmts) -> list[ast.FunctionDef]:
    """The class's methods the statements call as `self.NAME(...)`, and those they call."""
    by_name = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    wanted: list[ast.FunctionDef] = []
    todo = list(stmts)
    while todo:
        node = todo.pop()
        for n in ast.walk(node):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id == "self" and n.attr in by_name
                    and by_name[n.attr] not in wanted):
                wanted.append(by_name[n.attr])
                todo.append(by_name[n.attr])
    return sorted(wanted, key=lambda f: f.lineno)


def _reads_sample(stmt, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(stmt))


def _op_names_tested(stmt) -> set[str]:
    """The strings `op.name` is compared with (`==` or `in`) inside a statement."""
    names: set[str] = set()
    for node in ast.walk(stmt):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute)
                and node.left.attr == "name" and isinstance(node.left.value, ast.Name)
                and node.left.value.id == "op"):
            for right in node.comparators:
                names |= {c.value for c in ast.walk(right)
                          if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return names


def _is_literal(value) -> bool:
    try:
        ast.literal_eval(value)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


# -- a torch without torch -----------------------------------------------------------------

class _NeedsTorch(AttributeError):
    pass


class _Dtype:
    def __init__(self, name: str, floating: bool, complex_: bool, signed: bool, itemsize: int):
        self.name, self.is_floating_point, self.is_complex = name, floating, complex_
        self.is_signed, self.itemsize = signed, itemsize

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __getattr__(self, attr):
        raise _NeedsTorch(attr)


class _StandInTorch:
    """Only the dtypes; anything else a rule reads makes the caller retry with real torch."""

    def __init__(self):
        table = {"bool": (False, False, False, 1), "uint8": (False, False, False, 1),
                 "int8": (False, False, True, 1), "int16": (False, False, True, 2),
                 "int32": (False, False, True, 4), "int64": (False, False, True, 8),
                 "uint16": (False, False, False, 2), "uint32": (False, False, False, 4),
                 "uint64": (False, False, False, 8),
                 "float16": (True, False, True, 2), "bfloat16": (True, False, True, 2),
                 "float32": (True, False, True, 4), "float64": (True, False, True, 8),
                 "complex32": (False, True, True, 4), "complex64": (False, True, True, 8),
                 "complex128": (False, True, True, 16)}
        for name, spec in table.items():
            setattr(self, name, _Dtype(name, *spec))
        for alias, name in {"half": "float16", "float": "float32", "double": "float64",
                            "short": "int16", "int": "int32", "long": "int64",
                            "chalf": "complex32", "cfloat": "complex64",
                            "cdouble": "complex128"}.items():
            setattr(self, alias, getattr(self, name))

    def __getattr__(self, attr):
        raise _NeedsTorch(attr)


_STAND_IN = _StandInTorch()
_BLANK_SAMPLE = SimpleNamespace(input=None, args=(), kwargs={})
