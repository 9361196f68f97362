"""The front end's findings kept per functor (porter.emulate.frontend_memo): after any edit,
the kept rows and the walked ones together are what a fresh check of the edited file finds,
line for line; an edit of one functor walks that functor alone."""

from __future__ import annotations

import pytest

from porter.emulate import frontend, frontend_memo
from tests.emulate.functor_text import edit_body

FILE = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

inline float twice_of(float x) {
  return x * 2;
}

struct lam_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    auto f = [](T x) { return x; };
    return f(a) + b;
  }
};

struct seq_functor {
  template <typename T>
  inline T operator()(T a, T b) {
    return ::metal::max(a += T(1), b += T(1));
  }
};

struct prod_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return a * b;
  }
};

struct fma_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return a * b + a;
  }
};

struct mix_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(a + half(1));
  }
};

struct clean_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return a > b ? a : b;
  }
};

REGISTER_BINARY_OP(lam, float, float);
REGISTER_BINARY_OP(mix, bfloat, bfloat);
REGISTER_BINARY_OP(seq, float, float);
REGISTER_BINARY_OP(prod, float, float);
REGISTER_BINARY_OP(fma, half, half);
REGISTER_BINARY_OP(clean, float, float);
"""


EDITS = {
    "a comment in clean": lambda t: edit_body(t, "clean", "return a > b", "return /* x */ a > b"),
    "lam's lambda removed": lambda t: edit_body(
        t, "lam", "    auto f = [](T x) { return x; };\n    return f(a) + b;", "    return a + b;"),
    "a line added in seq, the functors below moved": lambda t: edit_body(
        t, "seq", "    return", "    a = a;\n    return"),
    "a product added to clean": lambda t: edit_body(t, "clean", "a : b", "a * b : b"),
    "the helper outside the functors edited": lambda t: t.replace("x * 2", "x * 3 + x"),
    "a functor renamed": lambda t: t.replace("prod_functor", "product_functor").replace(
        "REGISTER_BINARY_OP(prod,", "REGISTER_BINARY_OP(product,"),
}


@pytest.fixture()
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    frontend_memo._HELD.clear()


def test_the_file_has_a_finding_of_every_kind_the_memo_keeps(fixture_root, own_cache):
    primary = frontend.views(FILE, "k.metal", fixture_root, use_cache=False)[0]
    assert any("lambda" in e for e in primary.errors)
    assert primary.unsequenced and primary.mul_adds and primary.lone_products
    assert primary.fma_free and primary.mixed_halves


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_files_kept_and_walked_findings_are_a_fresh_checks(fixture_root, own_cache,
                                                                    edit):
    """Before/after: the edited file checked with the kept rows of the original's functors
    equals its check with nothing kept (every version: errors, unsequenced calls, narrow
    multiply-adds, lone products, fma-free functors, mixed halves, with their lines)."""
    frontend.views(FILE, "k.metal", fixture_root)              # the functors' rows kept
    edited = EDITS[edit](FILE)
    assert edited != FILE
    kept = frontend.views(edited, "k.metal", fixture_root)
    fresh = frontend.views(edited, "k.metal", fixture_root, use_cache=False)
    assert kept == fresh


def test_an_edit_of_one_functor_walks_that_functor_alone(fixture_root, own_cache, monkeypatch):
    frontend.views(FILE, "k.metal", fixture_root)
    walked = []
    flush = frontend_memo.DeclarationMemo.flush

    def recorded(self):
        walked.extend(self._fresh)          # the functors walked anew, before they are kept
        return flush(self)

    monkeypatch.setattr(frontend_memo.DeclarationMemo, "flush", recorded)
    frontend.views(EDITS["a comment in clean"](FILE), "k.metal", fixture_root)
    assert set(walked) == {"clean"}


_HEAD = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
"""

def _b_called_by_a(macros: str, call: str) -> tuple[str, tuple[str, str]]:
    """A file whose a_functor calls b_functor through `call` (made by `macros`), and the edit
    of b's result type (bfloat -> float) that makes a's `bfloat r = ...` an error."""
    return (_HEAD + macros + f"""
struct b_functor {{
  inline bfloat operator()(const float a) {{
    return bfloat(a);
  }}
}};

struct a_functor {{
  inline float operator()(const float a, const float b) {{
    bfloat r = {call}(a);
    return float(r) + b;
  }}
}};

REGISTER_BINARY_OP(a, float, float);
REGISTER_UNARY_OP(b, float, float);
""", ("inline bfloat operator()(const float a) {\n    return bfloat(a);",
      "inline float operator()(const float a) {\n    return a;"))


