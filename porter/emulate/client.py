"""Parent side of the kernel worker: one long-lived child per session, restarted after a crash.

A request's input and output bytes go through memory the two processes share (`_Shared`), the
pipe carries the rest: a cached full verdict sends ~170 MB through the kernels (a binary op's
reference inputs are tensors of a million elements), and pickling them through the pipe cost
~50 ms of CPU per such call, the kernel ~2.
"""

from __future__ import annotations

import mmap
import pickle
import signal
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")


class KernelCrashed(RuntimeError):
    """The kernel killed its worker process (SIGFPE on integer division by zero, SIGSEGV...)."""

    def __init__(self, signum: int | None, returncode: int | None):
        self.signum = signum
        if signum is not None:
            try:
                name = signal.Signals(signum).name
            except ValueError:
                name = "?"
            text = f"kernel crashed (signal {signum}, {name})"
        else:
            text = f"kernel worker exited with status {returncode}"
        super().__init__(text)


class KernelTimedOut(KernelCrashed):
    """The kernel ran past the watchdog: a Mac's GPU aborts such a command buffer with an
    error, so the sample fails rather than the run hanging."""

    def __init__(self, seconds: float):
        RuntimeError.__init__(self, f"kernel ran past {seconds:g} s of CPU time and was stopped (a "
                                    f"Mac's GPU watchdog aborts it; PORTER_KERNEL_TIMEOUT sets the "
                                    f"limit)")
        self.signum = None


class KernelError(RuntimeError):
    pass


def _cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of a process (Linux /proc), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


WALL_FACTOR = 10   # a worker that is not running (blocked, stopped) still ends: 10x the limit, wall


class _Watchdog(threading.Thread):
    """Kills the worker once a call has used `limit` seconds of its CPU time: the budget a
    Mac's watchdog gives a command buffer is GPU time, which the worker's CPU time stands for;
    wall time would fail a slow-but-legal kernel whenever the machine is loaded (a 2-core CI
    runner at load 12 stopped legendre_polynomial_p's large-n samples at 60 s wall). Where CPU
    time cannot be read, wall time is the measure.

    One thread per client, armed for each call and disarmed after it: a cached verdict makes
    about a thousand calls of a millisecond each, and a thread started per call cost more than
    the kernels (960 thread starts, 5 s under load). Each arming has its own number, so a kill
    decided for one call is never charged to the next."""

    TICK = 0.2

    def __init__(self):
        super().__init__(daemon=True, name="porter-kernel-watchdog")
        self._cond = threading.Condition()
        self._armed: tuple | None = None     # (call number, proc, limit, start cpu, start wall)
        self._calls = 0
        self._fired: int | None = None       # the call number it killed the worker for
        self._closed = self._idle = False

    def arm(self, proc: subprocess.Popen, limit: float) -> int:
        start_cpu = _cpu_seconds(proc.pid)
        with self._cond:
            self._calls += 1
            self._armed = (self._calls, proc, limit, start_cpu, time.monotonic())
            if self._idle:               # a ticking watchdog sees the new call at its next tick
                self._cond.notify()
            return self._calls

    def disarm(self, call: int) -> bool:
        """Stop watching `call`; whether the watchdog killed the worker for it."""
        with self._cond:
            if self._armed is not None and self._armed[0] == call:
                self._armed = None
            return self._fired == call

    def close(self) -> None:
        with self._cond:
            self._closed, self._armed = True, None
            self._cond.notify()

    def run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._armed is None:
                    self._idle = True
                    self._cond.wait()
                    self._idle = False
                    continue
                self._cond.wait(self.TICK)
                if self._armed is None:
                    continue
                # whichever call is armed now, measured from its own start
                call, proc, limit, start_cpu, start = self._armed
                # read under the lock: a disarm waits for it, so no later call is killed
                now_cpu = _cpu_seconds(proc.pid) if start_cpu is not None else None
                used = (now_cpu - start_cpu) if now_cpu is not None else None
                wall = time.monotonic() - start
                if (used is not None and used > limit) or (
                        wall > limit * (WALL_FACTOR if used is not None else 1)):
                    self._fired, self._armed = call, None
                    proc.kill()


