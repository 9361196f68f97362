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


def origin(root: Path | None) -> tuple[str, bool]:
    """Which c10/metal headers a build of `root`'s kernels uses, in words, and whether they are
    the checkout's own (what a Mac building the checkout compiles against too)."""
    parent = c10_metal_parent(root)
    version = _torch_version()
    wheel = torch_include_dir()
    if root is not None and parent == Path(root):
        same = wheel is not None and _same_headers(parent, wheel)
        return (f"the checkout's c10/metal"
                + (f" (the same files as the installed torch {version}'s)" if same else ""), True)
    return f"the installed torch {version}'s c10/metal (the checkout has none)", False


def _torch_version() -> str:
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:       # noqa: BLE001 (any metadata problem: say so without a version)
        return "(unknown version)"


def _same_headers(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in (a / "c10" / "metal").glob("*.h"))
    return names == sorted(p.name for p in (b / "c10" / "metal").glob("*.h")) and all(
        (a / "c10" / "metal" / n).read_bytes() == (b / "c10" / "metal" / n).read_bytes()
        for n in names)


def include_dirs(root: Path | None) -> list[Path]:
    """-I order: the shim, then as PyTorch's metallib build (cmake/Metal.cmake's metal_to_air:
    `-I ${CMAKE_SOURCE_DIR} -I ${CMAKE_SOURCE_DIR}/aten/src`) the checkout's root before its
    aten/src: a header in both is the root's (review 48's F2: aten/src/c10/metal/utils.h was read
    before c10/metal/utils.h). Where the checkout has no c10/metal, the installed torch's
    include directory stands in for the root's, after aten/src: its ATen/ would otherwise hide
    the checkout's."""
    dirs = [SHIM_DIR]
    parent = c10_metal_parent(root)
    src = Path(root) / "aten" / "src" if root is not None else None
    if root is not None and parent == Path(root):
        dirs.append(parent)
    if src is not None and src.is_dir():
        dirs.append(src)
    if parent not in dirs:
        dirs.append(parent)
    return dirs


def checkout_include_dirs(root: Path | None) -> list[Path]:
    """include_dirs without porter's shim: where the checkout's own headers are found, as a
    Metal compiler finds them (it brings its own metal_stdlib)."""
    return [d for d in include_dirs(root) if d != SHIM_DIR]


def beside(display_path) -> Path | None:
    """The kernel file's own directory, where a quoted `#include "x.h"` is looked up first (a
    Mac's metallib build compiles the file where it lies; porter compiles a copy elsewhere, so
    it names the directory with `-iquote`); None for a bare name or one naming no directory."""
    if display_path is None:
        return None
    parent = Path(display_path).parent
    return parent if parent != Path(".") and parent.is_dir() else None


def quote_flags(display_path) -> list[str]:
    d = beside(display_path)
    return ["-iquote", str(d)] if d is not None else []


def quoted_headers(directory: Path) -> list[Path]:
    """The headers a quoted include may reach under the kernel file's directory (for cache keys)."""
    try:
        return sorted(p for p in Path(directory).rglob("*.h") if p.is_file())
    except OSError:
        return []


def kernel_include_graph(dirs: list[Path]):
    """The include graph of kernel files built with `dirs` (include_dirs), porter's shim aside:
    each header as the metallib build finds it, wherever it lies."""
    from porter.emulate.include_graph import IncludeGraph
    return IncludeGraph(Path("/"), dirs=[d for d in dirs if d != SHIM_DIR])


def reached_headers(text: str, dirs: list[Path],
                    beside_dir: Path | None = None) -> tuple[list[Path], bool]:
    """Every file a kernel file's `text` includes, directly or through the files it includes,
    looked up in `dirs` (a quoted name first in `beside_dir`), porter's shim aside: what the
    preprocessor reads beyond the directories header_files lists (a header elsewhere under
    aten/src: review 48's F3); and whether one of them includes a file a macro names
    (`#include HV_FILE`), which this list cannot hold (review 49's F2)."""
    graph = kernel_include_graph(dirs)
    source = (beside_dir if beside_dir is not None else Path("/nonexistent")) / "kernel.metal"
    return sorted(graph.reached(source, text)), bool(graph.computed)


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
