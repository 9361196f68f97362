"""The kernel author's inner loop: edit the functor body, get the verdict. Whole processes;
prints figures and ratios to the op_db import timed in the same run; asserts nothing.

    python bench/bench_loop.py [--repeat N]

1. a real-size tree, `porter new-op heaviside` (fresh caches);
2. one `python -c "from torch.testing._internal.common_methods_invocations import op_db"`
   process, best and median of N: the baseline;
3. the first `porter test heaviside --device emulate` (imports op_db, compiles, records);
4. N edit cycles, each two whole `porter test heaviside --device emulate` processes: after a
   wrong functor body (must exit 1 with `fail`), then after the right one again (must exit 0).
   Every edit also writes a fresh comment into the body, so every cycle compiles the kernel
   (restoring byte-identical text would find the library in the build cache: faster, but
   not what an author who types does);
5. `--no-cache` on the same edit: the loop without the reference cache;
6. `--watch`: one `porter test heaviside --device emulate --watch` process, N edits, the time
   from each save to its verdict's summary line (the watch polls every 0.05 s; on Linux
   inotify ends the poll's wait at once: porter/harness/file_wake.py).
`--c10-metal DIR` copies the c10/metal headers it builds with first (a newer upstream
BinaryKernel.metal calls c10::metal::div_floor, which the wheel's headers lack).
`--binary-kernel PATH` copies a BinaryKernel.metal (upstream's real one, 35 kB, as issue 33's
done-when asks) over the tree's before the port. `cat /proc/loadavg` is printed beside every
figure.
Target: a cycle <= 0.2x one op_db import (goal 0.1x), on a quiet machine: load moves the
import far more than the loop, so a ratio measured while the load average is above 1.5 per core
is printed marked as such (`NOT A QUIET-MACHINE FIGURE`) and the exit status is 3; CPU seconds
(user + sys of the processes) are printed beside every wall time, as they move much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from _common import RIGHT, WRONG, add_tree_options, bench_env, loop_tree, porter_argv



CPU: list[float] = []       # CPU seconds (user + sys, children included) of each run_once
QUIET_LOAD_PER_CORE = 1.5   # above it, a wall-time ratio is not reported as the figure
LOADS: list[float] = []     # 1-minute load average, sampled before each measurement


def loadavg() -> str:
    """`cat /proc/loadavg`'s first three fields, as printed beside each figure."""
    try:
        return "loadavg " + " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "loadavg ?"


