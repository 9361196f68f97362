"""The Markdown job summaries of `porter test`, `audit-xfails` and `check` (golden outputs)."""

from __future__ import annotations

import expecttest

from porter.apply.summary import append, cell, code
from porter.checks import Report
from porter.checks.model import Finding
from porter.checks.output import markdown as check_markdown
from porter.harness.markdown import audit_section
from porter.harness.markdown import test_section as section_of
from porter.harness.verdicts import DtypeResult, OpResult


def _results() -> list[OpResult]:
    return [
        OpResult("hypot", "hypot", "", "hypot", "emulate", dtypes=[
            DtypeResult("float16", "fail", samples=9, failed_samples=8, first_failure=0,
                        message="Scalars are not close!\nExpected 10.2 | got 8.6"),
            DtypeResult("float32", "pass", samples=9)]),
        OpResult("sign", "sign", "", "sign", "emulate", dtypes=[
            DtypeResult("float16", "xpass", samples=4, expected_by=["ON_MPS_XFAILLIST"]),
            DtypeResult("bool", "skip", message="no kernel registered for bool")]),
        OpResult("exp", "exp", "", "exp", "emulate",
                 dtypes=[DtypeResult("float32", "pass", samples=3)]),
    ]


class TestMarkdown(expecttest.TestCase):
    def test_test_section(self):
        self.assertExpectedInline(section_of(_results(), "emulate"), """\
### porter test --device emulate: ❌ failed

3 OpInfo(s); 2 pass, 1 fail, 0 xfail, 1 xpass, 1 skip.

| op | result | dtypes | first failing sample | repro |
|---|---|---|---|---|
| `hypot` | ❌ fail | **float16 fail**, float32 pass | float16 sample 0 (8/9): Scalars are not close! Expected 10.2 \\| got 8.6 | `porter test hypot --device emulate --dtype float16 --sample 0` |
| `sign` | ⚠️ xpass | **float16 xpass**, bool skip | float16 passes but is expected to fail by ON_MPS_XFAILLIST (stale entry: --prune-xfails narrows it) | `porter test sign --device emulate --dtype float16` |
| `exp` | ✅ pass | float32 pass | - | - |

<details><summary>skipped dtypes and why</summary>

- `sign` bool: no kernel registered for bool

</details>
""")

    def test_a_rows_notes_are_listed(self):
        """A reference run's note qualifies a green row (values not compared, none added): the
        job summary, where reviewers look, says it as the text report does."""
        results = [OpResult("nn.functional.gelu", "nn.functional.gelu", "", "nn.functional.gelu",
                            "emulate", reference=True, dtypes=[
                                DtypeResult("float32", "pass", samples=10,
                                            notes=["2 edge value(s) not compared: x=inf"]),
                                DtypeResult("float16", "pass", samples=10)])]
        self.assertExpectedInline(section_of(results, "emulate").split("\n\n", 3)[3], """\
Notes:

- `nn.functional.gelu` float32: 2 edge value(s) not compared: x=inf
""")

    def test_a_rows_notes_are_github_notices(self):
        from porter.commands.test import github_annotations
        data = {"ops": [{"op": "nn.functional.hardswish", "name": "nn.functional.hardswish",
                         "reference": True, "dtypes": [
                             {"dtype": "float32", "outcome": "pass", "notes": ["no edge values added"]},
                             {"dtype": "float16", "outcome": "pass", "notes": []}]}]}
        assert github_annotations(data, "emulate") == [
            "::notice title=porter test nn.functional.hardswish float32::no edge values added"]

    def test_nothing_tested_is_not_green(self):
        empty = [OpResult("heaviside", "heaviside", "", "heaviside", "emulate")]
        text = section_of(empty, "emulate")
        assert text.startswith("### porter test --device emulate: ⚠️ nothing was tested\n")
        assert "| `heaviside` | ⚠️ no dtype tested |" in text

    def test_audit_section(self):
        results = _results()[1:]
        self.assertExpectedInline(audit_section(results, ["sign float16: ON_MPS_XFAILLIST"], ["gone"], [],
                                                "merged", 2), """\
### porter audit-xfails (merged): ❌ stale entries

2 expectation key(s), 2 OpInfo(s); 1 pass, 0 fail, 0 xfail, 1 xpass, 1 skip.

Stale entries (each passes but is expected to fail; `porter audit-xfails --prune-xfails` narrows or removes them):

- sign float16: ON_MPS_XFAILLIST

Keys naming no OpInfo in the op database:

- `gone`

| op | result | dtypes | first failing sample | repro |
|---|---|---|---|---|
| `sign` | ⚠️ xpass | **float16 xpass**, bool skip | float16 passes but is expected to fail by ON_MPS_XFAILLIST (stale entry: --prune-xfails narrows it) | `porter test sign --device emulate --dtype float16` |
""")

    def test_check_markdown(self):
        report = Report(findings=[Finding("PORTER001", "aten/src/ATen/native/native_functions.yaml", 12,
                                          "abs names MPS twice", "remove one")],
                        ran=["PORTER001"], notes=[])
        text = check_markdown(report, "origin/main")
        self.assertExpectedInline(text, """\
### porter check (changes since `origin/main`): ❌ 1 finding(s)

PORTER001 duplicate-mps-key ×1.

| check | where | finding | fix |
|---|---|---|---|
| PORTER001 duplicate-mps-key | `aten/src/ATen/native/native_functions.yaml:12` | abs names MPS twice | remove one |
""")


