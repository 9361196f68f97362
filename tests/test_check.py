"""`porter check`: each check fires on a defect injected into the fixture, with a golden message;
the clean fixture passes; output formats, --changed-since and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import expecttest
import pytest

from porter.source.checkout import COMMON_MPS, KERNELS, NATIVE, NATIVE_YAML, OPERATIONS, TEST_MPS
from porter.cli import main
from tests.porter_run import fallback_example_is

T = expecttest.TestCase()

try:        # imported once here, so that the torchgen child each check forks starts warm
    import torchgen.gen  # noqa: F401
except ImportError:
    pass
BINARY_MM = f"{OPERATIONS}/BinaryKernel.mm"
UNARY_MM = f"{OPERATIONS}/UnaryKernel.mm"
BINARY_METAL = f"{KERNELS}/BinaryKernel.metal"


def edit(root: Path, rel: str, old: str, new: str, count: int = 1) -> None:
    path = root / rel
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def check(root: Path, capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["check", "--root", str(root), *args])
    return code, capsys.readouterr().out


def test_clean_fixture_passes(mini_root, capsys):
    code, out = check(mini_root, capsys)
    assert (code, out) == (0, "")


def test_a_skipped_torchgen_check_is_not_counted_among_the_clean_ones(mini_root, capsys,
                                                                    monkeypatch):
    """New user's M6 (issue 36's first hour): without torchgen, PORTER040 is a note, and the
    summary counted it among the checks that ran clean."""
    from porter.checks import torchgen_yaml
    from porter.checks.model import CHECKS
    monkeypatch.setattr(torchgen_yaml.Pending, "result", lambda self: {
        "kind": "skip", "note": "torchgen is not importable (it ships with torch): PORTER040 skipped"})
    capsys.readouterr()
    assert main(["check", "--root", str(mini_root)]) == 0
    err = capsys.readouterr().err
    assert "note: torchgen is not importable (it ships with torch): PORTER040 skipped" in err
    assert f"porter check: clean ({len(CHECKS) - 1} checks)" in err, err


def test_quiet_prints_the_findings_alone(mini_root):
    # -q, before or after the subcommand: stdout keeps the findings, stderr is empty (no notes, no
    # summary line), and the exit status still tells clean from not
    from tests.porter_run import porter
    for argv in (("-q", "check"), ("check", "-q")):
        clean = porter(*argv, root=mini_root)
        assert (clean.code, clean.out, clean.err) == (0, "", ""), clean
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: sign_out\n", "    CPU, CUDA, MPS: sign_out\n")
    found = porter("check", "-q", root=mini_root)
    assert found.code == 1 and found.err == "" and "PORTER0" in found.out, found
    loud = porter("check", root=mini_root)
    assert loud.out == found.out and "porter check: " in loud.err


def test_duplicate_mps_key(mini_root, capsys):
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: sign_out\n", "    CPU, CUDA, MPS: sign_out\n")
    code, out = check(mini_root, capsys)
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/native_functions.yaml:539: PORTER001 duplicate-mps-key: 'sign.out' names MPS twice (first at line 538): 'CPU, CUDA, MPS: sign_out' and 'MPS: sign_out_mps'; torchgen silently keeps sign_out_mps (delete the `MPS: sign_out_mps` row and its MPSGraph impl (porter migrate-from-mpsgraph sign))
""")


def test_undefined_mps_function(mini_root, capsys):
    edit(mini_root, f"{OPERATIONS}/UnaryOps.mm", "TORCH_IMPL_FUNC(frac_out_mps)", "TORCH_IMPL_FUNC(frac_mps_out)")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/native_functions.yaml:246: PORTER002 undefined-mps-function: 'frac.out' dispatches MPS to frac_out_mps, which no aten/src/ATen/native/mps/ source defines (define TORCH_IMPL_FUNC(frac_out_mps) or `frac_out_mps(...)` in aten/src/ATen/native/mps/operations/, or drop the row)
""")


def test_unregistered_kernel(mini_root, capsys):
    edit(mini_root, BINARY_MM, 'exec_binary_kernel(iter, "atan2")', 'exec_binary_kernel(iter, "atan_2")')
    T.assertExpectedInline(check(mini_root, capsys, "--select", "PORTER010")[1], """\
aten/src/ATen/native/mps/operations/BinaryKernel.mm:55: PORTER010 unregistered-kernel: runs Metal kernel 'atan_2', which BinaryKernel.metal does not register (add a REGISTER_*_OP(atan_2, ...) line to aten/src/ATen/native/mps/kernels/BinaryKernel.metal (porter new-op writes one))
""")


def test_kernel_registered_in_the_wrong_metal_file(mini_root, capsys):
    edit(mini_root, BINARY_MM, 'exec_binary_kernel(iter, "atan2")', 'exec_binary_kernel(iter, "erfinv")')
    T.assertExpectedInline(check(mini_root, capsys, "--select", "unregistered-kernel")[1], """\
aten/src/ATen/native/mps/operations/BinaryKernel.mm:55: PORTER010 unregistered-kernel: runs Metal kernel 'erfinv', which BinaryKernel.metal does not register; UnaryKernel.metal does, but JIT-shader builds of BinaryKernel.mm cannot load it (move the functor and its registration into BinaryKernel.metal)
""")


def test_kernel_missing_dtypes(mini_root, capsys):
    edit(mini_root, BINARY_METAL, "REGISTER_INT2FLOAT_BINARY_OP(atan2);\n", "")
    code, out = check(mini_root, capsys)
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/kernels/BinaryKernel.metal:143: PORTER011 kernel-missing-dtypes: kernel 'atan2' is registered for bfloat, float, half but the MPS test of OpInfo 'atan2' (torch/testing/_internal/common_methods_invocations.py:84) sends bool, int16, int32, int64, int8, uint8 through BinaryKernel.mm:55 (register bool, short, int, long, char, uchar inputs in BinaryKernel.metal, guard the host kernel, or xfail those dtypes in common_mps.py)
""")


