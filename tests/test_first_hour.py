"""A contributor's first hour (issue 23): what the README promises holds as written."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.porter_run import porter

REPO = Path(__file__).resolve().parents[1]

# Runs porter's CLI with one top-level module made unimportable, as in an environment that lacks it.
BLOCKER = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == sys.argv[1] or name.startswith(sys.argv[1] + "."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
    from porter.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def _porter_without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PORTER_CACHE_DIR": str(cwd / ".cache")}
    return subprocess.run([sys.executable, "-c", BLOCKER, module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("module, package", [("numpy", "numpy"), ("expecttest", "expecttest")])
def test_a_missing_dependency_is_one_line_naming_the_install_exit_2(mini_root, module, package):
    done = _porter_without(module, "test", "neg", "--device", "emulate", "--no-cache", cwd=mini_root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "internal error" not in done.stderr, done.stderr
    assert done.stderr.startswith("porter: error:") and f"(pip install {package})" in done.stderr
    assert done.stdout == ""


def test_a_missing_porter_module_is_still_an_internal_error(mini_root):
    # only third-party modules are an environment to fix; a missing module of porter's own is a bug
    done = _porter_without("porter.harness.session", "test", "neg", "--device", "emulate", cwd=mini_root)
    assert done.returncode == 70 and "internal error" in done.stderr, done.stderr


def test_the_dependencies_cover_what_test_and_formatting_import():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert {"numpy", "expecttest", "clang-format", "PyYAML", "Jinja2"} <= names
    assert "torch" not in names       # the user's own install (README, "Set up")


def test_device_auto_is_the_default_and_means_emulate_off_a_mac(mini_root, monkeypatch):
    from porter.commands import common

    monkeypatch.setattr(sys, "platform", "linux")
    assert common.resolve_device("auto") == "emulate" == common.resolve_device(None)
    assert common.resolve_device("cuda") == "cuda"
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr("platform.machine", lambda: "arm64")
    assert common.resolve_device("auto") == "mps"
    monkeypatch.undo()
    result = porter("test", "neg", "--dtype", "float32", root=mini_root)
    assert result.code == 0, result.err
    assert "device emulate" in result.out


def test_readme_links_only_to_files_that_exist():
    import re

    for doc in [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to missing {target}"


def test_readme_reaches_a_green_test_within_120_lines():
    lines = (REPO / "README.md").read_text().splitlines()
    green = next(i for i, line in enumerate(lines) if line.startswith("summary:") and " 0 fail" in line)
    assert green < 120


@pytest.mark.parametrize("command", [["status"], ["new-op", "--dry-run"], ["migrate-from-mpsgraph", "--dry-run"]])
def test_dotted_opinfo_names_are_accepted_by_every_command(mini_root, command):
    # issue 23: `new-op nn.functional.threshold` said it "names one overload of 'nn'"
    dotted = porter(command[0], "nn.functional.threshold", *command[1:], root=mini_root)
    plain = porter(command[0], "threshold", *command[1:], root=mini_root)
    assert "overload" not in dotted.err
    assert (dotted.code, dotted.out, dotted.err) == (plain.code, plain.out, plain.err)
    dotted = porter(command[0], "special.log_ndtr", *command[1:], root=mini_root)
    plain = porter(command[0], "special_log_ndtr", *command[1:], root=mini_root)
    assert (dotted.code, dotted.out, dotted.err) == (plain.code, plain.out, plain.err)


def test_an_overload_is_still_refused_with_the_op_to_pass(mini_root):
    result = porter("new-op", "heaviside.out", "--dry-run", root=mini_root)
    assert result.code == 2 and "pass the op name, 'heaviside'" in result.err
