"""Test code of the checkout that changes a Mac's test_output_match beyond what porter reads
of it is "not proven" (porter.harness.test_code; review 28's R08, R09, X07, X08 were green or
red on porter's reading alone)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from porter.harness.test_code import unmodelled
from porter.source.checkout import COMMON_MPS, TEST_MPS, Checkout
from porter.testing.trees import fixture_root

DECORATOR = "@ops(mps_ops_modifier(copy.deepcopy(op_db))"


@pytest.fixture
def root(tmp_path) -> Path:
    return Path(shutil.copytree(fixture_root(), tmp_path / "mini"))


def test_the_fixtures_test_code_is_modelled(root):
    assert DECORATOR in (root / TEST_MPS).read_text()
    assert unmodelled(Checkout.at(root)) is None


@pytest.mark.parametrize(("rel", "old", "new", "says"), [
    # a kernel registered from Python, where test_output_match's module runs it
    (COMMON_MPS, "import torch\n", "import torch\nimport torch.library\n", "uses torch.library"),
    (COMMON_MPS, "import torch\n",
     "import torch\n_lib = torch.library.Library('aten', 'IMPL')\n", "uses torch.library"),
    (TEST_MPS, "import torch\n", "import torch\nfrom torch.library import Library\n", "uses torch.library"),
    # the modifier called with more than the op list
    (TEST_MPS, DECORATOR, "@ops(mps_ops_modifier(copy.deepcopy(op_db), sparse=True)",
     "takes its ops from `mps_ops_modifier(copy.deepcopy(op_db), sparse=True)`"),
    (TEST_MPS, DECORATOR, "@ops(mps_ops_modifier(copy.deepcopy(op_db), xfail_exclusion=['abs'])",
     "which porter does not model"),
])
def test_test_code_porter_does_not_model_is_said_at_its_line(root, rel, old, new, says):
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    found = unmodelled(Checkout.at(root))
    assert found is not None and found.startswith(f"{rel}:") and says in found, found


def test_torch_library_in_another_test_class_is_not_test_output_matchs(root):
    path = root / TEST_MPS
    path.write_text(path.read_text() + "\n\nclass TestPorterOther:\n    def test_x(self):\n"
                    "        import torch.library\n")
    assert unmodelled(Checkout.at(root)) is None
