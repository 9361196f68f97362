"""JUnit XML: one testsuite per op, one testcase per dtype (the format CI systems read).

fail -> <failure>; xpass -> <failure type="xpass"> (a stale expectation fails CI, as an
unexpected success does upstream); skip -> <skipped>; xfail -> <skipped type="xfail">.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from porter.harness.run_report import repro
from porter.harness.verdicts import FAIL, SKIP, XFAIL, XPASS, OpResult


def render(results: list[OpResult], root: str | None = None) -> str:
    suites = ET.Element("testsuites", name="porter test")
    total = {"tests": 0, "failures": 0, "skipped": 0}
    for result in results:
        counts = {"tests": len(result.dtypes),
                  "failures": sum(d.outcome in (FAIL, XPASS) for d in result.dtypes),
                  "skipped": sum(d.outcome in (SKIP, XFAIL) for d in result.dtypes)}
        suite = ET.SubElement(suites, "testsuite", errors="0",
                              name=result.op + (" (reference inputs)" if result.reference else
                                                " (shapes)" if result.shapes else ""),
                              time=f"{sum(d.seconds for d in result.dtypes):.3f}",
                              **{k: str(v) for k, v in counts.items()})
        for key in total:
            total[key] += counts[key]
        test = ("test_reference_inputs_match" if result.reference else
                "test_shapes_match" if result.shapes else result.test)
        for d in result.dtypes:
            case = ET.SubElement(suite, "testcase", classname=f"porter.{result.device}.{result.op}",
                                 name=f"{test}_{result.op.replace('.', '_')}_{result.device}_{d.dtype}",
                                 time=f"{d.seconds:.3f}")
            if d.outcome == FAIL:
                el = ET.SubElement(case, "failure", type="mismatch", message=d.message or "failed")
                el.text = f"{d.failed_samples}/{d.samples} samples failed; first: sample " \
                          f"{d.first_failure}\n"
                if d.mismatches:
                    from porter.harness.mismatches import text
                    el.text += "\n".join(text(d.mismatches, indent="")) + "\n"
                el.text += f"repro: {repro(result, d.dtype, d.first_failure, root)}\n"
            elif d.outcome == XPASS:
                ET.SubElement(case, "failure", type=XPASS.value,
                              message="unexpected success: expected to fail by "
                                      + "; ".join(d.expected_by))
            elif d.outcome == XFAIL:
                ET.SubElement(case, "skipped", type=XFAIL.value,
                              message="expected failure: " + "; ".join(d.expected_by))
            elif d.outcome == SKIP:
                ET.SubElement(case, "skipped", message=d.message or "skipped")
            if d.notes:     # what qualifies the row (edge values not compared, none added)
                ET.SubElement(case, "system-out").text = "".join(f"note: {n}\n" for n in d.notes)
    for key, value in total.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
