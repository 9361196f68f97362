"""porter's Metal front end: a kernel file checked the way a Mac's metallib build compiles it,
by a real C++ front end (libclang, the PyPI `libclang` wheel) in a Metal mode porter defines.

The mode (porter/emulate/frontend_mode/metal_mode.h) gives clang Metal's language: `half` and
`bfloat`, vectors as clang's extended vectors (Metal's swizzles), the address spaces as real
qualifiers (`device`, `constant`, `threadgroup`; `thread` is the default one), `kernel`. Metal's
library is a declarations header (porter/emulate/frontend_include/metal_stdlib). The kernel
file is compiled with the checkout's own c10/metal headers and their `REGISTER_*` macros, so
every registration's kernel template is instantiated, as the metallib build does, under
`__METAL_VERSION__` = each of toolchain.METAL_VERSIONS, with `__METAL_MACOS__` and
`__HAVE_BFLOAT__` defined as Apple's compiler defines them for macOS and Metal 3.1 and later.

The preprocessor is g++'s (`-E`, line markers kept, no shim); a few of Metal's spellings that
C++ has no syntax for are rewritten on the preprocessed text, line for line (so every message
keeps its file and line): a vector constructor `float4(a.xy, 0, 1)` and `static_cast<float2>`
of a vector become calls of the mode's `__metal_vec_ctor` (which checks the element count),
a `1.0h` literal is `1.0f16`, `[[host_name("x")]]` (recorded: kernel names are checked
unique across the files of one metallib) and `[[kernel]]` become clang attributes, and a
`threadgroup` or `constant` object declared in a function body is given static storage (clang
allows no automatic variable in another address space; Metal places such variables itself).

Then clang's errors, and what Metal's specification forbids, checked on the AST (RULES: each
names its section of the Metal Shading Language Specification). Whatever clang rejects is a
build error of the file at its line, with clang's message.

Results are cached by a hash of the file, the headers, the mode and the version, and each
functor's registrations by what they depend on (_check); the versions parse in threads
(libclang's calls release the GIL).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

from porter import exit_codes
from porter.emulate import frontend_memo, headers, kernel_cache
from porter.errors import PorterError
from porter.runtime.whole_file import write_whole
from porter.emulate.metal_builtins import MULTIPLY_ADD_FORMULAS
from porter.emulate.toolchain import METAL_VERSIONS, cache_dir, compiler, metal_type, wrong_output

MODE_HEADER = Path(__file__).parent / "frontend_mode" / "metal_mode.h"
LIBRARY_DIR = Path(__file__).parent / "frontend_include"
# Metal 4.0 is C++17; before it, C++14 (MSL specification §1.5.4 / §2.1 "Metal and C++")
CXX17_VERSION = 400
SPEC = "Metal Shading Language Specification"

# What the specification forbids that a C++ front end accepts, each with its section. The
# section numbers are those of the MSL 3.x specification's "Metal and C++14" list (§1.5.4:
# "Metal does not support lambda expressions (before 4.0), dynamic_cast, type identification,
# new and delete, noexcept, goto, register, thread_local, virtual functions, exception
# handling"), §2.1 (scalar types: no double, no long long), §4.2 (program-scope variables are
# in `constant`), §5.1 (kernel pointer arguments carry an address space).
# C++'s and clang's type keywords that are not Metal's (§2.1 names the language's whole set of
# scalar types: bool, char, uchar, short, ushort, int, uint, long, ulong, half, bfloat, float),
# refused where spelled; whatever the spelling (an attribute's `mode(DF)`, a `1LL` literal),
# the AST rules read the type clang resolved (_FOREIGN_KINDS)
FOREIGN_TYPES = ("wchar_t", "char8_t", "char16_t", "char32_t", "__int128", "__int128_t",
                 "__uint128_t", "__float128", "__ibm128", "_Float16", "__fp16", "__bf16",
                 "_Float32", "_Float32x", "_Float64", "_Float64x", "_Float128", "_Complex",
                 "__complex__", "_Imaginary", "_BitInt", "_ExtInt", "_Accum", "_Fract", "_Sat",
                 "_Decimal32", "_Decimal64", "_Decimal128", "__int64", "__int32", "__int16",
                 "__int8")
RULES = {
    "lambda": "lambda expressions are not supported before Metal 4.0 ({spec} §1.5.4; "
              "PyTorch builds its kernels for Metal 3.1)",
    "exception": "Metal has no exceptions (`{what}`; {spec} §1.5.4)",
    "goto": "Metal has no `goto` ({spec} §1.5.4)",
    "register": "Metal has no `register` storage class ({spec} §1.5.4)",
    "noexcept": "Metal has no `noexcept` ({spec} §1.5.4)",
    "virtual": "Metal has no virtual functions ({spec} §1.5.4)",
    "rtti": "Metal has no run-time type information (`{what}`; {spec} §1.5.4)",
    "new": "Metal has no dynamic allocation (`{what}`; {spec} §1.5.4)",
    "thread_local": "Metal has no `thread_local` ({spec} §1.5.4)",
    "double": "Metal has no `double` (use float; {spec} §2.1)",
    "long long": "Metal has no `long long` (Metal's `long` is 64 bits; {spec} §2.1)",
    "asm": "Metal has no inline assembly (`asm`: the language of {spec} has none, so a Mac "
           "building it is not proven)",
    "builtin": "Metal's library has no compiler builtin (`__builtin_*`, `__sync_*`, "
               "`__atomic_*`): a Mac building one is not proven (call Metal's function, "
               "<metal_stdlib>, or its atomic_* types and functions; {spec} §6)",
    "implicit builtin": "Metal's library has no `{what}`: a compiler builtin (no header "
                        "declares it), so a Mac building it is not proven ({spec} §6)",
    "static member": "Metal has no static data member outside the `constant` address space "
                     "(it is a program-scope variable: `static constexpr constant T name = ...;`; "
                     "{spec} §4.2)",
    "variadic": "Metal has no C variadic function (`...` parameters; Metal has no va_list, so a "
                "Mac building it is not proven; a template parameter pack is Metal's way)",
    "static": "Metal has no static local variable outside the `constant` address space "
              "(`constant T name = ...;`, or a plain local; {spec} §4.2)",
    "constant initializer": "a program-scope variable's initializer must be a compile-time "
                            "constant ({spec} §4.2): a call of a function that is not "
                            "constexpr, as Metal's library functions are not, is not one",
    "program scope": "Metal has no program-scope variable outside the `constant` address space "
                     "(`constant T name = ...;`; {spec} §4.2)",
    "kernel pointer": "a kernel's pointer or reference argument `{what}` needs an address space "
                      "(device, constant or threadgroup; {spec} §5.1)",
    "pointer": "the {what} needs an address space (thread, device, constant or threadgroup): "
               "Metal 3.x, which PyTorch builds for, has no default address space for a "
               "pointer or reference ({spec} §4)",
    "threadgroup local": "a `threadgroup` variable (`{what}`) may be declared only in a kernel "
                         "function itself, not in a function it calls ({spec} §4.4)",
    "std": "Metal has no C++ standard library (`std::`; Metal's is `metal::`, <metal_stdlib>; "
           "{spec} §1.5.4)",
    "include": "Metal has no C++ standard library or system headers (#include <{what}>; a kernel "
               "file includes <metal_*> and the checkout's own headers; {spec} §1.5.4)",
    "vla": "Metal has no variable-length array (an array's size must be a constant expression; "
           "C++14 has none, {spec} §1.5.4)",
    "constant write": "Metal's `constant` address space is read-only ({spec} §4.2)",
    "keyword": "`{what}` is a Metal keyword (a function qualifier), not a name ({spec} §5.1)",
    "address space cast": "Metal has no cast of a pointer or reference to another address "
                          "space (`{what}`; {spec} §4)",
    "bfloat conversion": "Metal converts {what} to bfloat only explicitly (`bfloat(x)`, "
                         "`static_cast<bfloat>(x)`; {spec} §2.1)",
    "bool vector": "Metal's `{what}` takes a bool vector, and `{type}` does not convert to one "
                   "(vectors convert only explicitly; a comparison of vectors is a bool vector; "
                   "{spec} §6.4)",
    "duplicate name": "kernel name \"{what}\" is also defined at {other}: the files of one "
                      "metallib are linked together and a kernel name must be unique ({spec} "
                      "§5.1.1, host_name)",
}
# CXTypeKind ids (clang-c/Index.h) of the types above, read on clang's canonical type, and
# those of pointers, references, arrays and vectors, whose element type is read instead
_FOREIGN_KINDS = {22: "double", 23: "double", 11: "long long", 19: "long long",
                  12: "__int128", 20: "__int128", 15: "wchar_t", 6: "char16_t", 7: "char32_t",
                  30: "__float128", 31: "__fp16", 40: "__ibm128", 100: "_Complex",
                  **{k: "_Accum" for k in range(33, 39)}}
_WRAPPING_KINDS = frozenset({101, 103, 104, 112, 113, 114, 115, 116, 176})
# metal_mode.h's address spaces by clang's number
_SPACES = {0: "thread", 1: "device", 2: "constant", 3: "threadgroup"}
# Metal's function qualifiers, keywords of the language (§5.1)
_KEYWORDS = frozenset({"kernel", "vertex", "fragment"})
# declarations a name is given to (clang.cindex's CursorKind names)
_DECLARATIONS = ("VAR_DECL", "PARM_DECL", "FIELD_DECL", "FUNCTION_DECL", "CXX_METHOD",
                 "STRUCT_DECL", "CLASS_DECL", "TYPEDEF_DECL", "TYPE_ALIAS_DECL",
                 "ENUM_CONSTANT_DECL", "NAMESPACE", "FUNCTION_TEMPLATE", "CLASS_TEMPLATE")
# a C-style, reinterpret or const cast
_POINTER_CASTS = ("CSTYLE_CAST_EXPR", "CXX_REINTERPRET_CAST_EXPR", "CXX_CONST_CAST_EXPR")
# the argument of Metal's all/any/select that is a bool vector (porter's <metal_relational>
# takes clang's int-vector comparison results there too)
_BOOL_VECTOR_ARGUMENT = {"all": 0, "any": 0, "select": 2}
# builtins Metal code uses (Apple's own guidance names __builtin_expect for Metal shaders)
_METAL_BUILTINS = frozenset({"__builtin_expect"})
RULES.update({t: f"Metal has no `{t}` (its scalar types are bool, char, uchar, short, ushort, "
                 "int, uint, long, ulong, half, bfloat and float; {spec} §2.1)"
              for t in FOREIGN_TYPES})
# Not rules, and why (docs/testing.md says so too): recursion and function pointers. The
# C++14 list of §1.5.4 no longer names them (function pointers and recursive calls came with
# Metal 2.3/2.4): upstream's c10/metal/special_math.h has a template that calls itself
# (bessel_j1_forward) and c10/metal/atomic.h takes its operation as a function pointer, and
# both build on a Mac. Plain and template recursion are accepted alike.

_CLANG_ARGS = ["-x", "c++", "-nostdinc", "-nostdinc++", "-fsyntax-only",
               # Metal's floating literals are float (a `1.0` is no double)
               "-cl-single-precision-constant",
               # C++14 has no VLA: clang takes one as an extension, Metal refuses it
               "-Werror=vla-extension", "-Werror=vla",
               # a program-scope variable's initializer is a compile-time constant ({spec}
               # §4.2): one that needs code run first is an error (review 36's K20)
               "-Werror=global-constructors",
               # unknown attributes ([[buffer(0)]], [[thread_position_in_grid]]) are Metal's
               "-Wno-unknown-attributes", "-Wno-ignored-attributes",
               # `register` is the AST rule's (one message under every version)
               "-Wno-register", "-Wno-deprecated-register",
               # no limit: clang counts the errors porter then drops as Metal's (a struct
               # copied out of `constant` memory, one per registered kernel) towards it, and
               # threshold's 108 kernels stopped at "too many errors emitted" (a false red)
               "-ferror-limit=0"]


class View(NamedTuple):
    version: int
    errors: tuple[str, ...]              # `file:line: message`
    kernels: tuple[tuple[str, str], ...]  # (host name, `file:line`)
    # every pragma the file compiles, its headers' included, as the preprocessor leaves it
    # (`_Pragma("...")` and a macro building one are `#pragma` lines by then): (file, line,
    # `#pragma ...`)
    pragmas: tuple[tuple[str, int, str], ...] = ()
    # calls of the kernel file whose arguments change state in two places: C++ leaves their
    # order unspecified, and g++ (right to left) and Apple's clang (left to right) differ
    # (review 31's L12): (file, line, the call's text)
    unsequenced: tuple[tuple[str, int, str], ...] = ()
    # `a * b + c` in half or bfloat arithmetic inside a functor (review 35's N10): Apple's
    # compiler may contract it to one fma, which porter's g++ build never does for them:
    # (file, line, functor, "half", "bfloat" or "T" where the type is the template's)
    mul_adds: tuple[tuple[str, int, str, str], ...] = ()
    # each product of the kernel file that no `+`/`-` of its own expression takes: clang
    # (`-ffp-contract=on`) contracts a*b+c within one expression and never a product that
    # reaches its sum through a variable, a return or a call; g++'s contracted build fuses it
    # wherever the value flows, so that build sets each apart (build._lone_products_set_apart):
    # (line, the product's tokens, which of the line's products with those tokens it is, 0);
    # a `x *= y` as (line, its tokens, k, how many of them are x's)
    lone_products: tuple[tuple[int, tuple[str, ...], int, int], ...] = ()
    # the functor structs (by the name before `_functor`) whose code has no product and calls
    # nothing but conversions and constructors: no build can fuse a multiply-add of theirs,
    # so a kernel that runs only them needs no contracted build (emulator_device)
    fma_free: tuple[str, ...] = ()
    # arithmetic of a bfloat with a half (review 38's L34, L35): Metal converts bfloat
    # implicitly to float only, and what it makes of the mixture is not known here (clang
    # computes it in 16 bits, the shim in float): (file, line, the functor's name before
    # `_functor` or "*" for code outside every functor, which any kernel may call, the
    # registration dtype it mixes in or "*"): frontend._mixed_halves
    mixed_halves: tuple[tuple[str, int, str, str], ...] = ()


class NoFrontEnd(PorterError):
    """Without libclang nothing says what a Mac's compiler accepts: not proven, never green."""
    exit_code = exit_codes.FAILED


