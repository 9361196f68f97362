"""What the checkout's host kernel library (`mps/MetalShaderLibrary.h`) offers a host function:
which `exec_*_kernel` calls compile on a Mac. torch 2.13's `exec_ternary_kernel(iter, name)` takes
no scalar; upstream added one with its addcmul port."""

from __future__ import annotations

import re

from porter.source import checkout as co

LIBRARY_HEADER = f"{co.NATIVE}/mps/MetalShaderLibrary.h"
TERNARY_DECL_RE = re.compile(r"\bvoid\s+exec_ternary_kernel\s*\(([^;{]*)\)")


def ternary_takes_scalar(read, exists) -> bool | None:
    """Whether the library declares an exec_ternary_kernel taking a Scalar; None when the
    checkout has no such header to tell (`read`/`exists`: the checkout's, by relative path)."""
    if not exists(LIBRARY_HEADER):
        return None
    decls = TERNARY_DECL_RE.findall(read(LIBRARY_HEADER))
    if not decls:
        return None
    return any("Scalar" in d for d in decls)


LIBRARY_DEFINITION_RE = re.compile(r"^void\s+MetalShaderLibrary::exec_ternary_kernel\s*\(", re.M)


def ternary_definition_file(read, glob) -> str | None:
    """The .mm of `mps/` that defines MetalShaderLibrary::exec_ternary_kernel (OperationUtils.mm
    in torch 2.13), where a scalar overload would be defined beside it; None where none does
    (`glob`: the checkout's, folder and pattern)."""
    for rel in sorted(glob(f"{co.NATIVE}/mps", "*.mm")):
        if LIBRARY_DEFINITION_RE.search(read(rel)):
            return rel
    return None
