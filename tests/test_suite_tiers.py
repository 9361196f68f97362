"""The suite's two tiers: a plain `python -m pytest tests` leaves the tests marked `slow` out
(a contributor's few minutes), `--full` runs every one, and CI's entry point passes it, so
nothing the suite checks is dropped from CI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _collected(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args, "tests/test_concurrent_cache.py",
                           "tests/test_suite_tiers.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def test_a_plain_run_deselects_the_slow_tests_and_full_runs_them():
    # the four-run cache test is marked slow; this file's tests are not
    plain, full = _collected(), _collected("--full")
    assert re.match(r"\d+/\d+ tests collected \(1 deselected\)", plain), plain
    assert "deselected" not in full and "collected" in full, full


def test_ci_runs_the_full_suite():
    run = (REPO / ".ci" / "run").read_text()
    pytest_lines = [line for line in run.splitlines()
                    if "-m pytest" in line and not line.lstrip().startswith("#")]
    assert pytest_lines and all("--full" in line.split() for line in pytest_lines), pytest_lines
