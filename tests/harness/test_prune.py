"""Expectation parsing and pruning: torch-free, on small common_mps.py texts."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import expecttest
import pytest

from porter.errors import PorterError
from porter.harness import mps_expectations as expectations
from porter.harness import prune

TEXT = '''\
import torch

if torch.backends.mps.is_available():

    def mps_ops_modifier(ops):
        SUPPORTED_COMPLEX_OPS = {"add", "neg"}
        MACOS_BEFORE_14_4_XFAILLIST = {
            "fft.hfft2": [torch.complex64],
        }
        UNIMPLEMENTED_XFAILLIST: dict[str, list | None] = {
            # Failures due to lack of op implementation on MPS backend
            "heaviside": None,  # gone when ported
            "neg": [torch.float16, torch.int32, torch.float32],
            "sign": [
                torch.float16,
                torch.bfloat16,
            ],
            "a": None, "b": [torch.half],
        }
        EMPTY_OPS_SKIPLIST = {"empty": None}
        return ops

    def mps_ops_grad_modifier(ops):
        ON_MPS_XFAILLIST = {"linalg.matrix_rank": None}
        return ops
else:

    def mps_ops_modifier(ops):
        return ops
'''


def result(key, outcomes, supported=None, op=None):
    """A harness result as `--json` writes it: {dtype: outcome}; xpass/xfail by the key's entries."""
    exp = expectations.parse(TEXT)
    dtypes = []
    for dtype, outcome in outcomes.items():
        by = [e.where for e in exp.for_key(key) if e.covers(dtype) and e.kind != "skip"]
        dtypes.append({"dtype": dtype, "outcome": outcome, "expected_by": by})
    return {"op": op or key, "key": key, "dtypes": dtypes, "supported": supported or list(outcomes)}


class TestParse:
    def test_scoped_to_mps_ops_modifier(self):
        exp = expectations.parse(TEXT)
        assert [(e.dict_name, e.key, e.dtypes) for e in exp.entries] == [
            ("MACOS_BEFORE_14_4_XFAILLIST", "fft.hfft2", ("complex64",)),
            ("UNIMPLEMENTED_XFAILLIST", "heaviside", None),
            ("UNIMPLEMENTED_XFAILLIST", "neg", ("float16", "int32", "float32")),
            ("UNIMPLEMENTED_XFAILLIST", "sign", ("float16", "bfloat16")),
            ("UNIMPLEMENTED_XFAILLIST", "a", None),
            ("UNIMPLEMENTED_XFAILLIST", "b", ("float16",)),
            ("EMPTY_OPS_SKIPLIST", "empty", None),
        ]
        assert exp.complex_supported == {"add", "neg"}
        assert exp.keys() == ["a", "b", "empty", "fft.hfft2", "heaviside", "neg", "sign"]

    def test_active_rules(self):
        exp = expectations.parse(TEXT)
        assert [e.where for e in exp.active("neg", "int32")] == ["UNIMPLEMENTED_XFAILLIST['neg']"]
        assert exp.active("neg", "int8") == []
        assert exp.active("fft.hfft2", "complex64") == []            # modern or unknown macOS
        assert len(exp.active("fft.hfft2", "complex64", macos=(14, 2))) == 1
        assert exp.complex_xfail("sign", "complex64") and not exp.complex_xfail("neg", "complex64")

    def test_bad_value_is_a_one_line_error(self):
        with pytest.raises(PorterError) as err:
            expectations.parse(TEXT.replace('"empty": None', '"empty": ALL'))
        assert "common_mps.py:20: unsupported expectation value 'ALL'" in str(err.value)

    def test_installed_torch_common_mps(self):
        spec = importlib.util.find_spec("torch")
        if spec is None:
            pytest.skip("torch not installed")
        path = Path(spec.submodule_search_locations[0]) / "testing/_internal/common_mps.py"
        exp = expectations.parse(path.read_text(encoding="utf-8"))
        names = {e.dict_name for e in exp.entries}
        assert "UNIMPLEMENTED_XFAILLIST" in names and len(exp.entries) > 50
        assert not any("GRAD" in n or "SPARSE" in n for n in names)
        assert len(exp.complex_supported) > 100


