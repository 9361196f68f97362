"""`porter candidates --verify`: port an op in memory and measure the port.

Each op is planned as `new-op` / `migrate-from-mpsgraph` would plan it (no `--body`: the
automatic body), nothing is written to the checkout. The planned kernel and host files are laid
over a scratch copy of the checkout's `aten/src/ATen/native/mps/` (the headers are linked), built
by the emulator and run through the emulated output-match test, with the planned expectations.
A verdict is then one of:

  verified  every dtype the MPS test sends passes (or fails as an expectation says it will), on
            the full verdict (porter.harness.verdict_scope.FULL: what the command's own test runs)
  fails     the first failing dtype and why (a build error, a missing kernel, a wrong value)
  refused   porter would not write the port, and why (the planning's own error)
  not-run   the emulator cannot run it (no *Kernel.mm dispatches it once planned)
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from porter.errors import PorterError
from porter.harness.verdict_scope import FULL
from porter.runtime.scratch import reused_directory
from porter.source import checkout as co
from porter.runtime import run_memo

VERIFIED, FAILS, REFUSED, NOT_RUN = "verified", "fails", "refused", "not-run"
MPS_DIR = "aten/src/ATen/native/mps"


@dataclass
class Verdict:
    op: str
    status: str
    detail: str                    # "9/9 dtypes", "float16: <why>", the refusal
    passed: int = 0                # dtypes that pass (or xfail as expected)
    tested: int = 0                # dtypes the MPS test sends
    failed_dtype: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def plan_in_memory(checkout: co.Checkout, op: str, state: str):
    """The plan porter's editing command would write for `op` (no --body)."""
    if state == "mpsgraph":
        from porter.port.migration import plan_migration
        return plan_migration(checkout, op)
    from porter.port.plan import plan_port
    from porter.port.resolve import resolve
    return plan_port(checkout, resolve(checkout, op))


def verify(checkout: co.Checkout, op: str, state: str, reference_inputs: bool = FULL.reference_inputs,
           dtypes: list[str] | None = None, after: str | None = None) -> Verdict:
    try:
        plan = plan_in_memory(checkout, op, state)
    except PorterError as err:
        first = getattr(err, "prerequisite", None)
        if first and after is None:
            # the command asks for another op's port first (sgn: sign's, whose kernel sgn_out
            # runs for real inputs): both ports, in that order, each as its command plans it
            return _after_prerequisite(checkout, op, state, first, err, reference_inputs, dtypes)
        return Verdict(op, REFUSED, err.message)
    # what the editing command refuses before writing (porter.commands.before_writing): registrations
    # a Mac rejects, and an incomplete port (a dtype without a kernel, a functor without a body)
    wrong = getattr(plan, "wrong", None) or []
    if wrong:
        return Verdict(op, REFUSED, "wrong registrations: " + "; ".join(w.message for w in wrong))
    gaps = getattr(plan, "gaps", None) or []
    if gaps:
        # what the command asks for first: a port that lacks a body needs --body, it is not
        # refused for its skeleton's build error
        return Verdict(op, REFUSED, "incomplete port: " + "; ".join(f"needs {g.flag} for {g.what}" for g in gaps))
    verdict = measure(checkout, op, plan.changes, reference_inputs, dtypes)
    if verdict.status == FAILS and " does not build: " in verdict.detail:
        # the command builds the planned file before writing, and refuses it
        verdict.status, verdict.detail = REFUSED, verdict.detail.split(": ", 1)[1]
    return verdict


