"""Markdown reports of harness results, for where reviewers look: a GitHub job summary.

`porter test --summary FILE` and `porter audit-xfails --summary FILE` append one section to
FILE (the workflow passes `$GITHUB_STEP_SUMMARY`, which Actions renders on the run's page);
`--format markdown` prints the same section instead of the text report. One row per op: its
outcome, every dtype's outcome, the first failing sample with its message, and the command
that reproduces it.
"""

from __future__ import annotations

from porter.apply.summary import append, cell, code  # noqa: F401 (append: for callers)
from porter.harness.run_report import OUTCOMES, repro, summary_counts
from porter.harness.verdicts import FAIL, PASS, SKIP, XFAIL, XPASS, OpResult

# a reviewer scans for the bad ones first
MARK = {FAIL: "❌ fail", XPASS: "⚠️ xpass", SKIP: "⏭️ skip", XFAIL: "xfail", PASS: "✅ pass"}


def op_outcome(result: OpResult) -> str:
    outcomes = {d.outcome for d in result.dtypes}
    for outcome in (FAIL, XPASS, PASS, XFAIL, SKIP):
        if outcome in outcomes:
            return MARK[outcome]
    return "⚠️ no dtype tested"


def dtype_cell(result: OpResult) -> str:
    parts = []
    for d in result.dtypes:
        text = f"{d.dtype} {d.outcome}"
        parts.append(f"**{text}**" if d.outcome in (FAIL, XPASS) else text)
    return ", ".join(parts) or "-"


def first_problem(result: OpResult, root: str | None) -> tuple[str, str]:
    """(first failing sample and its message, repro command) of the op's first bad dtype."""
    for d in result.dtypes:
        if d.outcome == FAIL:
            where = f"sample {d.first_failure}" if d.first_failure is not None else "samples"
            return (cell(f"{d.dtype} {where} ({d.failed_samples}/{d.samples}): {d.message}"),
                    code(repro(result, d.dtype, d.first_failure, root)))
    for d in result.dtypes:
        if d.outcome == XPASS:
            return (cell(f"{d.dtype} passes but is expected to fail by {'; '.join(d.expected_by)} "
                         "(stale entry: --prune-xfails narrows it)"),
                    code(repro(result, d.dtype, None, root)))
    return "-", "-"


def results_table(results: list[OpResult], root: str | None = None) -> list[str]:
    lines = ["| op | result | dtypes | first failing sample | repro |",
             "|---|---|---|---|---|"]
    for result in results:
        failure, command = first_problem(result, root)
        lines.append(f"| {code(result.op)} | {op_outcome(result)} | {dtype_cell(result)} | "
                     f"{failure} | {command} |")
    return lines


def totals(results: list[OpResult]) -> str:
    counts = summary_counts(results)
    return ", ".join(f"{counts.get(o, 0)} {o}" for o in OUTCOMES)


def test_section(results: list[OpResult], device: str, root: str | None = None,
                 notes: list[str] | None = None) -> str:
    bad = any(r.failed for r in results)
    ran = any(d.outcome in (PASS, XFAIL) for r in results for d in r.dtypes)
    verdict = "❌ failed" if bad else "✅ passed" if ran else "⚠️ nothing was tested"
    lines = [f"### porter test --device {device}: {verdict}", "",
             f"{len(results)} OpInfo(s); {totals(results)}.", ""]
    lines += results_table(results, root) if results else ["No op was tested."]
    skipped = [(r, d) for r in results for d in r.dtypes if d.outcome == SKIP and d.message]
    if skipped:
        lines += ["", "<details><summary>skipped dtypes and why</summary>", ""]
        lines += [f"- {code(r.op)} {d.dtype}: {cell(d.message, 300)}" for r, d in skipped]
        lines += ["", "</details>"]
    # what qualifies a row (a reference run's edge values not compared, or none added)
    noted = [(r, d, n) for r in results for d in r.dtypes for n in d.notes]
    if noted:
        lines += ["", "Notes:", ""] + [f"- {code(r.op)} {d.dtype}: {cell(n, 300)}" for r, d, n in noted]
    for note in notes or []:
        lines += ["", f"> {cell(note, 300)}"]
    return "\n".join(lines) + "\n"


def audit_section(results: list[OpResult], stale: list[str], orphans: list[str],
                  failed: list[str], device: str, keys: int) -> str:
    bad = bool(stale or failed)
    lines = [f"### porter audit-xfails ({device}): "
             f"{'❌ stale entries' if stale else '❌ unexpected failures' if failed else '✅ no stale entries'}",
             "", f"{keys} expectation key(s), {len(results)} OpInfo(s); {totals(results)}.", ""]
    if stale:
        lines += ["Stale entries (each passes but is expected to fail; "
                  "`porter audit-xfails --prune-xfails` narrows or removes them):", ""]
        lines += [f"- {cell(s, 300)}" for s in stale]
        lines.append("")
    if orphans:
        lines += ["Keys naming no OpInfo in the op database:", ""]
        lines += [f"- {code(k)}" for k in orphans]
        lines.append("")
    problem = [r for r in results if r.failed]
    if problem:
        lines += results_table(problem)
    elif not bad:
        lines.append("Every expectation entry still fails as it says.")
    return "\n".join(lines) + "\n"
