"""`porter test OP [OP ...]`: OpInfo output match per dtype, with MPS xfail semantics."""

from __future__ import annotations

HELP = "run the OpInfo output-match test of ops on a device, per dtype (pass/fail/xfail/xpass/skip)"


def add_arguments(parser) -> None:
    parser.add_argument("ops", nargs="+", metavar="OP",
                        help="OpInfo name (special.log_ndtr), aten name (special_log_ndtr), "
                             "full name with variant (round.decimals_0), or a backward op "
                             "(sigmoid_backward: tested through its forward op's samples)")
    parser.add_argument("--root", metavar="DIR", help="PyTorch checkout (default: around cwd)")
    parser.add_argument("--device", default="auto",
                        help="auto (the default: mps on a Mac, else emulate), mps, cuda, emulate, or mps-shader (the checkout's .metal compiled by an "
                             "installed torch's torch.mps.compile_shader on Apple silicon, no build); "
                             "cpu: compare CPU with CPU, for measuring overhead")
    parser.add_argument("--dtype", action="append", dest="dtypes", metavar="D",
                        help="test only this dtype (repeatable), e.g. float16")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="run only sample input N (with --reference-inputs: of the reference inputs)")
    from porter.commands.terminal import add_format
    add_format(parser, ("text", "json", "markdown", "junit", "github"), {
        "markdown": "the table --summary appends", "junit": "JUnit XML",
        "github": "workflow-command annotations, one per failing dtype"})
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument("--summary", metavar="FILE",
                        help="also append a Markdown table (op, dtype outcomes, first failing sample, "
                             "repro) to FILE, e.g. \"$GITHUB_STEP_SUMMARY\"")
    parser.add_argument("--prune-xfails", action="store_true",
                        help="narrow or remove expectation entries that xpassed")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --prune-xfails: show status and diff, write nothing")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="with --prune-xfails: edit files even if they have uncommitted changes")
    parser.add_argument("--samples-only", action="store_true",
                        help="run upstream's OpInfo samples alone, as test_output_match sends them "
                             "(to compare with it); not porter's verdict, which by default adds the "
                             "reference inputs and the shapes")
    parser.add_argument("--reference-inputs", action="store_true",
                        help="the reference_inputs rows (±0.0, ±inf, nan, subnormals, the dtype's "
                             "limits) are part of every run; with --sample N: run the reference "
                             "inputs' sample N alone")
    parser.add_argument("--shapes", action="store_true",
                        help="the shapes rows (transposed, sliced-with-step, broadcast, 0-dim, empty, "
                             "large; views kept) are part of every run; with --sample N: run the "
                             "shapes' sample N alone")
    parser.add_argument("--macos", metavar="VERSION",
                        help="the macOS whose gated expectation lists apply (e.g. 14.4; default: "
                             "this Mac's with --device mps, else the newest)")
    parser.add_argument("--no-cache", action="store_true",
                        help="with --device emulate: ignore the reference cache (samples and CPU "
                             "references of earlier runs) and recompute everything")
    parser.add_argument("--watch", action="store_true",
                        help="with --device emulate: run again on every save of a .metal file, "
                             "a header it includes, a *Kernel.mm or the expectation lists; "
                             "Ctrl-C stops")
    parser.add_argument("--grad", action="store_true",
                        help="also compare gradients (upstream's test_output_grad_match) on mps/cuda; "
                             "on emulate, test the backward kernels the op's derivative formula calls")
    parser.add_argument("--upstream", action="store_true",
                        help="also run the checkout's test/test_mps.py for the ops (Mac only)")
    parser.add_argument("--changed-since", metavar="REF",
                        help="CI's run of a pull request forked from REF: an op whose CPU kernel the "
                             "change edits (or may edit) is not proven, since the reference is the "
                             "installed torch's CPU, not this checkout's (default: the merge base "
                             "with origin/main, upstream/main, main, origin/master or master, as "
                             "porter pr; none in the repository, or no git: no check)")


# options the --watch loop cannot honour: each round would edit the files it watches, or run
# a Mac's test_mps.py, which the emulator's loop does not
_NOT_WATCHED = {"prune_xfails": "--prune-xfails", "upstream": "--upstream"}


def options(args) -> dict:
    """The session's options for these arguments: the one set a run with or without --watch
    uses (porter.harness.verdict_scope decides which rows make the verdict)."""
    from porter.errors import PorterError
    from porter.harness import verdict_scope

    if args.samples_only and (args.reference_inputs or args.shapes):
        flag = "--reference-inputs" if args.reference_inputs else "--shapes"
        raise PorterError(f"--samples-only runs upstream's samples alone; {flag} asks for other rows",
                          hint="drop one of them")
    if args.sample is not None and args.reference_inputs and args.shapes:
        raise PorterError("--sample N counts the samples of one kind of row: pass --reference-inputs "
                          "or --shapes, not both")
    if args.sample is not None:
        # the repro of one failing sample: N counts the rows of its kind, and only they run
        reference_inputs, shapes = args.reference_inputs, args.shapes
    else:
        scope = verdict_scope.of(args.samples_only)
        reference_inputs, shapes = scope.reference_inputs, scope.shapes
    return dict(ops=args.ops, root=args.root, device=args.device,
                dtypes=args.dtypes, sample=args.sample, json=args.json,
                junit=args.junit, summary=args.summary,
                markdown=args.format == "markdown", prune_xfails=args.prune_xfails,
                dry_run=args.dry_run, allow_dirty=args.allow_dirty,
                upstream=args.upstream, grad=args.grad, no_cache=args.no_cache,
                macos=args.macos, reference_inputs=reference_inputs, shapes=shapes)


