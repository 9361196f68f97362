"""porter migrate-from-mpsgraph: golden diffs for every MPSGraph shape, end to end on both trees,
refusals, and the pure deletion edits."""

from __future__ import annotations

import json
import subprocess

import pytest
from expecttest import assert_expected_inline

from porter.source.checkout import NATIVE_YAML, TAGS_YAML
from porter.port.edits import mpsgraph as graph_edit
from porter.apply.linediff import unified_diff_text
from porter.source.mpsgraph_scan import HostSource
from porter.testing.trees import fixture_root
from tests.porter_run import added_lines, changed_files, file_diff, git_init, porter, snapshot

YAML = NATIVE_YAML
UNARY_OPS = "aten/src/ATen/native/mps/operations/UnaryOps.mm"
BINARY_OPS = "aten/src/ATen/native/mps/operations/BinaryOps.mm"
UNARY_METAL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
UNARY_MM = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
FALLBACK = "aten/src/ATen/mps/MPSFallback.mm"


def migrate(root, *args):
    return porter("migrate-from-mpsgraph", *args, root=root)


def dry(root, op, *extra):
    result = migrate(root, op, "--dry-run", *extra)
    assert result.code == 0, result.err
    return result


def notes(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("note: ")]


def parse_with_torchgen(root) -> int:
    import torchgen.gen

    torchgen.gen._GLOBAL_PARSE_NATIVE_YAML_CACHE.clear()
    try:
        parsed = torchgen.gen.parse_native_yaml(str(root / YAML), str(root / TAGS_YAML))
    finally:
        torchgen.gen._GLOBAL_PARSE_NATIVE_YAML_CACHE.clear()
    return len(parsed.native_functions)


# --- golden diffs, one per shape, on the fixture checkout ----------------------------------

def test_impl_block_with_tricky_braces(mini_root):
    """sign: TORCH_IMPL_FUNC body with an ObjC block, a `// }` comment and `"}"` in a helper."""
    result = dry(mini_root, "sign")
    out = result.out
    assert "note:" not in out          # notes go to stderr
    assert_expected_inline(out.split("\n\n", 1)[0], """\
   update  aten/src/ATen/native/native_functions.yaml
   update  aten/src/ATen/native/mps/operations/UnaryOps.mm
   update  aten/src/ATen/native/mps/kernels/UnaryKernel.metal
   update  aten/src/ATen/native/mps/operations/UnaryKernel.mm""")
    assert_expected_inline(file_diff(out, YAML), """\
@@ -535,8 +535,7 @@
   structured: True
   structured_inherits: TensorIteratorBase
   dispatch:
-    CPU, CUDA: sign_out
-    MPS: sign_out_mps
+    CPU, CUDA, MPS: sign_out
     SparseCPU, SparseCUDA, SparseMPS: sign_sparse_out
   tags: pointwise
 
""")
    assert_expected_inline(file_diff(out, UNARY_OPS), """\
@@ -17,7 +17,6 @@
 #include <ATen/ops/nan_to_num_native.h>
 #include <ATen/ops/sgn_native.h>
 #include <ATen/ops/sign.h>
-#include <ATen/ops/sign_native.h>
 #include <ATen/ops/signbit_native.h>
 #include <ATen/ops/view_as_real.h>
 #endif
@@ -100,19 +99,6 @@
 (const Tensor& self, const Tensor& output) {
   mps::unary_op(self, output, "signbit_out_mps", ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
     return mps::signbit_helper(mpsGraph, inputTensor);
-  });
-}
-
-TORCH_IMPL_FUNC(sign_out_mps)(const Tensor& self, const Tensor& output) {
-  mps::unary_op(self, output, "sign_out_mps", ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
-    // Sign op is not implemented in MPS as of MacOS13.0 beta, so simulate it using clamp
-    if ([inputTensor dataType] == MPSDataTypeInt64) {
-      return [mpsGraph clampWithTensor:inputTensor
-                        minValueTensor:[mpsGraph constantWithScalar:-1 dataType:MPSDataTypeInt64]
-                        maxValueTensor:[mpsGraph constantWithScalar:1 dataType:MPSDataTypeInt64]
-                                  name:nil];
-    }
-    return [mpsGraph signWithTensor:inputTensor name:nil]; // } not the end of the block
   });
 }
 
""")
    # sgn reaches sign through the per-backend API: still compiles, now runs Metal.
    assert_expected_inline("\n".join(notes(result.err)), """\
note: aten/src/ATen/native/mps/operations/UnaryOps.mm:168: sgn_out_mps calls at::mps::sign_outf, which keeps working and now runs the Metal kernel
note: aten/src/ATen/native/mps/operations/UnaryOps.mm:167: a comment still mentions sign_out_mps, which this migration deletes: reword it
note: torch/testing/_internal/common_mps.py:73: ON_MPS_XFAILLIST['sign'] (float16) left in place; run `porter test sign --prune-xfails` to prune what passes""")


