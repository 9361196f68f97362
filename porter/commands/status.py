"""`porter status OP`: one screen on an op's MPS state, and the exact next command to run."""

from __future__ import annotations

import json

from porter import exit_codes
from porter.commands.common import add_root_and_json

HELP = "one screen on an op: yaml rows, MPS state, kernel, registrations, expectations, next command"


def add_arguments(parser) -> None:
    parser.add_argument("op", metavar="OP", help="operator name, e.g. heaviside or special.log_ndtr")
    add_root_and_json(parser)


def run(args) -> int:
    from porter.source.checkout import Checkout
    from porter.checks.tree import Tree
    from porter.survey.op_status import gather

    from porter.commands.common import aten_op_name

    checkout = Checkout.at(args.root)
    # the OpInfo's spelling names the same op: nn.functional.mish, round.decimals_0
    st = gather(Tree(checkout), aten_op_name(checkout, args.op))
    if args.json:
        print(json.dumps({"ok": True, **st.to_json()}, indent=2))
    else:
        print("\n".join(render(st)))
    return exit_codes.OK


def _dtypes(names) -> str:
    return ", ".join(names) if names else "not statically known"


def render(st) -> list[str]:
    out = [f"{st.op}: {st.state}" + (f" ({st.kind})" if st.kind else ""), f"  {st.detail}"]
    out.append("yaml:")
    for e in st.yaml:
        rows = "; ".join(f"{', '.join(d['keys'])}: {d['kernel']}" for d in e["dispatch"])
        if not rows:
            rows = f"delegates to {e['structured_delegate']}" if e["structured_delegate"] else "no dispatch"
        out.append(f"  native_functions.yaml:{e['line']}  {e['name']}  {rows}")
    if st.stub:
        s = st.stub
        out.append(f"stub: {s['name']} ({s['type']}, {s['path']}:{s['line']})")
    for g in st.mpsgraph:
        sel = f", selectors {', '.join(g['selectors'])}" if g["selectors"] else ""
        what = "MPS impl calling Metal" if g["metal"] else "MPSGraph"
        out.append(f"{what}: {g['shape']} {g['function']} ({g['path']}:{g['line']}{sel})")
    if st.functor:
        out.append(f"functor: {st.functor['name']} ({st.functor['path']}:{st.functor['line']})")
    elif st.stub:
        out.append("functor: none")
    # those under a condition porter cannot decide (`#ifdef FLAG`) on a line of their own
    for condition in dict.fromkeys(r.get("condition", "") for r in st.registrations):
        group = [r for r in st.registrations if r.get("condition", "") == condition]
        by_out: dict[str, list[str]] = {}
        for r in group:
            by_out.setdefault(r["out"], []).append(r["in"])
        regs = "; ".join(f"{', '.join(dict.fromkeys(ins))} -> {o}" for o, ins in by_out.items())
        label = f"registrations only under `{condition}`, not proven" if condition else "registrations"
        out.append(f"{label}: {regs} ({group[0]['path']}:{group[0]['line']})")
    for h in st.host:
        only = f" only under `{h['condition']}`, not proven" if h.get("condition") else ""
        out.append(f"host: {h['function']} registered{only} ({h['path']}:{h['line']})")
    if st.stub and not st.host:
        out.append(f"host: {st.stub['name']} has no MPS registration")
    for o in st.opinfos:
        label = o["name"] + (f" [{o['variant']}]" if o["variant"] else "") + (" (ref)" if o["ref"] else "")
        dtypes = "" if o["ref"] else f"; MPS dtypes {_dtypes(o['mps_dtypes'])}"
        out.append(f"opinfo: {label} ({o['path']}:{o['line']}{dtypes})")
    for e in st.expectations:
        if e["set"]:
            entry = f"{e['key']!r} in {e['list']}"
        else:
            value = "None" if e["dtypes"] is None else "[" + ", ".join(e["dtypes"]) + "]"
            entry = f"{e['list']}[{e['key']!r}] = {value}"
        out.append(f"expectation: {entry} ({e['function']}, {e['path']}:{e['line']})")
    for d in st.decorators:
        text = d["text"] if len(d["text"]) <= 100 else d["text"][:97] + "..."
        out.append(f"mps decorator: {text} ({d['path']}:{d['line']})")
    for f in st.findings:
        out.append(f"check: {f}")
    out.append(f"next: {st.next}")
    if st.why:
        out.append(f"  {st.why}")
    return out
