"""Functor bodies translated from the CPU kernels with their context (issue 22): the kernel
function's locals, lambdas in every cpu/*.cpp that registers the stub, one lambda per dtype
case, and the CPU's NaN behaviour kept through min/max. On the real-size tree, whose cpu/*.cpp
carry lambdas in the shapes upstream writes them (fixtures/mini-pytorch, in our own words)."""

from __future__ import annotations

import re
import shutil

import pytest

from porter.port import body
from porter.source import checkout as co
from porter.source.c10_metal import available_functions
from porter.source.cpu_kernel import scalar_lambda

UNARY_METAL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")


def _translated(root, stub: str, scalars=(), scalar="float") -> body.Translation:
    checkout = co.Checkout.at(root)
    lam = scalar_lambda(checkout, stub)
    assert lam is not None, f"no lambda for {stub}"
    return body.translate_lambda(lam, scalars, scalar, lambda: available_functions(checkout))


def test_kernel_constants_are_declared_in_the_functor_body(real_tree_template):
    # hardsigmoid's `const scalar_t three(3.0f)` and friends, which its lambda captures
    out = _translated(real_tree_template, "hardsigmoid_stub", scalar="T")
    assert out.statements.splitlines()[:3] == ["const float zero = 0.0f;", "const float three = 3.0f;",
                                               "const float six = 6.0f;"], out


def test_a_scalar_conversion_becomes_the_schema_scalar(real_tree_template):
    # hardshrink's `auto lambd_val = lambd.to<scalar_t>()`: the params field `lambd` itself
    out = _translated(real_tree_template, "hardshrink_stub", ("lambd",))
    assert out == ("return (self_val >= -lambd && self_val <= lambd) ? float(0) : self_val;", "")


def test_optional_conversions_become_the_schema_scalars_by_position(real_tree_template):
    # nan_to_num's kernel names them nan, pos_inf, neg_inf (value_t locals: the dtype's real part
    # type); the schema nan, posinf, neginf. The helper it calls lives in the kernel's own file:
    # its real overload is translated, the complex and vector ones are not the functor's
    checkout = co.Checkout.at(real_tree_template)
    library = _library(real_tree_template)
    lam = scalar_lambda(checkout, "nan_to_num_stub")
    out = body.translate_lambda(lam, ("nan", "posinf", "neginf"), "float", library)
    assert out.statements == "return c10::metal::_nan_to_num_replace(a, nan, posinf, neginf);", out
    helper = library.added["_nan_to_num_replace"].text
    assert helper.count("inline T _nan_to_num_replace(") == 1
    assert "Vectorized" not in helper and "complex" not in helper


def test_lambdas_are_read_from_the_file_that_registers_the_stub(real_tree_template):
    # sigmoid_backward lives in cpu/BinaryOpsKernel.cpp, mish in cpu/Activation.cpp
    checkout = co.Checkout.at(real_tree_template)
    assert scalar_lambda(checkout, "sigmoid_backward_stub").path.endswith("cpu/BinaryOpsKernel.cpp")
    assert scalar_lambda(checkout, "mish_stub").path.endswith("cpu/Activation.cpp")


def test_a_complex_case_is_kept_apart_from_the_real_dtypes_lambda(real_tree_template):
    # sigmoid_backward's complex case conjugates; the floating functor must not take it
    lam = scalar_lambda(co.Checkout.at(real_tree_template), "sigmoid_backward_stub")
    assert "conj" not in lam.body and "conj" in lam.complex_case.body


class _Lambda:
    """A CPU lambda as porter.source.cpu_kernel reads it, for the pure cases below."""

    def __init__(self, body_text, params=("x",), context=(), kernel_params=(), locals_=()):
        from porter.source.cpu_kernel import Local
        self.body, self.params, self.path, self.line = body_text, params, "cpu/K.cpp", 7
        self.context = tuple(Local(*c) for c in context)
        self.kernel_params, self.locals = kernel_params, locals_


C10 = lambda: frozenset({"min", "max", "log1p"})     # noqa: E731


def test_a_local_computed_from_scalars_is_declared_from_them():
    lam = _Lambda("return x <= 0 ? x * negcoef : x * poscoef;",
                  context=[("auto", "negcoef", "alpha.to<scalar_t>() * scale.to<scalar_t>()"),
                           ("auto", "poscoef", "scale.to<scalar_t>()")],
                  kernel_params=("alpha", "scale"), locals_=("negcoef", "poscoef"))
    out = body.translate_lambda(lam, ("alpha", "scale"), "float", C10)
    assert out.statements == "auto negcoef = alpha * scale;\nreturn x <= 0 ? x * negcoef : x * scale;"


