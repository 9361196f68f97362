"""What in the checkout's test code changes a Mac's `test_output_match` beyond what porter reads
of it (the expectation lists, the tolerance rules): then the op's verdict is "not proven".

- A kernel registered with the dispatcher from Python (`torch.library.Library("aten", "IMPL")
  .impl("heaviside", ...)`) in common_mps.py or test/test_mps.py, which the test imports: it
  replaces the MPS kernel or the CPU reference on a Mac (review 28's R08, R09).
- test_output_match's `@ops(mps_ops_modifier(...))` called otherwise than upstream calls it (with
  the op list alone): `sparse=True` applies the sparse lists porter leaves out, `xfail_exclusion`
  drops entries porter applies (review 28's X08, X07).
- TestConsistency's `_run_op`, which computes what the test compares, doing other than the shapes
  porter models (`run_op_unmodelled`): a branch for one op returning fixed tensors made a Mac red
  and porter green (review 28's T06); likewise the sample loop of test_output_match beyond
  running `_run_op`, setting atol/rtol and comparing.
- Another decorator of test_output_match, allowed_dtypes other than the dtypes porter tests, and
  a registration in the op database modules the test imports (reviews 29, 30).
"""

from __future__ import annotations

import ast
import unittest
from pathlib import Path

from porter.source.checkout import COMMON_MPS, TEST_MPS, Checkout

MODIFIER = "mps_ops_modifier"
TEST_NAME = "test_output_match"


# the test modules test_output_match imports besides common_mps.py, read for a registration
# only (review 30's T14: one in common_methods_invocations.py), and only where their text
# names one of the ways (the op database is ~1 MB: parsed only then)
_IMPORTED = ("torch/testing/_internal/common_methods_invocations.py",
             "torch/testing/_internal/common_device_type.py",
             "torch/testing/_internal/common_utils.py",
             "torch/testing/_internal/common_dtype.py")
_OPINFO_DIR = "torch/testing/_internal/opinfo"
_REGISTRATION_WORDS = ("library", "_dispatch")


def unmodelled(checkout: Checkout) -> str | None:
    """`file:line: why` of the first such code, or None; kept in porter's cache by the bytes
    of every file it reads and of this module (the ~40k lines of the OpInfo files walked for
    torch.library take ~1.4 s, a third of an edit's verdict, and an edit of a kernel changes
    none of them)."""
    import hashlib
    import json

    from porter.runtime.cache_dir import cache_dir
    from porter.runtime.whole_file import write_whole

    files = [rel for rel in (COMMON_MPS, TEST_MPS) if checkout.exists(rel)]
    files += _imported_modules(checkout)
    h = hashlib.sha256(Path(__file__).read_bytes())
    for rel in files:
        h.update(rel.encode() + b"\0" + (checkout.root / rel).read_bytes() + b"\0")
    kept = cache_dir("test_code") / f"{h.hexdigest()[:32]}.json"
    try:
        return json.loads(kept.read_text())["found"]
    except (OSError, ValueError, KeyError):
        pass
    found = _unmodelled(checkout)
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_whole(kept, json.dumps({"found": found}))
    except OSError:
        pass            # an unwritable cache: read again next run
    return found


def _unmodelled(checkout: Checkout) -> str | None:
    for rel in (COMMON_MPS, TEST_MPS):
        if not checkout.exists(rel):
            continue
        try:
            tree = ast.parse(checkout.read(rel))
        except SyntaxError:
            continue            # the expectations' reader says so, with the line
        # of test_mps.py, what runs for test_output_match: its module-level code (functions
        # included, since module code may call them: review 29's T02), the TestConsistency
        # classes, and every other class's own body, which runs at import (review 30's T13);
        # upstream's other test classes may use torch.library in their own tests
        scope = tree if rel != TEST_MPS else ast.Module(body=[
            s for n in tree.body for s in (
                [n] if not isinstance(n, ast.ClassDef) or n.name.startswith("TestConsistency")
                else [b for b in n.body if not isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))])
        ], type_ignores=[])
        found = _registration(scope) or (
            (_collection(tree) or _modifier_call(tree) or _test_decorators(tree)
             or _allowed_dtypes(tree))
            if rel == TEST_MPS else None)
        if found is not None:
            line, why = found
            return f"{rel}:{line}: {why}"
    for rel in _imported_modules(checkout):
        text = checkout.read(rel)
        if not any(w in text for w in _REGISTRATION_WORDS):
            continue
        try:
            found = _registration(ast.parse(text))
        except SyntaxError:
            continue
        if found is not None:
            return f"{rel}:{found[0]}: {found[1]}"
    return None


def _imported_modules(checkout: Checkout) -> list[str]:
    found = [rel for rel in _IMPORTED if checkout.exists(rel)]
    opinfo = checkout.root / _OPINFO_DIR
    if opinfo.is_dir():
        found += sorted(str(p.relative_to(checkout.root)) for p in opinfo.rglob("*.py"))
    return found


