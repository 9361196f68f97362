"""Emulator tests share one temporary build cache per session (compiled libraries are reused)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session", autouse=True)
def emulate_cache(porter_cache: Path) -> Path:
    """The session's porter cache (tests/conftest.py): compiled libraries are reused."""
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("no C++ compiler for the Metal emulator")
    return porter_cache


@pytest.fixture(scope="session")
def fixture_root() -> Path:
    from porter.testing.trees import fixture_root as root
    return root()


@pytest.fixture(scope="session")
def client():
    from porter.emulate.client import WorkerClient
    c = WorkerClient()
    yield c
    c.close()
