"""Parent side of the kernel worker: one long-lived child per session, restarted after a crash."""

from __future__ import annotations

import pickle
import signal
import os
import subprocess
import sys
import threading
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
        RuntimeError.__init__(self, f"kernel ran past {seconds:g} s and was stopped (a Mac's GPU "
                                    f"watchdog aborts it; PORTER_KERNEL_TIMEOUT sets the limit)")
        self.signum = None


class KernelError(RuntimeError):
    pass


def timeout_seconds() -> float:
    try:
        return float(os.environ.get("PORTER_KERNEL_TIMEOUT", "60"))
    except ValueError:
        return 60.0


class WorkerClient:
    def __init__(self):
        self._proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        return self._proc

    def call(self, request: dict) -> bytes:
        proc = self._start()
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        limit = timeout_seconds()
        fired = threading.Event()

        def expire():
            fired.set()
            proc.kill()
        watchdog = threading.Timer(limit, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            proc.stdin.write(len(data).to_bytes(8, "little") + data)
            proc.stdin.flush()
            header = proc.stdout.read(8)
            if len(header) < 8:
                raise EOFError
            resp = pickle.loads(proc.stdout.read(int.from_bytes(header, "little")))
        except (EOFError, BrokenPipeError, OSError):
            rc = proc.wait()
            self._proc = None
            if fired.is_set():
                raise KernelTimedOut(limit) from None
            raise KernelCrashed(-rc if rc < 0 else None, rc) from None
        finally:
            watchdog.cancel()
        if "error" in resp:
            raise KernelError(resp["error"])
        return resp["out"]

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._proc = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
