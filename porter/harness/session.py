"""One `porter test` run end to end: resolve checkout and backend, run, report, prune.

Shared by the `test` command and `run_after_edit` (`new-op ... --test`).
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from porter import exit_codes
from porter.apply.changes import ChangeSet
from porter.apply.write import apply_unless_dry
from porter.runtime import run_memo
from porter.source.checkout import resolve_checkout
from porter.errors import PorterError
from porter.harness import prune as prunemod
from porter.harness import refcache, run_report, verdict_scope
from porter.harness.devices import get_backend
from porter.harness.verdicts import FAIL, SKIP, XPASS, OpResult, dtype_order


@dataclass
class Options:
    ops: list[str]
    root: str | None = None
    device: str = "mps"
    dtypes: list[str] | None = None
    sample: int | None = None
    json: bool = False
    junit: str | None = None
    summary: str | None = None              # append the Markdown table to this file
    markdown: bool = False                  # print the Markdown table instead of text
    prune_xfails: bool = False
    dry_run: bool = False
    allow_dirty: bool = False
    upstream: bool = False
    macos: str | None = None                # --macos VERSION: the macOS whose gated lists apply
    # which rows make the verdict: the commands pass porter.harness.verdict_scope.FULL's (a
    # record's defaults are upstream's samples alone, for the harness's own tests)
    reference_inputs: bool = False          # also run the OpInfos' reference_inputs, as own rows
    shapes: bool = False                    # also run porter.harness.shapes' layouts, as own rows
    no_cache: bool = False                  # skip the reference cache (porter.harness.refcache)
    grad: bool = False
    backend: object | None = None          # injected backend (tests); else by name
    out: object = field(default=None)       # stream for the report (default stdout)
    quiet: bool = False                     # -q: no notes on stderr
    # --changed-since REF: "op: why" for each op whose CPU reference is not proven to be this
    # checkout's (porter.checks.cpu_reference, computed by the command): not proven, exit 1.
    # Or a Future of them (in_background), read once the rows have run
    reference_gaps: list[str] | Future = field(default_factory=list)
    # filled by run() for a caller that words its own last line (the port commands):
    # "only_not_proven", whether every red row is "not proven" rather than a mismatch seen
    verdict_counts: dict | None = None


def in_background(ask: Callable[[], list[str]]) -> Future:
    """`ask()` on a thread of its own, as a Future: the default base's reference gaps are git
    runs and a read of the base's CPU files (~0.2 s), which the verdict needs only after its
    rows, and which held up the kernel file's build while the run was starting."""
    done: Future = Future()

    def answer() -> None:
        try:
            done.set_result(ask())
        except BaseException as err:        # noqa: BLE001 (re-raised by result(), in the run)
            done.set_exception(err)

    threading.Thread(target=answer, daemon=True, name="porter-reference-gaps").start()
    return done


