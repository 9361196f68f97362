"""Files published whole into porter's caches: written to a staged name in the same directory,
then renamed over the target, so that a concurrent run reads all of a file or none of it. The
staged name ends in `.tmp`, which porter.emulate.kernel_cache's eviction spares while fresh."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_whole(path: Path, data: str | bytes) -> None:
    """`data` at `path`, its directory made; OSError where the cache cannot be written (the
    staged file removed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=path.parent, suffix=path.suffix + ".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(staged, path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
