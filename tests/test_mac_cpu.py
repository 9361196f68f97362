"""The CPU references of an emulated run round as the Mac's CPU does (porter.harness.mac_cpu).

tanh_backward's `grad * (1 - y * y)` is the case: torch's x86 FMA build fuses `1 - y * y`, the
Mac's CPU and PyTorch's Metal kernels (MTLMathModeSafe) do not. Near y = 1 the two differ by
1e-4 relative, past test_output_match's float32 rtol."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from porter.harness import mac_cpu, refcache
from tests.porter_run import porter


def test_pin_chooses_the_default_kernels_and_keeps_a_capability_the_user_set(monkeypatch):
    monkeypatch.delenv(mac_cpu.ENV, raising=False)
    assert mac_cpu.capability() == ""
    assert mac_cpu.pin() == "default" and os.environ[mac_cpu.ENV] == "default"
    monkeypatch.setenv(mac_cpu.ENV, "avx2")
    assert mac_cpu.pin() == "avx2" and mac_cpu.capability() == "avx2"


def test_the_reference_cache_key_changes_with_the_capability(monkeypatch):
    monkeypatch.setenv(mac_cpu.ENV, "default")
    default = refcache.environment(None, "mps")
    monkeypatch.setenv(mac_cpu.ENV, "avx2")
    assert default is not None and refcache.environment(None, "mps") != default


def _fresh_capability(env: dict) -> str:
    """The capability a fresh torch process picks under env."""
    code = "import torch; torch.ones(2) + 1; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


def _test(root, env: dict) -> tuple[int, dict]:
    """`porter test tanh_backward` float32 with reference inputs, in a fresh process (torch's
    capability is chosen once per process)."""
    run = subprocess.run([sys.executable, "-m", "porter", "test", "tanh_backward", "--device",
                          "emulate", "--dtype", "float32", "--reference-inputs", "--json",
                          "--root", str(root)], env=env, capture_output=True, text=True)
    return run.returncode, json.loads(run.stdout)


def test_an_exact_port_of_tanh_backward_is_green_as_on_a_mac_and_the_fused_cpu_is_what_differs(
        real_root):
    assert porter("migrate-from-mpsgraph", "tanh_backward", root=real_root).code == 0
    env = {k: v for k, v in os.environ.items() if k != mac_cpu.ENV}
    code, report = _test(real_root, env)
    assert code == 0, report
    assert {d["outcome"] for op in report["ops"] for d in op["dtypes"]} == {"pass"}
    # the user's own choice is kept: torch's FMA build, where this machine has one, gives the
    # fused reference and the same port is red there, on the reference inputs near y = 1
    fused = {**env, mac_cpu.ENV: "avx2"}
    if _fresh_capability(fused) != "AVX2":
        pytest.skip("this CPU has no AVX2 build of torch's kernels to compare with")
    code, report = _test(real_root, fused)
    assert code == 1
    failed = [op["reference"] for op in report["ops"] for d in op["dtypes"]
              if d["outcome"] == "fail"]
    assert failed == [True], report
