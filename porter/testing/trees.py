"""Build a "real-size tree": the fixture checkout with the installed torch wheel's real files on top.

Upstream files are never copied into the repository; they are read from site-packages at run time.
The wheel is located with importlib.util.find_spec, so torch is never imported (importing it costs
seconds and the scaffolding must not depend on it). The fixture's .metal/.mm/.cpp files and
kernels/*.h stay: the wheel carries no kernel sources.

    python -m porter.testing.trees DEST
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

from porter import exit_codes
from porter.source.checkout import C10_METAL, NATIVE, TESTING
from porter.errors import PorterError


def fixture_root() -> Path:
    """fixtures/mini-pytorch of the porter repository this module belongs to."""
    here = Path(__file__).resolve()
    for candidate in here.parents:
        root = candidate / "fixtures" / "mini-pytorch"
        if root.is_dir():
            return root
    raise PorterError("fixtures/mini-pytorch not found above " + str(here),
                      hint="run from a porter source checkout")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise PorterError(f"package {name!r} is not installed",
                          hint="pip install torch (the real-size tree is built from its wheel)")
    return Path(next(iter(spec.submodule_search_locations)))


def real_sources() -> list[tuple[Path, str]]:
    """(file in site-packages, path in a checkout) for every real file the tree uses."""
    torch_dir = _package_dir("torch")
    torchgen_dir = _package_dir("torchgen")
    pairs: list[tuple[Path, str]] = []
    packaged = torchgen_dir / "packaged" / "ATen" / "native"
    for name in ("native_functions.yaml", "tags.yaml"):
        pairs.append((packaged / name, f"{NATIVE}/{name}"))
    testing = torch_dir / "testing" / "_internal"
    for name in ("common_mps.py", "common_methods_invocations.py"):
        pairs.append((testing / name, f"{TESTING}/{name}"))
    for name in ("__init__.py", "core.py", "refs.py"):
        pairs.append((testing / "opinfo" / name, f"{TESTING}/opinfo/{name}"))
    for src in sorted((testing / "opinfo" / "definitions").glob("*.py")):
        pairs.append((src, f"{TESTING}/opinfo/definitions/{src.name}"))
    for src in sorted((torch_dir / "include" / "ATen" / "native").glob("*.h")):
        pairs.append((src, f"{NATIVE}/{src.name}"))
    # the host library's declarations: which exec_*_kernel overloads a host function can call
    pairs.append((torch_dir / "include" / "ATen" / "native" / "mps" / "MetalShaderLibrary.h",
                  f"{NATIVE}/mps/MetalShaderLibrary.h"))
    # the complex helpers the CPU kernels call (sgn_impl, zabs)
    pairs.append((torch_dir / "include" / "ATen" / "native" / "cpu" / "zmath.h", f"{NATIVE}/cpu/zmath.h"))
    # gelu's scalar formulas (scalar_gelu, scalar_gelu_approximated_with_tanh), which its CPU
    # kernel names instead of writing a lambda
    pairs.append((torch_dir / "include" / "ATen" / "native" / "cpu" / "Gelu.h", f"{NATIVE}/cpu/Gelu.h"))
    for src in sorted((torch_dir / "include" / "c10" / "metal").glob("*.h")):
        pairs.append((src, f"{C10_METAL}/{src.name}"))
    missing = [str(src) for src, _ in pairs if not src.is_file()]
    if missing:
        raise PorterError(f"{missing[0]}: missing from the installed wheel",
                          hint=f"{len(missing)} expected file(s) missing; reinstall torch")
    return pairs


def build_real_tree(dest: Path, fixture: Path | None = None) -> Path:
    """Copy `fixture` to `dest` (which must not exist yet), then lay the wheel's real files over it."""
    dest = Path(dest)
    pairs = real_sources()
    shutil.copytree(fixture or fixture_root(), dest)
    for src, rel in pairs:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    return dest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m porter.testing.trees DEST", file=sys.stderr)
        return exit_codes.BAD_INPUT
    dest = Path(args[0])
    if dest.exists():
        print(f"{dest}: already exists (choose a new directory)", file=sys.stderr)
        return exit_codes.BAD_INPUT
    try:
        build_real_tree(dest)
    except PorterError as err:
        print(err, file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(dest)
    return exit_codes.OK


if __name__ == "__main__":
    sys.exit(main())
