"""Human and JSON output of an editing command's plan and result."""

from __future__ import annotations

import json
import sys

from porter.apply.changes import ChangeSet


def show_plan(command: str, op: str, changes: ChangeSet, notes: list[str], *, dry_run: bool,
              applied: list[str] | None, as_json: bool, extra: dict | None = None) -> None:
    nothing = not changes
    if as_json:
        print(json.dumps({
            "ok": True, "command": command, "op": op, "dry_run": dry_run,
            "nothing_to_do": nothing,
            "files": [{"path": c.path, "status": c.status} for c in changes.changes.values()],
            "written": applied or [], "diff": changes.diff(), "notes": notes, **(extra or {}),
        }, indent=2))
        return
    out = sys.stdout
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
