"""Ops with scalar parameters (issue 13) on the real-size tree: each migrated off MPSGraph, then
its kernel file built and the op's OpInfo samples run through the emulated kernel, with the
samples' own scalar arguments passed through the host code porter wrote, and through the OpInfo's
reference inputs (`--reference-inputs`: ±0.0, ±inf, nan, large values), which catch what the
standard samples cannot (they hold no nan or inf)."""

from __future__ import annotations

import json
import shutil

import pytest
from expecttest import assert_expected_inline

from tests.porter_run import added_lines, file_diff, git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

ACTIVATION_METAL = "aten/src/ATen/native/mps/kernels/ActivationKernel.metal"
ACTIVATION_HOST = "aten/src/ATen/native/mps/operations/ActivationKernel.mm"
ACTIVATION_HEADER = "aten/src/ATen/native/mps/kernels/ActivationKernel.h"
UNARY_HOST = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
ALL = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32"}
FLOATS = {"float16", "bfloat16", "float32"}

# the clamp written out: Metal's clamp returns eps for a NaN x, where the CPU's logit keeps NaN
# (the reference inputs put NaN through the eps branch: `clamp(x, eps, 1 - eps)` fails them)
CLAMPED = "(x < eps ? eps : (x > 1 - eps ? 1 - eps : x))"
LOGIT_BODY = f"eps < 0 ? log(x / (1 - x)) : log({CLAMPED} / (1 - {CLAMPED}))"
NAN_TO_NUM_BODY = "isnan(x) ? nan : (isinf(x) ? (x > 0 ? posinf : neginf) : x)"

# op, OpInfo name, extra migrate arguments, dtypes the emulated test must pass
PORTS = [
    pytest.param("threshold", "nn.functional.threshold", ["--body", "x <= threshold ? value : x"], ALL,
                 id="threshold-two-scalars-params-struct"),
    # ints: the CPU kernel refuses them too, so no kernel and their UNIMPLEMENTED xfail stays
    pytest.param("softplus", "nn.functional.softplus", [], {d: "pass" for d in FLOATS} | {
                 d: "xfail" for d in ALL - FLOATS - {"int64"}}, id="softplus-cpu-lambda-captured-scalars"),
    pytest.param("logit", "logit", ["--body", LOGIT_BODY], ALL, id="logit-optional-eps-alpha"),
    pytest.param("nan_to_num", "nan_to_num", ["--body", NAN_TO_NUM_BODY], ALL,
                 id="nan_to_num-three-optionals-dtype-extremes"),
]


def _words(text: str) -> str:
    """Code without diff markers and layout (the checkout's clang-format decides the layout)."""
    return " ".join(" ".join(line.lstrip("+") for line in text.splitlines()
                             if not line.startswith("+++")).split())


def _emulated(root, name: str, *, reference: bool = False, dtypes=()) -> tuple[int, dict[str, str]]:
    """`porter test NAME --device emulate` (the full verdict: the standard samples, the reference
    inputs and the shapes; on `dtypes` only if given): the exit code and each row's outcome,
    keyed by dtype for the samples, by ("reference", dtype) and ("shapes", dtype) for the
    others. `reference`: also on --reference-inputs (part of the full verdict already)."""
    extra = (["--reference-inputs"] if reference else []) + [a for d in dtypes for a in ("--dtype", d)]
    result = porter("test", name, "--device", "emulate", "--json", *extra, root=root)
    assert result.out.startswith("{"), result.err
    report = json.loads(result.out)

    def key(op, dtype):
        return ("reference", dtype) if op["reference"] else ("shapes", dtype) if op["shapes"] else dtype
    outcomes = {key(op, case["dtype"]): case["outcome"] for op in report["ops"] for case in op["dtypes"]}
    assert len(outcomes) == sum(len(op["dtypes"]) for op in report["ops"]), report["ops"]   # none hidden
    return result.code, outcomes


