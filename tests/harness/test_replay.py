"""Replays upstream's decisions for every OpInfo of the installed torch and compares porter's.

Upstream's `TestConsistency.test_output_match` runs on `mps_ops_modifier(deepcopy(op_db))`
for the MPS dtypes, each test wrapped in the decorators that are active for it. Off a Mac,
`common_mps.py` defines its dicts only behind `torch.backends.mps.is_available()`, so the
replay executes the installed file's source with that call answering True and
`MACOS_VERSION` set to the macOS porter assumes, applies the real modifier to the real op
database, then wraps a stand-in test in every active decorator and runs it on a stand-in
MPS test instance: a SkipTest is a skip, `__unittest_expecting_failure__` an expected failure,
else the test runs. porter decides the same (op, dtype) from the statically parsed file.
"""

from __future__ import annotations

import copy
import unittest
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from porter.harness import mps_expectations as expmod  # noqa: E402
from porter.harness import opdb, sample_rules, tolerances  # noqa: E402
from porter.harness import opinfo_run as runner  # noqa: E402
from porter.harness.devices import mps_dtypes  # noqa: E402

RUN, XFAIL, SKIP = "run", "xfail", "skip"


def upstream_modifier(macos: tuple[int, int]):
    import torch.testing._internal.common_mps as common_mps
    source = Path(common_mps.__file__).read_text(encoding="utf-8")
    namespace = {"__name__": "torch.testing._internal._porter_replay",
                 "__package__": "torch.testing._internal", "__file__": common_mps.__file__}
    real = torch.backends.mps.is_available
    torch.backends.mps.is_available = lambda: True
    try:
        exec(compile(source, common_mps.__file__, "exec"), namespace)
    finally:
        torch.backends.mps.is_available = real
    namespace["MACOS_VERSION"] = float(f"{macos[0]}.{macos[1]}")
    return namespace["mps_ops_modifier"]


def upstream_decision(info, dtype) -> str:
    def test(self, device, dtype):
        return None
    wrapped = test
    for dec in info.decorators or ():
        if hasattr(dec, "is_active"):
            try:
                active = dec.is_active("TestConsistency", "test_output_match", "mps", dtype, {})
            except TypeError:
                active = dec.is_active("TestConsistency", "test_output_match", "mps", dtype)
            if not active:
                continue
            decs = dec.decorators
        else:
            decs = [dec]
        for d in decs:
            if isinstance(d, str):
                continue
            wrapped = d(wrapped)
    instance = SimpleNamespace(device_type="mps", precision=0, rel_tol=0)
    try:
        wrapped(instance, "mps", dtype)
    except unittest.SkipTest:
        return SKIP
    if getattr(wrapped, "__unittest_expecting_failure__", False):
        return XFAIL
    return RUN


def porter_decision(info, dtype, ctx) -> str:
    xfail_by, skip_by, _ = runner._expectations(info, dtype, ctx, "mps")
    return SKIP if skip_by else XFAIL if xfail_by else RUN


def test_porter_decides_every_opinfo_and_dtype_as_upstream_does():
    disagree, agree, total = compare(expmod.NEWEST_MACOS)
    print(f"\nreplay: {agree}/{total} (op, dtype) decisions agree on macOS 26.0")
    assert total > 5000
    assert disagree == [], disagree[:20]


def test_on_an_older_macos_the_gated_lists_apply_as_upstream_gates_them():
    # only the OpInfos a macOS-gated list names: the rest was compared above
    exp = expmod.parse(Path(_common_mps_file()).read_text(encoding="utf-8"))
    gated = {e.key for e in exp.entries if "MACOS" in e.dict_name}
    assert gated
    for macos in ((14, 2), (13, 0)):
        disagree, agree, total = compare(macos, keys=gated)
        assert total > 0 and disagree == [], (macos, disagree)


def _common_mps_file() -> str:
    import torch.testing._internal.common_mps as common_mps
    return common_mps.__file__


def compare(macos, keys=None):
    db = opdb.load(None)
    ops = [op for op in db.ops if keys is None or opdb.xfail_key(op) in keys]
    modified = upstream_modifier(macos)(copy.deepcopy(ops))
    exp = expmod.parse(Path(_common_mps_file()).read_text(encoding="utf-8"))

    class Emulate:
        name, device_type, mps_expectations = "emulate", "mps", True

        def supported_dtypes(self, info):
            return None
    ctx = runner.RunContext(None, Emulate(), exp, tolerances.load_lists(None), db, macos)
    agree, disagree = 0, []
    for info, theirs in zip(ops, list(modified)):
        assert info.full_name == theirs.full_name
        # the dtypes: @ops(..., allowed_dtypes=MPS_DTYPES) over the OpInfo's MPS dtypes
        dtypes = set(theirs.supported_dtypes("mps")) & mps_dtypes()
        assert runner._tested_dtypes(info, Emulate(), "mps") == (dtypes, set())
        for dtype in sorted(dtypes, key=str):
            ours, upstream = porter_decision(info, dtype, ctx), upstream_decision(theirs, dtype)
            if ours == upstream:
                agree += 1
            else:
                disagree.append((info.full_name, str(dtype), ours, upstream))
    return disagree, agree, agree + len(disagree)


def test_porter_asks_for_the_samples_upstream_asks_for():
    # the built-in call is upstream's: the same sample inputs, sample for sample
    db = opdb.load(None)
    compared = []
    for name in ("resize_", "nn.functional.mish", "atan2", "addcmul"):
        info = opdb.find(db, name)[0]
        for dtype in (torch.float32, torch.int32):
            if dtype not in info.supported_dtypes("mps"):
                continue
            ours = list(info.sample_inputs("cpu", dtype, **sample_rules.BUILT_IN.kwargs(info, dtype)))
            theirs = list(info.sample_inputs("cpu", dtype, requires_grad=dtype.is_floating_point,
                                             set_seed=True))
            assert len(ours) == len(theirs) > 0
            compared.append((name, dtype))
            for a, b in zip(ours, theirs):
                assert a.input.requires_grad == b.input.requires_grad
                torch.testing.assert_close(a.input.detach(), b.input.detach(), equal_nan=True)
    # every op compared on float32 at least (a dtype MPS no longer lists would skip it silently)
    assert {n for n, d in compared if d == torch.float32} == {"resize_", "nn.functional.mish",
                                                               "atan2", "addcmul"}
