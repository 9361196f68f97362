"""Whether a host `.mm` file compiles, as a Mac's build compiles it first: clang's Objective-C++
parse of the file (libclang), against the installed wheel's ATen headers and the checkout's own
`aten/src`, with Apple's frameworks declared by name only (host_include/porter_apple.h).

porter reads the host function's statements (porter.emulate.host_model), not the whole file, so
a missing `;` after the kernel call, or an undeclared name in another op's host function of the
same file, left every dtype green (review 16's H13, H15, H16, H25), while on a Mac the build
stops and no test runs. Only errors located in the `.mm` file itself are read: the stubbed
frameworks leave errors inside the wheel's MPS headers, which say nothing of the file.

The headers the file includes take ~9 s to parse, its own code ~0.2 s: the leading directives
(its `#include` block) are precompiled once and kept in porter's cache by the content of the
checkout headers they read (checkouts with the same headers share one, ~80 MB), and each file's
verdict is kept by its content, so an edit of a `.metal` file costs a hash here. Where porter
cannot parse at all (no libclang: the Metal front end already says "not proven"; no torch
headers or compiler include directory), nothing is said here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from porter.runtime.cache_dir import cache_dir

INCLUDE = Path(__file__).parent / "host_include"
# a Mac's build defines these for the MPS backend's Objective-C++ files
_DEFINES = ("-DUSE_MPS", "-D__OBJC__")
# ... and the platform's: a Mac's compiler is Apple's (review 17's A01, A02, A14: an error under
# `#ifdef __APPLE__`, `#ifdef __MACH__` or `#ifndef __linux__` was skipped as Linux reads it)
_PLATFORM = ("-D__APPLE__", "-D__MACH__", "-U__linux__", "-U__linux", "-Ulinux", "-U__gnu_linux__",
             "-U__unix__", "-U__unix", "-Uunix", "-U__ELF__")
# an error about a name of Apple's frameworks, which porter declares by name only (or not at
# all): what a Mac says of it is not known here (review 17's A07-A09, MTLSize, NSString)
_APPLE_NAME = re.compile(r"'(?:MTL|MPS|NS|CF|os_|dispatch_|objc_)\w*'|@\w+|Objective-C")


def errors(root: Path, mm: Path) -> list[list] | None:
    """[file, line, clang's message, kind] of each error of the parse of `mm` in the checkout's
    own files (kind "error", or "apple" for one about Apple's names) and of each error that
    stopped it ("stopped"); None where porter cannot parse (no libclang, no compiler include
    directory): nothing is said then."""
    base = _arguments(Path(root))
    if base is None:
        return None
    text = mm.read_text(encoding="utf-8", errors="replace")
    preamble = _preamble(text)
    verdict_key = _digest(text, preamble, *base, _versions())
    store = cache_dir("host_compile")
    recorded = store / f"{verdict_key}.json"
    try:
        found = json.loads(recorded.read_text())
        if _still_current(Path(root), found["checkout_files"]):
            return found["errors"]
    except (OSError, ValueError, KeyError):
        pass
    listed, checkout_files = _parse(Path(root), mm, text, preamble, base, store)
    _publish(recorded, json.dumps({"errors": listed, "checkout_files": checkout_files}))
    return listed


def _parse(root: Path, mm: Path, text: str, preamble: str, base: list[str], store: Path):
    import clang.cindex as ci
    pch = _precompiled(root, preamble, base, store)
    args = ["-x", "objective-c++", *base] + (["-include-pch", str(pch)] if pch else [])
    index = ci.Index.create()
    try:
        unit = index.parse(str(mm), args=args, unsaved_files=[(str(mm), text)])
    except ci.TranslationUnitLoadError:
        # a prefix clang refuses to load at all: the whole file, slower and as right
        pch = None
        unit = index.parse(str(mm), args=["-x", "objective-c++", *base], unsaved_files=[(str(mm), text)])
    if pch and any(d.severity >= 4 and ("precompiled" in d.spelling or "AST file" in d.spelling
                                        or str(pch) in d.spelling) for d in unit.diagnostics):
        # a prefix clang cannot load here (built in a checkout since removed): built again for
        # this one, under the same content key
        pch = _precompiled_again(root, preamble, base, store)
        unit = index.parse(str(mm), args=["-x", "objective-c++", *base]
                           + (["-include-pch", str(pch)] if pch else []),
                           unsaved_files=[(str(mm), text)])
    listed = _facts(pch.with_suffix(".errors.json")) or [] if pch else []
    listed = listed + _checkout_errors(root, unit)
    # the verdict holds while the checkout files read hold, those of the prefix included
    read = _checkout_files(root, unit)
    head = _digest(preamble, *_fixed_arguments(), _versions())
    read.update({rel: _file_digest(root / rel) for rel in _facts(store / f"{head}.reads.json") or []})
    return listed, read


def _checkout_errors(root: Path, unit) -> list[list]:
    listed = []
    for d in unit.diagnostics:
        if d.severity < 3:
            continue
        where = _in_checkout(root, d.location.file.name) if d.location.file is not None else None
        said = " ".join(d.spelling.split())
        if d.severity >= 4:
            # the parse stopped: nothing after it was read (a missing header), so nothing is
            # known of the rest of the file
            listed.append([where or (d.location.file.name if d.location.file else "?"),
                           d.location.line, said, "stopped"])
        elif where is not None:
            # the checkout's own files (the .mm, a header it changed); the wheel's MPS headers
            # err on the stubbed frameworks and are not read
            listed.append([where, d.location.line, said,
                           "syntax" if d.category_name == "Parse Issue" else
                           "apple" if _APPLE_NAME.search(said) else "error"])
    return listed


def _in_checkout(root: Path, name: str) -> str | None:
    try:
        return str(Path(name).resolve().relative_to(root.resolve()))
    except ValueError:
        return None


def _precompiled(root: Path, preamble: str, base: list[str], store: Path) -> Path | None:
    """The `.pch` of the file's leading directives, built when missing: kept by the preamble and
    the content of the checkout files it read (listed in `<key>.reads.json`), so checkouts
    with the same headers share one."""
    if not preamble.strip():
        return None
    head = _digest(preamble, *_fixed_arguments(), _versions())
    found = _published(store, head, root)
    if found is not None:
        return found
    store.mkdir(parents=True, exist_ok=True)
    with open(store / f"{head}.lock", "w") as lock:
        # one run builds it; the others wait and take it (a prefix replaced while another run
        # loads it fails that load)
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _published(store, head, root)
        if found is not None:
            return found
        read = _build(store, head, root, preamble, base)
    return None if read is None else store / f"{_content_key(head, root, read)}.pch"


def _published(store: Path, head: str, root: Path) -> Path | None:
    reads = _facts(store / f"{head}.reads.json")
    if reads is None:
        return None
    pch = store / f"{_content_key(head, root, reads)}.pch"
    return pch if pch.is_file() else None


def _precompiled_again(root: Path, preamble: str, base: list[str], store: Path) -> Path | None:
    head = _digest(preamble, *_fixed_arguments(), _versions())
    with open(store / f"{head}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        read = _build(store, head, root, preamble, base)
    return None if read is None else store / f"{_content_key(head, root, read)}.pch"


def _content_key(head: str, root: Path, reads: list[str]) -> str:
    """A prefix that read none of the checkout's files serves every checkout; one that did
    names them by path (clang checks them when it loads the prefix), so it is this checkout's
    and holds while their content does."""
    where = str(root.resolve()) if reads else ""
    return _digest(head, where, *(f"{rel}={_file_digest(root / rel)}" for rel in sorted(reads)))


def _facts(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _build(store: Path, head: str, root: Path, preamble: str, base: list[str]) -> list[str] | None:
    """Precompile `preamble`; the checkout files it read, or None on failure."""
    import clang.cindex as ci
    store.mkdir(parents=True, exist_ok=True)
    header = store / f"{head}.preamble.h"
    _publish(header, preamble)
    unit = ci.Index.create().parse(str(header), args=["-x", "objective-c++-header", *base])
    read = sorted(_checkout_files(root, unit))
    # errors in the checkout's own headers the block reads (loading the prefix says none)
    _publish(store / f"{_content_key(head, root, read)}.errors.json",
             json.dumps(_checkout_errors(root, unit)))
    fd, staged = tempfile.mkstemp(dir=store, suffix=".pch.tmp")
    os.close(fd)
    try:
        unit.save(staged)
        os.replace(staged, store / f"{_content_key(head, root, read)}.pch")
    except Exception:           # libclang's save error: parse without a prefix
        Path(staged).unlink(missing_ok=True)
        return None
    _publish(store / f"{head}.reads.json", json.dumps(read))
    return read


def _preamble(text: str) -> str:
    """The file's leading lines that are directives, comments or blank (its `#include` block),
    the rest blanked: what every parse of it shares."""
    lines = text.split("\n")
    n = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "//")):
            break
        n = i + 1
    return "\n".join(lines[:n]) + "\n"


def _checkout_files(root: Path, unit) -> dict[str, str]:
    """The checkout's files the parse read (besides the `.mm`): relative path -> digest."""
    found = {}
    for inclusion in unit.get_includes():
        path = Path(inclusion.include.name)
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            continue
        found[str(rel)] = _file_digest(path)
    return found


def _still_current(root: Path, files: dict[str, str]) -> bool:
    return all(_file_digest(root / rel) == digest for rel, digest in files.items())


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    except OSError:
        return "missing"


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@lru_cache(maxsize=None)
def _versions() -> str:
    """What a recorded verdict depends on besides the files: clang, the wheel, the stubs."""
    found = []
    for package in ("libclang", "torch"):
        try:
            found.append(metadata.version(package))
        except metadata.PackageNotFoundError:
            found.append("none")
    stubs = _digest(*(p.read_text() for p in sorted(INCLUDE.rglob("*.h"))))
    return "|".join(["verdict format 2", *found, stubs])


def _arguments(root: Path) -> list[str] | None:
    found = _fixed_arguments()
    # the checkout's headers first, as a Mac's build reads them (the wheel's stand in for
    # what the checkout lacks: generated and third-party headers)
    return None if found is None else [f"-I{root / 'aten' / 'src'}", *found]


@lru_cache(maxsize=None)
def _fixed_arguments() -> tuple[str, ...] | None:
    try:
        import clang.cindex  # noqa: F401
    except ImportError:
        return None
    wheel = _wheel_include()
    builtin = _compiler_include()
    if wheel is None or builtin is None:
        return None
    # the compiler's own headers (stddef.h): the libclang wheel carries none
    return ("-std=c++20", "-fblocks", *_DEFINES, *_PLATFORM, f"-I{INCLUDE}", f"-I{wheel}", "-isystem", builtin,
            "-ferror-limit=0", "-Wno-everything")


def _wheel_include() -> str | None:
    import importlib.util
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    include = Path(list(spec.submodule_search_locations)[0]) / "include"
    return str(include) if (include / "ATen").is_dir() else None


def _compiler_include() -> str | None:
    try:
        out = subprocess.run(["g++", "-print-file-name=include"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if out and Path(out, "stddef.h").is_file() else None


def _publish(path: Path, text: str) -> None:
    """`text` at `path`, written whole (a concurrent run reads all of it or none)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, staged = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(staged, path)
    except OSError:
        pass


def message(found: list, whole: bool = True) -> str | None:
    """The verdict's words for the first error (every dtype fails, as the build stops), or
    "not proven" where porter's parse stopped or erred on Apple's names; None for none.
    `whole` False (an MPSGraph `.mm`, which uses far more of Apple's frameworks than porter
    declares): its syntax errors alone are read."""
    if not whole:
        found = [e for e in found if e[3] == "syntax"]
    if not found:
        return None
    stopped = [e for e in found if e[3] == "stopped"]
    # an error after one about Apple's names in the same file may be its cascade (`MTLSize s`
    # unknown, then `s.width` on whatever `s` names): only errors before the first such count
    first_apple = {}
    for rel, line, _, kind in found:
        if kind == "apple":
            first_apple[rel] = min(first_apple.get(rel, line), line)
    errors = [e for e in found if e[3] == "syntax"
              or e[3] == "error" and e[1] < first_apple.get(e[0], 1 << 30)]
    how = ("porter parses the host files as Objective-C++ against the wheel's ATen headers, "
           "docs/testing.md \"What the host may do\"")
    if errors:
        rel, line, why, _ = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return (f"{rel} does not build: {rel}:{line}: {why}{more}; a Mac's build stops there, "
                f"before any test ({how})")
    rel, line, why, _ = (stopped or found)[0]
    what = ("stopped there, so the rest is unread" if stopped else
            "errs on a name of Apple's frameworks, which porter declares by name only")
    return f"not proven: {rel}:{line}: {why}: porter's parse {what} ({how})"


def host_file(root: Path, function: str) -> Path | None:
    """The `.mm` file a HostKernel's `function` ("fn (operations/X.mm:LINE)") is in."""
    from porter.source.checkout import OPERATIONS
    m = re.search(r"\(operations/([^():]+\.mm):\d+\)", function)
    return Path(root) / OPERATIONS / m.group(1) if m else None
