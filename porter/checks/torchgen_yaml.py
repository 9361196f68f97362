"""Whole-file torchgen validation of native_functions.yaml (PORTER040).

torchgen is the oracle for "codegen will accept this file". It is imported from the user's
torch install (the wheel ships `torchgen/`; PyPI's `torchgen` is an unrelated package) and
called by keyword. Its module-global parse cache is keyed by path, so it is cleared before
and after: a second check of an edited file at the same path would otherwise pass stale.
"""

from __future__ import annotations

import re

from porter.source import checkout as co
from porter.checks.model import Finding
from porter.checks.torchgen_child import Pending, parse_raw
from porter.checks.tree import Tree, op_of_entry

WHERE_RE = re.compile(r"\n?\s*in (\S.*?):(\d+):")
MARK_RE = re.compile(r'in "[^"]*", line (\d+), column \d+')


def check(tree: Tree) -> list[Finding]:
    """Validate in this process (see `start` for the overlapped variant)."""
    return findings(tree, parse_raw(tree.checkout.root))


def collect(tree: Tree, pending: Pending) -> tuple[list[Finding], bool]:
    """The findings, and whether the validation ran (a skip is a note, not a clean check)."""
    raw = pending.result()
    return findings(tree, raw), raw["kind"] != "skip"


def start(tree: Tree) -> Pending:
    """Begin the validation in a forked child (see porter.checks.torchgen_child)."""
    return Pending(tree.checkout.root)


def findings(tree: Tree, raw: dict) -> list[Finding]:
    if raw["kind"] == "skip":
        tree.notes.append(raw["note"])
        return []
    if raw["kind"] == "assert":
        return [_assertion(tree, raw["text"])]
    if raw["kind"] == "error":
        return [_other(tree, raw)]
    return []


def _assertion(tree: Tree, text: str) -> Finding:
    m = WHERE_RE.search(text)
    message = text[:m.start()] if m else text
    line = int(m.group(2)) if m else None
    entry = tree.entry_at(line) if line else None
    subject = f" ('{entry.full_name}')" if entry else ""
    return Finding("PORTER040", co.NATIVE_YAML, line,
                   f"torchgen rejects the file{subject}: {' '.join(message.split())}",
                   "fix the entry; `porter check` re-runs torchgen's parse_native_yaml",
                   op_of_entry(entry) if entry else None)


def _other(tree: Tree, raw: dict) -> Finding:
    marks = MARK_RE.findall(raw["text"])
    line = raw["line"] or (int(marks[-1]) if marks else None)
    entry = tree.entry_at(line) if line else None
    problem = raw["problem"] or raw["text"].split("\n", 1)[0]
    return Finding("PORTER040", co.NATIVE_YAML, line,
                   f"torchgen cannot load the file: {raw['type']}: {' '.join(str(problem).split())}",
                   "fix the YAML syntax (indentation of dispatch rows is 4 spaces)",
                   op_of_entry(entry) if entry else None)
