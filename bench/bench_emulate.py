"""Build times of the Metal emulator. Prints figures and ratios to targets; asserts nothing.

    python bench/bench_emulate.py [--repeat N] [--upstream DIR]

- one functor (a fresh source, so never cached): target < 0.5 s
- a whole kernel file at -O0: target < 3 s (the fixture's; with --upstream DIR also
  DIR/aten/src/ATen/native/mps/kernels/{Unary,Binary}Kernel.metal, kept outside the repo)
- a cached rebuild: target < 0.05 s
Each build uses a fresh cache directory except the cached-rebuild measurement.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from pathlib import Path

from _common import REPO, scratch_dir, time_call

from porter.source.checkout import KERNELS
from porter.emulate.build import build_file, build_source

ONE_FUNCTOR = """\
#include <c10/metal/indexing.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
// {tag}
struct hypot_functor {{
  template <typename T>
  inline T operator()(const T a, const T b) {{
    return static_cast<T>(c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b))));
  }}
}};
REGISTER_BINARY_OP(hypot, float, float);
REGISTER_BINARY_OP(hypot, half, half);
REGISTER_BINARY_OP(hypot, bfloat, bfloat);
"""


def fresh_cache() -> None:
    os.environ["PORTER_CACHE_DIR"] = str(scratch_dir("porter-bench-cache-"))


def report(label: str, best: float, median: float, target: float) -> None:
    print(f"{label:<44} best {best:7.3f} s  median {median:7.3f} s  "
          f"target < {target:g} s  ratio {median / target:5.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--upstream", metavar="DIR", default=os.environ.get("PORTER_UPSTREAM_METAL"))
    args = parser.parse_args()
    fixture = REPO / "fixtures" / "mini-pytorch"

    fresh_cache()
    # Warm-up: the precompiled header of shim + c10/metal is built once per cache and
    # compiler; a new kernel file then pays only for itself.
    t0 = time.perf_counter()
    build_source(ONE_FUNCTOR.format(tag="warm-up"), "warm_up.metal", fixture)
    print(f"{'first build in a fresh cache (incl. headers)':<44} {time.perf_counter() - t0:7.3f} s")

    best, med = time_call(lambda: build_source(ONE_FUNCTOR.format(tag=uuid.uuid4().hex),
                                           "one_functor.metal", fixture), args.repeat)
    report("one functor (3 registrations)", best, med, 0.5)

    files = [(fixture, fixture / KERNELS / n) for n in ("UnaryKernel.metal", "BinaryKernel.metal")]
    if args.upstream:
        up = Path(args.upstream)
        files += [(up, up / KERNELS / n) for n in ("UnaryKernel.metal", "BinaryKernel.metal")]
    for root, path in files:
        text = path.read_text()

        def build_uncached():
            build_source(text + f"\n// {uuid.uuid4().hex}\n", path, root)
        best, med = time_call(build_uncached, args.repeat)
        lib = build_file(path, root)
        where = "fixture" if root == fixture else "upstream"
        report(f"whole file -O0: {where} {path.name} ({len(lib.registrations)} kernels)", best, med, 3.0)

    root, path = files[0]
    build_file(path, root)
    best, med = time_call(lambda: build_file(path, root), max(args.repeat, 10))
    report(f"cached rebuild: {path.name}", best, med, 0.05)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