_NAMES_READY = threading.Lock()
_NAMES_DONE: list[bool] = []


def _clang():
    try:
        import clang.cindex as ci
    except ImportError:
        raise NoFrontEnd("not proven: porter's Metal front end needs libclang, which is not "
                         "installed, so nothing says whether a Mac compiles the kernel file",
                         hint="pip install libclang") from None
    if not _NAMES_DONE:
        with _NAMES_READY:
            if not _NAMES_DONE:
                _name_maps(ci)
                _NAMES_DONE.append(True)
    return ci


def _name_maps(ci) -> None:
    """Build the `.name` maps of the enumerations the AST rules read, once, before any thread
    does: clang.cindex builds each lazily, filling a dict another thread may read half-full
    (a parse in the front end's thread pool died of `KeyError: ExceptionSpecificationKind.NONE`)."""
    for enum in (ci.ExceptionSpecificationKind, ci.StorageClass, ci.CursorKind, ci.TypeKind,
                 getattr(ci, "TLSKind", None)):
        for member in getattr(enum, "_kinds", ()) if enum is not None else ():
            if member is not None:
                try:
                    member.name
                except Exception:       # noqa: BLE001 (a member with no name: none to build)
                    pass


def views(text: str, display_path, root, *, use_cache: bool = True,
          preprocessed=None) -> list[View]:
    """One view per Metal version PyTorch builds with, in toolchain.METAL_VERSIONS' order.
    Versions whose preprocessed text (and C++ standard) are the same are parsed once: the
    same tokens under the same language give the same verdict. `preprocessed`: called once
    the file's preprocessor runs are done, where there are any (the caller's own may start)."""
    from concurrent.futures import ThreadPoolExecutor

    root = Path(root) if root is not None else None
    keys = {v: _key(text, display_path, root, v) for v in METAL_VERSIONS}
    found = {v: _cached(keys[v], v) if use_cache else None for v in METAL_VERSIONS}
    missing = [v for v in METAL_VERSIONS if found[v] is None]
    if missing:
        with ThreadPoolExecutor(max_workers=len(missing)) as pool:
            pre = dict(zip(missing, pool.map(
                lambda v: _preprocess(text, str(display_path), root, v), missing)))
            if preprocessed is not None:
                preprocessed()
            groups: dict[tuple, list[int]] = {}
            for v in missing:
                groups.setdefault((pre[v], std(v)), []).append(v)
            groups = _merged(groups)
            results = list(pool.map(
                lambda vs: _check(text, str(display_path), root, vs[0], pre[vs[0]],
                                  use_cache=use_cache),
                groups.values()))
        for vs, result in zip(groups.values(), results):
            for v in vs:
                found[v] = result._replace(version=v)
                _store(keys[v], found[v])
    return [found[v] for v in METAL_VERSIONS]


# C++'s keywords and Metal's scalar types: no declaration of Metal's library changes them
_NOT_DECLARED = frozenset("""alignas alignof auto bool break case char const constexpr continue
decltype default do else enum explicit extern false float for half if inline int long namespace
noexcept nullptr operator return short signed sizeof static static_assert struct switch template
this true typedef typename uint uchar ushort ulong union unsigned using void volatile while
bfloat thread device constant threadgroup""".split())
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _merged(groups: dict[tuple, list[int]]) -> dict[tuple, list[int]]:
    """Version groups that one parse decides together: the same C++ standard, the same text of
    the user's files (kernel file, checkout headers), and a Metal library that differs between
    them only in declarations whose names the user's text never spells (Metal 3.2 adds
    memory_order_acquire, thread_scope, atomic_thread_fence to 3.1's <metal_atomic>: a file
    naming none of them, nor a name declared otherwise, compiles alike under both)."""
    out: dict[tuple, list[int]] = {}
    split: dict[tuple, tuple] = {}
    # a group is merged only with one of its own C++ standard: one alone in it is not read
    standards = [key[1] for key in groups if key[0][0] is not None]
    for key, vs in groups.items():
        text = key[0][0]
        if text is None or standards.count(key[1]) < 2:
            out[key] = vs
            continue
        user, library = [], []
        rows = text.split("\n")
        for (file, _), row in zip(_positions(rows), rows):
            if row.startswith("# "):
                continue
            (library if _porters(file) else user).append(row)
        split[key] = ("\n".join(user), library)
        for other in out:
            if other in split and other[1] == key[1] and split[other][0] == split[key][0]:
                changed = _declared_otherwise(split[other][1], split[key][1])
                if not _spells_any(split[key][0], changed):
                    out[other] = out[other] + vs
                    break
        else:
            out[key] = vs
    return out


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"        # re's \\w on str


def _spells_any(text: str, names) -> bool:
    """Whether `text` spells one of `names` as a whole word (`(?<!\\w)name(?!\\w)`), found by
    str.find: one regex alternation over the 3 MB of upstream's expanded kernel file cost
    ~0.07 s, on the way to the parse."""
    for name in names:
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            if (at == 0 or not _word(text[at - 1])) and (end == len(text) or not _word(text[end])):
                return True
            at = text.find(name, at + 1)
    return False


_PARAMETER_NAME = re.compile(r"(?<=[\w&*])\s+([A-Za-z_]\w*)\s*(?=[,)=])")


def _declared_otherwise(a: list[str], b: list[str]) -> set[str]:
    """The names spelled in the library text where versions `a` and `b` differ (the lines
    between their common beginning and common end, read whole), less keywords and the names
    of parameters in a parameter list (which no lookup outside the declaration sees)."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    out: set[str] = set()
    if start == len(a) == len(b):
        return out
    for block in ("\n".join(a[start:len(a) - end]), "\n".join(b[start:len(b) - end])):
        depth, params = 0, set()
        for k, ch in enumerate(block):
            if ch == "(":
                depth += 1
                close = block.find(")", k)
                params |= {m.group(1) for m in _PARAMETER_NAME.finditer(
                    block, k, len(block) if close < 0 else close + 1)}
            elif ch == ")":
                depth -= 1
        # a parameter list cut by the block's edge: no name of it is taken for a parameter's
        if depth != 0:
            params = set()
        out |= set(_IDENT.findall(block)) - params
    return out - _NOT_DECLARED


def _cached(key: str, version: int) -> View | None:
    cached = cache_dir() / f"frontend-{key}.json"
    if not cached.is_file():
        return None
    kernel_cache.touch(cached)
    data = json.loads(cached.read_text())
    if "mixed_halves2" not in data:
        return None             # a check of an older porter: checked again
    return View(version, tuple(data["errors"]), tuple(map(tuple, data["kernels"])),
                tuple(map(tuple, data["pragmas"])), tuple(map(tuple, data["unsequenced"])),
                tuple(map(tuple, data["mul_adds"])),
                tuple((ln, tuple(tokens), k, n) for ln, tokens, k, n in data["products"]),
                tuple(data["fma_free"]), tuple(map(tuple, data["mixed_halves2"])))


def _store(key: str, result: View) -> None:
    cached = cache_dir() / f"frontend-{key}.json"
    write_whole(cached, json.dumps({"errors": list(result.errors), "kernels": list(result.kernels),
                                    "pragmas": list(result.pragmas),
                                    "unsequenced": list(result.unsequenced),
                                    "mul_adds": list(result.mul_adds),
                                    "products": list(result.lone_products),
                                    "fma_free": list(result.fma_free),
                                    "mixed_halves2": list(result.mixed_halves)}))


_MODE_DIGEST: list[str] = []


def _mode_digest() -> str:
    if _MODE_DIGEST:
        return _MODE_DIGEST[0]
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(MODE_HEADER.read_bytes())
    for p in sorted(LIBRARY_DIR.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    _MODE_DIGEST.append(h.hexdigest())
    return _MODE_DIGEST[0]


def _dirs(root: Path | None) -> list[Path]:
    return headers.checkout_include_dirs(root)


# (root, display path, text) -> (each header's (path, mtime, size), their digest): a check asks
# a dozen times, and --watch every round, for headers that did not change
_DIGESTS: dict[tuple, tuple] = {}
_DIGESTS_LOCK = threading.Lock()


def _headers_digest(root: Path | None, display_path=None, text: str = "") -> str:
    """The headers the file may include: the checkout's, those beside the file (a quoted
    include's first place), and every other file `text`'s includes reach."""
    key = (str(root), str(display_path), hashlib.sha256(text.encode()).hexdigest())
    with _DIGESTS_LOCK:
        held = _DIGESTS.get(key)
    if held is not None and held[0] == _stamps(p for p, _, _ in held[0]):
        return held[1]
    h = hashlib.sha256()
    beside = headers.beside(display_path)
    listed = headers.header_files(_dirs(root)) + (headers.quoted_headers(beside) if beside else [])
    reached, computed = headers.reached_headers(text, _dirs(root), beside) if text else ([], False)
    if computed:
        # an include whose file a macro names may read any file: nothing is kept for the text
        return os.urandom(16).hex()
    files = listed + sorted(set(reached) - set(listed))
    stamps = _stamps(files)
    for f in files:
        h.update(str(f).encode() + b"\0" + f.read_bytes())
    digest = h.hexdigest()
    with _DIGESTS_LOCK:
        if len(_DIGESTS) > 256:
            _DIGESTS.clear()
        _DIGESTS[key] = (stamps, digest)
    return digest


def _stamps(files) -> tuple:
    out = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((f, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((f, None, None))
    return tuple(out)


_SEALED: dict[str, bool] = {}


def sealed(text: str, display_path, root: Path | None, version: int) -> bool:
    """groups.sealed of the kernel file as `version`'s metallib build preprocesses it, kept by
    what decides it (the file, its headers)."""
    key = _sealed_key(text, display_path, root, version)
    if key not in _SEALED:
        from porter.emulate import groups
        _remember_sealed(key, groups.sealed(text, expansion(text, display_path, root, version)))
    return _SEALED[key]


def _sealed_key(text: str, display_path, root: Path | None, version: int) -> str:
    return hashlib.sha256("\0".join([str(display_path), str(root), str(version),
                                     _headers_digest(root, display_path, text), text]).encode()
                          ).hexdigest()


def _remember_sealed(key: str, value: bool) -> None:
    if len(_SEALED) > 256:
        _SEALED.clear()
    _SEALED[key] = value


def _key(text: str, display_path, root: Path | None, version: int) -> str:
    h = hashlib.sha256(f"frontend2\0{display_path}\0{root}\0{version}\0".encode())
    h.update(_mode_digest().encode())
    h.update(text.encode())
    h.update(_headers_digest(root, display_path, text).encode())
    return h.hexdigest()[:32]


def view(text: str, display_path, root, version: int, *, use_cache: bool = True) -> View:
    root = Path(root) if root is not None else None
    key = _key(text, display_path, root, version)
    if use_cache:
        cached = _cached(key, version)
        if cached is not None:
            return cached
    result = _check(text, str(display_path), root, version,
                    _preprocess(text, str(display_path), root, version), use_cache=use_cache)
    _store(key, result)
    return result


def defines(version: int) -> list[str]:
    """What Apple's compiler predefines for a macOS build of this Metal version."""
    out = [f"-D__METAL_VERSION__={version}", "-D__METAL__", "-D__METAL_MACOS__"]
    if version >= 310:      # bfloat is Metal 3.1's (MSL §2.1); every version PyTorch builds
        out.append("-D__HAVE_BFLOAT__")
    return out


def std(version: int) -> str:
    return "-std=c++17" if version >= CXX17_VERSION else "-std=c++14"


_PREPROCESSED: "OrderedDict[str, tuple[str | None, str | None]]" = OrderedDict()
_PREPROCESSED_LOCK = threading.Lock()
_PREPROCESSING: dict[str, threading.Lock] = {}
_PREPROCESSED_KEPT = 6      # a build's versions and the names' pass of one file (~3 MB each)


