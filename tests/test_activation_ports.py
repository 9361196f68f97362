"""The activation family as upstream ports it (issue 22, items 4 and 5), on the real-size tree:
backward ops with Scalar arguments, one kernel for a stub several ops share, a `bool` the kernel
never sees, a backward op with no out= overload, and the family's own files
(ActivationKernel.metal/.mm) with their conventions. Each port is built and its emulated test run
on the forward op's samples and reference inputs; each has a case that is wrong on purpose."""

from __future__ import annotations

import subprocess

import json
import re
import shutil

import pytest

from porter.source.checkout import NATIVE_YAML, OPERATIONS
from tests.porter_run import added_lines, changed_files, file_diff, git_init, porter, snapshot

needs_compiler = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

KERNELS = "aten/src/ATen/native/mps/kernels"
ACT_METAL = f"{KERNELS}/ActivationKernel.metal"
ACT_HOST = f"{OPERATIONS}/ActivationKernel.mm"
ACT_HEADER = f"{KERNELS}/ActivationKernel.h"
FLOATS = ("float16", "bfloat16", "float32")


def _outcomes(root, op: str, reference: bool = True) -> dict:
    """(reference?, dtype) -> outcome of `porter test OP --device emulate`; the shapes row (its
    reference flag is false too) keyed ("shapes", dtype), apart from the samples'."""
    result = porter("test", op, "--device", "emulate", "--json",
                    *(["--reference-inputs"] if reference else []), root=root)
    assert result.out.startswith("{"), result.err
    return {("shapes" if o["shapes"] else o["reference"], c["dtype"]): c
            for o in json.loads(result.out)["ops"] for c in o["dtypes"]}


def _all(outcomes: dict, outcome: str, reference: bool) -> bool:
    return {c["outcome"] for (ref, _), c in outcomes.items() if ref == reference} == {outcome}


@needs_compiler
@pytest.mark.slow
def test_softplus_backward_gets_a_params_struct_kernel_in_the_activation_file(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "softplus_backward", root=real_root)
    assert result.code == 0, result.err
    metal = (real_root / ACT_METAL).read_text()
    # two Scalars travel in one struct, registered as a binary ALPHA kernel; the functor keeps the
    # schema's names and is translated from the CPU lambda (no --body)
    assert "REGISTER_BINARY_ALPHA_OP(softplus_backward, half, SoftplusBackwardParams_float, half);" \
        in " ".join(metal.split()).replace("( ", "(")
    assert "const T grad_output" in metal and "SoftplusBackwardParams<float> params" in metal
    assert "struct SoftplusBackwardParams" in (real_root / ACT_HEADER).read_text()
    host = (real_root / ACT_HOST).read_text()
    assert "REGISTER_DISPATCH(softplus_backward_stub, softplus_backward_kernel);" in host
    assert "softplus_backward_out_mps" not in (real_root / NATIVE_YAML).read_text()
    outcomes = _outcomes(real_root, "softplus_backward")
    assert _all(outcomes, "pass", False) and _all(outcomes, "pass", True), outcomes
    # wrong on purpose: the kernel ignores beta (the samples' beta is 2): every dtype fails
    (real_root / ACT_METAL).write_text(metal.replace("const float beta = params.beta;",
                                                     "const float beta = 1;"))
    wrong = _outcomes(real_root, "softplus_backward", reference=False)
    assert _all(wrong, "fail", False), wrong


