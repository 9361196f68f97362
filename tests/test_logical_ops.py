"""Bool-output ops (issue 13): logical_and, logical_or and logical_xor on the real-size tree.

CPU and CUDA share `logical_and_out`, which hands its stub to the comparison helper that builds
a bool-output TensorIterator (`comparison_op_out(result, self, other, logical_and_stub)`); MPS
joins that row. Each op is migrated off MPSGraph, its kernel file built, and its OpInfo samples
plus the reference inputs (zeros, infinities, nan, complex values with one part zero) run
through the emulated kernel on every dtype the MPS test sends, complex64 included (the three
are in SUPPORTED_COMPLEX_OPS)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from expecttest import assert_expected_inline

from porter.source.checkout import KERNELS, NATIVE, OPERATIONS
from tests.porter_run import file_diff, git_init, porter, snapshot

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

BINARY_METAL = f"{KERNELS}/BinaryKernel.metal"
BINARY_HOST = f"{OPERATIONS}/BinaryKernel.mm"
BINARY_OPS = f"{OPERATIONS}/BinaryOps.mm"
SENT = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
        "complex64"]
FUNCTORS = {
    "logical_and": "c10::metal::cast_to<bool>(a) && c10::metal::cast_to<bool>(b)",
    "logical_or": "c10::metal::cast_to<bool>(a) || c10::metal::cast_to<bool>(b)",
    "logical_xor": "c10::metal::cast_to<bool>(a) != c10::metal::cast_to<bool>(b)",
}


def _added(root, path: str) -> str:
    """The lines a port added to one file of the tree (git diff against the last commit)."""
    diff = subprocess.run(["git", "diff", "-U0", "--", path], cwd=root, capture_output=True,
                          text=True, check=True).stdout
    return "".join(l[1:] + "\n" for l in diff.splitlines() if l.startswith("+") and not l.startswith("+++"))


def _emulated(root, op: str, *extra: str):
    result = porter("test", op, "--device", "emulate", "--reference-inputs", "--json", *extra, root=root)
    assert result.out.startswith("{"), result.err
    report = json.loads(result.out)
    rows = {}
    for entry in report["ops"]:
        # the full verdict's three rows; a shapes row has reference false too
        kind = "shapes" if entry["shapes"] else "reference" if entry["reference"] else "upstream"
        assert kind not in rows, kind
        rows[kind] = {case["dtype"]: case["outcome"] for case in entry["dtypes"]}
    return result.code, rows


@pytest.mark.parametrize("op", sorted(FUNCTORS))
@pytest.mark.slow
def test_migrated_logical_op_builds_and_passes_every_dtype_with_reference_inputs(
        real_root, tmp_path, monkeypatch, op):
    git_init(real_root)
    migrated = porter("migrate-from-mpsgraph", op, root=real_root)
    assert migrated.code == 0, migrated.err + migrated.out
    # one template over every dtype (complex included), registered input -> bool with the
    # castout variants through the file's own macros
    assert _added(real_root, BINARY_METAL) == (
        f"struct {op}_functor {{\n  template <typename T>\n"
        f"  inline bool operator()(const T a, const T b) {{\n    return {FUNCTORS[op]};\n  }}\n}};\n\n"
        f"REGISTER_COMPARISON_OP({op});\nREGISTER_COMPLEX_EQ_OP({op});\n")
    assert _added(real_root, BINARY_HOST) == (
        f"static void {op}_mps_kernel(TensorIterator& iter) {{\n"
        f"  lib.exec_binary_kernel(iter, \"{op}\");\n}}\n\n"
        f"REGISTER_DISPATCH({op}_stub, &{op}_mps_kernel)\n")
    assert f"{op}_out_mps" not in (real_root / BINARY_OPS).read_text()
    # the out= expectations are about out= semantics, not the kernel: kept and listed
    for test in ("test_out", "test_out_warning"):
        assert (f"MPS expectedFailure (TestCommon {test}) kept: it is not about the missing kernel; "
                f"check it on a Mac: python test/test_ops.py -k {test}_{op}_mps") in migrated.out + migrated.err
    built = porter("emulate", "check", "--json", root=real_root)
    assert json.loads(built.out)["ok"], built.out[:2000]
    code, rows = _emulated(real_root, op)
    assert rows == {"upstream": dict.fromkeys(SENT, "pass"), "reference": dict.fromkeys(SENT, "pass"),
                    "shapes": dict.fromkeys(SENT, "pass")}
    assert code == 0
    assert porter("migrate-from-mpsgraph", op, root=real_root).code == 0     # nothing to do


def test_the_generated_files_of_logical_and(real_root):
    """The port as a reviewer reads it: the functor beside the file's others, the registrations
    after its last, the host kernel taking the stub's `TensorIterator&` (binary_fn)."""
    result = porter("migrate-from-mpsgraph", "logical_and", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert_expected_inline(file_diff(result.out, BINARY_METAL), """\
@@ -84,6 +84,13 @@
   }
 };
 
+struct logical_and_functor {
+  template <typename T>
+  inline bool operator()(const T a, const T b) {
+    return c10::metal::cast_to<bool>(a) && c10::metal::cast_to<bool>(b);
+  }
+};
+
 #define REGISTER_FLOAT_BINARY_OP(NAME)    \\
   REGISTER_BINARY_OP(NAME, float, float); \\
   REGISTER_BINARY_OP(NAME, half, half);   \\
@@ -171,3 +178,5 @@
 REGISTER_BINARY_ALPHA_OP(sub_alpha, half2, half2, half2);
 REGISTER_BINARY_OP(mul, float2, float2);
 REGISTER_BINARY_OP(mul, half2, half2);
+REGISTER_COMPARISON_OP(logical_and);
+REGISTER_COMPLEX_EQ_OP(logical_and);
""")
    assert_expected_inline(file_diff(result.out, BINARY_HOST), """\
@@ -63,6 +63,10 @@
   lib.exec_binary_kernel(iter, "sub_alpha", alpha);
 }
 
+static void logical_and_mps_kernel(TensorIterator& iter) {
+  lib.exec_binary_kernel(iter, "logical_and");
+}
+
 REGISTER_DISPATCH(fmax_stub, &fmax_mps_kernel)
 REGISTER_DISPATCH(fmin_stub, &fmin_mps_kernel)
 REGISTER_DISPATCH(copysign_stub, &copysign_mps_kernel);
@@ -71,4 +75,5 @@
 REGISTER_DISPATCH(atan2_stub, &atan2_mps_kernel)
 REGISTER_DISPATCH(add_stub, &add_mps_kernel)
 REGISTER_DISPATCH(sub_stub, &sub_mps_kernel)
+REGISTER_DISPATCH(logical_and_stub, &logical_and_mps_kernel)
 } // namespace at::native

""")
    assert_expected_inline(file_diff(result.out, BINARY_OPS), """\
@@ -82,7 +82,6 @@
   }
 }
 
-CREATE_MPS_BINARY_COMPARISON_OP_FUNC(logical_and_out_mps, logicalAND, Tensor);
 CREATE_MPS_BINARY_COMPARISON_OP_FUNC(logical_or_out_mps, logicalOR, Tensor);
 CREATE_MPS_BINARY_COMPARISON_OP_FUNC(logical_xor_out_mps, logicalXOR, Tensor);
 
""")


@pytest.mark.slow
def test_a_complex_body_that_reads_the_real_part_only_fails_the_reference_inputs(
        real_root, tmp_path, monkeypatch):
    """MPSGraph's old mistake (a complex input cast to bool by its real part): upstream's own
    samples miss it, the reference inputs (0 + 1j) catch it, and porter test exits 1."""
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "logical_and", "--body", "a && b", "--complex-body",
                  "a.x != 0 && b.x != 0", root=real_root).code == 0
    code, rows = _emulated(real_root, "logical_and")
    assert rows["upstream"] == dict.fromkeys(SENT, "pass")
    assert rows["reference"]["complex64"] == "fail"
    assert {d: o for d, o in rows["reference"].items() if d != "complex64"} == dict.fromkeys(SENT[:-1], "pass")
    assert code == 1


