"""Tolerances are the checkout's: the statements of its test/test_mps.py test_output_match that
set atol/rtol are cut out and run; porter's built-in table, marked approximate, is used only
when the checkout has none.

The reference in these tests is independent of porter's cutting: the checkout's whole
TestConsistency class is executed and its real test_output_match method is called with a
stand-in `self` whose assertEqual records the (atol, rtol) it is asked to compare with.
"""

from __future__ import annotations

import ast
import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from expecttest import assert_expected_inline

torch = pytest.importorskip("torch")

from porter.source.checkout import TEST_MPS, Checkout  # noqa: E402
from porter.harness import opdb, sample_rules, tolerances  # noqa: E402
from porter.harness.devices import mps_dtypes  # noqa: E402
from porter.harness.session import Options, run as run_session  # noqa: E402
from porter.testing.trees import fixture_root  # noqa: E402

FROM_TEST = tolerances.TOLERANCES_FROM_TEST

# An older upstream shape (2022-2023), in porter's words: no _compute_tolerances, the whole
# decision an if/elif chain inside the sample loop, with pow's, interpolate's and
# upsample_bilinear's rules among the low-precision lists.
OLDER_TEST_MPS = '''
import torch

class TestConsistency(TestCase):
    FP16_LOW_PRECISION_LIST = {'add', 'sub', 'nn.functional.interpolate'}
    FP32_LOW_PRECISION_LIST = {'matmul', 'nn.functional.conv2d'}

    @ops(mps_ops_modifier(test_consistency_op_db), allowed_dtypes=MPS_DTYPES)
    def test_output_match(self, device, dtype, op):
        for cpu_sample in op.sample_inputs(device, dtype, requires_grad=False):
            mps_sample = cpu_sample.transform(lambda x: x.to("mps") if isinstance(x, torch.Tensor) else x)
            cpu_out = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            mps_out = op(mps_sample.input, *mps_sample.args, **mps_sample.kwargs)
            if op.name in self.FP32_LOW_PRECISION_LIST and dtype == torch.float32:
                atol = 1e-4
                rtol = 3e-5
            elif op.name in self.FP16_LOW_PRECISION_LIST and dtype == torch.float16:
                atol = 1e-2
                rtol = 1e-2
            elif op.name in ["pow", "__rpow__"]:
                atol = 1e-6
                rtol = 4e-6
            elif op.name == "nn.functional.interpolate":
                atol = 1e-3
                rtol = 1e-4
            elif op.name == "nn.functional.upsample_bilinear" and dtype == torch.uint8:
                atol = 1.0
                rtol = 0.0
            else:
                atol = None
                rtol = None
            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)
'''


class _Captured(Exception):
    pass


class _Op(SimpleNamespace):
    def __call__(self, *args, **kwargs):       # the older shape calls the op itself
        return None


def upstream_test(text: str, namespace: dict | None = None):
    """The checkout's TestConsistency class itself (decorators and bases dropped)."""
    tree = ast.parse(text)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
               and n.name == "TestConsistency")
    cls.bases, cls.decorator_list = [], []
    for item in cls.body:
        if isinstance(item, ast.FunctionDef):
            item.decorator_list = []
    namespace = dict(namespace or {"torch": torch})
    exec(compile(ast.Module(body=[cls], type_ignores=[]), TEST_MPS, "exec"), namespace)
    return namespace["TestConsistency"]


def upstream_tolerances(cls, info, dtype, sample=None) -> tuple:
    """(atol, rtol) the checkout's test_output_match compares `sample` with."""
    def assert_equal(first, second, atol=None, rtol=None, **_):
        if first == "mps:0":            # the device check before the loop
            return
        raise _Captured((atol, rtol))
    stub = cls.__new__(cls)
    stub.assertEqual = assert_equal
    stub._run_op = lambda op, s, *rest: ([None, None], [None, None], s)
    if sample is None:
        sample = SimpleNamespace(input=None, args=(), kwargs={})
        sample.transform = lambda fn: sample            # the older shape's move to "mps"
    op = _Op(name=info.name, variant_test_name=info.variant_test_name,
                         test_conjugated_samples=True,
                         sample_inputs=lambda *a, **k: iter([sample]))
    try:
        cls.test_output_match(stub, "mps:0", dtype, op)
    except _Captured as got:
        return got.args[0]
    raise AssertionError(f"{info.full_name} {dtype}: the test compared nothing")


def _mps_dtypes(info):
    return sorted(set(info.supported_dtypes("mps")) & mps_dtypes(), key=str)


