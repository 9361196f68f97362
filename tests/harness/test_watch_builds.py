"""`porter test --watch` starts a saved kernel file's build before its round reads the
checkout, and the round joins that build (porter.emulate.build.build_source) instead of
compiling the file again."""

from __future__ import annotations

import io
import shutil
import threading

import pytest

from porter.source.checkout import KERNELS
from tests.porter_run import porter

RIGHT = "    return a == 0 ? b : static_cast<T>(a > 0);\n"
SPELLED_OTHERWISE = "    return a == 0 ? b : static_cast<T>(0 < a);\n"
WRONG = "    return a == 0 ? b : static_cast<T>(a < 0);\n"


@pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
def test_a_saved_kernel_file_is_built_once_from_the_save_and_its_round_gives_its_verdict(
        real_root, monkeypatch):
    from porter.emulate import build
    from porter.harness import watch
    from porter.harness.session import Options

    assert porter("new-op", "heaviside", "--no-test", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    text = metal.read_text()
    assert text.count(RIGHT) == 1
    opts = Options(ops=["heaviside"], root=str(real_root), device="emulate", dtypes=["int32"])
    built: set = set()
    out = io.StringIO()
    assert watch._round(opts, real_root, out, None, built) == 0, out.getvalue()
    # the round says which kernel files it built: the ones a save of starts at once
    assert built == {metal}

    compiled: list[str] = []
    pieces = build._build_in_pieces

    def counted(cxx, flags, dirs, tmpdir, source, display_path, *args, **kwargs):
        if str(display_path) == str(metal):
            compiled.append((threading.current_thread().name, source))
        return pieces(cxx, flags, dirs, tmpdir, source, display_path, *args, **kwargs)
    monkeypatch.setattr(build, "_build_in_pieces", counted)
    for body, code in ((SPELLED_OTHERWISE, 0), (WRONG, 1)):
        compiled.clear()
        metal.write_text(text.replace(RIGHT, body))
        watch._start_builds([metal], real_root)
        out = io.StringIO()
        assert watch._round(opts, real_root, out, None, built) == code, out.getvalue()
        # one compile of the saved text: the early build's, which the round took
        assert len(compiled) == 1, [name for name, _ in compiled]
        assert compiled[0][0] == f"{watch.EARLY_BUILD} {metal.name}"
        assert body.strip() in compiled[0][1]


def _scripted_watch(root, monkeypatch, watched, during_round, first_save, rounds_wanted=3,
                    built_files=(), on_pause=None):
    """watch.run with its rounds, file list and clock replaced: `first_save()` is the user's
    save at the first poll, `during_round(n)` what happens while round n runs (from 1); each
    round records `watched`'s files' texts (None: missing), and says it built `built_files`
    (as a round's backend says which kernel files it built); `on_pause(n, seconds, wake)`
    runs at the loop's n-th wait. The loop stops once `rounds_wanted` rounds ran, or after 50 polls
    without them; the recorded rounds."""
    import os

    from porter.harness import watch
    from porter.harness.session import Options

    rounds: list = []

    def round_(opts, root_, out, gaps=None, built=None):
        rounds.append([p.read_text() if p.exists() else None for p in watched(None)])
        if built is not None:
            built.update(built_files)
        during_round(len(rounds))
        if len(rounds) == rounds_wanted:
            raise KeyboardInterrupt
        return 0

    polls = []

    def sleep(seconds, wake=None):
        polls.append(seconds)
        if on_pause is not None:
            on_pause(len(polls), seconds, wake)
        if len(polls) == 1:
            for path in first_save():
                os.utime(path, ns=(1, 2 * 10**18))
        if len(polls) > 50:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch, "watched_files", watched)
    monkeypatch.setattr(watch, "_round", round_)
    monkeypatch.setattr(watch, "_pause", sleep)
    opts = Options(ops=["heaviside"], root=str(root), device="emulate")
    assert watch.run(opts, out=io.StringIO()) == 0
    return rounds


def test_a_file_an_edit_adds_to_the_watch_and_saved_while_the_round_runs_gets_a_round(
        mini_root, monkeypatch):
    """The files watched are read again after a round's verdict, not before it (~0.2 s of the
    round's start). A header the saved edit starts to include, saved again while that round
    runs, must still get a round of its own: it has no stamp from before the round."""
    import os

    kernel, header = mini_root / "k.metal", mini_root / "k.h"
    kernel.write_text("a\n")
    header.write_text("b\n")

    def watched(root):
        return [kernel, header] if "#include" in kernel.read_text() else [kernel]

    def during_round(n):
        if n == 2:                    # the edit's round: the header is saved as it runs
            header.write_text("b saved\n")
            os.utime(header, ns=(1, 10**18))

    def first_save():                 # the kernel file starts to include k.h
        kernel.write_text('#include "k.h"\n')
        return [kernel]

    rounds = _scripted_watch(mini_root, monkeypatch, watched, during_round, first_save)
    assert [texts[0] for texts in rounds] == ["a\n", '#include "k.h"\n', '#include "k.h"\n']
    assert [texts[1] for texts in rounds[1:]] == ["b\n", "b saved\n"]


