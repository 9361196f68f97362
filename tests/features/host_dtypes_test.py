"""What a host kernel function's own code does with a dtype and with its kernel call, as tables:
porter.emulate.host_dtypes (dtype checks and AT_DISPATCH lists, as a Mac evaluates them),
porter.emulate.host_call (the alpha type a call names) and porter.source.stubs.param_type."""

from __future__ import annotations

import pytest

from porter.emulate import host_call, host_dtypes
from porter.source.host_scan import KernelCall
from porter.source.stubs import param_type

D = ("bool", "int32", "float16", "bfloat16", "float32", "complex64")
# (condition, the dtypes of D it holds for); upstream's own checks first
_conditions = (
    pytest.param("isFloatingType(iter.common_dtype())", {"float16", "bfloat16", "float32"}, id="floating"),
    pytest.param("c10::isIntegralType(iter.common_dtype(), /*includeBool=*/false)", {"int32"},
                 id="integral, no bool"),
    pytest.param("c10::isIntegralType(iter.common_dtype(), true)", {"bool", "int32"}, id="integral and bool"),
    pytest.param("iter.common_dtype() != kBool", set(D) - {"bool"}, id="not bool"),
    pytest.param("dtype == at::ScalarType::Half", {"float16"}, id="a local holding the dtype"),
    pytest.param("!isComplexType(iter.common_dtype()) && iter.common_dtype() != c10::kBFloat16",
                 set(D) - {"complex64", "bfloat16"}, id="negation and conjunction"),
    pytest.param("(isReducedFloatingType(iter.common_dtype()) || iter.dtype() == kFloat)",
                 {"float16", "bfloat16", "float32"}, id="disjunction in parentheses"),
    # C++'s boolean literals (review 19's H27 was not proven)
    pytest.param("iter.common_dtype() != kBFloat16 || true", set(D), id="or true"),
    pytest.param("iter.common_dtype() != kBFloat16 && false", set(), id="and false"),
    pytest.param("!false && iter.common_dtype() == kBool", {"bool"}, id="not false"),
)


@pytest.mark.parametrize(("condition", "holds"), _conditions)
def test_a_dtype_condition(condition, holds):
    assert {d for d in D if host_dtypes.evaluate(condition, d, {"dtype"})} == holds


@pytest.mark.parametrize("condition", ["eps >= 0", "isFloatingType(self.scalar_type())",
                                       "iter.common_dtype() != kFloat8", "isIntegralType(iter.common_dtype())",
                                       "iter.numel() < 4", "", "eps >= 0 || true", "truex"])
def test_a_condition_porter_does_not_read(condition):
    assert host_dtypes.evaluate(condition, "float32") is None


def _body(code: str) -> str:
    return "static void k(TensorIteratorBase& iter) {\n" + code + '  lib.exec_unary_kernel(iter, "k");\n}\n'