def test_float_guard_limits_the_dtypes_a_kernel_gets(mini_root, capsys):
    # hypot's host kernel rejects non-floating dtypes, so a wider OpInfo is not a finding
    edit(mini_root, "torch/testing/_internal/common_methods_invocations.py",
         "BinaryUfuncInfo('hypot',\n                    dtypes=floating_types_and(",
         "BinaryUfuncInfo('hypot',\n                    dtypes=all_types_and(")
    assert check(mini_root, capsys) == (0, "")


UNARY_METAL = f"{KERNELS}/UnaryKernel.metal"


def test_duplicate_kernel_name(mini_root, capsys):
    # a repeat of BinaryKernel.metal's fmin registration, added to a file that sorts after it,
    # and a repeat of exp's float registration in its own file, after the original
    edit(mini_root, UNARY_METAL, "REGISTER_UNARY_ALPHA_OP(round_decimals, float, long, float);\n",
         "REGISTER_UNARY_ALPHA_OP(round_decimals, float, long, float);\n"
         "REGISTER_BINARY_OP(fmin, float, float);\nREGISTER_UNARY_OP(exp, float, float);\n")
    T.assertExpectedInline(check(mini_root, capsys, "--select", "PORTER012")[1], """\
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:171: PORTER012 duplicate-kernel-name: REGISTER_BINARY_OP(fmin, float -> float) instantiates host names already instantiated at aten/src/ATen/native/mps/kernels/BinaryKernel.metal:150 (rename one kernel or drop the repeat: every .metal file builds into one metallib)
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:172: PORTER012 duplicate-kernel-name: REGISTER_UNARY_OP(exp, float -> float) instantiates host names already instantiated at aten/src/ATen/native/mps/kernels/UnaryKernel.metal:154 (rename one kernel or drop the repeat: every .metal file builds into one metallib)
""")


def test_an_opmath_registration_and_a_plain_one_share_host_names(mini_root, capsys):
    # REGISTER_OPMATH_BINARY_OP instantiates the names REGISTER_BINARY_OP does (BinaryKernel's
    # xlogy is registered through REGISTER_OPMATH_FLOAT_BINARY_OP): a plain repeat is a
    # duplicate (issue 36: OPMATH left out of the macros' families survived the suite)
    edit(mini_root, UNARY_METAL, "REGISTER_UNARY_ALPHA_OP(round_decimals, float, long, float);\n",
         "REGISTER_UNARY_ALPHA_OP(round_decimals, float, long, float);\n"
         "REGISTER_BINARY_OP(xlogy, float, float);\n")
    code, out = check(mini_root, capsys, "--select", "PORTER012")
    assert code == 1
    assert ("UnaryKernel.metal:171: PORTER012 duplicate-kernel-name: REGISTER_BINARY_OP(xlogy, "
            "float -> float) instantiates host names already instantiated at "
            "aten/src/ATen/native/mps/kernels/BinaryKernel.metal:147") in out, out


DUPLICATE_EXP = ("REGISTER_FLOAT_BINARY_OP(fmin);\n",
                 "REGISTER_FLOAT_BINARY_OP(fmin);\nREGISTER_UNARY_OP(exp, float, float);\n")


def test_duplicate_kernel_name_without_history_falls_on_the_later_file(mini_root, capsys):
    # Without --changed-since porter cannot tell which copy is new: the copy in the file that
    # sorts first stands as the original, so a repeat added to BinaryKernel.metal is reported
    # on UnaryKernel.metal (--changed-since puts it on the added line: the test below).
    edit(mini_root, BINARY_METAL, *DUPLICATE_EXP)
    T.assertExpectedInline(check(mini_root, capsys, "--select", "PORTER012")[1], """\
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:154: PORTER012 duplicate-kernel-name: REGISTER_UNARY_OP(exp, float -> float) instantiates host names already instantiated at aten/src/ATen/native/mps/kernels/BinaryKernel.metal:151 (rename one kernel or drop the repeat: every .metal file builds into one metallib)
""")


def test_unreachable_functor(mini_root, capsys):
    (mini_root / KERNELS / "SpecialKernel.metal").write_text(
        "#include <c10/metal/indexing.h>\n\nstruct ndtri_functor {\n  template <typename T>\n"
        "  inline float operator()(const T x) {\n    return float(x);\n  }\n};\n\n"
        "REGISTER_UNARY_OP(ndtri, float, float);\n", encoding="utf-8")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/mps/kernels/SpecialKernel.metal:3: PORTER013 unreachable-functor: ndtri_functor cannot be reached: no host file loads SpecialKernel.metal in JIT-shader builds (no SpecialKernel.mm, no #include <ATen/native/mps/SpecialKernel_metallib.h>) (move it into the .metal paired with the .mm that runs it, or include SpecialKernel_metallib.h from that .mm)
""")


def test_skeleton_functor(mini_root, capsys):
    from porter.port.templates import render

    skeleton = render("skeleton_functor.metal.j2", op="heaviside", reason="no CPU kernel lambda found",
                      signature="const T a, const T b", out="T")
    edit(mini_root, BINARY_METAL, "// Complex binary functors\n", skeleton + "\n// Complex binary functors\n")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/mps/kernels/BinaryKernel.metal:83: PORTER014 skeleton-functor: heaviside_functor is still porter's skeleton (its static_assert stops the build) (write the Metal body, or rerun `porter new-op heaviside --body EXPR`)
""")


