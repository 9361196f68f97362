"""The whole loop on the real-size tree: port with new-op, then prove the generated Metal
functors right by running them (host emulation) against CPU on every OpInfo sample."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.porter_run import git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")


@pytest.mark.slow
def test_ported_functors_match_cpu_under_emulation(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    for op in ("heaviside", "special_log_ndtr"):
        assert porter("new-op", op, "--allow-dirty", root=real_root).code == 0

    result = porter("test", "heaviside", "special_log_ndtr", "--device", "emulate", "--json",
                    root=real_root)
    assert result.out.startswith("{"), result.err
    report = json.loads(result.out)
    group = lambda o: "shapes" if o["shapes"] else "reference" if o["reference"] else "samples"
    outcomes = {(op["op"], group(op), case["dtype"]): case["outcome"]
                for op in report["ops"] for case in op["dtypes"]}
    # every op's rows: the dtypes its MPS test sends (OpInfo dtypes on MPS), each group of the
    # full verdict (upstream's samples, the reference inputs, the shapes) on each
    sent = {"heaviside": ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"],
            "special.log_ndtr": ["bool", "uint8", "int8", "int16", "int32", "int64", "float32"]}
    assert {(op["op"], group(op)): [case["dtype"] for case in op["dtypes"]] for op in report["ops"]} == {
        (op, g): dtypes for op, dtypes in sent.items() for g in ("samples", "reference", "shapes")}
    assert all(case["samples"] > 0 for op in report["ops"] for case in op["dtypes"])
    # heaviside is green; special_log_ndtr's functor is the CPU's log1p(-erfc(x/sqrt 2)/2), and
    # c10::metal::erfc is 1 - erf, zero in float past x = 5.5 where the CPU answers a normal
    # number: its reference inputs 6, 7 and 9 are red on every dtype but bool (docs/red.md,
    # "Lost precision, a real red"), upstream's samples and the shapes are not
    red = {("special.log_ndtr", "reference", d) for d in sent["special.log_ndtr"] if d != "bool"}
    assert {k for k, v in outcomes.items() if v != "pass"} == red, outcomes
    assert {outcomes[k] for k in red} == {"fail"} and result.code == 1
    assert "lost precision" in result.out


SGN_BODY = "(x > 0) - (x < 0)"
SGN_COMPLEX_BODY = ("(x.x == 0 && x.y == 0) ? float2(0, 0) : "
                    "float2(x) / precise::sqrt(float(x.x) * float(x.x) + float(x.y) * float(x.y))")


@pytest.mark.slow
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
