"""Parent side of the kernel worker: one long-lived child per session, restarted after a crash."""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
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


class KernelError(RuntimeError):
    pass


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
            raise KernelCrashed(-rc if rc < 0 else None, rc) from None
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