@pytest.mark.slow
def test_a_kernel_only_complex_inputs_reach_misses_no_real_dtype(mini_root, capsys):
    """sgn_out runs sign_stub for real inputs and sgn_stub for complex ones: sgn's kernel,
    registered for float2 and half2 alone, misses nothing (PORTER011 said it lacked every real
    dtype). A sgn_out sending every dtype to sgn_stub makes them missing again."""
    from tests.porter_run import porter
    assert porter("migrate-from-mpsgraph", "sign", "--no-test", root=mini_root).code == 0
    assert porter("migrate-from-mpsgraph", "sgn", "--no-test", "--complex-body", "x", root=mini_root).code == 0
    code, out = check(mini_root, capsys, "--select", "PORTER011")
    assert "kernel 'sgn'" not in out, out
    edit(mini_root, f"{NATIVE}/UnaryOps.cpp",
         "  if (self.is_complex()) {\n    sgn_stub(device_type(), *this);\n  } else {\n"
         "    sign_stub(device_type(), *this);\n  }\n", "  sgn_stub(device_type(), *this);\n")
    code, out = check(mini_root, capsys, "--select", "PORTER011")
    assert code == 1 and "kernel 'sgn' is registered for float2, half2 but the MPS test of OpInfo 'sgn'" in out, out


def test_unregistered_mps_stub(mini_root, capsys):
    """The yaml shares exp2_out with MPS, TORCH_IMPL_FUNC(exp2_out) runs exp2_stub, and no host
    file registers it for MPS any more: a Mac builds the tree and fails every exp2 call."""
    edit(mini_root, UNARY_MM, "REGISTER_UNARY_TI_DISPATCH(exp2);\n", "")
    code, out = check(mini_root, capsys, "--select", "PORTER023")
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/native_functions.yaml:221: PORTER023 unregistered-mps-stub: 'exp2.out' sends MPS to the shared exp2_out, which runs exp2_stub, but no MPS host file registers it: every MPS call fails with 'exp2_stub: missing kernel for mps' (register a Metal kernel on it (porter new-op exp2), or route MPS to an implementation of its own)
""")


def test_an_orphan_macro_writing_a_plain_function_is_dead_code_not_a_build_break(mini_root, capsys):
    """Upstream's 2022 UnaryOps.mm writes `abs_out_mps` with CREATE_MPS_UNARY_TORCH_IMPL_FUNC,
    whose expansion is a plain `Tensor& abs_out_mps(...)` (the macro's name says IMPL_FUNC, its
    body does not): no yaml row naming it leaves dead code, which still compiles. A macro that
    does expand to TORCH_IMPL_FUNC stops the file compiling."""
    macros = (
        "#define CREATE_MPS_PLAIN_UNARY_TORCH_IMPL_FUNC(func_out, func_stub) \\\n"
        "  Tensor& func_out(const Tensor& self, Tensor& output) {             \\\n"
        "    return output;                                                   \\\n"
        "  }\n"
        "#define CREATE_MPS_STRUCTURED_TEST_IMPL_FUNC(func_out, func_stub)     \\\n"
        "  TORCH_IMPL_FUNC(func_out)(const Tensor& self, const Tensor& output) {}\n"
        "CREATE_MPS_PLAIN_UNARY_TORCH_IMPL_FUNC(exp2_out_mps, exponentBase2)\n"
        "CREATE_MPS_STRUCTURED_TEST_IMPL_FUNC(exp_out_mps, exponent)\n"
        "} // namespace at::native")
    edit(mini_root, f"{OPERATIONS}/UnaryOps.mm", "} // namespace at::native", macros)
    code, out = check(mini_root, capsys, "--select", "PORTER003")
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/operations/UnaryOps.mm:270: PORTER003 orphan-mps-function: exp2_out_mps is the MPSGraph implementation of exp2, but no yaml row names it any more: dead code a half-applied migration left (delete it)
aten/src/ATen/native/mps/operations/UnaryOps.mm:271: PORTER003 orphan-mps-function: exp_out_mps is the MPSGraph implementation of exp, but no yaml row names it any more, so torchgen declares no structured_exp_out_mps and this file no longer compiles (porter new-op exp deletes it where porter can port exp (`porter status exp` says); else delete it by hand)
""")


def test_undeclared_stub(mini_root, capsys):
    edit(mini_root, BINARY_MM, "REGISTER_DISPATCH(hypot_stub,", "REGISTER_DISPATCH(hypott_stub,")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/mps/operations/BinaryKernel.mm:70: PORTER020 undeclared-stub: hypot_mps_kernel is registered on hypott_stub, which no DECLARE_DISPATCH declares (did you mean hypot_stub?)
aten/src/ATen/native/native_functions.yaml:585: PORTER023 unregistered-mps-stub: 'hypot.out' sends MPS to the shared hypot_out, which runs hypot_stub, but no MPS host file registers it: every MPS call fails with 'hypot_stub: missing kernel for mps' (register a Metal kernel on it (porter new-op hypot), or route MPS to an implementation of its own)
""")


def test_stub_registered_twice(mini_root, capsys):
    edit(mini_root, BINARY_MM, "} // namespace at::native", "REGISTER_DISPATCH(atan2_stub, &hypot_mps_kernel)\n"
         "} // namespace at::native")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/mps/operations/BinaryKernel.mm:74: PORTER021 stub-registered-twice: atan2_stub is registered again (hypot_mps_kernel); it is already registered at aten/src/ATen/native/mps/operations/BinaryKernel.mm:71 (atan2_mps_kernel); static-init order picks one silently (keep one registration)
""")


def test_stub_registered_twice_with_a_hidden_mpsgraph_stub(mini_root, capsys):
    edit(mini_root, UNARY_MM, "REGISTER_UNARY_TI_DISPATCH(erfinv);", "REGISTER_UNARY_TI_DISPATCH(erfinv);\n"
         "REGISTER_UNARY_TI_DISPATCH(acosh);")
    T.assertExpectedInline(check(mini_root, capsys, "--select", "PORTER021")[1], """\
aten/src/ATen/native/mps/operations/UnaryOps.mm:146: PORTER021 stub-registered-twice: acosh_stub is registered again (mps_acosh_kernel); it is already registered at aten/src/ATen/native/mps/operations/UnaryKernel.mm:31 (acosh_kernel_mps); static-init order picks one silently (delete the REGISTER_MPS_UNARY_STUB line at aten/src/ATen/native/mps/operations/UnaryOps.mm:146 (it still routes the stub to MPSGraph))
""")


