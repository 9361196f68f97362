"""Where the c10/metal headers and our Metal shim live."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from porter.errors import PorterError

SHIM_DIR = Path(__file__).parent / "include"


def torch_include_dir() -> Path | None:
    """torch/include of the installed wheel, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        include = Path(location) / "include"
        if (include / "c10" / "metal").is_dir():
            return include
    return None


def c10_metal_parent(root: Path | None) -> Path:
    """The directory holding c10/metal: the checkout's own, else the installed torch's."""
    if root is not None and (Path(root) / "c10" / "metal" / "indexing.h").is_file():
        return Path(root)
    include = torch_include_dir()
    if include is None:
        raise PorterError("no c10/metal headers: the checkout has none and torch is not installed",
                          hint="pip install torch, or emulate from a full PyTorch checkout")
    return include


def include_dirs(root: Path | None) -> list[Path]:
    """-I order: shim, checkout's aten/src (kernel-side .h files), c10/metal's parent."""
    dirs = [SHIM_DIR]
    if root is not None and (Path(root) / "aten" / "src").is_dir():
        dirs.append(Path(root) / "aten" / "src")
    parent = c10_metal_parent(root)
    if parent not in dirs:
        dirs.append(parent)
    return dirs


def header_files(dirs: list[Path]) -> list[Path]:
    """Every header a kernel file could pull in from these directories (for the cache key)."""
    files: list[Path] = []
    for d in dirs:
        if d == SHIM_DIR:
            files += sorted(p for p in d.rglob("*") if p.is_file())
            continue
        for sub in ("c10/metal", "ATen/native/mps/kernels"):
            files += sorted((d / sub).glob("*.h"))
    return files
