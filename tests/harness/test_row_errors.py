"""A row's error maxima (porter.harness.row_errors): a large sample's computed beside the
comparisons, and the row's maxima the same as computed one sample after the other."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from porter.dispatch.numpy_tensors import PArray, max_errors
from porter.harness import row_errors, verdicts
from porter.harness.verdicts import DtypeResult, raise_max

BIG = row_errors.BESIDE_ELEMENTS


def f32(values) -> PArray:
    return PArray("float32", np.asarray(values, dtype=np.float32))


def _pair(n: int, seed: int, nan: bool = False, inf: bool = False):
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal(n).astype(np.float32)
    actual = expected.copy()
    actual[rng.integers(0, n, 5)] += np.float32(0.25 * seed)
    if nan:
        actual[n // 2] = np.nan
    if inf:
        expected[n // 3] = np.inf
    return f32(expected), f32(actual)


# each row's samples (elements, seed, NaN in the answer, inf in the reference) and the maxima
# computed one after the other, as cached_run recorded them before
ROWS = [
    [(5, 1, False, False), (BIG, 2, False, False), (BIG * 3, 3, False, False)],
    [(BIG * 2, 4, True, False), (7, 5, False, False)],        # a NaN error: inf, whatever the order
    [(BIG, 6, False, True), (BIG, 7, False, False), (3, 8, False, False)],
    [(BIG - 1, 9, False, False)],                             # below the threshold: at once
]


@pytest.mark.parametrize("row", ROWS)
def test_a_rows_maxima_are_those_computed_one_sample_after_the_other(row, monkeypatch):
    computed_in = []

    def recorded(expected, actual):
        computed_in.append((expected.data.size, threading.current_thread().name))
        return max_errors(expected, actual)
    monkeypatch.setattr(row_errors, "max_errors", recorded)

    pairs = [_pair(*sample) for sample in row]
    before = DtypeResult("float32", verdicts.FAIL)
    for expected, actual in pairs:
        errors = max_errors(expected, actual)
        raise_max(before, "max_abs", errors[0])
        raise_max(before, "max_rel", errors[1])
    after = DtypeResult("float32", verdicts.FAIL)
    errors = row_errors.RowErrors()
    for expected, actual in pairs:
        errors.add(after, expected, actual)
    errors.done(after)
    assert (after.max_abs, after.max_rel) == (before.max_abs, before.max_rel)
    assert not any(map(math.isnan, (after.max_abs, after.max_rel)))
    beside = {n for n, thread in computed_in if thread.startswith("porter-row-errors")}
    assert beside == {n for n, *_ in row if n >= BIG}


def test_a_row_given_up_leaves_its_maxima_to_no_other_row():
    errors = row_errors.RowErrors()
    abandoned, nxt = DtypeResult("float32", verdicts.FAIL), DtypeResult("int32", verdicts.PASS)
    errors.add(abandoned, *_pair(BIG, 3))
    errors.add(nxt, f32([1.0, 2.0]), f32([1.0, 2.5]))
    errors.add(nxt, f32([1.0]), PArray("float32", np.zeros((1, 1), np.float32)))  # other shape
    errors.done(nxt)
    assert (nxt.max_abs, nxt.max_rel) == (0.5, 0.25)
    assert (abandoned.max_abs, abandoned.max_rel) == (None, None)
    errors.done(abandoned)                     # not the row it holds now: nothing to raise
    assert abandoned.max_abs is None


def test_the_verdict_takes_a_rows_maxima_before_it_is_settled():
    """verdicts._run_dtype asks the source for what the row left (row_done) before the row's
    verdict is settled and reported."""
    class Source:
        device, abandon, sample_errors = "emulate", (), ()

        def __init__(self):
            self.errors = row_errors.RowErrors()

        def expectations(self, dtype):
            return [], [], (0.0, 0.0)

        def reported_tolerances(self, dtype):
            return 0, 0

        def samples(self, dtype):
            return [_pair(BIG, 2), _pair(9, 5)]

        def tolerances(self, sample, dtype):
            return 0, 0

        def quiet(self):
            import contextlib
            return contextlib.nullcontext()

        def run(self, sample, dtype):
            return sample[1]

        def reference(self, sample, device_out):
            return sample[0]

        def record_errors(self, res, reference, device_out):
            self.errors.add(res, reference, device_out)

        def row_done(self, res):
            self.errors.done(res)

        def other_versions(self):
            return []

        def contracted(self):
            return None

        def mac_reference(self, sample, reference):
            return None

        def wide_reference(self, sample):
            return None

        def compare(self, sample, reference, device_out, tolerances, floors, dtype, brief=False):
            return None if np.array_equal(reference.data, device_out.data) else "differs"

    res = verdicts._run_dtype(Source(), "op", "float32", None)
    worst = max(max_errors(*_pair(BIG, 2))[0], max_errors(*_pair(9, 5))[0])
    assert res.outcome == verdicts.FAIL and res.max_abs == worst > 0
