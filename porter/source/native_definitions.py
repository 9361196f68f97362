"""Where a structured op's functions are defined: `TORCH_META_FUNC(op)` and `TORCH_IMPL_FUNC(op_out)`
in aten/src/ATen/native/*.cpp, located once for every reader (the iterator's operand order in
porter.source.cpu_kernel, the stub calls in porter.source.stub_route)."""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, matching_close


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
