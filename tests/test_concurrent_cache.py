"""Runs that share one cache (two terminals, CI jobs on one runner) give the verdicts of a run
alone, even while each evicts what the others built (issue 36, item 8): a library evicted
between its lookup and its load once gave "cannot open shared object file" to every dtype."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.porter_run import git_init, porter

REPO = Path(__file__).resolve().parents[1]
DTYPES = ("int32", "float32")

# five porter runs, each building every kernel under eviction: slow (--full runs it)
pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++"),
              pytest.mark.slow]


def _start(root: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PORTER_CACHE_DIR": str(cache),
           # no room at all, and a scan after every build with no grace for fresh entries:
           # each run evicts everything the others are not holding
           "PORTER_KERNEL_CACHE_MB": "0", "PORTER_KERNEL_CACHE_GRACE_S": "0",
           "PORTER_KERNEL_CACHE_EVERY_S": "0"}
    args = [a for d in DTYPES for a in ("--dtype", d)]
    return subprocess.Popen([sys.executable, "-m", "porter", "test", "heaviside", "--device",
                             "emulate", "--json", *args, "--root", str(root)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _verdicts(proc: subprocess.Popen) -> tuple[int, dict[str, str]]:
    out, err = proc.communicate(timeout=600)
    assert out.startswith("{"), err
    rows = {c["dtype"]: (c["outcome"], c.get("reason") or "")
            for op in json.loads(out)["ops"] for c in op["dtypes"]}
    return proc.returncode, rows


@pytest.mark.slow(seconds=200)
def test_four_runs_on_one_evicting_cache_give_the_verdicts_of_a_lone_run(mini_root, tmp_path):
    git_init(mini_root)
    assert porter("new-op", "heaviside", root=mini_root).code == 0
    alone = _verdicts(_start(mini_root, tmp_path / "alone"))
    assert alone[0] == 0 and set(alone[1]) == set(DTYPES), alone
    shared = tmp_path / "shared"
    runs = [_start(mini_root, shared) for _ in range(4)]
    together = [_verdicts(p) for p in runs]
    assert together == [alone] * 4
    # eviction did run: what was built is not all still there, and no run left a pin behind
    emulate = shared / "emulate"
    assert (emulate / ".last-eviction").exists()
    assert not any((emulate / ".runs").iterdir())