def run(opts: Options) -> int:
    out = opts.out or sys.stdout
    if opts.prune_xfails and opts.sample is not None:
        raise PorterError("--prune-xfails needs every sample; drop --sample")
    if opts.prune_xfails and opts.grad:
        raise PorterError("--prune-xfails edits test_output_match's lists, not --grad's",
                          hint="run --prune-xfails without --grad")
    # a port command tests the files it has just written: what was read before is read again
    run_memo.forget()
    checkout = resolve_checkout(opts.root)
    root = checkout.root if checkout else None
    backend = opts.backend or get_backend(opts.device, root)
    reason = backend.unavailable_reason()
    if reason:
        raise PorterError(reason)
    ctx, results = _run_ops(opts, checkout, root, backend)
    # a kernel file built in part (headers older than it): its kernels that built ran, but the
    # file's own build, which a port needs, is not proven; never a green run
    header_gaps = backend.header_gaps() if hasattr(backend, "header_gaps") else []
    gaps = opts.reference_gaps
    reference_gaps = list(gaps.result() if isinstance(gaps, Future) else gaps)
    from porter.harness import opinfo_agreement
    opinfo_agreement.drop_unsent(checkout, results, ctx.db)
    reference_gaps += opinfo_agreement.unproven(checkout, results, ctx.db)
    upstream_note = None
    if opts.upstream:
        from porter.harness import upstream
        upstream_note = upstream.run(root, results) if root else "no checkout"
    root_arg = opts.root
    if opts.junit:
        from porter.harness import junit
        Path(opts.junit).write_text(junit.render(results, root_arg), encoding="utf-8")
    if opts.summary or opts.markdown:
        from porter.harness import markdown
        section = markdown.test_section(results, backend.name, root_arg,
                                        [f"--upstream not run: {upstream_note}"] if upstream_note else None)
        if opts.summary:
            markdown.append(opts.summary, section)

    pruned, changes, applied = None, None, False
    if opts.prune_xfails and getattr(backend, "mps_expectations", False) and checkout:
        # expectations are about upstream's samples: reference-input rows never prune one
        pruned = prunemod.plan([r for r in results if not r.reference and not r.shapes],
                               ctx.expectations)
        changes = ChangeSet(checkout.root)
        prunemod.add_to_changeset(changes, ctx.expectations, pruned)
        if changes and not opts.dry_run:
            apply_unless_dry(changes, opts.dry_run, opts.allow_dirty)
            applied = True
    elif opts.prune_xfails:
        pruned = prunemod.PrunePlan(reported=["--prune-xfails: no MPS expectations apply to "
                                              f"--device {backend.name} or no checkout"])

    meta = {
        "device": backend.name,
        "rows": verdict_scope.words(opts.reference_inputs, opts.shapes),
        "opdb": {"source": ctx.db.source, "torch": ctx.db.torch_version, "path": ctx.db.torch_path},
        "expectations": ctx.expectations.path,
        "tolerance_lists": ctx.lists.source,
        **({"grad_tolerances": ctx.lists.grad_source} if opts.grad else {}),
        "samples": ctx.samples.source,
        "macos": ".".join(map(str, ctx.macos)),
    }
    cached = getattr(ctx, "from_reference_cache", False)
    if cached:
        meta["reference_cache"] = "samples and CPU references read from the cache"
    if upstream_note:
        meta["upstream_error"] = upstream_note
    if header_gaps or reference_gaps:
        meta["not_proven"] = header_gaps + reference_gaps
    source_notes = opinfo_agreement.notes(checkout, results, ctx.db)
    if source_notes:
        meta["opinfo_source"] = source_notes
    untested = nothing_tested(results)
    if opts.verdict_counts is not None:
        unproven = run_report.not_proven_count(results)
        # only "not proven" where nothing else makes it red: no mismatch, no XPASS, and
        # something ran
        opts.verdict_counts.update(only_not_proven=not untested and unproven == sum(
            1 for r in results for d in r.dtypes if d.outcome in (FAIL, XPASS))
            and unproven + len(header_gaps) + len(reference_gaps) > 0)
    code = max(exit_code(results, pruned, applied),
               exit_codes.FAILED if header_gaps or reference_gaps or untested else exit_codes.OK)
    if opts.json:
        data = run_report.to_json(results, **meta)
        # the document says what the exit status says: a run that exits 1 is never "ok"
        data["ok"] = code == exit_codes.OK
        why = red_reasons(results, pruned, applied, header_gaps + reference_gaps, untested)
        if why:
            data["why"] = why
        if pruned is not None:
            data["prune"] = {"actions": pruned.actions, "reported": pruned.reported,
                             "applied": applied,
                             "status": changes.status_lines() if changes else [],
                             "diff": changes.diff() if changes else ""}
        out.write(json.dumps(data, indent=1) + "\n")
    elif opts.markdown:
        out.write(section)
    else:
        header = (f"porter test: device {backend.name}; op_db from {ctx.db.source} torch "
                  f"{ctx.db.torch_version}; expectations {ctx.expectations.path or 'none'} "
                  f"as on macOS {'.'.join(map(str, ctx.macos))}; samples as "
                  f"{'test/test_mps.py asks' if ctx.samples.source != 'built-in' else 'upstream asks (built-in)'}"
                  f"; tolerances from {ctx.lists.source}"
                  + (f"; gradient tolerances from {ctx.lists.grad_source}" if opts.grad else "")
                  + f"; rows: {verdict_scope.words(opts.reference_inputs, opts.shapes)}")
        if cached:
            header += "; samples and references cached (--no-cache recomputes)"
        if upstream_note:
            header += f"\n--upstream not run: {upstream_note}"
        # notes go to stderr, where -q removes them: stdout is the report
        for n in source_notes:
            if not opts.quiet:
                print(f"note: {n}", file=sys.stderr)
        out.write(run_report.render_text(results, root_arg, header))
        for gap in header_gaps:
            out.write(f"not proven: {gap}; use a checkout with its own c10/metal, or a torch "
                      "whose headers define it\n")
        for gap in reference_gaps:
            out.write(f"not proven: {gap}\n")
        if pruned is not None:
            for line in pruned.actions:
                out.write(f"prune: {line}\n")
            for line in pruned.reported:
                out.write(f"prune (not edited): {line}\n")
            if changes:
                if applied:
                    out.write("".join(f"{s}\n" for s in changes.status_lines()))
                else:
                    out.write("".join(f"{s}\n" for s in changes.status_lines()))
                    out.write(changes.diff())
            elif not pruned.actions:
                out.write("prune: nothing to do\n")
    if untested:
        # a run in which nothing passed or failed proved nothing: CI must not go green on it
        (sys.stderr if opts.json or opts.markdown else out).write(untested + "\n")
    return code


