"""SIGKILL porter inside `ChangeSet.apply`, at every kind of step, across the editing commands.

After each kill every file of the tree must be byte-identical to its old or its new version
(never a mix or a truncation); a re-run must complete the job and leave no temporary file;
one more run must say "nothing to do". CI runs KILL_RUNS=100; PORTER_SOAK=1 runs 1,200.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability import harness
from tests.reliability.harness import Stats, check_whole, forked_porter, rerun_completes

ERRNO_KINDS = ["enospc", "eio", "eacces", "eperm", "erofs"]


def _clean_seconds(sc: harness.Scenario, cache: dict) -> float:
    """How long a whole forked run takes, for kills timed by the clock."""
    if sc.name not in cache:
        start = time.perf_counter()
        forked_porter(sc.argv, {})
        cache[sc.name] = time.perf_counter() - start
        sc.reset()
    return cache[sc.name]


@pytest.mark.slow
def test_sigkill_during_apply(scenarios):
    r = harness.rng("kill")
    stats, failures, durations = Stats(), [], {}
    start = time.perf_counter()
    mini = [sc for sc in scenarios if sc.label == "mini"]
    real = [sc for sc in scenarios if sc.label == "real"]
    assert (len(mini), len(real)) == (harness.expected_scenarios(),) * 2
    ran = {"mini": 0, "real": 0}
    for i in range(harness.KILL_RUNS):
        # the real-size tree costs 3x the fixture per run: a quarter of the runs
        sc = r.choice(real if r.random() < 0.25 else mini)
        ran[sc.label] += 1
        sc.reset()
        mode = r.random()
        if mode < 0.8:
            # stop at a chosen step; the parent sends SIGKILL
            n, step, _ = r.choice(sc.steps)
            fault, point = f"stop@{n}", step
        elif mode < 0.9:
            # a replace fails, porter restores the files already replaced, and is killed
            # while restoring: the hardest place to die
            replaces = sc.numbered("replace")
            k = r.randrange(1, len(replaces)) if len(replaces) > 1 else 0
            if k == 0:
                fault, point = f"stop@{replaces[0]}", "replace"
            else:
                m = r.randrange(1, k + 1)
                fault = f"{r.choice(ERRNO_KINDS)}@{replaces[k]},stop@{replaces[k] + m}"
                point = "restore"
        else:
            fault, point = None, "clock"
        if fault:
            run = forked_porter(sc.argv, {"PORTER_FAULT": fault})
        else:
            delay = r.uniform(0, _clean_seconds(sc, durations))
            run = forked_porter(sc.argv, {}, kill_after=delay)
            fault = f"SIGKILL after {delay * 1000:.0f} ms"
        stats.runs += 1
        if run.status == "killed":
            stats.faults_injected += 1
            stats.points[point] += 1
        elif fault.startswith("stop") or ",stop" in fault:
            failures.append(f"{sc.name} {fault}: not stopped ({run.status} {run.code}): {run.err}")
        else:
            stats.points["clock (finished first)"] += 1
        problems = check_whole(sc, stats)
        rerun = rerun_completes(sc)
        if not rerun:
            stats.reruns_completed += 1
        problems += rerun
        if problems:
            failures.append(f"{sc.name} {fault}: " + "; ".join(problems))
    stats.seconds = time.perf_counter() - start
    harness.report("kill", stats.to_json())
    print(f"\nkill runs: {stats.to_json()}")
    assert not failures, "\n".join(failures[:20])
    assert stats.corrupted == 0
    assert stats.faults_injected >= 0.8 * stats.runs
    assert ran["mini"] > 0 and ran["real"] > 0, ran


def test_sigkill_of_a_real_porter_process(mini_scenario):
    """The same through `python -m porter` (the real entry point), a few times."""
    sc = mini_scenario
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    for n in (sc.numbered("write")[1], sc.numbered("check")[-1], sc.numbered("replace")[2]):
        sc.reset()
        proc = subprocess.Popen([sys.executable, "-m", "porter", *sc.argv],
                                env={**env, "PORTER_FAULT": f"stop@{n}"}, cwd=repo,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status), proc.stderr.read()
        os.kill(proc.pid, signal.SIGKILL)
        os.waitpid(proc.pid, 0)
        proc.returncode = -signal.SIGKILL
        proc.stderr.close()
        assert check_whole(sc) == []
        assert rerun_completes(sc) == []