def _registration(tree: ast.Module) -> tuple[int, str] | None:
    """A use of `torch.library` or its `Library`: Python's way to register a kernel."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names]
            # `from torch import library` too (review 29's T01)
            if isinstance(node, ast.ImportFrom) and node.module == "torch":
                names += [f"torch.{a.name}" for a in node.names]
            if any(n == "torch.library" or n.startswith("torch.library.") or n == "Library"
                   for n in names):
                return node.lineno, _REGISTERS
        if isinstance(node, ast.Constant) and node.value == "torch.library":
            return node.lineno, _REGISTERS          # importlib.import_module("torch.library")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_dispatch_library"):
            return node.lineno, _REGISTERS          # torch._C._dispatch_library (review 30's T12)
        if isinstance(node, ast.Attribute) and node.attr == "library" and \
                isinstance(node.value, ast.Name) and node.value.id == "torch":
            return node.lineno, _REGISTERS
    return None


_REGISTERS = ("the test code uses torch.library, Python's way to register a kernel with the "
              "dispatcher: on a Mac it may replace the MPS kernel or the CPU reference, which "
              "porter does not model")


def _allowed_dtypes(tree: ast.Module) -> tuple[int, str] | None:
    """test_output_match's `allowed_dtypes` where they are not the dtypes porter tests
    (porter.source.dtypes.MPS_DTYPES, upstream's `[t for t in get_all_dtypes() if t not in
    MPS_UNSUPPORTED_TYPES]` on a current macOS), or cannot be computed: a Mac generates a test
    for its dtypes only (review 29's T07: float16 left out, porter's float16 row failed)."""
    from porter.source.dtypes import MPS_DTYPES
    method = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                   and n.name == TEST_NAME), None)
    deco = next((d for d in (method.decorator_list if method else [])
                 if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "ops"),
                None)
    if deco is None:
        return None             # the modifier's reading says what is missing
    given = next((k.value for k in deco.keywords if k.arg == "allowed_dtypes"), None)
    if given is None:
        return deco.lineno, (f"{TEST_NAME} has no allowed_dtypes, so it runs every dtype of each "
                             "OpInfo, which porter does not model (it tests MPS_DTYPES)")
    names = _dtype_names(tree, given)
    if names is None or names != set(MPS_DTYPES):
        shown = ", ".join(sorted(names)) if names is not None else "not computed"
        return given.lineno, (f"{TEST_NAME}'s allowed_dtypes `{ast.unparse(given)[:60]}` "
                              f"({shown}) are not the dtypes porter tests "
                              f"({', '.join(MPS_DTYPES)}), which porter does not model")
    return None


def _dtype_names(tree: ast.Module, expr: ast.expr) -> set[str] | None:
    """The dtype names `expr` (an `allowed_dtypes`) holds, computed from the module-level
    assignments it reads, with torch's dtypes, get_all_dtypes and a current macOS
    (MACOS_VERSION 26.0); None where it reads anything else. torch itself is not imported (a
    warm verdict imports no torch): its dtypes are porter.harness.stand_in_torch's."""
    from porter.harness.stand_in_torch import STAND_IN as torch, Dtype

    def get_all_dtypes(include_half=True, include_bfloat16=True, include_bool=True,
                       include_complex=True, include_complex32=False, include_qint=False):
        # common_dtype.get_all_dtypes: the integers, the floats, bool, the complex dtypes
        if include_qint:
            raise ValueError("quantized dtypes are not modelled")
        names = ["uint8", "int8", "int16", "int32", "int64", "float32", "float64"]
        names += ["float16"] * include_half + ["bfloat16"] * include_bfloat16
        names += ["bool"] * include_bool
        names += (["complex64", "complex128"] + ["complex32"] * include_complex32) * include_complex
        return [getattr(torch, n) for n in names]

    # the decorator runs as its class is made: the assignments before the class, the last of
    # each name (review 30's T11: one after it counted); a statement before it that changes a
    # list in place (T10: `MPS_DTYPES.remove(torch.float16)`) is not modelled
    made = next((c.lineno for c in tree.body if isinstance(c, ast.ClassDef)
                 and any(n is expr for n in ast.walk(c))), None)
    before = [stmt for stmt in tree.body if made is None or stmt.lineno < made]
    assigned = {t.id: stmt for stmt in before if isinstance(stmt, ast.Assign)
                for t in stmt.targets if isinstance(t, ast.Name)}

    namespace = {"torch": torch, "get_all_dtypes": get_all_dtypes, "MACOS_VERSION": 26.0}
    needed, order = [expr], []
    while needed:
        for name in {n.id for n in ast.walk(needed.pop()) if isinstance(n, ast.Name)}:
            if name not in namespace and name in assigned and assigned[name] not in order:
                order.append(assigned[name])
                needed.append(assigned[name].value)
    read = {t.id for stmt in order for t in stmt.targets if isinstance(t, ast.Name)}
    for stmt in before:
        if stmt not in order and _changes(stmt, read):
            return None
    body = sorted(order, key=lambda s: s.lineno) + [
        ast.Assign(targets=[ast.Name("_porter_dtypes", ast.Store())], value=expr, lineno=0)]
    scope = {"__builtins__": {"list": list, "tuple": tuple, "set": set, "sorted": sorted},
             **namespace}
    try:
        code = compile(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])),
                       "test/test_mps.py (allowed_dtypes)", "exec")
        exec(code, scope)       # noqa: S102 (the checkout's own assignments, as its test runs them)
        found = list(scope["_porter_dtypes"])
    except Exception:       # noqa: BLE001 (a name porter cannot supply, any failure: not known)
        return None
    if not all(isinstance(d, Dtype) for d in found):
        return None
    return {d.name for d in found}


CLASS = "TestConsistency"
# unittest's own names: a class that binds one changes how each test is set up, run or skipped
_TESTCASE_NAMES = frozenset(n for n in dir(unittest.TestCase) if not n.startswith("__")) | {
    "__init__", "__new__", "__call__", "__getattribute__", "__getattr__", "__init_subclass__",
    "__class_getitem__", "__set_name__", "__del__"}


def _collection(tree: ast.Module) -> tuple[int, str] | None:
    """What decides whether test_output_match's per-op MPS tests exist and reach the sample loop,
    read as a positive model of upstream's test_mps.py (review 31's T05-T14: each of these left
    a Mac with no test of the kernel, or a failing one, where porter said green):
    - one undecorated `class TestConsistency`, binding test_output_match once, and none of
      unittest's names (`setUp`, `run`, `skipTest`, ...);
    - test_output_match's body: a docstring, `self.assertEqual(device, "mps:0")`, locals set
      without a call (upstream's `include_conjugated_inputs = dtype.is_complex and ...`), and
      one loop over `op.sample_inputs(...)` itself;
    - at module level, `instantiate_device_type_tests(TestConsistency, globals(), ...)` with
      MPS among its devices, no other statement naming a TestConsistency class (`del`), and no
      `pytestmark` or `load_tests` (pytest's and unittest's hooks over the whole module)."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS]
    if not classes:
        return None             # the tolerances' reader says the test is missing
    cls = classes[-1]
    if len(classes) > 1:
        return cls.lineno, f"{CLASS} is defined {len(classes)} times, which porter does not model"
    if cls.decorator_list:
        deco = cls.decorator_list[0]
        return deco.lineno, (f"{CLASS} has the decorator `@{ast.unparse(deco)[:60]}`, which "
                             "porter does not model")
    bound: list[tuple[str, int]] = []
    for s in cls.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.append((s.name, s.lineno))
        elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            bound += [(n.id, s.lineno) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(s, (ast.Delete, ast.Import, ast.ImportFrom, ast.With, ast.For, ast.If,
                            ast.Try, ast.While)):
            return s.lineno, (f"{CLASS}'s body runs `{ast.unparse(s).splitlines()[0][:60]}`, "
                              "which porter does not model")
    tests = [line for name, line in bound if name == TEST_NAME]
    if len(tests) > 1:
        return tests[-1], (f"{CLASS} binds {TEST_NAME} {len(tests)} times (the last one is the "
                           "test), which porter does not model")
    unittest_names = [(name, line) for name, line in bound if name in _TESTCASE_NAMES]
    if unittest_names:
        name, line = unittest_names[0]
        return line, (f"{CLASS} defines `{name}`, unittest's own, which may set up, run or skip "
                      "each test otherwise: porter does not model it")
    method = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == TEST_NAME), None)
    if method is not None:
        found = _test_body(method)
        if found:
            return found
    return _module_collection(tree)


def _test_body(method: ast.FunctionDef) -> tuple[int, str] | None:
    """test_output_match's statements around its sample loop, upstream's alone."""
    loops = 0
    for s in method.body:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            continue
        if _device_check(s):
            continue
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and not any(isinstance(n, (ast.Call, ast.Lambda, ast.NamedExpr)) for n in ast.walk(s.value)):
            continue            # a local the loop reads (upstream's include_conjugated_inputs)
        if isinstance(s, ast.For) and isinstance(s.iter, ast.Call) and \
                isinstance(s.iter.func, ast.Attribute) and s.iter.func.attr == "sample_inputs" and \
                _named(s.iter.func.value, "op") and not s.orelse and loops == 0:
            unlike = _sample_call_unlike(s.iter, method)
            if unlike:
                return s.lineno, unlike
            loops += 1
            continue
        return s.lineno, (f"{TEST_NAME}'s `{ast.unparse(s).splitlines()[0][:70]}` runs outside "
                          "its one loop over `op.sample_inputs(...)`, which porter does not model")
    return None


# how upstream's test_output_match asks for samples, as porter.harness.sample_rules passes it:
# `requires_grad` absent, False, or upstream's expression (review 34's T01: `requires_grad=True`
# makes torch 2.13's sample functions raise on bool and integer dtypes, where porter asked
# with upstream's expression and was green)
_GRAD_EXPRESSION = ast.dump(ast.parse("dtype.is_floating_point or dtype.is_complex", mode="eval").body)
_CONJUGATED_EXPRESSION = ast.dump(ast.parse("dtype.is_complex and op.test_conjugated_samples",
                                            mode="eval").body)


def _sample_call_unlike(call: ast.Call, method: ast.FunctionDef) -> str | None:
    """Why test_output_match's `op.sample_inputs(...)` is not a call porter passes as written
    (sample_rules), or None: the arguments `device, dtype`, `set_seed=True`, `requires_grad`
    absent, False or upstream's expression, `include_conjugated_inputs` absent, a constant, or
    a local holding upstream's expression."""
    def why(what: str) -> str:
        return (f"{TEST_NAME} asks `op.sample_inputs` with {what}, which porter does not pass as "
                "a Mac's test does (porter passes `device, dtype`, `set_seed=True`, "
                "`requires_grad=(dtype.is_floating_point or dtype.is_complex)` or False, and "
                "upstream's conjugated inputs)")

    if len(call.args) != 2 or not (_named(call.args[0], "device") and _named(call.args[1], "dtype")):
        return why("other positional arguments")
    locals_ = {t.id: n.value for n in method.body if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name)}
    for k in call.keywords:
        v = k.value
        if k.arg == "set_seed" and isinstance(v, ast.Constant) and v.value is True:
            continue
        if k.arg == "requires_grad" and (isinstance(v, ast.Constant) and v.value is False
                                         or ast.dump(v) == _GRAD_EXPRESSION):
            continue
        if k.arg == "include_conjugated_inputs":
            held = locals_.get(v.id) if isinstance(v, ast.Name) else v
            if isinstance(held, ast.Constant) and isinstance(held.value, bool) or \
                    held is not None and ast.dump(held) == _CONJUGATED_EXPRESSION:
                continue
        return why(f"`{ast.unparse(k)[:70]}`" if k.arg else "a `**` argument")
    return None


def _device_check(s: ast.stmt) -> bool:
    """`self.assertEqual(device, "mps:0")`: the device the instantiated MPS test is given."""
    call = s.value if isinstance(s, ast.Expr) else None
    return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "assertEqual" and _named(call.func.value, "self")
            and len(call.args) == 2 and not call.keywords and _named(call.args[0], "device")
            and isinstance(call.args[1], ast.Constant) and call.args[1].value == "mps:0")


def _module_collection(tree: ast.Module) -> tuple[int, str] | None:
    instantiated = False
    for s in tree.body:
        if isinstance(s, ast.ClassDef) and s.name == CLASS:
            continue
        call = s.value if isinstance(s, ast.Expr) else None
        if isinstance(call, ast.Call) and _named(call.func, "instantiate_device_type_tests") \
                and call.args and _named(call.args[0], CLASS):
            why = _instantiation(call)
            if why:
                return s.lineno, why
            instantiated = True
            continue
        names = {n.id for n in ast.walk(s) if isinstance(n, ast.Name)} | \
            {n.name for n in ast.walk(s) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        hook = names & {"pytestmark", "load_tests", "pytest_collection_modifyitems"}
        if hook:
            return s.lineno, (f"the module binds `{sorted(hook)[0]}`, which decides which of its "
                              "tests run: porter does not model it")
        if any(n.startswith(CLASS) for n in names):
            return s.lineno, (f"`{ast.unparse(s).splitlines()[0][:70]}` names a {CLASS} class "
                              "at module level, which porter does not model")
    if not instantiated:
        return 1, (f"no `instantiate_device_type_tests({CLASS}, globals(), ...)` makes its MPS "
                   "tests, which porter does not model")
    return None


def _instantiation(call: ast.Call) -> str | None:
    """Why `instantiate_device_type_tests(TestConsistency, ...)` may make no MPS test, or None."""
    kws = {k.arg: k.value for k in call.keywords}
    if None in kws or len(call.args) != 2 or not (isinstance(call.args[1], ast.Call)
                                                  and _named(call.args[1].func, "globals")):
        return (f"`{ast.unparse(call)[:80]}` is not upstream's instantiation, which porter "
                "does not model")
    for name, value in kws.items():
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            return f"`{ast.unparse(call)[:80]}` passes {name} porter cannot read"
        devices = {literal} if isinstance(literal, str) else set(literal) if \
            isinstance(literal, (list, tuple, set)) else None
        if name == "only_for" and (devices is None or "mps" not in devices) or \
                name == "except_for" and (devices is None or "mps" in devices) or \
                name == "allow_mps" and literal is not True or \
                name not in ("only_for", "except_for", "allow_mps"):
            return (f"`{ast.unparse(call)[:80]}` may make no MPS test ({name}="
                    f"{ast.unparse(value)[:30]}), which porter does not model")
    if kws.get("allow_mps") is None:
        return f"`{ast.unparse(call)[:80]}` makes no MPS test without allow_mps=True"
    return None


def _test_decorators(tree: ast.Module) -> tuple[int, str] | None:
    """A decorator of test_output_match other than its `@ops(...)` (review 30's T09:
    `@unittest.expectedFailure` makes a Mac's every test an expected failure)."""
    method = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                   and n.name == TEST_NAME), None)
    for deco in method.decorator_list if method else []:
        if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id == "ops"):
            return deco.lineno, (f"{TEST_NAME} has the decorator `@{ast.unparse(deco)[:60]}`, "
                                 "which porter does not model (it reads its @ops alone)")
    return None


def _changes(stmt: ast.stmt, names: set[str]) -> bool:
    """Whether a module statement changes one of `names` otherwise than by a plain assignment:
    a method called on it, an augmented or item assignment, `del`."""
    def base(node: ast.expr) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                base(node.func.value) in names:
            return True
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, ast.AugAssign) else [])
        if any(base(t) in names and (not isinstance(t, ast.Name) or isinstance(node, ast.AugAssign))
               for t in targets):
            return True
    return False


def _modifier_call(tree: ast.Module) -> tuple[int, str] | None:
    """test_output_match's ops taken otherwise than from `@ops(mps_ops_modifier(<op list>))`:
    the modifier called with more than the op list, or the ops from anything else (a module
    variable holding `mps_ops_modifier(..., sparse=True)`: review 29's X04)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == TEST_NAME:
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and
                        deco.func.id == "ops"):
                    continue
                given = deco.args[0] if deco.args else next(
                    (k.value for k in deco.keywords if k.arg == "op_list"), deco)
                modelled = (isinstance(given, ast.Call) and isinstance(given.func, ast.Name) and
                            given.func.id == MODIFIER and len(given.args) == 1 and
                            not given.keywords)
                if not modelled:
                    return given.lineno, (f"{TEST_NAME} takes its ops from "
                                          f"`{ast.unparse(given)[:80]}`, which porter does not "
                                          f"model (it reads {MODIFIER} called with the op list "
                                          "alone, as upstream calls it)")
    return None


RUN_OP = "_run_op"
# the CPU copy of a sample as the fixture's (and older upstream's) `_run_op` writes it
_CPU_COPY = ("lambda t: t.detach().cpu().requires_grad_(t.requires_grad) if "
             "isinstance(t, torch.Tensor) else t")


def run_op_unmodelled(checkout: Checkout) -> tuple[str | None, dict[str, str]]:
    """What TestConsistency's `_run_op` in test_mps.py does that porter does not model: (`file:
    line: why` for every op, {op name: why} for a branch of the named ops alone).

    porter runs the op on the sample and on its CPU copy and compares the two, as upstream's
    `_run_op` does. A positive model of its statements: the CPU copy of the sample
    (`transform_opinfo_sample_to_cpu(mps_sample, ...)`, `mps_sample.transform(...)`); the op
    called on a sample's input, args and kwargs; a dtype chosen (`dtype = torch.float32`) and
    the CPU output cast to the MPS output's dtype (upstream's fallback of a CPU kernel missing
    for a low precision); warnings silenced; `try`/`except`, `raise` and `if` around those; and a
    return of the MPS output, the CPU output and the CPU sample. A branch under `op.name ==
    "x"` (or `in [...]`) runs for those ops alone: for them it is not proven, for the others it
    does not exist. Anything else is not proven for every op."""
    if not checkout.exists(TEST_MPS):
        return None, {}
    try:
        tree = ast.parse(checkout.read(TEST_MPS))
    except SyntaxError:
        return None, {}         # the expectations' reader says so, with the line
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name.startswith("TestConsistency"):
            # one plain definition: a second one, a decorator or another binding of the name
            # in the class replaces the one read (review 30's T02-T04)
            bound = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == RUN_OP or isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                         isinstance(t, ast.Name) and t.id == RUN_OP
                         for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
            defined = [n for n in bound if isinstance(n, ast.FunctionDef)]
            if len(bound) > 1 or (bound and not defined) or defined and defined[0].decorator_list:
                last = bound[-1]
                return (f"{TEST_MPS}:{last.lineno}: {RUN_OP} is bound otherwise than by one plain "
                        "definition in the class, which porter does not model"), {}
            every, gated = _RunOp(defined[0]).read() if defined else (None, {})
            loop_every, loop_gated = _sample_loop_unmodelled(cls)
            db_every, db_gated = _op_database(tree)
            return every or loop_every or db_every, {**db_gated, **loop_gated, **gated}
    return None, {}


_DB_SOURCES = ("common_methods_invocations", "opinfo")
# calls that read an op list without changing an entry (upstream's `_ref_test_ops =
# tuple(filter(lambda op: ..., op_db))`)
_READING_CALLS = frozenset({"tuple", "list", "filter", "isinstance", "sorted", "len", "set",
                            "frozenset", "any", "all"})


