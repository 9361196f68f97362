"""The whole loop on the real-size tree: port with new-op, then prove the generated Metal
functors right by running them (host emulation) against CPU on every OpInfo sample."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.porter_run import git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")


def test_ported_functors_match_cpu_under_emulation(real_root, tmp_path, monkeypatch):
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
    # every op's rows: the dtypes its MPS test sends (OpInfo dtypes on MPS), each run on samples
    assert {op["op"]: [case["dtype"] for case in op["dtypes"]] for op in report["ops"]} == {
        "heaviside": ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"],
        "special.log_ndtr": ["bool", "uint8", "int8", "int16", "int32", "int64", "float32"]}
    assert all(case["samples"] > 0 for op in report["ops"] for case in op["dtypes"])
    assert set(outcomes.values()) == {"pass"}


SGN_BODY = "(x > 0) - (x < 0)"
SGN_COMPLEX_BODY = ("(x.x == 0 && x.y == 0) ? float2(0, 0) : "
                    "float2(x) / precise::sqrt(float(x.x) * float(x.x) + float(x.y) * float(x.y))")


def test_a_migration_with_a_complex_body_passes_the_complex_test(mini_root, tmp_path, monkeypatch):
    # sgn is in SUPPORTED_COMPLEX_OPS: its MPS test sends complex64 (through the VEC2 macro)
    git_init(mini_root)
    # sgn_out runs sign_stub for real inputs (the fixture's UnaryOps.cpp, as upstream's): sign
    # first, then sgn's port is sgn_stub's complex64 kernel alone
    assert porter("migrate-from-mpsgraph", "sign", root=mini_root).code == 0
    git_init(mini_root)
    migrated = porter("migrate-from-mpsgraph", "sgn", "--complex-body", SGN_COMPLEX_BODY, root=mini_root)
    assert migrated.code == 0 and "SUPPORTED_COMPLEX_OPS" not in migrated.out, migrated.out

    result = porter("test", "sgn", "--device", "emulate", "--json", root=mini_root)
    outcomes = {case["dtype"]: case["outcome"] for op in json.loads(result.out)["ops"]
                for case in op["dtypes"]}
    assert outcomes.get("complex64") == "pass" and set(outcomes.values()) == {"pass"}, outcomes
    assert porter("check", root=mini_root).code == 0
