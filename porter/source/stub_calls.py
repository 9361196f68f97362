"""Where the shared native/*.cpp function calls a stub, and what it does before: read from the
checkout's text, for the emulator (which arguments the host gets) and the checks (which dtypes
reach the stub's kernel) alike."""

from __future__ import annotations

import re
from pathlib import Path

from porter.source.checkout import NATIVE_YAML


def integers_copied(root: Path, stub: str) -> bool:
    """Whether the shared CPU/CUDA function copies integer (and bool) inputs to the output and
    returns before it calls `stub` (nan_to_num_out): for those dtypes no kernel ever runs."""
    found = stub_call(root, stub)
    if found is None:
        return False
    text, m = found
    head = text.rfind("\n}", 0, m.start())      # the end of the function before this one
    before = text[head + 1 if head >= 0 else 0:m.start()]
    return bool(re.search(r"isIntegralType\([^;]*includeBool\s*=\s*\*/\s*true\)", before)
                and "copy_(" in before and "return" in before)


def stub_call(root: Path, stub: str) -> tuple[str, re.Match] | None:
    """The first native/*.cpp text calling `stub(iter.device_type(), ...)`, with that call's match
    (up to the comma after the device type)."""
    call = re.compile(rf"\b{re.escape(stub)}\s*\(\s*(?:\w+\.)?device_type\(\)\s*,")
    for path in sorted((Path(root) / NATIVE_YAML).parent.glob("*.cpp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        m = call.search(text) if stub in text else None
        if m:
            return text, m
    return None
