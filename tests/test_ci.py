"""`porter ci init`: the workflow it writes, dry run, idempotency, conflicts."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from porter.cli import main
from porter.commands.ci import WORKFLOW, load_pins, pin_line, render_workflow, validate


SPEC = "porter-mps @ git+https://github.com/example/porter@0123456789abcdef0123456789abcdef01234567"


def ci(root, capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    spec = () if any(a.startswith("--porter-spec") for a in args) else ("--porter-spec", SPEC)
    code = main(["ci", "init", "--root", str(root), *spec, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _steps(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) for s in job["steps"])


def test_workflow_jobs():
    data = validate(render_workflow(porter_spec=SPEC, shards=3, macos_runner="macOS,ARM64"), macos=True)
    jobs = data["jobs"]
    triggers = data[True]                  # PyYAML reads the bare key `on` as a boolean
    assert set(triggers) == {"pull_request", "schedule", "workflow_dispatch"}
    assert jobs["check"]["runs-on"] == "ubuntu-latest"
    assert ('porter check --changed-since "origin/$BASE_REF" "${baseline[@]}" --summary '
            '"$GITHUB_STEP_SUMMARY"') in _steps(jobs["check"])
    # a fork's recorded findings hold it to new ones only
    assert "if [ -f .porter-baseline.json ]; then baseline=(--baseline .porter-baseline.json); fi" \
        in _steps(jobs["check"])
    assert "--list-changed-ops" in _steps(jobs["check"])
    assert jobs["check"]["steps"][0]["with"]["fetch-depth"] == 0
    assert jobs["emulate"]["runs-on"] == "ubuntu-latest"
    # an op whose CPU kernel the PR edits is not proven: the test jobs know the merge base
    for name, device in (("emulate", "emulate"), ("mps-shader", "mps-shader"), ("mps", "mps")):
        assert f'porter test "${{ops[@]}}" --device {device} --changed-since "$MERGE_BASE" --junit' \
            in _steps(jobs[name]), name
        step = next(s for s in jobs[name]["steps"] if "porter test" in s.get("run", ""))
        assert step["env"]["MERGE_BASE"] == "${{ needs.check.outputs.merge-base }}"
        assert jobs[name]["steps"][0]["with"]["fetch-depth"] == 0
    labels = ["self-hosted", "macOS", "ARM64"]
    assert jobs["mps-shader"]["runs-on"] == jobs["mps"]["runs-on"] == labels
    assert "--device mps-shader" in _steps(jobs["mps-shader"])
    assert "pip install --no-build-isolation" not in _steps(jobs["mps-shader"])
    assert "--device mps --changed-since \"$MERGE_BASE\" --junit porter-mps.xml" in _steps(jobs["mps"])
    # the full build runs only for PRs touching host code, cached on the merge base, with a limit
    assert "needs.check.outputs.host == 'true'" in jobs["mps"]["if"]
    for job in (jobs["mps"], jobs["audit-build"]):
        cache = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@"))
        assert cache["with"]["path"] == ".ccache" and job["env"]["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
        assert job["timeout-minutes"] == 360
    assert "merge-base" in jobs["mps"]["steps"][2]["with"]["key"]
    for job in ("emulate", "mps-shader", "mps", "audit"):    # porter-mps brings numpy and expecttest
        assert re.search(r'pip install .*"\$PORTER_SPEC"$', _steps(jobs[job]), re.M), job
    for job in ("emulate", "mps-shader", "mps"):
        assert "actions/upload-artifact@" in _steps(jobs[job])
        assert jobs[job]["needs"] == "check"
    audit = jobs["audit"]
    assert audit["runs-on"] == labels and audit["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert 'porter audit-xfails --device mps --shard "$SHARD/3" --json' in _steps(audit)
    # the shards share one build: they install the wheel audit-build uploads, and build nothing
    assert audit["needs"] == "audit-build" and "pip wheel" in _steps(jobs["audit-build"])
    assert "requirements.txt" not in _steps(audit) and "dist/*.whl" in _steps(audit)
    # a fork's PR never runs on the self-hosted runner
    for job in ("mps-shader", "mps"):
        assert "head.repo.full_name == github.repository" in jobs[job]["if"], job
    assert "schedule" in audit["if"] and "schedule" in jobs["audit-report"]["if"]
    assert "porter audit-xfails --merge audit/audit-*.json --summary" in _steps(jobs["audit-report"])


def test_workflow_is_hardened():
    """What zizmor asks for, checked without it: commit pins with the version, no credentials
    left in .git, no expression expanded inside a shell script, least permissions per job."""
    text = render_workflow(porter_spec=SPEC)
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


def test_a_spec_naming_pypis_porter_is_refused(mini_root, capsys):
    code, _, err = ci(mini_root, capsys, "--porter-spec", "porter==0.1.0")
    assert code == 2 and "unrelated project" in err and not (mini_root / WORKFLOW).exists()


class _Dist:
    """importlib.metadata's Distribution, as far as installed_porter_spec reads it."""

    def __init__(self, direct_url: str | None, version: str = "0.1.0"):
        self.direct_url, self.version = direct_url, version

    def read_text(self, name: str):
        return self.direct_url if name == "direct_url.json" else None


