"""Shared pytest fixtures: porter's cache for the session, the miniature checkout and the
real-size tree, each as a fresh copy.

Under pytest-xdist (`-n auto`, as .ci/run runs the suite) each worker is a session of its own:
the cache and the real-size tree's template live in the directory all workers share
(`getbasetemp().parent`), built by the first worker that needs them under a file lock, so
kernels compiled by one worker are reused by the others (the cache is safe for concurrent
runs: porter.emulate.kernel_cache)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from porter.testing.trees import build_real_tree, fixture_root


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="also run the tests marked `slow` (end-to-end ports and sweeps with "
                          "the emulator's full verdict, seconds to minutes each); CI runs them")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow(seconds=N): an end-to-end run of seconds to minutes "
                                       "(a port and its full verdict, a sweep over many ops): "
                                       "left out unless --full; CI runs every one, those that "
                                       "say they take longest first")


def _seconds(item) -> float:
    """What `@pytest.mark.slow(seconds=N)` says the test takes (a `--full` run's --durations,
    on two busy cores); 0 for the rest."""
    marker = item.get_closest_marker("slow")
    return float(marker.kwargs.get("seconds", 0)) if marker is not None else 0.0


def pytest_collection_modifyitems(config, items):
    """Without --full, the slow tests are deselected (pytest's summary counts them), so a
    plain `python -m pytest tests` is the few-minute suite a contributor runs before a push.
    With it, the longest tests go first: xdist hands out tests in collection order, and the
    candidates sweep (18 minutes) collected near the end ran alone on one worker for the last
    quarter of an hour of CI's run while the other sat idle. The rest keep their order."""
    if config.getoption("--full"):
        items.sort(key=lambda item: -_seconds(item))          # stable: ties keep their order
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


def pytest_report_header(config):
    if not config.getoption("--full"):
        return "slow tests deselected: --full runs them (CI does)"


def _shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every xdist worker of this run shares (the session's own without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _children() -> list[int]:
    """This process's child processes (Linux /proc; none elsewhere)."""
    found = []
    for task in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(pid) for pid in task.read_text().split()]
    return found


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _reap(kill: bool) -> None:
    """Reap the children that have exited (zombies); with `kill`, stop the rest first."""
    for pid in _children():
        if kill and _state(pid) != "Z":
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if kill or _state(pid) == "Z":
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)


@pytest.fixture(scope="module", autouse=True)
def _no_zombies():
    """Each test file's exited children reaped when it ends (a forked helper or a worker whose
    owner never waited), and every child left at the end of the run stopped: the suite
    leaves no process behind. The file's pins in the kernel cache go too (a command run
    in-process drops its own; a backend a test builds directly holds its libraries until
    then): an xdist worker that kept every pin of the run filled a CI runner's disk."""
    yield
    _reap(kill=False)
    kernel_cache = sys.modules.get("porter.emulate.kernel_cache")
    if kernel_cache is not None:
        kernel_cache.release_run()


@pytest.fixture(scope="session", autouse=True)
def _no_children_left():
    yield
    _reap(kill=True)


@pytest.fixture(scope="session", autouse=True)
def porter_cache(tmp_path_factory: pytest.TempPathFactory):
    """porter's cache (compiled kernels, references, formatter) in one directory for the whole
    run, whichever test files run, shared by xdist's workers: the user's ~/.cache/porter (or
    $PORTER_CACHE_DIR, $PORTER_REFCACHE_DIR) is never read or written, and no test depends on
    what it holds. Subprocesses inherit it through the environment. A test of the cache
    itself sets a cache of its own."""
    cache = _shared_root(tmp_path_factory) / "porter-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PORTER_CACHE_DIR", str(cache))
        mp.delenv("PORTER_REFCACHE_DIR", raising=False)
        # room for every op the suite records: under a user's limit (then 512 MB, a few binary
        # ops' full verdicts) later tests evicted and recorded again what earlier ones had
        # (3 port test files: 251 s at 512 MB, 215 s with room, 2.5 GB recorded). A test of the
        # limit sets its own.
        mp.setenv("PORTER_REFCACHE_MB", os.environ.get("PORTER_REFCACHE_MB", "6144"))
        # the kernel cache's eviction runs at most once an hour, so never within a run: the
        # suite's grew to 8.9 GB (22 GB in all with the references and host prefixes), a risk
        # to a CI runner's disk. Every 10 minutes, entries unused for 10 minutes, to 3 GB
        mp.setenv("PORTER_KERNEL_CACHE_EVERY_S", os.environ.get("PORTER_KERNEL_CACHE_EVERY_S", "600"))
        mp.setenv("PORTER_KERNEL_CACHE_MB", os.environ.get("PORTER_KERNEL_CACHE_MB", "3072"))
        # a test's output is a pipe: no terminal width, whatever the shell (or an xdist worker)
        # carries; a test of the width sets COLUMNS itself
        mp.delenv("COLUMNS", raising=False)
        yield cache


@pytest.fixture(autouse=True)
def _own_candidates_record(request, tmp_path_factory: pytest.TempPathFactory, monkeypatch):
    """What `candidates --verify` records (porter.harness.auto_record) is each test's own: a
    record is keyed by the tree's bytes, so one test's measurement (or a stand-in verdict) of a
    fresh fixture copy would otherwise change what plain `candidates` says in every later test
    of the session. The directory is made only when a test records (in-process runs)."""
    from porter.harness import auto_record
    own = tmp_path_factory.getbasetemp() / "candidates-records" / hashlib.sha256(
        request.node.nodeid.encode()).hexdigest()[:16]
    monkeypatch.setattr(auto_record, "directory", lambda: own)


def _fresh_copy(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh copy of `template` at the same path in every test of this process: the caches
    that a checkout's path is part of (the Metal front end's: its preprocessed text names the
    checkout's headers by absolute path) then serve every test of the worker, as they serve a
    user's every run in one checkout, where a copy under each test's own tmp_path missed them
    all (about 1.5 s a port command). Content-keyed as they are, an edit is never stale."""
    dest = tmp_path_factory.getbasetemp() / "trees" / template.name
    shutil.rmtree(dest, ignore_errors=True)
    return Path(shutil.copytree(template, dest))


@pytest.fixture
def mini_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh, writable copy of fixtures/mini-pytorch."""
    return _fresh_copy(fixture_root(), tmp_path_factory)


@pytest.fixture(scope="session")
def real_tree_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real-size tree, built once per run (the first xdist worker that needs it builds it,
    the others wait on the lock). Tests must not modify it; use real_root."""
    for package in ("torch", "torchgen"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"real-size tree needs the {package} wheel installed (pip install torch)")
    shared = _shared_root(tmp_path_factory)
    tree, done = shared / "real-template" / "pytorch", shared / "real-template.done"
    with _locked(shared / "real-template.lock"):
        if not done.exists():
            shutil.rmtree(tree.parent, ignore_errors=True)
            tree.parent.mkdir()
            build_real_tree(tree)
            done.touch()
    return tree


@pytest.fixture
def real_root(real_tree_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh, writable copy of the real-size tree."""
    return _fresh_copy(real_tree_template, tmp_path_factory)
