"""`porter ci init`: write a GitHub Actions workflow that runs porter on a fork.

An editing command like the others: planned as a ChangeSet, shown with `--dry-run`, written
all at once, "nothing to do" on a second run. A workflow file that differs from what porter
would write was edited by hand (or by an older porter): it is reported as a conflict and only
`--force` overwrites it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from porter import exit_codes
from porter.commands.common import add_root_and_json
from porter.errors import PorterError

HELP = "write .github/workflows/porter.yml: check + emulated and Apple-GPU tests of changed ops, sharded audits"
WORKFLOW = ".github/workflows/porter.yml"
TEMPLATE = "porter_ci.yml.j2"
PINS = "action_pins.yml"
CRON_RE = re.compile(r"^\S+( \S+){4}$")
# a `uses:` line of an action (not a local ./path or docker://): owner/repo[/path]@ref, comment
USES_RE = re.compile(r"^(?P<lead>\s*(?:-\s+)?uses:\s*)(?P<action>[\w.-]+/[\w.-]+)(?P<sub>/[^@\s]*)?@"
                     r"(?P<ref>[^\s#]+)(?P<comment>[ \t]*#.*)?$", re.M)


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
                        help="pip requirement that installs porter in CI (default: porter-mps==<this "
                             "version>; better, your fork of porter pinned to a commit: "
                             "git+https://github.com/OWNER/porter@SHA)")
    parser.add_argument("--torch-spec", default="torch", metavar="REQ",
                        help="pip requirement of the CPU torch wheel for the Linux jobs (default: torch)")
    parser.add_argument("--mac-torch-spec", default="torch", metavar="REQ",
                        help="pip requirement of the torch wheel whose runtime compiles the checkout's "
                             ".metal files on macOS (--device mps-shader; default: torch)")
    parser.add_argument("--update-pins", action="store_true",
                        help="only rewrite the `uses:` lines of the existing workflow to the commits "
                             "of porter's action table, keeping every other edit")


class Pin(NamedTuple):
    action: str
    version: str
    sha: str
    verified: str
    source: str


def load_pins() -> tuple[str, dict[str, Pin]]:
    """(the day the table was checked, action -> Pin) from the table porter ships."""
    import yaml

    from porter.port.templates import template_dir

    data = yaml.safe_load((template_dir() / PINS).read_text(encoding="utf-8"))
    pins = {name: Pin(name, e["version"], e["sha"], e.get("verified", ""), e.get("source", ""))
            for name, e in data["actions"].items()}
    return str(data["checked"]), pins


def pin_line(pin: Pin) -> str:
    return f"{pin.action}@{pin.sha} # {pin.version}"


def update_pins(text: str, pins: dict[str, Pin]) -> tuple[str, list[str], list[str]]:
    """`text` with every `uses:` of an action in the table pinned to its commit; the changes
    made ("line N: old -> new") and the actions the table does not know (left as they are)."""
    changed: list[str] = []
    unknown: list[str] = []

    def replace(m: re.Match) -> str:
        pin = pins.get(m.group("action"))
        line = text.count("\n", 0, m.start()) + 1
        if pin is None:
            unknown.append(f"line {line}: {m.group('action')}{m.group('sub') or ''}@{m.group('ref')}")
            return m.group(0)
        new = f"{m.group('lead')}{pin.action}{m.group('sub') or ''}@{pin.sha} # {pin.version}"
        if new != m.group(0):
            changed.append(f"line {line}: {m.group('action')}@{m.group('ref')} -> {pin.version}")
        return new
    return USES_RE.sub(replace, text), changed, unknown


def default_porter_spec() -> str:
    """The distribution's own unique name (never `porter`: that is another project on PyPI)."""
    from porter import DISTRIBUTION, __version__
    return f"{DISTRIBUTION}=={__version__}"


def render_workflow(*, shards: int = 4, cron: str = "17 4 * * 1", python: str = "3.11",
                    porter_spec: str | None = None, torch_spec: str = "torch",
                    mac_torch_spec: str = "torch") -> str:
    from porter import __version__
    from porter.port.templates import render

    if not 1 <= shards <= 64:
        raise PorterError(f"--shards {shards}: must be between 1 and 64")
    if not CRON_RE.match(cron.strip()):
        raise PorterError(f"--cron {cron!r}: not a five-field cron expression", hint='e.g. "17 4 * * 1"')
    for option, value in (("--python", python), ("--porter-spec", porter_spec or ""),
                          ("--torch-spec", torch_spec), ("--mac-torch-spec", mac_torch_spec)):
        if any(c in value for c in "\"'\n$`\\"):
            raise PorterError(f"{option} {value!r}: quotes, `$`, backslashes and newlines are not allowed")
    if porter_spec is not None and re.match(r"^\s*porter\s*(?:[=<>!~;\[@]|$)", porter_spec, re.I):
        raise PorterError(f"--porter-spec {porter_spec!r}: `porter` on PyPI is an unrelated project",
                          hint=f"use {default_porter_spec()} or a git URL of porter pinned to a commit")
    checked, pins = load_pins()
    return render(TEMPLATE, version=__version__, shards=shards, cron=cron.strip(), python=python,
                  porter_spec=porter_spec or default_porter_spec(), torch_spec=torch_spec,
                  mac_torch_spec=mac_torch_spec, pins_checked=checked,
                  pin=lambda action: pin_line(pins[action]),
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
    missing = {"check", "emulate", "mps-shader", "mps", "audit", "audit-report"} - set(jobs)
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
    old = checkout.read(WORKFLOW) if checkout.exists(WORKFLOW) else None
    checked, pins = load_pins()
    notes = [f"actions pinned from porter's table of {checked} (cross-referenced commits, not "
             "read from the tags): compare them with the actions' releases"]
    if args.update_pins and old is not None:
        new, changed, unknown = update_pins(old, pins)
        notes += [f"pin {line}" for line in changed]
        notes += [f"not in porter's table, left as it is: {line}" for line in unknown]
        changes = ChangeSet(checkout.root)
        changes.set(WORKFLOW, old, new)
        written = apply_unless_dry(changes, args.dry_run, allow_dirty=args.force, flag="--force")
        if not changes:
            notes.append("every pinned action is up to date")
        show_plan("ci", "init", changes, notes, dry_run=args.dry_run, applied=written,
                  as_json=args.json, extra={"workflow": WORKFLOW, "pins_checked": checked})
        return exit_codes.OK
    new = render_workflow(shards=args.shards, cron=args.cron, python=args.python,
                          porter_spec=args.porter_spec, torch_spec=args.torch_spec,
                          mac_torch_spec=args.mac_torch_spec)
    validate(new)
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
    conflict = old is not None and old != new and not args.force
    written = None if (conflict and args.dry_run) else apply_unless_dry(
        changes, args.dry_run, allow_dirty=args.force, flag="--force")
    if not changes:
        notes.append("the workflow is up to date")
    show_plan("ci", "init", changes, notes, dry_run=args.dry_run, applied=written, as_json=args.json,
              extra={"workflow": WORKFLOW, "pins_checked": checked})
    return exit_codes.OK
