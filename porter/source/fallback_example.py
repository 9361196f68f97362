"""The op test_mps.py's TestFallbackWarning runs as one without an MPS kernel.

`_get_not_implemented_op` returns the call and the schema it waits a fallback warning for
(`torch.lcm` upstream once, `"aten::heaviside.out"` in porter's fixture); once the op it names
has an MPS kernel, that test fails on a Mac. Read with `ast`: the file imports MPS-only code.
"""

from __future__ import annotations

import ast

FUNCTION = "_get_not_implemented_op"


def named_ops(text: str) -> tuple[int, list[str]] | None:
    """(the function's line, the ops it names by an `aten::NAME` string or a `torch.NAME`
    reference, in order), or None where the file has no such function or does not parse."""
    try:
        module = ast.parse(text)
    except SyntaxError:
        return None
    for fn in ast.walk(module):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == FUNCTION):
            continue
        named = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.startswith("aten::"):
                named.append(node.value.removeprefix("aten::").split(".")[0])
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id == "torch":
                named.append(node.attr)
        return fn.lineno, list(dict.fromkeys(named))
    return None
