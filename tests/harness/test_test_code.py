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
    # torch.library imported from torch (review 29's T01)
    (COMMON_MPS, "import torch\n", "import torch\nfrom torch import library as _lib\n",
     "uses torch.library"),
    # ... in a module-level function the module calls (T02)
    (TEST_MPS, "import torch\n", "import torch\n\n\ndef _debug():\n    import torch.library\n\n\n"
     "_debug()\n", "uses torch.library"),
    # the ops from a variable holding another call of the modifier (X04)
    (TEST_MPS, DECORATOR, "@ops(_CONSISTENCY_OPS", "takes its ops from `_CONSISTENCY_OPS`"),
    # review 30: T09 (another decorator on the test), T12 (torch._C's registration), T13 (a
    # registration in another class's body, which runs at import)
    (TEST_MPS, DECORATOR, "@unittest.expectedFailure\n    " + DECORATOR,
     "has the decorator `@unittest.expectedFailure`"),
    (COMMON_MPS, "import torch\n", "import torch\n_L = torch._C._dispatch_library('IMPL', 'aten', '')\n",
     "uses torch.library"),
    (TEST_MPS, "import torch\n", "import torch\n\n\nclass Other:\n    _l = torch.library.Library('aten', 'IMPL')\n",
     "uses torch.library"),
    # the test's dtypes without float16 (T07: porter's float16 row failed where a Mac has none)
    (TEST_MPS, "torch.float16, torch.bfloat16, torch.float32", "torch.bfloat16, torch.float32",
     "allowed_dtypes `MPS_DTYPES` (bfloat16, bool, complex64, float32, int16, int32, int64, int8, "
     "uint8) are not the dtypes porter tests"),
])
def test_test_code_porter_does_not_model_is_said_at_its_line(root, rel, old, new, says):
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    found = unmodelled(Checkout.at(root))
    assert found is not None and found.startswith(f"{rel}:") and says in found, found


CLASS_LINE = "class TestConsistency(TestCase):\n"
INSTANTIATE = 'instantiate_device_type_tests(TestConsistency, globals(), allow_mps=True, only_for="mps")'
DEVICE = '        self.assertEqual(device, "mps:0")\n'

# review 31's T05-T14: what decides whether a per-op MPS test exists and reaches the sample loop
COLLECTION_TABLE = [
    (CLASS_LINE, "@unittest.skip('flaky')\n" + CLASS_LINE, "has the decorator `@unittest.skip('flaky')`"),
    (CLASS_LINE, CLASS_LINE + "    def setUp(self):\n        self.skipTest('off')\n\n",
     "defines `setUp`, unittest's own"),
    (CLASS_LINE, CLASS_LINE + "    def _callTestMethod(self, method):\n        pass\n\n",
     "defines `_callTestMethod`, unittest's own"),
    ("    def _run_op(self, op, mps_sample):\n",
     "    def test_output_match(self, device):\n        pass\n\n    def _run_op(self, op, mps_sample):\n",
     "binds test_output_match 2 times"),
    (DEVICE, DEVICE.replace("mps:0", "mps:1"), "`self.assertEqual(device, 'mps:1')` runs outside"),
    (DEVICE, DEVICE + "        if op.name == 'heaviside':\n            return\n", "`if op.name == 'heaviside':` runs outside"),
    ("requires_grad=(dtype.is_floating_point or dtype.is_complex)):",
     "requires_grad=(dtype.is_floating_point or dtype.is_complex))[:0]:",
     "`for mps_sample in op.sample_inputs(device, dtype, set_seed=True, requi` runs outside"),
    # review 34's T01: the sample call's keywords are passed as a Mac's test passes them
    ("requires_grad=(dtype.is_floating_point or dtype.is_complex)):", "requires_grad=True):",
     "asks `op.sample_inputs` with `requires_grad=True`"),
    ("set_seed=True,", "set_seed=False,", "asks `op.sample_inputs` with `set_seed=False`"),
    ("requires_grad=(dtype.is_floating_point or dtype.is_complex)):",
     "requires_grad=(dtype.is_floating_point or dtype.is_complex), include_conjugated_inputs=dtype.is_complex):",
     "asks `op.sample_inputs` with `include_conjugated_inputs=dtype.is_complex`"),
    (INSTANTIATE, INSTANTIATE.replace('only_for="mps"', 'only_for="cpu"'), "may make no MPS test (only_for='cpu')"),
    (INSTANTIATE, INSTANTIATE.replace(", allow_mps=True", ""), "makes no MPS test without allow_mps=True"),
    (INSTANTIATE, INSTANTIATE + "\ndel TestConsistencyMPS", "`del TestConsistencyMPS` names a TestConsistency class"),
    (INSTANTIATE, "pass", "no `instantiate_device_type_tests(TestConsistency, globals(), ...)`"),
    ("import unittest\n", "import unittest\nimport pytest\npytestmark = pytest.mark.skip('x')\n",
     "binds `pytestmark`"),
    ("import unittest\n", "import unittest\n\n\ndef load_tests(loader, tests, pattern):\n    return tests\n",
     "binds `load_tests`"),
]


