"""`--upstream`: run the checkout's own `test/test_mps.py` for the op and fold the outcomes in.

The filter is anchored (`-k test_output_match_<fragment>_mps_`) so that `sin` does not also
run `sinc` / `sinh`. Only meaningful where MPS is available (a Mac).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from porter.source.checkout import TEST_MPS
from porter.harness.verdicts import FAIL, PASS, SKIP, XFAIL, XPASS, OpResult

_NAME = re.compile(r"^test_output_match_(?P<frag>.+)_mps_(?P<dtype>[a-z0-9]+)$")


def command(root: Path, fragments: list[str], junit_path: str) -> list[str]:
    expr = " or ".join(f"test_output_match_{f}_mps_" for f in fragments)
    return [sys.executable, "-m", "pytest", str(root / TEST_MPS), "-k", expr, "-q",
            "-p", "no:cacheprovider", f"--junitxml={junit_path}"]


def run(root: Path, results: list[OpResult]) -> str | None:
    """Run upstream's test for every op of `results`; set each dtype's `upstream`.
    Returns why it could not run, or None."""
    if not (root / TEST_MPS).is_file():
        return f"{TEST_MPS} is missing from the checkout"
    import torch
    if not torch.backends.mps.is_available():
        return "MPS is not available: upstream's TestConsistencyMPS only runs on a Mac"
    fragments = [r.op.replace(".", "_") for r in results if not r.reference and not r.shapes]
    with tempfile.TemporaryDirectory() as tmp:
        junit = os.path.join(tmp, "junit.xml")
        proc = subprocess.run(command(root, fragments, junit), cwd=root,
                              capture_output=True, text=True)
        if not os.path.exists(junit):
            return f"test_mps.py produced no JUnit report (exit {proc.returncode}): " \
                   + (proc.stderr or proc.stdout).strip()[-300:]
        with open(junit, encoding="utf-8") as f:
            fold(results, parse_junit(f.read()))
    return None


def parse_junit(xml_text: str) -> dict[tuple[str, str], str]:
    """{(fragment, dtype): outcome} from a pytest / xmlrunner JUnit report of test_mps.py."""
    out: dict[tuple[str, str], str] = {}
    root = ET.fromstring(xml_text)
    for case in root.iter("testcase"):
        m = _NAME.match(case.get("name", ""))
        if not m:
            continue
        out[(m.group("frag"), m.group("dtype"))] = _outcome(case)
    return out


def _outcome(case: ET.Element) -> str:
    for tag in ("failure", "error"):
        el = case.find(tag)
        if el is not None:
            text = f"{el.get('message', '')} {el.get('type', '')} {el.text or ''}".lower()
            return XPASS if "unexpected success" in text or "xpass" in text else FAIL
    el = case.find("skipped")
    if el is not None:
        text = f"{el.get('message', '')} {el.get('type', '')}".lower()
        return XFAIL if ("xfail" in text or "expected failure" in text) else SKIP
    return PASS


def fold(results: list[OpResult], outcomes: dict[tuple[str, str], str]) -> None:
    for result in results:
        if result.reference or result.shapes:          # upstream runs neither
            continue
        frag = result.op.replace(".", "_")
        for d in result.dtypes:
            d.upstream = outcomes.get((frag, d.dtype))
