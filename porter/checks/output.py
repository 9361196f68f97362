"""`porter check` output: human lines, one JSON document, or lintrunner LintMessage lines."""

from __future__ import annotations

import json
from collections import Counter

from porter.checks import Report
from porter.checks.model import CHECKS


def human(report: Report) -> tuple[list[str], list[str]]:
    """(stdout lines: one per finding, stderr lines: notes and the summary)."""
    out = [f.human() for f in report.findings]
    err = [f"note: {n}" for n in report.notes]
    if report.findings:
        counts = Counter(f.id for f in report.findings)
        parts = ", ".join(f"{cid} {CHECKS[cid][0]} x{n}" for cid, n in sorted(counts.items()))
        err.append(f"porter check: {len(report.findings)} finding(s): {parts}")
    else:
        # static checks only: a kernel that does not build or computes wrong is `porter test`'s
        # to say (review 41's E3 read "clean" of a kernel file with a lambda as a green tree)
        err.append(f"porter check: clean ({len(report.ran)} checks): static checks only; "
                   "`porter test` builds and runs the kernels")
    return out, err


def as_json(report: Report, **extra) -> str:
    counts = Counter(f.id for f in report.findings)
    return json.dumps({
        "ok": not report.findings, **extra,
        "checks": report.ran, "counts": dict(sorted(counts.items())),
        "findings": [f.to_json() for f in report.findings], "notes": report.notes,
    }, indent=2)


def lintrunner(report: Report) -> list[str]:
    return [json.dumps(f.lint_message()) for f in report.findings]


def github(report: Report) -> list[str]:
    """GitHub workflow-command annotations, one per finding, shown on the PR's lines."""
    def escape(text: str, prop: bool = False) -> str:
        text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        return text.replace(":", "%3A").replace(",", "%2C") if prop else text

    lines = []
    for f in report.findings:
        level = "warning" if CHECKS[f.id][1] == "warning" else "error"
        where = f"file={escape(f.path, True)}" + (f",line={f.line}" if f.line else "")
        message = f.message + (f" ({f.hint})" if f.hint else "")
        lines.append(f"::{level} {where},title={escape(f'{f.id} {f.name}', True)}::{escape(message)}")
    return lines


def list_checks() -> list[str]:
    return [f"{cid} {name} [{severity}]: {text}" for cid, (name, severity, text) in CHECKS.items()]


# a job summary is read, not searched (and GitHub caps one step's at 1 MiB)
MARKDOWN_ROWS = 100


def markdown(report: Report, changed_since: str | None = None) -> str:
    """A Markdown section for a job summary: one row per finding, with its fix."""
    from porter.apply.summary import cell, code

    scope = f" (changes since {code(changed_since)})" if changed_since else ""
    if not report.findings:
        return (f"### porter check{scope}: ✅ clean\n\n{len(report.ran)} checks ran; "
                "no finding.\n")
    counts = Counter(f.id for f in report.findings)
    lines = [f"### porter check{scope}: ❌ {len(report.findings)} finding(s)", "",
             ", ".join(f"{cid} {CHECKS[cid][0]} ×{n}" for cid, n in sorted(counts.items())) + ".", "",
             "| check | where | finding | fix |", "|---|---|---|---|"]
    for f in report.findings[:MARKDOWN_ROWS]:
        where = f"{f.path}:{f.line}" if f.line else f.path
        lines.append(f"| {f.id} {f.name} | {code(where)} | {cell(f.message, 300)} | {cell(f.hint, 200)} |")
    if len(report.findings) > MARKDOWN_ROWS:
        lines += ["", f"… and {len(report.findings) - MARKDOWN_ROWS} more: `porter check` lists them all."]
    lines += [""] + [f"> note: {cell(n, 300)}" for n in report.notes]
    return "\n".join(lines).rstrip("\n") + "\n"
