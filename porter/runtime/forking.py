"""Forking a helper process with pipes to it, or learning that none can be had.

Both of porter's forked helpers (porter.runtime.warm's child, porter check's torchgen child) do work
the parent would otherwise do itself, so "no child" is never an error: no `os.fork` (Windows),
`PORTER_NO_FORK=1`, or no descriptor or process to spare (EMFILE, EAGAIN) all mean the parent
works alone.
"""

from __future__ import annotations

import os


def fork_with_pipes(count: int) -> tuple[int, list[int]] | None:
    """(pid, [read, write] * count) as `os.fork` returns them in each process, or None, with
    nothing left open, when no child can be forked."""
    if not hasattr(os, "fork") or os.environ.get("PORTER_NO_FORK"):
        return None
    fds: list[int] = []
    try:
        for _ in range(count):
            fds += os.pipe()
        return os.fork(), fds
    except OSError:
        for fd in fds:
            os.close(fd)
        return None
