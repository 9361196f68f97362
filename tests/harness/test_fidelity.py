"""The harness decides as upstream's `TestConsistency.test_output_match` does: samples,
device-specific decorators, the CPU-reference fallback's dtype, macOS-gated lists."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from porter.source.checkout import COMMON_MPS, TEST_MPS  # noqa: E402
from porter.harness import opdb, sample_rules  # noqa: E402
from porter.harness import opinfo_run as runner  # noqa: E402
from porter.harness import mps_expectations as expmod  # noqa: E402
from porter.harness.devices import TorchDeviceBackend, mps_dtypes  # noqa: E402
from porter.harness.session import Options, run as run_session  # noqa: E402
from porter.testing.trees import fixture_root  # noqa: E402


class CpuAsMps(TorchDeviceBackend):
    """The CPU standing in for MPS: every sample matches, so an expectation that applies
    shows as xpass and one that does not as pass."""

    def __init__(self, mangle=None):
        super().__init__("cpu", as_mps=True)
        self.name = "cpu-as-mps"
        self.mangle = mangle

    def run(self, opinfo, sample, dtype):
        out = super().run(opinfo, sample, dtype)
        return self.mangle(out) if self.mangle else out


# ----------------------------------------------------------------- samples

UPSTREAM_CALL = '''
class TestConsistency(TestCase):
    def test_output_match(self, device, dtype, op):
        include_conjugated_inputs = dtype.is_complex and op.test_conjugated_samples
        for mps_sample in op.sample_inputs(
                device, dtype, requires_grad=(dtype.is_floating_point or dtype.is_complex),
                include_conjugated_inputs=include_conjugated_inputs, set_seed=True):
            pass
'''


def test_sample_keywords_follow_the_checkouts_test():
    with_conj = sample_rules.parse(UPSTREAM_CALL)
    assert with_conj == sample_rules.SampleRules(True, True, TEST_MPS)
    plain = sample_rules.parse(UPSTREAM_CALL.replace(
        "include_conjugated_inputs=include_conjugated_inputs, ", "").replace(
        "requires_grad=(dtype.is_floating_point or dtype.is_complex)", "requires_grad=False"))
    assert plain == sample_rules.SampleRules(False, False, TEST_MPS)
    # the fixture's test asks as upstream's current call does (no conjugated inputs); a
    # trimmed test that calls no sample_inputs gets that call built in
    fixture_text = (fixture_root() / TEST_MPS).read_text()
    assert sample_rules.parse(fixture_text) == sample_rules.SampleRules(True, False, TEST_MPS)
    assert sample_rules.parse(fixture_text.replace(".sample_inputs(", ".other_inputs(")) is None
    info = opdb.find(opdb.load(None), "neg")[0]
    assert sample_rules.BUILT_IN.kwargs(info, torch.float32) == {"requires_grad": True, "set_seed": True}
    assert sample_rules.BUILT_IN.kwargs(info, torch.int32) == {"requires_grad": False, "set_seed": True}
    assert "include_conjugated_inputs" not in sample_rules.BUILT_IN.kwargs(info, torch.complex64)
    assert with_conj.kwargs(info, torch.complex64)["include_conjugated_inputs"] is True


def test_requires_grad_samples_keep_resize_s_expected_failure(real_tree_template):
    # upstream samples resize_ with requires_grad=True for floats: resizing a leaf that
    # requires grad raises on every device, so UNDEFINED_XFAILLIST's entry is a real xfail
    # (with requires_grad=False it would xpass, and --prune-xfails would delete it)
    [result] = runner.run_op_tests("resize_", real_tree_template, CpuAsMps(),
                                   dtypes=["float32", "int32"])
    got = {d.dtype: d for d in result.dtypes}
    assert got["float32"].outcome == "xfail", got["float32"]
    assert "cannot resize variables that require grad" in got["float32"].message
    assert got["float32"].expected_by == ["UNDEFINED_XFAILLIST['resize_']"]


# ----------------------------------------------------------------- decorators

def test_a_decorator_acts_only_on_the_device_it_names():
    from torch.testing._internal import common_device_type as cdt
    kind = runner._decorator_kind
    for other_device in (cdt.skipCPUIfNoLapack, cdt.skipCUDAIfRocm, cdt.skipXPU,
                         cdt.skipCPUIfNoFFT, cdt.skipCUDAIfNoMagma):
        assert kind(other_device) is None, other_device
    import unittest
    assert kind(unittest.expectedFailure) == "xfail"
    assert kind(unittest.skip("Skipped!")) == "skip"
    assert kind(cdt.onlyCUDA) == "skip"          # the test is not instantiated for MPS
    assert kind(cdt.onlyCPU) == "skip"


def test_no_op_of_the_database_is_skipped_by_another_devices_decorator():
    db = opdb.load(None)
    ctx = runner.RunContext(None, CpuAsMps(), expmod.Expectations(None), None, db)
    wrongly = []
    for info in db.ops:
        for dtype in set(info.supported_dtypes("mps")) & mps_dtypes():
            _, skip_by, _ = runner._expectations(info, dtype, ctx, "mps")
            for where in skip_by:
                index = int(where.split("#")[1].split(" ")[0])
                dec = info.decorators[index]
                decs = dec.decorators if hasattr(dec, "is_active") else [dec]
                names = " ".join(getattr(d, "__qualname__", type(d).__name__) for d in decs)
                if names.startswith("only"):        # onlyCUDA: never instantiated on MPS
                    continue
                if any(word in names for word in ("CPU", "CUDA", "XPU", "Rocm", "Lapack")):
                    wrongly.append((info.full_name, str(dtype), names))
    assert wrongly == []
    # and linalg.det (skipCPUIfNoLapack, skipCUDAIfNoMagmaAndNoCusolver) is run
    det = opdb.find(db, "linalg.det")[0]
    assert runner._expectations(det, torch.float32, ctx, "mps")[1] == []


# ----------------------------------------------------------------- reference dtype

class AnswersInFloat32(CpuAsMps):
    """A device computing half in float32 and (unless cast_back) returning float32."""

    def __init__(self, cast_back: bool = False):
        super().__init__()
        self.cast_back = cast_back

    def run(self, opinfo, sample, dtype):
        wide = sample.transform(lambda t: t.float() if isinstance(t, torch.Tensor)
                                and t.dtype == torch.float16 else t)
        out = super().run(opinfo, wide, dtype)
        return out.half() if self.cast_back else out

def test_the_float32_fallback_keeps_the_exact_dtype_check():
    # CPU has no half erfcx: the reference is computed in float32 and cast back to half. A
    # device that answered in float32 must fail, as upstream's assertEqual fails it
    [result] = runner.run_op_tests("special.erfcx", None, AnswersInFloat32(), dtypes=["float16"])
    [half] = result.dtypes
    assert half.outcome == "fail"
    assert "dtype" in half.message
    [ok] = runner.run_op_tests("special.erfcx", None, AnswersInFloat32(cast_back=True),
                               dtypes=["float16"])
    assert ok.dtypes[0].outcome == "pass"


# ----------------------------------------------------------------- macOS gates

GATED = '''\
import torch

if torch.backends.mps.is_available():

    def mps_ops_modifier(ops, device_type="mps", xfail_exclusion=None):
        SUPPORTED_COMPLEX_OPS = {"neg"}
        UNIMPLEMENTED_XFAILLIST = {"sign": [torch.int16]}
        MACOS_BEFORE_14_4_XFAILLIST = {"neg": [torch.float32]}
        MACOS_12_3_XFAILLIST = {"abs": [torch.float32]}
        NEVER_APPLIED_XFAILLIST = {"sign": [torch.int32]}

        for op in ops:
            key = op.name + op.variant_test_name
            for xfaillist in [UNIMPLEMENTED_XFAILLIST]:
                if key in xfaillist and key not in xfail_exclusion:
                    addDecorator(op, DecorateInfo(unittest.expectedFailure, dtypes=xfaillist[key]))
            if key in MACOS_BEFORE_14_4_XFAILLIST and (MACOS_VERSION < 14.4):
                addDecorator(op, DecorateInfo(unittest.expectedFailure,
                                              dtypes=MACOS_BEFORE_14_4_XFAILLIST[key]))
            if key in MACOS_12_3_XFAILLIST and (not torch.backends.mps.is_macos13_or_newer()):
                addDecorator(op, DecorateInfo(unittest.expectedFailure,
                                              dtypes=MACOS_12_3_XFAILLIST[key]))
        return ops
else:

    def mps_ops_modifier(ops):
        return ops
'''


@pytest.mark.parametrize("macos, expected", [
    (None, {"neg": "pass", "abs": "pass"}),           # the newest macOS: no old list applies
    ("14.2", {"neg": "xpass", "abs": "pass"}),
    ("12.3", {"neg": "xpass", "abs": "xpass"}),
])
def test_macos_gated_lists_apply_as_upstream_gates_them(tmp_path, macos, expected):
    root = Path(shutil.copytree(fixture_root(), tmp_path / "mini"))
    (root / COMMON_MPS).write_text(GATED, encoding="utf-8")
    from porter.harness.devices import register_backend
    from porter.testing.stand_in_devices import unregister_backend
    register_backend("cpu-as-mps", lambda root: CpuAsMps())
    try:
        out = io.StringIO()
        run_session(Options(ops=["neg", "abs", "sign"], root=str(root), device="cpu-as-mps",
                            dtypes=["float32", "int16", "int32"], json=True, out=out, macos=macos))
    finally:
        unregister_backend("cpu-as-mps")
    data = json.loads(out.getvalue())
    got = {(op["op"], d["dtype"]): d["outcome"] for op in data["ops"] for d in op["dtypes"]}
    assert got[("neg", "float32")] == expected["neg"]
    assert got[("abs", "float32")] == expected["abs"]
    assert got[("sign", "int16")] == "xpass"           # applied by the loop on every macOS
    assert got[("sign", "int32")] == "pass"            # a list the loop never applies
    assert data["macos"] == (macos or "26.0").replace("14.2", "14.2")


def test_bad_macos_version_is_bad_input(capsys):
    from porter.cli import main
    assert main(["test", "neg", "--device", "cpu", "--macos", "sonoma"]) == 2
    assert "--macos 'sonoma': not a macOS version" in capsys.readouterr().err
