"""porter.port.body: every mapping of the translation tables, every refusal, as before/after pairs."""

from __future__ import annotations

import pytest

from porter.port import body

# c10/metal routines a checkout's headers define: all the tables name (a checkout may lack some).
EVERY_C10 = frozenset(body.C10_METAL.values()) | {"erfcx", "erfc", "log1p", "min", "max"}


def _translate(text: str, params=("x",), scalar: str = "T", c10=EVERY_C10) -> body.Translation:
    return body.translate(text, params, scalar, lambda: c10)


# One row per entry of PRECISE, METAL, C10_METAL, COMPOSITE and CONSTANTS (the test below checks
# that none is missing): the CPU spelling, and the Metal expression it becomes.
_mappings = (
    pytest.param("std::acos(x)", "::precise::acos(x)", id="std::acos"),
    pytest.param("std::acosh(x)", "::precise::acosh(x)", id="std::acosh"),
    pytest.param("std::asin(x)", "::precise::asin(x)", id="std::asin"),
    pytest.param("std::asinh(x)", "::precise::asinh(x)", id="std::asinh"),
    pytest.param("std::atan(x)", "::precise::atan(x)", id="std::atan"),
    pytest.param("std::atan2(x)", "::precise::atan2(x)", id="std::atan2"),
    pytest.param("std::atanh(x)", "::precise::atanh(x)", id="std::atanh"),
    pytest.param("std::cbrt(x)", "::precise::cbrt(x)", id="std::cbrt"),
    pytest.param("std::cos(x)", "::precise::cos(x)", id="std::cos"),
    pytest.param("std::cosh(x)", "::precise::cosh(x)", id="std::cosh"),
    pytest.param("std::exp(x)", "::precise::exp(x)", id="std::exp"),
    pytest.param("std::exp10(x)", "::precise::exp10(x)", id="std::exp10"),
    pytest.param("std::exp2(x)", "::precise::exp2(x)", id="std::exp2"),
    pytest.param("std::fmod(x)", "::precise::fmod(x)", id="std::fmod"),
    pytest.param("std::log(x)", "::precise::log(x)", id="std::log"),
    pytest.param("std::log10(x)", "::precise::log10(x)", id="std::log10"),
    pytest.param("std::log2(x)", "::precise::log2(x)", id="std::log2"),
    pytest.param("std::pow(x)", "::precise::pow(x)", id="std::pow"),
    pytest.param("std::powr(x)", "::precise::powr(x)", id="std::powr"),
    pytest.param("std::rsqrt(x)", "::precise::rsqrt(x)", id="std::rsqrt"),
    pytest.param("std::sin(x)", "::precise::sin(x)", id="std::sin"),
    pytest.param("std::sinh(x)", "::precise::sinh(x)", id="std::sinh"),
    pytest.param("std::sqrt(x)", "::precise::sqrt(x)", id="std::sqrt"),
    pytest.param("std::tan(x)", "::precise::tan(x)", id="std::tan"),
    pytest.param("std::tanh(x)", "::precise::tanh(x)", id="std::tanh"),
    pytest.param("std::abs(x)", "::metal::abs(x)", id="std::abs"),
    pytest.param("std::ceil(x)", "::metal::ceil(x)", id="std::ceil"),
    pytest.param("std::copysign(x)", "::metal::copysign(x)", id="std::copysign"),
    pytest.param("std::fabs(x)", "::metal::fabs(x)", id="std::fabs"),
    pytest.param("std::floor(x)", "::metal::floor(x)", id="std::floor"),
    pytest.param("std::fma(x)", "::metal::fma(x)", id="std::fma"),
    pytest.param("std::fmax(x)", "::metal::fmax(x)", id="std::fmax"),
    pytest.param("std::fmin(x)", "::metal::fmin(x)", id="std::fmin"),
    pytest.param("std::isfinite(x)", "::metal::isfinite(x)", id="std::isfinite"),
    pytest.param("std::isinf(x)", "::metal::isinf(x)", id="std::isinf"),
    pytest.param("std::isnan(x)", "::metal::isnan(x)", id="std::isnan"),
    pytest.param("std::max(x)", "c10::metal::max(x)", id="std::max"),
    pytest.param("std::min(x)", "c10::metal::min(x)", id="std::min"),
    pytest.param("::std::max(x)", "c10::metal::max(x)", id="::std::max"),
    pytest.param("::std::min(x)", "c10::metal::min(x)", id="::std::min"),
    pytest.param("c10::pi<opmath_t>", "M_PI_F", id="c10::pi<opmath_t>"),
    pytest.param("c10::pi<scalar_t>", "M_PI_F", id="c10::pi<scalar_t>"),
    pytest.param("c10::pi<float>", "M_PI_F", id="c10::pi<float>"),
    pytest.param("c10::pi<T>", "M_PI_F", id="c10::pi<T>"),
    pytest.param("std::numeric_limits<value_t>::infinity()", "INFINITY",
                 id="std::numeric_limits<value_t>::infinity()"),
    pytest.param("std::numeric_limits<float>::infinity()", "INFINITY",
                 id="std::numeric_limits<float>::infinity()"),
    pytest.param("std::numeric_limits<float>::quiet_NaN()", "NAN",
                 id="std::numeric_limits<float>::quiet_NaN()"),
    pytest.param("std::numeric_limits<scalar_t>::epsilon()", "FLT_EPSILON",
                 id="std::numeric_limits<scalar_t>::epsilon()"),
    pytest.param("std::nextafter(x)", "::metal::nextafter(x)", id="std::nextafter"),
    pytest.param("std::rint(x)", "::metal::rint(x)", id="std::rint"),
    pytest.param("std::round(x)", "::metal::round(x)", id="std::round"),
    pytest.param("std::signbit(x)", "::metal::signbit(x)", id="std::signbit"),
    pytest.param("std::trunc(x)", "::metal::trunc(x)", id="std::trunc"),
    pytest.param("c10::metal::xlogy(x)", "c10::metal::xlogy(x)", id="c10::metal::xlogy"),
    pytest.param("calc_digamma(x)", "c10::metal::digamma(x)", id="calc_digamma"),
    pytest.param("calc_erfcx(x)", "c10::metal::erfcx(x)", id="calc_erfcx"),
    pytest.param("calc_erfinv(x)", "c10::metal::erfinv(x)", id="calc_erfinv"),
    pytest.param("calc_i0(x)", "c10::metal::i0(x)", id="calc_i0"),
    pytest.param("calc_i0e(x)", "c10::metal::i0e(x)", id="calc_i0e"),
    pytest.param("calc_i1(x)", "c10::metal::i1(x)", id="calc_i1"),
    pytest.param("calc_i1e(x)", "c10::metal::i1e(x)", id="calc_i1e"),
    pytest.param("calc_ndtri(x)", "c10::metal::ndtri(x)", id="calc_ndtri"),
    pytest.param("calc_polygamma(x)", "c10::metal::polygamma(x)", id="calc_polygamma"),
    pytest.param("calc_zeta(x)", "c10::metal::zeta(x)", id="calc_zeta"),
    pytest.param("std::erf(x)", "c10::metal::erf(x)", id="std::erf"),
    pytest.param("std::erfc(x)", "c10::metal::erfc(x)", id="std::erfc"),
    pytest.param("std::hypot(x)", "c10::metal::hypot(x)", id="std::hypot"),
    pytest.param("std::lgamma(x)", "c10::metal::log_gamma(x)", id="std::lgamma"),
    pytest.param("std::log1p(x)", "c10::metal::log1p(x)", id="std::log1p"),
    pytest.param("std::tgamma(x)", "c10::metal::gamma(x)", id="std::tgamma"),
    pytest.param("_isnan(x)", '::metal::isnan(x)', id="_isnan"),
    pytest.param("at::_isnan(x)", '::metal::isnan(x)', id="at::_isnan"),
    pytest.param("c10::is_negative(x)", '(x < 0)', id="c10::is_negative"),
    pytest.param("calc_log_ndtr(x)",
                 "(x < -1.0f ? ::precise::log(c10::metal::erfcx(-x * M_SQRT1_2_F) / 2) - "
                 "(x * M_SQRT1_2_F) * (x * M_SQRT1_2_F) : c10::metal::log1p(-c10::metal::erfc(x * M_SQRT1_2_F) / 2))",
                 id="calc_log_ndtr"),
    pytest.param("std::numeric_limits<opmath_t>::infinity()", "INFINITY", id="std::numeric_limits<opmath_t>::infinity()"),
    pytest.param("std::numeric_limits<opmath_t>::quiet_NaN()", "NAN", id="std::numeric_limits<opmath_t>::quiet_NaN()"),
    pytest.param("std::numeric_limits<scalar_t>::infinity()", "INFINITY", id="std::numeric_limits<scalar_t>::infinity()"),
    pytest.param("std::numeric_limits<scalar_t>::quiet_NaN()", "NAN", id="std::numeric_limits<scalar_t>::quiet_NaN()"),
)


