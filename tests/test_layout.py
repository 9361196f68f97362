"""The package layout's rules (README, Architecture), checked on the imports themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PORTER = Path(__file__).resolve().parent.parent / "porter"

# package -> porter packages it must never import (its __init__ docstring says why)
NEVER = {
    "source": {"port", "apply", "survey", "commands", "checks", "harness", "emulate", "cli"},
    "port": {"survey", "commands", "checks", "harness", "emulate", "cli"},
    "apply": {"port", "survey", "commands", "checks", "harness", "emulate", "runtime", "cli"},
    "survey": {"commands", "harness", "emulate", "cli"},
    "runtime": {"source", "port", "apply", "survey", "commands", "checks", "harness", "emulate", "cli"},
    "harness": {"commands", "cli"},
    "emulate": {"commands", "cli"},
    "checks": {"commands", "survey", "cli"},
}


def _imports(path: Path) -> set[str]:
    """The porter packages a module imports (`porter.X...` -> X), lazily or not."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        for name in names:
            parts = name.split(".")
            if parts[0] == "porter" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(NEVER))
def test_imports_go_one_way(package):
    crossing = {str(p.relative_to(PORTER)): sorted(_imports(p) & NEVER[package])
                for p in (PORTER / package).rglob("*.py")}
    assert {k: v for k, v in crossing.items() if v} == {}


def test_the_root_holds_few_modules_and_every_package_says_what_it_is_for():
    assert len(list(PORTER.glob("*.py"))) <= 8
    for init in PORTER.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(PORTER)} has no docstring"
