"""What a host kernel function hands its Metal kernel as "alpha", computed from an OpInfo sample.

The host function receives the stub's parameters (`const Scalar& beta, const Scalar& threshold`),
which are the op's schema scalars in schema order. Its body passes one of them as the kernel's
alpha (`lib.exec_unary_kernel(iter, "leaky_relu", negative_slope)`), or fills a params struct
declared in the kernel family's header and passes that (`params.beta = beta.to<float>();` ...
`exec_unary_kernel_with_params(iter, "softplus", params, "SoftplusParams_float")`).

This module reads exactly those forms, so `porter test --device emulate` runs the kernel with
the values the generated host code would give it. Anything else is `HostCodeUnknown`: the test
says it cannot model the host code rather than guess.
"""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path
from typing import NamedTuple

from porter.dispatch.kernel_choice import dtype_name, is_floating_or_complex
from porter.source import cpp_scan, native_yaml
from porter.source.native_definitions import enclosing_function, stub_call
from porter.source.checkout import NATIVE_YAML

# the kernel's name is a literal or a local holding one (porter.emulate.host_model's "kernel
# name" shape; hostmap reads its value): only the arguments after it are read here
EXEC_ARGS_RE = re.compile(r"\bexec_(?:unary|binary|ternary)_kernel(_with_params)?\s*\(\s*\w+\s*,"
                          r"\s*(?:\"\w+\"|[A-Za-z_][\w:]*)\s*,\s*(.*?)\)\s*;", re.S)
FIELD_RE = re.compile(r"\bparams\.(\w+)\s*=\s*(.*?);")
SCHEMA_SCALARS = ("Scalar", "Scalar?", "float", "float?", "int", "int?", "bool")


class HostCodeUnknown(Exception):
    """The host function passes its scalars in a way porter does not model."""


class SchemaScalar(NamedTuple):
    name: str
    default: object      # the schema default as a Python value; None for `=None` or none written
    has_default: bool


def schema_scalars(root: Path, op: str) -> list[SchemaScalar] | None:
    """The scalar arguments of `op`'s out= overload (else its first overload), in schema order."""
    text = (Path(root) / NATIVE_YAML).read_text(encoding="utf-8")
    entries = native_yaml.entries_named(text, {op})
    if not entries:
        return None
    entry = next((e for e in entries if e.is_out), entries[0])
    args = native_yaml.arguments(entry.schema)
    found = []
    for arg in args.others:
        if native_yaml.argument_type(arg) not in SCHEMA_SCALARS:
            continue
        default = arg.split("=", 1)[1].strip() if "=" in arg else None
        found.append(SchemaScalar(native_yaml.argument_name(arg), _python(default), default is not None))
    return found


def _python(default: str | None):
    if default in (None, "None"):
        return None
    if default in ("True", "False"):
        return default == "True"
    try:
        return int(default)
    except ValueError:
        return float(default)


def host_parameters(params: str) -> list[str]:
    """`TensorIteratorBase& iter, const Scalar& beta = 1` -> ["beta"] (names after the iterator)."""
    names = []
    for p in params.split(",")[1:]:
        declaration = p.split("=", 1)[0].strip()
        m = re.search(r"(\w+)\s*$", declaration)
        if m:
            names.append(m.group(1))
    return names


def sample_values(sample, n_tensors: int, scalars: list[SchemaScalar]) -> dict[str, object]:
    """The schema scalars' values in this sample: positional args after the tensors, then
    keyword args, then the schema default."""
    positional = list(sample.args)[n_tensors - 1:]
    values = {}
    for k, s in enumerate(scalars):
        if k < len(positional):
            values[s.name] = positional[k]
        elif s.name in sample.kwargs:
            values[s.name] = sample.kwargs[s.name]
        elif s.has_default:
            values[s.name] = s.default
        else:
            raise HostCodeUnknown(f"the sample gives no value for {s.name}")
    return values


class StubCall(NamedTuple):
    arguments: list[str]      # what follows the iterator in the call
    parameters: list[str]     # the calling function's non-tensor parameter names, in order


def stub_call_arguments(root: Path, stub: str, op: str | None = None) -> StubCall | None:
    """The scalar arguments the shared CPU/CUDA function passes to `stub` after the iterator
    (`logit_stub(iter.device_type(), iter, Scalar(eps ? eps.value() : -1.0))` ->
    ["Scalar(eps ? eps.value() : -1.0)"]), or None when no call is found."""
    found = stub_call(root, stub, op)
    if found is None:
        return None
    text, m = found
    close = cpp_scan.matching_close(cpp_scan.code_mask(text), text.index("(", m.start()))
    end = close if close >= 0 else len(text) - 1    # an unclosed call: what the file has
    head = enclosing_function(text, m.start())
    names = []
    if head:
        for p in cpp_scan.split_top_level(" ".join(head.group("params").split())):
            if p and "Tensor" not in p and "TensorIterator" not in p:
                names.append(re.search(r"(\w+)\s*(?:=.*)?$", p).group(1))
    return StubCall(cpp_scan.split_top_level(text[m.end():end])[1:], names)


