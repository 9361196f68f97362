"""The complex overload from a CPU lambda (porter.port.body.translate_complex) and porter's
float2 routines placed in c10/metal/utils.h (porter.port.complex_helpers.add_to_utils)."""

from __future__ import annotations

import re
from typing import NamedTuple

import pytest

from porter.port import body, complex_helpers


class _Lambda(NamedTuple):
    expression: str
    params: tuple[str, ...] = ("a",)


class _Library:
    """What porter.port.helpers.Library answers: it writes acosh/asinh/atanh, nothing else."""

    def __init__(self):
        self.complex_added, self.refused = [], {}

    def complex_routine(self, name):
        if complex_helpers.writes(name):
            self.complex_added.append(name)
            return True
        self.refused[name] = f"porter has no float2 `{name}`"
        return False


HEADER = frozenset({"conj", "log1p"})       # torch 2.13's c10/metal routines of float2

_pairs = (
    # the header's own routine, called as it is (conj takes half2 too)
    pytest.param("conj_impl(a)", "return c10::metal::conj(a);", (), id="header-routine"),
    # porter's routine takes float2: a half2 argument converts explicitly (Metal converts no
    # vector type implicitly), and it is recorded for utils.h
    pytest.param("std::acosh(a)", "return c10::metal::acosh(float2(a));", ("acosh",), id="porter-writes"),
    pytest.param("std::atanh(std::conj(a))", "return c10::metal::atanh(float2(c10::metal::conj(a)));",
                 ("atanh",), id="nested"),
)


@pytest.mark.parametrize("expression, want, written", _pairs)
def test_translates(expression, want, written):
    library = _Library()
    out = body.translate_complex(_Lambda(expression), lambda: HEADER, library)
    assert out.statements == want
    assert tuple(library.complex_added) == written


_refused = (
    # no library: porter writes nothing, the header lacks it
    pytest.param("std::asinh(a)", None, "needs c10::metal::asinh for complex values", id="no-library"),
    # complex arithmetic is not float2 arithmetic: refused before any routine is recorded
    pytest.param("std::acosh(a) * a", _Library(), "more than complex routines", id="arithmetic"),
    pytest.param("std::sqrt(a)", _Library(), "`std::sqrt(a)` is more than complex routines", id="unmapped"),
)


@pytest.mark.parametrize("expression, library, says", _refused)
def test_refuses(expression, library, says):
    out = body.translate_complex(_Lambda(expression), lambda: HEADER, library)
    assert out.statements is None and says in out.reason, out
    assert library is None or library.complex_added == []


UTILS_BEFORE = """namespace c10 {
namespace metal {

inline float log1p(float x) {
  return x;
}

// a float2 helper
inline float2 log1p(float2 in) {
  return in;
}

template <>
inline float2 conj(float2 a) {
  return float2(a.x, -a.y);
}

inline float hypot(float a, float b) {
  return a;
}

} // namespace metal
} // namespace c10
"""


def test_a_routine_goes_after_the_last_float2_function():
    out = complex_helpers.add_to_utils(UTILS_BEFORE, ["atanh"])
    head = "inline float2 atanh(float2 z) {"
    assert out.index("return float2(a.x, -a.y);\n}\n") < out.index(head) < out.index("inline float hypot")
    assert out.replace(complex_helpers.text("atanh"), "", 1) == UTILS_BEFORE.replace(
        "return float2(a.x, -a.y);\n}\n", "return float2(a.x, -a.y);\n}\n\n", 1)


def test_a_routine_the_header_has_is_not_added_twice():
    once = complex_helpers.add_to_utils(UTILS_BEFORE, ["asinh", "acosh"])
    assert complex_helpers.add_to_utils(once, ["asinh", "acosh"]) == once
    assert once.count("inline float2 asinh(float2 z) {") == 1


def test_without_a_float2_function_the_routine_goes_before_the_namespace_closes():
    plain = UTILS_BEFORE.replace("inline float2 log1p(float2 in) {\n  return in;\n}\n", "").replace(
        "template <>\ninline float2 conj(float2 a) {\n  return float2(a.x, -a.y);\n}\n", "")
    out = complex_helpers.add_to_utils(plain, ["atanh"])
    assert out.index("inline float hypot") < out.index("inline float2 atanh") < out.index("} // namespace metal")


@pytest.mark.parametrize("name", ["acosh", "asinh", "atanh"])
def test_porters_routines_are_metal_in_float(name):
    # Metal has no double and no C++ standard library; every routine computes in float
    text = complex_helpers.text(name)
    assert f"inline float2 {name}(float2 z) {{" in text
    code = re.sub(r"//[^\n]*", "", text)
    for word in ("double", "std::", "long double", "static "):
        assert word not in code, word