@pytest.mark.slow
def test_a_float_output_registration_fails_every_dtype(real_root, tmp_path, monkeypatch):
    """A hand edit that registers the bool functor float -> float: the file does not build on a
    Mac (the registration's static_assert), so every dtype fails and porter test exits 1."""
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "logical_and", root=real_root).code == 0
    metal = real_root / BINARY_METAL
    metal.write_text(metal.read_text().replace("REGISTER_COMPARISON_OP(logical_and);",
                                               "REGISTER_FLOAT_BINARY_OP(logical_and);"))
    result = porter("test", "logical_and", "--device", "emulate", root=real_root)
    assert result.code == 1
    assert ("logical_and registered with output type float for input float, but "
            "logical_and_functor returns bool") in result.out
    # the file does not build: every dtype of each of the three rows fails
    assert "summary: 0 pass, 30 fail" in result.out


def test_a_castout_line_of_the_wrong_type_does_not_build(real_root):
    """The castout registrations are built too (the emulator instantiates them as a Mac does):
    one naming a float output for the bool functor is refused at its line."""
    from porter.emulate.build_check import BuildRefused, check_kernel_file

    original = (real_root / BINARY_METAL).read_text()
    functor = ("struct logical_and_functor {\n  template <typename T>\n"
               "  inline bool operator()(const T a, const T b) {\n    return a && b;\n  }\n};\n\n")
    planned = original.replace("// Complex binary functors", functor + "// Complex binary functors")
    planned += "REGISTER_BINARY_OP(logical_and, float, bool);\n"
    check_kernel_file(BINARY_METAL, original, planned, real_root, ("logical_and",))    # builds
    planned += "REGISTER_BINARY_CASTOUT_OP(logical_and, float, float);\n"
    with pytest.raises(BuildRefused) as err:
        check_kernel_file(BINARY_METAL, original, planned, real_root, ("logical_and",))
    assert (f"{BINARY_METAL}:{planned.count(chr(10))}: logical_and registered with output type "
            "float for input float, but logical_and_functor returns bool") in str(err.value)