def stub_values(call: StubCall | None, values_by_schema: dict[str, object],
                schema_order: list[str]) -> list[object]:
    """What the stub's kernel function receives, in its parameter order."""
    if call is None:       # the stub's parameters are the schema's scalars, as resolve checks
        return [values_by_schema[s] for s in schema_order]
    aligned = len(call.parameters) == len(schema_order)
    numbers = sum(bool(NUMBER_RE.fullmatch(" ".join(a.split()))) for a in call.arguments)
    if len(call.arguments) - numbers != len(schema_order) and not aligned:
        # a number the function passes itself fills a parameter the op has not
        # (threshold_backward_out: `threshold_stub(device_type(), *this, threshold, 0)`)
        raise HostCodeUnknown(f"the shared function passes {len(call.arguments)} scalar(s) to the "
                              f"stub, the op has {len(schema_order)}")
    # the shared function names the schema's arguments its own way (pos_inf for posinf); it may
    # pass fewer than it takes (leaky_relu_backward's `is_result` stays with the meta function)
    names = call.parameters if aligned else schema_order
    env = {n: values_by_schema[s] for n, s in zip(names, schema_order)}
    return [_evaluate(a, env) for a in call.arguments]


# std::numeric_limits<scalar_t>::max() of each floating dtype (lowest() is its negative), as the
# IEEE formats define it: torch.finfo(dtype).max, without importing torch
FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
             "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
LIMIT_ASSIGN_RE = re.compile(r"\b(\w+)\s*=\s*static_cast<float>\(\s*std::numeric_limits<scalar_t>::(max|lowest)\(\)\s*\)")


def alpha_value(body: str, params: str, fields: list[str] | None, values: list[object], dtype=None):
    """The alpha the host function of text `body` passes, given what the stub hands it.

    `fields`: the params struct's fields in declaration order (from the family header), for a
    `_with_params` call."""
    host_names = host_parameters(params)
    if len(host_names) != len(values):
        raise HostCodeUnknown(f"the host function takes {len(host_names)} scalar(s), the stub "
                              f"passes {len(values)}")
    env = dict(zip(host_names, values))
    # a torch dtype (an op_db sample) or its name (a cached sample's): by name, so that the
    # reference cache's run stays without torch
    dtype = None if dtype is None else dtype_name(dtype)
    if dtype in FLOAT_MAX:
        # `dtype_max = static_cast<float>(std::numeric_limits<scalar_t>::max())` under a dispatch
        # on the iterator's dtype: the input dtype's extremes, as float
        for name, limit in LIMIT_ASSIGN_RE.findall(body):
            env[name] = FLOAT_MAX[dtype] if limit == "max" else -FLOAT_MAX[dtype]
    calls, start = [], 0
    for m in EXEC_ARGS_RE.finditer(body):
        calls.append((m, body[start:m.end()]))      # the call and the code that leads to it
        start = m.end()
    if not calls:
        raise HostCodeUnknown("no exec_*_kernel call with a scalar argument")
    m, segment = calls[-1]
    if len(calls) > 1:
        # integers take the struct at long, under `if (c10::isIntegralType(iter.common_dtype(), true))`
        integral = dtype is not None and not is_floating_or_complex(dtype)
        want = "_long\"" if integral else "_float\""
        m, segment = next((c for c in calls if want in c[0].group(2)), calls[-1])
    with_params, rest = bool(m.group(1)), m.group(2)
    if not with_params:
        first = cpp_scan.split_top_level(rest)[0]
        return _evaluate(first, env)
    if fields is None:
        raise HostCodeUnknown("the params struct's declaration was not found in the kernel header")
    assigned = {f: _evaluate(e, env) for f, e in FIELD_RE.findall(segment)}
    missing = [f for f in fields if f not in assigned]
    if missing:
        raise HostCodeUnknown(f"params.{missing[0]} is not set in a form porter models")
    if "_long\"" in rest:
        return tuple(int(assigned[f]) for f in fields)
    return tuple(float(assigned[f]) for f in fields)


NUMBER_RE = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?")


