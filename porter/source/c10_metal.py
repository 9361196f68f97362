"""The `c10/metal` headers a checkout's kernels compile against, and what they define."""

from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from porter.source import checkout as co

DEFINITION_RE = re.compile(r"(?:^|\s)(?:inline|float|T|auto|bool|half|int)\s+(\w+)\s*\(", re.M)


def headers_dir(checkout: co.Checkout) -> Path | None:
    """The checkout's `c10/metal`, else the installed torch's `include/c10/metal`."""
    own = checkout.root / co.C10_METAL
    if own.is_dir():
        return own
    spec = importlib.util.find_spec("torch")
    if spec and spec.submodule_search_locations:
        installed = Path(list(spec.submodule_search_locations)[0]) / "include" / "c10" / "metal"
        if installed.is_dir():
            return installed
    return None


@lru_cache(maxsize=8)
def _functions_in(directory: str) -> frozenset[str]:
    names = set()
    for header in Path(directory).glob("*.h"):
        names |= set(DEFINITION_RE.findall(header.read_text(encoding="utf-8", errors="replace")))
    return frozenset(names)


def available_functions(checkout: co.Checkout) -> frozenset[str]:
    directory = headers_dir(checkout)
    return _functions_in(str(directory)) if directory else frozenset()