@pytest.mark.parametrize(("cpu", "metal"), _mappings)
def test_mapping(cpu, metal):
    assert _translate(cpu) == (f"return {metal};", "")


def test_every_table_entry_has_a_row():
    ids = {p.id for p in _mappings}
    tables = (set(body.CONSTANTS) | set(body.C10_METAL) | {n for n, (t, _) in body.COMPOSITE.items() if t}
              | set(body.NAN_KEEPING)
              | {f"std::{n}" for n in body.PRECISE | body.METAL})
    assert tables == ids


# Whole lambda bodies as upstream's CPU kernels write them.
_fixes = (
    pytest.param("return a == 0 ? b : static_cast<scalar_t>(a > 0);", ("a", "b"), "T",
                 "return a == 0 ? b : static_cast<T>(a > 0);", id="heaviside: scalar_t becomes T"),
    pytest.param("std::exp(x) - 1", ("x",), "float", "return ::precise::exp(x) - 1;",
                 id="an expression lambda gets its return"),
    pytest.param("return static_cast<opmath_t>(x) * 2;", ("x",), "T", "return static_cast<float>(x) * 2;",
                 id="opmath_t computes in float"),
    pytest.param("if (x < 0) { return -x; } else { return x; }", ("x",), "T",
                 "if (x < 0) { return -x; } else { return x; }", id="statements kept"),
    pytest.param("return ::std::sqrt(x);", ("x",), "T", "return ::precise::sqrt(x);", id="::std:: spelling"),
    pytest.param("return sqrt(x);", ("x",), "T", "return ::precise::sqrt(x);", id="unqualified std math"),
    pytest.param("return 1.0f / x;", ("x",), "T", "return 1.0f / x;", id="numbers and operators untouched"),
    pytest.param("return x * M_PI_F;", ("x",), "T", "return x * M_PI_F;", id="Metal constants are words it knows"),
    pytest.param("return std::clamp(x, scalar_t(0), std::max(x, scalar_t(1)));", ("x",), "float",
                 "return c10::metal::min(c10::metal::max(x, float(0)), c10::metal::max(x, float(1)));",
                 id="clamp: the NaN-keeping min of max, nested calls kept whole"),
    pytest.param("opmath_t product = c10::pi<opmath_t> * opmath_t{x}; return std::sin(product) / product;",
                 ("x",), "float",
                 "float product = M_PI_F * float{x}; return ::precise::sin(product) / product;",
                 id="a variable the body declares reads as a parameter"),
)


