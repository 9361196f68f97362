"""The workflow `porter ci init` writes, through the linters fork maintainers run on it.

zizmor (security: pinning, credentials, template injection, permissions, concurrency) must
report nothing even as its most pedantic persona; actionlint (syntax, expressions, and the
`run:` scripts through shellcheck when it is installed) must print nothing. Both come with the
test extra (`pip install '.[test]'`), into the scripts folder beside the interpreter: they are
looked up there first, then on PATH, so a venv's python run without activating the venv still
finds them. Where one is missing from both the test is skipped, naming it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from porter.commands.ci import render_workflow

SPEC = "porter-mps @ git+https://github.com/example/porter@0123456789abcdef0123456789abcdef01234567"
VARIANTS = {
    "defaults": {"porter-spec": SPEC},
    "fork-options": {"shards": 1, "porter-spec": "git+https://github.com/example/porter@"
                     "0123456789abcdef0123456789abcdef01234567", "python": "3.12"},
    "macos-runner": {"porter-spec": SPEC, "macos-runner": "macOS,ARM64"},
}


def _tool(name: str) -> str:
    # not resolved: a venv's bin/python is a link to the base interpreter, outside the venv
    beside = {str(Path(sys.executable).parent), sysconfig.get_path("scripts")}
    for folder in (*sorted(beside), None):
        path = shutil.which(name, path=folder)
        if path is not None:
            return path
    pytest.skip(f"{name} is not installed beside {sys.executable} or on PATH "
                "(pip install '.[test]' brings it)")


@pytest.fixture(params=sorted(VARIANTS))
def workflow(request, tmp_path):
    options = {k.replace("-", "_"): v for k, v in VARIANTS[request.param].items()}
    path = tmp_path / ".github" / "workflows" / "porter.yml"
    path.parent.mkdir(parents=True)
    path.write_text(render_workflow(**options), encoding="utf-8")
    return path


@pytest.mark.parametrize("persona", ["regular", "pedantic"])
def test_zizmor_reports_nothing(workflow, persona):
    zizmor = _tool("zizmor")
    done = subprocess.run([zizmor, "--offline", f"--persona={persona}", "--no-progress", str(workflow)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "No findings to report" in done.stdout + done.stderr, \
        done.stdout + done.stderr


def test_actionlint_is_clean(workflow):
    actionlint = _tool("actionlint")
    done = subprocess.run([actionlint, "-no-color", str(workflow)], capture_output=True, text=True,
                          cwd=workflow.parent.parent.parent)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_the_linters_would_catch_what_issue_15_found(tmp_path):
    """A workflow with a tag-pinned action and an expression in a script fails both linters:
    the tests above can fail."""
    zizmor, actionlint = _tool("zizmor"), _tool("actionlint")
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\non: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    permissions: {}\n    steps:\n      - uses: actions/checkout@v4\n"
        "      - run: echo \"${{ github.head_ref }}\"\n    timeout-minutes: 5\n")
    z = subprocess.run([zizmor, "--offline", "--no-progress", str(bad)], capture_output=True, text=True)
    assert z.returncode != 0 and "unpinned-uses" in z.stdout and "template-injection" in z.stdout
    a = subprocess.run([actionlint, "-no-color", str(bad)], capture_output=True, text=True)
    assert a.returncode != 0 and "github.head_ref" in a.stdout
