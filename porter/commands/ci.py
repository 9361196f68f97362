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
    parser.add_argument("action", metavar="ACTION", choices=["init"], help="init: write the workflow")
    add_root_and_json(parser)
    parser.add_argument("--dry-run", action="store_true", help="print status and diff; write nothing")
    parser.add_argument("--force", action="store_true", help="overwrite a hand-edited workflow")
    parser.add_argument("--shards", type=int, default=4, metavar="N",
                        help="macOS runners for the scheduled audit (default 4)")
    parser.add_argument("--cron", default="17 4 * * 1", help="schedule of the audit (default: Mondays 04:17 UTC)")
    parser.add_argument("--python", default="3.11", help="Python version of the jobs (default 3.11)")
    parser.add_argument("--porter-spec", default=None, metavar="REQ",
                        help="pip requirement that installs porter in CI (default: the porter this "
                             "command runs from, as pip installed it: its git URL and commit, or its "
                             "archive URL; installed from an index or a local directory, porter cannot "
                             "know one and asks for this, e.g. "
                             "'porter-mps @ git+https://github.com/OWNER/porter@SHA'; never a local path)")
    parser.add_argument("--macos-runner", metavar="LABEL", default=None,
                        help="labels (comma-separated) of a self-hosted Apple-silicon runner: adds the "
                             "Apple-GPU jobs (--device mps-shader, mps, and the audit on the GPU); "
                             "off by default, since GitHub-hosted macOS runners report MPS but fail "
                             "its allocations (pytorch/pytorch#125197)")
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


SPEC_EXAMPLE = "porter-mps @ git+https://github.com/OWNER/porter@COMMIT"
LABEL_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
# the placeholders of SPEC_EXAMPLE and --porter-spec's help, in a spec copied unchanged
PLACEHOLDER_RE = re.compile(r"\bOWNER\b|@(?:COMMIT|SHA)\b")
# a requirement naming this machine's disk, which no CI runner has: /path, ./path, ~/path,
# C:\path, file: URLs (git+file: too), NAME @ /path
LOCAL_SPEC_RE = re.compile(r"^\s*(?:[/.~]|[A-Za-z]:[\\/])|\bfile:|@\s*[/.~]", re.I)


def installed_porter_spec(metadata=None) -> str:
    """The pip requirement that installs, in CI, the porter this process runs from.

    Read from the installed distribution's PEP 610 record (`direct_url.json`): a VCS install
    gives `porter-mps @ git+URL@COMMIT`, an archive its URL. No record (an index install, or
    `--no-index --find-links DIR`), a local directory (`pip install .`, `-e .`), or no installed
    distribution at all, names nothing porter knows a CI runner can fetch: PorterError, exit 2,
    saying what to pass (with the directory's own remote and commit where it is a git clone)."""
    import json
    from importlib import metadata as importlib_metadata

    from porter import DISTRIBUTION, __version__

    try:
        dist = metadata or importlib_metadata.distribution(DISTRIBUTION)
    except importlib_metadata.PackageNotFoundError:
        raise PorterError(f"porter is not installed as {DISTRIBUTION} here, so `ci init` cannot tell "
                          "the workflow what to install", hint=f"pass --porter-spec, e.g. '{SPEC_EXAMPLE}'") from None
    record = dist.read_text("direct_url.json")
    if not record:
        # pip writes no record for an index install, nor for `--no-index --find-links DIR`: a
        # name==version is installable only where that version is published, which porter
        # cannot tell from here, and a workflow that cannot install porter fails every job
        raise PorterError(f"porter {dist.version or __version__} was installed without a source "
                          "record (from an index or --find-links), so `ci init` cannot tell where a CI "
                          "runner would install it from",
                          hint=f"pass --porter-spec: '{DISTRIBUTION}=={dist.version or __version__}' if "
                               f"your CI's index has that version, else '{SPEC_EXAMPLE}'")
    try:
        direct = json.loads(record)
    except ValueError:
        direct = {}
    url = direct.get("url", "")
    vcs = direct.get("vcs_info")
    if vcs and vcs.get("commit_id") and not url.startswith("file:"):
        return f"{DISTRIBUTION} @ {vcs.get('vcs', 'git')}+{url}@{vcs['commit_id']}"
    if "archive_info" in direct and not url.startswith("file:"):
        return f"{DISTRIBUTION} @ {url}"
    where = url[len("file://"):] if url.startswith("file://") else url or "a local directory"
    raise PorterError(f"porter was installed from {where}, which a CI runner cannot install from",
                      hint=f"pass --porter-spec with a pushed commit: {_suggest_spec(where)}")