def test_stub_signature_mismatch(mini_root, capsys):
    edit(mini_root, BINARY_MM, "static void xlogy_mps_kernel(TensorIteratorBase& iter)",
         "static void xlogy_mps_kernel(TensorIterator& iter)")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/mps/operations/BinaryKernel.mm:45: PORTER022 stub-signature-mismatch: xlogy_mps_kernel(TensorIterator&) is registered on xlogy_stub, whose type is structured_binary_fn = void(*)(TensorIteratorBase&) (aten/src/ATen/native/BinaryOps.h:27) (make xlogy_mps_kernel take (TensorIteratorBase&))
""")


def test_stub_signature_mismatch_of_an_extra_parameter(mini_root, capsys):
    edit(mini_root, UNARY_MM, "round_decimals_kernel(TensorIteratorBase& iter, int64_t decimals)",
         "round_decimals_kernel(TensorIteratorBase& iter)")
    edit(mini_root, UNARY_MM, "Scalar(decimals)", "Scalar(0)")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/mps/operations/UnaryKernel.mm:37: PORTER022 stub-signature-mismatch: round_decimals_kernel(TensorIteratorBase&) is registered on round_decimals_stub, whose type is void (*)(TensorIteratorBase&, int64_t) (aten/src/ATen/native/UnaryOps.h:37) (make round_decimals_kernel take (TensorIteratorBase&, int64_t))
""")


def test_unknown_expectation_key(mini_root, capsys):
    edit(mini_root, COMMON_MPS, '"heaviside": None,', '"heavyside": None,')
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
torch/testing/_internal/common_mps.py:42: PORTER030 unknown-expectation-key: 'heavyside' in UNIMPLEMENTED_XFAILLIST (mps_ops_modifier) names no OpInfo (did you mean 'heaviside'?)
""")


def test_stale_unimplemented_xfail(mini_root, capsys):
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, MPS: heaviside_out\n")
    code, out = check(mini_root, capsys)
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/native_functions.yaml:478: PORTER023 unregistered-mps-stub: 'heaviside.out' sends MPS to the shared heaviside_out, which runs heaviside_stub, but no MPS host file registers it: every MPS call fails with 'heaviside_stub: missing kernel for mps' (register a Metal kernel on it (porter new-op heaviside), or route MPS to an implementation of its own)
torch/testing/_internal/common_mps.py:42: PORTER031 stale-unimplemented-xfail: 'heaviside' is xfailed as unimplemented (every dtype), but heaviside.out has an MPS kernel (aten/src/ATen/native/native_functions.yaml:478 'CPU, CUDA, MPS: heaviside_out') (confirm with `porter test heaviside --prune-xfails`, or drop the entry)
""")


@pytest.mark.parametrize("spelled", ["aten::heaviside.out", "torch.heaviside"])
def test_the_fallback_warnings_example_op_with_a_kernel_is_found(mini_root, capsys, spelled):
    """Review 34: test_mps.py's TestFallbackWarning runs heaviside as its op without an MPS
    kernel; once heaviside has one, that test fails on a Mac. Its schema string or its call
    names the op; an op without an MPS row there is clean."""
    fallback_example_is(mini_root, "heaviside")
    if spelled.startswith("torch."):
        edit(mini_root, TEST_MPS, '"aten::heaviside.out"', '"x"')
    code, out = check(mini_root, capsys, "--select", "PORTER032")
    assert (code, out) == (0, "")
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, MPS: heaviside_out\n")
    code, out = check(mini_root, capsys, "--select", "PORTER032")
    assert code == 1
    (line,) = out.splitlines()
    assert line.startswith("test/test_mps.py:18: PORTER032 fallback-example-has-kernel: "
                           "TestFallbackWarning._get_not_implemented_op runs heaviside as an op "
                           "without an MPS kernel, but heaviside.out has one"), line


def test_stale_unimplemented_xfail_of_an_mps_only_function_is_confirmed_on_a_mac(mini_root, capsys):
    # `MPS: heaviside_out_mps`: a function of its own (MPSGraph, or host code of its own), which
    # the emulator does not run: --prune-xfails off a Mac would skip every dtype, so the hint
    # names the Mac's device
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n",
         "    CPU, CUDA: heaviside_out\n    MPS: heaviside_out_mps\n")
    code, out = check(mini_root, capsys, "--select", "PORTER031")
    assert code == 1
    (line,) = [line for line in out.splitlines() if "PORTER031" in line]
    assert line.endswith("(confirm on a Mac with `porter test heaviside --prune-xfails --device mps` "
                         "(its MPS function is not one the emulator runs), or drop the entry)"), line


def test_torchgen_rejects_yaml(mini_root, capsys):
    pytest.importorskip("torchgen")
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, Mps: heaviside_out\n")
    T.assertExpectedInline(check(mini_root, capsys)[1], """\
aten/src/ATen/native/native_functions.yaml:473: PORTER040 torchgen-rejects-yaml: torchgen rejects the file ('heaviside.out'): unknown dispatch key Mps (fix the entry; `porter check` re-runs torchgen's parse_native_yaml)
""")


def test_torchgen_runs_in_process_when_no_child_can_be_forked(mini_root, capsys, monkeypatch):
    pytest.importorskip("torchgen")
    monkeypatch.delenv("PORTER_NO_FORK", raising=False)

    def no_fork():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, Mps: heaviside_out\n")
    code, out = check(mini_root, capsys, "--select", "PORTER040")
    assert code == 1 and "unknown dispatch key Mps" in out


def test_torchgen_reports_yaml_syntax_by_line(mini_root, capsys):
    pytest.importorskip("torchgen")
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA: heaviside_out\n   MPS: x\n")
    T.assertExpectedInline(check(mini_root, capsys, "--select", "PORTER040")[1], """\
aten/src/ATen/native/native_functions.yaml:479: PORTER040 torchgen-rejects-yaml: torchgen cannot load the file: ParserError: did not find expected key (fix the YAML syntax (indentation of dispatch rows is 4 spaces))
""")


