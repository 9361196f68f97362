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

Runs share one cache (two terminals, CI jobs on one runner), so a library a run has looked up
must outlive any other run's eviction until the run has loaded it: once a run's worker loaded
a `KEY.so` another run evicted, dlopen said "cannot open shared object file" and every dtype
was red. A run `pin`s what it uses: a hard link under `.runs/PID-.../`, removed when the run
ends (`release_run`: at exit, and after each round of --watch). The link keeps the file's
bytes whatever happens to the cache's name for it, and eviction leaves an entry another live
run has pinned alone (it is using it). A pin left by a run that was killed is swept by the
next eviction. PORTER_KERNEL_CACHE_GRACE_S and PORTER_KERNEL_CACHE_EVERY_S set RECENT_S and
EVERY_S (tests force eviction with 0).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

DEFAULT_LIMIT_MB = 2048
RECENT_S = 600           # entries this fresh are never evicted: a concurrent run may be on them
EVERY_S = 3600           # a scan of a full cache takes ~0.1-0.5 s: at most one an hour
MARK = ".last-eviction"
STAGING_S = 3600         # a staged `.tmp` file this fresh is a run's write in flight
RUNS = ".runs"           # each live run's pins (hard links), one directory per run


def _seconds(name: str, default: int) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


_pins: dict[Path, Path] = {}      # cache directory -> this process's pin directory in it
_pin_lock = threading.Lock()


def _pin_dir(directory: Path) -> Path:
    with _pin_lock:
        mine = _pins.get(directory)
        if mine is None or not mine.is_dir():
            runs = directory / RUNS
            runs.mkdir(parents=True, exist_ok=True)
            mine = _pins[directory] = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=runs))
        return mine


def run_directory(directory: Path) -> Path:
    """This run's own directory in the cache `directory` (under RUNS): what it holds there is
    never evicted while the run lives, and goes when it exits."""
    return _pin_dir(directory)


@atexit.register
def release_run() -> None:
    """Drop this run's pins: at exit, and where one process holds several runs (a --watch
    round; the test suite, after each test file). Until then a pin holds its file's bytes
    whatever eviction does: a pytest worker that pinned every library and prelude it used for
    an hour kept them all (80 GB filled a CI runner's disk). A library a worker has loaded
    stays loaded: only the name goes; the next run pins again."""
    with _pin_lock:
        for mine in list(_pins.values()):
            if mine.name.startswith(f"{os.getpid()}-"):      # not a forked child's copy of the map
                shutil.rmtree(mine, ignore_errors=True)
        _pins.clear()


def pin(path: Path, name: str | None = None) -> Path:
    """A name for `path` that this process holds until it exits (a hard link in its own
    directory under the cache's RUNS, called `name` or `path`'s name): load that, not `path`,
    and no other run's eviction can take it away. Raises OSError (FileNotFoundError) where
    `path` is gone already: the caller builds it again, as on a miss. With `name` (a file
    about to be published under it) the pin is replaced: a rebuild's file is the one held."""
    path = Path(path)
    mine = _pin_dir(path.parent)
    held = mine / (name or path.name)
    if name is not None:
        link_or_copy(path, held)
        return held
    if held.is_file():
        return held
    try:
        os.link(path, held)
    except FileExistsError:
        pass                               # another thread of this run pinned it meanwhile
    except FileNotFoundError:
        raise
    except OSError:
        shutil.copyfile(path, held)        # a file system without hard links: a copy holds it
    return held


def link_or_copy(source: Path, dest: Path) -> None:
    """`dest` as a hard link of `source` (a copy where links cannot be made), published
    atomically. Raises FileNotFoundError where `source` is gone."""
    staged = dest.with_name(f".{dest.name}.{os.getpid()}-{threading.get_ident()}")
    staged.unlink(missing_ok=True)
    try:
        os.link(source, staged)
    except FileNotFoundError:
        raise
    except OSError:
        shutil.copyfile(source, staged)
    os.replace(staged, dest)


