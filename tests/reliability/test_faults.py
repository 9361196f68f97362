"""Errors inside `ChangeSet.apply`: a full disk, I/O and permission errors at every step, read-only
files and directories, targets changed/renamed/deleted between planning and applying, a
second porter, Ctrl-C and SIGTERM. Each ends in a one-line error (exit 2) with the tree
exactly as it was, or, for signals, with the edit complete; never a temporary file left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from porter.apply import changes as changes_mod
from porter.apply.changes import ChangeSet
from porter.errors import PorterError
from tests.reliability import harness
from tests.reliability.harness import check_whole, forked_porter, one_line_error, porter, rerun_completes

ERRNO_KINDS = ["enospc", "eio", "eacces", "eperm", "erofs"]


def _with_fault(monkeypatch, spec: str, argv: list[str]) -> harness.Result:
    monkeypatch.setenv("PORTER_FAULT", spec)
    try:
        return porter(*argv)
    finally:
        monkeypatch.delenv("PORTER_FAULT")


@pytest.mark.slow
def test_an_error_at_any_step_leaves_the_tree_untouched(scenario_reset, monkeypatch):
    r = harness.rng("errno")
    stats, failures = harness.Stats(), []
    start = time.perf_counter()
    chosen = scenario_reset if harness.SOAK else [
        sc for sc in scenario_reset if sc.label == "mini" or sc in _first_per_command(scenario_reset, "real")]
    # every fixture scenario, and one per command on the real-size tree
    assert len(chosen) == (len(scenario_reset) if harness.SOAK
                           else harness.expected_scenarios() + len(harness.OPS_FOR))
    for sc in chosen:
        steps = sc.steps if harness.SOAK else _one_of_each_kind(sc.steps, r)
        for n, step, path in steps:
            kind = r.choice(ERRNO_KINDS)
            result = _with_fault(monkeypatch, f"{kind}@{n}", sc.argv)
            stats.runs += 1
            stats.faults_injected += 1
            stats.points[step] += 1
            now = sc.read()
            stats.files_checked += len(sc.targets)
            if not one_line_error(result):
                failures.append(f"{sc.name} {kind}@{n} ({step} {path}): exit {result.code}: "
                                f"{result.err.strip()[:300]}")
            elif now != sc.old:
                failures.append(f"{sc.name} {kind}@{n} ({step} {path}): tree changed: "
                                f"{sorted(k for k in now.keys() | sc.old.keys() if now.get(k) != sc.old.get(k))}")
                sc.reset()
    stats.seconds = time.perf_counter() - start
    harness.report("errno", stats.to_json())
    assert not failures, "\n".join(failures[:20])


def _one_of_each_kind(steps, r):
    kinds = {}
    for step in r.sample(steps, len(steps)):
        kinds.setdefault(step[1], step)
    return sorted(kinds.values())


def _first_per_command(scenarios, label: str = "mini"):
    """CI runs the slower checks on one scenario per command, the soak on all."""
    if harness.SOAK:
        return list(scenarios)
    seen = {}
    for sc in scenarios:
        if sc.label == label:
            seen.setdefault(sc.command, sc)
    return list(seen.values())


@pytest.mark.slow
def test_disk_full_message_names_the_file(mini_scenario, monkeypatch):
    sc = mini_scenario
    sc.reset()
    n, _, path = next(s for s in sc.steps if s[1] == "write")
    result = _with_fault(monkeypatch, f"enospc@{n}", sc.argv)
    assert one_line_error(result)
    assert f"{path}: could not stage the edit: No space left on device; nothing was written" in result.err
    assert sc.read() == sc.old


def test_a_failed_restore_keeps_the_old_text_aside(mini_scenario, monkeypatch):
    """A replace fails, then restoring an already replaced file fails too: each file is still
    whole, the old text of the unrestored one is saved beside it, and a re-run completes."""
    sc = mini_scenario
    sc.reset()
    replaces = sc.numbered("replace")
    result = _with_fault(monkeypatch, f"eio@{replaces[2]},eio@{replaces[2] + 1}", sc.argv)
    assert one_line_error(result), result.err
    assert "could not restore" in result.err and ".porter-old" in result.err
    now = sc.read()
    for rel in sc.targets:
        assert now[rel] in (sc.old[rel], sc.new[rel]), rel
    assert not [rel for rel in now if rel.endswith(changes_mod.TMP_SUFFIX)]
    saved = [rel for rel in now if rel.endswith(".porter-old")]
    assert len(saved) == 1
    order = [p for _, step, p in sc.steps if step == "replace"]
    unrestored = order[1]                              # restores run backwards from the failure
    assert saved[0].startswith(unrestored.rsplit("/", 1)[0] + "/")
    assert sc.read()[saved[0]] == sc.old[unrestored]
    assert sc.read()[unrestored] == sc.new[unrestored]
    os.unlink(sc.tree / saved[0])
    assert rerun_completes(sc) == []
    sc.reset()


@pytest.mark.parametrize("kind", ["edit", "rename", "delete"])
@pytest.mark.slow
def test_a_target_changed_between_planning_and_applying(scenario_reset, monkeypatch, kind):
    """The stale-plan guard: someone edits, renames away or deletes a target after porter
    read it; porter writes nothing and says which file."""
    failures, runs = [], 0
    for sc in _first_per_command(scenario_reset):
        for n, step, path in sc.steps:
            if step != "check":
                continue
            sc.reset()
            result = _with_fault(monkeypatch, f"{kind}@{n}", sc.argv)
            expect = "changed on disk" if kind == "edit" else "was deleted or renamed"
            if not (one_line_error(result) and f"{path}: {expect}" in result.err):
                failures.append(f"{sc.name} {kind} {path}: {result.code} {result.err.strip()}")
            now = sc.read()
            for rel in sc.targets:
                if rel == path:
                    moved = now.get(rel + ".moved-away")
                    got = now.get(rel)
                    ok = {"edit": got is not None and got.startswith(sc.old[rel]) and got != sc.old[rel],
                          "rename": got is None and moved == sc.old[rel],
                          "delete": got is None and moved is None}[kind]
                elif now.get(rel) != sc.old[rel]:
                    ok = False
                else:
                    continue
                if not ok:
                    failures.append(f"{sc.name} {kind} {path}: {rel} was written")
            if any(rel.endswith(changes_mod.TMP_SUFFIX) for rel in now):
                failures.append(f"{sc.name} {kind} {path}: temporary file left")
            runs += 1
    harness.report(f"stale-plan {kind}", {"runs": runs, "failures": len(failures)})
    assert not failures, "\n".join(failures)


def test_stale_plan_through_the_api(tmp_path):
    """Plan, then change the file by hand, then apply: refused, nothing written."""
    cases = {"edited": ("old\n", "old, edited\n"), "deleted": ("old\n", None),
             "created": (None, "someone else's\n")}
    for what, (old, meanwhile) in cases.items():
        d = tmp_path / what
        d.mkdir()
        target, other = d / "f.txt", d / "g.txt"
        other.write_text("g\n")
        if old is not None:
            target.write_text(old)
        cs = ChangeSet(d)
        cs.set("g.txt", "g\n", "g, new\n")
        cs.set("f.txt", old, "new\n")
        if meanwhile is None:
            target.unlink()
        else:
            target.write_text(meanwhile)
        with pytest.raises(PorterError, match="while porter was planning; nothing was written"):
            cs.apply()
        assert other.read_text() == "g\n"
        assert (target.read_text() if target.exists() else None) == meanwhile
        assert sorted(p.name for p in d.iterdir()) == sorted({"g.txt"} | ({"f.txt"} if meanwhile else set()))


@contextmanager
def mode_set(path, mode: int):
    """`path` with permission bits `mode` for the duration of the block."""
    old = path.stat().st_mode
    path.chmod(mode)
    try:
        yield
    finally:
        path.chmod(old)


@pytest.mark.slow      # every scenario, the real-size tree's too (~30 s to discover)
def test_read_only_target_file(scenario_reset):
    tried = 0
    for sc in _first_per_command(scenario_reset):
        for rel in sc.targets:
            tried += 1
            sc.reset()
            with mode_set(sc.tree / rel, 0o444):
                result = porter(*sc.argv)
            assert one_line_error(result), result.err
            assert f"{rel}: file is read-only; nothing was written" in result.err
            assert sc.read() == sc.old
    assert tried >= 2                    # every command's first scenario, each target it writes


def test_read_only_directory(mini_scenario):
    sc = mini_scenario
    sc.reset()
    with mode_set(sc.tree / sc.targets[-1].rsplit("/", 1)[0], 0o555):
        result = porter(*sc.argv)
    assert one_line_error(result), result.err
    assert "is read-only; nothing was written" in result.err
    assert sc.read() == sc.old


def test_killed_runs_temporary_files_are_swept(mini_scenario):
    """What a SIGKILL leaves behind goes on the next apply, even one with nothing to do."""
    sc = mini_scenario
    sc.reset()
    assert porter(*sc.argv).code == 0
    stale = [sc.tree / "aten/src/ATen/native/.native_functions.yaml.x1y2.porter-tmp",
             sc.tree / "torch/testing/_internal/.common_mps.py.abcd.porter-tmp"]
    for path in stale:
        path.write_text("half a file")
    keep = sc.tree / "aten/src/ATen/native/notes.porter-tmp"      # not porter's pattern
    keep.write_text("mine")
    result = porter(*sc.argv)
    assert result.code == 0 and "nothing to do" in result.out
    assert not any(p.exists() for p in stale)
    assert keep.exists()
    keep.unlink()
    sc.reset()


def test_a_second_porter_waits_for_the_first(mini_scenario, monkeypatch):
    """One writer per checkout: while a porter is stopped inside apply, another refuses;
    once the first is killed the lock is gone and a re-run completes."""
    sc = mini_scenario
    sc.reset()
    monkeypatch.setattr(changes_mod, "LOCK_WAIT_S", 0.2)
    seen = {}

    def while_stopped(pid):
        seen["result"] = porter(*sc.argv)
        os.kill(pid, signal.SIGKILL)

    replace = sc.numbered("replace")[1]
    run = forked_porter(sc.argv, {"PORTER_FAULT": f"stop@{replace}"}, on_stop=while_stopped)
    assert run.status == "killed"
    assert one_line_error(seen["result"]), seen["result"].err
    assert "another porter is writing to this checkout" in seen["result"].err
    assert check_whole(sc) == []
    assert rerun_completes(sc) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_wait_until_the_edit_is_whole(mini_scenario, sig):
    sc = mini_scenario
    sc.reset()
    assert harness.read_tree(sc.tree) == sc.old
    replace = sc.numbered("replace")[1]

    def interrupt(pid):
        os.kill(pid, sig)          # held (blocked) inside apply; acts once apply returns

    run = forked_porter(sc.argv, {"PORTER_FAULT": f"stop@{replace}"}, on_stop=interrupt)
    assert run.stopped, run
    if sig == signal.SIGINT:
        assert (run.status, run.code) == ("exited", 130), run
        assert "porter: interrupted" in run.err
    else:
        assert (run.status, run.code) == ("signalled", signal.SIGTERM), run
    assert sc.read() == sc.new
    sc.reset()


def test_symlinked_target_stays_a_link(mini_scenario, tmp_path):
    sc = mini_scenario
    sc.reset()
    rel = "aten/src/ATen/native/native_functions.yaml"
    real = tmp_path / "native_functions.yaml"
    real.write_bytes(sc.old[rel])
    link = sc.tree / rel
    link.unlink()
    link.symlink_to(real)
    try:
        assert porter(sc.command, "--allow-dirty", *sc.argv[1:]).code == 0   # git sees a link
        assert link.is_symlink() and real.read_bytes() == sc.new[rel]
    finally:
        link.unlink()
        sc.reset()


def test_fault_hook_is_off_by_default_and_checks_its_spec(monkeypatch, tmp_path):
    monkeypatch.delenv("PORTER_FAULT", raising=False)
    monkeypatch.delenv("PORTER_FAULT_LOG", raising=False)
    assert changes_mod._Faults.from_env() is None
    monkeypatch.setenv("PORTER_FAULT", "explode@3")
    cs = ChangeSet(tmp_path)
    cs.set("a", None, "a")
    with pytest.raises(PorterError, match="PORTER_FAULT: bad item 'explode@3'"):
        cs.apply()
    assert not (tmp_path / "a").exists()


# --- a real full disk ----------------------------------------------------------------------

DISK_FULL = Path(__file__).with_name("disk_full.py")


@pytest.mark.slow
def test_a_really_full_disk(mini_scenarios, tmp_path, request):
    """A small tmpfs filled to leave less room than the edit needs: mounted inside a private
    user and mount namespace (`unshare -rm`), so it needs no root and leaves nothing mounted.
    Skipped where that is not allowed (macOS, locked-down CI)."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1)")
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {tmp_path}"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.decode().strip()}")
    repo = Path(__file__).resolve().parents[2]
    chosen = mini_scenarios[:1]
    if harness.SOAK:
        chosen = [sc for sc in request.getfixturevalue("scenarios") if sc.op == "special_log_ndtr"]
    for i, sc in enumerate(chosen):
        sc.reset()
        proc = subprocess.run(["unshare", "-rm", sys.executable, str(DISK_FULL), str(sc.tree),
                               str(tmp_path / f"mnt{i}"), sc.command, sc.op],
                              capture_output=True, text=True, cwd=repo, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(repo)})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        summary = proc.stdout.splitlines()[-1]
        assert summary.startswith("disk-full runs:"), proc.stdout
        assert "enospc 0" not in summary, summary     # the disk really did fill up
        print(f"\n{sc.name}: {summary}")
        harness.report("disk-full", {"scenario": sc.name, "summary": summary})