def test_wrapped_signature_helper_and_separate_rows(mini_root):
    """signbit: `TORCH_IMPL_FUNC(x)` / `(args) {` on two lines, a static helper only it uses, and
    CPU and CUDA naming the kernel on separate yaml lines."""
    out = dry(mini_root, "signbit").out
    assert_expected_inline(file_diff(out, YAML), """\
@@ -553,7 +553,7 @@
   dispatch:
     CPU: signbit_out
     CUDA: signbit_out
-    MPS: signbit_out_mps
+    MPS: signbit_out
     SparseCPU, SparseCUDA, SparseMPS: signbit_sparse_out
   tags: pointwise
 
""")
    assert_expected_inline(file_diff(out, UNARY_OPS), """\
@@ -18,7 +18,6 @@
 #include <ATen/ops/sgn_native.h>
 #include <ATen/ops/sign.h>
 #include <ATen/ops/sign_native.h>
-#include <ATen/ops/signbit_native.h>
 #include <ATen/ops/view_as_real.h>
 #endif
 
@@ -80,28 +79,7 @@
                                         name:nil];
 }
 
-// Only signbit_out_mps uses this helper.
-static MPSGraphTensor* signbit_helper(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
-  MPSGraphTensor* output;
-  // signbit is not implemented for int64 type.
-  // workaround for `Function signbitOp_i64 was not found in the library`
-  if ([inputTensor dataType] == MPSDataTypeInt64) {
-    MPSGraphTensor* zeroTensor = [mpsGraph constantWithScalar:0.0 dataType:inputTensor.dataType];
-    output = [mpsGraph lessThanWithPrimaryTensor:inputTensor secondaryTensor:zeroTensor name:nil];
-  } else {
-    output = [mpsGraph signbitWithTensor:inputTensor name:nil];
-  }
-  return castMPSTensor(mpsGraph, output, ScalarType::Bool);
-}
-
 } // namespace mps
-
-TORCH_IMPL_FUNC(signbit_out_mps)
-(const Tensor& self, const Tensor& output) {
-  mps::unary_op(self, output, "signbit_out_mps", ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
-    return mps::signbit_helper(mpsGraph, inputTensor);
-  });
-}
 
 TORCH_IMPL_FUNC(sign_out_mps)(const Tensor& self, const Tensor& output) {
   mps::unary_op(self, output, "sign_out_mps", ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
""")


def test_impl_with_helper_only_it_uses(mini_root):
    """frac: its static `mps::trunc_tensor` and the comment attached to it go too."""
    out = dry(mini_root, "frac").out
    assert_expected_inline(file_diff(out, UNARY_OPS), """\
@@ -12,7 +12,6 @@
 #include <ATen/ops/acosh_native.h>
 #include <ATen/ops/asinh_native.h>
 #include <ATen/ops/atanh_native.h>
-#include <ATen/ops/frac_native.h>
 #include <ATen/ops/logit_native.h>
 #include <ATen/ops/nan_to_num_native.h>
 #include <ATen/ops/sgn_native.h>
@@ -65,21 +64,6 @@
   }
 }
 
-// Used only by frac_out_mps in this file.
-static MPSGraphTensor* trunc_tensor(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
-  // Rounding is a no-op for integral types, and also a reasonable workaround
-  // for MPSGraph bug on Apple Silicon, that throws `Function floorOp_i64 was not found in the library`
-  if ([inputTensor dataType] & MPSDataTypeIntBit) {
-    return inputTensor;
-  }
-  auto zeroTensor = [mpsGraph constantWithScalar:0.0 dataType:inputTensor.dataType];
-  auto predicateTensor = [mpsGraph lessThanWithPrimaryTensor:inputTensor secondaryTensor:zeroTensor name:nil];
-  return [mpsGraph selectWithPredicateTensor:predicateTensor
-                         truePredicateTensor:[mpsGraph ceilWithTensor:inputTensor name:nil]
-                        falsePredicateTensor:[mpsGraph floorWithTensor:inputTensor name:nil]
-                                        name:nil];
-}
-
 // Only signbit_out_mps uses this helper.
 static MPSGraphTensor* signbit_helper(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
   MPSGraphTensor* output;
@@ -113,14 +97,6 @@
                                   name:nil];
     }
     return [mpsGraph signWithTensor:inputTensor name:nil]; // } not the end of the block
-  });
-}
-
-TORCH_IMPL_FUNC(frac_out_mps)(const Tensor& self, const Tensor& output) {
-  TORCH_CHECK(isFloatingType(self.scalar_type()), "frac_out_mps is only implemented for floating types");
-  mps::unary_op(self, output, "frac_out_mps", ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
-    auto truncTensor = mps::trunc_tensor(mpsGraph, inputTensor);
-    return [mpsGraph subtractionWithPrimaryTensor:inputTensor secondaryTensor:truncTensor name:nil];
   });
 }
 
""")


