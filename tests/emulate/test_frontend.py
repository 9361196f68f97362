"""porter's Metal front end (porter.emulate.frontend, the emulator's language check): one table
per rule, each a planted positive (a build error at its own line, with the rule's words) and a
clean twin (issue 33, items 1 and 4).

g++ accepts every planted construct below; a Mac's Metal compiler rejects each. Each must be a
build error at its own line, through the build-before-write probe (what a port meets) and the
full build (what `porter test` / `emulate check` meet). What Metal accepts (ACCEPTED, VALID,
ISSUE_CLEAN) must build. Recursion, function pointers and `if constexpr` on 3.x are accepted
by Metal (ACCEPTED), as they are here.
"""

from __future__ import annotations

import re
import shutil

import pytest

from porter.emulate.build import EmulateBuildError, build_source
from porter.emulate.kernel_check import check_tree
from porter.emulate.probe import probe_source
from porter.source.checkout import KERNELS


HEAD = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
"""
# the planted line is line 8 of the functor file (HEAD is 3 lines, then the functor)
FUNCTOR = HEAD + """
struct planted_functor {
  template <typename T>
  inline T operator()(const T x) {
    PLANTED
    return x;
  }
};

REGISTER_UNARY_OP(planted, float, float);
"""
PLANTED_LINE = 8

IN_FUNCTOR = [
    ("double d = double(x); (void)d;", "Metal has no `double`"),
    ("long double d = 0; (void)d;", "Metal has no `double`"),
    ("static_assert(sizeof(double) == 8, \"\");", "Metal has no `double`"),
    ("float y = float(double(x)); (void)y;", "Metal has no `double`"),
    ("long long n = 0; (void)n;", "Metal has no `long long`"),
    ("unsigned long long n = 0; (void)n;", "Metal has no `long long`"),
    ("auto n = (long long)(x); (void)n;", "Metal has no `long long`"),
    ("int m = std::numeric_limits<int>::max(); (void)m;", "Metal has no C++ standard library"),
    ("float y = ::std::abs(float(x)); (void)y;", "Metal has no C++ standard library"),
    ("float y = std::max(float(x), 0.0f); (void)y;", "Metal has no C++ standard library"),
    ("using std::max;", "Metal has no C++ standard library"),
    ("bool b = std::is_same_v<T, float>; (void)b;", "Metal has no C++ standard library"),
    ("goto done; done:", "Metal has no `goto`"),
    ("float* p = new float(x); (void)p;", "Metal has no dynamic allocation (`new`"),
    ("float* p = nullptr; delete p;", "Metal has no dynamic allocation (`delete`"),
    ("float* p = nullptr; delete[] p;", "Metal has no dynamic allocation (`delete`"),
    ("try { (void)x; } catch (...) {}", "Metal has no exceptions (`try`"),
    ("if (x != x) throw 1;", "Metal has no exceptions (`throw`"),
    ("static thread_local int n = 0; (void)n;", "Metal has no `thread_local`"),
    ("auto& t = typeid(x); (void)t;", "Metal has no run-time type information (`typeid`"),
    # a counter or a cached constant kept across calls: g++ keeps one per process, Metal has
    # no static local outside `constant` memory
    ("static float calls = 0; calls += 1;", "Metal has no static local variable"),
    ("static constexpr float zero = 0.0f; (void)zero;", "Metal has no static local variable"),
    ("for (int i = 0; i < 2; ++i) { static int seen = i; (void)seen; }",
     "Metal has no static local variable"),
    # a scratch array sized by a run-time value: g++ takes it as an extension
    ("int n = int(x) + 2; float buf[n]; buf[0] = 0; (void)buf;",
     "variable-length array"),
    ("thread float buf[sizeof(T) > 2 ? int(x) : 2]; (void)buf;", "variable-length array"),
    # C++'s and clang's types that are not among §2.1's (each builds under g++ and clang)
    ("__float128 w = x; (void)w;", "Metal has no `__float128`"),
    ("__int128 n = 1; (void)n;", "Metal has no `__int128`"),
    ("wchar_t c = 1; (void)c;", "Metal has no `wchar_t`"),
    ("char16_t c = 1; (void)c;", "Metal has no `char16_t`"),
    ("_Complex float z = x; (void)z;", "Metal has no `_Complex`"),
    ("_Float16 h = x; (void)h;", "Metal has no `_Float16`"),
    # not in the language the specification describes: not proven on a Mac
    ("asm volatile(\"\");", "Metal has no inline assembly"),
    ("float y = __builtin_expf(float(x)); (void)y;", "Metal's library has no compiler builtin"),
    # the types as clang resolves them, whatever the spelling (a review's false greens)
    ("typedef float dbl __attribute__((mode(DF))); dbl d = x; (void)d;", "Metal has no `double`"),
    ("typedef int wide __attribute__((mode(TI))); wide n = 1; (void)n;",
     "Metal has no `__int128`"),
    ("auto w = float(x) * 1.0L; (void)w;", "Metal has no `double`"),
    ("auto n = 1LL; (void)n;", "Metal has no `long long`"),
    ("decltype(1LL) n = 1; (void)n;", "Metal has no `long long`"),
    ("long unsigned long n = 1; (void)n;", "Metal has no `long long`"),
    ("int c = L'a'; (void)c;", "Metal has no `wchar_t`"),
    ("decltype(u'a') c = 1; (void)c;", "Metal has no `char16_t`"),
    # compiler builtins with no `__builtin_` in their name
    ("int n = 1; __sync_fetch_and_add(&n, 1);", "Metal's library has no compiler builtin"),
    ("int n = 1; int m = __atomic_load_n(&n, 0); (void)m;",
     "Metal's library has no compiler builtin"),
    # a block-scope `extern` names a program-scope variable
    ("extern int planted_g; (void)planted_g;", "Metal has no program-scope variable"),
]

FILE_LEVEL = [
    ("#include <vector>", "#include <vector>"),
    ("#include <cmath>", "#include <cmath>"),
    ("#include <limits>", "#include <limits>"),        # already inside the shim's own prelude
    ("#include <type_traits>", "#include <type_traits>"),
    ("#include <stdio.h>", "#include <stdio.h>"),
    ("#include <iostream>", "#include <iostream>"),
    ("using namespace std;", "Metal has no C++ standard library"),
    ("namespace std { struct mine {}; }", "Metal has no C++ standard library"),
    ("thread_local float scratch = 0;", "Metal has no `thread_local`"),
    ("struct base { virtual float f(float x) { return x; } };", "Metal has no virtual functions"),
    ("struct base {}; struct derived : base {}; inline base* up(derived* d) "
     "{ return dynamic_cast<base*>(d); }", "(`dynamic_cast`"),
    ("inline double twice(float x) { return 2 * x; }", "Metal has no `double`"),
    # a file-level variable: a Mac says "program scope variable must reside in constant
    # address space"
    ("float planted_scale = 2.0f;", "Metal has no program-scope variable"),
    ("static float planted_calls;", "Metal has no program-scope variable"),
    ("constexpr float planted_table[2] = {1.0f, 2.0f};", "Metal has no program-scope variable"),
    ("namespace planted { float scale = 2.0f; }", "Metal has no program-scope variable"),
    ("extern float planted_scale;", "Metal has no program-scope variable"),
    # a static data member is a program-scope variable too (Metal code spells
    # `static constexpr constant T value = v;`, as MLX's integral_constant does)
    ("struct planted_k { static constexpr float scale = 2.0f; };",
     "Metal has no static data member outside the `constant` address space"),
    ("template <typename T> struct planted_t { static const int n = 1; };",
     "Metal has no static data member outside the `constant` address space"),
    # a program-scope constant's initializer is a compile-time constant (review 36's K20)
    ("constant float planted_one = metal::sqrt(float(2));",
     "a program-scope variable's initializer must be a compile-time constant"),
    ("inline float planted_f() { return 2.0f; } constant float planted_two = planted_f();",
     "a program-scope variable's initializer must be a compile-time constant"),
    ("inline float planted_v(float x, ...) { return x; }", "Metal has no C variadic function"),
    ("template <typename U> U planted_v(U x, ...) { return x; }",
     "Metal has no C variadic function"),
]


def _at_file_level(planted: str) -> str:
    # planted on line 4, after HEAD's 3 lines
    return HEAD + planted + "\n" + FUNCTOR[len(HEAD):].replace("PLANTED", "")


# What Metal 3.1 and later accept although older Metal did not (the front end's clean twins of
# rules that are not rules): function pointers and recursion are no longer in the "Metal and
# C++14" list of the specification (§1.5.4; upstream's c10/metal/atomic.h takes its operation
# as a function pointer and special_math.h's bessel_j1_forward template calls itself, and both
# build on a Mac), plain recursion and template recursion alike; `if constexpr` on Metal 3.x is
# only a warning on a Mac (C++17 as an extension).
ACCEPTED = [
    ("float (*fp)(float) = nullptr; (void)fp;", True),
    ("T (*pick)(T, T) = nullptr; (void)pick;", True),
    ("if constexpr (sizeof(T) == 4) { (void)x; }", True),
    # a call of two or more arguments, one a half reference: the binding has no name for
    # clang's _Float16 type kind and raised (review 37's N21-N25: exit 70)
    ("half ip; half f = modf(half(-2.5h), ip); (void)f;", True),
    # C++14's digit separators in half and float literals (review 37's N06t)
    ("half h = 1.000'5h; float f = 2'000.5 + 1'0e1'0f; (void)h; (void)f;", True),
    ("using unary_fn = float (*)(float);", False),
    # its twins: constant initializers
    ("constant float planted_one = 1.0f + 0.5f; constant float planted_t[2] = {planted_one, 2};", False),
    ("constexpr inline float planted_f() { return 2.0f; } constant float planted_two = planted_f();",
     False),
    ("inline float fact(float n) { return n <= 1 ? 1 : n * fact(n - 1); }", False),
    ("template <typename T> inline T tfact(T n) { return n <= 1 ? T(1) : n * tfact(n - 1); }\n"
     "inline float use_tfact(float n) { return tfact(n); }", False),
    ("struct again_functor { inline float operator()(const float x) { return x > 1 ? "
     "(*this)(x / 2) : x; } };", False),
    ("inline float odd(float n); inline float even(float n) { return n <= 0 ? 1 : odd(n - 1); } "
     "inline float odd(float n) { return n <= 0 ? 0 : even(n - 1); }", False),
]


@pytest.mark.parametrize(("planted", "in_functor"), ACCEPTED, ids=[p[:40] for p, _ in ACCEPTED])
def test_what_metal_3_accepts_builds(planted, in_functor, fixture_root):
    text = FUNCTOR.replace("PLANTED", planted) if in_functor else _at_file_level(planted)
    assert probe_source(text, "planted.metal", fixture_root, ["planted"]) is None


def test_the_corpus_has_thirty_planted_constructs():
    assert len(IN_FUNCTOR) + len(FILE_LEVEL) + len(VERSIONED) >= 30


@pytest.mark.parametrize(("planted", "message"), IN_FUNCTOR, ids=[p for p, _ in IN_FUNCTOR])
@pytest.mark.slow
def test_a_non_metal_construct_in_a_functor_is_a_build_error_at_its_line(planted, message,
                                                                          fixture_root):
    text = FUNCTOR.replace("PLANTED", planted)
    error = probe_source(text, "planted.metal", fixture_root, ["planted"])
    assert error is not None and error.startswith(f"planted.metal:{PLANTED_LINE}: "), error
    assert message in error, error


@pytest.mark.parametrize(("planted", "message"), FILE_LEVEL, ids=[p[:40] for p, _ in FILE_LEVEL])
@pytest.mark.slow
def test_a_non_metal_construct_outside_functors_is_a_build_error_at_its_line(planted, message,
                                                                             fixture_root):
    error = probe_source(_at_file_level(planted), "planted.metal", fixture_root, ["planted"])
    assert error is not None and error.startswith("planted.metal:4: "), error
    assert message in error, error


VERSIONED = [
    # a branch only Metal 3.2 and later compile: its missing `;` fails their build
    ("#if __METAL_VERSION__ >= 320\ninline float helper(float x) { return x }\n#endif",
     "expected ';'", "__METAL_VERSION__ 320"),
    # a branch only Metal 4.0 compiles
    ("#if __METAL_VERSION__ >= 400\ninline double helper(float x) { return x; }\n#endif",
     "Metal has no `double`", "__METAL_VERSION__ 400"),
    # the other way round: what only 3.1 compiles
    ("#if __METAL_VERSION__ < 320\ninline float helper(float x) { return undefined_name(x); }\n"
     "#endif", "'undefined_name'", None),
]


@pytest.mark.parametrize(("planted", "message", "version"), VERSIONED,
                         ids=["320-syntax", "400-double", "310-only"])
def test_a_branch_of_another_metal_version_that_does_not_build_is_a_build_error(
        planted, message, version, fixture_root):
    error = probe_source(_at_file_level(planted), "planted.metal", fixture_root, ["planted"])
    assert error is not None and error.startswith("planted.metal:5: "), error
    assert message in error, error
    if version:
        assert error.endswith(f"(with {version})"), error


def test_the_full_build_reports_a_metal_language_error_and_check_fails_the_kernel(fixture_root,
                                                                                   tmp_path):
    text = FUNCTOR.replace("PLANTED", "double d = double(x); (void)d;")
    lib = build_source(text, "planted.metal", fixture_root, strict=False)
    assert lib.build_errors() == [
        "build error: planted.metal:8: Metal has no `double` (use float; Metal Shading Language "
        "Specification §2.1)"]
    assert lib.functor_error(lib.registrations[0]).startswith("build error: planted.metal:8: ")
    path = tmp_path / "planted.metal"
    path.write_text(text)
    results, notes = check_tree(fixture_root, [path])
    assert [r.status for r in results] == ["build-error"]
    assert "does not build on a Mac" in notes[-1]


@pytest.mark.parametrize(("planted", "message"), IN_FUNCTOR + FILE_LEVEL,
                         ids=[p[:40] for p, _ in IN_FUNCTOR + FILE_LEVEL])
@pytest.mark.slow
def test_the_full_build_names_the_construct_and_metal_rule_whatever_gxx_makes_of_it(
        planted, message, fixture_root):
    """What `porter test` and `emulate check` say: a `throw` made g++ fail every instantiation
    of its functor until the build gave up with "still failing after 6 quarantine rounds"."""
    in_functor = (planted, message) in IN_FUNCTOR
    text = FUNCTOR.replace("PLANTED", planted) if in_functor else _at_file_level(planted)
    # registered for eight dtypes, as a real functor is: g++ fails each instantiation apart
    text = text.replace("REGISTER_UNARY_OP(planted, float, float);\n", "".join(
        f"REGISTER_UNARY_OP(planted, {t}, {t});\n"
        for t in ("float", "half", "int", "long", "short", "char", "uchar", "bool")))
    line = PLANTED_LINE if in_functor else 4
    try:
        lib = build_source(text, "planted.metal", fixture_root, strict=False)
    except EmulateBuildError as err:
        said = err.message
    else:
        said = lib.build_errors()[0] if lib.build_errors() else "(no build error)"
    assert said.startswith(f"build error: planted.metal:{line}: "), said
    assert message in said and "quarantine" not in said, said


def test_a_file_level_error_fails_every_kernel_of_the_file_in_check(fixture_root, tmp_path):
    path = tmp_path / "planted.metal"
    path.write_text(_at_file_level("#include <vector>"))
    results, notes = check_tree(fixture_root, [path])
    assert [r.status for r in results] == ["build-error"]
    assert "#include <vector>" in results[0].reason


def test_a_branch_of_another_version_fails_the_full_build(fixture_root):
    planted, _, _ = VERSIONED[0]
    lib = build_source(_at_file_level(planted), "planted.metal", fixture_root, strict=False)
    error = lib.build_errors()[0]      # the front end's, then the emulator's own build of 3.2
    assert error.startswith("build error: planted.metal:5: expected ';'"), error
    assert error.endswith("(with __METAL_VERSION__ 320)")
    assert lib.other_versions == [320]


def test_kernels_whose_tokens_differ_by_version_are_compared_under_each(fixture_root, tmp_path):
    """A functor right under 3.1 and wrong under 4.0: the 4.0 rows fail."""
    text = HEAD + """
