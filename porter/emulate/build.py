"""Compile a .metal kernel file with the host C++ compiler into a cached shared library.

The kernel file is compiled as C++17 with our shim headers and `porter/prelude.h`
force-included; every REGISTER_* line becomes an entry of a table exposed through a C ABI
(`porter_kernel_count`, `porter_kernel_info`, `porter_run`).

Quarantine: when the file does not compile, errors that belong to one functor (or one
(functor, dtype) instantiation) are attributed to it, those registrations are recorded as
"unsupported construct" with the compiler's message, and the rest is rebuilt. A registration
whose declared output type differs from the functor's result is never quarantined: it is a
bug in the kernel file and fails the build (`EmulateBuildError`).

Cache: ~/.cache/porter/emulate (XDG_CACHE_HOME, PORTER_CACHE_DIR), keyed by a hash of the
source, every header it can include, the flags and the compiler binary.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path

from porter import exit_codes
from porter.emulate import (dialect, frontend, groups, guarded_arrays, headers, kernel_cache,
                            metal_builtins)
from porter.emulate.fused_kernels import ANYWHERE, fused_registrations
from porter.emulate.probe import SKIP_HEADER
from porter.emulate.toolchain import (  # cache_dir, compiler: also this module's interface
    ADDRESS_CHECK, FLAGS, IMPL_RE, LOCATION_RE, MISMATCH_RE, PRIMARY_VERSION, REGISTERED_AS,
    base_flags, cache_dir, cache_key,
    compiler, diagnostic_blocks, error_text, first_error, metal_type, precompiled_prelude,
    site_line, version_flags, contract_flags, wrong_output, FOLDING_FLAGS)
from porter.errors import PorterError
from porter.runtime.whole_file import write_whole

MAX_QUARANTINE_ROUNDS = 6


WRONG_OUTPUT, BUILD_ERROR, UNSUPPORTED = "wrong output type", "build error", "unsupported construct"
# a c10::metal function the headers in use lack, where those are not the checkout's own: the
# file was written against other (newer) headers than porter found, so porter cannot build it
OLD_HEADERS = "c10/metal headers lack it"
BUILD_ERROR_PREFIXES = (WRONG_OUTPUT + ":", BUILD_ERROR + ":")
# g++'s words for a qualified name the namespace does not have
# (g++'s, then clang's: the front end's)
_NOT_IN_C10_METAL = re.compile(r"'(\w+)' is not a member of '(?:::)?c10::metal'|"
                               r"no member named '(\w+)' in namespace 'c10::metal'")
# "unsupported construct" is a positive list (porter.emulate.metal_builtins.shim_gap): a name
# Metal defines that the shim lacks. Every other compiler error is wrong Metal too: a Mac's
# compiler rejects the file, and so does porter (a build error).


def is_build_error(message: str) -> bool:
    return metal_builtins.shim_gap(message) is None


class EmulateBuildError(PorterError):
    """The kernel file cannot be built: a wrong registration or an unsupported construct
    outside any functor. A failed check, not bad usage."""
    exit_code = exit_codes.FAILED


@dataclass(frozen=True)
class Registration:
    index: int
    name: str
    kind: str          # unary, unary_alpha, binary, binary_alpha, ternary
    in_type: str       # Metal type name as written in the registration
    out_type: str
    alpha_type: str
    opmath: bool
    line: int
    built: bool


@dataclass
class Library:
    path: Path                     # the shared library
    source: Path                   # the .metal it came from (for messages)
    registrations: list[Registration]
    quarantined: dict[str, str] = field(default_factory=dict)   # "name|dtype" -> reason
    dropped: list[str] = field(default_factory=list)            # non-functor constructs cut
    # what Metal's compiler rejects (porter.emulate.frontend, libclang in a Metal mode), and what
    # fails under another __METAL_VERSION__ than the library's: `file:line: message` each
    metal_errors: list[str] = field(default_factory=list)
    # functor name -> the first of metal_errors inside its struct: its kernels are the ones
    functor_errors: dict[str, str] = field(default_factory=dict)
    version: int = PRIMARY_VERSION
    # other versions whose tokens differ from this one's (a build of their own compares them)
    other_versions: list[int] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    # a contracted build (contract=True) of one piece: whether g++ fused an a*b+c of the kernel
    # file's or the checkout's headers' code (False: its answers are the unfused build's);
    # None where not known
    fused: bool | None = None

    def find(self, name: str, in_type: str | None = None) -> list[Registration]:
        return [r for r in self.registrations
                if r.name == name and (in_type is None or r.in_type == in_type)]

    def twins(self, reg: Registration) -> list[Registration]:
        """This library's registrations of `reg`'s kernel with its input and output types: the
        same kernel in another build of its file (a version's, the contracted, the folding)."""
        return [r for r in self.find(reg.name, reg.in_type) if r.out_type == reg.out_type]

    def reason(self, reg: Registration) -> str | None:
        return (self.quarantined.get(f"{reg.name}|{reg.in_type}")
                or self.quarantined.get(f"{reg.name}|*"))

    def build_errors(self) -> list[str]:
        """What stops this file compiling on a Mac too: a registration whose output type is
        not its functor's result (the file's static_assert), a syntax error, a failed
        static_assert. An "unsupported construct" is the emulator's limit, not listed."""
        reasons = [f"{WRONG_OUTPUT if REGISTERED_AS in e else BUILD_ERROR}: {e}"
                   for e in self.metal_errors]
        reasons += [r for r in self.quarantined.values() if r.startswith(BUILD_ERROR_PREFIXES)]
        return list(dict.fromkeys(reasons)) + [f"{BUILD_ERROR}: {d}" for d in self.dropped
                                       if is_build_error(d)]

    def refused_by_gxx_alone(self) -> bool:
        """Whether every build error is g++'s refusal of a construct outside the functors,
        which porter's Metal front end accepted: the emulator's limit, or the front end's, but
        not known to be a Mac's (review 31's L14: `bfloat z = 0;` in a helper was reported as
        a Mac's build error in g++'s words)."""
        errors = self.build_errors()
        dropped = {f"{BUILD_ERROR}: {d}" for d in self.dropped}
        return bool(errors) and all(e in dropped for e in errors)

    def functor_error(self, reg: Registration) -> str | None:
        """A Metal-language error inside `reg`'s functor, as a build-error reason."""
        error = self.functor_errors.get(reg.name)
        return f"{BUILD_ERROR}: {error}" if error else None


def build_file(path: str | Path, root: str | Path | None = None, *, opt: str = "-O0",
               strict: bool = True, use_cache: bool = True,
               version: int = PRIMARY_VERSION, contract: bool = False,
               only: str | None = None, folding: bool = False) -> Library:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise PorterError(f"{path}: cannot read ({err.strerror})") from None
    return build_source(text, path, root, opt=opt, strict=strict, use_cache=use_cache,
                        version=version, contract=contract, only=only, folding=folding)


# The builds under way in this process, by everything their result depends on: a second ask for
# one waits for it and takes its library (or its error) instead of compiling the file again.
# `porter test --watch` starts the build of a saved kernel file at once, before its round has
# read the checkout's hosts and the ops' kernels; the round's own ask then joins it.
_UNDER_WAY: dict[tuple, Future] = {}
_UNDER_WAY_LOCK = threading.Lock()


def build_source(text: str, display_path: str | Path, root: str | Path | None = None, *,
                 opt: str = "-O0", strict: bool = True, use_cache: bool = True,
                 version: int = PRIMARY_VERSION, contract: bool = False,
                 only: str | None = None, folding: bool = False) -> Library:
    """_build_source, joining a build of the same text and arguments already under way in
    another thread of this process (`use_cache=False` always builds anew)."""
    args = dict(opt=opt, strict=strict, use_cache=use_cache, version=version,
                contract=contract, only=only, folding=folding)
    if not use_cache:
        return _build_source(text, display_path, root, **args)
    ident = (text, str(display_path), str(root), tuple(sorted(args.items())))
    with _UNDER_WAY_LOCK:
        running = _UNDER_WAY.get(ident)
        if running is None:
            mine = _UNDER_WAY[ident] = Future()
    if running is not None:
        return running.result()
    try:
        lib = _build_source(text, display_path, root, **args)
    except BaseException as err:
        mine.set_exception(err)
        raise
    finally:
        with _UNDER_WAY_LOCK:
            del _UNDER_WAY[ident]
    mine.set_result(lib)
    return lib


def _build_source(text: str, display_path: str | Path, root: str | Path | None = None, *,
                  opt: str = "-O0", strict: bool = True, use_cache: bool = True,
                  version: int = PRIMARY_VERSION, contract: bool = False,
                  only: str | None = None, folding: bool = False) -> Library:
    """Build `text` (the contents of a .metal file shown as `display_path` in messages) under
    `version` (__METAL_VERSION__). The primary version's build also checks the file under
    every other version PyTorch builds with (porter.emulate.dialect): Metal's language in each,
    and a syntax pass of each version whose tokens differ. `only`: a registered name whose
    piece alone is built (porter.emulate.groups; the whole file where it has no pieces): the
    contracted build of one kernel, which the verdict asks of every sample, costs one piece's
    compile, not the file's."""
    import time
    t0 = time.perf_counter()
    root = Path(root) if root is not None else None
    dirs = headers.include_dirs(root)
    cxx = compiler()
    # contract: a*b+c fused (toolchain.contract_flags); the caller has checked this CPU has them
    # folding: toolchain.FOLDING_FLAGS' build, which assumes no signed overflow (its own -O2)
    flags = version_flags(FOLDING_FLAGS if folding
                          else FLAGS + [opt] + (contract_flags() or []) if contract
                          else base_flags(cxx) + [opt], version, display_path)
    key = cache_key(text if only is None else f"{text}\0only\0{only}", dirs, flags, cxx)
    out_dir = cache_dir()
    so_path, meta_path = out_dir / f"{key}.so", out_dir / f"{key}.json"
    hit = _held(so_path, meta_path) if use_cache else None
    if hit is not None:
        held, meta = hit
        # the same text built under another path (a scratch copy): messages name this one
        first = meta.get("display", str(display_path))
        here = lambda m: m.replace(first, str(display_path))   # noqa: E731
        # which headers a reason names depends on the checkout, not on the cached content
        _raise_if_strict({k: here(v) for k, v in meta["quarantined"].items()}, strict)
        lib = Library(held, Path(display_path), [Registration(**r) for r in meta["regs"]],
                      {k: _header_gap(here(v), root) for k, v in meta["quarantined"].items()},
                      [here(d) for d in meta["dropped"]],
                      [here(e) for e in meta["metal_errors"]]
                      + _duplicate_names(text, display_path, root, version),
                      {k: here(v) for k, v in meta["functor_errors"].items()}, version,
                      meta["other_versions"], cached=True, fused=meta.get("fused"))
        lib.seconds = time.perf_counter() - t0
        return lib

    out_dir.mkdir(parents=True, exist_ok=True)
    from concurrent.futures import ThreadPoolExecutor
    checked = text                  # the front end reads the file as written
    text = guarded_arrays.guarded(_shim_spelled(text))
    if contract:
        text = _lone_products_set_apart(text, frontend.view(checked, display_path, root, version))

    # the language and version check (short preprocessor runs) beside the compile
    checker = ThreadPoolExecutor(max_workers=1)
    pending = checker.submit(
        lambda: dialect.views(checked, display_path, root, duplicates=False)
        if version == PRIMARY_VERSION
        else [dialect.view(checked, display_path, root, version)])
    checker.shutdown(wait=False)
    lines = text.split("\n")
    quarantined: dict[str, str] = {}
    dropped: list[str] = []
    fused: bool | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="porter-emulate-") as tmp:
            tmpdir = Path(tmp)
            pieces = _build_in_pieces(cxx, flags, dirs, tmpdir, text, display_path, so_path,
                                      strict, only,
                                      lambda: frontend.sealed(checked, display_path, root,
                                                              version)
                                      ) if use_cache else None
            in_pieces = pieces is not None
            if in_pieces:
                quarantined, dropped, owners = pieces
                fused = _fuses(owners, only)
                _raise_if_strict(quarantined, strict)
                lines = _blanked(text, quarantined, dropped, display_path)
            # one compile more than there are rounds: the last says whether the last round's
            # quarantine was enough, or which error still stands
            for round_ in range(MAX_QUARANTINE_ROUNDS + 1):
                if in_pieces:
                    break
                err = _compile(cxx, flags, dirs, tmpdir, "\n".join(lines), display_path,
                               list(quarantined), so_path)
                if err is None:
                    break
                if round_ == MAX_QUARANTINE_ROUNDS:
                    raise _ran_out(err, display_path)
                progress = _quarantine(err, lines, display_path, quarantined, dropped, strict)
                if not progress:
                    raise EmulateBuildError(first_error(err, display_path),
                                            hint="the emulator could not attribute it to one functor")
    except EmulateBuildError as err:
        # g++ gave up (a `throw` fails each instantiation of its functor, round after round):
        # where Metal's language rules out a construct of the file, that is what a Mac says
        metal = dialect.errors_by_version(pending.result()) + _duplicate_names(
            text, display_path, root, version)
        # g++'s own error where porter words it (a registration's output type, which the
        # front end finds at the same line as a failed static_assert); else the front end's
        # (a `throw` g++ gave up on)
        if metal and not (REGISTERED_AS in err.message
                          and _same_line(err.message, metal[0], display_path)):
            raise EmulateBuildError(f"{BUILD_ERROR}: {metal[0]}",
                                    hint="a kernel file is Metal: rewrite the construct") from None
        raise
    views = pending.result()
    metal_errors = _c10_metal_gaps(dialect.errors_by_version(views), root)
    functor_errors = _by_functor(metal_errors, text.split("\n"), display_path)
    others = dialect.distinct(views)
    metal_errors += _other_versions(lines, display_path, root, quarantined, others,
                                    in_pieces=in_pieces, checked=checked)
    held = kernel_cache.pin(so_path)      # _publish pinned it as it was published: that one
    regs = read_registrations(held, in_worker=ADDRESS_CHECK[0] in flags)
    write_whole(meta_path, json.dumps({"regs": [asdict(r) for r in regs], "display": str(display_path),
                                       "quarantined": quarantined, "dropped": dropped,
                                       "metal_errors": metal_errors, "functor_errors": functor_errors,
                                       "other_versions": others, "fused": fused}))
    lib = Library(held, Path(display_path), regs,
                  {k: _header_gap(v, root) for k, v in quarantined.items()}, dropped,
                  metal_errors + _duplicate_names(checked, display_path, root, version),
                  functor_errors, version, others, fused=fused)
    kernel_cache.evict_now_and_then(out_dir)     # a new entry was written: keep to the bound
    lib.seconds = time.perf_counter() - t0
    return lib


