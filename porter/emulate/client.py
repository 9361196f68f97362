"""Parent side of the kernel workers: long-lived children per session (`_Lane`: one, or two
where porter has two cores), each restarted after a crash. The calls made one at a time go to
the first; a row's calls answered ahead go in chunks to whichever is idle, and are read back
in the order sent.

A request's input and output bytes go through memory each worker shares with porter
(`_Shared`), the pipe carries the rest: a cached full verdict sends ~170 MB through the
kernels (a binary op's reference inputs are tensors of a million elements), and pickling them
through the pipe cost ~50 ms of CPU per such call, the kernel ~2.
"""

from __future__ import annotations

import contextlib
import mmap
import pickle
import signal
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from porter.emulate import toolchain
from porter.errors import PorterError

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
            if signum == signal.SIGFPE:
                # x86 traps on an integer division by zero (or the least integer by -1); a
                # GPU does not, and Metal leaves the answer undefined (review 31's N05: a
                # quotient computed and never used crashed here, where a Mac passes)
                text += (": the kernel divided an integer by zero or the least integer by -1, "
                         "which a GPU does not trap on and whose answer Metal leaves undefined: "
                         "not proven")
        else:
            text = f"kernel worker exited with status {returncode}"
        super().__init__(text)


class KernelTimedOut(KernelCrashed):
    """The kernel ran past the watchdog. What a Mac does is not known: a loop that never ends
    and has no side effect is undefined in C++ and Metal (forward progress: clang may delete
    it, and the kernel answers), and one that runs on is aborted by the GPU's watchdog with an
    error (review 38's U26): not proven, never green, and the run does not hang."""

    def __init__(self, seconds: float, again: bool = False):
        RuntimeError.__init__(self, (
            f"kernel ran past {seconds:g} s of CPU time and was stopped"
            + (" (it did so before: not run again)" if again else "")
            + "; a loop that never ends is undefined in Metal when it has no side effect, and a "
              "Mac's GPU watchdog aborts one that has: whose answer Metal leaves undefined: "
              "not proven (PORTER_KERNEL_TIMEOUT sets the limit)"))
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

    One thread per worker process, armed for each call and disarmed after it: a cached
    verdict makes about a thousand calls of a millisecond each, and a thread started per call
    cost more than the kernels (960 thread starts, 5 s under load). Each arming has its own
    number, so a kill decided for one call is never charged to the next."""

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

    def laid_out(self, requests: list[dict]) -> list[dict]:
        """`requests` as the worker is sent them: each one's "inputs" (bytes-like) copied into
        this memory and its output given a region there (the worker zeroes it, as a fresh
        buffer was), every region at a multiple of ALIGN."""
        regions, at, views = [], 0, []
        for request in requests:
            inputs = [_bytes_of(b) for b in request["inputs"]]
            mine = []
            for view in inputs + [None]:
                n = request["out_nbytes"] if view is None else view.nbytes
                mine.append([at, n])
                at += -(-max(n, 1) // ALIGN) * ALIGN
            regions.append(mine)
            views.append(inputs)
        shared = self.hold(at)
        sent = []
        for request, inputs, mine in zip(requests, views, regions):
            for view, (offset, n) in zip(inputs, mine):
                shared[offset:offset + n] = view
            one = {k: v for k, v in request.items() if k != "inputs"}
            one.update(shared=self.size, inputs_at=mine[:-1], out_at=mine[-1])
            sent.append(one)
        return sent

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        if self._file is not None:
            self._file.close()
        else:
            os.close(self.fd)


BATCH_BYTES = 64 << 20   # a batch's inputs and outputs together, in the shared memory
BATCH_CALLS = 512
AHEAD_BYTES = 256 << 20  # a row's calls answered ahead at most: the answers wait in memory
PIPELINE_CHUNKS = 4      # a batch's chunks (answer_ahead): one runs while one is compared
PIPELINE_MIN_CALLS = 8   # a chunk's calls at least: each chunk is a round trip


def _chunks(batch: list) -> list[tuple[list, set]]:
    """`batch` in PIPELINE_CHUNKS chunks of PIPELINE_MIN_CALLS calls or more, in order, each
    with the ids of its samples."""
    size = max(PIPELINE_MIN_CALLS, -(-len(batch) // PIPELINE_CHUNKS))
    return [(batch[i:i + size], {id(sample) for sample, _ in batch[i:i + size]})
            for i in range(0, len(batch), size)]


class _Recording(Exception):
    """A call the recording cannot stand in for (no inputs to lay out): the dry run stops."""


def _shape_of(request: dict) -> tuple:
    """A call as the dry run and the sample's own run must both make it: the library, the
    entry, the shapes and the sizes in (the bytes in follow from the sample, as the code
    path is the same)."""
    return (request["lib"], request["index"], tuple(request.get("entry") or ()),
            request["out_nbytes"], request["numel"], request.get("alpha"),
            repr(request.get("sizes")), repr(request.get("strides")),
            tuple(_bytes_of(b).nbytes for b in request["inputs"]))


_TIMED_OUT: set = set()
# what starting a worker (or growing its shared memory) can raise: no process or descriptor to
# spare, an unwritable cache folder, no runtime library built; the call that needs it says why
_CANNOT_START = (OSError, ValueError, PorterError, subprocess.SubprocessError)


def lane_count() -> int:
    """Worker processes a row's chunks are spread over: two where porter has two cores, so that
    one runs a chunk while the other runs the next and porter compares the one before (on the
    2-core bench box the single worker was busy 0.6 s of a `--watch` round's 0.78 s of rows,
    waited on for 0.38 s of them); one where it has one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


