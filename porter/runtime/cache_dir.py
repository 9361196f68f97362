"""porter's cache directory: $PORTER_CACHE_DIR, else $XDG_CACHE_HOME/porter, else ~/.cache/porter."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(part: str) -> Path:
    if os.environ.get("PORTER_CACHE_DIR"):
        return Path(os.environ["PORTER_CACHE_DIR"]) / part
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "porter" / part
