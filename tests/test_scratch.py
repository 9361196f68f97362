"""porter.runtime.scratch: the scratch copies porter builds in have a path that repeats, so that
the emulator's path-keyed caches (precompiled preludes, the front end's text) serve the next op
and the next run; two holders at once never share one."""

from __future__ import annotations

import threading

from porter.runtime.scratch import reused_directory


def test_the_same_key_gets_the_same_empty_directory_each_time():
    with reused_directory("verify", "/some/checkout") as first:
        (first / "left.txt").write_text("a copy of the last op's tree")
    with reused_directory("verify", "/some/checkout") as second:
        assert second == first
        assert list(second.iterdir()) == []          # what the last holder left is gone
    assert not second.exists()
    with reused_directory("verify", "/another/checkout") as other:
        assert other != first


def test_a_directory_held_elsewhere_is_never_handed_out_twice():
    # a thread (or another run) holding the slot: the second holder gets the next one
    held, release, seen = threading.Event(), threading.Event(), []

    def hold():
        with reused_directory("pr", "/checkout") as path:
            seen.append(path)
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    try:
        with reused_directory("pr", "/checkout") as mine:
            assert mine != seen[0] and mine.is_dir() and seen[0].is_dir()
    finally:
        release.set()
        thread.join()
    with reused_directory("pr", "/checkout") as again:
        assert again == seen[0]                      # free again: the first slot
