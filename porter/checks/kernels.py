"""Metal kernels against the host files that run them (PORTER010-PORTER014).

In JIT-shader builds (no Metal compiler) a host file sees only the kernels of the `.metal`
whose generated `<Stem>_metallib.h` it includes; in bundled builds every `.metal` goes into
one metallib, so a kernel's host_name must be unique across all of them. Missing kernels and
dtypes fail only at run time (`Failed to create function state object for: ...`).
"""

from __future__ import annotations

import re

from porter.checks.model import Finding
from porter.checks.tree import Tree
from porter.source.native_definitions import integers_copied
from porter.source.dtypes import ALIASES, METAL, MPS_DTYPES
from porter.source.metal_scan import BASE_MACROS, INVOCATION_RE, SKELETON_MARK, MetalFile
from porter.source.cpp_scan import matching_close, split_top_level

SKELETON_RE = re.compile(re.escape(SKELETON_MARK) + r" (\w+?)_functor")
FLOATING = frozenset({"float16", "bfloat16", "float32"})
# Registration macros whose host names share one shape.
FAMILY = {"REGISTER_UNARY_OP": "unary", "REGISTER_UNARY_ALPHA_OP": "unary_alpha",
          "REGISTER_BINARY_OP": "binary", "REGISTER_OPMATH_BINARY_OP": "binary",
          "REGISTER_BINARY_ALPHA_OP": "binary_alpha", "REGISTER_BINARY_CASTOUT_OP": "binary_castout",
          "REGISTER_TERNARY_OP": "ternary", "REGISTER_OPMATH_TERNARY_OP": "ternary",
          "REGISTER_TERNARY_ALPHA_OP": "ternary_alpha",
          "REGISTER_OPMATH_TERNARY_ALPHA_OP": "ternary_alpha"}


def check(tree: Tree) -> list[Finding]:
    return (unregistered_kernels(tree) + missing_dtypes(tree) + duplicate_kernel_names(tree)
            + unreachable_functors(tree) + skeleton_functors(tree))


def _stem(rel: str) -> str:
    return rel.rsplit("/", 1)[-1].rsplit(".", 1)[0]


def opaque_kernels(metal: MetalFile) -> set[str]:
    """Kernels registered in ways porter does not expand: first arguments of top-level macro
    invocations that are neither base macros nor the file's own `#define`s, and literal
    `host_name("...")` prefixes. They count as registered, with unknown dtypes."""
    names = set()
    for m in INVOCATION_RE.finditer(metal.mask):
        macro = m.group(1)
        if macro in BASE_MACROS or macro in metal.defines or macro == "DEFINE_UNARY_FLOATING_FUNCTOR":
            continue
        close = matching_close(metal.mask, m.end() - 1)
        if close > 0:
            args = split_top_level(metal.mask[m.end():close])
            if args and re.fullmatch(r"\w+", args[0]):
                names.add(args[0])
    names.update(re.findall(r'host_name\(\s*"([A-Za-z_]\w*?)_(?:dense|strided)', metal.text))
    return names


def _registered(tree: Tree, metal_rel: str, kernel: str) -> bool:
    metal = tree.metals[metal_rel]
    return kernel in metal.kernels() or kernel in opaque_kernels(metal)


def unregistered_kernels(tree: Tree) -> list[Finding]:
    found = []
    for host_rel, uses in tree.kernel_uses.items():
        paired = tree.pairs[host_rel]
        for kernel, line, _ in uses:
            if any(_registered(tree, m, kernel) for m in paired):
                continue
            elsewhere = [m for m in tree.metals if m not in paired and _registered(tree, m, kernel)]
            op = tree.kernel_ops.get(kernel) or tree.to_op(kernel)
            if not paired:
                message = (f"runs Metal kernel '{kernel}', but no .metal file is paired with "
                           f"{_stem(host_rel)}.mm (no {_stem(host_rel)}.metal, no *_metallib.h include)")
                hint = ("add the `#include <ATen/native/mps/<Stem>_metallib.h>` JIT branch for the "
                        ".metal that registers it")
            elif elsewhere:
                names = ", ".join(_stem(m) + ".metal" for m in elsewhere)
                message = (f"runs Metal kernel '{kernel}', which {_stem(paired[0])}.metal does not "
                           f"register; {names} does, but JIT-shader builds of {_stem(host_rel)}.mm "
                           "cannot load it")
                hint = f"move the functor and its registration into {_stem(paired[0])}.metal"
            else:
                message = (f"runs Metal kernel '{kernel}', which {_stem(paired[0])}.metal does not "
                           "register")
                hint = (f"add a REGISTER_*_OP({kernel}, ...) line to {paired[0]} "
                        "(porter new-op writes one)")
            found.append(Finding("PORTER010", host_rel, line, message, hint, op))
    return found