def _after_prerequisite(checkout: co.Checkout, op: str, state: str, first: str, err: PorterError,
                        reference_inputs: bool, dtypes) -> Verdict:
    """`op` measured on a scratch copy of the checkout with `first`'s port written into it, as a
    user runs the two commands; refused with the command's own reason when `first` cannot be
    ported."""
    from porter.port.resolve import resolve
    try:
        prior = plan_in_memory(checkout, first, resolve(checkout, first).state)
    except PorterError as why:
        return Verdict(op, REFUSED, f"{err.message}; and {first} is refused: {why.message}")
    if getattr(prior, "gaps", None) or getattr(prior, "wrong", None):
        return Verdict(op, REFUSED, f"{err.message}; and {first}'s port is incomplete")
    with reused_directory("verify-after", checkout.root) as tmp:
        root = tmp / "checkout"
        shutil.copytree(checkout.root, root, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for change in prior.changes.changes.values():
            if change.new is not None:
                (root / change.path).parent.mkdir(parents=True, exist_ok=True)
                (root / change.path).write_text(change.new, encoding="utf-8")
        verdict = verify(co.Checkout.at(root), op, state, reference_inputs, dtypes, after=first)
    verdict.detail += f" (after {first}'s port: `porter status {first}`)"
    return verdict


def measure(checkout: co.Checkout, op: str, changes, reference_inputs: bool = FULL.reference_inputs,
            dtypes: list[str] | None = None, shapes: bool = FULL.shapes) -> Verdict:
    """Build and test `op` with `changes` laid over the checkout, writing nothing there
    (`dtypes`: only those)."""
    from porter.emulate.emulator_device import EmulateBackend
    from porter.harness import mps_expectations as expmod
    from porter.harness import opinfo_run

    # a path that repeats from op to op: the preludes and front-end text built for one op's
    # shadow serve the next (porter.runtime.scratch)
    with reused_directory("verify", checkout.root) as tmp:
        shadow = _shadow(checkout, changes, tmp)
        # the shadow's path repeats from op to op, its files do not: each op's check is a run
        # of its own (porter.runtime.run_memo)
        run_memo.forget()
        backend = EmulateBackend(shadow)
        try:
            ctx = opinfo_run.make_context(checkout.root, backend, checkout)
            planned = changes.current(co.COMMON_MPS, checkout.read) \
                if checkout.exists(co.COMMON_MPS) else None
            if planned is not None:
                ctx.expectations = expmod.parse(planned, co.COMMON_MPS) or expmod.Expectations(None)
            try:
                results = opinfo_run.run_op_tests(op, checkout.root, backend, ctx=ctx, dtypes=dtypes,
                                                  reference_inputs=reference_inputs,
                                                  shapes=shapes)
            except PorterError as err:
                return Verdict(op, NOT_RUN, err.message)
        finally:
            backend.close()
    return _verdict(op, results)


def _verdict(op: str, results) -> Verdict:
    from porter.harness.verdicts import FAIL, SKIP, XPASS
    rows = [(r, d) for r in results for d in r.dtypes]
    upstream = [d for r, d in rows if not r.reference and not r.shapes]
    if upstream and all(d.outcome == SKIP for d in upstream):
        return Verdict(op, NOT_RUN, upstream[0].message or "skipped", tested=len(upstream))
    bad = [(r, d) for r, d in rows if d.outcome in (FAIL, XPASS)]
    passed = sum(d.outcome not in (FAIL, XPASS, SKIP) for d in upstream)
    if not bad:
        return Verdict(op, VERIFIED, f"{passed}/{len(upstream)} dtypes", passed, len(upstream))
    r, d = bad[0]
    where = f"{d.dtype} (reference inputs)" if r.reference else \
        f"{d.dtype} (shapes)" if r.shapes else d.dtype
    why = d.message if d.outcome == FAIL else "passes, but an expectation says it fails"
    if d.outcome == FAIL and d.mismatches:
        # a reference input's first row beside its float64 value: which side is off it
        from porter.harness.mismatches import in_one_line
        clause = in_one_line(d.mismatches[0])
        why += f"; {clause}" if clause else ""
    return Verdict(op, FAILS, f"{where}: {why}", passed, len(upstream), d.dtype)


def _shadow(checkout: co.Checkout, changes, tmp: Path) -> Path:
    """A scratch root: the checkout's mps/ directory with the planned files over it, and the
    headers the kernels include linked from the checkout."""
    root = Path(checkout.root)
    shutil.copytree(root / MPS_DIR, tmp / MPS_DIR, symlinks=True)
    for change in changes.changes.values():
        if change.path.startswith(MPS_DIR + "/") and change.new is not None:
            target = tmp / change.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(change.new, encoding="utf-8")
    c10_changes = [c for c in changes.changes.values()
                   if c.path.startswith("c10/") and c.new is not None]
    if c10_changes:
        # a port that adds a helper to c10/metal (porter.port.helpers) builds against it
        shutil.copytree(root / "c10", tmp / "c10", symlinks=True)
        for change in c10_changes:
            (tmp / change.path).write_text(change.new, encoding="utf-8")
    elif (root / "c10").is_dir():
        (tmp / "c10").symlink_to(root / "c10", target_is_directory=True)
    # Scalar arguments reach a kernel through the op's schema and the shared function's stub
    # call (porter.emulate.host_args): the planned yaml and the native sources, linked
    yaml = tmp / co.NATIVE_YAML
    yaml.parent.mkdir(parents=True, exist_ok=True)
    if checkout.exists(co.NATIVE_YAML):
        yaml.write_text(changes.current(co.NATIVE_YAML, checkout.read), encoding="utf-8")
    # and the native headers: the string-to-enum functions a host's kernel choice goes through
    # (gelu's get_gelutype_enum, porter.emulate.kernel_pick) and the stubs' declarations
    for source in [*(root / co.NATIVE).glob("*.cpp"), *(root / co.NATIVE).glob("*.h")]:
        (tmp / co.NATIVE / source.name).symlink_to(source)
    return tmp
