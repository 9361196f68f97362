"""porter candidates: the elementwise ops left to port (MPSGraph ones first), and what a port takes."""

from __future__ import annotations

import json
import os

from porter import exit_codes
from porter.commands.common import add_root_and_json
from porter.survey.port_candidates import UNVERIFIED

HELP = ("list elementwise ops still on MPSGraph or without MPS: kind, files a port touches, "
        "and whether porter can write the kernel body itself")


def add_arguments(parser) -> None:
    add_root_and_json(parser)
    parser.add_argument("--verify", action="store_true",
                        help="measure AUTO: plan each port in memory (nothing written), build it and "
                             "run the emulated test under the full verdict; the measurement is kept "
                             "for this checkout, so plain `candidates` says yes only for a port "
                             "measured green (else unverified)")


def run(args) -> int:
    from porter.survey.port_candidates import find, summary
    from porter.source.checkout import Checkout

    checkout = Checkout.at(args.root)
    inventory = find(checkout)
    found = inventory.candidates
    if args.verify:
        # before torch is imported: without numpy it warns, and every port would measure red
        from porter.commands.common import require
        require("candidates --verify", "numpy", "torch")
    verdicts = _verify(checkout, found) if args.verify else {}
    from porter.harness import auto_record
    if verdicts:
        auto_record.save(checkout.root, {op: v.to_json() for op, v in verdicts.items()})
        measured = {op: v.to_json() for op, v in verdicts.items()}
    else:
        # what an earlier --verify measured of this checkout as it is now (else nothing)
        measured = auto_record.load(checkout.root)
    cells = {c.op: auto_cell(c, measured.get(c.op)) for c in found}
    if args.json:
        print(json.dumps({"ok": True, "command": "candidates", "others_on_own_mps_kernels": inventory.others,
                          "summary": summary(found),
                          "candidates": [c.__dict__ | {"files": list(c.files), "auto": cells[c.op],
                                                       "command": _command(c, measured.get(c.op)),
                                                       "measured": measured.get(c.op)}
                                         | ({"verify": verdicts[c.op].to_json()} if verdicts else {})
                                         for c in found]},
                         indent=2))
        return exit_codes.OK
    from porter.commands import terminal

    rows = [("OP", "STATE", "SHAPE", "KIND", "AUTO", "FILES A PORT TOUCHES", "BODY FROM / WHY NOT")]
    for c in found:
        rows.append((c.op, c.state, c.shape or "-", c.kind, cells[c.op],
                     ", ".join(os.path.basename(f) for f in c.files), c.how))

    def style(row, column):
        if row is rows[0]:
            return "bold"
        if column == 4:
            return terminal.OUTCOME_STYLE.get(row[4].split()[0], "yellow")
        return None

    # where the table would pass the terminal's width (COLUMNS), FILES is left out and WHY NOT
    # wraps; -v and --format json keep everything
    limit = terminal.width()
    dropped = limit is not None and len(terminal.table(rows)[0]) + max(len(r[6]) for r in rows) - len(rows[0][6]) > limit
    if dropped:
        rows = [r[:5] + r[6:] for r in rows]
    for line in terminal.table(rows, wrap=(len(rows[0]) - 1,), limit=limit, style=style):
        print(line)
    say = terminal.prose(limit)
    if dropped:
        say(f"(FILES A PORT TOUCHES left out to fit {limit} columns: -v or --format json shows it)")
    counts = summary(found)
    if verdicts:
        from collections import Counter
        tally = Counter(v.status for v in verdicts.values())
        say(f"\n{counts['headline']}; AUTO measured: each port planned in memory without --body, "
              "built and run through the emulated output-match test (the full verdict: upstream's "
              "samples, the reference inputs and the shapes): "
              + ", ".join(f"{tally.get(k, 0)} {k}" for k in ("verified", "fails", "refused", "not-run"))
              + ". Nothing was written; the measurement is kept for this checkout, so plain "
              "`porter candidates` says it until a file it read changes.")
        for c in found:
            v = verdicts[c.op]
            if v.status != "verified":
                say(f"  {c.op}: {v.status}: {v.detail}")
    else:
        unverified = sum(cells[c.op] == UNVERIFIED for c in found)
        say(f"\n{counts['headline']}. AUTO: yes, the command writes the kernel body itself and the "
              "port it writes was measured green (`--verify`, on this checkout as it is); "
              f"{UNVERIFIED}, it writes the body itself, and whether that port is green is not "
              "measured yet; fails DTYPE, it writes a port that is red there; --body or "
              "--complex-body, the command needs that EXPR (WHY NOT says what it replaces); no, "
              "the port is refused (WHY NOT says why)."
              + (f" `porter candidates --verify` measures the {unverified} {UNVERIFIED}." if unverified else ""))
        for group in ("forward", "backward"):
            if group in counts:
                say(f"  {counts[group]}.")
    if any(c.backward for c in found):
        say("Backward ops are tested through their forward op's samples: `porter test OP --device emulate`.")
    in_place = sum(c.way == "in place" for c in found)
    if in_place:
        say(f"{in_place} can only be ported in place: the op keeps its own MPS impl, whose body "
              "then calls the kernel.")
    if inventory.others:
        say(f"{inventory.others} other op(s) still name an MPS kernel of their own in "
              "native_functions.yaml (not unary/binary/alpha/scalar elementwise): not listed.")
    say("FILES leaves out OpInfo files (MPS DecorateInfos): `porter migrate-from-mpsgraph OP "
          "--dry-run` or `porter new-op OP --dry-run` shows every edit.")
    return exit_codes.OK