def test_cells_are_one_line_and_escaped():
    assert cell("a |\n b") == "a \\| b" and cell(None) == "-" and cell("x" * 10, 5) == "xxxx…"
    assert code("a`b") == "``a`b``"


def test_append_adds_to_what_other_steps_wrote(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("# earlier step\n")
    append(path, "### porter\n")
    assert path.read_text() == "# earlier step\n### porter\n\n"


def test_audit_merge_writes_the_summary(mini_root, tmp_path, capsys):
    import json

    from porter.cli import main
    shard = tmp_path / "audit-1.json"
    shard.write_text(json.dumps({"ops": [r.to_json() for r in _results()[1:]], "keys": 2,
                                 "orphans": []}))
    summary = tmp_path / "summary.md"
    code = main(["audit-xfails", "--root", str(mini_root), "--merge", str(shard), "--summary", str(summary)])
    out = capsys.readouterr().out
    assert code == 1 and "stale: " in out
    text = summary.read_text()
    assert text.startswith("### porter audit-xfails (merged): ❌ stale entries\n")
    assert "| `sign` | ⚠️ xpass |" in text


def test_check_summary_appends(mini_root, tmp_path, capsys):
    from porter.cli import main
    summary = tmp_path / "summary.md"
    summary.write_text("earlier\n")
    assert main(["check", "--root", str(mini_root), "--summary", str(summary), "--select", "PORTER001"]) == 0
    assert summary.read_text() == "earlier\n### porter check: ✅ clean\n\n1 checks ran; no finding.\n\n"


def test_check_markdown_keeps_the_summary_readable():
    findings = [Finding("PORTER001", "a.yaml", i, f"finding {i}", "fix") for i in range(1, 131)]
    text = check_markdown(Report(findings=findings, ran=["PORTER001"], notes=[]))
    assert text.count("| PORTER001 ") == 100 and "… and 30 more: `porter check` lists them all." in text
    assert text.startswith("### porter check: ❌ 130 finding(s)")


def test_audit_merge_of_some_shards_is_incomplete_not_clean(mini_root, tmp_path, capsys):
    # shard 1/2 alone audited half the keys: "no stale entries", exit 0, spoke for all of them
    import json

    from porter.cli import main
    one = tmp_path / "a1.json"
    one.write_text(json.dumps({"ops": [], "keys": 1, "orphans": [], "shard": "1/2"}))
    capsys.readouterr()
    code = main(["audit-xfails", "--root", str(mini_root), "--merge", str(one)])
    out, err = capsys.readouterr()
    assert code == 1 and "no stale entries" not in out
    assert "shard(s) 2/2 missing" in err
    assert main(["audit-xfails", "--root", str(mini_root), "--merge", str(one), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["ok"], data["missing_shards"]) == (False, ["2/2"])
    two = tmp_path / "a2.json"
    two.write_text(json.dumps({"ops": [], "keys": 1, "orphans": [], "shard": "2/2"}))
    assert main(["audit-xfails", "--root", str(mini_root), "--merge", str(one), str(two)]) == 0
    assert "no stale entries" in capsys.readouterr().out
    code = main(["audit-xfails", "--root", str(mini_root), "--merge", str(one), str(one)])
    err = capsys.readouterr().err
    assert code == 2 and "shard 1/2 is merged twice" in err and err.count("\n") <= 2
