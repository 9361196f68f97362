"""What a Mac's host library looks a Metal kernel up by, read from the host function's
`exec_*_kernel` call (porter.source.host_scan.KernelCall).

Upstream's MetalShaderLibrary::exec_<kind>_kernel(iter, name, alpha, scalar_arg_type) asks for
the kernel `<name>_dense_<out>_<in>` plus `_<alpha type>` when an alpha travels: the alpha type is
`scalar_arg_type` when the call passes one, else the iterator's common dtype;
`exec_<kind>_kernel_with_params(iter, name, params, "Params_float")` appends the params type's
name. The kind of the call must be the kind the kernel is registered as (REGISTER_UNARY_OP is
a one-input kernel). The emulator picks a registration by the sample's dtypes; this module says
when the call the host really makes would find none, as a Mac would fail.
"""

from __future__ import annotations

import re

from porter.source.host_scan import KernelCall

# c10::ScalarType -> the Metal type scalarToMetalTypeString gives it
SCALAR_TYPES = {"Float": "float", "Half": "half", "BFloat16": "bfloat", "Long": "long", "Int": "int",
                "Short": "short", "Char": "char", "Byte": "uchar", "Bool": "bool",
                "ComplexFloat": "float2", "ComplexHalf": "half2"}
SCALAR_TYPE_RE = re.compile(r"(?:(?:at|c10)::)?(?:ScalarType::(\w+)|k(\w+))")
NO_VALUE = {"std::nullopt", "nullopt", "c10::nullopt", "{}", "std::optional<c10::ScalarType>()"}
UNKNOWN = "?"
OPMATH = "{opmath}"      # at::toOpMathType of the iterator's dtype


def spelled(call: KernelCall) -> str:
    return f"exec_{call.kind}_kernel{'_with_params' if call.with_params else ''}"


# `fmt::format("ELUParams_{}", mps::scalarToMetalTypeString(iter.common_dtype()))`
FORMAT_RE = re.compile(r'fmt::format\(\s*"(\w*)\{\}(\w*)"\s*,\s*(?:(?:at::native::)?mps::)?'
                       r'scalarToMetalTypeString\(\s*([\w.]+(?:\(\s*\))?)\s*\)\s*\)')


def alpha_type(call: KernelCall, dtype_names: set[str] = frozenset()) -> tuple[bool, str | None]:
    """(whether an alpha travels, the type the call names for it): None when it names none (the
    common dtype's), UNKNOWN when porter cannot read it. A params name formatted from the
    iterator's dtype (`dtype_names`: local names holding it) is a template: "ELUParams_{}"."""
    args = call.arguments
    if call.with_params:
        name = " ".join((args[1] if len(args) > 1 else "").split())
        literal = re.fullmatch(r'"(\w+)"', name)
        formatted = FORMAT_RE.fullmatch(name)
        if formatted and _iter_dtype(formatted.group(3), dtype_names):
            return True, f"{formatted.group(1)}{{}}{formatted.group(2)}"
        return True, literal.group(1) if literal else UNKNOWN
    if not args or args[0] in NO_VALUE:
        return False, None
    if len(args) < 2 or args[1] in NO_VALUE:
        return True, None
    named = " ".join(args[1].split())
    opmath = re.fullmatch(r"(?:(?:at|c10)::)?toOpMathType\(\s*([\w.]+(?:\(\s*\))?)\s*\)", named)
    if opmath and _iter_dtype(opmath.group(1), dtype_names):
        return True, OPMATH       # float for half and bfloat16 (at::toOpMathType)
    if _iter_dtype(named, dtype_names):
        return True, "{}"
    m = SCALAR_TYPE_RE.fullmatch(args[1].strip())
    return True, SCALAR_TYPES.get(m.group(1) or m.group(2), UNKNOWN) if m else UNKNOWN


def _iter_dtype(expr: str, dtype_names: set[str]) -> bool:
    return expr in ("iter.common_dtype()", "iter.dtype()") or expr in dtype_names


def typed(wanted: str, metal: str) -> str:
    """The alpha type `wanted` names (a template or a Metal type) for an iterator of Metal
    dtype `metal`."""
    if wanted == OPMATH:
        return {"half": "float", "bfloat": "float", "half2": "float2"}.get(metal, metal)
    return wanted.format(metal) if "{}" in wanted else wanted


def kind_mismatch(call: KernelCall, where: str, regs: list, metal: str) -> str | None:
    """Why `call` (at `where`, "fn (operations/X.mm:LINE)") finds none of the kernel's
    registrations `regs` in `metal` on a Mac: another kind of call (exec_binary_kernel for a
    one-input kernel), or an alpha where the kernel takes none (or none where it takes one);
    None when one of them fits."""
    kinds = sorted({r.kind for r in regs})
    families = sorted({k.split("_")[0] for k in kinds})
    has_alpha, _ = alpha_type(call)
    registered = " and ".join(f"REGISTER_{k.upper()}_OP" for k in kinds)
    if call.kind not in families:
        return (f"{where} calls {spelled(call)} for \"{call.kernel}\", a {call.kind} call, but "
                f"{metal} registers it with {registered} ({_inputs(families)}): on a Mac the "
                f"iterator's operands and the kernel's do not match, so it fails or computes "
                f"from the wrong buffers; call exec_{families[0]}_kernel"
                f"{'_with_params' if call.with_params else ''}")
    if has_alpha not in {k.endswith("_alpha") for k in kinds}:
        what = "passes a scalar to" if has_alpha else "passes no scalar to"
        return (f"{where} {what} \"{call.kernel}\", which {metal} registers with {registered}: "
                f"a Mac looks up a kernel name that is not registered and raises 'Failed to "
                f"create function state object for: {call.kernel}_dense_...'")
    return None


def _inputs(families: set[str]) -> str:
    counts = {"unary": "1 input", "binary": "2 inputs", "ternary": "3 inputs"}
    return " or ".join(counts[f] for f in sorted(families))


def kernel_name(kernel: str, out: str, inp: str, alpha: str | None) -> str:
    """The name exec_*_kernel asks for on a contiguous iterator (Metal type names)."""
    return f"{kernel}_dense_{out}_{inp}" + (f"_{alpha}" if alpha else "")