# (file, its edit): a functor's findings that depend on text its key does not hold (review 45:
# each was kept stale). The memo walks every functor of such a file.
UNKEYABLE = {
    "a macro defined inside another functor": (_HEAD + """
struct b_functor {
#define BODY return a + b;
  template <typename T>
  inline T operator()(const T a, const T b) {
    return a - b;
  }
};

struct a_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    BODY
  }
};

REGISTER_BINARY_OP(a, float, float);
REGISTER_BINARY_OP(b, float, float);
""", ("#define BODY return a + b;", "#define BODY goto end; end: return a + b;")),
    "a functor named by pasting tokens": _b_called_by_a("""#define CALL(N) N##_functor()
""", "CALL(b)"),
    "a struct closed by an indented brace": (_HEAD + """
struct a_functor {
  inline float operator()(const float a, const float b) { return a + b; }
  };
inline bfloat helper(float x) {
  return bfloat(x);
};

struct b_functor {
  inline float operator()(const float a, const float b) {
    bfloat r = helper(a);
    return float(r) + b;
  }
};

REGISTER_BINARY_OP(a, float, float);
REGISTER_BINARY_OP(b, float, float);
""", ("inline bfloat helper(float x) {\n  return bfloat(x);",
      "inline float helper(float x) {\n  return x;")),
    "a builtin the rule names at its first call": (_HEAD + """
struct a_functor {
  inline int operator()(const int a, const int b) {
    return __builtin_popcount(a) + b;
  }
};

struct b_functor {
  inline int operator()(const int a, const int b) {
    return __builtin_popcount(b) + a;
  }
};

REGISTER_BINARY_OP(a, int, int);
REGISTER_BINARY_OP(b, int, int);
""", ("return __builtin_popcount(a) + b;", "return a + b;")),
    "a functor named by a pasting macro's arguments": _b_called_by_a("""#define CAT(x, y) x##y
""", "CAT(b, _functor)()"),
    "code after a struct on its closing line": (_HEAD + """
struct a_functor {
  inline float operator()(const float a, const float b) { return a + b; }
}; inline bfloat helper(float x) { return bfloat(x); }

struct b_functor {
  inline float operator()(const float a, const float b) {
    bfloat r = helper(a);
    return float(r) + b;
  }
};

REGISTER_BINARY_OP(a, float, float);
REGISTER_BINARY_OP(b, float, float);
""", ("inline bfloat helper(float x) { return bfloat(x); }",
      "inline float helper(float x) { return x; }")),
    "a builtin behind a macro": (_HEAD + """#define POP __builtin_popcount

struct a_functor {
  inline int operator()(const int a, const int b) {
    return POP(a) + b;
  }
};

struct b_functor {
  inline int operator()(const int a, const int b) {
    return POP(b) + a;
  }
};

REGISTER_BINARY_OP(a, int, int);
REGISTER_BINARY_OP(b, int, int);
""", ("return POP(a) + b;", "return a + b;")),
    # review 47's F3: what a functor reaches without spelling another's name
    "a functor named by a macro that calls a pasting one": _b_called_by_a("""#define CAT(x, y) x##y
#define FN(x) CAT(x, _functor)
""", "FN(b)()"),
    "a functor named by a macro's text": (_HEAD + """#define B_OF(x) b_functor()(x)

struct b_functor {
  inline auto operator()(const float a) {
    return bfloat(a);
  }
};

struct a_functor {
  inline float operator()(const float a, const float b) {
    bfloat r = bfloat(0.0f);
    r += B_OF(a);
    return float(r) + b;
  }
};

REGISTER_BINARY_OP(a, float, float);
REGISTER_UNARY_OP(b, float, bfloat);
""", ("inline auto operator()(const float a) {\n    return bfloat(a);",
      "inline auto operator()(const float a) {\n    return a;")),
    "a friend function another functor defines": (_HEAD + """
struct tag {};
inline auto conv(tag);

struct b_functor {
  friend inline auto conv(tag) {
    return bfloat(1.0f);
  }
  inline float operator()(const float a, const float b) {
    return a + b;
  }
};

struct a_functor {
  inline float operator()(const float a, const float b) {
    bfloat r = bfloat(0.0f);
    r += conv(tag{});
    return float(r) + b;
  }
};

REGISTER_BINARY_OP(a, float, float);
REGISTER_BINARY_OP(b, float, float);
""", ("return bfloat(1.0f);", "return 1.0f;")),
}


@pytest.mark.parametrize("case", list(UNKEYABLE))
def test_a_file_whose_functors_depend_on_text_outside_their_keys_is_walked_whole(
        fixture_root, own_cache, case):
    text, (old, new) = UNKEYABLE[case]
    edited = text.replace(old, new)
    assert edited != text
    frontend.views(text, "k.metal", fixture_root)
    kept = frontend.views(edited, "k.metal", fixture_root)
    assert kept == frontend.views(edited, "k.metal", fixture_root, use_cache=False)
