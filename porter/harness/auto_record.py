"""What `porter candidates --verify` measured, kept for this checkout, so that plain `candidates`
can say AUTO `yes` only where the port its command writes was measured green.

A record holds each op's measurement (porter.harness.measure_port.Verdict) under one key, which
changes with anything the measurement depends on:

- the checkout's bytes that a plan or a verdict reads: `aten/src/ATen/native/` (the yaml, the CPU
  kernels, the Metal kernels and host files), `c10/metal/`, the checkout's `torch/testing/`
  (OpInfos, common_mps.py), `test/test_mps.py`, MPSFallback.mm and derivatives.yaml;
- the torch the references come from (porter.harness.refcache.environment: its version, build
  and testing sources, ATEN_CPU_CAPABILITY);
- porter's own code (every file of the package: the plan, the emulator, the verdict);
- the C++ compiler the emulator builds with, and which Metal language check is on.

Change one byte of any and the record misses: AUTO then says `unverified`, never a stale `yes`.
Files are hashed through the reference cache's stat index (re-read only when size, mtime or
inode changed), so a lookup costs milliseconds once warm; nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from porter.runtime.cache_dir import cache_dir

FORMAT = "porter-candidates-record-v1"
# the parts of a checkout whose bytes a plan or a verdict reads
_CHECKOUT_DIRS = ("aten/src/ATen/native", "c10/metal", "torch/testing")
_CHECKOUT_FILES = ("test/test_mps.py", "aten/src/ATen/mps/MPSFallback.mm", "tools/autograd/derivatives.yaml")


def directory() -> Path:
    return cache_dir("candidates")


def _files_under(root: Path, rel: str) -> list[Path]:
    top = root / rel
    if not top.is_dir():
        return []
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in ("__pycache__", ".git"))
        found += [Path(dirpath) / f for f in sorted(filenames) if not f.endswith(".pyc")]
    return found


def key(root: Path) -> str | None:
    """The record's key for the checkout at `root`, or None when no torch is installed (nothing
    can be measured, so nothing is recorded)."""
    from porter.harness import refcache

    env = refcache.environment(root, "emulate")
    if env is None:
        return None
    root = Path(root).resolve()
    porter_pkg = Path(__file__).resolve().parent.parent
    files = [f for rel in _CHECKOUT_DIRS for f in _files_under(root, rel)]
    files += [root / rel for rel in _CHECKOUT_FILES]
    h = hashlib.sha256(FORMAT.encode() + b"\0" + env.encode())
    # paths relative to their root: a copy of the checkout (or of porter) keys alike
    for base, group in ((root, files), (porter_pkg, _files_under(porter_pkg, "."))):
        for path, digest in zip(group, refcache._content_hashes(group)):
            h.update(os.path.relpath(path, base).encode() + b"\0"
                     + digest.rsplit(":", 1)[-1].encode() + b"\0")
    h.update(_compiler().encode() + b"\0" + os.environ.get("PORTER_METAL_FRONTEND", "").encode())
    return h.hexdigest()[:32]


def _compiler() -> str:
    from porter.emulate import toolchain
    from porter.errors import PorterError
    try:
        cxx = toolchain.compiler()
        return toolchain.compiler_id(cxx)
    except (PorterError, OSError):
        return "no compiler"


def load(root: Path) -> dict[str, dict]:
    """op -> the recorded measurement (Verdict.to_json()) for this checkout as it is now; {}
    when none was recorded."""
    k = key(root)
    if k is None:
        return {}
    try:
        return json.loads((directory() / f"{k}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def save(root: Path, measured: dict[str, dict]) -> None:
    """Add `measured` (op -> Verdict.to_json()) to this checkout's record."""
    k = key(root)
    if k is None:
        return
    directory().mkdir(parents=True, exist_ok=True)
    record = load(root) | measured
    path = directory() / f"{k}.json"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
