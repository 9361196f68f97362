"""`porter check --write-baseline` / `--baseline` and `porter: noqa` suppressions (issue 36):
a real-size tree's recorded findings are clean, a new mistake is still found, an edit that
moves old findings does not make them new, and a suppression needs its check ids and a reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from porter.checks import baseline
from porter.checks.model import Finding


def _check(root, *args):
    done = subprocess.run([sys.executable, "-m", "porter", "check", "--root", str(root), *args],
                          capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


COMMON_MPS = "torch/testing/_internal/common_mps.py"


@pytest.fixture
def recorded(real_root):
    code, out, err = _check(real_root, "--write-baseline", str(real_root / ".porter-baseline.json"))
    assert code == 0 and not out, err
    count = int(re.search(r"recorded (\d+) finding", err).group(1))
    assert count > 100              # the wheel-built tree has findings: the test needs them
    return real_root


@pytest.mark.slow
def test_a_recorded_tree_is_clean_and_a_new_mistake_is_found(recorded):
    code, out, err = _check(recorded, "--baseline", ".porter-baseline.json")
    # paths given to --baseline are the user's: relative to where porter runs
    assert code == 2 and "cannot read the baseline" in err
    base = str(recorded / ".porter-baseline.json")
    code, out, err = _check(recorded, "--baseline", base)
    assert (code, out) == (0, ""), err
    assert "recorded in" in err and "porter check: clean" in err

    common = recorded / COMMON_MPS
    text = common.read_text()
    planted = text.replace("UNIMPLEMENTED_XFAILLIST: dict[str, list | None] = {\n",
                           "UNIMPLEMENTED_XFAILLIST: dict[str, list | None] = {\n        \"heavyside\": None,\n", 1)
    assert planted != text
    common.write_text(planted)
    code, out, err = _check(recorded, "--baseline", base)
    assert code == 1
    assert len(out.splitlines()) == 1 and "PORTER030" in out and "'heavyside'" in out


def test_findings_moved_by_an_edit_above_them_stay_recorded(recorded):
    common = recorded / COMMON_MPS
    text = common.read_text()
    common.write_text(text.replace("UNIMPLEMENTED_XFAILLIST: dict[str, list | None] = {\n",
                                   "UNIMPLEMENTED_XFAILLIST: dict[str, list | None] = {\n" + "        # moved\n" * 7, 1))
    code, out, err = _check(recorded, "--baseline", str(recorded / ".porter-baseline.json"))
    assert (code, out) == (0, ""), out


def test_a_fixed_finding_is_counted_as_gone(recorded):
    common = recorded / COMMON_MPS
    text = common.read_text()
    common.write_text(re.sub(r'\n\s*"symeig": [^\n]*', "", text, count=1))
    code, out, err = _check(recorded, "--baseline", str(recorded / ".porter-baseline.json"))
    assert code == 0
    assert "1 entry of" in err and "no longer found (fixed): re-record with --write-baseline" in err


@pytest.mark.parametrize("content, says", [
    ("{", "the baseline is not JSON"),
    ('{"findings": []}', "not a porter check baseline"),
    ('{"porter_baseline": 1, "findings": [{"id": "PORTER999"}]}', "entry 1 names no porter check"),
])
def test_a_bad_baseline_is_bad_input_naming_the_file(real_root, content, says):
    bad = real_root / "bad.json"
    bad.write_text(content)
    code, out, err = _check(real_root, "--baseline", str(bad))
    assert code == 2 and not out
    assert err.startswith(f"porter: error: {bad}: {says}") and err.count("\n") == 1


def test_baseline_and_write_baseline_together_is_bad_input(real_root):
    code, _, err = _check(real_root, "--baseline", "a", "--write-baseline", "b")
    assert code == 2 and "pass one" in err


@pytest.mark.parametrize("message, same_as", [
    ("'x' in LIST names no OpInfo (common_methods_invocations.py:14077)",
     "'x' in LIST names no OpInfo (common_methods_invocations.py:15002)"),
    ("row at native_functions.yaml:478 'CPU, CUDA, MPS: f'", "row at native_functions.yaml:12 'CPU, CUDA, MPS: f'"),
    ("the kernel at line 40 of f.metal", "the kernel at line 41 of f.metal"),
])
def test_a_fingerprint_ignores_line_numbers_only(message, same_as):
    a = Finding("PORTER030", "p.py", 3, message, "")
    b = Finding("PORTER030", "p.py", 90, same_as, "")
    assert baseline.fingerprint(a) == baseline.fingerprint(b)
    assert baseline.fingerprint(a) != baseline.fingerprint(Finding("PORTER030", "q.py", 3, message, ""))
    assert baseline.fingerprint(a) != baseline.fingerprint(Finding("PORTER031", "p.py", 3, message, ""))
    assert baseline.fingerprint(a) != baseline.fingerprint(
        Finding("PORTER030", "p.py", 3, message + " and more", ""))


def test_two_identical_findings_need_two_entries():
    f = Finding("PORTER030", "p.py", 3, "m", "")
    new, held, gone = baseline.new_findings([f, f], baseline.Counter({baseline.fingerprint(f): 1}))
    assert (new, held, gone) == ([f], 1, 0)


def _div_line(root):
    text = (root / COMMON_MPS).read_text().splitlines()
    return next(i for i, line in enumerate(text) if line.strip() == '"div",'), text


@pytest.mark.parametrize("comment, hidden, note", [
    ("  # porter: noqa PORTER030 -- dead upstream: keys are name + variant ('divno_rounding_mode')",
     True, None),
    ("  # porter: noqa PORTER030,PORTER031 -- two ids", True, None),
    ("  # porter: noqa PORTER030", False, "gives no reason, so it suppresses nothing"),
    ("  # porter: noqa -- why", False, "names no check, so it suppresses nothing"),
    ("  # porter: noqa PORTER031 -- another check's id", False,
     "`porter: noqa PORTER031` does not name PORTER030, the finding on this line, so it suppresses nothing"),
    ("  # porter: noqa: PORTER030 -- ruff's colon", True, None),
    ("  # porter: noqa: PORTER030", False, "gives no reason, so it suppresses nothing"),
])
def test_an_inline_suppression_needs_its_ids_and_a_reason(real_root, comment, hidden, note):
    index, text = _div_line(real_root)
    text[index] += comment
    (real_root / COMMON_MPS).write_text("\n".join(text) + "\n")
    code, out, err = _check(real_root, "--select", "PORTER030")
    line = f"{COMMON_MPS}:{index + 1}: PORTER030"
    assert (line in out) is not hidden
    if hidden:
        assert "suppressed by `porter: noqa`" in err
    if note:
        assert f"{COMMON_MPS}:{index + 1}: `porter: noqa" in err and note in err


def test_porter030_reads_keys_as_upstreams_modifier_does(real_root):
    """common_mps.py's mps_ops_modifier keys every list by `op.name + op.variant_test_name`
    (SUPPORTED_COMPLEX_OPS too): a key PORTER030 flags matches no OpInfo of the real op_db, and
    one it accepts matches one. 'div' is flagged: div's OpInfos are variants
    ('divno_rounding_mode', ...), so upstream's own entry matches nothing."""
    from torch.testing._internal.common_methods_invocations import op_db

    from porter.harness import mps_expectations
    from porter.source.checkout import Checkout

    keys = {op.name + op.variant_test_name for op in op_db}
    code, out, _ = _check(real_root, "--select", "PORTER030", "--json")
    flagged = {re.match(r"'([^']+)'", f["message"]).group(1) for f in json.loads(out)["findings"]}
    assert "div" in flagged and "div" not in keys
    checkout = Checkout.at(real_root)
    exp, grad = mps_expectations.load(checkout), mps_expectations.load_grad(checkout)
    listed = {e.key for e in exp.entries + grad.entries} | set(exp.complex_supported or ())
    assert flagged and flagged <= listed
    assert not flagged & keys                       # each flagged key is dead upstream too
    assert {k for k in listed if k not in keys} <= flagged   # and every dead key is flagged