struct neg_functor {
  template <typename T>
  inline T operator()(const T x) {
#if __METAL_VERSION__ >= 400
    return T(-x);
#else
    return T(-x);
#endif
  }
};
REGISTER_UNARY_OP(neg, float, float);
"""
    path = tmp_path / "UnaryKernel.metal"
    path.write_text(text.replace("#if __METAL_VERSION__ >= 400\n    return T(-x);",
                                 "#if __METAL_VERSION__ >= 400\n    return T(x);"))
    results, _ = check_tree(fixture_root, [path])
    by_file = {r.file: r.status for r in results}
    assert len(by_file) == 2, by_file
    assert by_file[str(path)] == "matched"
    assert by_file[f"{path} (__METAL_VERSION__ 400)"] == "mismatched", by_file


VALID = HEAD + """#include <c10/metal/utils.h>
using namespace c10::metal;

constexpr constant float half_pi = 1.5707963267948966;
constant float quarter_table[2] = {0.25f, 0.5f};
static inline float thrice(float x) { return 3 * x; }    // a static function, not a variable
struct counted { static constexpr constant int arity = 1; static float one() { return 1; } };
namespace helpers {
constant constexpr float third = 1.0f / 3;
inline float third_of(float x, float scale = 1.0f) { return x * third * scale; }
} // namespace helpers
inline float twice(float x) { return 2 * x; }
inline half twice(half x) { return x + x; }
inline float twice_via(float x) { return twice(half(x)); }   // another overload: no recursion
// Metal's size_t and ptrdiff_t, and explicit conversions between half and bfloat (a review's
// false reds: g++ knew size_t only as std::size_t, clang refused the functional casts)
inline bfloat to_bfloat(half h) { size_t n = sizeof(h); ptrdiff_t d = 0; return bfloat(h) * bfloat(float(n + d) / 2); }
inline half to_half(bfloat b) { return half(b); }