@needs_compiler
@pytest.mark.slow
def test_one_shrink_backward_kernel_serves_both_shrink_backward_ops(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    first = porter("new-op", "hardshrink_backward", root=real_root)
    assert first.code == 0, first.err
    metal, host = (real_root / ACT_METAL).read_text(), (real_root / ACT_HOST).read_text()
    # named after the stub both ops run, as upstream's shrink_backward
    assert "struct shrink_backward_functor" in metal and "hardshrink_backward_functor" not in metal
    assert re.findall(r"REGISTER_BINARY_ALPHA_OP\(shrink_backward, (\w+), \1, \1\);", metal) == \
        ["float", "half", "bfloat"]
    assert host.count("REGISTER_DISPATCH(shrink_backward_stub") == 1
    assert 'lib.exec_binary_kernel(iter, "shrink_backward", lambd);' in host
    second = porter("new-op", "softshrink_backward", root=real_root)
    assert second.code == 0 and "nothing to do" in second.out, second.out + second.err
    for op in ("hardshrink_backward", "softshrink_backward"):
        outcomes = _outcomes(real_root, op)
        assert _all(outcomes, "pass", False), (op, outcomes)
        # the CPU is not one function of its inputs here: its vectorized loop (a 128x128 tensor)
        # zeroes the gradient of a nan input, its scalar loop (a 9-element one) passes it, as
        # the kernel (and upstream's) does; which loop a Mac's reference runs for an element
        # depends on where it sits, so the kernel passes with either, and the row says so
        for dtype in FLOATS:
            case = outcomes[(True, dtype)]
            assert case["outcome"] == "pass", (op, case)
            assert any("answers two ways" in note and ", nan) (0 vectorized," in note
                       for note in case["notes"]), (op, case)
    # wrong on purpose: a nan where the input is nan or infinite, neither of the CPU's two
    # answers (0 vectorized, the gradient one at a time): the samples (all finite) pass, the
    # reference inputs' large nan sample fails
    assert ": float(grad_out));" in metal
    (real_root / ACT_METAL).write_text(
        metal.replace(": float(grad_out));", ": float(grad_out) + (float(self) - float(self)));"))
    nan = _outcomes(real_root, "hardshrink_backward")
    assert _all(nan, "pass", False), nan
    assert {c["outcome"] for (ref, _), c in nan.items() if ref is True} == {"fail"}, nan
    # among them the 128x128 tensor, whose nan `self` the two-way rule looks at: red there too
    large = porter("test", "hardshrink_backward", "--device", "emulate", "--dtype", "float32",
                   "--reference-inputs", "--sample", "16", root=real_root)
    assert large.code == 1 and "sample 16 (float32): input float32 (128, 128)" in large.out, large.out
    assert "Mismatched elements: 5462 / 16384" in large.out, large.out
    # wrong on purpose: the gradient and the input swapped in the functor
    (real_root / ACT_METAL).write_text(metal.replace(": float(grad_out));", ": float(self));"))
    wrong = _outcomes(real_root, "softshrink_backward", reference=False)
    assert _all(wrong, "fail", False), wrong


@needs_compiler
@pytest.mark.slow
def test_a_bool_the_stub_never_takes_is_left_to_the_meta_function(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    result = porter("new-op", "leaky_relu_backward", root=real_root)
    assert result.code == 0, result.err
    assert ("leaky_relu_backward's `bool self_is_result` is not passed to the kernel: "
            "leaky_relu_backward_stub's kernel takes no bool") in result.err      # a note
    assert "aten/src/ATen/native/Activation.cpp:" in result.err     # where the meta checks it
    host = (real_root / ACT_HOST).read_text()
    assert "leaky_relu_backward_kernel(TensorIteratorBase& iter, const Scalar& negative_slope)" in host
    outcomes = _outcomes(real_root, "leaky_relu_backward")
    assert _all(outcomes, "pass", False) and _all(outcomes, "pass", True), outcomes


def test_a_stub_that_takes_the_bool_is_refused(real_root):
    # wrong on purpose: were the bool the kernel's, leaving it out would be a wrong port
    header = real_root / "aten/src/ATen/native/Activation.h"
    text = header.read_text()
    m = re.search(r"using leaky_relu_backward_fn = void \(\*\)\(TensorIteratorBase&, const c10::Scalar&", text)
    assert m, "the wheel's Activation.h changed its leaky_relu_backward_fn"
    header.write_text(text[:m.end()] + ", bool" + text[m.end():])
    before = snapshot(real_root)
    result = porter("new-op", "leaky_relu_backward", root=real_root)
    assert result.code == 2
    assert "leaky_relu_backward_stub hands its kernel the bool self_is_result" in result.err
    assert snapshot(real_root) == before


@needs_compiler
@pytest.mark.slow(seconds=100)
def test_a_backward_op_without_an_out_overload_joins_its_function(real_root, tmp_path, monkeypatch):
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "mish_backward", root=real_root)
    assert result.code == 0, result.err
    yaml = (real_root / NATIVE_YAML).read_text()
    assert "    CPU, CUDA, MPS: mish_backward\n" in yaml and "mish_backward_mps" not in yaml
    assert "Tensor mish_backward_mps(" not in (real_root / OPERATIONS / "Activation.mm").read_text()
    assert "REGISTER_DISPATCH(mish_backward_stub, mish_backward_kernel);" in \
        (real_root / ACT_HOST).read_text()
    outcomes = _outcomes(real_root, "mish_backward")
    assert _all(outcomes, "pass", False) and _all(outcomes, "pass", True), outcomes


def test_a_function_that_runs_no_stub_is_not_joined(real_root):
    # wrong on purpose: a function that computes the gradient itself has no stub for MPS to run
    cpp = real_root / "aten/src/ATen/native/Activation.cpp"
    text = cpp.read_text()
    assert "  mish_backward_stub(iter.device_type(), iter);\n" in text
    cpp.write_text(text.replace("  mish_backward_stub(iter.device_type(), iter);\n", ""))
    result = porter("migrate-from-mpsgraph", "mish_backward", "--dry-run", root=real_root)
    assert result.code == 2
    assert "'mish_backward' is not an elementwise TensorIterator op" in result.err


def test_activations_go_to_the_family_file_in_its_style(real_root):
    # sigmoid_backward's stub is BinaryOps.h's, but its MPSGraph implementation was Activation.mm's
    result = porter("migrate-from-mpsgraph", "sigmoid_backward", "--body",
                    "grad_output * (1 - output) * output", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert file_diff(result.out, f"{KERNELS}/BinaryKernel.metal") == ""
    assert added_lines(file_diff(result.out, ACT_METAL)).endswith(
        "+};\n+\n+REGISTER_BINARY_OP(sigmoid_backward, float, float);\n"
        "+REGISTER_BINARY_OP(sigmoid_backward, half, half);\n"
        "+REGISTER_BINARY_OP(sigmoid_backward, bfloat, bfloat);\n")
    assert "+#include <ATen/native/BinaryOps.h>" in file_diff(result.out, ACT_HOST)
    # a file that guards its bfloat registrations gets the new ones inside its own guard
    metal = real_root / ACT_METAL
    text = metal.read_text()
    guarded = text.replace("REGISTER_UNARY_ALPHA_OP(hardshrink, bfloat, bfloat, bfloat);\n",
                           "#if __METAL_VERSION__ >= 310\n"
                           "REGISTER_UNARY_ALPHA_OP(hardshrink, bfloat, bfloat, bfloat);\n#endif\n")
    assert guarded != text
    metal.write_text(guarded)
    again = porter("migrate-from-mpsgraph", "sigmoid_backward", "--body",
                   "grad_output * (1 - output) * output", "--dry-run", root=real_root)
    assert again.code == 0, again.err
    assert added_lines(file_diff(again.out, ACT_METAL)).endswith(
        "+REGISTER_BINARY_OP(sigmoid_backward, half, half);\n+#if __METAL_VERSION__ >= 310\n"
        "+REGISTER_BINARY_OP(sigmoid_backward, bfloat, bfloat);\n+#endif\n")


def test_a_new_activation_host_file_includes_only_what_it_uses(real_root):
    (real_root / ACT_HOST).unlink()
    result = porter("migrate-from-mpsgraph", "softplus_backward", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    created = added_lines(file_diff(result.out, ACT_HOST))
    includes = re.findall(r"^\+#include <([^>]+)>", created, re.M)
    assert includes == ["ATen/native/Activation.h", "ATen/native/mps/OperationUtils.h",
                        "ATen/native/mps/kernels/ActivationKernel.h",
                        "ATen/native/mps/ActivationKernel_metallib.h"], created


@pytest.mark.parametrize("op, says", [
    # (a str picking the kernel, gelu's, is ported: tests/test_str_ports.py)
    # a reduction: the elementwise part and the host's reduction, written by hand
    ("mse_loss", "this op is an elementwise part (a binary functor of the inputs, one element at a "
                 "time) followed by a reduction on the host for reduction=Mean/Sum"),
    # along a dim: the two halves as a binary iterator
    ("glu", "write glu_out_mps by hand: narrow self into its two halves along dim, build a binary "
            "TensorIterator over them"),
])
def test_refusals_say_what_is_missing_and_what_to_write_by_hand(real_root, op, says):
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", op, "--dry-run", root=real_root)
    assert result.code == 2, result.out
    assert says in result.err, result.err
    assert "Traceback" not in result.err and snapshot(real_root) == before


@needs_compiler
@pytest.mark.slow(seconds=110)
def test_threshold_backward_runs_the_stub_it_shares_with_threshold(real_root, tmp_path, monkeypatch):
    # threshold_backward_out runs threshold_stub with (threshold, 0) on an iterator reading self,
    # then grad: one threshold kernel, its params struct carrying the stub's two scalars, its
    # operands in the iterator's order, the value the function passes (0) filled by the host
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "threshold_backward", root=real_root)
    assert result.code == 0, result.err
    metal = " ".join((real_root / ACT_METAL).read_text().split())
    assert "struct threshold_functor" in metal and "threshold_backward_functor" not in metal
    assert "const T self, const T grad_output, const ThresholdParams<float> params" in metal
    assert "float(self) <= threshold ? value : float(grad_output)" in metal
    host = (real_root / ACT_HOST).read_text()
    assert "threshold_kernel(TensorIteratorBase& iter, const Scalar& threshold, const Scalar& value)" in host
    assert "REGISTER_DISPATCH(threshold_stub, threshold_kernel);" in host
    assert "    CPU, CUDA, MPS: threshold_backward_out\n" in (real_root / NATIVE_YAML).read_text()
    outcomes = _outcomes(real_root, "threshold_backward")
    assert _all(outcomes, "pass", False) and _all(outcomes, "pass", True), outcomes
    # wrong on purpose: the gradient where the input belongs (the schema's order, not the
    # iterator's): every dtype fails
    text = (real_root / ACT_METAL).read_text()
    assert text.count("float(self) <= threshold") == 1
    (real_root / ACT_METAL).write_text(text.replace("float(self) <= threshold", "float(grad_output) <= threshold"))
    assert _all(_outcomes(real_root, "threshold_backward", reference=False), "fail", False)
    (real_root / ACT_METAL).write_text(text)
    # wrong on purpose: a checkout whose function passes 1, not 0, is what the host fills and
    # the emulator runs; the installed CPU passes 0, so every dtype fails
    cpp = real_root / "aten/src/ATen/native/Activation.cpp"
    source = cpp.read_text()
    assert source.count("threshold_stub(device_type(), *this, threshold, 0);") == 1
    cpp.write_text(source.replace("*this, threshold, 0);", "*this, threshold, 1);"))
    assert _all(_outcomes(real_root, "threshold_backward", reference=False), "fail", False)


@needs_compiler
@pytest.mark.slow
def test_threshold_after_threshold_backward_finds_the_shared_kernel_written_for_both(
        real_root, tmp_path, monkeypatch):
    # threshold_stub serves threshold (every dtype, bool and integers included) and
    # threshold_backward (floats): the first port writes the one kernel for the dtypes of both,
    # each integer compared in its own type (the CPU's integer lambda, not its reduced-float
    # one); the second then only joins the shared function, and both are green
    from porter.source.native_definitions import ops_calling
    assert ops_calling(real_root, "threshold_stub") == {"threshold", "threshold_backward"}
    git_init(real_root)
    first = porter("migrate-from-mpsgraph", "threshold_backward", root=real_root)
    assert first.code == 0, first.err
    metal = " ".join((real_root / ACT_METAL).read_text().split())
    assert "REGISTER_BINARY_ALPHA_OP(threshold, long, ThresholdParams_long, long);" in metal
    assert "return static_cast<T>(self <= threshold ? value : grad_output);" in metal
    subprocess.run(["git", "commit", "-qam", "threshold_backward"], cwd=real_root, check=True)
    second = porter("migrate-from-mpsgraph", "threshold", root=real_root)
    assert second.code == 0, second.err + second.out
    changed = subprocess.run(["git", "diff", "--name-only"], cwd=real_root, capture_output=True,
                             text=True, check=True).stdout.split()
    assert ACT_METAL not in changed and ACT_HOST not in changed, changed
    outcomes = _outcomes(real_root, "threshold")
    assert len(outcomes) == 27 and _all(outcomes, "pass", False) and _all(outcomes, "pass", True)


@needs_compiler
@pytest.mark.slow
def test_a_params_struct_the_family_header_already_declares_is_reused(real_root, tmp_path, monkeypatch):
    # upstream keeps ActivationKernel.metal's params structs in kernels/Activation.h (ELUParams,
    # ThresholdParams), which the kernel file includes: a port reuses the struct there, adding
    # only the float instantiation the registrations name, rather than a second header that
    # redefines it (which stopped every kernel of the file compiling: exit 1)
    header = real_root / KERNELS / "Activation.h"
    header.write_text("#pragma once\n\n// the activation kernels' parameters\ntemplate <typename T>\n"
                      "struct ThresholdParams {\n  T threshold;\n  T value;\n};\n")
    metal = real_root / ACT_METAL
    metal.write_text("#include <ATen/native/mps/kernels/Activation.h>\n" + metal.read_text())
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "threshold_backward", root=real_root)
    assert result.code == 0, result.err
    assert not (real_root / ACT_HEADER).exists()
    assert header.read_text().endswith(
        "  T value;\n};\nusing ThresholdParams_float = ThresholdParams<float>;\n"
        "using ThresholdParams_long = ThresholdParams<long>;\n"), header.read_text()
    assert "#include <ATen/native/mps/kernels/Activation.h>" in (real_root / ACT_HOST).read_text()
    outcomes = _outcomes(real_root, "threshold_backward")
    assert _all(outcomes, "pass", False) and _all(outcomes, "pass", True), outcomes


_TWO_BRANCH_THRESHOLD = """void threshold_kernel(TensorIteratorBase& iter, const Scalar& threshold_scalar, const Scalar& value_scalar) {
  if (at::isReducedFloatingType(iter.dtype())) {
    AT_DISPATCH_REDUCED_FLOATING_TYPES(iter.dtype(), "threshold_cpu", [&]() {
      float threshold = threshold_scalar.to<float>();
      scalar_t value = value_scalar.to<scalar_t>();
      cpu_kernel(iter, [&](scalar_t a, scalar_t passthrough) -> scalar_t {
        return float(a) <= threshold ? value : passthrough;
      });
    });
  } else {
    AT_DISPATCH_ALL_TYPES(iter.dtype(), "threshold_cpu", [&] {
      scalar_t threshold = threshold_scalar.to<scalar_t>();
      scalar_t value = value_scalar.to<scalar_t>();
      cpu_kernel(iter, [&](scalar_t a, scalar_t passthrough) -> scalar_t {
        return a <= threshold ? value : passthrough;
      });
    });
  }
}
"""


@needs_compiler
@pytest.mark.slow
def test_threshold_before_threshold_backward_folds_its_integer_lambda_too(real_root, tmp_path, monkeypatch):
    # threshold's iterator reads self twice: its CPU lambdas `(x, other)` become one-tensor
    # functors, the integer case's (`x <= threshold ? value : other`) as well as the
    # reduced-float one's. Before: the integer overload kept `other`, the planned file did not
    # build, and porting threshold first was refused (exit 2)
    # upstream's shape of the kernel: half/bfloat16 compare through a float, the other dtypes in
    # their own type, each branch with its own two-argument lambda
    cpu = real_root / "aten/src/ATen/native/cpu/Activation.cpp"
    text = cpu.read_text()
    start = text.index("void threshold_kernel(")
    end = text.index("\n}\n", start) + 3
    cpu.write_text(text[:start] + _TWO_BRANCH_THRESHOLD + text[end:])
    git_init(real_root)
    first = porter("migrate-from-mpsgraph", "threshold", root=real_root)
    assert first.code == 0, first.err
    metal = " ".join((real_root / ACT_METAL).read_text().split())
    assert "return static_cast<T>(x <= threshold ? value : x);" in metal
    assert "passthrough" not in metal
    # the integer overload is the CPU's integer branch's (`x <= threshold`), the floating one the
    # reduced-float branch's (`float(x) <= threshold`)
    assert "return static_cast<T>(float(x) <= threshold ? value : float(x));" in metal
    outcomes = _outcomes(real_root, "threshold")
    assert len(outcomes) == 27 and _all(outcomes, "pass", False) and _all(outcomes, "pass", True)
    # wrong on purpose: an integer threshold written `<` for `<=` fails the integer dtypes only
    text = (real_root / ACT_METAL).read_text()
    (real_root / ACT_METAL).write_text(text.replace("x <= threshold ? value : x", "x < threshold ? value : x"))
    wrong = _outcomes(real_root, "threshold")
    assert {d for (ref, d), c in wrong.items() if c["outcome"] == "fail"} >= {"int32", "int64", "uint8"}
    assert all(c["outcome"] == "pass" for (_, d), c in wrong.items() if d in FLOATS)
    # wrong on purpose: the integers compared through a float, as the reduced-float branch
    # does: 2^24 + 1 reads as 2^24 (the reference inputs' 2^24 scalars), int32 and int64 fail
    (real_root / ACT_METAL).write_text(text.replace("return static_cast<T>(x <= threshold ? value : x);",
                                                    "return static_cast<T>(float(x) <= threshold ? value : x);"))
    outcomes = _outcomes(real_root, "threshold")
    failed = {dtype for (ref, dtype), c in outcomes.items() if c["outcome"] == "fail"}
    assert failed == {"int32", "int64"}, outcomes


@needs_compiler
@pytest.mark.slow
def test_an_integer_scalar_taken_through_a_float_by_the_host_fails_the_reference_inputs(
        real_root, tmp_path, monkeypatch):
    # the host fills threshold's integer params with the scalars' to<int64_t>(); one that takes
    # `value` through a float answers 2^24 for 16777217 on a Mac. Scalars at 2^24 alone never
    # showed it (2^24 is a float); at 2^24 + 1 the int32/int64 reference rows are red
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "threshold", "--no-test", root=real_root).code == 0
    assert _all(_outcomes(real_root, "threshold"), "pass", True)
    host = real_root / ACT_HOST
    text = host.read_text()
    assert text.count("params.value = value.to<int64_t>();") == 1
    host.write_text(text.replace("params.value = value.to<int64_t>();", "params.value = value.to<float>();"))
    wrong = _outcomes(real_root, "threshold")
    assert {d for (ref, d), c in wrong.items() if ref and c["outcome"] == "fail"} == {"int32", "int64"}, wrong
    assert _all(wrong, "pass", False)          # upstream's samples never meet such a scalar


