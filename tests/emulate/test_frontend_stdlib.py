"""Metal's standard library as porter's front end sees it (porter/emulate/frontend_include).

Three things are held here, each parsed by libclang in the front end's Metal mode:
1. every library call of the real code resolves: the installed wheel's c10/metal headers, the
   real-size tree's kernel files and, where a fetched upstream checkout is at hand
   ($PORTER_UPSTREAM: only where a developer names one, so CI's runs never read a
   stray tree), upstream's kernel files, instantiated
   through their `REGISTER_*` lines, under every Metal version PyTorch builds;
2. a table of calls Metal rejects, each beside its clean twin (a header that resolved too much,
   as porter's g++ shim does, turns the rejected rows green and fails here);
3. every call shape the library resolves is executed by the g++ shim with the same result type,
   or listed in frontend_include/NOT_EXECUTABLE (a kernel calling it is "not proven"):
   regenerate that list with EXPECTTEST_ACCEPT=1 after a change to either side.

Until the front end's mode (porter/emulate/frontend_mode/metal_mode.h) is in the tree, a
stand-in with the same choices is used (tests/emulate/data/frontend_mode_standin.h).
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

import pytest

ci = pytest.importorskip("clang.cindex")

from porter.emulate import headers  # noqa: E402

EMULATE = Path(headers.__file__).resolve().parent
LIBRARY = EMULATE / "frontend_include"
SHIM = headers.SHIM_DIR
FE_MODE = EMULATE / "frontend_mode" / "metal_mode.h"
DATA = Path(__file__).parent / "data"
MODE = FE_MODE if FE_MODE.is_file() else DATA / "frontend_mode_standin.h"
NOT_EXECUTABLE = LIBRARY / "NOT_EXECUTABLE"
VERSIONS = (310, 320, 400)
UPSTREAM = Path(os.environ["PORTER_UPSTREAM"]) if os.environ.get("PORTER_UPSTREAM") else None

# The front end's own text rewrites that plain clang needs before these files parse at all:
# `[[host_name("..")]]` on an explicit instantiation (clang takes no attribute there), and
# Metal's unsuffixed floating literals, which are float (under -cl-single-precision-constant
# clang makes them float when it parses, but a template's instantiation rebuilds the
# arithmetic from the literal as a double).
_HOST_NAME = re.compile(r"\[\[\s*host_name\s*\((?:[^()]|\([^()]*\))*\)\s*\]\]")
_FLOAT_LITERAL = re.compile(
    r"(?<![\w.])((?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])")


def metal_text(text: str) -> str:
    return _FLOAT_LITERAL.sub(r"\1f", _HOST_NAME.sub("", text))


def library_args(version: int, includes=()) -> list[str]:
    return ["-x", "c++", "-std=c++17" if version >= 400 else "-std=c++14", "-nostdinc",
            "-nostdinc++", f"-D__METAL_VERSION__={version}", "-D__METAL__", "-D__METAL_MACOS__",
            "-D__HAVE_BFLOAT__", "-include", str(MODE), f"-I{LIBRARY}",
            *(f"-I{d}" for d in includes), "-cl-single-precision-constant",
            "-Wno-unknown-attributes", "-ferror-limit=0"]


def parse(name: str, text: str, version: int, includes=(), unsaved=()):
    return ci.Index.create().parse(name, args=library_args(version, includes),
                                   unsaved_files=[(name, text), *unsaved])


def _in_library(location) -> bool:
    return location.file is not None and \
        Path(location.file.name).resolve().is_relative_to(LIBRARY)


_NAME_ERROR = re.compile(r"in namespace '(?:::)?metal(?:::\w+)?'|use of undeclared identifier|"
                         r"unknown type name|no template named")


def library_errors(tu) -> list[str]:
    """Errors about the library: a call resolved against (or failing on) its declarations, or a
    name it lacks. Other errors (a vector constructor clang has no syntax for, an address-space
    copy) are the front end's to model and are not counted here."""
    found = []
    for d in tu.diagnostics:
        if d.severity < ci.Diagnostic.Error:
            continue
        if _in_library(d.location) or any(_in_library(n.location) for n in d.children) or \
                _NAME_ERROR.search(d.spelling):
            found.append(str(d))
    return found


