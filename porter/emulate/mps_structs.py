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

_STEPS = b"mps structured declarations 1"
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def header(root: Path, text: str) -> str | None:
    """The declarations of the MPS structured kernels whose implementation name (`sign_out_mps`,
    as `TORCH_IMPL_FUNC` or a macro of it is given it) the `.mm` file's `text` names, each after
    its op's meta header where the installed torch has one; None where the text names none."""
    if "TORCH_IMPL_FUNC" not in text:
        return None
    known = recorded(Path(root), _STEPS, _declarations).get("structs") or {}
    named = set(_IDENTIFIER.findall(text))
    wanted = sorted(name for name in known if name in named)
    if not wanted:
        return None
    blocks = ["// porter: the MPS backend's structured kernels, as a Mac's codegen declares them",
              "#pragma once"]
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
        import torchgen.gen as gen
        from torchgen.dest.native_functions import compute_native_function_declaration
        from torchgen.model import DispatchKey, NativeFunctionsGroup
    except ImportError:
        return {}
    from porter.source.checkout import NATIVE_YAML, TAGS_YAML
    cache = getattr(gen, "_GLOBAL_PARSE_NATIVE_YAML_CACHE", {})
    cache.clear()            # keyed by path: an edited yaml at the same path would be stale
    try:
        parsed = gen.parse_native_yaml(path=str(root / NATIVE_YAML), tags_yaml_path=str(root / TAGS_YAML))
        grouped = gen.get_grouped_native_functions(parsed.native_functions)
    except Exception:        # torchgen's rejection is porter.emulate.yaml_verdict's to report
        return {}
    finally:
        cache.clear()
    indices = parsed.backend_indices
    mps = indices.get(DispatchKey.MPS)
    if mps is None:
        return {}
    structs: dict[str, list[str]] = {}
    for group in grouped:
        if not isinstance(group, NativeFunctionsGroup) or not group.structured:
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
    return {"structs": structs}
