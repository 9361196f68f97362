"""`porter candidates`' AUTO column, the dry-run exit of the command it prints, and that command's
real verdict agree for every candidate (issue 34, done-when line 1).

AUTO says `yes` only where the port the printed command writes was measured green under the full
verdict (`candidates --verify`, kept for the checkout as it is: porter.harness.auto_record);
`fails DTYPE` where it was measured red there; `unverified` where porter writes the body itself
but nothing measured the port; the flag the command needs (its `command` is then null: run bare,
it exits 1), or `no` (refused: null, and the bare command exits non-zero). Unmeasured, every
candidate's row against its dry run: tests/test_candidates.py (test_automatic_agrees_with_the_commands).
Each test's record is its own (conftest.py)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.porter_run import git_init, porter, snapshot

needs_emulator = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                    reason="the Metal emulator needs a C++ compiler")


def _listed(root) -> dict[str, dict]:
    result = porter("candidates", "--json", root=root)
    assert result.code == 0, result.err
    return {c["op"]: c for c in json.loads(result.out)["candidates"]}


def _check_static(row: dict, root) -> str:
    """A row's command held to the bare command's dry run; returns "writes" (the command is
    printed and its dry run plans the port, exit 0) or "refuses" (no command is printed, and
    the bare one writes nothing: it needs a flag, or porter refuses the op)."""
    command = "migrate-from-mpsgraph" if row["state"] == "mpsgraph" else "new-op"
    if row["verdict"] == "automatic" and row["auto"] == "no":
        # measured: the command refused the port it planned (a build error, say)
        assert row["command"] is None and row["measured"]["status"] == "refused", row
        return "refuses"
    dry = porter(command, row["op"], "--dry-run", root=root)
    if row["verdict"] == "automatic":
        assert row["command"] == f"porter {command} {row['op']}", row
        assert dry.code == 0, (row["op"], dry.err)
        return "writes"
    assert row["command"] is None, row
    assert row["auto"] == {"--body": "--body", "--complex-body": "--complex-body",
                           "refused": "no"}[row["verdict"]], row
    assert dry.code != 0, (row["op"], dry.out)
    if row["verdict"] != "refused":
        # run bare, the command asks for the flag AUTO names
        assert dry.code == 1 and row["verdict"] in dry.err, (row["op"], dry.err)
    return "refuses"


@pytest.mark.slow      # a full verdict twice (~1-3 min): --full runs it, CI does
@needs_emulator
def test_a_measured_green_port_says_yes_and_its_command_is_green(mini_root):
    pytest.importorskip("torch")
    from porter.harness import auto_record
    from porter.harness import measure_port
    from porter.source.checkout import Checkout

    git_init(mini_root)
    before = snapshot(mini_root)
    # what `candidates --verify` records for this op: its measurement of the planned port
    verdict = measure_port.verify(Checkout.at(mini_root), "heaviside", "no-mps")
    assert verdict.status == measure_port.VERIFIED, verdict
    auto_record.save(mini_root, {"heaviside": verdict.to_json()})
    assert snapshot(mini_root) == before                       # measured in memory
    rows = _listed(mini_root)
    assert rows["heaviside"]["auto"] == "yes" and rows["heaviside"]["measured"]["status"] == "verified"
    assert rows["special_log_ndtr"]["auto"] == "unverified"      # not measured: no yes
    text = porter("candidates", root=mini_root).out
    assert [line.split()[4] for line in text.splitlines() if line.startswith("heaviside ")] == ["yes"]
    # the command as printed: dry run exit 0, then the real command's verdict green
    assert rows["heaviside"]["command"] == "porter new-op heaviside"
    assert porter("new-op", "heaviside", "--dry-run", root=mini_root).code == 0
    real = porter("new-op", "heaviside", "--test", "--json", root=mini_root)
    assert real.code == 0, real.out
    assert json.loads(real.out)["verdict"]["ok"] is True
    assert "heaviside" not in _listed(mini_root)            # ported: no longer a candidate


def test_a_measured_red_port_says_fails_and_a_stale_record_says_nothing(mini_root):
    from porter.harness import auto_record
    from porter.harness.measure_port import Verdict, FAILS, REFUSED

    auto_record.save(mini_root, {
        "sign": Verdict("sign", FAILS, "float32 (reference inputs): ...", 8, 9, "float32").to_json(),
        "frac": Verdict("frac", REFUSED, "does not build").to_json()})
    rows = _listed(mini_root)
    assert rows["sign"]["auto"] == "fails float32"
    assert rows["sign"]["command"] == "porter migrate-from-mpsgraph sign"     # it runs, and says red
    assert rows["frac"]["auto"] == "no" and rows["frac"]["command"] is None
    # any byte the measurement read changes: the record no longer applies
    kernel = mini_root / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
    kernel.write_text(kernel.read_text() + "\n")
    rows = _listed(mini_root)
    assert rows["sign"]["auto"] == "unverified" and rows["frac"]["auto"] == "unverified"


@pytest.mark.slow(seconds=570)      # minutes: --full runs it, CI does
@needs_emulator
def test_every_candidate_agrees_with_its_commands_dry_run_and_real_verdict(mini_root, tmp_path):
    # the done-when line: for every candidate of the miniature, AUTO (measured by --verify and
    # read back by plain candidates) and the printed command's dry run; the real verdict for one
    # candidate of each class (yes, fails DTYPE)
    pytest.importorskip("torch")
    git_init(mini_root)
    verified = json.loads(porter("candidates", "--verify", "--json", root=mini_root).out)["candidates"]
    rows = _listed(mini_root)
    assert {c["op"]: c["auto"] for c in verified} == {op: r["auto"] for op, r in rows.items()}
    assert not any(r["auto"] == "unverified" for r in rows.values())       # every one measured
    checked: dict[str, int] = {}
    for op, row in rows.items():
        if _check_static(row, mini_root) == "refuses":
            checked["refuses"] = checked.get("refuses", 0) + 1
            continue
        assert row["auto"] == "yes" or row["auto"].startswith("fails "), row
        # the real command for one candidate of each measured class: every candidate's real port
        # (16 ports and full verdicts, 20-40 min on 2 cores) would pass CI's time limit alone;
        # --verify ports each in memory through the same plan and verdict as the command
        if checked.get(row["auto"].split()[0]):
            continue
        tree = tmp_path / f"real-{op}"
        shutil.copytree(mini_root, tree, symlinks=True)
        real = porter(*row["command"].split()[1:], "--test", "--json", root=tree)
        data = json.loads(real.out)
        if row["auto"] == "yes":
            assert real.code == 0 and data["verdict"]["ok"] is True, (op, real.out[-2000:])
        else:
            dtype = row["auto"].split()[1]
            assert real.code == 1 and data["verdict"]["ok"] is False, (op, real.out[-2000:])
            failing = {c["dtype"] for o in data["verdict"]["report"]["ops"] for c in o["dtypes"]
                       if c["outcome"] in ("fail", "xpass")}
            assert dtype in failing, (op, dtype, failing)
        checked[row["auto"].split()[0]] = checked.get(row["auto"].split()[0], 0) + 1
        shutil.rmtree(tree)
    assert checked.get("yes") and checked.get("fails") and checked.get("refuses"), checked
