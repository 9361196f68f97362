"""The `.mm` files the work tree changes are parsed, MPSGraph files included (review 21's H12,
H12c, H13: after `migrate-from-mpsgraph logit`, a call of the helper the migration deleted or a
missing `;` in UnaryOps.mm, and an undeclared name in BinaryOps.mm, were green on every dtype)."""

from __future__ import annotations

import subprocess

import pytest

from porter.emulate.changed_hosts import (Change, _removed_identifiers, changed_hosts, header_readers,
                                          introduced)
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
    ("a parse that stopped at an SDK header before a changed line: the change is unread",
     [[REL, 5, "'mach-o/foo.h' file not found", "stopped"]], {9}, set(), ([], [5])),
    ("a parse that stopped after every changed line",
     [[REL, 50, "'ATen/native/mps/X.h' file not found", "stopped"]], {9}, set(), ([], [])),
    ("an error in another file",
     [["aten/src/ATen/native/mps/Copy.h", 9, "expected ';'", "syntax"]], {9}, set(), ([], [])),
    # code that sets a stub's MPS function as porter does not model (host_registrations)
    ("a RegisterMPSDispatch specialization on a changed line",
     [[REL, 9, "a RegisterMPSDispatch of the checkout's own", "unmodelled"]], {9}, set(), ([], [9])),
    ("such code on a line the change leaves", [[REL, 30, "`set_mps_dispatch_ptr` sets", "unmodelled"]],
     {9}, set(), ([], [])),
    ("such code in a header the new file includes, whatever its line (review 28's R18)",
     [["aten/src/ATen/native/mps/Reg.h", 30, "an operator registered in a header", "unmodelled"]],
     {9}, set(), ([], [30])),
]