template <typename T>
inline T clamp_unit(T x) {
  return ::metal::clamp(x, T(0), T(1));
}

struct idioms_functor {
  template <typename T, enable_if_t<is_scalar_floating_point_v<T>, bool> = true>
  inline T operator()(const T x) {
    if IF_CONSTEXPR (is_same_v<T, float>) {
      return T(precise::sin(float(x)) + twice(float(x)) * 0.0);
    }
    const auto inf = ::metal::numeric_limits<float>::infinity();
    const long big = 1;            // Metal's long is 64 bits
    constexpr float coeffs[2] = {1.0f, 0.0f};    // a local table, not static
    const int two = 2;
    int arity = counted::arity;                  // a run-time local of a member's name
    float sized[two * counted::arity] = {0.0f, float(arity)};
    (void)sized;
    float scratch[2 * counted::arity] = {coeffs[0] * helpers::third_of(thrice(0.0f)), 0.0f};
    (void)scratch;
    (void)quarter_table[0];
    return T(isinf(float(x)) ? inf : float(x) + float(big - 1) + clamp_unit(0.0f));
  }
  template <typename T, enable_if_t<is_scalar_integral_v<T>, bool> = true>
  inline float operator()(const T x) {
    return operator()(float(x));   // the float overload: not recursion
  }
  template <typename T, enable_if_t<is_complex_v<T>, bool> = true>
  inline T operator()(const T x) {
    return T(x.x, -x.y);
  }
};

struct widen_functor {
  template <typename T>
  inline T operator()(const T x) {
    // another instantiation of the same template: not recursion
    return is_same_v<T, float> ? x : T(operator()(float(x)));
  }
};

struct deref_functor {
  inline float operator()(const float x) {
    thread const float* p = &x;
    return (*p) * 1.0f;            // a dereference in parentheses, not a function pointer
  }
};

template <typename T>
kernel void idioms_kernel(device T* out [[buffer(0)]], constant T* in [[buffer(1)]],
                          uint tid [[thread_position_in_grid]]) {
  out[tid] = static_cast<T>(idioms_functor()(in[tid]));
}

