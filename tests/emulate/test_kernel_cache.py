"""The emulator's build cache stays within its bound: least recently used entries out, an entry
(a library with its metadata, a precompiled prelude directory) removed whole, a cache hit
counting as a use, fresh entries spared."""

from __future__ import annotations

import os
import time

import pytest

from porter import cli
from porter.emulate import kernel_cache
from porter.emulate.build import build_source
from porter.source.checkout import KERNELS

HOUR = 3600


@pytest.fixture()
def own_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(cache))
    return cache / "emulate"


def _age(path, seconds_ago: float) -> None:
    t = time.time() - seconds_ago
    os.utime(path, (t, t))


def _entry(directory, name: str, size: int, seconds_ago: float):
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    _age(path, seconds_ago)
    return path


def test_least_recently_used_entries_go_whole_until_the_cache_fits(tmp_path):
    d = tmp_path / "emulate"
    old_so = _entry(d, "aaaa.so", 4000, 5 * HOUR)
    old_meta = _entry(d, "aaaa.json", 100, 5 * HOUR)
    gch = _entry(d, "pch-bbbb/porter/prelude.h.gch", 5000, 4 * HOUR)
    _age(d / "pch-bbbb", 4 * HOUR)
    piece = _entry(d, "piece-cccc.o", 3000, 3 * HOUR)
    piece_meta = _entry(d, "piece-cccc.json", 100, 1)           # used a second ago: the entry is fresh
    newer = _entry(d, "dddd.so", 3000, 2 * HOUR)
    # 15200 bytes in 4 entries; 8000 allowed: the two oldest go (9100), piece-cccc is in use
    assert kernel_cache.evict(d, limit=8000) == (2, 9100)
    assert not old_so.exists() and not old_meta.exists()          # the library with its metadata
    assert not (d / "pch-bbbb").exists() and not gch.exists()     # the directory whole
    assert piece.exists() and piece_meta.exists() and newer.exists()


def test_fresh_entries_stay_whatever_the_size(tmp_path):
    d = tmp_path / "emulate"
    a = _entry(d, "aaaa.so", 4000, 60)
    b = _entry(d, "bbbb.so", 4000, 30)
    assert kernel_cache.evict(d, limit=0) == (0, 0)
    assert a.exists() and b.exists()
    assert kernel_cache.evict(d, limit=0, now=time.time() + 2 * kernel_cache.RECENT_S) == (2, 8000)


@pytest.mark.slow
def test_a_cache_hit_is_a_use_and_a_new_build_evicts_what_was_not_used(fixture_root, own_cache,
                                                                       monkeypatch):
    binary = (fixture_root / KERNELS / "BinaryKernel.metal").read_text()
    unary = (fixture_root / KERNELS / "UnaryKernel.metal").read_text()
    build_source(binary, "BinaryKernel.metal", fixture_root)
    build_source(unary, "UnaryKernel.metal", fixture_root)
    for path in own_cache.iterdir():                 # both builds' entries, hours old
        _age(path, 3 * HOUR)
    lib = build_source(binary, "BinaryKernel.metal", fixture_root)      # a hit: a use
    assert lib.cached and time.time() - lib.path.stat().st_mtime < 60
    # a new text built with no room: everything not used in the last minutes goes (unary's
    # library, its pieces, and binary's pieces, which the library hit did not need), the
    # library just used and the new build stay, and both still load and run
    monkeypatch.setenv("PORTER_KERNEL_CACHE_MB", "0")
    _age(own_cache / kernel_cache.MARK, 2 * kernel_cache.EVERY_S)     # the last scan long ago
    edited = build_source(binary + "\n// an edit\n", "BinaryKernel.metal", fixture_root)
    assert lib.path.exists() and edited.path.exists()
    remaining = {p.name for p in own_cache.iterdir() if not p.name.startswith(".")}   # entries
    assert f"{lib.path.stem}.json" in remaining
    assert all(time.time() - (own_cache / n).stat().st_mtime < kernel_cache.RECENT_S
               for n in remaining)
    again = build_source(unary, "UnaryKernel.metal", fixture_root)       # evicted: rebuilt
    assert not again.cached and again.build_errors() == []


