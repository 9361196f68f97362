"""porter.port.helpers.contract: the product-and-sum groups of a translated CPU helper written as
the one fused multiply-add the CPU's compilers make of them, as a before/after table."""

from __future__ import annotations

import pytest

from porter.port.helpers import contract

_fused = (
    pytest.param("r = (((k + k) + (T(1.0) - x)) * q - k * p) / (k + 1);",
                 "r = (fma(((k + k) + (T(1.0) - x)), q, -(k * p))) / (k + 1);", id="laguerre recurrence"),
    pytest.param("r = ((k + k + 1) * x * q - k * p) / (k + 1);",
                 "r = (fma((k + k + 1) * x, q, -(k * p))) / (k + 1);", id="the last product is fused"),
    pytest.param("a = (x * 1e-5 + 2);", "a = (fma(x, 1e-5, 2));", id="an exponent's sign is no operator"),
)

_kept = (
    pytest.param("x = y + y * (y2 * polevl(y2, P0, 4));", id="no parenthesized sum of two terms"),
    pytest.param("b = (f(x * y - z));", id="a call's arguments"),
    pytest.param("c = (-x * y);", id="a sign"),
    pytest.param("d = (x / y - z);", id="a quotient, not a product"),
    pytest.param("e = (x * y > z ? a : b);", id="a comparison"),
    pytest.param("g = (a * b - c + d);", id="three terms"),
)


@pytest.mark.parametrize(("before", "after"), _fused)
def test_fused(before, after):
    assert contract(before) == after


@pytest.mark.parametrize("text", _kept)
def test_kept(text):
    assert contract(text) == text
