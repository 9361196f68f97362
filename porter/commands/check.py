"""`porter check`: tree-wide static checks with stable ids, for people, CI and lintrunner.

Exit codes: 0 clean, 1 findings, 2 bad input. `--format lintrunner` follows lintrunner's
adapter contract instead ("never exit uncleanly"): findings and errors are LintMessages on
stdout and the exit code is 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from porter import exit_codes
from porter.commands.common import add_root_and_json
from porter.errors import PorterError

HELP = "static checks over the whole tree: yaml dispatch, kernels, stubs, expectations, torchgen"
FORMATS = ("text", "json", "markdown", "lintrunner", "github")


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="report only findings in these files (relative to --root); "
                             "`@FILE` reads the paths from FILE, one per line (lintrunner's {{PATHSFILE}})")
    add_root_and_json(parser, FORMATS, {
        "lintrunner": "LintMessage JSON lines; exits 0 with findings, as lintrunner adapters must",
        "github": "workflow-command annotations on the changed lines of a PR"})
    parser.add_argument("--summary", metavar="FILE",
                        help="also append a Markdown table of the findings to FILE, e.g. "
                             "\"$GITHUB_STEP_SUMMARY\"")
    parser.add_argument("--changed-since", metavar="REF",
                        help="report only findings on lines changed since the git ref REF, or about "
                             "ops those changes touch")
    parser.add_argument("--list-changed-ops", action="store_true",
                        help="with --changed-since: print the ops the changes touch (one per line) "
                             "instead of checking")
    parser.add_argument("--explain", action="store_true",
                        help="with --changed-since: say why each changed op was picked (the structure a "
                             "changed line falls in: yaml entry, functor, registration, host function, "
                             "stub, expectation entry, OpInfo)")
    parser.add_argument("--select", action="append", metavar="IDS",
                        help="run only these checks (ids or names, comma-separated; repeatable)")
    parser.add_argument("--skip", action="append", metavar="IDS",
                        help="skip these checks (ids or names, comma-separated; repeatable)")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--baseline", metavar="FILE",
                        help="report only findings not recorded in FILE (written by "
                             "--write-baseline; conventionally .porter-baseline.json at the root)")
    parser.add_argument("--write-baseline", metavar="FILE",
                        help="record the findings of this run in FILE and exit 0: later runs with "
                             "--baseline FILE report only new ones")


def run(args) -> int:
    fmt = args.format
    if args.list_changed_ops and fmt not in ("text", "json"):
        # a list of ops is no finding: markdown, lintrunner and github have no form for it; a
        # usage error even for lintrunner, whose config never asks for the list
        raise PorterError(f"--list-changed-ops prints text or json, not --format {fmt}",
                          hint="drop --format, or pass --json")
    if fmt == "lintrunner":
        try:
            return _run(args, fmt)
        except PorterError as err:
            print(json.dumps({"path": err.path, "line": err.line, "char": None, "code": "PORTER",
                              "severity": "error", "name": "porter-error", "original": None,
                              "replacement": None, "description": str(err)}))
            return exit_codes.OK
    return _run(args, fmt)


def _run(args, fmt: str) -> int:
    from porter.source.checkout import Checkout
    from porter.checks.model import CHECKS, resolve_ids

    if args.list:
        from porter.checks import output
        for line in output.list_checks():
            print(line)
        return exit_codes.OK
    if args.list_changed_ops and not args.changed_since:
        raise PorterError("--list-changed-ops needs --changed-since REF")

    if args.explain and not args.changed_since:
        raise PorterError("--explain needs --changed-since REF")
    if args.baseline and args.write_baseline:
        raise PorterError("--baseline and --write-baseline: pass one",
                          hint="--write-baseline records every finding of the run")
    narrowed = [o for o, v in (("--changed-since", args.changed_since), ("PATH", args.paths),
                               ("--select", args.select), ("--skip", args.skip)) if v]
    if args.write_baseline and narrowed:
        # a baseline is the whole tree's: one recorded from part of it makes the rest new
        raise PorterError(f"--write-baseline records the whole tree's findings, not those {narrowed[0]} "
                          "leaves", hint=f"drop {narrowed[0]}")
    selected = resolve_ids(args.select, "--select") or set(CHECKS)
    selected -= resolve_ids(args.skip, "--skip")
    checkout = Checkout.at(args.root)
    pending = None
    if "PORTER040" in selected and not args.list_changed_ops:
        # torchgen's parse is the slow part: start it before porter loads anything else
        from porter.checks.torchgen_child import Pending
        pending = Pending(checkout.root)
    try:
        return _check(args, fmt, checkout, selected, pending)
    finally:
        if pending is not None:
            pending.close()


def _check(args, fmt: str, checkout, selected: set[str], pending) -> int:
    from porter import checks
    from porter.checks import output
    from porter.checks.tree import Tree

    tree = Tree(checkout)
    changes = None
    if args.changed_since:
        from porter.checks import changed
        changes = changed.since(checkout.root, args.changed_since)
        tree.changes = changes
        why = changed.explain(tree, changes)
        ops = set(why)
        if args.list_changed_ops:
            if fmt == "json":
                data = {"ok": True, "since": args.changed_since, "ops": sorted(ops),
                        "files": sorted(changes.files)}
                if args.explain:
                    data["why"] = why
                print(json.dumps(data, indent=2))
            else:
                for op in sorted(ops):
                    print(op)
                    if args.explain:
                        for reason in why[op]:
                            print(f"  {reason}")
            return exit_codes.OK
        if args.explain:
            for op in sorted(ops):
                print(f"changed op {op}: " + "; ".join(why[op]), file=sys.stderr)
    report = checks.run(checkout, selected, tree, pending)
    if changes is not None:
        report.findings = [f for f in report.findings
                           if changes.touches(f.path, f.line) or (f.op and f.op in ops)]
    paths = _paths(args.paths, checkout.root)
    if paths is not None:
        report.findings = [f for f in report.findings if f.path in paths]
    from porter.checks import baseline, noqa
    report.findings, hidden, noqa_notes = noqa.suppressed(report.findings, checkout.root)
    report.notes += noqa_notes
    if hidden:
        report.notes.append(f"{len(hidden)} finding(s) suppressed by `porter: noqa` comments")
    if args.write_baseline:
        count = baseline.write(args.write_baseline, report.findings)
        print(f"porter check: recorded {count} finding(s) in {args.write_baseline}; "
              f"`porter check --baseline {args.write_baseline}` reports only new ones",
              file=sys.stderr)
        return exit_codes.OK
    if args.baseline:
        report.findings, held, gone = baseline.new_findings(report.findings,
                                                            baseline.load(args.baseline))
        report.notes.append(f"{held} finding(s) recorded in {args.baseline} not shown")
        # an entry outside what this run looked at (--changed-since, PATH, --select) is not
        # fixed, only not looked for: only a whole-tree run can say one is gone
        if gone and not (args.changed_since or args.paths or args.select or args.skip):
            report.notes.append(f"{gone} entr{'y' if gone == 1 else 'ies'} of {args.baseline} "
                                "no longer found (fixed): re-record with --write-baseline")
    if args.summary:
        from porter.apply.summary import append
        append(args.summary, output.markdown(report, args.changed_since))
    if fmt == "json":
        print(output.as_json(report, root=str(checkout.root), changed_since=args.changed_since))
    elif fmt == "markdown":
        sys.stdout.write(output.markdown(report, args.changed_since))
    elif fmt == "lintrunner":
        for line in output.lintrunner(report):
            print(line)
        return exit_codes.OK
    elif fmt == "github":
        for line in output.github(report):
            print(line)
    else:
        from porter.commands import terminal
        out, err = output.human(report)
        for line in out:
            print(terminal.paint_finding(line))
        sys.stdout.flush()
        # -q: the findings alone, as `ruff -q` prints them (the exit status says clean or not)
        for line in err if not terminal.quiet() else []:
            print(line, file=sys.stderr)
    return exit_codes.FAILED if report.findings else exit_codes.OK


def _paths(values: list[str], root: Path) -> set[str] | None:
    if not values:
        return None
    items: list[str] = []
    for value in values:
        if value.startswith("@"):
            try:
                items += Path(value[1:]).read_text(encoding="utf-8").split()
            except OSError as err:
                raise PorterError(f"cannot read the paths file: {err.strerror}", path=value[1:]) from None
        else:
            # a PATH that names nothing filters every finding away: "clean" on a broken port
            # (review 38's H20: `porter check heaviside`, the op name as `porter test` takes it).
            # A paths file's entries may name files a change deleted, so only these are held.
            if not (root / value).exists() and not Path(value).exists():
                raise PorterError(f"no such file: {value}",
                                  hint="PATH names a file of the checkout, e.g. aten/src/ATen/"
                                       "native/mps/kernels/BinaryKernel.metal; `porter status OP` "
                                       "shows where one op stands")
            items.append(value)
    out = set()
    for item in items:
        path = Path(item)
        if path.is_absolute():
            try:
                path = path.resolve().relative_to(root)
            except ValueError:
                continue
        out.add(path.as_posix())
    return out