class _Lane:
    """One worker process, the memory it shares with porter, and the watchdog over its calls."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.shared: _Shared | None = None
        self.watchdog: _Watchdog | None = None
        self.libraries: set[str] = set()     # the kernel libraries its process has been sent
        self.unread = 0                      # messages sent whose answer is not read yet

    def start(self) -> subprocess.Popen:
        """The worker process, started where it is not running (a crash ended the last)."""
        if self.proc is None or self.proc.poll() is not None:
            if self.shared is None:
                self.shared = _Shared()
            self.proc = toolchain.start_worker(WORKER, self.shared.fd)
            self.libraries, self.unread = set(), 0
        return self.proc

    def reusable(self) -> bool:
        """Whether another client may take this lane as it is (kept_lanes): its process runs,
        every answer it was asked for has been read (an unread one would answer the next
        client's first call), and it holds no more than KEPT_LIBRARIES libraries (each stays
        loaded in it)."""
        return (self.proc is not None and self.proc.poll() is None and self.unread == 0
                and len(self.libraries) <= KEPT_LIBRARIES)

    def send(self, proc: subprocess.Popen, message: dict, limit: float) -> int:
        """Send `message` with the watchdog armed for it; the watchdog's call, for `receive`
        (a worker already gone is found there)."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.libraries.update(one["lib"] for one in message.get("batch", [message])
                              if "lib" in one)
        self.unread += 1
        if self.watchdog is None:
            self.watchdog = _Watchdog()
            self.watchdog.start()
        call = self.watchdog.arm(proc, limit)
        try:
            proc.stdin.write(len(data).to_bytes(8, "little") + data)
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass                    # no answer will come: `receive` says the worker died
        return call

    def receive(self, proc: subprocess.Popen, call: int) -> tuple[dict | None, bool]:
        """The worker's answer to what was sent as `call`, or None where the worker died
        (reaped, so that the next call starts another); and whether the watchdog stopped it."""
        try:
            header = proc.stdout.read(8)
            if len(header) < 8:
                raise EOFError
            size = int.from_bytes(header, "little")
            data = proc.stdout.read(size)
            if len(data) < size:
                raise EOFError          # stopped while it wrote its answer
            if proc is self.proc:
                self.unread -= 1
            return pickle.loads(data), False
        except (EOFError, BrokenPipeError, OSError):
            fired = self.watchdog.disarm(call)
            proc.wait()
            if self.proc is proc:
                self.proc = None
            return None, fired
        finally:
            self.watchdog.disarm(call)

    def close(self) -> None:
        if self.watchdog is not None:
            self.watchdog.close()
            self.watchdog = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()         # reaped: a killed worker left no zombie behind
        self.proc = None
        if self.shared is not None:
            self.shared.close()
            self.shared = None


