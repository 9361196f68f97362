"""Whether a host `.mm` file compiles, as a Mac's build compiles it first: clang's Objective-C++
parse of the file (libclang), against the installed wheel's ATen headers and the checkout's own
`aten/src`, with Apple's frameworks declared by name only (host_include/porter_apple.h).

porter reads the host function's statements (porter.emulate.host_model), not the whole file, so
a missing `;` after the kernel call, or an undeclared name in another op's host function of the
same file, left every dtype green (review 16's H13, H15, H16, H25), while on a Mac the build
stops and no test runs. Only errors located in the `.mm` file itself are read: the stubbed
frameworks leave errors inside the wheel's MPS headers, which say nothing of the file.

The headers the file includes take ~9 s to parse, its own code ~0.2 s: each file's verdict is
kept by its content, so an edit of a `.metal` file costs a hash here, and where a file is parsed
again with another text of its own (it is being edited), its leading directives (its `#include`
block) are precompiled and kept in porter's cache by the content of the checkout headers they
read (checkouts with the same headers share one, ~80 MB). A file parsed once for a content of its
headers (the other `*Kernel.mm` files, a changed header's readers) is parsed whole: a prefix
costs more to build than the parse it saves. Where porter
cannot parse at all (no libclang: the Metal front end already says "not proven"; no torch
headers or compiler include directory), nothing is said here.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from porter.emulate import host_registrations, mps_structs
from porter.runtime.cache_dir import cache_dir
from porter.runtime.whole_file import write_whole

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


def errors(root: Path, mm: Path, text: str | None = None,
           overlay: dict[str, str] | None = None) -> list[list] | None:
    """[file, line, clang's message, kind] of each error of the parse of `mm` in the checkout's
    own files (kind "error", or "apple" for one about Apple's names), of each error that
    stopped it ("stopped"), and of each construct that could set a stub's MPS function other
    than as porter models it ("unmodelled": porter.emulate.host_registrations); None where
    porter cannot parse (no libclang, no compiler include directory): nothing is said then.
    `text`: parse this as `mm`'s text (HEAD's, say). `overlay`: checkout files (relative path)
    read as these texts instead of the disk's (a branch's base text of a header it changed),
    parsed whole, without the precompiled prefix, whose mirror holds the disk's."""
    found = parsed(root, mm, text, overlay)
    return None if found is None else found.errors


class Parsed(NamedTuple):
    errors: list[list]              # see errors()
    # [file, line, stub, function] of each MPS registration the compiled file makes
    # (porter.emulate.host_registrations), in source order
    registrations: list[list]
    # [file, line, dispatch key, operator] of each `torch::Library::impl` call (host_registrations)
    impls: list[list]


def parsed(root: Path, mm: Path, text: str | None = None,
           overlay: dict[str, str] | None = None) -> Parsed | None:
    """What the parse of `mm` says (errors() for the arguments); None where porter cannot
    parse."""
    base = _arguments(Path(root))
    if base is None:
        return None
    if text is None:
        text = mm.read_text(encoding="utf-8", errors="replace")
    store = cache_dir("host_compile")
    # the verdict is kept twice: for this checkout, and for the file's text alone, which serves
    # any checkout whose files it read hold the same bytes (a port command's scratch copies:
    # each parsed every *Kernel.mm again)
    preamble = _preamble(text)
    # the MPS structs a Mac's codegen declares (from the checkout's yaml): the verdict holds
    # for these declarations
    declared = mps_structs.header(Path(root), text) or ""
    laid = json.dumps(sorted((overlay or {}).items()))
    here = store / f"{_digest(text, preamble, declared, laid, *base, _versions())}.json"
    anywhere = store / f"{_digest(text, preamble, declared, laid, *_fixed_arguments(), _versions())}.any.json"
    rel = _in_checkout(Path(root), str(mm)) or mm.name
    for recorded in (here, anywhere):
        found = _facts(recorded)
        if isinstance(found, dict) and _still_current(Path(root), found):
            if recorded is anywhere:
                _publish(here, json.dumps(found))
            return _as_parsed(Path(root), rel, text, found)
    forced = _kept(store, f"mps-structs-{_digest(declared)}.h", declared) if declared else None
    found = _parsed_apart(Path(root), mm, forced, text, overlay or {})
    if isinstance(found, str):
        # the child died (libclang aborts on a full disk) or failed: nothing is known of the
        # file, and porter goes on
        return Parsed([[rel, 1, f"porter's parse of the file did not finish ({found})", "stopped"]], [], [])
    for recorded in (here, anywhere):
        _publish(recorded, json.dumps(found))
    return _as_parsed(Path(root), rel, text, found)