#define REGISTER_IDIOMS(T) REGISTER_UNARY_OP(idioms, T, T)
REGISTER_IDIOMS(float);
REGISTER_IDIOMS(half);
#if __METAL_VERSION__ >= 310
REGISTER_IDIOMS(bfloat);
#endif
REGISTER_UNARY_OP(idioms, int, float);
REGISTER_UNARY_OP(idioms, float2, float2);
REGISTER_UNARY_OP(deref, float, float);
REGISTER_UNARY_OP(widen, half, half);
"""


def test_valid_metal_idioms_still_build(fixture_root):
    assert probe_source(VALID, "idioms.metal", fixture_root, ["idioms", "deref", "widen"]) is None
    lib = build_source(VALID, "idioms.metal", fixture_root, strict=False)
    assert lib.build_errors() == []
    assert all(r.built for r in lib.registrations)


def test_a_kernel_file_with_no_registration_loads_with_no_kernels(fixture_root, tmp_path):
    """A file whose last port was reverted: the library had no `porter_kernels` section and
    failed to load (`undefined symbol: __stop_porter_kernels`)."""
    lib = build_source(HEAD, "empty.metal", fixture_root)
    assert lib.registrations == []
    path = tmp_path / "empty.metal"
    path.write_text(HEAD)
    assert check_tree(fixture_root, [path]) == ([], [])


# --- the issue's cases, end to end on the real-size tree -------------------------------------

@pytest.mark.slow
def test_a_double_in_a_ported_functor_fails_porter_test_and_the_rerun(real_root):
    """Issue 21's first row: `double d = ...` inside sign_functor printed 9 pass, exit 0."""
    from porter.source.checkout import KERNELS
    from tests.porter_run import porter

    assert porter("migrate-from-mpsgraph", "sign", root=real_root).code == 0
    path = real_root / KERNELS / "UnaryKernel.metal"
    text = path.read_text()
    start = text.index("struct sign_functor")
    body = text.index("return", start)
    line = text[:body].count("\n") + 1
    path.write_text(text[:body] + "double d = 0; (void)d; " + text[body:])
    result = porter("test", "sign", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert result.code == 1, result.out
    assert f"UnaryKernel.metal:{line}: Metal has no `double`" in result.out + result.err
    rerun = porter("new-op", "sign", root=real_root)
    assert rerun.code == 1 and "nothing to do" not in rerun.out, (rerun.out, rerun.err)
    assert f"UnaryKernel.metal:{line}: Metal has no `double`" in rerun.err


@pytest.mark.slow
def test_a_float_shift_in_a_ported_functor_is_a_build_error_not_nothing_to_do(real_root):
    """Also seen: a float `a >> 0` was filed "unsupported", and `porter new-op heaviside` said
    `nothing to do`, exit 0; a Mac's compiler rejects `>>` on a float."""
    from porter.source.checkout import KERNELS
    from tests.porter_run import porter, snapshot

    assert porter("new-op", "heaviside", root=real_root).code == 0
    path = real_root / KERNELS / "BinaryKernel.metal"
    text = path.read_text()
    start = text.index("struct heaviside_functor")
    body = text.index("return", start)
    path.write_text(text[:body] + "(void)(a >> 0); " + text[body:])
    before = snapshot(real_root)
    rerun = porter("new-op", "heaviside", root=real_root)
    assert rerun.code == 1 and "nothing to do" not in rerun.out, (rerun.out, rerun.err)
    assert "does not build" in rerun.err and "invalid operands to binary expression" in rerun.err, rerun.err
    assert snapshot(real_root) == before


def test_emulate_check_of_a_file_with_no_registration_left_exits_0(real_root):
    """Also seen: a `.metal` whose last port was reverted crashed `porter emulate check` with
    `undefined symbol: __stop_porter_kernels`, exit 70."""
    from porter.source.checkout import KERNELS
    from tests.porter_run import porter

    for name in ("UnaryKernel.metal", "BinaryKernel.metal", "ActivationKernel.metal"):
        path = real_root / KERNELS / name
        if path.is_file():
            path.write_text(HEAD)
    result = porter("emulate", "check", root=real_root)
    assert result.code == 0, (result.out, result.err)
    assert "0 registered kernels" in result.out


# --- the issue's cases (issue 33), each a planted positive and a clean twin -------------------

ISSUE_PLANTED = [
    # MSL §1.5.4: lambdas before Metal 4.0 (PyTorch builds for 3.1); 4.0 accepts them
    ("lambda", "inline float planted_l(float x) { auto g = [](float y) { return y; }; "
               "return g(x); }", "lambda expressions are not supported before Metal 4.0"),
    # §4: an unqualified pointer is a thread one; a device pointer does not convert to it
    ("float* helper", "inline float planted_h(float* p) { return *p; }\n"
                      "kernel void planted_k(device float* out [[buffer(0)]], "
                      "uint i [[thread_position_in_grid]]) { out[i] = planted_h(out); }",
     "no matching function for call to 'planted_h'"),
    # §4.2: a `constant` array is not a thread one (c10/metal's chbevl takes a thread array)
    ("constant array to a thread parameter",
     "constant float planted_c[] = {1, 2};\n"
     "inline float planted_s(const float c[]) { return c[0]; }\n"
     "inline float planted_t(float x) { return planted_s(planted_c) + x; }",
     "no matching function for call to 'planted_s'"),
    ("register", "inline float planted_r(float x) { register float y = x; return y; }",
     "Metal has no `register`"),
    ("noexcept", "inline float planted_n(float x) noexcept { return x; }",
     "Metal has no `noexcept`"),
    ("static const local", "inline float planted_s(float x) { static const float y = 2; "
                           "return x * y; }", "Metal has no static local variable"),
    # Metal's max has float and integer overloads, not a template: (float, int) is ambiguous
    ("metal::max(float, 0)", "inline float planted_m(float x) { return metal::max(x, 0); }",
     "call to 'max' is ambiguous"),
    # Apple's compiler defines __METAL_MACOS__ for macOS: a macOS-only branch is compiled
    ("__METAL_MACOS__ branch", "#if defined(__METAL_MACOS__)\n"
                               "inline float planted_mac(float x) { return x + ; }\n#endif",
     "expected expression"),
    ("kernel pointer without an address space",
     "kernel void planted_k(float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) "
     "{ out[i] = 0; }", "needs an address space"),
    ("vector constructor's element count", "inline float4 planted_v(float2 a) "
                                           "{ return float4(a, 1); }",
     "do not have as many elements"),
    ("a vector swizzle past its size", "inline float4 planted_w(float2 a) { return a.rgba; }",
     "vector component access exceeds type"),
    # §4: every pointer and reference spells its address space (a Mac: "pointer type must have
    # explicit address space qualifier"); they were green, `thread` being clang's default
    ("a pointer parameter without an address space", "inline float planted_p(float* p) { return *p; }",
     "the pointer `float * p` needs an address space"),
    ("a local pointer without an address space",
     "inline float planted_q(float x) { float t = x; float* p = &t; return *p; }",
     "the pointer `float * p` needs an address space"),
    ("a struct member pointer without an address space", "struct planted_s { float* p; };",
     "the pointer `float * p` needs an address space"),
    ("a reference parameter without an address space",
     "inline float planted_r2(const float& x) { return x; }",
     "the reference `const float & x` needs an address space"),
    # §4.4: threadgroup memory is declared in the kernel, not in a function it calls
    ("a threadgroup variable in a helper",
     "inline float planted_tg(float x) { threadgroup float s; s = x; return s; }",
     "a `threadgroup` variable (`threadgroup float s`) may be declared only in a kernel function"),
    # review 27: L34 (a keyword as a name), L42 (a write to `constant`), L43 and L44 (an int
    # vector where Metal takes a bool vector), L40 (an implicit float to bfloat); each was
    # accepted, and its kernels "not proven" with the words "a Mac builds it"
    ("`vertex` as a name", "inline float planted_vx(float a) { float vertex = a; return vertex; }",
     "expected unqualified-id"),
    ("a write to `constant` memory",
     "constant float planted_k = 1.0f;\ninline float planted_w(float a) { planted_k = a; return a; }",
     "Metal's `constant` address space is read-only"),
    ("all() of an int vector", "inline bool planted_a(float2 a) { return all(int2(1, 1)); }",
     "Metal's `metal::all` takes a bool vector, and `int2` does not convert to one"),
    ("select() on an int vector", "inline float2 planted_s(float2 a) { int2 m = int2(1, 0); "
                                  "return select(a, a, m); }",
     "Metal's `metal::select` takes a bool vector, and `int2` does not convert to one"),
    ("an implicit float to bfloat", "inline bfloat planted_b(float a) { bfloat r = a; return r; }",
     "Metal converts float to bfloat only explicitly"),
    # review 28: M16 (the keyword's macro undefined), M10 (a float added into a bfloat), M04 (a
    # `constant` array written through a `device` cast)
    ("`vertex` as a name after #undef", "#undef vertex\n"
                                        "inline float planted_vu(float a) { float vertex = a; return vertex; }",
     "`vertex` is a Metal keyword"),
    ("a float added into a bfloat", "inline bfloat planted_ba(bfloat x) { x += 1.0f; return x; }",
     "Metal converts float to bfloat only explicitly"),
    ("a cast to another address space",
     "constant float planted_ca[2] = {1, 2};\n"
     "inline float planted_cw(float a) { ((device float*)planted_ca)[0] = a; return a; }",
     "Metal has no cast of a pointer or reference to another address space (`a constant pointer cast to a device one`"),
    # review 29's F05: the same write through a reference cast
    ("a reference cast to another address space",
     "constant float planted_cr[2] = {1, 2};\n"
     "inline float planted_cwr(float a) { (device float&)planted_cr[0] = a; return a; }",
     "(`a constant object cast to a device reference`"),
]

ISSUE_CLEAN = [
    ("swizzles, .rgba and half2(h)",
     "inline float2 clean_a(float2 a) { return a.yx; }\n"
     "inline float4 clean_b(float4 c) { return c.rgba; }\n"
     "inline half2 clean_c(half x) { return half2(x); }\n"
     "inline float4 clean_d(float2 a) { return float4(a.xy, 0, 1); }\n"
     "inline float2 clean_e(half2 h) { return static_cast<float2>(h); }"),
    ("__HAVE_BFLOAT__ guard", "#if defined(__HAVE_BFLOAT__)\n"
                              "inline bfloat clean_f(bfloat x) { return x; }\n#endif"),
    ("if constexpr on 3.x", "template <typename T> inline T clean_g(T x) {\n"
                            "  if constexpr (is_same_v<T, float>) { return x; }\n  return x;\n}\n"
                            "inline float clean_h(float x) { return clean_g(x); }"),
    ("plain recursion", "inline float clean_i(float x) { return x < 0 ? -clean_i(-x) : x; }"),
    ("template recursion", "template <typename T> inline T clean_j(T x) "
                           "{ return x < 0 ? -clean_j(-x) : x; }\n"
                           "inline float clean_k(float x) { return clean_j(x); }"),
    ("a constant array to a constant parameter",
     "constant float clean_c[] = {1, 2};\n"
     "inline float clean_l(constant float* c) { return c[0]; }\n"
     "inline float clean_m(float x) { return clean_l(clean_c) + x; }"),
    ("a thread array to a thread parameter (chbevl's shape)",
     "inline float clean_n(const float c[]) { return c[0]; }\n"
     "inline float clean_o(float x) { constexpr float t[] = {1, 2}; return clean_n(t) + x; }"),
    ("metal::max(float, 0.0f)", "inline float clean_p(float x) { return metal::max(x, 0.0f); }"),
    ("threadgroup memory in a kernel",
     "kernel void clean_k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
     "  threadgroup float sh[4];\n  sh[i % 4] = 1;\n"
     "  threadgroup_barrier(mem_flags::mem_threadgroup);\n  out[i] = sh[0];\n}"),
    ("unknown Metal attributes", "kernel void clean_q(device float* out [[buffer(0)]], "
                                 "uint i [[thread_position_in_grid]], "
                                 "uint n [[threads_per_grid]]) { out[i] = float(n); }"),
    ("thread pointers and references", "inline float clean_u(thread float* p) { return *p; }\n"
     "inline float clean_v(float x) { float t = x; thread float* p = &t; return clean_u(p); }\n"
     "inline float clean_w(thread const float& x) { return x; }\n"
     "struct clean_z { thread float* p; device float* q; constant float* r; };"),
    ("a pointer `auto` deduces, a function pointer",
     "inline float clean_x(float x) { auto p = &x; return *p; }\n"
     "inline float clean_y(float x) { float (*f)(float) = nullptr; (void)f; return x; }"),
    # upstream UnaryKernel.metal's frexp_bits: a conversion in a constant expression (the front
    # end's stand-ins for `U(1)` and `static_cast<U>` were not constexpr: all 396 of the file's
    # kernels were red)
    ("a conversion in a constant expression",
     "template <typename T, typename U> inline T clean_s(T x) {\n"
     "  constexpr int m = numeric_limits<T>::digits - 1;\n"
     "  constexpr U a = (U(1) << m) - 1;\n  constexpr U b = static_cast<U>(1) << m;\n"
     "  constexpr half h = half(0.5);\n"
     "  return as_type<T>(U(as_type<U>(x) & (a | b))) * float(h);\n}\n"
     "inline float clean_t(float x) { return clean_s<float, uint>(x); }"),
    ("a static data member in `constant`, an extern `constant` declaration, a parameter pack",
     "struct clean_m2 { static constexpr constant float scale = 2.0f; };\n"
     "extern constant float clean_e2;\n"
     "template <typename... A> inline float clean_p2(float x, A... a) { return x; }\n"
     "inline float clean_q2(float x) { return clean_p2(x, 1, 2) * clean_m2::scale; }\n"
     "inline float clean_n2(float x) { return x > 0 ? x : NAN; }\n"
     "inline float clean_i2(float x) { return x > 0 ? x : INFINITY; }\n"
     "inline int clean_b2(int x) { return __builtin_expect(x > 0, 1) ? x : 0; }\n"
     "inline ulong clean_u2(uint x) { return sizeof(x) + ulong(x) + 1UL; }\n"
     "inline half clean_h2(half x) { bfloat b = bfloat(float(x)); return half(float(b)) + 1.0h; }"),
    ("bool vectors of comparisons, kept or not",
     "inline float2 clean_v(float2 a, float2 b) { auto m = a < b; bool2 n = bool2(true, false); "
     "return select(a, b, m) + select(a, b, a > b) + select(a, b, n) "
     "+ float(all(a == b) || any(!(a != b) && (a < b))); }"),
    ("explicit bfloat conversions, bfloat arithmetic, a read of `constant` memory",
     "constant float clean_k = 1.0f;\n"
     "inline bfloat clean_f2(float a, bfloat b) { float w = b; "
     "return bfloat(a) * b + static_cast<bfloat>(a * clean_k + w); }"),
    ("casts within an address space, bfloat compound assignments of bfloats",
     "inline float clean_cs(device void* p, float a) { thread float* q = &a; "
     "return ((device float*)p)[0] + reinterpret_cast<device float*>(p)[1] + *((thread float*)q) "
     "+ (thread float&)a + (const device float&)((device float*)p)[2]; }\n"
     "inline bfloat clean_bc(bfloat x, bfloat y) { x += y; x *= bfloat(2.0f); return x; }"),
    ("a lambda under Metal 4.0", "#if __METAL_VERSION__ >= 400\n"
                                 "inline float clean_r(float x) { return [](float y) "
                                 "{ return y; }(x); }\n#endif"),
]


@pytest.mark.parametrize(("planted", "message"), [c[1:] for c in ISSUE_PLANTED],
                         ids=[c[0] for c in ISSUE_PLANTED])
@pytest.mark.slow
def test_the_issues_planted_cases_are_build_errors_at_their_line(planted, message, fixture_root):
    error = probe_source(_at_file_level(planted), "planted.metal", fixture_root, ["planted"])
    first_line = 4 + planted.split("\n").index(next(
        ln for ln in planted.split("\n") if ln and not ln.startswith("#"))) \
        if planted.startswith("#") else None
    assert error is not None and message in error, error
    assert re.match(r"planted\.metal:(\d+): ", error), error
    if first_line is not None:
        assert error.startswith(f"planted.metal:{first_line}: "), error


@pytest.mark.parametrize("clean", [c[1] for c in ISSUE_CLEAN], ids=[c[0] for c in ISSUE_CLEAN])
@pytest.mark.slow
def test_the_issues_clean_twins_pass_the_front_end(clean, fixture_root):
    """The front end's verdict (what a Mac compiles). The emulator's g++ build of a file is
    another matter: its shim has no `.yx` swizzle or `mem_flags` yet (execution's part)."""
    from porter.emulate import dialect
    views = dialect.views(_at_file_level(clean), "clean.metal", fixture_root)
    assert dialect.errors_by_version(views) == []


def test_the_issues_tables_ran():
    assert len(ISSUE_PLANTED) >= 10 and len(ISSUE_CLEAN) >= 10


# the registrations as the metallib build instantiates them: a tree with its own c10/metal

@pytest.fixture
def own_tree(fixture_root, tmp_path):
    """The fixture's checkout with its own c10/metal (the installed torch's, copied): what the
    front end compiles is the checkout's indexing.h, REGISTER_* macros included."""
    from porter.emulate import headers

    root = tmp_path / "tree"
    shutil.copytree(fixture_root, root)
    shutil.copytree(headers.c10_metal_parent(None) / "c10" / "metal", root / "c10" / "metal")
    return root


def _errors_of(root, rel):
    from porter.emulate import dialect
    text = (root / rel).read_text()
    return dialect.errors_by_version(dialect.views(text, rel, root))


UNARY_REL = f"{KERNELS}/UnaryKernel.metal"
BINARY_REL = f"{KERNELS}/BinaryKernel.metal"


@pytest.mark.slow
def test_the_real_headers_and_kernel_files_pass_the_front_end(own_tree):
    for path in sorted((own_tree / KERNELS).glob("*.metal")):
        rel = str(path.relative_to(own_tree))
        assert _errors_of(own_tree, rel) == [], rel


@pytest.mark.slow
def test_a_duplicate_register_line_is_a_build_error(own_tree):
    path = own_tree / UNARY_REL
    text = path.read_text()
    line = next(ln for ln in text.split("\n") if ln.startswith("REGISTER_UNARY_OP("))
    path.write_text(text + line + "\n")
    errors = _errors_of(own_tree, UNARY_REL)
    assert errors and errors[0].startswith(f"{UNARY_REL}:{text.count(chr(10)) + 1}: "), errors
    assert "duplicate explicit instantiation" in errors[0], errors


@pytest.mark.slow
def test_the_same_kernel_name_in_two_files_of_one_metallib_is_a_build_error(own_tree):
    unary = (own_tree / UNARY_REL).read_text()
    line = next(ln for ln in unary.split("\n") if ln.startswith("REGISTER_UNARY_OP("))
    name = line[len("REGISTER_UNARY_OP("):].split(",")[0].strip()
    functor = f"struct {name}_functor {{\n  template <typename T>\n  inline T operator()(const T x) {{ return x; }}\n}};\n"
    path = own_tree / KERNELS / "PlantedKernel.metal"
    path.write_text(HEAD + functor + line + "\n")
    errors = _errors_of(own_tree, f"{KERNELS}/PlantedKernel.metal")
    assert any("is also defined at" in e and UNARY_REL in e for e in errors), errors
    # the clean twin: a name of its own
    path.write_text(HEAD + functor.replace(f"struct {name}_functor", "struct planted_own_functor")
                    + line.replace(f"({name},", "(planted_own,") + "\n")
    assert _errors_of(own_tree, f"{KERNELS}/PlantedKernel.metal") == []


LEAKY_RELU_AGAIN = """struct leaky_relu_functor {
  template <typename T>
  inline T operator()(const T x, const T s) {
    return x < T(0) ? x * s : x;
  }
};
REGISTER_UNARY_ALPHA_OP(leaky_relu, float, float, float);
"""


@pytest.mark.slow
def test_a_name_another_kernel_file_takes_fails_this_files_cached_build(own_tree):
    """Review 33's L14: UnaryKernel.metal registers a kernel name ActivationKernel.metal has
    (leaky_relu_float_float_float): a Mac links every kernels/*.metal into one metallib, which
    does not link. `porter test leaky_relu` stayed green, as ActivationKernel's build came
    from the cache keyed by its own text."""
    from porter.emulate.build import build_file

    activation = own_tree / KERNELS / "ActivationKernel.metal"
    registered = next(i for i, ln in enumerate(activation.read_text().split("\n"), 1)
                      if ln.startswith("REGISTER_UNARY_ALPHA_OP(leaky_relu, float,"))
    assert build_file(activation, own_tree, strict=False).build_errors() == []
    unary = own_tree / UNARY_REL
    clean = unary.read_text()
    unary.write_text(clean + LEAKY_RELU_AGAIN)
    planted = clean.count("\n") + LEAKY_RELU_AGAIN.count("\n")
    lib = build_file(activation, own_tree, strict=False)
    assert lib.cached                       # the file's own build is the cached one
    errors = lib.build_errors()
    assert any(f"{KERNELS}/ActivationKernel.metal:{registered}" in e
               and f"{UNARY_REL}:{planted}" in e and "must be unique" in e for e in errors), errors
    # the clean twin: the other file as it was, and this build green again
    unary.write_text(clean)
    assert build_file(activation, own_tree, strict=False).build_errors() == []


@pytest.mark.slow
def test_an_instantiation_error_in_indexing_h_is_a_build_error_at_the_header(own_tree):
    path = own_tree / "c10/metal/indexing.h"
    text = path.read_text()
    anchor = "kernel void unary_dense("
    at = text.index(anchor)
    body = text.index("{", at) + 1
    line = text[:body].count("\n") + 1
    path.write_text(text[:body] + "\n  T planted = T::no_such_member;\n" + text[body:])
    errors = _errors_of(own_tree, UNARY_REL)
    assert errors and errors[0].startswith(f"c10/metal/indexing.h:{line + 1}: "), errors
    assert f"(instantiated from {UNARY_REL}:" in errors[0], errors


# a file checked in pieces: each functor's registrations instantiated and cached on their own

def _count_parses(monkeypatch, precompiled=None):
    """The versions of the front end's parses; `precompiled`, a list: whether each parse read
    the kernel file's includes from a precompiled header."""
    from porter.emulate import frontend
    parses = []
    real = frontend._parse

    def counted(source, version, pch=None):
        parses.append(version)
        if precompiled is not None:
            precompiled.append(pch is not None)
        return real(source, version, pch)
    monkeypatch.setattr(frontend, "_parse", counted)
    return parses


def test_an_edit_of_one_functor_instantiates_that_functors_registrations_alone(own_tree,
                                                                               monkeypatch):
    from porter.emulate import frontend
    path = own_tree / UNARY_REL
    text = path.read_text()
    precompiled: list[bool] = []
    parses = _count_parses(monkeypatch, precompiled)
    first = frontend.view(text, UNARY_REL, own_tree, 310)
    assert first.errors == () and first.kernels
    cold = len(parses)
    assert cold >= 2            # the file without registrations, then its pieces
    parses.clear()
    precompiled.clear()
    edited = text.replace("return T(precise::exp2(float(x)));",
                          "return T(precise::exp2(float(x) + 0.0f));", 1)
    assert edited != text
    again = frontend.view(edited, UNARY_REL, own_tree, 310)
    assert again.errors == () and again.kernels == first.kernels
    assert parses == [310, 310]         # the file's own parse and exp2's registrations
    # each reads the includes from the header precompiled by the first check
    assert precompiled == [True, True]


@pytest.mark.slow
def test_metal_3_1_and_3_2_are_parsed_once_unless_the_file_names_what_differs(own_tree,
                                                                               monkeypatch):
    """Metal 3.2's library adds names to 3.1's (memory_order_acquire, thread_scope,
    atomic_thread_fence): a file spelling none of them compiles alike under both, one parse;
    a file that names one is parsed under each, and 3.1 rejects it."""
    from porter.emulate import frontend
    parses = _count_parses(monkeypatch)
    clean = (own_tree / UNARY_REL).read_text()
    assert all(v.errors == () for v in frontend.views(clean, UNARY_REL, own_tree))
    assert sorted(set(parses)) == [310, 400]
    parses.clear()
    planted = clean + "\ninline int planted_order() { return int(metal::memory_order_acquire); }\n"
    found = {v.version: v.errors for v in frontend.views(planted, UNARY_REL, own_tree)}
    assert 320 in parses
    assert found[320] == found[400] == ()
    assert any("memory_order_acquire" in e for e in found[310]), found[310]


def test_an_instantiation_error_of_one_functor_is_found_and_gone_when_fixed(own_tree):
    from porter.emulate import frontend
    path = own_tree / UNARY_REL
    text = path.read_text()
    anchor = "return T(precise::exp2(float(x)));"
    line = text[:text.index(anchor)].count("\n") + 1
    assert frontend.view(text, UNARY_REL, own_tree, 310).errors == ()
    # dependent on T: only an instantiation finds it (the file's own parse does not)
    planted = text.replace(anchor, "return T::no_such_member;", 1)
    errors = frontend.view(planted, UNARY_REL, own_tree, 310).errors
    assert errors and all(e.startswith(f"{UNARY_REL}:{line}: ") for e in errors), errors
    # the clean twin, and another functor's cached pieces do not keep the error
    assert frontend.view(text, UNARY_REL, own_tree, 310).errors == ()
    other = text.replace("return T(precise::exp(float(x)));",
                         "return T(precise::exp(float(x) + 0.0f));", 1)
    assert other != text
    assert frontend.view(other, UNARY_REL, own_tree, 310).errors == ()


@pytest.mark.parametrize(("clang", "porter"), [
    # the registration macro's static_assert, as clang says it -> porter's words, Metal's names
    ("static assertion failed due to requirement '::metal::is_same_v<float, bool>': Output "
     "dtype mismatch for binary op logical_and and input float",
     "logical_and registered with output type float for input float, but logical_and_functor "
     "returns bool"),
    ("static assertion failed due to requirement '::metal::is_same_v<_Float16, float>': Output "
     "dtype mismatch for binary op threshold and input float",
     "threshold registered with output type half for input float, but threshold_functor "
     "returns float"),
    ("static assertion failed due to requirement '::metal::is_same_v<__bf16, unsigned char>': "
     "Output dtype mismatch for unary op neg and input uchar",
     "neg registered with output type bfloat for input uchar, but neg_functor returns uchar"),
    # any other message is clang's own
    ("expected ';' after return statement", "expected ';' after return statement"),
])
def test_a_registrations_wrong_output_type_is_said_in_metals_type_names(clang, porter):
    from porter.emulate.frontend import _worded
    assert _worded(clang) == porter


def test_the_enumeration_names_are_built_before_the_thread_pool_reads_them():
    """clang.cindex builds each enumeration member's name map lazily, and a parse in the front
    end's thread pool once read one half-built (`KeyError: ExceptionSpecificationKind.NONE`):
    loading the front end builds every map the AST rules read, in one thread."""
    from porter.emulate import frontend
    ci = frontend._clang()
    for enum in (ci.ExceptionSpecificationKind, ci.CursorKind, ci.TypeKind):
        members = [m for m in enum._kinds if m is not None]
        assert members and all(m.__dict__.get("_name_map") for m in members), enum


DIRECT = HEAD + """
template <typename T>
kernel void planted_direct(
    device T* out [[buffer(0)]],
    constant T* in [[buffer(1)]],
    uint i [[thread_position_in_grid]]) {
  out[i] = in[i] * 2;
}

template [[host_name("planted_direct_float")]] kernel void planted_direct<float>(
    device float* out [[buffer(0)]],
    constant float* in [[buffer(1)]],
    uint i [[thread_position_in_grid]]);
template [[host_name("planted_direct_half")]] kernel void planted_direct<half>(device half*, constant half*, uint);
"""


def test_an_instantiation_written_out_over_several_lines_builds_and_its_mistakes_do_not(own_tree):
    # upstream writes its registrations through macros (one line each once expanded); a
    # contributor may write one by hand, its parameters on the lines below it
    rel = f"{KERNELS}/PlantedKernel.metal"
    path = own_tree / rel
    path.write_text(DIRECT)
    assert _errors_of(own_tree, rel) == []
    # a parameter list that matches no template is an error at the declaration's first line
    path.write_text(DIRECT.replace("uint i [[thread_position_in_grid]]);",
                                   "uint i [[thread_position_in_grid]], device int* x);"))
    errors = _errors_of(own_tree, rel)
    assert errors and errors[0].startswith(f"{rel}:13: explicit instantiation"), errors
    # a pointer with no address space in the hand-written parameters is Metal's error too
    path.write_text(DIRECT.replace("constant float* in [[buffer(1)]]", "float* in [[buffer(1)]]"))
    assert _errors_of(own_tree, rel), "a float* parameter built"


def test_the_front_ends_index_is_disposed_of_after_cindexs_globals_are_gone():
    """At exit cindex's module globals are cleared before the main thread's index is
    collected: its own __del__ raised, and every run ended with "Exception ignored in:
    <function Index.__del__>" on stderr."""
    import subprocess
    import sys
    code = ("from porter.emulate import frontend as f; f._index(); import clang.cindex as ci; "
            "ci.conf = None; del f._INDEX_LOCAL.index")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "Exception ignored" not in run.stderr, run.stderr


UNSEQUENCED = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
inline int bump(thread int& k) { return k++; }
inline float pick(int p, int q, float right, float wrong) { return p > q ? right : wrong; }
struct u_functor {
  template <typename T>
  inline T operator()(const T x) {
    int k = 0;
    BODY
  }
};
REGISTER_UNARY_OP(u, float, float);
"""


@pytest.mark.parametrize(("body", "line"), [
    # review 31's L12: g++ evaluates the two bumps right to left, Apple's clang left to right
    ("return T(pick(bump(k), bump(k), float(x), -float(x)));", 10),
    ("return T(pick(k++, k++, float(x), -float(x)));", 10),
    # sequenced in statements of their own: one order everywhere
    ("const int p = bump(k);\n    const int q = bump(k);\n    return T(pick(p, q, float(x), -float(x)));",
     None),
    # one argument that changes state: no other one to order it against
    ("return T(pick(bump(k), 0, float(x), -float(x)));", None),
])
def test_a_call_whose_arguments_change_state_twice_is_noted(fixture_root, tmp_path, body, line):
    from porter.emulate import frontend
    text = UNSEQUENCED.replace("BODY", body)
    views = frontend.views(text, tmp_path / "u.metal", fixture_root, use_cache=False)
    assert all(not v.errors for v in views), [v.errors for v in views]
    found = {c[1] for v in views for c in v.unsequenced}
    assert found == ({line} if line else set()), found


@pytest.mark.slow
def test_a_port_whose_functor_orders_state_changes_by_argument_order_is_not_proven(real_root):
    """The front end's finding above through `porter test` (emulator_device._unsequenced)."""
    from porter.source.checkout import KERNELS
    from tests.porter_run import porter
    path = real_root / KERNELS / "UnaryKernel.metal"
    text = path.read_text()
    old = "  inline T operator()(const T x) {\n    return T(-x);"
    assert text.count(old) == 1
    helpers = ("inline int bump(thread int& k) { return ++k; }\n"
               "template <typename U>\ninline U pick(int a, int b, U x, U y) { return a < b ? x : y; }\n")
    text = text.replace("struct neg_functor {", helpers + "struct neg_functor {")
    path.write_text(text.replace(old, "  inline T operator()(const T x) {\n    int k = 0;\n"
                                      "    return pick(bump(k), bump(k), T(-x), T(x));"))
    result = porter("test", "neg", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert result.code == 1, result.out
    assert "not proven: aten/src/ATen/native/mps/kernels/UnaryKernel.metal:" in result.out
    assert "`pick(...)` is given two arguments that change state" in result.out


MUL_ADD = """\
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
struct m_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    BODY
  }
};
REGISTER_BINARY_OP(m, half, half);
REGISTER_BINARY_OP(m, float, float);
"""


@pytest.mark.parametrize(("body", "found"), [
    # review 35's N10: a product of the template's type added or subtracted: half's answer
    # may be contracted on a Mac, which the emulator never runs
    ("return a * a - a * a;", {(7, "T")}),
    ("T p = a * b;\n    p += a * b;\n    return p;", {(8, "T")}),
    # a product of halves inside the template: libclang leaves it unresolved there, so read as
    # the template's type (flagged for half and bfloat alike)
    ("return half(a) * half(b) + half(1);", {(7, "T")}),
    # float arithmetic: the contracted build runs it both ways; a product alone is one rounding
    ("return T(float(a) * float(b) + 1.0f);", set()),
    ("return a * b;", set()),
    # review 36's K03: Metal's own multiply-add formulas called in half (and their float twins);
    # left unresolved in the template, so read as its type, as a product there is
    ("return dot(half2(a, a), half2(a, -a));", {(7, "T")}),
    ("return T(mix(half(a), half(b), half(0.5f)));", {(7, "T")}),
    # resolved: arguments of a type the template does not change
    ("half2 u = half2(1.0h, 2.0h);\n    return T(dot(u, u));", {(8, "half")}),
    # built on dot (review 37's N02)
    ("half2 u = half2(1.0h, 2.0h);\n    return T(length_squared(u));", {(8, "half")}),
    ("return T(dot(float2(a, a), float2(b, b)));", set()),
    ("return T(mix(float(a), float(b), 0.5f));", set()),
])
def test_a_narrow_multiply_add_is_found(fixture_root, tmp_path, body, found):
    from porter.emulate import frontend
    views = frontend.views(MUL_ADD.replace("BODY", body), tmp_path / "m.metal", fixture_root,
                           use_cache=False)
    assert all(not v.errors for v in views), [v.errors for v in views]
    assert {(line, kind) for v in views for _, line, _, kind in v.mul_adds} == found


@pytest.mark.parametrize(("body", "free"), [
    # nothing a multiply-add could be made of: comparisons, sums, conversions, constructors
    ("return a == 0 ? b : static_cast<T>(a > 0);", True),
    ("return T(float(a) + float(b)) - b;", True),
    ("return T(float2(a, b).x);", True),
    # a product, or a call that may hold one (Metal's library, a helper, a formula)
    ("return a * b;", False),
    ("T p = a;\n    p *= b;\n    return p;", False),
    ("return T(metal::abs(float(a)) + 1.0f);", False),
    ("return T(mix(float(a), float(b), 0.5f));", False),
])
def test_a_functor_without_products_or_calls_is_fma_free(fixture_root, tmp_path, body, free):
    # such a functor's contracted answers are its plain ones: the emulator skips the
    # contracted build (a -O1 compile an edit) for kernels that run only such functors
    from porter.emulate import frontend
    views = frontend.views(MUL_ADD.replace("BODY", body), tmp_path / "m.metal", fixture_root,
                           use_cache=False)
    assert all(not v.errors for v in views), [v.errors for v in views]
    assert {("m" in v.fma_free) for v in views} == {free}


def test_a_number_inside_a_string_is_left_as_written(fixture_root, tmp_path):
    # review 38's L24: the rewrite that makes Metal's unsuffixed floating literals float ran
    # inside string literals too ("1.5" became "1.5f", 5 bytes): a false build error
    from porter.emulate import frontend
    text = ('#include <metal_stdlib>\nconstant char tag[] = "1.5";\n'
            'static_assert(sizeof(tag) == 4, "four bytes");\n'
            "static_assert(1'024.5 > 1000.0, \"a digit separator is no quote\");\n")
    views = frontend.views(text, tmp_path / "s.metal", fixture_root, use_cache=False)
    assert [v.errors for v in views] == [()] * len(views)


@pytest.mark.parametrize(("helper", "body", "found"), [
    # review 38's L34, L35: a bfloat with a half, in the functor or in a helper it calls
    ("", "return T(float(bfloat(1.0f) + half(1.0h)));", {(7, "m")}),
    ("inline float hv_mix(bfloat b, half h) { return b + h; }\n", "return T(hv_mix(1.0f, 1.0h));",
     {(4, "*")}),
    # review 39's P02: a template helper, bound to bfloat by its call, whatever the dtype
    ("template <typename U> inline float hv_mix(U x, half h) { return x + h; }\n",
     "return T(hv_mix(bfloat(1.0f), half(1.0h)));", {(4, "*")}),
    # review 39's P01: in a header beside the kernel file
    ('#include "local_mix.h"\n', "return T(local_mix(1.0f, 1.0h));", {(2, "*")}),
    # in a namespace of the kernel file: its own, and a header it includes there (the walks
    # leave out only the namespaces that hold none of the checked files' lines)
    ("namespace mine {\ninline float hv_mix(bfloat b, half h) { return b + h; }\n}\n",
     "return T(mine::hv_mix(1.0f, 1.0h));", {(5, "*")}),
    ('namespace mine {\n#include "local_mix.h"\n}\n', "return T(mine::local_mix(1.0f, 1.0h));",
     {(2, "*")}),
    # the twin: both converted to float first
    ("", "return T(float(bfloat(1.0f)) + float(half(1.0h)));", set()),
])
def test_a_bfloat_with_a_half_is_found(fixture_root, tmp_path, helper, body, found):
    from porter.emulate import frontend
    (tmp_path / "local_mix.h").write_text(
        "#pragma once\ninline float local_mix(bfloat b, half h) { return b + h; }\n")
    text = MUL_ADD.replace("struct m_functor", helper + "struct m_functor").replace("BODY", body)
    views = frontend.views(text, tmp_path / "m.metal", fixture_root, use_cache=False)
    assert {(line, owner) for v in views for _, line, owner, _ in v.mixed_halves} == found


def test_a_rewritten_segment_is_read_back_only_for_the_same_text_file_and_names():
    # rewrite's segments are kept by (file, text, template names): a header's text is read
    # back under another version or in the next --watch round, and a change of any of the
    # three rewrites it again, with its own line numbers
    from porter.emulate import frontend
    body = ('template <typename T> T f(T x) { return T(x) * 2.0 + static_cast<float2>(x).x; }\n'
            'double d;\n')
    pre = f'# 1 "/x/a.metal"\n{body}'
    first = frontend.rewrite(pre)
    again = frontend.rewrite(pre)
    assert again == first
    assert "__metal_vec_ctor<T>(x)" in first.source and "2.0f" in first.source
    assert first.types == [("/x/a.metal", 2, "double")]
    # the same text later in the file: its findings at its own lines
    moved = frontend.rewrite(f'# 5 "/x/a.metal"\n{body}')
    assert moved.types == [("/x/a.metal", 6, "double")]
    # another file's: named there
    assert frontend.rewrite(f'# 1 "/x/b.h"\n{body}').types == [("/x/b.h", 2, "double")]
    # other template names: `T(x)` is no vector constructor once T is none of them
    other = frontend.rewrite(pre, ({"U"}, set()))
    assert "__metal_vec_ctor<T>(x)" not in other.source and "T(x)" in other.source
    # an edited text is rewritten, not read back
    edited = frontend.rewrite(pre.replace("2.0", "3.0"))
    assert "3.0f" in edited.source and "2.0f" not in edited.source


@pytest.mark.parametrize("text", [
    "memory_order_acquire", "x memory_order_acquire;", "xmemory_order_acquire", "memory_order_acquirex",
    "_thread_scope", "thread_scope_", "thread_scope(", "1thread_scope", "é thread_scope é",
    "éthread_scope", "thread_scopeé", "a.thread_scope->b", "thread_scop thread_scopes", "",
    "atomic_thread_fence atomic_thread_fence_x", "xx atomic_thread_fence",
])
def test_a_merge_of_versions_reads_a_name_as_the_word_search_did(text):
    # _merged's check for a name the library declares otherwise: str.find with word edges,
    # as the regex alternation it replaces matched
    from porter.emulate import frontend
    names = {"memory_order_acquire", "thread_scope", "atomic_thread_fence"}
    regex = re.search(rf"(?<!\w)(?:{'|'.join(sorted(map(re.escape, names)))})(?!\w)", text)
    assert frontend._spells_any(text, names) == bool(regex)


def test_a_headers_mixed_halves_are_kept_by_its_content_and_version(fixture_root, tmp_path):
    # the checkout headers' bfloat-with-half rows are kept in the process and on disk (a
    # fresh process walked c10/metal's declarations again), by the header's content and the
    # version: a fresh process reads them back, an edited header is walked again
    from porter.emulate import frontend
    header = tmp_path / "local_mix.h"
    header.write_text("#pragma once\ninline float local_mix(bfloat b, half h) { return b + h; }\n")
    text = MUL_ADD.replace("struct m_functor", '#include "local_mix.h"\nstruct m_functor').replace(
        "BODY", "return T(local_mix(1.0f, 1.0h));")

    def found():
        views = frontend.views(text, tmp_path / "m.metal", fixture_root, use_cache=False)
        return {(f.rpartition("/")[2], line, owner) for v in views
                for f, line, owner, _ in v.mixed_halves}

    assert found() == {("local_mix.h", 2, "*")}
    stored = set(frontend.cache_dir().glob("frontend-mixed-*.json"))
    assert stored
    frontend._HEADER_MIXED.clear()              # a fresh process: read back from the disk
    assert found() == {("local_mix.h", 2, "*")}
    import json
    kept = {path: path.read_text() for path in stored}
    for path in stored:                         # what it reads is the disk's (a marked row)
        path.write_text(json.dumps(json.loads(kept[path]) + [["/marked/h.h", 9, "*", "*"]]))
    frontend._HEADER_MIXED.clear()
    assert ("h.h", 9, "*") in found()
    for path, was in kept.items():
        path.write_text(was)
    frontend._HEADER_MIXED.clear()
    header.write_text("#pragma once\n// moved\ninline float local_mix(bfloat b, half h) "
                      "{ return float(b) + float(h); }\ninline float other(bfloat b, half h) "
                      "{ return b * h; }\n")
    assert found() == {("local_mix.h", 4, "*")}
    assert len(set(frontend.cache_dir().glob("frontend-mixed-*.json"))) > len(stored)


@pytest.mark.parametrize("text", [
    "typename class X, y", "subclass Foo,", "classclass X>", "typenameclass Y=", "class\nZ>",
    "template <class T> using A = B; template<typename U>using  C=D;", "template < > using x =",
    "template <a<b>> using q =", "template <typename T, class U = int> struct s;", "",
    'template <typename T>\n# 12 "h.h"\n using W = T;',
])
def test_the_template_names_are_those_the_regex_finds(text):
    # template_names tries its patterns only where their first word is (str.find), as
    # findall's scan would match them
    from porter.emulate import frontend
    assert frontend.template_names(text) == (
        set(frontend._TEMPLATE_PARAM.findall(text)) - {"typename", "class"},
        set(frontend._ALIAS_TEMPLATE.findall(text)))
