"""Harness overhead: `porter test heaviside` against the bare op_db import, and audit-xfails
with --jobs 2 against --jobs 1. Prints figures and ratios; asserts nothing.

    python bench/bench_test.py [--repeat N] [--shard 1/8]

`--device cpu` compares the CPU with itself: what remains is porter's own cost (imports,
sample generation, comparison), the part a Mac or GPU run pays on top of the device work.
"""

from __future__ import annotations

import argparse
import shutil
import sys

from _common import porter_argv, real_tree, time_process

OPDB_IMPORT = [sys.executable, "-c",
               "from torch.testing._internal.common_methods_invocations import op_db"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shard", default="1/8")
    args = parser.parse_args()

    root = real_tree()
    try:
        imp_best, imp_med = time_process(OPDB_IMPORT, args.repeat)
        test_best, test_med = time_process(
            porter_argv("test", "heaviside", "--device", "cpu", "--root", str(root)), args.repeat)
        print(f"op_db import (bare python -c)      best {imp_best:6.2f} s  median {imp_med:6.2f} s")
        print(f"porter test heaviside --device cpu best {test_best:6.2f} s  median {test_med:6.2f} s")
        print(f"ratio porter test / op_db import   best {test_best / imp_best:6.2f}   "
              f"median {test_med / imp_med:6.2f}")

        audit = porter_argv("audit-xfails", "--root", str(root), "--device", "cpu",
                            "--shard", args.shard, "--json")
        j1, _ = time_process(audit + ["--jobs", "1"], 1)
        j2, _ = time_process(audit + ["--jobs", "2"], 1)
        print(f"audit-xfails --shard {args.shard} --device cpu --jobs 1   {j1:6.2f} s")
        print(f"audit-xfails --shard {args.shard} --device cpu --jobs 2   {j2:6.2f} s")
        print(f"speed-up jobs 2 / jobs 1                 {j1 / j2:6.2f}x")
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