@needs_compiler
@pytest.mark.slow
def test_emulate_check_holds_the_ported_backward_kernels_to_their_ops(real_root, tmp_path, monkeypatch):
    """`porter emulate check` compares every registered kernel with torch on CPU: the backward
    kernels porter writes (params structs, operands in their iterator's order) included. Before:
    a params struct it had no values for (SoftplusBackwardParams) ended it in an internal error,
    and gelu's and the backward kernels were "no-reference"."""
    git_init(real_root)
    ported = ("gelu", "gelu_backward", "softplus_backward", "leaky_relu_backward",
              "threshold_backward", "sigmoid_backward", "mish")
    for op in ported:
        first = porter("migrate-from-mpsgraph", op, root=real_root)
        result = first if first.code == 0 else porter("new-op", op, "--no-test", root=real_root)
        assert result.code == 0, (op, first.err, result.err)
        subprocess.run(["git", "add", "-A"], cwd=real_root, check=True)
        subprocess.run(["git", "commit", "-qm", op], cwd=real_root, check=True)
    checked = porter("emulate", "check", "--json", root=real_root)
    report = json.loads(checked.out)
    status = {(r["kernel"], r["in_type"]): r["status"] for r in report["results"]}
    for kernel in ("gelu", "gelu_tanh", "gelu_backward", "gelu_tanh_backward", "softplus_backward",
                   "leaky_relu_backward", "threshold", "sigmoid_backward", "mish"):
        assert status[kernel, "float"] == "matched", (kernel, status.get((kernel, "float")))
    assert checked.code == 0 and report["ok"], checked.out[:2000]
    # wrong on purpose: leaky_relu_backward reading its operands the other way round
    metal = real_root / ACT_METAL
    text = metal.read_text()
    right = "const T self, const T grad_output, const T negative_slope"
    assert text.count(right) == 1
    metal.write_text(text.replace(right, "const T grad_output, const T self, const T negative_slope"))
    checked = porter("emulate", "check", "--json", root=real_root)
    status = {(r["kernel"], r["in_type"]): r["status"] for r in json.loads(checked.out)["results"]}
    assert checked.code == 1 and status["leaky_relu_backward", "float"] == "mismatched", status