def _as_parsed(root: Path, rel: str, text: str, found: dict) -> Parsed:
    """A parse's recorded facts as `parsed` answers them, the deleted headers said again (the
    verdict may come from a checkout that had them)."""
    return Parsed(_deleted(root, rel, text, found["wheel_files"]) + found["errors"],
                  found["registrations"], found["impls"])


_DIRECTIVE = re.compile(r"^\s*#\s*(?:include|import)\b")


def _deleted(root: Path, rel: str, text: str, wheel_files: list[str]) -> list[list]:
    """An error for each wheel header the parse read where the checkout's own copy is tracked
    by git but deleted from the work tree: the wheel stands in only for what a checkout does
    not have (generated and third-party headers); a Mac's build finds no file there (review
    18's H05: MetalShaderLibrary.h deleted, every dtype green). Asked on every use of a
    verdict, which another checkout lacking the file may have made. Placed at the file's first
    include: the chain to the header may lie inside the precompiled prefix."""
    if not wheel_files:
        return []
    src = "aten/src/"
    tracked = sorted({f"{src}{w}" for w in wheel_files} & _tracked_sources(root))
    tracked = [g for g in tracked if not (root / g).is_file()]
    lacking = [f"{src}{w}" for w in _missing_from_full_folders(root, wheel_files)]
    gone = tracked or lacking
    if not gone:
        return []
    line = next((n for n, t in enumerate(text.split("\n"), 1) if _DIRECTIVE.match(t)), 1)
    more = f" (and {len(gone) - 1} more)" if len(gone) > 1 else ""
    why = (f"the checkout deletes {gone[0]}, which git tracks{more}" if tracked else
           f"the checkout's {gone[0].rpartition('/')[0]} holds the other headers the installed "
           f"torch has there, not this one{more}")
    return [[rel, line, f"'{gone[0][len(src):]}' file not found: {why}, and a Mac's build "
                        "reads no installed torch's copy of it", "error"]]


FULL_FOLDER = 0.9       # a checkout folder with this share of the wheel's headers there is whole


def _missing_from_full_folders(root: Path, wheel_files: list[str]) -> list[str]:
    """The wheel headers read (as an include names them) whose folder the checkout holds in
    full, all but them: a header a commit deleted, which git no longer tracks (review 20's D05:
    BinaryOps.h removed and committed, every dtype green). A folder the checkout has only in
    part (a miniature's ATen/native, any checkout's ATen/ops, which the build generates) is
    left to the wheel."""
    wheel = _wheel_include()
    if wheel is None:
        return []
    missing = []
    for folder, bases in sorted(_by_folder(wheel_files).items()):
        try:
            mine = {n for n in os.listdir(root / "aten" / "src" / folder) if n.endswith(".h")}
        except OSError:
            continue
        theirs = _wheel_headers(wheel, folder)
        if theirs and len(mine & theirs) >= FULL_FOLDER * len(theirs):
            missing += [f"{folder}/{b}" for b in sorted(bases) if b.endswith(".h") and b not in mine]
    return missing


@lru_cache(maxsize=None)
def _wheel_headers(wheel: str, folder: str) -> frozenset:
    """The headers of one of the installed torch's include folders (ATen/ops holds thousands:
    listed once a process, as the wheel does not change under a run)."""
    try:
        return frozenset(n for n in os.listdir(Path(wheel) / folder) if n.endswith(".h"))
    except OSError:
        return frozenset()


