"""MPSGraph selectors that compute exactly one Metal function: the functor body of last resort.

`migrate-from-mpsgraph` writes a functor from the CPU kernel's lambda when it can; otherwise
from the selector the old implementation sent (`REGISTER_MPS_UNARY_STUB(acosh, acosh)`,
`CREATE_MPS_...(asinh_out_mps, asinh)`, `[mpsGraph exponentBase2WithTensor:...]`). Only
selectors whose meaning is one Metal call are listed: a wrong body would compile and pass
review, a failing skeleton cannot.

Float-only functions (`precise::`, `floor`, `sign`, ...) have no integer overloads in Metal, so
they serve an op with integer dtypes only when its integers compute in float (int -> float
ops call the floating overload).
"""

from __future__ import annotations

from typing import NamedTuple

PRECISE = {
    "exponent": "exp", "exponentBase2": "exp2", "exponentBase10": "exp10",
    "logarithm": "log", "logarithmBase2": "log2", "logarithmBase10": "log10",
    "squareRoot": "sqrt", "reverseSquareRoot": "rsqrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asin": "asin", "acos": "acos", "atan": "atan",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
}
EXACT_FLOAT = {"ceil": "ceil", "floor": "floor", "truncate": "trunc", "rint": "rint",
               "sign": "sign", "signbit": "signbit"}
ANY_TYPE = {"absolute": "abs"}
BINARY = {"power": "::precise::pow(a, b)", "atan2": "::precise::atan2(a, b)"}


class SelectorBody(NamedTuple):
    selector: str
    expression: str | None     # a `--body`-like Metal expression, None when none fits
    reason: str                # why not, when expression is None


def unary_expression(selector: str) -> tuple[str, bool] | None:
    """(Metal expression in x, valid for integer T) for a unary selector, or None."""
    if selector in PRECISE:
        return f"::precise::{PRECISE[selector]}(x)", False
    if selector in EXACT_FLOAT:
        return f"::metal::{EXACT_FLOAT[selector]}(x)", False
    if selector in ANY_TYPE:
        return f"::metal::{ANY_TYPE[selector]}(x)", True
    return None


def maps(selector: str, kind: str) -> bool:
    return (BINARY.get(selector) if kind == "binary" else unary_expression(selector)) is not None


def body_for(selectors: list[str], kind: str, has_int_dtypes: bool, int_to_float: bool) -> SelectorBody:
    """The body from an implementation that sends exactly one selector, if that one maps.

    An implementation sending several (sgn: square, reductionSum, squareRoot, ...; sign: a
    clamp for int64, then sign) computes more than one Metal call: no body is guessed."""
    if not selectors:
        return SelectorBody("", None, "the MPSGraph implementation sends no selector porter can read")
    if len(selectors) > 1:
        return SelectorBody("", None, f"the MPSGraph implementation sends {len(selectors)} selectors "
                                      f"({', '.join(selectors)}), not one Metal function")
    selector = selectors[0]
    if not maps(selector, kind):
        return SelectorBody(selector, None, f"MPSGraph selector {selector} has no one-function "
                                            "Metal equivalent in porter's table")
    if kind == "binary":
        return SelectorBody(selector, BINARY[selector], "")
    expression, int_ok = unary_expression(selector)
    if has_int_dtypes and not int_ok and not int_to_float:
        return SelectorBody(selector, None, f"MPSGraph selector {selector} maps to {expression}, "
                                            "which Metal defines for floating types only, and this "
                                            "op keeps integer dtypes")
    return SelectorBody(selector, expression, "")
