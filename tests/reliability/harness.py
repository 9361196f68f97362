"""Shared machinery of the reliability suite: scenarios, trees, killed runs and the invariants.

A scenario is one editing command on one op in one tree (the fixture checkout, optionally
under git, or the real-size tree), with the tree's bytes before and after a clean run and the
numbered steps of that run's `ChangeSet.apply` (learnt through PORTER_FAULT_LOG).

Killed runs fork the test process: the child runs `porter.cli.main` with PORTER_FAULT=stop@N,
stops itself at step N of `apply`, and the parent sends it SIGKILL. Forking skips the ~0.4 s
interpreter start of `python -m porter`, which would make hundreds of runs too slow for CI;
test_kill.py also kills a few real `python -m porter` processes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from porter import cli

SOAK = bool(os.environ.get("PORTER_SOAK"))
KILL_RUNS = int(os.environ.get("PORTER_KILL_RUNS") or (1200 if SOAK else 100))
REPORT = os.environ.get("PORTER_RELIABILITY_REPORT")     # JSON counts are appended here

TMP_SUFFIX = ".porter-tmp"
# Ops of the fixture checkout in each state (fixtures/mini-pytorch/README.md). A scenario is
# each editing command on each op of its state, on every tree: all must edit (discover fails
# otherwise). The fixture's other MPSGraph ops (logit, pow) are refusals, tested elsewhere.
UNPORTED = ["heaviside", "special_log_ndtr", "special_ndtri"]
# sgn waits for sign (sgn_out runs sign_stub for real inputs): not a one-command scenario
MPSGRAPH = ["sign", "signbit", "frac", "asinh", "atanh", "acosh"]
OPS_FOR = {"new-op": UNPORTED, "migrate-from-mpsgraph": MPSGRAPH}
# What makes each port complete, so that its clean run writes (an incomplete port writes
# nothing): a body porter cannot translate, and a complex overload for the ops torch 2.13
# lists in SUPPORTED_COMPLEX_OPS (what they compute does not matter to writing them whole).
OPTIONS = {"special_ndtri": ("--body", "x"),
           **{op: ("--complex-body", "x") for op in ("asinh", "atanh", "acosh")}}
# Editing commands without scenarios: their only edit is --prune, after a test run.
NOT_SCENARIOS = {"test", "audit-xfails"}


@dataclass
class Result:
    code: int
    out: str
    err: str


def porter(*argv: str) -> Result:
    """porter.cli.main in this process, output captured; argparse exits become codes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 2
    return Result(code, out.getvalue(), err.getvalue())


def editing_commands() -> list[str]:
    """Commands that take --allow-dirty (porter.commands.common.add_edit_options)."""
    names = []
    for name in cli.COMMANDS:
        try:
            module = cli._load(name)
        except ModuleNotFoundError:
            continue
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        if any("--allow-dirty" in a.option_strings for a in parser._actions):
            names.append(name)
    return names


# --- trees ---------------------------------------------------------------------------------

def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under root except .git, relative path -> bytes. Read whole every time (a few
    milliseconds): a cache keyed on stat() could miss a same-size rewrite within one tick."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return files


