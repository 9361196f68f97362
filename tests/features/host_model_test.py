"""porter.emulate.host_model: the host statements porter models, as a table. Each planted case
(a statement a Mac runs that changes the result while porter's kernel answers as before) has
its clean twin, which the model accepts. Before the model, every planted case was green."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from porter.emulate import host_model
from porter.source.host_scan import HostFile

HEAD = "static void {name}(TensorIteratorBase& iter{params}) {{\n"
LOGIT = '  lib.exec_unary_kernel(iter, "logit", eps);\n'
ATAN2 = '  lib.exec_binary_kernel(iter, "atan2");\n'
SWAP = ("  auto swapped = TensorIteratorConfig().add_output(iter.output()).add_input(iter.input(1))"
        ".add_input(iter.input(0)).build();\n")
GELU_NAME = '  const char* name = (approximate == GeluType::Tanh) ? "gelu_tanh" : "gelu";\n'
GELU_CALL = "  lib.exec_unary_kernel(iter, name);\n"
THRESHOLD_INT = ("  if (c10::isIntegralType(iter.common_dtype(), /*includeBool=*/true)) {\n"
                 "    ThresholdParams<int64_t> params;\n    params.threshold = threshold.to<int64_t>();\n"
                 "    params.value = value.to<int64_t>();\n"
                 '    lib.exec_binary_kernel_with_params(iter, "threshold", params, "ThresholdParams_long");\n'
                 "    return;\n  }\n")
THRESHOLD_FLOAT = ("  ThresholdParams<float> params;\n  params.threshold = threshold.to<float>();\n"
                   "  params.value = value.to<float>();\n"
                   '  lib.exec_binary_kernel_with_params(iter, "threshold", params, "ThresholdParams_float");\n')
NAN_TO_NUM = ("  float dtype_max = 0, dtype_lowest = 0;\n"
              '  AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, iter.common_dtype(), "nan_to_num_mps", [&]() {\n'
              "    dtype_max = static_cast<float>(std::numeric_limits<scalar_t>::max());\n"
              "    dtype_lowest = static_cast<float>(std::numeric_limits<scalar_t>::lowest());\n  });\n"
              "  NanToNumParams<float> params;\n  params.nan = static_cast<float>(nan.value_or(0.));\n"
              "  params.posinf = posinf.has_value() ? static_cast<float>(posinf.value()) : dtype_max;\n"
              "  params.neginf = neginf.has_value() ? static_cast<float>(neginf.value()) : dtype_lowest;\n"
              '  lib.exec_unary_kernel_with_params(iter, "nan_to_num", params, "NanToNumParams_float");\n')
FMAX = ("  if (isFloatingType(iter.common_dtype())) {\n" '    lib.exec_binary_kernel(iter, "fmax");\n'
        "  } else {\n    at::maximum_out(const_cast<Tensor&>(iter.output()), iter.input(0), iter.input(1));\n  }\n")


def function(body: str, name: str = "f", params: str = "") -> str:
    return HEAD.format(name=name, params=params) + body + "}\n"


def verdict(text: str, several: bool = False):
    """None, or (line, statement, why) of the first statement outside the model."""
    head = text.index("(")
    params = text[head + 1:text.index(")", head)]
    outside = host_model.check_host_function(text, 0, len(text), params, several_kernels=several)
    if outside is None:
        return None
    return text.count("\n", 0, outside.offset) + 1, outside.statement, outside.why


CASES = [
    # (host function, line of the statement outside the model or None, what the message says)
    pytest.param(function(LOGIT, params=", const Scalar& eps"), None, "", id="clean: unary call with its scalar"),
    pytest.param(function(LOGIT + "  iter.output().neg_();\n", params=", const Scalar& eps"), 3,
                 "is no statement porter models", id="planted: output negated after the call"),
    # review 25's H3: a warning writes a message and changes no value
    pytest.param(function('  TORCH_WARN_ONCE("atan2 on MPS: ", iter.common_dtype(), " is slow");\n' + ATAN2),
                 None, "", id="clean: a warning of literals and the dtype"),
    pytest.param(function('  TORCH_WARN("atan2: ", iter.output().neg_());\n' + ATAN2), 2,
                 "is no statement porter models", id="planted: a warning whose message negates the output"),
    pytest.param(function("  TORCH_CHECK(isFloatingType(iter.common_dtype()), \"x\");\n" + LOGIT,
                          params=", const Scalar& eps"), None, "", id="clean: a check that only raises"),
    pytest.param(function("  auto out = iter.output();\n" + LOGIT, params=", const Scalar& eps"), 2,
                 "is no statement porter models", id="planted: work before the call"),
    pytest.param(function(ATAN2), None, "", id="clean: binary call on the stub's iterator"),
    pytest.param(function("  const auto dtype = iter.common_dtype();\n  (void)dtype;\n" + ATAN2), None, "",
                 id="clean: a dtype local cast to void (review 33b H13)"),
    pytest.param(function("  (void)iter.output().neg_();\n" + ATAN2), 2, "is no statement porter models",
                 id="planted: a call cast to void still runs"),
    pytest.param(function("  (void)(iter = other);\n" + ATAN2), 2, "is no statement porter models",
                 id="planted: an assignment cast to void still runs"),
    pytest.param(function(SWAP + ATAN2.replace("(iter,", "(swapped,")), 2, "is no statement porter models",
                 id="planted: operands swapped on a new iterator"),
    pytest.param(function(ATAN2.replace("(iter,", "(other,"), params=""), 2,
                 "runs the kernel on `other`, not on the iterator the stub passes (`iter`)",
                 id="planted: the call on another iterator"),
    pytest.param(function(GELU_NAME + GELU_CALL, params=", GeluType approximate"), None, "",
                 id="clean: gelu's enum pick"),
    pytest.param(function('  if (approximate == GeluType::Tanh) {\n    lib.exec_unary_kernel(iter, "gelu_tanh");\n'
                          '  } else {\n    lib.exec_unary_kernel(iter, "gelu");\n  }\n', params=", GeluType approximate"),
                 None, "", id="clean: gelu's pick as if/else"),
    pytest.param(function('  if (approximate == GeluType::Tanh) {\n    lib.exec_unary_kernel(iter, "gelu_tanh");\n'
                          '    iter.output().neg_();\n  } else {\n    lib.exec_unary_kernel(iter, "gelu");\n  }\n',
                          params=", GeluType approximate"), 2, "is a branch porter does not model",
                 id="planted: work in a branch of the pick"),
    pytest.param(function("  approximate = GeluType::None;\n" + GELU_NAME + GELU_CALL,
                          params=", GeluType approximate"), 2,
                 "reassigns `approximate`, a parameter the stub passes", id="planted: enum reassigned"),
    pytest.param(function("  decimals += 1;\n" + '  lib.exec_unary_kernel(iter, "round_decimals", '
                          "Scalar(decimals), ScalarType::Long);\n", params=", int64_t decimals"), 2,
                 "reassigns `decimals`", id="planted: scalar parameter reassigned"),
    pytest.param(function(THRESHOLD_INT + THRESHOLD_FLOAT, params=", const Scalar& threshold, const Scalar& value"),
                 None, "", id="clean: threshold's integer params branch"),
    pytest.param(function(THRESHOLD_INT.replace("isIntegralType(iter.common_dtype(), /*includeBool=*/true)",
                                                "isFloatingType(iter.common_dtype())") + THRESHOLD_FLOAT,
                          params=", const Scalar& threshold, const Scalar& value"), 2,
                 "is a branch porter does not model", id="planted: the _long call for floats"),
    pytest.param(function(NAN_TO_NUM, params=", std::optional<double> nan, std::optional<double> posinf, "
                                             "std::optional<double> neginf"), None, "",
                 id="clean: nan_to_num's dtype extremes"),
    pytest.param(function(NAN_TO_NUM.replace("  NanToNumParams<float> params;\n",
                                             "  dtype_max = 1;\n  NanToNumParams<float> params;\n"),
                          params=", std::optional<double> nan, std::optional<double> posinf, "
                                 "std::optional<double> neginf"), 7, "is no statement porter models",
                 id="planted: a dtype extreme overwritten"),
    pytest.param(function(NAN_TO_NUM.replace("dtype_lowest = static_cast<float>(std::numeric_limits<scalar_t>::lowest());",
                                             "iter.output().zero_();"),
                          params=", std::optional<double> nan, std::optional<double> posinf, "
                                 "std::optional<double> neginf"), 3, "is a dtype dispatch whose body does more",
                 id="planted: work inside the dtype dispatch"),
    pytest.param(function("  if (iter.numel() == 0) {\n    return;\n  }\n" + ATAN2), None, "",
                 id="clean: empty iterator"),
    pytest.param(function("  if (iter.common_dtype() == kHalf) {\n    iter.output().zero_();\n    return;\n  }\n"
                          + ATAN2), None, "", id="clean: a dtype branch host_dtypes makes not proven"),
    pytest.param(function("  if (negative_slope.to<float>() < 0) return;\n" + ATAN2,
                          params=", const Scalar& negative_slope"), 2, "is a branch porter does not model",
                 id="planted: a bare return on a scalar's value"),
    pytest.param(function(FMAX), None, "", id="clean: upstream fmax's dtype split"),
    pytest.param(function(FMAX.replace('"fmax");\n', '"fmax");\n    iter.output().neg_();\n')), 4,
                 "is no statement porter models", id="planted: work in the kernel's branch"),
    pytest.param(function(ATAN2 + ATAN2), 3, "runs a kernel a second time", id="planted: the call twice"),
    pytest.param(function("  for (int i = 0; i < 2; i++) {\n  " + ATAN2 + "  }\n"), 2,
                 "is no statement porter models", id="planted: the call in a loop"),
    pytest.param(function("  // the kernel\n  /* " + ATAN2.strip() + " */\n" + ATAN2), None, "",
                 id="clean: comments"),
]


@pytest.mark.parametrize(("text", "line", "says"), CASES)
def test_host_statements(text, line, says):
    got = verdict(HostFile(text).live_text)
    if line is None:
        assert got is None, got
    else:
        assert got is not None and got[0] == line and says in got[2], got


IMPLS = [
    pytest.param("  if (this->numel() == 0)\n    return;\n  lib.exec_binary_kernel(*this, \"sigmoid_backward\");\n",
                 None, "", id="clean: porter's in-place body"),
    pytest.param("  lib.exec_binary_kernel(*this, \"sigmoid_backward\");\n  grad_input.neg_();\n", 3,
                 "is no statement porter models", id="planted: output negated after the in-place call"),
    pytest.param("  GeluKernel(kMPS, *this, get_gelutype_enum(approximate));\n", None, "",
                 id="clean: porter's stub impl"),
    pytest.param("  approximate = \"tanh\";\n  GeluKernel(kMPS, *this, get_gelutype_enum(approximate));\n", 2,
                 "is no statement porter models", id="planted: the str argument reassigned in the impl"),
    pytest.param("  using namespace mps;\n  TORCH_CHECK(self.is_mps());\n  GeluKernel(kMPS, *this, 0);\n", None, "",
                 id="clean: using and a check"),
]


@pytest.mark.parametrize(("body", "line", "says"), IMPLS)
def test_impl_statements(body, line, says):
    text = "TORCH_IMPL_FUNC(op_out_mps)(const Tensor& self, const Tensor& grad_input) {\n" + body + "}\n"
    outside = host_model.check_impl(HostFile(text).live_text, 0, len(text))
    if line is None:
        assert outside is None, outside
    else:
        assert outside is not None and text.count("\n", 0, outside.offset) + 1 == line and says in outside.why


def test_a_choice_between_kernels_is_left_to_hostmap():
    """Upstream's pow_tensor_scalar picks among kernels by the scalar's value: hostmap says
    'not proven' for that (several names); the model does not reject its shape."""
    body = ('  if (!exp.isComplex() && exp.to<float>() == 2.0) {\n    return lib.exec_unary_kernel(iter, "sqr");\n  }\n'
            '  lib.exec_unary_kernel(iter, "pow_scalar", exp, ScalarType::Float);\n')
    text = function(body, params=", const Scalar& exp")
    assert verdict(text, several=True) is None
    assert verdict(text)[0] == 2          # one kernel under a condition: not modelled


def test_branch_refusal_is_per_dtype():
    text = function(FMAX)
    assert host_model.branch_refusal(text, 10, "float32") is None
    refused = host_model.branch_refusal(text, 10, "int32")
    assert refused.line == 11 and refused.message.startswith("not proven: for int32 `if (isFloatingType(")


def test_the_host_code_porter_writes_is_in_the_model():
    """Every host template porter renders, as it renders them (templates/*.j2)."""
    from porter.port.templates import render
    rendered = [
        render("unary_host_kernel.mm.j2", function="f", iterator="TensorIteratorBase", kernel="k"),
        render("binary_host_kernel.mm.j2", function="f", iterator="TensorIteratorBase", kernel="k"),
        render("enum_host_kernel.mm.j2", function="f", iterator="TensorIteratorBase", enum="GeluType",
               param="approximate", compare="==", enumerator="GeluType::Tanh", then="gelu_tanh",
               otherwise="gelu", kind="unary"),
        render("alpha_host_kernel.mm.j2", function="f", iterator="TensorIteratorBase", parameters=", const Scalar& a",
               kind="unary", kernel="k", scalar="a", struct=None),
        render("alpha_host_kernel.mm.j2", function="f", iterator="TensorIteratorBase",
               parameters=", const Scalar& a, const Scalar& b", kind="binary", kernel="k", struct="P",
               fields=[("a", "a.to<float>()"), ("b", "b.to<float>()")],
               fields_long=[("a", "a.to<int64_t>()"), ("b", "b.to<int64_t>()")], dtype_limits=True),
    ]
    for text in rendered:
        assert "exec_" in text and verdict(HostFile(text).live_text) is None, text
    body = render("in_place_impl_body.mm.j2", kind="binary", kernel="k")
    impl = "TORCH_IMPL_FUNC(op_out_mps)(const Tensor& a) {\n" + body + "\n}\n"
    assert host_model.check_impl(impl, 0, len(impl)) is None


# Only a tree the developer names: a default path would make the suite depend on whatever lies there.
UPSTREAM = (Path(os.environ["PORTER_UPSTREAM"]) / "aten/src/ATen/native/mps/operations"
            if os.environ.get("PORTER_UPSTREAM") else None)


@pytest.mark.skipif(UPSTREAM is None or not UPSTREAM.is_dir(), reason="no upstream host files (PORTER_UPSTREAM)")
def test_every_upstream_host_function_is_in_the_model():
    """Upstream's real host functions for elementwise ops (read, never copied into the repo)."""
    checked = 0
    for mm in sorted(UPSTREAM.glob("*.mm")):
        host = HostFile(mm.read_text(), str(mm))
        for fn in host.kernel_functions.values():
            if not fn.calls or "exec_" not in host.mask[fn.start:fn.end]:
                continue
            several = len({c.kernel for c in fn.calls}) > 1
            outside = host_model.check_host_function(host.live_text, fn.start, fn.end, fn.params,
                                                     several_kernels=several)
            checked += 1
            assert outside is None, (mm.name, fn.name, outside)
    assert checked >= 40, checked
