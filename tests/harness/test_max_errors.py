"""numpy_tensors.max_errors, the table's max_abs and max_rel of a sample: the runner's figures
(an element equal on both sides, NaN on both counting, has no error; a NaN error anywhere is
the maximum), whatever values and sizes, against that definition computed plainly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from porter.dispatch import numpy_tensors as nt
from porter.dispatch.numpy_tensors import PArray, max_errors

INF, NAN = math.inf, math.nan


def as_defined(expected: PArray, actual: PArray):
    """Element by element in float64 (complex128), then numpy's max, which a NaN wins."""
    wide = np.complex128 if "complex" in expected.dtype + actual.dtype else np.float64
    e = np.asarray(nt.widened(expected), dtype=wide).reshape(-1)
    a = np.asarray(nt.widened(actual), dtype=wide).reshape(-1)
    with np.errstate(all="ignore"):
        same = (e == a) | (np.isnan(e) & np.isnan(a))
        diff = np.where(same, 0.0, np.abs(a - e))
        rel = np.where(same, 0.0, np.abs(a - e) / np.abs(e))
    return float(np.max(diff)), float(np.max(rel))


def arr(dtype, values):
    if dtype == "bfloat16":
        bits = np.asarray(values, np.float32).view(np.uint32) >> 16
        return PArray(dtype, bits.astype(np.uint16))
    return PArray(dtype, np.asarray(values, dtype=dtype))


# expected, actual, (max abs, max rel): every special value's case, one element at a time
TABLE = [
    ("float32", [1.0], [1.5], (0.5, 0.5)),
    ("float32", [0.0], [0.0], (0.0, 0.0)),
    ("float32", [0.0], [-0.0], (0.0, 0.0)),                 # equal zeros: no error
    ("float32", [0.0], [2.0], (2.0, INF)),                  # off from zero: infinite rel
    ("float32", [NAN], [NAN], (0.0, 0.0)),                  # NaN both: no error
    ("float32", [NAN], [1.0], (NAN, NAN)),
    ("float32", [1.0], [NAN], (NAN, NAN)),
    ("float32", [INF], [INF], (0.0, 0.0)),
    ("float32", [-INF], [INF], (INF, NAN)),
    ("float32", [INF], [1.0], (INF, NAN)),
    ("float32", [1.0], [INF], (INF, INF)),
    ("float32", [1.0, NAN, 3.0], [1.0, NAN, 5.0], (2.0, 2 / 3)),
    ("float32", [3.4e38], [-3.4e38], (6.8e38, 2.0)),        # past float32, not float64
    ("float16", [65504.0, 1.0], [-65504.0, 1.0009765625], (131008.0, 2.0)),
    ("bfloat16", [1.0, 0.0], [1.0078125, 0.0], (0.0078125, 0.0078125)),
    ("int32", [2**31 - 1, -5], [-(2**31), -5], (2**32 - 1, (2**32 - 1) / (2**31 - 1))),
    ("int64", [0, 7], [3, 7], (3.0, INF)),
    ("int64", [2**62, 1], [2**62 + 1, 1], (0.0, 0.0)),      # equal once in float64, as upstream
    ("bool", [True, False], [False, False], (1.0, 1.0)),
    ("uint8", [255, 0], [0, 0], (255.0, 1.0)),
]


def same_figure(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or x == y


@pytest.mark.parametrize("dtype, expected, actual, figures", TABLE)
def test_each_special_value_gives_the_runners_figures(dtype, expected, actual, figures):
    e, a = arr(dtype, expected), arr(dtype, actual)
    got = max_errors(e, a)
    assert all(map(same_figure, got, as_defined(e, a)))
    for g, f in zip(got, figures):
        assert same_figure(g, f) or math.isclose(g, f, rel_tol=1e-7), (got, figures)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32", "int64", "uint8"])
@pytest.mark.parametrize("size", [1, 7, nt.ERROR_PIECE - 1, nt.ERROR_PIECE, 3 * nt.ERROR_PIECE + 5])
def test_a_large_sample_in_pieces_gives_what_the_whole_gives(dtype, size):
    """A NaN, an infinity or a zero placed in any piece, the worst element in any: the pieces'
    maxima are the whole's, bit for bit."""
    rng = np.random.default_rng(size)
    for case in range(6):
        if dtype in ("int32", "int64", "uint8"):
            top = 200 if dtype == "uint8" else 1000
            e = rng.integers(0, top, size).astype(dtype)
            a = e.copy()
            a[rng.integers(0, size, 3)] += 1
            if case % 2:
                e[rng.integers(0, size)] = 0                # an error off zero: infinite rel
        else:
            e = rng.standard_normal(size).astype(np.float32)
            a = e + rng.standard_normal(size).astype(np.float32) * np.float32(1e-3)
            special = [NAN, INF, -INF, 0.0, NAN, 0.0][case]
            at = rng.integers(0, size)
            e[at] = special
            if case == 4:
                a[at] = NAN                                 # NaN on both: no error there
            if dtype != "float32":
                e, a = arr(dtype, e).data, arr(dtype, a).data
        ep, ap = PArray(dtype, e), PArray(dtype, a)
        got, want = max_errors(ep, ap), as_defined(ep, ap)
        assert all(map(same_figure, got, want)), (case, got, want)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_an_error_in_the_last_piece_alone_is_the_maximum(dtype):
    size = 2 * nt.ERROR_PIECE + 3
    e = np.arange(size).astype(dtype)
    a = e.copy()
    a[-1] += 7
    assert max_errors(PArray(dtype, e), PArray(dtype, a)) == (7.0, 7 / (size - 1))


def test_complex_and_mixed_dtypes_and_other_shapes():
    e = PArray("complex64", np.array([1 + 1j, NAN + 0j, 2j], np.complex64))
    a = PArray("complex64", np.array([1 + 2j, NAN + 0j, 2j], np.complex64))
    assert max_errors(e, a) == as_defined(e, a) == (1.0, 1 / math.sqrt(2))
    mixed = max_errors(arr("float32", [1.0, 2.0]), arr("float64", [1.0, 2.5]))
    assert mixed == (0.5, 0.25)
    real = PArray("float32", np.array([1.0, NAN, 0.0], np.float32))
    assert max_errors(e, real) == as_defined(e, real) == (2.0, 1.0)   # a complex side: complex
    assert max_errors(real, e) == as_defined(real, e)
    other_shape = PArray("float32", np.zeros((1, 1), np.float32))
    assert max_errors(arr("float32", [1.0]), other_shape) is None
    assert max_errors(arr("float32", []), arr("float32", [])) is None
    scalar = PArray("float32", np.float32(2.0))             # a 0-d sample's numpy scalar
    assert max_errors(scalar, PArray("float32", np.float32(3.0))) == (1.0, 0.5)