def _by_folder(names: list[str]) -> dict[str, set[str]]:
    """Include names (`ATen/native/BinaryOps.h`) grouped by folder: folder -> base names."""
    found: dict[str, set[str]] = {}
    for name in names:
        folder, _, base = name.rpartition("/")
        found.setdefault(folder, set()).add(base)
    return found


_TRACKED: dict[tuple, frozenset] = {}


def _tracked_sources(root: Path) -> frozenset:
    """The files git tracks under `aten/src` at HEAD; empty where `root` is no git checkout
    (or has no commit). Kept in the process while `.git`'s HEAD and index keep their times
    (a commit or a checkout rewrites one): each host file of a run asks (three `git` runs
    were 0.1-0.3 s of a watch round)."""
    try:
        stamp = tuple(os.stat(root / ".git" / name).st_mtime_ns for name in ("HEAD", "index"))
    except OSError:
        stamp = None            # a worktree's `.git` file, or no index: asked every time
    key = (str(root), stamp)
    if stamp is not None and key in _TRACKED:
        return _TRACKED[key]
    try:
        tracked = subprocess.run(["git", "-C", str(root), "ls-tree", "-r", "--name-only", "HEAD",
                                  "--", "aten/src"], capture_output=True, text=True, timeout=60)
        found = frozenset(tracked.stdout.splitlines()) if tracked.returncode == 0 else frozenset()
    except (OSError, subprocess.SubprocessError):
        found = frozenset()
    if stamp is not None:
        _TRACKED[key] = found
    return found


def _kept(store: Path, name: str, text: str) -> Path:
    """`text` in the file `name` of the cache (named by its content: each parse's child reads
    it), or of the temporary directory where the cache cannot be written."""
    for folder in (store, Path(tempfile.gettempdir()) / "porter-host-compile"):
        path = folder / name
        try:
            if not path.is_file():
                folder.mkdir(parents=True, exist_ok=True)
                write_whole(path, text)
            return path
        except OSError:
            continue
    return path


def _parsed_apart(root: Path, mm: Path, forced: Path | None, text: str,
                  overlay: dict[str, str]) -> dict | str:
    """The parse run in a child process: libclang aborts the whole process on some failures (a
    full disk under a precompiled header's write), which took a test worker down with it in
    CI; a child that dies costs one verdict, "not proven". Where it did not finish: how it
    ended, in words."""
    import signal
    import sys
    package = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(package), *filter(None, [os.environ.get("PYTHONPATH")])]))
    try:
        # the file's text (the base's, say) and the overlay on the child's stdin
        done = subprocess.run([sys.executable, "-m", "porter.emulate.host_compile", str(root), str(mm),
                               str(forced or "")],
                              input=json.dumps({"text": text, "overlay": overlay}), capture_output=True,
                              encoding="utf-8", errors="replace", env=env, timeout=900)
    except subprocess.TimeoutExpired:
        return "its process ran past 900 s"
    except (OSError, subprocess.SubprocessError) as err:
        return f"its process did not start: {err}"
    if done.returncode == 0:
        try:
            return json.loads(done.stdout)
        except ValueError:
            return "its process wrote no verdict"
    last = (done.stderr or "").strip().splitlines()[-1:] or [""]
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        how = f"its process was killed by {name}"
    else:
        how = f"its process exited with {done.returncode}"
    return how + (f": {last[0][:200]}" if last[0] else "")