def write_tree(root: Path, want: dict[str, bytes]) -> None:
    """Make root hold exactly `want` (outside .git), rewriting only what differs."""
    have = read_tree(root)
    for rel in have.keys() - want.keys():
        os.unlink(root / rel)
    for rel, data in want.items():
        if have.get(rel) != data:
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def git_init(root: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(cmd, cwd=root, check=True, env=env, stdout=subprocess.DEVNULL)


# --- scenarios -----------------------------------------------------------------------------

@dataclass
class Scenario:
    command: str
    op: str
    tree: Path                        # a working copy the scenario's runs reuse
    old: dict[str, bytes]
    new: dict[str, bytes]
    steps: list[tuple[int, str, str]]  # (number, step name, path) of a clean apply
    git: bool = False
    label: str = ""                   # which tree: "mini" or "real"

    @property
    def argv(self) -> list[str]:
        # the port's own test is not what these scenarios are about (tests/porter_run.py)
        quick = ["--no-test"] if self.command in OPS_FOR else []
        return [self.command, "--root", str(self.tree), *quick, *OPTIONS.get(self.op, ()), "--", self.op]

    @property
    def targets(self) -> list[str]:
        return sorted(k for k in self.old.keys() | self.new.keys()
                      if self.old.get(k) != self.new.get(k))

    @property
    def name(self) -> str:
        return f"{self.command} {self.op} ({self.label}{', git' if self.git else ''})"

    def reset(self) -> None:
        """Back to the old tree (under git: the committed one, so clean again)."""
        write_tree(self.tree, self.old)

    def read(self) -> dict[str, bytes]:
        return read_tree(self.tree)

    def numbered(self, name: str) -> list[int]:
        return [n for n, step, _ in self.steps if step == name]


def learn_steps(argv: list[str]) -> tuple[Result, list[tuple[int, str, str]]]:
    with tempfile.NamedTemporaryFile("r", suffix=".steps") as log:
        os.environ["PORTER_FAULT_LOG"] = log.name
        try:
            result = porter(*argv)
        finally:
            del os.environ["PORTER_FAULT_LOG"]
        steps = []
        for line in log.read().splitlines():
            n, name, path = line.split(" ", 2)
            steps.append((int(n), name, path))
    return result, steps


def discover(template: Path, work: Path, label: str, git: bool = False,
             commands: list[str] | None = None, first_only: bool = False) -> list[Scenario]:
    """Every (editing command, op) of OPS_FOR, in a clean copy of `template` each; a clean run
    that fails or edits nothing is an error, not a scenario fewer. `first_only`: the first of
    them alone (one dry run, for a test about one edit)."""
    scenarios = []
    for command in commands or editing_commands():
        if command in NOT_SCENARIOS:
            continue
        assert command in OPS_FOR, f"editing command {command!r}: add its ops to OPS_FOR (or NOT_SCENARIOS)"
        for op in OPS_FOR[command]:
            tree = work / f"{command}-{op}" / template.name
            shutil.copytree(template, tree, symlinks=True)
            if git:
                git_init(tree)
            old = read_tree(tree)
            sc = Scenario(command, op, tree, old, {}, [], git, label)
            result, sc.steps = learn_steps(sc.argv)
            sc.new = read_tree(tree)
            assert result.code == 0 and sc.targets, (
                f"{sc.name}: the clean run exited {result.code}, editing {len(sc.targets)} files: "
                f"{result.err.strip()}")
            sc.reset()
            scenarios.append(sc)
            if first_only:
                return scenarios
    return scenarios


def expected_scenarios() -> int:
    return sum(len(ops) for ops in OPS_FOR.values())


# --- killed runs ---------------------------------------------------------------------------

@dataclass
class Run:
    status: str           # "killed", "exited", "signalled"
    code: int | None      # exit code, or signal number
    err: str
    stopped: bool = False  # the child reached its PORTER_FAULT=stop@N step


def forked_porter(argv: list[str], env: dict[str, str], kill_after: float | None = None,
                  on_stop=None) -> Run:
    """porter.cli.main(argv) in a forked child. If the child stops itself (PORTER_FAULT=stop@N)
    `on_stop(pid)` runs (default: SIGKILL); with `kill_after` the parent sends SIGKILL after
    that many seconds, wherever the child is."""
    with tempfile.TemporaryFile() as errfile:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 99
            try:
                os.environ.update(env)
                # as in a porter started from a terminal; a background job of a
                # non-interactive shell inherits SIGINT ignored
                signal.signal(signal.SIGINT, signal.default_int_handler)
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 1)
                os.dup2(errfile.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                try:
                    code = cli.main(argv)
                except SystemExit as exit_:
                    code = exit_.code if isinstance(exit_.code, int) else 2
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(code)
        if kill_after is not None:
            time.sleep(kill_after)
            os.kill(pid, signal.SIGKILL)       # a zombie ignores it; waitpid tells
        _, status = os.waitpid(pid, os.WUNTRACED)
        stopped = os.WIFSTOPPED(status)
        if stopped:
            (on_stop or (lambda p: os.kill(p, signal.SIGKILL)))(pid)
            os.kill(pid, signal.SIGCONT)
            _, status = os.waitpid(pid, 0)
        errfile.seek(0)
        err = errfile.read().decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return Run("killed" if sig == signal.SIGKILL else "signalled", sig, err, stopped)
    return Run("exited", os.WEXITSTATUS(status), err, stopped)


# --- invariants ----------------------------------------------------------------------------

@dataclass
class Stats:
    runs: int = 0
    faults_injected: int = 0
    files_checked: int = 0
    corrupted: int = 0
    mixed_trees: int = 0          # some targets new, some old (each whole): re-run completes
    temps_left_by_kill: int = 0
    reruns_completed: int = 0
    points: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"runs": self.runs, "faults_injected": self.faults_injected,
                "files_checked": self.files_checked, "corrupted": self.corrupted,
                "mixed_trees": self.mixed_trees, "temps_left_by_kill": self.temps_left_by_kill,
                "reruns_completed": self.reruns_completed, "points": dict(self.points),
                "seconds": round(self.seconds, 1)}


