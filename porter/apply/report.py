"""Human and JSON output of an editing command's plan and result."""

from __future__ import annotations

import json
import sys

from porter.apply.changes import ChangeSet
from porter.errors import one_line


def show_plan(command: str, op: str, changes: ChangeSet, notes: list[str], *, dry_run: bool,
              applied: list[str] | None, as_json: bool, extra: dict | None = None,
              refused: list[str] | None = None, incomplete: list[str] | None = None,
              quiet: bool = False, verdict: dict | None = None, retest: str | None = None) -> None:
    """`refused`: the gaps of an incomplete port not written; `incomplete`: those of one written
    anyway (--allow-incomplete). Either makes the run a failure ("ok": false), as does a
    `verdict` (the test that ended the port, --json only) whose "ok" is false.

    The result (status lines, diff) goes to stdout; notes go to stderr (`quiet`: not at all),
    and a refused plan has none: they would be about edits that were not made. `retest`: nothing
    to write on a rerun, what is said instead of "nothing to do" (the port already written is
    tested next, or was not tested: "nothing to do" is said only after a green verdict)."""
    nothing = not changes
    gaps = refused or incomplete or []
    if as_json:
        print(json.dumps({
            "ok": not gaps and (verdict is None or verdict.get("ok") is not False),
            "command": command, "op": op, "dry_run": dry_run,
            "nothing_to_do": nothing, "incomplete": gaps,
            "files": [{"path": c.path, "status": c.status} for c in changes.changes.values()],
            "written": applied or [], "diff": changes.diff(), "notes": notes, **(extra or {}),
            **({"verdict": verdict} if verdict is not None else {}),
        }, indent=2))
        return
    out = sys.stdout
    if refused:
        if dry_run and changes:
            out.write(changes.diff() + "\n")
        sys.stderr.write(one_line(f"porter: error: incomplete port of {op}, nothing written: missing "
                                  f"{'; '.join(refused)} (--allow-incomplete writes it anyway)") + "\n")
        return
    if nothing and retest:
        out.write(f"porter {command} {op}: {retest}\n")
    elif nothing:
        out.write(f"porter {command} {op}: nothing to do\n")
    else:
        for line in changes.status_lines():
            out.write(line + "\n")
        if dry_run:
            out.write("\n" + changes.diff())
            out.write(f"\ndry run: {len(changes.pending)} file(s) would change; nothing was written\n")
        else:
            out.write(f"porter {command} {op}: {len(applied or [])} file(s) written\n")
    out.flush()
    for note in ([] if quiet else notes):
        sys.stderr.write(f"note: {note}\n")
    if incomplete:
        done = "planned (dry run)" if dry_run else "written"
        out.write(f"porter {command} {op}: INCOMPLETE port {done} (--allow-incomplete):\n")
        for gap in incomplete:
            out.write(f"  missing: {gap}\n")
        sys.stderr.write(one_line(f"porter: error: incomplete port of {op} {done} "
                                  f"(--allow-incomplete): missing {'; '.join(incomplete)}") + "\n")
