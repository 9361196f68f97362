"""A kernel file built in pieces (issue 26): an edit of one functor rebuilds that functor's
piece alone, runs the edited code, and the whole file is still checked by the build."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from porter.emulate import groups
from porter.emulate.build import build_source
from porter.emulate.kernel_check import check_tree
from porter.source.checkout import KERNELS
from tests.emulate.functor_text import edit_body, pieces_of

torch = pytest.importorskip("torch")


@pytest.fixture()
def own_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PORTER_CACHE_DIR", str(cache))
    return cache / "emulate"


def _binary(fixture_root) -> str:
    return (fixture_root / KERNELS / "BinaryKernel.metal").read_text()


@pytest.mark.slow
def test_an_edit_of_one_functor_rebuilds_its_piece_alone(fixture_root, own_cache):
    text = _binary(fixture_root)
    parts = pieces_of(text, fixture_root)
    assert len(parts) > 2
    build_source(text, "BinaryKernel.metal", fixture_root)
    before = set(own_cache.glob("piece-*.o"))
    assert len(before) == len(parts)
    edited = edit_body(text, "hypot", "{", "{  // an author's edit")
    lib = build_source(edited, "BinaryKernel.metal", fixture_root)
    new = set(own_cache.glob("piece-*.o")) - before
    assert len(new) == 1
    assert lib.build_errors() == [] and all(r.built for r in lib.registrations)
    # the library holds every registration once, in file order
    whole = build_source(edited, "BinaryKernel.metal", fixture_root, use_cache=False)
    key = lambda r: (r.name, r.in_type, r.out_type, r.line, r.kind, r.built)  # noqa: E731
    assert [key(r) for r in lib.registrations] == [key(r) for r in whole.registrations]


def _checked_before_and_after_wrong_hypot(fixture_root, tmp_path, text):
    """`emulate check`'s results for `text`, then (on the warm cache) for it with hypot's body
    edited to a + b: wrong on purpose."""
    path = tmp_path / "BinaryKernel.metal"
    path.write_text(text)
    before, _ = check_tree(fixture_root, [path])
    start, end = groups.functor_spans(text)["hypot"]
    lines = text.split("\n")
    body = "\n".join(lines[start:end + 1])
    lines[start:end + 1] = re.sub(r"return[^;]*;", "return static_cast<T>(a + b);", body).split("\n")
    path.write_text("\n".join(lines))
    after, _ = check_tree(fixture_root, [path])
    return before, after


@pytest.mark.slow
def test_the_edited_functor_runs_its_new_code(fixture_root, own_cache, tmp_path):
    """Wrong on purpose: hypot's body edited to a + b; hypot fails, the cached pieces match."""
    before, results = _checked_before_and_after_wrong_hypot(fixture_root, tmp_path,
                                                            _binary(fixture_root))
    assert {r.status for r in before} == {"matched"}
    failed = {(r.kernel, r.status) for r in results if r.status != "matched"}
    assert failed == {("hypot", "mismatched")}


@pytest.mark.parametrize(("broken", "words"), [
    (("    return", "    return 0 +", ";", ""), "expected"),       # a lost `;`: the parse fails
    # float >>: the front end's words come first (clang's: "invalid operands to binary
    # expression ('const float' and 'int')"), g++'s ("operator>>") after them
    (("    return", "    (void)(a >> 0);\n    return", None, None),
     "invalid operands to binary expression"),
])
@pytest.mark.slow
def test_the_build_of_one_piece_still_catches_an_error_in_another_functor(
        fixture_root, own_cache, broken, words):
    text = _binary(fixture_root)
    build_source(text, "BinaryKernel.metal", fixture_root)
    edited = edit_body(text, "hypot", "{", "{  // an author's edit")
    start, end = groups.functor_spans(edited)["copysign"]
    lines = edited.split("\n")
    body = "\n".join(lines[start:end + 1])
    old, new, old2, new2 = broken
    body = body.replace(old, new, 1)
    if old2 is not None:
        at = body.index(new) + len(new)
        semi = body.index(old2, at)
        body = body[:semi] + new2 + body[semi + 1:]
    lines[start:end + 1] = body.split("\n")
    lib = build_source("\n".join(lines), "BinaryKernel.metal", fixture_root, strict=False)
    errors = lib.build_errors()
    assert errors and words in errors[0], errors
    assert "BinaryKernel.metal:" in errors[0]
    # the float overload is the broken one (a syntax error takes the whole functor)
    assert not any(r.built for r in lib.registrations
                   if r.name == "copysign" and r.in_type == "float")
    assert all(r.built for r in lib.registrations if r.name == "hypot")


