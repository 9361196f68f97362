"""DispatchStubs declared in `aten/src/ATen/native/*.h` and the function-pointer types they take."""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, line_of, matching_close, split_top_level

BUILTIN_WORDS = {"int", "long", "short", "char", "double", "float", "bool", "signed", "unsigned"}
USING_RE = re.compile(r"\busing\s+(\w+)\s*=\s*([^;]+);")
DECLARE_RE = re.compile(r"\bDECLARE_DISPATCH\s*\(")


class Stub(NamedTuple):
    name: str          # "heaviside_stub"
    fn_type: str       # "structured_binary_fn" or a spelled-out pointer type
    signature: str     # "void(*)(TensorIteratorBase&)" after resolving `using`
    header: str        # path relative to the checkout
    line: int

    @property
    def params(self) -> list[str]:
        """Parameter types of the kernel function, e.g. ["TensorIteratorBase&"]."""
        m = re.search(r"\(\s*\*\s*\)\s*\((.*)\)\s*$", self.signature, re.S)
        if not m or not m.group(1).strip():
            return []
        return [" ".join(p.split()) for p in split_top_level(m.group(1))]

    @property
    def iterator_type(self) -> str | None:
        """`TensorIteratorBase` or `TensorIterator` when the first parameter is one."""
        params = self.params
        if params and re.match(r"(const\s+)?TensorIterator(Base)?\s*&", params[0]):
            return params[0].replace("const", "").replace("&", "").strip()
        return None


# Upstream writes each declaration on one line: such headers are read without masking the file.
DECLARE_LINE_RE = re.compile(r"^[ \t]*DECLARE_DISPATCH\((.*),\s*(\w+)\s*\)\s*;?[ \t]*(?://[^\n]*)?$", re.M)


def parse_header(text: str, rel: str) -> dict[str, Stub]:
    lines = DECLARE_LINE_RE.findall(text)
    if text.count("DECLARE_DISPATCH(") == len(lines) + text.count("define DECLARE_DISPATCH"):
        return _parse_one_line_declarations(text, rel)
    return _parse_masked(text, rel)


def _parse_one_line_declarations(text: str, rel: str) -> dict[str, Stub]:
    usings = {m.group(1): " ".join(code_mask(m.group(2)).split()) for m in USING_RE.finditer(text)}
    out = {}
    for m in DECLARE_LINE_RE.finditer(text):
        fn_type, name = " ".join(m.group(1).split()), m.group(2)
        out[name] = Stub(name, fn_type, usings.get(fn_type, fn_type), rel, line_of(text, m.start()))
    return out


def _parse_masked(text: str, rel: str) -> dict[str, Stub]:
    mask = code_mask(text)
    usings = {m.group(1): " ".join(m.group(2).split()) for m in USING_RE.finditer(mask)}
    stubs = {}
    for m in DECLARE_RE.finditer(mask):
        open_at = m.end() - 1
        close = matching_close(mask, open_at)
        line_start = mask.rfind("\n", 0, m.start()) + 1
        if close < 0 or mask[line_start:m.start()].lstrip().startswith("#define"):
            continue
        args = split_top_level(mask[open_at + 1:close])
        if len(args) != 2 or not args[1].isidentifier():
            continue
        fn_type, name = " ".join(args[0].split()), args[1]
        stubs[name] = Stub(name, fn_type, usings.get(fn_type, fn_type), rel, line_of(text, m.start()))
    return stubs


def declared_stubs(checkout: co.Checkout) -> dict[str, Stub]:
    """Every stub declared in the checkout's `aten/src/ATen/native/*.h` (not subfolders)."""
    stubs: dict[str, Stub] = {}
    for rel in checkout.glob(co.NATIVE, "*.h"):
        text = checkout.read(rel)
        if "DECLARE_DISPATCH" in text:
            for name, stub in parse_header(text, rel).items():
                stubs.setdefault(name, stub)
    return stubs


def param_types(params: str) -> list[str]:
    params = params.strip()
    if not params or params == "void":
        return []
    return [param_type(p) for p in split_top_level(params)]


def param_type(param: str) -> str:
    """`const Scalar& alpha = 1` -> `const Scalar&`; `at::TensorIteratorBase &iter` -> `TensorIteratorBase&`."""
    p = param.split("=", 1)[0]
    p = re.sub(r"\b(?:at|c10)::", "", p)
    p = " ".join(p.split())
    m = re.match(r"^(.*?[\w>&*\]])\s*\b([A-Za-z_]\w*)$", p)
    if m and m.group(2) not in BUILTIN_WORDS and m.group(1).strip() not in ("const", "unsigned", "signed"):
        p = m.group(1)
    p = re.sub(r"\s*([&*])\s*", r"\1", p).strip()
    # `const int64_t order` takes what `int64_t order` takes: a by-value parameter's own const is
    # not part of the function's type (C++ [dcl.fct]), so both match `void(*)(..., int64_t)`
    return p[len("const "):] if p.startswith("const ") and not p.endswith(("&", "*")) else p
