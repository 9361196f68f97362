"""porter.port.edits.metal: each edit as a before/after pair, and the texts it leaves alone."""

from __future__ import annotations

from functools import partial

import pytest
from expecttest import assert_expected_inline

from porter.port.edits import metal

FOO = "struct foo_functor {\n  template <typename T>\n  inline T operator()(const T x) {\n    return x;\n  }\n};\n"

EXP = """\
struct exp_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(precise::exp(x));
  }
};
"""

# Upstream's UnaryKernel.metal in miniature: the float-math macro takes the output type first.
KERNELS2 = """\
#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\
  REGISTER_UNARY_OP(erfinv, DTYPE1, DTYPE0);       \\
  REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0)

INSTANTIATE_UNARY_KERNELS2(float, float);
"""

VEC2 = """\
#define INSTANTIATE_UNARY_KERNELS_VEC2(DTYPE) \\
  REGISTER_UNARY_OP(exp, DTYPE##2, DTYPE##2);  \\
  REGISTER_UNARY_OP(sqrt, DTYPE##2, DTYPE##2)

INSTANTIATE_UNARY_KERNELS_VEC2(float);
INSTANTIATE_UNARY_KERNELS_VEC2(half);
"""

BINARY = """\
#define REGISTER_FLOAT_BINARY_OP(NAME) \\
  REGISTER_BINARY_OP(NAME, float, float)
#define REGISTER_INTEGER_BINARY_OP(NAME) \\
  REGISTER_BINARY_OP(NAME, int, int)

REGISTER_FLOAT_BINARY_OP(atan2);
REGISTER_INTEGER_BINARY_OP(atan2);
REGISTER_FLOAT_BINARY_OP(copysign);
"""

# ActivationKernel.metal's layout (upstream, 2025): each functor group, then its registrations,
# bfloat's inside the Metal 3.1 guard.
GROUPED = """\
struct clip_functor {
  template <typename T>
  inline T operator()(const T x, const T limit) {
    return x > limit ? limit : x;
  }
};

REGISTER_UNARY_ALPHA_OP(clip, float, float, float);
#if __METAL_VERSION__ >= 310
REGISTER_UNARY_ALPHA_OP(clip, bfloat, bfloat, bfloat);
#endif

struct twice_functor {
  template <typename T>
  inline T operator()(const T x) {
    return x + x;
  }
};

REGISTER_UNARY_OP(twice, float, float);
#if __METAL_VERSION__ >= 310
REGISTER_UNARY_OP(twice, bfloat, bfloat);
#endif
"""

_noop = (
    pytest.param(partial(metal.add_functor, op="exp", functor=FOO, kind="unary"), EXP,
                 id="functor already there"),
    pytest.param(partial(metal.add_functor, op="erfinv", functor=FOO, kind="unary"),
                 "DEFINE_UNARY_FLOATING_FUNCTOR(erfinv);\n", id="functor from the floating macro"),
    pytest.param(partial(metal.add_unary_registration, op="exp", use_kernels2=True, pairs=[]), KERNELS2,
                 id="already in INSTANTIATE_UNARY_KERNELS2"),
    pytest.param(partial(metal.add_unary_registration, op="abs", use_kernels2=False, pairs=[("int", "int")]),
                 "REGISTER_UNARY_OP(abs, int, int);\n", id="pair already registered"),
    pytest.param(partial(metal.add_complex_registration, op="exp", kind="unary"), VEC2,
                 id="complex unary already in the VEC2 macro"),
    pytest.param(partial(metal.add_complex_registration, op="exp", kind="unary"),
                 VEC2.replace("INSTANTIATE_UNARY_KERNELS_VEC2(half);\n", ""),
                 id="in the VEC2 macro, which the file instantiates for float only"),
    pytest.param(partial(metal.add_complex_registration, op="mul", kind="binary"),
                 "REGISTER_BINARY_OP(mul, float2, float2);\nREGISTER_BINARY_OP(mul, half2, half2);\n",
                 id="complex pairs already registered"),
    pytest.param(partial(metal.add_binary_registration, op="atan2",
                         macros=["REGISTER_FLOAT_BINARY_OP", "REGISTER_INTEGER_BINARY_OP"]), BINARY,
                 id="binary macros already invoked"),
    pytest.param(partial(metal.add_binary_registration, op="atan2", macros=[]), BINARY,
                 id="no binary macro asked for"),
)


@pytest.mark.parametrize(("edit", "text"), _noop)
def test_noop(edit, text):
    assert edit(text) == text


