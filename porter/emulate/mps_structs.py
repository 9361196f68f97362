"""The declarations a Mac's codegen writes for the MPS backend's structured kernels, which the
installed torch's headers lack.

`TORCH_IMPL_FUNC(sign_out_mps)(...) {...}` defines `at::native::structured_sign_out_mps::impl`.
On a Mac the struct is declared in the generated `ATen/ops/sign_native.h`; the CPU wheel's
copy of that header was generated without the MPS backend, so it declares only the CPU/CUDA
kernel's struct (`structured_sign_out`). Without the declaration clang set aside the whole
body of every MPSGraph `TORCH_IMPL_FUNC`: a call of a deleted helper, or any other mistake in
it, was never read (review 22's BH2, BH8: green).

torchgen, which writes those headers, is run on the checkout's own native_functions.yaml for
the MPS dispatch key (`compute_native_function_declaration`, the generator's own function), and
the structs a file's text names are declared before the parse reads it. The result is kept in
porter's cache by the yaml's content (porter.emulate.yaml_verdict), as torchgen's verdict is.
"""

from __future__ import annotations

import re
from pathlib import Path

from porter.emulate.yaml_verdict import recorded

_STEPS = b"mps structured declarations 3"
# what the generated per-op native.h includes before its declarations
_NATIVE_INCLUDES = ("c10/core/Scalar.h", "c10/core/Storage.h", "c10/core/TensorOptions.h",
                    "ATen/core/Reduction.h", "ATen/core/Tensor.h", "optional", "tuple", "vector")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def header(root: Path, text: str) -> str | None:
    """The declarations of the MPS kernels the `.mm` file's `text` names: a structured one's
    struct (`sign_out_mps`, as `TORCH_IMPL_FUNC` or a macro of it is given it), after its op's
    meta header where the installed torch has one, and a non-structured one's function; None
    where the text names none."""
    found = recorded(Path(root), _STEPS, _declarations)
    known, functions = found.get("structs") or {}, found.get("functions") or {}
    named = set(_IDENTIFIER.findall(text))
    wanted = sorted(name for name in known if name in named)
    plain = sorted(name for name in functions if name in named)
    if not wanted and not plain:
        return None
    blocks = ["// porter: the MPS backend's kernels, as a Mac's codegen declares them",
              "#pragma once"]
    if plain:
        # a non-structured kernel (`Tensor mish_backward_mps(...)`): the generated registration
        # calls this signature, so a definition of another one fails the link on a Mac (the
        # parse's child checks: host_compile._undeclared_signatures)
        blocks += [f"#include <{h}>" for h in _NATIVE_INCLUDES]
        blocks += ["namespace at { namespace native {",
                   *(functions[name].strip() for name in plain), "} }"]
    for name in wanted:
        meta, declaration = known[name]
        # an op the installed torch lacks has no meta header here: its struct stays undeclared
        # (the parse says so, as of any name the wheel lacks)
        blocks += [f"#if __has_include(<{meta}>)", f"#include <{meta}>",
                   "namespace at { namespace native {", declaration.strip(), "} }", "#endif"]
    return "\n".join(blocks) + "\n"


def _declarations(root: Path) -> dict:
    """{"structs": {impl name: [meta header, declaration]}} for each structured group whose MPS
    kernel is not also a CPU or CUDA kernel (those the wheel's headers declare); {} where
    torchgen cannot parse the yaml (its verdict says so elsewhere)."""
    try:
        from torchgen.dest.native_functions import compute_native_function_declaration
        from torchgen.model import DispatchKey, NativeFunctionsGroup
    except ImportError:
        return {}
    from porter.checks.torchgen_child import parse_and_group
    try:
        parsed, grouped = parse_and_group(root)
    except Exception:        # torchgen's rejection is porter.emulate.yaml_verdict's to report
        return {}
    indices = parsed.backend_indices
    mps = indices.get(DispatchKey.MPS)
    if mps is None:
        return {}
    structs: dict[str, list[str]] = {}
    functions: dict[str, str] = {}
    seen: set[str] = set()

    def shared_with_cpu_or_cuda(f, name: str) -> bool:
        return any(key in indices and (m := indices[key].get_kernel(f)) is not None
                   and m.kernel == name for key in (DispatchKey.CPU, DispatchKey.CUDA))

    for group in grouped:
        if not isinstance(group, NativeFunctionsGroup) or not group.structured:
            members = group.functions() if isinstance(group, NativeFunctionsGroup) else [group]
            for f in members:
                kernel = mps.get_kernel(f)
                if kernel is None or shared_with_cpu_or_cuda(f, kernel.kernel):
                    continue
                declared = compute_native_function_declaration(f, mps)
                if len(declared) == 1 and f" {kernel.kernel}(" in declared[0]:
                    # one declaration per name: overloads of one name are left undeclared
                    if kernel.kernel in seen:
                        functions.pop(kernel.kernel, None)
                    else:
                        functions[kernel.kernel] = declared[0]
                    seen.add(kernel.kernel)
            continue
        kernel = mps.get_kernel(group)
        if kernel is None:
            continue
        shared = {m.kernel for key in (DispatchKey.CPU, DispatchKey.CUDA)
                  if key in indices and (m := indices[key].get_kernel(group)) is not None}
        if kernel.kernel in shared:
            continue
        declaration = "\n".join(compute_native_function_declaration(group, mps))
        if f"structured_{kernel.kernel} " not in declaration:
            continue
        structs[kernel.kernel] = [f"ATen/ops/{group.root_name}_meta.h", declaration]
    return {"structs": structs, "functions": functions}
