"""The review checks (PORTER050-PORTER053) on the real-size tree: each fires on a planted defect,
with a golden message, and stays quiet on the tree as built and on the defect's correct twin."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import expecttest

from porter.cli import main
from porter.source.checkout import KERNELS

T = expecttest.TestCase()
UNARY = f"{KERNELS}/UnaryKernel.metal"
BINARY = f"{KERNELS}/BinaryKernel.metal"
REVIEW = "PORTER050,PORTER051,PORTER052,PORTER053"


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def check(root: Path, capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["check", "--root", str(root), "--select", REVIEW, *args])
    return code, capsys.readouterr().out


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def commit_all(root: Path) -> None:
    if not (root / ".git").exists():
        git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")


def test_the_real_size_tree_is_clean(real_root, capsys):
    assert check(real_root, capsys) == (0, "")


def test_fast_math_in_a_functor(real_root, capsys):
    edit(real_root, UNARY, "return T(precise::exp(float(x)));", "return T(metal::fast::exp(float(x)));")
    code, out = check(real_root, capsys)
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:12: PORTER050 fast-math-in-functor: exp_functor calls fast::exp: fast math trades accuracy (and inf/NaN handling) for speed, and the CPU reference it is compared with does not (use precise::exp or the c10/metal routine)
""")


def test_fast_math_only_in_a_changed_functor_with_changed_since(real_root, capsys):
    # an old fast:: in exp is not this change's; the one the change writes into sin is
    edit(real_root, UNARY, "return T(precise::exp(float(x)));", "return T(fast::exp(float(x)));")
    commit_all(real_root)
    edit(real_root, UNARY, "return T(precise::cos(float(x)));", "return T(precise::cos(float(x)) + 0);")
    assert check(real_root, capsys, "--changed-since", "HEAD") == (0, "")
    edit(real_root, UNARY, "return T(precise::sin(float(x)));", "return T(fast::sin(float(x)));")
    code, out = check(real_root, capsys, "--changed-since", "HEAD", "--format", "lintrunner")
    assert code == 0          # lintrunner adapters never exit uncleanly
    messages = [json.loads(line) for line in out.splitlines()]
    assert [(m["name"], m["line"], m["description"][:33]) for m in messages] == [
        ("fast-math-in-functor", 40, "[PORTER050] sin_functor calls fas")]


def test_fast_math_in_a_comment_or_outside_a_functor_is_none(real_root, capsys):
    edit(real_root, UNARY, "return T(precise::exp(float(x)));",
         "// not fast::exp, which drops subnormals\n    return T(precise::exp(float(x)));")
    edit(real_root, UNARY, "using namespace c10::metal;", "using namespace c10::metal;\nusing metal::fast::exp;")
    assert check(real_root, capsys) == (0, "")


def test_metal_max_on_floats_drops_nan(real_root, capsys):
    edit(real_root, BINARY, "::metal::fmax(float(a), float(b))", "::metal::max(float(a), float(b))")
    edit(real_root, BINARY, "::metal::fmin(float(a), float(b))", "clamp(float(a), 0.0f, float(b))")
    code, out = check(real_root, capsys)
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/kernels/BinaryKernel.metal:24: PORTER051 nan-dropping-min-max: fmax_functor calls Metal's max() on floats, which returns the other operand when one is NaN; the CPU kernel propagates NaN, so a NaN input gives a number here (use c10::metal::max (NaN-propagating))
aten/src/ATen/native/mps/kernels/BinaryKernel.metal:31: PORTER051 nan-dropping-min-max: fmin_functor calls Metal's clamp() on floats, which returns the other operand when one is NaN; the CPU kernel propagates NaN, so a NaN input gives a number here (use c10::metal::min/max (NaN-propagating), or test isnan first)
""")


def test_c10_metal_max_and_integer_overloads_keep_nan(real_root, capsys):
    edit(real_root, BINARY, "::metal::fmax(float(a), float(b))", "c10::metal::max(float(a), float(b))")
    # an overload only integers take has no NaN to lose
    edit(real_root, BINARY, """  template <typename T, enable_if_t<!is_floating_point_v<T>, bool> = true>
""", """  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline T operator()(const T a, const T b, bool) {
    return max(a, b);
  }
  template <typename T, enable_if_t<!is_floating_point_v<T>, bool> = true>
""")
    assert check(real_root, capsys) == (0, "")


def test_a_helper_c10_metal_already_has(real_root, capsys):
    edit(real_root, UNARY, "struct exp_functor {",
         "inline float expm1f(float a) {\n  return precise::exp(a) - 1.0f;\n}\n\nstruct exp_functor {")
    code, out = check(real_root, capsys)
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:9: PORTER052 duplicate-c10-metal-helper: expm1f(float) duplicates c10::metal::expm1f(float) (c10/metal/expm1f.h:85); two copies drift apart, and with `using namespace c10::metal` a call may pick either (delete it and call c10::metal::expm1f)
""")


def test_a_helper_of_another_signature_is_none(real_root, capsys):
    edit(real_root, UNARY, "struct exp_functor {",
         "inline float expm1f(float a, float b) {\n  return precise::exp(a) - b;\n}\n\n"
         "template <typename T>\ninline T my_helper(T a) {\n  return a;\n}\n\nstruct exp_functor {")
    assert check(real_root, capsys) == (0, "")


GUARDED = """#if __METAL_VERSION__ >= 310
REGISTER_UNARY_OP(neg, bfloat, bfloat);
#endif
"""


def test_bfloat_outside_the_version_guard(real_root, capsys):
    edit(real_root, UNARY, "REGISTER_UNARY_OP(neg, bfloat, bfloat);\n", GUARDED)
    code, out = check(real_root, capsys)
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:154: PORTER053 bfloat-outside-version-guard: registers erfinv for bfloat outside the file's __METAL_VERSION__ guard (line 132): a Metal without bfloat fails to compile the whole file (move the registration inside the guard with the file's other bfloat lines)
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:174: PORTER053 bfloat-outside-version-guard: registers round_decimals for bfloat outside the file's __METAL_VERSION__ guard (line 132): a Metal without bfloat fails to compile the whole file (move the registration inside the guard with the file's other bfloat lines)
""")


def test_bfloat_inside_the_guard_or_a_guarded_macro_is_none(real_root, capsys):
    edit(real_root, UNARY, "REGISTER_UNARY_OP(neg, bfloat, bfloat);\n", GUARDED)
    edit(real_root, UNARY, "INSTANTIATE_UNARY_KERNELS2(bfloat, bfloat);\n",
         "#if __METAL_VERSION__ >= 310\nINSTANTIATE_UNARY_KERNELS2(bfloat, bfloat);\n#endif\n")
    # a macro defined only on a new enough Metal, with an empty twin for the old one
    edit(real_root, UNARY, "REGISTER_UNARY_ALPHA_OP(round_decimals, bfloat, long, bfloat);\n",
         "#if __METAL_VERSION__ >= 310\n#define ROUND_BF16 REGISTER_UNARY_ALPHA_OP(round_decimals, bfloat, long, bfloat)\n"
         "#else\n#define ROUND_BF16\n#endif\nROUND_BF16;\n")
    code, out = check(real_root, capsys)
    assert (code, out) == (0, ""), out
