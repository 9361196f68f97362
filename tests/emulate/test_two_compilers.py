"""Where the emulator's g++ build would read a kernel file otherwise than Apple's Metal compiler
(porter.emulate.two_compilers; review 31's L03-L11: the front end checked Metal's branch, g++
built and ran the other one, and every dtype was green)."""

from __future__ import annotations

import pytest

from porter.emulate.headers import include_dirs
from porter.emulate.toolchain import compiler
from porter.emulate.two_compilers import files_read, first_unlike
from porter.source.checkout import KERNELS
from tests.porter_run import porter

BODY = "    return a == 0 ? b : static_cast<T>(a > 0);\n"


def _file(before_body: str = "", body: str = BODY, after: str = "") -> str:
    return ("#include <c10/metal/utils.h>\n" + after +
            "struct h_functor {\n  template <typename T>\n  inline T operator()(const T a, const T b) {\n"
            + before_body + body + "  }\n};\n")


def _branch(condition: str) -> str:
    return f"#{condition}\n{BODY}#else\n    return b;\n#endif\n"


# (case, the file, the line named or None where both compilers read it alike)
TABLE = [
    # conditions: porter's agreed macros, the file's own, names no compiler predefines
    ("metal version", _file(body=_branch("if __METAL_VERSION__ >= 310")), None),
    ("bfloat guard", _file(body=_branch("if defined(__HAVE_BFLOAT__)")), None),
    ("__METAL__", _file(body=_branch("ifdef __METAL__")), None),
    ("a macro of the file", _file(after="#define __PORTER_FAST 1\n",
                                  body=_branch("if __PORTER_FAST")), None),
    ("a user's name", _file(body=_branch("ifdef USE_FAST_PATH")), None),
    ("torch's own", _file(body=_branch("if !defined(TORCH_STABLE_ONLY)")), None),
    # ... anything else is a compiler's: g++'s and Apple's differ or are not known
    ("__clang__", _file(body=_branch("ifdef __clang__")), 5),
    ("__linux__", _file(body=_branch("if defined(__linux__) || defined(__x86_64__)")), 5),
    ("__APPLE__", _file(body=_branch("ifndef __APPLE__")), 5),
    ("__cplusplus", _file(body=_branch("if __cplusplus >= 201703L")), 5),
    ("__has_include", _file(body=_branch("if __has_include(<cmath>)")), 5),
    ("continued", _file(body="#if defined(__METAL__) && \\\n    defined(__GNUC__)\n" + BODY
                        + "#else\n    return b;\n#endif\n"), 5),
    ("in a comment: no condition", _file(body="    // #ifdef __clang__\n" + BODY), None),
    # code reading a macro g++ predefines (its value is g++'s there)
    ("g++ macro in code", _file(body="    if (__x86_64__) return b;\n" + BODY), 5),
    ("g++ macro in a define", _file(after="#define WIDE __SIZEOF_LONG__\n"), 2),
    ("__LINE__ is everyone's", _file(body="    (void)__LINE__;\n" + BODY), None),
    # review 33: the file's path (C07); a value porter does not model (C30, C31); the macOS
    # macro, not known under every version (C33); a trigraph C++14 replaces and C++17 keeps (C32)
    ("__FILE__", _file(body="    if (__FILE__[1] == 'U') return b;\n" + BODY), 5),
    ("__HAVE_BFLOAT__'s value", _file(body=_branch("if __HAVE_BFLOAT__ + 0 == 1")), 5),
    ("__METAL__ as defined", _file(body=_branch("if defined(__METAL__) && defined(__HAVE_BFLOAT__)")), None),
    ("__METAL_MACOS__", _file(body=_branch("ifdef __METAL_MACOS__")), 5),
    ("trigraph", _file(body="    // the end??/\n" + BODY), 5),
    # review 34: a macro only g++'s shim sees through the libc headers (P01), a keyword the
    # stand-ins spell as a macro (P02), Apple's own `METAL_*` (P05); Metal's specification's
    # macros both stand-ins define read alike
    ("libc's macro", _file(body=_branch("ifdef SIG_ATOMIC_MAX")), 5),
    ("libc's macro, negated", _file(body=_branch("ifndef INT32_MAX")), 5),
    ("a keyword", _file(body=_branch("ifndef device")), 5),
    ("Apple's METAL_FUNC", _file(body=_branch("ifdef METAL_FUNC")), 5),
    ("the specification's FLT_MAX", _file(body=_branch("if FLT_MAX > 1 && defined(INFINITY)")), None),
    # attributes
    ("optimize", _file(after="__attribute__((optimize(\"finite-math-only\"))) inline bool n(float x) "
                       "{ return x != x; }\n"), 2),
    ("gnu::optimize", _file(after="[[gnu::optimize(\"fast-math\")]] inline bool n(float x) "
                            "{ return x != x; }\n"), 2),
    ("target", _file(after="__attribute__((target(\"avx2\"))) inline float n(float x) { return x; }\n"), 2),
    ("always_inline", _file(after="__attribute__((always_inline)) inline float n(float x) "
                            "{ return x; }\n"), None),
    ("Metal's", _file(after="kernel void k(device float* o [[buffer(0)]], uint i "
                      "[[thread_position_in_grid]]) { o[i] = 0; }\n"), None),
    ("maybe_unused", _file(before_body="    [[maybe_unused]] int unused = 0;\n"), None),
]


