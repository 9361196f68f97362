"""A port command ends with the verdict (issue 21, item 7): after writing, new-op and
migrate-from-mpsgraph run the op's emulated test (upstream's samples and the reference
inputs), print its table, and exit 1 when a dtype fails, saying the files were written and
are red; `--no-test` skips it and says so."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("torch")

from porter.source.checkout import KERNELS  # noqa: E402
from tests.porter_run import porter, snapshot  # noqa: E402

if shutil.which(os.environ.get("CXX", "g++")) is None:
    pytest.skip("no C++ compiler for the Metal emulator", allow_module_level=True)


@pytest.mark.slow
def test_a_green_port_ends_with_its_passing_table(real_root):
    res = porter("new-op", "heaviside", "--test", root=real_root)
    assert res.code == 0, res.out + res.err
    assert "porter new-op heaviside: 5 file(s) written" in res.out
    # the full verdict: upstream's samples, the reference inputs (with each dtype's edges), the shapes
    assert "heaviside  (xfail key 'heaviside', device emulate)" in res.out
    assert "heaviside  (reference inputs: extremal values" in res.out
    assert "heaviside  (shapes: transposed" in res.out
    assert "summary: 27 pass, 0 fail, 0 xfail, 0 xpass; 0 skip" in res.out
    assert "red" not in res.err


@pytest.mark.slow
def test_a_port_that_builds_but_computes_wrong_is_red(real_root):
    # `x < 0` builds and is complete, but says signbit(-0.0) is false: the reference inputs
    # (±0) catch it, and the command says the files were written and are red
    res = porter("migrate-from-mpsgraph", "signbit", "--body", "x < 0", "--test", root=real_root)
    assert res.code == 1, res.out + res.err
    assert "porter migrate-from-mpsgraph signbit: 4 file(s) written" in res.out
    assert "FAIL float32" in res.out
    assert res.err.strip().endswith(
        "porter: error: the files were written and are red: signbit fails its test on emulate "
        "(table above; `porter test signbit --device emulate` reruns it, "
        "`--no-test` skips it)")
    assert "x < 0" in (real_root / KERNELS / "UnaryKernel.metal").read_text()


def test_no_test_writes_without_testing_and_says_so(real_root):
    before = snapshot(real_root)
    res = porter("new-op", "heaviside", "--no-test", root=real_root)
    assert res.code == 0 and snapshot(real_root) != before
    assert "porter test:" not in res.out
    assert res.err.splitlines()[-1] == (
        "note: --no-test: the files were written and heaviside was not tested; "
        "`porter test heaviside --device emulate` gives the verdict")
    # a dry run writes nothing and tests nothing
    assert "porter test:" not in porter("new-op", "heaviside", "--dry-run", root=real_root).out


@pytest.mark.slow
def test_json_keeps_stdout_one_document_and_the_exit_code_tells(real_root):
    res = porter("migrate-from-mpsgraph", "signbit", "--body", "x < 0", "--json", "--test", root=real_root)
    data = json.loads(res.out)
    # the document says what the exit status says: red, and why (it said "ok": true here)
    assert data["ok"] is False and res.code == 1
    assert data["written"] and data["verdict"]["tested"] is True
    assert data["verdict"]["ok"] is False
    assert data["verdict"]["why"][0].startswith(
        "the files were written and are red: signbit fails its test on emulate")
    assert any(w.startswith("signbit (reference inputs) float32: fail")
               for w in data["verdict"]["why"]), data["verdict"]["why"]
    assert data["verdict"]["report"]["summary"]["fail"] > 0
    assert "the files were written and are red" in res.err


@pytest.mark.slow
def test_json_of_a_green_port_is_ok_with_its_verdict(real_root):
    res = porter("new-op", "heaviside", "--json", "--test", root=real_root)
    data = json.loads(res.out)
    assert res.code == 0 and data["ok"] is True, res.err
    assert data["verdict"]["ok"] is True and data["verdict"]["why"] == []
    assert data["verdict"]["report"]["summary"]["pass"] == 27       # 3 rows x 9 dtypes


def test_json_of_an_untested_port_says_it_was_not_tested(real_root):
    res = porter("new-op", "heaviside", "--json", "--no-test", root=real_root)
    data = json.loads(res.out)
    assert res.code == 0 and data["ok"] is True
    assert data["verdict"]["tested"] is False and "--no-test" in data["verdict"]["why"][0]
