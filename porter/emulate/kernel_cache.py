"""A size bound on the emulator's build cache (`porter.emulate.toolchain.cache_dir()`).

Every build leaves entries behind: a library and its metadata per file text (`KEY.so`,
`KEY.json`), an object per piece of a file (`piece-KEY.o`, `.json`), syntax and probe records,
and a precompiled prelude per checkout and header set (`pch-KEY/`, ~10 MB each). Nothing
removed them: a contributor who edits kernels for a week, or switches between checkouts, filled
gigabytes. Past `PORTER_KERNEL_CACHE_MB` (default 2048) the least recently used entries go, where
an entry is everything that shares a key (`KEY.so` with `KEY.json`, a `pch-` directory whole),
so a library never outlives its metadata. A hit refreshes its entry's time (`touch`); entries
used in the last few minutes stay whatever the size, as a concurrent run may be reading them
(a build that loses a piece or a prelude to another process's eviction rebuilds it: slower,
never wrong).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

DEFAULT_LIMIT_MB = 2048
RECENT_S = 600           # entries this fresh are never evicted: a concurrent run may be on them
EVERY_S = 3600           # a scan of a full cache takes ~0.1-0.5 s: at most one an hour
MARK = ".last-eviction"


def limit_bytes() -> int:
    try:
        return int(float(os.environ.get("PORTER_KERNEL_CACHE_MB", DEFAULT_LIMIT_MB)) * 1024 * 1024)
    except ValueError:
        return DEFAULT_LIMIT_MB * 1024 * 1024


def touch(*paths: Path) -> None:
    """Mark entries as used now (their mtime is the eviction order)."""
    for path in paths:
        try:
            os.utime(path)
        except OSError:
            pass


def _entry_key(path: Path) -> str:
    # KEY.so / KEY.json / piece-KEY.o ... share the part before the first dot; a staged
    # `.tmp` file belongs to the entry it is about to become
    return path.name.split(".", 1)[0]


def entries(directory: Path) -> dict[str, tuple[float, int, list[Path]]]:
    """key -> (last use, bytes, paths) for every entry of `directory`."""
    out: dict[str, tuple[float, int, list[Path]]] = {}
    if not directory.is_dir():
        return out
    for path in directory.iterdir():
        if path.name.startswith("."):
            continue                      # the eviction mark, not an entry
        try:
            st = path.stat()
            size = (sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
                    if path.is_dir() else st.st_size)
        except OSError:
            continue                      # removed by a concurrent run meanwhile
        key = _entry_key(path)
        used, total, paths = out.get(key, (0.0, 0, []))
        out[key] = (max(used, st.st_mtime), total + size, paths + [path])
    return out


def evict_now_and_then(directory: Path) -> tuple[int, int]:
    """`evict`, at most once every EVERY_S seconds (after a new build: the edit loop's builds
    must not each pay for a scan of the whole cache)."""
    mark = directory / MARK
    try:
        if time.time() - mark.stat().st_mtime < EVERY_S:
            return 0, 0
    except OSError:
        pass
    try:
        mark.touch()
    except OSError:
        return 0, 0
    return evict(directory)


def evict(directory: Path, limit: int | None = None, now: float | None = None) -> tuple[int, int]:
    """Remove least recently used entries until `directory` fits `limit` bytes, sparing
    entries used in the last RECENT_S seconds; (entries, bytes) removed."""
    limit = limit_bytes() if limit is None else limit
    now = time.time() if now is None else now
    found = entries(directory)
    total = sum(size for _, size, _ in found.values())
    removed = freed = 0
    for used, size, paths in sorted(found.values(), key=lambda e: e[0]):
        if total <= limit:
            break
        if now - used < RECENT_S:
            break                         # the rest are fresher still
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        total -= size
        freed += size
        removed += 1
    return removed, freed
