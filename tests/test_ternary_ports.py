"""Ops of three tensors and a Scalar (issue 22: addcmul, addcdiv) on the real-size tree: ported
off MPSGraph as upstream did (pytorch#189625), the port measured by the emulated output-match
test with reference inputs, and what makes it red.

torch 2.13's host library declares `exec_ternary_kernel(iter, name)` only: porter writes the scalar
overload from the checkout's scalar-free definition (OperationUtils.mm); a tree without that
definition (the wheel's) leaves the port incomplete (exit 1, naming the overload to write by hand). A checkout that has the overload
(upstream's, after that PR) is modelled by declaring it in the tree's MetalShaderLibrary.h."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from expecttest import assert_expected_inline

from tests.porter_run import file_diff, git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

METAL = "aten/src/ATen/native/mps/kernels/PointwiseOps.metal"
HOST = "aten/src/ATen/native/mps/operations/PointwiseOps.mm"
INDEXING = "c10/metal/indexing.h"
LIBRARY = "aten/src/ATen/native/mps/MetalShaderLibrary.h"
ADDCMUL = {"uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "complex64"}
ADDCDIV = {"float16", "bfloat16", "float32", "complex64"}


def _declare_scalar_overload(root) -> None:
    """The host library as upstream has it after its addcmul port: exec_ternary_kernel with a
    scalar beside the plain one."""
    path = root / LIBRARY
    text = path.read_text()
    plain = "void exec_ternary_kernel(TensorIteratorBase& iter, const std::string& name);"
    assert plain in text
    path.write_text(text.replace(plain, plain + "\n  void exec_ternary_kernel(TensorIteratorBase& iter, "
                                 "const std::string& name, const c10::Scalar& alpha, "
                                 "c10::ScalarType alpha_type);"))


def _outcomes(root, op: str, *dtypes: str) -> tuple[int, dict]:
    extra = [a for d in dtypes for a in ("--dtype", d)]
    result = porter("test", op, "--device", "emulate", "--reference-inputs", "--json", *extra, root=root)
    assert result.out.startswith("{"), result.err
    report = json.loads(result.out)
    return result.code, {_key(o, c): c["outcome"] for o in report["ops"] for c in o["dtypes"]}


def _key(row: dict, case: dict):
    """dtype for upstream's samples, (group, dtype) for porter's reference inputs and shapes: a
    shapes row has reference false too, and keyed by dtype alone it would overwrite the
    samples' row (a value-dropping functor passes the shapes, whose value is the default 1)."""
    group = "shapes" if row["shapes"] else "reference" if row["reference"] else None
    return (group, case["dtype"]) if group else case["dtype"]


def _all_pass(dtypes) -> dict:
    return {d: "pass" for d in dtypes} | {(g, d): "pass" for g in ("reference", "shapes") for d in dtypes}


@pytest.fixture
def ported(real_root):
    """The real-size tree with the library overload, addcmul and addcdiv migrated (committed)."""
    _declare_scalar_overload(real_root)
    git_init(real_root)
    for op in ("addcmul", "addcdiv"):
        result = porter("migrate-from-mpsgraph", op, root=real_root)
        assert result.code == 0, result.err
        subprocess.run(["git", "add", "-A"], cwd=real_root, check=True)
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", op],
                       cwd=real_root, check=True)
    return real_root


