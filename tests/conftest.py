"""Shared pytest fixtures: porter's cache for the session, the miniature checkout and the
real-size tree, each as a fresh copy."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from porter.testing.trees import build_real_tree, fixture_root


@pytest.fixture(scope="session", autouse=True)
def porter_cache(tmp_path_factory: pytest.TempPathFactory):
    """porter's cache (compiled kernels, references, formatter) in one directory for the whole
    session, whichever test files run: the user's ~/.cache/porter (or $PORTER_CACHE_DIR,
    $PORTER_REFCACHE_DIR) is never read or written, and no test depends on what it holds.
    Subprocesses inherit it through the environment."""
    cache = tmp_path_factory.mktemp("porter-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PORTER_CACHE_DIR", str(cache))
        mp.delenv("PORTER_REFCACHE_DIR", raising=False)
        yield cache


@pytest.fixture
def mini_root(tmp_path: Path) -> Path:
    """A fresh, writable copy of fixtures/mini-pytorch."""
    return Path(shutil.copytree(fixture_root(), tmp_path / "mini-pytorch"))


@pytest.fixture(scope="session")
def real_tree_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real-size tree, built once per session. Tests must not modify it; use real_root."""
    for package in ("torch", "torchgen"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"real-size tree needs the {package} wheel installed (pip install torch)")
    return build_real_tree(tmp_path_factory.mktemp("real-template") / "pytorch")


@pytest.fixture
def real_root(real_tree_template: Path, tmp_path: Path) -> Path:
    """A fresh, writable copy of the real-size tree."""
    return Path(shutil.copytree(real_tree_template, tmp_path / "pytorch"))