_fixes = (
    pytest.param(partial(metal.add_functor, op="foo", functor=FOO, kind="unary"),
                 EXP + "\nDEFINE_UNARY_FLOATING_FUNCTOR(erfinv);\n",
                 EXP + "\n" + FOO + "\nDEFINE_UNARY_FLOATING_FUNCTOR(erfinv);\n",
                 id="unary functor after the last functor before the floating macros"),
    pytest.param(partial(metal.add_functor, op="foo", functor=FOO, kind="unary"),
                 "#include <metal_stdlib>\n", "#include <metal_stdlib>\n\n" + FOO,
                 id="unary functor with no anchor: at the end"),
    pytest.param(partial(metal.add_functor, op="foo", functor=FOO, kind="binary"),
                 EXP.replace("exp", "atan2") + EXP, EXP.replace("exp", "atan2") + "\n" + FOO + "\n" + EXP,
                 id="binary functor right after atan2's"),
    pytest.param(partial(metal.add_functor, op="foo", functor=FOO, kind="binary"),
                 EXP + "\n// Complex binary functors\n",
                 EXP + "\n" + FOO + "\n// Complex binary functors\n",
                 id="binary functor before the complex ones"),
    pytest.param(partial(metal.add_unary_registration, op="foo", use_kernels2=True, pairs=[]), KERNELS2,
                 KERNELS2.replace("  REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0)\n",
                                  "  REGISTER_UNARY_OP(foo, DTYPE1, DTYPE0);          \\\n"
                                  "  REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0)\n"),
                 id="one line inside INSTANTIATE_UNARY_KERNELS2, backslash aligned, output type first"),
    pytest.param(partial(metal.add_unary_registration, op="foo", use_kernels2=True, pairs=[]),
                 "#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0)\n"
                 "INSTANTIATE_UNARY_KERNELS2(float, float);\n",
                 "#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0); \\\n"
                 "  REGISTER_UNARY_OP(foo, DTYPE1, DTYPE0)\n"
                 "INSTANTIATE_UNARY_KERNELS2(float, float);\n",
                 id="one-line macro grows a continuation line"),
    pytest.param(partial(metal.add_unary_registration, op="foo", use_kernels2=True, pairs=[]),
                 "#include <metal_stdlib>\n",
                 "#include <metal_stdlib>\n" + "".join(
                     f"REGISTER_UNARY_OP(foo, {i}, {o});\n" for i, o in (
                         ("float", "float"), ("half", "half"), ("bfloat", "bfloat"), ("long", "float"),
                         ("int", "float"), ("short", "float"), ("uchar", "float"), ("char", "float"),
                         ("bool", "float"))),
                 id="no INSTANTIATE_UNARY_KERNELS2: one line per dtype"),
    pytest.param(partial(metal.add_unary_registration, op="foo", use_kernels2=False,
                         pairs=[("float", "bool"), ("int", "bool")]),
                 "REGISTER_UNARY_OP(abs, int, int);\n\n" + KERNELS2,
                 "REGISTER_UNARY_OP(abs, int, int);\n\n"
                 "REGISTER_UNARY_OP(foo, float, bool);\nREGISTER_UNARY_OP(foo, int, bool);\n\n" + KERNELS2,
                 id="per-dtype lines: a block of their own after the last top-level REGISTER_UNARY_OP "
                    "before the KERNELS2 macro"),
    pytest.param(partial(metal.add_unary_registration, op="foo", use_kernels2=False, pairs=[("int", "int")]),
                 KERNELS2, "REGISTER_UNARY_OP(foo, int, int);\n\n" + KERNELS2,
                 id="per-dtype lines with no anchor: before the KERNELS2 macro"),
    pytest.param(partial(metal.add_complex_registration, op="foo", kind="unary"), VEC2,
                 VEC2.replace("  REGISTER_UNARY_OP(sqrt,", "  REGISTER_UNARY_OP(foo, DTYPE##2, DTYPE##2);  \\\n"
                                                       "  REGISTER_UNARY_OP(sqrt,"),
                 id="complex unary joins INSTANTIATE_UNARY_KERNELS_VEC2 with its own DTYPE##2"),
    pytest.param(partial(metal.add_complex_registration, op="foo", kind="unary"),
                 "REGISTER_UNARY_OP(exp, float2, float2);\n",
                 "REGISTER_UNARY_OP(exp, float2, float2);\nREGISTER_UNARY_OP(foo, float2, float2);\n"
                 "REGISTER_UNARY_OP(foo, half2, half2);\n",
                 id="complex unary without the VEC2 macro: a line per complex type"),
    pytest.param(partial(metal.add_complex_registration, op="foo", kind="binary"),
                 "REGISTER_BINARY_OP(foo, float2, float2);\n",
                 "REGISTER_BINARY_OP(foo, float2, float2);\nREGISTER_BINARY_OP(foo, half2, half2);\n",
                 id="complex binary: only the missing type"),
    pytest.param(partial(metal.add_binary_registration, op="foo",
                         macros=["REGISTER_FLOAT_BINARY_OP", "REGISTER_INTEGER_BINARY_OP"]), BINARY,
                 BINARY.replace("REGISTER_INTEGER_BINARY_OP(atan2);\n",
                                "REGISTER_INTEGER_BINARY_OP(atan2);\nREGISTER_FLOAT_BINARY_OP(foo);\n"
                                "REGISTER_INTEGER_BINARY_OP(foo);\n"),
                 id="binary registrations beside atan2's, after the macros' defines"),
    pytest.param(partial(metal.add_binary_registration, op="foo", macros=["REGISTER_FLOAT_BINARY_OP"]),
                 BINARY.split("\n\n")[0] + "\n\n// end\n",
                 BINARY.split("\n\n")[0].replace("float, float)\n", "float, float)\nREGISTER_FLOAT_BINARY_OP(foo);\n")
                 + "\n\n// end\n",
                 id="binary registration with no other: right after its macro's define"),
    pytest.param(partial(metal.add_binary_registration, op="foo", macros=["REGISTER_FLOAT_BINARY_OP"]),
                 FOO + "\nstruct bar_functor {};\n",
                 FOO + "\nREGISTER_BINARY_OP(foo, float, float);\nREGISTER_BINARY_OP(foo, half, half);\n"
                 "REGISTER_BINARY_OP(foo, bfloat, bfloat);\n\nstruct bar_functor {};\n",
                 id="a file with no file-local macros: base lines after the functor"),
    pytest.param(partial(metal.add_functor, op="foo", functor=FOO, kind="unary"), GROUPED,
                 GROUPED + "\n" + FOO,
                 id="a functor does not split a group from its registrations"),
    pytest.param(partial(metal.add_alpha_registration, op="clip", kind="unary",
                         rows=[("float", "float", "float"), ("half", "half", "half"),
                               ("bfloat", "bfloat", "bfloat")]),
                 GROUPED.replace("REGISTER_UNARY_ALPHA_OP(clip, float, float, float);\n#if __METAL_VERSION__ >= 310\n"
                                 "REGISTER_UNARY_ALPHA_OP(clip, bfloat, bfloat, bfloat);\n#endif\n\n", ""),
                 GROUPED.replace("};\n\nREGISTER_UNARY_ALPHA_OP(clip, float, float, float);\n#if",
                                 "};\n\nREGISTER_UNARY_ALPHA_OP(clip, float, float, float);\n"
                                 "REGISTER_UNARY_ALPHA_OP(clip, half, half, half);\n#if", 1),
                 id="bfloat registrations inside the file's own __METAL_VERSION__ guard"),
)


