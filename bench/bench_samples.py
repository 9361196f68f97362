"""Sample generation under porter: torch's `extract_test_fn` (inspect.stack()) against porter's
frame walk (porter.harness.opdb.frame_walking_extract_test_fn). Prints the ratio; asserts nothing.

    python bench/bench_samples.py [--op heaviside] [--depth 40] [--repeat 3]

Times `reference_inputs` plus `sample_inputs` over every dtype of the op's MPS test, called
`--depth` frames deep (porter test's stack is ~27 frames under `python -m porter`, more under
pytest). Baseline: torch's own function, as torch ships it. The samples are checked identical
in tests/harness/test_extract_test_fn.py.
"""

from __future__ import annotations

import argparse
import inspect
import time

import _common  # noqa: F401  (puts the repo on sys.path)

from porter.harness import opdb


def torch_extract_test_fn():
    from torch.testing._internal import common_utils

    source = inspect.getsource(common_utils)
    body = "def extract_test_fn" + source.split("def extract_test_fn", 1)[1].split("\n# Contains tracked input")[0]
    namespace = dict(common_utils.__dict__)
    exec(compile(body, "<torch extract_test_fn>", "exec"), namespace)
    return namespace["extract_test_fn"]


def run(info, dtypes, depth: int) -> int:
    if depth > 0:
        return run(info, dtypes, depth - 1)
    n = 0
    for dtype in dtypes:
        n += sum(1 for _ in info.reference_inputs("cpu", dtype))
        n += sum(1 for _ in info.sample_inputs("cpu", dtype))
    return n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--op", default="heaviside")
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import torch
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    info = next(o for o in opdb.load().ops if o.name == args.op)
    dtypes = sorted(info.supported_dtypes("mps") - {torch.float64}, key=str) or [torch.float32]
    timings = {}
    for label, fn in (("torch inspect.stack", torch_extract_test_fn()),
                      ("porter frame walk", opdb.frame_walking_extract_test_fn)):
        common_utils.extract_test_fn = core.extract_test_fn = fn
        best = None
        for _ in range(args.repeat):
            start = time.perf_counter()
            n = run(info, dtypes, args.depth)
            took = time.perf_counter() - start
            best = took if best is None else min(best, took)
        timings[label] = best
        print(f"{label:22s} {best:7.3f} s  ({n} samples, {len(dtypes)} dtypes, {args.depth} frames deep)")
    base, new = timings["torch inspect.stack"], timings["porter frame walk"]
    print(f"ratio torch/porter: {base / new:.1f}x")


if __name__ == "__main__":
    main()
