"""porter.source.metal_scan.MetalFile: what a `.metal` file registers, as (text, facts) tables."""

from __future__ import annotations

import pytest

from porter.source.metal_scan import MetalFile

# Registrations: (kernel, input type, output type, base macro, line, alpha type, condition porter
# cannot decide) per instantiation.
_noop = (
    pytest.param("// REGISTER_UNARY_OP(exp, float, float);\n", id="in a line comment"),
    pytest.param("/* REGISTER_BINARY_OP(add, int, int); */\n", id="in a block comment"),
    pytest.param("#define R(T) REGISTER_UNARY_OP(exp, T, T)\n", id="a define never instantiated"),
    pytest.param('constant auto s = "REGISTER_UNARY_OP(exp, float, float)";\n', id="in a string"),
    pytest.param("REGISTER_UNARY_OP(exp, float);\n", id="too few arguments"),
    pytest.param("UNKNOWN_MACRO(exp, float, float);\n", id="not a registration macro"),
    pytest.param("#define F(N) REGISTER_UNARY_OP(N, float, float)\nF(exp);\n",
                 id="one-letter macro names are not read as macros"),
    pytest.param("REGISTER_UNARY_OP(exp, float, float\n", id="never closed"),
    pytest.param("#if 0\nREGISTER_UNARY_OP(exp, float, float);\n#endif\n", id="under #if 0"),
    pytest.param("#if 1\n#else\nREGISTER_UNARY_OP(exp, float, float);\n#endif\n",
                 id="in the #else of #if 1"),
    pytest.param("#if 0\n#if __METAL_VERSION__ >= 310\nREGISTER_UNARY_OP(exp, bfloat, bfloat);\n"
                 "#endif\n#endif\n", id="a guard nested in #if 0"),
    pytest.param("#if 1\n#elif 1\nREGISTER_UNARY_OP(exp, float, float);\n#endif\n",
                 id="an #elif after a taken #if"),
)


@pytest.mark.parametrize("text", _noop)
def test_registers_nothing(text):
    assert MetalFile(text).registrations == []


