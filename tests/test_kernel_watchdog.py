"""A kernel that never returns (an endless loop in a functor) fails its sample after the
watchdog, as a Mac's GPU aborts the command buffer, instead of hanging `porter test`."""

from __future__ import annotations

import time

import pytest

from porter.emulate import client


def test_a_kernel_that_never_returns_fails_after_the_watchdog(tmp_path, monkeypatch):
    hang = tmp_path / "worker.py"
    hang.write_text("import time\ntime.sleep(120)\n")
    monkeypatch.setattr(client, "WORKER", hang)
    monkeypatch.setenv("PORTER_KERNEL_TIMEOUT", "1")
    worker = client.WorkerClient()
    start = time.monotonic()
    with pytest.raises(client.KernelCrashed, match="ran past 1 s"):
        worker.call({"op": "anything"})
    assert time.monotonic() - start < 30
    worker.close()
