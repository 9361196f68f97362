"""Building kernel files: fixtures match CPU, wrong functors and registrations are caught."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from porter.emulate.build import EmulateBuildError, build_file, build_source, cache_dir
from porter.emulate.kernel_check import check_tree, kernel_files

from .conftest import DATA

torch = pytest.importorskip("torch")


def test_every_fixture_registration_builds_and_matches_cpu(fixture_root):
    files = kernel_files(fixture_root)
    assert [f.name for f in files] == ["UnaryKernel.metal", "BinaryKernel.metal", "ActivationKernel.metal"]
    results, notes = check_tree(fixture_root)
    assert notes == []
    assert len(results) > 100
    bad = [(r.kernel, r.in_type, r.status, r.reason) for r in results if r.status != "matched"]
    assert bad == []
    # every registration of both files is there, unary and binary, dense and strided ran
    kinds = {r.kind for r in results}
    assert {"unary", "binary", "binary_alpha", "unary_alpha"} <= kinds


def test_wrong_functor_body_fails_with_max_error(fixture_root):
    results, _ = check_tree(fixture_root, [DATA / "wrong_body.metal"])
    by_key = {(r.kernel, r.in_type): r for r in results}
    for key in [("sin", "float"), ("sin", "half"), ("sin", "int")]:
        r = by_key[key]
        assert r.status == "mismatched"
        assert r.max_error > 0.1
        assert r.reason.startswith("max error ")
    assert by_key[("exp", "float")].status == "matched"


def test_wrong_output_type_fails_at_build_with_clear_message(fixture_root):
    with pytest.raises(EmulateBuildError) as info:
        build_file(DATA / "wrong_output.metal", fixture_root)
    assert str(info.value).startswith(
        f"{DATA / 'wrong_output.metal'}:19: exp registered with output type int for input int, "
        "but exp_functor returns float")
    assert info.value.exit_code == 1


def test_wrong_output_type_is_reported_per_kernel_by_check(fixture_root):
    results, _ = check_tree(fixture_root, [DATA / "wrong_output.metal"])
    by_key = {(r.kernel, r.in_type): r for r in results}
    assert by_key[("exp", "float")].status == "matched"
    assert by_key[("exp", "int")].status == "build-error"     # a Mac cannot compile it either
    assert "exp_functor returns float" in by_key[("exp", "int")].reason


def test_each_wrong_output_type_message_names_its_own_row(fixture_root):
    # g++ ends one registration's diagnostics with a note inside the next one's: each row
    # must carry its own registration's types, not its neighbour's
    results, _ = check_tree(fixture_root, [DATA / "wrong_outputs.metal"])
    rows = {r.in_type: r for r in results}
    assert rows["bool"].status == "matched"
    for in_type in ("float", "half", "long", "int"):
        assert rows[in_type].status == "build-error"
        assert (f"logical_and registered with output type {in_type} for input {in_type}, "
                "but logical_and_functor returns bool") in rows[in_type].reason, rows[in_type].reason


def test_a_syntax_error_is_a_build_error_not_an_unsupported_construct(fixture_root):
    lib = build_file(DATA / "syntax_error.metal", fixture_root, strict=False)
    built = {r.name: r.built for r in lib.registrations}
    assert built == {"neg": True, "signbit": False}
    # the front end's error first (clang's words), then g++'s on the same line
    error = lib.build_errors()[0]
    assert error.startswith(f"build error: {DATA / 'syntax_error.metal'}:17: expected ")
    results, _ = check_tree(fixture_root, [DATA / "syntax_error.metal"])
    assert {r.kernel: r.status for r in results} == {"neg": "matched", "signbit": "build-error"}


def test_an_undeclared_name_metal_lacks_too_is_a_build_error(fixture_root):
    results, _ = check_tree(fixture_root, [DATA / "undeclared.metal"])
    rows = {r.kernel: r for r in results}
    assert rows["neg"].status == "matched"
    assert rows["heaviside"].status == "build-error"
    # the front end's words (clang's, as a Mac's compiler says it)
    assert (f"build error: {DATA / 'undeclared.metal'}:18: use of undeclared identifier "
            "'undefined_helper'") in rows["heaviside"].reason, rows["heaviside"].reason


# g++'s error on what Metal's front end accepted is the emulator's limit, whatever g++ says:
# what a Mac rejects is the front end's to say (the test above). Review 16's B03: a bfloat
# kernel storing metal::max3's float result in a bfloat (Metal converts; the shim's bfloat takes
# floats explicitly only) was "does not build" on g++'s word.
FLOAT_INTO_BFLOAT = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct m3_functor {
  template <typename T>
  inline T operator()(const T a) {
    T m = max3(a, T(0), T(0));
    return m;
  }
};
REGISTER_UNARY_OP(m3, float, float);
REGISTER_UNARY_OP(m3, bfloat, bfloat);
"""