def _preprocess(text: str, display_path: str, root: Path | None,
                version: int) -> tuple[str | None, str | None]:
    """The file as the metallib build preprocesses it under `version`: kept in this process
    by content, as a build's check of the versions and its kernel names' pass (kernel_names,
    on the main thread after the check) ask for the same text."""
    key = hashlib.sha256("\0".join([str(display_path), str(root), str(version),
                                     _headers_digest(root, display_path, text), text]).encode()).hexdigest()
    with _PREPROCESSED_LOCK:
        found = _PREPROCESSED.get(key)
        if found is not None:
            _PREPROCESSED.move_to_end(key)
            return found
        # one run of a text at a time: the build's pieces and the front end ask for the
        # primary version's together
        lock = _PREPROCESSING.setdefault(key, threading.Lock())
    with lock:
        with _PREPROCESSED_LOCK:
            found = _PREPROCESSED.get(key)
        if found is None:
            found = _preprocessed_now(text, display_path, root, version)
            with _PREPROCESSED_LOCK:
                _PREPROCESSED[key] = found
                while len(_PREPROCESSED) > _PREPROCESSED_KEPT:
                    _PREPROCESSED.popitem(last=False)
    with _PREPROCESSED_LOCK:
        _PREPROCESSING.pop(key, None)
    return found


def expansion(text: str, display_path, root: Path | None, version: int):
    """The kernel file as the metallib build's preprocessor leaves it under `version`, per
    functor struct (porter.emulate.groups.Expansion: what decides whether its functors may be
    keyed apart), or None where it does not preprocess."""
    pre, _ = _preprocess(text, str(display_path), root, version)
    if pre is None:
        return None
    raw = pre.split("\n")
    return expansion_of(raw, _positions(raw), str(display_path), text)


def expansion_of(raw: list[str], positions: list[tuple[str, int]], display_path: str,
                 text: str):
    """groups.Expansion of the preprocessed lines `raw` of the kernel file `text`."""
    from porter.emulate import groups

    spans = groups.functor_spans(text)
    owner: dict[int, str] = {}
    for name, (a, b) in spans.items():
        owner.update({line: name for line in range(a + 1, b + 2)})
    functors: dict[str, list[str]] = {name: [] for name in spans}
    outside: list[str] = []
    registrations: list[str] = []
    for line, (file, number) in zip(raw, positions):
        if file != display_path or line.startswith("# "):
            continue
        name = owner.get(number)
        if name is not None:
            functors[name].append(line)
        elif "host_name" in line:
            registrations.append(line)
        else:
            outside.append(line)
    return groups.Expansion({n: "\n".join(ls) for n, ls in functors.items()}, "\n".join(outside),
                            tuple(registrations))


def _preprocessed_now(text: str, display_path: str, root: Path | None,
                      version: int) -> tuple[str | None, str | None]:
    dirs = _dirs(root)
    with tempfile.TemporaryDirectory(prefix="porter-frontend-") as tmp:
        src = Path(tmp) / "kernel.metal"
        src.write_text(f'#line 1 "{display_path}"\n{text}')
        cmd = [compiler(), "-E", "-x", "c++", std(version), "-undef", "-nostdinc", "-nostdinc++",
               *defines(version), "-include", str(MODE_HEADER), f"-I{LIBRARY_DIR}",
               *headers.quote_flags(display_path), *(f"-I{d}" for d in dirs), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        return None, proc.stderr.replace(tmp, "")
    # the scratch directory's name is no part of the file (versions with the same text are
    # parsed once)
    return proc.stdout.replace(tmp, ""), None


_MARKER = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"')
_SCALARS = "bool|char|uchar|short|ushort|int|uint|long|ulong|half|bfloat|float"
# a literal's digits: C++14's separators kept inside one literal (review 37's N06t: `1.000'4h`
# lost its tail)
_DIGITS = r"\d(?:'?\d)*"
_FLOAT_LITERAL = re.compile(rf"(?<![\w.'])((?:{_DIGITS}\.(?:{_DIGITS})?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?"
                            rf"|{_DIGITS}[eE][+-]?{_DIGITS})(?![\w.'])")
_HALF_LITERAL = re.compile(rf"(?<![\w.'])((?:{_DIGITS}\.(?:{_DIGITS})?|\.{_DIGITS}|{_DIGITS})"
                           rf"(?:[eE][+-]?{_DIGITS})?)[hH]\b")
_HOST_NAME = re.compile(r'\[\[\s*host_name\s*\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)\s*\]\]')
_KERNEL_ATTR = re.compile(r"\[\[\s*kernel\s*\]\]")
_AS = r"__attribute__\(\(address_space\([23]\)\)\)"
# a `threadgroup`/`constant` object (not a pointer or reference to one) opening a statement
_AS_OBJECT = re.compile(rf"(^|[;{{}}])([ \t]*)((?:(?:constexpr|const)\s+)*{_AS}(?:\s+(?:constexpr|const))*\s+[^;*&()]*?[\[=;])", re.M)
# a string literal (skipped), or what the spelling alone says is not Metal
_NO_SUCH_TYPE = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|\b(double|long\s+long|std(?=\s*::)|(?<=namespace)\s+std\b|'
    r"asm\b|__asm__|__asm\b|"
    r"__(?:builtin_(?!expect\b)|sync_|atomic_|c11_atomic_|opencl_atomic_|scoped_atomic_|"
    r"hip_atomic_)\w+|" + "|".join(rf"{t}\b" for t in FOREIGN_TYPES) + ")")
_STRING_PART = re.compile(r'"((?:[^"\\]|\\.)*)"')


# a call of a name (a template type parameter's is a vector constructor or a conversion)
_CALL = re.compile(r"(?<![\w.$>])([A-Za-z_]\w*)[ \t]*\((?![*&])")
_VECTOR_NAMES = frozenset(f"{t}{n}" for t in _SCALARS.split("|") for n in (2, 3, 4))
# `half(b)` of a bfloat and `bfloat(h)` of a half are Metal's explicit conversions (MLX's
# copy.metal converts half to bfloat on Metal 3.1); clang's _Float16 and __bf16 refuse that
# functional cast, so it is written as the conversion it stands for
_CONVERTED_NAMES = _VECTOR_NAMES | {"half", "bfloat"}
_ALIAS_TEMPLATE = re.compile(r"template\s*<[^<>]*>\s*using\s+(\w+)\s*=")
_TEMPLATE_PARAM = re.compile(r"(?:typename|class)\s+(\w+)\s*(?=[,>=])")
_CAST = re.compile(r"\bstatic_cast\s*<")


# a string literal, or a character literal (a quote after a digit is C++14's digit separator)
_TEXT_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|(?<![0-9A-Fa-f])\'(?:[^\'\\\n]|\\.)*\'')


def _outside_literals(text: str, change) -> str:
    """`change` applied to the code of `text` between its string and character literals."""
    if '"' not in text and "'" not in text:
        return change(text)
    out, at = [], 0
    for m in _TEXT_LITERAL.finditer(text):
        out += [change(text[at:m.start()]), m.group(0)]
        at = m.end()
    out.append(change(text[at:]))
    return "".join(out)


def _casts(raw: str) -> str:
    """`static_cast<X>(` to a value type X becomes `__metal_convert<X>(` (one to a pointer or
    reference is C++'s own and stays)."""
    out, at = [], 0
    for m in _CAST.finditer(raw):
        depth, k = 1, m.end()
        while k < len(raw) and depth:
            depth += {"<": 1, ">": -1}.get(raw[k], 0)
            k += 1
        target = raw[m.end():k - 1].rstrip()
        if depth or not target or target[-1] in "*&":
            continue
        out.append(raw[at:m.start()] + "__metal_convert<")
        at = m.end()
    return "".join(out) + raw[at:]


class Rewritten(NamedTuple):
    source: str                                # clang's text (line markers kept)
    names: list[tuple[str, str, int]]          # kernel names: (name, file, line)
    lines: list[tuple[str, int]]               # per line of source: (file, line)
    types: list[tuple[str, int, str]]          # `double`, `long long` spelled: (file, line, rule)


_PORTERS = (str(MODE_HEADER.parent), str(LIBRARY_DIR))


def _porters(file: str) -> bool:
    return file.startswith(_PORTERS)


def template_names(pre: str) -> tuple[set, set]:
    """The template type parameters and alias templates of the preprocessed file: a call of
    one may build a vector."""
    # alias templates (`using ret_type = vec2type_t<U>`): `ret_type<T>(a, b)` may build a vector
    return (set(_found_at(_TEMPLATE_PARAM, ("typename", "class"), pre)) - {"typename", "class"},
            set(_found_at(_ALIAS_TEMPLATE, ("template",), pre)))


def _found_at(pattern: re.Pattern, starts: tuple[str, ...], text: str) -> list[str]:
    """`pattern.findall(text)` for a pattern with one group whose every match begins with one
    of the words `starts`: tried only where one begins (str.find), left to right, each after
    the last match's end, as findall does (a regex scan of the 3 MB of upstream's expanded
    BinaryKernel.metal cost ~0.04 s a version group, on the way to the parse)."""
    at: set[int] = set()
    for word in starts:
        k = text.find(word)
        while k >= 0:
            at.add(k)
            k = text.find(word, k + 1)
    out, end = [], 0
    for k in sorted(at):
        if k < end:
            continue
        m = pattern.match(text, k)
        if m:
            out.append(m.group(1))
            end = m.end()
    return out


def rewrite(pre: str, names: tuple[set, set] | None = None) -> Rewritten:
    """The preprocessed text in clang's terms, line for line (porter's own mode and library
    files as they are), the kernel names it declares, and each line's file and line.
    `names`: template_names of the whole file, where `pre` is a part of it (a registration)."""
    params, aliases = names or template_names(pre)
    # each segment's rewrite is a function of its text, its file and these names alone: the
    # same header text under another version, or in the next round of `--watch`, is read back
    names_key = (frozenset(params), frozenset(aliases))
    out, names, lines, types = [], [], [], []
    file, line = "", 0
    segment: list[str] = []

    def flush():
        if not segment:
            return
        text = "\n".join(segment)
        segment.clear()
        if _porters(file):
            out.append(text)
            return
        first = line - text.count("\n") - 1
        done, its_names, its_types = _segment_rewritten(file, text, names_key)
        names.extend((name, file, first + at) for name, at in its_names)
        types.extend((file, first + at, rule) for at, rule in its_types)
        out.append(done)

    for raw in pre.split("\n"):
        m = _MARKER.match(raw) if raw.startswith("# ") else None
        if m:
            flush()
            line, file = int(m.group(1)), m.group(2).replace('\\"', '"').replace("\\\\", "\\")
            # clang takes no line 0 (g++ marks its built-ins so)
            out.append(raw if line else "# 1" + raw[3:])
            lines.append((file, line))
            continue
        lines.append((file, line))
        line += 1
        segment.append(raw)
    flush()
    return Rewritten("\n".join(out), names, lines, types)


# rewrite's segments, by (file, text, names): a header's segments are the same under every
# version and in every round of one process (bounded by their characters)
_SEGMENTS: "OrderedDict[tuple, tuple]" = OrderedDict()
_SEGMENTS_LOCK = threading.Lock()
_SEGMENTS_KEPT = 16_000_000
_SEGMENTS_SIZE = [0]


def _segment_rewritten(file: str, text: str, names_key: tuple) -> tuple:
    """(clang's text, [(kernel name, line offset)], [(line offset, rule)]) of one segment of
    the kernel file's or a checkout header's preprocessed text (its lines between two line
    markers); offsets from the segment's first line."""
    key = (file, text, names_key)
    with _SEGMENTS_LOCK:
        found = _SEGMENTS.get(key)
        if found is not None:
            _SEGMENTS.move_to_end(key)
            return found
    found = _segment_now(text, *names_key)
    with _SEGMENTS_LOCK:
        if key not in _SEGMENTS:
            _SEGMENTS[key] = found
            _SEGMENTS_SIZE[0] += 2 * len(text)
            while _SEGMENTS_SIZE[0] > _SEGMENTS_KEPT and len(_SEGMENTS) > 1:
                (_, old, _), _ = _SEGMENTS.popitem(last=False)
                _SEGMENTS_SIZE[0] -= 2 * len(old)
    return found


def _segment_now(text: str, params: frozenset, aliases: frozenset) -> tuple:
    vectors = _CONVERTED_NAMES
    alias_call = re.compile(
        rf"(?<![\w.$>])((?:::)?(?:\w+::)*(?:{'|'.join(map(re.escape, sorted(aliases)))}))[ \t]*<") \
        if aliases else None

    def alias_calls(text: str) -> str:
        out, at = [], 0
        for m in alias_call.finditer(text):
            if m.start() < at:
                continue
            depth, k = 1, m.end()
            while k < len(text) and depth and text[k] not in ";{}":
                depth += {"<": 1, ">": -1}.get(text[k], 0)
                k += 1
            rest = re.match(r"[ \t]*\((?![*&])", text[k:]) if not depth else None
            if rest is None:
                continue
            out.append(f"{text[at:m.start()]}__metal_vec_ctor<{text[m.start():k]}>(")
            at = k + rest.end()
        return "".join(out) + text[at:]

    def call(m):
        name = m.group(1)
        if name in params or name in vectors:
            return f"__metal_vec_ctor<{name}>("
        return m.group(0)

    names, types = [], []
    # a type Metal does not have, wherever it is spelled (a declaration, a cast, sizeof, a
    # template argument): §2.1's scalar types are the language's whole set
    for m in _NO_SUCH_TYPE.finditer(text):
        if m.group(1):
            word = m.group(1)
            types.append((text.count("\n", 0, m.start()),
                          "double" if word == "double" else
                          "long long" if word.startswith("long") else
                          "asm" if word in ("asm", "__asm__", "__asm") else
                          word if word in RULES else
                          "builtin" if word.startswith("__") else "std"))
    if "host_name" in text:
        def host(match):
            names.append((_joined(match.group(1)), text.count("\n", 0, match.start())))
            return ""
        text = _HOST_NAME.sub(host, text)
    if "[[" in text:
        text = _KERNEL_ATTR.sub('__attribute__((annotate("metal_kernel")))', text)
    if "static_cast" in text:
        text = _casts(text)
    text = _CALL.sub(call, text)
    if alias_call is not None:
        text = alias_calls(text)
    # Metal's unsuffixed floating literals are float; -cl-single-precision-constant makes
    # them so only where clang parses them, not where a template's instantiation rebuilds
    # the arithmetic (stdlib's README: `2.0 * x` stayed double in c10/metal's templates).
    # Not inside a string or character literal: `"1.5"` is 4 bytes (review 38's L24)
    text = _outside_literals(text, lambda code: _FLOAT_LITERAL.sub(
        r"\1f", _HALF_LITERAL.sub(r"\1f16", code)))
    if "address_space" in text:
        text = _AS_OBJECT.sub(r"\1\2static \3", text)
    return text, tuple(names), tuple(types)