def test_porters_tolerances_are_the_checkouts_for_every_opinfo_dtype_and_sample():
    """Every OpInfo of the installed torch and every dtype the MPS test sends: porter's
    (atol, rtol) equals what the fixture's test_output_match (upstream's 2025 shape) compares
    with; for the ops a sample-dependent rule names, on every sample."""
    text = (fixture_root() / TEST_MPS).read_text()
    lists = tolerances.load_lists(Checkout.at(fixture_root()))
    assert lists.source == FROM_TEST and not lists.approximate
    cls = upstream_test(text)
    db = opdb.load(None)
    compared, loosened, differ = 0, set(), []
    for info in db.ops:
        for dtype in _mps_dtypes(info):
            theirs = upstream_tolerances(cls, info, dtype)
            ours = lists.tolerances(info, dtype)
            compared += 1
            if theirs != (None, None):
                loosened.add(info.name)
            if theirs != ours:
                differ.append((info.full_name, str(dtype), theirs, ours))
    assert differ == []
    assert compared > 3000 and len(loosened) > 60      # the rules were exercised, not vacuous

    # per sample: the OpInfos a sample-dependent branch names
    dependent = tolerances.isolate(text).sample_dependent
    assert dependent == {"nn.functional.interpolate", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa"}
    per_sample = [i for i in db.ops if i.name in dependent]
    assert {i.name for i in per_sample} >= {"nn.functional.interpolate", "_upsample_bilinear2d_aa"}
    samples, overridden = 0, 0
    for info in per_sample:
        for dtype in _mps_dtypes(info):
            plain = lists.tolerances(info, dtype)
            for sample in info.sample_inputs("cpu", dtype, **sample_rules.BUILT_IN.kwargs(info, dtype)):
                ours = lists.for_sample(info, dtype, sample)
                theirs = upstream_tolerances(cls, info, dtype, sample)
                samples += 1
                overridden += ours != plain
                if theirs != ours:
                    differ.append((info.full_name, str(dtype), sample.kwargs, theirs, ours))
    assert differ == []
    assert samples > 100 and overridden >= 2          # both overrides were met by a real sample


def test_the_built_in_table_is_the_2025_rules_it_claims_to_copy():
    """The approximate fallback agrees with the fixture (upstream's 2025 shape) per op/dtype."""
    fixture = tolerances.load_lists(Checkout.at(fixture_root()))
    builtin = tolerances.load_lists(None)
    assert builtin.approximate and builtin.rules is None
    differ = [(i.full_name, d) for i in opdb.load(None).ops for d in _mps_dtypes(i)
              if fixture.tolerances(i, d) != builtin.tolerances(i, d)]
    assert differ == []


def _rules_of(text: str) -> tolerances.LowPrecisionLists:
    return tolerances.load_lists(SimpleNamespace(exists=lambda p: True, read=lambda p: text))


def test_before_after_table_of_the_rule_function():
    """What porter's rule function gives on a few cases, by where the rules come from: before
    this change, an older checkout (no _compute_tolerances) got the built-in 2025 table fed its
    lists; now it gets its own chain, pow's rule included."""
    older = _rules_of(OLDER_TEST_MPS)
    fixture = tolerances.load_lists(Checkout.at(fixture_root()))
    builtin = tolerances.load_lists(None)
    before_older = _rules_of("class TestConsistency:\n" + OLDER_TEST_MPS.split(
        "class TestConsistency(TestCase):\n", 1)[1].split("    @ops", 1)[0])
    assert before_older.approximate and before_older.fp16 == {"add", "sub", "nn.functional.interpolate"}
    bilinear = SimpleNamespace(kwargs={"mode": "bilinear", "recompute_scale_factor": True,
                                       "scale_factor": 1.7})
    aa = SimpleNamespace(kwargs={"scale_factors": [1.7, 0.9]})
    cases = [("pow", "float32", None), ("__rpow__", "int32", None), ("add", "float16", None),
             ("add", "bfloat16", None), ("matmul", "float32", None), ("matmul", "float16", None),
             ("nn.functional.interpolate", "float32", None),
             ("nn.functional.interpolate", "uint8", bilinear),
             ("nn.functional.upsample_bilinear", "uint8", None),
             ("_upsample_bicubic2d_aa", "float32", aa), ("linspace", "int32", None), ("neg", "float32", None)]
    rows = ["case | older checkout, before (its lists, built-in rules) | older checkout, now "
            "(its chain) | fixture (2025 shape) | built-in"]
    for name, dtype, sample in cases:
        label = f"{name} {dtype}" + (" " + ",".join(f"{k}={v}" for k, v in sample.kwargs.items())
                                     if sample else "")
        cells = [str(r.named(name, "", dtype, sample)) for r in (before_older, older, fixture, builtin)]
        rows.append(" | ".join([label] + cells))
    assert_expected_inline("\n".join(rows), """\
case | older checkout, before (its lists, built-in rules) | older checkout, now (its chain) | fixture (2025 shape) | built-in
pow float32 | (None, None) | (1e-06, 4e-06) | (None, None) | (None, None)
__rpow__ int32 | (None, None) | (1e-06, 4e-06) | (None, None) | (None, None)
add float16 | (0.02, 0.01) | (0.01, 0.01) | (0.02, 0.01) | (0.02, 0.01)
add bfloat16 | (0.05, 0.05) | (None, None) | (0.05, 0.05) | (0.05, 0.05)
matmul float32 | (0.0001, 3e-05) | (0.0001, 3e-05) | (0.0001, 3e-05) | (0.0001, 3e-05)
matmul float16 | (0.05, 0.05) | (None, None) | (0.05, 0.05) | (0.05, 0.05)
nn.functional.interpolate float32 | (None, None) | (0.001, 0.0001) | (None, None) | (None, None)
nn.functional.interpolate uint8 mode=bilinear,recompute_scale_factor=True,scale_factor=1.7 | (1, 0) | (0.001, 0.0001) | (1, 0) | (1, 0)
nn.functional.upsample_bilinear uint8 | (None, None) | (1.0, 0.0) | (None, None) | (None, None)
_upsample_bicubic2d_aa float32 scale_factors=[1.7, 0.9] | (2e-05, 2e-06) | (None, None) | (2e-05, 2e-06) | (2e-05, 2e-06)
linspace int32 | (1.0, 0.0) | (None, None) | (1.0, 0.0) | (1.0, 0.0)
neg float32 | (None, None) | (None, None) | (None, None) | (None, None)""")
    # the older chain, run whole, agrees with porter's cut for every OpInfo and dtype
    cls = upstream_test(OLDER_TEST_MPS)
    differ = [(i.full_name, d) for i in opdb.load(None).ops for d in _mps_dtypes(i)
              if upstream_tolerances(cls, i, d) != older.tolerances(i, d)]
    assert differ == []


# Upstream's 2023 chain skips unsorted `unique` samples with a `continue` among its rules; a
# rule may do more than set atol/rtol (here frac: exact, float16 not compared).
MIXED_CHAIN = OLDER_TEST_MPS.replace(
    "            else:\n                atol = None\n",
    "            elif op.name == \"unique\" and cpu_sample.kwargs.get(\"sorted\") is False:\n"
    "                continue\n"
    "            elif op.name == \"frac\":\n"
    "                atol, rtol = 0.0, 0.0\n"
    "                if dtype == torch.float16:\n"
    "                    continue\n"
    "            else:\n                atol = None\n", 1)


def test_an_if_chain_that_also_does_other_things_keeps_its_rules():
    """Wrong on purpose: before this change a chain holding any statement besides atol/rtol
    assignments was dropped whole, so every op it names got the default tolerances while the
    header said 'from test/test_mps.py': pow float32 (None, None) instead of (1e-6, 4e-6), and
    frac float32 (None, None) instead of the exact (0.0, 0.0), so a frac kernel 1e-6 off
    passed porter and fails the Mac."""
    assert MIXED_CHAIN != OLDER_TEST_MPS
    lists = _rules_of(MIXED_CHAIN)
    assert not lists.approximate
    cls = upstream_test(MIXED_CHAIN)
    rows = ["case | porter | the checkout's whole method"]
    for name, dtype in [("frac", torch.float32), ("pow", torch.float32), ("add", torch.float16),
                        ("unique", torch.float32), ("neg", torch.float32)]:
        info = opdb.find(opdb.load(None), name)[0]
        rows.append(f"{name} {dtype} | {lists.tolerances(info, dtype)} | "
                    f"{upstream_tolerances(cls, info, dtype)}")
    assert_expected_inline("\n".join(rows), """\
case | porter | the checkout's whole method
frac torch.float32 | (0.0, 0.0) | (0.0, 0.0)
pow torch.float32 | (1e-06, 4e-06) | (1e-06, 4e-06)
add torch.float16 | (0.01, 0.01) | (0.01, 0.01)
unique torch.float32 | (None, None) | (None, None)
neg torch.float32 | (None, None) | (None, None)""")

    # beside the 2025 shape's own rules the mixed statement was dropped silently (the header
    # still said 'from test/test_mps.py'): frac float32 got (None, None)
    text = (fixture_root() / TEST_MPS).read_text()
    anchor = "            if op.name == \"kthvalue\":\n"
    rule = ("            if op.name == \"frac\":\n"
            "                atol, rtol = 0.0, 0.0\n"
            "                if dtype == torch.float16:\n"
            "                    continue\n")
    assert anchor in text
    lists = _rules_of(text.replace(anchor, rule + anchor, 1))
    frac = opdb.find(opdb.load(None), "frac")[0]
    assert not lists.approximate
    assert lists.tolerances(frac, torch.float32) == (0.0, 0.0)
    assert lists.tolerances(frac, torch.bfloat16) == (0.0, 0.0)


def test_a_comparison_with_other_tolerances_than_the_rules_is_refused():
    """Wrong on purpose: the checkout compares exactly (atol=0) whatever its rules say; porter
    used the rules' (None, None) and the default tolerance, looser than the Mac's test."""
    text = (fixture_root() / TEST_MPS).read_text()
    compare = "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n"
    assert compare in text
    changed = text.replace(compare, compare.replace("atol=atol", "atol=0"), 1)
    lists = _rules_of(changed)
    line = next(i for i, t in enumerate(changed.splitlines(), 1)
                if "self.assertEqual(cpu_out, mps_out, atol=0" in t)
    assert lists.approximate
    assert (f"TestConsistency.test_output_match compares with atol=0 (test/test_mps.py:{line}), "
            "which porter does not model") in lists.source
    assert not _rules_of(text).approximate


@pytest.mark.parametrize(("change", "refused"), [
    # review 31's T02: every sample fails on a Mac ('device' cpu != mps:0)
    (", exact_device=True)", "exact_device=True"),
    (", equal_nan=False)", "equal_nan=False"),
    (", exact_layout=strict)", "exact_layout=strict"),
    (", **extra)", "**extra"),
    # review 32's D04: an output converted before the comparison
    ("COMPARED(cpu_out.float(), mps_out", "cpu_out.float(), mps_out"),
    # what changes only a failure's words, or compares no more strictly than porter does
    (", msg='values differ')", None),
    (", exact_dtype=False)", None),
    (", exact_device=False, equal_nan=True)", None),
])
def test_a_comparison_with_another_keyword_is_refused(change, refused):
    text = (fixture_root() / TEST_MPS).read_text()
    compare = "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n"
    changed = (text.replace(compare, compare.replace("(cpu_out, mps_out", change[8:]), 1)
               if change.startswith("COMPARED") else
               text.replace(compare, compare.replace(")\n", change + "\n"), 1))
    assert changed != text
    lists = _rules_of(changed)
    assert lists.approximate == (refused is not None)
    if refused:
        assert f"compares with {refused}" in lists.source or \
            f"compares {refused} (test/test_mps.py" in lists.source, lists.source


def test_atol_set_in_a_shape_porter_does_not_cut_is_refused_with_the_line():
    text = MIXED_CHAIN.replace(
        "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n",
        "            with torch.no_grad():\n                atol = atol\n"
        "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n", 1)
    lists = _rules_of(text)
    assert lists.approximate
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "with torch.no_grad()" in t)
    assert (f"TestConsistency.test_output_match sets atol/rtol inside a with "
            f"(test/test_mps.py:{line}), which porter cannot cut out") in lists.source


