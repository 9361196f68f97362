"""`porter ci init`: the workflow it writes, dry run, idempotency, conflicts."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from porter.cli import main
from porter.commands.ci import WORKFLOW, load_pins, pin_line, render_workflow, validate


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
    assert 'porter check --changed-since "origin/$BASE_REF" --summary "$GITHUB_STEP_SUMMARY"' \
        in _steps(jobs["check"])
    assert "--list-changed-ops" in _steps(jobs["check"])
    assert jobs["check"]["steps"][0]["with"]["fetch-depth"] == 0
    assert jobs["emulate"]["runs-on"] == "ubuntu-latest"
    assert 'porter test "${ops[@]}" --device emulate --junit' in _steps(jobs["emulate"])
    assert jobs["mps-shader"]["runs-on"] == jobs["mps"]["runs-on"] == "macos-14"
    assert "--device mps-shader" in _steps(jobs["mps-shader"])
    assert "pip install --no-build-isolation" not in _steps(jobs["mps-shader"])
    assert "--device mps --junit porter-mps.xml" in _steps(jobs["mps"])
    # the full build runs only for PRs touching host code, cached on the merge base, with a limit
    assert "needs.check.outputs.host == 'true'" in jobs["mps"]["if"]
    for job in (jobs["mps"], jobs["audit"]):
        cache = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@"))
        assert cache["with"]["path"] == ".ccache" and job["env"]["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
        assert job["timeout-minutes"] == 360
    assert "merge-base" in jobs["mps"]["steps"][2]["with"]["key"]
    for job in ("emulate", "mps-shader", "mps", "audit"):    # porter test needs the OpInfo database
        assert re.search(r'pip install .*"\$PORTER_SPEC" numpy "expecttest>=0.2"', _steps(jobs[job])), job
    for job in ("emulate", "mps-shader", "mps"):
        assert "actions/upload-artifact@" in _steps(jobs[job])
        assert jobs[job]["needs"] == "check"
    audit = jobs["audit"]
    assert audit["runs-on"] == "macos-14" and audit["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert 'porter audit-xfails --device mps --shard "$SHARD/3" --json' in _steps(audit)
    assert "schedule" in audit["if"] and "schedule" in jobs["audit-report"]["if"]
    assert "porter audit-xfails --merge audit/audit-*.json --summary" in _steps(jobs["audit-report"])


def test_workflow_is_hardened():
    """What zizmor asks for, checked without it: commit pins with the version, no credentials
    left in .git, no expression expanded inside a shell script, least permissions per job."""
    text = render_workflow()
    data = yaml.safe_load(text)
    _, pins = load_pins()
    assert data["permissions"] == {}
    uses = re.findall(r"- uses: (\S+)@(\S+) # (\S+)", text)
    assert len(uses) == text.count("- uses:") > 10
    for action, ref, version in uses:
        assert (ref, version) == (pins[action].sha, pins[action].version)
        assert re.fullmatch(r"[0-9a-f]{40}", ref)
    for name, job in data["jobs"].items():
        assert job["permissions"] == {"contents": "read"}, name
        assert "timeout-minutes" in job, name
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
            assert "${{" not in step.get("run", ""), (name, step["run"])


def test_default_spec_is_this_distribution_never_pypis_porter(mini_root, capsys):
    from porter import DISTRIBUTION, __version__
    data = yaml.safe_load(render_workflow())
    assert data["env"]["PORTER_SPEC"] == f"{DISTRIBUTION}=={__version__}" == f"porter-mps=={__version__}"
    code, _, err = ci(mini_root, capsys, "--porter-spec", "porter==0.1.0")
    assert code == 2 and "unrelated project" in err and not (mini_root / WORKFLOW).exists()


def test_installed_distribution_is_porter_mps():
    import tomllib
    from pathlib import Path
    from porter import DISTRIBUTION
    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "porter-mps"
    assert project["scripts"] == {"porter": "porter.cli:main"}


def test_update_pins_rewrites_only_uses_lines(mini_root, capsys):
    checked, pins = load_pins()
    path = mini_root / WORKFLOW
    assert ci(mini_root, capsys)[0] == 0
    current = path.read_text()
    checkout = pins["actions/checkout"]
    old = current.replace(pin_line(checkout), "actions/checkout@v4").replace(
        "timeout-minutes: 30", "timeout-minutes: 45") + "      - uses: someone/else@v1 # theirs\n"
    path.write_text(old)
    code, out, _ = ci(mini_root, capsys, "--update-pins", "--dry-run")
    assert code == 0 and path.read_text() == old
    assert f"-      - uses: actions/checkout@v4\n+      - uses: {pin_line(checkout)}" in out
    assert f"note: actions pinned from porter's table of {checked}" in out
    assert "actions/checkout@v4 -> v6.0.2" in out and "someone/else@v1" in out
    code, out, _ = ci(mini_root, capsys, "--update-pins", "--force")
    assert code == 0
    assert path.read_text() == (current.replace("timeout-minutes: 30", "timeout-minutes: 45")
                                + "      - uses: someone/else@v1 # theirs\n")
    code, out, _ = ci(mini_root, capsys, "--update-pins")
    assert code == 0 and out.startswith("porter ci init: nothing to do\n")


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


def test_no_pipe_ends_in_an_early_exit():
    """The steps run with pipefail: `git diff | grep -q` fails when grep -q exits at its first
    match and git takes SIGPIPE (141; measured 2 times in 4 on a 3000-file diff), so a PR
    touching .mm would read host=false and skip the full build. A pipe must read its input
    whole (`grep ... >/dev/null`)."""
    data = yaml.safe_load(render_workflow())
    assert data["defaults"]["run"]["shell"] == "bash"
    for name, job in data["jobs"].items():
        for step in job["steps"]:
            for line in (step.get("run") or "").splitlines():
                assert not re.search(r"\|\s*(grep\s+(-\w*q|--quiet)|head\b)", line), (name, line)
