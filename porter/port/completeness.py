"""Does a planned port give every dtype the MPS test sends the kernel it needs?

The MPS test (`test_mps.py`'s `TestConsistency.test_output_match`) sends every dtype of the op's
OpInfo (`dtypesIfMPS`, else `dtypes`; never double; complex64 only for an op in
`SUPPORTED_COMPLEX_OPS`) and compares with the CPU. For each such dtype the port needs a kernel
whose output type is what the op's meta function produces: bool for ops that always return bool,
float for integer inputs of an int->float op, the input type otherwise. A dtype the CPU reference
refuses (not in the OpInfo's CPU `dtypes`: mish on integers) gets no kernel; its expectations stay.

`Gap`s make a port incomplete (the user can supply them: a flag, or by hand); `Wrong`
registrations make it broken (a Mac rejects the file or computes another dtype).
"""

from __future__ import annotations

from typing import NamedTuple

from porter.source.dtypes import METAL
from porter.source.metal_scan import MetalFile
from porter.port.resolve import OpSpec

# dtypes the harness computes on the CPU in float32 when the CPU lacks a kernel for them
CPU_FLOAT_FALLBACK = frozenset({"float16", "bfloat16"})
FLOATING_METAL = frozenset({"float", "half", "bfloat"})
TORCH_OF_METAL = {metal: torch for torch, metal in METAL.items()}


class Gap(NamedTuple):
    what: str            # "a kernel for int32", "the body of mish_functor": read after "missing"
    flag: str            # what supplies it: "--body EXPR", "--complex-body EXPR", or a hand edit
    dtypes: tuple[str, ...] = ()     # torch dtypes whose MPS test fails because of it


class Wrong(NamedTuple):
    message: str


class DtypePlan(NamedTuple):
    register: frozenset[str]     # torch dtypes that get a kernel
    refused: frozenset[str]      # sent by the MPS test, refused by the CPU reference


def always_bool(spec: OpSpec) -> bool:
    return spec.returns_bool or any(o.flag("always_returns_bool") for o in spec.opinfos)


def dtype_plan(spec: OpSpec, tested_with_complex: bool) -> DtypePlan:
    sent = {d for d in spec.dtypes if d != "complex64" or tested_with_complex}
    cpu: set[str] | None = None
    for o in spec.opinfos:
        found = o.dtypes("dtypes")
        if found is None:
            cpu = None          # one OpInfo porter cannot read: refuse nothing
            break
        cpu = (cpu or set()) | set(found)
    refused = set()
    if cpu is not None:
        refused = {d for d in sent if d not in cpu and d not in CPU_FLOAT_FALLBACK
                   and d != "complex64"}
    return DtypePlan(frozenset(sent - refused), frozenset(refused))


def expected_output(spec: OpSpec, metal_in: str) -> str:
    if always_bool(spec):
        return "bool"
    if spec.promotes_int_to_float and metal_in not in FLOATING_METAL and metal_in != "float2":
        return "float"
    return metal_in


def check(spec: OpSpec, planned: str, dtypes: DtypePlan) -> tuple[list[Gap], list[Wrong]]:
    """Gaps and wrong registrations of `spec.kernel` in the planned `.metal` text."""
    outs: dict[str, set[str]] = {}
    for r in MetalFile(planned).registrations:
        if r.kernel == spec.kernel:
            outs.setdefault(r.in_type, set()).add(r.out_type)
    gaps: list[Gap] = []
    wrong: list[Wrong] = []
    missing = sorted(d for d in dtypes.register if METAL.get(d) not in outs)
    if "complex64" in missing:
        missing.remove("complex64")
        gaps.append(Gap(f"a complex64 kernel ({spec.op} is in SUPPORTED_COMPLEX_OPS, so its MPS "
                        "test sends complex64)", "--complex-body EXPR", ("complex64",)))
    if missing:
        gaps.append(Gap(f"a kernel for {', '.join(missing)}", "a registration written by hand",
                        tuple(missing)))
    by_reason: dict[str, list[str]] = {}
    for d in sorted(dtypes.register, key=metal_order):
        metal = METAL.get(d)
        if metal not in outs:
            continue
        want = expected_output(spec, metal)
        got = sorted(outs[metal])
        if got != [want]:
            reason = f"{_why(spec, metal)}: {d} gives {_torch(want)}"
            if always_bool(spec):
                reason = _why(spec, metal)
            by_reason.setdefault(reason, []).append(f"{metal} -> {', '.join(got)}")
    for reason, pairs in by_reason.items():
        wrong.append(Wrong(f"{spec.kernel} would be registered {', '.join(pairs)}, but {reason}"))
    for d in sorted(dtypes.refused):
        metal = METAL.get(d)
        if metal in outs:
            wrong.append(Wrong(f"{spec.kernel} is registered for {metal}, but the CPU reference "
                               f"refuses {d} ({spec.op}'s OpInfo dtypes leave it out): the MPS "
                               "test of that dtype stays an expected failure"))
    return gaps, wrong


def _torch(metal: str) -> str:
    return TORCH_OF_METAL.get(metal, metal)


def metal_order(d: str) -> int:
    order = list(METAL)
    return order.index(d) if d in order else len(order)


def _why(spec: OpSpec, metal_in: str) -> str:
    if always_bool(spec):
        return f"{spec.op} always returns bool"
    if expected_output(spec, metal_in) == "float":
        return "integer inputs promote to float"
    return "the output has the input's dtype"


def mac_tests(spec: OpSpec, dtypes: tuple[str, ...]) -> list[str]:
    """The upstream MPS test commands that fail on a Mac for these dtypes (all when empty)."""
    names = dict.fromkeys(o.xfail_key.replace(".", "_") for o in spec.opinfos) or {spec.op: None}
    out = []
    for name in names:
        if dtypes:
            out += [f"python test/test_mps.py -k test_output_match_{name}_cpu_{d}" for d in dtypes]
        else:
            out.append(f"python test/test_mps.py -k test_output_match_{name}_cpu")
    return out