@pytest.mark.slow
def test_addcmul_port_is_upstreams_shape(real_root):
    _declare_scalar_overload(real_root)
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "addcmul", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert_expected_inline(file_diff(result.out, METAL), """\
@@ -0,0 +1,28 @@
+#include <c10/metal/indexing.h>
+#include <c10/metal/utils.h>
+#include <metal_stdlib>
+using namespace metal;
+
+// from the CPU lambda at aten/src/ATen/native/cpu/PointwiseOpsKernel.cpp:20: at
+// opmath, in the CPU's order (no fma: the CPU rounds each step)
+struct addcmul_functor {
+  template <typename T, typename A>
+  inline T operator()(const T a, const T b, const T c, const A alpha) {
+    using op_t = c10::metal::opmath_t<T>;
+    return static_cast<T>(
+        op_t(a) +
+        c10::metal::mul(
+            c10::metal::mul(static_cast<op_t>(alpha), op_t(b)), op_t(c)));
+  }
+};
+
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, float, float, float);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, half, float, half);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, bfloat, float, bfloat);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, long, long, long);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, int, int, int);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, short, short, short);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, char, char, char);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, uchar, uchar, uchar);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, float2, float2, float2);
+REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, half2, float2, half2);

""")
    assert_expected_inline(file_diff(result.out, HOST), """\
@@ -4,10 +4,18 @@
 // and each op's TORCH_IMPL_FUNC calls it. Written for porter's tests.
 #define TORCH_ASSERT_ONLY_METHOD_OPERATORS
 #include <ATen/native/mps/OperationUtils.h>
+#include <ATen/OpMathType.h>
+#include <ATen/native/PointwiseOps.h>
+#include <ATen/native/TensorIterator.h>
 
 #include <ATen/ops/addcdiv_native.h>
-#include <ATen/ops/addcmul_native.h>
 namespace at::native {
+
+#ifndef PYTORCH_JIT_COMPILE_SHADERS
+static auto& lib = mps::MetalShaderLibrary::getBundledLibrary();
+#else
+#include <ATen/native/mps/PointwiseOps_metallib.h>
+#endif
 // scope the MPS's internal methods to not expose them to at::native
 namespace mps {
 
@@ -75,15 +83,15 @@
 
 } // namespace mps
 
-// APIs exposed to at::native scope
-TORCH_IMPL_FUNC(addcmul_out_mps)
-(const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, const Scalar& value, const Tensor& output) {
-  mps::addc_mul_div_out_mps(self, tensor1, tensor2, value, output, false, "addcmul_out_mps");
-}
-
 TORCH_IMPL_FUNC(addcdiv_out_mps)
 (const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, const Scalar& value, const Tensor& output) {
   mps::addc_mul_div_out_mps(self, tensor1, tensor2, value, output, true, "addcdiv_out_mps");
 }
 
+static void addcmul_mps_kernel(TensorIteratorBase& iter, const Scalar& value) {
+  // the scalar at opmath, as the CPU kernel converts it (float for half/bfloat16)
+  lib.exec_ternary_kernel(iter, "addcmul", value, at::toOpMathType(iter.common_dtype()));
+}
+
+REGISTER_DISPATCH(addcmul_stub, &addcmul_mps_kernel);
 } // namespace at::native
""")
    indexing = file_diff(result.out, INDEXING)
    assert "+#define REGISTER_OPMATH_TERNARY_ALPHA_OP(NAME, DTYPEI, DTYPEA, DTYPEO)" in indexing
    assert "+kernel void ternary_alpha_dense(" in indexing


@pytest.mark.slow
def test_ported_addcmul_and_addcdiv_pass_every_dtype_their_mps_test_sends(ported):
    code, rows = _outcomes(ported, "addcmul")
    assert (code, rows) == (0, _all_pass(ADDCMUL))
    # addcdiv's complex64 edge values are red, as upstream's own kernel (the same functor) would
    # be on a Mac: c10::metal::div of complex numbers forms x * conj(y) unscaled, which overflows
    # for t1 near 1e38 where the CPU's c10::complex division scales and stays finite
    result = porter("test", "addcdiv", "--device", "emulate", "--reference-inputs", "--json",
                    root=ported)
    report = json.loads(result.out)
    rows = {_key(o, c): c for o in report["ops"] for c in o["dtypes"]}
    assert result.code == 1 and {k: r["outcome"] for k, r in rows.items()} == \
        _all_pass(ADDCDIV) | {("reference", "complex64"): "fail"}, rows
    [row] = rows["reference", "complex64"]["mismatches"]
    assert row["device"] == "-inf+infj" and "e+37" in row["cpu"], row
    for op in ("addcmul", "addcdiv"):
        again = porter("migrate-from-mpsgraph", op, root=ported)
        assert (again.code, again.out.strip()) == (0, f"porter migrate-from-mpsgraph {op}: nothing to do")


def test_torch_2_13_host_library_makes_the_port_incomplete(real_root):
    # its MetalShaderLibrary.h has no exec_ternary_kernel taking a scalar: the host function
    # would not build on a Mac, so nothing is written and the overload is named
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "addcmul", root=real_root)
    assert result.code == 1
    assert result.err.startswith("porter: error: incomplete port of addcmul, nothing written: "
                                 "missing a scalar overload of exec_ternary_kernel (" + LIBRARY)
    assert "void exec_ternary_kernel(TensorIteratorBase& iter, const std::string& name, " \
           "const c10::Scalar& alpha, c10::ScalarType alpha_type)" in result.err
    assert subprocess.run(["git", "status", "--porcelain"], cwd=real_root, capture_output=True,
                          text=True).stdout == ""


