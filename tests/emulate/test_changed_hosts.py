"""The `.mm` files the work tree changes are parsed, MPSGraph files included (review 21's H12,
H12c, H13: after `migrate-from-mpsgraph logit`, a call of the helper the migration deleted or a
missing `;` in UnaryOps.mm, and an undeclared name in BinaryOps.mm, were green on every dtype)."""

from __future__ import annotations

import subprocess

import pytest

from porter.emulate.changed_hosts import _removed_identifiers, changed_hosts, introduced
from tests.porter_run import porter

REL = "aten/src/ATen/native/mps/operations/UnaryOps.mm"

# (id, errors as host_compile lists them, changed lines, removed names, (stops, not proven) lines)
CASES = [
    ("a syntax error on an unchanged line: clang places a missing ';' after the change",
     [[REL, 12, "expected ';' after top level declarator", "syntax"]], {11}, set(), ([12], [])),
    ("a removed name still used on a line HEAD had",
     [[REL, 40, "use of undeclared identifier 'logit_mps_impl'", "error"]], {3}, {"logit_mps_impl"},
     ([40], [])),
    ("an unknown name on a changed line: perhaps a generated header's",
     [[REL, 9, "use of undeclared identifier 'structured_x_out_mps'", "error"]], {9}, set(), ([], [9])),
    ("a changed line repeating an error a line HEAD had has: the same want, copied",
     [[REL, 30, "use of undeclared identifier 'sizes'", "error"],
      [REL, 60, "use of undeclared identifier 'sizes'", "error"]], {60}, set(), ([], [])),
    ("an error on a line HEAD had, naming nothing removed: porter's want of a framework",
     [[REL, 30, "use of undeclared identifier 'structured_x_out_mps'", "error"]], {9}, set(), ([], [])),
    ("a name of Apple's frameworks on a changed line",
     [[REL, 9, "unknown type name 'MPSGraphTensor'", "apple"]], {9}, set(), ([], [])),
    ("a parse that stopped before a changed line",
     [[REL, 5, "'ATen/native/mps/X.h' file not found", "stopped"]], {9}, set(), ([], [5])),
    ("a parse that stopped at an SDK header: porter's want of Apple's frameworks",
     [[REL, 5, "'mach-o/dyld.h' file not found", "stopped"]], {9}, set(), ([], [])),
    ("a parse that stopped after every changed line",
     [[REL, 50, "'ATen/native/mps/X.h' file not found", "stopped"]], {9}, set(), ([], [])),
    ("an error in another file",
     [["aten/src/ATen/native/mps/Copy.h", 9, "expected ';'", "syntax"]], {9}, set(), ([], [])),
]


@pytest.mark.parametrize(("found", "lines", "removed", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_which_errors_a_change_makes(found, lines, removed, want):
    stops, unproven = introduced(found, REL, lines, removed)
    assert ([e[1] for e in stops], [e[1] for e in unproven]) == want


def test_the_removed_lines_identifiers_are_kept_by_the_work_trees_path():
    diff = (f"diff --git a/{REL} b/{REL}\n--- a/{REL}\n+++ b/{REL}\n@@ -3,2 +2,0 @@\n"
            "-static void logit_mps_impl(const Tensor& self) {\n-}\n"
            "diff --git a/x.mm b/x.mm\n--- a/x.mm\n+++ /dev/null\n@@ -1 +0,0 @@\n-int gone;\n")
    assert _removed_identifiers(diff) == {REL: {"static", "void", "logit_mps_impl", "const",
                                                "Tensor", "self"}}


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def migrated(real_root):
    _git(real_root, "init", "-q")
    _git(real_root, "add", "-A")
    _git(real_root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    assert porter("migrate-from-mpsgraph", "logit", root=real_root).code == 0
    assert set(changed_hosts(real_root)) >= {real_root / REL}
    return real_root


LEFTOVER = """static Tensor& logit_leftover_mps(const Tensor& self, std::optional<double> eps, Tensor& r) {
  logit_mps_impl(self, eps, r, "logit_leftover_mps");
  return r;
}

"""
# (id, file, put before this text, the code, the verdict, what it names)
PLANTS = [
    ("a call of the helper the migration deleted", REL, "TORCH_IMPL_FUNC(sgn_out_mps)", LEFTOVER,
     "does not build", "'logit_mps_impl'"),
    ("a missing semicolon", REL, "TORCH_IMPL_FUNC(sgn_out_mps)",
     "static int porter_missing_semicolon = 1\n\n", "does not build", "expected ';'"),
    ("an undeclared name in another MPSGraph file", "aten/src/ATen/native/mps/operations/BinaryOps.mm",
     "static void binaryOpTensor(", "static void dangling() { undeclared_helper_mps(); }\n\n",
     "not proven", "'undeclared_helper_mps', on a line the work tree changes"),
]


def test_a_migration_and_its_changes_to_mpsgraph_files(migrated):
    run = ("test", "logit", "--device", "emulate", "--samples-only", "--dtype", "float32")
    clean = porter(*run, root=migrated)
    assert clean.code == 0, clean.out + clean.err
    for _, rel, anchor, code, verdict, named in PLANTS:
        path = migrated / rel
        before = path.read_text()
        assert before.count(anchor) == 1, anchor
        at = before.index(anchor)
        path.write_text(before[:at] + code + before[at:])
        result = porter(*run, root=migrated)
        path.write_text(before)
        assert result.code == 1, (rel, result.out)
        assert verdict in result.out and named in result.out, result.out
