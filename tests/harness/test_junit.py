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
