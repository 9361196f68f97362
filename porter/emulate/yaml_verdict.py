"""Whether a Mac's build gets past codegen: torchgen's parse of the checkout's
native_functions.yaml (and tags.yaml), which the PyTorch build runs before it compiles anything.
A file torchgen rejects builds no kernel and runs no test, so every op of the run fails with
torchgen's words (review 16's H55, H59, H60: a dispatch row without its colon, dedented, and
`structured_inherits` without `structured: True` were green).

torchgen's import and parse take about a second, so the verdict is kept in porter's cache
under the hash of both files and the torch version: an edit-and-test loop that leaves the yaml
alone pays a hash of the two files.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

from porter.runtime.cache_dir import cache_dir
from porter.runtime.whole_file import write_whole
from porter.source.checkout import NATIVE_YAML, TAGS_YAML


def rejection(root: Path) -> str | None:
    """torchgen's reason to reject the checkout's yaml, as a one-line message, or None."""
    raw = _verdict(Path(root))
    if raw["kind"] in ("ok", "skip"):
        return None
    from porter.checks.torchgen_yaml import MARK_RE, WHERE_RE
    text = raw["text"]
    if raw["kind"] == "assert":
        where = WHERE_RE.search(text)
        line = int(where.group(2)) if where else None
        why = text[:where.start()] if where else text
    else:
        marks = MARK_RE.findall(text)
        line = raw.get("line") or (int(marks[-1]) if marks else None)
        why = f"{raw['type']}: {raw.get('problem') or text.splitlines()[0]}"
    at = f"{NATIVE_YAML}:{line}" if line else NATIVE_YAML
    return (f"{NATIVE_YAML} does not build: torchgen rejects it ({at}): {' '.join(str(why).split())}; "
            "a Mac's build stops at codegen, before any kernel or test (`porter check` names it as "
            "PORTER040)")


# what the recorded verdict ran (porter.checks.torchgen_child.parse_raw): a verdict recorded
# by fewer steps is not this one's
_STEPS = b"parse_native_yaml, get_grouped_native_functions"


def _verdict(root: Path) -> dict:
    from porter.checks.torchgen_child import parse_raw
    return recorded(root, _STEPS, parse_raw)


def rows_unlike_the_wheel(root: Path) -> dict:
    """porter.source.wheel_rows.all_unlike of the checkout's yaml, kept as torchgen's verdict
    is (a scan of both files is ~0.15 s)."""
    from porter.source.checkout import Checkout
    from porter.source.wheel_rows import all_unlike
    return recorded(root, b"wheel_rows.all_unlike 1",
                     lambda r: all_unlike(Checkout(r).read(NATIVE_YAML)))


def recorded(root: Path, steps: bytes, compute) -> dict:
    """`compute(root)`, kept in porter's cache under the hash of `steps`, the checkout's
    native_functions.yaml and tags.yaml, and the torch version."""
    digest = hashlib.sha256(steps)
    for rel in (NATIVE_YAML, TAGS_YAML):
        try:
            digest.update((root / rel).read_bytes())
        except OSError:
            digest.update(b"\0missing")
    try:
        digest.update(metadata.version("torch").encode())
    except metadata.PackageNotFoundError:
        digest.update(b"\0no torch")
    path = cache_dir("torchgen") / f"{digest.hexdigest()[:32]}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    raw = compute(root)
    try:
        write_whole(path, json.dumps(raw))
    except OSError:
        pass                             # unwritable cache: asked again next run
    return raw
