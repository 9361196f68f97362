"""An expectation list changed anywhere but its top-level literal in `mps_ops_modifier` is
refused with the line (porter.harness.mps_expectations): porter reads the literals, a Mac's
test applies every change, so an unread `ON_MPS_XFAILLIST["sign"] = [torch.float32]` made
`porter test sign` green where a Mac reports an unexpected success (a reviewer's case)."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.errors import PorterError
from porter.harness import mps_expectations

torch = pytest.importorskip("torch")
UPSTREAM = (Path(torch.__file__).parent / "testing/_internal/common_mps.py").read_text()
ANCHOR = "        UNDEFINED_XFAILLIST: dict[str, list | None] = {"


def test_upstreams_own_modifier_is_read_whole():
    # its one change, `if sparse: UNIMPLEMENTED_XFAILLIST.update(..._SPARSE)`, is the sparse tests'
    assert "UNIMPLEMENTED_XFAILLIST.update(UNIMPLEMENTED_XFAILLIST_SPARSE)" in UPSTREAM
    assert len(mps_expectations.parse(UPSTREAM).entries) > 50


@pytest.mark.parametrize("statement", [
    '        UNIMPLEMENTED_XFAILLIST["sign"] = [torch.float32]',
    '        if MACOS_VERSION < 27.0:\n            UNIMPLEMENTED_XFAILLIST["sign"] = [torch.float32]',
    '        UNIMPLEMENTED_XFAILLIST.update({"sign": None})',
    '        UNIMPLEMENTED_XFAILLIST["abs"].append(torch.float32)',
    '        del UNIMPLEMENTED_XFAILLIST["abs"]',
    '        UNIMPLEMENTED_XFAILLIST |= {"sign": None}',
    '        if MACOS_VERSION < 27.0:\n            SKIPLIST = {"sign": None}',
    # a list defined empty and filled by a statement
    '        EMPTY_XFAILLIST: dict = {}\n        EMPTY_XFAILLIST["sign"] = None',
])
def test_a_change_porter_does_not_read_is_refused_at_its_line(statement):
    assert ANCHOR in UPSTREAM
    text = UPSTREAM.replace(ANCHOR, statement + "\n" + ANCHOR, 1)
    line = UPSTREAM[:UPSTREAM.index(ANCHOR)].count("\n") + 1
    with pytest.raises(PorterError) as err:
        mps_expectations.parse(text)
    assert err.value.line in (line, line + 1), (err.value.line, line)
    assert "does not read: write the entry inside the" in str(err.value)


@pytest.mark.parametrize("statement", [
    '        found = UNIMPLEMENTED_XFAILLIST.get("abs")',        # a read
    '        if sparse:\n            UNIMPLEMENTED_XFAILLIST.update({"abs": None})',
])
def test_reads_and_the_sparse_tests_changes_are_accepted(statement):
    text = UPSTREAM.replace(ANCHOR, statement + "\n" + ANCHOR, 1)
    assert mps_expectations.parse(text).entries


INSIDE = ANCHOR + "\n"


@pytest.mark.parametrize("key", ['"heavi" + "side"', "NAME", 'f"{x}"'])
def test_a_key_python_computes_is_refused_at_its_line(key):
    """Review 27's E1: `"heavi" + "side": [torch.float16]` was dropped; a Mac's test applies it
    and reports the dtype's unexpected success."""
    text = UPSTREAM.replace(INSIDE, f"{INSIDE}            {key}: [torch.float16],\n", 1)
    line = UPSTREAM[:UPSTREAM.index(ANCHOR)].count("\n") + 2
    with pytest.raises(PorterError) as err:
        mps_expectations.parse(text)
    assert err.value.line == line
    assert "has a key porter does not read" in str(err.value) and "string literal" in str(err.value)


def test_a_key_given_twice_applies_its_last_value_as_python_does():
    """Review 27's E2: both values applied, float16 an unexpected pass where Python keeps
    complex64 alone."""
    twice = '            "porter_op": [torch.float16],\n            "porter_op": [torch.complex64],\n'
    exp = mps_expectations.parse(UPSTREAM.replace(INSIDE, INSIDE + twice, 1))
    assert [e.shadowed for e in exp.for_key("porter_op")] == [True, False]
    assert exp.active("porter_op", "float16") == []
    assert [e.dtypes for e in exp.active("porter_op", "complex64")] == [("complex64",)]
    once = '            "porter_op": [torch.float16],\n'
    exp = mps_expectations.parse(UPSTREAM.replace(INSIDE, INSIDE + once, 1))
    assert [e.dtypes for e in exp.active("porter_op", "float16")] == [("float16",)]