_INDEX_LOCAL = threading.local()


def _index():
    ci = _clang()
    if not hasattr(_INDEX_LOCAL, "index"):
        index = ci.Index.create()
        # disposed of by the function it was made with: at exit cindex's module globals are
        # gone before the main thread's index is collected, and its own __del__ raised
        # ("Exception ignored in: <function Index.__del__>" at the end of every run)
        index.__class__ = _owned_index_class(ci)
        index.dispose = ci.conf.lib.clang_disposeIndex
        _INDEX_LOCAL.index = index
    return _INDEX_LOCAL.index


_OWNED_INDEX: list = []


def _owned_index_class(ci):
    if not _OWNED_INDEX:
        class OwnedIndex(ci.Index):
            def __del__(self):
                self.dispose(self)
        _OWNED_INDEX.append(OwnedIndex)
    return _OWNED_INDEX[0]


_UNIT = "porter-frontend.ii"
# A cold check instantiates the file's registrations in at most this many parses; each also
# parses the file itself (~0.4 s of CPU for upstream's BinaryKernel.metal, against ~12 s for
# its 4110 instantiations in one parse). An edit re-parses only the pieces whose key changed.
MAX_BATCHES = 4
# a batch with this many errors is parsed again piece by piece, each piece's errors its own (not
# one piece's cascade told against the others)
_BATCH_ERROR_LIMIT = 40


class _Piece(NamedTuple):
    functors: tuple[str, ...]   # the functor names its registration lines name (() for none)
    rows: tuple[int, ...]       # its registration lines: indexes in the preprocessed text
    covers: frozenset           # the functor structs whose text its key holds
    key: str


def _parse(source: str, version: int, pch: str | None = None):
    """clang's unit of `source`; with `pch`, the lines the precompiled prefix holds are blank
    in `source` (every line keeps its number: `_Namer.where` reads both units' lines alike)."""
    args = [*_CLANG_ARGS, std(version)]
    if pch is not None:
        # the prefix's key is its content: clang's check of the .hh's time stamp is not needed
        args += ["-include-pch", pch, "-Xclang", "-fno-validate-pch"]
    try:
        tu = _index().parse(_UNIT, args=args, unsaved_files=[(_UNIT, source)])
    except _clang().TranslationUnitLoadError:
        if pch is None:
            raise
        # the prefix evicted by another run between its lookup and this load (four runs on
        # one small cache: an internal error): the whole text is parsed instead
        return None
    if pch is not None and any(d.severity >= _clang().Diagnostic.Fatal and
                               ("precompiled" in d.spelling or "PCH" in d.spelling or
                                "AST file" in d.spelling) for d in tu.diagnostics):
        return None             # the caller parses the whole text instead
    return tu


# The kernel file's includes (Metal's library declarations, c10/metal's headers: ~95% of what
# clang parses for upstream's BinaryKernel.metal) precompiled once per content and version:
# an edit re-parses the file's own code alone (~0.1 s instead of ~0.9 s a parse, at load 12)
_PREFIX_MIN_LINES = 200
_PCH_LOCKS: dict[str, threading.Lock] = {}
_PCH_GUARD = threading.Lock()


def _libclang_id() -> str:
    """Which libclang reads a precompiled header (its format is the build's own)."""
    ci = _clang()
    try:
        path = ci.conf.get_filename()
        st = os.stat(ci.conf.lib._name if hasattr(ci.conf.lib, "_name") else path)
        return f"{path}:{st.st_size}:{int(st.st_mtime)}"
    except (OSError, AttributeError):
        return "libclang"


def _prefix_cut(raw: list[str], positions: list[tuple[str, int]], display_path: str) -> int:
    """The index of the kernel file's first line of its own code: every line before it is
    the headers it includes (0: none worth precompiling)."""
    for i, (f, _) in enumerate(positions):
        if f == display_path and raw[i].strip() and not raw[i].startswith("# "):
            return i if i >= _PREFIX_MIN_LINES else 0
    return 0


def _precompiled(source: list[str], cut: int, version: int, namer: "_Namer") -> str | None:
    """The path of the precompiled header of `source[:cut]` (built and cached by content, its
    headers' AST-rule findings stored as _ast_rules stores them), or None where it does not
    build alone (an error in a header: the whole text is parsed, and the error reported)."""
    if not cut:
        return None
    ci = _clang()
    text = "\n".join(source[:cut]) + "\n"
    h = hashlib.sha256(f"frontend-pch1\0{std(version)}\0{' '.join(_CLANG_ARGS)}\0".encode())
    h.update(_mode_digest().encode() + _libclang_id().encode())
    h.update(text.encode())
    key = h.hexdigest()[:32]
    directory = cache_dir()
    pch, hh, bad = (directory / f"frontend-pch-{key}.{ext}" for ext in ("pch", "hh", "bad"))
    with _PCH_GUARD:
        lock = _PCH_LOCKS.setdefault(key, threading.Lock())
    with lock:              # versions parse in threads; two with one prefix build it once
        if pch.is_file() and hh.is_file():
            kernel_cache.touch(pch, hh)
            return str(pch)
        if bad.is_file():
            return None
        write_whole(hh, text)
        tu = _index().parse(str(hh), args=["-x", "c++-header", *_CLANG_ARGS[2:], std(version)],
                            options=ci.TranslationUnit.PARSE_INCOMPLETE)
        if any(d.severity >= ci.Diagnostic.Error for d in tu.diagnostics):
            bad.touch()
            return None
        # the headers' findings, cached per header as a whole parse caches them
        _ast_rules(tu, _Namer(namer.display, namer.root, namer.lines[:cut]), version)
        fd, staged = tempfile.mkstemp(dir=directory, suffix=".pch.tmp")
        os.close(fd)
        try:
            tu.save(staged)
        except ci.TranslationUnitSaveError:
            os.unlink(staged)
            bad.touch()
            return None
        os.replace(staged, pch)
    return str(pch)


def _parsed(source: list[str], cut: int, pch: str | None, version: int):
    """(clang's unit of the text, the precompiled header it used or None)."""
    if pch is not None:
        tu = _parse("\n".join([""] * cut + source[cut:]), version, pch)
        if tu is not None:
            return tu, pch
    return _parse("\n".join(source), version), None


def _errors(tu, namer: "_Namer") -> list:
    ci = _clang()
    return [d for d in tu.diagnostics
            if d.severity >= ci.Diagnostic.Error and not _a_copy_out_of_an_address_space(d)]


def _check(text: str, display_path: str, root: Path | None, version: int,
           preprocessed: tuple[str | None, str | None], *, use_cache: bool = True) -> View:
    """The file checked as the metallib build compiles it, in pieces (the way groups.py splits
    a file for the g++ build): the file parsed once with its registrations left out (every
    template checked as written, the AST rules), then each functor's registrations
    instantiated, cached by what they depend on (the functor's own text, the functors it
    names, everything outside a functor, the headers), so that an edit of one functor
    re-instantiates that functor's registrations alone."""
    pre, error = preprocessed
    if pre is None:
        first = next((ln for ln in error.splitlines() if ": error: " in ln or "fatal error" in ln),
                     error.strip().splitlines()[0] if error.strip() else "the preprocessor failed")
        return View(version, (_gxx_error(first, display_path, root),), ())
    raw = pre.split("\n")
    positions = _positions(raw)
    names = template_names(pre)
    base = rewrite(pre, names) if "host_name" not in pre else None
    if base is not None:            # no registration: one parse says it all
        rows: list[tuple[int, ...]] = []
    else:
        # a registration is a line of the kernel file whose macro expansion names a kernel
        rows = _registrations(raw, positions, display_path)
        blank = list(raw)
        for i in (i for group in rows for i in group):
            blank[i] = ""
        base = rewrite("\n".join(blank), names)
    namer = _Namer(display_path, root, base.lines)
    # whether each functor reaches others' text only by their names, which per-functor keys read
    from porter.emulate import groups
    sealed = groups.sealed(text, expansion_of(raw, positions, display_path, text))
    _remember_sealed(_sealed_key(text, display_path, root, version), sealed)
    if use_cache:
        # the file-wide template parameter names shape the rewrite of every functor's text
        namer.memo = frontend_memo.DeclarationMemo(
            text, f"{display_path}\0{root}\0{version}\0{_mode_digest()}\0"
                  f"{_headers_digest(root, display_path, text)}\0"
                  f"{sorted(names[0])}\0{sorted(names[1])}", namer.where, sealed)
    source = base.source.split("\n")
    cut = _prefix_cut(raw, positions, display_path)
    tu, pch = _parsed(source, cut, _precompiled(source, cut, version, namer), version)
    ahead = None
    if rows:
        # the registrations' parses beside this parse's walks (libclang releases the GIL)
        from concurrent.futures import ThreadPoolExecutor
        pool = ThreadPoolExecutor(max_workers=1)
        ahead = pool.submit(_instantiation_parses, text, display_path, root, version, names, raw,
                            rows, base, use_cache, cut, pch, sealed)
        pool.shutdown(wait=False)
    # what the spelling alone rules out first: clang's own error on such a line (`std` is no
    # namespace here) then follows with its words
    errors: list[str] = [f"{namer.name(f)}:{ln}: {RULES[rule].format(spec=SPEC)}"
                         for f, ln, rule in dict.fromkeys(base.types) if namer.checked(f)]
    errors += [namer.diagnostic(d) for d in _errors(tu, namer)]
    rules = _ast_rules(tu, namer, version, cut if pch is not None else 0)
    unsequenced = _unsequenced_calls(tu, namer)
    mul_adds = _narrow_mul_adds(tu, namer)
    lone, fma_free = _products(tu, namer)
    mixed = _mixed_halves(tu, namer, version)
    namer.memo.flush()
    namer.own.clear()           # of this parse: a later one's cursors may hash alike
    del tu
    kernels: list[tuple[str, str]] = []
    if rows:
        for result in _instantiated(text, display_path, root, version, names, raw, rows, base,
                                    namer, set(errors), use_cache, cut, pch, ahead.result()):
            errors += result[0]
            kernels += [tuple(k) for k in result[1]]
    errors += rules
    pragmas = tuple((f, ln, line.strip()) for (f, ln), line in zip(positions, raw)
                    if line.lstrip().startswith("#pragma"))
    return View(version, tuple(dict.fromkeys(errors)), tuple(kernels), pragmas, unsequenced,
                mul_adds, lone, fma_free, mixed)


_ASSIGNING = frozenset({"++", "--", "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=",
                        ">>="})


def _own_declarations(cursor, namer: "_Namer") -> list:
    """The kernel file's own top-level declarations, through its namespaces: the headers'
    (a precompiled prefix's too) are upstream's c10/metal and Metal's library, which the
    file-level findings do not walk. Found once per parse: each finding walks them, and
    telling them apart reads the location of every declaration of the headers."""
    key = cursor.hash
    if key not in namer.own:
        namer.own[key] = list(_own_declarations_now(cursor, namer))
    return namer.own[key]


def _own_preorders(cursor, namer: "_Namer") -> list:
    """(declaration, its cursors in preorder) of each of the kernel file's own top-level
    declarations (_own_declarations), read once per parse: three findings walk each of them
    whole, and a walk makes a Python object of every node."""
    key = ("preorder", cursor.hash)
    if key not in namer.own:
        namer.own[key] = [(top, () if namer.memo.walked(top, namer.display)
                           else list(top.walk_preorder()))
                          for top in _own_declarations(cursor, namer)]
    return namer.own[key]


def _own_declarations_now(cursor, namer: "_Namer"):
    K = _clang().CursorKind
    for c in cursor.get_children():
        file = c.location.file
        if c.kind == K.NAMESPACE:
            # a namespace block of the precompiled prefix holds the prefix's declarations
            # alone (its lexical children): Metal's library and c10/metal, thousands of them
            if file is None or file.name == _UNIT:
                yield from _own_declarations_now(c, namer)
        elif file is not None and file.name == _UNIT and \
                namer.where(c.location)[0] == namer.display:
            yield c


def _type_kind(t):
    """The type's kind, or None for one this binding has no name for (clang's `_Float16` is
    kind 32 to the wheel's cindex.py, which raises on it: review 37's N21-N25)."""
    try:
        return t.kind
    except ValueError:
        return None


