"""Two rules of the verdict pipeline that survived the suite's mutations (issue 36): a dtype that
an expectation both skips and xfails is SKIP (upstream's unittest skips it before it could
fail), and a NaN error is widened to inf, so that a later finite error never hides it."""

from __future__ import annotations

import math

from porter.harness import verdicts
from porter.harness.verdicts import DtypeResult, not_run_verdict, raise_max


def test_a_dtype_both_skipped_and_xfailed_is_skipped():
    res = not_run_verdict("float32", xfail_by=["xfail list"], skip_by=["skip list"],
                          cannot_run=None, failure="boom")
    assert res.outcome == verdicts.SKIP and res.expected_by == ["skip list"]
    xfailed = not_run_verdict("float32", xfail_by=["xfail list"], skip_by=[], cannot_run=None,
                              failure="boom")
    assert xfailed.outcome == verdicts.XFAIL


def test_a_nan_error_is_widened_to_inf_and_stays_the_maximum():
    res = DtypeResult("float32", verdicts.FAIL)
    raise_max(res, "max_abs", math.nan)
    assert res.max_abs == math.inf
    raise_max(res, "max_abs", 3.0)            # a later finite error does not lower it
    assert res.max_abs == math.inf
    other = DtypeResult("float32", verdicts.FAIL)
    raise_max(other, "max_rel", 2.0)
    raise_max(other, "max_rel", math.nan)
    assert other.max_rel == math.inf
