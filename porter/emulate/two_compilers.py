"""Where the emulator's g++ build would read a kernel file otherwise than Apple's Metal compiler.

The front end (porter.emulate.frontend) checks a kernel file under Metal's macros; the emulator
then runs what g++ builds of the same text. Both agree where the text asks only what porter
gives both compilers alike. A positive model of that, over the kernel file and every checkout
header it includes (review 31):

- a conditional directive (`#if`, `#ifdef`, ...) may test `__METAL_VERSION__`, whether
  `__METAL__` or `__HAVE_BFLOAT__` is defined (not their values: review 33's C30, C31), a macro
  both stand-ins define as Metal's specification does (`FLT_MAX`), a macro the files define or
  undefine themselves, and a name that neither stand-in defines and that lies outside Apple's
  (reserved names and `METAL_*`); anything else (`__clang__`, `__linux__`, `__cplusplus`,
  `__has_include(<cmath>)`, `__METAL_MACOS__`, `METAL_FUNC`, a libc macro such as
  `SIG_ATOMIC_MAX` that only g++'s shim sees, a keyword such as `device` that the stand-ins
  spell as a macro) may take another branch in g++ than on a Mac (L05-L09; C33; review 34's
  P01, P02, P05);
- code may not use a macro g++ predefines (`__x86_64__`, `__GNUC__`): its value is g++'s there;
  nor one whose value is the build's (`__FILE__`, `__DATE__`: C07); a trigraph is read
  otherwise by C++14 and C++17 (C32);
- an attribute is one of Metal's, a C++ standard one, or one both compilers read alike without
  changing a value; GCC's `optimize` (clang ignores it, g++ folds `x != x` under
  `finite-math-only`) and any other is not proven (L03, L04, L11).
"""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

from porter.source.cpp_scan import code_mask

# what porter defines for the front end (frontend.defines) and the shim (porter/metal.h) alike,
# with the value Apple's compiler gives it (a version number)
AGREED = frozenset({"__METAL_VERSION__"})
# ... and those whose being defined is modelled, not their value (`#if __HAVE_BFLOAT__ == 1`
# asks what porter does not know: review 33's C30, C31); `__METAL_MACOS__` under every version
# is not known either (C33: a measurement says metal4.0 does not define it)
DEFINED_ONLY = frozenset({"__METAL__", "__HAVE_BFLOAT__"})
# macros whose value differs between a Mac's build and the emulator's whatever the compiler
# (the file's path, the build's time), and `__COUNTER__`, which counts differently per build
_BUILD_VALUED = frozenset({"__FILE__", "__BASE_FILE__", "__FILE_NAME__", "__DATE__", "__TIME__",
                           "__TIMESTAMP__", "__COUNTER__"})
# a trigraph: replaced in C++14 (Metal 3.x, as the front end reads it), kept in C++17 (the
# emulator's g++), review 33's C32
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")

