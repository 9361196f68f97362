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


def stub_call(root: Path, stub: str, op: str | None = None) -> tuple[str, re.Match] | None:
    """The first native/*.cpp text calling `stub(iter.device_type(), ...)`, with that call's match
    (up to the comma after the device type). With `op`, a call inside another op's structured
    function is passed over: sub_out runs add_stub with -alpha, which is sub's call, not add's."""
    call = re.compile(rf"\b{re.escape(stub)}\s*\(\s*(?:\w+\.)?device_type\(\)\s*,")
    for path in sorted((Path(root) / NATIVE_YAML).parent.glob("*.cpp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if stub not in text:
            continue
        for m in call.finditer(text):
            owner = _enclosing_out_function(text, m.start())
            if op is None or owner is None or owner == op:
                return text, m
    return None


FUNCTION_HEAD_RE = re.compile(r"^(?:TORCH_IMPL_FUNC\((?P<impl>\w+)\)\s*|[A-Za-z_][\w:&<> ]*\b(?P<name>\w+))"
                              r"\s*\((?P<params>[^{;]*?)\)\s*\{", re.M | re.S)


def enclosing_function(text: str, at: int) -> re.Match | None:
    """The head of the function definition that holds offset `at` (a `TORCH_IMPL_FUNC(name)` or
    a plain definition): its `impl` or `name` group names it, `params` are its parameters."""
    heads = list(FUNCTION_HEAD_RE.finditer(text[:at]))
    return heads[-1] if heads else None


def _enclosing_out_function(text: str, at: int) -> str | None:
    """The op whose structured `<op>_out` function holds offset `at` (`TORCH_IMPL_FUNC(sub_out)`
    or `Tensor& sub_out(...)`), or None where the enclosing function is named otherwise."""
    head = enclosing_function(text, at)
    if head is None:
        return None
    name = head.group("impl") or head.group("name")
    return name[:-len("_out")] if name.endswith("_out") else None
