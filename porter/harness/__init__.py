"""The OpInfo output-match harness: `porter test`, `porter audit-xfails` and the measured
AUTO of `porter candidates --verify` (verify.py).

Imports torch lazily (inside functions): `porter --help` and the scaffolding commands never
pay for it. May import `porter.source`, `porter.apply` (the pruned expectations it writes, its
tables), `porter.emulate` (the `--device emulate` backend) and `porter.port` (verify.py plans a
port in memory to measure it); never the commands.
"""

from __future__ import annotations


def run_op_tests(op, root=None, backend="cpu", dtypes=None, sample=None):
    """Results (one OpResult per OpInfo variant) of testing `op` on `backend`."""
    from porter.harness.runner import run_op_tests as _run
    return _run(op, root, backend, dtypes=dtypes, sample=sample)


def run_after_edit(op: str, root, device: str = "emulate", out=None) -> int:
    """`porter new-op ... --test`: test `op` right after the edit was applied; prints the
    report and returns the exit code (0 pass, 1 fail or xpass, 2 device unavailable)."""
    from porter.errors import PorterError
    from porter.harness.session import Options, run
    import sys
    try:
        return run(Options(ops=[op], root=str(root) if root is not None else None,
                           device=device, out=out))
    except PorterError as err:
        print(f"porter: error: {err}", file=sys.stderr)
        return err.exit_code
