"""The port of an op whose `str` argument picks its kernel (gelu and gelu_backward's
`approximate`), in the shape upstream gave it (pytorch#181451):

- the CPU impl converts the string with a string-to-enum function and runs the op's
  DispatchStub (`GeluKernel(kCPU, *this, get_gelutype_enum(approximate))`), whose CPU kernel
  branches on the enum (`if (approximate == GeluType::Tanh) {...} else {...}`);
- one functor per branch, each translated from that branch's scalar function (`gelu_tanh` from
  the Tanh branch, `gelu` from the other: the kernel of the schema's default value is named after
  the op, the other after the op and its value), registered as any port's;
- a host function on the stub that picks the kernel by the enum as the CPU kernel branches
  (`(approximate == GeluType::Tanh) ? "gelu_tanh" : "gelu"`), registered with REGISTER_DISPATCH
  in the family's host file, which includes the header declaring the enum;
- the op's own MPS impl stays (its CPU and CUDA kernels differ, so there is no shared row to
  join) and runs the stub as the CPU impl does: `GeluKernel(kMPS, *this,
  get_gelutype_enum(approximate));`, its MPSGraph code and the static helpers only it used gone.

What porter cannot read (no CPU impl calling the stub, no conversion function, a CPU kernel that
does not branch on the enum, a branch without a translatable scalar function) is a refusal that
names it. Nothing is written here.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.apply.changes import ChangeSet
from porter.errors import Incomplete, PorterError
from porter.port import family_host, formatting
from porter.port import plan as port_plan
from porter.port import resolve as port_resolve
from porter.port.edits import host as host_edit
from porter.port.edits import in_place as in_place_edit
from porter.port.functor import SKELETON
from porter.port.templates import render
from porter.source import checkout as co
from porter.source import native_yaml, op_kind
from porter.source.cpp_scan import line_of
from porter.source.cpu_kernel import ScalarLambda, enum_branches
from porter.source.enum_strings import StringEnum, string_enum, unqualified
from porter.source.host_scan import HostFile
from porter.source.mpsgraph_scan import source_of
from porter.source.native_definitions import native_definition
from porter.source.opinfo_source import for_op, mps_dtypes
from porter.source.stubs import Stub, parse_header


class EnumFacts(NamedTuple):
    argument: str                 # the schema's str argument: approximate
    default: str                  # its default: none
    convert: StringEnum           # get_gelutype_enum
    stub: Stub                    # GeluKernel
    param: str                    # the CPU kernel's enum parameter: approximate
    enum_type: str                # the stub's parameter type: GeluType
    compared: str                 # the enumerator the CPU kernel's `if` compares with
    kernels: tuple[tuple[str, ScalarLambda], ...]   # (kernel, its scalar function): then, else


def is_enum_op(checkout: co.Checkout, op: str) -> bool:
    """Whether `op` is refused by the one-functor ports only for a `str` argument that picks its
    kernel, and keeps an MPS row of its own (gelu): this module's ports."""
    fam = native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {op, op + "_"})
    if not fam:
        return False
    kind, out = op_kind.classify_family(fam)
    return (out is not None and bool(kind.strings) and len(kind.tensors) in (1, 2)
            and kind.reason.startswith("takes a str argument")
            and out.fields.get("structured") == "True" and bool(out.mps_rows()))