def _unsequenced_calls(tu, namer: "_Namer") -> tuple[tuple[str, int, str], ...]:
    """Each call of the kernel file itself with two or more arguments that change state (an
    assignment, `++`/`--`, or a call of a function taking a non-const reference or pointer):
    C++ leaves the order of a call's arguments unspecified ([expr.call]), and g++, which runs
    the emulator's build, evaluates them right to left where Apple's clang goes left to
    right."""
    ci = _clang()
    K = ci.CursorKind

    def changes_state(arg) -> bool:
        try:
            if any(tok.kind == ci.TokenKind.PUNCTUATION and tok.spelling in _ASSIGNING
                   for tok in arg.get_tokens()):
                return True
        except Exception:       # noqa: BLE001 (no extent: nothing to read)
            return False
        for node in arg.walk_preorder():
            if node.kind != K.CALL_EXPR or node.referenced is None:
                continue
            for param in node.referenced.get_arguments():
                kind = _type_kind(param.type.get_canonical())
                if kind in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.POINTER) and \
                        not param.type.get_pointee().is_const_qualified():
                    return True
        return False

    found = []

    def calls_of(nodes) -> None:
        for cursor in nodes:
            if cursor.kind != K.CALL_EXPR:
                continue
            args = list(cursor.get_arguments())
            if len(args) >= 2 and sum(changes_state(a) for a in args) >= 2:
                f, line = namer.where(cursor.location)
                try:
                    callee = cursor.spelling or next(cursor.get_tokens()).spelling
                except StopIteration:
                    callee = "a call"
                found.append((f, line, callee))

    for top, nodes in _own_preorders(tu.cursor, namer):
        namer.memo.replay_or_walk(top, namer.display, {"unsequenced": found},
                                  lambda: calls_of(nodes))
    return tuple(dict.fromkeys(found))


# clang's CXBinaryOperatorKind (clang-c/Index.h, libclang 17 on): the operators the findings ask for
_BINARY_KINDS = {3: "*", 4: "/", 6: "+", 7: "-", 22: "=", 23: "*=", 24: "/=", 26: "+=", 27: "-="}


def _operator(c) -> str | None:
    """The operator of a binary or compound-assignment expression: libclang's own answer
    where the library has it (one call), else read from the tokens after the left operand's
    (a walk of the expression's tokens, per operator)."""
    kind = _binary_kind()
    if kind is not None:
        found = kind(c)
        if found in _BINARY_KINDS:
            return _BINARY_KINDS[found]
        if found != 0:
            return "?"          # another operator: none the findings ask about
    kids = list(c.get_children())
    if len(kids) != 2:
        return None
    try:
        tokens = [t.spelling for t in c.get_tokens()]
        n = sum(1 for _ in kids[0].get_tokens())
    except Exception:       # noqa: BLE001 (no extent: nothing to read)
        return None
    return tokens[n] if n < len(tokens) else None


def _bare(c):
    """An expression without its parentheses and implicit conversions (one child each)."""
    K = _clang().CursorKind
    while c.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR):
        kids = list(c.get_children())
        if len(kids) != 1:
            break
        c = kids[0]
    return c


@functools.cache
def _binary_kind():
    """libclang's clang_getCursorBinaryOperatorKind, or None where the library lacks it."""
    import ctypes
    ci = _clang()
    try:
        function = ci.conf.lib.clang_getCursorBinaryOperatorKind
    except AttributeError:
        return None
    function.argtypes, function.restype = [ci.Cursor], ctypes.c_int
    return function


_NARROW = {"_Float16": "half", "half": "half", "__bf16": "bfloat", "bfloat": "bfloat"}
_FORMULA_CALLS = frozenset(n for names in MULTIPLY_ADD_FORMULAS.values() for n in names)
# the type words a call left unresolved in a template may compute in half or bfloat with
_NARROW_WORDS = {f"{t}{n}" for t in ("half", "bfloat") for n in ("", "2", "3", "4")} | {"T"}


def _narrow_mul_adds(tu, namer: "_Namer") -> tuple[tuple[str, int, str, str], ...]:
    """Each `a * b + c` (or `-`, `+=`, `-=`) of the kernel file's functors whose product is
    half or bfloat, or of a template's type parameter (instantiated with them where the file
    registers them): clang contracts such an expression to one fma (`-ffp-contract=on`), in
    half as in float, and the emulator's g++ rounds half and bfloat after each operation
    whatever its contraction flag, so one reading is not run."""
    ci = _clang()
    K = ci.CursorKind

    operator = _operator

    def narrow(t) -> str | None:
        canonical = t.get_canonical()
        spelled = canonical.spelling.replace("const ", "").strip()
        if spelled in _NARROW:
            return _NARROW[spelled]
        if _type_kind(canonical) in (ci.TypeKind.UNEXPOSED, ci.TypeKind.DEPENDENT) or \
                "type-parameter" in spelled:
            return "T"
        return None

    def formula(call) -> bool:
        """A call of dot, mix or mad: resolved (its spelling) or left to a template's
        instantiation (its callee an overload set of that name)."""
        if call.spelling:
            return call.spelling in _FORMULA_CALLS
        callee = next(iter(call.get_children()), None)
        while callee is not None and callee.kind in (K.UNEXPOSED_EXPR, K.DECL_REF_EXPR) and \
                not callee.spelling:
            callee = next(iter(callee.get_children()), None)
        return callee is not None and callee.kind == K.OVERLOADED_DECL_REF and \
            callee.spelling in _FORMULA_CALLS

    def rows_of(functor, nodes, found: list) -> None:
        for c in nodes:
            if c.kind == K.CALL_EXPR and formula(c):
                # Metal's own multiply-add formula (`dot`, `mix`, `mad`) in half or bfloat:
                # Apple's library may run it as one fma in that type (review 36's K03)
                kind = narrow(c.type) if c.spelling else None
                if kind is None and c.spelling:
                    element = c.type.get_canonical().spelling
                    kind = next((v for k, v in _NARROW.items() if k in element), None)
                elif not c.spelling:
                    # a call a template leaves unresolved: its type is the template's, as for
                    # a product there, unless its tokens name only float types
                    try:
                        words = {t.spelling for t in c.get_tokens()}
                    except Exception:       # noqa: BLE001 (no extent: nothing to read)
                        words = set()
                    if words & _NARROW_WORDS:
                        kind = "T"
                if kind is not None:
                    f, line = namer.where(c.location)
                    found.append((f, line, functor.spelling, kind))
                continue
            if c.kind not in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR) or \
                    operator(c) not in ("+", "-", "+=", "-="):
                continue
            for side in c.get_children():
                side = _bare(side)
                if side.kind == K.BINARY_OPERATOR and operator(side) == "*":
                    kind = narrow(side.type)
                    if kind is not None:
                        f, line = namer.where(c.location)
                        found.append((f, line, functor.spelling, kind))
                        break

    found = []
    for functor, nodes in _own_preorders(tu.cursor, namer):
        if functor.kind in (K.STRUCT_DECL, K.CLASS_DECL, K.CLASS_TEMPLATE) and \
                functor.spelling.endswith("_functor"):
            namer.memo.replay_or_walk(functor, namer.display, {"mul_adds": found},
                                      lambda: rows_of(functor, nodes, found))
    return tuple(dict.fromkeys(found))


# what clang's contraction sees through: a product inside parentheses or a cast is still the
# fmul its sum's fadd takes (tryEmitFMulAdd reads the emitted values, not the AST)
_SEE_THROUGH = ("UNEXPOSED_EXPR", "PAREN_EXPR", "CSTYLE_CAST_EXPR", "CXX_FUNCTIONAL_CAST_EXPR",
                "CXX_STATIC_CAST_EXPR")


_HEADER_MIXED: dict[str, tuple] = {}     # _mixed_key -> a checkout header's mixed_halves rows


def _mixed_halves(tu, namer: "_Namer", version: int | None = None
                  ) -> tuple[tuple[str, int, str, str], ...]:
    """Each arithmetic of a bfloat with a half in code a kernel may run (View.mixed_halves):
    the kernel file's own and the checkout's headers' (one beside the file included with
    quotes, c10/metal), as (file, line, owner, dtypes): the owner is the functor's name before
    `_functor`, or "*" for code outside every functor; dtypes "*" where both types are
    written, else the registration dtype a template's type parameter makes the mixture with
    (`x + h` of a `T x` and a half: "bfloat")."""
    ci = _clang()
    K = ci.CursorKind

    def written_type(c) -> str:
        """An operand's type before the implicit conversion to the operation's type; "T"
        for a template's type parameter."""
        canonical = _bare(c).type.get_canonical()
        spelled = canonical.spelling
        if "__bf16" in spelled or "_Float16" in spelled:
            return spelled              # (clang's _Float16 has no kind this binding names)
        if _type_kind(canonical) in (ci.TypeKind.UNEXPOSED, ci.TypeKind.DEPENDENT) or \
                "type-parameter" in spelled:
            return "T"
        return spelled

    def walk(cursor, owner: str, out: list, nodes=None) -> None:
        for c in cursor.walk_preorder() if nodes is None else nodes:
            if c.kind not in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR) or \
                    _operator(c) in (None, "="):
                continue
            kinds = [written_type(k) for k in c.get_children()]
            if len(kinds) != 2:
                continue
            bf = any("__bf16" in t for t in kinds)
            hf = any("_Float16" in t for t in kinds)
            # a functor's type parameter is the registration's dtype; a helper's may be
            # bound to anything (`hv_mix<bfloat>` called from any kernel: review 39's P02)
            dtypes = ("*" if bf and hf or (owner == "*" and (bf or hf) and "T" in kinds)
                      else "bfloat" if hf and "T" in kinds
                      else "half" if bf and "T" in kinds else None)
            if dtypes is not None:
                f, line = namer.where(c.location)
                if f is not None:
                    out.append((f, line, owner, dtypes))

    found: list = []
    for top, nodes in _own_preorders(tu.cursor, namer):
        functor = top.kind in (K.STRUCT_DECL, K.CLASS_DECL, K.CLASS_TEMPLATE) and \
            top.spelling.endswith("_functor")
        namer.memo.replay_or_walk(
            top, namer.display, {"mixed": found},
            lambda: walk(top, top.spelling[:-len("_functor")] if functor else "*", found, nodes))
    # the checkout's headers, once per content and version (a header's code is the same
    # whichever file includes it, as _header_findings takes it)
    by_header: dict[str, list] = {}

    def headers_of(cursor):
        for c in cursor.get_children():
            f, _ = namer.where(c.location)
            if f is None or f == namer.display or not namer.checked(f):
                # a namespace none of whose lines is a checked header's (Metal's library's
                # `metal`, thousands of declarations) holds nothing taken here
                if c.kind == K.NAMESPACE and namer.holds_header_lines(c.extent):
                    headers_of(c)
                continue
            by_header.setdefault(f, []).append(c)

    headers_of(tu.cursor)
    for f, cursors in by_header.items():
        key = _mixed_key(f, version)
        rows = _HEADER_MIXED.get(key) if key is not None else None
        # on disk too (a fresh process walked c10/metal's declarations again: ~0.5 s a version
        # group), where the header's declarations hold its own lines alone (no file included
        # inside one, whose change the key would not see)
        alone = key is not None and version is not None and _lines_of_one_file(cursors, f, namer)
        if rows is None and alone:
            rows = _stored_mixed(key)
        if rows is None:
            walked: list = []
            for c in cursors:
                walk(c, "*", walked)
            rows = tuple(walked)
            if alone:
                write_whole(cache_dir() / f"frontend-mixed-{key}.json",
                            json.dumps([list(r) for r in rows]))
        if key is not None:
            _HEADER_MIXED[key] = rows
        found += list(rows)
    return tuple(dict.fromkeys(found))


def _mixed_key(path: str, version: int | None) -> str | None:
    """A checkout header's mixed_halves rows' key: its path, content, the Metal version and
    the front end's own digest (None where the header cannot be read)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    h = hashlib.sha256(f"frontend-mixed1\0{path}\0{version}\0".encode())
    h.update(_mode_digest().encode())
    h.update(data)
    return h.hexdigest()[:32]


def _stored_mixed(key: str) -> tuple | None:
    cached = cache_dir() / f"frontend-mixed-{key}.json"
    if not cached.is_file():
        return None
    try:
        rows = tuple(tuple(r) for r in json.loads(cached.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    kernel_cache.touch(cached)
    return rows


def _lines_of_one_file(cursors, path: str, namer: "_Namer") -> bool:
    """Whether every line the cursors' extents span is a line of `path`."""
    for c in cursors:
        try:
            start, end = c.extent.start.line, c.extent.end.line
        except Exception:           # noqa: BLE001 (no extent: not known)
            return False
        if not 0 < start <= end <= len(namer.lines) or \
                any(namer.lines[i][0] != path for i in range(start - 1, end)):
            return False
    return True


