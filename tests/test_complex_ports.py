"""Complex overloads from the CPU's one lambda (issue 22, items 2 and 3): acosh, asinh and atanh
compute `std::acosh(a)` & co. for real and complex dtypes alike; for complex64 that is glibc's
cacoshf, with no source to translate. porter maps each onto a float2 routine of c10/metal and,
where the checkout lacks it (torch 2.13 has none), writes its own into c10/metal/utils.h
(porter.port.complex_helpers). On the real-size tree, whose cpu/UnaryOpsKernel.cpp carries
asinh's and atanh's lambdas in upstream's shape (fixtures/mini-pytorch, in our own words); its
acosh runs at::vml, so a test gives it a lambda of its own."""

from __future__ import annotations

import shutil

import pytest

from porter.source import checkout as co

UNARY_METAL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
UTILS = "c10/metal/utils.h"
CPU_UNARY = "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp"
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")


def _acosh_as_a_lambda(root) -> None:
    """The fixture's acosh runs at::vml (no lambda to read); upstream's runs a lambda under a
    dispatch that takes complex dtypes, as the fixture's asinh does: give acosh that shape."""
    cpu = root / CPU_UNARY
    text = cpu.read_text()
    assert text.count("IMPLEMENT_VML_KERNEL(acosh)") == 1
    cpu.write_text(text.replace("IMPLEMENT_VML_KERNEL(acosh)", """static void acosh_kernel(TensorIteratorBase& iter) {
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2(kBFloat16, kHalf, iter.common_dtype(), "acosh_cpu", [&]() {
    cpu_kernel(iter, [=](scalar_t a) -> scalar_t { return std::acosh(a); });
  });
}"""))


def test_the_port_writes_the_complex_overload_and_its_routine_into_utils_h(real_root):
    from tests.porter_run import porter
    result = porter("migrate-from-mpsgraph", "atanh", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    assert "+    return T(c10::metal::atanh(float2(x)));" in result.out
    assert "+++ b/c10/metal/utils.h" in result.out
    assert "+inline float2 atanh(float2 z) {" in result.out
    # beside the float2 helpers upstream keeps there, after the last of them (conj)
    utils = (real_root / UTILS).read_text()
    assert "inline float2 conj(float2 a)" in utils and "float2 atanh" not in utils


@needs_gxx
@pytest.mark.parametrize("op", ["acosh", "asinh", "atanh"])
@pytest.mark.slow
def test_ported_from_the_cpu_lambda_green_with_reference_inputs(real_root, op):
    # every dtype the MPS test sends, complex64 included, with the reference inputs: signed
    # zeros on the branch cuts, +-inf and NaN in both parts, values up to 1e20 and max/4
    from porter.harness.measure_port import verify
    pytest.importorskip("torch")
    if op == "acosh":
        _acosh_as_a_lambda(real_root)
    verdict = verify(co.Checkout.at(real_root), op, "mpsgraph", reference_inputs=True)
    assert verdict.status == "verified", verdict
    assert verdict.passed == verdict.tested >= 8, verdict


def _planned(root, op):
    from porter.harness.measure_port import plan_in_memory
    checkout = co.Checkout.at(root)
    changes = plan_in_memory(checkout, op, "mpsgraph").changes
    return checkout, changes, changes.current(UTILS, checkout.read)


@needs_gxx
@pytest.mark.slow
def test_wrong_on_purpose_a_naive_z_squared_overflows_and_fails_complex64(real_root):
    # asinh without its log(2z) branch computes z * z + 1 for |z| = 1e20 (the reference inputs'
    # large values): NaN, where the CPU gives 46.75 + i pi/4
    from porter.harness.measure_port import measure
    pytest.importorskip("torch")
    checkout, changes, utils = _planned(real_root, "asinh")
    branch = "if (::metal::max(ax, ay) > 4194304.0f) {"
    assert utils.count(branch) == 1
    changes.set(UTILS, checkout.read(UTILS), utils.replace(branch, "if (false) {"))
    wrong = measure(checkout, "asinh", changes, reference_inputs=True, dtypes=["complex64"])
    assert wrong.status == "fails" and wrong.failed_dtype == "complex64", wrong


@needs_gxx
@pytest.mark.slow
def test_wrong_on_purpose_a_lost_signed_zero_on_the_cut_fails_complex64(real_root):
    # asinh(-0 + 2i) = -1.317 + i pi/2: the sign of the zero real part picks the side of the cut.
    # Putting the sign back by comparison (x < 0) reads -0 as +0 and lands on the other side
    from porter.harness.measure_port import measure
    pytest.importorskip("torch")
    checkout, changes, utils = _planned(real_root, "asinh")
    signed = "return float2(::metal::copysign(re, x), ::metal::copysign(im, y));"
    assert utils.count(signed) == 1
    changes.set(UTILS, checkout.read(UTILS),
                utils.replace(signed, "return float2(x < 0 ? -re : re, y < 0 ? -im : im);"))
    wrong = measure(checkout, "asinh", changes, reference_inputs=True, dtypes=["complex64"])
    assert wrong.status == "fails" and wrong.failed_dtype == "complex64", wrong


@needs_gxx
@pytest.mark.slow
def test_wrong_on_purpose_the_routine_missing_from_c10_metal_is_a_build_error_naming_it(real_root):
    from porter.harness.measure_port import measure
    pytest.importorskip("torch")
    checkout, changes, utils = _planned(real_root, "atanh")
    changes.set(UTILS, checkout.read(UTILS), checkout.read(UTILS))
    wrong = measure(checkout, "atanh", changes, reference_inputs=True, dtypes=["complex64"])
    # the functor calls c10::metal::atanh(float2): without porter's routine in utils.h the
    # kernel file does not build, and the error names the routine
    assert wrong.status == "fails" and wrong.failed_dtype == "complex64", wrong
    assert "c10::metal::atanh is not defined in the checkout's c10/metal" in wrong.detail, wrong


def test_without_c10_metal_in_the_checkout_the_complex_body_is_still_asked_for(mini_root):
    # the bundled miniature builds against the installed torch's headers: porter does not edit
    # those, so the complex64 overload stays the contributor's (--complex-body)
    from tests.porter_run import porter
    result = porter("migrate-from-mpsgraph", "atanh", "--dry-run", root=mini_root)
    assert "c10/metal/utils.h" not in result.out


@needs_gxx
@pytest.mark.slow
def test_reference_inputs_say_where_a_macs_cpu_reference_is_no_answer(real_root):
    # a Mac's CPU computes asinh of a complex<float> by libc++'s formula, which cancels for a
    # negative real part and overflows beyond 1.8e19: porter's reference inputs are held to the
    # exact value on every platform, and the report says on how many rows a Mac's CPU departs
    import re

    from tests.porter_run import porter
    pytest.importorskip("torch")
    assert porter("migrate-from-mpsgraph", "asinh", "--no-test", root=real_root).code == 0
    result = porter("test", "asinh", "--device", "emulate", "--reference-inputs",
                    "--dtype", "complex64", root=real_root)
    assert result.code == 0, result.out
    note = re.search(r"note complex64: reference inputs held to the exact value \(complex128, "
                     r"rounded\): a Mac's CPU reference \(libc\+\+'s std::asinh of a "
                     r"complex<float>, .*\) departs from it beyond tolerance on (\d+) row", result.out)
    assert note and int(note.group(1)) > 1000, result.out