def resolve_enum(checkout: co.Checkout, op: str) -> tuple[port_resolve.OpSpec, EnumFacts]:
    """Every fact of the port, or the refusal naming what porter could not read."""
    fam = native_yaml.entries_named(checkout.read(co.NATIVE_YAML), {op, op + "_"})
    kind, out = op_kind.classify_family(fam)
    place = port_resolve.own_mps_impl(checkout, op, out, kind.reason)
    if place is None:
        raise _refusal(op, out, f"no TORCH_IMPL_FUNC({op}_out_mps) in {co.OPERATIONS}/*.mm to "
                                "make run the stub")
    argument = native_yaml.argument_name(kind.strings[0])
    default = kind.strings[0].split("=", 1)[1].strip().strip("'\"") if "=" in kind.strings[0] else ""
    cpu = next((d.kernel for d in out.dense_rows() if "CPU" in d.keys), None)
    call = _cpu_stub_call(checkout, cpu) if cpu else None
    if call is None:
        raise _refusal(op, out, f"no TORCH_IMPL_FUNC({cpu}) in {co.NATIVE}/*.cpp that runs a "
                                f"DispatchStub with kCPU, so which stub and conversion MPS should "
                                "share is not read")
    stub_name, expression, where = call
    m = re.fullmatch(r"(?:[\w:]+::)?(\w+)\s*\(\s*(\w+)\s*\)", expression)
    if m is None or m.group(2) != argument:
        raise _refusal(op, out, f"{where} passes `{expression}` to {stub_name}: porter reads a "
                                f"string-to-enum function of {argument} there")
    convert = string_enum(checkout, m.group(1))
    if convert is None:
        raise _refusal(op, out, f"{m.group(1)}, which {where} converts {argument} with, is defined in "
                                f"no {co.NATIVE}/*.h as `if (s == \"...\") return Enum::X;` branches")
    stub = _stub(checkout, stub_name)
    if stub is None or len(stub.params) != 2:
        raise _refusal(op, out, f"{stub_name} is declared in no {co.NATIVE}/*.h as a stub of "
                                "(TensorIterator, enum)")
    branches = enum_branches(checkout, stub.name)
    if isinstance(branches, str):
        raise _refusal(op, out, f"{stub.name}: {branches}")
    param, (then, otherwise) = branches
    compared = unqualified(then.enumerator)
    values = dict(convert.values)
    if compared not in values.values():
        raise _refusal(op, out, f"the CPU kernel of {stub.name} compares {param} with {compared}, "
                                f"which {convert.function} never returns")
    if default not in values:
        raise _refusal(op, out, f"{argument}'s default '{default}' is none of the strings "
                                f"{convert.function} accepts")
    backward = out.is_backward
    base = op.removesuffix("_backward")

    def kernel(strings: list[str]) -> str:
        if default in strings:
            return op
        return f"{base}_{strings[0]}" + ("_backward" if backward else "")
    then_kernel = kernel([s for s, e in convert.values if e == compared])
    else_kernel = kernel([s for s, e in convert.values if e != compared])
    facts = EnumFacts(argument, default, convert, stub, param,
                      " ".join(stub.params[1].replace("const", "").replace("&", "").split()),
                      compared, ((then_kernel, then.lam), (else_kernel, otherwise.lam)))
    hosts = {place.path: HostFile(checkout.read(place.path), place.path)}
    source = source_of(hosts[place.path].text)
    impl = next(d for d in source.named({place.function}))
    state = port_resolve.NATIVE if source.is_metal(impl) else port_resolve.MPSGRAPH
    opinfos, refs = for_op(checkout, op)
    dtypes = port_resolve.backward_dtypes(checkout, op) if backward else mps_dtypes(opinfos)
    unary = len(kind.tensors) == 1
    activation = f"{co.OPERATIONS}/{port_resolve.ACTIVATION_MPSGRAPH}" == place.path
    family = port_resolve.family_of(stub.header, activation, False,
                                    checkout.exists(f"{co.KERNELS}/{port_resolve.ACTIVATION}.metal"),
                                    port_resolve.UNARY if unary else port_resolve.BINARY)
    spec = port_resolve.OpSpec(
        op=op, kind=port_resolve.UNARY if unary else port_resolve.BINARY, state=state,
        entries=tuple(fam), backend_entries=tuple(e for e in fam if e.dense_rows()),
        cpu_kernel=cpu, stub=stub, kernel=op, metal_path=f"{co.KERNELS}/{family}.metal",
        host_path=f"{co.OPERATIONS}/{family}.mm", opinfos=tuple(opinfos), refs=tuple(refs),
        dtypes=dtypes, promotes_int_to_float=False, returns_bool=False, scalar_lambda=then.lam,
        mpsgraph=(port_resolve.MpsGraphImpl("row", (place.function,), place.path, place.line),)
        if state == port_resolve.MPSGRAPH else (),
        arg_names=port_resolve.arg_names_of(checkout, op, out) if backward else (),
        in_place=place._replace(reason=f"{stub.name} through {convert.function}"), backward=backward)
    return spec, facts


def _refusal(op: str, out, missing: str) -> PorterError:
    return PorterError(f"cannot port '{op}', whose str argument picks its kernel: {missing}; "
                       "nothing was written", path=co.NATIVE_YAML, line=out.lineno,
                       hint="port it by hand as upstream's gelu: one functor per value, a host "
                            "function on the stub that picks the kernel by the enum, and the MPS "
                            "impl running the stub with kMPS")


CPU_STUB_CALL_RE = re.compile(r"\b(\w+)\s*\(\s*(?:kCPU|(?:\w+\.)?device_type\(\))\s*,\s*\*this\s*,\s*([^;]*?)\)\s*;")


def _cpu_stub_call(checkout: co.Checkout, cpu_kernel: str) -> tuple[str, str, str] | None:
    """(stub, the enum argument as an expression of the impl's parameters, where) of
    `TORCH_IMPL_FUNC(cpu_kernel)`'s stub call; a local it passes (`approximate_type`) is read
    through its initializer."""
    found = native_definition(checkout, "TORCH_IMPL_FUNC", cpu_kernel)
    if found is None or found.body_close < 0:
        return None
    text, mask, start = found.text, found.mask, found.body_open + 1
    calls = list(CPU_STUB_CALL_RE.finditer(mask, start, found.body_close))
    if not calls or len({(c.group(1), " ".join(c.group(2).split())) for c in calls}) != 1:
        return None
    call = calls[0]
    expression = " ".join(text[call.start(2):call.end(2)].split())
    local = re.search(rf"\b(?:const\s+)?(?:auto|\w+)\s+{re.escape(expression)}\s*=\s*([^;]+);",
                      mask[start:call.start()])
    if local:
        expression = " ".join(text[start + local.start(1):start + local.end(1)].split())
    return call.group(1), expression, f"{found.path}:{line_of(text, call.start())}"


