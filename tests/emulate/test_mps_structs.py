"""The MPS structured kernels' structs, declared as a Mac's codegen declares them
(porter.emulate.mps_structs), from the checkout's own yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.emulate.mps_structs import header
from porter.source.checkout import NATIVE_YAML

pytest.importorskip("torchgen")

SIGN = "TORCH_IMPL_FUNC(sign_out_mps)(const Tensor& self, const Tensor& output) {}\n"


def test_a_files_torch_impl_func_gets_torchgens_declaration_and_its_meta_header(real_tree_template):
    declared = header(real_tree_template, SIGN)
    assert declared is not None
    assert "#if __has_include(<ATen/ops/sign_meta.h>)\n#include <ATen/ops/sign_meta.h>\n" in declared
    assert ("struct TORCH_API structured_sign_out_mps : public at::meta::structured_sign {\n"
            "void impl(const at::Tensor & self, const at::Tensor & out);\n};") in declared
    # only the structs the text names
    assert "structured_frac_out_mps" not in declared


@pytest.mark.parametrize(("text", "why"), [
    ("static void helper_mps(const Tensor& self);\n", "no kernel of the yaml named"),
    ("TORCH_IMPL_FUNC(tanh_out)(const Tensor& self, const Tensor& out) {}\n",
     "a kernel CPU and CUDA share: the wheel's header declares it"),
    ("TORCH_IMPL_FUNC(porter_no_such_out_mps)(const Tensor& self) {}\n", "no yaml row names it"),
])
def test_nothing_is_declared_for(real_tree_template, text, why):
    assert header(real_tree_template, text) is None, why


def test_the_declarations_follow_the_checkouts_yaml(real_root: Path):
    """A Mac's codegen reads the checkout's yaml: an MPS kernel renamed there is declared under
    its new name, and the old name no more."""
    yaml = real_root / NATIVE_YAML
    text = yaml.read_text()
    assert text.count("MPS: sign_out_mps\n") == 1
    yaml.write_text(text.replace("MPS: sign_out_mps\n", "MPS: sign_out_mps_renamed\n"))
    assert header(real_root, SIGN) is None
    renamed = header(real_root, SIGN.replace("sign_out_mps", "sign_out_mps_renamed"))
    assert renamed is not None and "struct TORCH_API structured_sign_out_mps_renamed :" in renamed


@pytest.mark.slow
def test_a_non_structured_kernel_is_declared_with_the_yamls_signature(real_tree_template):
    declared = header(real_tree_template, "Tensor mish_backward_mps(const Tensor& g, const Tensor& s) {}\n")
    assert declared is not None
    assert ("TORCH_API at::Tensor mish_backward_mps(const at::Tensor & grad_output, "
            "const at::Tensor & self);") in declared
