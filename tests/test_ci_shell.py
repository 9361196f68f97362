"""The generated workflow's shell, run as Actions runs it, on a fork with a pull request.

The `run:` steps of the check and emulate jobs are taken from the YAML `porter ci init` writes
and run with the shell Actions gives them (`shell: bash`: `bash --noprofile --norc -eo pipefail`;
none: `bash -e`) in a git repository holding a base branch and a
PR branch, with GITHUB_BASE_REF, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY set as Actions sets
them, each step's `env:` expressions evaluated, and the check job's outputs passed to the
emulate job through `needs.check.outputs`. Install steps are left out (porter runs from this
checkout through a `porter` on PATH). The PR breaks hypot's Metal functor: porter check is
clean (no static check can see a wrong formula), the ops output names hypot, and the emulated
test fails with the first failing sample and its repro in the job summary.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from porter.commands.ci import render_workflow

REPO = Path(__file__).resolve().parent.parent
KERNEL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
    return done.stdout


def fork_with_pr(root: Path) -> None:
    """main (the base, also as origin/main after a fetch) and the PR's head checked out."""
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    git(root, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(root, "checkout", "-q", "-b", "pr")
    kernel = root / KERNEL
    text = kernel.read_text()
    wrong = text.replace("c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b)))",
                         "::metal::fabs(float(a)) + ::metal::fabs(float(b))")
    assert wrong != text
    kernel.write_text(wrong)
    git(root, "commit", "-q", "-am", "hypot: a faster formula")


def evaluate(text: str, context: dict[str, str]) -> str:
    def value(m: re.Match) -> str:
        if m.group(1) not in context:
            raise AssertionError(f"the test does not know the expression {m.group(0)}")
        return context[m.group(1)]
    return EXPRESSION.sub(value, text)


# what Actions runs a `run:` script with (docs: "Default shell"): an unnamed shell has no pipefail
SHELLS = {None: ["bash", "-e"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}


def shell_of(workflow: dict, job: dict, step: dict) -> list[str]:
    name = (step.get("shell") or ((job.get("defaults") or {}).get("run") or {}).get("shell")
            or ((workflow.get("defaults") or {}).get("run") or {}).get("shell"))
    return SHELLS[name]


def run_job(job: dict, root: Path, env: dict[str, str], context: dict[str, str],
            tmp: Path, name: str, workflow: dict | None = None) -> tuple[list[int], dict[str, str]]:
    """Run the job's script steps in order (stopping at the first failure, as Actions does);
    the exit codes and the outputs its steps wrote to GITHUB_OUTPUT, by step id."""
    codes, outputs = [], {}
    for index, step in enumerate(job["steps"]):
        script = step.get("run")
        if script is None or "pip install" in script:
            continue
        assert "${{" not in script, f"an expression inside a script: {script}"
        output = tmp / f"{name}-{index}.out"
        output.write_text("")
        step_env = {k: evaluate(str(v), context) for k, v in (step.get("env") or {}).items()}
        script_file = tmp / f"{name}-{index}.sh"
        script_file.write_text(script)
        done = subprocess.run([*shell_of(workflow or {}, job, step), str(script_file)], cwd=root, capture_output=True, text=True,
                              env={**env, **step_env, "GITHUB_OUTPUT": str(output)})
        codes.append(done.returncode)
        print(f"--- {name} step {index}: exit {done.returncode}\n{done.stdout}{done.stderr}")
        for line in output.read_text().splitlines():
            key, _, val = line.partition("=")
            outputs[f"steps.{step.get('id')}.outputs.{key}"] = val
        if done.returncode:
            break
    return codes, outputs


@pytest.fixture
def runner_env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    porter = bin_dir / "porter"
    porter.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m porter "$@"\n')
    porter.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", PYTHONPATH=str(REPO), CI="true",
               GITHUB_ACTIONS="true", GITHUB_EVENT_NAME="pull_request", GITHUB_BASE_REF="main",
               GITHUB_HEAD_REF="pr")
    return env


@pytest.mark.slow
def test_check_and_emulate_jobs_run_on_a_pull_request(mini_root, tmp_path, runner_env):
    fork_with_pr(mini_root)
    workflow = yaml.safe_load(render_workflow(porter_spec="porter-mps @ git+https://github.com/example/porter@0123456789abcdef0123456789abcdef01234567"))
    jobs = workflow["jobs"]
    context = {"github.base_ref": "main"}

    summary_check = tmp_path / "summary-check.md"
    codes, outputs = run_job(jobs["check"], mini_root, {**runner_env, "GITHUB_STEP_SUMMARY":
                             str(summary_check)}, context, tmp_path, "check", workflow)
    assert codes == [0, 0]                 # ops; porter check is clean
    check_outputs = {name: evaluate(expr, {**context, **outputs})
                     for name, expr in jobs["check"]["outputs"].items()}
    assert check_outputs["ops"] == "hypot"
    assert check_outputs["host"] == "false"            # no .mm touched: no full build
    assert check_outputs["merge-base"] == git(mini_root, "rev-parse", "main").strip()
    assert summary_check.read_text().startswith("### porter check (changes since `origin/main`): ✅ clean")

    context.update({f"needs.check.outputs.{k}": v for k, v in check_outputs.items()})
    assert "needs.check.outputs.ops != ''" in jobs["emulate"]["if"]       # and ops is "hypot"
    summary = tmp_path / "summary-emulate.md"
    codes, _ = run_job(jobs["emulate"], mini_root, {**runner_env, "GITHUB_STEP_SUMMARY": str(summary)},
                       context, tmp_path, "emulate", workflow)
    assert codes == [1]                    # the wrong formula fails, and so does the job
    text = summary.read_text()
    assert text.startswith("### porter test --device emulate: ❌ failed\n")
    row = next(line for line in text.splitlines() if line.startswith("| `hypot` |"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert cells[1] == "❌ fail"
    assert "**float32 fail**" in cells[2]
    assert re.match(r"float16 sample \d+ \(\d+/\d+\): ", cells[3])
    assert re.fullmatch(r"`porter test hypot --device emulate --dtype float16 --sample \d+`", cells[4])
    assert (mini_root / "porter-emulate.xml").is_file()


def test_a_pr_touching_host_code_asks_for_the_full_build(mini_root, tmp_path, runner_env):
    fork_with_pr(mini_root)
    mm = mini_root / "aten/src/ATen/native/mps/operations/BinaryKernel.mm"
    mm.write_text(mm.read_text() + "\n// a host change\n")
    git(mini_root, "commit", "-q", "-am", "host change")
    workflow = yaml.safe_load(render_workflow(porter_spec="porter-mps @ git+https://github.com/example/porter@0123456789abcdef0123456789abcdef01234567"))
    codes, outputs = run_job(workflow["jobs"]["check"], mini_root, {**runner_env, "GITHUB_STEP_SUMMARY":
                             str(tmp_path / "s.md")}, {"github.base_ref": "main"}, tmp_path, "check",
                             workflow)
    assert codes[0] == 0 and outputs["steps.ops.outputs.host"] == "true"


def test_a_failing_porter_fails_the_ops_step(mini_root, tmp_path, runner_env):
    # `ops=$(porter check ... --list-changed-ops | tr ...)`: without pipefail the step takes tr's
    # status, so a porter that exits 2 leaves ops empty, every test job skipped, the step green
    fork_with_pr(mini_root)
    workflow = yaml.safe_load(render_workflow(porter_spec="porter-mps @ git+https://github.com/example/porter@0123456789abcdef0123456789abcdef01234567"))
    codes, outputs = run_job(workflow["jobs"]["check"], mini_root, {**runner_env, "GITHUB_STEP_SUMMARY":
                             str(tmp_path / "s.md")}, {"github.base_ref": "no-such-branch"}, tmp_path,
                             "check", workflow)
    assert codes == [2]                       # porter's exit 2, through the pipe
    assert "steps.ops.outputs.ops" not in outputs