def test_wrong_on_purpose_a_local_out_of_the_lambdas_scope_is_refused_not_dropped():
    # `lo` is declared in another branch of the kernel: a functor without it would not build on
    # a Mac, and one that guessed it would be wrong; porter names it instead
    lam = _Lambda("return x < lo ? lo : x;", locals_=("lo",))
    out = body.translate_lambda(lam, (), "float", C10)
    assert out == (None, "the CPU lambda at cpu/K.cpp:7 uses `lo`, a local of its kernel function "
                         "that is not in the lambda's scope")


def test_wrong_on_purpose_a_local_read_through_another_local_is_kept():
    # `six` is read only through `third`: dropping it would leave `third` undefined
    lam = _Lambda("return x * third;", context=[("const scalar_t", "six", "6"),
                                                 ("const scalar_t", "third", "six / 18")])
    out = body.translate_lambda(lam, (), "T", C10)
    assert out.statements == "const T six = 6;\nconst T third = six / 18;\nreturn x * third;"


@needs_gxx
@pytest.mark.slow
def test_hardsigmoid_keeps_nan_where_metals_bare_min_loses_it(real_root):
    # hardsigmoid off MPS (as before upstream's port): porter's port from the CPU lambda passes
    # the reference inputs (NaN among them); the same port with Metal's bare min/max (what
    # pytorch#183939 fixed upstream) fails them, at NaN
    from porter.harness.measure_port import measure, plan_in_memory, verify
    yaml = real_root / co.NATIVE_YAML
    yaml.write_text(yaml.read_text().replace("    CPU, CUDA, MPS: hardsigmoid_out\n",
                                             "    CPU, CUDA: hardsigmoid_out\n"))
    checkout = co.Checkout.at(real_root)
    verdict = verify(checkout, "hardsigmoid", "no-mps", reference_inputs=True)
    assert (verdict.status, verdict.detail) == ("verified", "3/3 dtypes"), verdict
    changes = plan_in_memory(checkout, "hardsigmoid", "no-mps").changes
    # the port goes where hardsigmoid's family lives (ActivationKernel.metal on this tree)
    metal = next(c.path for c in changes.pending if "hardsigmoid_functor" in c.new)
    ported = changes.current(metal, checkout.read)
    assert "c10::metal::min(c10::metal::max(" in ported
    changes.set(metal, checkout.read(metal),
                ported.replace("c10::metal::min(c10::metal::max(", "::metal::min(::metal::max("))
    bare = measure(checkout, "hardsigmoid", changes, reference_inputs=True)
    assert bare.status == "fails" and "(reference inputs)" in bare.detail and "nan" in bare.detail, bare


def _library(root):
    from porter.port.helpers import Library
    checkout = co.Checkout.at(root)
    return Library(checkout, lambda: available_functions(checkout))


def test_a_math_h_helper_becomes_a_metal_function_with_the_helpers_it_calls(real_tree_template):
    # calc_ndtri (native/Math.h) calls polevl: both translated, polevl first, in the functor's
    # float (T), with no double, std:: or static left (Metal has none of them)
    library = _library(real_tree_template)
    assert library.helper("calc_ndtri") == "c10::metal::calc_ndtri"
    assert list(library.added) == ["polevl", "calc_ndtri"]
    text = "".join(t.text for t in library.added.values())
    for word in ("double", "std::", "static", "C10_HOST_DEVICE"):
        assert word not in text, word
    assert "inline T calc_ndtri(T y0) {" in text and "::precise::log(y)" in text