def _sweep_dead_runs(directory: Path) -> None:
    """Remove the pins of runs that are no longer alive (killed before their exit handler)."""
    runs = directory / RUNS
    if not runs.is_dir():
        return
    for run in runs.iterdir():
        try:
            pid = int(run.name.split("-", 1)[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(run, ignore_errors=True)
        except OSError:
            pass                          # alive, another user's: leave it


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
    return {k: (used, size, paths) for k, (used, size, paths, _) in _entries(directory).items()}


def _entries(directory: Path) -> dict[str, tuple[float, int, list[Path], bool]]:
    """key -> (last use, bytes, paths, pinned by a run) for every entry of `directory`."""
    out: dict[str, tuple[float, int, list[Path], bool]] = {}
    if not directory.is_dir():
        return out
    held = _held_by_other_runs(directory)
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
        used, total, paths, pinned = out.get(key, (0.0, 0, [], False))
        # a file a run is writing (`mkstemp(suffix=".json.tmp")`, published by os.replace):
        # removed under it, the run's publish fails (four runs on one evicting cache: "No such
        # file or directory" renaming a front-end record); one left by a killed run goes later
        staging = path.name.endswith(".tmp") and time.time() - st.st_mtime < STAGING_S
        out[key] = (max(used, st.st_mtime), total + size, paths + [path],
                    pinned or staging or (st.st_dev, st.st_ino) in held)
    return out


def _held_by_other_runs(directory: Path) -> set[tuple[int, int]]:
    """(device, inode) of every file another live run has pinned. This run's own pins do not
    count: each already holds its bytes, whatever eviction does to the cache's name."""
    runs = directory / RUNS
    own = _pins.get(directory)
    found: set[tuple[int, int]] = set()
    if not runs.is_dir():
        return found
    for run in runs.iterdir():
        if run == own:
            continue
        for f in run.iterdir() if run.is_dir() else ():
            try:
                st = f.stat()
            except OSError:
                continue
            found.add((st.st_dev, st.st_ino))
    return found


def evict_now_and_then(directory: Path) -> tuple[int, int]:
    """`evict`, at most once every EVERY_S seconds (after a new build: the edit loop's builds
    must not each pay for a scan of the whole cache)."""
    mark = directory / MARK
    try:
        if time.time() - mark.stat().st_mtime < _seconds("PORTER_KERNEL_CACHE_EVERY_S", EVERY_S):
            return 0, 0
    except OSError:
        pass
    try:
        mark.touch()
    except OSError:
        return 0, 0
    return evict(directory)


def clear(directory: Path) -> tuple[int, int]:
    """Empty the cache `directory` (`porter cache clear`): every entry goes, and the pins of
    runs that are gone, but a live run's own directory under RUNS stays. Removing it under that
    run was the shared-cache failure again: its worker's next load of a library it had pinned
    said "cannot open shared object file" (the suite's `cache clear` test beside a running
    `porter test` in another xdist worker). The pins hold bytes, not names: the cache's names
    go whatever they hold. (files, bytes) removed."""
    if not directory.is_dir():
        return 0, 0
    _sweep_dead_runs(directory)
    files = freed = 0
    for path in directory.iterdir():
        if path.name == RUNS:
            continue
        found = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else [path]
        for f in found:
            try:
                freed += f.stat().st_size
                files += 1
            except OSError:
                pass                      # removed by a concurrent run meanwhile
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return files, freed


def evict(directory: Path, limit: int | None = None, now: float | None = None) -> tuple[int, int]:
    """Remove least recently used entries until `directory` fits `limit` bytes, sparing
    entries used in the last RECENT_S seconds and entries a live run has pinned;
    (entries, bytes) removed."""
    limit = limit_bytes() if limit is None else limit
    now = time.time() if now is None else now
    recent = _seconds("PORTER_KERNEL_CACHE_GRACE_S", RECENT_S)
    _sweep_dead_runs(directory)
    found = _entries(directory)
    total = sum(size for _, size, _, _ in found.values())
    removed = freed = 0
    for used, size, paths, pinned in sorted(found.values(), key=lambda e: e[0]):
        if total <= limit:
            break
        if now - used < recent:
            break                         # the rest are fresher still
        if pinned:
            continue                      # another run is using it
        for path in paths:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        total -= size
        freed += size
        removed += 1
    return removed, freed