def _listed(dry_run_out: str) -> set[str]:
    """The files a dry run says it would create or update."""
    return {m[1] for m in re.finditer(r"^ +(?:create|update|delete) +(\S+)$", dry_run_out, re.M)}


@pytest.mark.parametrize("command, op, extra", [
    ("new-op", "hardsigmoid", ()),                          # one tensor, no scalar
    ("migrate-from-mpsgraph", "mish_backward", ()),         # two tensors, no scalar
    ("migrate-from-mpsgraph", "gelu", ()),                  # a str picking one of two kernels
    ("migrate-from-mpsgraph", "threshold", ("--body", "x <= threshold ? value : x")),  # scalars
])
def test_every_port_into_the_activation_family_creates_its_missing_host_file(real_root, command, op, extra):
    (real_root / ACT_HOST).unlink()
    dry = porter(command, op, *extra, "--dry-run", root=real_root)
    assert dry.code == 0, dry.err
    assert f"   create  {ACT_HOST}" in dry.out, dry.out
    created = added_lines(file_diff(dry.out, ACT_HOST))
    # upstream's shape: the head, the library handle, the registration, the namespace closed
    for line in ("+#define TORCH_ASSERT_ONLY_METHOD_OPERATORS", "+#include <ATen/native/Activation.h>",
                 "+static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();",
                 "+#include <ATen/native/mps/ActivationKernel_metallib.h>", "+REGISTER_DISPATCH(",
                 "+} // namespace at::native"):
        assert line in created, created
    # a port edits exactly the files its dry run lists
    before = snapshot(real_root)
    applied = porter(command, op, *extra, root=real_root)
    assert applied.code == 0, applied.err
    assert set(changed_files(before, snapshot(real_root))) == _listed(dry.out)