# The library's scalar-free definition in torch 2.13's shape (OperationUtils.mm), in our words:
# the 32-bit split, the two kernel names (cast and not), the tensors bound, then from buffer 4
# the cast sizes and types, or the strided shape and strides.
OPERATION_UTILS = "aten/src/ATen/native/mps/OperationUtils.mm"
# as upstream's file begins: the includes first, and code that builds (porter parses a `.mm` file
# a branch changes, and its base's text: an error of the port's copy that the base's lines do
# not have is the port's)
SCALAR_FREE_DEFINITION = """#include <ATen/native/mps/OperationUtils.h>

namespace at::native::mps {

void MetalShaderLibrary::exec_ternary_kernel(TensorIteratorBase& iter, const std::string& name) {
  if (iter.numel() == 0) {
    return;
  }
  if (!iter.can_use_32bit_indexing()) {
    for (auto&& sub_iter : iter.with_32bit_indexing()) {
      exec_binary_kernel(sub_iter, name);
    }
    return;
  }
  Tensor input = iter.input(0), other1 = iter.input(1), other2 = iter.input(2), out = iter.output();
  const auto cast_needed = input.scalar_type() != other1.scalar_type() || input.scalar_type() != other2.scalar_type();
  const auto suffix = iter.is_contiguous() ? "dense" : "strided";
  const auto kernel_name = cast_needed
      ? fmt::format("{}_{}_cast_{}", name, suffix, scalarToMetalTypeString(out))
      : fmt::format("{}_{}_{}_{}", name, suffix, scalarToMetalTypeString(out), scalarToMetalTypeString(input));
  dispatch_sync_with_rethrow(getCurrentMPSStream()->queue(), ^() {
    @autoreleasepool {
      auto computeEncoder = getCurrentMPSStream()->commandEncoder();
      auto pso = getPipelineStateForFunc(kernel_name);
      [computeEncoder setComputePipelineState:pso];
      bind_iter_tensors(computeEncoder, iter);
      if (iter.is_contiguous()) {
        if (cast_needed) {
          std::array<int, 3> sizes = {static_cast<int>(c10::elementSize(input.scalar_type())),
                                      static_cast<int>(c10::elementSize(other1.scalar_type())),
                                      static_cast<int>(c10::elementSize(other2.scalar_type()))};
          std::array<int, 3> types = {static_cast<int>(input.scalar_type()),
                                      static_cast<int>(other1.scalar_type()),
                                      static_cast<int>(other2.scalar_type())};
          mtl_setArgs<4>(computeEncoder, sizes, types);
        }
      } else {
        std::array<int, 4> types = {static_cast<int>(input.scalar_type()),
                                    static_cast<int>(other1.scalar_type()),
                                    static_cast<int>(other2.scalar_type()),
                                    static_cast<int>(out.scalar_type())};
        mtl_setArgs<4>(computeEncoder, iter.shape(), iter.strides(0), iter.strides(1), iter.strides(2), iter.ndim(), types);
      }
      mtl_dispatch1DJob(computeEncoder, pso, iter.numel());
    }
  });
}

} // namespace at::native::mps
"""