def test_a_watched_file_deleted_while_the_round_runs_gets_a_round(mini_root, monkeypatch):
    """Review 48's F1: the header a kernel file includes, deleted while a round ran, left the
    watch (it is no longer found) and no round saw it: the last verdict, green, stood while the
    file no longer built."""
    kernel, header = mini_root / "k.metal", mini_root / "k.h"
    kernel.write_text('#include "k.h"\n')
    header.write_text("b\n")

    def watched(root):
        return [kernel, header] if header.exists() else [kernel]

    def during_round(n):
        if n == 2:                    # the edit's round: the header is deleted as it runs
            header.unlink()

    def first_save():
        kernel.write_text('#include "k.h"\n// edited\n')
        return [kernel]

    rounds = _scripted_watch(mini_root, monkeypatch, watched, during_round, first_save)
    assert [len(texts) for texts in rounds] == [2, 2, 1]      # the third round ran without it


def test_the_watch_holds_what_the_host_checks_read(mini_root):
    """Review 48's F2: a `#define exec_binary_kernel ...` saved into a header of the MPS host
    folders, or into a checkout header a host file includes, got no round (porter.emulate.
    host_macros reads both); and a header created there changes what an include finds."""
    from porter.harness import watch
    from porter.source.checkout import MPS, OPERATIONS

    helper = mini_root / MPS / "OperationUtils.h"
    helper.write_text("#pragma once\n")
    swap = mini_root / "aten/src/ATen/PorterSwap.h"
    swap.write_text("#pragma once\n")
    host = mini_root / OPERATIONS / "BinaryKernel.mm"
    host.write_text("#include <ATen/PorterSwap.h>\n" + host.read_text())
    files = watch.watched_files(mini_root)
    assert {helper, swap, host, mini_root / MPS, mini_root / OPERATIONS,
            mini_root / "aten/src/ATen"} <= set(files)


def test_the_watch_holds_the_folders_a_kernel_files_includes_looked_in(real_root):
    """Review 48's F3: a header a kernel file includes, created where its build looks first,
    got no round: the folders the lookups listed are watched, created or not (the checkout's
    root, then its aten/src, as the metallib build searches them)."""
    from porter.harness import watch
    from porter.source.checkout import KERNELS

    metal = real_root / KERNELS / "BinaryKernel.metal"
    metal.write_text("#include <porter_late/late.h>\n" + metal.read_text())
    files = set(watch.watched_files(real_root))
    assert {real_root / "porter_late", real_root / "aten/src/porter_late"} <= files