# attributes whose reading is the same in both, or that only Metal reads (g++ ignores them):
# Metal's (MSL §5.2-§5.9, §4), C++'s standard ones, and clang/GCC ones that change no value
ATTRIBUTES = frozenset({
    # Metal: arguments, kernels, functions
    "buffer", "texture", "sampler", "threadgroup", "thread_position_in_grid",
    "thread_position_in_threadgroup", "thread_index_in_threadgroup",
    "threadgroup_position_in_grid", "threads_per_grid", "threads_per_threadgroup",
    "threadgroups_per_grid", "thread_index_in_simdgroup", "thread_index_in_quadgroup",
    "simdgroup_index_in_threadgroup", "quadgroup_index_in_threadgroup",
    "simdgroups_per_threadgroup", "quadgroups_per_threadgroup", "threads_per_simdgroup",
    "dispatch_threads_per_threadgroup", "dispatch_simdgroups_per_threadgroup",
    "dispatch_quadgroups_per_threadgroup", "grid_origin", "grid_size", "stage_in",
    "host_name", "kernel", "visible", "stitchable", "user", "function_constant", "id",
    "max_total_threads_per_threadgroup", "required_threads_per_threadgroup", "raster_order_group",
    "position", "payload", "thread_execution_width",
    # C++ (§9.12 of C++17, C++20's likely/unlikely)
    "maybe_unused", "nodiscard", "noreturn", "deprecated", "fallthrough", "likely", "unlikely",
    "carries_dependency",
    # clang/GCC ones that change what is inlined or kept, never a value
    "always_inline", "noinline", "unused", "used", "visibility", "aligned", "packed",
    # porter's front end spells Metal's address spaces and kernels with these
    "address_space", "annotate",
})

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef)\b(.*)$")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*(?:define|undef)[ \t]+([A-Za-z_]\w*)", re.M)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_RESERVED = re.compile(r"^(?:__|_[A-Z])")
_GNU_ATTRIBUTE = re.compile(r"__attribute__\s*\(\(")
_STD_ATTRIBUTE = re.compile(r"\[\[")


def _reserved(name: str) -> bool:
    return bool(_RESERVED.match(name))