@pytest.mark.slow
def test_porter_writes_the_missing_library_overload_from_the_checkouts_own(real_root, tmp_path, monkeypatch):
    (real_root / OPERATION_UTILS).write_text(SCALAR_FREE_DEFINITION)
    git_init(real_root)
    dry = porter("migrate-from-mpsgraph", "addcmul", "--dry-run", root=real_root)
    assert dry.code == 0, dry.err
    assert f"   update  {LIBRARY}" in dry.out and f"   update  {OPERATION_UTILS}" in dry.out, dry.out
    result = porter("migrate-from-mpsgraph", "addcmul", root=real_root)
    assert result.code == 0, result.err
    header = (real_root / LIBRARY).read_text()
    assert re.search(r"void exec_ternary_kernel\(\s*TensorIteratorBase& iter,\s*const std::string& name,"
                     r"\s*const c10::Scalar& alpha,\s*c10::ScalarType alpha_type\);", header), header
    added = (real_root / OPERATION_UTILS).read_text()[len(SCALAR_FREE_DEFINITION) - 34:]
    assert_expected_inline(added, """\
}

void MetalShaderLibrary::exec_ternary_kernel(TensorIteratorBase& iter,
                                             const std::string& name,
                                             const c10::Scalar& alpha,
                                             c10::ScalarType alpha_type) {
  if (iter.numel() == 0) {
    return;
  }
  if (!iter.can_use_32bit_indexing()) {
    for (auto&& sub_iter : iter.with_32bit_indexing()) {
      exec_ternary_kernel(sub_iter, name, alpha, alpha_type);
    }
    return;
  }
  Tensor input = iter.input(0), other1 = iter.input(1), other2 = iter.input(2), out = iter.output();
  const auto cast_needed = input.scalar_type() != other1.scalar_type() || input.scalar_type() != other2.scalar_type();
  const auto suffix = iter.is_contiguous() ? "dense" : "strided";
  const auto kernel_name = cast_needed
      ? fmt::format("{}_{}_cast_{}_{}", name, suffix, scalarToMetalTypeString(out), scalarToMetalTypeString(alpha_type))
      : fmt::format("{}_{}_{}_{}_{}",
                    name,
                    suffix,
                    scalarToMetalTypeString(out),
                    scalarToMetalTypeString(input),
                    scalarToMetalTypeString(alpha_type));
  dispatch_sync_with_rethrow(getCurrentMPSStream()->queue(), ^() {
    @autoreleasepool {
      auto computeEncoder = getCurrentMPSStream()->commandEncoder();
      auto pso = getPipelineStateForFunc(kernel_name);
      [computeEncoder setComputePipelineState:pso];
      bind_iter_tensors(computeEncoder, iter);
      // the scalar, at the type the host names, after the output and the three operands
      mtl_setArgs<4>(computeEncoder, getMPSScalar(alpha, alpha_type));
      if (iter.is_contiguous()) {
        if (cast_needed) {
          std::array<int, 3> sizes = {static_cast<int>(c10::elementSize(input.scalar_type())),
                                      static_cast<int>(c10::elementSize(other1.scalar_type())),
                                      static_cast<int>(c10::elementSize(other2.scalar_type()))};
          std::array<int, 3> types = {static_cast<int>(input.scalar_type()),
                                      static_cast<int>(other1.scalar_type()),
                                      static_cast<int>(other2.scalar_type())};
          mtl_setArgs<5>(computeEncoder, sizes, types);
        }
      } else {
        std::array<int, 4> types = {static_cast<int>(input.scalar_type()),
                                    static_cast<int>(other1.scalar_type()),
                                    static_cast<int>(other2.scalar_type()),
                                    static_cast<int>(out.scalar_type())};
        mtl_setArgs<5>(
            computeEncoder, iter.shape(), iter.strides(0), iter.strides(1), iter.strides(2), iter.ndim(), types);
      }
      mtl_dispatch1DJob(computeEncoder, pso, iter.numel());
    }
  });
}

} // namespace at::native::mps
""")
    code, rows = _outcomes(real_root, "addcmul", "float32", "int32")
    assert (code, rows) == (0, _all_pass({"float32", "int32"}))


def test_a_library_definition_porter_cannot_read_keeps_the_port_incomplete(real_root):
    # the scalar-free function binds its sizes by hand: porter does not guess where the scalar goes
    (real_root / OPERATION_UTILS).write_text(SCALAR_FREE_DEFINITION.replace(
        "mtl_setArgs<4>(computeEncoder, sizes, types);", "[computeEncoder setBytes:&sizes length:12 atIndex:4];"))
    git_init(real_root)
    result = porter("migrate-from-mpsgraph", "addcmul", root=real_root)
    assert result.code == 1
    assert "porter cannot write it: exec_ternary_kernel(iter, name) binds arguments after its tensors " \
           "other than from buffer 4 (mtl_setArgs<4>)" in result.err, result.err
    assert subprocess.run(["git", "status", "--porcelain"], cwd=real_root, capture_output=True,
                          text=True).stdout == ""


@pytest.mark.slow
def test_a_port_written_anyway_is_red_for_want_of_the_overload(real_root):
    git_init(real_root)
    written = porter("migrate-from-mpsgraph", "addcmul", "--allow-incomplete", root=real_root)
    assert written.code == 1
    code, rows = _outcomes(real_root, "addcmul", "float32", "int32")
    assert code == 1 and set(rows.values()) == {"fail"}


def _functor_body(root, op: str, expression: str) -> None:
    path = root / METAL
    text = path.read_text()
    start = text.index(f"struct {op}_functor")
    ret = text.index("return static_cast<T>(", start)
    end = text.index(";\n", ret)
    path.write_text(text[:ret] + f"return static_cast<T>({expression})" + text[end:])