def _op_database(tree: ast.Module) -> tuple[str | None, dict[str, str]]:
    """What test_mps.py's module code does to the op database test_output_match's `@ops`
    takes, as a positive model of upstream's (review 32's D03b, D09: an entry's `.op` replaced,
    heaviside filtered out of `op_db`, each green): (why for every op, {op: why}).
    - the lists are `op_db` as imported and names bound once to `copy.deepcopy(<list>)`;
    - the modifier's argument is one of them, or `copy.deepcopy(<one of them>)`;
    - other module code may read a list into another name with calls that change nothing
      (`tuple(filter(lambda op: ..., op_db))`);
    - a loop over a list whose first statement is `if op.name != "x": continue` acts on op x
      alone (upstream's `_upsample_bicubic2d_aa`): not proven for x, unless its body names a
      list otherwise than to `append` to it;
    anything else that names a list is not proven for every op."""
    lists = {a.asname or a.name for s in tree.body if isinstance(s, ast.ImportFrom)
             and s.module and any(m in s.module for m in _DB_SOURCES)
             for a in s.names if a.name == "op_db"}
    if not lists:
        return None, {}

    def why(node: ast.AST, what: str) -> str:
        return (f"{TEST_MPS}:{node.lineno}: `{ast.unparse(node).splitlines()[0][:70]}` {what}, "
                "which porter does not model")

    def copy_of(value: ast.expr) -> str | None:
        if isinstance(value, ast.Name) and value.id in lists:
            return value.id
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
                value.func.attr == "deepcopy" and _named(value.func.value, "copy") and \
                len(value.args) == 1 and not value.keywords and \
                isinstance(value.args[0], ast.Name) and value.args[0].id in lists:
            return value.args[0].id
        return None

    def names_a_list(node: ast.AST) -> bool:
        return any(isinstance(n, ast.Name) and n.id in lists for n in ast.walk(node))

    gated: dict[str, str] = {}
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(s, ast.ClassDef):
            continue            # test_output_match's own `@ops` is read below
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            target = s.targets[0].id
            if target in lists:
                return why(s, "binds an op list again"), {}
            if copy_of(s.value) is not None:
                lists.add(target)
                continue
            if names_a_list(s.value) and not _only_reads(s.value):
                return why(s, "may change the op database"), {}
            continue
        if isinstance(s, ast.For) and isinstance(s.iter, ast.Name) and s.iter.id in lists:
            name = _skipped_unless(s)
            if name is not None and not _names_lists_otherwise(s.body[1:], lists):
                gated.setdefault(name, why(s, "acts on this op's entry"))
                continue
            return why(s, "may change the op database"), {}
        if names_a_list(s):
            return why(s, "may change the op database"), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == TEST_NAME:
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _named(deco.func, "ops") and deco.args and \
                        isinstance(deco.args[0], ast.Call) and deco.args[0].args and \
                        copy_of(deco.args[0].args[0]) is None:
                    return why(deco, "takes another op list than op_db or a copy of it"), {}
    return None, gated