def _run_ops(opts: Options, checkout, root, backend):
    """(context, results): from the reference cache when it has every sample the run needs
    (porter.harness.cached_run: no op database, no torch), else from op_db
    (porter.harness.opinfo_run), recording for the next run. Either way one verdict pipeline
    (porter.harness.verdicts) decides."""
    env = None
    if getattr(backend, "name", "") == "emulate":   # g++ on the other core while we start up
        backend.prebuild(opts.ops)
    if refcache.wanted(opts, backend) and refcache.samples_recordable(checkout):
        env = refcache.environment(root, getattr(backend, "device_type", backend.name))
        recorded = refcache.recorded_ops(env, opts.ops, refcache.rows_of(opts)) if env else None
        if recorded is not None:
            from porter.harness import cached_run
            cached = cached_run.try_run(opts, checkout, backend, env, recorded)
            if cached is not None:
                return cached, cached.results
    from porter.harness import opinfo_run
    from porter.harness.mps_expectations import parse_macos
    ctx = opinfo_run.make_context(root, backend, checkout,
                                  parse_macos(opts.macos) if opts.macos else None)
    results: list[OpResult] = []
    for op in opts.ops:
        results += opinfo_run.run_op_tests(op, root, backend, dtypes=opts.dtypes,
                                           sample=opts.sample, ctx=ctx, grad=opts.grad,
                                           reference_inputs=opts.reference_inputs,
                                           shapes=opts.shapes)
    if env:
        try:
            opinfo_run.record_for_cache(ctx, opts.ops, env, refcache.rows_of(opts))
        except OSError as err:           # a read-only or full cache directory costs speed only
            print(f"porter: note: reference cache not written: {err}", file=sys.stderr)
    return ctx, results


def nothing_tested(results) -> str | None:
    """The error line of a run in which no dtype passed or failed (every one skipped, or
    none asked), with what to do; None when something was tested."""
    if any(d.outcome != SKIP for r in results for d in r.dtypes):
        return None
    names = list(dict.fromkeys(r.name for r in results))
    op = names[0].removeprefix("nn.functional.") if len(names) == 1 else "OP"
    what = ", ".join(names) or "the op"
    asked = [d.dtype for r in results for d in r.dtypes]
    sent = sorted({s for r in results for s in (r.supported or ())}, key=dtype_order)
    if asked and sent and not set(asked) & set(sent):
        # --dtype named only dtypes the MPS test does not send: porting is not what is missing
        return (f"porter: error: nothing was tested: the MPS test of {what} sends none of "
                f"{', '.join(dict.fromkeys(asked))}; pass --dtype with one it sends "
                f"({', '.join(sent)}), or none for all of them")
    listed = {e for r in results for d in r.dtypes for e in (d.expected_by or ())}
    if all(d.message and d.message.startswith("skipped by ") for r in results for d in r.dtypes) \
            and asked and listed:
        # the checkout's own expectations skip every dtype (review 32's D21: porter advised
        # porting an op already ported): a Mac's test skips it too, and tests nothing
        return (f"porter: error: nothing was tested: the checkout's expectations skip every "
                f"dtype of {what} ({sorted(listed)[0]}), so a Mac's test skips it too, and a run "
                "that tests nothing is not green; remove the entry to test the port")
    return (f"porter: error: nothing was tested: every dtype of {what} was skipped (reasons "
            f"above), and a run that tests nothing is not green; port it first: `porter "
            f"migrate-from-mpsgraph {op}` for an op on MPSGraph, else `porter new-op {op}` "
            f"(`porter status {op}` says which), or test it on "
            f"{'--device mps' if sys.platform == 'darwin' else 'a Mac with --device mps'}")


def red_reasons(results, pruned, applied: bool, header_gaps, untested: str | None) -> list[str]:
    """Why a run exits 1, one line each, for the JSON report's "why" (what the text report
    says in its table, its FAIL/XPASS lines and its errors)."""
    why = [f"{_row_label(r)} {d.dtype}: {d.outcome}" + (f" ({d.message})" if d.message else "")
           for r in results for d in r.dtypes if d.outcome == FAIL]
    if _unpruned_xpass(results, pruned, applied):
        why += [f"{_row_label(r)} {d.dtype}: xpass (passes but is expected to fail; --prune-xfails "
                "narrows the entry)" for r in results for d in r.dtypes if d.outcome == XPASS]
    why += [f"not proven: {gap}" for gap in header_gaps]
    if untested:
        why.append(untested.removeprefix("porter: error: "))
    return why


def _row_label(result) -> str:
    return result.op + (" (reference inputs)" if result.reference else
                        " (shapes)" if result.shapes else
                        " (gradients)" if result.test == run_report.GRAD_TEST else "")


def _unpruned_xpass(results, pruned, applied: bool) -> bool:
    xpass = any(d.outcome == XPASS for r in results for d in r.dtypes)
    return xpass and not (applied and pruned is not None and not pruned.reported)


def exit_code(results, pruned, applied: bool) -> int:
    if any(d.outcome == FAIL for r in results for d in r.dtypes):
        return exit_codes.FAILED
    if _unpruned_xpass(results, pruned, applied):
        return exit_codes.FAILED
    return exit_codes.OK
