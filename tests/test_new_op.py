"""porter new-op: golden diffs per edited file, end to end on both trees, and bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from expecttest import assert_expected_inline

from porter.source.checkout import NATIVE_YAML, TAGS_YAML
from tests.porter_run import added_lines, changed_files, fallback_example_is, file_diff, git_init, porter, snapshot

YAML = NATIVE_YAML
BINARY_METAL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
BINARY_MM = "aten/src/ATen/native/mps/operations/BinaryKernel.mm"
UNARY_METAL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
UNARY_MM = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
COMMON_MPS = "torch/testing/_internal/common_mps.py"
CMI = "torch/testing/_internal/common_methods_invocations.py"
SPECIAL = "torch/testing/_internal/opinfo/definitions/special.py"


def parse_with_torchgen(root) -> int:
    import torchgen.gen

    torchgen.gen._GLOBAL_PARSE_NATIVE_YAML_CACHE.clear()
    parsed = torchgen.gen.parse_native_yaml(str(root / YAML), str(root / TAGS_YAML))
    return len(parsed.native_functions)


# --- golden diffs on the fixture checkout -------------------------------------------------

@pytest.fixture
def heaviside_dry(mini_root):
    result = porter("new-op", "heaviside", "--dry-run", root=mini_root)
    assert result.code == 0, result.err
    return result.out


@pytest.fixture
def log_ndtr_dry(mini_root):
    result = porter("new-op", "special_log_ndtr", "--dry-run", root=mini_root)
    assert result.code == 0, result.err
    return result.out


def test_status_lines(heaviside_dry):
    assert_expected_inline(heaviside_dry.split("\n\n", 1)[0], """\
   update  aten/src/ATen/native/native_functions.yaml
   update  aten/src/ATen/native/mps/kernels/BinaryKernel.metal
   update  aten/src/ATen/native/mps/operations/BinaryKernel.mm
   update  torch/testing/_internal/common_mps.py
   update  torch/testing/_internal/common_methods_invocations.py""")


def test_yaml_gets_mps_in_shared_row(heaviside_dry):
    assert_expected_inline(file_diff(heaviside_dry, YAML), """\
@@ -475,7 +475,7 @@
   structured_inherits: TensorIteratorBase
   device_check: NoCheck   # TensorIterator
   dispatch:
-    CPU, CUDA: heaviside_out
+    CPU, CUDA, MPS: heaviside_out
   tags: pointwise
 
 - func: heaviside(Tensor self, Tensor values) -> Tensor
""")


def test_binary_functor_and_registration(heaviside_dry):
    assert_expected_inline(file_diff(heaviside_dry, BINARY_METAL), """\
@@ -73,6 +73,13 @@
   }
 };
 
+struct heaviside_functor {
+  template <typename T>
+  inline T operator()(const T a, const T b) {
+    return a == 0 ? b : static_cast<T>(a > 0);
+  }
+};
+
 // Complex binary functors
 struct mul_functor {
   template <typename T>
@@ -142,6 +149,8 @@
 REGISTER_FLOAT_BINARY_OP(hypot);
 REGISTER_FLOAT_BINARY_OP(atan2);
 REGISTER_INT2FLOAT_BINARY_OP(atan2);
+REGISTER_FLOAT_BINARY_OP(heaviside);
+REGISTER_INTEGER_BINARY_OP(heaviside);
 REGISTER_FLOAT_BINARY_OP(copysign);
 REGISTER_INT2FLOAT_BINARY_OP(copysign);
 REGISTER_OPMATH_FLOAT_BINARY_OP(xlogy);
""")


def test_binary_host_stub(heaviside_dry):
    assert_expected_inline(file_diff(heaviside_dry, BINARY_MM), """\
@@ -63,6 +63,10 @@
   lib.exec_binary_kernel(iter, "sub_alpha", alpha);
 }
 