def test_a_narrowed_run_never_calls_recorded_findings_fixed(recorded):
    base = str(recorded / ".porter-baseline.json")
    subprocess.run(["git", "init", "-q"], cwd=recorded, check=True)
    subprocess.run(["git", "add", "-A"], cwd=recorded, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"],
                   cwd=recorded, check=True)
    for narrowed in (["--changed-since", "HEAD"], [COMMON_MPS], ["--select", "PORTER030"]):
        code, out, err = _check(recorded, "--baseline", base, *narrowed)
        assert (code, out) == (0, ""), (narrowed, err)
        assert "no longer found" not in err, narrowed


@pytest.mark.parametrize("narrowed", [["--changed-since", "HEAD"], [COMMON_MPS],
                                      ["--select", "PORTER030"], ["--skip", "PORTER002"]])
def test_a_baseline_is_recorded_from_the_whole_tree_only(real_root, narrowed):
    code, out, err = _check(real_root, "--write-baseline", str(real_root / "b.json"), *narrowed)
    assert code == 2 and not out and "records the whole tree's findings" in err
    assert not (real_root / "b.json").exists()


def test_an_unwritable_baseline_is_bad_input(real_root):
    code, out, err = _check(real_root, "--write-baseline", "/nonexistent/dir/b.json")
    assert code == 2 and err.startswith("porter: error: /nonexistent/dir/b.json: cannot write")
