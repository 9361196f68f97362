"""Fixtures of the reliability suite: editing scenarios on the fixture (under git) and real trees."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from porter.testing.trees import fixture_root
from tests.reliability import harness


@pytest.fixture(scope="package", autouse=True)
def _no_validator_fork():
    # porter.runtime.warm forks a child to import torchgen and Jinja2 while porter plans; in one
    # long test process working in-process is faster (both stay imported), and the faults
    # under test all lie in ChangeSet.apply, after that child is gone. Package scope: the
    # other suites run porter as users do, with the child.
    old = os.environ.get("PORTER_NO_FORK")
    os.environ["PORTER_NO_FORK"] = "1"
    yield
    if old is None:
        del os.environ["PORTER_NO_FORK"]
    else:
        os.environ["PORTER_NO_FORK"] = old


@pytest.fixture(scope="package")
def work_dir(tmp_path_factory):
    """Where the scenario trees live: tmpfs when there is one, because every apply fsyncs
    each file it writes (7 ms a file on the CI disk) and the suite applies thousands."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="porter-reliability-", dir=shm))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("reliability")


@pytest.fixture(scope="package")
def mini_scenarios(work_dir, _no_validator_fork) -> list[harness.Scenario]:
    """Every editing command on every op it edits, in a git copy of the fixture checkout."""
    found = harness.discover(fixture_root(), work_dir / "mini", "mini", git=True)
    assert found, "no editing scenario on the fixture checkout"
    return found


@pytest.fixture(scope="package")
def mini_scenario(work_dir, _no_validator_fork) -> harness.Scenario:
    """mini_scenarios' first alone, learnt by one dry run rather than every command's (~15 s):
    what a test of one edit's faults needs."""
    found = harness.discover(fixture_root(), work_dir / "mini-first", "mini", git=True, first_only=True)
    assert found, "no editing scenario on the fixture checkout"
    return found[0]


@pytest.fixture(scope="package")
def real_scenarios(request, work_dir, _no_validator_fork) -> list[harness.Scenario]:
    """The same on the real-size tree (skipped without the torch wheel)."""
    template = request.getfixturevalue("real_tree_template")
    return harness.discover(template, work_dir / "real", "real")


@pytest.fixture(scope="package")
def scenarios(mini_scenarios, real_scenarios) -> list[harness.Scenario]:
    """Both trees. Without the torch wheel the tests on them are skipped, saying why, rather
    than run on the fixture alone."""
    return mini_scenarios + real_scenarios


@pytest.fixture
def scenario_reset(scenarios):
    """Scenarios put back to their old tree after the test, whatever it did."""
    yield scenarios
    for sc in scenarios:
        _writable(sc.tree)
        sc.reset()


def _writable(root) -> None:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o200)