def _resolved_library_calls(tu) -> int:
    """Calls in the unit whose callee is declared in the library (instantiations included)."""
    count = 0
    for c in tu.cursor.walk_preorder():
        if c.kind == ci.CursorKind.CALL_EXPR and c.referenced is not None and \
                _in_library(c.referenced.location):
            count += 1
    return count


# ------------------------------------------------------------------ 1. the real code resolves

def _wheel_c10() -> Path | None:
    include = headers.torch_include_dir()
    return include if include is not None and (include / "c10" / "metal").is_dir() else None


def _c10_headers() -> list[str]:
    parent = _wheel_c10()
    return sorted(p.name for p in (parent / "c10" / "metal").glob("*.h")) if parent else []


@pytest.mark.parametrize("version", VERSIONS)
def test_every_c10_metal_header_of_the_wheel_resolves_its_library_calls(version):
    parent = _wheel_c10()
    if parent is None:
        pytest.skip("torch's c10/metal headers are not installed")
    names = _c10_headers()
    assert len(names) >= 8, names
    # each header as a kernel file includes it (after <metal_stdlib>, as upstream's do)
    text = "#include <metal_stdlib>\n" + "".join(f"#include <c10/metal/{n}>\n" for n in names)
    unsaved = [(str(p), metal_text(p.read_text()))
               for p in (parent / "c10" / "metal").glob("*.h")]
    tu = parse("c10_headers.metal", text, version, [parent], unsaved)
    assert library_errors(tu) == []
    assert _resolved_library_calls(tu) > 100


def _kernel_files() -> list[tuple[str, Path, Path]]:
    """(id, file, root): upstream's real kernel files, when a fetched checkout is at hand."""
    if UPSTREAM is None or not (UPSTREAM / "READY").is_file():
        return []
    kernels = UPSTREAM / "aten" / "src" / "ATen" / "native" / "mps" / "kernels"
    return [(p.name, p, UPSTREAM) for p in sorted(kernels.glob("*.metal"))]


def _parse_kernel_file(path: Path, root: Path, c10_parent: Path, version: int):
    kernels = root / "aten" / "src" / "ATen" / "native" / "mps" / "kernels"
    sources = [*kernels.glob("*.h"), *(c10_parent / "c10" / "metal").glob("*.h")]
    unsaved = [(str(p), metal_text(p.read_text())) for p in sources]
    return parse(str(path), metal_text(path.read_text()), version,
                 [root / "aten" / "src", c10_parent], unsaved)


@pytest.mark.parametrize("version", (310, 400))
def test_the_real_size_trees_kernel_files_resolve_every_library_call(real_root, version):
    kernels = sorted((real_root / "aten/src/ATen/native/mps/kernels").glob("*.metal"))
    assert kernels
    for path in kernels:
        tu = _parse_kernel_file(path, real_root, headers.c10_metal_parent(real_root), version)
        assert library_errors(tu) == [], path.name
        assert _resolved_library_calls(tu) > 0, path.name


@pytest.mark.parametrize(("name", "path", "root"), _kernel_files() or
                         [pytest.param("-", None, None, marks=pytest.mark.skip(
                             reason="no fetched upstream checkout ($PORTER_UPSTREAM)"))])
@pytest.mark.parametrize("version", (310, 400))
def test_upstreams_kernel_files_resolve_every_library_call(name, path, root, version):
    # upstream's c10/metal where the checkout has it, else the wheel's (as porter builds)
    c10 = root if (root / "c10" / "metal" / "indexing.h").is_file() else _wheel_c10()
    tu = _parse_kernel_file(path, root, c10, version)
    assert library_errors(tu) == []
    assert _resolved_library_calls(tu) > 100


# ------------------------------------------------------------------ 2. what Metal rejects

