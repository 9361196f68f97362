"""A kernel file as each Metal version compiles it: porter's Metal front end (porter.emulate.
frontend: libclang in a Metal mode, with the checkout's c10/metal headers and registrations)
under every `__METAL_VERSION__` PyTorch builds with, and which versions the file (with the
headers it includes) tells apart for the emulator's g++ builds. A header's error is named at
the header's own line (`c10/metal/special_math.h:3092: Metal has no `double``): a Mac
compiling the kernel file compiles the header too. A kernel name that another file of the
same metallib (or another registration of this file) defines is the primary version's error.

Two versions are told apart when the preprocessed kernel file differs between them (its own
`#if __METAL_VERSION__` branches, or a header it includes) or when the precompiled prelude
does (c10/metal/common.h's `#if __METAL_VERSION__ >= 400`). A version not told apart from
the primary one compiles the very same tokens: nothing more to build for it.

One `-E` per version (~0.03 s of CPU each) and the front end's parses, cached by content hash.
The front end is the only language check: what it cannot decide (libclang missing) is "not
proven", never green.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

from porter.emulate import frontend, headers, kernel_cache
from porter.runtime.whole_file import write_whole
from porter.emulate.toolchain import (
    METAL_VERSIONS, base_flags, cache_dir, cache_key, compiler, preprocess,
    version_flags)

_PCH_PRAGMA = re.compile(r'^#pragma GCC pch_preprocess "[^"]*"\n', re.M)


class VersionView(NamedTuple):     # a NamedTuple: editing commands avoid dataclasses' import
    version: int
    errors: tuple[str, ...]      # `file:line: message`: what a Metal compiler of it rejects
    fingerprint: str             # equal fingerprints: the same tokens are compiled


def label(version: int) -> str:
    return f"__METAL_VERSION__ {version}"


def views(text: str, display_path, root: Path | None, *, use_cache: bool = True,
          duplicates: bool = True) -> list[VersionView]:
    """One view per Metal version PyTorch builds with, the primary version first. The primary
    view holds the metallib's duplicate kernel names too (frontend.duplicate_names), unless
    `duplicates` is False: they depend on the other kernel files, which a cache keyed by this
    file's content does not see (build.build_source asks for them on every build)."""
    from concurrent.futures import ThreadPoolExecutor

    # the short preprocessor runs of the fingerprints side by side, beside the front end's
    # check (the longer path): their wall time is hidden in it. They start once the front
    # end's own preprocessor runs are done, which the front end's parses wait for: on two
    # cores, seven preprocessor runs and the g++ build at once put off every one of them
    printing: list = []
    with ThreadPoolExecutor(max_workers=len(METAL_VERSIONS)) as pool:
        def start() -> None:
            if not printing:
                printing.extend(pool.submit(_fingerprint, text, display_path, root, v,
                                            use_cache=use_cache) for v in METAL_VERSIONS)
        checked = frontend.views(text, display_path, root, use_cache=use_cache,
                                 preprocessed=start)
        start()
        duplicates = tuple(frontend.duplicate_names(text, display_path, root)) if duplicates else ()
        prints = [f.result() for f in printing]
    return [VersionView(c.version, c.errors + (duplicates if i == 0 else ()), f)
            for i, (c, f) in enumerate(zip(checked, prints))]


def view(text: str, display_path, root: Path | None, version: int, *,
         use_cache: bool = True) -> VersionView:
    checked = frontend.view(text, display_path, root, version, use_cache=use_cache)
    return VersionView(version, checked.errors,
                       _fingerprint(text, display_path, root, version, use_cache=use_cache))