@pytest.mark.slow
def test_the_port_defines_the_helper_in_special_math_h(real_root):
    from tests.porter_run import porter
    result = porter("new-op", "special_ndtri", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert "+++ b/c10/metal/special_math.h" in result.out
    assert "+inline T calc_ndtri(T y0) {" in result.out
    assert "c10::metal::calc_ndtri(float(x))" in result.out


def test_wrong_on_purpose_a_helper_metal_cannot_run_is_refused_by_name(real_root):
    # a helper that calls itself (Metal has no recursion) and one on std::complex: each refused
    # with its name, never written half-translated
    math_h = real_root / "aten/src/ATen/native/Math.h"
    math_h.write_text(math_h.read_text() + """
template <typename T>
inline T halving_walk(T x) {
  return x < T(1) ? x : halving_walk(x / T(2));
}

template <typename T>
inline T through_complex(T x) {
  return std::abs(std::complex<T>(x, x));
}
""")
    library = _library(real_root)
    assert library.helper("halving_walk") is None
    assert library.refused["halving_walk"] == "`halving_walk` calls itself (Metal has no recursion)"
    assert library.helper("through_complex") is None
    assert library.refused["through_complex"] == ("`through_complex` uses std::complex, which Metal has "
                                                  "no counterpart of")
    lam = _Lambda("return halving_walk(x);")
    out = body.translate_lambda(lam, (), "float", library)
    assert out.statements is None and "halving_walk" in out.reason and "calls itself" in out.reason


def test_a_lambda_reading_self_twice_becomes_a_one_argument_body(real_tree_template):
    # threshold's meta function adds `self` as both inputs: its lambda's `other` is x
    checkout = co.Checkout.at(real_tree_template)
    lam = scalar_lambda(checkout, "threshold_stub", "threshold")
    assert lam.params == ("x",) and lam.body.strip() == "return x <= threshold ? value : x;"
    out = body.translate_lambda(lam, ("threshold", "value"), "float", lambda: available_functions(checkout))
    assert out == ("return x <= threshold ? value : x;", "")


def test_wrong_on_purpose_another_op_of_the_stub_keeps_both_tensors(real_tree_template):
    # threshold_backward runs the same stub on (self, grad): folding `other` into x there would
    # return the input where the gradient belongs
    lam = scalar_lambda(co.Checkout.at(real_tree_template), "threshold_stub", "threshold_backward")
    assert lam.params == ("x", "other") and "value : other" in lam.body


@needs_gxx
@pytest.mark.slow
def test_logical_not_is_one_truth_template_complex_included(real_root):
    # logical_not's lambda `static_cast<scalar_t>(!a)` (self_t in, the output's dtype out): one
    # template reading x as a truth value, complex64 registered -> bool, and the emulated test
    # passes every dtype the MPS test sends with reference inputs; the same port reading only the
    # real part of a complex value (wrong on purpose: 0+1j is true on the CPU) fails complex64
    from porter.harness.measure_port import measure, plan_in_memory, verify
    checkout = co.Checkout.at(real_root)
    verdict = verify(checkout, "logical_not", "mpsgraph", reference_inputs=True)
    assert (verdict.status, verdict.detail) == ("verified", "10/10 dtypes"), verdict
    changes = plan_in_memory(checkout, "logical_not", "mpsgraph").changes
    ported = changes.current(UNARY_METAL, checkout.read)
    assert "return !c10::metal::cast_to<bool>(x);" in ported
    assert "REGISTER_UNARY_OP(logical_not, DTYPE##2, bool);" in ported
    real_part_only = ported.replace(
        "    return !c10::metal::cast_to<bool>(x);\n  }\n",
        "    return !c10::metal::cast_to<bool>(x);\n  }\n"
        "  template <typename T, enable_if_t<is_complex_v<T>, bool> = true>\n"
        "  inline bool operator()(const T x) {\n    return x.x == 0;\n  }\n", 1)
    real_part_only = real_part_only.replace("  template <typename T>\n  inline bool operator()(const T x) {\n"
                                            "    return !c10::metal::cast_to<bool>(x);",
                                            "  template <typename T, enable_if_t<!is_complex_v<T>, bool> = true>\n"
                                            "  inline bool operator()(const T x) {\n"
                                            "    return !c10::metal::cast_to<bool>(x);", 1)
    assert real_part_only.count("operator()") == ported.count("operator()") + 1
    changes.set(UNARY_METAL, checkout.read(UNARY_METAL), real_part_only)
    wrong = measure(checkout, "logical_not", changes, reference_inputs=True)
    assert wrong.status == "fails" and wrong.failed_dtype == "complex64", wrong


def test_the_cpus_complex_case_gives_the_complex_overload(real_root):
    # conj_physical: the real dtypes' case copies (direct_copy_kernel: the identity), the complex
    # case conjugates (conj_impl -> c10::metal::conj, which has a float2 overload)
    from tests.porter_run import porter
    result = porter("migrate-from-mpsgraph", "conj_physical", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert "+    return T(c10::metal::conj(x));" in result.out
    assert "+    return x;" in result.out
    assert "REGISTER_UNARY_OP(conj_physical, DTYPE##2, DTYPE##2);" in result.out


def test_wrong_on_purpose_complex_arithmetic_is_not_taken_for_float2_arithmetic(real_tree_template):
    # sigmoid_backward's complex case multiplies complex values: float2's `*` is elementwise, so
    # a verbatim translation would be wrong; porter refuses it rather than write it
    checkout = co.Checkout.at(real_tree_template)
    from porter.source.c10_metal import complex_functions
    lam = scalar_lambda(checkout, "sigmoid_backward_stub")
    out = body.translate_complex(lam.complex_case, lambda: complex_functions(checkout))
    assert out.statements is None and "more than complex routines of its argument" in out.reason, out


def test_lambdas_chosen_by_a_scalar_become_one_body_branching_on_it(real_tree_template):
    # logit's kernel runs one lambda when eps < 0 (no clamp) and another, clamping to [eps,
    # 1 - eps], otherwise: one functor body, each lambda's statements under the kernel's own
    # condition; the lambda writes to its by-value argument, so the functor writes to a copy;
    # the kernel's `const scalar_t hi = scalar_t(1) - eps` is rounded to the dtype, as both CPU
    # loops capture it (half's 1 - 1e-6 is 1, and logit(1) is inf there: review 40)
    checkout = co.Checkout.at(real_tree_template)
    lam = scalar_lambda(checkout, "logit_stub", "logit")
    assert lam.alternatives == 1 and lam.choice.condition == "eps < scalar_t(0)"
    out = body.translate_lambda(lam, ("eps",), "float", lambda: available_functions(checkout))
    assert out.statements.splitlines() == [
        "float x_ = x;",
        "if (eps < float(0)) {",
        "return x_ == float(1) ? INFINITY",
        "                                : ::precise::log(x_ / (float(1) - x_));",
        "} else {",
        "const float hi = T(float(1) - eps);",
        "x_ = x_ < eps ? eps : (x_ > hi ? hi : x_);",
        "        return x_ == float(1) ? INFINITY",
        "                                : ::precise::log(x_ / (float(1) - x_));",
        "}"], out


@pytest.mark.parametrize("condition", ["iter.is_contiguous()", "at::isReducedFloatingType(iter.dtype())",
                                       "contiguous"])
def test_wrong_on_purpose_lambdas_chosen_by_the_tensors_are_not_a_scalar_branch(real_root, condition):
    # the same two lambdas chosen by the iterator (directly, or through a local read from it)
    # are not a choice the functor can make from its scalars: still refused
    cpu = real_root / "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp"
    text = cpu.read_text()
    old = "    if (eps < scalar_t(0)) {\n"
    assert text.count(old) == 1
    local = "    const bool contiguous = iter.is_contiguous();\n" if condition == "contiguous" else ""
    cpu.write_text(text.replace(old, f"{local}    if ({condition}) {{\n"))
    lam = scalar_lambda(co.Checkout.at(real_root), "logit_stub", "logit")
    assert lam.alternatives == 1 and lam.choice is None


@needs_gxx
@pytest.mark.slow
def test_wrong_on_purpose_logit_with_its_branch_inverted_fails_the_reference_inputs(real_root):
    # the port of logit from its two CPU lambdas passes the reference inputs; the same functor
    # with the scalar's branch inverted (the clamp taken when eps < 0) fails them
    from porter.harness.measure_port import measure, plan_in_memory, verify
    checkout = co.Checkout.at(real_root)
    verdict = verify(checkout, "logit", "mpsgraph", reference_inputs=True, dtypes=["float32"])
    assert (verdict.status, verdict.detail) == ("verified", "1/1 dtypes"), verdict
    changes = plan_in_memory(checkout, "logit", "mpsgraph").changes
    ported = changes.current(UNARY_METAL, checkout.read)
    branch = "if (float(eps) < float(0)) {"
    assert ported.count(branch) == 1
    changes.set(UNARY_METAL, checkout.read(UNARY_METAL),
                ported.replace(branch, "if (!(float(eps) < float(0))) {"))
    inverted = measure(checkout, "logit", changes, reference_inputs=True, dtypes=["float32"])
    assert inverted.status == "fails" and inverted.failed_dtype == "float32", inverted


def test_a_complex_helper_becomes_an_elementwise_float2_expression(real_tree_template):
    # sgn_impl (cpu/zmath.h): 0 for 0, else z / zabs(z), whose complex overload is a complex
    # holding |z|: each part over |z| (the CPU's each part times 1 / |z| is 0 on an Apple GPU,
    # which flushes that subnormal, past |z| = 8.5e37)
    from porter.port import complex_cpu_helpers
    checkout = co.Checkout.at(real_tree_template)
    out = complex_cpu_helpers.expression(checkout, "sgn_impl", available_functions(checkout))
    assert out == ("::metal::all({0} == T(0, 0)) ? T(0, 0) : "
                   "{0} / c10::metal::hypot(::metal::abs({0}.x), ::metal::abs({0}.y))")


@pytest.mark.parametrize(("old", "new", "says"), [
    ("return z / zabs(z);", "return z * z;", "returns `z * z`, which is not elementwise on float2"),
    ("return z / zabs(z);", "return z / (z + c10::complex<T>(1, 0));", "not elementwise on float2"),
    ("return c10::complex<float>(std::abs(z));", "return c10::complex<float>(std::abs(z), 1);",
     "`zabs` (aten/src/ATen/native/cpu/zmath.h) is not a complex holding a real magnitude"),
])
def test_wrong_on_purpose_complex_arithmetic_in_a_helper_is_refused(real_root, old, new, says):
    # a complex product, a complex sum, or a divisor with an imaginary part is not what float2's
    # elementwise operators compute: refused, naming it
    from porter.port import complex_cpu_helpers
    zmath = real_root / "aten/src/ATen/native/cpu/zmath.h"
    text = zmath.read_text()
    assert text.count(old) == 1
    zmath.write_text(text.replace(old, new))
    checkout = co.Checkout.at(real_root)
    with pytest.raises(complex_cpu_helpers.Refused, match=re.escape(says)):
        complex_cpu_helpers.expression(checkout, "sgn_impl", available_functions(checkout))


@needs_gxx
@pytest.mark.parametrize(("wrong", "replacement", "why"), [
    ("::metal::all(x == T(0, 0))\n            ? T(0, 0)\n            : ", "",
     "the zero check dropped: 0+0i gives 0 / 0, nan, where the CPU gives 0"),
    ("::metal::abs(x.x), ::metal::abs(x.y)", "x.x, x.y",
     "the parts' signs kept: c10::metal::hypot(-3, -4) is -5"),
    (" / c10::metal::hypot(::metal::abs(x.x), ::metal::abs(x.y))", "",
     "the division by the magnitude dropped: z itself, not z / |z|"),
    ("x / c10::metal::hypot(::metal::abs(x.x), ::metal::abs(x.y))",
     "x * (1 / c10::metal::hypot(::metal::abs(x.x), ::metal::abs(x.y)))",
     "the CPU's each part times 1 / |z|: at 8.5e37-8.5e37i the GPU flushes 1 / |z| (8.3e-39) "
     "to 0 and answers 0 where the CPU keeps it and answers 0.707-0.707i"),
], ids=["zero-gives-nan", "signed-parts", "no-division", "scaled-by-a-flushed-reciprocal"])
@pytest.mark.slow
def test_wrong_on_purpose_sgn_without_what_the_cpu_formula_says_is_red(real_root, wrong, replacement, why):
    # after sign's port, sgn's complex64 kernel from sgn_impl passes the samples and reference
    # inputs; without its zero test, with the parts' signs in the magnitude, without the
    # division, or with the CPU's multiplication by 1 / |z| (0 on a flushing GPU), it fails
    from porter.harness.measure_port import measure, plan_in_memory
    from tests.porter_run import git_init, porter
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "sign", "--no-test", root=real_root).code == 0
    checkout = co.Checkout.at(real_root)
    changes = plan_in_memory(checkout, "sgn", "mpsgraph").changes
    ported = changes.current(UNARY_METAL, checkout.read)
    good = measure(checkout, "sgn", changes, reference_inputs=True, dtypes=["complex64"])
    assert (good.status, good.detail) == ("verified", "1/1 dtypes"), good
    # the formatter may break the expression anywhere between its tokens
    pattern = r"\s*".join(re.escape(token) for token in re.findall(r"\S", wrong))
    edited, found = re.subn(pattern, lambda _: replacement, ported)
    assert found == 1, why
    changes.set(UNARY_METAL, checkout.read(UNARY_METAL), edited)
    bad = measure(checkout, "sgn", changes, reference_inputs=True, dtypes=["complex64"])
    assert bad.status == "fails" and bad.failed_dtype == "complex64", (why, bad)
    # upstream's samples have no 0+0i nor |z| past 8.5e37: those two are red on the reference inputs
    row = "complex64 (reference inputs):" if "0+0i" in why or "8.5e37" in why else "complex64:"
    assert bad.detail.startswith(row), (why, bad)