@pytest.mark.parametrize(("edit", "before", "after"), _fixes)
def test_fixes(edit, before, after):
    assert edit(before) == after
    assert edit(after) == after          # a second run has nothing to do


def test_a_binary_macro_the_file_does_not_define_is_refused():
    with pytest.raises(ValueError, match="REGISTER_INT2FLOAT_BINARY_OP is not defined in this file"):
        metal.add_binary_registration(BINARY, "foo", ["REGISTER_INT2FLOAT_BINARY_OP"])


_plans = (
    pytest.param(frozenset({"float32", "float16", "bfloat16", "int32"}), True, False, (True, []),
                 id="float math over every float: the INSTANTIATE_UNARY_KERNELS2 line"),
    pytest.param(frozenset({"float32", "int32"}), True, False, (False, [("float", "float"), ("int", "float")]),
                 id="promoting, some floats missing: per-dtype pairs"),
    pytest.param(frozenset({"float32", "int32"}), False, False, (False, [("float", "float"), ("int", "int")]),
                 id="same-type"),
    pytest.param(frozenset({"float32", "bool", "complex64"}), True, True,
                 (False, [("float", "bool"), ("bool", "bool")]), id="bool output; complex left to VEC2"),
)


@pytest.mark.parametrize(("dtypes", "promotes", "returns_bool", "plan"), _plans)
def test_unary_registration_plan(dtypes, promotes, returns_bool, plan):
    assert metal.unary_registration_plan(dtypes, promotes, returns_bool) == plan


@pytest.mark.parametrize(("dtypes", "promotes", "macros"), (
    pytest.param(frozenset({"float32"}), False, ["REGISTER_FLOAT_BINARY_OP"], id="floats"),
    pytest.param(frozenset({"float32", "int64"}), True,
                 ["REGISTER_FLOAT_BINARY_OP", "REGISTER_INT2FLOAT_BINARY_OP"], id="ints computed in float"),
    pytest.param(frozenset({"bool"}), False, ["REGISTER_INTEGER_BINARY_OP"], id="bool is integral here"),
))
def test_binary_registration_macros(dtypes, promotes, macros):
    assert metal.binary_registration_macros(dtypes, promotes) == macros


# --- source order: where a new functor goes ------------------------------------------------