def op_dtypes(tree: Tree, op: str):
    """(dtypes the MPS test sends for `op`, the OpInfo head they come from) per OpInfo variant.

    OpInfo `dtypesIfMPS` or `dtypes`, on MPS, minus complex when the op is not in
    SUPPORTED_COMPLEX_OPS and minus what mps_ops_modifier xfails for the key; variants whose
    dtypes are not statically known or that are xfailed whole are left out.
    """
    out = []
    # `nn.functional.softplus` (no aten_name=) is indexed as nn_functional_softplus, but runs
    # aten softplus, as porter.source.opinfo_source.aten_op resolves it for `porter test`.
    heads = tree.opinfos.by_aten.get(op, []) + [
        h for h in tree.opinfos.by_aten.get(f"nn_functional_{op}", [])
        if not h.aten_name and h.name == f"nn.functional.{op}"]
    for head in heads:
        entries = tree.output_xfails.get(head.key, [])
        if any(e.dtypes is None for e in entries):
            continue
        source = tree.opinfos.source(head)
        dtypes = source and (source.dtypes("dtypesIfMPS") or source.dtypes("dtypes"))
        if not dtypes:
            continue
        sent = set(dtypes) & set(MPS_DTYPES)
        if head.key not in tree.supported_complex:
            sent.discard("complex64")
        for e in entries:
            sent -= {ALIASES.get(d, d) for d in e.dtypes}
        out.append((sent, head))
    return out


def missing_dtypes(tree: Tree) -> list[Finding]:
    stub_of = {}
    for stub, host_rel, _, function, via_macro in tree.registrations:
        stub_of[(host_rel, function.split("::")[-1].lstrip("&"))] = stub
    found, seen = [], set()
    for host_rel, uses in tree.kernel_uses.items():
        host = tree.hosts[host_rel]
        for kernel, line, fn in uses:
            stub = stub_of.get((host_rel, fn))
            # Exact names only: `round_decimals_stub` serves round.decimals, not every round.
            op = stub[:-len("_stub")] if stub and stub.endswith("_stub") else None
            op = op if op in tree.op_names and _mps_may_reach(tree, op, stub) else None
            metal_rel = next((m for m in tree.pairs[host_rel] if kernel in tree.metals[m].kernels()), None)
            if not op or not metal_rel or (metal_rel, kernel) in seen:
                continue
            seen.add((metal_rel, kernel))
            regs = tree.metals[metal_rel].kernels()[kernel]
            # one under `#ifdef FLAG` is not proven: a build without FLAG has no such kernel
            registered = {r.in_type for r in regs if not r.condition}
            conditional = {r.in_type: r for r in regs if r.condition}
            function = host.kernel_functions.get(fn)
            floating_only = bool(function) and "isFloatingType(" in host.text[function.start:function.end]
            # the shared function copies integers and returns before the stub (nan_to_num_out)
            copied = integers_copied(tree.checkout.root, stub)
            for sent, head in op_dtypes(tree, op):
                if floating_only or copied:
                    sent &= FLOATING
                missing = sorted(d for d in sent if METAL.get(d) not in registered)
                if missing:
                    # dtypes the op's shared function sends to another stub never reach this
                    # kernel (sgn_out: real inputs to sign_stub, complex ones to sgn_stub)
                    reach = _dtypes_reaching(tree, op, stub)
                    missing = [d for d in missing if reach is None or d.startswith("complex") == (reach == "complex")]
                if not missing:
                    continue
                only = [conditional[METAL[d]] for d in missing if METAL.get(d) in conditional]
                under = (f" (and for {_list(sorted({r.in_type for r in only}))} only under "
                         f"`{only[0].condition}` ({metal_rel}:{only[0].line}), a condition porter "
                         "cannot decide: not proven)") if only else ""
                found.append(Finding(
                    "PORTER011", metal_rel, regs[0].line,
                    f"kernel '{kernel}' is registered for {_list(sorted(registered))}{under} but the MPS "
                    f"test of OpInfo '{head.key}' ({head.path}:{head.line}) sends "
                    f"{', '.join(missing)} through {_stem(host_rel)}.mm:{line}",
                    f"register {', '.join(METAL[d] for d in missing)} inputs in {_stem(metal_rel)}.metal, "
                    "guard the host kernel, or xfail those dtypes in common_mps.py", op))
                break
    return found


