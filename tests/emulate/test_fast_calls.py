"""`fast::` functions porter does not model are not proven in the functor a host call runs
(porter.emulate.fast_calls; review 23's N02: `fast::sin` was green)."""

from __future__ import annotations

import pytest

from porter.emulate.fast_calls import unmodelled
from porter.source.checkout import KERNELS
from tests.porter_run import porter

FILE = """struct sin_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(CALL(float(x)));
  }
};

struct cos_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(fast::cos(float(x)));
  }
};
"""


@pytest.mark.parametrize(("call", "want"), [
    ("fast::sin", (4, "fast::sin")),
    ("metal::fast::exp", (4, "fast::exp")),
    ("fast :: divide", (4, "fast :: divide")),
    ("precise::sin", None),
    ("::metal::sin", None),
    # what porter/metal.h answers as a Mac does (tanh) or runs both ways (a NaN of max/min/clamp)
    ("fast::tanh", None),
    ("fast::max", None),
    ("fast::clamp", None),
    # in a comment or a string: no call
    ("/* fast::sin */ sin", None),
])
def test_which_fast_calls_are_not_modelled(call, want):
    assert unmodelled(FILE.replace("CALL", call), "sin") == want


@pytest.mark.parametrize(("before", "call", "want"), [
    # review 24's F1, F3: through an alias or a macro
    ("namespace mf = metal::fast;\n", "mf::sin", (5, "mf::sin")),
    ("#define PORTER_SIN metal::fast::sin\n", "PORTER_SIN", (5, "PORTER_SIN")),
    ("#define PORTER_SIN \\\n  metal::fast::sin\n", "PORTER_SIN", (6, "PORTER_SIN")),
    ("using namespace metal::fast;\n", "sin", (5, "sin")),
    ("#define PORTER_TANH metal::fast::tanh\n", "PORTER_TANH", None),
    ("namespace mp = metal::precise;\n", "mp::sin", None),
    # F5: dropped by the preprocessor
    ("", "\n#if 0\n    fast::sin(0.f);\n#endif\n    precise::sin", None),
])
def test_a_fast_call_through_an_alias_a_macro_or_a_using_directive(before, call, want):
    assert unmodelled(before + FILE.replace("CALL", call), "sin") == want


def test_only_the_kernels_own_functor_is_read():
    assert unmodelled(FILE.replace("CALL", "precise::sin"), "cos") == (11, "fast::cos")
    assert unmodelled(FILE.replace("CALL", "precise::sin"), "tan") is None


@pytest.mark.slow
def test_a_fast_sin_kernel_is_not_proven_and_its_precise_twin_green(real_root):
    path = real_root / KERNELS / "UnaryKernel.metal"
    text = path.read_text()
    assert "precise::sin(float(x))" in text
    run = ("test", "sin", "--device", "emulate", "--dtype", "float32")
    assert porter(*run, root=real_root).code == 0
    path.write_text(text.replace("precise::sin(float(x))", "fast::sin(float(x))"))
    result = porter(*run, root=real_root)
    assert result.code == 1, result.out
    assert "UnaryKernel.metal:" in result.out and ": `fast::sin` is a fast:: function" in result.out


@pytest.mark.parametrize(("space", "code"), [("fast", 1), ("precise", 0)])
@pytest.mark.slow
def test_a_fast_call_the_text_does_not_show_is_caught_as_it_runs(real_root, space, code):
    """Review 30's F04: `fast::sin` reached through a using-declaration in a helper outside the
    functor; no reading of the functor's text finds it, and the shim itself says it ran
    (porter/metal.h's detail::fast_ran). Its precise:: twin stays green."""
    path = real_root / KERNELS / "UnaryKernel.metal"
    text = path.read_text()
    helper = (f"inline float porter_sine(float x) {{\n  using metal::{space}::sin;\n"
              "  return sin(x);\n}\n\n")
    first = text.index("struct sin_functor")
    path.write_text(text[:first] + helper + text[first:].replace(
        "precise::sin(float(x))", "porter_sine(float(x))", 1))
    result = porter("test", "sin", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert result.code == code, result.out
    if code:
        assert "not proven: the kernel ran `fast::sin`" in result.out, result.out
        assert "is a fast:: function" not in result.out     # the text alone did not show it
