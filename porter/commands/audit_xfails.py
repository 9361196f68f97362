"""`porter audit-xfails`: run every op with an MPS expectation entry; list (and prune) stale ones."""

from __future__ import annotations

import json
import sys

HELP = "run every op that has an xfail/skip entry in common_mps.py and list the stale entries"


def add_arguments(parser) -> None:
    parser.add_argument("--root", metavar="DIR", help="PyTorch checkout (default: around cwd)")
    parser.add_argument("--device", default="auto", help="auto (the default: mps on a Mac, else "
                        "emulate), mps or emulate; cpu: CPU stands in for MPS, to measure overhead")
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes")
    parser.add_argument("--shard", metavar="K/N", help="run only the K-th of N slices of the op list")
    parser.add_argument("--merge", nargs="+", metavar="FILE",
                        help="merge the --json results of shards instead of running")
    # --prune-xfails, as `porter test` names it; --prune is its older spelling
    parser.add_argument("--prune-xfails", "--prune", dest="prune", action="store_true",
                        help="narrow or remove stale entries")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="with --prune-xfails: edit common_mps.py even if it has uncommitted changes")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --prune-xfails: show the diff only")
    parser.add_argument("--progress", action="store_true", help="progress bar even without a tty")
    from porter.commands.terminal import add_format
    add_format(parser, ("text", "json", "markdown"), {"json": "mergeable with --merge",
                                                       "markdown": "the table --summary appends"})
    parser.add_argument("--summary", metavar="FILE",
                        help="also append a Markdown report (stale entries, failing ops, repro) to FILE, "
                             "e.g. \"$GITHUB_STEP_SUMMARY\"")


def run(args) -> int:
    from porter import exit_codes
    from porter.apply.changes import ChangeSet
    from porter.apply.write import apply_unless_dry
    from porter.source.checkout import Checkout
    from porter.errors import PorterError
    from porter.harness import audit, prune
    from porter.harness import mps_expectations as expectations
    from porter.harness.verdicts import FAIL, OpResult

    from porter.commands.common import resolve_device
    from porter.commands.terminal import only_with
    only_with(args, "--prune-xfails", "--dry-run", "--allow-dirty", dest="prune")
    args.device = resolve_device(args.device)
    checkout = Checkout.at(args.root)
    exp = expectations.load(checkout)
    if exp.path is None:
        raise PorterError("no mps_ops_modifier expectations found",
                          path=checkout.root / expectations.COMMON_MPS)
    if args.jobs < 1:
        raise PorterError("--jobs must be at least 1")
    missing: list[str] = []
    if args.merge:
        result = audit.AuditResult()
        shards: list[tuple[str, str | None]] = []
        for path in args.merge:
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError) as err:
                raise PorterError(f"cannot read audit results: {err}", path=path) from None
            if "ops" not in data:
                raise PorterError("not an audit-xfails --json file (no 'ops')", path=path)
            result.results += [OpResult.from_json(r) for r in data["ops"]]
            result.orphans += data.get("orphans", [])
            result.keys += data.get("keys", 0)
            shards.append((path, data.get("shard")))
        missing = audit.missing_shards(shards)
        device = "merged"
    else:
        from porter.harness.devices import get_backend
        if args.device == "cpu":      # diagnostic: CPU standing in for MPS
            args.device = "cpu-mps"
        backend = get_backend(args.device, checkout.root)
        if not getattr(backend, "mps_expectations", False):
            raise PorterError(f"--device {args.device}: MPS expectations do not apply to it",
                              hint="use --device mps or emulate")
        reason = backend.unavailable_reason()
        if reason:
            raise PorterError(reason)
        keys = audit.shard_keys(exp.keys(), audit.parse_shard(args.shard))
        progress = args.progress or sys.stderr.isatty()
        result = audit.run(checkout.root, args.device, keys, jobs=args.jobs, progress=progress)
        device = args.device
    stale = audit.stale_lines(result.results)
    pruned, changes, applied = None, None, False
    if args.prune:
        pruned = prune.plan(result.results, exp)
        changes = ChangeSet(checkout.root)
        prune.add_to_changeset(changes, exp, pruned)
        if changes and not args.dry_run:
            apply_unless_dry(changes, args.dry_run, args.allow_dirty)
            applied = True
    failed = [f"{r.op} {d.dtype}: {d.message}" for r in result.results for d in r.dtypes
              if d.outcome == FAIL]
    section = None
    if args.summary or args.format == "markdown":
        from porter.harness import markdown
        section = markdown.audit_section(result.results, stale, result.orphans, failed, device,
                                         result.keys)
        if args.summary:
            markdown.append(args.summary, section)
    if args.json:
        data = {"ok": not stale and not failed and not missing, "device": device, "shard": args.shard,
                "missing_shards": missing,
                "keys": result.keys, "seconds": result.seconds, "stale": stale,
                "orphans": result.orphans, "failed": failed,
                "ops": [r.to_json() for r in result.results]}
        if pruned is not None:
            data["prune"] = {"actions": pruned.actions, "reported": pruned.reported,
                             "applied": applied, "diff": changes.diff() if changes else ""}
        print(json.dumps(data, indent=1))
    elif section is not None and args.format == "markdown":
        sys.stdout.write(section)
    else:
        print(f"audit-xfails: {result.keys} keys, {len(result.results)} OpInfos, device {device}, "
              f"{result.seconds}s")
        for line in stale:
            print(f"stale: {line}")
        for key in result.orphans:
            print(f"orphan: {key!r} names no OpInfo in the op database")
        for line in failed:
            print(f"fail (not expected): {line}")
        if pruned is not None:
            for line in pruned.actions:
                print(f"prune: {line}")
            for line in pruned.reported:
                print(f"prune (not edited): {line}")
            if changes and not applied:
                print("\n".join(changes.status_lines()))
                sys.stdout.write(changes.diff())
        if not stale and not failed and not missing:
            print("no stale entries")
    if missing:
        # a merge of some shards audited some keys: "no stale entries" would speak for all
        print(f"audit-xfails: incomplete: shard(s) {', '.join(missing)} missing from the merged files "
              "(pass every shard's --json file to --merge)", file=sys.stderr)
    resolved = applied and pruned is not None and not pruned.reported
    return exit_codes.FAILED if failed or missing or (stale and not resolved) else exit_codes.OK
