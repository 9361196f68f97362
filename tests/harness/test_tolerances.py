"""Tolerances are the checkout's: its test/test_mps.py `_compute_tolerances` when it has one;
porter's built-in table, marked approximate, agrees with those rules for every OpInfo."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from porter.source.checkout import TEST_MPS, Checkout  # noqa: E402
from porter.harness import opdb, tolerances  # noqa: E402
from porter.harness.backend import mps_dtypes  # noqa: E402
from porter.harness.session import Options, run as run_session  # noqa: E402
from porter.testing.trees import fixture_root  # noqa: E402


def test_builtin_table_equals_the_checkouts_rules_for_every_opinfo_and_dtype():
    lists = tolerances.load_lists(Checkout.at(fixture_root()))
    assert lists.rules is not None and lists.source == f"{TEST_MPS} (_compute_tolerances)"
    builtin = tolerances.load_lists(None)
    assert builtin.rules is None and builtin.source == "built-in"
    db = opdb.load(None)
    compared, loosened, differ = 0, 0, []
    for info in db.ops:
        for dtype in sorted(set(info.supported_dtypes("mps")) & mps_dtypes(), key=str):
            theirs = lists.tolerances(info, dtype)
            ours = builtin.tolerances(info, dtype)
            compared += 1
            loosened += theirs != (None, None)
            if theirs != ours:
                differ.append((info.full_name, str(dtype), theirs, ours))
    assert differ == []
    assert compared > 3000 and loosened > 100      # the rules were exercised, not vacuous


def test_a_rule_changed_in_the_checkout_is_the_one_porter_uses(tmp_path):
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    path = root / TEST_MPS
    text = path.read_text()
    assert "'acosh', 'add'," in text
    path.write_text(text.replace("'acosh', 'add',", "'acosh', 'add', 'neg',", 1))
    out = io.StringIO()
    run_session(Options(ops=["neg"], root=str(root), device="cpu-mps", dtypes=["float16", "float32"],
                        json=True, out=out))
    data = json.loads(out.getvalue())
    assert data["tolerance_lists"] == f"{TEST_MPS} (_compute_tolerances)"
    got = {d["dtype"]: (d["atol"], d["rtol"]) for d in data["ops"][0]["dtypes"]}
    assert got == {"float16": (2e-2, 1e-2), "float32": (None, None)}


def test_without_rules_the_header_says_the_table_is_approximate(tmp_path):
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    (root / TEST_MPS).unlink()
    out = io.StringIO()
    run_session(Options(ops=["neg"], root=str(root), device="cpu-mps", dtypes=["float32"], out=out))
    assert "tolerance lists porter's built-in copy (approximate" in out.getvalue().splitlines()[0]
