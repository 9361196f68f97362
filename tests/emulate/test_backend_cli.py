"""`porter test --device emulate` backend and `porter emulate check`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from porter import cli
from porter.dispatch.kernel_choice import OpNames, torch_dtype
from porter.emulate.emulator_device import EmulateBackend

torch = pytest.importorskip("torch")


def _op(name, variant=""):
    return SimpleNamespace(name=name, variant_test_name=variant)


def _sample(x, *args, **kwargs):
    return SimpleNamespace(input=x, args=args, kwargs=kwargs)


@pytest.fixture(scope="module")
def backend(fixture_root):
    b = EmulateBackend(fixture_root)
    yield b
    b.close()


def _registered_dtypes(backend, opinfo) -> set:
    """torch dtypes whose (promoted) input the .metal registers a built kernel for."""
    dtypes = set()
    for host in backend._candidates(OpNames.of(opinfo)):
        for reg in backend._library(host.metal).find(host.kernel):
            if reg.built and torch_dtype(reg.in_type) is not None:
                dtypes.add(torch_dtype(reg.in_type))
    return dtypes


@pytest.mark.slow
def test_registered_dtypes_and_what_the_backend_cannot_run(backend):
    assert backend.unavailable_reason() is None
    assert _registered_dtypes(backend, _op("hypot")) == {torch.float32, torch.float16, torch.bfloat16}
    assert torch.int64 in _registered_dtypes(backend, _op("atan2"))
    assert _registered_dtypes(backend, _op("not_an_op")) == set()
    # every dtype the MPS test sends is run: a missing one fails there, as on a Mac
    assert backend.supported_dtypes(_op("hypot")) is None
    assert backend.skip_reason(OpNames.of(_op("hypot"))) is None
    assert "no *Kernel.mm of the checkout dispatches a Metal kernel" in backend.skip_reason(OpNames.of(_op("lgamma")))
    assert backend.build_error(OpNames.of(_op("hypot"))) is None


@pytest.mark.slow
def test_run_promotes_broadcasts_and_uses_the_kernel_output_dtype(backend):
    a = torch.randn(3, 4)
    b = torch.randn(4, dtype=torch.float16)
    torch.testing.assert_close(backend.run(_op("hypot"), _sample(a, b), torch.float32), torch.hypot(a, b))
    i = torch.arange(-3, 3, dtype=torch.int64).reshape(2, 3)
    out = backend.run(_op("atan2"), _sample(i, 2), torch.int64)
    assert out.dtype == torch.float32                       # int -> float kernel
    torch.testing.assert_close(out, torch.atan2(i, torch.tensor(2)))


def test_alpha_and_kernel_names_from_the_host_file(backend):
    a, b = torch.randn(6), torch.randn(6)
    # add_stub -> exec_binary_kernel(iter, "add_alpha", alpha)
    torch.testing.assert_close(backend.run(_op("add"), _sample(a, b, alpha=3), torch.float32),
                               torch.add(a, b, alpha=3))
    # special_erfcx_stub -> kernel "erfcx"
    torch.testing.assert_close(backend.run(_op("special.erfcx"), _sample(a), torch.float32),
                               torch.special.erfcx(a))


def test_a_dtype_the_host_refuses_is_a_failure_like_on_the_gpu(backend):
    # hypot's host checks isFloatingType before it looks up a kernel: a Mac raises that check's
    # error for int32 (no hypot_int32_int32 is registered either)
    with pytest.raises(RuntimeError, match=r"a Mac fails its check `isFloatingType\(iter.common_dtype\(\)\)` "
                                           r"for int32 and raises \"hypot is not supported for "):
        backend.run(_op("hypot"), _sample(torch.ones(2, dtype=torch.int32), torch.ones(2, dtype=torch.int32)),
                    torch.int32)


def test_emulate_check_cli_json(fixture_root, capsys):
    rc = cli.main(["emulate", "check", "--root", str(fixture_root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["ok"]
    assert data["summary"]["matched"] == data["summary"]["registered"] > 100
    first = data["results"][0]
    assert set(first) >= {"kernel", "in_type", "out_type", "status", "max_error", "bit_exact"}


def test_emulate_check_cli_reports_a_wrong_functor(mini_root, capsys):
    from porter.source.checkout import KERNELS
    path = mini_root / KERNELS / "BinaryKernel.metal"
    text = path.read_text()
    old = "return static_cast<T>(precise::atan2(float(a), float(b)));"
    assert old in text
    path.write_text(text.replace(old, "return static_cast<T>(precise::atan2(float(b), float(a)));", 1))
    rc = cli.main(["emulate", "check", "--root", str(mini_root)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "atan2" in out and "mismatched" in out and "max error" in out


def test_emulate_check_a_syntax_error_leaves_no_kernel_of_its_file_built(mini_root, capsys):
    """Wrong on purpose: a `;` missing in one functor. The emulation quarantines that functor
    and matches the rest; a Mac builds no kernel of the file. Before, the summary said
    '~95% build and match CPU' and no line said the file's other kernels do not exist there."""
    from porter.source.checkout import KERNELS
    path = mini_root / KERNELS / "BinaryKernel.metal"
    text = path.read_text()
    old = "return static_cast<T>(precise::atan2(float(a), float(b)));"
    assert old in text
    path.write_text(text.replace(old, old.rstrip(";"), 1))
    rc = cli.main(["emulate", "check", "--root", str(mini_root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and not data["ok"]
    rows = [r for r in data["results"] if r["file"].endswith("BinaryKernel.metal")]
    matched = sum(r["status"] == "matched" for r in rows)
    assert matched > 0 and any(r["status"] == "build-error" for r in rows)
    assert data["summary"]["matched_in_files_that_do_not_build"] == matched
    assert data["summary"]["matched_fraction"] == (data["summary"]["matched"] - matched) / data["summary"]["registered"]
    [note] = [n for n in data["notes"] if "does not build on a Mac" in n]
    assert note.startswith(f"{KERNELS}/BinaryKernel.metal does not build on a Mac (build error: ")
    assert note.endswith(f"none of its {len(rows)} kernels runs there; its {matched} 'matched' kernels "
                         "match only apart from that error")


def _hypot_through_the_worker(b: EmulateBackend, x: float, y: float) -> list:
    """The backend's float hypot kernel (the fixture's) on one pair, run by its worker."""
    import numpy as np

    from porter.dispatch.numpy_tensors import PArray
    from porter.emulate import numpy_run

    host = b._candidates(OpNames("hypot"))[0]
    lib = b._library(host.metal)
    reg = lib.find(host.kernel, "float")[0]
    inputs = [PArray("float32", np.array([v], dtype=np.float32)) for v in (x, y)]
    return numpy_run.run_registration(b._worker(), lib, reg, inputs).data.tolist()


def test_the_kernels_worker_starts_with_the_build(fixture_root):
    """The first row waited for the worker's start-up (a Python process, libasan loaded before
    it: ~70 ms a `--watch` round) after the build: `prebuild` starts it beside g++, and the
    first call is answered by that process."""
    b = EmulateBackend(fixture_root)
    try:
        b.prebuild(["hypot"])
        started = [lane.proc for lane in b._client._lanes]
        assert all(proc is not None and proc.poll() is None for proc in started)
        assert _hypot_through_the_worker(b, 3.0, 4.0) == [5.0]
        assert [lane.proc for lane in b._client._lanes] == started
    finally:
        b.close()


def test_the_kernels_workers_start_without_the_site_module(fixture_root):
    """A worker is stdlib only, and Python's `site` start-up under the preloaded libasan was 40
    of its 70 ms of CPU, paid by every lane of every `--watch` round: each worker runs without
    it, and answers."""
    b = EmulateBackend(fixture_root)
    try:
        b.prebuild(["hypot"])
        for lane in b._client._lanes:
            # (started again where the early start failed: another test's run may have been
            # compiling the runtime library into the shared cache at that moment)
            cmdline = Path(f"/proc/{lane.start().pid}/cmdline")
            for _ in range(100):        # empty for a moment while the process execs
                argv = cmdline.read_bytes().split(b"\0")
                if len(argv) > 2:
                    break
                time.sleep(0.01)
            assert argv[1] == b"-S" and argv[2].endswith(b"worker.py"), argv
        assert _hypot_through_the_worker(b, 5.0, 12.0) == [13.0]
    finally:
        b.close()


def test_a_worker_that_cannot_start_with_the_build_is_left_to_the_first_call(monkeypatch):
    """Review 49's note: a failure to start the worker early (no runtime cache folder, no
    process to spare) raised out of `prebuild`, past every sample's handler; the first call
    starts it again and says why, as it did before."""
    from porter.emulate import client as client_module

    def unwritable():
        raise PermissionError("[Errno 13] Permission denied: '/cache'")

    monkeypatch.setattr(client_module.toolchain, "worker_runtime", unwritable)
    worker = client_module.WorkerClient()
    try:
        worker.start()
        assert all(lane.proc is None for lane in worker._lanes)
        with pytest.raises(PermissionError):
            worker._start()
    finally:
        worker.close()