def _only_reads(value: ast.expr) -> bool:
    """Whether `value` calls only what reads a list (no method of an entry, no assignment)."""
    for n in ast.walk(value):
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in _READING_CALLS):
            return False
        if isinstance(n, ast.NamedExpr):
            return False
    return True


def _skipped_unless(loop: ast.For) -> str | None:
    """x of a loop whose first statement is `if <var>.name != "x": continue`, else None."""
    first = loop.body[0] if loop.body else None
    if not (isinstance(first, ast.If) and not first.orelse and len(first.body) == 1
            and isinstance(first.body[0], ast.Continue) and isinstance(loop.target, ast.Name)):
        return None
    test = first.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq) \
            and isinstance(test.left, ast.Attribute) and test.left.attr == "name" \
            and _named(test.left.value, loop.target.id) and isinstance(test.comparators[0], ast.Constant) \
            and isinstance(test.comparators[0].value, str):
        return test.comparators[0].value
    return None


def _names_lists_otherwise(stmts: list[ast.stmt], lists: set[str]) -> bool:
    """Whether `stmts` name an op list otherwise than as `<list>.append(...)`."""
    appended = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr == "append" and isinstance(n.func.value, ast.Name):
                appended.add(id(n.func.value))
    return any(isinstance(n, ast.Name) and n.id in lists and id(n) not in appended
               for s in stmts for n in ast.walk(s))