@pytest.mark.parametrize(("found", "lines", "removed", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_which_errors_a_change_makes_without_heads_parse(found, lines, removed, want):
    """An untracked file: no HEAD to compare with, the lines the change adds are read."""
    stops, unproven = introduced(found, REL, Change(lines, removed))
    assert ([e[1] for e in stops], [e[1] for e in unproven]) == want


HEAD = "void helper(int a);\nvoid caller() {\n  helper(1);\n}\nint x = UNKNOWN_APPLE_THING;\n"
# (id, the work tree's text, its errors, HEAD's errors, touched lines, removed, (stops, not proven))
AGAINST_HEAD = [
    ("a changed signature breaks a caller on a line HEAD had (review 22's BH5)",
     HEAD.replace("int a", "int a, int b"),
     [[REL, 3, "no matching function for call to 'helper'", "error"]], [], {1}, set(), ([], [3])),
    ("an error HEAD's parse has on a line of the same text: porter's want, moved by the change",
     "// a new comment\n" + HEAD, [[REL, 6, "use of undeclared identifier 'UNKNOWN_APPLE_THING'", "error"]],
     [[REL, 5, "use of undeclared identifier 'UNKNOWN_APPLE_THING'", "error"]], {1}, set(), ([], [])),
    ("the same words on a changed line: a new error", HEAD.replace("helper(1)", "UNKNOWN_APPLE_THING"),
     [[REL, 3, "use of undeclared identifier 'UNKNOWN_APPLE_THING'", "error"],
      [REL, 5, "use of undeclared identifier 'UNKNOWN_APPLE_THING'", "error"]],
     [[REL, 5, "use of undeclared identifier 'UNKNOWN_APPLE_THING'", "error"]], {3}, set(), ([], [3])),
    ("a name a deletion removed, still used on a line HEAD had",
     HEAD.replace("void helper(int a);\n", ""), [[REL, 2, "use of undeclared identifier 'helper'", "error"]],
     [], {1}, {"void", "helper", "int", "a"}, ([2], [])),
    ("a stop HEAD's parse has too, with a pure deletion after it (review 22's BH4)",
     HEAD.replace("  helper(1);\n", ""), [[REL, 1, "'mach-o/dyld.h' file not found", "stopped"]],
     [[REL, 1, "'mach-o/dyld.h' file not found", "stopped"]], {3}, set(), ([], [1])),
    ("a RegisterMPSDispatch specialization the base has not", HEAD + "template <> struct R {};\n",
     [[REL, 6, "a RegisterMPSDispatch of the checkout's own", "unmodelled"]], [], {6}, set(), ([], [6])),
    ("one the base has too, on a line of the same text", "// a new comment\n" + HEAD,
     [[REL, 6, "`set_mps_dispatch_ptr` sets", "unmodelled"]],
     [[REL, 5, "`set_mps_dispatch_ptr` sets", "unmodelled"]], {1}, set(), ([], [])),
    ("a stop HEAD's parse has too, every change before it",
     "// a new comment\n" + HEAD, [[REL, 3, "'x.h' file not found", "stopped"]],
     [[REL, 2, "'x.h' file not found", "stopped"]], {1}, set(), ([], [])),
]


@pytest.mark.parametrize(("text", "found", "head_found", "touched", "removed", "want"),
                         [c[1:] for c in AGAINST_HEAD], ids=[c[0] for c in AGAINST_HEAD])
def test_which_errors_a_change_makes_against_heads_parse(text, found, head_found, touched, removed, want):
    change = Change(set(touched), removed, HEAD, frozenset(touched))
    stops, unproven = introduced(found, REL, change, head_found, text)
    assert ([e[1] for e in stops], [e[1] for e in unproven]) == want


SONOMA = "aten/src/ATen/native/mps/MPSGraphSonomaOps.h"
OTHER = "aten/src/ATen/native/mps/OperationUtils.h"
H_HEAD = "#pragma once\nint sonoma_helper(int);\nMPSGraphTensor* sonoma_tensor();\n"
# (id, the header's work-tree text, the work tree's errors, the base's (the base's text of the
# header overlaid), the names the header's change removed, (stops, not proven) lines): the
# `.mm` itself unchanged (review 24's C1)
HEADER_CASES = [
    ("a syntax error in a changed header", H_HEAD + "int x = ;\n",
     [[SONOMA, 4, "expected expression", "syntax"]], [], set(), ([4], [])),
    ("an error the base's header has on a line of the same text, moved by the change",
     "// new\n" + H_HEAD, [[SONOMA, 4, "unknown type name 'MPSGraphTensor'", "error"]],
     [[SONOMA, 3, "unknown type name 'MPSGraphTensor'", "error"]], set(), ([], [])),
    ("a new error in a changed header: perhaps a generated header's name",
     H_HEAD + "at::Tensor porter_x();\n", [[SONOMA, 4, "no type named 'Tensor' in namespace 'at'", "error"]],
     [], set(), ([], [4])),
    ("a declaration the header's change removed, still used by the `.mm`",
     H_HEAD.replace("int sonoma_helper(int);\n", ""),
     [[REL, 30, "use of undeclared identifier 'sonoma_helper'", "error"]], [], {"int", "sonoma_helper"},
     ([30], [])),
    ("a new error in a header the branch did not change: porter's want of a generated header",
     H_HEAD + "#include <ATen/native/mps/OperationUtils.h>\n",
     [[OTHER, 12, "use of undeclared identifier 'at_generated'", "error"]], [], set(), ([], [])),
    ("a new syntax error in a header the branch did not change", H_HEAD + "#define porter_broken (\n",
     [[OTHER, 12, "expected ')'", "syntax"]], [], set(), ([12], [])),
]


@pytest.mark.parametrize(("header", "found", "head_found", "removed", "want"),
                         [c[1:] for c in HEADER_CASES], ids=[c[0] for c in HEADER_CASES])
def test_which_errors_a_changed_header_makes(header, found, head_found, removed, want):
    text = "#include <ATen/native/mps/MPSGraphSonomaOps.h>\n" * 40
    change = Change(set(), removed, text, frozenset())
    stops, unproven = introduced(found, REL, change, head_found, text, {SONOMA: (header, H_HEAD)})
    assert ([e[1] for e in stops], [e[1] for e in unproven]) == want


def test_which_files_read_a_changed_header(tmp_path):
    """Through the checkout's headers, quoted or not, whatever `#if` holds the include."""
    ops = tmp_path / "aten/src/ATen/native/mps/operations"
    ops.mkdir(parents=True)
    (ops.parent / "MPSGraphSonomaOps.h").write_text("#pragma once\n")
    (ops.parent / "OperationUtils.h").write_text("#if 1\n#include <ATen/native/mps/MPSGraphSonomaOps.h>\n#endif\n")
    (ops / "UnaryOps.mm").write_text('#include "../MPSGraphSonomaOps.h"\n')
    (ops / "BinaryOps.mm").write_text("#include <ATen/native/mps/OperationUtils.h>\n")
    (ops / "Copy.mm").write_text("#include <ATen/native/mps/Other.h>\n")
    assert header_readers(tmp_path, {SONOMA}) == {ops / "BinaryOps.mm": {SONOMA}, ops / "UnaryOps.mm": {SONOMA}}


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
    # inside a TORCH_IMPL_FUNC body of an MPSGraph file, which clang set aside whole while its
    # MPS struct was undeclared (review 22's BH2, BH8: green)
    ("a call of the deleted helper inside another op's TORCH_IMPL_FUNC body", REL,
     "  if (!self.is_complex()) {", '  logit_mps_impl(self, 0.5, const_cast<Tensor&>(output), "sgn");\n',
     "does not build", "'logit_mps_impl'"),
    ("an undeclared name inside a TORCH_IMPL_FUNC body", REL, "  if (!self.is_complex()) {",
     "  undeclared_helper_mps(self);\n", "not proven",
     "'undeclared_helper_mps', an error the branch's change makes, which the base's parse has not"),
    ("an undeclared name in another MPSGraph file", "aten/src/ATen/native/mps/operations/BinaryOps.mm",
     "static void binaryOpTensor(", "static void dangling() { undeclared_helper_mps(); }\n\n",
     "not proven", "'undeclared_helper_mps', an error the branch's change makes, which the base's parse has not"),
]


TRUNC = "static MPSGraphTensor* trunc_tensor(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {"
MISH = "Tensor mish_backward_mps(const Tensor& grad_output, const Tensor& self) {"
# (id, file, old text, new text, the verdict, what it names): changes whose error stands on a
# line HEAD had, which only the comparison with HEAD's parse sees (review 22's BH4, BH5: green)
REPLACED = [
    ("a signature changed, its caller on a line HEAD had", REL, TRUNC,
     TRUNC.replace("inputTensor)", "inputTensor, bool half_away)"), "not proven",
     "UnaryOps.mm:121: too few arguments to function call"),
    ("a helper deleted whole, its caller on a line HEAD had", REL, TRUNC,
     "static MPSGraphTensor* trunc_tensor_unused(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {",
     "not proven", "'trunc_tensor'"),
    # compiles, and a Mac's link fails: its generated registration calls the yaml's signature
    # (review 24's C5)
    ("a kernel the yaml names given a parameter", "aten/src/ATen/native/mps/operations/Activation.mm",
     MISH, MISH.replace("self)", "self, double beta)"), "not proven",
     "'mish_backward_mps' is defined here with another signature than the one native_functions.yaml"),
]


@pytest.mark.slow(seconds=250)
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
    for _, rel, old, new, verdict, named in REPLACED:
        path = migrated / rel
        before = path.read_text()
        assert before.count(old) == 1, old
        path.write_text(before.replace(old, new))
        result = porter(*run, root=migrated)
        path.write_text(before)
        assert result.code == 1, (rel, result.out)
        assert verdict in result.out and named in result.out, result.out


# (id, header, the text appended, the verdict (None: green), what it names): a header only an
# MPSGraph `.mm` reads, which porter parses for no op (review 24's C1: green)
HEADER_PLANTS = [
    ("a syntax error", SONOMA, "\nnamespace porter_broken { int x = ; }\n", "does not build",
     "UnaryOps.mm does not build: aten/src/ATen/native/mps/MPSGraphSonomaOps.h:"),
    ("a well-formed addition (the clean twin)", SONOMA,
     "\nnamespace porter_fine { inline int porter_x() { return 1; } }\n", None, ""),
    ("a comment alone, in a header every file reads", "aten/src/ATen/native/mps/MetalShaderLibrary.h",
     "\n// a note\n", None, ""),
    # every `.mm` reads it, through the installed torch's OperationUtils.h (review 25's H22:
    # only UnaryOps.mm's code expands the macro, and no reader was found)
    ("a macro in a header every file reads", "aten/src/ATen/native/mps/MetalShaderLibrary.h",
     "\n#define is_empty_tensor(...) porter_broken(\n", "not proven",
     "the branch changes aten/src/ATen/native/mps/MetalShaderLibrary.h, which"),
    # a new file of the MPS build's `.cpp` glob (review 25's H31, H37)
    ("a new .cpp of native/mps that does not compile", "aten/src/ATen/native/mps/PorterNew.cpp",
     "namespace at::native {\nstatic int porter_new() { return 1 }\n}\n", "does not build",
     "PorterNew.cpp:2: expected ';' after return statement"),
    ("a new .cpp of ATen/mps that compiles (the clean twin)", "aten/src/ATen/mps/PorterNew.cpp",
     "namespace at::native {\nstatic int porter_new() { return 1; }\n}\n", None, ""),
]


@pytest.mark.slow(seconds=360)
def test_a_header_only_an_mpsgraph_file_reads(migrated):
    run = ("test", "logit", "--device", "emulate", "--samples-only", "--dtype", "float32")
    for _, rel, code, verdict, named in HEADER_PLANTS:
        path = migrated / rel
        before = path.read_text() if path.is_file() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((before or "") + code)
        result = porter(*run, root=migrated)
        if before is None:
            path.unlink()
        else:
            path.write_text(before)
        if verdict is None:
            assert result.code == 0, result.out
        else:
            assert result.code == 1 and verdict in result.out and named in result.out, result.out


@pytest.mark.slow
def test_a_change_committed_on_the_branch_is_read_as_an_uncommitted_one(migrated):
    """The branch's commits since its base (the merge base with main or master, as `porter pr`
    takes it) are what a Mac builds too: a missing `;` committed on a branch fails every dtype,
    as it does uncommitted (review 22's BH1: green once committed)."""
    run = ("test", "logit", "--device", "emulate", "--samples-only", "--dtype", "float32")
    _git(migrated, "checkout", "-q", "-b", "port")
    _git(migrated, "add", "-A")
    _git(migrated, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "port logit")
    assert porter(*run, root=migrated).code == 0
    path = migrated / REL
    text = path.read_text()
    anchor = "TORCH_IMPL_FUNC(sgn_out_mps)"
    path.write_text(text.replace(anchor, "static int porter_missing_semicolon = 1\n\n" + anchor, 1))
    _git(migrated, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "a slip")
    result = porter(*run, root=migrated)
    assert result.code == 1 and "does not build" in result.out and "expected ';'" in result.out, result.out
