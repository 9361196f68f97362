"""A structured op's functions in aten/src/ATen/native/*.cpp, and what they say: where
`TORCH_META_FUNC(op)` and `TORCH_IMPL_FUNC(op_out)` are defined (located once for every reader:
the stub calls in porter.source.stub_route, the iterator below), which tensors the meta
function's iterator reads in which order (`iterator_inputs`), and which stubs an impl function
calls (`impl_stubs`). The CPU kernels those stubs run are porter.source.cpu_kernel's."""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, matching_close, split_top_level


# Structured kernels and the stubs they call, in native/*.cpp.
IMPL_MACRO_RE = re.compile(r"CREATE_\w*TORCH_IMPL_FUNC\(\s*(\w+)\s*,\s*(\w+)\s*\)")
IMPL_BODY_RE = re.compile(r"TORCH_IMPL_FUNC\(\s*(\w+)\s*\)[^{]*\{(.*?)\n\}", re.S)
STUB_CALL_RE = re.compile(r"\b(\w+_stub)\s*\(\s*device_type\(\)")


class NativeDefinition(NamedTuple):
    """`MACRO(name)(params) { body }` in a native/*.cpp: offsets into `mask` (its code mask)."""
    path: str
    text: str
    mask: str
    params_open: int       # the parameter list's "("
    params_close: int      # its ")", -1 when unbalanced
    body_open: int         # the body's "{", -1 when missing
    body_close: int        # its "}", -1 when unbalanced


def native_definition(checkout: co.Checkout, macro: str, name: str) -> NativeDefinition | None:
    """The first `TORCH_META_FUNC(name)` / `TORCH_IMPL_FUNC(name)` (as `macro` says) defined in
    aten/src/ATen/native/*.cpp, files in sorted order; None where no file defines it."""
    head = re.compile(rf"\b{macro}\(\s*{re.escape(name)}\s*\)")
    for rel in sorted(checkout.glob(co.NATIVE, "*.cpp")):
        text = checkout.read(rel)
        if name not in text:
            continue
        mask = code_mask(text)
        m = head.search(mask)
        if not m:
            continue
        paren = mask.find("(", m.end())
        close = matching_close(mask, paren) if paren >= 0 else -1
        brace = mask.find("{", close) if close >= 0 else -1
        end = matching_close(mask, brace) if brace >= 0 else -1
        return NativeDefinition(rel, text, mask, paren, close, brace, end)
    return None


def impl_stubs(text: str) -> dict[str, list[str]]:
    """Structured kernel (`heaviside_out`) -> the stubs its TORCH_IMPL_FUNC calls, in a .cpp."""
    found: dict[str, list[str]] = {}
    for m in IMPL_MACRO_RE.finditer(text):
        found.setdefault(m.group(1), []).append(m.group(2))
    for m in IMPL_BODY_RE.finditer(text):
        found.setdefault(m.group(1), []).extend(STUB_CALL_RE.findall(m.group(2)))
    return found


BUILD_OP_RE = re.compile(r"\bbuild_(?:borrowing_)?(?:unary|binary)\w*_op\(\s*[^,()]*(?:\(\))?\s*,([^;]*)\)\s*;")


def iterator_inputs(checkout: co.Checkout, op: str) -> tuple[int, ...] | None:
    """Which of `TORCH_META_FUNC(op)`'s tensor parameters its iterator reads, in the iterator's
    order (the kernel's operands): threshold_backward(grad, self, ...) adds `self` then `grad`,
    (1, 0); threshold(self, ...) adds self twice, (0, 0); None when porter cannot read it."""
    found = native_definition(checkout, "TORCH_META_FUNC", op)
    if found is None or found.body_close < 0:
        return None
    mask = found.mask
    tensors = [p.split()[-1].lstrip("&*")
               for p in split_top_level(mask[found.params_open + 1:found.params_close])
               if "Tensor" in p and p.split()]
    body = mask[found.body_open:found.body_close]
    names = re.findall(r"\.add_(?:const_|owned_)?input\(\s*(\w+)\s*\)", body)
    if not names:
        built = BUILD_OP_RE.search(body)
        names = [a.strip() for a in split_top_level(built.group(1))] if built else []
    if not names or any(n not in tensors for n in names):
        return None
    return tuple(tensors.index(n) for n in names)
