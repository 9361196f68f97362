"""What in the checkout's test code changes a Mac's `test_output_match` beyond what porter reads
of it (the expectation lists, the tolerance rules): then the op's verdict is "not proven".

- A kernel registered with the dispatcher from Python (`torch.library.Library("aten", "IMPL")
  .impl("heaviside", ...)`) in common_mps.py or test/test_mps.py, which the test imports: it
  replaces the MPS kernel or the CPU reference on a Mac (review 28's R08, R09).
- test_output_match's `@ops(mps_ops_modifier(...))` called otherwise than upstream calls it (with
  the op list alone): `sparse=True` applies the sparse lists porter leaves out, `xfail_exclusion`
  drops entries porter applies (review 28's X08, X07).
"""

from __future__ import annotations

import ast

from porter.source.checkout import COMMON_MPS, TEST_MPS, Checkout

MODIFIER = "mps_ops_modifier"
TEST_NAME = "test_output_match"


def unmodelled(checkout: Checkout) -> str | None:
    """`file:line: why` of the first such code, or None."""
    for rel in (COMMON_MPS, TEST_MPS):
        if not checkout.exists(rel):
            continue
        try:
            tree = ast.parse(checkout.read(rel))
        except SyntaxError:
            continue            # the expectations' reader says so, with the line
        # of test_mps.py, what runs for test_output_match: its module-level code and the
        # TestConsistency classes (upstream's other test classes may use torch.library in
        # their own tests)
        scope = tree if rel != TEST_MPS else ast.Module(body=[
            n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))
            or isinstance(n, ast.ClassDef) and n.name.startswith("TestConsistency")], type_ignores=[])
        found = _registration(scope) or (_modifier_call(tree) if rel == TEST_MPS else None)
        if found is not None:
            line, why = found
            return f"{rel}:{line}: {why}"
    return None


def _registration(tree: ast.Module) -> tuple[int, str] | None:
    """A use of `torch.library` or its `Library`: Python's way to register a kernel."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names]
            if any(n == "torch.library" or n.startswith("torch.library.") or n == "Library"
                   for n in names):
                return node.lineno, _REGISTERS
        if isinstance(node, ast.Attribute) and node.attr == "library" and \
                isinstance(node.value, ast.Name) and node.value.id == "torch":
            return node.lineno, _REGISTERS
    return None


_REGISTERS = ("the test code uses torch.library, Python's way to register a kernel with the "
              "dispatcher: on a Mac it may replace the MPS kernel or the CPU reference, which "
              "porter does not model")


def _modifier_call(tree: ast.Module) -> tuple[int, str] | None:
    """test_output_match's `mps_ops_modifier(...)` with more than the op list."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == TEST_NAME:
            for call in (n for d in node.decorator_list for n in ast.walk(d)):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and \
                        call.func.id == MODIFIER and (len(call.args) > 1 or call.keywords):
                    return call.lineno, (f"{TEST_NAME} takes its ops from `{ast.unparse(call)[:80]}`, "
                                         f"which porter does not model (it reads {MODIFIER} "
                                         "called with the op list alone, as upstream calls it)")
    return None
