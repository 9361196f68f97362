"""porter.port.ternary_port.translate: a three-operand CPU lambda's return expression as the
Metal expression of a ternary functor (at opmath, in the CPU's order), and what it refuses."""

from __future__ import annotations

import pytest

from porter.port import ternary_port

OPERANDS = ("self_val", "t1_val", "t2_val")
SCALARS = ("float_val", "scalar_val")
A, B, C, V = "op_t(a)", "op_t(b)", "op_t(c)", "static_cast<op_t>(alpha)"

_pairs = (
    pytest.param("return self_val + scalar_val * t1_val * t2_val;",
                 f"{A} + c10::metal::mul(c10::metal::mul({V}, {B}), {C})", id="addcmul-value-first"),
    pytest.param("return float(self_val) + float_val * float(t1_val) * float(t2_val);",
                 f"{A} + c10::metal::mul(c10::metal::mul({V}, {B}), {C})", id="reduced-float-casts-go"),
    pytest.param("return self_val + scalar_val * t1_val / t2_val;",
                 f"{A} + c10::metal::div(c10::metal::mul({V}, {B}), {C})", id="addcdiv-left-to-right"),
    # the order is the CPU's: written the other way round, the product comes first
    pytest.param("return self_val + t1_val * t2_val * scalar_val;",
                 f"{A} + c10::metal::mul(c10::metal::mul({B}, {C}), {V})", id="order-kept"),
    pytest.param("return self_val - scalar_val * (t1_val - t2_val);",
                 f"{A} - c10::metal::mul({V}, ({B} - {C}))", id="parentheses"),
    pytest.param("return static_cast<float>(self_val) + scalar_val * t1_val * t2_val;",
                 f"{A} + c10::metal::mul(c10::metal::mul({V}, {B}), {C})", id="static_cast-goes"),
)


@pytest.mark.parametrize("body, want", _pairs)
def test_translates(body, want):
    assert ternary_port.translate(body, OPERANDS, SCALARS) == want


_refused = (
    pytest.param("return std::fma(scalar_val * t1_val, t2_val, self_val);", "is not a sum, product or quotient", id="fma-call"),
    pytest.param("return self_val + 2 * t1_val * t2_val;", "`2` is neither", id="a-constant"),
    pytest.param("auto x = t1_val; return self_val + x;", "not one return statement", id="statements"),
    pytest.param("return self_val + (t1_val * t2_val;", "parentheses do not balance", id="unbalanced"),
    pytest.param("return self_val + t1_val *;", "ends mid-expression", id="dangling-operator"),
    pytest.param("return self_val + t1_val % t2_val;", "is not a sum, product or quotient", id="modulo"),
)


@pytest.mark.parametrize("body, says", _refused)
def test_refuses(body, says):
    with pytest.raises(ternary_port.Untranslatable) as err:
        ternary_port.translate(body, OPERANDS, SCALARS)
    assert says in str(err.value)


def test_registrations_follow_the_host_scalar_type_and_upstream_order():
    rows = ternary_port.registrations("addcmul", {"uint8", "float16", "complex64", "float32", "int64"})
    assert rows == [
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, float, float, float);",
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, half, float, half);",
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, long, long, long);",
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, uchar, uchar, uchar);",
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, float2, float2, float2);",
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, half2, float2, half2);",
    ]