def test_macro_instance(mini_root):
    """asinh: a one-line CREATE_MPS_* instance; the macro stays (atanh still uses it)."""
    out = dry(mini_root, "asinh").out
    assert_expected_inline(file_diff(out, UNARY_OPS), """\
@@ -10,7 +10,6 @@
 #include <ATen/NativeFunctions.h>
 #else
 #include <ATen/ops/acosh_native.h>
-#include <ATen/ops/asinh_native.h>
 #include <ATen/ops/atanh_native.h>
 #include <ATen/ops/frac_native.h>
 #include <ATen/ops/logit_native.h>
@@ -131,7 +130,6 @@
     });                                                                                                     \\
   }
 
-CREATE_MPS_STRUCTURED_UNARY_TORCH_IMPL_FUNC(asinh_out_mps, asinh)
 CREATE_MPS_STRUCTURED_UNARY_TORCH_IMPL_FUNC(atanh_out_mps, atanh)
 
 // Routes a shared stub to MPSGraph: the YAML row says `CPU, CUDA, MPS: <op>_out`, but this is not Metal.
""")
    assert_expected_inline(added_lines(file_diff(out, UNARY_METAL)), """\
+struct asinh_functor {
+  template <typename T>
+  inline enable_if_t<is_scalar_floating_point_v<T>, T> operator()(const T x) {
+    return static_cast<T>(::precise::asinh(float(x)));
+  }
+  template <typename T>
+  inline enable_if_t<is_scalar_integral_v<T>, float> operator()(const T x) {
+    return operator()(static_cast<float>(x));
+  }
+};
+
+  REGISTER_UNARY_OP(asinh, DTYPE1, DTYPE0);        \\
""")


def test_hidden_stub_line_and_selector_body(mini_root):
    """acosh: shared yaml row (untouched), REGISTER_MPS_UNARY_STUB line deleted; no CPU lambda
    (macro-generated vml kernel), so the functor body comes from the selector."""
    out = dry(mini_root, "acosh").out
    assert_expected_inline(out.split("\n\n", 1)[0], """\
identical  aten/src/ATen/native/native_functions.yaml
   update  aten/src/ATen/native/mps/operations/UnaryOps.mm
   update  aten/src/ATen/native/mps/kernels/UnaryKernel.metal
   update  aten/src/ATen/native/mps/operations/UnaryKernel.mm""")
    assert_expected_inline(file_diff(out, UNARY_OPS), """\
@@ -9,7 +9,6 @@
 #include <ATen/Functions.h>
 #include <ATen/NativeFunctions.h>
 #else
-#include <ATen/ops/acosh_native.h>
 #include <ATen/ops/asinh_native.h>
 #include <ATen/ops/atanh_native.h>
 #include <ATen/ops/frac_native.h>
@@ -142,8 +141,6 @@
     });                                                                                                \\
   }                                                                                                    \\
   REGISTER_DISPATCH(func##_stub, mps_##func##_kernel)
-
-REGISTER_MPS_UNARY_STUB(acosh, acosh);
 
 static void logit_mps_impl(const Tensor& self, std::optional<double> eps, Tensor& output, const std::string& op_name) {
   std::string key = op_name + ":[" + (eps.has_value() ? std::to_string(eps.value()) : "NULL") + "]";
""")
    assert_expected_inline(added_lines(file_diff(out, UNARY_METAL)), """\
+struct acosh_functor {
+  template <typename T>
+  inline enable_if_t<is_scalar_floating_point_v<T>, T> operator()(const T x) {
+    return static_cast<T>(::precise::acosh(float(x)));
+  }
+  template <typename T>
+  inline enable_if_t<is_scalar_integral_v<T>, float> operator()(const T x) {
+    return operator()(static_cast<float>(x));
+  }
+};
+
+  REGISTER_UNARY_OP(acosh, DTYPE1, DTYPE0);        \\
""")
    data = json.loads(dry(mini_root, "acosh", "--json").out)
    assert (data["functor"], data["functor_detail"]) == (
        "mpsgraph-selector", f"MPSGraph selector acosh ({UNARY_OPS}:146)")
    assert {"path": UNARY_OPS, "line": 146, "what": "stub", "name": "acosh"} in data["removed"]


