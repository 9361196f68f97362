"""porter.harness.file_wake: a change in a watched file's folder ends the watch's wait between
two polls; anything else lets it run its whole interval."""

from __future__ import annotations

import os
import threading
import time

import pytest

from porter.harness.file_wake import Wake

LONG = 20.0          # a wait a change must end long before


def _after(seconds: float, action) -> threading.Thread:
    def run():
        time.sleep(seconds)
        action()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _waited(wake: Wake, seconds: float) -> float:
    start = time.monotonic()
    wake.wait(seconds)
    return time.monotonic() - start


needs_inotify = pytest.mark.skipif(not Wake().notified, reason="no inotify here (Linux only)")


@needs_inotify
@pytest.mark.parametrize("how", ["written in place", "replaced by a rename", "deleted", "created"])
def test_a_change_in_a_watched_files_folder_ends_the_wait(tmp_path, how):
    kernel = tmp_path / "BinaryKernel.metal"
    kernel.write_text("old\n")

    def change():
        if how == "written in place":
            kernel.write_text("new\n")
        elif how == "replaced by a rename":          # as an editor that saves atomically does
            staged = tmp_path / ".BinaryKernel.metal.swp"
            staged.write_text("new\n")
            os.replace(staged, kernel)
        elif how == "deleted":
            kernel.unlink()
        else:
            (tmp_path / "new.h").write_text("// a header an include may find first\n")

    with Wake() as wake:
        wake.watch([kernel])
        _after(0.2, change)
        assert _waited(wake, LONG) < LONG / 2


@needs_inotify
def test_a_watched_folder_itself_is_watched(tmp_path):
    """A folder the watch lists (one an include looks up headers in) wakes it for a file made
    inside it, not only for changes beside it."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    with Wake() as wake:
        wake.watch([folder])
        _after(0.2, lambda: (folder / "new.h").write_text("\n"))
        assert _waited(wake, LONG) < LONG / 2


@needs_inotify
def test_a_change_elsewhere_lets_the_wait_run_its_interval(tmp_path):
    watched, other = tmp_path / "watched", tmp_path / "other"
    watched.mkdir()
    other.mkdir()
    (watched / "k.metal").write_text("\n")
    with Wake() as wake:
        wake.watch([watched / "k.metal"])
        _after(0.05, lambda: (other / "k.metal").write_text("\n"))
        assert _waited(wake, 0.5) >= 0.5


def test_without_notification_the_wait_is_the_whole_interval(tmp_path):
    """After close (as where inotify cannot be had), a change does not end the wait: the poll
    that follows sees it."""
    kernel = tmp_path / "k.metal"
    kernel.write_text("\n")
    wake = Wake()
    wake.watch([kernel])
    wake.close()
    assert not wake.notified
    _after(0.05, lambda: kernel.write_text("saved\n"))
    assert _waited(wake, 0.4) >= 0.4


@needs_inotify
def test_events_read_by_one_wait_do_not_end_the_next(tmp_path):
    """A wait drains what woke it: the next wait, with no change since, runs its interval (a
    wake that stayed ready would turn the watch's loop into a busy one)."""
    kernel = tmp_path / "k.metal"
    kernel.write_text("\n")
    with Wake() as wake:
        wake.watch([kernel])
        for n in range(5):
            kernel.write_text(f"save {n}\n")
        assert _waited(wake, LONG) < LONG / 2
        assert _waited(wake, 0.3) >= 0.3
