"""torchgen's whole-file parse of native_functions.yaml, run in a forked child.

torchgen's import and parse take ~1 s of CPU, porter's other checks a few tenths: `porter
check` forks this child first, before it even reads the tree, so that on two cores the whole
check costs about one torchgen parse. The verdict crosses a pipe as plain data; the parent
turns it into findings (porter.checks.torchgen_yaml). Without fork, with PORTER_NO_FORK=1, or
if the child fails, `Pending.result` parses in-process instead. This module imports nothing
heavy, so that the fork happens as early as possible.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from porter.runtime.forking import fork_with_pipes
from porter.source.checkout import NATIVE_YAML, TAGS_YAML



class Pending:
    def __init__(self, root):
        self.root = Path(root)
        self.pid = None
        forked = fork_with_pipes(1)
        if forked is None:
            return                           # result() parses here
        pid, (read_fd, write_fd) = forked
        if pid == 0:                     # child: parse, answer, leave without cleanup
            os.close(read_fd)
            code = 0
            try:
                payload = json.dumps(parse_raw(self.root)).encode()
                with os.fdopen(write_fd, "wb") as out:
                    out.write(payload)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(write_fd)
        self.pid, self.read_fd = pid, read_fd

    def close(self) -> None:
        """Abandon the child (the run failed before collecting it): reap it, no zombie left."""
        if self.pid is not None:
            os.close(self.read_fd)
            try:
                os.kill(self.pid, signal.SIGTERM)     # our own child: its verdict is not wanted
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = None

    def result(self) -> dict:
        raw = None
        if self.pid is not None:
            with os.fdopen(self.read_fd, "rb") as inbox:
                data = inbox.read()
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
            if data and status == 0:
                raw = json.loads(data)
        return raw if raw is not None else parse_raw(self.root)


def parse_raw(root) -> dict:
    """torchgen's verdict as plain data: {"kind": ok|assert|error|skip, ...}."""
    try:
        import torchgen.gen as gen
    except ImportError:
        return {"kind": "skip", "note": "torchgen is not importable (it ships with torch): PORTER040 skipped"}
    root = Path(root)
    if not (root / TAGS_YAML).is_file():
        return {"kind": "skip", "note": f"{TAGS_YAML} is missing: PORTER040 skipped"}
    try:
        parse_and_group(root)
        return {"kind": "ok"}
    except AssertionError as err:
        return {"kind": "assert", "text": str(err)}
    except Exception as err:       # PyYAML's MarkedYAMLError and torchgen's own failures
        mark = getattr(err, "problem_mark", None)
        return {"kind": "error", "type": type(err).__name__, "text": str(err),
                "problem": getattr(err, "problem", None), "line": mark.line + 1 if mark else None}


# the last parse of this process: (the two files' digest, (parsed, grouped) or what it raised)
_LAST: list = []


def parse_and_group(root: Path):
    """torchgen's parse of the checkout's native_functions.yaml and tags.yaml, and its
    grouping of each op's variants (codegen's next step, which asserts what the parse lets
    through: `heaviside_` without its structured_delegate, review 17's Y09): (parsed, grouped),
    or what torchgen raised, raised again. One parse per content of the two files in a process:
    the verdict (parse_raw) and the MPS declarations (porter.emulate.mps_structs) each parsed the
    27k-line file, ~3 s apiece on two busy cores, after every edit of the yaml."""
    import hashlib

    import torchgen.gen as gen
    root = Path(root)
    digest = hashlib.sha256()
    for rel in (NATIVE_YAML, TAGS_YAML):
        digest.update((root / rel).read_bytes() + b"\0")
    key = digest.hexdigest()
    if not _LAST or _LAST[0] != key:
        # torchgen's module-global cache is keyed by path: an edited file at the same path
        # would be answered stale
        cache = getattr(gen, "_GLOBAL_PARSE_NATIVE_YAML_CACHE", {})
        cache.clear()
        try:
            parsed = gen.parse_native_yaml(path=str(root / NATIVE_YAML),
                                           tags_yaml_path=str(root / TAGS_YAML))
            found = (parsed, gen.get_grouped_native_functions(parsed.native_functions))
        except Exception as err:
            found = err
        finally:
            cache.clear()
        _LAST[:] = [key, found]
    if isinstance(_LAST[1], Exception):
        raise _LAST[1]
    return _LAST[1]
