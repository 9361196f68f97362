"""JUnit XML as CI reads it: an xpass (a stale expectation) is a failure, counted and marked.

A CI system decides red or green from `failures` and the <failure> elements alone, so an xpass
dropped from either would turn a stale expectation green there."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from porter.harness import junit
from porter.harness.verdicts import DtypeResult, OpResult


def _render() -> ET.Element:
    rows = [DtypeResult("float32", "pass", samples=3),
            DtypeResult("float16", "fail", samples=3, failed_samples=1, first_failure=2,
                        message="mismatch"),
            DtypeResult("int32", "xpass", samples=3, expected_by=["UNIMPLEMENTED_XFAILLIST"]),
            DtypeResult("int8", "xfail", samples=3, expected_by=["UNIMPLEMENTED_XFAILLIST"]),
            DtypeResult("bool", "skip", message="no kernel")]
    result = OpResult("neg", "neg", "", "neg", "emulate", rows)
    return ET.fromstring(junit.render([result]).split("\n", 1)[1])


def test_xpass_and_fail_are_failures_xfail_and_skip_are_skipped():
    suites = _render()
    suite = suites.find("testsuite")
    for element in (suites, suite):
        assert (element.get("tests"), element.get("failures"), element.get("skipped")) == \
            ("5", "2", "2")
    cases = {c.get("name").rsplit("_", 1)[1]: c for c in suite.iter("testcase")}
    children = {dtype: [(child.tag, child.get("type")) for child in case]
                for dtype, case in cases.items()}
    assert children == {"float32": [], "float16": [("failure", "mismatch")],
                        "int32": [("failure", "xpass")], "int8": [("skipped", "xfail")],
                        "bool": [("skipped", None)]}
    xpass = cases["int32"].find("failure")
    assert xpass.get("message") == "unexpected success: expected to fail by UNIMPLEMENTED_XFAILLIST"


def test_a_rows_notes_reach_its_testcase():
    """A reference run's note (edge values not compared, or none added at all) qualifies a
    green row; CI reads only the XML, where a pass without it passes for what it is not."""
    note = "no edge values (NaN, ±inf, the dtype's limits) added: these are its own reference inputs"
    rows = [DtypeResult("float32", "pass", samples=3, notes=[note]), DtypeResult("float16", "pass", samples=3)]
    result = OpResult("nn.functional.hardswish", "nn.functional.hardswish", "", "nn.functional.hardswish",
                      "emulate", rows, reference=True)
    suite = ET.fromstring(junit.render([result]).split("\n", 1)[1]).find("testsuite")
    cases = {c.get("name").rsplit("_", 1)[1]: c for c in suite.iter("testcase")}
    assert cases["float32"].find("system-out").text == f"note: {note}\n"
    assert cases["float16"].find("system-out") is None
    # a note never turns a row red or skipped
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "0")
