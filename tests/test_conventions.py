"""Conventions docs/architecture.md and docs/reference.md state, held to the code: `porter --help`
from a static table of summaries (no command imported), one exit-code table, and the record
policy's cheap part (no dataclasses on the editing commands' import path)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from porter import cli, exit_codes

REPO = Path(__file__).resolve().parent.parent
EDITING_PATH = ("source", "port", "apply", "runtime")


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_the_help_table_says_what_each_command_says_of_itself(name):
    module, summary = cli.COMMANDS[name]
    assert importlib.import_module(f"porter.commands.{module}").HELP == summary


def test_help_lists_every_command_and_imports_none():
    code = ("import sys, contextlib, io\n"
            "from porter.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    assert main(['--help']) == 0\n"
            "print(out.getvalue())\n"
            "print('IMPORTED', sorted(m for m in sys.modules if m.startswith('porter.commands.')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          check=True)
    text, imported = done.stdout.rsplit("IMPORTED ", 1)
    commands = {f"porter.commands.{module}" for module, _ in cli.COMMANDS.values()}
    assert not set(eval(imported)) & commands, imported       # noqa: S307 (our own list)
    flat = " ".join(text.split())
    for name, (_, summary) in cli.COMMANDS.items():
        assert f"{name} {' '.join(summary.split())}" in flat, name


def test_a_command_after_an_option_or_a_misspelt_one_still_parses(capsys):
    assert cli.main(["--version"]) == exit_codes.OK
    capsys.readouterr()
    assert cli.main(["statsu", "heaviside"]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert "unknown command 'statsu' (did you mean `porter status`?" in err and err.count("\n") == 1
    assert cli.main([]) == exit_codes.BAD_INPUT
    assert "status" in capsys.readouterr().out


def test_the_reference_exit_code_table_is_the_module():
    readme = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| `([A-Z_]+)` \|", readme, re.M)
    module = {name: value for name, value in vars(exit_codes).items()
              if name.isupper() and isinstance(value, int)}
    assert {name: int(code) for code, name in rows} == module


@pytest.mark.slow
def test_no_command_or_error_class_spells_an_exit_code_as_a_number():
    numbered = []
    for path in sorted((REPO / "porter").rglob("*.py")):
        if path.name == "exit_codes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "exit_code" for t in node.targets) \
                    and isinstance(node.value, ast.Constant):
                numbered.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert numbered == []


@pytest.mark.parametrize("package", EDITING_PATH)
def test_no_dataclass_on_the_editing_commands_import_path(package):
    found = []
    for path in sorted((REPO / "porter" / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "dataclasses" in names:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []
