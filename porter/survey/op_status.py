"""Everything porter knows about one op's MPS state, gathered read-only for `porter status`.

Works for any op of native_functions.yaml: the facts of an elementwise op come from
`porter.port.resolve` (stub, kernel, dtypes), the others from the yaml and the host files alone, and
the reason porter cannot port them becomes the "next" line.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass, field

from porter.source import checkout as co
from porter.source import native_yaml
from porter.checks.tree import Tree
from porter.source.dtypes import MPS_DTYPES
from porter.port.edits.opinfo import mps_decorators
from porter.errors import NotAnOp, PorterError
from porter.source.mpsgraph_scan import HostSource
from porter.source.opinfo_source import for_op
from porter.port.resolve import MPSGRAPH, NATIVE, UNPORTED, mpsgraph_rows, resolve


# Besides resolve's three states (which only an op porter can port has), those status
# reports for any op.
BROKEN, COMPOSITE, FALLBACK = "inconsistent", "composite", "cpu-fallback"
# a native port whose every MPS registration sits under a condition porter cannot decide
NOT_PROVEN = "not proven"


@dataclass
class Status:
    op: str
    state: str = UNPORTED
    detail: str = ""
    kind: str | None = None
    yaml: list[dict] = field(default_factory=list)
    stub: dict | None = None
    mpsgraph: list[dict] = field(default_factory=list)
    functor: dict | None = None
    registrations: list[dict] = field(default_factory=list)      # Metal kernel registrations
    host: list[dict] = field(default_factory=list)               # REGISTER_DISPATCH lines
    opinfos: list[dict] = field(default_factory=list)
    expectations: list[dict] = field(default_factory=list)
    decorators: list[dict] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    next: str = ""
    why: str = ""

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def findings_report(tree: Tree):
    """The checks status lists findings of (all but torchgen's whole-file parse), over the tree:
    one report serves any number of ops."""
    from porter import checks

    selected = {cid for cid in checks.CHECKS if cid != "PORTER040"}
    return checks.run(tree.checkout, selected, tree)


def gather(tree: Tree, op: str, report=None) -> Status:
    """`report`: a `findings_report` of this tree already run (default: run it here)."""

    checkout = tree.checkout
    name = op.strip()
    spec, refusal = None, None
    try:
        spec = resolve(checkout, name)
        name = spec.op
    except NotAnOp:
        raise
    except PorterError as err:         # an op porter cannot port: its status says why
        refusal = err
        name = name.replace(".", "_") if name.startswith(("special.", "linalg.", "fft.")) else name
    st = Status(op=name, kind=spec.kind if spec else None)
    family = tree.families.get(name, [])
    st.yaml = [_yaml_row(e) for e in family]
    _mpsgraph(tree, st, family)
    _kernel(tree, st, spec)
    _tests(tree, st, spec)
    _state(tree, st, spec, family)
    report = report or findings_report(tree)
    kernels = {spec.kernel} if spec else set()
    st.findings = [f.human() for f in report.findings if f.op == name or (f.op and f.op in kernels)]
    _next(st, spec, refusal, checkout)
    return st


class _NoYamlCheck:
    """Status plans a port only to learn what it lacks: torchgen's check of the yaml edit is the
    editing command's, and costs a child process."""

    def check(self, requests, tags_text):
        return []


def _flags_needed(checkout, spec, command: str) -> tuple[list[str], str]:
    """(the flags the next command needs for a complete port, why porter cannot run it at all)."""
    from porter.port.migration import leftovers, plan_migration
    from porter.port.plan import plan_port

    try:
        if command == "migrate-from-mpsgraph" or leftovers(checkout, spec):
            plan = plan_migration(checkout, spec.op, None, _NoYamlCheck())
        else:
            plan = plan_port(checkout, spec, None, validator=_NoYamlCheck())
    except PorterError as err:
        return [], err.message + (f" ({err.hint})" if err.hint else "")
    if plan.wrong:
        return [], ("porter cannot write its registrations yet: " + plan.wrong[0].message)
    flags = []
    for gap in plan.gaps:
        flag = gap.flag.split(" (")[0]
        if flag.startswith("--") and flag not in flags:
            flags.append(flag)
    if len(flags) < len(plan.gaps):
        flags.append("--allow-incomplete")
    return flags, ""


def _yaml_row(entry: native_yaml.Entry) -> dict:
    rows = [{"line": d.lineno, "keys": list(d.keys), "kernel": d.kernel} for d in entry.dispatch]
    return {"name": entry.full_name, "line": entry.lineno, "dispatch": rows,
            "structured_delegate": entry.structured_delegate}


def _mpsgraph(tree: Tree, st: Status, family) -> None:
    wanted = {d.kernel for e in family for d in e.mps_rows() if d.kernel.endswith("_mps")}
    for rel in sorted(tree.hosts):
        source = HostSource(tree.hosts[rel].text, rel)
        for d in source.named(wanted) + source.stubs_of(st.op):
            shape = {"impl": "TORCH_IMPL_FUNC body", "macro": f"one-line {d.macro}",
                     "function": "non-structured function",
                     "stub": "hidden REGISTER_MPS_UNARY_STUB on the shared stub"}[d.shape]
            metal = d.shape != "stub" and source.is_metal(d)
            st.mpsgraph.append({"function": d.name, "shape": shape, "path": rel, "line": d.line,
                                "selectors": source.selectors(d), "metal": metal})


def _kernel(tree: Tree, st: Status, spec) -> None:
    if spec is None:
        return
    st.stub = {"name": spec.stub.name, "type": spec.stub.fn_type, "path": spec.stub.header,
               "line": spec.stub.line}
    for rel, metal in tree.metals.items():
        if spec.kernel in metal.functors:
            st.functor = {"name": f"{spec.kernel}_functor", "path": rel, "line": metal.functors[spec.kernel]}
        for reg in metal.kernels().get(spec.kernel, []):
            st.registrations.append({"path": rel, "line": reg.line, "in": reg.in_type,
                                     "out": reg.out_type, "macro": reg.macro,
                                     "condition": reg.condition})
    conditions = {(rel, line): c for rel, line, c in
                  tree.conditional_registrations.get(spec.stub.name, [])}
    for stub, rel, line, function, _ in tree.registrations:
        if stub == spec.stub.name:
            st.host.append({"path": rel, "line": line, "function": function,
                            "condition": conditions.get((rel, line), "")})


def _tests(tree: Tree, st: Status, spec) -> None:
    checkout = tree.checkout
    opinfos, refs = (list(spec.opinfos), list(spec.refs)) if spec else for_op(checkout, st.op)
    keys = set()
    for source in opinfos + refs:
        dtypes = source.dtypes("dtypesIfMPS") or source.dtypes("dtypes")
        st.opinfos.append({"name": source.name, "variant": source.variant_test_name,
                           "path": source.path, "line": source.line, "ref": source.is_ref,
                           "mps_dtypes": [d for d in MPS_DTYPES if d in dtypes] if dtypes else None})
        if not source.is_ref:
            keys.add(source.xfail_key)
        text = checkout.read(source.path)
        for deco in mps_decorators(text, source):
            st.decorators.append({"path": source.path, "line": deco.line, "opinfo": source.name,
                                  "expected_failure": deco.expected_failure,
                                  "text": " ".join(deco.text.split())})
    for e in tree.expectation_entries:
        if e.key in keys:
            st.expectations.append({"path": co.COMMON_MPS, "line": e.line, "list": e.dict_name,
                                    "function": e.function, "key": e.key,
                                    "set": (e.function, e.dict_name) in tree.set_lists,
                                    "dtypes": list(e.dtypes) if e.dtypes is not None else None})


def _state(tree: Tree, st: Status, spec, family) -> None:
    graph = [g for g in st.mpsgraph if not g["metal"]]
    mps_rows = [d for e in family for d in e.mps_rows()]
    # resolve's rule (porter.port.resolve.mpsgraph_rows): a `*_mps` row is MPSGraph's until a
    # definition that runs a Metal kernel says otherwise
    graph_rows = [] if st.mpsgraph else mpsgraph_rows(family)
    if graph:
        g = graph[0]
        st.state = MPSGRAPH
        st.detail = f"MPSGraph, {g['shape']} {g['function']} ({g['path']}:{g['line']})"
    elif spec is not None and spec.state == "native" and st.host and all(h["condition"] for h in st.host):
        h = st.host[0]
        st.state = NOT_PROVEN
        st.detail = (f"Metal kernel '{spec.kernel}' on {spec.stub.name}, registered for MPS only "
                     f"under `{h['condition']}` ({h['path']}:{h['line']}), a condition porter "
                     f"cannot decide: a build that does not define it fails with "
                     f"'{spec.stub.name}: missing kernel for mps'")
    elif spec is not None and spec.state == "native":
        st.state = NATIVE
        st.detail = f"native Metal kernel '{spec.kernel}' on {spec.stub.name}"
    elif any(g["metal"] for g in st.mpsgraph):
        g = next(g for g in st.mpsgraph if g["metal"])
        st.state = NATIVE
        st.detail = f"native Metal, MPS impl calling the kernel ({g['path']}:{g['line']})"
    elif graph_rows:
        st.state = MPSGRAPH
        st.detail = (f"MPSGraph, MPS row {graph_rows[0].kernel} ({co.NATIVE_YAML}:{graph_rows[0].lineno}), "
                     f"defined in no {co.OPERATIONS}/*.mm porter can read")
    elif mps_rows and spec is not None:
        st.state = BROKEN
        st.detail = (f"the yaml routes MPS through {spec.stub.name}, but no host file registers "
                     "an MPS kernel for it (a run fails with 'missing MPS kernel')")
    elif mps_rows:
        st.state = NATIVE
        st.detail = f"MPS row '{mps_rows[0].text.strip()}'"
    elif not any(e.dispatch for e in family):
        fallback = _fallback_line(tree, st.op)
        st.state = FALLBACK if fallback else COMPOSITE
        st.detail = (f"no dispatch rows; MPSFallback.mm:{fallback} sends it to the CPU" if fallback
                     else "no dispatch rows: composite, runs through the ops it decomposes into")
    else:
        st.state = UNPORTED
        st.detail = "no MPS dispatch row"


def _enum_port(checkout, op: str) -> bool | str:
    """True where migrate-from-mpsgraph ports the op's str choice (porter.port.enum_port), its
    refusal where it would refuse, False for any other op."""
    from porter.port import enum_port
    if not enum_port.is_enum_op(checkout, op):
        return False
    try:
        enum_port.resolve_enum(checkout, op)
    except PorterError as err:
        return err.message.removesuffix("; nothing was written")
    return True


def _fallback_line(tree: Tree, op: str) -> int | None:
    rel = co.MPS_FALLBACK
    if not tree.checkout.exists(rel):
        return None
    for n, line in enumerate(tree.read(rel).splitlines(), 1):
        if f'm.impl("{op}"' in line or f'm.impl("{op}.' in line or f'm.impl("_{op}' in line:
            return n
    return None


def device() -> str:
    """The device `porter test` should use here: the real GPU on Apple silicon, else the emulator."""
    return "mps" if sys.platform == "darwin" and platform.machine() == "arm64" else "emulate"


def _next(st: Status, spec, refusal: PorterError | None, checkout=None) -> None:
    dev = device()
    if st.state in (MPSGRAPH, UNPORTED, BROKEN) and spec is not None and checkout is not None:
        # the command that accepts the op: resolve's state (an `MPS: x_mps` row defined nowhere
        # is still a migration), not the screen's
        command = "migrate-from-mpsgraph" if spec.state == "mpsgraph" else "new-op"
        why = {MPSGRAPH: "replace the MPSGraph path with a Metal kernel",
               UNPORTED: "scaffold the Metal kernel", BROKEN: "register the missing MPS kernel"}
        flags, blocked = _flags_needed(checkout, spec, command)
        if blocked:
            st.next, st.why = "no porter command", blocked
        else:
            st.next = " ".join([f"porter {command} {st.op}", *flags])
            st.why = why[st.state] + (f" (give {', '.join(flags)}: porter cannot write that "
                                      "part itself)" if flags else "")
            if spec.backward and "--body" in flags:
                st.why += f"; the body is in {' and '.join(spec.arg_names)}"
    elif st.state == MPSGRAPH and spec is not None:
        st.next, st.why = f"porter migrate-from-mpsgraph {st.op}", "replace the MPSGraph path with a Metal kernel"
    elif st.state == UNPORTED and spec is not None:
        st.next, st.why = f"porter new-op {st.op}", "scaffold the Metal kernel"
    elif st.state == NATIVE:
        skeleton = [f for f in st.findings if "PORTER014" in f]
        stale = [f for f in st.findings if "PORTER031" in f] or [
            e for e in st.expectations if e["list"] == "UNIMPLEMENTED_XFAILLIST" and e["dtypes"] is None]
        if skeleton:
            st.next = f"porter new-op {st.op} --body EXPR"
            st.why = "the functor is still porter's skeleton: give its body (or edit the .metal)"
        elif stale:
            st.next = f"porter test {st.op} --device {dev} --prune-xfails"
            st.why = "the op is native but still listed as unimplemented"
        elif st.findings:
            st.next, st.why = "porter check", "fix the findings listed above"
        else:
            st.next, st.why = f"porter test {st.op} --device {dev}", "prove the kernel against the CPU"
    elif st.state == BROKEN:
        st.next, st.why = f"porter new-op {st.op}", "register the missing MPS kernel"
    elif st.state == NOT_PROVEN:
        h = st.host[0]
        st.next = "porter check"
        st.why = (f"move the REGISTER_DISPATCH at {h['path']}:{h['line']} out of the "
                  f"`{h['condition']}` block, where every build compiles it")
    elif refusal is not None and st.state == MPSGRAPH and checkout is not None \
            and (why := _enum_port(checkout, st.op)):
        # a str that picks the kernel (gelu): migrate-from-mpsgraph ports it (porter.port.enum_port)
        if why is True:
            st.next = f"porter migrate-from-mpsgraph {st.op}"
            st.why = ("replace the MPSGraph path with one Metal kernel per value of its str "
                      "argument, picked in the host as the CPU kernel branches")
        else:
            st.next, st.why = "no porter command", why
    elif refusal is not None:
        st.next = "no porter command"
        st.why = refusal.message + (f" ({refusal.hint})" if refusal.hint else "")
    else:
        st.next, st.why = "no porter command", st.detail

