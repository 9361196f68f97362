"""Shared bench helpers: a real-size tree in a temp dir and wall-clock timing of whole processes."""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from porter.testing.trees import build_real_tree  # noqa: E402


def require_libcst() -> None:
    """The baseline of the editing benches is a libcst parse: an extra, not a porter dependency."""
    import importlib.util

    if importlib.util.find_spec("libcst") is None:
        raise SystemExit("this bench times libcst as its baseline: pip install '.[bench]'")


def scratch_dir(prefix: str) -> Path:
    """A temporary directory, removed when the bench exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def real_tree() -> Path:
    """A fresh real-size tree (fixture kernels + the installed wheel's real files), git-initialised."""
    root = build_real_tree(scratch_dir("porter-bench-") / "pytorch")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"]):
        subprocess.run(cmd, cwd=root, check=True)
    return root


# heaviside's functor body as `porter new-op` writes it: the loop benches edit it
RIGHT = "return a == 0 ? b : static_cast<T>(a > 0);"
# a wrong one: every sample of every dtype fails
WRONG = "return a == 0 ? b : static_cast<T>(a < 0);"


def add_tree_options(parser) -> None:
    """heaviside_tree's options, for the loop benches' command lines."""
    parser.add_argument("--binary-kernel", metavar="PATH",
                        help="a BinaryKernel.metal to copy over the tree's (upstream's real one)")
    parser.add_argument("--c10-metal", metavar="DIR",
                        help="c10/metal headers to copy over the tree's (the ones the given "
                             "BinaryKernel.metal builds with, where the wheel's are older)")


def loop_tree(args) -> tuple[Path, Path, str] | None:
    """(root, its BinaryKernel.metal, that file's text) of a heaviside_tree built with a fresh
    porter cache of its own (the shared reference cache left out), or None, said on stderr,
    where heaviside's body is not RIGHT (the benches' edits would change nothing)."""
    from porter.source.checkout import KERNELS
    os.environ.pop("PORTER_REFCACHE_DIR", None)
    os.environ["PORTER_CACHE_DIR"] = str(scratch_dir("porter-bench-cache-"))
    root = heaviside_tree(args.binary_kernel, args.c10_metal)
    metal = root / KERNELS / "BinaryKernel.metal"
    good = metal.read_text()
    if RIGHT not in good:
        print(f"heaviside's integer body is not the expected one:\n{RIGHT}", file=sys.stderr)
        return None
    return root, metal, good


def heaviside_tree(binary_kernel: str | None = None, c10_metal: str | None = None) -> Path:
    """real_tree() with heaviside ported by `porter new-op` (this repository's porter), after
    copying over it a BinaryKernel.metal (upstream's real one) and the c10/metal headers it
    builds with, where given (committed: the port's change is the branch's)."""
    from porter.source.checkout import KERNELS
    root = real_tree()
    if c10_metal:
        for header in sorted(Path(c10_metal).glob("*.h")):
            (root / "c10" / "metal" / header.name).write_text(header.read_text())
    if binary_kernel or c10_metal:
        if binary_kernel:
            (root / KERNELS / "BinaryKernel.metal").write_text(open(binary_kernel).read())
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam",
                        "upstream kernel file and headers"], cwd=root, check=True)
    subprocess.run(porter_argv("new-op", "heaviside", "--root", str(root)), check=True,
                   env=bench_env(), capture_output=True)
    return root


def bench_env() -> dict[str, str]:
    """The environment of a normal install: bytecode is cached (pip compiles it at install time),
    whatever PYTHONDONTWRITEBYTECODE the calling shell sets."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_process(argv: list[str], repeat: int = 7, cwd: Path | None = None) -> tuple[float, float]:
    """(best, median) wall seconds of a whole process, output discarded, after one warm-up run."""
    env = bench_env()
    times = []
    for n in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        if n:
            times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def porter_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "porter", *args]


def time_call(fn, repeat: int = 7) -> tuple[float, float]:
    """(best, median) wall seconds of an in-process call."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)
