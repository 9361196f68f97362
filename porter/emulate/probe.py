"""A cheap build check of a kernel file: the probe that editing commands run before writing.

A syntax pass of the whole file (`-fsyntax-only`) that instantiates only the registrations of
the kernels named (their functors and output-type checks); ~0.05 s where a full build of the
file costs ~1.3 s. Results are cached by content hash next to the emulator's libraries.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from porter.emulate import dialect, headers, kernel_cache
from porter.runtime.whole_file import write_whole
from porter.emulate.toolchain import (
    IMPL_RE, LOCATION_RE, MISMATCH_RE, PRIMARY_VERSION, base_flags, cache_dir, cache_key, compiler,
    diagnostic_blocks, metal_type, precompiled_prelude, site_line, version_flags, wrong_output)


def probe_source(text: str, display_path: str | Path, root: str | Path | None, only,
                 *, skip=(), version: int = PRIMARY_VERSION, language: bool = True,
                 select: list[str] | None = None, use_cache: bool = True) -> str | None:
    """Check that `text` builds, cheaply: a syntax pass of the whole file (`-fsyntax-only`)
    that instantiates only the registrations of the kernels named in `only` (their functors
    and output-type checks), every other registration recorded but not instantiated; `only`
    None: every registration but the `skip` keys ("name|dtype", "name|*"), or with `select`
    only those of the pieces named (porter.emulate.groups).

    With `language` (what build-before-write asks): first Metal's language under every
    __METAL_VERSION__ PyTorch builds with (porter.emulate.dialect), then the syntax pass under
    the primary version and each other version whose tokens differ.

    Returns None, or the first error as `file:line: message` in `text`'s lines.
    Cached by a hash of the text, `only`, the headers, the flags and the compiler."""
    if not language:
        return _syntax(text, display_path, root, only, skip, version, use_cache, select)
    views = dialect.views(text, display_path, root, use_cache=use_cache)
    errors = dialect.errors_by_version(views)
    if errors:
        return errors[0]
    error = _syntax(text, display_path, root, only, skip, PRIMARY_VERSION, use_cache)
    for v in dialect.distinct(views):
        if error is not None:
            break
        error = _syntax(text, display_path, root, only, skip, v, use_cache)
        if error is not None:
            error = f"{error} (with {dialect.label(v)})"
    return error


def _syntax(text: str, display_path, root, only, skip, version: int, use_cache: bool,
            select: list[str] | None = None) -> str | None:
    root = Path(root) if root is not None else None
    dirs = headers.include_dirs(root)
    cxx = compiler()
    # the build's flags (so the build's precompiled prelude serves), minus linking
    build_flags = version_flags(base_flags(cxx) + ["-O0"], version, display_path)
    flags = [f for f in build_flags if f != "-shared"] + ["-fsyntax-only"]
    if select is not None:
        from porter.emulate import groups
        functors = list(groups.functor_spans(text))
        header = groups.select_header(select, functors, sorted(set(skip)))
    elif only is None:
        keys = sorted(set(skip))
        header = SKIP_HEADER.replace("ITEMS", "".join(f"{json.dumps(k)}, " for k in keys))
    else:
        keys = sorted(set(only))
        header = ONLY_HEADER.replace("ITEMS", "".join(f"{json.dumps(f'{k}|*')}, " for k in keys))
    key = cache_key("probe\0" + header + "\0" + text, dirs, flags, cxx)
    result_path = cache_dir() / f"probe-{key}.json"
    if use_cache and result_path.is_file():
        kernel_cache.touch(result_path)
        return json.loads(result_path.read_text())["error"]
    with tempfile.TemporaryDirectory(prefix="porter-probe-") as tmp:
        tmpdir = Path(tmp)
        src = tmpdir / "kernel.cpp"
        src.write_text(f'#line 1 "{display_path}"\n{text}')
        (tmpdir / "porter_skip.h").write_text(header)
        pch = precompiled_prelude(cxx, build_flags, dirs)
        cmd = [cxx, *flags, *([f"-I{pch}"] if pch else []), f"-I{tmpdir}",
               *(f"-I{d}" for d in dirs), "-include", "porter/prelude.h",
               "-include", "porter_skip.h", "-x", "c++", str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, "LC_ALL": "C"})
    error = None
    if proc.returncode != 0:
        error = probe_error(proc.stderr or proc.stdout or f"{cxx} exited with {proc.returncode}",
                            display_path)
    write_whole(result_path, json.dumps({"error": error}))
    return error


def probe_error(stderr: str, display_path) -> str:
    """The first error, as `file:line: message`; a wrong registered output type is named as such."""
    blocks = diagnostic_blocks(stderr)
    if not blocks:
        return f"{display_path}: compiler failed: {stderr.strip()[:300]}"
    block = blocks[0]
    text = "\n".join(block)
    site = site_line(block, display_path)
    if MISMATCH_RE.search(text):
        impl = IMPL_RE.search(text)
        m = re.search(r"check_output\(\) \[with R = (.+?); O = (.+?)\]", text)
        actual, declared = (metal_type(m.group(1)), metal_type(m.group(2))) if m else ("?", "?")
        name, in_t = (impl.group(1), metal_type(text[impl.end():])) if impl else ("?", "?")
        where = f"{display_path}:{site}" if site else str(display_path)
        return f"{where}: {wrong_output(name, declared, in_t, actual)}"
    m = LOCATION_RE.match(block[-1])
    if not m:
        return block[-1]
    if m.group("file") != str(display_path) and site:
        # an error inside a header, required from a line of the kernel file
        return f"{display_path}:{site}: {m.group('msg')}"
    return f"{m.group('file')}:{m.group('line')}: {m.group('msg')}"


# A probe instantiates only the registrations of the kernels it checks (the others are
# recorded as quarantined entries, which costs nothing to compile).
ONLY_HEADER = """#pragma once
namespace porter {
constexpr const char* only_list[] = {ITEMS nullptr};
constexpr bool skipped(const char* name, const char* dtype) {
  for (const char* key : only_list) {
    if (key && key_eq(key, name, dtype)) return false;
  }
  return true;
}
} // namespace porter
"""
# Registrations the build step quarantined ("name|dtype" or "name|*") are recorded but never
# instantiated, so one unsupported functor does not take the rest of the file down with it; the
# build and a syntax pass of a whole built file share this list.
SKIP_HEADER = """#pragma once
namespace porter {
constexpr const char* skip_list[] = {ITEMS nullptr};
constexpr bool skipped(const char* name, const char* dtype) {
  for (const char* key : skip_list) {
    if (key && key_eq(key, name, dtype)) return true;
  }
  return false;
}
} // namespace porter
"""