def test_atol_set_in_a_loop_inside_the_sample_loop_is_refused_with_the_line():
    """Review 27's T1: `for _ in range(1): atol, rtol = 0, 0` inside the sample loop was taken
    for the sample loop itself ("compares each sample 0 time(s)")."""
    text = MIXED_CHAIN.replace(
        "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n",
        "            for _ in range(1):\n                atol, rtol = 0, 0\n"
        "            self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)\n", 1)
    lists = _rules_of(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "for _ in range(1)" in t)
    assert lists.unread == (f"TestConsistency.test_output_match sets atol/rtol inside a for "
                            f"(test/test_mps.py:{line}), which porter cannot cut out")


def test_a_comparison_the_test_class_redefines_is_refused_with_the_line():
    """Review 28's T01: `def assertEqual(self, a, b, **kw)` in TestConsistency forcing exact
    tolerances was ignored, and gelu green."""
    text = MIXED_CHAIN.replace("    def test_output_match(",
                               "    def assertEqual(self, a, b, **kw):\n        pass\n\n"
                               "    def test_output_match(", 1)
    assert text != MIXED_CHAIN
    lists = _rules_of(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "def assertEqual" in t)
    assert lists.unread == (f"TestConsistency defines its own assertEqual (test/test_mps.py:{line}), "
                            "which porter does not model")


