"""Backward ops (`sigmoid_backward.grad_input`): resolve, port (shared row or in place) and test
through the forward op's samples; `porter test OP --grad` for forward ops."""

from __future__ import annotations

import json
import shutil

import pytest

from porter.source.checkout import NATIVE_YAML, OPERATIONS, Checkout
from porter.source.derivatives import forward_of
from tests.porter_run import changed_files, file_diff, git_init, porter, snapshot, without_cpu_kernel

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

BODIES = {"sigmoid_backward": "grad_output * (1 - output) * output",
          "tanh_backward": "grad_output * (1 - output * output)"}
ACTIVATION = f"{OPERATIONS}/Activation.mm"


# tanh_backward's float32 reference inputs (|grad| near 65504 and beyond) pass only when
# grad * (1 - y*y) is contracted to one fma, which porter cannot show Apple's compiler does: red,
# "not proven" (docs/testing.md). Its samples and the other dtypes pass.
REFERENCE_RED = {"sigmoid_backward": set(), "tanh_backward": {"float32"}}


def _outcomes(result) -> dict[str, str]:
    """dtype -> outcome of upstream's samples, ("reference", dtype) -> of the reference inputs,
    ("shapes", dtype) -> of the layouts."""
    assert result.out.startswith("{"), result.err
    return {(("reference", case["dtype"]) if op["reference"] else
             ("shapes", case["dtype"]) if op["shapes"] else case["dtype"]): case["outcome"]
            for op in json.loads(result.out)["ops"] for case in op["dtypes"]}


def _expected(op: str, dtypes: tuple[str, ...]) -> dict:
    return {d: "pass" for d in dtypes} | {("shapes", d): "pass" for d in dtypes} | {
        ("reference", d): "fail" if d in REFERENCE_RED[op] else "pass" for d in dtypes}


def test_forward_of_reads_the_formula_that_calls_the_backward_op(mini_root):
    checkout = Checkout.at(mini_root)       # no tools/autograd: torchgen's packaged copy
    table = {op: (f.op, f.call_args) if (f := forward_of(checkout, op)) else None
             for op in ("sigmoid_backward", "tanh_backward", "logit_backward", "softplus_backward",
                        "gelu_backward", "threshold_backward", "leaky_relu_backward", "heaviside")}
    assert table == {
        "sigmoid_backward": ("sigmoid", ("grad", "result")),
        "tanh_backward": ("tanh", ("grad", "result")),
        # logit's formula is a conditional: the plain call, not infinitely_differentiable_*
        "logit_backward": ("logit", ("grad", "self", "eps")),
        "softplus_backward": ("softplus", ("grad", "self", "beta", "threshold")),
        # gelu_backward's own entry (its double backward) never counts
        "gelu_backward": ("gelu", ("grad", "self", "approximate")),
        # relu's formula comes first in the file; the op named like the backward op wins
        "threshold_backward": ("threshold", ("grad", "self", "threshold")),
        "leaky_relu_backward": ("leaky_relu", ("grad", "self", "negative_slope", "false")),
        "heaviside": None,
    }


def test_a_checkouts_own_derivatives_yaml_comes_first(mini_root):
    path = mini_root / "tools" / "autograd" / "derivatives.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("- name: mine(Tensor self) -> Tensor\n  self: sigmoid_backward(grad, result)\n")
    found = forward_of(Checkout.at(mini_root), "sigmoid_backward")
    assert (found.op, found.path, found.line) == ("mine", "tools/autograd/derivatives.yaml", 1)