def _evaluate(expr: str, env: dict[str, object]):
    expr = " ".join(expr.split())
    if NUMBER_RE.fullmatch(expr):
        number = expr.rstrip("fF")
        return float(number) if any(c in number for c in ".eE") else int(number)
    forms = (
        (r"(\w+)", lambda v, m: v),
        (r"-\s*(\w+)", lambda v, m: -v),        # sub_out hands add_stub -alpha
        (r"Scalar\((\w+)\)", lambda v, m: v),
        (r"(\w+)\.to<double>\(\)", lambda v, m: float(v)),
        # a float holds 24 bits: to<float>() of 16777217 is 16777216 on a Mac, whichever field
        # (a long one included) it is stored in
        (r"(\w+)\.to<float>\(\)", lambda v, m: _float32(v)),
        (r"static_cast<float>\((\w+)\)", lambda v, m: _float32(v)),
        # integers: Scalar::to<int64_t>() and static_cast truncate toward zero, as int() does
        (r"(\w+)\.to<int64_t>\(\)", lambda v, m: int(v)),
        (r"static_cast<int64_t>\((\w+)\)", lambda v, m: int(v)),
        (r"static_cast<int64_t>\((\w+)\.value_or\(([-+0-9.eE]+)\)\)",
         lambda v, m: int(float(m.group(2))) if v is None else int(v)),
        (r"static_cast<float>\((\w+)\.value_or\(([-+0-9.eE]+)\)\)",
         lambda v, m: _float32(m.group(2)) if v is None else _float32(v)),
        # the optional-None conventions of shared functions (logit: eps < 0 means none)
        (r"Scalar\((\w+) \? \1\.value\(\) : ([-+0-9.eE]+)\)",
         lambda v, m: float(m.group(2)) if v is None else v),
        (r"(\w+)\.value_or\(([-+0-9.eE]+)\)", lambda v, m: float(m.group(2)) if v is None else v),
        (r"(\w+)\.has_value\(\) \? static_cast<float>\(\1\.value\(\)\) : (\w+)",
         lambda v, m: _float32(v) if v is not None else _known(env, m.group(2))),
    )
    for pattern, convert in forms:
        m = re.fullmatch(pattern, expr)
        if m and m.group(1) in env:
            return convert(env[m.group(1)], m)
    wrapped = re.fullmatch(r"(?:(?:at|c10)::)?Scalar\((.*)\)", expr)
    if wrapped:
        # a Scalar holds the number it is made of, of that number's kind (review 25's H20:
        # `Scalar(negative_slope.to<double>())`)
        return _evaluate(wrapped.group(1), env)
    raise HostCodeUnknown(f"`{expr}` is not a form porter models")


def _float32(value) -> float:
    """The float32 nearest `value`, as a C++ conversion to float rounds it (beyond float's
    range: an infinity)."""
    value = float(value)
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _known(env: dict, name: str):
    if name not in env:
        raise HostCodeUnknown(f"`{name}` is not computed in a form porter models")
    return env[name]


_FIELDS = re.compile(r"(\w+)\s+(\w+(?:\s*,\s*\w+)*)")


def _open_conditionals(text: str) -> int:
    """How many `#if` blocks are open at the end of `text`, an include guard (`#ifndef G`
    followed by `#define G`) aside."""
    lines = [line.strip() for line in text.split("\n")]
    depth = 0
    for i, line in enumerate(lines):
        directive = re.match(r"#\s*(if|ifdef|ifndef|endif)\b\s*(\w*)", line)
        if directive is None:
            continue
        kind, name = directive.groups()
        if kind == "endif":
            depth = max(0, depth - 1)
        elif not (kind == "ifndef" and i + 1 < len(lines)
                  and re.fullmatch(rf"#\s*define\s+{re.escape(name)}\b.*", lines[i + 1])):
            depth += 1
    return depth


def struct_fields(header_text: str, struct: str) -> list[str] | None:
    """Field names of `template <typename T> struct NAME { T a; T b; };` (or `T a, b;`) in
    declaration order; None where the header has no such struct. The host packs the values as
    the template type in this order, and the kernel reads them by name: a body of anything
    else (a preprocessor directive, whose branches the host and the kernel may read apart,
    review 25's H29; a field of another type, a member function) raises HostCodeUnknown."""
    from porter.source.cpp_scan import comments_blanked
    text = comments_blanked(header_text)
    m = re.search(rf"(?:template\s*<\s*(?:typename|class)\s+(\w+)\s*>\s*)?\bstruct\s+"
                  rf"{re.escape(struct)}\s*\{{(.*?)\}};", text, re.S)
    if not m:
        return None
    param, body = m.group(1), m.group(2)
    defined = [(head, " ".join(inner.split())) for head, inner in re.findall(
        rf"\bstruct\s+{re.escape(struct)}\s*(<[^>{{;]*>)?\s*\{{(.*?)\}};", text, re.S)]
    if len(defined) > 1 and (any(head for head, _ in defined) or len(set(defined)) > 1):
        # a specialization (`template <> struct S<float>`), or definitions that differ a side
        # per `#if`: the host may lay out another than the kernel reads (review 26's S1, S2)
        raise HostCodeUnknown(f"struct {struct} is defined {len(defined)} times: which one the "
                              "host and the kernel each read, porter does not model")
    if len(defined) == 1 and _open_conditionals(text[:m.start()]):
        raise HostCodeUnknown(f"struct {struct} stands under a preprocessor condition, which the "
                              "host and the kernel may read apart")
    if re.search(r"^\s*#", body, re.M):
        raise HostCodeUnknown(f"struct {struct}'s fields stand under a preprocessor directive, "
                              "whose branches the host and the kernel may read apart")
    fields = []
    for statement in filter(None, (part.strip() for part in body.split(";"))):
        found = _FIELDS.fullmatch(" ".join(statement.split()))
        if found is None or param is not None and found.group(1) != param:
            raise HostCodeUnknown(f"struct {struct} holds `{' '.join(statement.split())};`: porter "
                                  f"models a params struct of {param or 'one type'}'s fields alone")
        fields += [f.strip() for f in found.group(2).split(",")]
    return fields