def _parse(root: Path, mm: Path, text: str, forced: Path | None = None,
           overlay: dict[str, str] | None = None) -> dict:
    """The child's work, on `text` as `mm`'s: {"errors": [...], "checkout_files": {rel: digest},
    "wheel_files": [the wheel headers read, as an include names them]}; `forced`: a header
    read before the file (porter.emulate.mps_structs' declarations); `overlay`: see errors()."""
    import clang.cindex as ci
    base = _arguments(root)
    # after the prefix: a prefix is shared by files that declare other structs
    extra = ["-include", str(forced)] if forced else []
    preamble = _preamble(text)
    store = cache_dir("host_compile")
    # an overlaid file is read where the checkout has it, never from a prefix's mirror; a
    # prefix is built for a block whose headers were parsed before with another text of the
    # file (an edited file: its next parses cost ~0.2 s), never for a one-off
    built = None if overlay else _precompiled(root, preamble, base, store,
                                              build=_parsed_before(store, root, preamble))
    unsaved = [(str(mm), text), *((str(root / rel), laid) for rel, laid in (overlay or {}).items())]
    index = ci.Index.create()
    try:
        unit = index.parse(str(mm), args=_with(built, base) + extra, unsaved_files=unsaved)
    except ci.TranslationUnitLoadError:
        # a prefix clang refuses to load at all: the whole file, slower and as right
        built = None
        unit = index.parse(str(mm), args=_with(None, base) + extra, unsaved_files=unsaved)
    if built and any(d.severity >= 4 and ("precompiled" in d.spelling or "AST file" in d.spelling
                                          or str(built[0]) in d.spelling) for d in unit.diagnostics):
        # a prefix clang cannot load here (its mirror evicted under it): built again
        built = _precompiled(root, preamble, base, store, again=True)
        unit = index.parse(str(mm), args=_with(built, base) + extra, unsaved_files=unsaved)
    mirror = built[1] if built else None
    listed = (_facts(built[0].with_suffix(".errors.json")) or []) if built else []
    listed = listed + _checkout_errors(root, unit, mirror)
    # the registrations the compiled file makes, and what else could set a stub's MPS
    # function (a header's such code is the prefix's, listed with its errors when it is used)
    registered = host_registrations.read(unit, _placer(root, mirror), str(mm))
    listed += [u for u in registered.unmodelled if u not in listed]
    if forced:
        listed += _undeclared_signatures(unit, mm, forced, _in_checkout(root, str(mm)) or mm.name)
    # the verdict holds while the checkout files read hold, and no checkout file comes to
    # stand for a wheel header read, those of the prefix included
    read = _checkout_files(root, unit, mirror)
    if not built and not overlay and preamble.strip():
        _mark_parsed(store, root, preamble, read)
    read.update({rel: _file_digest(root / rel)
                 for rel in _facts(store / f"{_head(preamble)}.reads.json") or []})
    wheel = set(_wheel_files(unit))
    if built:
        wheel.update(_facts(built[0].with_suffix(".wheel.json")) or [])
    return {"errors": listed, "checkout_files": read, "wheel_files": sorted(wheel),
            "registrations": registered.registrations, "impls": registered.impls}


def _undeclared_signatures(unit, mm: Path, forced: Path, rel: str) -> list[list]:
    """An error at each definition of the file named as a kernel `forced` declares
    (porter.emulate.mps_structs: `Tensor mish_backward_mps(const Tensor&, const Tensor&)`, as
    the yaml's MPS row has it) where no definition of that name in the file has the declared
    signature: a Mac's generated registration calls the declared one, which nothing defines,
    and the link fails (review 24's C5: a parameter added, the yaml kept)."""
    import clang.cindex as ci
    declared: dict[str, str] = {}
    defined: dict[str, list] = {}

    def visit(cursor) -> None:
        for child in cursor.get_children():
            if child.kind == ci.CursorKind.NAMESPACE:
                visit(child)
            elif child.kind == ci.CursorKind.FUNCTION_DECL and child.location.file is not None:
                where = child.location.file.name
                if where == str(forced) and not child.is_definition():
                    declared[child.spelling] = child.type.get_canonical().spelling
                elif where == str(mm) and child.is_definition():
                    defined.setdefault(child.spelling, []).append(child)

    visit(unit.cursor)
    found = []
    for name, signature in declared.items():
        ours = defined.get(name, [])
        if ours and all(d.type.get_canonical().spelling != signature for d in ours):
            found.append([rel, ours[0].location.line,
                          f"'{name}' is defined here with another signature than the one "
                          f"native_functions.yaml's MPS row declares ({signature}): a Mac's "
                          "generated registration calls that one, which nothing defines, and "
                          "the link fails", "error"])
    return found


