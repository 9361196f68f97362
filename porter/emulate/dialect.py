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
Until the front end is switched on (PORTER_METAL_FRONTEND=clang; frontend.enabled), the language
check is the token pass of porter.emulate.metal_language.
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

from porter.emulate import frontend, headers, kernel_cache, metal_language
from porter.emulate.toolchain import (
    FLAGS, METAL_VERSIONS, PRIMARY_VERSION, cache_dir, cache_key, compiler, preprocess,
    version_flags)

_PCH_PRAGMA = re.compile(r'^#pragma GCC pch_preprocess "[^"]*"\n', re.M)


class VersionView(NamedTuple):     # a NamedTuple: editing commands avoid dataclasses' import
    version: int
    errors: tuple[str, ...]      # `file:line: message`: what a Metal compiler of it rejects
    fingerprint: str             # equal fingerprints: the same tokens are compiled


def label(version: int) -> str:
    return f"__METAL_VERSION__ {version}"


def views(text: str, display_path, root: Path | None, *, use_cache: bool = True) -> list[VersionView]:
    """One view per Metal version PyTorch builds with, the primary version first."""
    from concurrent.futures import ThreadPoolExecutor

    if not frontend.enabled():
        with ThreadPoolExecutor(max_workers=len(METAL_VERSIONS)) as pool:
            return list(pool.map(lambda v: _token_view(text, display_path, root, v,
                                                       use_cache=use_cache), METAL_VERSIONS))

    checked = frontend.views(text, display_path, root, use_cache=use_cache)
    duplicates = tuple(frontend.duplicate_names(checked, display_path, root))
    # the short preprocessor runs of the fingerprints side by side: their wall time is one's
    with ThreadPoolExecutor(max_workers=len(METAL_VERSIONS)) as pool:
        prints = list(pool.map(lambda v: _fingerprint(text, display_path, root, v,
                                                      use_cache=use_cache), METAL_VERSIONS))
    return [VersionView(c.version, c.errors + (duplicates if i == 0 else ()), f)
            for i, (c, f) in enumerate(zip(checked, prints))]


def view(text: str, display_path, root: Path | None, version: int, *,
         use_cache: bool = True) -> VersionView:
    if not frontend.enabled():
        return _token_view(text, display_path, root, version, use_cache=use_cache)
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
    flags = version_flags(FLAGS + ["-O0"], version)
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
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=cached.parent, suffix=".json.tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"fingerprint": fingerprint}, f)
    os.replace(staged, cached)
    return fingerprint


def _token_view(text: str, display_path, root: Path | None, version: int, *,
                use_cache: bool = True) -> VersionView:
    """The token pass (porter.emulate.metal_language): the language check while the front end is
    not switched on (frontend.enabled)."""
    root = Path(root) if root is not None else None
    dirs = headers.include_dirs(root)
    cxx = compiler()
    flags = version_flags(FLAGS + ["-O0"], version)
    # header errors are named root-relative (or, for the installed torch's, by full path)
    key = cache_key(f"dialect2\0{display_path}\0{_header_origin(root)}\0{text}", dirs, flags,
                    cxx)
    cached = cache_dir() / f"dialect-{key}.json"
    if use_cache and cached.is_file():
        kernel_cache.touch(cached)
        data = json.loads(cached.read_text())
        return VersionView(version, tuple(data["errors"]), data["fingerprint"])
    pre, error = _preprocessed(text, display_path, cxx, flags, dirs)
    if pre is None:
        # the preprocessor itself stops (#error, a header not found): the compile says so
        found, fingerprint = (), "unpreprocessed:" + hashlib.sha256(error.encode()).hexdigest()
    else:
        allowed = _allowed_dirs(root, dirs)
        display = str(display_path)
        files = metal_language.file_tokens(pre, _checked(display, allowed))
        by_file = metal_language.violations(files, allowed, version=version)
        found = tuple(f"{display}:{line}: {message}" for line, message in by_file.pop(display, ()))
        # the checkout's headers the file includes, as a Metal compiler compiles them: those the
        # preprocessor expanded here, then those the precompiled prelude holds (not expanded
        # here; their findings come from the prelude's own scan)
        seen = {_header_name(Path(n), root): v for n, v in by_file.items()}
        prelude = _prelude_violations(cxx, flags, dirs, allowed, root, version)
        entered = {_header_name(Path(n), root) for n in files}
        for name in _included_headers(text, dirs, allowed, root):
            if name not in entered and name in prelude:
                seen.setdefault(name, [tuple(e) for e in prelude[name]])
        found += tuple(f"{name}:{line}: {message}" for name, errors in seen.items()
                       for line, message in errors)
        fingerprint = hashlib.sha256((_prelude_fingerprint(cxx, flags, dirs) + "\0" +
                                      _PCH_PRAGMA.sub("", pre)).encode()).hexdigest()[:24]
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=cached.parent, suffix=".json.tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"errors": list(found), "fingerprint": fingerprint}, f)
    os.replace(staged, cached)
    return VersionView(version, found, fingerprint)