def _products(tu, namer: "_Namer") -> tuple:
    """The kernel file's products (`a * b`) that no `+`, `-`, `+=` or `-=` of their own
    expression takes, each as (line, tokens, k): the k-th product of that line spelled with
    those tokens (build.py finds it in the text by them); and the functors that have no
    product and call nothing but conversions and constructors (View.fma_free)."""
    ci = _clang()
    K = ci.CursorKind
    through = {getattr(K, n) for n in _SEE_THROUGH}
    sums = {"+", "-", "+=", "-="}
    # a call that computes nothing a multiply-add could be made of: a conversion or a
    # constructor, of a Metal type or of a template's type parameter
    converting = _CONVERTED_NAMES | set(_SCALARS.split("|")) | {"__metal_convert", "__metal_vec_ctor"}

    operator = _operator

    def callee(call) -> str:
        """The called name: resolved, its spelling; left to a template's instantiation, the
        last name its tokens spell before the arguments (`::metal::copysign(`)."""
        if call.spelling:
            return call.spelling
        name = ""
        try:
            for t in call.get_tokens():
                if t.spelling in ("(", "<"):
                    break
                name = t.spelling
        except Exception:       # noqa: BLE001 (no extent: a call of something unknown)
            return ""
        return name

    found: list[tuple[int, tuple[str, ...], bool, int]] = []
    # per functor being walked: whether it has a product or a call (the last entry)
    computes: list[bool] = []

    def visit(c, taker: str | None):
        kind = c.kind
        if computes and not computes[-1] and kind == K.CALL_EXPR and \
                callee(c) not in converting:
            computes[-1] = True
        if kind in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            op = operator(c)
            if computes and op in ("*", "*="):
                computes[-1] = True
            if op == "*" and kind == K.BINARY_OPERATOR or op == "*=":
                f, line = namer.where(c.extent.start)
                if f == namer.display:
                    try:
                        tokens = tuple(t.spelling for t in c.get_tokens())
                        # `x *= y`: the product is stored, and read back by a later sum
                        left = (sum(1 for _ in next(c.get_children()).get_tokens())
                                if op == "*=" else 0)
                    except Exception:       # noqa: BLE001
                        tokens = ()
                    if tokens:
                        found.append((line, tokens, op == "*=" or taker not in sums, left))
            for kid in c.get_children():
                visit(kid, op)
            return
        keep = taker if kind in through else None
        for kid in c.get_children():
            visit(kid, keep)

    free = []

    def products_of(top) -> None:
        functor = top.kind in (K.STRUCT_DECL, K.CLASS_DECL, K.CLASS_TEMPLATE) and \
            top.spelling.endswith("_functor")
        if functor:
            computes.append(False)
        visit(top, None)
        if functor and not computes.pop():
            free.append(top.spelling[:-len("_functor")])

    for top in _own_declarations(tu.cursor, namer):
        namer.memo.replay_or_walk(top, namer.display, {"products": found, "free": free},
                                  lambda: products_of(top))
    out, seen = [], {}
    for line, tokens, lone, left in found:
        k = seen.get((line, tokens), 0)
        seen[(line, tokens)] = k + 1
        if lone:
            out.append((line, tokens, k, left))
    return tuple(out), tuple(free)


def _positions(raw: list[str]) -> list[tuple[str, int]]:
    out, file, line = [], "", 0
    for text in raw:
        m = _MARKER.match(text) if text.startswith("# ") else None
        if m:
            line, file = int(m.group(1)), m.group(2).replace('\\"', '"').replace("\\\\", "\\")
            out.append((file, line))
            continue
        out.append((file, line))
        line += 1
    return out


def _registrations(raw: list[str], positions: list[tuple[str, int]],
                   display_path: str) -> list[tuple[int, ...]]:
    """The kernel file's registrations, each the lines (indexes in the preprocessed text) of
    one `[[host_name]]` declaration. A macro's expansion is one line; an instantiation written
    out by hand (`template [[host_name("x")]] kernel void f<float>(` and its parameters on the
    next lines) runs to its `;`, or through its body where it has one."""
    out, i = [], 0
    while i < len(raw):
        if positions[i][0] != display_path or "host_name" not in raw[i] or \
                raw[i].startswith("# "):
            i += 1
            continue
        group, depth, done = [i], 0, False
        at = raw[i].find("host_name")
        text = raw[i][max(raw[i].rfind("[[", 0, at), 0):]
        while True:
            for c in text:
                if c in "([{":
                    depth += 1
                elif c in ")]}":
                    depth -= 1
                    done = depth == 0 and c == "}"
                elif c == ";" and depth == 0:
                    done = True
                if done:
                    break
            # a line marker inside the declaration (a macro in its parameters) ends it too
            after = group[-1] + 1
            if done or after >= len(raw) or raw[after].startswith("# ") or \
                    positions[after][0] != display_path or "host_name" in raw[after]:
                break
            group.append(after)
            text = raw[after]
        out.append(tuple(group))
        i = group[-1] + 1
    return out


@functools.lru_cache(maxsize=4096)
def _functors_named(row: str) -> tuple[str, ...]:
    """The `NAME_functor`s a registration's expansion names (a scan for "_functor": a regex
    with a leading \\w+ costs seconds on upstream's 2 MB of expanded registrations). Kept by
    the row's text: a file's registrations are the same rows under every version and edit."""
    found, at = set(), row.find("_functor")
    while at >= 0:
        start = at
        while start > 0 and (row[start - 1].isalnum() or row[start - 1] == "_"):
            start -= 1
        end = at + len("_functor")
        if start < at and not (end < len(row) and (row[end].isalnum() or row[end] == "_")):
            found.add(row[start:at])
        at = row.find("_functor", end)
    return tuple(sorted(found))


def _pieces(text: str, display_path: str, root: Path | None, version: int, raw: list[str],
            rows: list[tuple[int, ...]], sealed: bool) -> list[_Piece]:
    from porter.emulate import groups

    spans = groups.functor_spans(text)
    lines = text.split("\n")
    bodies = {n: "\n".join(lines[a:b + 1]) for n, (a, b) in spans.items()}
    # functors named outside every struct (by a macro, a helper): every piece's key holds them;
    # in a file whose functors reach others without spelling their names, all of them
    outside = re.sub(r"^struct \w+_functor;$", "", groups._masked(lines, spans, set()),
                     flags=re.M)
    named = [n for n in dict.fromkeys(re.findall(r"\b(\w+)_functor\b", outside)) if n in spans]
    if not sealed:
        named = list(spans)
    by_functors: dict[tuple[str, ...], list[int]] = {}
    for group in rows:
        by_functors.setdefault(_functors_named("\n".join(raw[i] for i in group)),
                               []).extend(group)
    common = hashlib.sha256(f"frontend-piece1\0{display_path}\0{root}\0{version}\0".encode())
    common.update(_mode_digest().encode() + _headers_digest(root, display_path, text).encode())
    out = []
    for functors, its_rows in by_functors.items():
        covers = set()
        for n in [f for f in functors if f in spans] + named:
            covers |= groups._closure(n, bodies)
        h = common.copy()
        h.update(groups._masked(lines, spans, covers).encode())
        for i in its_rows:
            h.update(f"\0{i}\0{raw[i]}".encode())
        out.append(_Piece(functors, tuple(its_rows), frozenset(covers), h.hexdigest()[:32]))
    return out


def _instantiated(text, display_path, root, version, names, raw, rows, base: Rewritten, namer,
                  base_errors: set, use_cache: bool, cut: int, pch: str | None,
                  parsed: tuple) -> list[tuple[list, list]]:
    """(errors, kernels) of each piece's registrations, in file order: cached ones read back,
    the others instantiated in at most MAX_BATCHES parses and each error given to the piece
    its location (or the instantiation it comes from) belongs to; a batch whose errors cannot
    be told apart is parsed again piece by piece. `parsed`: what _instantiation_parses
    returned for these arguments (the parses, started beside the file's own check)."""
    pieces, results, missing, rewritten, batches, tus = parsed
    if missing:
        from porter.emulate import groups
        spans = groups.functor_spans(text)
        owner_of_row = {i: p for p in missing for i in p.rows}

        def owners(d, batch):
            at = [d.location] + [n.location for n in d.children]
            idx = [loc.line - 1 for loc in at if loc.file is not None and loc.line > 0]
            found = {owner_of_row[i].key for i in idx if i in owner_of_row}
            if not found:
                for i in idx:
                    if i < len(base.lines) and base.lines[i][0] == display_path:
                        line0 = base.lines[i][1] - 1
                        found |= {p.key for p in batch for n in p.covers
                                  if n in spans and spans[n][0] <= line0 <= spans[n][1]}
            return found & {p.key for p in batch}

        def run(batch, tu=None):
            if tu is None:
                tu = _batch_parse(batch, base, rewritten, cut, pch, version)
            found = {p.key: [] for p in batch}
            ds = _errors(tu, namer)
            if len(batch) > 1 and len(ds) >= _BATCH_ERROR_LIMIT:
                return None
            for d in ds:
                message = namer.diagnostic(d)
                if message in base_errors:
                    continue
                who = owners(d, batch) if len(batch) > 1 else {batch[0].key}
                if len(who) != 1:
                    return None
                found[who.pop()].append(message)
            return found

        found = {}
        for batch, tu in zip(batches, tus):
            part = run(batch, tu)
            if part is None:                   # one piece at a time
                part = {}
                for p in batch:
                    part.update(run([p]))
            found.update(part)
        for p in missing:
            types = [f"{namer.name(f)}:{ln}: {RULES[rule].format(spec=SPEC)}"
                     for i in p.rows for f, ln, rule in rewritten[i][2]]
            names = [(name, f"{namer.name(f)}:{ln}") for i in p.rows
                     for name, f, ln in rewritten[i][1]]
            results[p.key] = (types + found[p.key], names)
            _store_piece(p.key, results[p.key])
    return [results[p.key] for p in sorted(pieces, key=lambda p: p.rows[0])]


def _instantiation_parses(text, display_path, root, version, names, raw, rows, base: Rewritten,
                          use_cache: bool, cut: int = 0, pch: str | None = None,
                          sealed: bool = False) -> tuple:
    """The pieces of _instantiated, those read back from the cache, the others, their rows in
    clang's terms, their batches and each batch's parse: all that does not depend on the
    file's own check, so that it runs beside it (libclang's parses release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    pieces = _pieces(text, display_path, root, version, raw, rows, sealed)
    results: dict[str, tuple[list, list]] = {}
    for p in pieces:
        got = _cached_piece(p.key) if use_cache else None
        if got is not None:
            results[p.key] = got
    missing = [p for p in pieces if p.key not in results]
    rewritten: dict[int, tuple[str, list, list]] = {}
    batches: list[list] = []
    tus: list = []
    if missing:
        for p in missing:
            for i in p.rows:
                file, line = base.lines[i]
                quoted = file.replace("\\", "\\\\").replace('"', '\\"')
                one = rewrite(f'# {line} "{quoted}"\n{raw[i]}', names)
                rewritten[i] = (one.source.split("\n", 1)[1], one.names, one.types)
        size = sum(len(raw[i]) for p in missing for i in p.rows)
        current, have = [], 0
        for p in missing:
            current.append(p)
            have += sum(len(raw[i]) for i in p.rows)
            if have >= size / MAX_BATCHES:
                batches.append(current)
                current, have = [], 0
        if current:
            batches.append(current)
        with ThreadPoolExecutor(max_workers=min(len(batches), os.cpu_count() or 1)) as pool:
            tus = list(pool.map(lambda b: _batch_parse(b, base, rewritten, cut, pch, version),
                                batches))
    return pieces, results, missing, rewritten, batches, tus


def _batch_parse(batch, base: Rewritten, rewritten: dict, cut: int, pch: str | None, version: int):
    """clang's unit of the file with `batch`'s registration rows put back."""
    lines = base.source.split("\n")
    for p in batch:
        for i in p.rows:
            lines[i] = rewritten[i][0]
    tu, _ = _parsed(lines, cut, pch, version)
    return tu


def _cached_piece(key: str) -> tuple[list, list] | None:
    cached = cache_dir() / f"frontend-piece-{key}.json"
    if not cached.is_file():
        return None
    kernel_cache.touch(cached)
    data = json.loads(cached.read_text())
    return data["errors"], [tuple(k) for k in data["kernels"]]


def _store_piece(key: str, result: tuple[list, list]) -> None:
    cached = cache_dir() / f"frontend-piece-{key}.json"
    write_whole(cached, json.dumps({"errors": result[0], "kernels": [list(k) for k in result[1]]}))


def _a_copy_out_of_an_address_space(d) -> bool:
    """A struct copied out of `constant` or `device` memory by its implicit copy constructor
    (`f(input[i], alpha)` with `constant Params& alpha`): a load, which Metal does for any
    address space (MSL §4); clang's implicit constructors take a reference to the generic
    address space only. A user-declared constructor is the user's to qualify."""
    if not d.spelling.startswith("no matching constructor for initialization of"):
        return False
    return any("implicit copy constructor) not viable: cannot bind reference in address space"
               in n.spelling for n in d.children)


def _gxx_error(line: str, display_path: str, root: Path | None) -> str:
    m = re.match(r"^(.+?):(\d+):(?:\d+:)? (?:fatal )?error: (.*)$", line)
    if not m:
        return f"{display_path}:1: {line}"
    message = m.group(3)
    missing = re.match(r"(\S+): No such file or directory", message)
    if missing and "/" not in missing.group(1) and not missing.group(1).startswith("metal_"):
        message = RULES["include"].format(spec=SPEC, what=missing.group(1))
    return f"{_Namer(display_path, root).name(m.group(1))}:{m.group(2)}: {message}"