PROBE = """#include <metal_stdlib>
using namespace metal;
void probe(float x, half h, bfloat b, int i, uint u, long l, short s, float2 f2, float3 f3,
           half2 h2, int2 i2, device atomic<float>* af, device atomic_uint* au) {{
  {code};
}}
"""
_CODE_LINE = PROBE.split("\n").index("  {code};") + 1

# (id, code, versions where Metal accepts it (others reject), what a rejection says)
ALL = VERSIONS
TABLE = [
    # metal::max/min/clamp are non-template overloads per type: an int literal beside a float
    # fits several of them equally
    ("max-float-int", "metal::max(x, 0)", (), r"call to 'max' is ambiguous"),
    ("max-float-float", "metal::max(x, 0.0f)", ALL, None),
    ("min-long-int", "metal::min(l, 0)", (), r"ambiguous"),
    ("min-long-long", "metal::min(l, 0l)", ALL, None),
    ("clamp-float-ints", "metal::clamp(x, 0, 1)", (), r"ambiguous"),
    ("clamp-floats", "metal::clamp(x, 0.0f, 1.0f)", ALL, None),
    # pow has no integer overloads: the int converts, the float overload wins on `x`
    ("pow-float-int", "metal::pow(x, 2)", ALL, None),
    ("pow-half-float", "metal::pow(h, x)", (), r"ambiguous"),
    ("pow-float-float", "metal::pow(x, 2.0f)", ALL, None),
    # no bfloat math: a bfloat argument goes through float (bfloat -> half is not implicit),
    # so nextafter steps a float ULP (upstream #190476); a declared bfloat overload fails this
    ("nextafter-bfloat-is-float",
     "static_assert(metal::is_same_v<decltype(metal::nextafter(b, b)), float>, \"\")", ALL,
     None),
    ("nextafter-half-bfloat-is-float",
     "static_assert(metal::is_same_v<decltype(metal::nextafter(h, b)), float>, \"\")", ALL,
     None),
    # abs/max/min/clamp/simd_* have integer overloads too: bfloat -> float wins as a promotion
    # (Apple's MLX: `metal::abs(a)` of a bfloat returns float), an int beside it stays ambiguous
    ("max-bfloat-int", "metal::max(b, 0)", (), r"ambiguous|deleted function"),
    ("clamp-bfloat-ints", "metal::clamp(b, 0, 1)", (), r"ambiguous|deleted function"),
    ("max-bfloat-half-is-float",
     "static_assert(metal::is_same_v<decltype(metal::max(b, h)), float>, \"\")", ALL, None),
    ("abs-bfloat2", "metal::abs(bfloat2(b))", (), r"no matching function"),
    ("nextafter-halves", "metal::nextafter(h, h)", ALL, None),
    ("abs-bfloat-is-float",
     "static_assert(metal::is_same_v<decltype(metal::abs(b)), float>, \"\")", ALL, None),
    ("simd-sum-bfloat-is-float",
     "static_assert(metal::is_same_v<decltype(metal::simd_sum(b)), float>, \"\")", ALL, None),
    # precise:: and fast:: are float only: a half converts, and the result is a float
    ("precise-half-is-float",
     "static_assert(metal::is_same_v<decltype(metal::precise::sqrt(h)), float>, \"\")", ALL,
     None),
    ("precise-half2", "metal::precise::exp(h2)", (), r"no matching function"),
    ("precise-float2", "metal::precise::exp(f2)", ALL, None),
    # not in Metal's library at all (C's and std::'s functions)
    ("std-max", "std::max(x, x)", (), r"undeclared identifier 'std'|'std'"),
    ("cbrt", "metal::cbrt(x)", (), r"no member named 'cbrt' in namespace 'metal'"),
    ("log1p", "metal::log1p(x)", (), r"no member named 'log1p' in namespace 'metal'"),
    ("erf", "metal::erf(x)", (), r"no member named 'erf' in namespace 'metal'"),
    ("log-twin", "metal::log(1.0f + x)", ALL, None),
    ("global-sqrt", "::sqrt(x)", ALL, None),      # found through `using namespace metal`
    ("double", "metal::sqrt((double)x)", (), r"ambiguous"),
    ("double-twin", "metal::sqrt((float)x)", ALL, None),
    ("fma-half-float", "metal::fma(h, h, x)", (), r"ambiguous"),
    ("isnan-int", "metal::isnan(i)", (), r"ambiguous"),
    ("isnan-float", "metal::isnan(x)", ALL, None),
    # geometric functions take vectors of one type and size
    ("dot-sizes", "metal::dot(f2, f3)", (), r"no matching function"),
    ("dot-twin", "metal::dot(f2, f2)", ALL, None),
    ("cross-2", "metal::cross(f2, f2)", (), r"no matching function"),
    # SIMD-group functions: no 64-bit integers
    ("simd-sum-long", "metal::simd_sum(l)", (), r"ambiguous|no matching function"),
    ("simd-sum-int", "metal::simd_sum(i)", ALL, None),
    ("simd-broadcast", "metal::simd_shuffle_down(x, 1)", ALL, None),
    ("ballot", "(ulong)metal::simd_ballot(x > 0)", ALL, None),
    ("ballot-implicit", "ulong(0) + metal::simd_ballot(x > 0)", (), r"invalid operands"),
    # integer functions
    ("ctz-ulong", "metal::ctz((ulong)l)", ALL, None),
    ("mul24-long", "metal::mul24(l, l)", (), r"ambiguous|no matching function"),
    ("mul24-int", "metal::mul24(i, i)", ALL, None),
    ("popcount-float", "metal::popcount(x)", (), r"ambiguous"),
    # atomics: device memory, relaxed order; fences and other orders from Metal 3.2
    ("atomic-float-add", "metal::atomic_fetch_add_explicit(af, x, memory_order_relaxed)", ALL,
     None),
    ("atomic-uint-xor", "metal::atomic_fetch_xor_explicit(au, u, memory_order_relaxed)", ALL,
     None),
    ("atomic-float-xor", "metal::atomic_fetch_xor_explicit(af, x, memory_order_relaxed)", (),
     r"no matching function"),
    ("atomic-thread-pointer", "metal::atomic_load_explicit((atomic_uint*)nullptr, "
     "memory_order_relaxed)", (), r"no matching function"),
    ("fence", "metal::atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, "
     "thread_scope_device)", (320, 400), r"no member named 'atomic_thread_fence'"
     r"|undeclared identifier"),
    ("barrier", "threadgroup_barrier(mem_flags::mem_threadgroup)", ALL, None),
    # traits and limits hold what Metal's do
    ("traits", "static_assert(metal::is_floating_point_v<half2> && metal::is_scalar_v<bfloat> "
     "&& !metal::is_scalar_v<float2> && metal::is_integral_v<uint3>, \"\")", ALL, None),
    ("limits-vector", "metal::numeric_limits<float2>::infinity().x", ALL, None),
    ("limits-bfloat", "static_assert(metal::numeric_limits<bfloat>::max() == 0x1.fep+127f, \"\")",
     ALL, None),
    ("as-type-sizes", "as_type<ushort>(x)", (), r"no matching function for call to 'as_type'"),
    ("as-type", "as_type<half2>(u)", ALL, None),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("code", "accepted", "message"),
                         [pytest.param(c, a, m, id=i) for i, c, a, m in TABLE])