def test_no_lambda_and_many_selectors_never_trades_mpsgraph_for_a_skeleton(mini_root):
    """sgn after sign's port (sgn_out sends real inputs to sign_stub): its complex case calls
    sgn_impl, which the miniature has no cpu/zmath.h to define, and five selectors: a skeleton
    would replace working MPSGraph code, so the migration is refused (exit 1), even with
    --allow-incomplete, naming --complex-body."""
    assert migrate(mini_root, "sign", "--no-test").code == 0
    before = snapshot(mini_root)
    for extra in ((), ("--allow-incomplete",), ("--json",)):
        result = migrate(mini_root, "sgn", *extra)
        assert result.code == 1
        assert '"ok": true' not in result.out
        assert snapshot(mini_root) == before
    assert_expected_inline(result.out.strip(), """\
{"ok": false, "error": "migrate-from-mpsgraph sgn would replace a working MPSGraph implementation by a functor without a body (`sgn_impl` has no complex definition in aten/src/ATen/native/cpu/zmath.h, aten/src/ATen/native/Math.h or the CPU kernel files (CPU lambda at aten/src/ATen/native/cpu/UnaryOpsKernel.cpp:108)); nothing was written", "path": null, "line": null, "hint": "pass --complex-body EXPR (in x) with the Metal expression"}""")


def test_body_option_wins(mini_root):
    out = dry(mini_root, "acosh", "--body", "::precise::log(x + ::precise::sqrt(x * x - 1))").out
    added = " ".join(line[1:].strip() for line in file_diff(out, UNARY_METAL).splitlines()
                     if line.startswith("+"))
    assert ("return static_cast<T>( ::precise::log(float(x) + ::precise::sqrt(float(x) * float(x) - 1)));"
            in added)      # clang-format breaks the line after `static_cast<T>(`


def test_function_pair_shape_deleted_with_shared_helper():
    """logit's non-structured `Tensor& logit_out_mps` + `Tensor logit_mps` (the command refuses
    logit for its yaml; the deletion itself handles the shape)."""
    text = (fixture_root() / UNARY_OPS).read_text()
    source = HostSource(text)
    defs = source.named({"logit_out_mps", "logit_mps"})
    new, removed = graph_edit.delete_definitions(text, defs, "logit", {"logit", "logit_out", "logit_mps",
                                                                        "logit_out_mps", "logit_"})
    assert_expected_inline("".join(unified_diff_text(text, new, "a", "b"))[8:], """\
+ b
@@ -13,7 +13,6 @@
 #include <ATen/ops/asinh_native.h>
 #include <ATen/ops/atanh_native.h>
 #include <ATen/ops/frac_native.h>
-#include <ATen/ops/logit_native.h>
 #include <ATen/ops/nan_to_num_native.h>
 #include <ATen/ops/sgn_native.h>
 #include <ATen/ops/sign.h>
@@ -144,37 +143,6 @@
   REGISTER_DISPATCH(func##_stub, mps_##func##_kernel)
 
 REGISTER_MPS_UNARY_STUB(acosh, acosh);
-
-static void logit_mps_impl(const Tensor& self, std::optional<double> eps, Tensor& output, const std::string& op_name) {
-  std::string key = op_name + ":[" + (eps.has_value() ? std::to_string(eps.value()) : "NULL") + "]";
-  mps::unary_op(self, output, key, ^MPSGraphTensor*(MPSGraph* mpsGraph, MPSGraphTensor* inputTensor) {
-    MPSGraphTensor* oneTensor = [mpsGraph constantWithScalar:1.0 shape:@[ @1 ] dataType:inputTensor.dataType];
-    MPSGraphTensor* logitInputTensor = inputTensor;
-    if (eps.has_value()) {
-      MPSGraphTensor* lowTensor = [mpsGraph constantWithScalar:eps.value() shape:@[ @1 ] dataType:inputTensor.dataType];
-      MPSGraphTensor* highTensor = [mpsGraph subtractionWithPrimaryTensor:oneTensor secondaryTensor:lowTensor name:nil];
-      logitInputTensor = [mpsGraph clampWithTensor:inputTensor minValueTensor:lowTensor maxValueTensor:highTensor name:nil];
-    }
-    MPSGraphTensor* oneMinusInputTensor = [mpsGraph subtractionWithPrimaryTensor:oneTensor
-                                                                 secondaryTensor:logitInputTensor
-                                                                            name:nil];
-    MPSGraphTensor* outputTensor = [mpsGraph divisionWithPrimaryTensor:logitInputTensor
-                                                       secondaryTensor:oneMinusInputTensor
-                                                                  name:nil];
-    return [mpsGraph logarithmWithTensor:outputTensor name:nil];
-  });
-}
-
-Tensor& logit_out_mps(const Tensor& self, std::optional<double> eps, Tensor& result) {
-  logit_mps_impl(self, eps, result, "logit_out_mps");
-  return result;
-}
-
-Tensor logit_mps(const Tensor& self, std::optional<double> eps) {
-  Tensor result = at::empty(self.sizes(), ScalarType::Float, std::nullopt, kMPS, std::nullopt, std::nullopt);
-  logit_mps_impl(self, eps, result, "logit_mps");
-  return result;
-}
 
 TORCH_IMPL_FUNC(sgn_out_mps)(const Tensor& self, const Tensor& output) {
   if (!self.is_complex()) {
""")
    assert [(r.name, r.what) for r in removed] == [
        ("logit_out_mps", "function"), ("logit_mps", "function"),
        ("logit_mps_impl", "static helper"), ("ATen/ops/logit_native.h", "include")]