# `constant const T&` is Metal (a read-only address space spelled const as well); the shim's
# `#define constant const` makes it `const const`, which g++ refuses (review 30's F07): the g++
# build reads one `constant`, columns kept
_CONSTANT_CONST = re.compile(r"\bconstant(\s+)const\b|\bconst(\s+)constant\b")


def _shim_spelled(text: str) -> str:
    """The kernel file as g++ builds it with the shim: `constant const` once (the shim's
    `constant` is `const`). Half literals are the shim's to round (porter/half_literal.h)."""
    return _CONSTANT_CONST.sub(
        lambda m: ("constant" + " " * (len(m.group(1)) + 5)) if m.group(1) is not None
        else (" " * (len(m.group(2)) + 5) + "constant"), text)


def _lone_products_set_apart(text: str, view) -> str:
    """The contracted build's text: each product the front end found no sum of its own
    expression takes (frontend.View.lone_products) wrapped in the shim's `__porter_lone`,
    which g++'s fma pass does not fuse through, so that g++ contracts as clang does, within
    one expression; `x *= y` written `x = __porter_lone((x) * (y))` (an x with a side effect
    is left: it would run twice). A product the text does not spell with the front end's
    tokens (a macro's, one the front end's rewrite respelled) is left as it was: fused
    wherever g++ fuses it."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    # (where, closings first, the outer of two nested spans first, text to insert), and the
    # spans to leave out (a `*=`)
    events: list[tuple[int, int, int, str]] = []
    cut: list[tuple[int, int]] = []
    for line, tokens, k, left in view.lone_products:
        if not 0 < line <= len(lines) or not tokens:
            continue
        spelled = [re.escape(t) for t in tokens]
        if left:
            if left >= len(tokens) - 1 or tokens[left] != "*=" or \
                    set(tokens[:left]) & {"++", "--", "(", "=", "+=", "-=", "*=", "/="}:
                continue
            pattern = (r"(" + r"\s*".join(spelled[:left]) + r")\s*(\*=)\s*("
                       + r"\s*".join(spelled[left + 1:]) + r")")
        else:
            pattern = r"\s*".join(spelled)
        if re.match(r"[\w.]", tokens[0]):
            pattern = r"(?<![\w.])" + pattern
        if re.search(r"[\w.]$", tokens[-1]):
            pattern += r"(?![\w.])"
        found = [m for m in re.compile(pattern).finditer(text, starts[line - 1])
                 if m.start() < starts[line]]
        if k >= len(found):
            continue
        m = found[k]
        a, b = m.span()
        if left:
            # x *= y  ->  x = __porter_lone((x) * (y))
            cut.append(m.span(2))
            events += [(m.start(2), 1, 0, f"= __porter_lone(({m.group(1)}) * ("),
                       (b, 0, b - a, "))")]
        else:
            events += [(a, 1, -(b - a), "__porter_lone("), (b, 0, b - a, ")")]
    if not events:
        return text
    out, at = [], 0
    for pos, _, _, piece in sorted(events):
        out.append(_without(text, at, pos, cut))
        out.append(piece)
        at = pos
    return "".join(out) + _without(text, at, len(text), cut)


def _without(text: str, a: int, b: int, cut: list[tuple[int, int]]) -> str:
    """text[a:b] less the spans of `cut`."""
    out = []
    for x, y in sorted(cut):
        if y <= a or x >= b:
            continue
        out.append(text[a:max(a, x)])
        a = max(a, y)
    out.append(text[a:b])
    return "".join(out)


def _c10_metal_gaps(errors: list[str], root) -> list[str]:
    """The front end's errors, a `c10::metal` function the headers lack in porter's words: the
    checkout's own c10/metal lacking it is a build error; the installed torch's (standing in
    where the checkout has none) is not the file's error but old headers, which the g++
    build's quarantine reports (old-headers), so it leaves this list."""
    out = []
    for error in errors:
        if not _NOT_IN_C10_METAL.search(error):
            out.append(error)
            continue
        worded = _header_gap(f"{BUILD_ERROR}: {error}", root)
        if worded.startswith(BUILD_ERROR + ": "):
            out.append(worded[len(BUILD_ERROR) + 2:])
    return out


