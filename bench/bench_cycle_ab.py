"""Two porter sources' fresh-process edit cycles, interleaved: which loop is faster when the
box's own speed moves more than the change does (the op_db import moved by 29 % within an hour
on the same box). Prints figures; asserts nothing.

    python bench/bench_cycle_ab.py --source OLD_TREE --source NEW_TREE [--pairs 4]
        [--binary-kernel PATH] [--c10-metal DIR]

Each source is a directory holding a `porter` package (a `git worktree` of an older commit, and
this repository), with a cache of its own. The tree is bench_loop.py's (a real-size tree,
heaviside ported). A cycle is bench_loop.py's: a wrong functor body saved, one whole `porter
test heaviside --device emulate` process (must exit 1), the right body saved, another process
(must exit 0); each body carries a fresh comment and alternates its spelling, so every process
compiles. Each pair runs one cycle of each source, in the order given; the first cycle of each
source (cold caches) is not counted. For each source: the medians of the wrong body's process,
the right body's and the cycle, the best cycle, and the CPU seconds of a cycle's two processes
(their children included), with the 1-minute load over the run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import RIGHT, add_tree_options, bench_env, loop_tree, scratch_dir


BODIES = {"wrong": ("return a == 0 ? b : static_cast<T>(a < 0);",
                    "return a == 0 ? b : static_cast<T>(0 > a);"),
          "right": (RIGHT, "return a == 0 ? b : static_cast<T>(0 < a);")}


def one_process(source: Path, root: Path, cache: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, exit status) of one `porter test` process of `source`."""
    env = {**bench_env(), "PYTHONPATH": str(source), "PORTER_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "porter", "test", "heaviside", "--device",
                           "emulate"], cwd=root, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, code


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", action="append", type=Path, required=True,
                        help="a directory holding a porter package (give two)")
    parser.add_argument("--pairs", type=int, default=4)
    add_tree_options(parser)
    args = parser.parse_args()
    tree = loop_tree(args)
    if tree is None:
        return 2
    root, metal, good = tree
    caches = {s: scratch_dir("porter-bench-cache-") for s in args.source}
    found = {s: [] for s in args.source}
    loads: list[float] = []
    saves = 0
    try:
        for pair in range(args.pairs + 1):          # pair 0 warms each source's caches
            for source in args.source:
                cycle = []
                for body, want in (("wrong", 1), ("right", 0)):
                    saves += 1
                    text = BODIES[body][saves % 2] + f" // save {saves}"
                    metal.write_text(good.replace(RIGHT, text))
                    loads.append(os.getloadavg()[0])
                    wall, cpu, code = one_process(source, root, caches[source])
                    if code != want:
                        print(f"{source}: the {body} body exited {code}, not {want}",
                              file=sys.stderr)
                        return 1
                    cycle.append((wall, cpu))
                if pair:
                    found[source].append(cycle)
    finally:
        metal.write_text(good)
    for source, cycles in found.items():
        wrong = [c[0][0] for c in cycles]
        right = [c[1][0] for c in cycles]
        walls = [(w + r) / 2 for w, r in zip(wrong, right)]
        cpus = [c[0][1] + c[1][1] for c in cycles]
        print(f"{str(source):40}  wrong {statistics.median(wrong):5.2f} s  right "
              f"{statistics.median(right):5.2f} s  cycle {statistics.median(walls):5.2f} s "
              f"(best {min(walls):5.2f} s)  CPU a cycle {statistics.median(cpus):5.2f} s")
    print(f"1-minute load over the runs: {min(loads):.2f}-{max(loads):.2f} "
          f"on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
