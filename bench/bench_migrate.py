"""porter migrate-from-mpsgraph --dry-run on the real-size tree against one LibCST parse of the op database.

Target (issue 3): porter at least 40x faster than `libcst.parse_module` of
common_methods_invocations.py. Both are measured here, in one run, on this machine. Also
prints `porter candidates` (target: under 2 s) and where the migration's time goes.

    python bench/bench_migrate.py
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from _common import porter_argv, real_tree, time_process

TARGET = 40.0
CANDIDATES_TARGET_S = 2.0

STAGES = r"""
import sys, time
t0 = time.perf_counter()
from porter.checkout import Checkout
from porter.torchgen_check import EntryValidator
import porter.migration as M, porter.plan as P
t1 = time.perf_counter()
spent = {}
def timed(mod, name):
    f = getattr(mod, name)
    def g(*a, **k):
        s = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - s
    setattr(mod, name, g)
for n in ("_resolve", "_refuse_direct_callers", "_dispatcher_callers", "_validate_yaml", "_selector_body"):
    timed(M, n)
for n in ("_plan_kernel", "_plan_host", "_plan_expectations"):
    timed(P, n)
s = time.perf_counter()
with EntryValidator() as v:
    m = M.plan_migration(Checkout.at(sys.argv[1]), "sign", None, v)
total = time.perf_counter() - s
m.changes.diff()
print(f"  imports (porter.migration and what it pulls in): {t1 - t0:.3f} s")
for k, v in spent.items():
    print(f"  {k:<24} {v:.3f} s")
print(f"  plan_migration total:    {total:.3f} s")
"""


def time_with_cpu(argv: list[str], repeat: int = 15) -> tuple[float, float, float]:
    """(best wall, median wall, best CPU) seconds of a whole process and its children.

    CPU time barely moves when other jobs share the machine; wall time does (this 2-core
    machine often runs several test suites at once), so both are printed."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(walls), statistics.median(walls), min(cpus)


def libcst_parse_seconds(path) -> tuple[float, float]:
    """(wall, CPU) seconds of one `libcst.parse_module` of the file."""
    code = ("import time, libcst; src = open(%r).read(); t = time.perf_counter(); "
            "c = time.process_time(); libcst.parse_module(src); "
            "print(time.perf_counter() - t, time.process_time() - c)" % str(path))
    wall, cpu = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout.split()
    return float(wall), float(cpu)


@contextmanager
def bytecode_cached():
    """Python as a normal install runs it: modules compiled once, then read from a bytecode
    cache. (This machine's shell sets PYTHONDONTWRITEBYTECODE=1, so every porter run compiles
    its ~40 modules from source; the cache goes to a temp dir, never into the repository.)"""
    saved = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="porter-pycache-")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    root = real_tree()
    cmi = root / "torch/testing/_internal/common_methods_invocations.py"
    argv = porter_argv("migrate-from-mpsgraph", "sign", "--dry-run", "--root", str(root))
    best, median, cpu = time_with_cpu(argv)
    with bytecode_cached():
        time_process(argv, repeat=1)            # fills the cache
        cached_best, cached_median, cached_cpu = time_with_cpu(argv)
    cand_best, cand_median = time_process(porter_argv("candidates", "--root", str(root)))
    bare_best, _ = time_process([sys.executable, "-c", "pass"])
    parse, parse_cpu = libcst_parse_seconds(cmi)
    print(f"real-size tree: {root}")
    print(f"porter migrate-from-mpsgraph sign --dry-run (whole process): best {best:.3f} s, "
          f"median {median:.3f} s, CPU {cpu:.3f} s")
    print(f"  with a bytecode cache (a normal install):                   best {cached_best:.3f} s, "
          f"median {cached_median:.3f} s, CPU {cached_cpu:.3f} s")
    print(f"  of which a bare `python -c pass` start-up:                   {bare_best:.3f} s")
    print("  in-process stages (one run):")
    sys.stdout.flush()
    subprocess.run([sys.executable, "-c", STAGES, str(root)], check=True)
    print(f"libcst.parse_module(common_methods_invocations.py): {parse:.3f} s (CPU {parse_cpu:.3f} s)")
    for label, ratio in (("wall, as this shell runs it", parse / best),
                         ("wall, with a bytecode cache", parse / cached_best),
                         ("CPU, as this shell runs it", parse_cpu / cpu),
                         ("CPU, with a bytecode cache", parse_cpu / cached_cpu)):
        print(f"ratio ({label}): porter is {ratio:.1f}x faster (target {TARGET:.0f}x: "
              f"{'met' if ratio >= TARGET else 'NOT met'})")
    print(f"porter candidates (whole process): best {cand_best:.3f} s, median {cand_median:.3f} s "
          f"(target < {CANDIDATES_TARGET_S:.0f} s: {'met' if cand_best < CANDIDATES_TARGET_S else 'NOT met'})")


if __name__ == "__main__":
    main()