@pytest.mark.parametrize(("lam", "params", "scalar", "metal"), _fixes)
def test_fixes(lam, params, scalar, metal):
    assert _translate(lam, params, scalar) == (metal, "")


_noop = (
    pytest.param("return x;", id="identity"),
    pytest.param("return x == x ? x : NAN;", id="words Metal shares"),
    pytest.param("return sizeof(T) > 2 ? x : -x;", id="sizeof and T"),
)


@pytest.mark.parametrize("lam", _noop)
def test_noop(lam):
    assert _translate(lam) == (lam, "")


_refusals = (
    pytest.param("return c10::copysign(x);", EVERY_C10,
                 "`c10::copysign` has no Metal equivalent in this checkout", id="composite with no template"),
    pytest.param("return calc_log_ndtr(x);", EVERY_C10 - {"erfcx"},
                 "`calc_log_ndtr` has no Metal equivalent in this checkout", id="composite missing a routine"),
    pytest.param("return calc_log_ndtr(x * 2);", EVERY_C10,
                 "`calc_log_ndtr` is only translated for a plain argument", id="composite of an expression"),
    pytest.param("return calc_ndtri(x);", EVERY_C10 - {"ndtri"},
                 "`calc_ndtri` needs c10::metal::ndtri, which this checkout's c10/metal headers do not define",
                 id="c10 routine the headers lack"),
    pytest.param("return std::frexp(x);", EVERY_C10, "`std::frexp` has no known Metal translation",
                 id="unknown std function"),
    pytest.param("return at::vec::foo(x);", EVERY_C10, "`at::vec::foo` has no known Metal translation",
                 id="unknown ATen helper"),
    pytest.param("return y;", EVERY_C10, "`y` has no known Metal translation", id="a name that is not a parameter"),
    pytest.param("return std::erf;", EVERY_C10, "`std::erf` has no known Metal translation",
                 id="a function named but not called"),
    # wrong on purpose: Metal's bare min returns 1 for min(NaN, 1) where the CPU gives NaN; with
    # no NaN-keeping c10::metal::min the translation is refused, never written with the bare one
    pytest.param("return std::min(x, 1.0f);", EVERY_C10 - {"min"},
                 "`std::min` needs c10::metal::min (Metal's own min drops a NaN the CPU keeps), which "
                 "this checkout's c10/metal headers do not define", id="min without a NaN-keeping min"),
)


