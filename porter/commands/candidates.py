"""porter candidates: the elementwise ops left to port (MPSGraph ones first), and what a port takes."""

from __future__ import annotations

import json
import os

from porter.commands.common import add_root_and_json

HELP = ("list elementwise ops still on MPSGraph or without MPS: kind, files a port touches, "
        "and whether porter can write the kernel body itself")


def add_arguments(parser) -> None:
    add_root_and_json(parser)


def run(args) -> int:
    from porter.survey.candidates import MPSGRAPH, find
    from porter.source.checkout import Checkout

    checkout = Checkout.at(args.root)
    inventory = find(checkout)
    found = inventory.candidates
    if args.json:
        print(json.dumps({"ok": True, "command": "candidates", "others_on_own_mps_kernels": inventory.others,
                          "candidates": [c.__dict__ | {"files": list(c.files)} for c in found]},
                         indent=2))
        return 0
    rows = [("OP", "STATE", "SHAPE", "KIND", "AUTO", "FILES A PORT TOUCHES", "BODY FROM / WHY NOT")]
    for c in found:
        rows.append((c.op, c.state, c.shape or "-", c.kind, "yes" if c.automatic else "no",
                     ", ".join(os.path.basename(f) for f in c.files), c.how))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for r in rows:
        print("  ".join(r[i].ljust(widths[i]) for i in range(6)) + "  " + r[6])
    graph = sum(c.state == MPSGRAPH for c in found)
    auto = sum(c.automatic for c in found)
    print(f"\n{graph} op(s) on MPSGraph, {len(found) - graph} without MPS; AUTO: porter writes the "
          f"kernel body of {auto} itself (WHY NOT says what the others lack: a unary or binary op "
          "takes --body EXPR; alpha and scalar ops are not ported yet).")
    backward = sum(c.backward for c in found)
    in_place = sum(c.way == "in place" for c in found)
    if backward:
        print(f"{backward} of them are backward ops (`.grad_input`), tested through their forward "
              "op's samples: `porter test OP --device emulate`.")
    if in_place:
        print(f"{in_place} can only be ported in place: the op keeps its own MPS impl, whose body "
              "then calls the kernel.")
    if inventory.others:
        print(f"{inventory.others} other op(s) still name an MPS kernel of their own in "
              "native_functions.yaml (not unary/binary/alpha/scalar elementwise): not listed.")
    print("FILES leaves out OpInfo files (MPS DecorateInfos): `porter migrate-from-mpsgraph OP "
          "--dry-run` or `porter new-op OP --dry-run` shows every edit.")
    return 0