# Code beside the class that decides how it compares (review 29): (text replaced, replacement,
# what the reason says)
_AROUND_THE_CLASS = [
    # T03: the comparison replaced from module code
    (None, "\n\nTestConsistency.assertEqual = print\n",
     "assigns `TestConsistency.assertEqual` outside the class"),
    # T06: a class constant changed from module code
    (None, "\n\nTestConsistency.FP16_LOW_PRECISION_LIST.discard('nn.functional.gelu')\n",
     "names TestConsistency outside the class (`TestConsistency.FP16_LOW_PRECISION_LIST"),
    # review 30's T05, T06: the class made per device, or the class through globals()
    (None, "\n\nTestConsistencyMPS.FP16_LOW_PRECISION_LIST = set()\n",
     "assigns `TestConsistencyMPS.FP16_LOW_PRECISION_LIST` outside the class"),
    (None, "\n\nglobals()['TestConsistency'].FP16_LOW_PRECISION_LIST = set()\n",
     "outside the class"),
    # T04: a base class of the module's own with its own comparison
    ("class TestConsistency(TestCase):\n",
     "class _Exact(TestCase):\n    def assertEqual(self, a, b, **kw):\n        pass\n\n\n"
     "class TestConsistency(_Exact):\n",
     "TestConsistency's base _Exact defines its own assertEqual"),
    # T05: setUp loosening the precision assertEqual floors the tolerances with
    ("    def test_output_match(",
     "    def setUp(self):\n        self.precision = 0.05\n\n    def test_output_match(",
     "TestConsistency sets self.precision"),
]