@pytest.mark.slow
def test_a_fixed_functor_is_not_held_red_by_another_pieces_cached_error(fixture_root, own_cache):
    """Wrong on purpose, then fixed: copysign's body calls an undeclared function. Every piece
    compiles the whole file, so hypot's piece set copysign aside too and cached that with its
    object, under a key that leaves copysign's text out. Once the author fixed copysign (a
    body unlike the original), hypot's cached piece still named copysign's old error: the
    fixed file stayed red on every run, with an error its text no longer has."""
    text = _binary(fixture_root)
    broken = edit_body(text, "copysign", "    return",
                        "    (void)porter_not_declared(1);\n    return")
    lib = build_source(broken, "BinaryKernel.metal", fixture_root, strict=False)
    assert any("porter_not_declared" in e for e in lib.build_errors())
    fixed = edit_body(text, "copysign", "    return", "    // fixed another way\n    return")
    lib = build_source(fixed, "BinaryKernel.metal", fixture_root, strict=False)
    assert lib.build_errors() == []
    assert all(r.built for r in lib.registrations if r.name == "copysign")


@pytest.mark.slow
def test_a_file_without_functor_structs_is_built_whole(fixture_root, own_cache):
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
#define NEG_FUNCTOR(NAME) struct NAME##_functor { template <typename T> T operator()(T x) { return -x; } };
NEG_FUNCTOR(neg)
REGISTER_UNARY_OP(neg, float, float);
"""
    lib = build_source(text, "macro.metal", fixture_root)
    assert [r.name for r in lib.registrations] == ["neg"] and lib.registrations[0].built
    assert not list(own_cache.glob("piece-*.o"))
    assert os.path.getsize(lib.path) > 0


@pytest.mark.parametrize("where", ["file", "header"])
@pytest.mark.slow
def test_a_non_inline_function_outside_the_functors_builds_in_pieces(
        fixture_root, own_cache, tmp_path, where):
    """Metal builds a .metal as one translation unit: a plain (non-inline, non-template)
    function in it or in a header it includes is defined once. The real c10/metal/expm1f.h
    defines `float expm1f_scaled_unchecked(float, float)` so; each piece held its own copy and
    the link said 'multiple definition': every dtype of every op of UnaryKernel.metal failed on
    a file a Mac builds."""
    text = _binary(fixture_root)
    helper = "float porter_review_helper(float a) {\n  return a * 2.0f;\n}\n"
    if where == "header":
        root = tmp_path / "root"
        import shutil
        shutil.copytree(fixture_root, root, symlinks=True)
        (root / KERNELS / "porter_review.h").write_text("#pragma once\n" + helper)
        text = "#include <ATen/native/mps/kernels/porter_review.h>\n" + text
    else:
        root = fixture_root
        text = helper + text
    assert len(pieces_of(text, root)) > 2
    lib = build_source(text, "BinaryKernel.metal", root)
    assert lib.build_errors() == [] and all(r.built for r in lib.registrations)


# A hand-written kernel template outside every functor that calls one (upstream's glu_dense
# calls glu_functor): it is compiled into every piece, each with an inline copy of the functor.
HAND_WRITTEN = """
template <typename T>
kernel void hypot_twice(
    device T* out [[buffer(0)]],
    constant T* a [[buffer(1)]],
    uint i [[thread_position_in_grid]]) {
  out[i] = hypot_functor{}(a[i], a[i]);
}