def test_the_watch_says_how_many_files_and_folders_it_watches(mini_root, monkeypatch):
    """The watch holds folders as well as files (a header created in one is what an include
    finds next); its first line counted both as "file(s)"."""
    from porter.harness import watch
    from porter.harness.session import Options

    watched = [mini_root / KERNELS / "BinaryKernel.metal", mini_root / KERNELS,
               mini_root / "aten/src/ATen/native/native_functions.yaml"]
    monkeypatch.setattr(watch, "watched_files", lambda root: watched)
    monkeypatch.setattr(watch, "_round", lambda *args, **kwargs: 0)

    def sleep(seconds, wake=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(watch, "_pause", sleep)
    out = io.StringIO()
    assert watch.run(Options(ops=["heaviside"], root=str(mini_root), device="emulate"),
                     out=out) == 0
    assert "porter: watching 2 file(s) and 1 folder(s): " in out.getvalue(), out.getvalue()


def test_each_round_takes_the_kernel_workers_the_last_round_left(mini_root, monkeypatch):
    """A round's backend makes a worker client of its own; under the watch it takes the worker
    processes the last round's client left (porter.emulate.client.kept_lanes), and they end
    with the watch."""
    from porter.emulate import client

    kernel = mini_root / KERNELS / "BinaryKernel.metal"
    workers: list = []

    def during_round(n):              # as a round's backend makes and closes its client
        one = client.WorkerClient()
        one.start()
        workers.append([lane.proc for lane in one._lanes])
        one.close()

    _scripted_watch(mini_root, monkeypatch, lambda root: [kernel], during_round,
                    lambda: [kernel], rounds_wanted=2)
    assert len(workers) == 2 and workers[0] == workers[1]
    assert all(proc.poll() is not None for proc in workers[0])
    assert client._KEPT is None


@pytest.mark.parametrize("saved_again", [False, True])
def test_a_saved_kernel_file_starts_building_before_its_save_settles(mini_root, monkeypatch,
                                                                     saved_again):
    """The settle's wait (watch.SETTLE_S) overlaps the build of a saved kernel file the last
    round built: it starts when the save is seen. Written again while it settles, the file
    starts again after the settle (the round joins the build of the text it ends with); not
    written again, it is not built twice."""
    import os

    from porter.harness import watch

    kernel = mini_root / KERNELS / "BinaryKernel.metal"
    events: list = []
    monkeypatch.setattr(watch, "_start_builds",
                        lambda metals, root: events.append(("build", list(metals))))

    def on_pause(n, seconds, wake):
        settling = bool(events) and events[-1][0] == "build"     # the wait after a save's build
        events.append(("pause", seconds))
        if saved_again and settling:
            kernel.write_text(kernel.read_text() + "// saved again\n")
            os.utime(kernel, ns=(1, 3 * 10**18))

    def first_save():
        kernel.write_text(kernel.read_text() + "// saved\n")
        return [kernel]

    _scripted_watch(mini_root, monkeypatch, lambda root: [kernel], lambda n: None, first_save,
                    rounds_wanted=2, built_files=[kernel], on_pause=on_pause)
    first = next(n for n, event in enumerate(events) if event[0] == "build")
    assert events[first] == ("build", [kernel])                 # when the save is seen,
    assert events[first + 1] == ("pause", watch.SETTLE_S)       # before the settle's wait
    assert events[first + 2] == ("build", [kernel] if saved_again else [])


def test_the_rounds_hold_decoded_rows_and_the_polls_wait_on_the_watched_folders(mini_root,
                                                                                monkeypatch):
    """watch.run's rounds run under refcache.held_rows, which ends with the watch; each poll
    waits on one file_wake.Wake watching the round's files (their folders), closed at the end;
    the settle's wait is not cut short by one."""
    from porter.harness import file_wake, refcache, watch

    kernel = mini_root / KERNELS / "BinaryKernel.metal"
    holding, wakes = [], []
    monkeypatch.setattr(file_wake.Wake, "watch",
                        lambda self, files: wakes.append((self, list(files))))
    pause = watch._pause

    def during_round(n):
        holding.append(refcache._HELD is not None)

    waits = []
    _scripted_watch(mini_root, monkeypatch, lambda root: [kernel], during_round,
                    lambda: [kernel], rounds_wanted=2,
                    on_pause=lambda n, seconds, wake: waits.append((seconds, wake)))
    monkeypatch.setattr(watch, "_pause", pause)
    assert holding == [True, True] and refcache._HELD is None
    assert wakes and all(files == [kernel] for _, files in wakes)
    assert len({id(w) for w, _ in wakes}) == 1 and not wakes[0][0].notified      # closed
    polls = [wake for seconds, wake in waits if wake is not None]
    assert polls and all(wake is wakes[0][0] for wake in polls)
    assert (watch.SETTLE_S, None) in waits


def test_each_round_begins_by_letting_go_of_rows_the_last_did_not_read(mini_root, monkeypatch):
    """watch._round asks refcache.next_round before its session: held rows the last round did
    not read, or whose record went, are dropped once a round (their mappings hold disk)."""
    from porter.harness import devices, refcache, session, watch
    from porter.harness.session import Options

    order = []
    monkeypatch.setattr(refcache, "next_round", lambda: order.append("next_round"))
    monkeypatch.setattr(devices, "get_backend", lambda device, root: None)
    monkeypatch.setattr(session, "run", lambda opts: order.append("session") or 0)
    opts = Options(ops=["heaviside"], root=str(mini_root), device="emulate")
    for _ in range(2):
        assert watch._round(opts, mini_root, io.StringIO()) == 0
    assert order == ["next_round", "session"] * 2


def test_a_kernel_file_seen_empty_is_not_built_before_it_settles(mini_root, monkeypatch):
    """inotify can wake the poll between an editor's truncate and its write (review 79): an
    empty kernel file is not compiled for nothing before the settle; the text it settles on
    is."""
    import os

    from porter.harness import watch

    kernel = mini_root / KERNELS / "BinaryKernel.metal"
    text = kernel.read_text()
    events: list = []
    monkeypatch.setattr(watch, "_start_builds",
                        lambda metals, root: events.append(("build", list(metals))))

    def on_pause(n, seconds, wake):
        settling = bool(events) and events[-1][0] == "build"
        events.append(("pause", seconds))
        if settling:                                    # the editor's write lands
            kernel.write_text(text + "// saved\n")
            os.utime(kernel, ns=(1, 3 * 10**18))

    def first_save():                                   # the editor's truncate
        kernel.write_text("")
        return [kernel]

    _scripted_watch(mini_root, monkeypatch, lambda root: [kernel], lambda n: None, first_save,
                    rounds_wanted=2, built_files=[kernel], on_pause=on_pause)
    first = next(n for n, event in enumerate(events) if event[0] == "build")
    assert events[first:first + 3] == [("build", []), ("pause", watch.SETTLE_S),
                                       ("build", [kernel])]
