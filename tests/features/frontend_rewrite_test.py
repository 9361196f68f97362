"""porter.emulate.frontend.rewrite: Metal's spellings that C++ has no syntax for, in clang's
terms, line for line (before -> after tables; the preprocessed text keeps g++'s line markers)."""

from __future__ import annotations

import pytest

from porter.emulate.frontend import rewrite

MARK = '# 1 "k.metal"\n'

_cases = (
    pytest.param("float4 v = float4(a.xy, 0, 1);", "float4 v = __metal_vec_ctor<float4>(a.xy, 0, 1);",
                 id="a vector constructor"),
    pytest.param("auto v = metal::half2(h);", "auto v = metal::__metal_vec_ctor<half2>(h);",
                 id="a qualified vector constructor"),
    pytest.param("float2 v = static_cast<float2>(h2);", "float2 v = __metal_convert<float2>(h2);",
                 id="static_cast to a value type"),
    pytest.param("device T* p = static_cast<device T*>(q);",
                 "device T* p = static_cast<device T*>(q);", id="static_cast to a pointer stays"),
    pytest.param("template <typename T> T f(T a) { return T(a, a); }",
                 "template <typename T> T f(T a) { return __metal_vec_ctor<T>(a, a); }",
                 id="a template type parameter's functional cast"),
    pytest.param("template <typename T> void g(T (*op)(T, T));",
                 "template <typename T> void g(T (*op)(T, T));",
                 id="a function-pointer declarator is no call"),
    pytest.param("template <typename U> using ret = vec2type_t<U>;\n"
                 "template <typename T> ret<T> f(T a) { return ret<T>(a, a); }",
                 "template <typename U> using ret = vec2type_t<U>;\n"
                 "template <typename T> ret<T> f(T a) { return __metal_vec_ctor<ret<T>>(a, a); }",
                 id="an alias template's functional cast"),
    pytest.param("half h = 1.5h + 2h;", "half h = 1.5f16 + 2f16;", id="half literals"),
    pytest.param("float y = 2.0 * x + 1e-3;", "float y = 2.0f * x + 1e-3f;",
                 id="unsuffixed floating literals are float"),
    pytest.param("float g = x.h;", "float g = x.h;", id="a member named h is no literal"),
    pytest.param("{ __attribute__((address_space(3))) float sh[4]; }",
                 "{ static __attribute__((address_space(3))) float sh[4]; }",
                 id="a threadgroup array in a function is given static storage"),
    pytest.param("{ __attribute__((address_space(2))) float* p = q; }",
                 "{ __attribute__((address_space(2))) float* p = q; }",
                 id="a pointer to constant memory stays automatic"),
    pytest.param("[[kernel]] void k();", '__attribute__((annotate("metal_kernel"))) void k();',
                 id="[[kernel]]"),
    pytest.param('template [[host_name("abs_float")]] kernel void k<float>();',
                 "template  kernel void k<float>();", id="host_name is recorded and removed"),
)


@pytest.mark.parametrize(("before", "after"), _cases)
def test_rewrite(before, after):
    out = rewrite(MARK + before)
    assert out.source == MARK + after
    assert len(out.lines) == 1 + after.count("\n") + 1 and out.lines[1] == ("k.metal", 1)


def test_host_names_and_types_are_recorded_with_their_line():
    text = MARK + "\n".join([
        'template [[host_name("add_" "float")]] kernel void k<float>();',
        "double d = 0;",
        'const char* s = "double";',
        "unsigned long long n;",
        "float m = std::max(a, b);",
    ])
    out = rewrite(text)
    assert out.names == [("add_float", "k.metal", 1)]
    assert out.types == [("k.metal", 2, "double"), ("k.metal", 4, "long long"),
                         ("k.metal", 5, "std")]