_fixes = (
    pytest.param("REGISTER_UNARY_OP(exp, float, half);\n", [("exp", "float", "half", "REGISTER_UNARY_OP", 1, "", "")],
                 id="base macro: input then output"),
    pytest.param("REGISTER_UNARY_ALPHA_OP(add, int, int, long);\n",
                 [("add", "int", "long", "REGISTER_UNARY_ALPHA_OP", 1, "int", "")],
                 id="alpha macro: output third, alpha second"),
    pytest.param("#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\\n"
                 "  REGISTER_UNARY_OP(erf, DTYPE1, DTYPE0);       \\\n"
                 "  REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0)\n\n"
                 "INSTANTIATE_UNARY_KERNELS2(float, int);\n",
                 [("erf", "int", "float", "REGISTER_UNARY_OP", 5, "", ""), ("exp", "int", "float", "REGISTER_UNARY_OP", 5, "", "")],
                 id="file-local macro expanded, output first, at the invocation's line"),
    pytest.param("#define VEC2(DTYPE) REGISTER_UNARY_OP(exp, DTYPE##2, DTYPE##2)\nVEC2(half);\n",
                 [("exp", "half2", "half2", "REGISTER_UNARY_OP", 2, "", "")], id="token pasting"),
    pytest.param("#define FLOAT_OP(NAME) REGISTER_BINARY_OP(NAME, float, float)\n"
                 "#define FLOAT_INT_OP(NAME) FLOAT_OP(NAME); REGISTER_BINARY_OP(NAME, int, int)\nFLOAT_INT_OP(atan2);\n",
                 [("atan2", "float", "float", "REGISTER_BINARY_OP", 3, "", ""),
                  ("atan2", "int", "int", "REGISTER_BINARY_OP", 3, "", "")], id="macros calling macros"),
    pytest.param("#define SAME_OP(NAME, T) REGISTER_BINARY_OP(NAME, T, T)\nSAME_OP(xlogy, vec<float, 2>);\n",
                 [("xlogy", "vec<float, 2>", "vec<float, 2>", "REGISTER_BINARY_OP", 2, "", "")],
                 id="template argument with a comma"),
    pytest.param("#define REG(T) REGISTER_UNARY_OP(Tanh, T, T)\nREG(float);\n",
                 [("Tanh", "float", "float", "REGISTER_UNARY_OP", 2, "", "")], id="a parameter replaced as a word only"),
    # a Mac compiles only what the preprocessor keeps: `#if 0` is dead, any other condition is
    # taken as the newest Metal has it (bfloat under __METAL_VERSION__ >= 310 is registered)
    pytest.param("#if __METAL_VERSION__ >= 310\nREGISTER_UNARY_OP(exp, bfloat, bfloat);\n#endif\n",
                 [("exp", "bfloat", "bfloat", "REGISTER_UNARY_OP", 2, "", "")], id="under a Metal version guard"),
    pytest.param("#if 0\nREGISTER_UNARY_OP(exp, bool, bool);\n#else\nREGISTER_UNARY_OP(exp, int, int);\n"
                 "#endif\nREGISTER_UNARY_OP(exp, char, char);\n",
                 [("exp", "int", "int", "REGISTER_UNARY_OP", 4, "", ""),
                  ("exp", "char", "char", "REGISTER_UNARY_OP", 6, "", "")], id="the #else of #if 0 and after #endif"),
    pytest.param("#if 0\n#elif 1\nREGISTER_UNARY_OP(exp, int, int);\n#endif\n",
                 [("exp", "int", "int", "REGISTER_UNARY_OP", 3, "", "")], id="an #elif 1 after #if 0"),
    # a condition porter cannot decide (what the build defines) is carried, never assumed true
    pytest.param("#ifdef PORTER_FLAG\nREGISTER_UNARY_OP(exp, int, int);\n#endif\n",
                 [("exp", "int", "int", "REGISTER_UNARY_OP", 2, "", "#ifdef PORTER_FLAG")],
                 id="under a build flag"),
    pytest.param("#if __METAL_VERSION__ >= 310\n#if defined(A) && B\nREGISTER_UNARY_OP(exp, int, int);\n"
                 "#endif\n#endif\n",
                 [("exp", "int", "int", "REGISTER_UNARY_OP", 3, "", "#if defined(A) && B")],
                 id="a flag inside a Metal version guard"),
)


@pytest.mark.parametrize(("text", "found"), _fixes)
def test_registrations(text, found):
    assert [tuple(r) for r in MetalFile(text).registrations] == found


FUNCTORS = """\
struct exp_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(precise::exp(x)); // }
  }
};
// struct commented_functor {};
DEFINE_UNARY_FLOATING_FUNCTOR(erfinv);
struct exp_functor_helper {};
struct broken_functor {
"""


def test_functors_and_their_spans():
    metal = MetalFile(FUNCTORS)
    assert metal.functors == {"exp": 1, "erfinv": 8, "broken": 10}
    start, end = metal.functor_spans["exp"]
    assert FUNCTORS[start:end] == FUNCTORS.split("// struct")[0]        # trailing newline included
    assert metal.functor_span("broken") is None and metal.functor_span("erfinv") is None


def test_defines():
    metal = MetalFile("x\n#define A(P, Q) \\\n  f(P) \\\n  g(Q)\n  #  define B() h\n#define C 1\n")
    a = metal.defines["A"]
    assert (a.params, " ".join(a.body.split()), a.line) == (("P", "Q"), "f(P) g(Q)", 2)
    assert metal.text[a.start:a.end] == "#define A(P, Q) \\\n  f(P) \\\n  g(Q)"
    assert metal.defines["B"].params == ()
    assert "C" not in metal.defines          # object-like: registers nothing


def test_kernels_group_registrations_by_kernel():
    metal = MetalFile("REGISTER_UNARY_OP(exp, float, float);\nREGISTER_UNARY_OP(exp, half, half);\n"
                      "REGISTER_UNARY_OP(erf, float, float);\n")
    assert {k: [r.in_type for r in regs] for k, regs in metal.kernels().items()} == {
        "exp": ["float", "half"], "erf": ["float"]}