def test_torchgen_cache_does_not_hide_an_edit(mini_root, capsys):
    pytest.importorskip("torchgen")
    assert check(mini_root, capsys, "--select", "PORTER040") == (0, "")
    edit(mini_root, NATIVE_YAML, "    CPU, CUDA: heaviside_out\n", "    CPU, CUDA, Mps: heaviside_out\n")
    assert check(mini_root, capsys, "--select", "PORTER040")[0] == 1


# --- output formats -------------------------------------------------------------------------

def _one_finding(root: Path) -> None:
    edit(root, COMMON_MPS, '"heaviside": None,', '"heavyside": None,')


def test_json_output(mini_root, capsys):
    _one_finding(mini_root)
    code, out = check(mini_root, capsys, "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["counts"] == {"PORTER030": 1}
    T.assertExpectedInline(json.dumps(data["findings"], indent=1), """\
[
 {
  "id": "PORTER030",
  "name": "unknown-expectation-key",
  "severity": "error",
  "path": "torch/testing/_internal/common_mps.py",
  "line": 42,
  "message": "'heavyside' in UNIMPLEMENTED_XFAILLIST (mps_ops_modifier) names no OpInfo",
  "hint": "did you mean 'heaviside'?",
  "op": null
 }
]""")


def test_lintrunner_output_exits_zero(mini_root, capsys):
    _one_finding(mini_root)
    code, out = check(mini_root, capsys, "--format", "lintrunner")
    assert code == 0
    T.assertExpectedInline(out, """\
{"path": "torch/testing/_internal/common_mps.py", "line": 42, "char": null, "code": "PORTER", "severity": "error", "name": "unknown-expectation-key", "original": null, "replacement": null, "description": "[PORTER030] 'heavyside' in UNIMPLEMENTED_XFAILLIST (mps_ops_modifier) names no OpInfo (did you mean 'heaviside'?)"}
""")


def test_lintrunner_reports_bad_input_as_a_message(tmp_path, capsys):
    code = main(["check", "--root", str(tmp_path), "--format", "lintrunner"])
    message = json.loads(capsys.readouterr().out)
    assert code == 0 and message["name"] == "porter-error" and "not a PyTorch checkout" in message["description"]


def test_paths_limit_the_report(mini_root, capsys):
    _one_finding(mini_root)
    assert check(mini_root, capsys, NATIVE_YAML) == (0, "")
    assert check(mini_root, capsys, COMMON_MPS)[0] == 1


def test_a_path_that_names_no_file_is_bad_input(mini_root, capsys):
    # review 38's H20: `porter check heaviside` (the op name, as `porter test` takes it)
    # filtered every finding away and said "clean" on a broken port
    _one_finding(mini_root)
    assert main(["check", "--root", str(mini_root), "heaviside"]) == 2
    err = capsys.readouterr().err
    assert "no such file: heaviside" in err and "porter status OP" in err


def test_skip_and_bad_ids(mini_root, capsys):
    _one_finding(mini_root)
    assert check(mini_root, capsys, "--skip", "unknown-expectation-key") == (0, "")
    assert main(["check", "--root", str(mini_root), "--skip", "PORTER999"]) == 2
    assert "--skip PORTER999: no such check" in capsys.readouterr().err


# --- --changed-since ------------------------------------------------------------------------

def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(root), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def repo(mini_root):
    _one_finding(mini_root)          # an old debt, committed: not the PR's fault
    _git(mini_root, "init", "-q")
    _git(mini_root, "add", "-A")
    _git(mini_root, "commit", "-q", "-m", "base")
    return mini_root


def test_changed_since_keeps_only_the_changes_findings(repo, capsys):
    assert check(repo, capsys, "--changed-since", "HEAD") == (0, "")
    edit(repo, BINARY_METAL, "REGISTER_INT2FLOAT_BINARY_OP(atan2);\n", "")       # deleted line names atan2
    edit(repo, NATIVE_YAML, "    CPU, CUDA: sign_out\n", "    CPU, CUDA, MPS: sign_out\n")
    code, out = check(repo, capsys, "--changed-since", "HEAD")
    assert code == 1
    assert [line.split(": ")[1].split()[0] for line in out.splitlines()] == ["PORTER011", "PORTER001"]
    assert "heavyside" in check(repo, capsys)[1]        # the whole tree still has the old debt


def test_a_change_to_a_kernel_two_stubs_share_touches_both_ops(real_root, capsys):
    """Upstream's shrink_backward kernel runs hardshrink_backward's and softshrink_backward's
    stubs: a change to it is a change to each op, and CI tests both (review 42's F5: only the
    first op a host named was tested, the other's breakage left green)."""
    edit(real_root, f"{OPERATIONS}/ActivationKernel.mm", 'exec_unary_kernel(iter, "leaky_relu", ',
         'exec_unary_kernel(iter, "hardshrink", ')
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "leaky_relu runs hardshrink's kernel"]):
        _git(real_root, *args)
    edit(real_root, f"{KERNELS}/ActivationKernel.metal", "return inside ? T(0) : x;",
         "return inside ? T(1) : x;")
    code, out = check(real_root, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert (code, out.split()) == (0, ["hardshrink", "leaky_relu"])


def test_changed_since_puts_a_duplicate_kernel_name_on_the_added_line(repo, capsys):
    edit(repo, BINARY_METAL, *DUPLICATE_EXP)
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--select", "PORTER012")
    assert code == 1
    T.assertExpectedInline(out, """\
aten/src/ATen/native/mps/kernels/BinaryKernel.metal:151: PORTER012 duplicate-kernel-name: REGISTER_UNARY_OP(exp, float -> float) instantiates host names already instantiated at aten/src/ATen/native/mps/kernels/UnaryKernel.metal:154 (rename one kernel or drop the repeat: every .metal file builds into one metallib)
""")
    # fmin's half copies: one added to UnaryKernel.metal, the other moved below the new exp line;
    # both sit on changed lines, so path order decides, as without --changed-since
    edit(repo, UNARY_METAL, "INSTANTIATE_UNARY_KERNELS_VEC2(half);\n",
         "INSTANTIATE_UNARY_KERNELS_VEC2(half);\nREGISTER_BINARY_OP(fmin, half, half);\n")
    edit(repo, BINARY_METAL, "REGISTER_FLOAT_BINARY_OP(fmin);\n", "")
    edit(repo, BINARY_METAL, "REGISTER_UNARY_OP(exp, float, float);\n",
         "REGISTER_UNARY_OP(exp, float, float);\nREGISTER_FLOAT_BINARY_OP(fmin);\n")
    T.assertExpectedInline(check(repo, capsys, "--changed-since", "HEAD", "--select", "PORTER012")[1], """\
aten/src/ATen/native/mps/kernels/BinaryKernel.metal:150: PORTER012 duplicate-kernel-name: REGISTER_UNARY_OP(exp, float -> float) instantiates host names already instantiated at aten/src/ATen/native/mps/kernels/UnaryKernel.metal:154 (rename one kernel or drop the repeat: every .metal file builds into one metallib)
aten/src/ATen/native/mps/kernels/UnaryKernel.metal:169: PORTER012 duplicate-kernel-name: REGISTER_BINARY_OP(fmin, half -> half) instantiates host names already instantiated at aten/src/ATen/native/mps/kernels/BinaryKernel.metal:151 (rename one kernel or drop the repeat: every .metal file builds into one metallib)
""")


def test_changed_since_puts_a_second_stub_registration_on_the_added_line(repo, capsys):
    # exp_stub is registered in UnaryKernel.mm; the change registers it again in BinaryKernel.mm,
    # which sorts first: without --changed-since that file's line would stand as the original
    edit(repo, BINARY_MM, "} // namespace at::native", "REGISTER_DISPATCH(exp_stub, &hypot_mps_kernel)\n"
         "} // namespace at::native")
    T.assertExpectedInline(check(repo, capsys, "--select", "PORTER021")[1], """\
aten/src/ATen/native/mps/operations/UnaryKernel.mm:21: PORTER021 stub-registered-twice: exp_stub is registered again (exp_kernel_mps); it is already registered at aten/src/ATen/native/mps/operations/BinaryKernel.mm:74 (hypot_mps_kernel); static-init order picks one silently (keep one registration)
""")
    T.assertExpectedInline(check(repo, capsys, "--changed-since", "HEAD", "--select", "PORTER021")[1], """\
aten/src/ATen/native/mps/operations/BinaryKernel.mm:74: PORTER021 stub-registered-twice: exp_stub is registered again (hypot_mps_kernel); it is already registered at aten/src/ATen/native/mps/operations/UnaryKernel.mm:21 (exp_kernel_mps); static-init order picks one silently (keep one registration)
""")


def test_list_changed_ops(repo, capsys):
    edit(repo, BINARY_METAL, "REGISTER_INT2FLOAT_BINARY_OP(atan2);\n", "")
    edit(repo, BINARY_METAL, "c10::metal::hypot(", "::metal::hypot(")     # inside hypot_functor's body
    edit(repo, UNARY_MM, "REGISTER_UNARY_TI_DISPATCH(sinc);\n", "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert code == 0
    T.assertExpectedInline(out, """\
atan2
hypot
sinc
""")


def test_a_pure_deletion_inside_a_functor_touches_its_op(repo, capsys):
    # the deleted line names no op (template, enable_if_t, bool, ...) and leaves no changed
    # line on the new side: only the deletion's place inside copysign_functor says whose it is.
    # Its integer overload now repeats the float one's constraint: copysign must be tested.
    edit(repo, BINARY_METAL, "  template <typename T, enable_if_t<!is_floating_point_v<T>, bool> = true>\n",
         "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert (code, out) == (0, "copysign\n")


def test_a_changed_kernel_header_touches_the_ops_of_every_kernel_file_including_it(repo, capsys):
    # UnaryKernel.h is #included by UnaryKernel.metal only: a change to it can break any functor
    # there, though no changed line names an op (a PR green with its ports broken, otherwise)
    edit(repo, f"{KERNELS}/UnaryKernel.h", "  T nan;\n", "  T nan;\n  T spare;\n")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert code == 0
    ops = out.split()
    assert {"neg", "bitwise_not", "exp", "sin", "sinc", "round"} <= set(ops)
    assert not {"atan2", "hypot", "add"} & set(ops)          # BinaryKernel.metal does not include it


def test_a_changed_c10_metal_header_touches_the_ops_of_the_files_including_it(real_root, capsys):
    # a broken c10::metal::hypot (a line naming no op) fails `porter test hypot`; the PR's ops
    # must name hypot, or the workflow skips every test job and reports green
    utils = real_root / "c10/metal/utils.h"
    _git(real_root, "init", "-q")
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-q", "-m", "base")
    text = utils.read_text()
    assert "  auto h3 = a * sqrt_1_plus_r;\n" in text
    utils.write_text(text.replace("  auto h3 = a * sqrt_1_plus_r;\n", "  auto h3 = a * sqrt_1_plus_r * 1.5f;\n"))
    code, out = check(real_root, capsys, "--changed-since", "HEAD", "--list-changed-ops", "--explain")
    assert code == 0
    ops = [line for line in out.splitlines() if not line.startswith(" ")]
    # BinaryKernel.metal: its hypot functor calls c10::metal::hypot, its other functors do not;
    # UnaryKernel.metal includes utils.h but none of its functors reaches hypot: every op of
    # it is tested, since a header that no longer builds fails the whole file on a Mac
    assert "hypot" in ops and "atan2" not in ops and {"sin", "exp"} <= set(ops)
    assert "c10/metal/utils.h" in out and "hypot, used by functor hypot of BinaryKernel.metal" in out


@pytest.mark.slow
def test_three_ports_list_exactly_the_ported_ops(real_root, capsys):
    # issue 23: after new-op heaviside, migrate sign and migrate softplus, the list held `std`,
    # `take` and `to`, from identifiers in softplus's deleted MPSGraph code
    # (`std::to_string(beta.to<double>())`); ops are decided from structure only
    _git(real_root, "init", "-q")
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-q", "-m", "base")
    for command in (["new-op", "heaviside"], ["migrate-from-mpsgraph", "sign"],
                    ["migrate-from-mpsgraph", "softplus"]):
        assert main([*command, "--root", str(real_root)]) == 0, command
        _git(real_root, "add", "-A")
        _git(real_root, "commit", "-q", "-m", command[1])
    code, out = check(real_root, capsys, "--changed-since", "HEAD~3", "--list-changed-ops")
    assert (code, out) == (0, "heaviside\nsign\nsoftplus\n")
    code, out = check(real_root, capsys, "--changed-since", "HEAD~3", "--list-changed-ops", "--json", "--explain")
    why = json.loads(out)["why"]
    assert sorted(why) == ["heaviside", "sign", "softplus"]
    assert any("at HEAD~3: MPS implementation softplus_out_mps, removed" in r for r in why["softplus"])
    assert any("SoftplusParams, used by functor softplus" in r for r in why["softplus"])
    assert any("functor heaviside_functor" in r or "functor heaviside" in r for r in why["heaviside"])


def test_a_deleted_registration_line_lists_its_op(repo, capsys):
    edit(repo, BINARY_METAL, "REGISTER_FLOAT_BINARY_OP(copysign);\n", "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops", "--explain")
    assert code == 0
    T.assertExpectedInline(out, """\
copysign
  aten/src/ATen/native/mps/kernels/BinaryKernel.metal:145 at HEAD: kernel registration copysign, removed
""")


def test_identifiers_on_deleted_lines_name_no_op(repo, capsys):
    # a deleted line of code outside every structure porter knows names nothing, whatever
    # words it holds (`exp`, `sin` and `neg` are ops of the fixture)
    edit(repo, BINARY_MM, "} // namespace at::native", "// exp(sin(neg(x)))\n} // namespace at::native")
    _git(repo, "commit", "-qam", "comment")
    edit(repo, BINARY_MM, "// exp(sin(neg(x)))\n", "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert (code, out) == (0, "")


def test_names_on_changed_lines_of_unrelated_files_touch_no_op(real_root, capsys):
    # English in a README is no op: "to", "index", "real" (aten ops of the real yaml) would send
    # `porter test index` to the workflow's test jobs, which exit 2 (no such OpInfo) on a PR
    # that changed no kernel
    _git(real_root, "init", "-q")
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-q", "-m", "base")
    notes = real_root / "NOTES.md"
    notes.write_text("Move the tensor to the device, index it, take the real part.\n")
    _git(real_root, "add", "NOTES.md")
    code, out = check(real_root, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert (code, out) == (0, "")


def test_changed_since_bad_input(repo, capsys):
    assert main(["check", "--root", str(repo), "--changed-since", "no-such-ref"]) == 2
    assert "unknown revision" in capsys.readouterr().err
    assert main(["check", "--root", str(repo), "--list-changed-ops"]) == 2


# --- the real-size tree ----------------------------------------------------------------------

def test_real_size_tree_runs_to_completion(real_root, capsys):
    code, out = check(real_root, capsys, "--json")
    data = json.loads(out)
    assert code == 1
    assert set(data["counts"]) == {"PORTER002", "PORTER011", "PORTER023", "PORTER030"}
    by_id: dict[str, list[str]] = {}
    for f in data["findings"]:
        by_id.setdefault(f["id"], []).append(f["message"])
    # The tree is torch 2.13's files over the fixture's .mm/.metal, so four kinds of finding are
    # right on it. PORTER002: the real yaml's `MPS: x_mps` rows whose function the fixture's
    # mps/ sources never mention (derived here the naive way, by word search).
    undefined = [re.match(r"'([\w.]+)' dispatches MPS to (\w+),", m).groups() for m in by_id["PORTER002"]]
    assert sorted(undefined) == sorted(_mps_rows_named_nowhere(real_root))
    # PORTER011: the fixture registers five unary kernels without complex, which upstream's
    # OpInfos send (add/sub's alpha kernels cover every dtype, as upstream's do).
    assert sorted(re.match(r"kernel '(\w+)'.*OpInfo '([\w.]+)'", m).groups() for m in by_id["PORTER011"]) == [
        ("cos", "cos"), ("exp2", "exp2"), ("rsqrt", "rsqrt"), ("sin", "sin"), ("sinc", "sinc")]
    # PORTER023: torch 2.13's yaml shares the CPU function of these ops with MPS; the fixture's
    # sources say which stub each runs, and its host files register none of them (the state
    # tests/test_activation_ports.py, test_cpu_translation.py and test_new_op.py port from; mul's
    # kernel file has a complex-only mul_functor): MPS would fail them.
    assert sorted(re.match(r"'([\w.]+)' sends MPS to the shared \w+, which runs (\w+)", m).groups()
                  for m in by_id["PORTER023"]) == [
        ("hardshrink_backward.grad_input", "shrink_backward_stub"),
        ("hardsigmoid.out", "hardsigmoid_stub"),
        ("leaky_relu_backward.grad_input", "leaky_relu_backward_stub"),
        ("mul.out", "mul_stub"),
        ("softshrink_backward.grad_input", "shrink_backward_stub")]
    # PORTER030: upstream common_mps.py's own keys that name no OpInfo of torch 2.13.
    assert sorted(re.match(r"'([\w.]+)' in (\w+)", m).groups() for m in by_id["PORTER030"]) == sorted([
        ("div", "SUPPORTED_COMPLEX_OPS"),
        ("nn.functional.norm", "UNIMPLEMENTED_XFAILLIST"), ("segment_reduce", "UNIMPLEMENTED_XFAILLIST"),
        ("_segment.reduce", "UNIMPLEMENTED_XFAILLIST"), ("segment.reduce", "UNIMPLEMENTED_XFAILLIST"),
        ("segment_reduce_offsets", "UNIMPLEMENTED_XFAILLIST"),
        ("_segment_reduce_offsets", "UNIMPLEMENTED_XFAILLIST"),
        ("_segment_reduce_lengths", "UNIMPLEMENTED_XFAILLIST"), ("sparse.mm", "UNIMPLEMENTED_XFAILLIST"),
        ("symeig", "UNIMPLEMENTED_XFAILLIST"), ("segment_reduce_", "UNIMPLEMENTED_XFAILLIST"),
        ("_upsample_bicubic2d_aa", "UNIMPLEMENTED_XFAILLIST"), ("mat", "UNIMPLEMENTED_XFAILLIST"),
        ("_segment_reduce", "XFAILLIST_GRAD"), ("_upsample_bicubic2d_aa", "XFAILLIST_GRAD"),
        ("masked.scatter", "XFAILLIST_GRAD")])


def _mps_rows_named_nowhere(root: Path) -> list[tuple[str, str]]:
    """(yaml entry, function) of each `MPS: *_mps` dispatch row whose function name appears in
    no mps/ .mm, .cpp or .h file."""
    sources = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                        for p in (root / "aten/src/ATen/native/mps").rglob("*")
                        if p.suffix in (".mm", ".cpp", ".h") and p.is_file())
    found = []
    text = (root / NATIVE_YAML).read_text(encoding="utf-8")
    for entry in re.finditer(r"^- func: ([\w.]+)\(.*?(?=^- func:|\Z)", text, re.M | re.S):
        for keys, function in re.findall(r"^ {4,}([\w, ]+):\s*(\w+)\s*$", entry.group(0), re.M):
            if ("MPS" in [k.strip() for k in keys.split(",")] and function.endswith("_mps")
                    and not re.search(rf"\b{function}\b", sources)):
                found.append((entry.group(1), function))
    assert len(found) > 100          # the oracle itself found the rows
    return found


def test_a_line_deleted_inside_a_registration_macro_lists_the_ops_of_its_users(repo, capsys):
    # the deleted line sits in `#define REGISTER_FLOAT_BINARY_OP`: it names NAME, no op, yet
    # every op registered through the macro lost its half kernel (`porter test copysign
    # --dtype float16` fails on a Mac); listing nothing skipped every test of the PR
    edit(repo, BINARY_METAL, "  REGISTER_BINARY_OP(NAME, half, half);   \\\n", "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert (code, out) == (0, "atan2\ncopysign\nfmax\nfmin\nhypot\n")
    code, out = check(repo, capsys, "--changed-since", "HEAD")
    assert code == 1
    missing = {line.split("kernel '")[1].split("'")[0] for line in out.splitlines() if "PORTER011" in line}
    full = {line.split("kernel '")[1].split("'")[0] for line in check(repo, capsys)[1].splitlines()
            if "PORTER011" in line and "float16" in line}
    assert full and full <= missing          # what the full run finds for those ops, the PR's run finds


def test_a_line_deleted_inside_an_instantiation_macro_lists_only_the_op_it_registered(repo, capsys):
    # INSTANTIATE_UNARY_KERNELS2 registers nine ops; only exp's registrations changed
    edit(repo, UNARY_METAL, "  REGISTER_UNARY_OP(exp, DTYPE1, DTYPE0);          \\\n", "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops", "--explain")
    assert code == 0
    T.assertExpectedInline(out, """\
exp
  aten/src/ATen/native/mps/kernels/UnaryKernel.metal:141: registrations of exp changed through macro INSTANTIATE_UNARY_KERNELS2
""")


def test_a_deleted_macro_defined_functor_lists_its_op(repo, capsys):
    # without its functor the file no longer builds, and erfinv's tests say so
    edit(repo, UNARY_METAL, "DEFINE_UNARY_FLOATING_FUNCTOR(erfinv);\n", "")
    code, out = check(repo, capsys, "--changed-since", "HEAD", "--list-changed-ops")
    assert (code, out) == (0, "erfinv\n")


def test_a_changed_c10_metal_function_reaches_the_macro_defined_functor_calling_it(real_root, capsys):
    # DEFINE_UNARY_FLOATING_FUNCTOR(erfinv) expands to a functor calling erfinv(x): a changed
    # c10::metal::erfinv is erfinv's, not "used by none" of UnaryKernel.metal's functors
    header = real_root / "c10/metal/special_math.h"
    _git(real_root, "init", "-q")
    _git(real_root, "add", "-A")
    _git(real_root, "commit", "-q", "-m", "base")
    text = header.read_text()
    assert "{0.886226899, " in text
    header.write_text(text.replace("{0.886226899, ", "{0.886226898, "))
    code, out = check(real_root, capsys, "--changed-since", "HEAD", "--list-changed-ops", "--explain")
    assert code == 0
    unary = [line for line in out.splitlines() if "UnaryKernel.metal" in line]
    assert unary and all("erfinv, used by functor erfinv of UnaryKernel.metal" in line for line in unary)
    assert "erfinv" in out.split()


@pytest.mark.parametrize("fmt", ["markdown", "github", "lintrunner"])
def test_list_changed_ops_refuses_a_format_it_cannot_write(repo, capsys, fmt):
    # the plain list came out whatever --format said: a CI step parsing annotations read ops
    capsys.readouterr()
    code = main(["check", "--root", str(repo), "--changed-since", "HEAD", "--list-changed-ops", "--format", fmt])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "") and f"not --format {fmt}" in err and err.count("\n") <= 2