+static void heaviside_mps_kernel(TensorIteratorBase& iter) {
+  lib.exec_binary_kernel(iter, "heaviside");
+}
+
 REGISTER_DISPATCH(fmax_stub, &fmax_mps_kernel)
 REGISTER_DISPATCH(fmin_stub, &fmin_mps_kernel)
 REGISTER_DISPATCH(copysign_stub, &copysign_mps_kernel);
@@ -71,4 +75,5 @@
 REGISTER_DISPATCH(atan2_stub, &atan2_mps_kernel)
 REGISTER_DISPATCH(add_stub, &add_mps_kernel)
 REGISTER_DISPATCH(sub_stub, &sub_mps_kernel)
+REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)
 } // namespace at::native
""")


def test_unimplemented_xfail_removed(heaviside_dry):
    assert_expected_inline(file_diff(heaviside_dry, COMMON_MPS), """\
@@ -39,7 +39,6 @@
             # Failures due to lack of op implementation on MPS backend
             "logspace": None,
             "frexp": None,
-            "heaviside": None,
             "linalg.eig": None,
             "rounddecimals_0": [
                 torch.uint8,
""")


def test_opinfo_and_ref_decorators_removed(heaviside_dry):
    assert_expected_inline(file_diff(heaviside_dry, CMI), """\
@@ -122,11 +122,6 @@
                         DecorateInfo(unittest.expectedFailure,
                                      'TestBinaryUfuncsDevice',
                                      'test_type_promotion'),
-                        # heaviside is not implemented for the MPS device
-                        DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_variant_consistency_eager', device_type='mps'),
-                        DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_out_warning', device_type='mps'),
-                        DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_out', device_type='mps'),
-                        DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_dtypes', device_type='mps'),
                     )),
     BinaryUfuncInfo('hypot',
                     dtypes=floating_types_and(torch.bfloat16, torch.half),
@@ -204,11 +199,6 @@
         "_refs.heaviside",
         torch_opinfo_name="heaviside",
         supports_rhs_python_scalar=False,
-        skips=(
-            # heaviside is not implemented for the MPS device
-            DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_python_ref_torch_fallback', device_type='mps'),
-            DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_python_ref', device_type='mps'),
-        ),
     ),
 ]
 

""")


def test_notes_name_what_was_left(mini_root):
    fallback_example_is(mini_root, "heaviside")
    result = porter("new-op", "heaviside", "--dry-run", root=mini_root)
    notes = [line for line in result.err.splitlines() if line.startswith("note:")]
    assert_expected_inline("\n".join(notes), """note: test/test_mps.py:18: TestFallbackWarning uses heaviside as its not-implemented example; change it to an op that still lacks MPS""")


def test_unary_functor_in_float_math_with_int_to_float(log_ndtr_dry):
    assert_expected_inline(file_diff(log_ndtr_dry, UNARY_METAL), """\
@@ -106,6 +106,21 @@
   }
 };
 