def _same_line(gxx: str, metal: str, display_path) -> bool:
    at = re.compile(re.escape(str(display_path)) + r":(\d+): ")
    a, b = at.search(gxx), at.search(metal)
    return a is not None and b is not None and a.group(1) == b.group(1)


def _duplicate_names(text: str, display_path, root, version: int) -> list[str]:
    """The metallib's kernel names defined twice (frontend.duplicate_names), asked on every
    build, cached or not: they depend on the other kernel files, which this file's cache key
    does not hold (an edit of UnaryKernel.metal that takes a name ActivationKernel.metal
    defines fails ActivationKernel's cached build too, as the Mac's metallib fails to link)."""
    if version != PRIMARY_VERSION:
        return []
    return frontend.duplicate_names(text, display_path, root)


def _held(so_path: Path, meta_path: Path) -> tuple[Path, dict] | None:
    """The cached library, pinned for this run (kernel_cache.pin), and its metadata; None on a
    miss, and where another run's eviction took the entry meanwhile: a cache that loses an
    entry costs a build, never the kernel's verdict."""
    if not (so_path.is_file() and meta_path.is_file()):
        return None
    try:
        kernel_cache.touch(so_path, meta_path)
        held = kernel_cache.pin(so_path)
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    return held, meta


def _ran_out(err: str, display_path) -> EmulateBuildError:
    """The build still fails once every quarantine round is spent: the compiler's first
    remaining error (file:line), as the docs promise, not only a count of rounds."""
    return EmulateBuildError(first_error(err, display_path),
                             hint=f"the emulator set aside the functors of {MAX_QUARANTINE_ROUNDS} errors "
                                  "and the file still does not build: fix this error first")


