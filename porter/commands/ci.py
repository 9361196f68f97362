"""`porter ci init`: write a GitHub Actions workflow that runs porter on a fork.

An editing command like the others: planned as a ChangeSet, shown with `--dry-run`, written
all at once, "nothing to do" on a second run. A workflow file that differs from what porter
would write was edited by hand (or by an older porter): it is reported as a conflict and only
`--force` overwrites it.
"""

from __future__ import annotations

import re

from porter.commands.common import add_root_and_json
from porter.errors import PorterError

HELP = "write .github/workflows/porter.yml: check + emulated and Apple-GPU tests of changed ops, sharded audits"
WORKFLOW = ".github/workflows/porter.yml"
TEMPLATE = "porter_ci.yml.j2"
CRON_RE = re.compile(r"^\S+( \S+){4}$")


def add_arguments(parser) -> None:
    parser.add_argument("action", choices=["init"], help="init: write the workflow")
    add_root_and_json(parser)
    parser.add_argument("--dry-run", action="store_true", help="print status and diff; write nothing")
    parser.add_argument("--force", action="store_true", help="overwrite a hand-edited workflow")
    parser.add_argument("--shards", type=int, default=4, metavar="N",
                        help="macOS runners for the scheduled audit (default 4)")
    parser.add_argument("--cron", default="17 4 * * 1", help="schedule of the audit (default: Mondays 04:17 UTC)")
    parser.add_argument("--python", default="3.11", help="Python version of the jobs (default 3.11)")
    parser.add_argument("--porter-spec", default=None, metavar="REQ",
                        help="pip requirement that installs porter in CI (default: porter==<this version>; "
                             "a git URL or your own index works too)")
    parser.add_argument("--torch-spec", default="torch", metavar="REQ",
                        help="pip requirement of the CPU torch wheel for the Linux jobs (default: torch)")


def render_workflow(*, shards: int = 4, cron: str = "17 4 * * 1", python: str = "3.11",
                    porter_spec: str | None = None, torch_spec: str = "torch") -> str:
    from porter import __version__
    from porter.port.templates import render

    if not 1 <= shards <= 64:
        raise PorterError(f"--shards {shards}: must be between 1 and 64")
    if not CRON_RE.match(cron.strip()):
        raise PorterError(f"--cron {cron!r}: not a five-field cron expression", hint='e.g. "17 4 * * 1"')
    for option, value in (("--python", python), ("--porter-spec", porter_spec or ""),
                          ("--torch-spec", torch_spec)):
        if any(c in value for c in "\"'\n$`\\"):
            raise PorterError(f"{option} {value!r}: quotes, `$`, backslashes and newlines are not allowed")
    return render(TEMPLATE, version=__version__, shards=shards, cron=cron.strip(), python=python,
                  porter_spec=porter_spec or f"porter=={__version__}", torch_spec=torch_spec,
                  shard_list=", ".join(str(k) for k in range(1, shards + 1)), build_minutes=360,
                  gh=lambda expression: "${{ " + expression + " }}")


def validate(text: str) -> dict:
    """The workflow parses as YAML and has the jobs porter relies on."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise PorterError(f"the generated workflow is not valid YAML: {getattr(err, 'problem', err)}",
                          path=WORKFLOW, line=mark.line + 1 if mark else None,
                          hint="a porter bug: please report it") from None
    jobs = data.get("jobs", {}) if isinstance(data, dict) else {}
    missing = {"check", "emulate", "mps", "audit", "audit-report"} - set(jobs)
    if missing:
        raise PorterError(f"the generated workflow lacks job(s) {', '.join(sorted(missing))}",
                          path=WORKFLOW, hint="a porter bug: please report it")
    return data


def run(args) -> int:
    from porter.apply.changes import ChangeSet
    from porter.source.checkout import Checkout
    from porter.apply.write import apply_unless_dry
    from porter.apply.report import show_plan

    checkout = Checkout.at(args.root)
    new = render_workflow(shards=args.shards, cron=args.cron, python=args.python,
                          porter_spec=args.porter_spec, torch_spec=args.torch_spec)
    validate(new)
    old = checkout.read(WORKFLOW) if checkout.exists(WORKFLOW) else None
    notes = []
    if old is not None and old != new:
        if not args.force and not args.dry_run:
            raise PorterError("exists and differs from the workflow porter writes (edited by hand, or "
                              "written by another porter version or options)", path=WORKFLOW,
                              hint="--dry-run shows the difference; --force overwrites it")
        if not args.force:
            notes.append(f"{WORKFLOW} differs from what porter writes: only --force overwrites it")
    changes = ChangeSet(checkout.root)
    changes.set(WORKFLOW, old, new)
    # --force is this command's consent to overwrite the workflow, committed or not
    written = None if (notes and args.dry_run) else apply_unless_dry(
        changes, args.dry_run, allow_dirty=args.force, flag="--force")
    if not changes:
        notes.append("the workflow is up to date")
    show_plan("ci", "init", changes, notes, dry_run=args.dry_run, applied=written, as_json=args.json,
              extra={"workflow": WORKFLOW})
    return 0
