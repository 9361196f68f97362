"""PORTER011 on nn.functional.* OpInfos without an aten_name= (softplus, hardsigmoid): their aten
op is the name's tail, as `porter test` resolves it, not `nn_functional_softplus`. A dtype left
out of such a port's registrations must be reported by `porter check`, as the emulated test
fails it (and a Mac raises 'Failed to create function state object')."""

from __future__ import annotations

import shutil

import pytest

from tests.porter_run import git_init, porter

METAL = "aten/src/ATen/native/mps/kernels/ActivationKernel.metal"
LINE = "REGISTER_UNARY_ALPHA_OP(softplus, bfloat, SoftplusParams_float, bfloat);"


@pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")
def test_a_bfloat_registration_under_if_0_is_reported_for_softplus(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    ported = porter("migrate-from-mpsgraph", "softplus", root=real_root)
    assert ported.code == 0, ported.err
    clean = porter("check", root=real_root)
    assert "kernel 'softplus'" not in clean.out, clean.out
    metal = (real_root / METAL).read_text()
    assert LINE in metal
    (real_root / METAL).write_text(metal.replace(LINE, f"#if 0\n{LINE}\n#endif"))
    wrong = porter("check", root=real_root)
    assert wrong.code != 0
    found = [l for l in wrong.out.splitlines() if "PORTER011" in l and "kernel 'softplus'" in l]
    assert len(found) == 1, wrong.out
    assert "OpInfo 'nn.functional.softplus'" in found[0] and "sends bfloat16" in found[0], found