@pytest.mark.parametrize(("old", "new", "says"), COLLECTION_TABLE, ids=[r[2][:40] for r in COLLECTION_TABLE])
def test_what_makes_and_reaches_the_mps_test_is_a_positive_model(root, old, new, says):
    test_test_code_porter_does_not_model_is_said_at_its_line(root, TEST_MPS, old, new, says)


def test_upstreams_test_output_match_head_is_modelled(root):
    """Upstream's own lines before the loop: a local the loop passes to sample_inputs."""
    path = root / TEST_MPS
    text = path.read_text()
    text = text.replace(DEVICE, DEVICE + "        include_conjugated_inputs = "
                        "dtype.is_complex and op.test_conjugated_samples\n", 1)
    path.write_text(text)
    assert unmodelled(Checkout.at(root)) is None
    # ... and passes it, as upstream's call does, with requires_grad=False (plain samples)
    path.write_text(text.replace("requires_grad=(dtype.is_floating_point or dtype.is_complex)):",
                                 "requires_grad=False,\n include_conjugated_inputs="
                                 "include_conjugated_inputs):", 1))
    assert unmodelled(Checkout.at(root)) is None


def test_torch_library_in_another_test_class_is_not_test_output_matchs(root):
    path = root / TEST_MPS
    path.write_text(path.read_text() + "\n\nclass TestPorterOther:\n    def test_x(self):\n"
                    "        import torch.library\n")
    assert unmodelled(Checkout.at(root)) is None


# TestConsistency._run_op computes what test_output_match compares: porter models its shapes
# (the CPU copy of the sample, the op on each, a dtype chosen and the CPU output cast, warnings
# silenced, a return of the two outputs and the CPU sample); review 28's T06 returned fixed
# tensors for gelu, red on a Mac and green here.
RUN_OP_HEAD = "    def _run_op(self, op, mps_sample):\n"
FIXED = ("        if op.name == 'nn.functional.gelu':\n"
         "            return torch.zeros(1), torch.ones(1), None\n")
# the shape of upstream's own: a branch for two other ops, warnings silenced, the CPU's missing
# low-precision kernel retried in float32 and its output cast back
UPSTREAMS_SHAPE = '''    def _run_op(self, op, mps_sample, dtype=None):
        if op.name in ("grid_sampler_2d", "grid_sampler_3d") and dtype is None:
            dtype = torch.float32
        cpu_sample = transform_opinfo_sample_to_cpu(mps_sample, dtype)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning)
            mps_out = op(mps_sample.input, *mps_sample.args, **mps_sample.kwargs)
            try:
                cpu_out = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            except NotImplementedError:
                if not isinstance(mps_out, torch.Tensor):
                    raise
                dtype = torch.float32
                cpu_sample = transform_opinfo_sample_to_cpu(mps_sample, dtype=torch.float32)
                cpu_out = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
        if dtype is not None:
            cpu_out = cpu_out.to(dtype=mps_out.dtype)
        return mps_out, cpu_out, cpu_sample

    def _unused(self):
'''
FIXTURE_BODY = ("        cpu_sample = mps_sample.transform(\n"
                "            lambda t: t.detach().cpu().requires_grad_(t.requires_grad) if "
                "isinstance(t, torch.Tensor) else t)\n")
