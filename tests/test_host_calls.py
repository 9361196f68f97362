"""A hand-edited host `.mm` is tested as a Mac would run it (issue: false greens from host
edits). porter writes the host function of a port; a contributor may then edit it. Each case
here is an edit after which a Mac fails (or porter cannot tell), on the real-size tree with
logit, nan_to_num and threshold_backward migrated: `porter test --device emulate` must not
pass it. Before the fix each printed every dtype pass, exit 0."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from porter.source.checkout import OPERATIONS  # noqa: E402
from tests.porter_run import by_dtype, porter  # noqa: E402

if shutil.which(os.environ.get("CXX", "g++")) is None:
    pytest.skip("no C++ compiler for the Metal emulator", allow_module_level=True)

UNARY = f"{OPERATIONS}/UnaryKernel.mm"
ACTIVATION = f"{OPERATIONS}/ActivationKernel.mm"
LOGIT_CALL = '  lib.exec_unary_kernel(iter, "logit", eps);\n'


@pytest.fixture(scope="module")
def ported(real_tree_template: Path, tmp_path_factory) -> Path:
    """The real-size tree with three ports as porter writes them, shared by this module's tests:
    each edit is undone by `edited`."""
    root = Path(shutil.copytree(real_tree_template, tmp_path_factory.mktemp("host-calls") / "pytorch"))
    for op in ("logit", "nan_to_num", "threshold_backward"):
        assert porter("migrate-from-mpsgraph", op, root=root).code == 0, op
    return root


@contextlib.contextmanager
def edited(root: Path, rel: str, old: str, new: str):
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    try:
        yield
    finally:
        path.write_text(text)


def outcomes(root: Path, op: str, *dtypes: str) -> tuple[int, dict[str, dict]]:
    args = [a for d in dtypes for a in ("--dtype", d)]
    res = porter("test", op, "--device", "emulate", "--json", *args, root=root)
    data = json.loads(res.out)
    return res.code, by_dtype(data)


@pytest.mark.slow
def test_the_ports_as_written_pass(ported):
    """The baseline each edit below breaks."""
    for op, dtypes in (("logit", ("float16", "float32")), ("nan_to_num", ("bfloat16", "float32")),
                       ("threshold_backward", ("float32",))):
        code, by = outcomes(ported, op, *dtypes)
        assert code == 0 and {d["outcome"] for d in by.values()} == {"pass"}, (op, by)


@pytest.mark.parametrize(("new", "says"), [
    pytest.param("  // " + LOGIT_CALL.lstrip(), "is in a comment or in code the preprocessor drops",
                 id="line-comment"),
    pytest.param("  /* " + LOGIT_CALL.strip() + " */\n", "is in a comment or in code the preprocessor drops",
                 id="block-comment"),
    pytest.param("#if 0\n" + LOGIT_CALL + "#endif\n", "is in a comment or in code the preprocessor drops",
                 id="if-0"),
    pytest.param("  return;\n" + LOGIT_CALL, "follows the unconditional return on line 43", id="after-return"),
])
@pytest.mark.slow
def test_a_host_function_whose_call_never_runs_fails(ported, new, says):
    """A Mac runs no kernel: the output is never written. porter read the call from the raw
    text and ran the kernel: every dtype passed."""
    with edited(ported, UNARY, LOGIT_CALL, new):
        code, by = outcomes(ported, "logit", "float16", "float32")
        check = porter("check", "--json", "--select", "PORTER024", root=ported)
    assert code == 1
    for d in by.values():
        assert d["outcome"] == "fail", d
        assert d["message"].startswith("logit_kernel (operations/UnaryKernel.mm:42) runs no Metal "
                                       "kernel: its exec_"), d["message"]
        assert says in d["message"] and "on a Mac the output is never written" in d["message"]
    # porter check said clean: the function and its registration still compile
    findings = json.loads(check.out)["findings"]
    assert check.code == 1 and [(f["id"], f["op"]) for f in findings] == [("PORTER024", "logit")]
    assert findings[0]["message"].startswith("logit_kernel, registered on logit_stub, runs no Metal "
                                             "kernel: its exec_*_kernel call ")
    assert says in findings[0]["message"]


@pytest.mark.slow
def test_a_call_under_an_undecidable_condition_is_not_proven(ported):
    with edited(ported, UNARY, LOGIT_CALL, "#if PORTER_FLAG\n" + LOGIT_CALL + "#endif\n"):
        code, by = outcomes(ported, "logit", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail"
    assert by["float32"]["message"].startswith(
        "not proven: the exec_unary_kernel call of logit_kernel (operations/UnaryKernel.mm:42) is "
        "under `#if PORTER_FLAG` (operations/UnaryKernel.mm:44)"), by["float32"]["message"]


@pytest.mark.slow
def test_a_scalar_type_the_call_names_picks_the_kernel(ported):
    """`exec_unary_kernel(iter, "logit", eps, ScalarType::Float)` on half looks up
    `logit_dense_half_half_float` (upstream: the alpha's type is the one named, else the common
    dtype's); UnaryKernel.metal registers half's kernel with a half alpha: a Mac fails float16.
    porter ran the registration's own kernel and passed it."""
    with edited(ported, UNARY, LOGIT_CALL, LOGIT_CALL.replace("eps)", "eps, ScalarType::Float)")):
        code, by = outcomes(ported, "logit", "float16", "float32")
    assert code == 1
    assert by["float32"]["outcome"] == "pass"       # logit_dense_float_float_float is registered
    assert by["float16"]["outcome"] == "fail"
    # the first failing row may be a shapes row (`transposed: ...`), whose message is cut
    # after the registered names: the words that say why are all before the cut
    assert ("logit_kernel (operations/UnaryKernel.mm:43) passes ScalarType::Float: a Mac looks up "
            "logit_dense_half_half_float, which UnaryKernel.metal does not register (registered: "
            "logit_dense_half_half_half)") in by["float16"]["message"]
    # the same spelled as a constant, and a type porter cannot read
    with edited(ported, UNARY, LOGIT_CALL, LOGIT_CALL.replace("eps)", "eps, at::kHalf)")):
        code, by = outcomes(ported, "logit", "float16", "float32")
    assert code == 1 and by["float16"]["outcome"] == "pass" and by["float32"]["outcome"] == "fail"
    assert "looks up logit_dense_float_float_half, which" in by["float32"]["message"]
    with edited(ported, UNARY, LOGIT_CALL, LOGIT_CALL.replace("eps)", "eps, alpha_type)")):
        code, by = outcomes(ported, "logit", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail"
    # `alpha_type` is no name the file declares: a Mac's build stops at it
    assert f"{UNARY} does not build: {UNARY}:43: use of undeclared identifier 'alpha_type'" in \
        by["float32"]["message"]


@pytest.mark.parametrize(("rel", "op", "old", "new", "says"), [
    pytest.param(UNARY, "logit", LOGIT_CALL, LOGIT_CALL.replace("exec_unary", "exec_binary"),
                 'logit_kernel (operations/UnaryKernel.mm:43) calls exec_binary_kernel for "logit", a '
                 "binary call, but UnaryKernel.metal registers it with REGISTER_UNARY_ALPHA_OP (1 input)",
                 id="binary-call-of-a-unary-kernel"),
    pytest.param(ACTIVATION, "threshold_backward",
                 "exec_binary_kernel_with_params(iter, \"threshold\", params, \"ThresholdParams_float\"",
                 "exec_unary_kernel_with_params(iter, \"threshold\", params, \"ThresholdParams_float\"",
                 "calls exec_unary_kernel_with_params for \"threshold\", a unary call, but "
                 "ActivationKernel.metal registers it with REGISTER_BINARY_ALPHA_OP (2 inputs)",
                 id="unary-call-of-a-binary-kernel"),
    pytest.param(UNARY, "logit", LOGIT_CALL, LOGIT_CALL.replace(", eps)", ")"),
                 'logit_kernel (operations/UnaryKernel.mm:43) passes no scalar to "logit", which '
                 "UnaryKernel.metal registers with REGISTER_UNARY_ALPHA_OP",
                 id="no-scalar-for-an-alpha-kernel"),
])
@pytest.mark.slow
def test_a_call_of_another_kind_than_the_kernel_fails(ported, rel, op, old, new, says):
    with edited(ported, rel, old, new):
        code, by = outcomes(ported, op, "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail"
    assert says in by["float32"]["message"], by["float32"]["message"]


@pytest.mark.slow
def test_a_host_function_the_stub_cannot_take_fails(ported):
    """`porter check` reports PORTER022; a Mac does not compile the REGISTER_DISPATCH."""
    head = "static void logit_kernel(TensorIteratorBase& iter, const Scalar& eps) {"
    with edited(ported, UNARY, head, head.replace("const Scalar& eps", "double eps")):
        code, by = outcomes(ported, "logit", "float32")
        check = json.loads(porter("check", "--json", root=ported).out)["findings"]
    assert code == 1 and by["float32"]["outcome"] == "fail"
    assert by["float32"]["message"].startswith(
        "logit_kernel (operations/UnaryKernel.mm:42) takes (TensorIteratorBase&, double), but "
        "logit_stub passes (TensorIteratorBase&, const Scalar&) (aten/src/ATen/native/UnaryOps.h:"), by
    assert "its REGISTER_DISPATCH does not compile on a Mac" in by["float32"]["message"]
    assert [f["id"] for f in check if f["op"] == "logit"] == ["PORTER022"]


NAN_DISPATCH = "AT_DISPATCH_FLOATING_TYPES_AND2(kHalf, kBFloat16, iter.common_dtype(),"
NAN_CALL = '  lib.exec_unary_kernel_with_params(iter, "nan_to_num"'


@pytest.mark.slow
def test_a_dtype_the_host_dispatch_drops_fails(ported):
    """nan_to_num's host dispatches on the iterator's dtype; without kBFloat16 a Mac raises
    `"nan_to_num_mps" not implemented for 'BFloat16'`. porter passed bfloat16."""
    with edited(ported, UNARY, NAN_DISPATCH, "AT_DISPATCH_FLOATING_TYPES_AND(kHalf, iter.common_dtype(),"):
        code, by = outcomes(ported, "nan_to_num", "bfloat16", "float16", "float32", "int32")
    assert code == 1
    assert [by[d]["outcome"] for d in ("float16", "float32", "int32")] == ["pass"] * 3
    assert by["bfloat16"]["outcome"] == "fail"
    assert ("nan_to_num_kernel (operations/UnaryKernel.mm:53): AT_DISPATCH_FLOATING_TYPES_AND covers "
            "float16, float32, float64: a Mac raises \"nan_to_num_mps\" not implemented for 'BFloat16'") \
        in by["bfloat16"]["message"]


@pytest.mark.parametrize(("check", "failing", "says"), [
    pytest.param('TORCH_CHECK(iter.common_dtype() != kBFloat16, "no bfloat16 here");', {"bfloat16"},
                 "a Mac fails its check `iter.common_dtype() != kBFloat16` for bfloat16 and raises "
                 "\"no bfloat16 here\"", id="a-dtype-check-porter-evaluates"),
    pytest.param('TORCH_CHECK(nan.value_or(0.) < 1e6, "nan too large");', {"bfloat16", "float32"},
                 "not proven: nan_to_num_kernel (operations/UnaryKernel.mm:61): `TORCH_CHECK(nan.value_or(0.) "
                 "< 1e6, ...)` is a check porter does not evaluate", id="a-check-porter-cannot-evaluate"),
])
@pytest.mark.slow
def test_a_host_check_refuses_or_is_not_proven(ported, check, failing, says):
    with edited(ported, UNARY, NAN_CALL, f"  {check}\n{NAN_CALL}"):
        code, by = outcomes(ported, "nan_to_num", "bfloat16", "float32", "int32")
    assert code == 1
    assert {d for d, o in by.items() if o["outcome"] == "fail"} == failing, by
    for d in failing:
        assert says in by[d]["message"], by[d]["message"]
    # integers never reach the stub (nan_to_num_out copies them): no check runs for them
    assert by["int32"]["outcome"] == "pass"


@pytest.mark.slow
def test_a_yaml_row_sent_back_to_a_deleted_mps_function_fails(ported):
    """The migration deleted logit_out_mps (MPSGraph) and routed logit.out to the shared
    logit_out; a row restored to `MPS: logit_out_mps` does not link on a Mac. porter ran the
    Metal kernel on the stub and passed."""
    with edited(ported, "aten/src/ATen/native/native_functions.yaml", "    CPU, CUDA, MPS: logit_out\n",
                "    CPU, CUDA: logit_out\n    MPS: logit_out_mps\n"):
        code, by = outcomes(ported, "logit", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail"
    assert by["float32"]["message"].startswith(
        "aten/src/ATen/native/native_functions.yaml:"), by["float32"]["message"]
    assert (" sends MPS to logit_out_mps, which no aten/src/ATen/native/mps/ source defines: a Mac build "
            "fails to link") in by["float32"]["message"]


@pytest.mark.slow
def test_other_host_code_for_a_dtype_is_not_proven(ported):
    """A branch that runs code of its own and returns before the kernel call: for the dtypes
    taking it, MPS does not run the kernel porter runs. porter passed bfloat16 on the kernel."""
    branch = ("  if (iter.common_dtype() == kBFloat16) {\n    iter.output(0).copy_(iter.input(0));\n"
              "    return;\n  }\n")
    with edited(ported, UNARY, NAN_CALL, branch + NAN_CALL):
        code, by = outcomes(ported, "nan_to_num", "bfloat16", "float32")
    assert code == 1 and by["float32"]["outcome"] == "pass" and by["bfloat16"]["outcome"] == "fail"
    assert ("not proven: nan_to_num_kernel (operations/UnaryKernel.mm:61): for bfloat16 `if "
            "(iter.common_dtype() == kBFloat16)` leaves before the kernel call") in by["bfloat16"]["message"]


@pytest.mark.slow
def test_a_host_that_ignores_posinf_fails_the_reference_inputs(ported):
    """upstream's nan_to_num samples pass none of nan, posinf, neginf: a host that always sends
    the dtype's max for +inf passed every row, as it passes a Mac's test, yet answers 65504 where
    torch.nan_to_num(x, posinf=2.5) gives 2.5. The reference inputs now pass each of them."""
    old = "params.posinf = posinf.has_value() ? static_cast<float>(posinf.value()) : dtype_max;"
    with edited(ported, UNARY, old, "params.posinf = dtype_max;"):
        res = porter("test", "nan_to_num", "--device", "emulate", "--json", "--reference-inputs",
                     "--dtype", "float32", "--dtype", "float16", root=ported)
        data = json.loads(res.out)
        by = {("shapes" if o["shapes"] else o["reference"], d["dtype"]): d["outcome"]
              for o in data["ops"] for d in o["dtypes"]}
        assert res.code == 1 and by == {(False, "float32"): "pass", (False, "float16"): "pass",
                                        (True, "float32"): "fail", (True, "float16"): "fail",
                                        ("shapes", "float32"): "pass", ("shapes", "float16"): "pass"}, by


@pytest.mark.slow
def test_a_bare_return_for_one_dtype_fails_it(ported):
    """`if (dtype == kHalf) return;` before the kernel call leaves a half output unwritten."""
    old = "  NanToNumParams<float> params;\n"
    with edited(ported, UNARY, old, "  if (iter.common_dtype() == kHalf) return;\n" + old):
        code, by = outcomes(ported, "nan_to_num", "float16", "float32")
        assert code == 1 and by["float16"]["outcome"] == "fail" and by["float32"]["outcome"] == "pass", by
        assert "returns before the kernel call: the output is never written" in by["float16"]["message"]


@pytest.mark.slow
def test_a_host_whose_jit_library_lacks_its_kernel_fails(ported):
    """JIT-shader builds (PYTORCH_JIT_COMPILE_SHADERS, a Mac without the Metal toolchain) give a
    host file only the kernels of the .metal files whose *_metallib.h it includes: UnaryKernel.mm
    loading BinaryKernel's finds no logit kernel there, and every dtype fails on such a Mac.
    Before: green (the emulator looked in the paired file, as a bundled build does); only
    `porter check` (PORTER010) said so."""
    with edited(ported, UNARY, "#include <ATen/native/mps/UnaryKernel_metallib.h>",
                "#include <ATen/native/mps/BinaryKernel_metallib.h>"):
        code, by = outcomes(ported, "logit", "float32")
        assert code == 1 and by["float32"]["outcome"] == "fail", by
        assert "JIT-shader builds" in by["float32"]["message"], by["float32"]["message"]