@pytest.mark.parametrize(("case", "text", "line"), TABLE, ids=[row[0] for row in TABLE])
def test_what_both_compilers_read_alike(case, text, line):
    found = first_unlike([("k.metal", text)], compiler())
    assert (found and found[1]) == (line or None), found


def test_a_header_the_file_includes_is_read_too(real_root):
    """A checkout header's condition: g++ reads it in every kernel file including it."""
    utils = real_root / "c10" / "metal" / "utils.h"
    text = (real_root / KERNELS / "BinaryKernel.metal").read_text()
    dirs = [d for d in include_dirs(real_root)][1:]
    assert first_unlike([("B.metal", text), *((str(p), t) for p, t in files_read(text, dirs))],
                        compiler()) is None
    utils.write_text(utils.read_text() + "\n#ifdef __linux__\n#endif\n")
    found = first_unlike([("B.metal", text), *((str(p), t) for p, t in files_read(text, dirs))],
                         compiler())
    assert found and found[0].endswith("c10/metal/utils.h"), found


@pytest.mark.parametrize(("condition", "code"), [("ifdef __linux__", 1), ("ifdef __METAL__", 0)])
@pytest.mark.slow
def test_a_branch_g_plus_plus_takes_otherwise_is_not_proven(real_root, condition, code):
    """Review 31's L06: the right body under `#ifdef __linux__`, the wrong one under `#else`:
    a Mac builds the wrong one; the emulator ran g++'s. Its `__METAL__` twin is green."""
    path = real_root / KERNELS / "BinaryKernel.metal"
    text = path.read_text()
    old = "return static_cast<T>(::metal::fmax(float(a), float(b)));"
    assert old in text
    path.write_text(text.replace(old, f"\n#{condition}\n    {old}\n#else\n    return a;\n#endif\n"))
    result = porter("test", "fmax", "--device", "emulate", "--dtype", "float32",
                    "--samples-only", root=real_root)
    assert result.code == code, result.out
    if code:
        assert "BinaryKernel.metal:" in result.out and "tests `__linux__`" in result.out


def test_the_masks_kept_by_text_follow_an_edited_header():
    # code_mask_keep_includes and first_unlike's masks are kept by the text: a header edited
    # between two rounds of --watch (an Apple SDK header included, a g++ macro tested) is read
    # as it is now
    from porter.emulate.two_compilers import apple_header
    header = "#pragma once\n// #include <simd/simd.h>\ninline float f(float x) { return x; }\n"
    files = [("k.metal", '#include "h.h"\n'), ("h.h", header)]
    for _ in range(2):
        assert apple_header(files) is None
        assert first_unlike(files, compiler()) is None
    edited = header.replace("// #include", "#include").replace(
        "inline", "#ifdef __GNUC__\n#endif\ninline")
    files = [("k.metal", '#include "h.h"\n'), ("h.h", edited)]
    assert apple_header(files) == ("h.h", 2, "simd/simd.h")
    assert first_unlike(files, compiler())[:2] == ("h.h", 3)