@pytest.mark.parametrize("record, spec", [
    ('{"url": "https://github.com/me/porter", "vcs_info": {"vcs": "git", "commit_id": "abc123", '
     '"requested_revision": "main"}}', "porter-mps @ git+https://github.com/me/porter@abc123"),
    ('{"url": "https://example.org/porter_mps-0.1.0.tar.gz", "archive_info": {}}',
     "porter-mps @ https://example.org/porter_mps-0.1.0.tar.gz"),
])
def test_the_default_spec_is_how_pip_installed_this_porter(record, spec):
    from porter.commands.ci import installed_porter_spec
    assert installed_porter_spec(_Dist(record)) == spec


def test_installed_from_a_local_directory_refuses_and_says_what_to_pass(tmp_path):
    import subprocess
    from porter.commands.ci import installed_porter_spec
    from porter.errors import PorterError

    clone = tmp_path / "porter"
    clone.mkdir()
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(clone), "remote", "add", "origin", "git@github.com:me/porter.git"], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    for editable in ("true", "false"):
        with pytest.raises(PorterError) as err:
            installed_porter_spec(_Dist(f'{{"url": "file://{clone}", "dir_info": {{"editable": {editable}}}}}'))
        assert err.value.exit_code == 2 and "cannot install from" in str(err.value)
        assert f"--porter-spec 'porter-mps @ git+https://github.com/me/porter.git@{head}'" in str(err.value)


def test_ci_init_without_a_spec_it_can_know_writes_nothing(mini_root, capsys, monkeypatch):
    from porter.commands import ci as ci_module
    monkeypatch.setattr("importlib.metadata.distribution",
                        lambda name: _Dist('{"url": "file:///nowhere/porter", "dir_info": {}}'))
    capsys.readouterr()
    code = main(["ci", "init", "--root", str(mini_root)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--porter-spec" in err
    assert not (mini_root / WORKFLOW).exists()
    assert ci_module.installed_porter_spec is not None


def test_no_apple_gpu_jobs_without_a_macos_runner():
    data = validate(render_workflow(porter_spec=SPEC))
    jobs = data["jobs"]
    assert not {"mps-shader", "mps", "audit-build"} & set(jobs)
    assert all(job["runs-on"] == "ubuntu-latest" for job in jobs.values())
    assert 'porter audit-xfails --device emulate --shard "$SHARD/4" --json' in _steps(jobs["audit"])
    assert "TORCH_MAC_SPEC" not in data["env"]


def test_macos_runner_labels(mini_root, capsys):
    code, _, err = ci(mini_root, capsys, "--macos-runner", "mac;rm")
    assert code == 2 and "runner labels" in err and not (mini_root / WORKFLOW).exists()
    assert ci(mini_root, capsys, "--macos-runner", "studio")[0] == 0
    jobs = yaml.safe_load((mini_root / WORKFLOW).read_text())["jobs"]
    assert jobs["mps-shader"]["runs-on"] == ["self-hosted", "studio"]


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
    code, out, err = ci(mini_root, capsys, "--update-pins", "--dry-run")
    assert code == 0 and path.read_text() == old
    assert f"-      - uses: actions/checkout@v4\n+      - uses: {pin_line(checkout)}" in out
    assert f"note: actions pinned from porter's table of {checked}" in err
    assert "actions/checkout@v4 -> v6.0.2" in err and "someone/else@v1" in err
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
    assert written == render_workflow(porter_spec=SPEC)
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
    assert path.read_text() == render_workflow(porter_spec=SPEC)


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
    data = yaml.safe_load(render_workflow(porter_spec=SPEC))
    assert data["defaults"]["run"]["shell"] == "bash"
    for name, job in data["jobs"].items():
        for step in job["steps"]:
            for line in (step.get("run") or "").splitlines():
                assert not re.search(r"\|\s*(grep\s+(-\w*q|--quiet)|head\b)", line), (name, line)


def test_no_source_record_refuses_rather_than_guess_an_index(mini_root, capsys, monkeypatch):
    # `pip install --no-index --find-links DIR porter-mps` writes no direct_url.json, as an index
    # install does: `porter-mps==0.1.0` was written, a name no index a runner reaches may hold
    monkeypatch.setattr("importlib.metadata.distribution", lambda name: _Dist(None))
    capsys.readouterr()
    code = main(["ci", "init", "--root", str(mini_root)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--porter-spec" in err and "porter-mps==0.1.0" in err
    assert not (mini_root / WORKFLOW).exists()


@pytest.mark.parametrize("spec", ["/local/path", "./porter", "~/porter", "porter-mps @ file:///src/porter",
                                  "porter-mps @ git+file:///src/porter@abc", "porter-mps @ /src/porter"])
def test_a_local_porter_spec_is_refused(mini_root, capsys, spec):
    # ci init refuses a local install it detects; the same source, passed by hand, is no better
    code, _, err = ci(mini_root, capsys, "--porter-spec", spec)
    assert code == 2 and "cannot install from" in err and err.count("\n") == 1
    assert not (mini_root / WORKFLOW).exists()