@pytest.mark.slow
def test_a_call_resolves_exactly_where_metal_resolves_it(code, accepted, message, version):
    statement = code if code.startswith("static_assert") else f"(void)({code})"
    tu = parse("probe.metal", PROBE.format(code=statement), version)
    errors = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error]
    if version in accepted:
        assert [str(d) for d in errors] == []
    else:
        assert errors, f"Metal {version} rejects `{code}`; the library accepts it"
        assert errors[0].location.line == _CODE_LINE, str(errors[0])
        assert re.search(message, errors[0].spelling), str(errors[0])


def test_the_table_has_rejections_and_twins():
    rejected = [row for row in TABLE if row[2] != ALL]
    assert len(rejected) >= 15 and len(TABLE) - len(rejected) >= 15


# ------------------------------------------------------------------ 3. executed by the shim

K = ci.CursorKind
_SCALARS = ["bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half",
            "float", "bfloat"]
_PROBE_TYPES = _SCALARS + [f"{t}2" for t in ("char", "short", "int", "uint", "long", "half",
                                             "float", "bfloat")] + ["float3", "half4"]
_AS_NAMES = {"1": "device", "2": "constant", "3": "threadgroup"}


def library_declarations(version: int) -> list[tuple[str, tuple[str, ...]]]:
    """(qualified name, parameter types) of every function the library declares."""
    tu = parse("decls.metal", "#include <metal_stdlib>\n", version)
    assert [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error] == []
    found = []

    def walk(cursor, namespace):
        for c in cursor.get_children():
            if c.kind == K.NAMESPACE:
                walk(c, [*namespace, c.spelling])
            elif c.kind == K.FUNCTION_DECL and namespace[:1] == ["metal"] and \
                    _in_library(c.location) and not c.spelling.startswith("operator"):
                found.append(("::".join([*namespace, c.spelling]),
                              tuple(a.type.spelling for a in c.get_arguments())))
    walk(tu.cursor, [])
    return found


