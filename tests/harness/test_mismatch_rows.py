"""mismatches.rows: the comparison's tolerance floors, each on its own side, and as many rows as
the limit allows (issue 36: swapping the floors, or a table cut one row short, survived the
suite)."""

from __future__ import annotations

import pytest

from porter.harness import mismatches

torch = pytest.importorskip("torch")


def _rows(expected, actual, floors, limit=mismatches.LIMIT):
    expected = torch.tensor(expected, dtype=torch.float32)
    actual = torch.tensor(actual, dtype=torch.float32)
    return mismatches.rows([("input", expected)], expected, actual, atol=0.0, rtol=0.0,
                           floors=floors, limit=limit)


def test_the_absolute_floor_is_the_first_and_the_relative_floor_the_second():
    # |0.5 - 0| is within an absolute floor of 1, not within any relative one of 0
    assert _rows([0.0] * 3, [0.5] * 3, floors=(1.0, 0.0)) == []
    assert len(_rows([0.0] * 3, [0.5] * 3, floors=(0.0, 1.0))) == 3
    # |15 - 10| is within a relative floor of 1 (10 * 1), not within an absolute one of 1
    assert _rows([10.0] * 3, [15.0] * 3, floors=(0.0, 1.0)) == []
    assert len(_rows([10.0] * 3, [15.0] * 3, floors=(1.0, 0.0))) == 3


def test_the_table_holds_the_first_limit_mismatches_in_order():
    expected = [0.0] * 9
    actual = [0.0, 1.0, 0.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.0]
    got = _rows(expected, actual, floors=(0.0, 0.0))
    assert len(got) == mismatches.LIMIT == 4
    assert [float(r["device"]) for r in got] == [1.0, 2.0, 3.0, 4.0]
    assert len(_rows(expected, actual, floors=(0.0, 0.0), limit=6)) == 6