# the registration macros' static_assert (c10/metal/indexing.h): the declared output type
# first, the functor's result second
_OUTPUT_MISMATCH = re.compile(r"static assertion failed due to requirement "
                              r"'(?:::)?metal::is_same_v<(.+), (.+)>': Output dtype mismatch for "
                              r"\w+ op (\w+) and input (\w+)$")


def _worded(message: str) -> str:
    """clang's message, led by the rule of Metal's it meets where one is known; a registration
    whose output type is not its functor's result in porter's words, which name both."""
    m = _OUTPUT_MISMATCH.search(message)
    if m:
        declared, actual, name, in_type = m.groups()
        # clang spells Metal's half and bfloat as the mode's _Float16 and __bf16
        return wrong_output(name, metal_type(declared), in_type, metal_type(actual))
    if re.search(r"\bstd\b", message):
        return f"{RULES['std'].format(spec=SPEC)}: {message}"
    if "typeid" in message:
        return f"{RULES['rtti'].format(spec=SPEC, what='typeid')}: {message}"
    if "variable length array" in message:
        return f"{RULES['vla'].format(spec=SPEC)}: {message}"
    if "const-qualified type" in message and "address_space(2)" in message:
        # the mode's `constant` is const as well (review 27's L42)
        return f"{RULES['constant write'].format(spec=SPEC)}: {message}"
    if "requires a global constructor" in message:
        return f"{RULES['constant initializer'].format(spec=SPEC)}: {message}"
    return message


class _Namer:
    """File names as messages give them: the kernel file by its display path, the checkout's
    headers relative to the checkout; porter's own mode and library files are not the user's
    and are never named where a user file can be."""

    def __init__(self, display_path: str, root: Path | None, lines=()):
        self.display, self.root, self.lines = display_path, root, lines
        self.own: dict = {}     # _own_declarations of the parse being read
        # the kept findings of the file's functors (porter.emulate.frontend_memo)
        self.memo = frontend_memo.NoMemo()
        self.allowed = [root] if root is not None else []
        self.allowed.append(headers.c10_metal_parent(root) / "c10" / "metal")
        beside = headers.beside(display_path)     # a quoted include's first place: the user's
        if beside is not None:
            self.allowed.append(beside)
        self._memo: dict[str, bool] = {}
        self._header_lines: list[int] | None = None     # holds_header_lines' prefix counts

    def checked(self, name: str) -> bool:
        if name not in self._memo:
            p = Path(name)
            self._memo[name] = name == self.display or (
                p.is_absolute() and not _under(p, MODE_HEADER.parent)
                and not _under(p, LIBRARY_DIR) and any(_under(p, d) for d in self.allowed))
        return self._memo[name]

    def name(self, name: str) -> str:
        if name != self.display and self.root is not None:
            try:
                return str(Path(name).resolve().relative_to(self.root.resolve()))
            except ValueError:
                pass
        return name

    def holds_header_lines(self, extent) -> bool:
        """Whether the lines of `extent` (in clang's text) hold a line of a checked file other
        than the kernel file (True where the extent is not known)."""
        if self._header_lines is None:
            counts, n = [0], 0
            for file, _ in self.lines:
                n += file != self.display and bool(file) and self.checked(file)
                counts.append(n)
            self._header_lines = counts
        try:
            start, end = extent.start.line, extent.end.line
        except Exception:           # noqa: BLE001 (no extent: nothing ruled out)
            return True
        if not 0 < start <= end <= len(self.lines):
            return True
        return self._header_lines[end] - self._header_lines[start - 1] > 0

    def where(self, location) -> tuple[str | None, int]:
        """(file, line) of a location in clang's text, as the line markers say."""
        if location.file is None or not 0 < location.line <= len(self.lines):
            return None, 0
        return self.lines[location.line - 1]

    def diagnostic(self, d) -> str:
        """`file:line: message` at the first place in the user's files the error leads to (an
        error inside the library header is named where the user's call is)."""
        file, line = self.where(d.location)
        message = _worded(d.spelling)
        notes = [self.where(n.location) for n in d.children]
        if file is None or not self.checked(file):
            file, line = next(((f, ln) for f, ln in notes if f is not None and self.checked(f)),
                              (self.display, line))
        text = f"{self.name(file)}:{line}: {message}"
        # an error inside a header's template names the kernel file's line that instantiates it
        if file != self.display:
            for f, ln in reversed(notes):
                if f == self.display:
                    text += f" (instantiated from {self.display}:{ln})"
                    break
        return text


def _under(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(Path(directory).resolve())
        return True
    except ValueError:
        return False


def _ast_rules(tu, namer: _Namer, version: int, cut: int = 0) -> list[str]:
    """`cut`: the unit's lines before it come from a precompiled header whose headers'
    findings are cached; its declarations are then not visited at all (reading them back from
    the header costs what parsing them did), unless a header's findings are missing."""
    ci = _clang()

    K = ci.CursorKind
    found: list[tuple[str, int, str]] = []
    kernel_attr = "metal_kernel"
    declarations = frozenset(getattr(K, n) for n in _DECLARATIONS)
    pointer_casts = frozenset(getattr(K, n) for n in _POINTER_CASTS)

    late_found: list[tuple[str, int, str]] = []     # said after the construct rules

    def add(cursor, rule, late: bool = False, **words):
        file, line = namer.where(cursor.location)
        (late_found if late else found).append((file, line, RULES[rule].format(spec=SPEC, **words)))

    def address_space(t) -> int:
        try:
            if not hasattr(t, "get_address_space"):
                raise AttributeError
            return t.get_canonical().get_address_space()
        except Exception:       # noqa: BLE001 (an older binding: read the spelling)
            m = re.search(r"address_space\((\d+)\)", t.get_canonical().spelling)
            return int(m.group(1)) if m else 0

    def variable_template_outside_constant(cursor) -> bool:
        """A variable template (`template <...> constexpr T name = ...;`, the one template
        declaration libclang leaves unexposed) not declared in the `constant` address space
        (which the mode spells `__attribute__((address_space(2)))`)."""
        words = [t.spelling for t in cursor.get_tokens()]
        if words[:1] != ["template"] or "=" not in words and "{" not in words:
            return False
        head = words[:words.index("=")] if "=" in words else words
        return not any(head[i:i + 3] == ["address_space", "(", "2"] for i in range(len(head)))

    def unqualified(t) -> bool:
        """A pointer or reference type whose pointee has no address space, as clang spells it."""
        return address_space(t.get_pointee()) == 0 and not re.search(
            r"address_space|\b(device|constant|threadgroup)\b", t.spelling)

    type_kind = _type_kind

    def spelled_pointer(cursor) -> str | None:
        """`pointer` or `reference` where the declaration spells one with no address space
        (not one an `auto` or a typedef brings: those take their address space along)."""
        t = cursor.type
        kind = {ci.TypeKind.POINTER: "pointer",
                ci.TypeKind.LVALUEREFERENCE: "reference"}.get(type_kind(t))
        if kind is None or type_kind(t.get_pointee()) in (ci.TypeKind.FUNCTIONPROTO,
                                                    ci.TypeKind.FUNCTIONNOPROTO) \
                or not unqualified(t):
            return None
        children = list(cursor.get_children())
        if any(c.kind == K.ANNOTATE_ATTR and c.spelling == "metal_thread" for c in children):
            return None
        name = cursor.location
        before = [tok.spelling for tok in cursor.get_tokens()
                  if (tok.location.line, tok.location.column) < (name.line, name.column)]
        if "auto" in before or not any(tok in ("*", "&") for tok in before):
            return None
        return kind

    def foreign_type(cursor) -> str | None:
        """The RULES key of a type that is not Metal's, as clang resolved it (an attribute's
        `mode(DF)`, a `1.0L` or `1LL` literal, `decltype(u'a')`): the spelling may not say."""
        try:
            t = cursor.type.get_canonical()
            for _ in range(8):          # to the element type of pointers, arrays, vectors
                kid = t._kind_id
                if kid in _WRAPPING_KINDS:
                    t = t.get_pointee() if kid in (101, 103, 104) else t.element_type
                    continue
                return _FOREIGN_KINDS.get(kid)
        except Exception:   # noqa: BLE001 (a cursor with no type: nothing to say)
            return None
        return None

    int_kinds = {getattr(ci.TypeKind, n) for n in ("CHAR_S", "SCHAR", "CHAR_U", "UCHAR", "SHORT",
                                                   "USHORT", "INT", "UINT", "LONG", "ULONG",
                                                   "LONGLONG", "ULONGLONG")}

    def int_vector(t) -> bool:
        """An extended vector of integers (what clang's vector comparison yields)."""
        try:
            t = t.get_canonical()
            return type_kind(t) == ci.TypeKind.EXTVECTOR and type_kind(t.element_type) in int_kinds
        except Exception:       # noqa: BLE001 (a dependent or unreadable type: not known)
            return False

    def vector_truth(expr, depth: int = 0) -> bool:
        """Whether `expr` is what Metal types as a bool vector and clang as an int vector: a
        comparison, `!`, `&&`/`||` of such, or a local `auto` initialized with one."""
        while expr.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) and depth < 16:
            inner = list(expr.get_children())
            if len(inner) != 1:
                return False
            expr, depth = inner[0], depth + 1
        if expr.kind == K.BINARY_OPERATOR:
            sides = list(expr.get_children())
            if len(sides) != 2:
                return False
            after = [t.spelling for t in expr.get_tokens()
                     if t.extent.start.offset >= sides[0].extent.end.offset][:1]
            if after in (["<"], [">"], ["<="], [">="], ["=="], ["!="]):
                return True
            return after in (["&&"], ["||"]) and all(vector_truth(x, depth + 1) for x in sides)
        if expr.kind == K.UNARY_OPERATOR:
            return [t.spelling for t in expr.get_tokens()][:1] == ["!"]
        if expr.kind == K.DECL_REF_EXPR and depth < 16:
            var = expr.referenced
            if var is None or var.kind != K.VAR_DECL:
                return False
            tokens = [t.spelling for t in var.get_tokens()]
            init = [c for c in var.get_children() if c.kind not in (K.TYPE_REF, K.NAMESPACE_REF)]
            deduced = var.spelling in tokens and "auto" in tokens[:tokens.index(var.spelling)]
            return deduced and len(init) == 1 and vector_truth(init[0], depth + 1)
        return False

    def written_reference(cast, operand) -> bool:
        """Whether the cast's written type is a reference (`(device float&)x`)."""
        written = [t.spelling for t in cast.get_tokens()
                   if t.extent.start.offset < operand.extent.start.offset]
        return "&" in written or "&&" in written

    def address_space_cast(cursor) -> tuple[str, str] | None:
        """(the address space cast to, the one cast from) of a cast of a pointer to a pointer
        of another address space, or of an object to a reference in another one (review 29's
        F05: `(device float&)table[0]` of a `constant` table), else None."""
        try:
            operand = [c for c in cursor.get_children() if c.kind not in (K.TYPE_REF, K.TEMPLATE_REF)]
            if len(operand) != 1:
                return None
            if type_kind(cursor.type.get_canonical()) == ci.TypeKind.POINTER and \
                    type_kind(operand[0].type.get_canonical()) == ci.TypeKind.POINTER:
                to = address_space(cursor.type.get_pointee())
                of = address_space(operand[0].type.get_pointee())
            elif written_reference(cursor, operand[0]):
                # clang types a cast to a reference as its referent (an lvalue of it); the
                # object cast is the operand under clang's implicit conversions
                inner = operand[0]
                while inner.kind == K.UNEXPOSED_EXPR and len(list(inner.get_children())) == 1:
                    inner = next(inner.get_children())
                to, of = address_space(cursor.type), address_space(inner.type)
            else:
                return None
        except Exception:       # noqa: BLE001 (a dependent or unreadable type: not known)
            return None
        return None if to == of else (_SPACES.get(to, str(to)), _SPACES.get(of, str(of)))

    def compound_to_bfloat(cursor) -> bool:
        """`x op= y` of a bfloat x and a float or half y."""
        try:
            sides = list(cursor.get_children())
            return len(sides) == 2 and sides[0].type.get_canonical().spelling == "__bf16" and \
                sides[1].type.get_canonical().spelling in ("float", "_Float16")
        except Exception:       # noqa: BLE001
            return False

    def implicit_to_bfloat(cursor) -> bool:
        """An implicit conversion of a float or half value to bfloat: clang's cast node spans
        exactly its operand (an explicit `bfloat(x)` spans the type's name too)."""
        try:
            if cursor.type.get_canonical().spelling != "__bf16":
                return False
            inner = list(cursor.get_children())
            if len(inner) != 1 or inner[0].type.get_canonical().spelling not in ("float", "_Float16"):
                return False
            here, there = cursor.extent, inner[0].extent
            return (here.start.offset, here.end.offset) == (there.start.offset, there.end.offset)
        except Exception:       # noqa: BLE001 (no extent or type: nothing to say)
            return False

    def visit(cursor, in_function: bool, in_class: bool, in_kernel: bool = False):
        kind = cursor.kind
        foreign = foreign_type(cursor)
        if foreign is not None:
            add(cursor, foreign)
        if kind in (K.PARM_DECL, K.VAR_DECL, K.FIELD_DECL) and not (in_kernel and kind == K.PARM_DECL):
            what = spelled_pointer(cursor)
            if what is not None:        # after the construct rules: `float* p = new float`
                add(cursor, "pointer", late=True,
                    what=f"{what} `{cursor.type.spelling} {cursor.spelling}`")
        if kind == K.VAR_DECL and in_function and not in_kernel and address_space(cursor.type) == 3:
            spelled = re.sub(r"__attribute__\(\(address_space\(\d+\)\)\)\s*", "", cursor.type.spelling)
            add(cursor, "threadgroup local", what=f"threadgroup {spelled} {cursor.spelling}")
        if kind == K.NAMESPACE and cursor.spelling == "std":
            add(cursor, "std")
        if kind in declarations and cursor.spelling in _KEYWORDS:
            # the mode spells them as macros, which an `#undef` removes (review 28's M16)
            add(cursor, "keyword", what=cursor.spelling)
        if kind == K.LAMBDA_EXPR and version < CXX17_VERSION:
            add(cursor, "lambda")
        elif kind in (K.CXX_TRY_STMT, K.CXX_CATCH_STMT, K.CXX_THROW_EXPR if hasattr(K, "CXX_THROW_EXPR") else None):
            add(cursor, "exception", what={K.CXX_TRY_STMT: "try", K.CXX_CATCH_STMT: "catch"}.get(kind, "throw"))
        elif kind in (K.GOTO_STMT, K.INDIRECT_GOTO_STMT):
            add(cursor, "goto")
        elif kind == K.CXX_NEW_EXPR:
            add(cursor, "new", what="new")
        elif kind == K.CXX_DELETE_EXPR:
            add(cursor, "new", what="delete")
        elif kind in (K.CXX_TYPEID_EXPR, K.CXX_DYNAMIC_CAST_EXPR):
            add(cursor, "rtti", what="typeid" if kind == K.CXX_TYPEID_EXPR else "dynamic_cast")
        elif kind == K.UNEXPOSED_EXPR and type_kind(cursor.type) == ci.TypeKind.VOID:
            pass
        elif kind in pointer_casts and address_space_cast(cursor):
            # clang's C-style and reinterpret casts change a pointer's address space; Metal
            # refuses it (review 28's M04: a `constant` array written through a `device` cast)
            to, of = address_space_cast(cursor)
            noun = "pointer" if type_kind(cursor.type.get_canonical()) == ci.TypeKind.POINTER \
                else "object"
            add(cursor, "address space cast", what=f"a {of} {noun} cast to a {to} "
                f"{'one' if noun == 'pointer' else 'reference'}")
        elif kind == K.COMPOUND_ASSIGNMENT_OPERATOR and compound_to_bfloat(cursor):
            # `x += 1.0f` of a bfloat x computes in float and stores the float back (review 28's
            # M10): the implicit conversion Metal refuses, with no cast node of its own
            add(cursor, "bfloat conversion", what=list(cursor.get_children())[1].type.spelling)
        elif kind == K.UNEXPOSED_EXPR and implicit_to_bfloat(cursor):
            # clang converts float to __bf16 implicitly; Metal only explicitly (review 27's
            # L40: `T r = float(a);` of bfloat was accepted)
            add(cursor, "bfloat conversion", what=list(cursor.get_children())[0].type.spelling)
        elif kind == K.CALL_EXPR:
            callee = cursor.referenced
            wanted = _BOOL_VECTOR_ARGUMENT.get(callee.spelling) if callee is not None else None
            arguments = list(cursor.get_arguments()) if wanted is not None else []
            if wanted is not None and len(arguments) > wanted and \
                    int_vector(arguments[wanted].type) and not vector_truth(arguments[wanted]):
                # clang's vector comparison is an int vector, which porter's <metal_relational>
                # accepts for that reason: any other int vector is one Metal refuses (review
                # 27's L43, L44: all(int2(1, 1)), select(a, b, int2(1, 1)) were accepted)
                add(arguments[wanted], "bool vector", what=f"metal::{callee.spelling}",
                    type=re.sub(r"(\w+) __attribute__\(\(ext_vector_type\((\d+)\)\)\)", r"\1\2",
                                arguments[wanted].type.spelling))
            # a compiler builtin (`__sync_fetch_and_add`, `__atomic_load_n`) is declared by
            # clang where it is first called: no header declares it, so nothing says Metal has it
            if callee is not None and callee.kind == K.FUNCTION_DECL and \
                    callee.location.line == cursor.location.line and \
                    callee.location.column == cursor.location.column and \
                    callee.spelling not in _METAL_BUILTINS:
                add(cursor, "implicit builtin", what=callee.spelling)
        if kind in (K.FUNCTION_DECL, K.CXX_METHOD, K.FUNCTION_TEMPLATE, K.CONSTRUCTOR,
                    K.DESTRUCTOR, K.CONVERSION_FUNCTION):
            spec = cursor.exception_specification_kind
            if spec is not None and spec.name in ("BASIC_NOEXCEPT", "COMPUTED_NOEXCEPT",
                                                  "DYNAMIC_NONE", "NOTHROW"):
                add(cursor, "noexcept")
            if kind == K.CXX_METHOD and cursor.is_virtual_method():
                add(cursor, "virtual")
            if type_kind(cursor.type) == ci.TypeKind.FUNCTIONPROTO and \
                    cursor.type.is_function_variadic():
                add(cursor, "variadic")
            children = list(cursor.get_children())
            is_kernel = any(c.kind == K.ANNOTATE_ATTR and c.spelling == kernel_attr for c in children)
            if is_kernel:
                for p in children:
                    if p.kind == K.PARM_DECL and type_kind(p.type) in (
                            ci.TypeKind.POINTER, ci.TypeKind.LVALUEREFERENCE) and unqualified(p.type):
                        add(p, "kernel pointer", what=f"{p.type.spelling} {p.spelling}")
            for c in children:
                visit(c, True, in_class, is_kernel)
            return
        if kind == K.VAR_DECL:
            storage = cursor.storage_class
            if storage == ci.StorageClass.REGISTER:
                add(cursor, "register")
            if getattr(cursor, "tls_kind", None) is not None and cursor.tls_kind.name != "NONE":
                add(cursor, "thread_local")
            space = address_space(cursor.type)
            if in_function and storage == ci.StorageClass.STATIC and space not in (2, 3):
                add(cursor, "static")
            elif in_function and storage == ci.StorageClass.EXTERN and space != 2:
                add(cursor, "program scope")        # `extern T x;` in a body names one
            elif not in_function and not in_class and space != 2:
                add(cursor, "program scope")
            elif not in_function and in_class and space != 2:
                add(cursor, "static member")
        if kind == K.UNEXPOSED_DECL and not in_function and variable_template_outside_constant(cursor):
            # a variable template (libclang exposes no kind of its own): its instantiations
            # are program-scope variables all the same (review 34's L01); c10/metal writes
            # its traits `constexpr constant`
            add(cursor, "static member" if in_class else "program scope")
        class_like = kind in (K.STRUCT_DECL, K.CLASS_DECL, K.UNION_DECL, K.CLASS_TEMPLATE,
                              K.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION)
        for c in cursor.get_children():
            visit(c, in_function, (in_class or class_like) and not in_function, in_kernel)

    def top(cursor):
        for c in cursor.get_children():
            if skip_prefix and c.location.file is not None and c.location.file.name != _UNIT:
                continue
            f, _ = namer.where(c.location)
            if f is None or not namer.checked(f) or f in known:
                if c.kind == K.NAMESPACE and f is not None and not _porters(f):
                    top(c)      # a namespace opened in one file holds declarations of others
                continue
            if c.kind == K.NAMESPACE:
                if c.spelling == "std":
                    visit(c, False, False)
                top(c)
                continue
            namer.memo.replay_or_walk(c, namer.display, {"rules": found, "late": late_found},
                                      lambda: visit(c, False, False))

    # a header's findings do not depend on the file including it: once per header content
    # and version (a kernel file's own are found every time)
    known: dict[str, list] = {}
    for f in {f for f, _ in namer.lines}:
        if f != namer.display and namer.checked(f):
            cached = _header_findings(f, version)
            if cached is not None:
                known[f] = cached
    skip_prefix = bool(cut) and all(f in known for f, _ in namer.lines[:cut]
                                    if f != namer.display and namer.checked(f))
    top(tu.cursor)
    found += late_found
    for f in {f for f, _ in namer.lines} - set(known):
        if f != namer.display and namer.checked(f):
            _store_header_findings(f, version, [x for x in found if x[0] == f])
    found += [tuple(x) for rows in known.values() for x in rows]
    return [f"{namer.name(f)}:{ln}: {m}" for f, ln, m in dict.fromkeys(found)]