@pytest.mark.slow
def test_a_functor_that_drops_the_value_is_red(ported):
    _functor_body(ported, "addcmul", "op_t(a) + c10::metal::mul(op_t(b), op_t(c))")
    code, rows = _outcomes(ported, "addcmul", "float32", "int64", "complex64")
    # the samples pass value=3.14 (3 for integers)
    assert code == 1 and {rows[d] for d in ("float32", "int64", "complex64")} == {"fail"}


@pytest.mark.slow
def test_a_registration_missing_a_dtype_the_test_sends_is_red(ported):
    path = ported / METAL
    path.write_text(path.read_text().replace(
        "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, int, int, int);\n", ""))
    code, rows = _outcomes(ported, "addcmul", "int32", "int64")
    assert (code, rows["int32"], rows["int64"]) == (1, "fail", "pass")
    check = porter("check", root=ported)
    assert check.code == 1 and re.search(r"PointwiseOps\.metal:\d+: PORTER011 kernel-missing-dtypes: "
                                         r"kernel 'addcmul' .* sends int32", check.out), check.out
    # new-op finishes the port: it registers it again, and says so
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "int dropped"],
                   cwd=ported, check=True)
    again = porter("new-op", "addcmul", root=ported)
    assert again.code == 0 and "lacked registrations for int" in again.out + again.err, again.out
    assert "REGISTER_OPMATH_TERNARY_ALPHA_OP(addcmul, int, int, int);" in path.read_text()


@pytest.mark.slow
def test_a_header_without_the_ternary_alpha_macro_does_not_build(ported):
    # the prelude models the macro only where the checkout's indexing.h defines it, as Metal
    subprocess.run(["git", "checkout", "HEAD~2", "--", INDEXING], cwd=ported, check=True)
    code, rows = _outcomes(ported, "addcmul", "float32")
    assert (code, rows["float32"]) == (1, "fail")


def _emulated(root, op, *tensors, value):
    """The ported kernel's result on explicit tensors, through the emulator's host model."""
    from types import SimpleNamespace

    from porter.emulate.emulator_device import EmulateBackend

    backend = EmulateBackend(root)
    try:
        sample = SimpleNamespace(input=tensors[0], args=tensors[1:], kwargs={"value": value})
        return backend.run(SimpleNamespace(name=op, variant_test_name=""), sample, tensors[0].dtype)
    finally:
        backend.close()


@pytest.mark.slow
def test_the_value_multiplies_tensor1_first_as_on_cpu(ported):
    # value * t1 * t2 in that order: 1e-20 * 1e20 * 1e20 is 1e20 in float32, while t1 * t2
    # first overflows to inf; no upstream sample or reference input reaches it
    torch = pytest.importorskip("torch")
    self, t1, t2 = torch.tensor([1.0, -2.0]), torch.tensor([1e20, 3.0]), torch.tensor([1e20, 0.5])
    want = torch.addcmul(self, t1, t2, value=1e-20)
    assert torch.isfinite(want).all()
    torch.testing.assert_close(_emulated(ported, "addcmul", self, t1, t2, value=1e-20), want)
    _functor_body(ported, "addcmul",
                  "op_t(a) + c10::metal::mul(c10::metal::mul(op_t(b), op_t(c)), static_cast<op_t>(alpha))")
    got = _emulated(ported, "addcmul", self, t1, t2, value=1e-20)
    assert not torch.isfinite(got[0])



@pytest.mark.slow
def test_a_body_reads_as_the_cpu_form_and_metal_star_on_float2_is_red(real_root):
    # --body in a, b, c and the schema's scalar: a sum of products is read as the CPU's lambda is
    # (complex-aware c10::metal::mul), anything else is Metal as written; there `*` on float2
    # multiplies lane by lane, not as complex numbers, and complex64 says so
    _declare_scalar_overload(real_root)
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "addcmul", "--body", "a + value * b * c", root=real_root).code == 0
    assert "c10::metal::mul(c10::metal::mul(static_cast<op_t>(alpha), op_t(b)), op_t(c))" in \
        " ".join((real_root / METAL).read_text().split()).replace("( ", "(")
    assert _outcomes(real_root, "addcmul", "complex64", "int8") == (0, _all_pass({"complex64", "int8"}))
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=real_root, check=True)
    subprocess.run(["git", "clean", "-qfd"], cwd=real_root, check=True)
    body = "a + c10::metal::mul(value * b, c)"
    assert porter("migrate-from-mpsgraph", "addcmul", "--body", body, root=real_root).code == 0
    code, rows = _outcomes(real_root, "addcmul", "complex64", "float32")
    assert (code, rows["complex64"], rows["float32"]) == (1, "fail", "pass")