def load_per_core() -> float:
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def load_note() -> str:
    """The load over the measurements, and whether the ratios may be called quiet-machine ones."""
    worst = max(LOADS) if LOADS else load_per_core()
    cores = os.cpu_count() or 1
    mark = ("quiet" if worst <= QUIET_LOAD_PER_CORE else
            f"NOT A QUIET-MACHINE FIGURE (above {QUIET_LOAD_PER_CORE}/core)")
    return (f"load average (1 min) per core over the run: max {worst:.2f} "
            f"({worst * cores:.1f} on {cores} cores): {mark}")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], cwd=None) -> tuple[float, int, str]:
    LOADS.append(load_per_core())
    cpu0, start = _children_cpu(), time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=bench_env(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    CPU.append(_children_cpu() - cpu0)
    return wall, proc.returncode, proc.stdout + proc.stderr


def opdb_import(repeat: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    argv = [sys.executable, "-c", "from torch.testing._internal.common_methods_invocations import op_db"]
    run_once(argv)                                  # warm-up: file cache
    for _ in range(repeat):
        wall, _, _ = run_once(argv)
        walls.append(wall)
        cpus.append(CPU[-1])
    return walls, cpus


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    add_tree_options(parser)
    args = parser.parse_args()
    tree = loop_tree(args)
    if tree is None:
        return 2
    root, metal, good = tree
    test = porter_argv("test", "heaviside", "--device", "emulate", "--root", str(root))

    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (the box "
          "is shared: wall ratios move with it, CPU-time ratios much less)")
    walls, cpus = opdb_import(args.repeat)
    opdb_best, opdb_median, opdb_cpu = min(walls), statistics.median(walls), statistics.median(cpus)
    print(f"op_db import (whole process)          best {opdb_best:6.2f} s  median {opdb_median:6.2f} s"
          f"  CPU {opdb_cpu:5.2f} s  ({loadavg()})")

    first, code, _ = run_once(test)
    print(f"first porter test (op_db, build, record) {first:6.2f} s  exit {code}   "
          f"{first / opdb_median:5.2f}x op_db  ({loadavg()})")

    def cycle(tag: str, extra: list[str]) -> tuple[list[float], list[float], bool]:
        wrong_t, right_t, ok = [], [], True
        del CPU[:]
        for n in range(args.repeat):
            body = f"{WRONG} // {tag} edit {n}"
            metal.write_text(good.replace(RIGHT, body))
            t, code, out = run_once(test + extra)
            ok &= code == 1 and " fail " in out
            wrong_t.append(t)
            metal.write_text(good.replace(RIGHT, f"{RIGHT} // {tag} fixed {n}"))
            t, code, out = run_once(test + extra)
            ok &= code == 0 and "0 fail" in out
            right_t.append(t)
        metal.write_text(good)
        return wrong_t, right_t, ok

    for label, extra in (("cached", []), ("--no-cache", ["--no-cache"])):
        wrong_t, right_t, ok = cycle(label.strip("-"), extra)
        both = wrong_t + right_t
        med = statistics.median(both)
        print(f"edit->verdict, {label:<10} wrong body: median {statistics.median(wrong_t):5.2f} s "
              f"(exit 1, fail: {'yes' if ok else 'NO'}); right body: median "
              f"{statistics.median(right_t):5.2f} s (exit 0)")
        cpu = statistics.median(CPU)
        print(f"  one cycle = {med:5.2f} s = {med / opdb_median:5.3f}x op_db import "
              f"(best {min(both):5.2f} s = {min(both) / opdb_median:5.3f}x); CPU {cpu:5.2f} s = "
              f"{cpu / opdb_cpu:5.3f}x op_db's CPU.  target <= 0.5x (a fresh process)  "
              f"({loadavg()})")
    waits, ok = watch_cycle(test, metal, good, args.repeat)
    if waits:
        med = statistics.median(waits)
        print(f"edit->verdict under --watch: median {med:5.2f} s = {med / opdb_median:5.3f}x op_db "
              f"import (best {min(waits):5.2f} s; verdicts right: {'yes' if ok else 'NO'}).  "
              f"target <= 0.2x  ({loadavg()})")
    print(load_note())
    return 0 if max(LOADS) <= QUIET_LOAD_PER_CORE else 3


def watch_cycle(test: list[str], metal, good: str, repeat: int) -> tuple[list[float], bool]:
    """Seconds from each save to the verdict's summary line in one `--watch` process: a wrong
    body (a fail) then the right one (0 fail), `repeat` times."""
    import queue
    import signal
    import threading

    proc = subprocess.Popen(test + ["--watch"], env=bench_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout], daemon=True).start()

    def until(pred, timeout=600.0) -> str | None:
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            try:
                line = lines.get(timeout=max(0.0, end - time.perf_counter()))
            except queue.Empty:
                return None
            if pred(line):
                return line
        return None

    waits, ok = [], True
    try:
        if until(lambda ln: "watching" in ln) is None:
            return [], False
        for n in range(repeat):
            for body, want_fail in ((f"{WRONG} // watch edit {n}", True),
                                    (f"{RIGHT} // watch fixed {n}", False)):
                time.sleep(0.5)             # a save in a later mtime tick than the last one
                LOADS.append(load_per_core())
                metal.write_text(good.replace(RIGHT, body))
                start = time.perf_counter()
                line = until(lambda ln: ln.startswith("summary:"))
                if line is None:
                    return waits, False
                waits.append(time.perf_counter() - start)
                ok &= (" 0 fail" not in line) == want_fail
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        metal.write_text(good)
    return waits, ok


if __name__ == "__main__":
    raise SystemExit(main())