_HEADER_FINDINGS: dict[str, list] = {}


def _header_key(path: str, version: int) -> str | None:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    h = hashlib.sha256(f"frontend-header1\0{path}\0{version}\0".encode())
    h.update(_mode_digest().encode())
    h.update(data)
    return h.hexdigest()[:32]


def _header_findings(path: str, version: int) -> list | None:
    key = _header_key(path, version)
    if key is None:
        return None
    if key in _HEADER_FINDINGS:
        return _HEADER_FINDINGS[key]
    cached = cache_dir() / f"frontend-header-{key}.json"
    if cached.is_file():
        kernel_cache.touch(cached)
        _HEADER_FINDINGS[key] = [tuple(x) for x in json.loads(cached.read_text())]
        return _HEADER_FINDINGS[key]
    return None


def _store_header_findings(path: str, version: int, rows: list) -> None:
    key = _header_key(path, version)
    if key is None:
        return
    _HEADER_FINDINGS[key] = rows
    cached = cache_dir() / f"frontend-header-{key}.json"
    write_whole(cached, json.dumps([list(r) for r in rows]))


def metallib_files(root: Path | None, display_path) -> list[Path]:
    """The kernel files linked into the same metallib as `display_path`, itself included:
    upstream's cmake/Metal.cmake compiles every aten/src/ATen/native/mps/kernels/*.metal to AIR
    and links them into one metallib. A file outside the checkout's kernels is a metallib of
    its own ([])."""
    if root is None:
        return []
    kernels = Path(root) / "aten" / "src" / "ATen" / "native" / "mps" / "kernels"
    here = Path(display_path)
    here = here if here.is_absolute() else Path(root) / here
    if not _under(here, kernels):
        return []
    try:
        return sorted(kernels.glob("*.metal"))
    except OSError:
        return []


def kernel_names(text: str, display_path, root) -> list[tuple[str, str]]:
    """The kernel names (`[[host_name]]`) `text` defines, as (name, `file:line`): the file
    preprocessed as the primary version's metallib build preprocesses it (no parse), cached by
    content. A name is read where the registration macro expands: the kernel file's line, or
    a checkout header's."""
    root = Path(root) if root is not None else None
    version = METAL_VERSIONS[0]
    key = hashlib.sha256(f"frontend-names1\0{display_path}\0{root}\0{version}\0".encode())
    key.update(_mode_digest().encode() + _headers_digest(root, display_path, text).encode() + text.encode())
    cached = cache_dir() / f"frontend-names-{key.hexdigest()[:32]}.json"
    if cached.is_file():
        kernel_cache.touch(cached)
        return [tuple(k) for k in json.loads(cached.read_text())]
    pre, _ = _preprocess(text, str(display_path), root, version)
    found: list[tuple[str, str]] = []
    if pre is not None and "host_name" in pre:
        namer = _Namer(str(display_path), root)
        raw = pre.split("\n")
        for (file, line), row in zip(_positions(raw), raw):
            if "host_name" not in row or row.startswith("# ") or _porters(file) or \
                    not namer.checked(file):
                continue
            for m in _HOST_NAME.finditer(row):
                found.append((_joined(m.group(1)), f"{namer.name(file)}:{line}"))
    write_whole(cached, json.dumps([list(k) for k in found]))
    return found


def _joined(literals: str) -> str:
    """The string adjacent literals (`"ge" "_strided_" "float"`) spell: a split at the quotes
    where no literal holds an escape (a registration's thousands of names: 5x faster than the
    regex), else the regex."""
    if "\\" in literals:
        return "".join(_STRING_PART.findall(literals))
    return "".join(literals.split('"')[1::2])


def duplicate_names(text: str, display_path, root) -> list[str]:
    """Every kernel name defined twice in the metallib `display_path` is linked into: in one
    file (two registrations of one name) or in two of its files, each named at both places.
    On a Mac the metallib does not link, so no kernel of it loads: the error is every file's.
    `text` is `display_path`'s content (an edit not yet saved); the other files are read from
    the checkout."""
    files = metallib_files(Path(root) if root is not None else None, display_path)
    here = Path(display_path)
    here = here if here.is_absolute() or root is None else Path(root) / here
    texts: list[tuple[str, str]] = [(text, str(display_path))]
    for other in files:
        if other.resolve() == here.resolve():
            continue
        try:
            texts.append((other.read_text(encoding="utf-8"),
                          os.path.relpath(other, root) if root is not None else str(other)))
        except OSError:
            continue
    seen: dict[str, str] = {}
    errors = []
    for body, shown in texts:
        for name, where in kernel_names(body, shown, root):
            if name in seen and seen[name] != where:
                errors.append(f"{where}: " + RULES["duplicate name"].format(
                    spec=SPEC, what=name, other=seen[name]))
            seen.setdefault(name, where)
    return errors