def timeout_seconds() -> float:
    try:
        return float(os.environ.get("PORTER_KERNEL_TIMEOUT", "60"))
    except ValueError:
        return 60.0


ALIGN = 64          # each region of the shared memory starts at a multiple of it


def _bytes_of(value) -> memoryview:
    """A flat byte view of bytes, a bytearray or a C-contiguous array (no copy)."""
    view = memoryview(value)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


class _Shared:
    """Memory the worker maps too (passed as an inherited file descriptor): an anonymous memfd
    where the system has one, else an unlinked temporary file. It only grows; the worker maps
    it again when a request names a larger size."""

    def __init__(self):
        if hasattr(os, "memfd_create"):
            self.fd, self._file = os.memfd_create("porter-kernel-io"), None
        else:
            self._file = tempfile.TemporaryFile(prefix="porter-kernel-io-")
            self.fd = self._file.fileno()
        self.size, self.map = 0, None

    def hold(self, size: int) -> mmap.mmap:
        if size > self.size:
            size = max(size, 2 * self.size, 1 << 20)
            size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
            os.ftruncate(self.fd, size)
            if self.map is not None:
                self.map.close()
            self.map, self.size = mmap.mmap(self.fd, size), size
        return self.map

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        if self._file is not None:
            self._file.close()
        else:
            os.close(self.fd)


class WorkerClient:
    def __init__(self):
        self.undefined: list | None = None
        self._proc: subprocess.Popen | None = None
        self._watchdog: _Watchdog | None = None
        self._shared: _Shared | None = None

    def _start(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            if self._shared is None:
                self._shared = _Shared()
            fd = self._shared.fd
            self._proc = subprocess.Popen([sys.executable, str(WORKER), str(fd)], pass_fds=(fd,),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL)
        return self._proc

    def _through_shared(self, request: dict) -> dict:
        """The request with its "inputs" (bytes-like) copied into the shared memory and the
        output given a zeroed region there (the worker zeroes it, as a fresh buffer was)."""
        inputs = [_bytes_of(b) for b in request["inputs"]]
        regions, at = [], 0
        for view in inputs + [None]:
            n = request["out_nbytes"] if view is None else view.nbytes
            regions.append([at, n])
            at += -(-max(n, 1) // ALIGN) * ALIGN
        shared = self._shared.hold(at)
        for view, (offset, n) in zip(inputs, regions):
            shared[offset:offset + n] = view
        sent = {k: v for k, v in request.items() if k != "inputs"}
        sent.update(shared=self._shared.size, inputs_at=regions[:-1], out_at=regions[-1])
        return sent

    def call(self, request: dict) -> bytes | bytearray:
        """The call's output bytes; `undefined` is then the worker's other reading ([bits,
        bytes]: porter/emulate/worker.py) or None where the kernel reached no undefined answer."""
        self.undefined = None
        proc = self._start()
        if "inputs" in request and "out_nbytes" in request:
            request = self._through_shared(request)
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        limit = timeout_seconds()
        if self._watchdog is None:
            self._watchdog = _Watchdog()
            self._watchdog.start()
        call = self._watchdog.arm(proc, limit)
        try:
            proc.stdin.write(len(data).to_bytes(8, "little") + data)
            proc.stdin.flush()
            header = proc.stdout.read(8)
            if len(header) < 8:
                raise EOFError
            resp = pickle.loads(proc.stdout.read(int.from_bytes(header, "little")))
        except (EOFError, BrokenPipeError, OSError):
            fired = self._watchdog.disarm(call)
            rc = proc.wait()
            self._proc = None
            if fired:
                raise KernelTimedOut(limit) from None
            raise KernelCrashed(-rc if rc < 0 else None, rc) from None
        finally:
            self._watchdog.disarm(call)
        if "error" in resp:
            raise KernelError(resp["error"])
        self.undefined = resp.get("undefined")
        if "out_at" in resp:
            offset, n = resp["out_at"]
            with memoryview(self._shared.map) as shared:
                return bytearray(shared[offset:offset + n])
        return resp["out"]

    def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()         # reaped: a killed worker left no zombie behind
        self._proc = None
        if self._shared is not None:
            self._shared.close()
            self._shared = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