def _with(built, base: list[str]) -> list[str]:
    """The parse's arguments: the prefix's mirror of checkout headers searched first, so that
    the file's own includes of them are the prefix's (one file each, as clang's include guards
    need)."""
    if not built:
        return ["-x", "objective-c++", *base]
    pch, mirror = built
    return ["-x", "objective-c++", *([f"-I{mirror / 'aten' / 'src'}"] if mirror else []), *base,
            "-include-pch", str(pch)]


def _checkout_errors(root: Path, unit, mirror: Path | None = None) -> list[list]:
    listed = []
    for d in unit.diagnostics:
        if d.severity < 3:
            continue
        name = d.location.file.name if d.location.file is not None else None
        where = _in_checkout(root, name, mirror) if name is not None else None
        said = " ".join(d.spelling.split())
        if d.severity >= 4:
            # the parse stopped: nothing after it was read (a missing header), so nothing is
            # known of the rest of the file
            listed.append([where or name or "?", d.location.line, said, "stopped"])
        elif where is not None:
            # the checkout's own files (the .mm, a header it changed); the wheel's MPS headers
            # err on the stubbed frameworks and are not read
            listed.append([where, d.location.line, said,
                           "syntax" if d.category_name == "Parse Issue" else
                           "apple" if _APPLE_NAME.search(said) else "error"])
    return listed


def _in_checkout(root: Path, name: str, mirror: Path | None = None) -> str | None:
    """`name`'s path in the checkout, where it is one of the checkout's files or a mirror's copy
    of one."""
    for top in (root, mirror):
        if top is None:
            continue
        try:
            return str(Path(name).resolve().relative_to(top.resolve()))
        except ValueError:
            pass
    return None


def _placer(root: Path, mirror: Path | None = None):
    """`_in_checkout` for many names: a name under neither tree (the wheel's thousands of
    headers) is told by its start, without resolving it."""
    trees = [top for top in (root, mirror) if top is not None]
    if not all(top.is_absolute() for top in trees):
        return lambda name: _in_checkout(root, name, mirror)
    tops = tuple({str(p) for top in trees for p in (top, top.resolve())})
    return lambda name: _in_checkout(root, name, mirror) if name.startswith(tops) else None


def _head(preamble: str) -> str:
    """A prefix's name: its text and everything the parse's arguments hold but the checkout."""
    return _digest(preamble, *_fixed_arguments(), _versions())


def _precompiled(root: Path, preamble: str, base: list[str], store: Path,
                 again: bool = False, build: bool = True) -> tuple[Path, Path | None] | None:
    """(`.pch`, mirror) of the file's leading directives, built when missing and `build`
    (`again`: built anew). The checkout headers it reads are searched in a mirror, a copy of
    them in the cache kept by their content, so the prefix names no checkout path and every
    checkout with the same headers shares it: a port's scratch copy of the checkout
    (porter.harness.measure_port) reads the user's, where each built its own (9 s and 80 MB a
    port command)."""
    if not preamble.strip():
        return None
    head = _head(preamble)
    found = None if again else _published(store, head, root)
    if found is not None or not build:
        return found
    store.mkdir(parents=True, exist_ok=True)
    with open(store / f"{head}.lock", "w") as lock:
        # one run builds it; the others wait and take it (a prefix replaced while another run
        # loads it fails that load)
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = None if again else _published(store, head, root)
        return found if found is not None else _build(store, head, root, preamble, base)


# a block with no prefix (`_build`): the whole file is parsed
_WHOLE = ()

# the contents of a block's headers parsed whole that are remembered (`_mark_parsed`)
SEEN = 8