+struct special_log_ndtr_functor {
+  template <typename T>
+  inline enable_if_t<is_scalar_floating_point_v<T>, T> operator()(const T x) {
+    return static_cast<T>(
+        float(x) < -1.0f
+            ? ::precise::log(c10::metal::erfcx(-float(x) * M_SQRT1_2_F) / 2) -
+                (float(x) * M_SQRT1_2_F) * (float(x) * M_SQRT1_2_F)
+            : c10::metal::log1p(-c10::metal::erfc(float(x) * M_SQRT1_2_F) / 2));
+  }
+  template <typename T>
+  inline enable_if_t<is_scalar_integral_v<T>, float> operator()(const T x) {
+    return operator()(static_cast<float>(x));
+  }
+};
+
 struct round_decimals_functor {
   template <typename T>
   inline T operator()(const T x, const long ndigits) {
@@ -137,6 +152,14 @@
 REGISTER_UNARY_OP(bitwise_not, char, char);
 REGISTER_UNARY_OP(bitwise_not, uchar, uchar);
 REGISTER_UNARY_OP(bitwise_not, bool, bool);
+
+REGISTER_UNARY_OP(special_log_ndtr, float, float);
+REGISTER_UNARY_OP(special_log_ndtr, long, float);
+REGISTER_UNARY_OP(special_log_ndtr, int, float);
+REGISTER_UNARY_OP(special_log_ndtr, short, float);
+REGISTER_UNARY_OP(special_log_ndtr, uchar, float);
+REGISTER_UNARY_OP(special_log_ndtr, char, float);
+REGISTER_UNARY_OP(special_log_ndtr, bool, float);
 
 #define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\
   REGISTER_UNARY_OP(erfinv, DTYPE1, DTYPE0);       \\
""")


def test_unary_host_uses_ti_macro(log_ndtr_dry):
    assert_expected_inline(file_diff(log_ndtr_dry, UNARY_MM), """\
@@ -28,6 +28,7 @@
 REGISTER_UNARY_TI_DISPATCH(bitwise_not);
 REGISTER_UNARY_TI_DISPATCH(sinc);
 REGISTER_UNARY_TI_DISPATCH(erfinv);
+REGISTER_UNARY_TI_DISPATCH(special_log_ndtr);
 
 // Stub and kernel names differ: special_erfcx_stub runs the "erfcx" kernel.
 static void erfcx_kernel(TensorIteratorBase& iter) {
""")


def test_special_opinfo_decorators_removed(log_ndtr_dry):
    assert_expected_inline(file_diff(log_ndtr_dry, SPECIAL), """\
@@ -38,10 +38,6 @@
         dtypesIfMPS=all_types_and(torch.bool),
         supports_forward_ad=True,
         supports_fwgrad_bwgrad=True,
-        skips=(
-            # special_log_ndtr is not implemented for the MPS device
-            DecorateInfo(unittest.expectedFailure, "TestCommon", device_type="mps"),
-        ),
     ),
     UnaryUfuncInfo(
         "special.erfcx",
@@ -65,20 +61,5 @@
         "_refs.special.log_ndtr",
         torch_opinfo_name="special.log_ndtr",
         op_db=op_db,
-        skips=(
-            # special_log_ndtr is not implemented for the MPS device
-            DecorateInfo(
-                unittest.expectedFailure,
-                "TestCommon",
-                "test_python_ref",
-                device_type="mps",
-            ),
-            DecorateInfo(
-                unittest.expectedFailure,
-                "TestCommon",
-                "test_python_ref_torch_fallback",
-                device_type="mps",
-            ),
-        ),
     ),
 ]

""")


def test_body_option_replaces_translation(mini_root):
    result = porter("new-op", "heaviside", "--dry-run", "--body", "a > 0 ? 1 : (a == 0 ? b : 0)",
                    root=mini_root)
    assert result.code == 0, result.err
    functor = added_lines(file_diff(result.out, BINARY_METAL))
    assert_expected_inline(functor, """\
+struct heaviside_functor {
+  template <typename T>
+  inline T operator()(const T a, const T b) {
+    return static_cast<T>(a > 0 ? 1 : (a == 0 ? b : 0));
+  }
+};
+
+REGISTER_FLOAT_BINARY_OP(heaviside);
+REGISTER_INTEGER_BINARY_OP(heaviside);
""")


def test_untranslatable_lambda_gives_failing_skeleton(mini_root):
    """No body: the port is incomplete (exit 1, nothing written, --body named); written only
    with --allow-incomplete, still exit 1, naming the tests that fail on a Mac."""
    before = snapshot(mini_root)
    refused = porter("new-op", "special_ndtri", root=mini_root)
    assert refused.code == 1 and snapshot(mini_root) == before
    assert refused.err.startswith("porter: error: incomplete port of special_ndtri, nothing written: "
                                  "missing the body of special_ndtri_functor")
    assert "--body EXPR (in x)" in refused.err
    result = porter("new-op", "special_ndtri", "--dry-run", "--allow-incomplete", root=mini_root)
    assert result.code == 1, result.err
    added = " ".join(line[1:].strip() for line in file_diff(result.out, UNARY_METAL).splitlines()
                     if line.startswith("+"))
    assert ('static_assert( sizeof(T) == 0, "porter: write the Metal body of special_ndtri_functor");'
            in added)
    assert "WARNING: incomplete port; on a Mac these fail: every kernel of" in result.err


# --- end to end -----------------------------------------------------------------------------

@pytest.mark.parametrize("op,files", [
    ("heaviside", {YAML, BINARY_METAL, BINARY_MM, COMMON_MPS, CMI}),
    ("special_log_ndtr", {YAML, UNARY_METAL, UNARY_MM, COMMON_MPS, SPECIAL}),
])
@pytest.mark.parametrize("tree", ["mini_root", "real_root"])
@pytest.mark.slow
def test_end_to_end(op, files, tree, request):
    root = request.getfixturevalue(tree)
    git_init(root)
    before = snapshot(root)

    dry = porter("new-op", op, "--dry-run", root=root)
    assert dry.code == 0, dry.err
    assert snapshot(root) == before, "a dry run wrote to the tree"

    applied = porter("new-op", op, root=root)
    assert applied.code == 0, applied.err
    after = snapshot(root)
    assert set(changed_files(before, after)) == files

    # The dry-run diff is exactly what the real run wrote.
    subprocess.run(["git", "stash", "-q"], cwd=root, check=True)
    patch = dry.out[dry.out.index("--- a/"):dry.out.rindex("\ndry run:")]
    subprocess.run(["git", "apply", "-"], cwd=root, input=patch, text=True, check=True)
    assert snapshot(root) == after

    assert parse_with_torchgen(root) > 0
    again = porter("new-op", op, root=root)
    assert again.code == 0 and "nothing to do" in again.out
    assert snapshot(root) == after


def test_half_applied_port_is_completed(mini_root):
    yaml_path = mini_root / YAML
    text = yaml_path.read_text()
    yaml_path.write_text(text.replace("CPU, CUDA: heaviside_out", "CPU, CUDA, MPS: heaviside_out"))
    result = porter("new-op", "heaviside", root=mini_root)
    assert result.code == 0, result.err
    assert f"identical  {YAML}" in result.out
    assert "update  " + BINARY_METAL in result.out
    assert porter("new-op", "heaviside", root=mini_root).out.splitlines()[0].endswith("nothing to do")


def test_json_output(mini_root):
    result = porter("new-op", "heaviside", "--dry-run", "--json", root=mini_root)
    data = json.loads(result.out)
    assert data["ok"] and data["kind"] == "binary" and data["functor"] == "cpu-lambda"
    assert {f["path"] for f in data["files"] if f["status"] == "update"} >= {YAML, BINARY_METAL}


def test_already_native_op_is_nothing_to_do(mini_root):
    result = porter("new-op", "atan2", root=mini_root)
    assert (result.code, result.out.splitlines()[0]) == (0, "porter new-op atan2: nothing to do")


# --- bad input: one line, exit 2, nothing touched --------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["heavisde"], "unknown operator 'heavisde': no '- func: heavisde' entry (did you mean heaviside?)"),
    (["linalg_svd"], "'linalg_svd' is not an elementwise TensorIterator op"),
    (["sign"], "'sign' already runs on MPS through MPSGraph"),
    (["bad name!"], "'bad name!' is not an operator name"),
])
def test_bad_input(mini_root, args, message):
    before = snapshot(mini_root)
    result = porter("new-op", *args, root=mini_root)
    assert result.code == 2
    assert result.out == "" and len(result.err.strip().splitlines()) == 1
    assert message in result.err
    assert snapshot(mini_root) == before


def test_malformed_yaml_row_is_reported_with_line(mini_root):
    yaml_path = mini_root / YAML
    text = yaml_path.read_text()
    yaml_path.write_text(text.replace("  structured_inherits: TensorIteratorBase\n  device_check: NoCheck   # TensorIterator\n  dispatch:\n    CPU, CUDA: heaviside_out",
                                      "  structured_inherits: TensorIteratorBase\n  device_check: NoCheck   # TensorIterator\n  dispatch:\n    CPU, CUDA: heaviside_out\n   bad: [indent"))
    before = snapshot(mini_root)
    result = porter("new-op", "heaviside", root=mini_root)
    assert result.code == 2, result.out
    assert result.err.startswith(f"porter: error: {YAML}:")
    assert snapshot(mini_root) == before


@pytest.mark.parametrize("body,says", [
    ("", "is empty"),
    ("a +", "ends in '+'"),
    ("* a", "starts with '*'"),
    ("max(a, b", "has an unclosed '('"),
    ("x * 2", "uses x, but the functor's arguments are a and b"),
    ("float t = a; return t", "holds statements"),
])
def test_a_broken_body_is_refused_before_anything_is_written(mini_root, body, says):
    before = snapshot(mini_root)
    result = porter("new-op", "heaviside", "--body", body, root=mini_root)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"porter: error: --body {body!r} for heaviside {says}")
    assert result.err.count("\n") == 1 and "e.g. --body 'a > b ? a : b'" in result.err
    assert snapshot(mini_root) == before


def test_an_unknown_option_points_at_the_commands_own_help(mini_root):
    result = porter("new-op", "heaviside", "--dry-rnu", root=mini_root)
    assert result.code == 2
    assert result.err == ("porter: error: unrecognized arguments: --dry-rnu "
                          "(did you mean --dry-run? see `porter new-op --help`)\n")


def test_not_a_checkout(tmp_path):
    result = porter("new-op", "heaviside", root=tmp_path)
    assert result.code == 2 and "is not a PyTorch checkout" in result.err


def test_a_reader_that_goes_away_stops_porter_quietly(mini_root):
    # `porter new-op OP --dry-run | head`: the pipe closes before porter prints its diff
    run = subprocess.Popen([sys.executable, "-m", "porter", "new-op", "heaviside", "--dry-run",
                            "--root", str(mini_root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run.stdout.close()
    err = run.stderr.read().decode()
    assert run.wait() == 141 and err == "", err       # 128 + SIGPIPE, as a shell reports it




# --- what resolve refuses in torch 2.13's real yaml ------------------------------------------

@pytest.mark.parametrize("op,says", [
    ("mean", "'mean' is not an elementwise TensorIterator op: porter ports ops whose CPU/CUDA "
             "kernel is a structured TensorIterator DispatchStub"),                      # a reduction
    # min.unary_out carries the yaml's `# TensorIterator` comment, which once passed it as unary
    ("min", "'min' is not an elementwise TensorIterator op"),
    # a backward op whose stub hands its kernel a bool (elu_backward's is_result picks the
    # formula): a params-struct field porter does not write
    ("elu_backward", "'elu_backward': elu_backward_stub hands its kernel the bool is_result: porter "
                     "passes Scalar and float arguments to a Metal kernel"),
    # scalar-wearing ops that are not one functor (issue 13 item 4)
    ("glu", "'glu' works along a dimension of its input (`int dim=-1`), not one functor"),
    ("mse_loss", "'mse_loss' reduces its result (`int reduction=Mean`): its kernel is an elementwise "
                 "part plus a reduction on the host, not one functor"),
    # three tensors and a Scalar: a ternary kernel, by migrate-from-mpsgraph (tests/test_ternary_ports.py)
    ("addcmul", "'addcmul' already runs on MPS through MPSGraph (aten/src/ATen/native/"
                "native_functions.yaml:9216) (use porter migrate-from-mpsgraph addcmul)"),
    ("gelu", "'gelu' takes a str argument (approximate) that picks its kernel"),
    ("add", "'add' has CPU and CUDA kernels generated from its `ufunc_inner_loop`, with no "
            "DispatchStub for MPS to join"),
    # the stub's declared type decides what the host receives: both signatures quoted
    ("clamp", "'clamp': the op takes 2 scalar argument(s), the stub's kernel 0: clamp.out(Tensor self, "
              "Scalar? min=None, Scalar? max=None, *, Tensor(a!) out) vs clamp_tensor_fn = "
              "void (*)(TensorIteratorBase&) (aten/src/ATen/native/TensorCompare.h:"),
])
def test_ops_with_arguments_a_functor_cannot_take_are_refused(real_tree_template, op, says):
    result = porter("new-op", op, "--dry-run", root=real_tree_template)
    assert result.code == 2 and says in result.err, result.err


@pytest.mark.slow
def test_a_hand_written_functor_that_cannot_take_the_tests_dtypes_is_refused(real_tree_template):
    """The fixture's BinaryKernel.metal has upstream's complex-only mul_functor (float2, half2):
    porter registers the dtypes mul's MPS test sends, the build shows the functor does not take
    them, and the port is refused naming them and the edit that supplies them (incomplete: 1)."""
    result = porter("new-op", "mul", "--dry-run", root=real_tree_template)
    assert result.code == 1, result.err
    assert_expected_inline(result.err.replace(BINARY_METAL, "BinaryKernel.metal"), """\
porter: error: BinaryKernel.metal: mul_functor has no kernel for float32, float16, bfloat16, bool, uint8, int8, int16, int32, int64, which mul's MPS test sends, and does not build for them (BinaryKernel.metal:81: member reference base type 'const float' is not a structure or union); nothing was written (give mul_functor an overload for them and register them by hand, or xfail those dtypes in common_mps.py)
""")


def test_a_rerun_registers_the_dtypes_a_port_lacks(real_root):
    """An earlier port whose registrations miss dtypes the MPS test sends (an integer group
    deleted by hand here): the rerun adds them, with the file's own macro, beside the others;
    the build before writing proves the functor takes them; a third run has nothing to do."""
    git_init(real_root)
    assert porter("new-op", "heaviside", root=real_root).code == 0
    metal = real_root / BINARY_METAL
    full = metal.read_text()
    metal.write_text(full.replace("REGISTER_INTEGER_BINARY_OP(heaviside);\n", ""))
    subprocess.run(["git", "commit", "-qam", "gap"], cwd=real_root, check=True)
    again = porter("new-op", "heaviside", root=real_root)
    assert again.code == 0, again.err
    assert metal.read_text() == full
    assert ("heaviside_functor in aten/src/ATen/native/mps/kernels/BinaryKernel.metal was registered "
            "for bfloat, float, half only; heaviside's MPS test also sends bool, uint8, int8, int16, "
            "int32, int64: registered those too") in again.err
    assert "nothing to do" in porter("new-op", "heaviside", root=real_root).out


@pytest.mark.slow
def test_a_registration_under_if_0_is_no_registration(real_root):
    """Wrong on purpose: sign's bool registration put under `#if 0` (a Mac compiles none).
    Before, porter's scan counted it: `check` said nothing, `status` listed bool -> bool and a
    rerun said 'nothing to do', exit 0. Now check finds the gap and the rerun registers bool
    before the `#if 0` (not inside it, where the build before writing refused it)."""
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "sign", root=real_root).code == 0
    metal = real_root / UNARY_METAL
    line = "REGISTER_UNARY_OP(sign, bool, bool);\n"
    metal.write_text(metal.read_text().replace(line, "#if 0\n" + line + "#endif\n", 1))
    subprocess.run(["git", "commit", "-qam", "if 0"], cwd=real_root, check=True)
    check = porter("check", root=real_root)
    assert re.search(r"PORTER011 kernel-missing-dtypes: kernel 'sign' is registered for bfloat, char, "
                     r"float, half, int, long, short, uchar but the MPS test of OpInfo 'sign' "
                     r"\(\S+\) sends bool ", check.out), check.out
    assert "bool -> bool" not in porter("status", "sign", root=real_root).out
    again = porter("new-op", "sign", "--dry-run", root=real_root)
    assert again.code == 0, again.err
    assert_expected_inline(file_diff(again.out, UNARY_METAL).split("@@", 2)[2], """\

 REGISTER_UNARY_OP(sign, short, short);
 REGISTER_UNARY_OP(sign, uchar, uchar);
 REGISTER_UNARY_OP(sign, char, char);
+REGISTER_UNARY_OP(sign, bool, bool);
 #if 0
 REGISTER_UNARY_OP(sign, bool, bool);
 #endif

""")


def test_a_binary_complex_body_uses_scalar_traits_and_registers_float2_and_half2(mini_root):
    result = porter("new-op", "heaviside", "--dry-run", "--body", "a > 0 ? 1 : (a == 0 ? b : 0)",
                    "--complex-body", "a.x > 0 ? float2(1, 0) : float2(b)", root=mini_root)
    assert result.code == 0, result.err
    added = added_lines(file_diff(result.out, BINARY_METAL))
    assert_expected_inline(added, """\
+struct heaviside_functor {
+  template <typename T, enable_if_t<is_scalar_floating_point_v<T>, bool> = true>
+  inline T operator()(const T a, const T b) {
+    return static_cast<T>(a > 0 ? 1 : (a == 0 ? b : 0));
+  }
+  template <typename T, enable_if_t<is_scalar_integral_v<T>, bool> = true>
+  inline T operator()(const T a, const T b) {
+    return static_cast<T>(a > 0 ? 1 : (a == 0 ? b : 0));
+  }
+  template <typename T, enable_if_t<is_complex_v<T>, bool> = true>
+  inline T operator()(const T a, const T b) {
+    return T(a.x > 0 ? float2(1, 0) : float2(b));
+  }
+};
+
+REGISTER_FLOAT_BINARY_OP(heaviside);
+REGISTER_INTEGER_BINARY_OP(heaviside);
+REGISTER_BINARY_OP(heaviside, float2, float2);
+REGISTER_BINARY_OP(heaviside, half2, half2);
""")


def test_no_redundant_cast_in_a_body_of_plain_values(mini_root):
    """`--body 'a > b ? a : b'` is exact in T (no detour through float, no cast of a T); a
    complex body that already is a T is returned as it is, not as `T(a)`."""
    result = porter("new-op", "heaviside", "--dry-run", "--body", "a > b ? a : b",
                    "--complex-body", "a", root=mini_root)
    assert result.code == 0, result.err
    added = added_lines(file_diff(result.out, BINARY_METAL))
    assert_expected_inline(added, """\
+struct heaviside_functor {
+  template <typename T, enable_if_t<is_scalar_floating_point_v<T>, bool> = true>
+  inline T operator()(const T a, const T b) {
+    return a > b ? a : b;
+  }
+  template <typename T, enable_if_t<is_scalar_integral_v<T>, bool> = true>
+  inline T operator()(const T a, const T b) {
+    return a > b ? a : b;
+  }
+  template <typename T, enable_if_t<is_complex_v<T>, bool> = true>
+  inline T operator()(const T a, const T b) {
+    return a;
+  }
+};
+
+REGISTER_FLOAT_BINARY_OP(heaviside);
+REGISTER_INTEGER_BINARY_OP(heaviside);
+REGISTER_BINARY_OP(heaviside, float2, float2);
+REGISTER_BINARY_OP(heaviside, half2, half2);
""")
    assert "float(float(" not in result.out


@pytest.mark.parametrize(("op", "code", "says"), [
    # the host runs the kernel for floating types only (at::maximum_out for the rest)
    # (a dry run: it says the files are as planned, and that it tested nothing)
    pytest.param("fmax", 0, "every file is already as planned; --dry-run does not test it",
                 id="host-routes-integers-elsewhere"),
    # upstream's own registrations stand: porter does not call them wrong
    pytest.param("special_erfcx", 0, "every file is already as planned; --dry-run does not test it",
                 id="existing-registrations-not-judged"),
    # the fixture's INSTANTIATE_UNARY_KERNELS_VEC2 has no exp2: complex64 has no kernel, and
    # --complex-body cannot add an overload to an existing functor, so the edit is by hand
    pytest.param("exp2", 1, "missing a complex64 kernel (exp2 is in SUPPORTED_COMPLEX_OPS, so its MPS "
                 "test sends complex64): a complex overload of the existing exp2_functor and its "
                 "float2/half2 registrations, written by hand", id="complex-gap-is-a-hand-edit"),
])
def test_a_rerun_on_an_already_registered_kernel(real_tree_template, op, code, says):
    result = porter("new-op", op, "--dry-run", root=real_tree_template)
    assert result.code == code, result.err
    assert says in result.out + result.err


@pytest.mark.slow
def test_a_port_without_numpy_is_written_and_untested_not_red(mini_root, tmp_path):
    # without numpy, torch warned "Failed to initialize NumPy" and the port was called red
    # (exit 1, "table above") though nothing ran: it is an environment to fix (exit 2)
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['numpy'] = None\n")
    env = {"PYTHONPATH": f"{tmp_path}:{repo}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for command in (["new-op", "heaviside"], ["candidates", "--verify"]):
        done = subprocess.run([sys.executable, "-m", "porter", *command, "--root", str(mini_root)],
                              env=env, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr
        assert "Failed to initialize NumPy" not in done.stderr and "red" not in done.stderr
        assert "pip install numpy" in done.stderr.splitlines()[-1]
        if command[0] == "new-op":
            assert "the files were written; heaviside was not tested" in done.stderr
            assert "heaviside" in (mini_root / BINARY_METAL).read_text()


@pytest.mark.parametrize("op,body,example", [
    # a scalar op's scalars are functor arguments too: the hint's example is in its own names
    # (the build check's example table had none for three arguments: an internal error)
    ("softplus", "y", "e.g. --body 'x > beta ? x : beta'"),
    # a backward op's example passes the gradient, not the input
    ("threshold_backward", "x", "e.g. --body 'self > threshold ? grad_output : 0'"),
])
def test_a_broken_body_of_a_scalar_op_is_refused_with_an_example_in_its_own_names(
        real_root, op, body, example):
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", op, "--body", body, root=real_root)
    assert result.code == 2 and result.out == "", result.err
    assert result.err.count("\n") == 1 and example in result.err, result.err
    assert snapshot(real_root) == before


def test_ctrl_c_during_the_test_after_writing_says_the_files_are_written(mini_root, capsys,
                                                                         monkeypatch):
    """A new user's L5 (issue 36's first hour): Ctrl-C in the test that ends new-op printed only
    "porter: interrupted", though the port's files were written and stay so."""
    from porter import exit_codes, harness
    from porter.cli import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(harness, "run_after_edit", interrupted)
    capsys.readouterr()
    assert main(["new-op", "heaviside", "--root", str(mini_root)]) == exit_codes.INTERRUPTED
    err = capsys.readouterr().err
    assert ("porter: the files were written; the test of heaviside was interrupted before its "
            "verdict (`porter test heaviside --device emulate` runs it)") in err, err
    assert err.rstrip().endswith("porter: interrupted")
    assert "heaviside_functor" in (mini_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal").read_text()
