"""porter.dispatch.numpy_tensors.compare (the warm cached run's assertEqual in numpy) against
torch's own TestCase.assertEqual, on the values where the two could part: integers whose
difference overflows their dtype."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from porter.dispatch.numpy_tensors import from_torch  # noqa: E402
from porter.dispatch.numpy_tensors import compare  # noqa: E402


@pytest.mark.parametrize("dtype, actual, expected", [
    (torch.int8, 127, -128),        # 255 apart: wraps to -1 in int8 (was a pass)
    (torch.int16, 32767, -32768),
    (torch.uint8, 127, 128),        # 1 apart: wraps to 255 in uint8 (was a failure)
    (torch.uint8, 0, 255),
    (torch.int32, 2**31 - 1, -2**31),
])
@pytest.mark.parametrize("atol, rtol", [(0.01, 0.01), (1.0, 0.0), (None, None)])
def test_integer_differences_are_taken_as_torch_takes_them(dtype, actual, expected, atol, rtol):
    from torch.testing._internal.common_utils import TestCase
    a, e = torch.tensor([actual], dtype=dtype), torch.tensor([expected], dtype=dtype)
    try:
        TestCase().assertEqual(a, e, atol=atol, rtol=rtol)
        torch_equal = True
    except AssertionError:
        torch_equal = False
    assert (compare(from_torch(a), from_torch(e), atol, rtol, (0.0, 0.0)) is None) == torch_equal


def test_max_errors_on_arrays_and_on_a_zero_d_result():
    """The max abs/rel error columns: NaN against NaN and inf against inf are no error, a NaN
    against a number is (NaN), equal outputs are 0; a 0-d result (a numpy scalar as data) too."""
    import math

    import numpy as np

    from porter.dispatch.numpy_tensors import PArray, max_errors

    def errors(expected, actual, dtype="float32"):
        as_data = (lambda v: np.dtype(dtype).type(v)) if np.ndim(expected) == 0 else \
            (lambda v: np.array(v, dtype=dtype))
        return max_errors(PArray(dtype, as_data(expected)), PArray(dtype, as_data(actual)))

    nan, inf = float("nan"), float("inf")
    assert errors([1.0, nan, inf, 2.0], [1.5, nan, inf, 2.0]) == (0.5, 0.5)
    assert errors([1.0, nan, inf], [1.0, nan, inf]) == (0.0, 0.0)
    assert errors([4.0, 2.0], [4.0, 2.0], "int64") == (0.0, 0.0)
    assert all(math.isnan(v) for v in errors([1.0, 2.0], [nan, 2.0]))
    assert errors(1.5, 3.0) == (1.5, 1.0)
    assert errors(2.0, 2.0) == (0.0, 0.0)
    assert errors(3 + 4j, 0j, "complex64") == (5.0, 1.0)
    assert errors([], [], "float32") is None