# (host code, the dtypes of D it refuses, the start of what a Mac does for the first of them)
_refusals = (
    pytest.param("", set(), "", id="nothing refused"),
    pytest.param("  AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, iter.common_dtype(), \"k\", [&]() {});\n",
                 {"bool", "int32", "complex64"}, "AT_DISPATCH_FLOATING_TYPES_AND2 covers", id="dispatch"),
    pytest.param("  const auto dtype = iter.common_dtype();\n"
                 "  AT_DISPATCH_ALL_TYPES_AND3(kBool, kBFloat16, kHalf, dtype, \"k\", [&]() {});\n",
                 {"complex64"}, "AT_DISPATCH_ALL_TYPES_AND3 covers", id="dispatch on a local"),
    pytest.param("  if (isComplexType(iter.common_dtype())) {\n"
                 "    AT_DISPATCH_COMPLEX_TYPES(iter.common_dtype(), \"k\", [&]() { lib.exec_unary_kernel(iter, \"k\"); });\n"
                 "    return;\n  }\n"
                 "  AT_DISPATCH_FLOATING_TYPES_AND_HALF(iter.common_dtype(), \"k\", [&]() {});\n",
                 {"bool", "int32", "bfloat16"},
                 "AT_DISPATCH_COMPLEX_TYPES and AT_DISPATCH_FLOATING_TYPES_AND_HALF cover complex128, complex64, "
                 "float16, float32, float64: a Mac raises \"k\" not implemented for 'Bool'", id="two dispatches, one list"),
    pytest.param("  AT_DISPATCH_FLOATING_TYPES(self.scalar_type(), \"k\", [&]() {});\n", set(D),
                 "not proven: `AT_DISPATCH_FLOATING_TYPES(...)`", id="dispatch on something else"),
    pytest.param("  TORCH_CHECK_TYPE(isFloatingType(iter.common_dtype()), \"k: floats only, a < b\");\n",
                 {"bool", "int32", "complex64"}, "a Mac fails its check `isFloatingType(iter.common_dtype())`",
                 id="check"),
    pytest.param("  TORCH_CHECK(iter.ndim() < 4, \"k\");\n", set(D), "not proven: `TORCH_CHECK(iter.ndim() < 4, ...)`",
                 id="check porter does not evaluate"),
    pytest.param("  // TORCH_CHECK(false, \"k\");\n", set(), "", id="commented out"),
    pytest.param("  if (isComplexType(iter.common_dtype())) {\n    at::mul_out(out, a, b);\n    return;\n  }\n",
                 {"complex64"}, "not proven: for complex64 `if (isComplexType(iter.common_dtype()))` leaves "
                 "before the kernel call", id="other code for a dtype, then return"),
    pytest.param("  if (iter.numel() > 4) {\n    other(iter);\n    return;\n  }\n", set(D),
                 "not proven: `if (iter.numel() > 4)` leaves before the kernel call", id="on a condition not read"),
    pytest.param("  if (iter.numel() == 0) {\n    return;\n  }\n  if (c) return;\n", set(), "",
                 id="an early return alone runs nothing else"),
    pytest.param("  if (isComplexType(iter.common_dtype())) {\n    lib.exec_unary_kernel(iter, \"k\");\n"
                 "    return;\n  }\n", set(), "", id="the branch runs a kernel itself"),
    # a bare return on a dtype condition leaves the output unwritten for that dtype: a Mac's test
    # compares whatever the empty tensor held (was: read as an empty iterator's return, green)
    pytest.param("  if (iter.common_dtype() == kHalf) return;\n", {"float16"},
                 "for float16 `if (iter.common_dtype() == kHalf)` returns before the kernel call",
                 id="a bare return on a dtype condition"),
    pytest.param("  if (isIntegralType(iter.common_dtype(), /*includeBool=*/true)) {\n    return;\n  }\n",
                 {"bool", "int32"}, "for bool `if (isIntegralType(iter.common_dtype(), true))` returns",
                 id="a braced bare return on a dtype condition"),
    # a bare return whose condition names the dtype but is not read as a whole: not proven (was:
    # read as an empty iterator's return, green while a Mac leaves float16 unwritten)
    pytest.param("  if (iter.numel() == 0 || iter.common_dtype() == kHalf) return;\n", set(D),
                 "not proven: `if (iter.numel() == 0 || iter.common_dtype() == kHalf)` returns before "
                 "the kernel call on a condition naming the dtype", id="a bare return on a partly read dtype condition"),
)


@pytest.mark.parametrize(("code", "refused", "says"), _refusals)
def test_what_the_host_refuses(code, refused, says):
    found = {d: host_dtypes.refusal(_live(_body(code)), 10, d) for d in D}
    assert {d for d, r in found.items() if r} == refused
    if refused:
        first = found[sorted(refused, key=D.index)[0]]
        assert first.message.startswith(says), first.message
        assert first.line > 10


def _live(body: str) -> str:
    # hostmap hands the live text (comments blanked); a comment here reads as it would there
    from porter.source.cpp_scan import comments_blanked
    return comments_blanked(body)


def _call(*arguments: str, params: bool = False) -> KernelCall:
    return KernelCall("unary", "k", params, arguments)


# (the call's arguments after the name, whether an alpha travels, the type named; for half)
_alphas = (
    pytest.param(_call(), False, None, id="no scalar"),
    pytest.param(_call("std::nullopt", "std::nullopt", "1u << 18"), False, None, id="nullopt"),
    pytest.param(_call("eps"), True, None, id="the common dtype's"),
    pytest.param(_call("eps", "ScalarType::Float"), True, "float", id="ScalarType::Float"),
    pytest.param(_call("Scalar(decimals)", "at::kLong"), True, "long", id="kLong"),
    pytest.param(_call("value", "at::toOpMathType(iter.common_dtype())"), True, "float", id="opmath of half"),
    pytest.param(_call("eps", "alpha_type"), True, "?", id="a name porter cannot read"),
    pytest.param(_call("params", '"NanToNumParams_float"', params=True), True, "NanToNumParams_float",
                 id="params literal"),
    pytest.param(_call("params", 'fmt::format("ELUParams_{}", mps::scalarToMetalTypeString(iter.common_dtype()))',
                       params=True), True, "ELUParams_half", id="params formatted from the dtype"),
    pytest.param(_call("params", "name", params=True), True, "?", id="params name porter cannot read"),
)


@pytest.mark.parametrize(("call", "has", "named"), _alphas)
def test_the_alpha_type_a_call_names(call, has, named):
    got_has, got = host_call.alpha_type(call)
    assert (got_has, got if got in (None, "?") else host_call.typed(got, "half")) == (has, named)


@pytest.mark.parametrize(("param", "spelled"), [
    ("const Scalar& alpha = 1", "const Scalar&"),
    ("at::TensorIteratorBase &iter", "TensorIteratorBase&"),
    ("const int64_t order", "int64_t"),          # a by-value parameter's const is not its type's
    ("const double* x", "const double*"),
    ("double eps", "double"),
])
def test_param_type(param, spelled):
    assert param_type(param) == spelled