class TestPrune(expecttest.TestCase):
    def plan(self, *results, text=TEXT):
        exp = expectations.parse(text)
        return exp, prune.plan(list(results), exp)

    def diff(self, exp, pruned):
        import difflib
        return "".join(difflib.unified_diff(exp.text.splitlines(True),
                                            pruned.new_text.splitlines(True), n=0))

    def test_none_entry_passing_everywhere_is_removed_with_its_line(self):
        exp, pruned = self.plan(result("heaviside", {"int32": "xpass", "float16": "xpass"}))
        self.assertEqual(pruned.actions, ["UNIMPLEMENTED_XFAILLIST['heaviside']: removed"])
        self.assertExpectedInline(self.diff(exp, pruned), '''\
--- 
+++ 
@@ -12 +11,0 @@
-            "heaviside": None,  # gone when ported
''')

    def test_none_entry_partly_passing_becomes_the_failing_list(self):
        exp, pruned = self.plan(result(
            "heaviside", {"int32": "xpass", "float16": "xfail"},
            supported=["bool", "int32", "float16"]))    # bool not tested: stays expected
        self.assertExpectedInline(self.diff(exp, pruned), '''\
--- 
+++ 
@@ -12 +12 @@
-            "heaviside": None,  # gone when ported
+            "heaviside": [torch.bool, torch.float16],  # gone when ported
''')

    def test_list_entry_loses_passing_dtypes_keeping_spelling(self):
        # neg keeps torch.half (float16's alias) as written, and its multi-line neighbour goes whole
        text = TEXT.replace('"neg": [torch.float16, ', '"neg": [torch.half, ')
        exp, pruned = self.plan(
            result("neg", {"float16": "xfail", "int32": "xfail", "float32": "xpass"}),
            result("b", {"float16": "xpass"}),
            result("sign", {"float16": "xpass", "bfloat16": "xpass"}), text=text)
        self.assertEqual(pruned.actions, [
            "UNIMPLEMENTED_XFAILLIST['neg']: narrowed to [float16, int32]",
            "UNIMPLEMENTED_XFAILLIST['sign']: removed",
            "UNIMPLEMENTED_XFAILLIST['b']: removed",
        ])
        self.assertExpectedInline(self.diff(exp, pruned), '''\
--- 
+++ 
@@ -13,6 +13,2 @@
-            "neg": [torch.half, torch.int32, torch.float32],
-            "sign": [
-                torch.float16,
-                torch.bfloat16,
-            ],
-            "a": None, "b": [torch.half],
+            "neg": [torch.half, torch.int32],
+            "a": None,
''')

    def test_an_entry_after_non_ascii_text_on_its_line_is_cut_exactly(self):
        # ast counts columns in UTF-8 bytes: "ä" is two of them and one character
        text = TEXT.replace('"a": None, "b": [torch.half],', '"ä": None, "b": [torch.half, torch.int32],')
        def b(outcomes):
            return {"op": "b", "key": "b", "supported": list(outcomes), "dtypes": [
                {"dtype": d, "outcome": o, "expected_by": ["UNIMPLEMENTED_XFAILLIST['b']"]}
                for d, o in outcomes.items()]}
        exp, pruned = self.plan(b({"float16": "xfail", "int32": "xpass"}), text=text)
        self.assertEqual(pruned.actions, ["UNIMPLEMENTED_XFAILLIST['b']: narrowed to [float16]"])
        self.assertExpectedInline(self.diff(exp, pruned), '''\
--- 
+++ 
@@ -18 +18 @@
-            "ä": None, "b": [torch.half, torch.int32],
+            "ä": None, "b": [torch.half],
''')
        exp, pruned = self.plan(b({"float16": "xpass", "int32": "xpass"}), text=text)
        self.assertIn('            "ä": None,\n        }', pruned.new_text)

    def test_nothing_to_prune_and_never_widen(self):
        exp, pruned = self.plan(result("neg", {"float16": "xfail", "int8": "pass"}))
        self.assertEqual((pruned.actions, pruned.new_text), ([], None))

    def test_old_macos_complex_and_opinfo_sources_are_reported_not_edited(self):
        exp, pruned = self.plan(
            result("fft.hfft2", {"complex64": "xpass"}),
            {"op": "sign", "key": "sign", "supported": ["complex64"], "dtypes": [
                {"dtype": "complex64", "outcome": "xpass",
                 "expected_by": ["SUPPORTED_COMPLEX_OPS lacks 'sign'"]}]})
        self.assertIsNone(pruned.new_text)
        self.assertEqual(len(pruned.reported), 2)
        self.assertIn("MACOS_BEFORE_*", pruned.reported[0])
        self.assertIn("SUPPORTED_COMPLEX_OPS", pruned.reported[1])

    def test_second_prune_is_nothing_to_do(self):
        exp, pruned = self.plan(result("heaviside", {"int32": "xpass"}))
        again = expectations.parse(pruned.new_text)
        self.assertEqual(prune.plan([result("heaviside", {"int32": "xpass"})], again).actions, [])