def _by_functor(errors: list[str], lines: list[str], display_path) -> dict[str, str]:
    prefix = f"{display_path}:"
    found: dict[str, str] = {}
    for error in errors:
        m = re.match(r"(\d+): ", error[len(prefix):]) if error.startswith(prefix) else None
        functor = _enclosing_functor(lines, int(m.group(1))) if m else None
        if functor and functor[0] not in found:
            found[functor[0]] = error
    return found


def _other_versions(lines: list[str], display_path, root, quarantined: dict[str, str],
                    versions: list[int], *, in_pieces: bool = False,
                    checked: str | None = None) -> list[str]:
    """A syntax pass of the built text (what this build quarantined left out) under each other
    version whose tokens differ: a branch a Metal 3.2 or 4.0 build compiles must build too.
    A file built in pieces checks only the pieces this version has not passed before (each
    piece's pass is remembered by its key, as its object is); `checked`: the file as written
    (the pieces' expansion is its)."""
    from porter.emulate.probe import probe_source

    text = "\n".join(lines)
    found = []
    for v in versions:
        select, passed = None, []
        if in_pieces:
            select, passed = _unchecked_pieces(text, root, v, display_path, checked)
            if select == []:
                continue
        error = probe_source(text, display_path, root, None, skip=list(quarantined), version=v,
                             language=False, select=select)
        if error is not None:
            found.append(f"{error} (with {dialect.label(v)})")
        else:
            for marker in passed:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
    return found


