"""Forked children that import porter's heavy dependencies while the parent works.

An editing command spends ~0.1 s importing torchgen and PyYAML (to validate yaml entries) and
~0.04 s importing Jinja2 (to render a functor): as much as all of its own planning. On POSIX a
`WarmChild` forked at start-up does that import on the other core, then answers the parent's
requests (one JSON line each way) until the parent closes the pipe. Anything that goes wrong
in the child (no fork, PORTER_NO_FORK=1, a crash, a broken pipe) makes `ask` raise
`ChildUnavailable`, and the caller does the work in-process instead: the result is the same,
only slower.

The command line forks a command's children first thing (`forked_early`), before it imports
the command's ~40 modules (~0.05 s): the children's imports are the longest path of an editing
command, so every millisecond they start sooner is one the whole run ends sooner. The command
then `adopt`s them; any it does not adopt are stopped when the command ends.
"""

from __future__ import annotations

import json
import os
import signal
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator


class ChildUnavailable(Exception):
    pass


class WarmChild:
    def __init__(self, warm_up: Callable[[], None], serve: Callable[[dict], Any]):
        self._pid = None
        if hasattr(os, "fork") and not os.environ.get("PORTER_NO_FORK"):
            self._start(warm_up, serve)

    def _start(self, warm_up, serve) -> None:
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        pid = os.fork()
        if pid == 0:                        # child: warm up, answer until EOF, leave
            os.close(to_child_w)
            os.close(to_parent_r)
            code = 0
            try:
                warm_up()
                with os.fdopen(to_child_r, "r", encoding="utf-8") as inbox, \
                        os.fdopen(to_parent_w, "w", encoding="utf-8") as outbox:
                    for line in inbox:
                        try:
                            answer = {"ok": serve(json.loads(line))}
                        except Exception as err:        # the parent redoes it and reports
                            answer = {"failed": f"{type(err).__name__}: {err}"}
                        outbox.write(json.dumps(answer) + "\n")
                        outbox.flush()
            except BaseException:
                code = 1
            os._exit(code)
        os.close(to_child_r)
        os.close(to_parent_w)
        self._pid = pid
        self._send = os.fdopen(to_child_w, "w", encoding="utf-8")
        self._receive = os.fdopen(to_parent_r, "r", encoding="utf-8")

    def ask(self, request: dict) -> Any:
        if self._pid is None:
            raise ChildUnavailable()
        try:
            self._send.write(json.dumps(request) + "\n")
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


# factory -> what it made before the command asked (None: a factory that had nothing to start)
_early: dict[Callable[[], WarmChild | None], WarmChild | None] = {}


@contextmanager
def forked_early(factories: Iterable[Callable[[], WarmChild | None]]) -> Iterator[None]:
    """Start these children now; `adopt(factory)` within the block hands one over."""
    for factory in factories:
        if factory not in _early:
            _early[factory] = factory()
    try:
        yield
    finally:
        while _early:
            child = _early.popitem()[1]
            if child is not None:
                child.close()


def adopt(factory: Callable[[], WarmChild | None]) -> WarmChild | None:
    """What `factory` made early, or what it makes now."""
    return _early.pop(factory) if factory in _early else factory()