#define REGISTER_HYPOT_TWICE(DTYPE)                                    \\
  template [[host_name("hypot_twice_" #DTYPE)]] kernel void            \\
  hypot_twice<DTYPE>(                                                  \\
      device DTYPE * out [[buffer(0)]],                                \\
      constant DTYPE * a [[buffer(1)]],                                \\
      uint i [[thread_position_in_grid]]);

REGISTER_HYPOT_TWICE(float);
"""


def test_a_functor_that_code_outside_the_functors_calls_is_in_every_pieces_key(fixture_root):
    text = _binary(fixture_root) + HAND_WRITTEN
    edited = edit_body(text, "hypot", "{", "{  // an author's edit")
    before, after = pieces_of(text, fixture_root), pieces_of(edited, fixture_root)
    # every piece's object holds hypot's code: every key changes with its body
    assert all(a.key_text != b.key_text for a, b in zip(before, after)), \
        [p.name for p, q in zip(before, after) if p.key_text == q.key_text]
    assert all("hypot" in p.covers for p in before)
    # without such code, an edit of hypot leaves the other pieces' keys alone
    plain = pieces_of(_binary(fixture_root), fixture_root)
    changed = pieces_of(edit_body(_binary(fixture_root), "hypot", "{", "{  // an edit"), fixture_root)
    assert sum(a.key_text != b.key_text for a, b in zip(plain, changed)) == 1


@pytest.mark.slow
def test_an_edited_functor_that_outside_code_calls_runs_its_new_code(fixture_root, own_cache,
                                                                     tmp_path):
    """Wrong on purpose, after a warm build: a stale inline copy of hypot in another piece's
    cached object would be what the linker keeps, and the old body would run green."""
    before, results = _checked_before_and_after_wrong_hypot(
        fixture_root, tmp_path, _binary(fixture_root) + HAND_WRITTEN)
    assert {r.status for r in before if r.kernel == "hypot"} == {"matched"}
    hypot = {r.status for r in results if r.kernel == "hypot"}
    assert hypot == {"mismatched"}, hypot


_HAND_WRITTEN = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct twice_functor {
  template <typename T>
  inline T operator()(const T x) {
    return x + x;
  }
};

struct thrice_functor {
  template <typename T>
  inline T operator()(const T x) {
    return x + x + x;
  }
};

REGISTER_UNARY_OP(twice, float, float);
REGISTER_UNARY_OP(thrice, float, float);

template <typename T>
kernel void scaled_copy(
    device T* out [[buffer(0)]],
    constant T* in [[buffer(1)]],
    uint tid [[thread_position_in_grid]]) {
  out[tid] = BODY;
}

#define INSTANTIATE_SCALED(DTYPE)                                   \\
  template [[host_name("scaled_copy_" #DTYPE)]] kernel void         \\
  scaled_copy<DTYPE>(                                               \\
      device DTYPE * out [[buffer(0)]],                             \\
      constant DTYPE * in [[buffer(1)]],                            \\
      uint tid [[thread_position_in_grid]]);

INSTANTIATE_SCALED(float);
INSTANTIATE_SCALED(int);
"""


def test_a_functor_piece_declares_the_hand_written_kernels_the_rest_instantiates():
    """piece_text, before and after: `template [[host_name(` becomes `extern template
    [[host_name(` in a functor's piece (inside the file's macro too), nothing changes in the
    rest's piece, and no line moves."""
    text = _HAND_WRITTEN.replace("BODY", "in[tid] * T(2)")
    piece = groups.piece_text(text, ("twice",))
    assert piece.count('extern template [[host_name("scaled_copy_"') == 1
    assert "\n  template [[host_name(" not in piece
    assert piece.count("\n") == text.count("\n")
    assert groups.piece_text(text, (groups.REST,)) == text
    # a helper template's instantiation (a functor may call it) and a declaration already stay
    helper = 'template [[host_name("h")]] float helper<float>(float);'
    declared = 'extern template [[host_name("k")]] kernel void scaled_copy<int>(device int*);'
    assert groups.piece_text(helper, ("twice",)) == helper
    assert groups.piece_text(declared, ("twice",)) == declared
    continued = declared.replace("extern template", "extern \\\n  template")
    assert groups.piece_text(continued, ("twice",)) == continued


def test_code_after_a_struct_on_its_closing_line_builds_the_file_whole():
    """Review 46: `}; inline float helper(...)` on a functor's last line was blanked with the
    struct out of every other piece's key, so an edit of the helper left the other pieces'
    objects stale (its old code ran, green). Such a file has no pieces; a comment after `};`
    keeps them."""
    text = _HAND_WRITTEN.replace("BODY", "in[tid]")
    assert set(groups.functor_spans(text)) == {"twice", "thrice"}
    closed_with_code = text.replace("    return x + x;\n  }\n};", "    return x + x;\n  }\n}; "
                                    "inline float helper(float x) { return x; }")
    assert closed_with_code != text and groups.functor_spans(closed_with_code) == {}
    commented = text.replace("    return x + x;\n  }\n};", "    return x + x;\n  }\n};  // twice")
    assert commented != text and set(groups.functor_spans(commented)) == {"twice", "thrice"}


@pytest.mark.slow
def test_an_error_in_a_hand_written_kernels_instantiation_still_fails_the_build(
        fixture_root, own_cache):
    """The functors' pieces no longer instantiate the file's hand-written kernels; the rest's
    piece does. Wrong on purpose: a body that does not compile for `int` (a float's bit
    operation) still fails the file's build, and the clean twin builds and runs its kernels."""
    from porter.emulate.build import EmulateBuildError
    good = _HAND_WRITTEN.replace("BODY", "in[tid] * T(2)")
    lib = build_source(good, "Scaled.metal", fixture_root)
    assert lib.build_errors() == [] and {r.name for r in lib.registrations} == {"twice", "thrice"}
    # the functors' objects hold no instantiation of scaled_copy; the rest's does
    objects = {p.read_bytes().count(b"scaled_copy") > 0 for p in own_cache.glob("piece-*.o")}
    assert objects == {True, False}
    bad = _HAND_WRITTEN.replace("BODY", "in[tid] % 2.5f")
    try:
        broken = build_source(bad, "Scaled.metal", fixture_root)
    except EmulateBuildError as err:
        assert "Scaled.metal" in err.message
    else:
        assert broken.build_errors(), "the float % compiled"


# Review 47's F1, F2: hypot runs code of another functor struct that its text does not name.
# Each (text planted before the first functor, hypot's new body, the planted functor's edit
# that makes hypot wrong); the file then has no pieces (groups.sealed): no stale object.
_HYPOT = "c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b)))"
REACHED_UNNAMED = {
    "a functor named through a macro that calls a pasting one": (
        "#define HV_CAT(x, y) x##y\n#define HV_FN(x) HV_CAT(x, _functor)\n"
        "struct hvstep_functor {\n  template <typename T>\n"
        "  inline T operator()(const T a, const T b) {\n"
        f"    return static_cast<T>({_HYPOT});\n  }}\n}};\n\n",
        "return HV_FN(hvstep){}(a, b);",
        (f"return static_cast<T>({_HYPOT});", "return static_cast<T>(a + b);")),
    "a friend function another functor defines": (
        "struct hv_tag {};\ninline float hv_len(hv_tag, float a, float b);\n"
        "struct hvfriend_functor {\n  friend inline float hv_len(hv_tag, float a, float b) {\n"
        "    return c10::metal::hypot(::metal::fabs(a), ::metal::fabs(b));\n  }\n};\n\n",
        "return static_cast<T>(hv_len(hv_tag{}, float(a), float(b)));",
        ("return c10::metal::hypot(::metal::fabs(a), ::metal::fabs(b));", "return a + b;")),
}


def _planted_first(text: str, planted: str) -> str:
    """`planted` before the file's first functor: in a piece of its own, not hypot's."""
    marker = "using namespace metal;\n"
    assert marker in text
    return text.replace(marker, marker + "\n" + planted, 1)


@pytest.mark.parametrize("case", list(REACHED_UNNAMED))
def test_a_functor_reaching_another_structs_code_unnamed_is_not_built_in_pieces(
        fixture_root, case):
    planted, body, _ = REACHED_UNNAMED[case]
    text = _binary(fixture_root)
    twin = _planted_first(text, planted)
    # the macros planted, hypot not using them: pieces. A friend function in a struct is
    # refused whoever calls it (by a name of its own, which no key reads)
    assert (len(pieces_of(twin, fixture_root)) > 2) == ("friend" not in planted)
    used = edit_body(twin, "hypot", "return static_cast<T>(", body + "\n    return static_cast<T>(")
    assert pieces_of(used, fixture_root) == []


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REACHED_UNNAMED))
def test_an_edit_of_code_a_functor_reaches_unnamed_runs_after_a_warm_build(
        fixture_root, own_cache, tmp_path, case):
    """Before: after a warm build, the planted functor's edit rebuilt its own piece alone, and
    hypot's cached object kept the old code: green where a Mac computes a + b."""
    planted, body, (old, new) = REACHED_UNNAMED[case]
    text = _planted_first(_binary(fixture_root), planted)
    text = edit_body(text, "hypot", "return static_cast<T>(", body + "\n    return static_cast<T>(")
    path = tmp_path / "BinaryKernel.metal"
    path.write_text(text)
    before, _ = check_tree(fixture_root, [path])
    assert {r.status for r in before if r.kernel == "hypot"} == {"matched"}
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    after, _ = check_tree(fixture_root, [path])
    assert {r.status for r in after if r.kernel == "hypot"} == {"mismatched"}


@pytest.mark.parametrize("directive, split", [
    ("#if __METAL_VERSION__ >= 310", True),     # chooses among hypot's own lines
    ("#ifdef __HAVE_BFLOAT__", True),
    ("#define HV_ONE 1\n#if HV_ONE", False),    # a macro later structs may expand
    ("#undef HV_NONE\n#if 1", False),
    ("#line 60\n#if 1", False),                 # renumbers the structs after it
])
def test_a_conditional_inside_a_functor_keeps_the_pieces_and_other_directives_do_not(
        fixture_root, directive, split):
    text = edit_body(_binary(fixture_root), "hypot", "    return static_cast<T>(",
                     f"{directive}\n    return static_cast<T>(")
    text = edit_body(text, "hypot", "  }\n};", "#endif\n  }\n};")
    assert (len(pieces_of(text, fixture_root)) > 2) == split


def test_the_structs_a_kernel_runs_are_all_of_a_file_not_sealed(fixture_root, tmp_path):
    """The fma and mixed-halves checks ask which functor structs a kernel runs: in a file
    whose functors reach others unnamed, any of them."""
    from porter.emulate.emulator_device import EmulateBackend

    planted, body, _ = REACHED_UNNAMED["a functor named through a macro that calls a pasting one"]
    text = _planted_first(_binary(fixture_root), planted)
    used = edit_body(text, "hypot", "return static_cast<T>(", body + "\n    return static_cast<T>(")
    path = tmp_path / "BinaryKernel.metal"
    for source, runs in ((text, {"hypot"}), (used, set(groups.functor_spans(used)))):
        path.write_text(source)
        assert EmulateBackend(fixture_root)._functors(path, "hypot", groups) == runs


# Review 48: what else reaches another struct's text, or the macros later text sees, without a
# name the keys read. (text planted before the first functor, hypot's new first line, or None)
_ROUTES = {
    "a functor made on a registration's line from another": (
        "#define ALIAS_OP(NAME, BASE) struct NAME##_functor : BASE##_functor {}; "
        "REGISTER_BINARY_OP(NAME, float, float)\n", None, "ALIAS_OP(hv2, hypot);\n"),
    "a pragma that pops a macro, inside a struct": (
        "#define HV_POS(a) (a > 0)\n", "  _Pragma(\"pop_macro(\\\"HV_POS\\\")\")", None),
    "an elaborated type declared inside a struct": (
        "", "  typedef void hv_fn(struct hv_tag);", None),
    "the counter": ("static constant int hv_count = __COUNTER__;\n", None, None),
}
_CLEAN_TWINS = {
    "a member template's `class` parameter": ("", "  template <class U> static U hv_same(U u) { return u; }", None),
    "a registration of its own functor": ("", None, "REGISTER_BINARY_OP(hypot, half, half);\n"),
}


@pytest.mark.parametrize("case", list(_ROUTES) + list(_CLEAN_TWINS))
def test_a_file_with_a_route_its_keys_cannot_read_has_no_pieces(fixture_root, case):
    planted, member, appended = {**_ROUTES, **_CLEAN_TWINS}[case]
    text = _planted_first(_binary(fixture_root), planted) if planted else _binary(fixture_root)
    if member:
        text = edit_body(text, "hypot", "  template <typename T>", f"{member}\n  template <typename T>")
    text += appended or ""
    assert (pieces_of(text, fixture_root) == []) == (case in _ROUTES)


def test_a_header_elsewhere_in_the_checkout_that_a_kernel_file_reaches_is_in_its_keys(
        fixture_root, tmp_path):
    """Review 48's F3: only c10/metal and the kernels folder were hashed; an edit of a header
    the file includes from elsewhere under aten/src kept the old library and findings."""
    import shutil

    from porter.emulate import frontend, headers
    from porter.emulate.toolchain import cache_key

    root = tmp_path / "root"
    shutil.copytree(fixture_root, root, symlinks=True)
    header = root / "aten" / "src" / "ATen" / "native" / "mps" / "HvPos.h"
    header.write_text("#pragma once\n#include <ATen/native/mps/HvMore.h>\n")
    more = header.with_name("HvMore.h")
    more.write_text("#define HV_POS(a) (a > 0)\n")
    text = "#include <ATen/native/mps/HvPos.h>\n" + _binary(fixture_root)
    dirs = headers.include_dirs(root)
    before = (cache_key(text, dirs, ["-O0"], "g++"), frontend._headers_digest(root, "k.metal", text))
    more.write_text("#define HV_POS(a) (a < 0)\n")           # reached through HvPos.h
    after = (cache_key(text, dirs, ["-O0"], "g++"), frontend._headers_digest(root, "k.metal", text))
    assert before[0] != after[0] and before[1] != after[1]


def test_a_conditional_a_struct_opens_and_the_code_after_it_closes_leaves_no_pieces(fixture_root):
    """Review 49's F1: `#if 1` in hypot's struct, closed after its `};`, chose between two
    outside definitions of a macro another functor expands; flipping it edited hypot alone."""
    text = _binary(fixture_root)
    start, end = groups.functor_spans(text)["hypot"]
    lines = text.split("\n")
    assert lines[end] == "};"
    lines[end] = "#if 1\n};\n#define HV_ADJ(x) (x)\n#else\n};\n#define HV_ADJ(x) (-(x))\n#endif"
    assert pieces_of("\n".join(lines), fixture_root) == []


def test_a_kernel_file_that_includes_a_file_a_macro_names_is_never_taken_from_a_cache(
        fixture_root, tmp_path):
    """Review 49's F2: `#include HV_FILE` reads a file no key listed; its edit kept the old
    library. Which file a macro names is the preprocessor's to say: no key stands for it."""
    from porter.emulate import frontend, headers
    from porter.emulate.toolchain import cache_key

    text = '#define HV_FILE "hv_adj.inc"\n#include HV_FILE\n' + _binary(fixture_root)
    plain = _binary(fixture_root)
    dirs = headers.include_dirs(fixture_root)
    for source, kept in ((text, False), (plain, True)):
        keys = {cache_key(source, dirs, ["-O0"], "g++") for _ in range(2)}
        digests = {frontend._headers_digest(fixture_root, "k.metal", source) for _ in range(2)}
        assert (len(keys) == 1, len(digests) == 1) == (kept, kept)
