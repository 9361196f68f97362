"""Which function names the checkout's `mps/` sources define: what an `MPS: x_mps` row of
native_functions.yaml links against on a Mac (porter check's PORTER002, the emulator's verdict
on an op whose row names a function that is gone)."""

from __future__ import annotations

import re

from porter.source import checkout as co

MPS_SOURCES = ("*.mm", "*.cpp")
# Column-0 definitions of a function, the way upstream writes them.
IMPL_FUNC_RE = re.compile(r"^TORCH_IMPL_FUNC\(\s*(\w+)\s*\)", re.M)
MACRO_DEF_RE = re.compile(r"^[A-Z][A-Z0-9_]*\(\s*(\w+)\s*[,)]", re.M)
FUNCTION_DEF_RE = re.compile(
    r"^(?:static\s+|inline\s+|TORCH_API\s+)*(?:const\s+)?[A-Za-z_][\w:<>,&* ]*?[\s&*>](\w+)\s*\(", re.M)


def defined_names(texts) -> set[str]:
    """Names defined at column 0 of the given mps/ source texts (a cheap over-approximation: a
    declaration also counts, so only a name without any trace reads as undefined)."""
    names: set[str] = set()
    for text in texts:
        if "_mps" not in text:
            continue
        names.update(IMPL_FUNC_RE.findall(text))
        names.update(MACRO_DEF_RE.findall(text))
        names.update(FUNCTION_DEF_RE.findall(text))
    return names


def mps_source_paths(checkout: co.Checkout) -> list[str]:
    rels: list[str] = []
    for pattern in MPS_SOURCES:
        rels += checkout.glob(co.MPS, f"**/{pattern}")
    return sorted(set(rels))