# the modifier's `for op in ops:` loop read as a positive model (review 29): a statement that
# decorates ops otherwise than porter reads is not proven, at its line
LOOP = "            if key in SKIPLIST:\n"


@pytest.mark.parametrize(("statement", "says"), [
    # X01: an op decorated by name
    ("            if key == 'heaviside':\n                addDecorator(op, DecorateInfo("
     "unittest.expectedFailure, dtypes=[torch.float16]))\n", "decorates an op"),
    # a gate porter cannot evaluate (X03: the op's name)
    ("            if key in SKIPLIST and op.name != 'heaviside':\n                pass\n",
     "decides with `op.name != 'heaviside'`"),
    # a list applied that porter does not read as one (X02)
    ("            for lst in [SKIPLIST, HV_PENDING]:\n                pass\n",
     "applies HV_PENDING porter does not read"),
    # anything else the loop does
    ("            op.decorators = ()\n", "does more"),
])
def test_a_loop_statement_porter_does_not_model_is_not_proven(statement, says):
    assert UPSTREAM.count(LOOP) == 1
    text = UPSTREAM.replace(LOOP, statement + LOOP, 1)
    line = UPSTREAM[:UPSTREAM.index(LOOP)].count("\n") + 1
    unread = mps_expectations.parse(text).unread
    assert unread is not None and unread.startswith(
        (f"torch/testing/_internal/common_mps.py:{line}: ",
         f"torch/testing/_internal/common_mps.py:{line + 1}: ")), unread
    assert says in unread, unread


def test_upstreams_loop_and_a_key_compared_with_a_name_are_modelled():
    assert mps_expectations.parse(UPSTREAM).unread is None
    # `key != "x"` is evaluated per entry: the skip applies to every key but that one
    text = UPSTREAM.replace(LOOP, "            if key in SKIPLIST and key != 'abs':\n", 1)
    exp = mps_expectations.parse(text)
    assert exp.unread is None
    assert exp.gates["SKIPLIST"] is not None
    assert mps_expectations._truth(exp.gates["SKIPLIST"], (26, 0), "abs") is False
    assert mps_expectations._truth(exp.gates["SKIPLIST"], (26, 0), "sign") is True


# review 30: what lies beside the loop's own statements
@pytest.mark.parametrize(("old", "new", "says"), [
    # X01: addDecorator returning early for one op
    ("            op.decorators = op.decorators + (d,)\n",
     "            if op.name == 'abs':\n                return\n"
     "            op.decorators = op.decorators + (d,)\n", "def addDecorator"),
    # X02: a DecorateInfo with another argument than the dtypes
    ('DecorateInfo(unittest.skip("Skipped!"), dtypes=SKIPLIST[key])',
     'DecorateInfo(unittest.skip("Skipped!"), dtypes=SKIPLIST[key], active_if=False)',
     "decorates with other arguments than the dtypes"),
    # X03: a skip list applied as an expected failure
    ('DecorateInfo(unittest.skip("Skipped!"), dtypes=SKIPLIST[key])',
     'DecorateInfo(unittest.expectedFailure, dtypes=SKIPLIST[key])',
     "applies another decorator than its list's name says"),
    # X04: a second loop over the ops
    ("        return ops\n", "        for op in ops:\n            pass\n        return ops\n",
     "`for op in ops:` is a statement of the modifier"),
    # review 35: a list bound again after the loop (T15), the loop over some ops (T18, T19),
    # another key (T20), a default device the MPS test does not match (T22), other ops returned
    ("        return ops\n", "        SKIPLIST = {}\n        return ops\n", "binds a list after the loop"),
    ("        for op in ops:\n", "        for op in ops[:10]:\n", "loops over other ops than every op"),
    ("        for op in ops:\n", "        for op in filter(None, ops):\n", "loops over other ops than every op"),
    ("            key = op.name + op.variant_test_name\n",
     "            key = op.name + '_' + op.variant_test_name\n", "keys the lists otherwise"),
    ('device_type: str = "mps"', 'device_type: str = "cuda"', "takes `device_type` = 'cuda'"),
    ("        return ops\n", "        return ops[:1]\n", "returns other ops than it was given"),
])
def test_the_modifiers_other_statements_are_not_proven(old, new, says):
    assert old in UPSTREAM
    text = UPSTREAM.replace(old, new, 1)
    unread = mps_expectations.parse(text).unread
    assert unread is not None and says in unread, unread
