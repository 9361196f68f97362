"""The whole loop on the real-size tree: port with new-op, then prove the generated Metal
functors right by running them (host emulation) against CPU on every OpInfo sample."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.porter_run import git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")


def test_ported_functors_match_cpu_under_emulation(real_root, tmp_path, monkeypatch):
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    git_init(real_root)
    for op in ("heaviside", "special_log_ndtr"):
        assert porter("new-op", op, "--allow-dirty", root=real_root).code == 0

    result = porter("test", "heaviside", "special_log_ndtr", "--device", "emulate", "--json",
                    root=real_root)
    assert result.out.startswith("{"), result.err
    report = json.loads(result.out)
    outcomes = {(op["op"], case["dtype"]): case["outcome"]
                for op in report["ops"] for case in op["dtypes"]}
    assert result.code == 0, outcomes
    assert {dtype for (op, dtype) in outcomes if op == "heaviside"} == {
        "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"}
    assert set(outcomes.values()) == {"pass"}