def _spell(t: str) -> str:
    """A parameter type in words both worlds read (address spaces by their macros)."""
    t = re.sub(r"__attribute__\(\(address_space\((\d)\)\)\)", lambda m: _AS_NAMES[m.group(1)], t)
    return re.sub(r"\b(atomic|memory_order|mem_flags|thread_scope|simd_vote)\b", r"metal::\1",
                  t).replace("&", "").strip()


def _argument(name: str, position: int, t: str) -> str:
    # all/any/select's mask: a comparison's result, whichever type each world gives it (clang's
    # vectors compare to intN, the shim's to its bool vectors)
    if (name.endswith("::all") or name.endswith("::any") or
            (name.endswith("::select") and position == 2)) and re.fullmatch(r"(char|short|int|long)\d", t):
        return f"(porter_lvalue<{t}>() == porter_lvalue<{t}>())"
    return f"porter_lvalue<{_spell(t)}>()"


def call_shapes(decls) -> list[tuple[str, tuple[str, ...]]]:
    """Each declared overload called with its own types, and each name called with every probe
    type in every position (the shapes a kernel's call can take through conversions)."""
    shapes = dict.fromkeys(decls)
    for name, arity in sorted({(n, len(p)) for n, p in decls}):
        for t in _PROBE_TYPES if arity else ():
            shapes.setdefault((name, (t,) * arity))
    return list(shapes)


def _norm(t: str) -> str:
    t = re.sub(r"\bconst\s+|\s+", lambda m: "" if "const" in m.group(0) else " ", t).strip()
    m = re.fullmatch(r"(.*?) __attribute__\(\(ext_vector_type\((\d)\)\)\)", t) or \
        re.fullmatch(r"metal::vec<(.*), (\d)>", t)
    if m:
        return _norm(m.group(1)) + m.group(2)
    return {"_Float16": "half", "__bf16": "bfloat", "unsigned int": "uint", "unsigned char": "uchar",
            "unsigned short": "ushort", "unsigned long": "ulong", "signed char": "char",
            "metal::simd_vote": "simd_vote"}.get(t, t)


