"""A kernel library's registrations, read in a process that can load it.

A library built with AddressSanitizer (porter.emulate.toolchain.ADDRESS_CHECK) loads only in a
process where libasan came first, which porter's own process is not: its entries are read by a
worker (porter/emulate/worker.py's "registrations" request) started with libasan preloaded,
one per porter process, kept for its later builds.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import threading
from pathlib import Path

from porter.emulate import toolchain
from porter.errors import PorterError

_WORKER = Path(__file__).with_name("worker.py")
_lock = threading.Lock()
_proc: subprocess.Popen | None = None
_owner = 0          # the process that started it: a forked child starts its own (shared pipes)


def _started() -> subprocess.Popen:
    global _proc, _owner
    if _proc is None or _owner != os.getpid() or _proc.poll() is not None:
        _owner = os.getpid()
        _proc = toolchain.start_worker(_WORKER)
        atexit.register(_stop, _proc)
    return _proc


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def entries(so_path: Path) -> list[list]:
    """[name, kind, in type, out type, alpha, int, int, int] of each entry, in library order."""
    with _lock:
        proc = _started()
        data = pickle.dumps({"registrations": str(so_path)}, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            proc.stdin.write(len(data).to_bytes(8, "little") + data)
            proc.stdin.flush()
            header = proc.stdout.read(8)
            resp = pickle.loads(proc.stdout.read(int.from_bytes(header, "little"))) \
                if len(header) == 8 else None
        except (OSError, EOFError, pickle.UnpicklingError):
            resp = None
    if resp is None or "registrations" not in resp:
        why = resp.get("error") if resp else f"the reader stopped ({proc.poll()})"
        raise PorterError(f"{so_path}: cannot read the kernel library's registrations ({why})",
                          hint="run `porter cache clear` and try again")
    return resp["registrations"]