def test_a_body_that_compares_needs_a_complex_body(real_root):
    """`a > 0 && b > 0` reads the values, not their truth: porter writes float and integer
    overloads, which complex inputs cannot take, so the port is incomplete (exit 1, nothing
    written) and says which flag supplies the complex64 kernel."""
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", "logical_and", "--body", "a > 0 && b > 0", root=real_root)
    assert result.code == 1
    assert "missing a complex64 kernel" in result.err and "--complex-body EXPR" in result.err
    assert snapshot(real_root) == before


def test_without_the_shared_function_logical_and_is_still_refused(real_root):
    """A checkout whose BinaryOps.cpp lacks logical_and_out (or runs no stub from it) has no
    shared CPU/CUDA kernel for MPS to join: refused before planning, nothing written."""
    path = real_root / NATIVE / "BinaryOps.cpp"
    text = path.read_text()
    path.write_text(text.replace("return comparison_op_out(result, self, other, logical_and_stub);",
                                 "return result;"))
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", "logical_and", root=real_root)
    assert result.code == 2
    assert "'logical_and' is not a structured TensorIterator op" in result.err
    assert snapshot(real_root) == before


def test_the_shared_function_is_found_through_its_helper(real_root):
    from porter.source.checkout import Checkout
    from porter.source.cpu_kernel import shared_function_stubs
    from porter.source import native_yaml

    checkout = Checkout.at(real_root)
    yaml_text = checkout.read(f"{NATIVE}/native_functions.yaml")
    for op in FUNCTORS:
        out = next(e for e in native_yaml.entries_named(yaml_text, {op}) if e.is_out)
        assert shared_function_stubs(checkout, out) == [f"{op}_stub"]


def test_bool_registrations_without_the_files_macros():
    """A kernel file without a REGISTER_COMPARISON_OP-style macro gets one line per input type
    and its castout twin (where c10/metal/indexing.h has REGISTER_BINARY_CASTOUT_OP)."""
    from porter.port.edits.metal import add_bool_registration

    text = ("struct atan2_functor {};\n"
            "REGISTER_BINARY_OP(atan2, float, float);\n")
    new = add_bool_registration(text, "logical_and", ["float", "long", "float2"], castout=True)
    assert_expected_inline(new, """\
struct atan2_functor {};
REGISTER_BINARY_OP(atan2, float, float);
REGISTER_BINARY_OP(logical_and, float, bool);
REGISTER_BINARY_CASTOUT_OP(logical_and, float, bool);
REGISTER_BINARY_OP(logical_and, long, bool);
REGISTER_BINARY_CASTOUT_OP(logical_and, long, bool);
REGISTER_BINARY_OP(logical_and, float2, bool);
REGISTER_BINARY_CASTOUT_OP(logical_and, float2, bool);
""")
    # a second op goes after the first one's bool lines; without castout, plain lines only
    again = add_bool_registration(new, "logical_or", ["float"], castout=False)
    assert again.endswith("REGISTER_BINARY_CASTOUT_OP(logical_and, float2, bool);\n"
                          "REGISTER_BINARY_OP(logical_or, float, bool);\n")
    assert add_bool_registration(new, "logical_and", ["float", "long"], castout=True) == new


TRUTH_TABLE = [
    # body (a CPU lambda's, or --body)   -> one template over every dtype, or None (per-kind overloads)
    ("return a && b;", "return c10::metal::cast_to<bool>(a) && c10::metal::cast_to<bool>(b);"),
    ("return a || b;", "return c10::metal::cast_to<bool>(a) || c10::metal::cast_to<bool>(b);"),
    ("return bool(a) != bool(b);", "return c10::metal::cast_to<bool>(a) != c10::metal::cast_to<bool>(b);"),
    ("return !a && b;", "return !c10::metal::cast_to<bool>(a) && c10::metal::cast_to<bool>(b);"),
    ("return c10::metal::cast_to<bool>(a) || b;",
     "return c10::metal::cast_to<bool>(a) || c10::metal::cast_to<bool>(b);"),
    ("return a > 0 && b;", None),           # compares a value: complex has no `>`
    ("return a.x != 0 && b.x != 0;", None),   # the real part only
    ("return a + b;", None),
    ("return true;", None),
]


@pytest.mark.parametrize("body,expected", TRUTH_TABLE)
def test_truthiness_rewrites_only_truth_value_reads(body, expected):
    from porter.port.body import truthiness

    assert truthiness(body, ("a", "b")) == expected