def _mps_may_reach(tree: Tree, op: str, stub: str) -> bool:
    """Whether the op's MPS dispatch can run `stub`: its MPS row shares a CPU function (which
    runs the stub), or no row of it names MPS, or a host file calls the stub itself. An op whose
    every MPS row names an MPS function of its own, where no host calls the stub, is still on
    MPSGraph (threshold, after threshold_backward was ported onto threshold_stub): its OpInfo's
    dtypes never reach the stub's Metal kernel."""
    rows = [(e, row) for e in tree.mps_family(op) for row in e.mps_rows()]
    if not rows:
        return True
    for e, row in rows:
        if any(d.kernel == row.kernel for d in e.dispatch if "CPU" in d.keys):
            return True
    call = re.compile(rf"\b{re.escape(stub)}\s*\(")
    return any(call.search(host.text) for host in tree.hosts.values())


def _dtypes_reaching(tree: Tree, op: str, stub: str) -> str | None:
    """"complex" or "real" where the shared function MPS joins for `op` runs `stub` for those
    inputs alone (porter.source.stub_route); None: every dtype, or not read."""
    from porter.source import stub_route
    shared = {row.kernel.split("::")[-1] for e in tree.mps_family(op) for row in e.dispatch
              if "MPS" in row.keys and "CPU" in row.keys}
    for kernel in sorted(shared):
        whens = {r.when for r in stub_route.routes(tree.checkout, kernel) if r.stub == stub}
        if len(whens) == 1 and whens <= {stub_route.COMPLEX, stub_route.REAL}:
            return whens.pop()
    return None


def _list(metal_types: list[str]) -> str:
    return ", ".join(metal_types) if metal_types else "nothing"


def duplicate_kernel_names(tree: Tree) -> list[Finding]:
    """Registrations instantiating one host name: each repeat is reported on its own line
    (`Tree.original` says which copy is not a repeat)."""
    copies: dict[tuple, list[tuple[str, int, object]]] = {}
    for rel, metal in tree.metals.items():          # sorted paths (Checkout.glob)
        for reg in metal.registrations:
            key = (reg.kernel, reg.in_type, reg.out_type, FAMILY.get(reg.macro, reg.macro))
            copies.setdefault(key, []).append((rel, reg.line, reg))
    found = []
    for group in copies.values():
        if len(group) < 2:
            continue
        first = tree.original(group, lambda copy: copy[:2])
        for copy in group:
            if copy is first:
                continue
            rel, line, reg = copy
            found.append(Finding(
                "PORTER012", rel, line,
                f"{reg.macro}({reg.kernel}, {reg.in_type} -> {reg.out_type}) instantiates host names "
                f"already instantiated at {first[0]}:{first[1]}",
                "rename one kernel or drop the repeat: every .metal file builds into one metallib",
                tree.kernel_ops.get(reg.kernel) or tree.to_op(reg.kernel)))
    return found


def unreachable_functors(tree: Tree) -> list[Finding]:
    found = []
    for rel, metal in tree.metals.items():
        if tree.metal_hosts.get(rel):
            continue
        stem = _stem(rel)
        for name, line in sorted(metal.functors.items(), key=lambda kv: kv[1]):
            found.append(Finding(
                "PORTER013", rel, line,
                f"{name}_functor cannot be reached: no host file loads {stem}.metal in JIT-shader "
                f"builds (no {stem}.mm, no #include <ATen/native/mps/{stem}_metallib.h>)",
                f"move it into the .metal paired with the .mm that runs it, or include "
                f"{stem}_metallib.h from that .mm", tree.kernel_ops.get(name) or tree.to_op(name)))
    return found


def skeleton_functors(tree: Tree) -> list[Finding]:
    found = []
    for rel, metal in tree.metals.items():
        if SKELETON_MARK not in metal.text:
            continue
        for m in SKELETON_RE.finditer(metal.text):
            name = m.group(1)
            line = metal.text.count("\n", 0, m.start()) + 1
            op = tree.kernel_ops.get(name) or tree.to_op(name) or name
            found.append(Finding(
                "PORTER014", rel, line,
                f"{name}_functor is still porter's skeleton (its static_assert stops the build)",
                f"write the Metal body, or rerun `porter new-op {op} --body EXPR`", op))
    return found