def test_what_only_g_plus_plus_rejects_is_not_proven_not_a_build_error(fixture_root, tmp_path):
    from porter.emulate.build import UNSUPPORTED, build_source
    lib = build_source(FLOAT_INTO_BFLOAT, tmp_path / "m.metal", fixture_root, strict=False)
    assert lib.build_errors() == []
    assert lib.find("m3", "float")[0].built
    bf = lib.find("m3", "bfloat")[0]
    assert not bf.built and lib.reason(bf).startswith(UNSUPPORTED + ": "), lib.reason(bf)
    # its twin, a syntax error, is the front end's: the file does not build
    broken = build_source(FLOAT_INTO_BFLOAT.replace("return m;", "return m"), tmp_path / "n.metal",
                          fixture_root, strict=False)
    assert broken.build_errors() and "expected ';'" in broken.build_errors()[0], broken.build_errors()


def test_unsupported_construct_is_quarantined_not_fatal(fixture_root, client):
    lib = build_file(DATA / "unsupported.metal", fixture_root)
    built = {r.name: r.built for r in lib.registrations}
    assert built == {"neg": True, "shuffled": False}
    reason = lib.quarantined["shuffled|*"]
    assert reason.startswith(f"unsupported construct: {DATA / 'unsupported.metal'}:16: ")
    assert "simd_shuffle" in reason
    assert lib.build_errors() == []          # beyond the emulator, not wrong Metal


def test_cache_is_keyed_by_content(fixture_root, emulate_cache):
    text = (DATA / "hypot.metal").read_text()
    first = build_source(text, "cache_probe.metal", fixture_root)
    again = build_source(text, "cache_probe.metal", fixture_root)
    assert again.cached and again.path == first.path
    assert Path(os.environ["PORTER_CACHE_DIR"]) in first.path.parents
    assert cache_dir() == emulate_cache / "emulate"
    changed = build_source(text + "\n// edited\n", "cache_probe.metal", fixture_root)
    assert not changed.cached and changed.path != first.path


def test_cache_dir_honours_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("PORTER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "porter" / "emulate"


def test_a_function_the_wheels_c10_metal_lacks_is_named_as_such(fixture_root):
    """Upstream's BinaryKernel.metal calls c10::metal::div_floor, which torch 2.13's wheel
    headers do not define. Where the checkout has no c10/metal of its own (the fixture), the
    emulator builds with the wheel's: that is not a construct beyond the emulator, it is
    headers older than the file, and the row says so (and fails `emulate check`)."""
    import torch as _torch

    assert not (fixture_root / "c10" / "metal").exists()
    results, _ = check_tree(fixture_root, [DATA / "header_gap.metal"])
    rows = {r.kernel: r for r in results}
    assert rows["neg"].status == "matched"
    assert rows["halved"].status == "old-headers"
    assert rows["halved"].reason == (
        f"c10/metal headers lack it: {DATA / 'header_gap.metal'}:18: "
        "c10::metal::porter_halved_in_newer_headers is not defined in the installed torch "
        f"{_torch.__version__}'s c10/metal (the checkout has none): the kernel file needs "
        "c10/metal headers that define it (newer ones)")


@pytest.mark.slow
def test_a_function_the_checkouts_own_c10_metal_lacks_is_a_build_error(fixture_root, tmp_path):
    """With the checkout's own c10/metal (what a Mac compiles against too), the same call is a
    build error of the checkout, and the message says whose headers they are."""
    import shutil

    root = tmp_path / "tree"
    shutil.copytree(fixture_root, root)
    wheel = Path(_torch_include()) / "c10" / "metal"
    shutil.copytree(wheel, root / "c10" / "metal")
    results, _ = check_tree(root, [DATA / "header_gap.metal"])
    row = {r.kernel: r for r in results}["halved"]
    assert row.status == "build-error"
    assert "is not defined in the checkout's c10/metal (the same files as the installed torch" \
        in row.reason, row.reason


def _torch_include() -> str:
    from porter.emulate.headers import torch_include_dir
    return str(torch_include_dir())


@pytest.mark.parametrize("use_cache", [False, True])     # the whole file; functor pieces
def test_a_build_that_outlasts_the_quarantine_rounds_names_the_compilers_error(
        fixture_root, monkeypatch, tmp_path, use_cache):
    # every round sets failing functors aside; once the rounds are spent the error that still
    # stands is the one to show (file:line), not "still failing after N rounds". No rounds
    # at all: the first compile's error is the one left
    import porter.emulate.build as build

    monkeypatch.setattr(build, "MAX_QUARANTINE_ROUNDS", 0)
    text = (DATA / "unsupported.metal").read_text() + "\n"
    with pytest.raises(EmulateBuildError) as info:
        build_source(text, tmp_path / "rounds.metal", fixture_root, use_cache=use_cache)
    message = str(info.value)
    assert "quarantine rounds" not in message
    assert message.startswith(f"{tmp_path / 'rounds.metal'}:"), message
    assert "simd_" in message and info.value.hint


@pytest.mark.parametrize("use_cache", [True, False], ids=["in pieces", "whole file"])
def test_a_broken_helper_is_the_error_named_and_the_functor_after_it_is_not_cut(
        fixture_root, emulate_cache, use_cache):
    """Wrong on purpose, after upstream's gelu_dispatch_tanh: a helper written `if
    IF_CONSTEXPR (...)` against a c10/metal without that macro. g++ gives two errors in it; the
    second, on a line the first had blanked, cut from the registration above it to the end of
    the functor below it, and the build stopped on "'neg_functor' was not declared" that it
    could not attribute: the error named was not the file's, and every kernel of it was lost."""
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct neg_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(-x);
  }
};

