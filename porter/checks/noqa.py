"""Inline suppression of one finding, with its reason, in the style of ruff's `noqa`:

    "div",  # porter: noqa PORTER030 -- kept for the older OpInfo name, see #12345
    // porter: noqa PORTER050 -- fast::exp is what upstream's kernel uses

on the finding's own line (ruff's colon, `porter: noqa: PORTER030 -- why`, reads the same). The
ids are required (a bare `noqa` would hide whatever check is
added next) and so is the reason after `--`: a suppression nobody can judge later is not one.
A comment without them suppresses nothing, and the run says why.
"""

from __future__ import annotations

import re
from pathlib import Path

from porter.checks.model import Finding

_NOQA = re.compile(r"porter:\s*noqa\b:?(?P<ids>[\s,A-Za-z0-9-]*?)(?:--\s*(?P<reason>\S.*?))?\s*$")
_ID = re.compile(r"PORTER\d{3}")


def suppressed(findings: list[Finding], root: Path) -> tuple[list[Finding], list[Finding], list[str]]:
    """(the findings left, those a noqa comment with ids and a reason suppressed, notes on
    noqa comments that suppress nothing because they lack one or the other)."""
    lines: dict[str, list[str] | None] = {}
    kept, hidden, notes = [], [], []
    for finding in findings:
        if finding.line is None:
            kept.append(finding)
            continue
        if finding.path not in lines:
            try:
                lines[finding.path] = (root / finding.path).read_text(
                    encoding="utf-8", errors="replace").splitlines()
            except OSError:
                lines[finding.path] = None
        text = lines[finding.path]
        if not text or finding.line > len(text):
            kept.append(finding)
            continue
        m = _NOQA.search(text[finding.line - 1])
        if m is None:
            kept.append(finding)
            continue
        ids = set(_ID.findall(m.group("ids") or ""))
        if finding.id in ids and m.group("reason"):
            hidden.append(finding)
            continue
        kept.append(finding)
        if not ids:
            notes.append(f"{finding.path}:{finding.line}: `porter: noqa` names no check, so it "
                         f"suppresses nothing (write `porter: noqa {finding.id} -- why`)")
        elif finding.id in ids:
            notes.append(f"{finding.path}:{finding.line}: `porter: noqa {finding.id}` gives no "
                         f"reason, so it suppresses nothing (add `-- why` after the ids)")
        else:
            # ruff's RUF100 in spirit: a suppression naming another check hides nothing here
            named = ",".join(sorted(ids))
            notes.append(f"{finding.path}:{finding.line}: `porter: noqa {named}` does not name "
                         f"{finding.id}, the finding on this line, so it suppresses nothing")
    return kept, hidden, notes
