"""Scalar parameters of an elementwise op: from the schema, through the stub, to the kernel.

An op such as `softplus(Tensor self, Scalar beta=1, Scalar threshold=20)` runs its CPU/CUDA
kernel through a stub whose declared type says what the kernel function receives
(`void (*)(TensorIteratorBase&, const c10::Scalar&, const c10::Scalar&)`). The MPS host
function takes exactly those parameters, named as the schema names them, and hands them to
the Metal kernel in one of the two shapes upstream uses:

- one Scalar: the kernel's "alpha" (`REGISTER_UNARY_ALPHA_OP(op, T, T, T)`,
  `lib.exec_unary_kernel(iter, "op", name)`), typed as the iterator's common dtype;
- several scalars, or an optional one: a params struct `<Op>Params<T>` declared in the kernel
  family's header (shared by host and kernel), filled on the host and instantiated at float
  for floating inputs (`REGISTER_UNARY_ALPHA_OP(op, half, OpParams_float, half)`), as upstream's
  NanToNumParams, and at long for integer inputs that stay integers (`OpParams_long`): a float
  would round the CPU's `to<scalar_t>()` (threshold=16777217 on int32, 2.9999999 up to 3).

Everything here is pure: resolve and plan call it with what they read.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import native_yaml

# Schema types porter hands to a kernel as a scalar.
SCHEMA_SCALARS = ("Scalar", "Scalar?", "float", "float?")
# Stub parameter types that carry one such scalar, as upstream spells them.
STUB_SCALAR_RE = re.compile(r"^(const\s+)?(c10::)?Scalar\s*&$")
STUB_OPTIONAL_RE = re.compile(r"^(const\s+)?(std::|c10::)?optional<\s*double\s*>\s*&?$")
STUB_DOUBLE_RE = re.compile(r"^(const\s+)?double$")


class ScalarArg(NamedTuple):
    name: str          # as the schema names it ("beta"): the host parameter and the --body name
    default: str | None
    stub_type: str = ""    # the stub's parameter type for it ("const c10::Scalar&")
    none_means: str | None = None   # what the CPU kernel uses when it is None: "0.", "max", "lowest"
    # a stub parameter the op's function fills with a number, not a schema scalar
    # (threshold_backward_out: `threshold_stub(device_type(), *this, threshold, 0)`): "0"
    passed: str | None = None

    @property
    def optional_in_stub(self) -> bool:
        return bool(STUB_OPTIONAL_RE.match(self.stub_type))


def schema_scalars(args: native_yaml.Arguments) -> tuple[list[ScalarArg], list[str]]:
    """(the scalar arguments, the arguments porter cannot pass) among the non-tensor ones."""
    scalars, others = [], []
    for arg in args.others:
        typ = native_yaml.argument_type(arg)
        if typ in SCHEMA_SCALARS:
            default = arg.split("=", 1)[1].strip() if "=" in arg else None
            scalars.append(ScalarArg(native_yaml.argument_name(arg), default))
        else:
            others.append(arg)
    return scalars, others


NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?")


def through_call(scalars: list[ScalarArg], arguments: list[str], names: list[str]) -> list[ScalarArg] | None:
    """The stub's scalar parameters as the op's function fills them, where the stub takes more
    than the op has: a stub shared with another op (threshold_backward_out runs threshold_stub
    with `threshold, 0`: [threshold, value passed 0]). `names` names each stub parameter (used for
    those a number fills). None when an argument is neither a schema scalar nor a number, or a
    schema scalar is not passed exactly once."""
    by_name = {a.name: a for a in scalars}
    found = []
    for arg, name in zip(arguments, names):
        arg = " ".join(arg.split())
        if arg in by_name:
            found.append(by_name[arg])
        elif NUMBER_RE.fullmatch(arg) and name and name not in by_name:
            found.append(ScalarArg(name, None, passed=arg))
        else:
            return None
    used = [a.name for a in found if a.passed is None]
    if len(arguments) != len(names) or sorted(used) != sorted(by_name):
        return None
    return found


def stub_mismatch(scalars: list[ScalarArg], stub_params: list[str]) -> str | None:
    """Why the stub's kernel function cannot receive the op's scalars, or None."""
    extra = [parameter_type(p) for p in stub_params[1:]]
    if len(extra) != len(scalars):
        return f"the op takes {len(scalars)} scalar argument(s), the stub's kernel {len(extra)}"
    for arg, typ in zip(scalars, extra):
        if not (STUB_SCALAR_RE.match(typ) or STUB_OPTIONAL_RE.match(typ) or STUB_DOUBLE_RE.match(typ)):
            return f"the stub passes {arg.name} as `{typ}`, which is not a scalar porter can hand to Metal"
    return None


def with_stub_types(scalars: list[ScalarArg], stub_params: list[str],
                    none_means: list[str | None] | None = None) -> tuple[ScalarArg, ...]:
    conventions = none_means if none_means and len(none_means) == len(scalars) else [None] * len(scalars)
    return tuple(a._replace(stub_type=parameter_type(t), none_means=c)
                 for a, t, c in zip(scalars, stub_params[1:], conventions))


def parameter_type(param: str) -> str:
    """`const Scalar& a` -> `const Scalar&`; `std::optional<double> nan` -> `std::optional<double>`."""
    param = " ".join(param.split())
    m = re.fullmatch(r"(.*[&*>]|.*\b(?:double|float|bool|int64_t))\s*\w+", param)
    return m.group(1).strip() if m else param


def uses_params_struct(scalars: tuple[ScalarArg, ...]) -> bool:
    """One Scalar rides as the kernel's alpha; anything else as a params struct."""
    return len(scalars) > 1 or any(not STUB_SCALAR_RE.match(a.stub_type) for a in scalars)


