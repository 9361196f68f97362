"""`porter bench`: the script it writes is standalone; run against the emulator-backed fake
`torch.mps` it prints a table over sizes, dtypes and layouts whose arithmetic (time per run,
throughput, speed-up) is the timings the fake reports, warm-up runs not timed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from porter.review import bench_script
from tests.porter_run import git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the fake torch.mps runs the emulator")

WARMUP, REPEAT = 2, 3


def before_cost(numel):          # what the fake says the installed torch's op took
    return 20e-6 + 0.02e-6 * numel


def after_cost(numel):           # what the fake says the dense Metal kernel took
    return 5e-6 + 0.01e-6 * numel


class Clock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


def test_measure_times_only_the_runs_after_warm_up():
    clock, calls = Clock(), []

    def fn():
        calls.append(1)
        clock.now += 1.0 + len(calls)         # each run longer than the last: 2, 3, 4, 5, 6 s
    assert bench_script.measure(fn, lambda: None, warmup=2, repeat=3, clock=clock.perf_counter) == 5.0
    assert len(calls) == 5                    # (4 + 5 + 6) / 3: the warm-up's 2 and 3 s left out


def test_bench_under_the_fake_mps(real_root, tmp_path, monkeypatch):
    import torch

    from porter.review import bench_writer as bench
    from porter.testing.fake_mps import FakeMps

    git_init(real_root)
    assert porter("new-op", "heaviside", root=real_root).code == 0
    clock = Clock()
    fake = FakeMps(real_root)
    dispatched = []

    def on_dispatch(name, numel):
        dispatched.append((name, numel))
        clock.now += after_cost(numel)
    fake.on_dispatch = on_dispatch

    class TimedTorch:                         # torch, whose heaviside the fake clock times
        def __getattr__(self, name):
            if name != "heaviside":
                return getattr(torch, name)

            def timed(*args, **kwargs):
                clock.now += before_cost(args[0].numel())
                return torch.heaviside(*args, **kwargs)
            return timed

    monkeypatch.setattr(bench, "mps_module", lambda: (fake, TimedTorch(), "cpu"))
    monkeypatch.setattr(bench_script, "time", clock)
    script = tmp_path / "bench_heaviside.py"
    try:
        result = porter("bench", "heaviside", "--sizes", "100,1000", "--dtype", "float32", "--dtype", "int16",
                        "--warmup", str(WARMUP), "--repeat", str(REPEAT), "--format", "markdown",
                        "-o", str(script), root=real_root)
    finally:
        fake.close()
    assert result.code == 0, result.err
    rows = [line.strip("|").split("|") for line in result.out.splitlines() if re.match(r"\| (float32|int16) ", line)]
    cases = [(d.strip(), n.strip(), layout.strip()) for d, n, layout, *_ in rows]
    assert cases == [(d, n, layout) for d in ("float32", "int16") for n in ("1e2", "1e3")
                     for layout in ("contiguous", "strided")]
    for dtype, numel_text, layout, before_us, after_us, before_gbps, after_gbps, speedup in rows:
        numel = int(float(numel_text))
        size = 4 if dtype.strip() == "float32" else 2
        moved = numel * 3 * size                       # two inputs read, one output written
        assert float(before_us) == pytest.approx(before_cost(numel) * 1e6, abs=0.005)
        assert float(after_us) == pytest.approx(after_cost(numel) * 1e6, abs=0.005)
        assert float(before_gbps) == pytest.approx(moved / before_cost(numel) / 1e9, abs=0.005)
        assert float(after_gbps) == pytest.approx(moved / after_cost(numel) / 1e9, abs=0.005)
        assert float(speedup.strip().rstrip("x")) == pytest.approx(before_cost(numel) / after_cost(numel), abs=0.005)
    # every case dispatched warm-up + timed runs of the dense kernel, with the dtype's host name
    assert len(dispatched) == len(cases) * (WARMUP + REPEAT)
    assert {name for name, _ in dispatched} == {"heaviside_dense_float_float", "heaviside_dense_short_short"}
    assert "torch 2." in result.out and "heaviside_functor via compile_shader" in result.out


def test_the_script_is_standalone_and_says_where_it_runs(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    assert porter("new-op", "heaviside", root=real_root).code == 0
    script = tmp_path / "bench.py"
    result = porter("bench", "heaviside", "-o", str(script), root=real_root)
    assert result.code == 0
    assert "nothing measured here (no MPS device)" in result.err and "--format text" in result.err
    # --json, as every command takes it (docs/reference.md): here, nothing measured, no rows
    import json
    as_json = porter("bench", "heaviside", "-o", str(script), "--json", root=real_root)
    assert as_json.code == 0 and json.loads(as_json.out) == {
        "ok": True, "op": "heaviside", "script": str(script), "measured": False, "rows": []}
    text = script.read_text()
    assert not re.search(r"^\s*(import|from) porter", text, re.M)
    assert "// porter-inline-begin c10/metal/indexing.h" in text      # the checkout's headers, inlined
    # run as a contributor would, by itself: on a machine without MPS it says what it needs
    proc = subprocess.run([sys.executable, str(script), "--sizes", "100"], capture_output=True, text=True,
                          cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert "needs torch 2.6 or later on Apple silicon" in proc.stderr


def test_bench_of_an_op_without_a_metal_kernel_is_refused(real_root):
    result = porter("bench", "heaviside", root=real_root)
    assert result.code == 2 and "heaviside: no *Kernel.mm of the checkout dispatches a Metal kernel" in result.err


def test_the_scripts_json_rows_are_the_measurements():
    import json
    rows = [{"dtype": "float32", "numel": 100, "layout": "contiguous", "before_s": 2e-5, "after_s": 0.0,
             "before_gbps": 0.06, "after_gbps": float("inf"), "speedup": float("inf")}]
    data = json.loads(bench_script.render(rows, "json", "t"))
    assert data["rows"][0]["after_gbps"] is None and data["rows"][0]["before_s"] == 2e-5
