"""The host C++ toolchain of porter's Metal emulation: the compiler, its flags, the cache key,
the precompiled prelude and the parsing of g++'s diagnostics.

Shared by the full build (porter.emulate.build) and the cheap probe that editing commands run
before writing (porter.emulate.probe); this module imports nothing heavier than hashlib, so an
editing command's start-up stays small.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from porter.emulate import headers, kernel_cache
from porter.errors import PorterError
from porter.runtime.cache_dir import cache_dir as porter_cache_dir

SANITIZE = "-fsanitize=float-cast-overflow,shift-exponent,bounds,signed-integer-overflow"
FLAGS = [
    "-std=c++17", "-fPIC", "-shared", "-g0",
    # Metal literals are float; without this `1.0` makes float/half overloads ambiguous.
    "-fsingle-precision-constant",
    # a*b+c rounded twice: whether Apple's compiler contracts it in PyTorch's kernels
    # (MTLMathModeSafe) is not known, so every sample runs on a contracted build as well
    # (contract_flags), and one right only one way is not proven (porter.harness.verdicts).
    "-ffp-contract=off",
    # A float converted to an integer type outside its range (or NaN), a shift by a count
    # outside the type's width, an index past an array of known bound: undefined in C++ and in
    # Metal, where x86 answers something (the least integer, the count masked, the next field)
    # and an Apple GPU is not known to answer the same. Each calls porter/metal.h's handler,
    # which marks the sample not proven (review 31's N01; review 32's L03, L09). A signed
    # integer operation that overflows goes on wrapped, as a GPU's adder answers, and is noted:
    # the sample runs again on FOLDING_FLAGS' build (review 34's N01, N04).
    SANITIZE,
    "-fsigned-char",
    # A local read before it is written is undefined on a Mac (LLVM may fold it to any value).
    # This -O0 build keeps every local in the stack frame, uninitialized, and the worker runs
    # each sample on two fillings of the stack (0xfe bytes, then zeros: porter/emulate/
    # worker_runtime.c): where the answers differ, the kernel read one, and the sample is not
    # proven (review 40's U01, U02, U19, U20, U25). The optimizing builds, whose locals live in
    # registers, fill them with a pattern instead (PATTERN_FILLED).
    # Metal attributes ([[buffer(0)]], [[host_name(..)]]) and `#pragma unroll` are unknown to g++.
    "-w",
    "-fno-diagnostics-show-caret",
    # Each library keeps its own registry and functors even when several are loaded
    # into one process (inline variables are otherwise STB_GNU_UNIQUE, shared by all).
    "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-fno-gnu-unique",
    # Less code to generate at -O0; kernels neither throw nor unwind.
    "-fno-exceptions", "-fno-rtti", "-fno-asynchronous-unwind-tables", "-fno-threadsafe-statics",
]

# The build a sample that overflowed a signed integer runs on again: the overflow is undefined,
# g++ at -O2 folds code on the assumption that it never happens as clang may (`a + 1 < a`
# false, an abs of a negation never negative); the other families stay noted.
PATTERN_FILLED = "-ftrivial-auto-var-init=pattern"
FOLDING_FLAGS = [SANITIZE.replace(",signed-integer-overflow", "") if f == SANITIZE else f
                 for f in FLAGS] + ["-O2", PATTERN_FILLED]

# The Metal language versions PyTorch builds its kernel files with (macOS 14: 3.1, macOS 15: 3.2,
# macOS 26: 4.0). The emulator's library is built under the first; a file is checked under each
# (porter.emulate.versions).
METAL_VERSIONS = (310, 320, 400)
PRIMARY_VERSION = METAL_VERSIONS[0]


def contract_flags() -> list[str] | None:
    """A copy of _contract_flags(): asked for every sample, and the CPU does not change."""
    flags = _contract_flags()
    return None if flags is None else list(flags)


@functools.cache
def _contract_flags() -> tuple[str, ...] | None:
    """The flags of a build that contracts `a * b + c` into one fused multiply-add wherever it can,
    or None where this CPU cannot run such a build.

    Whether Apple's compiler contracts in PyTorch's kernels (MTLMathModeSafe) is not documented
    where porter can read it, and an fma rounds once where a*b+c rounds twice: `porter test` runs
    every sample on this build as well: a failing one is red only if it fails both ways, and
    a passing one that fails here is not proven (porter.harness.verdicts). g++ forms fmas in its
    widening-multiply pass, which runs from -O1 with -fexpensive-optimizations; the later
    -ffp-contract wins over FLAGS' `off`. Its value numbering (FRE, PRE, the dominator pass)
    runs first and makes one product of two equal ones, leaving nothing to fuse: clang
    contracts each expression as written (`fa * fa - fa * fa` is 0 with them, the rounding
    error of `fa * fa` without: review 27's N16), so they are off."""
    import platform
    machine = platform.machine().lower()
    as_written = ["-O1", "-fexpensive-optimizations", "-ffp-contract=fast", "-fno-tree-fre",
                  "-fno-tree-pre", "-fno-tree-dominator-opts", PATTERN_FILLED]
    if machine in ("aarch64", "arm64"):
        return tuple(as_written)
    if machine in ("x86_64", "amd64"):
        try:
            cpu = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        flags = next((line for line in cpu.splitlines() if line.startswith("flags")), "")
        if " fma" not in flags:
            return None
        return (*as_written, "-mfma")
    return None


def version_flags(flags: list[str], version: int = PRIMARY_VERSION,
                  display_path=None) -> list[str]:
    """`flags` for a build under `version`; with the kernel file's directory as the first place
    a quoted include is looked up (headers.beside) where `display_path` names one."""
    return [*flags, f"-D__METAL_VERSION__={version}", *headers.quote_flags(display_path)]


# g++'s (and the front end's clang's) spelling of a type in diagnostics -> Metal's name.
GXX_TYPES = {
    "metal::vec<float, 2>": "float2", "metal::vec<_Float16, 2>": "half2",
    "metal::vec<bfloat, 2>": "bfloat2", "long unsigned int": "ulong",
    "short unsigned int": "ushort", "unsigned int": "uint", "unsigned char": "uchar",
    "signed char": "char", "long int": "long", "short int": "short", "_Float16": "half",
    "bfloat": "bfloat", "__bf16": "bfloat", "float": "float", "int": "int", "char": "char", "bool": "bool",
}


def cache_dir() -> Path:
    return porter_cache_dir("emulate")


# Reads outside any object (past a thread-space array through a pointer, before a table, past
# an array of a checkout header): AddressSanitizer's redzones, reported and not fatal, so that
# the worker notes them (worker_runtime.c) as it notes a guard page's fault. The -O0 build the
# samples run on has them (base_flags); the folding build, which models clang's folds, has not.
ADDRESS_CHECK = ["-fsanitize=address", "-fsanitize-recover=address"]
# libasan's switches in the worker: every report (one per bad read, not one per place in the
# code), none fatal, no symbolizing; a fault stays the signal it was (the parent names it: a
# SIGFPE is an integer division that trapped);
# kernel libraries loaded side by side keep globals of one name each (-fvisibility=hidden)
ASAN_OPTIONS = ("detect_leaks=0:halt_on_error=0:suppress_equal_pcs=0:symbolize=0:handle_segv=0:"
                "handle_sigbus=0:handle_sigfpe=0:allow_user_segv_handler=1:"
                "detect_odr_violation=0:verify_asan_link_order=0")


@functools.cache
def address_runtime(cxx: str) -> str | None:
    """The compiler's libasan, where it has one and g++ can link against it; None elsewhere
    (a build without it: reads past a thread-space array are not seen, docs/testing.md)."""
    if os.environ.get("PORTER_NO_ASAN"):
        return None
    try:
        proc = subprocess.run([cxx, "-print-file-name=libasan.so"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    path = proc.stdout.strip()
    if proc.returncode != 0 or not os.path.isabs(path) or not os.path.exists(path):
        return None
    return os.path.realpath(path)


def base_flags(cxx: str) -> list[str]:
    """FLAGS, with ADDRESS_CHECK where the compiler has libasan: the -O0 build's, the probe's
    and the syntax checks' (one precompiled prelude serves them all)."""
    return FLAGS + (ADDRESS_CHECK if address_runtime(cxx) is not None else [])


def worker_environment() -> dict[str, str] | None:
    """The environment of a process that loads kernel libraries built with base_flags: libasan
    preloaded (it must come first) with ASAN_OPTIONS; None where no build has it."""
    try:
        runtime = address_runtime(compiler())
    except PorterError:
        return None
    if runtime is None:
        return None
    preload = " ".join(p for p in (runtime, os.environ.get("LD_PRELOAD", "")) if p)
    return {**os.environ, "LD_PRELOAD": preload, "ASAN_OPTIONS": ASAN_OPTIONS}


def start_worker(worker: Path, fd: int | None = None) -> subprocess.Popen:
    """A kernel worker process (porter/emulate/worker.py, stdlib only) on pipes, its runtime
    library named and libasan preloaded where the build has them; `fd`: the memory it shares
    with porter, inherited (none for a worker that only reads registrations). Without the
    `site` module: its start-up under the preloaded libasan (its allocator serves every .pth
    file's reading) was 40 ms of a worker's 70 ms of CPU, and a `--watch` round starts one per
    lane (porter.emulate.client)."""
    runtime = worker_runtime()
    argv = [sys.executable, "-S", str(worker), "" if fd is None else str(fd),
            str(runtime) if runtime else ""]
    return subprocess.Popen(argv, pass_fds=() if fd is None else (fd,),
                            env=worker_environment(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise PorterError("no C++ compiler found for --device emulate",
                          hint="install g++ (apt-get install g++) or set CXX")
    return cxx


def compiler_id(cxx: str) -> str:
    # stat instead of `--version`: a cached rebuild must cost milliseconds.
    path = shutil.which(cxx) or cxx
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}:{st.st_size}:{int(st.st_mtime)}"


# The modules whose code decides what a build and its checks make of a text: the kernel cache's
# entries (objects, quarantines, Metal-language findings) are of porter's code too, so a porter
# that checks more never reads a verdict an older one cached
_BUILD_MODULES = ("build.py", "build_check.py", "dialect.py", "groups.py", "headers.py",
                  "metal_builtins.py", "frontend.py", "probe.py", "toolchain.py",
                  "fused_kernels.py", "guarded_arrays.py", "library_reader.py", "frontend_memo.py",
                  "include_graph.py")
_code_digest: str | None = None


def _porter_code() -> str:
    global _code_digest
    if _code_digest is None:
        h = hashlib.sha256()
        here = Path(__file__).parent
        for name in _BUILD_MODULES:
            path = here / name      # a module renamed or merged away is simply not hashed
            h.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b""))
        _code_digest = h.hexdigest()
    return _code_digest


_frontend_digest: str | None = None


def _frontend_files() -> str:
    """A hash of the front end's Metal mode and library headers (frontend.py is one of
    _BUILD_MODULES)."""
    global _frontend_digest
    if _frontend_digest is None:
        h = hashlib.sha256()
        here = Path(__file__).parent
        for d in ("frontend_mode", "frontend_include"):
            for p in sorted((here / d).rglob("*")):
                if p.is_file():
                    h.update(p.name.encode() + b"\0" + p.read_bytes())
        _frontend_digest = h.hexdigest()
    return _frontend_digest


def cache_key(source_text: str, dirs: list[Path], flags: list[str], cxx: str) -> str:
    h = hashlib.sha256()
    h.update(b"porter-emulate-v6\0")     # v6: Metal's language and versions are checked
    h.update(_porter_code().encode())
    # the language check's Metal mode and library files (porter.emulate.frontend)
    h.update(b"frontend\0" + _frontend_files().encode())
    h.update(compiler_id(cxx).encode())
    h.update("\0".join(flags).encode())
    listed = headers.header_files(dirs)
    for f in listed:
        h.update(str(f.name).encode())
        h.update(f.read_bytes())
    # the headers a quoted include may reach beside the kernel file (version_flags' -iquote)
    beside = None
    for i, flag in enumerate(flags[:-1]):
        if flag == "-iquote":
            beside = Path(flags[i + 1])
            for f in headers.quoted_headers(beside):
                h.update(str(f).encode() + b"\0" + f.read_bytes())
    # and every other file its includes reach (a header elsewhere in the checkout); an include
    # whose file a macro names may read any file: no build is kept for such a text
    reached, computed = headers.reached_headers(source_text, dirs, beside)
    for f in sorted(set(reached) - set(listed)):
        h.update(str(f).encode() + b"\0" + f.read_bytes())
    if computed:
        h.update(os.urandom(16))
    h.update(source_text.encode())
    return h.hexdigest()[:32]


def precompiled_prelude(cxx: str, flags: list[str], dirs: list[Path]) -> Path | None:
    """A directory holding porter/prelude.h.gch (shim + c10/metal headers, parsed once per
    cache), or None when the compiler cannot make one (the plain header is used then)."""
    key_dirs = [d for d in dirs if d == headers.SHIM_DIR or (d / "c10" / "metal").is_dir()]
    h = hashlib.sha256(b"pch-v1\0" + compiler_id(cxx).encode() + "\0".join(flags).encode())
    for d in key_dirs:
        h.update(str(d).encode())
    for f in headers.header_files(key_dirs):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    pch_dir = cache_dir() / f"pch-{h.hexdigest()[:24]}"
    gch = pch_dir / "porter" / "prelude.h.gch"
    # the run compiles with its own hard link of the prelude, in its pin directory
    # (kernel_cache.pin): another run's eviction may take the cache's entry at any moment (four
    # runs on one evicting cache: "No such file or directory" publishing into an evicted entry)
    held_dir = kernel_cache.run_directory(cache_dir()) / pch_dir.name
    held = held_dir / "porter" / "prelude.h.gch"
    if held.is_file():
        return held_dir
    held.parent.mkdir(parents=True, exist_ok=True)
    if gch.is_file():
        kernel_cache.touch(pch_dir)
        try:
            kernel_cache.link_or_copy(gch, held)
            return held_dir
        except FileNotFoundError:
            pass                          # evicted since: built again below
    # pid and thread: EmulateBackend.prebuild builds in a thread beside the main one
    staged = held.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
    cmd = [cxx, *[f for f in flags if f != "-shared"], *(f"-I{d}" for d in dirs),
           "-x", "c++-header", str(headers.SHIM_DIR / "porter" / "prelude.h"), "-o", str(staged)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        staged.unlink(missing_ok=True)
        return None
    os.replace(staged, held)
    try:                                  # published for the next run, where it can be
        gch.parent.mkdir(parents=True, exist_ok=True)
        kernel_cache.link_or_copy(held, gch)
    except OSError:
        pass                              # evicted meanwhile, or another run published it
    return held_dir


def preprocess(cxx: str, flags: list[str], dirs: list[Path], tmpdir: Path, src: Path,
               extra_includes: tuple[str, ...] = ()) -> tuple[str | None, str | None]:
    """The kernel translation unit as the compiler sees it (`-E`; the precompiled prelude is
    named, not expanded): (text, None), or (None, the compiler's errors)."""
    pch = precompiled_prelude(cxx, flags, dirs)
    out = src.with_suffix(f".{abs(hash(tuple(flags))) % 10**8}.ii")
    cmd = [cxx, *[f for f in flags if f != "-shared"], *([f"-I{pch}"] if pch else []),
           f"-I{src.parent}", *(f"-I{d}" for d in dirs), "-include", "porter/prelude.h",
           *(a for inc in extra_includes for a in ("-include", inc)),
           "-E", "-fpch-preprocess", "-x", "c++", str(src), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        return None, proc.stderr or proc.stdout or f"{cxx} exited with {proc.returncode}"
    return out.read_text(encoding="utf-8", errors="replace"), None


# ----------------------------------------------------------------- diagnostics

LOCATION_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<kind>error|note|warning): (?P<msg>.*)$")
IMPL_RE = re.compile(r"porter::(?:Unary|UnaryAlpha|Binary|BinaryAlpha|Ternary)<(\w+)_functor, ")
MISMATCH_RE = re.compile(r"registered_output_type_differs_from_functor_result<")
# porter's words for a registration whose output type is not its functor's result, whichever
# compiler found it (g++'s check_output, the front end's static_assert of the registration macro)
REGISTERED_AS = " registered with output type "


def wrong_output(name: str, declared: str, in_type: str, actual: str) -> str:
    return f"{name}{REGISTERED_AS}{declared} for input {in_type}, but {name}_functor returns {actual}"


def diagnostic_blocks(stderr: str) -> list[list[str]]:
    """Split g++ output into one block per error: its context lines, then the error."""
    blocks, current = [], []
    for line in stderr.splitlines():
        current.append(line)
        m = LOCATION_RE.match(line)
        if m and m.group("kind") == "error":
            blocks.append(current)
            current = []
    return blocks


def metal_type(spelled: str) -> str:
    for gxx in sorted(GXX_TYPES, key=len, reverse=True):
        if spelled.startswith(gxx):
            return GXX_TYPES[gxx]
    return spelled.split(",")[0].split(">")[0].strip()


def site_line(block: list[str], display_path) -> int | None:
    """Line of the user's file where the failing thing was required or expanded."""
    best = None
    prefix = f"{display_path}:"
    for line in block:
        if line.startswith(prefix):
            m = re.match(r"(\d+):", line[len(prefix):])
            if m:
                best = int(m.group(1))
    return best


def error_text(block: list[str]) -> str:
    m = LOCATION_RE.match(block[-1])
    return m.group("msg") if m else block[-1]


def first_error(stderr: str, display_path) -> str:
    blocks = diagnostic_blocks(stderr)
    if not blocks:
        return f"{display_path}: compiler failed: {stderr.strip()[:300]}"
    m = LOCATION_RE.match(blocks[0][-1])
    return f"{m.group('file')}:{m.group('line')}: {m.group('msg')}" if m else blocks[0][-1]


RUNTIME_SOURCE = Path(__file__).with_name("worker_runtime.c")


def worker_runtime() -> Path | None:
    """The worker's runtime library (porter/emulate/worker_runtime.c: guard pages after the
    kernel file's program-scope `constant` arrays, and the stack filled before each run), built
    once per cache and compiler; None where it cannot be built (the worker then runs kernels
    directly: the arrays stay where the kernel library put them, and a local read before it is
    written reads what the stack held)."""
    try:
        cxx = compiler()
        source = RUNTIME_SOURCE.read_bytes()
    except (PorterError, OSError):
        return None
    digest = hashlib.sha256(b"runtime-v1\0" + compiler_id(cxx).encode() + b"\0" + source)
    target = cache_dir() / f"runtime-{digest.hexdigest()[:24]}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
    proc = subprocess.run([cxx, "-x", "c", "-O2", "-fPIC", "-shared", str(RUNTIME_SOURCE),
                           "-o", str(staged)], capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        staged.unlink(missing_ok=True)
        return None
    os.replace(staged, target)
    return target