def test_binary_macro_keeps_header_still_needed():
    """pow: deleting `pow_tensor_tensor_out_mps` keeps pow_native.h, which pow_Scalar_out_mps needs."""
    text = (fixture_root() / BINARY_OPS).read_text()
    defs = HostSource(text).named({"pow_tensor_tensor_out_mps"})
    new, removed = graph_edit.delete_definitions(
        text, defs, "pow", {"pow_Tensor_Tensor_out", "pow_tensor_tensor_out_mps", "pow_Scalar_out",
                            "pow_Scalar_out_mps"})
    assert_expected_inline("".join(unified_diff_text(text, new, "a", "b"))[8:], """\
+ b
@@ -71,8 +71,6 @@
     return output;                                                                                    \\
   }
 
-CREATE_MPS_STRUCTURED_BINARY_OP_FUNC(pow_tensor_tensor_out_mps, power, Tensor);
-
 TORCH_IMPL_FUNC(pow_Scalar_out_mps)(const Scalar& base, const Tensor& exp, const Tensor& out) {
   if (base.equal(1.0)) {
     out.fill_(1);
""")
    assert [r.what for r in removed] == ["macro"]


def test_fallback_lines_are_dropped():
    text = ('TORCH_LIBRARY_IMPL(aten, MPS, m) {\n'
            '  m.impl("linalg_svd", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());\n'
            '  m.impl("frac.out", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());\n'
            '  m.impl("frac_", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());\n'
            '  m.impl("fractional_max_pool2d", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());\n'
            '}\n')
    new, removed = graph_edit.drop_fallbacks(text, "frac")
    assert [(r.name, r.line) for r in removed] == [("frac.out", 3), ("frac_", 4)]
    assert "linalg_svd" in new and "fractional_max_pool2d" in new
    assert '"frac.out"' not in new and '"frac_"' not in new


def test_fallback_lines_dropped_end_to_end(mini_root):
    path = mini_root / FALLBACK
    text = path.read_text()
    path.write_text(text.replace('  m.impl("logit_"', '  m.impl("frac.out", torch::CppFunction::'
                                 'makeFromBoxedFunction<&mps_fallback>());\n  m.impl("logit_"'))
    out = dry(mini_root, "frac").out
    assert_expected_inline(file_diff(out, FALLBACK), """\
@@ -14,7 +14,6 @@
   // These ops are not supported via MPS backend currently, and we fallback to run on CPU.
   m.impl("_linalg_svd.U", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());
   m.impl("linalg_svd", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());
-  m.impl("frac.out", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());
   m.impl("logit_", torch::CppFunction::makeFromBoxedFunction<&mps_fallback>());
 }
 
""")


# --- refusals: one line, exit 2, nothing touched --------------------------------------------

@pytest.mark.parametrize("op,message", [
    ("bmm", "cannot migrate 'bmm' off MPSGraph (bmm_out_mps): 'bmm' is not an elementwise "
            "TensorIterator op"),
    ("pow", "cannot migrate 'pow' off MPSGraph (pow_tensor_tensor_out_mps, pow_Scalar_out_mps): "
            "'pow': no DispatchStub declared"),
    ("heaviside", "'heaviside' has no MPS implementation to migrate (use porter new-op heaviside)"),
    ("heavisde", "unknown operator 'heavisde'"),
])
def test_refusals(mini_root, op, message):
    before = snapshot(mini_root)
    result = migrate(mini_root, op)
    assert result.code == 2 and result.out == ""
    assert len(result.err.strip().splitlines()) == 1
    assert message in result.err
    assert snapshot(mini_root) == before


def test_direct_caller_is_refused_and_named(mini_root):
    """A function calling a deleted symbol would no longer compile: refuse, name it (file:line)."""
    path = mini_root / UNARY_OPS
    text = path.read_text()
    caller = ("static void frac_twice(TensorIteratorBase& iter) {\n"
              "  structured_frac_out_mps op;\n  op.impl(iter.input(0), iter.output(0));\n}\n\n")
    path.write_text(text.replace("} // namespace at::native", caller + "} // namespace at::native"))
    before = snapshot(mini_root)
    result = migrate(mini_root, "frac")
    assert result.code == 2
    line = path.read_text().count("\n", 0, path.read_text().index("structured_frac_out_mps op")) + 1
    assert result.err.strip() == (
        f"porter: error: {UNARY_OPS}:{line}: cannot delete frac_out_mps ({UNARY_OPS}:119): frac_twice "
        "still uses structured_frac_out_mps directly (port or rewrite the caller first; porter "
        "changed nothing)")
    assert snapshot(mini_root) == before


