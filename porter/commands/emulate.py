"""`porter emulate check`: build the checkout's Unary/Binary kernel files on the host and
compare every registered (op, dtype) kernel with torch on CPU."""

from __future__ import annotations

import json

from porter import exit_codes

HELP = "host emulation of the Metal kernels (no Apple GPU needed): `check` builds and compares them"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="build every Unary/Binary kernel file and compare each "
                                         "(op, dtype) kernel with torch on CPU")
    check.add_argument("--root", metavar="DIR",
                       help="PyTorch checkout (default: the one containing the current directory)")
    from porter.commands.terminal import add_common, add_format
    add_format(check)
    add_common(check)
    check.add_argument("--all", action="store_true", help="list matched kernels too")


def run(args) -> int:
    from porter.source.checkout import KERNELS, Checkout
    from porter.emulate.kernel_check import as_json, check_tree, kernel_files, summary
    from porter.errors import PorterError

    checkout = Checkout.at(args.root)
    files = kernel_files(checkout.root)
    if not files:
        raise PorterError("no UnaryKernel.metal, BinaryKernel.metal or ActivationKernel.metal under "
                          f"{KERNELS}", path=checkout.root)
    results, notes = check_tree(checkout.root, files)
    stats = summary(results)
    failed = any(r.status in ("mismatched", "crashed", "build-error", "old-headers", "unsupported",
                                 "error")
                 for r in results)
    if args.json:
        print(json.dumps({"ok": not failed, "summary": stats, "notes": notes,
                          "results": as_json(results)}, indent=1))
        return exit_codes.FAILED if failed else exit_codes.OK
    rel = lambda p: str(p).replace(str(checkout.root) + "/", "")   # noqa: E731
    width = max((len(r.kernel) for r in results), default=6)
    print(f"{'kernel':<{width}}  {'in':<6}  {'out':<6}  {'status':<12}  detail")
    for r in results:
        if r.status == "matched" and not args.all:
            continue
        detail = rel(r.reason)
        if r.status == "matched":
            detail = "bit-exact" if r.bit_exact else f"max error {r.max_error:.3g}"
        print(f"{r.kernel:<{width}}  {r.in_type:<6}  {r.out_type:<6}  {r.status:<12}  "
              f"{rel(r.file)}:{r.line}: {detail}")
    for note in notes:
        from porter.commands.terminal import note as say
        say(note)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(stats["counts"].items()))
    print(f"\n{stats['registered']} registered kernels in {len(files)} files: {counts}; "
          f"{stats['matched_fraction']:.1%} build and match CPU "
          f"({stats['bit_exact']} of the matches bit-exact)")
    return exit_codes.FAILED if failed else exit_codes.OK
