"""torchgen's validation of single `native_functions.yaml` entries, warmed up in parallel.

Importing torchgen's model and PyYAML costs ~0.13 s, more than all of porter's planning. On
POSIX the import happens in a forked child while the parent resolves and plans on the other
core; the parent then sends the changed entries through a pipe and reads back the verdicts.
Where fork is unavailable (or PORTER_NO_FORK=1) the same check runs in-process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal


TAGS_YAML = "aten/src/ATen/native/tags.yaml"


def _validate(requests: list[dict], tags_text: str | None) -> list[dict]:
    """Verdicts for entries: {"name", "line", "error"} for each rejected one (with "path"
    when the fault lies in another file than native_functions.yaml)."""
    import yaml
    from torchgen.model import Location, NativeFunction

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    tags = set()
    if tags_text:
        try:
            listed = yaml.load(tags_text, Loader=loader) or []
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            return [{"name": "", "path": TAGS_YAML, "line": mark.line + 1 if mark else None,
                     "error": f"not valid YAML: {getattr(err, 'problem', None) or err}"}]
        if not isinstance(listed, list):
            return [{"name": "", "path": TAGS_YAML, "line": None,
                     "error": "not a list of `- tag:` entries"}]
        tags = {t["tag"] for t in listed if isinstance(t, dict) and isinstance(t.get("tag"), str)}
    verdicts = []
    for req in requests:
        try:
            loaded = yaml.load(req["text"], Loader=loader)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            verdicts.append({"name": req["name"], "line": req["line"] + (mark.line if mark else 0),
                             "error": f"edited entry is not valid YAML: {getattr(err, 'problem', err)}"})
            continue
        if not (isinstance(loaded, list) and loaded and isinstance(loaded[0], dict)):
            verdicts.append({"name": req["name"], "line": req["line"],
                             "error": "edited entry is not a YAML mapping"})
            continue
        try:
            NativeFunction.from_yaml(dict(loaded[0]), Location(req["path"], req["line"]), tags)
        except Exception as err:        # torchgen reports problems as AssertionError
            message = " ".join(str(err).split()) or type(err).__name__
            verdicts.append({"name": req["name"], "line": req["line"],
                             "error": f"torchgen rejects '{req['name']}': {message}"})
    return verdicts


class EntryValidator:
    """Start early with `EntryValidator()`; call `check(...)` at most once, or `close()`."""

    def __init__(self) -> None:
        self.available = importlib.util.find_spec("torchgen") is not None
        self._pid = None
        if self.available and hasattr(os, "fork") and not os.environ.get("PORTER_NO_FORK"):
            self._start()

    def _start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        pid = os.fork()
        if pid == 0:                       # child: warm up, answer one request, leave
            os.close(to_child_w)
            os.close(to_parent_r)
            code = 0
            try:
                import torchgen.api.cpp  # noqa: F401  (from_yaml imports it lazily)
                import torchgen.model  # noqa: F401
                import yaml  # noqa: F401
                with os.fdopen(to_child_r, "rb") as inbox:
                    raw = inbox.read()
                if raw:
                    request = json.loads(raw)
                    answer = json.dumps(_validate(request["entries"], request["tags"]))
                    with os.fdopen(to_parent_w, "wb") as outbox:
                        outbox.write(answer.encode())
            except BaseException:
                code = 1
            os._exit(code)
        os.close(to_child_r)
        os.close(to_parent_w)
        self._pid, self._send, self._receive = pid, to_child_w, to_parent_r

    def check(self, entries: list[dict], tags_text: str | None) -> list[dict]:
        """entries: {"name", "line", "path", "text"}. Returns the rejected ones."""
        if not self.available:
            return []
        if self._pid is None:
            return _validate(entries, tags_text)
        payload = json.dumps({"entries": entries, "tags": tags_text}).encode()
        try:
            with os.fdopen(self._send, "wb") as outbox:
                outbox.write(payload)
            with os.fdopen(self._receive, "rb") as inbox:
                raw = inbox.read()
        finally:
            _, status = os.waitpid(self._pid, 0)
            self._pid = None
        if not raw or status != 0:          # the child failed: validate here instead
            return _validate(entries, tags_text)
        return json.loads(raw)

    def close(self) -> None:
        """Abandon an unused child: it is still importing torchgen, so stop it rather than wait."""
        if self._pid is not None:
            for fd in (self._send, self._receive):
                try:
                    os.close(fd)
                except OSError:
                    pass
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self._pid, 0)
            self._pid = None

    def __enter__(self) -> "EntryValidator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
