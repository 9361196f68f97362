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
