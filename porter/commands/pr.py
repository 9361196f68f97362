"""`porter pr OP [OP ...]`: the pull-request description of a port, measured (porter.review).

It describes and tests the commit HEAD, checked out in a temporary git worktree
(porter.review.tip): what a pull request sends. Uncommitted changes are named in a warning and
are not in the description.

Exit codes: 0 every verdict passes and no checklist item fails; 1 otherwise (the description
is still printed: it says what fails); 2 bad input (not a git checkout, an op not ported in
HEAD).
"""

from __future__ import annotations

import contextlib
import json
import sys

from porter import exit_codes

HELP = "write the pull-request description of a port: what moved, files, verdicts, Mac test commands, checklist"
FORMATS = ("markdown", "json")


def add_arguments(parser) -> None:
    parser.add_argument("ops", nargs="+", metavar="OP", help="the ops the branch ports (aten names)")
    parser.add_argument("--root", metavar="DIR", help="PyTorch checkout (default: around cwd)")
    parser.add_argument("--base", metavar="REF",
                        help="what the branch forks from (default: the merge base with origin/main, "
                             "upstream/main, main or master, whichever exists first)")
    parser.add_argument("--device", default="auto",
                        help="where the verdicts come from (default auto: mps on a Mac, else emulate)")
    # text is every command's default format's name: here it is the description, in Markdown
    parser.add_argument("--format", choices=("text", *FORMATS), default=None,
                        help="markdown or text (the description; the default) or json")
    parser.add_argument("--json", action="store_true", help="same as --format json")
    parser.add_argument("--dtype", action="append", dest="dtypes", metavar="D",
                        help="verdicts for this dtype only (repeatable; default every dtype the MPS test "
                             "sends): the description is then not proven, exit 1")
    parser.add_argument("--output", "-o", metavar="FILE", help="also write the description to FILE")


def run(args) -> int:
    from porter.source.checkout import resolve_checkout
    from porter.errors import PorterError
    from porter.review.description import describe, markdown

    fmt = args.format or ("json" if args.json else "markdown")
    if fmt == "text":
        fmt = "markdown"
    args.json = fmt == "json"
    checkout = resolve_checkout(args.root)
    if checkout is None:
        raise PorterError("no PyTorch checkout here", hint="run it inside the checkout, or pass --root DIR")
    from porter.commands.common import check_dtype_names, resolve_device
    check_dtype_names(args.dtypes)
    from porter.commands import terminal
    from porter.review import tip
    from porter.review.branch import Branch, port_source
    from porter.source.checkout import Checkout
    Branch(checkout.root, args.base)        # not a repository, an unknown --base: said before any checkout
    left_out = tip.uncommitted(checkout.root, port_source)
    # the PR sends the commits: test HEAD in a worktree of its own, never the working tree;
    # 15-70 s of reading, testing and checking: each step and each dtype's row on a terminal
    with tip.checked_out(checkout.root) as tip_root, \
            terminal.Elapsed(f"porter pr {' '.join(args.ops)}") as elapsed:
        rows = contextlib.nullcontext() if args.json else terminal.live_rows(elapsed)
        with rows:
            data = describe(Checkout(tip_root), args.ops, args.base, resolve_device(args.device),
                            args.dtypes, uncommitted=left_out, step=elapsed.step)
    for warning in data["warnings"]:
        print(f"porter: warning: {warning}", file=sys.stderr)
    text = markdown(data)
    if args.output:
        from pathlib import Path
        Path(args.output).write_text(text, encoding="utf-8")
    if fmt == "json":
        print(json.dumps(data | {"markdown": text}, indent=1))
    else:
        sys.stdout.write(text)
    if not data["ok"]:
        # the description is the output; why the exit status is 1 goes where errors go
        print(f"porter: error: {_why_red(data)}", file=sys.stderr)
    return exit_codes.OK if data["ok"] else exit_codes.FAILED


def _why_red(data: dict) -> str:
    """One line: what in the description keeps the branch from green."""
    from porter.review.description import KINDS, NOT_RUN, RED
    failing = [v for v in data["verdicts"] if any(v[k] in RED for k in KINDS)]
    red = sorted({v["opinfo"] for v in failing if v.get("proven_red", True)})
    # an op whose failing rows all say "not proven" is not known to be red: the words differ
    # as `porter test`'s do (review 37's note: pr called such a port red)
    unproven = sorted({v["opinfo"] for v in failing} - set(red))
    open_items = [item["item"] for item in data["checklist"] if item["status"] in ("fail", NOT_RUN)]
    parts = ([f"{', '.join(red)} red on the tested commit (the verdict table)"] if red else []) + \
        ([f"{', '.join(unproven)} not proven on the tested commit (the rows say why)"]
         if unproven else []) + \
        ([f"{len(open_items)} checklist item(s) open: {'; '.join(open_items[:3])}"
          + (" ..." if len(open_items) > 3 else "")] if open_items else [])
    return ("the pull request is not green: " + "; ".join(parts or ["see the description"])
            + " (fix, commit, and rerun `porter pr`)")