# A lane's process is not kept for another client past this many kernel libraries: each one
# it loaded stays mapped in it (a `--watch` round builds one or two)
KEPT_LIBRARIES = 24
_KEPT: list[_Lane] | None = None      # the lanes closed clients left, while kept_lanes runs


@contextlib.contextmanager
def kept_lanes():
    """While it runs, a closed client's lanes (their worker processes and shared memory) wait
    for the next client of this process instead of ending: `porter test --watch` makes a
    backend, and so a client, every round. A round started a worker per lane (30 ms of CPU
    each) and faulted their shared memory in again; kept, a heaviside round's workers took
    0.14 s less CPU (docs/measurements.md). The lanes still kept end with it."""
    global _KEPT
    if _KEPT is not None:            # already keeping: the outer one ends them
        yield
        return
    _KEPT = []
    try:
        yield
    finally:
        kept, _KEPT = _KEPT, None
        for lane in kept:
            lane.close()


class WorkerClient:
    def __init__(self):
        self.undefined: list | None = None
        # lane 0 answers the calls made one at a time; a row's chunks go to any idle lane
        count = lane_count()
        kept = [_KEPT.pop(0) for _ in range(min(count, len(_KEPT)))] if _KEPT else []
        self._lanes = kept + [_Lane() for _ in range(count - len(kept))]
        self._recorded: list | None = None          # recording: (sample, call) asked for
        # id(sample) -> (sample, [(the call's shape, output, undefined)]), in call order
        self._answered: dict[int, tuple] = {}
        # answer_ahead's chunks not sent yet, and those the lanes run now in the order they
        # were sent (lane, its process then, chunk, the ids of its samples, the watchdog's
        # call), which is the order they are read in: a sample's calls may lie in two chunks;
        # the samples a refused call ended
        self._queue: list[tuple[list, set]] = []
        self._in_flight: list[tuple] = []
        self._ended: set[int] = set()
        self.sample = None        # the sample whose calls are made now (emulator_device)
        self._fired = False       # the last exchange's worker was stopped by the watchdog
        # (library, index) of the kernels the watchdog stopped, kept for the process: every
        # row (upstream's samples, the reference inputs, the shapes) has a client of its own,
        # and a library's name is its content's (a rebuilt kernel is a new name)
        self._timed_out = _TIMED_OUT

    def start(self) -> None:
        """Start the worker processes now, where the first calls would start them: their
        start-up then runs beside what comes before those calls. One that cannot start is
        left to its first call, which starts it again and says why."""
        for lane in self._lanes:
            try:
                lane.start()
            except _CANNOT_START:
                lane.proc = None

    def _start(self) -> subprocess.Popen:
        """Lane 0's worker, started where it is not running: the calls made one at a time."""
        return self._lanes[0].start()

    def call(self, request: dict) -> bytes | bytearray:
        """The call's output bytes; `undefined` is then the worker's other reading ([bits,
        bytes, the fast:: function porter does not model that ran]: porter/emulate/worker.py)
        or None where the kernel reached no undefined answer."""
        self.undefined = None
        if self._recorded is not None:
            if "inputs" not in request or "out_nbytes" not in request or self.sample is None:
                raise _Recording("a call with nothing to lay out")
            self._recorded.append((self.sample, request))
            return bytearray(request["out_nbytes"])
        if self.sample is not None:
            while self._awaits(id(self.sample)):
                self._advance()
        held = self._answered.get(id(self.sample)) if self.sample is not None else None
        if held is not None and held[0] is self.sample and held[1]:
            shape, out, undefined = held[1].pop(0)
            if "inputs" in request and "out_nbytes" in request and shape == _shape_of(request):
                self.undefined = undefined
                return out
            held[1].clear()           # another path than the dry run's: run as always
        kernel = (request["lib"], request.get("index")) if "lib" in request else None
        limit = timeout_seconds()
        if kernel is not None and kernel in self._timed_out:
            # a kernel that ran past the limit once is not run again this session: each of
            # its samples would cost the whole limit (6 dtypes x 9 samples x 60 s)
            raise KernelTimedOut(limit, again=True)
        self._settle()              # lane 0's shared memory is free, every chunk's answers kept
        proc = self._start()
        if "inputs" in request and "out_nbytes" in request:
            request = self._lanes[0].shared.laid_out([request])[0]
        resp = self._exchange(proc, request, limit)
        if resp is None:
            rc = proc.returncode
            if self._fired:
                if kernel is not None:
                    self._timed_out.add(kernel)
                raise KernelTimedOut(limit) from None
            raise KernelCrashed(-rc if rc < 0 else None, rc) from None
        if "error" in resp:
            raise KernelError(resp["error"])
        self.undefined = resp.get("undefined")
        if "out_at" in resp:
            offset, n = resp["out_at"]
            with memoryview(self._lanes[0].shared.map) as shared:
                return bytearray(shared[offset:offset + n])
        return resp["out"]

    def _exchange(self, proc: subprocess.Popen, message: dict, limit: float) -> dict | None:
        """Lane 0's answer to `message`, watched for `limit` seconds of its CPU time; None
        where the worker died (a kernel's crash, or the watchdog: `_fired` says which), reaped,
        so that the next call starts another."""
        lane = self._lanes[0]
        resp, self._fired = lane.receive(proc, lane.send(proc, message, limit))
        return resp

    def record(self, dry_run) -> list[dict]:
        """The calls `dry_run()` makes, each answered with zeros instead of run: what a row of
        samples will ask (porter.emulate.emulator_device.prefetch runs the row's code path
        once this way). An exception of the dry run ends it; what it asked so far is kept."""
        self._recorded = []
        try:
            dry_run()
        except Exception:
            pass
        finally:
            recorded, self._recorded = self._recorded, None
        return recorded

    def answer_ahead(self, recorded: list, append: bool = False) -> None:
        """Run the calls `record` gathered, (sample, call) each, in as few round trips to the
        worker as their size allows, and keep the answers: the same sample's calls made
        afterwards, in the same order and of the same shape, take them (a row of a hundred
        reference inputs made a hundred round trips, about 0.6 ms each, most of an edit's
        verdict). Where a batch fails (a kernel crashed or ran past the watchdog, or the
        worker refused a call), its calls and those after it are left to be made one at a
        time, which say which sample it was.

        Each batch goes in chunks (`_chunks`), one to each idle worker (`lane_count`): the
        first now, each next one when a sample first asks for an answer of a chunk in flight,
        whose oldest is then read. The workers run chunks while the verdict compares the
        answers of the one before them.

        `append`: the calls of the row after the one being compared (porter.harness.
        cached_run), queued behind its chunks, so that the worker runs on from one row into
        the next while the verdict compares; nothing in flight is read first."""
        if append:
            self._forget_answered()
        else:
            self._settle()
            self._answered, self._queue, self._ended = {}, [], set()
        batch, size, total = [], 0, 0
        for sample, request in recorded:
            need = sum(_bytes_of(b).nbytes for b in request["inputs"]) + request["out_nbytes"]
            total += need
            if total > AHEAD_BYTES:
                break                     # the rest run one at a time
            if batch and (size + need > BATCH_BYTES or len(batch) >= BATCH_CALLS):
                self._queue += _chunks(batch)
                batch, size = [], 0
            batch.append((sample, request))
            size += need
        if batch:
            self._queue += _chunks(batch)
        self._fill()

    def _forget_answered(self) -> None:
        """Drop the samples whose answers were all taken and that no chunk still answers: the
        rows before keep no memory (a row's inputs are tens of megabytes)."""
        for key in [k for k, (_, answers) in self._answered.items()
                    if not answers and not self._awaits(k)]:
            del self._answered[key]
            self._ended.discard(key)

    def _awaits(self, key: int) -> bool:
        """Whether an answer for the sample whose id is `key` is still to come from a chunk."""
        return any(key in keys for _, _, _, keys, _ in self._in_flight) or \
            any(key in keys for _, keys in self._queue)

    def _advance(self) -> None:
        """Read the oldest chunk in flight, if any, and send the next chunks to the idle lanes."""
        if self._in_flight:
            self._read_oldest()
        self._fill()

    def _fill(self) -> None:
        """Send the next chunks to the lanes that run none, in order. A chunk that cannot be
        sent (no worker process or shared memory to be had) ends the queue as a failed chunk
        does: its calls and every later one's are made one at a time, and say why."""
        busy = {id(lane) for lane, *_ in self._in_flight}
        for lane in self._lanes:
            if not self._queue:
                return
            if id(lane) not in busy:
                try:
                    self._send_chunk(lane, *self._queue[0])
                except _CANNOT_START:
                    self._queue = []
                    return
                self._queue.pop(0)

    def _settle(self) -> None:
        """Read every chunk in flight, in the order sent, and keep their answers."""
        while self._in_flight:
            self._read_oldest()

    def _read_oldest(self) -> None:
        """Read the oldest chunk in flight and keep its answers. A chunk that fails leaves its
        calls and every later chunk's to be made one at a time: the later chunks in flight are
        read and their answers dropped (a sample's calls may lie in the failed one too)."""
        lane, proc, batch, _, call = self._in_flight.pop(0)
        if not self._read_chunk(lane, proc, batch, call):
            self._queue = []
            while self._in_flight:
                lane, proc, batch, _, call = self._in_flight.pop(0)
                self._read_chunk(lane, proc, batch, call, keep=False)

    def _send_chunk(self, lane: _Lane, batch: list, keys: set) -> None:
        """Lay `batch`'s inputs out in `lane`'s shared memory and send it (`_in_flight`)."""
        proc = lane.start()
        sent = lane.shared.laid_out([request for _, request in batch])
        # one call's limit for the whole batch: a batch stopped is run again call by call,
        # each with its own limit
        self._in_flight.append((lane, proc, batch, keys,
                                lane.send(proc, {"batch": sent}, timeout_seconds())))

    def _read_chunk(self, lane: _Lane, proc: subprocess.Popen, batch: list, call: int,
                    keep: bool = True) -> bool:
        """Whether the chunk `lane`'s process `proc` was sent as `call` ran; each answer is
        kept in its sample's queue, and a call the worker refused ends its sample's queue there
        (in every later chunk too). Where not `keep` (a chunk before it failed, and its calls
        are made one at a time), nothing is kept and nothing is concluded of its kernels."""
        resp, self._fired = lane.receive(proc, call)
        if resp is None:
            kernels = {(r["lib"], r.get("index")) for _, r in batch if "lib" in r}
            if keep and self._fired and len(kernels) == 1 and all("lib" in r for _, r in batch):
                # one kernel's calls ran past the limit together (review 38's U26: an endless
                # loop). Each alone would cost the limit again before the kernel is known to
                # run on: answered at once as stopped (call). A slow kernel the batch's sum
                # put past it is not proven rather than green; PORTER_KERNEL_TIMEOUT raises it
                self._timed_out |= kernels
            return False
        if not keep:
            return True
        ended = self._ended
        with memoryview(lane.shared.map) as shared:
            for (sample, request), answer in zip(batch, resp.get("batch", [])):
                key = id(sample)
                held = self._answered.setdefault(key, (sample, []))
                if key in ended:
                    continue
                if "out_at" not in answer:
                    ended.add(key)        # the call itself says it, and runs what follows
                    continue
                offset, n = answer["out_at"]
                held[1].append((_shape_of(request), bytearray(shared[offset:offset + n]),
                                answer.get("undefined")))
        return True

    def close(self) -> None:
        self._queue = []
        try:
            self._settle()          # a worker blocked writing its answer would not exit
        except Exception:           # noqa: BLE001 (closing: the workers are stopped below anyway)
            self._in_flight = []
        lanes, self._lanes = self._lanes, []
        for lane in lanes:
            if _KEPT is not None and lane.reusable():
                _KEPT.append(lane)
            else:
                lane.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