def _parsed_before(store: Path, root: Path, preamble: str) -> bool:
    """Whether a file with this include block was parsed whole before with the checkout
    headers it read holding what they hold now. Only then is the block precompiled: building
    a prefix costs more than the whole parse it saves (~11 s against ~7.5 s, ~19 s where its
    reads are not known yet) and 80 MB, and most files are parsed once for a content of their
    headers (the `*Kernel.mm` files a run parses besides the op's, each reader of a changed
    header); a file parsed again with another text of its own is one being edited."""
    head = _head(preamble)
    seen = _facts(store / f"{head}.seen.json")
    if not isinstance(seen, dict) or not isinstance(seen.get("reads"), list):
        return False
    return _content_key(head, root, seen["reads"]) in seen.get("keys", [])


def _mark_parsed(store: Path, root: Path, preamble: str, read: dict[str, str]) -> None:
    """Remember that a file with this block was parsed whole, by the content of every checkout
    file the parse read (a superset of the block's: a prefix may be built once for nothing)."""
    head = _head(preamble)
    path = store / f"{head}.seen.json"
    seen = _facts(path)
    keys = seen.get("keys", []) if isinstance(seen, dict) and seen.get("reads") == sorted(read) else []
    # the parse's own digests of those files: hashing them again from the disk reads each twice
    key = _content_key(head, root, sorted(read), read)
    kept = [k for k in keys if k != key][-(SEEN - 1):] + [key]
    _publish(path, json.dumps({"reads": sorted(read), "keys": kept}))


def _published(store: Path, head: str, root: Path) -> tuple[Path, Path | None] | None:
    reads = _facts(store / f"{head}.reads.json")
    if reads is None:
        return None
    key = _content_key(head, root, reads)
    pch, mirror = store / f"{key}.pch", store / f"{key}.tree"
    if (store / f"{key}.whole").is_file():
        return _WHOLE
    if not pch.is_file() or reads and not mirror.is_dir():
        return None
    if _shadowed(root, _facts(pch.with_suffix(".wheel.json")) or []):
        # a checkout header now stands where the prefix read the wheel's (the checkout gained
        # its own OperationUtils.h): built again, reading it
        return None
    with contextlib.suppress(OSError):
        os.utime(pch)           # used: the last to be evicted
    return pch, mirror if reads else None


def _content_key(head: str, root: Path, reads: list[str], digests: dict[str, str] | None = None) -> str:
    """The prefix for this content of the checkout files it reads (clang checks each when it
    loads the prefix, in the mirror); `digests`: theirs where already known."""
    known = digests or {}
    return _digest(head, *(f"{rel}={known.get(rel) or _file_digest(root / rel)}" for rel in sorted(reads)))