def _allowed_dirs(root: Path | None, dirs: list[Path]) -> list[Path]:
    """Where a kernel file's includes may come from: the checkout itself, and the c10/metal
    headers that stand in for its own (the installed torch's, where it has none)."""
    allowed = [root] if root is not None else []
    allowed += [d for d in dirs if d != headers.SHIM_DIR and root is not None and d == root / "aten" / "src"]
    allowed.append(headers.c10_metal_parent(root) / "c10" / "metal")
    return allowed


def _checked(display: str | None, allowed: list[Path]):
    """Which files of the preprocessed text a Metal compiler compiles as Metal: the kernel file
    and the checkout's headers (c10/metal, kernels/*.h), never the shim (C++, its stand-in for
    Metal's own library) nor the scratch directory's per-build header."""
    memo: dict[str, bool] = {}

    def checked(name: str) -> bool:
        if name not in memo:
            memo[name] = name == display or (
                name.startswith("/") and not name.startswith("/porter_skip")
                and not metal_language._under(Path(name), headers.SHIM_DIR)
                and any(metal_language._under(Path(name), d) for d in allowed))
        return memo[name]
    return checked


def _header_origin(root: Path | None) -> str:
    """What header names in messages depend on beyond the headers' contents (the cache keys
    hash those): root-relative names for the checkout's own c10/metal, full paths otherwise."""
    parent = headers.c10_metal_parent(root)
    return "checkout" if root is not None and parent == root else str(parent)


def _header_name(path: Path, root: Path | None) -> str:
    """A header as messages name it: relative to the checkout where it is the checkout's."""
    if root is not None:
        try:
            return str(path.resolve().relative_to(Path(root).resolve()))
        except ValueError:
            pass
    return str(path)


_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def _included_headers(text: str, dirs: list[Path], allowed: list[Path],
                      root: Path | None) -> list[str]:
    """The checkout headers `text` includes, directly or through another checkout header, by
    their `#include` lines (the precompiled prelude's headers leave no trace in the kernel
    file's preprocessed text, so the lines are read instead)."""
    search = [d for d in dirs if d != headers.SHIM_DIR]
    out: list[str] = []
    pending, seen = [(text, None)], set()
    while pending:
        source, here = pending.pop(0)
        for quote, name in _INCLUDE.findall(source):
            where = ([here] if quote == '"' and here is not None else []) + search
            path = next((d / name for d in where if (d / name).is_file()), None)
            if path is None or path in seen or not any(metal_language._under(path, d)
                                                       for d in allowed):
                continue
            seen.add(path)
            out.append(_header_name(path, root))
            try:
                pending.append((path.read_text(encoding="utf-8", errors="replace"), path.parent))
            except OSError:
                continue
    return out


def _prelude_violations(cxx: str, flags: list[str], dirs: list[Path], allowed: list[Path],
                        root: Path | None, version: int) -> dict[str, list[list]]:
    """What Metal's language rules out in the checkout headers the precompiled prelude holds
    (c10/metal/common.h, utils.h, indexing.h and what they include), per header name: the
    prelude preprocessed on its own, under this version (once per set of headers and flags)."""
    key = cache_key(f"prelude-language\0{_header_origin(root)}", dirs, flags, cxx)
    path = cache_dir() / f"prelude-language-{key}.json"
    if path.is_file():
        kernel_cache.touch(path)
        return json.loads(path.read_text())
    cmd = [cxx, *[f for f in flags if f != "-shared"], *(f"-I{d}" for d in dirs), "-E",
           "-x", "c++", str(headers.SHIM_DIR / "porter" / "prelude.h")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    files = metal_language.file_tokens(proc.stdout, _checked(None, allowed)) \
        if proc.returncode == 0 else {}
    by_file = metal_language.violations(files, allowed, version=version)
    found = {_header_name(Path(n), root): [list(e) for e in errors]
             for n, errors in by_file.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=path.parent, suffix=".json.tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(found, f)
    os.replace(staged, path)
    return found


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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, staged = tempfile.mkstemp(dir=path.parent, suffix=".txt.tmp")
    with os.fdopen(fd, "w") as f:
        f.write(digest)
    os.replace(staged, path)
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