def _suggest_spec(directory: str) -> str:
    """'porter-mps @ git+REMOTE@HEAD' for a directory that is a git clone, else the template."""
    import subprocess

    from porter import DISTRIBUTION

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    remote, head = git("remote", "get-url", "origin"), git("rev-parse", "HEAD")
    if remote.startswith("git@") and ":" in remote:       # git@github.com:OWNER/porter.git
        host, path = remote[len("git@"):].split(":", 1)
        remote = f"https://{host}/{path}"
    if remote.startswith("https://") and head:
        return f"--porter-spec '{DISTRIBUTION} @ git+{remote}@{head}'"
    return f"--porter-spec '{SPEC_EXAMPLE}'"


def runner_labels(value: str) -> str:
    """`--macos-runner a,b` as a YAML flow list of a self-hosted runner's labels."""
    labels = [label.strip() for label in value.split(",") if label.strip()]
    bad = [label for label in labels if not LABEL_RE.match(label)]
    if not labels or bad:
        raise PorterError(f"--macos-runner {value!r}: runner labels are letters, digits, '.', '_' and '-', "
                          "separated by commas", hint="e.g. --macos-runner self-hosted,macOS,ARM64")
    if "self-hosted" not in labels:
        labels.insert(0, "self-hosted")
    return "[" + ", ".join(labels) + "]"


def render_workflow(*, porter_spec: str, shards: int = 4, cron: str = "17 4 * * 1",
                    python: str = "3.11", torch_spec: str = "torch", mac_torch_spec: str = "torch",
                    macos_runner: str | None = None) -> str:
    from porter import __version__
    from porter.port.templates import render

    if not 1 <= shards <= 64:
        raise PorterError(f"--shards {shards}: must be between 1 and 64")
    if not CRON_RE.match(cron.strip()):
        raise PorterError(f"--cron {cron!r}: not a five-field cron expression", hint='e.g. "17 4 * * 1"')
    for option, value in (("--python", python), ("--porter-spec", porter_spec),
                          ("--torch-spec", torch_spec), ("--mac-torch-spec", mac_torch_spec)):
        if any(c in value for c in "\"'\n$`\\"):
            raise PorterError(f"{option} {value!r}: quotes, `$`, backslashes and newlines are not allowed")
    if not porter_spec.strip():
        raise PorterError("--porter-spec is empty", hint=f"e.g. --porter-spec '{SPEC_EXAMPLE}'")
    if LOCAL_SPEC_RE.search(porter_spec):
        # what `ci init` refuses to take from a local install it refuses when given, too
        raise PorterError(f"--porter-spec {porter_spec!r}: a local path or file: URL, which a CI runner "
                          "cannot install from", hint=f"pass a pushed commit, e.g. '{SPEC_EXAMPLE}'")
    if PLACEHOLDER_RE.search(porter_spec):
        # the README's and --help's own example, copied as it is: no runner can fetch it
        raise PorterError(f"--porter-spec {porter_spec!r}: OWNER, COMMIT and SHA are placeholders",
                          hint="put your fork's owner and a pushed commit in their place")
    if re.match(r"^\s*porter\s*(?:[=<>!~;\[@]|$)", porter_spec, re.I):
        raise PorterError(f"--porter-spec {porter_spec!r}: `porter` on PyPI is an unrelated project",
                          hint=f"use a git URL of porter pinned to a commit: '{SPEC_EXAMPLE}'")
    checked, pins = load_pins()
    return render(TEMPLATE, version=__version__, shards=shards, cron=cron.strip(), python=python,
                  porter_spec=porter_spec.strip(), torch_spec=torch_spec,
                  macos_runner=bool(macos_runner),
                  macos_labels=runner_labels(macos_runner) if macos_runner else "",
                  mac_torch_spec=mac_torch_spec, pins_checked=checked,
                  pin=lambda action: pin_line(pins[action]),
                  shard_list=", ".join(str(k) for k in range(1, shards + 1)), build_minutes=360,
                  gh=lambda expression: "${{ " + expression + " }}")


def validate(text: str, macos: bool = False) -> dict:
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
    wanted = {"check", "emulate", "audit", "audit-report"} | ({"mps-shader", "mps", "audit-build"} if macos else set())
    missing = wanted - set(jobs)
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
                  as_json=args.json, extra={"workflow": WORKFLOW, "pins_checked": checked},
                  quiet=args.quiet)
        return exit_codes.OK
    spec = args.porter_spec if args.porter_spec is not None else installed_porter_spec()
    new = render_workflow(shards=args.shards, cron=args.cron, python=args.python,
                          porter_spec=spec, torch_spec=args.torch_spec,
                          mac_torch_spec=args.mac_torch_spec, macos_runner=args.macos_runner)
    validate(new, macos=bool(args.macos_runner))
    notes.append(f"CI installs porter as: {spec}")
    if not args.macos_runner:
        notes.append("no Apple-GPU jobs (GitHub-hosted macOS runners fail MPS allocations); "
                     "--macos-runner LABEL adds them for a self-hosted Apple-silicon runner")
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
              extra={"workflow": WORKFLOW, "pins_checked": checked}, quiet=args.quiet)
    return exit_codes.OK
