"""Human and JSON output of an editing command's plan and result."""

from __future__ import annotations

import json
import sys

from porter.apply.changes import ChangeSet


def show_plan(command: str, op: str, changes: ChangeSet, notes: list[str], *, dry_run: bool,
              applied: list[str] | None, as_json: bool, extra: dict | None = None,
              refused: list[str] | None = None, incomplete: list[str] | None = None) -> None:
    """`refused`: the gaps of an incomplete port not written; `incomplete`: those of one written
    anyway (--allow-incomplete). Either makes the run a failure ("ok": false)."""
    nothing = not changes
    gaps = refused or incomplete or []
    if as_json:
        print(json.dumps({
            "ok": not gaps, "command": command, "op": op, "dry_run": dry_run,
            "nothing_to_do": nothing, "incomplete": gaps,
            "files": [{"path": c.path, "status": c.status} for c in changes.changes.values()],
            "written": applied or [], "diff": changes.diff(), "notes": notes, **(extra or {}),
        }, indent=2))
        return
    out = sys.stdout
    if refused:
        if dry_run:
            out.write(changes.diff() + "\n")
        out.write(f"porter {command} {op}: incomplete port, nothing written:\n")
        for gap in refused:
            out.write(f"  missing: {gap}\n")
        out.write("  (--allow-incomplete writes it anyway)\n")
        for note in notes:
            out.write(f"note: {note}\n")
        return
    if nothing:
        out.write(f"porter {command} {op}: nothing to do\n")
    else:
        for line in changes.status_lines():
            out.write(line + "\n")
        if dry_run:
            out.write("\n" + changes.diff())
            out.write(f"\ndry run: {len(changes.pending)} file(s) would change; nothing was written\n")
        else:
            out.write(f"porter {command} {op}: {len(applied or [])} file(s) written\n")
    for note in notes:
        out.write(f"note: {note}\n")
    if incomplete:
        out.write(f"porter {command} {op}: INCOMPLETE port written (--allow-incomplete):\n")
        for gap in incomplete:
            out.write(f"  missing: {gap}\n")