def test_unbalanced_host_file_is_refused(mini_root):
    path = mini_root / UNARY_OPS
    path.write_text(path.read_text().replace("// } not the end of the block\n  });",
                                             "// } not the end of the block\n  "))
    before = snapshot(mini_root)
    result = migrate(mini_root, "sign")
    assert result.code == 2
    assert result.err.startswith(f"porter: error: {UNARY_OPS}: braces or parentheses do not balance")
    assert snapshot(mini_root) == before


def test_real_tree_row_and_hidden_stub_both_go(real_root):
    """torch 2.13's yaml still says `MPS: acosh_out_mps` (defined nowhere in the tree); the
    fixture's host file has the stub line: the row is shared and the line deleted, in one run."""
    result = migrate(real_root, "acosh", "--dry-run", "--json", "--allow-incomplete")
    data = json.loads(result.out)
    assert (result.code, data["ok"]) == (1, False)      # no complex64 kernel (case 4)
    assert "-    MPS: acosh_out_mps" in data["diff"] and "+    CPU, CUDA, MPS: acosh_out" in data["diff"]
    assert "-REGISTER_MPS_UNARY_STUB(acosh, acosh);" in data["diff"]
    assert data["functor"] == "mpsgraph-selector"
    assert any("names acosh_out_mps, which no" in note for note in data["notes"])


def test_already_native_is_nothing_to_do(mini_root):
    result = migrate(mini_root, "exp")
    assert (result.code, result.out) == (0, "porter migrate-from-mpsgraph exp: nothing to do\n")


def test_half_done_migration_is_completed(mini_root):
    """yaml already shared (an interrupted run, or a hand edit): the leftover impl still goes."""
    path = mini_root / YAML
    path.write_text(path.read_text().replace("    CPU, CUDA: frac_out\n    MPS: frac_out_mps\n",
                                             "    CPU, CUDA, MPS: frac_out\n"))
    out = dry(mini_root, "frac").out
    assert f"identical  {YAML}" in out
    assert "-TORCH_IMPL_FUNC(frac_out_mps)" in out and "-static MPSGraphTensor* trunc_tensor(" in out


def test_json_output(mini_root):
    data = json.loads(dry(mini_root, "signbit", "--json").out)
    assert data["ok"] and data["command"] == "migrate-from-mpsgraph" and data["functor"] == "cpu-lambda"
    assert [(r["what"], r["name"]) for r in data["removed"]] == [
        ("impl", "signbit_out_mps"), ("static helper", "signbit_helper"),
        ("include", "ATen/ops/signbit_native.h")]


# --- end to end on both trees ----------------------------------------------------------------

@pytest.mark.parametrize("op,gone,include", [
    ("sign", "TORCH_IMPL_FUNC(sign_out_mps)", "#include <ATen/ops/sign_native.h>"),
    ("asinh", "CREATE_MPS_STRUCTURED_UNARY_TORCH_IMPL_FUNC(asinh_out_mps, asinh)",
     "#include <ATen/ops/asinh_native.h>"),
])
@pytest.mark.parametrize("tree", ["mini_root", "real_root"])
@pytest.mark.slow
def test_end_to_end(op, gone, include, tree, request):
    root = request.getfixturevalue(tree)
    git_init(root)
    before = snapshot(root)
    # torch 2.13 lists asinh in SUPPORTED_COMPLEX_OPS: on the real-size tree its complex64
    # overload comes from the CPU lambda (std::asinh), with porter's float2 asinh added to
    # c10/metal/utils.h (tests/test_complex_ports.py); the miniature has no complex64 test
    utils = ["c10/metal/utils.h"] if (tree, op) == ("real_root", "asinh") else []

    planned = migrate(root, op, "--dry-run", "--json")
    assert planned.code == 0, planned.err
    assert json.loads(planned.out)["ok"] is True
    assert snapshot(root) == before, "a dry run wrote to the tree"

    applied = migrate(root, op)
    assert applied.code == 0, applied.err
    after = snapshot(root)
    assert changed_files(before, after) == sorted([YAML, UNARY_OPS, UNARY_METAL, UNARY_MM] + utils)
    host = (root / UNARY_OPS).read_text()
    assert gone not in host and include not in host
    assert f"MPS: {op}_out_mps" not in (root / YAML).read_text()
    assert parse_with_torchgen(root) > 0

    # The dry-run diff is exactly what the real run wrote.
    subprocess.run(["git", "stash", "-q"], cwd=root, check=True)
    assert snapshot(root) == before
    subprocess.run(["git", "apply", "-"], cwd=root, input=json.loads(planned.out)["diff"], text=True,
                   check=True)
    assert snapshot(root) == after

    again = migrate(root, op)
    assert (again.code, again.out.splitlines()[0]) == (0, f"porter migrate-from-mpsgraph {op}: nothing to do")
    assert snapshot(root) == after