@pytest.mark.parametrize("op,name,extra,dtypes", PORTS)
@pytest.mark.slow
def test_migrated_port_builds_and_passes_the_emulated_test(real_root, tmp_path, monkeypatch,
                                                          op, name, extra, dtypes):
    git_init(real_root)
    migrated = porter("migrate-from-mpsgraph", op, *extra, root=real_root)
    assert migrated.code == 0, migrated.err + migrated.out
    assert "skeleton" not in migrated.out, migrated.out
    built = porter("emulate", "check", "--json", root=real_root)
    assert json.loads(built.out)["ok"], built.out[:2000]
    code, outcomes = _emulated(real_root, name, reference=True)
    expected = dtypes if isinstance(dtypes, dict) else {d: "pass" for d in dtypes}
    # the standard samples, the reference inputs and the shapes, on every dtype the MPS test sends
    assert outcomes == expected | {(row, d): outcome for d, outcome in expected.items()
                                   for row in ("reference", "shapes")}
    assert code == 0


@pytest.mark.slow
def test_a_body_that_ignores_a_scalar_fails_the_emulated_test(real_root, tmp_path, monkeypatch):
    # softplus without its beta: the samples' beta reaches the kernel through the params struct,
    # so the wrong body is caught (what porter prints if the port were wrong)
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "softplus", "--body", "x > threshold ? x : log1p(exp(x))",
                  root=real_root).code == 0
    code, outcomes = _emulated(real_root, "nn.functional.softplus")
    assert code == 1 and {outcomes[d] for d in FLOATS} == {"fail"}, outcomes


@pytest.mark.slow
def test_logit_samples_eps_reaches_the_kernel(real_root, tmp_path, monkeypatch):
    # the samples with eps (0.2) clamp their inputs; a body that ignores eps fails them
    git_init(real_root)
    wrong = "log(x / (1 - x))"
    assert porter("migrate-from-mpsgraph", "logit", "--body", wrong, root=real_root).code == 0
    code, outcomes = _emulated(real_root, "logit")
    assert code == 1 and "fail" in outcomes.values(), outcomes


@pytest.mark.slow
def test_nan_to_num_with_posinf_and_neginf_swapped_fails_the_reference_inputs(real_root, tmp_path, monkeypatch):
    # the standard samples hold no inf, so they pass the swap; the reference inputs' ±inf do not
    git_init(real_root)
    swapped = NAN_TO_NUM_BODY.replace("posinf : neginf", "neginf : posinf")
    assert swapped != NAN_TO_NUM_BODY
    assert porter("migrate-from-mpsgraph", "nan_to_num", "--body", swapped, root=real_root).code == 0
    # reference inputs cost ~0.5 s a dtype: float32, bfloat16 (its samples pass posinf and neginf
    # explicitly, the others leave them None for the host's dtype extremes) and an integer
    some = ("int32", "bfloat16", "float32")
    code, outcomes = _emulated(real_root, "nan_to_num", reference=True, dtypes=some)
    assert {outcomes[d] for d in some} == {"pass"}, outcomes
    assert {d: outcomes["reference", d] for d in some} == {"int32": "pass", "bfloat16": "fail", "float32": "fail"}
    assert code == 1


@pytest.mark.slow
def test_nan_to_num_host_passes_explicit_nan_posinf_neginf_to_the_kernel(real_root):
    # no OpInfo sample of nan_to_num passes values of its own (bfloat16's explicit posinf/neginf
    # are its dtype's extremes, what None gives too), so a host ignoring them would pass
    # `porter test` even with reference inputs: the emulated kernel runs them here
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from porter.emulate.emulator_device import EmulateBackend

    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "nan_to_num", "--body", NAN_TO_NUM_BODY, root=real_root).code == 0
    backend = EmulateBackend(real_root)
    try:
        x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.5, -0.0, 3e38])
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for kwargs in ({}, {"nan": 2.0, "posinf": 7.0, "neginf": -3.0}, {"posinf": 1.0}, {"neginf": 0.5}):
                sample = SimpleNamespace(input=x.to(dtype), args=(), kwargs=kwargs)
                got = backend.run(SimpleNamespace(name="nan_to_num", variant_test_name=""), sample, dtype)
                torch.testing.assert_close(got, torch.nan_to_num(x.to(dtype), **kwargs), msg=str((dtype, kwargs)))
    finally:
        backend.close()