@pytest.mark.parametrize(("lam", "c10", "reason"), _refusals)
def test_refusals(lam, c10, reason):
    assert _translate(lam, c10=c10) == (None, reason)


def test_headers_are_read_only_when_a_routine_is_needed():
    def c10():
        raise AssertionError("read the c10/metal headers for a body that needs none")

    assert body.translate("return std::exp(x);", ("x",), "T", c10).statements == "return ::precise::exp(x);"


@pytest.mark.parametrize(("statements", "cast", "after"), (
    pytest.param("return x;", "T", "return static_cast<T>(x);", id="one return"),
    pytest.param("if (x) { return 1; } return x + 1;", "bool",
                 "if (x) { return static_cast<bool>(1); } return static_cast<bool>(x + 1);", id="every return"),
))
def test_wrap_returns(statements, cast, after):
    assert body.wrap_returns(statements, cast) == after


# Redundant casts: a value that already has the type is returned as it is.
@pytest.mark.parametrize(("statements", "cast", "after"), (
    pytest.param("return x;", "T", "return x;", id="an argument is a T"),
    pytest.param("return (x);", "T", "return x;", id="parenthesised argument"),
    pytest.param("return a == 0 ? b : static_cast<T>(a > 0);", "T",
                 "return a == 0 ? b : static_cast<T>(a > 0);", id="heaviside: both branches T"),
    pytest.param("return a > 0 ? 1 : b;", "T", "return static_cast<T>(a > 0 ? 1 : b);",
                 id="a literal branch keeps the cast"),
    pytest.param("return T(x.x, -x.y);", "T", "return T(x.x, -x.y);", id="a T constructor"),
    pytest.param("return float(x) > 0;", "bool", "return float(x) > 0;", id="comparison is bool"),
    pytest.param("return ::metal::isnan(x) ? x : a;", "T", "return ::metal::isnan(x) ? x : a;",
                 id="selection after a qualified call"),
    pytest.param("return c ? x : d ? x : a;", "T", "return c ? x : d ? x : a;",
                 id="a selection in the else branch, as C++ groups it"),
    pytest.param("return c ? d ? x : a : b;", "T", "return static_cast<T>(c ? d ? x : a : b);",
                 id="a selection in the then branch is not guessed"),
    pytest.param("return float(x);", "T", "return static_cast<T>(float(x));", id="float is not T"),
))
def test_wrap_returns_without_redundant_casts(statements, cast, after):
    assert body.wrap_returns(statements, cast, {"x": "T", "a": "T", "b": "T"}) == after


@pytest.mark.parametrize(("statements", "exact"), (
    ("return a == 0 ? b : static_cast<T>(a > 0);", True),
    ("return x < 0 ? -x : x;", False),
    ("return ::precise::exp(x);", False),
    ("return x > 0.5f;", False),
))
def test_exact_in_input_type(statements, exact):
    assert body.exact_in_input_type(statements) is exact


@pytest.mark.parametrize(("statements", "params", "after"), (
    pytest.param("return a + b;", ("a", "b"), "return float(a) + float(b);", id="each parameter"),
    pytest.param("return c.x + xs;", ("x",), "return c.x + xs;", id="members and longer words untouched"),
))
def test_as_float(statements, params, after):
    assert body.as_float(statements, params) == after