def test_cache_info_names_the_kernel_cache_bound(own_cache, capsys, monkeypatch):
    monkeypatch.setenv("PORTER_KERNEL_CACHE_MB", "300")
    assert cli.main(["cache", "info"]) == 0
    shown = capsys.readouterr().out
    assert "the kernel cache keeps at most 300 MB (PORTER_KERNEL_CACHE_MB)" in shown
    # `porter cache` alone shows the same (its help says "show or empty"; a new user's L3)
    assert cli.main(["cache"]) == 0
    assert capsys.readouterr().out == shown


def test_cache_clear_empties_the_cache_but_not_a_live_runs_pins(own_cache, capsys):
    """`porter cache clear` beside a running `porter test` (another terminal, or the suite's
    other xdist worker): the run's worker loads the libraries it pinned after the clear. An
    rmtree of the whole directory took its pins too, and every dtype of that run was red with
    "cannot open shared object file"."""
    import subprocess
    import sys
    library = _entry(own_cache, "aaaa.so", 4000, 5 * HOUR)
    _entry(own_cache, "aaaa.json", 100, 5 * HOUR)
    _entry(own_cache, "pch-bbbb/porter/prelude.h.gch", 5000, 4 * HOUR)
    held = kernel_cache.pin(library)                         # this run's
    other = own_cache / kernel_cache.RUNS / f"{os.getppid()}-live"
    other.mkdir()
    os.link(own_cache / "aaaa.json", other / "aaaa.json")    # a live run's
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = own_cache / kernel_cache.RUNS / f"{gone}-killed"
    dead.mkdir()
    (dead / "old.so").write_bytes(b"y")

    assert cli.main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"{own_cache}: removed 3 file(s), 0.0 MB" in out    # the entries, not the pins
    assert sorted(p.name for p in own_cache.iterdir()) == [kernel_cache.RUNS]
    assert held.read_bytes() == b"x" * 4000                  # still loadable
    assert (other / "aaaa.json").read_bytes() == b"x" * 100
    assert not dead.exists()                                 # its run is gone


def test_a_scan_at_most_once_an_hour(tmp_path, monkeypatch):
    d = tmp_path / "emulate"
    old = _entry(d, "aaaa.so", 4000, 5 * HOUR)
    (d / kernel_cache.MARK).touch()                   # scanned a minute ago
    assert kernel_cache.evict_now_and_then(d) == (0, 0) and old.exists()
    _age(d / kernel_cache.MARK, 2 * kernel_cache.EVERY_S)
    monkeypatch.setenv("PORTER_KERNEL_CACHE_MB", "0")
    assert kernel_cache.evict_now_and_then(d) == (1, 4000) and not old.exists()


@pytest.mark.slow
def test_a_porter_that_checks_more_does_not_read_an_older_porters_cached_verdict(
        fixture_root, own_cache, monkeypatch):
    """Wrong on purpose: a functor with a static local, built first by a porter whose Metal rules
    did not know them (its cache entries green), then by one that does. The kernel cache's key
    was the text, headers, flags and compiler: the newer porter read the older one's verdict and
    the file stayed green until the text changed."""
    from porter.emulate import frontend, toolchain
    text = (fixture_root / KERNELS / "BinaryKernel.metal").read_text().replace(
        "struct hypot_functor {", "struct hypot_functor {\n  static inline float planted() {\n"
        "    static float calls = 0;\n    return calls;\n  }", 1)
    assert "static float calls" in text
    with monkeypatch.context() as older:
        older.setattr(toolchain, "_code_digest", "an older porter")
        older.setattr(frontend, "_MODE_DIGEST", ["an older porter"])
        older.setattr(frontend, "_ast_rules", lambda *args, **kwargs: [])
        lib = build_source(text, "BinaryKernel.metal", fixture_root, strict=False)
        assert lib.build_errors() == []
    lib = build_source(text, "BinaryKernel.metal", fixture_root, strict=False)
    assert any("Metal has no static local variable" in e for e in lib.build_errors()), \
        lib.build_errors()