def _verify(checkout, found) -> dict:
    from porter.commands.terminal import Progress
    from porter.checks.reference_base import default_reference_gap_map
    from porter.harness.measure_port import FAILS, VERIFIED, verify

    # the CPU reference as the command's own test judges it: a branch that edits an op's CPU
    # kernel leaves that op's port not proven, so never AUTO `yes` (review 42's F1)
    gaps = default_reference_gap_map(checkout.root, [c.op for c in found])
    verdicts = {}
    with Progress(len(found), "porter candidates --verify: planning, building and testing") as progress:
        for c in found:
            progress.step(c.op)
            verdict = verify(checkout, c.op, c.state)     # the full verdict (verdict_scope.FULL)
            if verdict.status == VERIFIED and c.op in gaps:
                verdict.status, verdict.detail = FAILS, f"not proven: {gaps[c.op]}"
            verdicts[c.op] = verdict
    return verdicts


def auto_cell(candidate, measured: dict | None) -> str:
    """The AUTO cell. For an op its command ports with no flag: `yes` only where the port it
    writes was measured green under the full verdict (`measured`: a Verdict's JSON, from this
    run's --verify or the checkout's record), `fails DTYPE` where it was measured red, `no`
    where the command refused it, `not-run` where the emulator could not run it, else
    `unverified`. For the others, the flag the command needs, or `no`."""
    from porter.harness import measure_port as m
    from porter.survey.port_candidates import AUTO_CELL
    if candidate.verdict != "automatic" or measured is None:
        return AUTO_CELL[candidate.verdict]
    status = measured["status"]
    if status == m.VERIFIED:
        return "yes"
    if status == m.FAILS:
        return f"fails {measured['failed_dtype']}" if measured.get("failed_dtype") else "fails"
    return {m.REFUSED: "no", m.NOT_RUN: m.NOT_RUN}[status]


def _command(candidate, measured: dict | None) -> str | None:
    """The command that ports the op, as printed: none where it needs a flag, where it is refused,
    or where running it was measured to refuse the port."""
    from porter.harness.measure_port import REFUSED
    if measured is not None and measured["status"] == REFUSED:
        return None
    return candidate.command
