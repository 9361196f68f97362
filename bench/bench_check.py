"""`porter check` on the real-size tree against torchgen's `parse_native_yaml` alone, in one run.

Target (issue 6): the whole check under 1 s where parse_native_yaml takes ~0.7 s, i.e. at most
~1.43x one parse. Both are timed here as whole processes (interpreter start-up and imports
included, as a user or CI pays them), on this machine, in this run; the in-process parse and
the check's parts are printed for context.

    python bench/bench_check.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from _common import porter_argv, real_tree, time_process

TARGET = 1.0 / 0.7


def parse_alone_argv(root) -> list[str]:
    code = ("import torchgen.gen as g; g.parse_native_yaml(path=%r, tags_yaml_path=%r)"
            % (str(root / "aten/src/ATen/native/native_functions.yaml"),
               str(root / "aten/src/ATen/native/tags.yaml")))
    return [sys.executable, "-c", code]


def parse_in_process(root) -> float:
    code = ("import time, torchgen.gen as g; t = time.perf_counter(); "
            "g.parse_native_yaml(path=%r, tags_yaml_path=%r); print(time.perf_counter() - t)"
            % (str(root / "aten/src/ATen/native/native_functions.yaml"),
               str(root / "aten/src/ATen/native/tags.yaml")))
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)


def interleaved(a: list[str], b: list[str], rounds: int = 7) -> tuple[list[float], list[float]]:
    """Wall times of a and b run alternately, so that a load change on a shared machine hits both."""
    times_a, times_b = [], []
    for _ in range(rounds):
        for argv, times in ((a, times_a), (b, times_b)):
            start = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            times.append(time.perf_counter() - start)
    return times_a, times_b


def serial(argv: list[str]) -> tuple[float, float]:
    env = dict(os.environ, PORTER_NO_FORK="1")
    saved = os.environ.copy()
    os.environ.update(env)
    try:
        return time_process(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    root = real_tree()
    check = porter_argv("check", "--root", str(root))
    checks, parses = interleaved(check, parse_alone_argv(root))
    best, median = min(checks), statistics.median(checks)
    parse_best, parse_median = min(parses), statistics.median(parses)
    rest_best, _ = time_process(porter_argv("check", "--root", str(root), "--skip", "PORTER040"))
    serial_best, _ = serial(check)
    bare_best, _ = time_process([sys.executable, "-c", "pass"])
    in_process = parse_in_process(root)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"real-size tree: {root}  ({os.cpu_count()} cores, load average {load:.2f})")
    print(f"porter check (whole process):                      best {best:.3f} s, median {median:.3f} s")
    print(f"torchgen parse_native_yaml alone (whole process):  best {parse_best:.3f} s, median {parse_median:.3f} s")
    print(f"  parse_native_yaml in-process, import excluded:   {in_process:.3f} s")
    print(f"  a bare `python -c pass`:                         {bare_best:.3f} s")
    print(f"porter check --skip PORTER040 (all but torchgen):  best {rest_best:.3f} s")
    print(f"porter check, PORTER_NO_FORK=1 (torchgen serial):  best {serial_best:.3f} s")
    ratio = best / parse_best
    print(f"median ratio: {median / parse_median:.2f}x")
    print(f"ratio: porter check = {ratio:.2f}x parse_native_yaml alone (target <= {TARGET:.2f}x, "
          f"i.e. 1 s where the parse takes 0.7 s: {'met' if ratio <= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
