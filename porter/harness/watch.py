"""`porter test OP... --device emulate --watch`: the verdict again on every save.

Watched: each `.metal` file a `*Kernel.mm` of the checkout dispatches to, every header those
files include (the checkout's own and `c10/metal`, followed transitively), the `.mm` files
themselves (which kernel an op runs), the expectation and tolerance sources
(`common_mps.py`, `test/test_mps.py`), and `native_functions.yaml` with the CPU sources
(`native/*.cpp`, `native/cpu/*.cpp`: whether the CPU reference is this checkout's). Polled
by (mtime, size) every `interval` seconds, so it needs no file-system notification library and
sees editors that replace files; on Linux, inotify on their folders ends a poll's wait early
(porter.harness.file_wake), and the stamps still say what changed.

Each round is a whole `porter test` in this process: the kernel library is rebuilt only when
its source or a header it can include changed (porter.emulate.build's cache is keyed by their
content), the samples and references come from the reference cache, and a broken save (a
syntax error in the functor) prints its one-line error and waits for the next one. Ctrl-C
stops it: the kernel worker is closed and the command exits 0.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from porter import exit_codes
from porter.errors import PorterError
from porter.runtime import run_memo


def watched_files(root: Path) -> list[Path]:
    from porter.emulate import headers, host_macros
    from porter.emulate.hostmap import host_kernels
    from porter.harness.mps_expectations import TEST_MPS
    from porter.source.checkout import (COMMON_MPS, CPU_KERNELS, KERNELS, NATIVE, NATIVE_YAML,
                                        OPERATIONS)

    root = Path(root)
    metals = sorted({h.metal for h in host_kernels(root)})
    # each kernel file's headers, looked up as its build looks them up (headers.reached_headers),
    # and the checkout's folders those lookups listed: a header created there is the one the
    # next build reads (review 48's F3)
    graph = headers.kernel_include_graph(headers.include_dirs(root))
    files: set[Path] = set(metals)
    for metal in metals:
        files.update(graph.reached(metal))
    files.update(folder for folder in graph.listed() if folder.is_relative_to(root))
    # the host files porter.emulate.hostmap reads: each .mm with a .metal of its stem, and what
    # its macro checks read for them (the host folders, the headers each .mm reaches)
    hosts = [mm for mm in sorted((root / OPERATIONS).glob("*.mm"))
             if (root / KERNELS / f"{mm.stem}.metal").is_file()]
    files.update(hosts)
    files.update(host_macros.read_by_hosts(root, hosts))
    files.update(p for p in (root / COMMON_MPS, root / TEST_MPS) if p.is_file())
    # what decides whether the CPU reference is this checkout's (the yaml's rows, the CPU
    # kernels and the shared functions that run their stubs): an edit there changes the
    # verdict, not the kernel (review 42's F6 showed the old exit 0 until a .metal save).
    # A CPU header or c10 edit is seen at the next round, not waited for.
    files.update(p for p in [root / NATIVE_YAML] if p.is_file())
    for folder in (root / CPU_KERNELS, root / NATIVE):
        files.update(folder.glob("*.cpp"))
    return sorted(files)


def _stamps(files: list[Path]) -> dict[Path, tuple[int, int] | None]:
    out = {}
    for f in files:
        try:
            st = f.stat()
            out[f] = (st.st_mtime_ns, st.st_size)
        except OSError:
            out[f] = None
    return out


# A save is seen within POLL_S (at once where porter.harness.file_wake has inotify: Linux),
# then read SETTLE_S later (an editor that writes in pieces has finished by then). A saved
# kernel file the last round built starts building when it is seen, so the settle's wait
# overlaps its build. Each poll is one stat per watched file (a few hundred on a real
# checkout: well under a millisecond).
POLL_S = 0.05
SETTLE_S = 0.05


def run(opts, interval: float = POLL_S, out=None, reference_gaps=None) -> int:
    """Run, then run again after every change, until Ctrl-C (exit 0). `reference_gaps`: asked
    before every round, what `porter test` asks once (the ops whose CPU reference is not this
    checkout's, as the checkout is now)."""
    from porter.source.checkout import resolve_checkout

    out = out or sys.stdout
    checkout = resolve_checkout(opts.root)
    if checkout is None:
        raise PorterError("--watch needs a checkout to watch", hint="run from a PyTorch checkout or pass --root DIR")
    if opts.device != "emulate":
        raise PorterError("--watch re-runs the emulator on every save; it needs --device emulate")
    root = checkout.root
    from porter.emulate.client import kept_lanes
    from porter.harness.refcache import held_rows
    # each round's backend takes the kernel workers of the last, and its rows the samples the
    # last decoded from the same reference records
    with kept_lanes(), held_rows():
        return _watch(opts, root, interval, out, reference_gaps)


def _watch(opts, root: Path, interval: float, out, reference_gaps) -> int:
    """run's loop: a round now, then one after every change, until Ctrl-C (exit 0)."""
    from porter.harness.file_wake import Wake

    built: set[Path] = set()        # the kernel files the last round built
    wake = Wake()
    try:
        files = watched_files(root)
        wake.watch(files)
        stamps = _stamps(files)              # before the round: a save while it runs is seen
        _round(opts, root, out, reference_gaps, built)
        # folders too: a file created in one (a header an include may find first) changes it
        folders = sum(1 for path in files if path.is_dir())
        out.write(f"porter: watching {len(files) - folders} file(s) and {folders} folder(s): the "
                  "kernels' sources, their hosts and the CPU reference's; Ctrl-C stops\n")
        out.flush()
        while True:
            _pause(interval, wake)
            now = _stamps(files)
            if now == stamps:
                continue
            # the saved kernel files start building now, while the save settles: the build is
            # the round's longest part, and the settle's wait is then off the verdict's path.
            # A file written again while it settles starts again below; the round's build of
            # the text it ends with joins that build (porter.emulate.build.build_source). An
            # empty one is an editor's truncate before its write (inotify wakes on it): left
            # to the settle, not compiled for nothing beside the round on a two-core machine
            seen = now
            _start_builds([f for f in files if now.get(f) != stamps.get(f) and f in built
                           and now.get(f) is not None and now[f][1] > 0], root)
            _pause(SETTLE_S)                     # let an editor finish writing
            now = _stamps(files)
            changed = [f for f in files if now.get(f) != stamps.get(f)]
            stamps = now
            names = ", ".join(str(f.relative_to(root)) if f.is_relative_to(root) else str(f)
                              for f in changed)
            out.write(f"\nporter: changed: {names}\n")
            _start_builds([f for f in changed if f in built and now.get(f) != seen.get(f)], root)
            _round(opts, root, out, reference_gaps, built)
            # a save may add an #include: the files watched are read again after the verdict,
            # not before it (~0.2 s of the round's start on a real-size tree). A file new to
            # the watch has no stamp from before the round, so the next poll runs a round for
            # it: a save of it while this round ran is never missed
            before, files = stamps, watched_files(root)
            # a file the list no longer holds that changed while the round ran (deleted: review
            # 48's F1) stays one poll more, with its stamp from before, so that a round sees it
            listed = set(files)
            gone = [f for f in before if f not in listed]
            files = sorted(listed | {f for f, st in _stamps(gone).items() if st != before[f]})
            stamps = {f: before.get(f) for f in files}
            wake.watch(files)
    except KeyboardInterrupt:
        out.write("\nporter: watch stopped\n")
        out.flush()
        return exit_codes.OK
    finally:
        wake.close()


def _pause(seconds: float, wake=None) -> None:
    """The loop's waits, its own: a test replaces this one, never time.sleep, which the
    round's subprocess waits (a kernel worker's exit) also call. `wake` (a poll's wait):
    porter.harness.file_wake's, which a change in a watched folder ends early."""
    if wake is not None:
        wake.wait(seconds)
    else:
        time.sleep(seconds)


EARLY_BUILD = "porter-watch-build"     # its threads' names


def _start_builds(metals: list[Path], root: Path) -> None:
    """Start building the saved kernel files the last round built, each in a thread of its own,
    before this round reads the checkout: g++ and the front end work on the other core while
    it does, and the round's build of the same text joins this one (porter.emulate.build.
    build_source) instead of compiling it again, and takes its library or its error."""
    import threading

    from porter.emulate.build import build_file

    def build(metal: Path) -> None:
        try:
            build_file(metal, root, strict=False)
        except Exception:       # noqa: BLE001 (the round's own ask raises it and says why)
            pass

    for metal in metals:
        threading.Thread(target=build, args=(metal,), daemon=True,
                         name=f"{EARLY_BUILD} {metal.name}").start()


def _round(opts, root, out, reference_gaps=None, built: set | None = None) -> int:
    """One `porter test` with a fresh backend (its libraries are re-read); errors are printed.
    `built`: filled with the kernel files the round built."""
    from porter.harness import refcache, session
    from porter.harness.devices import get_backend

    start = time.perf_counter()
    backend = None
    run_memo.forget()           # what the last round read may have changed since
    refcache.next_round()       # the rows held (held_rows) that the last round left unread go
    try:
        if reference_gaps is not None:
            opts = replace(opts, reference_gaps=session.in_background(reference_gaps))
        backend = get_backend(opts.device, root)
        code = session.run(replace(opts, backend=backend, out=out))
    except PorterError as err:
        out.write(f"porter: error: {err}\n")
        code = err.exit_code
    finally:
        if built is not None and hasattr(backend, "kernel_files"):
            built.clear()
            built.update(backend.kernel_files())
        close = getattr(backend, "close", None)
        if close:
            close()
        # the round's pins go with it: an hour of edits held every library built (the next
        # round pins what it uses again)
        kernel_cache = sys.modules.get("porter.emulate.kernel_cache")
        if kernel_cache is not None:
            kernel_cache.release_run()
        run_memo.forget()
    out.write(f"porter: exit {code} ({time.perf_counter() - start:.2f} s)\n")
    out.flush()
    return code
