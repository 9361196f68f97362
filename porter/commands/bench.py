"""`porter bench OP`: the before/after benchmark of a port (porter.review.bench_writer).

Writes a standalone script (`bench_<op>.py`, or -o FILE) and, where torch.mps can run it
(Apple silicon, torch 2.6+), runs it. Elsewhere nothing is measured and porter says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

from porter import exit_codes

HELP = "write (and on a Mac, run) the before/after benchmark of a port: MPSGraph path vs the Metal functor"


def add_arguments(parser) -> None:
    parser.add_argument("op", metavar="OP", help="the ported op (aten or OpInfo name)")
    parser.add_argument("--root", metavar="DIR", help="PyTorch checkout (default: around cwd)")
    parser.add_argument("-o", "--output", metavar="FILE", help="where to write the script (default bench_OP.py)")
    parser.add_argument("--write-only", action="store_true", help="write the script, do not run it")
    from porter.commands.terminal import add_format
    add_format(parser, ("text", "json", "markdown"), {"markdown": "the table for the pull request"})
    parser.add_argument("--sizes", help="element counts, comma-separated (default 1e2,1e4,1e6,1e8)")
    parser.add_argument("--dtype", action="append", dest="dtypes", metavar="D",
                        help="only this dtype (repeatable; default: every registered one)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs before each timing (default 3)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs (default 10)")


def run(args) -> int:
    from porter.errors import PorterError
    from porter.source.checkout import resolve_checkout
    from porter.review import bench_script, bench_writer

    checkout = resolve_checkout(args.root)
    if checkout is None:
        raise PorterError("no PyTorch checkout here", hint="run it inside the checkout, or pass --root DIR")
    cfg = bench_writer.config(checkout.root, args.op)
    for d in args.dtypes or []:
        if d not in cfg["kernels"]:
            raise PorterError(f"--dtype {d}: {cfg['kernel_file']} registers no {cfg['kernel']} kernel for it",
                              hint="registered: " + ", ".join(cfg["kernels"]))
    path = Path(args.output or f"bench_{cfg['op']}.py")
    path.write_text(bench_writer.script(cfg), encoding="utf-8")
    argv = ["--format", args.format, "--warmup", str(args.warmup), "--repeat", str(args.repeat)]
    if args.sizes:
        argv += ["--sizes", args.sizes]
    for d in args.dtypes or []:
        argv += ["--dtype", d]
    found = None if args.write_only else bench_writer.mps_module()
    if found is None:
        if args.format == "json":       # the result, as every command's --json: here, no rows
            import json
            print(json.dumps({"ok": True, "op": cfg["op"], "script": str(path), "measured": False,
                              "rows": []}, indent=1))
        print(f"porter bench {args.op}: wrote {path}; nothing measured here"
              f"{'' if args.write_only else ' (no MPS device)'}: on a Mac, `python {path} "
              f"{' '.join(argv[:2])}` prints the before/after table", file=sys.stderr)
        return exit_codes.OK
    mps, torch, device = found
    print(f"porter bench {args.op}: wrote {path}; running it", file=sys.stderr)
    return bench_script.main(argv, cfg, torch=torch, mps=mps, device=device)
