"""Shared pytest fixtures: the miniature checkout and the real-size tree, each as a fresh copy."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from porter.testing.trees import build_real_tree, fixture_root


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