FIXTURE_RETURN = "        return op(mps_sample.input, *mps_sample.args, **mps_sample.kwargs), \\\n"


def _run_op_read(root: Path, old: str, new: str):
    from porter.harness.test_code import run_op_unmodelled
    path = root / TEST_MPS
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    return run_op_unmodelled(Checkout.at(root))


# (text replaced, its replacement) -> (every op's finding, gelu's, heaviside's): None or the words
RUN_OP_TABLE = [
    # the fixture's own (upstream's shape in porter's words): modelled
    ((RUN_OP_HEAD, RUN_OP_HEAD), (None, None, None)),
    # upstream's shape, its branch for grid_sampler: modelled for every other op
    ((RUN_OP_HEAD, UPSTREAMS_SHAPE), (None, None, None)),
    # a branch for gelu alone: gelu's is not proven, heaviside's is untouched (T06)
    ((RUN_OP_HEAD, RUN_OP_HEAD + FIXED), (None, "test/test_mps.py:109: _run_op's `if op.name == "
                                          "'nn.functional.gelu':` runs for this op", None)),
    # ... and its `else`, which runs for every other op, does something else
    ((RUN_OP_HEAD, RUN_OP_HEAD + FIXED.replace("None\n", "None\n        else:\n"
                                                "            torch.manual_seed(0)\n")),
     ("test/test_mps.py:112: _run_op's `torch.manual_seed(0)` does more", "runs for this op", None)),
    # a statement of its own for every op
    ((RUN_OP_HEAD, RUN_OP_HEAD + "        torch.manual_seed(0)\n"),
     ("_run_op's `torch.manual_seed(0)` does more", None, None)),
    # the sample's MPS inputs replaced
    ((FIXTURE_BODY, FIXTURE_BODY + "        mps_sample = mps_sample.transform(lambda t: t * 0)\n"),
     ("_run_op's `mps_sample = mps_sample.transform(lambda t: t * 0)` computes a value", None, None)),
    # the op run on the CPU copy twice: no MPS output compared
    ((FIXTURE_RETURN, FIXTURE_RETURN.replace("mps_sample", "cpu_sample")),
     ("returns another value", None, None)),
    # review 30's T01: a CPU copy that rounds the inputs
    ((FIXTURE_BODY, FIXTURE_BODY.replace("t.detach().cpu().requires_grad_",
                                         "t.detach().cpu().half().requires_grad_")),
     ("computes a value", None, None)),
    # T02-T04: the method bound again, decorated, or by an assignment
    ((RUN_OP_HEAD, "    @staticmethod\n" + RUN_OP_HEAD),
     ("_run_op is bound otherwise than by one plain definition", None, None)),
    ((RUN_OP_HEAD, "    _run_op = None\n\n" + RUN_OP_HEAD),
     ("_run_op is bound otherwise than by one plain definition", None, None)),
    # T07: the sample loop changes what it compares, for one op
    (("            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n\n" + RUN_OP_HEAD,
      "            if op.name == 'nn.functional.gelu':\n                mps_out = mps_out * 0\n"
      "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n\n" + RUN_OP_HEAD),
     (None, "test_output_match's `if op.name == 'nn.functional.gelu':` runs for this op", None)),
]


@pytest.mark.parametrize(("edit", "expected"), RUN_OP_TABLE)
def test_run_op_is_read_as_a_positive_model(root, edit, expected):
    every, per_op = _run_op_read(root, *edit)
    found = (every, per_op.get("nn.functional.gelu"), per_op.get("heaviside"))
    for said, words in zip(found, expected):
        assert (said is None) == (words is None), (found, expected)
        assert words is None or words in said, (said, words)