def result_types(world: str, args: list[str], shapes) -> dict[int, str]:
    """The result type of each call shape that resolves in `world` (its header's text)."""
    head = f"{world}\ntemplate <typename T> T& porter_lvalue();\n"
    base = head.count("\n") + 1
    body = "\n".join(
        f"typedef decltype({name}({', '.join(_argument(name, k, t) for k, t in enumerate(ps))})) "
        f"porter_r{i};"
        for i, (name, ps) in enumerate(shapes))
    tu = ci.Index.create().parse("shapes.metal", args=args,
                                 unsaved_files=[("shapes.metal", head + body + "\n")])
    failed = {d.location.line - base for d in tu.diagnostics
              if d.severity >= ci.Diagnostic.Error and d.location.file is not None and
              d.location.file.name == "shapes.metal"}
    return {int(c.spelling[8:]): _norm(c.underlying_typedef_type.get_canonical().spelling)
            for c in tu.cursor.get_children()
            if c.kind == K.TYPEDEF_DECL and c.spelling.startswith("porter_r") and
            int(c.spelling[8:]) not in failed}


def shim_args(version: int) -> list[str]:
    return ["-x", "c++", "-std=c++17", f"-D__METAL_VERSION__={version}", f"-I{SHIM}",
            "-ferror-limit=0", "-Wno-reserved-user-defined-literal", "-Wno-user-defined-literals"]


def not_executable(version: int = 310) -> list[str]:
    """The library's call shapes the shim does not run as Metal resolves them: a name alone
    when none of its shapes runs, else `name(types)` per shape."""
    decls = library_declarations(version)
    shapes = call_shapes(decls)
    metal = result_types("#include <metal_stdlib>", library_args(version), shapes)
    shim = result_types("#include <porter/metal.h>", shim_args(version), shapes)
    assert len(metal) > 2000, len(metal)        # the comparison ran on real call shapes
    wrong = collections.defaultdict(list)
    for i, (name, params) in enumerate(shapes):
        if i in metal and shim.get(i) != metal[i]:
            wrong[name].append(f"{name}({', '.join(_spell(p) for p in params)})"
                               + ("" if i not in shim else f"  # shim: {shim[i]}, Metal: {metal[i]}"))
    resolving = collections.Counter(name for i, (name, _) in enumerate(shapes) if i in metal)
    lines = []
    for name in sorted(wrong):
        lines += [name] if len(wrong[name]) == resolving[name] else wrong[name]
    return lines


_LIST_HEAD = """\
# Generated by tests/emulate/test_frontend_stdlib.py (EXPECTTEST_ACCEPT=1 rewrites it).
# Call shapes Metal's library resolves (the declarations of this directory) that porter's g++
# shim (porter/emulate/include/porter/metal.h) does not execute as Metal resolves them: absent
# there, or resolved to another result type. A line is a qualified name (every call of it) or
# `name(argument types)` (that call shape). A kernel calling one is "not proven", never run.
"""


@pytest.mark.slow
def test_every_call_the_library_resolves_is_executed_by_the_shim_or_listed():
    expected = _LIST_HEAD + "".join(line + "\n" for line in not_executable())
    if os.environ.get("EXPECTTEST_ACCEPT"):
        NOT_EXECUTABLE.write_text(expected)
    assert NOT_EXECUTABLE.read_text() == expected
    # a call shape the shim resolves to another result type than Metal would still run, with
    # the shim's type (review 27's B08, B13: `max(bool, bool)` a bool, where Metal answers an
    # int): the shim must match, the list names only what it lacks
    assert not [line for line in expected.splitlines() if "# shim:" in line]
    # #190476's call is not listed: the shim has no bfloat nextafter, so a bfloat call resolves to
    # the float overload there as on a Mac and runs as Metal runs it
    lines = expected.splitlines()
    assert not any(line.startswith("metal::nextafter(bfloat") for line in lines)
    assert "metal::nextafter(half2, half2)" in expected
    # fmax3/fmin3 run in the shim (review 33's B07), and fmedian3 and fast::clamp, both ways
    # on a NaN operand (review 15's B09); distance_squared does not run (not proven)
    assert not [ln for ln in lines if ln.startswith(("metal::fmax3", "metal::fmin3",
                                                     "metal::precise::fmax3", "metal::fmedian3",
                                                     "metal::fast::fmedian3", "metal::fast::clamp"))]
    assert "metal::distance_squared" in lines