@pytest.mark.slow
def test_logit_treating_a_missing_eps_as_zero_fails_the_reference_inputs(real_root, tmp_path, monkeypatch):
    # eps=None must not clamp (the CPU's eps < 0); clamping to [0, 1] instead agrees on the
    # standard samples, all inside logit's domain, but not on the reference inputs' -inf and
    # large integers, nor on the shapes' values outside [0, 1] (built from a sample with eps
    # None), where the CPU gives nan and the clamped kernel ±inf
    git_init(real_root)
    lo, hi = "max(eps, 0.0f)", "1 - max(eps, 0.0f)"
    wrong = f"log(clamp(x, {lo}, {hi}) / (1 - clamp(x, {lo}, {hi})))"
    assert porter("migrate-from-mpsgraph", "logit", "--body", wrong, root=real_root).code == 0
    some = ("bool", "int64", "float32")     # bool's 0 and 1 stay inside [0, 1]
    code, outcomes = _emulated(real_root, "logit", reference=True, dtypes=some)
    assert {outcomes[d] for d in some} == {"pass"}, outcomes
    assert {d: outcomes["reference", d] for d in some} == {"bool": "pass", "int64": "fail", "float32": "fail"}
    assert {d: outcomes["shapes", d] for d in some} == {"bool": "pass", "int64": "fail", "float32": "fail"}
    assert code == 1