@lru_cache(maxsize=4)
def gxx_predefined(cxx: str) -> frozenset:
    """The macros g++ predefines for the emulator's build (-std=c++17)."""
    try:
        done = subprocess.run([cxx, "-std=c++17", "-dM", "-E", "-x", "c++", "/dev/null"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(m.group(1) for m in _DEFINE.finditer(done.stdout))


def _joined(mask: str) -> str:
    """Continued lines joined, the line count kept (a directive's rest read as one line)."""
    out, held = [], 0
    lines = mask.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        held = 0
        while line.endswith("\\") and i + held + 1 < len(lines):
            held += 1
            line = line[:-1] + " " + lines[i + held]
        out.append(line)
        out.extend([""] * held)
        i += held + 1
    return "\n".join(out)


def files_read(text: str, dirs: list[Path]) -> list[tuple[Path, str]]:
    """(path, text) of each header `text` includes, directly or not, found in `dirs` (the
    checkout's and the installed c10/metal; the shim's are porter's own, and read alike)."""
    seen: dict[Path, str] = {}
    todo = [text]
    while todo:
        for name in _INCLUDE.findall(code_mask_keep_includes(todo.pop())):
            for d in dirs:
                path = d / name
                if path.is_file():
                    if path.resolve() not in seen:
                        try:
                            seen[path.resolve()] = (path, path.read_text(encoding="utf-8",
                                                                         errors="replace"))
                        except OSError:
                            break
                        todo.append(seen[path.resolve()][1])
                    break
    return list(seen.values())


@lru_cache(maxsize=64)
def code_mask_keep_includes(text: str) -> str:
    """Comments blanked, the include lines kept as written (a header's name is a string).
    Kept by the text: every op of a run, and every round of `--watch`, reads the same headers
    (c10/metal's special_math.h alone is ~100 kB of masking)."""
    mask = code_mask(text)
    lines, kept = mask.split("\n"), text.split("\n")
    return "\n".join(k if re.match(r'^[ \t]*#[ \t]*include\b', m) else m
                     for m, k in zip(lines, kept))


# headers of Apple's SDK that Metal's compiler finds and porter's front end does not model
# (review 34's L03: <simd/simd.h>, shared between a .metal file and host code); a Mac builds
# them, so "does not build" would be a false red and green a guess
_APPLE_HEADER = re.compile(r"^simd/")


def apple_header(files: list[tuple[str, str]]) -> tuple[str, int, str] | None:
    """(file, line, header) of the first include of an Apple SDK header porter does not
    model, over `files` ((display name, text), the kernel file first), or None."""
    for name, text in files:
        mask = code_mask_keep_includes(text)
        for m in _INCLUDE.finditer(mask):
            if _APPLE_HEADER.match(m.group(1)):
                return name, mask.count("\n", 0, m.start()) + 1, m.group(1)
    return None


@lru_cache(maxsize=64)
def _joined_mask(text: str) -> str:
    """_joined of the text's code mask, kept by the text (code_mask_keep_includes)."""
    return _joined(code_mask(text))


def first_unlike(files: list[tuple[str, str]], cxx: str) -> tuple[str, int, str] | None:
    """(file, line, why) of the first place where g++ may build the text otherwise than
    Metal's compiler, over `files` ((display name, text), the kernel file first), or None."""
    for name, text in files:
        trigraph = _TRIGRAPH.search(text)
        if trigraph:
            return (name, text.count("\n", 0, trigraph.start()) + 1,
                    f"the trigraph `{trigraph.group()}` is replaced under Metal 3.x (C++14) and "
                    "kept by the emulator's g++ (C++17): the two read other code; write it "
                    "otherwise")
    masks = [(name, _joined_mask(text)) for name, text in files]
    defined = {m.group(1) for _, mask in masks for m in _DEFINE.finditer(mask)}
    predefined = None
    for name, mask in masks:
        for number, line in enumerate(mask.split("\n"), 1):
            directive = _DIRECTIVE.match(line)
            if directive:
                rest = directive.group(2)
                asked = _defined_only(directive.group(1), rest)
                for word in _NAME.findall(rest):
                    if word == "defined" or word in AGREED or \
                            word in DEFINED_ONLY and word in asked:
                        continue
                    what = _unknown_macro(word, defined, cxx)
                    if what:
                        return (name, number,
                                f"`#{directive.group(1)}` tests {what}: the branch a Mac builds "
                                "is not known here; test `__METAL_VERSION__`, `__HAVE_BFLOAT__` "
                                "or a macro of the file")
                continue
            if line.lstrip().startswith("#") and not re.match(r"^[ \t]*#[ \t]*define\b", line):
                continue
            for word in _NAME.findall(line):
                if word in _BUILD_VALUED:
                    return (name, number,
                            f"`{word}` differs between a Mac's build and the emulator's (the "
                            "file's path, the build's time): what a Mac computes from it is not "
                            "known here")
                if not _reserved(word) or word in AGREED or word in defined:
                    continue
                if predefined is None:
                    predefined = gxx_predefined(cxx)
                if word in predefined:
                    return (name, number,
                            f"`{word}` is a macro g++ predefines: the emulator's build reads g++'s "
                            "value, and what Apple's Metal compiler gives it is not known here")
            found = _attribute(line)
            if found:
                return (name, number,
                        f"the attribute `{found}` is not one porter knows Metal's compiler and g++ "
                        "to read alike (g++ honours GCC's `optimize`, which clang ignores): what a "
                        "Mac builds is not known here; remove it")
    return None


def _unknown_macro(word: str, defined: set[str], cxx: str) -> str | None:
    """Why a Mac may answer a condition on `word` otherwise than the emulator's g++ (what
    follows "tests"), or None where both answer alike. Known alike: a macro both stand-ins
    define as Metal's specification does (`FLT_MAX`, `INFINITY`, `M_PI_F`), a macro of the files
    themselves, and a name nobody defines outside Apple's own (reserved names and `METAL_*`,
    which its <metal_stdlib> uses: `METAL_FUNC`, review 34's P05). The stand-ins' spellings of
    Metal's keywords (`device`: a macro here, a keyword there: P02), a macro only one of them
    defines (`SIG_ATOMIC_MAX` from the libc headers g++'s shim includes: P01) and any other
    reserved name are not known alike."""
    metal, gxx = stand_in_macros(cxx)
    if word in metal and word.islower():
        return (f"`{word}`, a keyword of Metal that porter's stand-ins define as a macro and "
                "Apple's compiler does not")
    if word in gxx and word not in metal:
        return (f"`{word}`, which the emulator's g++ build gets from the C++ library headers "
                "its shim includes and Metal's headers do not define")
    if word in metal and word not in gxx:
        return (f"`{word}`, which porter's model of Metal's headers defines and the emulator's "
                "g++ build does not")
    if word in metal and not _reserved(word) or word in defined:
        return None
    if word.startswith("__has_"):
        return f"`{word}`, which Apple's Metal compiler may answer otherwise than the emulator's g++"
    if word in metal or word in gxx:
        return (f"`{word}`, whose value porter does not model as Apple's Metal compiler gives it")
    if _reserved(word) or word.startswith("METAL_"):
        return (f"`{word}`, which Apple's Metal compiler or its <metal_stdlib> may define "
                "(reserved names and `METAL_*` are theirs) and porter's stand-ins do not")
    return None


@lru_cache(maxsize=4)
def stand_in_macros(cxx: str) -> tuple[frozenset, frozenset]:
    """(the macros porter's model of Metal defines once <metal_stdlib> is included: the front
    end's Metal mode; those the emulator's g++ build sees from its shim and the C++ library
    headers the shim includes), c10/metal's left out of both (they are the files' own)."""
    from porter.emulate import frontend, headers
    version = frontend.CXX17_VERSION - 90          # any version PyTorch builds: names alike
    runs = {
        "metal": ([frontend.compiler(), "-dM", "-E", "-x", "c++", frontend.std(version), "-undef",
                   "-nostdinc", "-nostdinc++", *frontend.defines(version), "-include",
                   str(frontend.MODE_HEADER), f"-I{frontend.LIBRARY_DIR}", "-"],
                  "#include <metal_stdlib>\n"),
        "gxx": ([cxx, "-std=c++17", "-dM", "-E", "-x", "c++", f"-I{headers.SHIM_DIR}",
                 f"-D__METAL_VERSION__={version}", "-include", "porter/metal.h", "-"], ""),
    }
    found = {}
    for key, (cmd, text) in runs.items():
        try:
            done = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=60)
            found[key] = frozenset(m.group(1) for m in _DEFINE.finditer(done.stdout))
        except (OSError, subprocess.SubprocessError):
            found[key] = frozenset()
    return found["metal"], found["gxx"]


def _defined_only(kind: str, rest: str) -> set[str]:
    """The names a condition asks only whether they are defined (`#ifdef X`, `defined(X)`),
    never their value."""
    if kind in ("ifdef", "ifndef", "elifdef", "elifndef"):
        return set(_NAME.findall(rest)[:1])
    inside = {a or b for a, b in _DEFINED.findall(rest)}
    valued = set(_NAME.findall(_DEFINED.sub(" ", rest)))
    return inside - valued


_DEFINED = re.compile(r"\bdefined\s*\(\s*([A-Za-z_]\w*)\s*\)|\bdefined\s+([A-Za-z_]\w*)")


def _attribute(line: str) -> str | None:
    """The first attribute of the line outside ATTRIBUTES, or None."""
    for opener, close in ((_GNU_ATTRIBUTE, "))"), (_STD_ATTRIBUTE, "]]")):
        for m in opener.finditer(line):
            end = line.find(close, m.end())
            body = line[m.end():end if end >= 0 else len(line)]
            # `using ns:` prefixes, then each attribute's name (its arguments skipped)
            body = re.sub(r"^\s*using\s+\w+\s*:", "", body)
            depth, names, current = 0, [], ""
            for ch in body:
                if ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                elif depth == 0:
                    if ch == ",":
                        names.append(current)
                        current = ""
                    else:
                        current += ch
            names.append(current)
            for raw in names:
                spelled = raw.strip()
                if not spelled:
                    continue
                base = spelled.split("::")[-1].strip().strip("_")
                if base not in ATTRIBUTES or ("::" in spelled and spelled.split("::")[0].strip()
                                              not in ("metal", "clang")):
                    return spelled
    return None
