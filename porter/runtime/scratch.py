"""Scratch directories whose path repeats: where porter lays out a copy of a checkout to build
in (`candidates --verify`'s shadow of each op's port, `porter pr`'s worktree of HEAD).

The emulator's caches are keyed by content and by where the headers are: a precompiled prelude
and the Metal front end's preprocessed text both name the checkout's headers by absolute path.
A fresh temporary name for every copy missed them all, so each op of `candidates --verify` and
each `porter pr` built its own preludes, one for each Metal version and build (seconds each,
33 MB each). A slot here has the same path from one op, and one run, to the next. A lock keeps
two runs, or two threads, out of one slot: the second takes the next slot.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from porter.runtime.cache_dir import cache_dir


@contextmanager
def reused_directory(kind: str, checkout_root) -> Iterator[Path]:
    """An empty directory, the same for the same `kind` and checkout (its resolved path)
    whenever no other holder has it; emptied again when the block ends."""
    base = cache_dir("scratch")
    base.mkdir(parents=True, exist_ok=True)
    key = str(Path(checkout_root).resolve())
    stem = f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    for slot in itertools.count():
        path = base / f"{stem}-{slot}"
        with open(base / f"{stem}-{slot}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue                  # another run's, or another thread's: the next slot
            try:
                shutil.rmtree(path, ignore_errors=True)     # what a killed run left
                path.mkdir()
                yield path
            finally:
                shutil.rmtree(path, ignore_errors=True)
            return                        # closing the file lets the lock go
