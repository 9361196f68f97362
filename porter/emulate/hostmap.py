"""Which Metal kernel an op runs, read from the host .mm files of the checkout.

UnaryKernel.mm: `REGISTER_UNARY_TI_DISPATCH(name)` runs kernel `name` for stub `name_stub`.
Both files: `static void fn(...) { ... exec_{unary,binary,ternary}_kernel(iter, "kernel" ...) }`
plus `REGISTER_DISPATCH(stub, &fn)`. The op is the stub without `_stub` (`special_erfcx_stub`
-> `special.erfcx`). Each .mm pairs with the .metal of the same stem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from porter.checkout import KERNELS, OPERATIONS

_TI = re.compile(r"^REGISTER_UNARY_TI_DISPATCH\((\w+)\)", re.M)
_FN = re.compile(r"^static\s+void\s+(\w+)\s*\(([^)]*)\)\s*\{", re.M)
_EXEC = re.compile(r"exec_(unary|binary|ternary)_kernel\s*\(\s*\w+\s*,\s*\"(\w+)\"\s*(,)?")
_DISPATCH = re.compile(r"REGISTER_DISPATCH\(\s*(\w+)_stub\s*,\s*&?(\w+)\s*\)")
# stubs whose op (OpInfo name) is not the stub's name
STUB_OPS = {"div_true": "div", "div_floor": "div", "div_trunc": "div",
            "round_decimals": "round", "lerp_kernel_scalar_weight": "lerp",
            "pow_tensor_scalar": "pow", "pow_tensor_tensor": "pow"}


@dataclass(frozen=True)
class HostKernel:
    op: str           # OpInfo-style name ("special.erfcx", "div")
    stub: str         # "special_erfcx"
    kernel: str       # kernel name in the .metal ("erfcx")
    metal: Path       # the paired .metal file
    has_scalar: bool  # the host passes a Scalar (alpha, decimals)


def op_name(stub: str) -> str:
    if stub in STUB_OPS:
        return STUB_OPS[stub]
    if stub.startswith("special_"):
        return "special." + stub[len("special_"):]
    return stub


def _function_bodies(text: str) -> dict[str, str]:
    bodies = {}
    for m in _FN.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        bodies[m.group(1)] = text[m.end():i]
    return bodies


def host_kernels(root: Path) -> list[HostKernel]:
    root = Path(root)
    found: list[HostKernel] = []
    for mm in sorted((root / OPERATIONS).glob("*Kernel.mm")):
        metal = root / KERNELS / f"{mm.stem}.metal"
        if not metal.is_file():
            continue
        text = mm.read_text(encoding="utf-8", errors="replace")
        for m in _TI.finditer(text):
            found.append(HostKernel(op_name(m.group(1)), m.group(1), m.group(1), metal, False))
        bodies = _function_bodies(text)
        for m in _DISPATCH.finditer(text):
            stub, fn = m.group(1), m.group(2)
            ex = _EXEC.search(bodies.get(fn, ""))
            if ex:
                found.append(HostKernel(op_name(stub), stub, ex.group(2), metal, bool(ex.group(3))))
    return found


def kernels_for_op(root: Path, op: str) -> list[HostKernel]:
    return [k for k in host_kernels(root) if k.op == op]