def test_mode_and_owner_are_kept(tmp_path):
    keep, new_file = tmp_path / "keep.txt", tmp_path / "sub" / "new.txt"
    keep.write_text("old\n")
    keep.chmod(0o640)
    if os.geteuid() == 0:
        os.chown(keep, 1234, 5678)
    cs = ChangeSet(tmp_path)
    cs.set("keep.txt", "old\n", "new\n")
    cs.set("sub/new.txt", None, "created\n")
    umask = os.umask(0o022)
    try:
        assert cs.apply() == ["keep.txt", "sub/new.txt"]
    finally:
        os.umask(umask)
    st = keep.stat()
    assert keep.read_text() == "new\n" and st.st_mode & 0o777 == 0o640
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 5678)
    assert new_file.read_text() == "created\n" and new_file.stat().st_mode & 0o777 == 0o644


def test_a_failed_create_removes_the_directories_it_made(tmp_path, monkeypatch):
    (tmp_path / "a.txt").write_text("a\n")
    cs = ChangeSet(tmp_path)
    cs.set("new/dir/n.txt", None, "n\n")
    cs.set("a.txt", "a\n", "b\n")
    monkeypatch.setenv("PORTER_FAULT", "eio@12")    # 4 staging steps a file, 2 checks, 2 replaces
    with pytest.raises(PorterError, match="a.txt: could not write: Input/output error; every file was restored"):
        cs.apply()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "a\n"
