"""Before/after benchmark of one elementwise op on Apple silicon, written by `porter bench`.

before: the installed torch's own implementation of the op on the `mps` device (MPSGraph, or
        whatever the installed build runs for it);
after:  the checkout's Metal functor, compiled by `torch.mps.compile_shader` from the checkout's
        kernel file (its c10/metal headers inlined: no PyTorch rebuild) and dispatched through
        its dense entry point as the host's mtl_dispatch1DJob does.

Each case is timed after `--warmup` untimed runs, over `--repeat` runs between two
`torch.mps.synchronize()` calls. A strided input is a view with stride 2; `after` times its
`.contiguous()` copy plus the dense kernel (the checkout's strided entry point needs the full
build), so on strided rows `after` is an upper bound. Throughput counts the bytes the op must
read and write (inputs + output), once each.

Standalone: needs only torch (2.6 or later, for compile_shader) on a Mac. `--format markdown`
prints the table for the pull request.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

SIZES = (10**2, 10**4, 10**6, 10**8)
LAYOUTS = ("contiguous", "strided")


def measure(fn, synchronize, warmup: int, repeat: int, clock=None) -> float:
    """Seconds per run of `fn`, the warm-up runs not timed."""
    clock = clock or time.perf_counter
    for _ in range(warmup):
        fn()
    synchronize()
    start = clock()
    for _ in range(repeat):
        fn()
    synchronize()
    return (clock() - start) / repeat


def torch_function(torch, dotted: str):
    """`nn.functional.threshold` -> torch.nn.functional.threshold."""
    target = torch
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def make_input(torch, numel: int, dtype, layout: str, device: str, generator):
    width = 2 if layout == "strided" else 1
    if dtype == torch.bool:
        base = torch.randint(0, 2, (numel, width), generator=generator).bool()
    elif dtype.is_floating_point:
        base = (torch.rand((numel, width), generator=generator) * 18 - 9).to(dtype)
    else:
        low = 0 if dtype == torch.uint8 else -9
        base = torch.randint(low, 10, (numel, width), generator=generator).to(dtype)
    return base.to(device)[:, 0]         # stride 2 when strided, else a contiguous column


def run(config: dict, torch, mps, device: str = "mps", sizes=SIZES, dtypes=None,
        layouts=LAYOUTS, warmup: int = 3, repeat: int = 10, clock=None) -> list[dict]:
    lib = mps.compile_shader(config["source"])
    before_op = torch_function(torch, config["torch_op"])
    rows = []
    for dtype_name in dtypes or list(config["kernels"]):
        kernel_info = config["kernels"][dtype_name]
        dtype = getattr(torch, dtype_name)
        out_dtype = getattr(torch, kernel_info["out_dtype"])
        kernel = getattr(lib, kernel_info["host_name"])
        for numel in sizes:
            for layout in layouts:
                generator = torch.Generator().manual_seed(0)
                inputs = [make_input(torch, numel, dtype, layout, device, generator)
                          for _ in range(config["arity"])]
                out = torch.empty(numel, dtype=out_dtype, device=device)
                extra, casts = [], {}
                if kernel_info["alpha"] is not None:
                    extra.append(kernel_info["alpha"])
                    if kernel_info["alpha_cast"]:
                        casts[1 + config["arity"]] = kernel_info["alpha_cast"]
                threads = math.ceil(numel / kernel_info["ilp"])
                if kernel_info["takes_numel"]:
                    extra.append(numel)
                    casts[1 + config["arity"] + len(extra) - 1] = "int32"
                group = min(kernel.max_threads_per_threadgroup, threads)

                def before():
                    before_op(*inputs, *config["args"], **config["kwargs"])

                def after():
                    dense = [x if x.is_contiguous() else x.contiguous() for x in inputs]
                    kernel(out, *dense, *extra, threads=threads, group_size=group,
                           arg_casts=casts or None)

                t_before = measure(before, mps.synchronize, warmup, repeat, clock)
                t_after = measure(after, mps.synchronize, warmup, repeat, clock)
                moved = numel * (config["arity"] * inputs[0].element_size() + out.element_size())
                rows.append({"dtype": dtype_name, "numel": numel, "layout": layout,
                             "before_s": t_before, "after_s": t_after,
                             "before_gbps": moved / t_before / 1e9 if t_before > 0 else math.inf,
                             "after_gbps": moved / t_after / 1e9 if t_after > 0 else math.inf,
                             "speedup": t_before / t_after if t_after > 0 else math.inf})
    return rows


def render(rows: list[dict], fmt: str, title: str) -> str:
    if fmt == "json":
        import json

        # an untimeable run's inf is no JSON number: null
        clean = [{k: None if isinstance(v, float) and math.isinf(v) else v for k, v in r.items()} for r in rows]
        return json.dumps({"ok": True, "title": title, "measured": True, "rows": clean}, indent=1) + "\n"
    cols = ["dtype", "numel", "layout", "before (us)", "after (us)", "before GB/s", "after GB/s",
            "speed-up"]
    table = [[r["dtype"], f"{r['numel']:.0e}".replace("e+0", "e"), r["layout"],
              f"{r['before_s'] * 1e6:.2f}", f"{r['after_s'] * 1e6:.2f}",
              f"{r['before_gbps']:.2f}", f"{r['after_gbps']:.2f}", f"{r['speedup']:.2f}x"]
             for r in rows]
    if fmt == "markdown":
        lines = [f"#### {title}", "", "| " + " | ".join(cols) + " |",
                 "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(row) + " |" for row in table]
        return "\n".join(lines) + "\n"
    widths = [max(len(c), *(len(row[i]) for row in table)) if table else len(c) for i, c in enumerate(cols)]
    lines = [title, "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    return "\n".join(lines) + "\n"


def parse_args(argv, config: dict):
    parser = argparse.ArgumentParser(description=f"before/after benchmark of {config['op']} on MPS")
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                        help="element counts, comma-separated (default 1e2..1e8)")
    parser.add_argument("--dtype", action="append", dest="dtypes", choices=list(config["kernels"]),
                        help="only this dtype (repeatable; default: every registered one)")
    parser.add_argument("--layout", action="append", dest="layouts", choices=LAYOUTS)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    args = parser.parse_args(argv)
    args.sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    return args


def main(argv=None, config: dict | None = None, torch=None, mps=None, device: str = "mps",
         clock=None, out=None) -> int:
    config = config if config is not None else CONFIG      # noqa: F821 (the written script's)
    out = out or sys.stdout
    args = parse_args(argv, config)
    if torch is None:
        import torch
    if mps is None:
        mps = torch.mps
        if not hasattr(mps, "compile_shader") or not torch.backends.mps.is_available():
            print(f"{config['op']}: needs torch 2.6 or later on Apple silicon (torch.mps.compile_shader)",
                  file=sys.stderr)
            return 2
    rows = run(config, torch, mps, device, args.sizes, args.dtypes, args.layouts or LAYOUTS,
               args.warmup, args.repeat, clock)
    title = (f"{config['op']}: torch {torch.__version__} ({config['torch_op']}, before) vs the "
             f"checkout's {config['kernel']}_functor via compile_shader (after); warm-up "
             f"{args.warmup}, {args.repeat} runs")
    out.write(render(rows, args.format, title))
    return 0
