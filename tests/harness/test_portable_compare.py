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


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("atol, rtol", [(1e-5, 1e-3), (1e-5, 1.6e-2), (0.5, 0.0), (0.0, 0.1)])
def test_isclose_is_torchs_element_for_element(dtype, atol, rtol):
    """numpy_tensors.isclose (half and bfloat16 rounded after each operation, as torch's CPU
    computes them) against torch.isclose, on values near one another and on the edges: NaN,
    infinities, signed zeros, subnormals, the dtype's largest values."""
    from porter.dispatch.numpy_tensors import isclose
    gen = torch.Generator().manual_seed(7)
    base = torch.randn(20000, generator=gen) * 100
    near = base * (1 + torch.randn(20000, generator=gen) * 1e-2)
    info = torch.finfo(dtype)
    edges = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, info.tiny / 4,
                          info.tiny, info.max, -info.max, 1.0, 1.0 + info.eps])
    a = torch.cat([base, edges, edges, edges.flip(0)]).to(dtype)
    e = torch.cat([near, edges, edges.roll(3), edges]).to(dtype)
    want = torch.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True).numpy()
    got = isclose(from_torch(a), from_torch(e), rtol, atol)
    assert (got == want).all(), (got != want).nonzero()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rtol, atol", [(1e-3, 1e-5), (1e-2, 1e-2), (1.6e-2, 1e-5)])
def test_isclose_agrees_with_torch_on_every_value_and_its_neighbours(dtype, rtol, atol):
    """Every finite non-negative value of the dtype against the values up to 4 steps from it,
    where the allowed error's last rounding decides: torch adds atol in the tensor's dtype
    (review 80's F5: taken in float32, bfloat16's 0.0038604736 and 0.0049133301 were close at
    rtol 0.01, atol 0.001, and torch says not)."""
    from porter.dispatch.numpy_tensors import isclose
    last = 0x7C00 if dtype == torch.float16 else 0x7F80
    bits = torch.arange(0, last, dtype=torch.int32)
    values = bits.to(torch.int16).view(dtype)
    for step in range(-4, 5):
        other = (bits + step).clamp(0, last - 1).to(torch.int16).view(dtype)
        want = torch.isclose(values, other, rtol=rtol, atol=atol, equal_nan=True).numpy()
        got = isclose(from_torch(values), from_torch(other), rtol, atol)
        assert (got == want).all(), (step, values[got != want][:3], other[got != want][:3])


def test_bfloat16_rounding_is_torchs_on_ties_and_edges():
    """numpy_tensors._bf16_rounded (isclose's rounding after each bfloat16 operation) against
    torch's float -> bfloat16 -> float, bit for bit: ties to even (1 + 2^-8 goes down, 1 + 3 *
    2^-8 up), NaN, infinities, the largest floats (rounding up to inf), subnormals."""
    import numpy as np

    from porter.dispatch.numpy_tensors import _bf16_rounded
    gen = torch.Generator().manual_seed(3)
    ties = [1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 2 ** -130 * (1 + 2 ** -8), 3.0 + 2 ** -7]
    edges = [float("nan"), float("inf"), -float("inf"), 3.4028235e38, -3.4028235e38, 3.3961e38,
             1e-45, -1e-40, 0.0, -0.0]
    x = torch.cat([torch.tensor(ties + edges), torch.randn(10000, generator=gen) * 1e4])
    want = x.to(torch.bfloat16).float().numpy()
    got = _bf16_rounded(x.numpy())
    # a NaN's bits are the conversion's own (torch's vector loop sets them all): NaN either way
    assert (np.isnan(got) == np.isnan(want)).all()
    keep = ~np.isnan(want)
    got, want = got[keep].view(np.uint32), want[keep].view(np.uint32)
    assert (got == want).all(), [(hex(g), hex(w)) for g, w in zip(got, want) if g != w][:5]


