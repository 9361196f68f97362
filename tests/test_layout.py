"""The package layout's rules (README, Architecture), checked on the imports themselves.

Each package's `__init__` docstring says what it may import, in a sentence that starts
"May import:" and lists the allowed porter names in backticks up to the first "Never"; that
sentence is the rule: a package (`porter.source`) allows its modules, a module
(`porter.apply.changes`) only itself, and the bare `porter` only the root package (its version).
Imports are read with `ast`, lazy ones (inside functions) included.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PORTER = Path(__file__).resolve().parent.parent / "porter"
PACKAGES = sorted(p.parent.name for p in PORTER.glob("*/__init__.py"))
# the root's modules have no package docstring; their rules are here
ROOT_MODULES = {
    "porter.exit_codes": set(),
    "porter.errors": {"porter.exit_codes"},
    "porter.cli": {"porter", "porter.errors", "porter.exit_codes", "porter.runtime"},   # a command by name, importlib
    "porter.__main__": {"porter.cli"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PORTER.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (PORTER.parent / rel).with_suffix(".py").is_file() or \
        (PORTER.parent / rel / "__init__.py").is_file()


def imports(path: Path) -> set[str]:
    """The porter modules `path` imports, lazily or not: `from porter.x import y` is the module
    porter.x.y when y is one, else porter.x."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}")
                     else node.module for a in node.names]
        else:
            continue
        found |= {n for n in names if n == "porter" or n.startswith("porter.")}
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) - {module_name(p)} for p in sorted(PORTER.rglob("*.py"))}


def allowed(package: str) -> set[str]:
    """The porter names the package's docstring allows (its "May import:" sentence)."""
    doc = ast.get_docstring(ast.parse((PORTER / package / "__init__.py").read_text())) or ""
    m = re.search(r"May import:(.*?)(?:\b[Nn]ever\b|\Z)", doc, re.S)
    assert m, f"porter/{package}/__init__.py does not say what it may import ('May import: ...')"
    return set(re.findall(r"`(porter(?:\.\w+)*)`", m.group(1)))


def permits(rules: set[str], target: str) -> bool:
    return any(target == r or (r != "porter" and target.startswith(r + ".")) for r in rules)


def _package(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_imports_only_what_its_docstring_allows(package):
    rules = allowed(package)
    crossing = {m: sorted(t for t in targets if _package(t) != package and not permits(rules, t))
                for m, targets in graph().items() if m.split(".")[1:2] == [package]}
    assert {m: t for m, t in crossing.items() if t} == {}


def test_the_root_modules_import_only_what_they_need():
    g = graph()
    crossing = {m: sorted(t for t in g[m] if not permits(rules, t)) for m, rules in ROOT_MODULES.items()}
    assert {m: t for m, t in crossing.items() if t} == {}


def test_nothing_but_the_tests_imports_the_cli_a_command_or_the_test_support():
    g = graph()
    top = ("porter.cli", "porter.__main__", "porter.commands", "porter.testing")
    climbing = {m: sorted(t for t in targets if t.startswith(top) and _package(t) != _package(m))
                for m, targets in g.items() if not m.startswith(("porter.__main__", "porter.testing"))}
    assert {m: t for m, t in climbing.items() if t and m != "porter.__main__"} == {}


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), or with a self-loop."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in g.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_module_import_graph_has_no_cycle():
    assert _cycles(graph()) == []


def test_the_package_import_graph_has_no_cycle():
    packages: dict[str, set[str]] = {}
    for m, targets in graph().items():
        packages.setdefault(_package(m), set()).update(
            _package(t) for t in targets if _package(t) != _package(m))
    assert _cycles(packages) == []


def test_the_cycle_finder_finds_a_cycle():
    # the two tests above would pass on a finder that never finds one
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_a_rule_is_read_from_the_docstring():
    assert allowed("apply") == {"porter.errors", "porter.source.checkout"}
    assert permits({"porter.source"}, "porter.source.checkout")
    assert not permits({"porter.source.checkout"}, "porter.source.cpp_scan")
    assert not permits({"porter"}, "porter.harness")


def test_module_names_are_unique_across_porter():
    """A module name says what it does: none repeats one elsewhere in porter (two
    `backend.py`, two `runner.py`, two `verify.py` meant different things)."""
    names: dict[str, list[str]] = {}
    for path in PORTER.rglob("*.py"):
        if path.name != "__init__.py":
            names.setdefault(path.stem, []).append(str(path.relative_to(PORTER)))
    repeated = {n: sorted(p) for n, p in names.items() if len(p) > 1}
    assert repeated == {}


def test_the_root_holds_few_modules_and_every_package_says_what_it_is_for():
    assert len(list(PORTER.glob("*.py"))) <= 8
    for init in PORTER.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(PORTER)} has no docstring"


def _owner(module: str) -> str:
    """porter.harness.edges -> porter.harness; a root module is its own package."""
    return ".".join(module.split(".")[:2])


def private_imports(path: Path, module: str | None = None) -> list[tuple[str, str]]:
    """(module, name) of each `_name` that `path` (the module `module`, by default its own
    name) imports from a porter module of another package
    (`from porter.harness.mps_shader_device import _scalar_arg` in porter.review)."""
    here = _owner(module or module_name(path))
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.startswith("porter.") and _owner(node.module) != here:
            found += [(node.module, a.name) for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_packages_private_names():
    """A leading underscore says "this package's own": another package that imports it is tied
    to an internal the owner may change without a word (review/bench_writer read
    harness/mps_shader_device's `_scalar_arg`). Make it public, or move it where both belong."""
    found = {module_name(p): private_imports(p) for p in sorted(PORTER.rglob("*.py"))}
    assert {m: f for m, f in found.items() if f} == {}


def test_the_private_import_finder_finds_one(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from porter.harness.mps_shader_device import _scalar_arg\n"
                       "from porter.review.bench_writer import _own\n"
                       "from porter.harness.edges import __doc__\n")
    assert private_imports(planted, "porter.review.planted") == [
        ("porter.harness.mps_shader_device", "_scalar_arg")]