@pytest.mark.parametrize(("old", "new", "says"), _AROUND_THE_CLASS)
def test_code_around_the_class_that_decides_how_it_compares_is_refused(old, new, says):
    text = MIXED_CHAIN + new if old is None else MIXED_CHAIN.replace(old, new, 1)
    assert text != MIXED_CHAIN
    lists = _rules_of(text)
    assert lists.unread is not None and says in lists.unread, lists.unread


def test_the_class_made_per_device_by_the_module_is_not_code_around_it():
    text = MIXED_CHAIN + "\n\ninstantiate_device_type_tests(TestConsistency, globals(), only_for='mps')\n"
    assert _rules_of(text).unread is None


def test_a_precision_decorator_of_the_test_is_refused_with_the_line():
    """Review 28's T05b: `@precisionOverride({torch.float32: 1.0})` on test_output_match floors a
    Mac's tolerances; porter failed what a Mac passes."""
    text = MIXED_CHAIN.replace("    def test_output_match(",
                               "    @precisionOverride({torch.float32: 1.0})\n"
                               "    def test_output_match(", 1)
    lists = _rules_of(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "@precisionOverride" in t)
    assert lists.unread == ("TestConsistency.test_output_match has its own `@precisionOverride("
                            f"{{torch.float32: 1.0}})` (test/test_mps.py:{line}), which porter does "
                            "not model")


def test_rules_the_checkout_has_and_porter_cannot_read_are_not_proven(tmp_path):
    """A Mac compares with the checkout's rules, which may be stricter than porter's table: no
    dtype is green on the table (review 27's T1 was, exit 0)."""
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    test = root / TEST_MPS
    test.write_text(test.read_text().replace("atol, rtol = self._compute_tolerances(op, dtype)",
                                             "atol, rtol = self._compute_tolerances(op, dtype, pick_device())"))
    report = _session_json(root, "neg", ["float32"])
    [case] = report["ops"][0]["dtypes"]
    assert case["outcome"] == "fail", case
    assert case["message"].startswith("not proven: test/test_mps.py's tolerance rules of "
                                      "test_output_match cannot be read (TestConsistency."), case
    # the miniature without a test_mps.py: a Mac runs none, the table is the documented stand-in
    test.unlink()
    [case] = _session_json(root, "neg", ["float32"])["ops"][0]["dtypes"]
    assert case["outcome"] == "pass", case


def _session_json(root: Path, op: str, dtypes: list[str]) -> dict:
    out = io.StringIO()
    run_session(Options(ops=[op], root=str(root), device="cpu-mps", dtypes=dtypes, json=True, out=out))
    return json.loads(out.getvalue())


