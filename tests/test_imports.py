"""What an editing command's own process imports: never torch, and nothing slow it can avoid."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import sys
from porter.cli import main
rc = main(sys.argv[1:])
assert 'torch' not in sys.modules, 'torch was imported'
# dataclasses (with inspect) cost ~10 ms and ~1 ms a class on Python 3.11: a sixth of an
# editing command (bench/bench_migrate.py); porter's records are NamedTuples
assert 'dataclasses' not in sys.modules, 'dataclasses was imported'
sys.exit(rc)
"""


@pytest.mark.parametrize("argv", [["new-op", "heaviside"], ["migrate-from-mpsgraph", "sign"]])
def test_an_editing_command_imports_neither_torch_nor_dataclasses(mini_root, argv):
    forking = {k: v for k, v in os.environ.items() if k != "PORTER_NO_FORK"}   # as users run it
    done = subprocess.run([sys.executable, "-c", PROBE, *argv, "--dry-run", "--root", str(mini_root)],
                          capture_output=True, text=True, env=forking)
    assert done.returncode == 0, done.stderr
