"""A kernel that never returns (an endless loop in a functor) fails its sample after the
watchdog, as a Mac's GPU aborts the command buffer, instead of hanging `porter test`."""

from __future__ import annotations

import time

import pytest

from porter.emulate import client


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_limit_is_cpu_time_so_a_loaded_machine_does_not_fail_a_kernel(tmp_path, monkeypatch):
    """Wrong on purpose for a wall-clock watchdog: this worker takes 3 s of wall time but
    almost no CPU (as a kernel does when the machine's other processes hold the cores): a
    limit of 1 s must not stop it. A busy loop past 1 s of CPU is stopped."""
    slow = tmp_path / "slow_worker.py"
    slow.write_text(
        "import pickle, sys, time\n"
        "n = int.from_bytes(sys.stdin.buffer.read(8), 'little'); sys.stdin.buffer.read(n)\n"
        "time.sleep(3)\n"
        "out = pickle.dumps({'out': b'done'})\n"
        "sys.stdout.buffer.write(len(out).to_bytes(8, 'little') + out); sys.stdout.buffer.flush()\n")
    monkeypatch.setattr(client, "WORKER", slow)
    monkeypatch.setenv("PORTER_KERNEL_TIMEOUT", "1")
    worker = client.WorkerClient()
    assert worker.call({"op": "anything"}) == b"done"
    worker.close()

    busy = tmp_path / "busy_worker.py"
    busy.write_text("while True:\n    pass\n")
    monkeypatch.setattr(client, "WORKER", busy)
    worker = client.WorkerClient()
    start = time.monotonic()
    with pytest.raises(client.KernelTimedOut, match="ran past 1 s of CPU time"):
        worker.call({"op": "anything"})
    assert time.monotonic() - start < 30
    worker.close()


ECHO = ("import pickle, sys, time\n"
        "while True:\n"
        "    head = sys.stdin.buffer.read(8)\n"
        "    if len(head) < 8: break\n"
        "    req = pickle.loads(sys.stdin.buffer.read(int.from_bytes(head, 'little')))\n"
        "    while req.get('spin'): pass\n"
        "    out = pickle.dumps({'out': req['n']})\n"
        "    sys.stdout.buffer.write(len(out).to_bytes(8, 'little') + out); sys.stdout.buffer.flush()\n")


def test_one_watchdog_serves_every_call_and_a_kill_is_charged_to_its_own_call(tmp_path, monkeypatch):
    """A thread per call cost more than the kernels of a cached verdict: one client keeps one
    watchdog over a thousand calls; the call it stops raises KernelTimedOut, and the calls
    after it (on a restarted worker) are neither stopped nor reported as timed out."""
    echo = tmp_path / "echo_worker.py"
    echo.write_text(ECHO)
    monkeypatch.setattr(client, "WORKER", echo)
    monkeypatch.setenv("PORTER_KERNEL_TIMEOUT", "1")
    started = []
    start_thread = client._Watchdog.start
    monkeypatch.setattr(client._Watchdog, "start",
                        lambda self: (started.append(self), start_thread(self))[1])
    worker = client.WorkerClient()
    try:
        answers = [worker.call({"n": n}) for n in range(1000)]
        assert answers == list(range(1000))
        assert len(started) == 1
        dog = started[0]
        start = time.monotonic()
        with pytest.raises(client.KernelTimedOut, match="ran past 1 s of CPU time"):
            worker.call({"n": -1, "spin": True})
        assert time.monotonic() - start < 30
        # the next calls run on a fresh worker under the same watchdog, each for its own time
        assert [worker.call({"n": n}) for n in range(3)] == [0, 1, 2]
        assert started == [dog] and dog.is_alive()
    finally:
        worker.close()
    dog.join(timeout=5)          # closing the client ends its watchdog
    assert not dog.is_alive()


def test_a_kernel_stopped_once_is_not_run_again_and_is_not_proven(tmp_path, monkeypatch):
    """Review 38's U26: a functor whose loop never ends for one dtype cost the whole limit on
    every sample (no verdict after 240 s); and whether a Mac answers (clang may delete a loop
    without side effects) or aborts is not known: not proven, never green."""
    echo = tmp_path / "echo_worker.py"
    echo.write_text(ECHO)
    monkeypatch.setattr(client, "WORKER", echo)
    monkeypatch.setenv("PORTER_KERNEL_TIMEOUT", "1")
    worker = client.WorkerClient()
    try:
        with pytest.raises(client.KernelTimedOut, match="Metal leaves undefined: not proven"):
            worker.call({"lib": "k.so", "index": 3, "n": -1, "spin": True})
        start = time.monotonic()
        with pytest.raises(client.KernelTimedOut, match="did so before: not run again"):
            worker.call({"lib": "k.so", "index": 3, "n": 1})
        assert time.monotonic() - start < 0.5
        assert worker.call({"lib": "k.so", "index": 4, "n": 2}) == 2
    finally:
        worker.close()
    from porter.harness.run_report import is_not_proven
    assert is_not_proven(f"emulate error: KernelTimedOut: {client.KernelTimedOut(60)}")


BATCHES = ("import os, pickle, signal, sys\n"
           "while True:\n"
           "    head = sys.stdin.buffer.read(8)\n"
           "    if len(head) < 8: break\n"
           "    req = pickle.loads(sys.stdin.buffer.read(int.from_bytes(head, 'little')))\n"
           "    if any(r.get('crash') for r in req['batch']): os.kill(os.getpid(), signal.SIGSEGV)\n"
           "    while any(r.get('spin') for r in req['batch']): pass\n"
           "    out = pickle.dumps({'batch': [{'out_at': r['out_at']} for r in req['batch']]})\n"
           "    sys.stdout.buffer.write(len(out).to_bytes(8, 'little') + out); sys.stdout.buffer.flush()\n")


def test_a_chunk_dropped_after_a_failed_one_says_nothing_of_its_kernel(tmp_path, monkeypatch):
    """Review of the two kernel workers: after a chunk fails, the chunk in flight on the other
    worker is read and dropped (its calls are made one at a time, as the old single worker made
    them); the watchdog stopping it there must not mark its kernel as stopped for the process,
    which made every later call of it "not proven" where each call alone answers."""
    worker_py = tmp_path / "batch_worker.py"
    worker_py.write_text(BATCHES)
    monkeypatch.setattr(client, "WORKER", worker_py)
    monkeypatch.setattr(client, "lane_count", lambda: 2)
    monkeypatch.setenv("PORTER_KERNEL_TIMEOUT", "1")
    worker = client.WorkerClient()

    def call(lib, **flags):
        return {"lib": lib, "index": 1, "inputs": [b"\0" * 4], "out_nbytes": 4, "numel": 1,
                **flags}

    # two chunks of eight calls: the first crashes its worker, the second (one kernel) spins
    # in the other worker until the watchdog stops it
    recorded = ([(object(), call("crashes.so", crash=True)) for _ in range(8)] +
                [(object(), call("slow-together.so", spin=True)) for _ in range(8)])
    try:
        worker.answer_ahead(recorded)
        assert len(worker._in_flight) == 2
        worker._settle()
        assert ("slow-together.so", 1) not in worker._timed_out
        assert not worker._queue and not worker._in_flight
    finally:
        worker.close()