REGISTER_UNARY_OP(neg, float, float);

template <typename T>
inline float pick(float x) {
  if NOT_A_MACRO (is_same_v<T, float>) {
    return x;
  } else {
    return -x;
  }
}

struct twice_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(x + x);
  }
};

REGISTER_UNARY_OP(twice, float, float);
"""
    lib = build_source(text, "helper.metal", fixture_root, strict=False, use_cache=use_cache)
    errors = lib.build_errors()
    # the front end's error at the line, then g++'s for the helper it cut
    assert errors == ["build error: helper.metal:16: expected '(' after 'if'",
                      "build error: helper.metal:14-21: expected '(' before 'NOT_A_MACRO'"], errors
    assert {r.name: r.built for r in lib.registrations} == {"neg": True, "twice": True}


@pytest.mark.parametrize("planted", ["x > -lambda", "x < lambda"])
def test_a_threshold_off_by_its_boundary_is_mismatched(fixture_root, tmp_path, planted):
    """The check's inputs hold the exact values where kernels branch (±0.5 is shrink's
    lambda here, ±3 hardswish's): random values never land on them, so `>` written for `>=`
    was matched before."""
    source = (fixture_root / "aten/src/ATen/native/mps/kernels/ActivationKernel.metal").read_text()
    right = "x >= -lambda && x <= lambda"
    assert right in source
    wrong = right.replace("x >= -lambda", planted) if planted.startswith("x >") else \
        right.replace("x <= lambda", planted)
    path = tmp_path / "ActivationKernel.metal"
    path.write_text(source.replace(right, wrong))
    results, _ = check_tree(fixture_root, [path])
    shrink = [r for r in results if r.kernel == "hardshrink"]
    assert shrink and all(r.status == "mismatched" for r in shrink), \
        [(r.in_type, r.status) for r in shrink]
    assert all(r.status == "matched" for r in results if r.kernel != "hardshrink")


def test_a_strict_build_after_a_lenient_one_of_the_same_file_still_raises(fixture_root):
    """`emulate check` builds leniently (the wrong output quarantined, cached with the pieces);
    a strict build of the same text read that cache and said nothing, depending on test order."""
    check_tree(fixture_root, [DATA / "wrong_output.metal"])
    with pytest.raises(EmulateBuildError) as info:
        build_file(DATA / "wrong_output.metal", fixture_root)
    assert "exp registered with output type int for input int" in str(info.value)


def test_a_second_ask_for_a_build_under_way_joins_it(monkeypatch):
    """Before: `--watch` could not start a saved file's build before its round read the
    checkout, since the round's own build_source compiled the same text a second time. A build
    under way is joined (its library or its error); another text, other arguments, a build
    without the cache, or an ask after it ended build on their own."""
    import threading

    from porter.emulate import build

    started, release = threading.Event(), threading.Event()
    calls: list[tuple] = []

    def gated(text, display_path, root=None, **args):
        calls.append((text, args["strict"], args["use_cache"]))
        started.set()
        release.wait(10)
        if text == "broken":
            raise EmulateBuildError("k.metal:1: error: planted")
        return object()

    monkeypatch.setattr(build, "_build_source", gated)

    def both(first: dict, second: dict):
        """What each of two asks got, the second made while the first is compiling."""
        started.clear(), release.clear()
        got: list = [None, None]

        def ask(i, kw):
            try:
                got[i] = build.build_source(**kw)
            except EmulateBuildError as err:
                got[i] = err
        one = threading.Thread(target=ask, args=(0, first))
        one.start()
        assert started.wait(10)
        two = threading.Thread(target=ask, args=(1, second))
        two.start()
        two.join(0.2)               # a second ask that builds anew is in `calls` by now
        release.set()
        one.join(10), two.join(10)
        return got

    ask = dict(text="k", display_path="k.metal", root="/r", strict=False)
    table = [  # (second ask, joined)
        (ask, True),
        ({**ask, "text": "k2"}, False),
        ({**ask, "strict": True}, False),
        ({**ask, "root": "/other"}, False),
        ({**ask, "use_cache": False}, False),
    ]
    for second, joined in table:
        calls.clear()
        first_got, second_got = both(ask, second)
        assert (first_got is second_got) == joined, second
        assert len(calls) == (1 if joined else 2), (second, calls)
    # an error is the joiner's too, from the one compile
    calls.clear()
    broken = {**ask, "text": "broken"}
    first_got, second_got = both(broken, broken)
    assert isinstance(first_got, EmulateBuildError) and first_got is second_got
    assert len(calls) == 1
    # the build ended: the next ask builds (and finds the disk cache, in the real one)
    calls.clear()
    release.set()
    build.build_source(**ask)
    assert len(calls) == 1 and not build._UNDER_WAY
