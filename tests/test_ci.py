"""`porter ci init`: the workflow it writes, dry run, idempotency, conflicts."""

from __future__ import annotations

import json

import pytest
import yaml

from porter.cli import main
from porter.commands.ci import WORKFLOW, render_workflow, validate


def ci(root, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["ci", "init", "--root", str(root), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _steps(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) for s in job["steps"])


def test_workflow_jobs():
    data = validate(render_workflow(shards=3))
    jobs = data["jobs"]
    triggers = data[True]                  # PyYAML reads the bare key `on` as a boolean
    assert set(triggers) == {"pull_request", "schedule", "workflow_dispatch"}
    assert jobs["check"]["runs-on"] == "ubuntu-latest"
    assert 'porter check --changed-since "origin/${{ github.base_ref }}"' in _steps(jobs["check"])
    assert "--list-changed-ops" in _steps(jobs["check"])
    assert jobs["check"]["steps"][0]["with"]["fetch-depth"] == 0
    assert jobs["emulate"]["runs-on"] == "ubuntu-latest"
    assert "porter test ${{ needs.check.outputs.ops }} --device emulate --junit" in _steps(jobs["emulate"])
    assert jobs["mps"]["runs-on"] == "macos-14"
    assert "--device mps --junit porter-mps.xml" in _steps(jobs["mps"])
    for job in ("emulate", "mps"):
        assert "actions/upload-artifact@v4" in _steps(jobs[job])
        assert jobs[job]["needs"] == "check"
    audit = jobs["audit"]
    assert audit["runs-on"] == "macos-14" and audit["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert "porter audit-xfails --device mps --shard ${{ matrix.shard }}/3 --json" in _steps(audit)
    assert "schedule" in audit["if"] and "schedule" in jobs["audit-report"]["if"]
    assert "porter audit-xfails --merge audit/audit-*.json" in _steps(jobs["audit-report"])


def test_dry_run_writes_nothing(mini_root, capsys):
    code, out, _ = ci(mini_root, capsys, "--dry-run")
    assert code == 0 and not (mini_root / WORKFLOW).exists()
    assert out.startswith("   create  .github/workflows/porter.yml\n")
    assert "+++ b/.github/workflows/porter.yml" in out and "nothing was written" in out


def test_second_run_has_nothing_to_do(mini_root, capsys):
    assert ci(mini_root, capsys)[0] == 0
    written = (mini_root / WORKFLOW).read_text()
    assert written == render_workflow()
    code, out, _ = ci(mini_root, capsys)
    assert code == 0 and out.startswith("porter ci init: nothing to do\n")
    code, out, _ = ci(mini_root, capsys, "--json")
    assert json.loads(out)["nothing_to_do"] is True


def test_hand_edited_workflow_is_a_conflict(mini_root, capsys):
    ci(mini_root, capsys)
    path = mini_root / WORKFLOW
    path.write_text(path.read_text() + "# our own step\n")
    code, _, err = ci(mini_root, capsys)
    assert code == 2 and "exists and differs" in err and "--force" in err
    assert path.read_text().endswith("# our own step\n")
    code, out, _ = ci(mini_root, capsys, "--dry-run")
    assert code == 0 and "-# our own step" in out and path.read_text().endswith("# our own step\n")
    assert ci(mini_root, capsys, "--force")[0] == 0
    assert path.read_text() == render_workflow()


def test_options_reach_the_workflow(mini_root, capsys):
    spec = "git+https://example.org/porter.git@v0.1.0"
    ci(mini_root, capsys, "--shards", "2", "--porter-spec", spec, "--cron", "0 3 * * *")
    data = yaml.safe_load((mini_root / WORKFLOW).read_text())
    assert data["env"]["PORTER_SPEC"] == spec
    assert data[True]["schedule"] == [{"cron": "0 3 * * *"}]
    assert data["jobs"]["audit"]["strategy"]["matrix"]["shard"] == [1, 2]


@pytest.mark.parametrize("args, message", [
    (("--shards", "0"), "--shards 0: must be between 1 and 64"),
    (("--cron", "daily"), "not a five-field cron expression"),
    (("--porter-spec", 'porter"; rm -rf /'), "quotes, `$`, backslashes and newlines are not allowed"),
])
def test_bad_options(mini_root, capsys, args, message):
    code, _, err = ci(mini_root, capsys, *args)
    assert code == 2 and message in err and not (mini_root / WORKFLOW).exists()
