"""Wake `porter test --watch` when a watched file's folder changes, instead of at its next poll.

The watch decides what changed by its own stamps (mtime, size) of every watched file; this only
ends its wait between two polls early. On Linux the wait is an inotify descriptor on the
folders that hold the watched files (a folder sees a file written in place, and one an editor
replaces by a rename); a save is then read within milliseconds, not within half a poll on
average. Elsewhere, or where inotify cannot be had (no libc symbol, the watch limit reached),
the wait is the poll's whole interval, as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys
import time
from pathlib import Path

# <sys/inotify.h>
_IN_MODIFY = 0x002
_IN_ATTRIB = 0x004
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_FROM = 0x040
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
_MASK = (_IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
         | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF)


class Wake:
    """wait(seconds): return after `seconds`, or sooner once a watched folder changed."""

    def __init__(self):
        self._fd: int | None = None
        self._libc = None
        self._folders: set[str] = set()
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
                fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            except (OSError, AttributeError):
                fd = -1
            if fd >= 0:
                self._fd, self._libc = fd, libc

    @property
    def notified(self) -> bool:
        """Whether changes wake the wait (else it always waits its whole interval)."""
        return self._fd is not None

    def watch(self, files: list[Path]) -> None:
        """Wake on changes in the folders of `files`, and in `files` that are folders."""
        if self._fd is None:
            return
        folders = {str(f) if f.is_dir() else str(f.parent) for f in files}
        for folder in sorted(folders - self._folders):
            if self._libc.inotify_add_watch(self._fd, os.fsencode(folder), _MASK) < 0:
                # ENOSPC: the user's watch limit; a folder not watched is seen at the poll
                continue
            self._folders.add(folder)

    def wait(self, seconds: float) -> None:
        if self._fd is None:
            time.sleep(seconds)
            return
        # poll, not select: a descriptor numbered past FD_SETSIZE (1024) is refused by select
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        if poller.poll(max(0, int(seconds * 1000))):
            self._drain()

    def _drain(self) -> None:
        """Read the events that woke the wait (what changed, the stamps say)."""
        while True:
            try:
                if not os.read(self._fd, 65536):
                    return
            except BlockingIOError:
                return
            except OSError:
                return

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Wake":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