def _functor(name: str) -> str:
    return FOO.replace("foo", name)


def _placed(text: str, op: str, kind: str = "unary") -> str:
    """The functor names of `text` after adding op's, in file order."""
    from porter.source.metal_scan import MetalFile
    out = metal.add_functor(text, op, _functor(op), kind)
    assert metal.add_functor(out, op, _functor(op), kind) == out     # nothing to do the second time
    return " ".join(n for n, _ in sorted(MetalFile(out).functor_spans.items(), key=lambda i: i[1][0]))


UNSORTED = "".join(_functor(n) + "\n" for n in ("exp", "sin", "cos", "sqrt")) + (
    "#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\\n"
    "  REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0);        \\\n"
    "  REGISTER_UNARY_OP(sin, DTYPE1, DTYPE0);        \\\n"
    "  REGISTER_UNARY_OP(foo, DTYPE1, DTYPE0);        \\\n"
    "  REGISTER_UNARY_OP(cos, DTYPE1, DTYPE0)\n")


@pytest.mark.parametrize(("text", "op", "order"), [
    pytest.param(UNSORTED, "foo", "exp sin foo cos sqrt",
                 id="after the functor of the op registered just before it"),
    pytest.param(UNSORTED.replace("REGISTER_UNARY_OP(sin", "REGISTER_UNARY_OP(erfinv"), "foo",
                 "exp foo sin cos sqrt", id="a neighbour with no struct functor is skipped"),
    pytest.param(UNSORTED, "bar", "exp sin cos sqrt bar",
                 id="not registered yet: after the last functor"),
    pytest.param("".join(_functor(n) + "\n" for n in ("acos", "exp", "sin")), "cos",
                 "acos cos exp sin", id="alphabetical file: alphabetical place"),
    pytest.param("".join(_functor(n) + "\n" for n in ("acos", "exp", "sin")), "abs",
                 "abs acos exp sin", id="alphabetical file: first"),
    pytest.param("".join(_functor(n) + "\n" for n in ("acos", "exp", "sin")), "tan",
                 "acos exp sin tan", id="alphabetical file: last"),
])
def test_functor_source_order(text, op, order):
    assert _placed(text, op) == order


def test_a_functor_kept_with_its_registrations_is_not_split():
    """ActivationKernel.metal keeps each functor with its registrations: the new one goes after
    the block, alphabetically when the functors are sorted."""
    units = "".join(_functor(n) + "\nREGISTER_UNARY_ALPHA_OP(" + n + ", float, float, float);\n\n"
                    for n in ("elu", "hardshrink", "leaky_relu"))
    out = metal.add_functor(units, "gelu", _functor("gelu"), "unary")
    assert_expected_inline(out.replace(FOO.split("\n", 1)[1], "...\n"), """\
struct elu_functor {
...

REGISTER_UNARY_ALPHA_OP(elu, float, float, float);

struct gelu_functor {
...

struct hardshrink_functor {
...

REGISTER_UNARY_ALPHA_OP(hardshrink, float, float, float);

struct leaky_relu_functor {
...

REGISTER_UNARY_ALPHA_OP(leaky_relu, float, float, float);

""")
    unsorted = units.replace("hardshrink", "zeta")
    out = metal.add_functor(unsorted, "gelu", _functor("gelu"), "unary")
    assert out.endswith("REGISTER_UNARY_ALPHA_OP(leaky_relu, float, float, float);\n\n" + _functor("gelu") + "\n")


def test_a_unary_functor_in_a_file_without_unary_kernel_macros_is_followed_by_its_registrations():
    # ActivationKernel.metal's style: each functor, then its own per-dtype lines
    from porter.port.edits import metal as metal_edit
    text = ("struct relu_functor {\n  template <typename T>\n  inline T operator()(const T x) { return x; }\n};\n\n"
            "REGISTER_UNARY_OP(relu, float, float);\n")
    functor = "struct mish_functor {\n  template <typename T>\n  inline T operator()(const T x) { return x; }\n};\n"
    assert metal_edit.registers_beside_functor(text, "unary")
    with_functor = metal_edit.add_functor(text, "mish", functor, "unary")
    out = metal_edit.add_unary_registration(with_functor, "mish", False, [("float", "float"), ("half", "half")])
    assert out.endswith("struct mish_functor {\n  template <typename T>\n  inline T operator()(const T x) "
                        "{ return x; }\n};\n\nREGISTER_UNARY_OP(mish, float, float);\n"
                        "REGISTER_UNARY_OP(mish, half, half);\n")
    # UnaryKernel.metal keeps its own order (its instantiation macro)
    assert not metal_edit.registers_beside_functor(
        text + "#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\\n  REGISTER_UNARY_OP(x, DTYPE1, DTYPE0)\n", "unary")