def test_every_module_the_code_digest_names_exists():
    """A module renamed away would leave its successor's code out of the kernel cache's key."""
    from pathlib import Path

    from porter.emulate import toolchain
    here = Path(toolchain.__file__).parent
    assert [m for m in toolchain._BUILD_MODULES if not (here / m).is_file()] == []


def test_the_code_digest_holds_every_module_a_build_runs():
    """A cached build (its registrations, what it quarantined, whether it fused) is as good as
    the code that made it: every module of porter.emulate that build.py imports, directly or
    through another, is in the key (half_literals.py and fused_kernels.py were not: a cached
    contracted build said "nothing fused" after the code that reads the dump had changed).
    kernel_cache keeps files and makes none of what is in them."""
    import ast
    from pathlib import Path

    from porter.emulate import toolchain
    here = Path(toolchain.__file__).parent
    seen, todo = set(), ["build.py"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((here / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "porter.emulate":
                    todo += [f"{a.name}.py" for a in node.names]
                elif node.module.startswith("porter.emulate."):
                    todo.append(node.module.split(".")[2] + ".py")
    assert sorted(seen - {"kernel_cache.py"} - set(toolchain._BUILD_MODULES)) == []


def test_a_file_a_run_is_writing_is_not_evicted_until_it_is_old(tmp_path, monkeypatch):
    """A staged `.tmp` file is another run's write in flight: evicting it failed that run's
    publish ("No such file or directory", four runs on one evicting cache). One a killed run
    left behind goes once it is old."""
    monkeypatch.setenv("PORTER_KERNEL_CACHE_GRACE_S", "0")
    fresh, old, entry = (tmp_path / n for n in ("tmpa1b2.json.tmp", "tmpc3d4.json.tmp", "k1.so"))
    for f in (fresh, old, entry):
        f.write_bytes(b"x" * 100)
    stale = time.time() - kernel_cache.STAGING_S - 10
    os.utime(old, (stale, stale))
    os.utime(entry, (stale, stale))
    kernel_cache.evict(tmp_path, limit=0)
    assert fresh.exists() and not old.exists() and not entry.exists()


def _own_pins(cache):
    runs = cache / kernel_cache.RUNS
    return sorted(p for p in runs.iterdir() if p.name.startswith(f"{os.getpid()}-")) \
        if runs.is_dir() else []


def test_a_run_that_ends_lets_go_of_its_pins(tmp_path):
    """A pin holds its file's bytes whatever eviction does. A process that held every pin of
    all its runs (an xdist worker for an hour) kept every library and prelude it had built:
    80 GB filled a CI runner's disk. After release_run the bytes are the cache's alone, and the
    next run pins again."""
    d = tmp_path / "emulate"
    lib = _entry(d, "aaaa.so", 4000, 3 * HOUR)
    held = kernel_cache.pin(lib)
    assert held != lib and os.stat(lib).st_nlink == 2
    kernel_cache.release_run()
    assert not held.exists() and _own_pins(d) == [] and os.stat(lib).st_nlink == 1
    again = kernel_cache.pin(lib)
    assert again.read_bytes() == b"x" * 4000 and again.parent != held.parent
    kernel_cache.release_run()
    assert kernel_cache.evict(d, limit=0) == (1, 4000)     # nothing holds its bytes now


@pytest.mark.slow
def test_a_watch_round_lets_go_of_its_pins(real_root, own_cache):
    """Each --watch round pins the libraries it builds or finds: an hour of edits held every
    one. After a round none is held, and the next round (a cache hit) pins and runs again."""
    import argparse
    import io

    from porter.commands import test as command
    from porter.harness import watch
    from porter.harness.session import Options
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    opts = Options(**command.options(parser.parse_args(
        ["hypot", "--device", "emulate", "--root", str(real_root), "--dtype", "float32",
         "--samples-only"])))
    first, second = io.StringIO(), io.StringIO()
    assert watch._round(opts, real_root, first) == 0, first.getvalue()
    assert _own_pins(own_cache) == []
    assert watch._round(opts, real_root, second) == 0, second.getvalue()
    assert _own_pins(own_cache) == []
    assert "porter: exit 0" in second.getvalue()
