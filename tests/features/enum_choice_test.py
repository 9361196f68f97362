"""Pure readers behind gelu's port (issue 22, item 6), as before/after tables: <cmath> constants
folded as the CPU computes them (porter.port.body.fold_math_constants), a checkout's
string-to-enum function (porter.source.enum_strings) and the condition a host picks its kernel
by (porter.emulate.kernel_pick)."""

from __future__ import annotations

import pytest

from porter.emulate import kernel_pick
from porter.port.body import fold_math_constants
from porter.source.checkout import Checkout
from porter.source.enum_strings import string_enum, unqualified
from porter.source.host_scan import KernelCall


@pytest.mark.parametrize("before,after", [
    # computed in double and rounded once to float, as `float(M_SQRT2 * M_2_SQRTPI * 0.5)` is
    ("float(M_SQRT2 * M_2_SQRTPI * 0.5)", "0.797884583f"),
    ("float(M_SQRT1_2)", "0.707106769f"),
    ("scalar_t(M_SQRT1_2) * x", "0.707106769f * x"),
    # each cast of its own: a product of floats, as the CPU's reduced-float lambda computes it
    ("float(M_2_SQRTPI) * float(M_SQRT1_2)", "1.12837923f * 0.707106769f"),
    ("float(M_SQRT2 * M_SQRT2)", "2.0f"),                  # a whole number keeps its point
    ("-x * float(M_SQRT1_2)", "-x * 0.707106769f"),        # the closing parenthesis is the cast's
    # outside a cast: Metal's float spelling
    ("x * M_SQRT1_2", "x * M_SQRT1_2_F"),
    ("M_2_SQRTPI * M_SQRT1_2 * scalar_t(0.5)", "M_2_SQRTPI_F * M_SQRT1_2_F * scalar_t(0.5)"),
    # left alone: no constant, a variable in the cast, a name that is not <cmath>'s
    ("float(0.5) * x", "float(0.5) * x"),
    ("float(M_SQRT1_2 * x)", "float(M_SQRT1_2_F * x)"),
    ("float(M_FOO)", "float(M_FOO)"),
    ("M_SQRT1_2_F * x", "M_SQRT1_2_F * x"),
])
def test_math_constants(before, after):
    assert fold_math_constants(before) == after


GELU_H = """
enum class GeluType { None, Tanh, END };
inline GeluType get_gelutype_enum(const std::string_view approximate) {
  if (approximate == "none") {
    return GeluType::None;
  } else if (approximate == "tanh") {
    return GeluType::Tanh;
  } else {
    TORCH_CHECK(false, "approximate argument must be either none or tanh.");
  }
}
"""


class _Checkout:
    def __init__(self, text: str):
        self.text = text

    def glob(self, rel, pattern):
        return ["aten/src/ATen/native/Gelu.h"]

    def read(self, rel):
        return self.text

    first_definition = Checkout.first_definition     # the real reader, over this one file


@pytest.mark.parametrize("text,values", [
    (GELU_H, (("none", "GeluType::None"), ("tanh", "GeluType::Tanh"))),
    # qualified enumerators read as their last two names
    (GELU_H.replace("return GeluType::Tanh", "return at::native::GeluType::Tanh"),
     (("none", "GeluType::None"), ("tanh", "GeluType::Tanh"))),
    # a branch returning another enum's value: not this function's mapping
    (GELU_H.replace("return GeluType::Tanh", "return OtherType::Tanh"), None),
    # a branch of another shape: the mapping is not read (never half of it)
    (GELU_H.replace('approximate == "none"', 'approximate.size() == 4'), None),
    (GELU_H.replace('  } else {\n    TORCH_CHECK', '  } else {\n    return GeluType::END;\n    TORCH_CHECK'), None),
    ("inline GeluType get_gelutype_enum(int approximate) { return GeluType::None; }", None),
])
def test_string_to_enum_function(text, values):
    found = string_enum(_Checkout(text), "get_gelutype_enum")
    assert (found.values if found else None) == values


def test_unqualified():
    assert unqualified("at::native::GeluType::Tanh") == "GeluType::Tanh"
    assert unqualified("GeluType :: None") == "GeluType::None"


CALLS = [KernelCall("unary", "", False)]


@pytest.mark.parametrize("body,picked", [
    ('const char* name = (approximate == GeluType::Tanh) ? "gelu_tanh" : "gelu";',
     (("gelu_tanh", "gelu"), ("approximate", False, "GeluType::Tanh"))),
    ('const char* name = GeluType::Tanh == approximate ? "gelu_tanh" : "gelu";',
     (("gelu_tanh", "gelu"), ("approximate", False, "GeluType::Tanh"))),
    ('const char* name = approximate != GeluType::None ? "gelu_tanh" : "gelu";',
     (("gelu_tanh", "gelu"), ("approximate", True, "GeluType::None"))),
    # a condition on the iterator, or on no enumerator: not modelled
    ('const char* name = iter.numel() > 3 ? "gelu_tanh" : "gelu";', (None, None)),
    ('const char* name = approximate == other ? "gelu_tanh" : "gelu";', (None, None)),
    # two ternaries: which one names the kernel is not read
    ('auto a = (p == E::X) ? "a" : "b"; auto b = (p == E::Y) ? "c" : "d";', (None, None)),
])
def test_the_condition_a_host_picks_its_kernel_by(body, picked):
    assert kernel_pick._choice(body, CALLS) == picked


def test_an_if_else_with_one_literal_call_per_branch():
    body = ('if (approximate == GeluType::Tanh) {\n  lib.exec_unary_kernel(iter, "gelu_tanh");\n'
            '} else {\n  lib.exec_unary_kernel(iter, "gelu");\n}')
    calls = [KernelCall("unary", "gelu_tanh", False), KernelCall("unary", "gelu", False)]
    assert kernel_pick._choice(body, calls) == (("gelu_tanh", "gelu"), ("approximate", False, "GeluType::Tanh"))


def test_a_kernel_pick_maps_each_value_and_refuses_others():
    pick = kernel_pick.KernelPick("approximate", "none", (("none", "gelu"), ("tanh", "gelu_tanh")),
                                  (), "gelu_out_mps -> GeluKernel -> gelu_kernel")
    assert pick.kernel_for({}) == "gelu"                     # the schema's default
    assert pick.kernel_for({"approximate": "tanh"}) == "gelu_tanh"
    with pytest.raises(RuntimeError, match="accepts none or tanh"):
        pick.kernel_for({"approximate": "erf"})
    assert kernel_pick.KernelPick("", None, (), (), "", only="gelu").kernel_for({"approximate": "tanh"}) == "gelu"