@needs_compiler
@pytest.mark.parametrize("op", sorted(BODIES))
@pytest.mark.slow
def test_shared_row_port_runs_the_emulated_backward_test(real_root, tmp_path, monkeypatch, op):
    git_init(real_root)
    migrated = porter("migrate-from-mpsgraph", op, "--body", BODIES[op], root=real_root)
    assert migrated.code == 0, migrated.err
    yaml = (real_root / NATIVE_YAML).read_text()
    assert f"MPS: {op}_out_mps" not in yaml and f"{op}_out_mps" not in (real_root / ACTIVATION).read_text()
    # the activation family's file, where the MPSGraph implementation was (Activation.mm), with
    # the file's own macro style (one REGISTER_BINARY_OP per dtype) and statement ends
    assert f"REGISTER_DISPATCH({op}_stub, {op}_kernel);" in \
        (real_root / OPERATIONS / "ActivationKernel.mm").read_text()
    assert f"REGISTER_BINARY_OP({op}, half, half);" in \
        (real_root / "aten/src/ATen/native/mps/kernels/ActivationKernel.metal").read_text()
    assert f"{op}_functor" not in (real_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal").read_text()

    result = porter("test", op, "--device", "emulate", "--json", root=real_root)
    assert _outcomes(result) == _expected(op, ("float16", "bfloat16", "float32"))
    assert result.code == (1 if REFERENCE_RED[op] else 0)
    report = json.loads(result.out)["ops"][0]
    assert report["test"] == "backward_output_match"
    assert report["via"].startswith(op.removesuffix("_backward") + " (")
    again = porter("migrate-from-mpsgraph", op, "--body", BODIES[op], root=real_root)
    assert again.code == 0 and "nothing to do" in again.out
    # the body is not applied, and the note names the file that holds the kernel (its family's,
    # not the stub's default BinaryKernel.metal)
    assert f"({op}_functor in aten/src/ATen/native/mps/kernels/ActivationKernel.metal " \
        "is its kernel)" in again.err, again.err


@needs_compiler
@pytest.mark.slow
def test_a_wrong_body_fails_the_emulated_test(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "sigmoid_backward", "--body", "grad_output * output",
                  root=real_root).code == 0
    result = porter("test", "sigmoid_backward", "--device", "emulate", root=real_root)
    assert result.code == 1
    # upstream's samples, the reference inputs and the shapes, 3 dtypes each
    assert "summary: 0 pass, 9 fail" in result.out
    assert "repro: porter test sigmoid_backward --device emulate --dtype float32 --sample 0" in result.out


IN_PLACE_IMPL = """\
TORCH_IMPL_FUNC(tanh_backward_out_mps)(const Tensor& grad_output, const Tensor& output, const Tensor& grad_input) {
  if (this->numel() == 0)
    return;
  lib.exec_binary_kernel(*this, "tanh_backward");
}
"""


@needs_compiler
@pytest.mark.slow
def test_in_place_port_keeps_the_row_and_runs_the_kernel_from_the_impl(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    before = snapshot(real_root)
    migrated = porter("migrate-from-mpsgraph", "tanh_backward", "--in-place", "--body",
                      BODIES["tanh_backward"], "--json", root=real_root)
    assert migrated.code == 0, migrated.err
    assert json.loads(migrated.out)["in_place"]["function"] == "tanh_backward_out_mps"
    # the kernel goes beside its family (the MPSGraph code was Activation.mm's), as a shared
    # row's port does: ActivationKernel.metal, whose library the host now loads
    assert changed_files(before, snapshot(real_root)) == [
        "aten/src/ATen/native/mps/kernels/ActivationKernel.metal", ACTIVATION]
    host = (real_root / ACTIVATION).read_text()
    assert IN_PLACE_IMPL in host
    assert "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();" in host
    assert "#include <ATen/native/mps/ActivationKernel_metallib.h>" in host
    assert "#include <ATen/ops/tanh_backward_native.h>" in host       # the impl still needs it

    result = porter("test", "tanh_backward", "--device", "emulate", "--json", root=real_root)
    assert _outcomes(result) == _expected("tanh_backward", ("float16", "bfloat16", "float32"))
    # the forward op's --grad on the emulator tests the backward kernel its formula calls, with
    # the same verdict
    grad = porter("test", "tanh", "--grad", "--device", "emulate", "--json", root=real_root)
    # the full verdict: its samples, its reference inputs and the shapes (a backward op's
    # kernel takes views as a forward op's does)
    assert grad.code == 1 and [(o["op"], o["reference"], bool(o["shapes"]))
                               for o in json.loads(grad.out)["ops"]] == \
        [("tanh_backward", False, False), ("tanh_backward", True, False), ("tanh_backward", False, True)]
    assert _outcomes(grad) == _outcomes(result)

    again = porter("migrate-from-mpsgraph", "tanh_backward", "--in-place", "--body",
                   BODIES["tanh_backward"], root=real_root)
    assert again.code == 0 and "nothing to do" in again.out
    status = porter("status", "tanh_backward", root=real_root)
    assert status.out.startswith("tanh_backward: native"), status.out

    # what a Mac says of an impl calling a kernel no .metal registers: fail, not skip
    (real_root / ACTIVATION).write_text(host.replace('"tanh_backward"', '"tanh_backward_typo"'))
    broken = porter("test", "tanh_backward", "--device", "emulate", root=real_root)
    assert broken.code == 1
    assert "no kernel 'tanh_backward_typo' registered in ActivationKernel.metal" in broken.out


def test_in_place_without_a_body_writes_nothing(real_root):
    without_cpu_kernel(real_root, "tanh_backward_stub")       # no CPU lambda to translate
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", "tanh_backward", "--in-place", root=real_root)
    assert result.code == 1
    assert "never replaces a working MPSGraph implementation by a skeleton" in result.err
    assert "--body EXPR (in grad_output and output)" in result.err
    assert snapshot(real_root) == before


def test_backward_ops_with_a_str_argument_take_no_body(real_root):
    # backward ops with Scalar and float arguments are ported (tests/test_activation_ports.py);
    # gelu_backward's str picks one of two kernels, each from its CPU branch (tests/test_str_ports.py)
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", "gelu_backward", "--body", "grad_output", root=real_root)
    assert result.code == 2
    assert ("--body does not apply to 'gelu_backward': its kernels are one per value of its str "
            "argument") in result.err, result.err
    assert snapshot(real_root) == before


def test_a_body_in_the_forward_names_is_refused(real_root):
    result = porter("migrate-from-mpsgraph", "sigmoid_backward", "--body", "a * b", "--dry-run",
                    root=real_root)
    assert result.code == 2
    assert "uses a and b, but the functor's arguments are grad_output and output" in result.err


@pytest.mark.slow
def test_backward_op_on_cpu_compares_the_cpu_op_with_itself(real_root, tmp_path):
    junit = tmp_path / "junit.xml"
    result = porter("test", "sigmoid_backward", "--device", "cpu", "--json", "--junit", str(junit),
                    root=real_root)
    assert result.code == 0
    dtypes = ("float16", "bfloat16", "float32", "float64")
    assert _outcomes(result) == {d: "pass" for d in dtypes} | {
        (row, d): "pass" for d in dtypes for row in ("reference", "shapes")}
    assert 'name="backward_output_match_sigmoid_backward_cpu_float32"' in junit.read_text()


def test_grad_on_cpu_runs_the_forward_op_and_its_gradients(real_root):
    result = porter("test", "sigmoid", "--grad", "--device", "cpu", "--json", root=real_root)
    assert result.code == 0
    report = json.loads(result.out)["ops"]
    # the full verdict: the gradients on upstream's samples and on the reference inputs (no
    # shapes row for gradients)
    assert [(r["op"], r["test"], r["reference"]) for r in report] == [
        ("sigmoid", "test_output_grad_match", False), ("sigmoid", "test_output_grad_match", True)]
    assert {c["outcome"] for r in report for c in r["dtypes"]} == {"pass"}


def test_grad_reports_wrong_gradients(real_root):
    """What --grad prints if the device's backward were wrong: a device whose gradients are off."""
    import torch

    from porter.harness.devices import TorchDeviceBackend, register_backend
    from porter.testing.stand_in_devices import unregister_backend

    class WrongGrad(TorchDeviceBackend):
        def run(self, opinfo, sample, dtype):
            out, grads = super().run(opinfo, sample, dtype)
            return out, tuple(g * 2 if isinstance(g, torch.Tensor) else g for g in grads)

    register_backend("wrong-grad", lambda root: WrongGrad("cpu"))
    try:
        result = porter("test", "sigmoid", "--grad", "--device", "wrong-grad", "--dtype", "float32",
                        root=real_root)
    finally:
        unregister_backend("wrong-grad")
    assert result.code == 1
    assert "FAIL float32" in result.out
    assert "repro: porter test sigmoid --device cpu --dtype float32 --grad --sample 0" in result.out


HOST_WITH_HELPERS = """\
namespace at::native {

static MPSGraphTensor* square_of(MPSGraph* g, MPSGraphTensor* t) {
  return [g squareWithTensor:t name:nil];
}

static MPSGraphTensor* shared_one(MPSGraph* g) {
  return [g constantWithScalar:1.0 dataType:MPSDataTypeFloat32];
}

static MPSGraphTensor* one_minus_square(MPSGraph* g, MPSGraphTensor* t) {
  return [g subtractionWithPrimaryTensor:shared_one(g) secondaryTensor:square_of(g, t) name:nil];
}

TORCH_IMPL_FUNC(tanh_backward_out_mps)
(const Tensor& grad_output, const Tensor& output, const Tensor& grad_input) {
  MPSGraphTensor* t = one_minus_square(graph, out);
}

TORCH_IMPL_FUNC(other_out_mps)(const Tensor& self, const Tensor& out) {
  MPSGraphTensor* t = shared_one(graph);
}

} // namespace at::native
"""


def test_in_place_body_drops_the_helpers_only_the_old_body_used():
    from porter.port.edits import in_place
    from porter.source.mpsgraph_scan import source_of

    impl = next(d for d in source_of(HOST_WITH_HELPERS).definitions if d.name == "tanh_backward_out_mps")
    new, removed = in_place.replace_body(HOST_WITH_HELPERS, impl, "tanh_backward", "binary")
    # one_minus_square, then the helper only it used; shared_one has another user
    assert sorted(r.name for r in removed) == ["one_minus_square", "square_of"]
    assert new == """\
namespace at::native {

static MPSGraphTensor* shared_one(MPSGraph* g) {
  return [g constantWithScalar:1.0 dataType:MPSDataTypeFloat32];
}

TORCH_IMPL_FUNC(tanh_backward_out_mps)
(const Tensor& grad_output, const Tensor& output, const Tensor& grad_input) {
  if (this->numel() == 0)
    return;
  lib.exec_binary_kernel(*this, "tanh_backward");
}

TORCH_IMPL_FUNC(other_out_mps)(const Tensor& self, const Tensor& out) {
  MPSGraphTensor* t = shared_one(graph);
}

} // namespace at::native
"""
    assert not in_place.has_library(new)
    with_lib = in_place.add_library(new, "BinaryKernel")
    assert with_lib.startswith("namespace at::native {\n\n#ifndef PYTORCH_JIT_COMPILE_SHADERS\n"
                               "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();\n"
                               "#else\n#include <ATen/native/mps/BinaryKernel_metallib.h>\n#endif\n\n")
    assert in_place.has_library(with_lib)


@pytest.mark.slow
def test_porter_test_runs_where_expecttest_is_not_installed(tmp_path):
    """The CUDA machine the README's --grad command targets has torch but no expecttest."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    blocker = tmp_path / "sitecustomize.py"
    # a None entry makes `import expecttest` fail and find_spec find nothing, as if not installed
    blocker.write_text("import sys\nsys.modules['expecttest'] = None\n")
    env = {"PYTHONPATH": f"{tmp_path}:{repo}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "porter", "test", "sigmoid", "--grad", "--device", "cpu",
                           "--dtype", "float32", "--samples-only"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "summary: 1 pass, 0 fail" in done.stdout


def test_in_place_kernel_goes_where_jit_builds_of_the_host_load_it(mini_root):
    from porter.port.resolve import resolve

    spec = resolve(Checkout.at(mini_root), "tanh_backward", in_place=True)
    # no library loaded yet: the family's file (its MPSGraph code is Activation.mm's)
    assert (spec.in_place.function, spec.metal_path.rsplit("/", 1)[-1]) == (
        "tanh_backward_out_mps", "ActivationKernel.metal")
    host = mini_root / ACTIVATION
    original = host.read_text()
    # a host that already loads another file's library: the kernel goes where JIT builds see it
    host.write_text(original.replace(
        "namespace at::native {\n", "namespace at::native {\n\n#ifndef PYTORCH_JIT_COMPILE_SHADERS\n"
        "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();\n#else\n"
        "#include <ATen/native/mps/BinaryKernel_metallib.h>\n#endif\n", 1))
    spec = resolve(Checkout.at(mini_root), "tanh_backward", in_place=True)
    assert spec.metal_path.rsplit("/", 1)[-1] == "BinaryKernel.metal"
    host.write_text(original.replace(
        "namespace at::native {\n", "namespace at::native {\n\n#ifndef PYTORCH_JIT_COMPILE_SHADERS\n"
        "static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();\n#else\n"
        "#include <ATen/native/mps/ActivationKernel_metallib.h>\n#endif\n", 1))
    # upstream's head of the file: the functor porter writes needs metal's enable_if_t (porter
    # builds the planned file before writing it, so a head without it is refused)
    (mini_root / "aten/src/ATen/native/mps/kernels/ActivationKernel.metal").write_text(
        "#include <c10/metal/indexing.h>\n#include <metal_stdlib>\nusing namespace metal;\n")
    spec = resolve(Checkout.at(mini_root), "tanh_backward", in_place=True)
    assert spec.metal_path.rsplit("/", 1)[-1] == "ActivationKernel.metal"
    # a file without BinaryKernel.metal's local macros registers with the base macro, per dtype,
    # right after the functor (upstream's ActivationKernel.metal style)
    result = porter("migrate-from-mpsgraph", "tanh_backward", "--in-place", "--body",
                    BODIES["tanh_backward"], "--dry-run", root=mini_root)
    assert result.code == 0, result.err
    assert file_diff(result.out, "aten/src/ATen/native/mps/kernels/ActivationKernel.metal").endswith(
        "+};\n+\n+REGISTER_BINARY_OP(tanh_backward, float, float);\n"
        "+REGISTER_BINARY_OP(tanh_backward, half, half);\n"
        "+REGISTER_BINARY_OP(tanh_backward, bfloat, bfloat);\n")