def test_float16_rounding_is_torchs_on_ties_edges_and_every_kind_of_float():
    """numpy_tensors._f16_rounded (isclose's rounding after each half operation, on float32
    bits) against torch's float -> half -> float, bit for bit: ties to even in the normal range
    and among subnormals, the largest half and the midpoint to infinity (65520), the least
    normal, values too small for a half, infinities, NaN; then a million random bit patterns."""
    import numpy as np

    from porter.dispatch.numpy_tensors import _f16_rounded
    step = 2.0 ** -24
    ties = [1 + 2 ** -11, 1 + 3 * 2 ** -11, -(1 + 2 ** -11), 2049.0, 2051.0, step / 2,
            3 * step / 2, 5 * step / 2, 2 ** -14 - step / 2, 2 ** -14 - step / 4]
    edges = [65504.0, 65519.996, 65520.0, -65520.0, 65536.0, 2 ** -14, 2 ** -25, 2 ** -26,
             1e-45, -1e-40, 0.0, -0.0, float("inf"), -float("inf"), float("nan"), 3.4e38]
    gen = np.random.default_rng(5)
    bits = gen.integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([np.asarray(ties + edges, dtype=np.float32), bits.view(np.float32),
                        (gen.standard_normal(10000) * 1e3).astype(np.float32)])
    want = torch.from_numpy(x).to(torch.float16).float().numpy()
    got = _f16_rounded(x)
    assert got.dtype == np.float32
    assert (np.isnan(got) == np.isnan(want)).all()
    keep = ~np.isnan(want)
    got, want = got[keep].view(np.uint32), want[keep].view(np.uint32)
    assert (got == want).all(), [(hex(g), hex(w)) for g, w in zip(got, want) if g != w][:5]


@pytest.mark.parametrize("actual, expected", [(float("nan"), float("nan")), (1.0, float("nan")),
                                              (1.0, 1.001), (2.0, 3.0)])
def test_a_zero_d_bfloat16_compares_as_torch_does(actual, expected):
    """A 0-d bfloat16 result (a reduction's, a scalar sample's) goes through isclose's rounding
    too (review 45: it raised on a numpy scalar)."""
    from torch.testing._internal.common_utils import TestCase
    a = torch.tensor(actual, dtype=torch.bfloat16)
    e = torch.tensor(expected, dtype=torch.bfloat16)
    try:
        TestCase().assertEqual(a, e, atol=1e-5, rtol=1.6e-2)
        torch_equal = True
    except AssertionError:
        torch_equal = False
    assert (compare(from_torch(a), from_torch(e), 1e-5, 1.6e-2, (0.0, 0.0)) is None) == torch_equal


def _pieces_case(dtype, size, where, kind):
    """(actual, expected) PArrays of `size` elements, equal but at `where` (indices), where the
    actual is off by `kind`: 'far' (fails any tolerance), 'near' (within the default one), 'nan'."""
    import numpy as np

    from porter.dispatch.numpy_tensors import PArray, f32_to_bf16

    values = np.linspace(-3, 3, size, dtype=np.float32)
    expected = values.copy()
    actual = values.copy()
    for i in where:
        actual[i] = {"far": actual[i] + 10.0, "near": actual[i] * (1 + 1e-7),
                     "nan": np.nan}[kind]
    if dtype == "bfloat16":
        return PArray(dtype, f32_to_bf16(actual)), PArray(dtype, f32_to_bf16(expected))
    return PArray(dtype, actual.astype(dtype)), PArray(dtype, expected.astype(dtype))


PIECES = [
    # (dtype, size, where the elements differ, how): a large sample answered piece by piece
    ("float32", 200_000, [199_999], "far"),          # only the last piece fails
    ("float32", 200_000, [0], "far"),                # the first one does
    ("float32", 200_000, [70_000, 140_000], "nan"),  # NaN against a number fails
    ("float32", 200_000, [123_456], "near"),         # within tolerance: passes
    ("float16", 131_072, [131_071], "far"),          # exactly two pieces
    ("bfloat16", 65_537, [65_536], "far"),           # one element past the first piece
    ("float32", 1000, [999], "far"),                 # one piece
    ("float32", 200_000, [], "far"),                 # equal
]


@pytest.mark.parametrize("dtype, size, where, kind", PIECES)
def test_a_large_samples_pieces_answer_as_the_whole(dtype, size, where, kind):
    """`compare(brief=True)` (a row's samples past its first failure) stops at the first piece
    that fails, and `not_close` (two_ways.either_per_element's count) at its limit: both give
    what the whole comparison gives."""
    import numpy as np

    from porter.dispatch.numpy_tensors import isclose, not_close
    actual, expected = _pieces_case(dtype, size, where, kind)
    whole = compare(actual, expected, None, None, (0.0, 0.0))
    brief = compare(actual, expected, None, None, (0.0, 0.0), brief=True)
    assert (brief is None) == (whole is None)
    assert brief is None or brief == "Tensor-likes are not close!"
    bad = ~isclose(actual, expected, 1e-5, 1e-5)
    count, where_bad = not_close(actual, expected, 1e-5, 1e-5)
    assert count == int(np.count_nonzero(bad)) and np.array_equal(where_bad, bad)
    count, where_bad = not_close(actual, expected, 1e-5, 1e-5, enough=0)
    assert (count > 0) == bool(bad.any()) and (where_bad is None) == bool(bad.any())