def _fingerprint(text: str, display_path, root: Path | None, version: int, *,
                 use_cache: bool = True) -> str:
    """What this version compiles of the file under the emulator's shim: equal fingerprints,
    the same tokens (one g++ build serves both)."""
    root = Path(root) if root is not None else None
    dirs = headers.include_dirs(root)
    cxx = compiler()
    flags = version_flags(base_flags(cxx) + ["-O0"], version, display_path)
    key = cache_key(f"dialect3\0{display_path}\0{text}", dirs, flags, cxx)
    cached = cache_dir() / f"dialect-{key}.json"
    if use_cache and cached.is_file():
        kernel_cache.touch(cached)
        return json.loads(cached.read_text())["fingerprint"]
    pre, error = _preprocessed(text, display_path, cxx, flags, dirs)
    if pre is None:
        fingerprint = "unpreprocessed:" + hashlib.sha256(error.encode()).hexdigest()
    else:
        fingerprint = hashlib.sha256((_prelude_fingerprint(cxx, flags, dirs) + "\0" +
                                      _PCH_PRAGMA.sub("", pre)).encode()).hexdigest()[:24]
    write_whole(cached, json.dumps({"fingerprint": fingerprint}))
    return fingerprint


def errors_by_version(found: list[VersionView]) -> list[str]:
    """Every version's errors, once each: an error of the primary version as it is, one only
    another version has with that version named."""
    primary = set(found[0].errors) if found else set()
    out: list[str] = list(found[0].errors) if found else []
    for v in found[1:]:
        for e in v.errors:
            if e not in primary and not any(e == o.split(" (with __METAL_VERSION__")[0] for o in out):
                out.append(f"{e} (with {label(v.version)})")
    return out


def distinct(found: list[VersionView]) -> list[int]:
    """The versions, past the primary one, that compile other tokens than every version before
    them: each needs a build (or a syntax pass) of its own."""
    seen = {found[0].fingerprint} if found else set()
    out = []
    for v in found[1:]:
        if v.fingerprint not in seen:
            seen.add(v.fingerprint)
            out.append(v.version)
    return out


_PRELUDE_PRINTS: dict[str, str] = {}


def _prelude_fingerprint(cxx: str, flags: list[str], dirs: list[Path]) -> str:
    """A hash of the shim and c10/metal prelude as this version preprocesses it (once per set of
    headers and flags; its `#if __METAL_VERSION__` branches are what the `-E` of a kernel file
    does not show: the precompiled prelude is named there, not expanded)."""
    key = cache_key("prelude", dirs, flags, cxx)
    if key in _PRELUDE_PRINTS:
        return _PRELUDE_PRINTS[key]
    path = cache_dir() / f"prelude-{key}.txt"
    if path.is_file():
        kernel_cache.touch(path)
        _PRELUDE_PRINTS[key] = path.read_text()
        return _PRELUDE_PRINTS[key]
    cmd = [cxx, *[f for f in flags if f != "-shared"], *(f"-I{d}" for d in dirs), "-E", "-P",
           "-x", "c++", str(headers.SHIM_DIR / "porter" / "prelude.h")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    # the defined macro itself differs per version; what it selects is what matters
    body = re.sub(r"\b__METAL_VERSION__\b", "", proc.stdout)
    digest = hashlib.sha256(body.encode()).hexdigest()[:24]
    write_whole(path, digest)
    _PRELUDE_PRINTS[key] = digest
    return digest


_NO_SKIP = """#pragma once
namespace porter {
constexpr bool skipped(const char*, const char*) { return false; }
} // namespace porter
"""


def _preprocessed(text: str, display_path, cxx, flags, dirs) -> tuple[str | None, str]:
    """(the kernel file as the preprocessor leaves it, or None; the preprocessor's error), with
    the file named `display_path` and the scratch directory's name no part of it."""
    with tempfile.TemporaryDirectory(prefix="porter-dialect-") as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(f'#line 1 "{display_path}"\n{text}')
        (Path(tmp) / "porter_skip.h").write_text(_NO_SKIP)
        pre, error = preprocess(cxx, flags, dirs, Path(tmp), src, ("porter_skip.h",))
        if pre is not None:
            pre = pre.replace(tmp, "")
    return pre, error