def test_pow_rule_changed_in_the_checkout_is_the_one_porter_uses(tmp_path):
    """Wrong on purpose: the checkout's pow rule is changed; porter's run follows it."""
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    path = root / TEST_MPS
    text = path.read_text()
    anchor = "            if op.name == \"kthvalue\":\n"
    assert anchor in text
    rule = ("            if op.name == \"pow\" and dtype == torch.float32:\n"
            "                atol, rtol = 1e-6, 4e-6\n")
    path.write_text(text.replace(anchor, rule + anchor, 1))
    data = _session_json(root, "pow", ["float16", "float32"])
    assert data["tolerance_lists"] == FROM_TEST
    got = {d["dtype"]: (d["atol"], d["rtol"]) for d in data["ops"][0]["dtypes"]}
    assert got == {"float16": (None, None), "float32": (1e-6, 4e-6)}

    path.write_text(text.replace(anchor, rule.replace("1e-6, 4e-6", "0.5, 0.25") + anchor, 1))
    got = {d["dtype"]: (d["atol"], d["rtol"]) for d in _session_json(root, "pow", ["float32"])["ops"][0]["dtypes"]}
    assert got == {"float32": (0.5, 0.25)}


def test_a_list_changed_in_the_checkout_is_the_one_porter_uses(tmp_path):
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    path = root / TEST_MPS
    text = path.read_text()
    assert "'acosh', 'add'," in text
    path.write_text(text.replace("'acosh', 'add',", "'acosh', 'add', 'neg',", 1))
    data = _session_json(root, "neg", ["float16", "float32"])
    assert data["tolerance_lists"] == FROM_TEST
    got = {d["dtype"]: (d["atol"], d["rtol"]) for d in data["ops"][0]["dtypes"]}
    assert got == {"float16": (2e-2, 1e-2), "float32": (None, None)}


def test_a_sample_rule_decides_per_sample_in_a_run(tmp_path):
    """A per-sample rule that loosens nothing but one sample: the run's verdict follows it
    (an absurd atol on sample 0 alone cannot turn a wrong kernel green on the others)."""
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    path = root / TEST_MPS
    text = path.read_text()
    anchor = "            if op.name == \"kthvalue\":\n"
    rule = ("            if op.name == \"neg\" and mps_sample.kwargs.get(\"porter_marker\"):\n"
            "                atol, rtol = 9.0, 9.0\n")
    path.write_text(text.replace(anchor, rule + anchor, 1))
    lists = tolerances.load_lists(Checkout.at(root))
    info = opdb.find(opdb.load(None), "neg")[0]
    marked = SimpleNamespace(kwargs={"porter_marker": True})
    assert lists.for_sample(info, torch.float32, marked) == (9.0, 9.0)
    assert lists.for_sample(info, torch.float32, SimpleNamespace(kwargs={})) == (None, None)


def test_a_rule_that_raises_fails_the_sample_as_upstreams_test_would(tmp_path):
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    path = root / TEST_MPS
    text = path.read_text()
    anchor = "            if op.name == \"kthvalue\":\n"
    sized = ("            if op.name == \"neg\" and mps_sample.input.dim() > 1:\n"
             "                atol, rtol = 0.5, 0.5\n")
    path.write_text(text.replace(anchor, sized + anchor, 1))
    data = _session_json(root, "neg", ["float32"])
    assert data["ok"] and data["ops"][0]["dtypes"][0]["outcome"] == "pass"
    path.write_text(text.replace(anchor, sized.replace(".dim()", ".no_such_thing") + anchor, 1))
    data = _session_json(root, "neg", ["float32"])
    (row,) = data["ops"][0]["dtypes"]
    assert not data["ok"] and row["outcome"] == "fail"
    assert row["message"].startswith(f"{FROM_TEST} raised deciding the tolerances: ")
    assert "no_such_thing" in row["message"]


def test_rules_read_names_assigned_earlier_in_the_loop():
    text = OLDER_TEST_MPS.replace(
        '            elif op.name == "nn.functional.interpolate":',
        '            elif op.name == "nn.functional.interpolate" and cpu_kwargs.get("mode") == "nearest":')
    text = text.replace("            cpu_out = op(", "            cpu_kwargs = cpu_sample.kwargs\n            cpu_out = op(", 1)
    lists = _rules_of(text)
    assert not lists.approximate
    # the assignment nearest before the comparison is the one that holds there
    shadowed = _rules_of(text.replace("            cpu_kwargs = cpu_sample.kwargs\n",
                                      "            cpu_kwargs = {}\n            cpu_kwargs = cpu_sample.kwargs\n", 1))
    nearest = SimpleNamespace(kwargs={"mode": "nearest"})
    assert shadowed.named("nn.functional.interpolate", "nearest", "float32", nearest) == (1e-3, 1e-4)
    # a name bound before the loop, in the method
    outside = _rules_of(text.replace("            cpu_kwargs = cpu_sample.kwargs\n", "", 1).replace(
        "        for cpu_sample in", "        cpu_kwargs = {\"mode\": \"nearest\"}\n        for cpu_sample in", 1))
    assert outside.named("nn.functional.interpolate", "", "float32", SimpleNamespace(kwargs={})) == (1e-3, 1e-4)
    assert lists.named("nn.functional.interpolate", "nearest", "float32", nearest) == (1e-3, 1e-4)
    assert lists.named("nn.functional.interpolate", "bilinear", "float32",
                       SimpleNamespace(kwargs={"mode": "bilinear"})) == (None, None)