def _stub(checkout: co.Checkout, name: str) -> Stub | None:
    for rel in checkout.glob(co.NATIVE, "*.h"):
        text = checkout.read(rel)
        if name in text:
            stub = parse_header(text, rel).get(name)
            if stub:
                return stub
    return None


def plan_enum_port(checkout: co.Checkout, op: str, validator=None):
    """The port's edits, in memory (a porter.port.plan.Plan, as a migration's)."""
    spec, facts = resolve_enum(checkout, op)
    plan = port_plan.Plan(spec, ChangeSet(checkout.root))
    place = spec.in_place
    if spec.state == port_resolve.NATIVE:
        plan.notes.append(f"{place.path}:{place.line}: {place.function} already runs "
                          f"{facts.stub.name}'s Metal kernels: nothing to migrate")
        return plan
    cs = plan.changes

    def read(path: str) -> str:
        return cs.current(path, checkout.read)

    def write(path: str, new: str) -> None:
        cs.set(path, checkout.read(path) if checkout.exists(path) else None, new)

    # the default value's kernel (named after the op) first, as upstream's file reads
    for kernel, lam in sorted(facts.kernels, key=lambda k: k[0] != op):
        port_plan.plan_kernel(checkout, spec._replace(kernel=kernel, scalar_lambda=lam), read, write, plan)
        if plan.functor is not None:
            if plan.functor.origin == SKELETON:
                raise Incomplete(f"cannot port '{op}': {kernel}_functor has no body "
                                 f"({plan.functor.detail}); porter never replaces a working MPSGraph "
                                 "implementation by a skeleton; nothing was written",
                                 path=lam.path, line=lam.line,
                                 hint=f"port {op} by hand, or make its CPU branch a lambda porter reads")
    _plan_host(checkout, spec, facts, read, write, plan)
    _plan_impl(spec, facts, read, write, plan)
    port_plan.plan_expectations(checkout, spec, read, write, plan)
    problem = formatting.format_changes(checkout.root, cs)
    if problem:
        plan.notes.append(problem)
    (then, _), (otherwise, _) = facts.kernels
    plan.notes.insert(0, f"{place.path}:{place.line}: MPS keeps {place.function}, which now runs "
                         f"{facts.stub.name} as the CPU does; its host function picks {then} when "
                         f"{facts.param} is {facts.compared}, else {otherwise}, as the CPU kernel "
                         "branches")
    return plan


def _plan_host(checkout, spec, facts: EnumFacts, read, write, plan) -> None:
    text = family_host.host_text(checkout, spec.host_path, spec.family, spec.stub.header, plan)
    (then, _), (otherwise, _) = facts.kernels
    function = f"{spec.op}_kernel"
    kind = "unary" if spec.kind == port_resolve.UNARY else "binary"
    source = render("enum_host_kernel.mm.j2", function=function,
                    iterator=spec.stub.iterator_type or "TensorIteratorBase", enum=facts.enum_type,
                    param=facts.param, compare="==", enumerator=facts.compared, then=then,
                    otherwise=otherwise, kind=kind)
    if not in_place_edit.has_library(text):
        text = in_place_edit.add_library(text, spec.family)
    text = host_edit.add_kernel_function(text, stub=facts.stub.name, function=function, kernel=then,
                                         iterator=spec.stub.iterator_type or "TensorIteratorBase",
                                         kind=kind, source=source)
    text = host_edit.include_stub_header(text, spec.stub.header)
    text = host_edit.include_stub_header(text, facts.convert.path)
    write(spec.host_path, text)


def _plan_impl(spec, facts: EnumFacts, read, write, plan) -> None:
    place = spec.in_place
    text = read(place.path)
    impl = next(d for d in source_of(text).named({place.function}))
    body = render("stub_impl_body.mm.j2", stub=facts.stub.name,
                  arguments=f"{facts.convert.function}({facts.argument})").lstrip("\n")
    new, removed = in_place_edit.replace_body_text(text, impl, body)
    new = host_edit.include_stub_header(new, facts.convert.path)
    write(place.path, new)
    plan.removed += [{"path": place.path, "line": place.line, "what": "MPSGraph body",
                      "name": place.function}]
    plan.removed += [{"path": place.path, "line": r.line, "what": r.what, "name": r.name}
                     for r in removed]