def test_a_registration_in_the_op_database_module_is_not_proven(root):
    # review 30's T14: common_methods_invocations.py, which the test imports
    rel = "torch/testing/_internal/common_methods_invocations.py"
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import torch\n\n_L = torch.library.Library('aten', 'IMPL')\n")
    found = unmodelled(Checkout.at(root))
    assert found is not None and found.startswith(f"{rel}:3: ") and "uses torch.library" in found


def test_upstreams_sample_loop_shape_is_modelled_beside_its_op_branches():
    """The 2026 shape of upstream's loop: a local set to a constant and, for one op, to the
    dtype; `_run_op` given it; the tolerance branches; kthvalue's own comparison."""
    import ast
    from porter.harness.test_code import _sample_loop_unmodelled
    cls = ast.parse('''
class TestConsistency(TestCase):
    def test_output_match(self, device, dtype, op):
        for mps_sample in op.sample_inputs(device, dtype, set_seed=True):
            opt_dtype = None
            if op.name == "histc" and not dtype.is_floating_point:
                opt_dtype = dtype
            mps_out, cpu_out, cpu_sample = self._run_op(op, mps_sample, opt_dtype)
            atol, rtol = self._compute_tolerances(op, dtype)
            if op.name in ["_upsample_bilinear2d_aa"] and mps_sample.kwargs.get("x") == 1:
                atol, rtol = 2e-5, 2e-6
            if op.name == "kthvalue":
                self.assertEqual(cpu_out[0], mps_out[0], atol=atol, rtol=rtol)
                continue
            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)
''').body[0]
    every, per_op = _sample_loop_unmodelled(cls)
    assert every is None and sorted(per_op) == ["histc", "kthvalue"], (every, per_op)
    # the same local given a value the test computes, or an output changed: every op
    changed = ast.parse(ast.unparse(cls).replace("opt_dtype = None", "opt_dtype = dtype")).body[0]
    assert "does more than compare" in (_sample_loop_unmodelled(changed)[0] or "")


UPSTREAM_DB = '''
test_consistency_op_db = copy.deepcopy(op_db)

for op in op_db:
    if op.name != "_upsample_bilinear2d_aa":
        continue
    op = copy.deepcopy(op)
    op.name = "_upsample_bicubic2d_aa"
    op.op = torch.ops.aten._upsample_bicubic2d_aa
    test_consistency_op_db.append(op)
    break

_ref_test_ops = tuple(filter(lambda op: op.ref is not None, op_db))
'''


@pytest.mark.parametrize(("module_code", "every", "gated"), [
    # upstream's own module code: a copy, the bicubic entry added from bilinear's, a list read
    (UPSTREAM_DB, None, {"_upsample_bilinear2d_aa"}),
    # review 32's D09: heaviside filtered out, no test of it on a Mac
    ("op_db = [o for o in op_db if o.name != 'heaviside']\n", "binds an op list again", set()),
    # D03b: an entry's op replaced in place
    ("for o in op_db:\n    if o.name == 'heaviside':\n        o.op = lambda a, b: torch.heaviside(b, a)\n",
     "may change the op database", set()),
    ("op_db[0].op = None\n", "may change the op database", set()),
    ("_first = op_db.pop()\n", "may change the op database", set()),
    # the gated loop that names the list otherwise than to append to it acts on every op
    (UPSTREAM_DB.replace("test_consistency_op_db.append(op)", "op_db.clear()"),
     "may change the op database", set()),
])
def test_the_op_database_module_code_is_a_positive_model(root, module_code, every, gated):
    from porter.harness.test_code import run_op_unmodelled
    path = root / TEST_MPS
    text = path.read_text()
    anchor = "\nclass TestFallbackWarning"
    assert anchor in text
    path.write_text(text.replace(anchor, "\n" + module_code + anchor, 1))
    found, ops = run_op_unmodelled(Checkout.at(root))
    assert (found is None) == (every is None) and (every is None or every in found), found
    assert set(ops) >= gated, ops
    if gated:
        assert all("acts on this op's entry" in ops[name] for name in gated)