def run(args) -> int:
    import sys

    from porter.checks import reference_base
    from porter.commands.common import check_dtype_names, require, resolve_device
    from porter.commands.terminal import only_with
    from porter.errors import PorterError
    only_with(args, "--prune-xfails", "--dry-run", "--allow-dirty")
    check_dtype_names(args.dtypes)
    args.device = resolve_device(args.device)
    require("test", "numpy")       # expecttest has a stand-in (harness.opdb)
    from porter.harness.session import Options, run as run_session
    options_ = options(args)
    if args.watch:
        # every round is the run without --watch: an option it cannot honour is an error
        if args.format not in ("text", "json"):
            raise PorterError(f"--watch prints text or json, not --format {args.format}",
                              hint="--junit FILE and --summary FILE are written every round")
        for key, flag in _NOT_WATCHED.items():
            if options_[key]:
                raise PorterError(f"--watch cannot honour {flag}: "
                                  + ("it edits the expectation lists the loop watches"
                                     if key == "prune_xfails" else
                                     "it runs the checkout's test_mps.py on a Mac, not the emulator's loop"),
                                  hint=f"run `porter test` without --watch for {flag}")
        if args.changed_since:
            raise PorterError("--watch cannot honour --changed-since: it is CI's run of a pull request",
                              hint="run `porter test --changed-since REF` without --watch")
        # the branch's base, as without --watch: asked again every round, so that an edit of
        # the op's CPU kernel makes the next round not proven (review 42's F2 read it once)
        from porter.harness import watch
        return watch.run(Options(**options_),
                         reference_gaps=lambda: reference_base.default_reference_gaps(args.root, args.ops))
    if args.changed_since:
        options_["reference_gaps"] = reference_base.reference_gaps(args.root, args.changed_since, args.ops)
    else:
        from porter.harness.session import in_background
        options_["reference_gaps"] = in_background(
            lambda: reference_base.default_reference_gaps(args.root, args.ops))
    from porter.commands import terminal
    options_["quiet"] = terminal.quiet()
    try:
        with terminal.Elapsed(f"porter test {' '.join(args.ops)}: running on {args.device}") as elapsed, \
                _rows_if(args.format == "text", elapsed):
            if args.format == "text" and terminal.color():
                # made inside: it writes through the stdout that clears the elapsed-time line
                # before the report's first line (made outside, it held the bare stdout and the
                # header was printed after the spinner's uncleared text)
                options_["out"] = terminal.Painted(sys.stdout, terminal.paint_test_line)
            if args.format in ("junit", "github"):
                return _run_converted(args, options_, run_session, Options)
            return run_session(Options(**options_))
    finally:
        if "out" in options_:
            options_["out"].flush()


def _rows_if(wanted: bool, elapsed):
    """Each dtype's row as it is decided, for the text report only: a machine format (json,
    junit, github, markdown) gets nothing extra on stderr."""
    import contextlib

    from porter.commands import terminal
    return terminal.live_rows(elapsed) if wanted else contextlib.nullcontext()


def _run_converted(args, options: dict, run_session, Options) -> int:
    """--format junit / github: the run's JSON report, written in that format on stdout."""
    import io
    import json
    import os
    import tempfile

    buffer = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="porter-junit-") as tmp:
        junit_file = os.path.join(tmp, "report.xml")
        code = run_session(Options(**{**options, "json": True, "out": buffer,
                                      "junit": junit_file if args.format == "junit" else options["junit"]}))
        if args.format == "junit":
            with open(junit_file, encoding="utf-8") as f:
                xml = f.read()
            if args.junit:
                with open(args.junit, "w", encoding="utf-8") as f:
                    f.write(xml)
            print(xml, end="" if xml.endswith("\n") else "\n")
            return code
    data = json.loads(buffer.getvalue())
    for line in github_annotations(data, args.device):
        print(line)
    return code


def github_annotations(data: dict, device: str) -> list[str]:
    """GitHub workflow commands: an error per failing or xpassing dtype, with the repro; a
    notice per note of a dtype's row."""
    from porter.commands.terminal import escape_github

    lines = []
    for op in data.get("ops", []):
        for d in op.get("dtypes", []):
            # what qualifies the row (a reference run's edge values not compared, none added)
            where = f"porter test {op['op']} {d['dtype']}"
            for note in d.get("notes") or []:
                lines.append(f"::notice title={escape_github(where, True)}::{escape_github(note)}")
            if d["outcome"] not in ("fail", "xpass"):
                continue
            title = f"porter test {op['op']} {d['dtype']}: {d['outcome']}"
            if d["outcome"] == "xpass":
                message = (f"passes on {device}, but an expectation says it fails ({'; '.join(d.get('expected_by') or [])}): "
                           f"prune it with porter test {op['name']} --prune-xfails")
            else:
                sample = d.get("first_failure")
                repro = f"porter test {op['name']} --device {device} --dtype {d['dtype']}"
                if op.get("reference"):
                    repro += " --reference-inputs"
                if sample is not None and not op.get("shapes"):
                    repro += f" --sample {sample}"
                message = f"{d.get('failed_samples', 0)}/{d.get('samples', 0)} samples fail; first: {d.get('message') or ''}; repro: {repro}"
            lines.append(f"::error title={escape_github(title, True)}::{escape_github(message)}")
    for gap in data.get("not_proven", []) or []:
        lines.append(f"::error title=porter test: not proven::{escape_github(str(gap))}")
    return lines