# --- the yaml edit alone ---------------------------------------------------------------------

def _entry_text(dispatch: str) -> str:
    return ("- func: foo.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
            "  structured: True\n  structured_inherits: TensorIteratorBase\n  dispatch:\n"
            f"{dispatch}  tags: pointwise\n")


@pytest.mark.parametrize("before,after", [
    ("    CPU, CUDA, XPU: foo_out\n    MPS: foo_out_mps\n", "    CPU, CUDA, MPS, XPU: foo_out\n"),
    ("    MPS: foo_out_mps\n    CPU,CUDA: foo_out\n", "    CPU,CUDA,MPS: foo_out\n"),
    ("    CPU: foo_out\n    CUDA: foo_out\n    MPS: foo_out_mps   # graph\n",
     "    CPU: foo_out\n    CUDA: foo_out\n    MPS: foo_out\n"),
    ("    CPU, CUDA: foo_out\n    MPS, SparseMPS: foo_out_mps\n",
     "    CPU, CUDA, MPS: foo_out\n    SparseMPS: foo_out_mps\n"),
    ("    CPU, CUDA, MPS: foo_out\n", "    CPU, CUDA, MPS: foo_out\n"),
])
def test_share_mps_rows(before, after):
    from porter.port.edits.dispatch_rows import share_mps
    from porter.source.native_yaml import scan

    text = _entry_text(before)
    assert share_mps(text, scan(text)) == _entry_text(after)


def test_share_mps_refuses_without_a_shared_kernel():
    from porter.port.edits.dispatch_rows import NoSharedKernel, share_mps
    from porter.source.native_yaml import scan

    text = _entry_text("    CPU: foo_out_cpu\n    CUDA: foo_out_cuda\n    MPS: foo_out_mps\n")
    with pytest.raises(NoSharedKernel, match="no kernel shared by CPU and CUDA"):
        share_mps(text, scan(text))


def test_dropping_complex_for_a_complex_tested_op_is_incomplete(real_root):
    """torch 2.13 lists acosh in SUPPORTED_COMPLEX_OPS: its MPS test sends complex64, which the
    functor from its MPSGraph selector (the tree's CPU kernel runs at::vml, no lambda to derive
    a complex overload from) does not take: exit 1, nothing written, naming --complex-body; with
    --allow-incomplete it is written and the failing Mac test named."""
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", "acosh", root=real_root)
    assert result.code == 1 and snapshot(real_root) == before
    assert ("missing a complex64 kernel (acosh is in SUPPORTED_COMPLEX_OPS, so its MPS test "
            "sends complex64): --complex-body EXPR") in result.err
    result = porter("migrate-from-mpsgraph", "acosh", "--allow-incomplete", root=real_root)
    assert result.code == 1 and snapshot(real_root) != before
    assert "INCOMPLETE port written" in result.out
    assert "python test/test_mps.py -k test_output_match_acosh_cpu_complex64" in result.err


def test_a_shared_row_without_a_kernel_is_not_a_migration(real_tree_template):
    # torch 2.13 runs sinh natively; the fixture's host files lack its kernel: half a port
    result = migrate(real_tree_template, "sinh", "--dry-run")
    assert result.code == 2
    assert ("'sinh' has no MPSGraph implementation to migrate: its MPS row already runs sinh_out, "
            "but no host file registers a Metal kernel for sinh_stub (porter new-op sinh adds "
            "the missing kernel)") in result.err


def test_complex_body_adds_the_complex_overload_and_joins_the_vec2_macro(mini_root):
    # after sign's port, sgn's is sgn_stub's, which complex inputs alone reach: no real overload
    assert migrate(mini_root, "sign", "--no-test").code == 0
    out = dry(mini_root, "sgn",
              "--complex-body", "x.x == 0 && x.y == 0 ? float2(0, 0) : normalize(float2(x))").out
    assert_expected_inline(added_lines(file_diff(out, UNARY_METAL)), """\
+struct sgn_functor {
+  template <typename T>
+  inline enable_if_t<is_complex_v<T>, T> operator()(const T x) {
+    return T(x.x == 0 && x.y == 0 ? float2(0, 0) : normalize(float2(x)));
+  }
+};
+
+  REGISTER_UNARY_OP(sgn, DTYPE##2, DTYPE##2);     \\
""")
    assert "SUPPORTED_COMPLEX_OPS" not in out


