"""porter swaps torch's `extract_test_fn` (inspect.stack(), slow) for a frame walk: same answers,
same samples."""

from __future__ import annotations

import unittest

import pytest

torch = pytest.importorskip("torch")

from porter.harness import opdb  # noqa: E402


def _torch_original():
    import inspect
    from torch.testing._internal import common_utils

    fn = common_utils.extract_test_fn
    if fn is opdb.frame_walking_extract_test_fn:
        # the swap happened in this process: torch's own, re-made from its source
        namespace = dict(common_utils.__dict__)
        exec(compile(inspect.getsource(common_utils).split("def extract_test_fn", 1)[1].join(
            ["def extract_test_fn", ""]).split("\n# Contains tracked input")[0], "<torch>", "exec"), namespace)
        fn = namespace["extract_test_fn"]
    return fn


def test_the_frame_walk_finds_what_torchs_finds_inside_and_outside_a_test():
    original = _torch_original()
    assert original() is None and opdb.frame_walking_extract_test_fn() is None

    found = {}

    class Case(unittest.TestCase):
        def test_thing(self):
            def deeper():
                found["torch"], found["porter"] = original(), opdb.frame_walking_extract_test_fn()
            deeper()

    result = unittest.TestResult()
    Case("test_thing").run(result)
    assert result.wasSuccessful(), result.errors
    assert found["torch"] is Case.test_thing and found["porter"] is Case.test_thing


def test_reference_inputs_are_the_same_samples_with_either(monkeypatch):
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    info = next(o for o in opdb.load().ops if o.name == "heaviside")

    def samples():
        return [(s.input.clone(), [a.clone() if isinstance(a, torch.Tensor) else a for a in s.args], s.kwargs)
                for s in info.reference_inputs("cpu", torch.float32)]

    walked = samples()
    original = _torch_original()
    monkeypatch.setattr(common_utils, "extract_test_fn", original)
    monkeypatch.setattr(core, "extract_test_fn", original)
    theirs = samples()
    assert len(walked) == len(theirs) > 10

    def same(x, y):     # bit for bit, NaN included
        if not isinstance(x, torch.Tensor):
            return x == y
        torch.testing.assert_close(x, y, rtol=0, atol=0, equal_nan=True)
        return x.dtype == y.dtype and x.shape == y.shape
    for (a, args_a, kw_a), (b, args_b, kw_b) in zip(walked, theirs):
        assert same(a, b) and kw_a == kw_b and len(args_a) == len(args_b)
        assert all(same(x, y) for x, y in zip(args_a, args_b))
    assert common_utils.extract_test_fn is original      # (restored after the test by monkeypatch)