def _facts(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _build(store: Path, head: str, root: Path, preamble: str,
           base: list[str]) -> tuple[Path, Path | None] | None:
    """Precompile `preamble` against a mirror of the checkout files it reads. Which files
    those are is known only after a parse: each parse that read a file not in the mirror adds
    it and builds again (the cache's first build reads them all from the checkout, the second
    from the mirror). None where clang cannot save it."""
    import clang.cindex as ci
    header = store / f"{head}.preamble.h"
    _publish(header, preamble)
    # a new prefix starts from what the whole parse of a file with this block read (a
    # superset of the block's: `_mark_parsed`), else from what the others read (another
    # file's block, an include added): they share most headers, and a file read needlessly
    # costs only its copy, where a file missing costs a second parse (~8 s)
    seen = _facts(store / f"{head}.seen.json")
    reads = sorted(_facts(store / f"{head}.reads.json")
                   or (seen.get("reads") if isinstance(seen, dict) else None)
                   or {rel for other in store.glob("*.reads.json") for rel in _facts(other) or []})
    for _ in range(3):
        key = _content_key(head, root, reads)
        mirror = _mirror(store / f"{key}.tree", root, reads) if reads else None
        args = ["-x", "objective-c++-header", *([f"-I{mirror / 'aten' / 'src'}"] if mirror else []),
                *base]
        unit = ci.Index.create().parse(str(header), args=args)
        read = sorted(_checkout_files(root, unit, mirror))
        if not set(read) <= set(reads):
            reads = sorted(set(reads) | set(read))
            _publish(store / f"{head}.reads.json", json.dumps(reads))
            continue
        if any(d.severity >= 4 or d.location.file is not None and d.location.file.name == str(header)
               for d in unit.diagnostics):
            # a header not found (a mirrored header's quoted sibling: review 18's H17), or the
            # block cut inside an `#if`: no prefix for this content; each parse reads the whole
            # file, as right
            _publish(store / f"{key}.whole", "")
            return _WHOLE
        # errors in the checkout's own headers the block reads (loading the prefix says none)
        _publish(store / f"{key}.errors.json", json.dumps(
            _checkout_errors(root, unit, mirror)
            + host_registrations.read(unit, _placer(root, mirror), str(header)).unmodelled))
        _publish(store / f"{key}.wheel.json", json.dumps(sorted(_wheel_files(unit))))
        fd, staged = tempfile.mkstemp(dir=store, suffix=".pch.tmp")
        os.close(fd)
        try:
            unit.save(staged)
            os.replace(staged, store / f"{key}.pch")
        except Exception:           # libclang's save error: parse without a prefix
            Path(staged).unlink(missing_ok=True)
            return None
        _publish(store / f"{head}.reads.json", json.dumps(reads))
        _evict(store, keep=KEEP)
        return store / f"{key}.pch", mirror
    return None


# prefixes kept in the cache (~80 MB each): a checkout's *Kernel.mm files and a few versions of
# its headers; the least recently used beyond are removed
KEEP = 12


def _mirror(dest: Path, root: Path, reads: list[str]) -> Path:
    """A copy of the checkout files `reads` names under `dest`, published whole."""
    if dest.is_dir():
        return dest
    staged = Path(tempfile.mkdtemp(dir=dest.parent, suffix=".tree.tmp"))
    for rel in reads:
        if (root / rel).is_file():
            (staged / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, staged / rel)
    try:
        os.rename(staged, dest)
    except OSError:             # another run published it first: the same content
        shutil.rmtree(staged, ignore_errors=True)
    return dest


def _evict(store: Path, keep: int) -> None:
    """All but the `keep` most recently used prefixes removed, with their mirrors."""
    def used(pch: Path) -> float:
        try:
            return pch.stat().st_mtime
        except OSError:         # removed by a concurrent run meanwhile
            return 0.0

    prefixes = sorted(store.glob("*.pch"), key=used, reverse=True)
    for pch in prefixes[keep:]:
        for part in (pch, pch.with_suffix(".errors.json"), pch.with_suffix(".wheel.json")):
            part.unlink(missing_ok=True)
        shutil.rmtree(pch.with_suffix(".tree"), ignore_errors=True)


_QUOTED = re.compile(r'#\s*(?:include|import)\s*"')


def _preamble(text: str) -> str:
    """The file's leading lines that are directives, comments or blank (its `#include` block),
    up to a quoted include, which is looked up beside the `.mm` (the prefix is built from a
    copy in the cache: review 18's H12 said "file not found"): what every parse of it shares."""
    lines = text.split("\n")
    n = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and (not stripped.startswith(("#", "//")) or _QUOTED.match(stripped)):
            break
        n = i + 1
    return "\n".join(lines[:n]) + "\n"


def _checkout_files(root: Path, unit, mirror: Path | None = None) -> dict[str, str]:
    """The checkout's files the parse read (besides the `.mm`), from the checkout or from the
    prefix's mirror: relative path -> digest."""
    found = {}
    for inclusion in unit.get_includes():
        rel = _in_checkout(root, inclusion.include.name, mirror)
        if rel is not None:
            found[rel] = _file_digest(Path(inclusion.include.name))
    return found


def _still_current(root: Path, found: dict) -> bool:
    # a header the parse did not find is in no file list the verdict keeps: one put back
    # since would go unseen (review 48b's F4: "file not found ... not proven" after it was), so
    # such a verdict is never taken again
    return (all(_file_digest(root / rel) == digest
                for rel, digest in found.get("checkout_files", {}).items())
            and not _shadowed(root, found.get("wheel_files", []))
            and not any("file not found" in str(error[2]) for error in found.get("errors", [])
                        if len(error) > 2))


def _wheel_files(unit) -> list[str]:
    """The wheel's headers the parse read, as an include names them (`ATen/ops/add.h`)."""
    wheel = _wheel_include()
    return [os.path.relpath(i.include.name, wheel) for i in unit.get_includes()
            if wheel and i.include.name.startswith(wheel + os.sep)]


def _shadowed(root: Path, names: list[str]) -> bool:
    """Whether the checkout's `aten/src`, searched first, now holds one of the wheel headers
    `names` (read from the wheel when the verdict was made): one listing per directory, as a
    parse reads thousands of them."""
    src = Path(root) / "aten" / "src"
    for folder, bases in _by_folder(names).items():
        try:
            if not bases.isdisjoint(os.listdir(src / folder)):
                return True
        except OSError:
            continue            # no such directory in the checkout: nothing there to stand in
    return False


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
    # what a parse records of the registrations is host_registrations' reading: a new reading
    # (a `torch::dispatch` key, `m.def`) must not meet a parse recorded by an older one
    reader = _digest(Path(host_registrations.__file__).read_text())
    return "|".join(["verdict format 5", *found, stubs, reader])


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


def wheel_include() -> str | None:
    """The installed torch's include directory, where porter parses against it."""
    return _wheel_include()


@functools.lru_cache(maxsize=1)
def _wheel_include() -> str | None:
    # where the installed torch lies does not move while porter runs (find_spec walks sys.path:
    # ~4 ms, asked by every include graph and host parse)
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
    """`text` at `path`, written whole; an unwritable cache is asked again next run."""
    with contextlib.suppress(OSError):
        write_whole(path, text)


def message(found: list, whole: bool = True) -> str | None:
    """The verdict's words for the first error (every dtype fails, as the build stops), or
    "not proven" where porter's parse stopped or erred on Apple's names, or the code could set
    a stub's MPS function as porter does not model; None for none. `whole` False (an MPSGraph
    `.mm`, which uses far more of Apple's frameworks than porter declares): its syntax errors
    alone are read, and what could register otherwise."""
    if not whole:
        found = [e for e in found if e[3] in ("syntax", "unmodelled")]
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
    unmodelled = [e for e in found if e[3] == "unmodelled"]
    if unmodelled and not stopped:
        rel, line, why, _ = unmodelled[0]
        return f"not proven: {rel}:{line}: {why}"
    rel, line, why, _ = (stopped or found)[0]
    what = ("stopped there, so the rest is unread" if stopped else
            "errs on a name of Apple's frameworks, which porter declares by name only")
    return f"not proven: {rel}:{line}: {why}: porter's parse {what} ({how})"


def host_file(root: Path, function: str) -> Path | None:
    """The `.mm` file a HostKernel's `function` ("fn (operations/X.mm:LINE)") is in."""
    from porter.source.checkout import OPERATIONS
    m = re.search(r"\(operations/([^():]+\.mm):\d+\)", function)
    return Path(root) / OPERATIONS / m.group(1) if m else None


if __name__ == "__main__":
    # the child of _parsed_apart: the parse's JSON on stdout
    import sys
    # ROOT MM FORCED-HEADER-OR-EMPTY; on stdin {"text": MM's text, "overlay": {rel: text}}
    given = json.loads(sys.stdin.buffer.read().decode("utf-8", errors="replace"))
    print(json.dumps(_parse(Path(sys.argv[1]), Path(sys.argv[2]), given["text"],
                            Path(sys.argv[3]) if sys.argv[3] else None, given["overlay"])))
