"""PORTER011 counts only the dtypes that reach a stub's Metal kernel on MPS: not an op whose
MPS row still names its own MPSGraph function (threshold, after threshold_backward was ported
onto threshold_stub), nor the integers a shared function copies before the stub
(nan_to_num_out). Each was a red `porter check` on a port whose emulated test is green."""

from __future__ import annotations

import shutil

import pytest

from porter.source.checkout import NATIVE_YAML
from tests.porter_run import git_init, porter

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")


def _porter011(root, kernel: str) -> list[str]:
    result = porter("check", "--select", "PORTER011", root=root)
    assert result.code in (0, 1) and "porter check: " in result.err, result.err   # it ran
    return [line for line in result.out.splitlines() if f"kernel '{kernel}'" in line]


@needs_compiler
def test_threshold_on_mpsgraph_is_not_checked_against_the_kernel_its_backward_runs(
        real_root, tmp_path, monkeypatch):
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "threshold_backward", root=real_root).code == 0
    assert _porter011(real_root, "threshold") == []
    # wrong on purpose: the shared kernel (written for threshold's dtypes too) loses its int32
    # registration, and threshold's row joins the shared function: its OpInfo's int32 reaches
    # no kernel, as on a Mac: reported
    metal = real_root / "aten/src/ATen/native/mps/kernels/ActivationKernel.metal"
    kernels = metal.read_text()
    line = "REGISTER_BINARY_ALPHA_OP(threshold, int, ThresholdParams_long, int);\n"
    assert kernels.count(line) == 1
    metal.write_text(kernels.replace(line, ""))
    yaml = real_root / NATIVE_YAML
    text = yaml.read_text()
    assert text.count("    MPS: threshold_out_mps\n") == 1
    yaml.write_text(text.replace("    CPU, CUDA: threshold_out\n    MPS: threshold_out_mps\n",
                                 "    CPU, CUDA, MPS: threshold_out\n"))
    found = _porter011(real_root, "threshold")
    assert found and "int" in found[0], found


@needs_compiler
def test_nan_to_num_integers_copied_before_the_stub_are_not_counted(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "nan_to_num", root=real_root).code == 0
    assert _porter011(real_root, "nan_to_num") == []
