"""What a port of one op changed, read from the branch: yaml rows, the MPSGraph code it deleted,
the Metal kernel and host stub it registered, the expectations it removed and kept."""

from __future__ import annotations

import re
from typing import NamedTuple

from porter.source import checkout as co
from porter.source import native_yaml
from porter.source.mpsgraph_scan import STUB, HostSource
from porter.source.opinfo_source import for_op
from porter.source.xfail_lists import entries as xfail_entries
from porter.review.branch import Branch


class YamlChange(NamedTuple):
    entry: str          # "threshold.out"
    before: str         # "MPS: threshold_out_mps" ("" for no MPS row)
    after: str


class Removed(NamedTuple):
    what: str           # "TORCH_IMPL_FUNC(threshold_out_mps)"
    path: str
    line: int           # in the base text


class Expectation(NamedTuple):
    where: str          # "torch/testing/_internal/common_mps.py" or the OpInfo file
    line: int           # in the base text (removed) or the current one (kept)
    text: str           # `UNIMPLEMENTED_XFAILLIST["heaviside"]` or the DecorateInfo's text
    command: str        # the Mac command that runs what it decorated


class Kernel(NamedTuple):
    name: str
    path: str
    line: int           # the functor's
    dtypes: tuple[str, ...]     # "float32->float32", as torch names them


class OpFacts(NamedTuple):
    op: str
    yaml: list[YamlChange]
    mpsgraph_removed: list[Removed]
    mpsgraph_left: list[Removed]
    kernels: list[Kernel]
    host: list[str]                     # "REGISTER_DISPATCH(threshold_stub, ...) at file:line"
    xfails_removed: list[Expectation]
    decorators_removed: list[Expectation]
    decorators_kept: list[Expectation]

    @property
    def was_mpsgraph(self) -> bool:
        return bool(self.mpsgraph_removed)


def gather(checkout: co.Checkout, branch: Branch, op: str, tree) -> OpFacts:
    base = branch.base_checkout()
    return OpFacts(op, _yaml(checkout, base, op), *_mpsgraph(checkout, base, op),
                   _kernels(tree, op), _host(tree, op), _xfails(checkout, base, op),
                   *_decorators(checkout, base, op))


def _mps_row(entry: native_yaml.Entry) -> str:
    rows = entry.mps_rows()
    return "; ".join(f"{', '.join(r.keys)}: {r.kernel}" for r in rows)


def _yaml(checkout, base, op: str) -> list[YamlChange]:
    names = {op, f"{op}_"}
    before = {e.full_name: _mps_row(e) for e in native_yaml.entries_named(base.read(co.NATIVE_YAML), names)}
    out = []
    for e in native_yaml.entries_named(checkout.read(co.NATIVE_YAML), names):
        after = _mps_row(e)
        if before.get(e.full_name, "") != after:
            out.append(YamlChange(e.full_name, before.get(e.full_name, ""), after))
    return out


def _mpsgraph_names(op: str) -> set[str]:
    return {f"{op}_out_mps", f"{op}_mps", f"{op}_mps_out", f"{op}_out_mps_"}


def _mpsgraph(checkout, base, op: str) -> tuple[list[Removed], list[Removed]]:
    names = _mpsgraph_names(op)
    removed, left = [], []
    for rel in sorted(set(base.glob(co.OPERATIONS, "*.mm")) | set(checkout.glob(co.OPERATIONS, "*.mm"))):
        old = HostSource(base.read(rel)) if base.exists(rel) else None
        new = HostSource(checkout.read(rel)) if checkout.exists(rel) else None
        now = {_label(d) for d in _ours(new, op, names)} if new else set()
        if old is not None:
            for d in _ours(old, op, names):
                if _label(d) not in now:
                    removed.append(Removed(_label(d), rel, d.line))
        if new is not None:
            left += [Removed(_label(d), rel, d.line) for d in _ours(new, op, names)]
    return removed, left


def _ours(source: HostSource, op: str, names: set[str]):
    return [d for d in source.definitions if (d.shape == STUB and d.name == op)
            or (d.shape != STUB and d.name in names)]


def _label(d) -> str:
    return {"impl": f"TORCH_IMPL_FUNC({d.name})", "stub": f"REGISTER_MPS_UNARY_STUB({d.name}, {d.selector})",
            "macro": f"{d.macro}({d.name}, ...)"}.get(d.shape, f"{d.name}(...)")


def _kernels(tree, op: str) -> list[Kernel]:
    from porter.dispatch.kernel_choice import METAL_TO_NAME
    out = []
    for rel, metal in sorted(tree.metals.items()):
        for kernel, regs in metal.kernels().items():
            if op not in tree.ops_of(kernel):
                continue
            dtypes = tuple(dict.fromkeys(
                f"{METAL_TO_NAME.get(r.in_type, r.in_type)}->{METAL_TO_NAME.get(r.out_type, r.out_type)}"
                for r in regs if r.macro != "REGISTER_BINARY_CASTOUT_OP"))
            out.append(Kernel(kernel, rel, metal.functors.get(kernel, regs[0].line), dtypes))
    return out


def _host(tree, op: str) -> list[str]:
    return [f"{'REGISTER_DISPATCH' if not via_macro else 'registered'}({stub}, {function}) at {rel}:{line}"
            for stub, rel, line, function, via_macro in tree.registrations
            if tree.stub_op(stub) == op and not function.startswith("mps_")]


def _keys(checkout, op: str) -> set[str]:
    opinfos, refs = for_op(checkout, op)
    return {o.xfail_key for o in opinfos + refs}


def _xfails(checkout, base, op: str) -> list[Expectation]:
    if not base.exists(co.COMMON_MPS) or not checkout.exists(co.COMMON_MPS):
        return []
    keys = _keys(base, op) | _keys(checkout, op)

    def listed(text):
        return {(e.function, e.dict_name, e.key): e for e in xfail_entries(text, co.COMMON_MPS) if e.key in keys}
    before, after = listed(base.read(co.COMMON_MPS)), listed(checkout.read(co.COMMON_MPS))
    out = []
    for ident, e in sorted(before.items(), key=lambda kv: kv[1].line):
        if ident not in after:
            dtypes = f" ({', '.join(e.dtypes)})" if e.dtypes else ""
            out.append(Expectation(co.COMMON_MPS, e.line, f'{e.dict_name}["{e.key}"]{dtypes}', ""))
    return out


def _decorators(checkout, base, op: str) -> tuple[list[Expectation], list[Expectation]]:
    from porter.port.edits.opinfo import mac_command, mps_decorators

    def found(where):
        opinfos, refs = for_op(where, op)
        out = []
        for source in opinfos + refs:
            text = where.read(source.path)
            out += [(source.path, d) for d in mps_decorators(text, source)]
        return out
    now = found(checkout)
    current = {(path, _words(d.text)) for path, d in now}
    removed = [Expectation(path, d.line, _words(d.text), mac_command(d))
               for path, d in found(base) if (path, _words(d.text)) not in current]
    kept = [Expectation(path, d.line, _words(d.text), mac_command(d)) for path, d in now
            if d.expected_failure or "skip" in d.text.lower()]
    return removed, kept


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