_body_problems = (
    pytest.param("", ("x",), "is empty", id="empty"),
    pytest.param("x; return x", ("x",), "holds statements, not one expression (the functor returns the expression)",
                 id="statements"),
    pytest.param("(x + 1))", ("x",), "has an unmatched ')'", id="unmatched"),
    pytest.param("f(x[0)]", ("x",), "has an unmatched ')'", id="crossed brackets"),
    pytest.param("(x + 1", ("x",), "has an unclosed '('", id="unclosed"),
    pytest.param("float2{x.x, 0", ("x",), "has an unclosed '{'", id="unclosed brace"),
    pytest.param("x +", ("x",), "ends in '+', an operator without its operand", id="dangling operator"),
    pytest.param("* x", ("x",), "starts with '*', an operator without its operand", id="leading operator"),
    pytest.param("a + b", ("x",), "uses a and b, but the functor's arguments are x", id="binary names in unary"),
    pytest.param("x * 2", ("a", "b"), "uses x, but the functor's arguments are a and b", id="unary name in binary"),
)


@pytest.mark.parametrize(("expr", "params", "problem"), _body_problems)
def test_expression_problem(expr, params, problem):
    assert body.expression_problem(expr, params) == problem


@pytest.mark.parametrize(("expr", "params"), (
    pytest.param("-x", ("x",), id="unary minus"),
    pytest.param("x;", ("x",), id="one trailing semicolon"),
    pytest.param("a.x > 0 ? float2(1, 0) : float2(b)", ("a", "b"), id="member .x is not the argument x"),
    pytest.param("::precise::log(x)", ("x",), id="qualified call"),
    # braces without `;` are brace-initialisation, as the real UnaryKernel.metal's functors
    # call each other (`log_functor{}(x)`) and build complex values (`float2{x.x, 0}`)
    pytest.param("log_functor{}(x + float2{1, 0})", ("x",), id="brace-initialisation"),
))
def test_expression_is_fine(expr, params):
    assert body.expression_problem(expr, params) is None


@pytest.mark.parametrize(("statements", "after"), (
    pytest.param("return static_cast<float>(c10::metal::log1p(float(x)) / beta);",
                 "return (c10::metal::log1p(float(x)) / beta);", id="softplus: math over floats"),
    pytest.param("return c ? float(x) : static_cast<float>(::precise::exp(float(x)));",
                 "return c ? float(x) : ::precise::exp(float(x));", id="a whole call needs no parentheses"),
    pytest.param("return static_cast<float>(float(x) > 0);", "return static_cast<float>(float(x) > 0);",
                 id="a comparison is a bool: the cast stays"),
    pytest.param("return static_cast<float>(n / 2);", "return static_cast<float>(n / 2);",
                 id="integer division: the cast stays"),
    pytest.param("return static_cast<float>(-2.5e-3f * float(x));", "return (-2.5e-3f * float(x));",
                 id="exponent literal"),
    pytest.param("return static_cast<float>(::metal::isnan(float(x)));",
                 "return static_cast<float>(::metal::isnan(float(x)));", id="a classification is a bool"),
))
def test_drop_float_casts(statements, after):
    assert body.drop_float_casts(statements, frozenset({"beta"})) == after


# A lambda writing its by-value argument writes a copy: the functor's arguments are const.
_copies = (
    pytest.param("x = x < lo ? lo : x; return x;", ("x",), ("scalar_t",),
                 "scalar_t x_ = x;\nx_ = x_ < lo ? lo : x_; return x_;", id="assigned: a copy"),
    pytest.param("x += 1; return x;", ("x",), ("scalar_t",),
                 "scalar_t x_ = x;\nx_ += 1; return x_;", id="compound assignment"),
    pytest.param("return a == b ? a : b;", ("a", "b"), ("scalar_t", "scalar_t"),
                 "return a == b ? a : b;", id="compared, not assigned: untouched"),
    pytest.param("return a <= b || a >= b || a != b;", ("a", "b"), ("scalar_t", "scalar_t"),
                 "return a <= b || a >= b || a != b;", id="comparisons are not assignments"),
    pytest.param("float x = static_cast<float>(a); x = x * 2; return x;", ("a",), ("scalar_t",),
                 "float x = static_cast<float>(a); x = x * 2; return x;", id="a local assigned: untouched"),
)


@pytest.mark.parametrize(("lam", "params", "types", "out"), _copies)
def test_own_copies(lam, params, types, out):
    assert body.own_copies(lam, params, types) == out
