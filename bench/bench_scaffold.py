"""porter new-op --dry-run on the real-size tree against one LibCST parse of the op database.

Target (issue 2): porter at least 30x faster than `libcst.parse_module` of
common_methods_invocations.py. Both are measured here, in one run, on this machine.

    python bench/bench_scaffold.py
"""

from __future__ import annotations

import subprocess
import sys

from _common import require_libcst, porter_argv, real_tree, time_process

TARGET = 30.0


def libcst_parse_seconds(path) -> float:
    code = ("import time, libcst; src = open(%r).read(); t = time.perf_counter(); "
            "libcst.parse_module(src); print(time.perf_counter() - t)" % str(path))
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)


def main() -> None:
    require_libcst()
    root = real_tree()
    cmi = root / "torch/testing/_internal/common_methods_invocations.py"
    best, median = time_process(porter_argv("new-op", "heaviside", "--dry-run", "--root", str(root)))
    bare_best, _ = time_process([sys.executable, "-c", "pass"])
    parse = libcst_parse_seconds(cmi)
    print(f"real-size tree: {root}")
    print(f"porter new-op heaviside --dry-run (whole process): best {best:.3f} s, median {median:.3f} s")
    print(f"  of which a bare `python -c pass` start-up:        {bare_best:.3f} s")
    print(f"libcst.parse_module(common_methods_invocations.py): {parse:.3f} s")
    ratio = parse / best
    print(f"ratio: porter is {ratio:.1f}x faster (target {TARGET:.0f}x: "
          f"{'met' if ratio >= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
