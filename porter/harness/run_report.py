"""Human and JSON reports of harness results."""

from __future__ import annotations

import shlex
from collections import Counter

from porter.harness.verdicts import FAIL, PASS, SKIP, UNFUSED_ONLY, XFAIL, XPASS, OpResult

GRAD_TEST = "test_output_grad_match"

OUTCOMES = (PASS, FAIL, XFAIL, XPASS, SKIP)


def repro(result: OpResult, dtype: str, sample: int | None, root: str | None = None) -> str:
    parts = ["porter", "test", result.op, "--device", result.device, "--dtype", dtype]
    if result.reference:
        parts.append("--reference-inputs")
    if result.test == GRAD_TEST:
        parts.append("--grad")
    if result.shapes:
        parts.append("--shapes")      # the failure names its shape; --sample N counts upstream's
        sample = None
    if sample is not None:
        parts += ["--sample", str(sample)]
    if root:
        parts += ["--root", root]
    return shlex.join(parts)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.3g}"


def summary_counts(results: list[OpResult]) -> Counter:
    return Counter(d.outcome for r in results for d in r.dtypes)


def is_not_proven(message: str | None) -> bool:
    """Whether a failing dtype's message says porter cannot tell, not that it saw a wrong
    answer: it starts "not proven", or the sample passes unfused and fails only contracted,
    or the kernel crashed where a GPU answers something undefined (review 37's M01, M03)."""
    text = message or ""
    # a trapped kernel's message may be cut short in the row (its "not proven" lost), and a
    # shapes row names its layout first (`RuntimeError: transposed: KernelCrashed`)
    return (text.startswith("not proven") or f"{UNFUSED_ONLY}: not proven" in text
            or (text.startswith("emulate error: ")
                and ("KernelCrashed" in text or "KernelTimedOut" in text)
                and "Metal leaves undefined" in text))


def not_proven_count(results: list[OpResult]) -> int:
    """The failing dtypes whose reason is "not proven" (what porter cannot model, never a
    mismatch seen): a port red only on these is not known to be wrong, and the user's next
    step differs (docs/testing.md)."""
    return sum(1 for r in results for d in r.dtypes
               if d.outcome == FAIL and is_not_proven(d.message))


def summary_line(results: list[OpResult]) -> str:
    """Verdicts first; skips apart: they are what porter did not run, not a result."""
    counts = summary_counts(results)
    unproven = not_proven_count(results)
    verdicts = ", ".join(f"{counts.get(o, 0)} {o}"
                         + (f" ({unproven} not proven)" if o == FAIL and unproven else "")
                         for o in OUTCOMES if o != SKIP)
    skipped = counts.get(SKIP, 0)
    return verdicts + (f"; {skipped} skip (not run, reasons above)" if skipped else "; 0 skip")


def _details(result: OpResult, root: str | None) -> list[str]:
    """One line per failing dtype that ran (with its repro); dtypes decided without running
    a sample (a missing kernel, a file that does not build, an op porter cannot run) are
    grouped by message, so ten dtypes with one cause read as one line."""
    lines: list[str] = []
    grouped: dict[tuple[str, str], list[str]] = {}
    for d in result.dtypes:
        if d.sample is not None:           # --sample N: what that sample is
            lines.append(f"  sample {d.sample['index']} ({d.dtype}): "
                         + "; ".join(f"{k} {v}" for k, v in d.sample["inputs"].items()))
        if d.outcome in (FAIL, SKIP, XFAIL) and d.samples == 0 and d.message:
            if d.outcome != XFAIL:
                grouped.setdefault((d.outcome, d.message), []).append(d.dtype)
        elif d.outcome == FAIL:
            where = f"sample {d.first_failure}" if d.first_failure is not None else "samples"
            lines.append(f"  FAIL {d.dtype} ({d.failed_samples}/{d.samples} samples), {where}: "
                         f"{d.message}")
            if d.mismatches:
                from porter.harness.mismatches import text
                lines += text(d.mismatches)
            lines.append(f"    repro: {repro(result, d.dtype, d.first_failure, root)}")
        elif d.outcome == XPASS:
            lines.append(f"  XPASS {d.dtype}: passes but is expected to fail by "
                         f"{'; '.join(d.expected_by)} (stale entry; --prune-xfails narrows it)")
        for note in d.notes:
            lines.append(f"  note {d.dtype}: {note}")
    for (outcome, message), dtypes in grouped.items():
        label = "FAIL" if outcome == FAIL else "skip"
        lines.append(f"  {label} {', '.join(dtypes)}: {message}")
    return lines


def render_text(results: list[OpResult], root: str | None = None, header: str | None = None) -> str:
    lines = [header] if header else []
    for result in results:
        lines.append("")
        if result.reference:
            lines.append(f"{result.op}  (reference inputs: extremal values, beyond upstream's "
                         f"samples, device {result.device})")
        elif result.shapes:
            lines.append(f"{result.op}  (shapes: {', '.join(result.shapes)}; beyond upstream's "
                         f"samples, views kept, device {result.device})")
        elif result.via:
            lines.append(f"{result.op}  (backward op, device {result.device}; samples of {result.via})")
        elif result.test == GRAD_TEST:
            lines.append(f"{result.op}  (output and gradients, {result.test}; xfail key "
                         f"{result.key!r}, device {result.device})")
        else:
            lines.append(f"{result.op}  (xfail key {result.key!r}, device {result.device})")
        if not result.dtypes:
            lines.append("  no dtype to test on this device")
            continue
        has_upstream = any(d.upstream for d in result.dtypes)
        cols = ["dtype", "outcome", "samples", "max_abs", "max_rel", "first_fail", "seconds"]
        if has_upstream:
            cols.append("upstream")
        rows = []
        for d in result.dtypes:
            row = [d.dtype, d.outcome, str(d.samples), _num(d.max_abs), _num(d.max_rel),
                   "-" if d.first_failure is None else str(d.first_failure), f"{d.seconds:.2f}"]
            if has_upstream:
                row.append(d.upstream or "-")
            rows.append(row)
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
        for row in rows:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
        lines += _details(result, root)
    lines.append("")
    lines.append("summary: " + summary_line(results))
    return "\n".join(lines) + "\n"


def to_json(results: list[OpResult], **extra) -> dict:
    counts = summary_counts(results)
    return {
        "ok": not any(r.failed for r in results),
        **extra,
        "summary": {o: counts.get(o, 0) for o in OUTCOMES},
        "ops": [r.to_json() for r in results],
    }
