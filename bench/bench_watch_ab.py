"""Two porter sources, one `--watch` round after another, interleaved: which loop is faster when
the box's own speed moves more than the change does. Prints figures; asserts nothing.

    python bench/bench_watch_ab.py --source OLD_TREE --source NEW_TREE [--pairs 4] [--rounds 8]
        [--wrong] [--binary-kernel PATH] [--c10-metal DIR]

Each source is a directory holding a `porter` package (a `git worktree` of an older commit, and
this repository). The tree is bench_loop.py's (a real-size tree, heaviside ported); each pair
runs one process of each source, `--rounds` rounds each, in the order given. A round is what
`porter test heaviside --device emulate --watch` runs after a save: the saved file's early build,
then the round (not the poll's wait or the settle's, which bench_loop.py's `--watch` figure
includes). Its body alternates between the right one and a twin spelled otherwise, so every
round compiles (`--wrong`: between the right one and a wrong one, each kind's rounds reported
apart, by their exit). The first round of a process (imports, cold caches) is not counted. For
each process: the median round, and the mean CPU a round (the process's own, and its children's:
g++, the preprocessor runs, the kernel workers, those the rounds keep too), with
`cat /proc/loadavg`. CPU seconds move much less than wall seconds with the box's load: read
them first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from _common import RIGHT, WRONG, add_tree_options, bench_env, loop_tree, scratch_dir

from porter.source.checkout import KERNELS

TWIN = "return a == 0 ? b : static_cast<T>(0 < a);"

# run in a process whose porter is the source's: the command line's own --watch, its loop
# replaced by `rounds` timed rounds
CHILD = r"""
import contextlib, json, os, sys, time
from porter.harness import watch
root, metal, rounds, right, twin = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
good = open(metal).read()
found = []

def kept_cpu():
    # CPU seconds of the kernel workers the rounds keep (watch.run's kept_lanes): not children
    # that have ended, so os.times() does not count them
    from porter.emulate import client
    cpu = {}
    for lane in getattr(client, "_KEPT", None) or []:
        used = client._cpu_seconds(lane.proc.pid) if lane.proc is not None else None
        if used is not None:
            cpu[lane.proc.pid] = used
    return cpu

def rounds_of_watch(opts, reference_gaps):
    from pathlib import Path
    built = set()
    sink = open(os.devnull, "w")
    counted = {}        # a kept worker's CPU counted so far, by pid
    for n in range(rounds + 1):
        with open(metal, "w") as f:
            f.write(good.replace(right, (twin, right)[n % 2] + f" // round {n} {time.time()}"))
        start, cpu, kids, kept = time.perf_counter(), time.process_time(), os.times(), kept_cpu()
        watch._start_builds([Path(metal)], Path(root))
        code = watch._round(opts, Path(root), sink, reference_gaps, built)
        now, after = os.times(), kept_cpu()
        workers = sum(c - kept.get(pid, 0.0) for pid, c in after.items())
        # a kept worker that ended this round (a crash, or retired) is a reaped child now:
        # os.times() counts its whole life, of which earlier rounds counted a part already
        workers -= sum(counted.pop(pid) for pid in list(counted) if pid not in after)
        counted.update(after)
        found.append((time.perf_counter() - start, time.process_time() - cpu + workers
                      + now.children_user + now.children_system
                      - kids.children_user - kids.children_system, code))
    with open(metal, "w") as f:
        f.write(good)

def timed(opts, interval=0.05, out=None, reference_gaps=None):
    from porter.emulate import client
    from porter.harness import refcache
    # as watch.run keeps the kernel workers and the decoded rows from round to round, where
    # the source does
    with getattr(client, "kept_lanes", contextlib.nullcontext)(), \
            getattr(refcache, "held_rows", contextlib.nullcontext)():
        rounds_of_watch(opts, reference_gaps)
    return 0

watch.run = timed
from porter.cli import main
main(["test", "heaviside", "--device", "emulate", "--watch", "--root", root])
print(json.dumps(found[1:]))
"""


def rounds_of(source: Path, root: Path, rounds: int, cache: Path,
              twin: str = TWIN) -> list[tuple[float, float, int]]:
    env = {**bench_env(), "PYTHONPATH": str(source), "PORTER_CACHE_DIR": str(cache)}
    metal = root / KERNELS / "BinaryKernel.metal"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(root), str(metal), str(rounds), RIGHT,
                           twin], env=env, capture_output=True, text=True, check=True)
    return [tuple(r) for r in json.loads(proc.stdout.strip().splitlines()[-1])]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", action="append", type=Path, required=True,
                        help="a directory holding a porter package (give two)")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--wrong", action="store_true",
                        help="alternate the right body with a wrong one (bench_loop's), not with "
                             "a right twin; the rounds of each are reported apart")
    add_tree_options(parser)
    args = parser.parse_args()
    tree = loop_tree(args)
    if tree is None:
        return 2
    root = tree[0]
    caches = {s: scratch_dir("porter-bench-cache-") for s in args.source}
    twin = WRONG if args.wrong else TWIN
    for source in args.source:                       # each source's caches warm
        rounds_of(source, root, 1, caches[source], twin)
    for pair in range(args.pairs):
        for source in args.source:
            load = " ".join(open("/proc/loadavg").read().split()[:3])
            found = rounds_of(source, root, args.rounds, caches[source], twin)
            # the right body's rounds exit 0, a wrong one's 1: each kind apart
            for code in sorted({c for _, _, c in found}):
                walls = [w for w, _, c in found if c == code]
                cpus = [u for _, u, c in found if c == code]
                print(f"pair {pair + 1}  {str(source):40}  exit {code}: median round "
                      f"{statistics.median(walls):5.2f} s  mean CPU {statistics.mean(cpus):5.2f} s"
                      f"  ({len(walls)} rounds, loadavg {load})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
