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
import time
from contextlib import contextmanager

from _common import require_libcst, porter_argv, real_tree, scratch_dir, time_process

TARGET = 40.0
CANDIDATES_TARGET_S = 2.0

STAGES = r"""
import contextlib, io, resource, sys, time
c0 = time.process_time()
from porter.cli import main
import porter.commands.migrate, porter.port.migration as M, porter.port.plan as P
c1 = time.process_time()
spent = {}
def timed(mod, name):
    f = getattr(mod, name)
    def g(*a, **k):
        s = time.process_time()
        try:
            return f(*a, **k)
        finally:
            spent[name] = spent.get(name, 0.0) + time.process_time() - s
    setattr(mod, name, g)
for n in ("_resolve", "_plan_yaml", "_refuse_direct_callers", "_dispatcher_callers", "_selector_body",
          "_validate_yaml"):
    timed(M, n)
for n in ("_plan_kernel", "_plan_host", "_plan_expectations"):
    timed(P, n)
with contextlib.redirect_stdout(io.StringIO()):
    main(["migrate-from-mpsgraph", "sign", "--dry-run", "--root", sys.argv[1]])
c2 = time.process_time()
child = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"  main process, imports:          {1000 * (c1 - c0):5.0f} ms CPU")
for k, v in spent.items():
    print(f"  main process, {k:<24} {1000 * v:5.0f} ms CPU")
print(f"  main process, whole command:    {1000 * (c2 - c1):5.0f} ms CPU")
print(f"  warm child (Jinja2, torchgen):  {1000 * (child.ru_utime + child.ru_stime):5.0f} ms CPU")
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
    os.environ["PYTHONPYCACHEPREFIX"] = str(scratch_dir("porter-pycache-"))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> None:
    require_libcst()
    root = real_tree()
    cmi = root / "torch/testing/_internal/common_methods_invocations.py"
    argv = porter_argv("migrate-from-mpsgraph", "sign", "--dry-run", "--root", str(root))
    with bytecode_cached():
        time_process(argv, repeat=1)            # fills the cache
        best, median, cpu = time_with_cpu(argv)
        bare_best, _ = time_process([sys.executable, "-c", "pass"])
        cand_best, cand_median = time_process(porter_argv("candidates", "--root", str(root)))
        print(f"real-size tree: {root}")
        print(f"porter migrate-from-mpsgraph sign --dry-run (whole process, bytecode cached as a "
              f"normal install has it): best {best:.3f} s, median {median:.3f} s, CPU {cpu:.3f} s")
        print(f"  of which a bare `python -c pass` start-up: {bare_best:.3f} s")
        print("  where the CPU goes (one in-process run; the child runs on the other core):")
        sys.stdout.flush()
        subprocess.run([sys.executable, "-c", STAGES, str(root)], check=True)
    parse, parse_cpu = libcst_parse_seconds(cmi)
    print(f"libcst.parse_module(common_methods_invocations.py): {parse:.3f} s (CPU {parse_cpu:.3f} s)")
    ratio = parse / best
    print(f"ratio (wall, best): porter is {ratio:.1f}x faster (target {TARGET:.0f}x: "
          f"{'met' if ratio >= TARGET else 'NOT met'}); on the median run {parse / median:.1f}x")
    print(f"  for information, CPU of both processes: {parse_cpu / cpu:.1f}x (porter uses both cores)")
    print(f"porter candidates (whole process): best {cand_best:.3f} s, median {cand_median:.3f} s "
          f"(target < {CANDIDATES_TARGET_S:.0f} s: {'met' if cand_best < CANDIDATES_TARGET_S else 'NOT met'})")


if __name__ == "__main__":
    main()