def check_whole(sc: Scenario, stats: Stats | None = None,
                allow_temps: bool = True, moved_away: bool = False) -> list[str]:
    """Problems with the tree after a fault: each file must be byte-identical to its old or
    its new version; temporary files may be left (the next run removes them)."""
    now = sc.read()
    problems = []
    states = set()
    for rel in sorted(sc.old.keys() | sc.new.keys() | now.keys()):
        if rel.endswith(TMP_SUFFIX) and os.path.basename(rel).startswith("."):
            if not allow_temps:
                problems.append(f"temporary file left: {rel}")
            elif stats:
                stats.temps_left_by_kill += 1
            continue
        if moved_away and rel.endswith(".moved-away"):
            if now[rel] != sc.old.get(rel[: -len(".moved-away")]):
                problems.append(f"{rel}: moved-away file is not the old text")
            continue
        got, old, new = now.get(rel), sc.old.get(rel), sc.new.get(rel)
        if rel in sc.targets and stats:
            stats.files_checked += 1
        if got == old and got == new:
            continue
        if got == old:
            states.add("old")
        elif got == new:
            states.add("new")
        else:
            problems.append(f"{rel}: neither the old nor the new text ("
                            f"{'missing' if got is None else f'{len(got)} bytes'}; old "
                            f"{None if old is None else len(old)}, new {None if new is None else len(new)})")
            if stats:
                stats.corrupted += 1
    if stats and states == {"old", "new"}:
        stats.mixed_trees += 1
    return problems


def rerun_completes(sc: Scenario) -> list[str]:
    """A re-run finishes the job; one more says nothing to do; no temporary file is left."""
    problems = []
    first = porter(*sc.argv)
    if first.code != 0:
        problems.append(f"re-run failed ({first.code}): {first.err.strip()}")
    now = sc.read()
    if now != sc.new:
        wrong = sorted(k for k in now.keys() | sc.new.keys() if now.get(k) != sc.new.get(k))
        problems.append(f"after the re-run these differ from a clean run's: {', '.join(wrong)}")
    second = porter(*sc.argv)
    if second.code != 0 or "nothing to do" not in second.out:
        problems.append(f"second re-run: not 'nothing to do' ({second.code}): "
                        f"{(second.err or second.out).strip()[:200]}")
    return problems


def one_line_error(result: Result, codes: tuple[int, ...] = (2,)) -> bool:
    """One `porter: error:` line with an exit status of `codes`: 2 for bad input; a failed
    check, such as an incomplete port, is 1."""
    lines = result.err.strip().splitlines()
    return (result.code in codes and len(lines) == 1 and lines[0].startswith("porter: error: ")
            and "Traceback" not in result.err)


def report(section: str, data: dict) -> None:
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as f:
            f.write(json.dumps({"section": section, "soak": SOAK, **data}) + "\n")


def rng(name: str) -> random.Random:
    """Seeded per test in CI (reproducible); fresh each time in soak mode."""
    seed = os.environ.get("PORTER_SEED") or (str(time.time_ns()) if SOAK else name)
    return random.Random(f"{seed}:{name}")
