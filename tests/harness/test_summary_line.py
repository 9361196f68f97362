"""The summary line counts the failing dtypes whose reason is "not proven" apart from those
that failed a comparison: both are red, but the next step differs."""

from __future__ import annotations

import pytest

from porter.harness.run_report import summary_line
from porter.harness.verdicts import DtypeResult, OpResult

MISMATCH = "Tensor-likes are not close!"
NOT_PROVEN = "not proven: `#ifdef` tests `SIG_ATOMIC_MAX`"


@pytest.mark.parametrize("rows, line", [
    ([("pass", None), ("pass", None)], "2 pass, 0 fail, 0 xfail, 0 xpass; 0 skip"),
    ([("fail", MISMATCH), ("pass", None)], "1 pass, 1 fail, 0 xfail, 0 xpass; 0 skip"),
    ([("fail", NOT_PROVEN), ("pass", None)], "1 pass, 1 fail (1 not proven), 0 xfail, 0 xpass; 0 skip"),
    ([("fail", NOT_PROVEN), ("fail", MISMATCH), ("xfail", NOT_PROVEN)],
     "0 pass, 2 fail (1 not proven), 1 xfail, 0 xpass; 0 skip"),
    # review 37's M01, M03: a sample right unfused and wrong only contracted, and a kernel that
    # trapped where a GPU answers something undefined, are not proven; one right only
    # contracted stays red (docs/red.md)
    ([("fail", "Scalars are not close! (fails with a*b+c contracted to one fma, passes only "
               "unfused: not proven, since ...)")],
     "0 pass, 1 fail (1 not proven), 0 xfail, 0 xpass; 0 skip"),
    ([("fail", "emulate error: KernelCrashed: kernel crashed (signal 8, SIGFPE): ... whose answer "
               "Metal leaves undefined: not prove")], "0 pass, 1 fail (1 not proven), 0 xfail, 0 xpass; 0 skip"),
    ([("fail", "emulate error: RuntimeError: transposed: KernelCrashed: kernel crashed (signal 8, "
               "SIGFPE): ... whose answer Metal leaves undefined: not proven")],
     "0 pass, 1 fail (1 not proven), 0 xfail, 0 xpass; 0 skip"),
    ([("fail", "emulate error: KernelCrashed: kernel crashed (signal 11, SIGSEGV)")],
     "0 pass, 1 fail, 0 xfail, 0 xpass; 0 skip"),
    ([("fail", "Scalars are not close! (passes only with a*b+c contracted to one fma: not proven, "
               "since ...)")], "0 pass, 1 fail, 0 xfail, 0 xpass; 0 skip"),
    # a skip's reason is never counted: it did not run
    ([("skip", NOT_PROVEN)], "0 pass, 0 fail, 0 xfail, 0 xpass; 1 skip (not run, reasons above)"),
])
def test_summary_line(rows, line):
    result = OpResult(op="heaviside", name="heaviside", variant="", key="heaviside", device="emulate",
                      dtypes=[DtypeResult(dtype=f"d{i}", outcome=o, message=m)
                              for i, (o, m) in enumerate(rows)])
    assert summary_line([result]) == line


@pytest.mark.parametrize(("raised", "row"), [
    # review 38's L09, H12: what the device says it cannot tell reads as it says, so the
    # summary counts it "not proven" (a kernel g++ cannot build that the front end accepts, a
    # host check porter does not evaluate), a shapes row with its layout after it
    (RuntimeError("not proven: kernel k is beyond porter's emulator"),
     "not proven: kernel k is beyond porter's emulator"),
    (RuntimeError("transposed: RuntimeError: not proven: a check porter does not evaluate"),
     "not proven: a check porter does not evaluate (transposed)"),
    (RuntimeError("no kernel k registered"), "emulate error: RuntimeError: no kernel k registered"),
])
def test_a_device_error_that_says_not_proven_is_counted_so(raised, row):
    from porter.harness.verdicts import _device_error
    assert _device_error("emulate", raised) == row
    result = OpResult(op="k", name="k", variant="", key="k", device="emulate",
                      dtypes=[DtypeResult(dtype="float32", outcome="fail", message=row)])
    assert summary_line([result]).startswith(
        "0 pass, 1 fail (1 not proven)" if row.startswith("not proven") else "0 pass, 1 fail, ")
