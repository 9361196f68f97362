"""The harness end to end on the CPU: a backend that stands in for MPS, with injected faults.

The op database is imported once per session (porter.harness.opdb caches it), ~5-7 s.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import expecttest
import pytest

pytest.importorskip("torch")

from porter.source.checkout import COMMON_MPS  # noqa: E402
from porter.cli import main  # noqa: E402
from porter.harness import audit, junit, upstream, verdicts  # noqa: E402
from porter.harness import opinfo_run as runner  # noqa: E402
from porter.harness.devices import TorchDeviceBackend, mps_dtypes, register_backend  # noqa: E402
from porter.testing.stand_in_devices import unregister_backend  # noqa: E402
from porter.harness.session import Options, run as run_session  # noqa: E402
from porter.testing.trees import fixture_root  # noqa: E402

COMMON_MPS_TEXT = '''\
import torch

if torch.backends.mps.is_available():

    def mps_ops_modifier(ops):
        SUPPORTED_COMPLEX_OPS = {"neg"}
        UNIMPLEMENTED_XFAILLIST = {
            "abs": [torch.int8],
            "neg": [torch.float16, torch.float32],
        }
        SKIPLIST = {"sign": [torch.int16]}
        return ops
else:

    def mps_ops_modifier(ops):
        return ops
'''


class CpuFaultBackend(TorchDeviceBackend):
    """Runs on the CPU standing in for MPS; adds 1 to every result of one dtype."""

    def __init__(self, fault_dtype: str | None = None):
        super().__init__("cpu", as_mps=True)
        self.name = "cpu-fault"
        self.fault = fault_dtype

    def run(self, opinfo, sample, dtype):
        out = super().run(opinfo, sample, dtype)
        if self.fault and str(dtype) == f"torch.{self.fault}":
            return out + 1
        return out


def outcomes(results):
    return {(r.op, d.dtype): d.outcome for r in results for d in r.dtypes}


def make_root(tmp: Path, text: str = COMMON_MPS_TEXT) -> Path:
    root = Path(shutil.copytree(fixture_root(), tmp / "mini-pytorch"))
    (root / COMMON_MPS).write_text(text, encoding="utf-8")
    return root


def test_injected_error_fails_exactly_that_dtype():
    results = runner.run_op_tests("neg", None, CpuFaultBackend("int32"))
    got = outcomes(results)
    assert [k for k, v in got.items() if v != "pass"] == [("neg", "int32")]
    bad = results[0].dtypes[[d.dtype for d in results[0].dtypes].index("int32")]
    assert bad.first_failure == 0 and bad.max_abs == 1.0 and bad.failed_samples == bad.samples
    assert "float64" not in {d for _, d in got}          # MPS has no double


def test_xfail_entry_for_passing_dtype_is_xpass(tmp_path):
    root = make_root(tmp_path)
    results = runner.run_op_tests("neg", root, CpuFaultBackend("float32"))
    got = outcomes(results)
    assert got[("neg", "float16")] == "xpass"
    assert got[("neg", "float32")] == "xfail"
    assert got[("neg", "int32")] == "pass"
    assert got[("neg", "complex64")] == "pass"           # key in SUPPORTED_COMPLEX_OPS
    sign = outcomes(runner.run_op_tests("sign", root, CpuFaultBackend()))
    assert sign[("sign", "int16")] == "skip"
    absolute = outcomes(runner.run_op_tests("abs", root, CpuFaultBackend()))
    assert absolute[("abs", "complex64")] == "xpass"     # absent from SUPPORTED_COMPLEX_OPS


def test_cuda_ignores_mps_expectations(tmp_path):
    root = make_root(tmp_path)
    results = runner.run_op_tests("neg", root, TorchDeviceBackend("cpu"), dtypes=["float16"])
    assert outcomes(results) == {("neg", "float16"): "pass"}


class TestPruneXfails(expecttest.TestCase):
    def setUp(self):
        import tempfile
        self.tmp = Path(tempfile.mkdtemp())
        self.root = make_root(self.tmp)
        register_backend("cpu-fault", lambda root: CpuFaultBackend("float32"))

    def tearDown(self):
        unregister_backend("cpu-fault")
        shutil.rmtree(self.tmp)

    def porter(self, *argv):
        out = io.StringIO()
        code = run_session(Options(ops=["neg", "abs"], root=str(self.root), device="cpu-fault",
                                   out=out, **dict(argv)))
        return code, out.getvalue()

    def test_prune_removes_exactly_the_stale_entry(self):
        before = (self.root / COMMON_MPS).read_text()
        code, text = self.porter(("prune_xfails", True), ("dry_run", True))
        self.assertEqual(code, 1)
        self.assertEqual((self.root / COMMON_MPS).read_text(), before)
        diff = text[text.index("--- a/"):]
        self.assertExpectedInline(diff, '''\
--- a/torch/testing/_internal/common_mps.py
+++ b/torch/testing/_internal/common_mps.py
@@ -5,8 +5,7 @@
     def mps_ops_modifier(ops):
         SUPPORTED_COMPLEX_OPS = {"neg"}
         UNIMPLEMENTED_XFAILLIST = {
-            "abs": [torch.int8],
-            "neg": [torch.float16, torch.float32],
+            "neg": [torch.float32],
         }
         SKIPLIST = {"sign": [torch.int16]}
         return ops
''')
        code, text = self.porter(("prune_xfails", True))
        self.assertEqual(code, 1)     # abs complex64 xpass (SUPPORTED_COMPLEX_OPS) is only reported
        self.assertIn("prune (not edited): abs complex64", text)
        after = (self.root / COMMON_MPS).read_text()
        self.assertEqual(after, before.replace('            "abs": [torch.int8],\n', "").replace(
            '"neg": [torch.float16, torch.float32]', '"neg": [torch.float32]'))
        code, text = self.porter(("prune_xfails", True))
        self.assertNotIn("prune: UNIMPLEMENTED", text)
        self.assertEqual((self.root / COMMON_MPS).read_text(), after)


def test_report_json_junit_and_repro(tmp_path):
    register_backend("cpu-fault", lambda root: CpuFaultBackend("int32"))
    try:
        out = io.StringIO()
        code = run_session(Options(ops=["neg"], device="cpu-fault", out=out, dtypes=["int32"]))
        assert code == 1
        assert "repro: porter test neg --device cpu-fault --dtype int32 --sample 0" in out.getvalue()
        out = io.StringIO()
        xml_path = tmp_path / "r.xml"
        run_session(Options(ops=["neg"], device="cpu-fault", out=out, json=True,
                            dtypes=["int32", "int8"], junit=str(xml_path)))
        data = json.loads(out.getvalue())
        assert data["ok"] is False and data["summary"]["fail"] == 1 and data["summary"]["pass"] == 1
        suite = ET.parse(xml_path).getroot().find("testsuite")
        assert suite.get("name") == "neg" and suite.get("failures") == "1"
        assert [c.get("name")[-5:] for c in suite.iter("testcase")] == ["_int8", "int32"]
    finally:
        unregister_backend("cpu-fault")


def test_op_spellings_and_unknown_op():
    from porter.errors import PorterError
    from porter.harness import opdb
    db = opdb.load(None)
    assert {o.full_name for o in opdb.find(db, "special_log_ndtr")} == {"special.log_ndtr"}
    assert [o.full_name for o in opdb.find(db, "round.decimals_0")] == ["round.decimals_0"]
    assert [o.full_name for o in opdb.find(db, "rounddecimals_0")] == ["round.decimals_0"]
    assert len(opdb.find(db, "round")) == 4
    with pytest.raises(PorterError, match="did you mean"):
        opdb.find(db, "heavisid")


def test_cli_unavailable_device_exits_2(capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert main(["test", "neg", "--device", "cuda"]) == 2
    assert "sees no CUDA device" in capsys.readouterr().err


def test_cli_without_mps_exits_2_and_names_the_emulator(capsys):
    import torch
    if torch.backends.mps.is_available():
        pytest.skip("an MPS device is present")
    assert main(["test", "neg", "--device", "mps"]) == 2
    err = capsys.readouterr().err
    assert "sees no MPS device" in err and "--device emulate" in err and err.count("\n") == 1


def test_help_does_not_import_torch():
    code = ("import sys; from porter.cli import build_parser; build_parser().format_help(); "
            "import porter.commands.test, porter.commands.audit_xfails; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_audit_in_process_and_shards(tmp_path):
    keys = ["a", "b", "c", "d", "e"]
    assert audit.shard_keys(keys, (1, 2)) == ["a", "c", "e"]
    assert audit.shard_keys(keys, (2, 2)) == ["b", "d"]
    root = make_root(tmp_path)
    res = audit.run(root, "cpu-mps", ["neg", "nosuchop"], jobs=1)
    assert res.orphans == ["nosuchop"]
    assert audit.stale_lines(res.results) == [
        "neg: UNIMPLEMENTED_XFAILLIST['neg'] xpasses for float16, float32"]


def test_upstream_junit_parsing():
    xml = '''<testsuites><testsuite>
      <testcase classname="TestConsistencyMPS" name="test_output_match_neg_mps_float32"/>
      <testcase classname="TestConsistencyMPS" name="test_output_match_neg_mps_float16">
        <failure message="AssertionError: Tensor-likes are not close!"/></testcase>
      <testcase classname="TestConsistencyMPS" name="test_output_match_neg_mps_int32">
        <skipped type="pytest.xfail" message=""/></testcase>
      <testcase classname="TestConsistencyMPS" name="test_output_match_neg_mps_int8">
        <failure message="Unexpected success"/></testcase>
      <testcase classname="TestConsistencyMPS" name="test_output_match_round_decimals_0_mps_bool">
        <skipped message="Skipped!"/></testcase>
    </testsuite></testsuites>'''
    assert upstream.parse_junit(xml) == {
        ("neg", "float32"): "pass", ("neg", "float16"): "fail", ("neg", "int32"): "xfail",
        ("neg", "int8"): "xpass", ("round_decimals_0", "bool"): "skip"}
    cmd = upstream.command(Path("/r"), ["sin"], "j.xml")
    assert cmd[cmd.index("-k") + 1] == "test_output_match_sin_mps_"
    results = [verdicts.OpResult("neg", "neg", "", "neg", "mps",
                               [verdicts.DtypeResult("float16", "pass")])]
    upstream.fold(results, {("neg", "float16"): "fail"})
    assert results[0].dtypes[0].upstream == "fail"
    assert "test_output_match_neg_mps_float16" in junit.render(results)


class NoComplexKernelBackend(CpuFaultBackend):
    """Stands in for MPS with kernels for every dtype but complex64 (as the emulator sees a
    .metal file without float2 registrations)."""

    def supported_dtypes(self, opinfo):
        import torch
        return {d for d in mps_dtypes() if d != torch.complex64}


def test_a_dtype_the_device_test_sends_without_a_kernel_fails(tmp_path):
    root = make_root(tmp_path)       # SUPPORTED_COMPLEX_OPS = {"neg"}: abs's complex64 is xfailed
    register_backend("no-complex", lambda root: NoComplexKernelBackend())
    try:
        out = io.StringIO()
        run_session(Options(ops=["neg", "abs"], root=str(root), device="no-complex", out=out, json=True))
        found = {(op["op"], case["dtype"]): case for op in json.loads(out.getvalue())["ops"]
                 for case in op["dtypes"]}
    finally:
        unregister_backend("no-complex")
    # a Mac fails the test for want of a kernel: so does porter (skip is for what it cannot run)
    assert found[("neg", "complex64")]["outcome"] == "fail"
    assert "no Metal kernel registered for complex64" in found[("neg", "complex64")]["message"]
    assert found[("abs", "complex64")]["outcome"] == "xfail"     # expected to fail on MPS


def test_emulate_outside_a_checkout_is_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)          # no native_functions.yaml above: no kernels to emulate
    assert main(["test", "sign", "--device", "emulate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("porter: error: --device emulate runs a checkout's Metal kernels") and \
        err.count("\n") == 1


def _audit_json(root: Path, capsys, *args: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["audit-xfails", "--root", str(root), "--device", "cpu", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def _timeless(ops: list[dict]) -> list[dict]:
    return sorted(({**op, "dtypes": [{k: v for k, v in d.items() if k != "seconds"} for d in op["dtypes"]]}
                   for op in ops), key=lambda op: (op["key"], op["op"]))


@pytest.mark.slow
def test_audit_xfails_shards_merge_into_the_two_job_run(tmp_path, capsys, monkeypatch):
    import multiprocessing.context

    root = make_root(tmp_path)
    pools = []
    real_pool = multiprocessing.context.SpawnContext.Pool
    monkeypatch.setattr(multiprocessing.context.SpawnContext, "Pool",
                        lambda self, processes, *a, **k: (pools.append(processes),
                                                          real_pool(self, processes, *a, **k))[1])
    code, whole = _audit_json(root, capsys, "--jobs", "2")
    assert (code, pools) == (1, [2])          # two spawned workers; abs's int8 entry is stale
    assert whole["keys"] == 3 and {op["key"] for op in whole["ops"]} == {"abs", "neg", "sign"}
    assert "abs: UNIMPLEMENTED_XFAILLIST['abs'] xpasses for int8" in whole["stale"]

    paths = []
    for k in (1, 2):
        code, shard = _audit_json(root, capsys, "--shard", f"{k}/2")
        assert shard["shard"] == f"{k}/2"
        paths.append(tmp_path / f"shard{k}.json")
        paths[-1].write_text(json.dumps(shard), encoding="utf-8")
    shards = [json.loads(p.read_text()) for p in paths]
    assert [sorted({op["key"] for op in s["ops"]}) for s in shards] == [["abs", "sign"], ["neg"]]
    assert pools == [2]                       # a shard of one job runs in-process

    code, merged = _audit_json(root, capsys, "--merge", *map(str, paths))
    assert code == 1 and merged["device"] == "merged" and merged["keys"] == whole["keys"]
    assert sorted(merged["stale"]) == sorted(whole["stale"])
    assert _timeless(merged["ops"]) == _timeless(whole["ops"])


class RecordingBackend(CpuFaultBackend):
    """CPU standing in for MPS, with a fault on one dtype; keeps every input it was sent."""

    def __init__(self, fault_dtype: str | None = None):
        super().__init__(fault_dtype)
        self.inputs = []

    def run(self, opinfo, sample, dtype):
        self.inputs.append(sample.input.clone())
        return super().run(opinfo, sample, dtype)


def test_sample_runs_that_sample_input_alone(capsys):
    import torch
    from porter.harness import opdb

    backend = RecordingBackend("float32")
    register_backend("cpu-record", lambda root: backend)
    try:
        capsys.readouterr()
        code = main(["test", "atan2", "--device", "cpu-record", "--dtype", "float32", "--sample", "2"])
        out = capsys.readouterr().out
        # an index past the samples ran nothing: bad input, not a pass
        assert main(["test", "atan2", "--device", "cpu-record", "--dtype", "float32", "--sample", "9"]) == 2
        err = capsys.readouterr().err
    finally:
        unregister_backend("cpu-record")
    info, = opdb.find(opdb.load(None), "atan2")
    inputs = [s.input for s in info.sample_inputs("cpu", torch.float32, requires_grad=False, set_seed=True)]
    assert len(inputs) == 9 and inputs[2].shape != inputs[0].shape
    assert len(backend.inputs) == 1 and torch.equal(backend.inputs[0], inputs[2])
    assert code == 1 and "FAIL float32 (1/1 samples), sample 2:" in out
    assert "repro: porter test atan2 --device cpu-fault --dtype float32 --sample 2" in out
    assert err == ("porter: error: --sample 9: atan2 has 9 sample input(s) for float32 "
                   "(pass --sample 0 to 8)\n")


ONE_STALE_ENTRY = '''\
import torch

if torch.backends.mps.is_available():

    def mps_ops_modifier(ops):
        SUPPORTED_COMPLEX_OPS = {"neg"}
        UNIMPLEMENTED_XFAILLIST = {
            "neg": [torch.float16],
        }
        return ops
else:

    def mps_ops_modifier(ops):
        return ops
'''


@pytest.mark.parametrize("command", [
    ("test", "neg", "--device", "cpu-mps", "--prune-xfails"),
    ("audit-xfails", "--device", "cpu", "--prune")])
@pytest.mark.slow
def test_a_dry_run_prune_leaves_the_stale_entry_and_exits_1(tmp_path, capsys, command):
    """The only xpass is one the prune can remove: a dry run shows the edit but writes nothing,
    so the entry is still stale (exit 1); the applied prune resolves it (exit 0)."""
    root = make_root(tmp_path, ONE_STALE_ENTRY)
    argv = [*command, "--root", str(root)]
    assert main([*argv, "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "-            \"neg\": [torch.float16],\n" in out
    assert (root / COMMON_MPS).read_text() == ONE_STALE_ENTRY
    assert main(argv) == 0
    assert '"neg"' not in (root / COMMON_MPS).read_text().split("UNIMPLEMENTED_XFAILLIST", 1)[1]