@pytest.mark.parametrize("change, reason", [
    (lambda t: t.replace("atol, rtol = self._compute_tolerances(op, dtype)",
                         "atol, rtol = self._compute_tolerances(op, dtype, pick_device())"),
     "TestConsistency.test_output_match's tolerance rules read 'pick_device', which porter cannot supply"),
    (lambda t: t.split("    @ops(mps_ops_modifier")[0] + "\n",
     "test/test_mps.py has no TestConsistency.test_output_match"),
    (lambda t: t + "\ndef broken(:\n", "test/test_mps.py does not parse (line"),
])
def test_rules_that_cannot_be_isolated_fall_back_and_say_why(change, reason):
    text = (fixture_root() / TEST_MPS).read_text()
    lists = _rules_of(change(text))
    assert lists.approximate and reason in lists.source and "approximate" in lists.source
    # the checkout's lists still feed the built-in rules where the file parses
    if "parse" not in reason:
        assert "test/test_mps.py's lists with porter's built-in rules" in lists.source
        assert "acosh" in lists.fp16


def test_without_rules_the_header_says_the_table_is_approximate(tmp_path):
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    (root / TEST_MPS).unlink()
    out = io.StringIO()
    run_session(Options(ops=["neg"], root=str(root), device="cpu-mps", dtypes=["float32"], out=out))
    assert ("tolerances from porter's built-in table (approximate: the checkout has no "
            "test/test_mps.py)") in out.getvalue().splitlines()[0]