def test_a_build_file_that_lists_the_hosts_by_name_gets_the_new_one_beside_them(real_root):
    (real_root / ACT_HOST).unlink()
    listing = real_root / "build_variables.bzl"
    listing.write_text('mps_sources = [\n    "aten/src/ATen/native/mps/operations/BinaryKernel.mm",\n'
                       '    "aten/src/ATen/native/mps/operations/UnaryKernel.mm",\n'
                       '    "aten/src/ATen/native/mps/kernels/UnaryKernel.metal",\n]\n')
    dry = porter("new-op", "hardsigmoid", "--dry-run", root=real_root)
    assert dry.code == 0, dry.err
    assert "   update  build_variables.bzl" in dry.out, dry.out
    assert added_lines(file_diff(dry.out, "build_variables.bzl")) == \
        '+    "aten/src/ATen/native/mps/operations/ActivationKernel.mm",\n'
    assert "listed in build_variables.bzl beside its siblings" in dry.err
    # a build that globs the folder is left as it is
    listing.write_text('mps_sources = glob(["aten/src/ATen/native/mps/operations/*.mm"])\n')
    dry = porter("new-op", "hardsigmoid", "--dry-run", root=real_root)
    assert dry.code == 0 and "build_variables.bzl" not in dry.out, dry.out


@needs_compiler
@pytest.mark.slow
def test_a_created_activation_host_file_builds_and_runs_its_kernel(real_root, tmp_path, monkeypatch):
    (real_root / ACT_HOST).unlink()
    git_init(real_root)
    result = porter("new-op", "hardsigmoid", root=real_root)
    assert result.code == 0, result.err
    outcomes = _outcomes(real_root, "hardsigmoid")
    assert _all(outcomes, "pass", False) and _all(outcomes, "pass", True), outcomes
    # wrong on purpose: the created file registers no kernel for the stub: red
    host = (real_root / ACT_HOST).read_text()
    (real_root / ACT_HOST).write_text(re.sub(r"REGISTER_DISPATCH\(hardsigmoid_stub[^\n]*\n", "", host))
    wrong = _outcomes(real_root, "hardsigmoid", reference=False)
    assert wrong and not {c["outcome"] for c in wrong.values()} & {"pass"}, wrong