def struct_name(kernel: str) -> str:
    """`softplus` -> `SoftplusParams`, `nan_to_num` -> `NanToNumParams`."""
    return "".join(part.capitalize() for part in kernel.split("_")) + "Params"


def alpha_type(scalars: tuple[ScalarArg, ...], kernel: str, out_type: str, integral: bool = False) -> str:
    """The Metal type the kernel's alpha argument has for a kernel writing `out_type`
    (`integral`: an integer input that stays an integer, whose struct is the long one)."""
    if uses_params_struct(scalars):
        return f"{struct_name(kernel)}_{'long' if integral else 'float'}"
    return out_type


def integral_params(scalars: tuple[ScalarArg, ...]) -> bool:
    """Whether integer inputs can take the params struct at long: the host converts each scalar
    as the CPU's `to<int64_t>()`; a None meaning the dtype's extremes has no such form."""
    return uses_params_struct(scalars) and not needs_dtype_limits(scalars)


def host_value_long(arg: ScalarArg) -> str:
    """C++ that turns the host parameter into the int64 the long params struct holds, truncating
    as the CPU's `to<scalar_t>()` does."""
    if STUB_SCALAR_RE.match(arg.stub_type):
        return f"{arg.name}.to<int64_t>()"
    if arg.optional_in_stub:
        fallback = arg.default if arg.default not in (None, "None") else arg.none_means
        if fallback is None or fallback in LIMITS:
            raise ValueError(f"{arg.name} is optional with no default value an integer can take")
        return f"static_cast<int64_t>({arg.name}.value_or({fallback}))"
    return f"static_cast<int64_t>({arg.name})"


def host_value(arg: ScalarArg) -> str:
    """C++ that turns the host parameter into the float the params struct holds."""
    if STUB_SCALAR_RE.match(arg.stub_type):
        return f"{arg.name}.to<float>()"
    if arg.optional_in_stub:
        fallback = arg.default if arg.default not in (None, "None") else arg.none_means
        if fallback in LIMITS:
            # the input dtype's extreme, computed on the host (dtype_limits in the template)
            return f"{arg.name}.has_value() ? static_cast<float>({arg.name}.value()) : {LIMITS[fallback]}"
        if fallback is None:
            raise ValueError(f"{arg.name} is optional with no default value, and the CPU kernel "
                             "does not say what it uses when it is None")
        return f"static_cast<float>({arg.name}.value_or({fallback}))"
    return f"static_cast<float>({arg.name})"


LIMITS = {"max": "dtype_max", "lowest": "dtype_lowest"}


def needs_dtype_limits(scalars: tuple[ScalarArg, ...]) -> bool:
    return any(a.optional_in_stub and a.default in (None, "None") and a.none_means in LIMITS
               for a in scalars)


def host_parameters(scalars: tuple[ScalarArg, ...]) -> str:
    """`, const Scalar& beta, const Scalar& threshold` for the host kernel function."""
    return "".join(f", {_plain(a.stub_type)} {a.name}" for a in scalars)


def _plain(stub_type: str) -> str:
    """The stub's spelling without the `c10::` a host file inside at::native does not need."""
    return " ".join(stub_type.replace("c10::Scalar", "Scalar").split()).replace(" &", "&")


def header_struct(kernel: str, scalars: tuple[ScalarArg, ...]) -> str:
    """The params struct and its float alias, for the family header."""
    name = struct_name(kernel)
    fields = "\n".join(f"  T {a.name};" for a in scalars)
    return (f"template <typename T>\nstruct {name} {{\n{fields}\n}};\n"
            f"using {name}_float = {name}<float>;\n")


def header_long_alias(kernel: str) -> str:
    name = struct_name(kernel)
    return f"using {name}_long = {name}<long>;\n"
