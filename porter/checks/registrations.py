"""MPS `REGISTER_DISPATCH` lines against the `DECLARE_DISPATCH` stubs (PORTER020-PORTER022).

In .mm files REGISTER_DISPATCH becomes `stub.set_mps_dispatch_ptr(fn)`: a stub registered
from two translation units resolves silently by static-init order, and a kernel taking
`TensorIterator&` where the stub passes `TensorIteratorBase&` fails only at compile time.
"""

from __future__ import annotations

import difflib
import re

from porter.checks.model import Finding
from porter.checks.tree import Tree
from porter.source.stubs import param_type, param_types


def check(tree: Tree) -> list[Finding]:
    return (undeclared_stubs(tree) + double_registrations(tree) + signature_mismatches(tree)
            + kernels_never_run(tree))


def kernels_never_run(tree: Tree) -> list[Finding]:
    """A registered host function whose exec_*_kernel call the compiler never sees (a comment,
    `#if 0`) or a run never reaches (after its unconditional return): on a Mac the op's output
    is never written, though the function and its registration still compile."""
    found = []
    for stub, rel, line, function, via_macro in tree.registrations:
        fn = None if via_macro else tree.hosts[rel].kernel_functions.get(function.split("::")[-1].lstrip("&"))
        if fn is None or fn.running_calls:
            continue
        after = [c for c in fn.calls if c.after_return]
        if after:
            where, why = after[0].line, f"follows the unconditional return on line {after[0].after_return}"
        elif fn.disabled:
            where, why = fn.disabled[0], "is in a comment or in code the preprocessor drops"
        else:
            continue        # no exec_*_kernel at all: host code of its own (frexp's), not read here
        found.append(Finding(
            "PORTER024", rel, where,
            f"{fn.name}, registered on {stub}, runs no Metal kernel: its exec_*_kernel call {why}; "
            "on a Mac the output is never written",
            "restore the call", tree.stub_op(stub)))
    return found


def undeclared_stubs(tree: Tree) -> list[Finding]:
    found = []
    for stub, rel, line, function, via_macro in tree.registrations:
        if tree.stub(stub) is not None:
            continue
        close = difflib.get_close_matches(stub, tree.declared_stub_names(), n=1, cutoff=0.8)
        hint = (f"did you mean {close[0]}?" if close else
                "declare it with DECLARE_DISPATCH(<fn type>, " + stub + ") in aten/src/ATen/native/<X>.h")
        found.append(Finding("PORTER020", rel, line,
                             f"{function} is registered on {stub}, which no DECLARE_DISPATCH declares",
                             hint, tree.stub_op(stub)))
    return found


def double_registrations(tree: Tree) -> list[Finding]:
    by_stub: dict[str, list[tuple]] = {}
    for reg in tree.registrations:          # path, line order
        by_stub.setdefault(reg[0], []).append(reg)
    found = []
    for stub, regs in by_stub.items():
        if len(regs) < 2:
            continue
        first = tree.original(regs, lambda reg: reg[1:3])
        _, rel0, line0, function0, _ = first
        for reg in regs:
            if reg is first:
                continue
            _, rel, line, function, _ = reg
            graph = [r for r in (first, reg) if r[3].startswith("mps_") and r[3].endswith("_kernel")]
            if graph:
                hint = (f"delete the REGISTER_MPS_UNARY_STUB line at {graph[0][1]}:{graph[0][2]} "
                        "(it still routes the stub to MPSGraph)")
            else:
                hint = "keep one registration"
            found.append(Finding("PORTER021", rel, line,
                                 f"{stub} is registered again ({function}); it is already registered at "
                                 f"{rel0}:{line0} ({function0}); static-init order picks one silently",
                                 hint, tree.stub_op(stub)))
    return found


def signature_mismatches(tree: Tree) -> list[Finding]:
    found = []
    for stub_name, rel, line, function, via_macro in tree.registrations:
        stub = tree.stub(stub_name)
        if stub is None or not stub.signature.startswith("void"):
            continue
        host = tree.hosts[rel]
        name = function.split("::")[-1].lstrip("&").strip()
        where = line
        if via_macro:
            params = _macro_params(host.text, name)
        else:
            fn = host.kernel_functions.get(name)
            params = fn.params if fn else None
            where = fn.line if fn else line
        if params is None:
            continue
        got = param_types(params)
        want = [param_type(p) for p in stub.params]
        if got == want:
            continue
        found.append(Finding(
            "PORTER022", rel, where,
            f"{name}({', '.join(got)}) is registered on {stub_name}, whose type is "
            f"{_type_text(stub)} ({stub.header}:{stub.line})",
            f"make {name} take ({', '.join(want)})", tree.stub_op(stub_name)))
    return found


def _type_text(stub) -> str:
    return stub.signature if stub.fn_type == stub.signature else f"{stub.fn_type} = {stub.signature}"


def _macro_params(text: str, function: str) -> str | None:
    """Parameters of a kernel function a registration macro generates (`NAME##_kernel_mps`)."""
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(\s*(\w+)\s*(?:,[^)]*)?\)((?:[^\n]*\\\n)*[^\n]*)",
                         text, re.M):
        param, body = m.group(2), m.group(3)
        fn = re.search(r"\bvoid\s+([\w#]+)\s*\(([^)]*)\)", body)
        if not fn:
            continue
        pattern = "".join(r"\w+" if part == param else re.escape(part)
                          for part in fn.group(1).split("##"))
        if re.fullmatch(pattern, function):
            return " ".join(fn.group(2).replace("\\", " ").split())
    return None
