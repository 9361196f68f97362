"""A tree's recorded findings (`porter check --write-baseline FILE`), and the findings a run
reports beyond them (`--baseline FILE`), as ruff's `--add-noqa` and mypy's baseline tools let
a team adopt a linter on a tree that already has findings: only new ones fail.

A finding is recorded by what it says, not where: its id, file, op and message with every
`:LINE` and `line N` blotted out, so an edit above it (a yaml row added 40 lines up) does not
make an old finding new. Equal fingerprints are counted: a second identical finding is new.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from porter.checks.model import CHECKS, Finding
from porter.errors import PorterError

FORMAT = 1
DEFAULT_NAME = ".porter-baseline.json"
_LINE_NUMBERS = re.compile(r"(?<=:)\d+\b|\b(?<=line )\d+\b")


def fingerprint(finding: Finding) -> tuple[str, str, str, str]:
    return (finding.id, finding.path, finding.op or "", _LINE_NUMBERS.sub("N", finding.message))


def write(path: str | Path, findings: list[Finding]) -> int:
    """Record `findings` in `path` (sorted, so that a re-record diffs cleanly); how many."""
    rows = sorted(fingerprint(f) for f in findings)
    data = {"porter_baseline": FORMAT,
            "findings": [dict(zip(("id", "path", "op", "message"), row)) for row in rows]}
    try:
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    except OSError as err:
        raise PorterError(f"cannot write the baseline: {err.strerror}", path=path,
                          hint="name a file in a directory that exists") from None
    return len(rows)


def load(path: str | Path) -> Counter:
    """The recorded fingerprints, counted; bad input (exit 2) naming the file when it is not
    one `--write-baseline` wrote."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise PorterError(f"cannot read the baseline: {err.strerror}", path=path,
                          hint="record one with porter check --write-baseline FILE") from None
    except ValueError as err:
        raise PorterError(f"the baseline is not JSON ({err})", path=path,
                          hint="re-record it with porter check --write-baseline FILE") from None
    if not isinstance(data, dict) or data.get("porter_baseline") != FORMAT \
            or not isinstance(data.get("findings"), list):
        raise PorterError("not a porter check baseline", path=path,
                          hint="re-record it with porter check --write-baseline FILE")
    counted: Counter = Counter()
    for number, row in enumerate(data["findings"], 1):
        if not isinstance(row, dict) or row.get("id") not in CHECKS:
            raise PorterError(f"entry {number} names no porter check", path=path,
                              hint="porter check --list shows the ids")
        counted[(row["id"], row.get("path", ""), row.get("op") or "", row.get("message", ""))] += 1
    return counted


def new_findings(findings: list[Finding], recorded: Counter) -> tuple[list[Finding], int, int]:
    """(the findings beyond the baseline, how many it held back, how many of its entries no
    finding matched any more: fixed since, worth re-recording)."""
    left = Counter(recorded)
    new = []
    for finding in findings:
        key = fingerprint(finding)
        if left[key] > 0:
            left[key] -= 1
        else:
            new.append(finding)
    held = len(findings) - len(new)
    return new, held, sum(left.values())