def _piece_key(piece: groups.Piece, dirs, flags, cxx) -> str:
    return cache_key(f"piece\0{piece.name}\0{piece.key_text}", dirs, flags, cxx)


def _unchecked_pieces(text: str, root, version: int, display_path=None,
                      checked: str | None = None) -> tuple[list[str] | None, list[Path]]:
    """The pieces of `text` whose syntax pass under `version` is not on record, and the
    markers to set once it passes; (None, []) where the file has no pieces under `version`
    (groups.sealed, of `checked` as this version preprocesses it): the whole file's pass."""
    dirs = headers.include_dirs(Path(root) if root is not None else None)
    cxx = compiler()
    flags = version_flags(base_flags(cxx) + ["-O0", "-fsyntax-only"], version, display_path)
    parts = groups.pieces(text, None if checked is None else
                          frontend.expansion(checked, display_path, root, version))
    if not parts:
        return None, []
    select, markers = [], []
    for piece in parts:
        marker = cache_dir() / f"syntax-{_piece_key(piece, dirs, flags, cxx)}.ok"
        if marker.is_file():
            kernel_cache.touch(marker)
        else:
            select += piece.names
            markers.append(marker)
    return select, markers


def _build_in_pieces(cxx, flags, dirs, tmpdir: Path, text: str, display_path, so_path: Path,
                     strict: bool, only: str | None = None, sealed=None
                     ) -> tuple[dict[str, str], list[str], set[str] | None] | None:
    """Build the library from one object per run of functors (porter.emulate.groups), each
    from the cache where its key is there, and link them: (quarantined, dropped) as the
    whole-file build would have them, and, of a contracting build, whose code g++ fused an
    a*b+c in (porter.emulate.fused_kernels; None for other builds), or None where the file has no functor
    pieces. A
    piece that does not compile is quarantined on its own, as the whole file is (its result
    cached with its object); what no piece can attribute raises as the whole-file build does.
    `only`: a registered name; its piece alone is built and linked. `sealed`: asked whether
    the file may be keyed per functor (frontend.sealed; a file that is not has no pieces)."""
    from concurrent.futures import ThreadPoolExecutor

    parts = groups.split(text)
    if len(parts) < 2:
        return None
    functors = [n for p in parts for n in p.names if n != groups.REST]
    if only is not None:
        # the piece of the name's functor, else the rest's (a registration of no functor struct)
        parts = ([p for p in parts if only in p.names] or
                 [p for p in parts if groups.REST in p.names])
    contracting = "-ffp-contract=fast" in flags
    keys = [_piece_key(p, dirs, flags, cxx) for p in parts]
    objects = [cache_dir() / f"piece-{k}.o" for k in keys]
    metas = [cache_dir() / f"piece-{k}.json" for k in keys]

    held: list[Path | None] = [None] * len(parts)    # each object pinned: no eviction takes it

    def cached(i: int) -> dict | None:
        if not (objects[i].is_file() and metas[i].is_file()):
            return None
        try:
            kernel_cache.touch(objects[i], metas[i])
            held[i] = kernel_cache.pin(objects[i])
            meta = json.loads(metas[i].read_text())
        except (OSError, ValueError):
            return None                   # evicted by another run meanwhile: built again
        here = lambda m: m.replace(meta["display"], str(display_path))   # noqa: E731
        return {"quarantined": {k: here(v) for k, v in meta["quarantined"].items()},
                "dropped": [here(d) for d in meta["dropped"]],
                "fused": meta.get("fused", [ANYWHERE])}

    def build_piece(i: int) -> dict:
        """Compile piece i into the scratch directory; published by `publish`."""
        piece, here = parts[i], tmpdir / f"piece{i}"
        here.mkdir()
        plines, quarantined, dropped = groups.piece_text(text, piece.names).split("\n"), {}, []
        for round_ in range(MAX_QUARANTINE_ROUNDS + 1):
            src = here / "kernel.cpp"
            src.write_text(f'#line 1 "{display_path}"\n' + "\n".join(plines))
            (here / "porter_skip.h").write_text(
                groups.select_header(list(piece.names), functors, list(quarantined)))
            dump = ([f"-fdump-tree-widening_mul-details-lineno={here / 'fma.dump'}",
                     f"-fdump-ipa-whole-program={here / 'symbols.dump'}"] if contracting else [])
            cmd = [cxx, *[f for f in flags if f != "-shared"], *dump, "-c",
                   *([f"-I{pch}"] if pch else []), f"-I{here}", *(f"-I{d}" for d in dirs),
                   "-include", "porter/prelude.h", "-include", "porter_skip.h", "-x", "c++",
                   str(src), "-o", str(here / "piece.o")]
            proc = subprocess.run(cmd, capture_output=True, text=True,
                                  env={**os.environ, "LC_ALL": "C"})
            if proc.returncode == 0:
                break
            err = proc.stderr or proc.stdout or f"{cxx} exited with {proc.returncode}"
            if round_ == MAX_QUARANTINE_ROUNDS:
                raise _ran_out(err, display_path)
            if not _quarantine(err, plines, display_path, quarantined, dropped, strict):
                raise EmulateBuildError(first_error(err, display_path),
                                        hint="the emulator could not attribute it to one functor")
        fused = (sorted(fused_registrations(here / "fma.dump", here / "symbols.dump",
                                            str(headers.SHIM_DIR)))
                 if contracting else None)
        return {"quarantined": quarantined, "dropped": dropped, "fused": fused}

    def publish(i: int, result: dict) -> dict:
        held[i] = _publish(tmpdir / f"piece{i}" / "piece.o", objects[i])
        write_whole(metas[i], json.dumps({"display": str(display_path), **result}))
        return result

    # The pieces with no object on record compile at once, before the file is known to be
    # sealed: the check waits for the front end's preprocessor run, whose threads then hold
    # the GIL (the compile started 0.5 s later). None is published, and no cached one used,
    # before the check passes; a file that fails it is built whole.
    todo = [i for i in range(len(parts)) if not (objects[i].is_file() and metas[i].is_file())]
    # the prelude only where a piece is compiled: a rebuild whose pieces are all cached (a
    # header edit elsewhere, another tree's path) made one of ~33 MB, seconds, for nothing
    pch = precompiled_prelude(cxx, flags, dirs) if todo else None
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        compiling = {i: pool.submit(build_piece, i) for i in todo}
        if sealed is None or not sealed():
            for future in compiling.values():
                future.cancel()
            return None
        results: list = [None if i in compiling else cached(i) for i in range(len(parts))]
        evicted = [i for i, r in enumerate(results) if r is None and i not in compiling]
        if evicted and pch is None:
            pch = precompiled_prelude(cxx, flags, dirs)
        compiling.update({i: pool.submit(build_piece, i) for i in evicted})
        for i, future in compiling.items():
            results[i] = publish(i, future.result())
    finally:
        pool.shutdown(wait=True)
    tmp_so = tmpdir / "kernel.so"
    link = [cxx, "-shared", "-fPIC", *map(str, held), "-o", str(tmp_so)]
    proc = subprocess.run(link, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0 and "multiple definition" in (proc.stderr or proc.stdout):
        # Metal builds the file as one translation unit; every piece is compiled from the
        # whole text, so a plain function of the file or of a header it includes (c10/metal/
        # expm1f.h's expm1f_scaled_unchecked) is in each piece's object, the same definition.
        # A real redefinition is a compile error inside each piece, so letting the linker keep
        # one copy keeps Metal's meaning; where it cannot, the whole file is built in one piece.
        proc = subprocess.run([*link[:-2], "-Wl,--allow-multiple-definition", *link[-2:]],
                              capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
        if proc.returncode != 0:
            return None
    if proc.returncode != 0:
        raise EmulateBuildError(f"{display_path}: the pieces of the file do not link: "
                                f"{(proc.stderr or proc.stdout).strip()[:300]}")
    _publish(tmp_so, so_path)
    quarantined: dict[str, str] = {}
    dropped: list[str] = []
    structs = set(groups.functor_spans(text))
    for piece, r in zip(parts, results):
        for k, v in r["quarantined"].items():
            name = k.partition("|")[0]
            # a piece's key leaves out the functor structs it does not use, so what its cached
            # result says of one of them may be of an older text (an error since fixed): that
            # functor's own piece, keyed by its text and compiling the whole file, says it
            if name in structs and name not in piece.covers:
                continue
            quarantined.setdefault(k, v)
        dropped += [d for d in r["dropped"] if d not in dropped]
    fused = ({o for r in results for o in (r.get("fused") or [])} if contracting else None)
    return quarantined, dropped, fused


def _fuses(owners: set[str] | None, only: str | None) -> bool | None:
    """Whether a contracted build's kernels of `only` (every kernel where None) may run a
    fused multiply-add (porter.emulate.fused_kernels): None where not known."""
    if owners is None:
        return None
    if only is None or ANYWHERE in owners:
        return bool(owners)
    return only in owners


def _publish(built: Path, target: Path) -> Path:
    """Atomic: a concurrent reader never sees half a file. The file is pinned for this run
    before it is published (kernel_cache.pin): the pinned name, which another run's eviction
    cannot take away."""
    fd, staged = tempfile.mkstemp(dir=target.parent, suffix=target.suffix + ".tmp")
    os.close(fd)
    try:
        shutil.copyfile(built, staged)
        os.chmod(staged, 0o644)
        held = kernel_cache.pin(Path(staged), target.name)
        os.replace(staged, target)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise
    return held


def _blanked(text: str, quarantined: dict[str, str], dropped: list[str], display_path) -> list[str]:
    """The text as the whole-file build leaves it after these quarantines: each functor set
    aside whole ("name|*") and each dropped construct blanked (for the other versions' pass)."""
    lines = text.split("\n")
    spans = groups.functor_spans(text)
    for key in quarantined:
        name, _, dtype = key.partition("|")
        if dtype == "*" and name in spans:
            a, b = spans[name]
            lines[a] = f"struct {name}_functor;"
            for k in range(a + 1, b + 1):
                lines[k] = ""
    for d in dropped:
        m = re.match(rf"{re.escape(str(display_path))}:(\d+)-(\d+): ", d)
        if m:
            for k in range(int(m.group(1)) - 1, int(m.group(2))):
                lines[k] = ""
    return lines


def _compile(cxx, flags, dirs, tmpdir: Path, text: str, display_path, skip: list[str],
             so_path: Path) -> str | None:
    src = tmpdir / "kernel.cpp"
    # #line keeps diagnostics pointing at the user's file and line numbers.
    src.write_text(f'#line 1 "{display_path}"\n{text}')
    items = ", ".join(json.dumps(k) for k in skip) + ", " if skip else ""
    (tmpdir / "porter_skip.h").write_text(SKIP_HEADER.replace("ITEMS", items))
    tmp_so = tmpdir / "kernel.so"
    pch = precompiled_prelude(cxx, flags, dirs)
    cmd = [cxx, *flags, *([f"-I{pch}"] if pch else []), f"-I{tmpdir}", *(f"-I{d}" for d in dirs),
           "-include", "porter/prelude.h", "-include", "porter_skip.h",
           "-x", "c++", str(src), "-o", str(tmp_so)]
    # LC_ALL=C: plain quotes in diagnostics, which we parse and show
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        return proc.stderr or proc.stdout or f"{cxx} exited with {proc.returncode}"
    _publish(tmp_so, so_path)             # atomic, and pinned for this run
    return None


# ----------------------------------------------------------------- diagnostics


def _raise_if_strict(quarantined: dict[str, str], strict: bool) -> None:
    """A cached build (the library's, or a piece's) may have been made without `strict` (by
    `emulate check`): a wrong output type it quarantined is the error a strict build raises.
    Before, a strict build after such a cached one said nothing (an order-dependent test)."""
    if not strict:
        return
    for reason in quarantined.values():
        if reason.startswith(f"{WRONG_OUTPUT}: "):
            raise EmulateBuildError(reason[len(WRONG_OUTPUT) + 2:],
                                    hint="fix the registration's output type or the functor's return type")


def _quarantine(stderr: str, lines: list[str], display_path, quarantined: dict[str, str],
                dropped: list[str], strict: bool) -> bool:
    progress = False
    # functors and constructs blanked this round: their later errors are theirs (a second
    # look at a blanked line would find its construct starting at the code above the blank
    # and cut that too: a broken helper took the functor after it and a registration with it)
    cut: list[tuple[int, int]] = []
    for block in diagnostic_blocks(stderr):
        text = "\n".join(block)
        site = site_line(block, display_path)
        where = f"{display_path}:{site}" if site else str(display_path)
        if MISMATCH_RE.search(text):
            # g++ closes one registration's diagnostics with a note naming it, inside the next
            # error's block: the last mention in a block is the registration that block is about
            impl = _last(IMPL_RE, text)
            m = _last(re.compile(r"check_output\(\) \[with R = (.+?); O = (.+?)\]"), text)
            actual, declared = (metal_type(m.group(1)), metal_type(m.group(2))) if m else ("?", "?")
            name, in_t = (impl.group(1), metal_type(text[impl.end():])) if impl else ("?", "?")
            message = f"{where}: {wrong_output(name, declared, in_t, actual)}"
            if strict:
                raise EmulateBuildError(message, hint="fix the registration's output type or the functor's return type")
            key = f"{name}|{in_t}"
            if key not in quarantined:
                quarantined[key] = f"{WRONG_OUTPUT}: {message}"
                progress = True
            continue
        impl = IMPL_RE.search(text)
        if impl:
            key = f"{impl.group(1)}|{metal_type(text[impl.end():])}"
            if key not in quarantined:
                quarantined[key] = _classified(f"{where}: {error_text(block)}")
                progress = True
            continue
        m = LOCATION_RE.match(block[-1])
        if m and m.group("file") == str(display_path):
            err_line = int(m.group("line"))
            if any(start <= err_line <= end for start, end in cut):
                continue
            functor = _enclosing_functor(lines, err_line)
            reason = _classified(f"{display_path}:{err_line}: {m.group('msg')}")
            if functor:
                name, start, end = functor
                cut.append((start, end))
                if f"{name}|*" not in quarantined:
                    quarantined[f"{name}|*"] = reason
                    lines[start - 1] = f"struct {name}_functor;"
                    for i in range(start, end):
                        lines[i] = ""
                    progress = True
                continue
            span = _enclosing_construct(lines, err_line)
            if span:
                start, end = span
                cut.append((start, end))
                dropped.append(f"{display_path}:{start}-{end}: {m.group('msg')}")
                for i in range(start - 1, end):
                    lines[i] = ""
                progress = True
    return progress


def _last(pattern: re.Pattern, text: str):
    found = None
    for found in pattern.finditer(text):
        pass
    return found


def _header_gap(reason: str, root: Path | None) -> str:
    """A c10::metal function the headers lack is not a construct beyond the emulator: say which
    headers were used. The checkout's own c10/metal is what a Mac compiles against too (a build
    error); the installed torch's, used where the checkout has none, may simply be older than
    the kernel file (porter cannot build it, and says why)."""
    m = _NOT_IN_C10_METAL.search(reason)
    kind = next((k for k in (UNSUPPORTED, BUILD_ERROR) if reason.startswith(k + ": ")), None)
    if not m or kind is None:
        return reason
    where = reason[len(kind) + 2:].split(": ", 1)[0]
    described, own = headers.origin(root)
    kind = BUILD_ERROR if own else OLD_HEADERS
    return (f"{kind}: {where}: c10::metal::{m.group(1) or m.group(2)} is not defined in {described}: "
            "the kernel file needs c10/metal headers that define it (newer ones)")


def _classified(where_and_message: str) -> str:
    """A g++ error of the emulator's build is the emulator's limit ("unsupported construct":
    not proven), never the file's: what a Mac's compiler rejects is the Metal front end's to say
    (porter.emulate.frontend), and its errors come first (Library.build_errors). Review 16's
    B03 (`bfloat m = metal::max3(...)`, a float into a bfloat) was "does not build" on g++'s
    word alone, which the shim's explicit float-to-bfloat conversion made."""
    return f"{UNSUPPORTED}: {where_and_message}"


def _enclosing_functor(lines: list[str], line_no: int) -> tuple[str, int, int] | None:
    """(name, first line, last line) of the column-0 `struct NAME_functor {...};` around line_no."""
    for i in range(line_no - 1, -1, -1):
        m = re.match(r"struct (\w+)_functor\b", lines[i])
        if m:
            for j in range(i, len(lines)):
                if lines[j].startswith("}"):
                    return (m.group(1), i + 1, j + 1) if j + 1 >= line_no else None
            return None
        if lines[i].startswith("}") and i + 1 < line_no:
            return None
    return None


def _enclosing_construct(lines: list[str], line_no: int) -> tuple[int, int] | None:
    """A top-level declaration around line_no (1-based, inclusive), or None."""
    idx = line_no - 1
    if idx >= len(lines) or lines[idx].startswith("#"):
        return None
    start = idx
    while start > 0 and (lines[start][:1] in (" ", "\t", "") or lines[start].startswith("{")):
        start -= 1
    if start > 0 and lines[start - 1].startswith("template"):
        start -= 1
    end = idx
    if not lines[idx].rstrip().endswith(";") or lines[idx][:1] in (" ", "\t"):
        while end < len(lines) and not lines[end].startswith("}"):
            end += 1
    return start + 1, min(end, len(lines) - 1) + 1


# ----------------------------------------------------------------- the C ABI

def read_registrations(so_path: Path, in_worker: bool = False) -> list[Registration]:
    """The library's entries; `in_worker`: it was built with AddressSanitizer, and loads only
    in a process that preloaded libasan (porter.emulate.library_reader)."""
    if in_worker:
        from porter.emulate import library_reader
        entries = library_reader.entries(so_path)
    else:
        lib = ctypes.CDLL(str(so_path))
        strs = (ctypes.c_char_p * 5)()
        ints = (ctypes.c_int * 3)()
        entries = []
        for i in range(lib.porter_kernel_count()):
            lib.porter_kernel_info(i, strs, ints)
            entries.append([s.decode() for s in strs] + list(ints))
    regs = [Registration(i, name, kind, in_t, out_t, alpha, bool(a), line, bool(b))
            for i, (name, kind, in_t, out_t, alpha, a, line, b) in enumerate(entries)]
    # a library built in pieces holds each piece's entries together: file order is line order
    return sorted(regs, key=lambda r: (r.line, r.index))
