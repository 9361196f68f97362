"""porter.port.edits.host: where a new registration line goes in the `.mm` host file."""

from __future__ import annotations

import pytest

from porter.port.edits import host



def _ti(names) -> str:
    return "namespace at::native {\n" + "".join(
        f"REGISTER_UNARY_TI_DISPATCH({n});\n" for n in names) + "} // namespace at::native\n"


@pytest.mark.parametrize(("names", "new", "after"), [
    pytest.param(("neg", "bitwise_not", "sinc"), "sign", ("neg", "bitwise_not", "sinc", "sign"),
                 id="unsorted list: after the last"),
    pytest.param(("cos", "exp", "sin"), "erf", ("cos", "erf", "exp", "sin"),
                 id="alphabetical list: alphabetical place"),
    pytest.param(("cos", "exp", "sin"), "tan", ("cos", "exp", "sin", "tan"),
                 id="alphabetical list: last"),
])
def test_ti_dispatch_source_order(names, new, after):
    out = host.add_ti_dispatch(_ti(names), new)
    assert out == _ti(after)
    assert host.add_ti_dispatch(out, new) == out


def test_register_dispatch_in_an_alphabetical_list():
    def mm(stubs):
        functions = "".join(f"static void {s}_kernel(TensorIteratorBase& iter) {{\n"
                            f"  lib.exec_binary_kernel(iter, \"{s}\");\n}}\n\n" for s in stubs)
        lines = "".join(f"REGISTER_DISPATCH({s}_stub, &{s}_kernel);\n" for s in stubs)
        return "namespace at::native {\n" + functions + lines + "} // namespace at::native\n"
    out = host.add_kernel_function(mm(["atan2", "fmax", "hypot"]), stub="fmin_stub",
                                   function="fmin_kernel", kernel="fmin", iterator="TensorIteratorBase",
                                   kind="binary")
    lines = [line for line in out.splitlines() if line.startswith("REGISTER_DISPATCH")]
    assert lines == [f"REGISTER_DISPATCH({s}_stub, &{s}_kernel);" for s in ("atan2", "fmax", "fmin", "hypot")]


_HEAD = ("#define TORCH_ASSERT_ONLY_METHOD_OPERATORS\n#include <ATen/native/Activation.h>\n"
         "#include <ATen/native/mps/OperationUtils.h>\n\nnamespace at::native {\n")


@pytest.mark.parametrize(("code", "added"), [
    pytest.param("lib.exec_unary_kernel(iter, \"x\");\n", [], id="a plain call: nothing"),
    pytest.param("AT_DISPATCH_FLOATING_TYPES(t, \"x\", [&]() {});\n", ["#include <ATen/Dispatch.h>"],
                 id="a dtype dispatch: ATen/Dispatch.h"),
    pytest.param("auto s = fmt::format(\"{}\", 1);\n", ["#include <fmt/format.h>"],
                 id="fmt: its header, before the namespace"),
])
def test_a_new_family_file_includes_what_its_code_uses(code, added):
    text = _HEAD + code + "} // namespace at::native\n"
    out = host.uses_includes(text)
    assert [line for line in out.splitlines() if line not in text.splitlines()] == added
    assert out.index("namespace at::native {") > max((out.index(a) for a in added), default=0)
    assert host.uses_includes(out) == out


def test_a_new_family_file_keeps_none_of_the_templates_unused_includes():
    template = ("#define TORCH_ASSERT_ONLY_METHOD_OPERATORS\n#include <ATen/native/mps/kernels/UnaryKernel.h>\n"
                "#include <ATen/native/UnaryOps.h>\n#include <ATen/native/mps/OperationUtils.h>\n"
                "#include <fmt/format.h>\n\nnamespace at::native {\n#ifndef PYTORCH_JIT_COMPILE_SHADERS\n"
                "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();\n#else\n"
                "#include <ATen/native/mps/UnaryKernel_metallib.h>\n#endif\n\nREGISTER_UNARY_TI_DISPATCH(exp);\n")
    out = host.new_family_file(template, "UnaryKernel", "ActivationKernel", "Activation.h")
    assert out == ("#define TORCH_ASSERT_ONLY_METHOD_OPERATORS\n#include <ATen/native/Activation.h>\n"
                   "#include <ATen/native/mps/OperationUtils.h>\n\nnamespace at::native {\n"
                   "#ifndef PYTORCH_JIT_COMPILE_SHADERS\n"
                   "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();\n#else\n"
                   "#include <ATen/native/mps/ActivationKernel_metallib.h>\n#endif\n\n"
                   "} // namespace at::native\n")


def _registered(lines) -> str:
    return "namespace at::native {\n" + "".join(lines) + "} // namespace at::native\n"


@pytest.mark.parametrize(("lines", "name", "registration"), [
    pytest.param(("REGISTER_DISPATCH(atan2_stub, &atan2_mps_kernel)\n",
                  "REGISTER_DISPATCH(xlogy_stub, &xlogy_mps_kernel)\n"),
                 "hypot_mps_kernel", "REGISTER_DISPATCH(hypot_stub, &hypot_mps_kernel)",
                 id="BinaryKernel.mm: &, _mps_kernel"),
    pytest.param(("REGISTER_DISPATCH(hardshrink_stub, hardshrink_kernel);\n",
                  "REGISTER_DISPATCH(leaky_relu_stub, leaky_relu_kernel);\n"),
                 "hypot_kernel", "REGISTER_DISPATCH(hypot_stub, hypot_kernel);",
                 id="ActivationKernel.mm: plain names"),
    pytest.param(("REGISTER_DISPATCH(frexp_stub, frexp_kernel);\n",
                  "REGISTER_DISPATCH(polygamma_stub, polygamma_kernel);\n",
                  "REGISTER_DISPATCH(nan_to_num_stub, nan_to_num_kernel_mps);\n"),
                 "hypot_kernel", "REGISTER_DISPATCH(hypot_stub, hypot_kernel);",
                 id="UnaryKernel.mm: most of the file, not its last line"),
    pytest.param((), "hypot_mps_kernel", "REGISTER_DISPATCH(hypot_stub, &hypot_mps_kernel);",
                 id="no registration yet: porter's own"),
])
def test_a_new_host_function_is_named_and_registered_as_the_file_does(lines, name, registration):
    text = _registered(lines)
    assert host.kernel_function_name(text, "hypot") == name
    out = host.add_kernel_function(text, stub="hypot_stub", function=name, kernel="hypot",
                                   iterator="TensorIteratorBase", kind="binary")
    assert registration in out


def test_a_plain_name_the_file_uses_already_keeps_the_mps_suffix():
    text = _registered(("REGISTER_DISPATCH(hardshrink_stub, hardshrink_kernel);\n",)).replace(
        "namespace at::native {\n", "namespace at::native {\nstatic void hypot_kernel() {}\n")
    assert host.kernel_function_name(text, "hypot") == "hypot_mps_kernel"
