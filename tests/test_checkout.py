"""Checkout: listing files as pathlib would, one directory or recursively."""

from __future__ import annotations

import os

import pytest

from porter.source import checkout as co
from porter.source.checkout import Checkout


def _pathlib_glob(root, rel_dir, pattern):
    return sorted(str(p.relative_to(root)) for p in (root / rel_dir).glob(pattern) if p.is_file())


@pytest.mark.parametrize("rel_dir,pattern", [
    (co.NATIVE, "*.h"), (co.NATIVE, "*.cpp"), (co.OPERATIONS, "*.mm"), (co.KERNELS, "*.metal"),
    (co.OPINFO_DEFINITIONS, "*.py"), (co.MPS, "**/*.mm"), ("no/such/dir", "*.h"), (co.NATIVE_YAML, "*"),
])
def test_glob_lists_what_pathlib_lists(mini_root, rel_dir, pattern):
    native = mini_root / co.NATIVE
    (native / "Linked.h").symlink_to(native / next(p.name for p in native.glob("*.h")))
    (native / "Dangling.h").symlink_to(native / "missing.h")
    os.mkdir(native / "dir.h")
    (native / ".Hidden.h").write_text("")
    (native / "upper.H").write_text("")
    found = Checkout.at(mini_root).glob(rel_dir, pattern)
    assert found == _pathlib_glob(mini_root, rel_dir, pattern)
    if rel_dir == co.NATIVE and pattern == "*.h":
        assert f"{co.NATIVE}/Linked.h" in found and f"{co.NATIVE}/dir.h" not in found