def _sample_loop_unmodelled(cls: ast.ClassDef) -> tuple[str | None, dict[str, str]]:
    """What test_output_match's sample loop does beside running `_run_op`, setting atol/rtol
    (porter.harness.tolerances cuts those out) and comparing: (why for every op, {op: why}).
    A statement that changes what is compared or skips the comparison (review 30's T07: `mps_out
    = mps_out * 0`; T08: a `continue`) is not proven, for the ops of an `op.name == "x"` branch
    alone where it is under one (upstream's kthvalue branch compares otherwise)."""
    method = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == TEST_NAME),
                  None)
    loop = next((n for n in ast.walk(method) if isinstance(n, ast.For)
                 and isinstance(n.iter, ast.Call) and isinstance(n.iter.func, ast.Attribute)
                 and n.iter.func.attr == "sample_inputs"), None) if method else None
    if loop is None:
        return None, {}          # the tolerances' reader says the loop is missing
    gated: dict[str, str] = {}
    # the names the comparison reads: the loop's sample and what `_run_op` gives
    compared = {loop.target.id} if isinstance(loop.target, ast.Name) else set()
    for x in ast.walk(loop):
        if isinstance(x, ast.Assign) and isinstance(x.value, ast.Call) and \
                isinstance(x.value.func, ast.Attribute) and x.value.func.attr == RUN_OP:
            compared |= {n.id for t in x.targets for n in ast.walk(t) if isinstance(n, ast.Name)}

    def why(node: ast.AST, what: str) -> str:
        return (f"{TEST_MPS}:{node.lineno}: {TEST_NAME}'s `{ast.unparse(node).splitlines()[0][:70]}` "
                f"{what}, which porter does not model")

    def tolerance_only(stmts) -> bool:
        return all(isinstance(x, ast.Assign) and all(
            isinstance(t, (ast.Name, ast.Tuple)) and {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            <= {"atol", "rtol"} for t in x.targets)
            or isinstance(x, ast.If) and tolerance_only(x.body) and tolerance_only(x.orelse)
            for x in stmts)

    def visit(stmts) -> str | None:
        for x in stmts:
            if isinstance(x, ast.Expr) and isinstance(x.value, ast.Constant):
                continue
            if isinstance(x, ast.Assign) and isinstance(x.value, ast.Call) and \
                    isinstance(x.value.func, ast.Attribute) and x.value.func.attr == RUN_OP:
                continue
            if isinstance(x, ast.Expr) and isinstance(x.value, ast.Call) and \
                    isinstance(x.value.func, ast.Attribute) and x.value.func.attr == "assertEqual":
                continue
            if tolerance_only([x]):
                continue
            if isinstance(x, ast.Assign) and isinstance(x.value, ast.Constant) and all(
                    isinstance(t, ast.Name) and t.id not in compared for t in x.targets):
                continue            # a local set to a constant (upstream's `opt_dtype = None`)
            if isinstance(x, ast.If):
                names = _op_names(x.test, "op")
                if names is not None:
                    for name in names:
                        gated.setdefault(name, why(x, "runs for this op"))
                    found = visit(x.orelse)
                else:
                    found = visit(x.body) or visit(x.orelse)
                if found:
                    return found
                continue
            return why(x, "does more than compare")
        return None

    return visit(loop.body), gated


class _RunOp:
    """One reading of a `_run_op` method (run_op_unmodelled)."""

    def __init__(self, fn: ast.FunctionDef):
        params = [a.arg for a in fn.args.args]
        self.fn = fn
        self.op = params[1] if len(params) > 1 else None
        self.sample = params[2] if len(params) > 2 else None
        self.roles: dict[str, str] = {}     # local name -> mps | cpu | cpu_sample | dtype | ...
        self.gated: dict[str, str] = {}

    def read(self) -> tuple[str | None, dict[str, str]]:
        if self.op is None or self.sample is None:
            return self._why(self.fn, "takes other parameters than (self, op, mps_sample)"), {}
        self.roles[self.sample] = "mps_sample"
        if self.fn.args.args[3:]:
            self.roles[self.fn.args.args[3].arg] = "dtype"
        found = self._block(self.fn.body)
        return found, self.gated

    def _why(self, node: ast.AST, what: str) -> str:
        text = ast.unparse(node).splitlines()[0][:80]
        return (f"{TEST_MPS}:{node.lineno}: {RUN_OP}'s `{text}` {what}: porter does not model "
                "it (it runs the op on the sample and on its CPU copy, as upstream's does)")

    def _block(self, stmts: list[ast.stmt]) -> str | None:
        for stmt in stmts:
            found = self._stmt(stmt)
            if found is not None:
                return found
        return None

    def _stmt(self, s: ast.stmt) -> str | None:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            return None                                     # a docstring
        if isinstance(s, ast.Expr) and _is_warnings_call(s.value):
            return None
        if isinstance(s, ast.Pass) or isinstance(s, ast.Raise):
            return None
        if isinstance(s, ast.If):
            names = _op_names(s.test, self.op)
            if names is not None:
                for name in names:
                    self.gated.setdefault(name, self._why(s, "runs for this op"))
                return self._block(s.orelse)
            return self._block(s.body) or self._block(s.orelse)
        if isinstance(s, ast.With) and all(_is_warnings_call(i.context_expr) for i in s.items):
            return self._block(s.body)
        if isinstance(s, ast.Try) and not s.finalbody:
            return (self._block(s.body) or self._block(s.orelse)
                    or next((f for h in s.handlers for f in [self._block(h.body)] if f), None))
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
            # the op and the sample it is given stay what the test passes
            role = self._role(s.value) if s.targets[0].id not in (self.op, self.sample) else None
            if role is not None and self.roles.get(s.targets[0].id, role) != role:
                # read flow-insensitively: a name that holds the MPS output on one path and
                # the CPU output on another (review 30's T17) is not modelled
                return self._why(s, "gives a name another meaning")
            if role is not None:
                self.roles[s.targets[0].id] = role
                return None
            return self._why(s, "computes a value")
        if isinstance(s, ast.Return):
            return None if self._returns(s.value) else self._why(s, "returns another value")
        return self._why(s, "does more")

    def _role(self, value: ast.expr) -> str | None:
        """What an assigned value is, or None where it is none of the modelled ones."""
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and \
                value.value.id == "torch":
            return "dtype"                                  # dtype = torch.float32
        if isinstance(value, ast.Call):
            f = value.func
            if isinstance(f, ast.Name) and f.id == "transform_opinfo_sample_to_cpu" and \
                    value.args and self._is(value.args[0], "mps_sample"):
                return "cpu_sample"
            if isinstance(f, ast.Attribute) and f.attr == "transform" and \
                    self._is(f.value, "mps_sample") and len(value.args) == 1 and \
                    ast.unparse(value.args[0]) == _CPU_COPY:
                return "cpu_sample"     # the lambda as written; another may change the inputs
            if isinstance(f, ast.Attribute) and f.attr == "to" and self._is(f.value, "cpu") and \
                    not value.args:
                return "cpu"                                # cpu_out.to(dtype=mps_out.dtype)
            return self._op_call(value)
        return None

    def _op_call(self, call: ast.Call) -> str | None:
        """mps or cpu for `op(S.input, *S.args, **S.kwargs)` of the sample or its CPU copy."""
        if not (isinstance(call.func, ast.Name) and call.func.id == self.op):
            return None
        if len(call.args) != 2 or len(call.keywords) != 1:
            return None
        first, star, kw = call.args[0], call.args[1], call.keywords[0]
        if not (isinstance(first, ast.Attribute) and first.attr == "input" and
                isinstance(first.value, ast.Name) and isinstance(star, ast.Starred) and
                kw.arg is None):
            return None
        sample = first.value.id
        spelled = (isinstance(star.value, ast.Attribute) and star.value.attr == "args" and
                   _named(star.value.value, sample) and isinstance(kw.value, ast.Attribute) and
                   kw.value.attr == "kwargs" and _named(kw.value.value, sample))
        role = self.roles.get(sample)
        if not spelled or role not in ("mps_sample", "cpu_sample"):
            return None
        return "mps" if role == "mps_sample" else "cpu"

    def _returns(self, value: ast.expr | None) -> bool:
        if not isinstance(value, ast.Tuple) or len(value.elts) != 3:
            return False
        roles = [self._role(e) if isinstance(e, ast.Call) else
                 self.roles.get(e.id) if isinstance(e, ast.Name) else None for e in value.elts]
        return sorted(r for r in roles if r) == ["cpu", "cpu_sample", "mps"]

    def _is(self, node: ast.expr, role: str) -> bool:
        return isinstance(node, ast.Name) and self.roles.get(node.id) == role


def _named(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_warnings_call(node: ast.expr) -> bool:
    """`warnings.catch_warnings()`, `warnings.filterwarnings(...)`, `warnings.simplefilter(...)`."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
            _named(node.func.value, "warnings") and
            node.func.attr in ("catch_warnings", "filterwarnings", "simplefilter"))


def _op_names(test: ast.expr, op: str) -> list[str] | None:
    """The op names a condition holds only for: a conjunct `op.name == "x"` or `op.name in
    ["x", ...]` (None where it has none, and so may hold for any op)."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) \
        else [test]
    for c in conjuncts:
        if not (isinstance(c, ast.Compare) and len(c.ops) == 1 and
                isinstance(c.left, ast.Attribute) and c.left.attr == "name" and
                _named(c.left.value, op)):
            continue
        right = c.comparators[0]
        if isinstance(c.ops[0], ast.Eq) and isinstance(right, ast.Constant) and \
                isinstance(right.value, str):
            return [right.value]
        if isinstance(c.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)) and \
                all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts):
            return [e.value for e in right.elts]
    return None