def test_a_broken_complex_body_is_refused(mini_root):
    assert migrate(mini_root, "sign", "--no-test").code == 0
    before = snapshot(mini_root)
    result = migrate(mini_root, "sgn", "--complex-body", "float2(a.x, a.y)")
    assert result.code == 2
    assert result.err == ("porter: error: --complex-body 'float2(a.x, a.y)' for sgn uses a, but the "
                          "functor's arguments are x (pass one Metal expression in x, e.g. "
                          "--complex-body 'float2(x.x, -x.y)')\n")
    assert snapshot(mini_root) == before


def test_a_complex_body_without_a_real_body_is_not_lost_silently(mini_root):
    result = porter("new-op", "special_ndtri", "--dry-run", "--allow-incomplete", "--complex-body",
                    "float2(x)", root=mini_root)
    out = result.out
    assert ("note: --complex-body is not used with a skeleton: rerun with --body EXPR and "
            "--complex-body EXPR together") in result.err
    assert "float2(x)" not in file_diff(out, UNARY_METAL) and "SUPPORTED_COMPLEX_OPS" not in out


def test_a_non_structured_shared_function_that_runs_a_stub_migrates(mini_root):
    """logit's `logit_out` is a plain function CPU and CUDA share; it runs logit_stub on a
    TensorIterator, so MPS joins it: both MPS rows go, the MPSGraph function pair with them."""
    result = porter("migrate-from-mpsgraph", "logit", "--dry-run", "--body", "log(x / (1 - x))",
                    root=mini_root)
    assert result.code == 0, result.err
    yaml = added_lines(file_diff(result.out, "aten/src/ATen/native/native_functions.yaml"))
    assert "+    CPU, CUDA, MPS, MTIA: logit\n" in yaml and "+    CPU, CUDA, MPS: logit_out\n" in yaml
    host = added_lines(file_diff(result.out, "aten/src/ATen/native/mps/operations/UnaryKernel.mm"))
    assert "+static void logit_kernel(TensorIteratorBase& iter, const Scalar& eps) {\n" \
           "+  lib.exec_unary_kernel(iter, \"logit\", eps);\n" in host
    removed = [line for line in file_diff(result.out, UNARY_OPS).splitlines() if line.startswith("-")]
    assert any("Tensor& logit_out_mps(" in line for line in removed)


def test_a_comment_naming_the_deleted_impl_is_said_not_edited(real_root):
    """sgn_out_mps's comment "(sign_out_mps above)" outlives sign's MPSGraph code: porter names
    the line (in the file as written) and leaves that unrelated code alone."""
    git_init(real_root)
    mm = "aten/src/ATen/native/mps/operations/UnaryOps.mm"
    result = migrate(real_root, "sign")
    assert result.code == 0, result.err + result.out
    stale = [line for line in (result.out + result.err).splitlines() if "still mentions" in line]
    assert len(stale) == 1, result.out
    where = stale[0].split(": ", 1)[1].split(":")
    assert where[0] == mm and stale[0].endswith("a comment still mentions sign_out_mps, which this "
                                                "migration deletes: reword it")
    line = (real_root / mm).read_text().splitlines()[int(where[1]) - 1]
    assert "// Real inputs reuse sign's MPSGraph implementation (sign_out_mps above)." in line
    again = migrate(real_root, "sign")
    assert again.code == 0 and "nothing to do" in again.out and "still mentions" not in again.out


def test_a_namespace_the_deletion_empties_goes_one_already_empty_stays():
    # addcdiv after addcmul: its TORCH_IMPL_FUNC takes the last user of the helper, which was
    # all `namespace mps {` held; an empty block written by hand elsewhere is not porter's
    text = ("namespace at::native {\nnamespace detail {\n} // namespace detail\n\n"
            "// scope the MPS's internal methods\nnamespace mps {\n\n"
            "static void helper(const Tensor& out) {\n  out.zero_();\n}\n\n} // namespace mps\n\n"
            "TORCH_IMPL_FUNC(addcdiv_out_mps)(const Tensor& out) {\n  mps::helper(out);\n}\n\n"
            "static void kept() {}\n} // namespace at::native\n")
    defs = HostSource(text).named({"addcdiv_out_mps"})
    new, removed = graph_edit.delete_definitions(text, defs, "addcdiv", {"addcdiv_out_mps"})
    assert new == ("namespace at::native {\nnamespace detail {\n} // namespace detail\n\n"
                   "static void kept() {}\n} // namespace at::native\n")
    assert [(r.name, r.what) for r in removed] == [("addcdiv_out_mps", "impl"), ("helper", "static helper")]


def test_no_selector_note_after_a_port_that_found_its_body(mini_root):
    # threshold's body comes from its CPU kernel: "no functor body from MPSGraph either" read
    # as a failure of a port that worked
    result = dry(mini_root, "threshold")
    assert result.code == 0, result.err
    assert "+struct threshold_functor" in result.out and "MPSGraph either" not in result.out + result.err
