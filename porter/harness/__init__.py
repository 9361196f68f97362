"""The OpInfo output-match harness: `porter test`, `porter audit-xfails` and the measured
AUTO of `porter candidates --verify` (measure_port.py).

One verdict per (OpInfo, dtype), decided by one pipeline (`verdicts`: samples -> kernel ->
compare -> outcome) over one of two sources: `opinfo_run` (samples from op_db, references
computed now, recorded for the next run) and `cached_run` (both read from the reference
cache, `refcache`: its key, its format, whether a run uses it); the devices they run on (`devices`: torch's, `--device emulate` from porter.emulate,
`mps_shader_device`); what is expected (`mps_expectations`, `tolerances`); what is reported
(`run_report`, `junit`, `markdown`); `session`: one `porter test` end to end.

Imports torch lazily (inside functions): `porter --help` and the scaffolding commands never
pay for it. May import: `porter.dispatch`, `porter.emulate` (the `--device emulate` device),
`porter.source`, `porter.apply` (the pruned expectations it writes, its tables),
`porter.port` (measure_port plans a port in memory to measure it), `porter.runtime`,
`porter.errors`, `porter.exit_codes`. Never the commands (tests/test_layout.py).
"""

from __future__ import annotations


def run_op_tests(op, root=None, backend="cpu", dtypes=None, sample=None):
    """Results (one OpResult per OpInfo variant) of testing `op` on `backend`."""
    from porter.harness.opinfo_run import run_op_tests as _run
    return _run(op, root, backend, dtypes=dtypes, sample=sample)


def run_after_edit(op: str, root, device: str = "emulate", out=None, json: bool = False,
                   verdict_counts: dict | None = None, reference_gaps: list[str] | None = None) -> int:
    """The test that ends `porter new-op` / `migrate-from-mpsgraph` (and a rerun of either):
    test `op` right after the edit was applied, with the full verdict
    (porter.harness.verdict_scope.FULL, what `porter test` runs); prints the report and returns
    the exit code (0 pass, 1 fail, xpass or nothing tested, 2 device unavailable);
    `verdict_counts` (porter.harness.session.Options) is filled with the red dtypes' kinds;
    `reference_gaps`: the ops whose CPU reference is not this checkout's (what `porter test`
    is given: porter.checks.reference_base.default_reference_gaps), not proven as there."""
    from porter.errors import PorterError
    from porter.harness.session import Options, run
    from porter.harness.verdict_scope import FULL
    import sys
    try:
        return run(Options(ops=[op], root=str(root) if root is not None else None,
                           device=device, out=out, reference_inputs=FULL.reference_inputs,
                           shapes=FULL.shapes, json=json, verdict_counts=verdict_counts,
                           reference_gaps=list(reference_gaps or [])))
    except PorterError as err:
        print(f"porter: error: {err}", file=sys.stderr)
        return err.exit_code