def test_the_rules_run_without_importing_torch(tmp_path):
    """A cached run starts without torch: the rules get a stand-in holding the dtypes."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "PYTHONPATH": str(Path(tolerances.__file__).resolve().parents[2])}
    code = ("import sys\nfrom porter.harness import tolerances\nfrom porter.source.checkout import Checkout\n"
            "from porter.testing.trees import fixture_root\n"
            "lists = tolerances.load_lists(Checkout.at(fixture_root()))\n"
            "print(lists.named('add', '', 'float16'), lists.named('linspace', '', 'int32'),"
            " 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)
    assert out.stdout.split() == ["(0.02,", "0.01)", "(1.0,", "0.0)", "False"]


def test_a_method_reading_an_unknown_module_name_is_refused_up_front():
    text = (fixture_root() / TEST_MPS).read_text().replace(
        "        if op.name == \"masked.mean\":", "        if op.name == \"masked.mean\" and on_ci():", 1)
    lists = _rules_of(text)
    assert lists.approximate
    assert "TestConsistency._compute_tolerances reads 'on_ci', which porter cannot supply" in lists.source


class _TorchWithoutDevice:
    """torch for running test_output_grad_match off a Mac: the grad_output's move to "mps" and
    the autograd calls are inert (what is recorded is the tolerances, not the gradients)."""

    class _Inert:
        def to(self, *args, **kwargs):
            return self

    autograd = SimpleNamespace(grad=lambda *args, **kwargs: ())

    def __getattr__(self, name):
        return getattr(torch, name)

    def rand_like(self, *args, **kwargs):
        return self._Inert()


def upstream_grad_tolerances(cls, info, dtype) -> list[tuple]:
    """The (atol, rtol) of both comparisons test_output_grad_match makes on a sample."""
    seen: list[tuple] = []

    def assert_equal(first, second, atol=None, rtol=None, **_):
        if atol is not None or rtol is not None or isinstance(first, (torch.Tensor, tuple)):
            seen.append((atol, rtol))
    leaf = torch.ones(1, requires_grad=True)
    sample = SimpleNamespace(input=leaf, args=(), kwargs={"sorted": True})
    stub = cls.__new__(cls)
    stub.assertEqual = assert_equal
    stub._run_op = lambda op, s, *rest: (leaf, leaf, s)
    op = _Op(name=info.name, variant_test_name=info.variant_test_name,
             sample_inputs=lambda *a, **k: iter([sample]))
    cls.test_output_grad_match(stub, "mps:0", dtype, op)
    return seen


def test_grad_tolerances_are_the_checkouts_test_output_grad_match_for_every_opinfo():
    """--grad: the output compared with test_output_grad_match's rules (norm's float16 rule is
    its own), the gradients with its gradient-only ones, for every OpInfo and grad dtype."""
    from porter.harness.backward import GradOpInfo
    text = (fixture_root() / TEST_MPS).read_text()
    lists = tolerances.load_lists(Checkout.at(fixture_root()))
    assert lists.grad_source == tolerances.GRAD_TOLERANCES_FROM_TEST
    cls = upstream_test(text, {"torch": _TorchWithoutDevice(), "pytree": __import__("torch.utils._pytree").utils._pytree})
    differ, compared, own = [], 0, set()
    for info in opdb.load(None).ops:
        grad_info = GradOpInfo(info, mps_like=True)
        for dtype in grad_info.supported_dtypes("mps"):
            theirs = upstream_grad_tolerances(cls, info, dtype)
            ours = [lists.for_sample(grad_info, dtype, None),
                    lists.gradient_tolerances(grad_info, dtype, None)]
            compared += 1
            if ours[0] != lists.tolerances(info, dtype):
                own.add(info.name)
            if theirs != ours:
                differ.append((info.full_name, str(dtype), theirs, ours))
    assert differ == []
    assert compared > 500 and own == {"norm", "linalg.norm", "renorm"}


def test_without_grad_rules_the_built_in_gradient_table_is_named_approximate():
    text = (fixture_root() / TEST_MPS).read_text()
    trimmed = text.split("    @ops(mps_ops_grad_modifier")[0]
    lists = _rules_of(trimmed)
    assert lists.source == FROM_TEST and lists.grad_rules is None
    assert lists.grad_source == ("porter's built-in gradient table (approximate: test/test_mps.py has "
                                 "no TestConsistency.test_output_grad_match)")


def test_the_gradient_rules_are_cut_out_only_when_a_gradient_test_asks(monkeypatch):
    """A run without --grad never needs test_output_grad_match's rules: isolating them (two
    more passes over test_mps.py) waits for the first gradient test, and then says the same."""
    isolated = []
    real = tolerances.isolate

    def counting(text, test_name=tolerances.TEST_NAME, check=0):
        isolated.append(test_name)
        return real(text, test_name, check)
    monkeypatch.setattr(tolerances, "isolate", counting)
    lists = tolerances.load_lists(Checkout.at(fixture_root()))
    info = SimpleNamespace(name="add", variant_test_name="")
    lists.tolerances(info, torch.float16)
    lists.for_sample(info, torch.float32, SimpleNamespace(kwargs={}, input=None, args=[]))
    assert tolerances.GRAD_TEST not in isolated and lists.source == FROM_TEST
    assert lists.grad_source == tolerances.GRAD_TOLERANCES_FROM_TEST and lists.grad_rules is not None
    assert isolated.count(tolerances.GRAD_TEST) == 2


def test_a_run_parses_test_mps_once_per_reader(tmp_path, monkeypatch):
    """Upstream's test_mps.py is ~13k lines (~0.2 s a parse): a cached run asked for the sample
    keywords twice (whether the cache applies, then its header) and read the lists and the
    rules once each, four parses of one text; --grad's gradient rules two more. One tree per
    reader now, whatever is asked of it; the answers are those of a fresh parse."""
    shutil.copytree(fixture_root() / "test", tmp_path / "test")
    path = tmp_path / TEST_MPS
    path.write_text(path.read_text() + f"\n# {tmp_path.name}: a text no other test parsed\n")
    text = path.read_text()
    parses = []
    real = ast.parse

    def counting(source, *args, **kwargs):
        if source == text:
            parses.append(1)
        return real(source, *args, **kwargs)
    monkeypatch.setattr(ast, "parse", counting)
    checkout = Checkout(tmp_path)
    rules = [sample_rules.load(checkout), sample_rules.load(checkout)]
    lists = tolerances.load_lists(checkout)
    assert lists.grad_rules is not None and len(parses) == 2
    # the same answers as from trees parsed afresh
    tolerances._tree.cache_clear()
    assert rules == [sample_rules.parse.__wrapped__(text)] * 2 != [None, None]
    assert lists.rules.isolated == tolerances.isolate(text)
    assert lists.grad_rules[1].isolated == tolerances.isolate(text, tolerances.GRAD_TEST, 1)