def test_softplus_port_goes_to_the_activation_family_with_a_params_struct(real_root):
    result = porter("migrate-from-mpsgraph", "softplus", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert added_lines(file_diff(result.out, ACTIVATION_HEADER)).endswith(
        "+#pragma once\n+\n+template <typename T>\n+struct SoftplusParams {\n+  T beta;\n"
        "+  T threshold;\n+};\n+using SoftplusParams_float = SoftplusParams<float>;\n")
    host = _words(added_lines(file_diff(result.out, ACTIVATION_HOST)))
    assert host == _words(
        "#include <ATen/native/mps/kernels/ActivationKernel.h>\n"
        "static void softplus_kernel(TensorIteratorBase& iter, const Scalar& beta, const Scalar& threshold) {\n"
        "  SoftplusParams<float> params;\n"
        "  params.beta = beta.to<float>();\n"
        "  params.threshold = threshold.to<float>();\n"
        "  lib.exec_unary_kernel_with_params(iter, \"softplus\", params, \"SoftplusParams_float\");\n"
        "}\n"
        "REGISTER_DISPATCH(softplus_stub, softplus_kernel);\n")
    metal = added_lines(file_diff(result.out, ACTIVATION_METAL))
    assert "REGISTER_UNARY_ALPHA_OP(softplus, half, SoftplusParams_float, half);" in metal
    # every floating dtype the CPU kernel dispatches, bfloat16 too (issue 36: bfloat16 dropped
    # from plan.FLOATING_DEFAULT survived the suite)
    assert "REGISTER_UNARY_ALPHA_OP(softplus, bfloat, SoftplusParams_float, bfloat);" in metal
    assert "REGISTER_UNARY_ALPHA_OP(softplus, float, SoftplusParams_float, float);" in metal
    assert "const float beta = params.beta;" in metal
    # integers: the CPU kernel dispatches floating types only, so their xfails stay
    common_mps = file_diff(result.out, "torch/testing/_internal/common_mps.py")
    assert '"nn.functional.softplus"' not in common_mps, common_mps


def test_nan_to_num_host_computes_the_dtype_extremes_the_cpu_kernel_uses_for_none(real_root):
    result = porter("migrate-from-mpsgraph", "nan_to_num", "--body", NAN_TO_NUM_BODY, "--dry-run",
                    root=real_root)
    assert result.code == 0, result.err
    host = _words(added_lines(file_diff(result.out, UNARY_HOST)))
    for line in ("std::optional<double> nan, std::optional<double> posinf, std::optional<double> neginf",
                 "dtype_max = static_cast<float>(std::numeric_limits<scalar_t>::max());",
                 "params.nan = static_cast<float>(nan.value_or(0.));",
                 "params.posinf = posinf.has_value() ? static_cast<float>(posinf.value()) : dtype_max;",
                 "params.neginf = neginf.has_value() ? static_cast<float>(neginf.value()) : dtype_lowest;"):
        assert _words(line) in host, host


def test_the_activation_host_file_is_created_with_the_unary_preamble_when_missing(real_root):
    (real_root / ACTIVATION_HOST).unlink()
    result = porter("migrate-from-mpsgraph", "threshold", "--body", "x <= threshold ? value : x",
                    "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert f"created {ACTIVATION_HOST} in the shape of upstream's family host files" in result.err
    assert f"   create  {ACTIVATION_HOST}" in result.out
    created = added_lines(file_diff(result.out, ACTIVATION_HOST))
    for line in ("+#include <ATen/native/Activation.h>", "getBundledLibrary()",
                 "+#include <ATen/native/mps/ActivationKernel_metallib.h>",
                 "+REGISTER_DISPATCH(threshold_stub, &threshold_mps_kernel);",
                 "+} // namespace at::native"):
        assert line in created, created


@pytest.mark.parametrize("op,says", [
    ("add", "'add' has CPU and CUDA kernels generated from its `ufunc_inner_loop`, with no "
            "DispatchStub for MPS to join (what is missing: an in-place port that passes Scalar "
            "alpha=1 to the kernel (porter's in-place ports pass no scalars); "
            "aten/src/ATen/native/mps/kernels/BinaryKernel.metal already registers add_alpha: call it "
            "by hand from add_out_mps (named by its MPS row; no aten/src/ATen/native/mps/operations/*.mm "
            "porter can read defines it yet: write it))"),
    ("pow", "'pow' has 3 out= overloads with their own CPU/CUDA kernels (pow_Tensor_Tensor_out, "
            "pow_Scalar_out, pow_Tensor_Scalar_out), chosen by the arguments' dtypes and kinds; what "
            "is missing: an MPS implementation of each overload that builds the TensorIterator its "
            "CPU kernel builds and calls a Metal kernel"),
    ("smooth_l1_loss", "'smooth_l1_loss' reduces its result (`int reduction=Mean`)"),
])
def test_ops_that_are_not_one_functor_are_refused_with_what_is_missing(real_root, op, says):
    for command in ("migrate-from-mpsgraph", "new-op"):
        result = porter(command, op, "--dry-run", root=real_root)
        assert result.code == 2 and says in result.err, result.err
    # forcing an in-place port does not get around what refuses them
    assert says in porter("migrate-from-mpsgraph", op, "--in-place", "--dry-run", root=real_root).err
    # a reduction's hint does not pretend that passing its argument would do
    assert "reduction=Mean to" not in result.err


def test_candidates_classify_the_scalar_ops(real_root):
    result = porter("candidates", "--json", root=real_root)
    rows = {c["op"]: c for c in json.loads(result.out)["candidates"]}
    got = {op: (rows[op]["kind"], rows[op]["verdict"]) for op in
           ("softplus", "sub", "threshold", "logit", "nan_to_num", "gelu", "mse_loss", "glu", "pow")}
    assert got == {
        "softplus": ("scalar", "automatic"), "sub": ("alpha", "automatic"),
        "threshold": ("scalar", "automatic"), "logit": ("scalar", "automatic"),
        "nan_to_num": ("scalar", "automatic"), "gelu": ("other", "automatic"),
        "mse_loss": ("other", "refused"), "glu": ("other", "refused"), "pow": ("binary", "refused")}
    # threshold's lambda reads (x, other), both `self` (its meta function adds self twice)
    assert rows["threshold"]["how"] == "CPU lambda"
    # logit's two lambdas, chosen by `eps < 0`: one functor branching on eps
    assert rows["logit"]["how"] == "CPU lambda"


@pytest.mark.parametrize("op,names", [
    # torch 2.13's yaml names add_out_mps and glu_out_mps; the tree defines neither
    ("add", "its MPS row names add_out_mps, which no aten/src/ATen/native/mps/operations/*.mm porter "
            "can read defines"),
    ("glu", "its MPS row names glu_out_mps, which no aten/src/ATen/native/mps/operations/*.mm porter "
            "can read defines"),
])
def test_a_refusal_names_only_the_mps_functions_the_tree_defines(real_tree_template, op, names):
    result = porter("migrate-from-mpsgraph", op, "--dry-run", root=real_tree_template)
    assert result.code == 2 and f"cannot migrate '{op}' off MPSGraph " in result.err, result.err
    assert names in result.err, result.err
    assert f"off MPSGraph ({op}_out_mps)" not in result.err
    assert f"from {op}_out_mps (its MPS row)" not in result.err


def test_softplus_functor_names_its_argument_x_and_casts_only_where_the_type_changes(real_tree_template):
    result = porter("migrate-from-mpsgraph", "softplus", "--dry-run", root=real_tree_template)
    assert result.code == 0, result.err
    functor = added_lines(file_diff(result.out, ACTIVATION_METAL)).split("\n+\n")[1]
    assert_expected_inline(functor, """\
+struct softplus_functor {
+  template <typename T, enable_if_t<is_scalar_floating_point_v<T>, bool> = true>
+  inline T operator()(const T x, const SoftplusParams<float> params) {
+    const float beta = params.beta;
+    const float threshold = params.threshold;
+    return static_cast<T>(
+        (float(x) * beta) > threshold
+            ? float(x)
+            : (c10::metal::log1p(::precise::exp(float(x) * beta)) / beta));
+  }
+};""")


def test_threshold_integers_take_the_scalars_as_the_cpu_does_not_through_a_float(real_root):
    # The OpInfo samples' thresholds are small, so a params struct held at float passes them on
    # every dtype; the CPU's to<scalar_t>() keeps 16777217 (int32) and 2^40 + 1 (int64) exact and
    # truncates 2.9999999 to 2, where a float rounds both first: the emulated kernel runs them here
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from porter.emulate.emulator_device import EmulateBackend

    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "threshold", "--body", "x <= threshold ? value : x",
                  root=real_root).code == 0
    backend = EmulateBackend(real_root)
    try:
        for dtype, x, threshold, value in ((torch.int32, [16777217, 5], 16777217, 7),
                                           (torch.int64, [2 ** 40 + 1, 3], 2 ** 40 + 1, 7),
                                           (torch.int32, [3, 2], 2.9999999, 9),
                                           (torch.int16, [3, -4], -3.5, 2.75),
                                           (torch.float32, [1.0, 3.0], 1.0, 2.5)):
            t = torch.tensor(x, dtype=dtype)
            sample = SimpleNamespace(input=t, args=(threshold, value), kwargs={})
            got = backend.run(SimpleNamespace(name="nn.functional.threshold", variant_test_name=""),
                              sample, dtype)
            torch.testing.assert_close(got, torch.nn.functional.threshold(t, threshold, value),
                                       msg=str((dtype, x, threshold, value)))
    finally:
        backend.close()


def test_threshold_port_holds_its_params_at_long_for_integers(real_tree_template):
    result = porter("migrate-from-mpsgraph", "threshold", "--body", "x <= threshold ? value : x",
                    "--dry-run", root=real_tree_template)
    assert result.code == 0, result.err
    assert added_lines(file_diff(result.out, ACTIVATION_HEADER)).endswith(
        "+using ThresholdParams_float = ThresholdParams<float>;\n"
        "+using ThresholdParams_long = ThresholdParams<long>;\n")
    assert_expected_inline(added_lines(file_diff(result.out, ACTIVATION_HOST)), """\
+#include <ATen/native/mps/kernels/ActivationKernel.h>
+static void threshold_kernel(TensorIteratorBase& iter, const Scalar& threshold, const Scalar& value) {
+  if (c10::isIntegralType(iter.common_dtype(), /*includeBool=*/true)) {
+    // integers take the scalars as the CPU's to<scalar_t>() does: through a float they would be
+    // rounded first (16777217, or 2.9999999 up to 3)
+    ThresholdParams<int64_t> params;
+    params.threshold = threshold.to<int64_t>();
+    params.value = value.to<int64_t>();
+    lib.exec_unary_kernel_with_params(iter, "threshold", params, "ThresholdParams_long");
+    return;
+  }
+  ThresholdParams<float> params;
+  params.threshold = threshold.to<float>();
+  params.value = value.to<float>();
+  lib.exec_unary_kernel_with_params(iter, "threshold", params, "ThresholdParams_float");
+}
+
+REGISTER_DISPATCH(threshold_stub, threshold_kernel);
""")
    metal = added_lines(file_diff(result.out, ACTIVATION_METAL))
    assert_expected_inline(metal.split("\n+\n", 1)[1], """\
+struct threshold_functor {
+  template <typename T, enable_if_t<is_scalar_floating_point_v<T>, bool> = true>
+  inline T operator()(const T x, const ThresholdParams<float> params) {
+    const float threshold = params.threshold;
+    const float value = params.value;
+    return static_cast<T>(float(x) <= threshold ? value : float(x));
+  }
+  template <typename T, enable_if_t<is_scalar_integral_v<T>, bool> = true>
+  inline T operator()(const T x, const ThresholdParams<long> params) {
+    const T threshold = static_cast<T>(params.threshold);
+    const T value = static_cast<T>(params.value);
+    return static_cast<T>(x <= threshold ? value : x);
+  }
+};
+
+REGISTER_UNARY_ALPHA_OP(threshold, float, ThresholdParams_float, float);
+REGISTER_UNARY_ALPHA_OP(threshold, half, ThresholdParams_float, half);
+REGISTER_UNARY_ALPHA_OP(threshold, bfloat, ThresholdParams_float, bfloat);
+REGISTER_UNARY_ALPHA_OP(threshold, bool, ThresholdParams_long, bool);
+REGISTER_UNARY_ALPHA_OP(threshold, uchar, ThresholdParams_long, uchar);
+REGISTER_UNARY_ALPHA_OP(threshold, char, ThresholdParams_long, char);
+REGISTER_UNARY_ALPHA_OP(threshold, short, ThresholdParams_long, short);
+REGISTER_UNARY_ALPHA_OP(threshold, int, ThresholdParams_long, int);
+REGISTER_UNARY_ALPHA_OP(threshold, long, ThresholdParams_long, long);
""")


def test_a_rerun_with_another_body_says_the_body_was_not_applied(real_root):
    # after the port, migrate-from-mpsgraph has nothing to do; a rerun meant to fix a wrong body
    # must not read as done while the functor keeps the old one
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "logit", "--body", LOGIT_BODY, root=real_root).code == 0
    metal = (real_root / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal").read_text()
    again = porter("migrate-from-mpsgraph", "logit", "--body", "log(x / (1 - x))", root=real_root)
    assert again.code == 0 and again.out.splitlines() + again.err.splitlines() == [
        "porter migrate-from-mpsgraph logit: nothing to do",
        "note: --body not applied: 'logit' is already ported (logit_functor in "
        "aten/src/ATen/native/mps/kernels/UnaryKernel.metal is its kernel); to change the body, "
        "edit that functor, or revert the port (git checkout) and rerun",
        # the suite's runs pass --no-test: "nothing to do" then says the port was not tested
        "note: --no-test: the files were written already and logit was not tested; "
        "`porter test logit --device emulate` gives the verdict"], again.out
    assert (real_root / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal").read_text() == metal
    # the same rerun without a body is the plain second run
    assert porter("migrate-from-mpsgraph", "logit", root=real_root).out == \
        "porter migrate-from-mpsgraph logit: nothing to do\n"


def test_a_migration_keeps_every_result_of_its_port(real_tree_template):
    # migrate-from-mpsgraph plans through new-op's one planning path: what the port decides lands
    # in the migration itself, dtypes left out on purpose and the params held at long included
    from porter.port.migration import plan_migration
    from porter.source.checkout import Checkout

    tree = Checkout(real_tree_template)
    softplus = plan_migration(tree, "softplus")
    assert softplus.unregistered == ALL - FLOATS - {"int64"}     # int64: the MPS test sends none
    assert not softplus.long_params
    threshold = plan_migration(tree, "threshold", body="x <= threshold ? value : x")
    assert threshold.long_params and not threshold.unregistered


# upstream's logit_out hands its stub to a helper of UnaryOps.cpp that builds the float iterator
# and runs the stub with what follows it (the fixture's logit_out builds the iterator itself)
UPSTREAM_HELPER = """template <typename Stub, typename... Args>
static inline Tensor& unary_op_impl_float_out(Tensor& result, const Tensor& self, Stub& stub, Args... args) {
  auto iter = TensorIterator::unary_float_op(result, self);
  stub(iter.device_type(), iter, args...);
  iter.cast_outputs();
  return result;
}

Tensor& logit_out(const Tensor& self,
    std::optional<double> eps,
    Tensor& result) {
  return unary_op_impl_float_out(
      result, self, logit_stub, Scalar(eps ? eps.value() : -1.0));
}
"""


def _logit_through_the_helper(root) -> None:
    path = root / "aten/src/ATen/native/UnaryOps.cpp"
    text = path.read_text()
    start = text.index("Tensor& logit_out(")
    end = text.index("\n}\n", start) + 3
    path.write_text(text[:start] + UPSTREAM_HELPER + text[end:])


@pytest.mark.slow
def test_logit_handing_its_stub_to_upstreams_helper_is_ported_and_green(real_root, tmp_path, monkeypatch):
    _logit_through_the_helper(real_root)
    git_init(real_root)
    rows = {r["op"]: r for r in json.loads(porter("candidates", "--json", root=real_root).out)["candidates"]}
    assert rows["logit"]["verdict"] == "automatic", rows["logit"]
    migrated = porter("migrate-from-mpsgraph", "logit", root=real_root)
    assert migrated.code == 0, migrated.err
    # eps reaches the kernel through the helper's `args...`: the samples with eps=0.2 and the
    # reference inputs' None (-1: no clamp) pass on every dtype the MPS test sends
    code, outcomes = _emulated(real_root, "logit", reference=True)
    assert code == 0 and set(outcomes.values()) == {"pass"} and len(outcomes) == 3 * len(ALL), outcomes
    # wrong on purpose: the helper passes a fixed eps instead of the caller's: red
    path = real_root / "aten/src/ATen/native/UnaryOps.cpp"
    path.write_text(path.read_text().replace("Scalar(eps ? eps.value() : -1.0)", "Scalar(0.25)"))
    code, outcomes = _emulated(real_root, "logit", reference=True, dtypes=["float32"])
    assert code == 1 and "fail" in outcomes.values(), outcomes
