"""The docs show real output (issue 36): each checked sample of README.md and docs/*.md
(tests/doc_samples.py says which, and how they run) is compared with a real run on the bundled
tree. A difference fails with a diff per sample; `EXPECTTEST_ACCEPT=1 python -m pytest
tests/test_doc_samples.py` rewrites the blocks from the real output."""

from __future__ import annotations

import difflib
import os

import pytest

from tests import doc_samples

CHECKED = [page for page in doc_samples.PAGES if doc_samples.samples(page)]


def test_the_pages_with_samples_include_the_walk_and_the_red_page():
    names = {p.name for p in CHECKED}
    assert {"README.md", "red.md"} <= names, names


@pytest.mark.slow           # minutes: every documented command, ports and full verdicts included
@pytest.mark.parametrize("page", CHECKED, ids=lambda p: p.name)
def test_the_samples_are_real_output(page, tmp_path):
    pytest.importorskip("torch")
    root = doc_samples.tree(tmp_path / "mini")
    env = doc_samples.environment()
    diffs, fixes, compared = [], [], 0
    for sample in doc_samples.samples(page):
        output = doc_samples.run(sample, root, env)
        if sample.hidden:
            continue
        want = doc_samples.shown(sample, output)
        compared += 1
        if doc_samples.normal(want) != doc_samples.normal(sample.body):
            fixes.append((sample, want))
            diffs.append(f"{page.name}:{sample.line}: $ {sample.command}\n" + "\n".join(
                difflib.unified_diff(doc_samples.normal(sample.body), doc_samples.normal(want),
                                     "shown", "real", lineterm="", n=1)))
    assert compared, f"{page.name}: no sample compared"
    if fixes and os.environ.get("EXPECTTEST_ACCEPT"):
        doc_samples.rewrite(page, fixes)
        return
    assert not diffs, ("the page's samples differ from real runs (EXPECTTEST_ACCEPT=1 rewrites "
                       "them):\n\n" + "\n\n".join(diffs))


def test_a_sample_keeps_its_lines_and_marks_each_gap(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('intro\n<!-- sample keep="^a|^c" -->\n```\n$ porter x --y  # why\nold\n```\n'
                    "<!-- sample-run: porter hidden -->\n<!-- sample -->\n```\n"
                    "$ porter new-op h --body 'a > 0 ? 1 : a'\n```\nend\n", encoding="utf-8")
    found = doc_samples.samples(page)
    assert [(s.command, s.hidden, s.body) for s in found] == [
        ("porter x --y", False, ["old"]), ("porter hidden", True, []),
        ("porter new-op h --body 'a > 0 ? 1 : a'", False, [])]
    assert doc_samples.shown(found[0], ["a1", "b", "b", "c", "d"]) == ["a1", "...", "c", "..."]
    doc_samples.rewrite(page, [(found[0], ["a1", "...", "c"])])
    assert page.read_text(encoding="utf-8").split("\n")[3:8] == ["$ porter x --y  # why", "a1",
                                                                 "...", "c", "```"]


def test_only_what_varies_is_normalised():
    row = "  float32   pass     9        0.06     1.5      -           0.19"
    assert doc_samples.normal([row]) == ["  float32   pass     9        0.06     1.5      -           S"]
    # a value column is never touched: a changed max_abs shows in the diff
    assert doc_samples.normal([row.replace("0.06", "0.07")]) != doc_samples.normal([row])
    assert doc_samples.normal(["built in 12.5 s"]) == ["built in N s"]
    assert doc_samples.normal(["porter test: device emulate; samples and references cached "
                               "(--no-cache recomputes)"]) == ["porter test: device emulate"]
