"""A forked child that imports porter's heavy dependencies while the parent works.

An editing command spends ~0.07 s importing torchgen's model and PyYAML (to validate yaml
entries) and ~0.05 s importing Jinja2 (to render a functor): as much as all of its planning. On POSIX a
`WarmChild` forked at start-up does those imports on the other core, then answers the parent's
requests (one JSON line each way) until the parent closes the pipe. Anything that goes wrong
in the child (no fork, PORTER_NO_FORK=1, a crash, a broken pipe) makes `ask` raise
`ChildUnavailable`, and the caller does the work in-process instead: the result is the same,
only slower.

One child serves every `Service` a command needs. Its services warm up one after the other in
a background thread, in the order given, while its main thread answers each request as soon as
the service asked for is warm: Jinja2 is ready for the functor mid-plan while torchgen is
still importing for the validation at the end. (A child per service cost ~20 ms more CPU
and ~15 ms more wall time over 60 alternated runs: three processes fight over two cores.)

The command line forks the child first thing (`forked_early`), before it imports the command's
~40 modules: the child's imports are the longest path of an editing command, so every
millisecond it starts sooner is one the whole run ends sooner.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple

from porter.runtime.forking import fork_with_pipes


class ChildUnavailable(Exception):
    pass


class Service(NamedTuple):
    name: str
    warm_up: Callable[[], None]
    serve: Callable[[dict], Any]


class WarmChild:
    def __init__(self, *services: Service):
        self._pid = None
        self.services = frozenset(s.name for s in services)
        self._start(services)

    def _start(self, services: tuple[Service, ...]) -> None:
        forked = fork_with_pipes(2)
        if forked is None:
            return                          # the parent works alone
        pid, (to_child_r, to_child_w, to_parent_r, to_parent_w) = forked
        if pid == 0:                        # child: warm up, answer until EOF, leave
            os.close(to_child_w)
            os.close(to_parent_r)
            code = 0
            try:
                _serve_until_eof(services, to_child_r, to_parent_w)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(to_child_r)
        os.close(to_parent_w)
        self._pid = pid
        self._send = os.fdopen(to_child_w, "w", encoding="utf-8")
        self._receive = os.fdopen(to_parent_r, "r", encoding="utf-8")

    def ask(self, service: str, request: dict) -> Any:
        if self._pid is None or service not in self.services:
            raise ChildUnavailable()
        try:
            self._send.write(json.dumps({"service": service, "request": request}) + "\n")
            self._send.flush()
            line = self._receive.readline()
        except (OSError, ValueError):
            line = ""
        answer = json.loads(line) if line else {}
        if "ok" not in answer:
            self.close()
            raise ChildUnavailable()
        return answer["ok"]

    def close(self) -> None:
        """Stop the child now: if it is still importing, its work is not wanted any more."""
        if self._pid is None:
            return
        for stream in (self._send, self._receive):
            try:
                stream.close()
            except OSError:
                pass
        try:
            os.kill(self._pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self._pid, 0)
        self._pid = None

    def __enter__(self) -> "WarmChild":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve_until_eof(services: tuple[Service, ...], inbox_fd: int, outbox_fd: int) -> None:
    ready = {s.name: threading.Event() for s in services}
    failed: dict[str, str] = {}

    def warm_up_in_order() -> None:
        for s in services:
            try:
                s.warm_up()
            except Exception as err:        # its requests fail; the parent does them itself
                failed[s.name] = f"warm-up: {type(err).__name__}: {err}"
            ready[s.name].set()

    # A request waits for the importing thread to hand over the GIL: every 5 ms by default,
    # which delayed a render by ~17 ms in half the runs. 0.5 ms costs the imports nothing.
    sys.setswitchinterval(0.0005)
    threading.Thread(target=warm_up_in_order, daemon=True).start()
    by_name = {s.name: s for s in services}
    with os.fdopen(inbox_fd, "r", encoding="utf-8") as inbox, \
            os.fdopen(outbox_fd, "w", encoding="utf-8") as outbox:
        for line in inbox:
            message = json.loads(line)
            name = message["service"]
            ready[name].wait()
            try:
                if name in failed:
                    raise RuntimeError(failed[name])
                answer = {"ok": by_name[name].serve(message["request"])}
            except Exception as err:        # the parent redoes it and reports
                answer = {"failed": f"{type(err).__name__}: {err}"}
            outbox.write(json.dumps(answer) + "\n")
            outbox.flush()


# the child `forked_early` started, for the command to share
_early: WarmChild | None = None


@contextmanager
def forked_early(services: list[Service]) -> Iterator[None]:
    """Fork one child for these services now; `child_for` within the block shares it."""
    global _early
    _early = WarmChild(*services) if services else None
    try:
        yield
    finally:
        child, _early = _early, None
        if child is not None:
            child.close()


def child_for(service: Service) -> tuple[WarmChild, bool]:
    """(child, owned): the early child if it serves `service` (the command line closes it),
    else a new child that the caller owns and closes."""
    if _early is not None and service.name in _early.services:
        return _early, False
    return WarmChild(service), True
