"""Planning and testing read one OpInfo, or say they did not (issue 21, item 8): a test run
that imports the installed torch's op database says where the checkout's OpInfo source
disagrees with it for a tested op, or has none; and the dtypes a port registers are those the
CPU reference accepts and the host dispatches, on upstream's shapes of the CPU kernel."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("torch")

from tests.porter_run import porter  # noqa: E402

CMI = "torch/testing/_internal/common_methods_invocations.py"
HYPOT = "    BinaryUfuncInfo('hypot',\n                    dtypes=floating_types_and(torch.bfloat16, torch.half),\n"
needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None, reason="no C++ compiler")


def edit_cmi(root, old, new):
    path = root / CMI
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


@needs_cxx
@pytest.mark.slow
def test_the_same_source_says_nothing(real_root):
    # --samples-only: the fixture's hypot is red on porter's reference inputs for a true reason
    # (hypot(inf, nan) is nan, the CPU's inf); these tests are about the OpInfo's source
    res = porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "--samples-only", root=real_root)
    assert res.code == 0 and "note: the checkout" not in res.out + res.err


@needs_cxx
@pytest.mark.slow
def test_a_checkout_opinfo_that_differs_from_the_tested_one_is_named(real_root):
    edit_cmi(real_root, HYPOT, HYPOT.replace("floating_types_and(torch.bfloat16, torch.half)",
                                             "floating_types()"))
    res = porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "--samples-only", root=real_root)
    assert ("note: the checkout's OpInfo for hypot (torch/testing/_internal/"
            "common_methods_invocations.py:") in res.err and "note:" not in res.out
    assert ("sends float32 on MPS, the installed torch 2.13" in res.err
            and "sends bfloat16, float16, float32: a port registers the checkout's" in res.err)
    data = json.loads(porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "--json",
                             root=real_root).out)
    assert len(data["opinfo_source"]) == 1


KERNELS = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
HYPOT_BODY = "c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b))));"


@needs_cxx
@pytest.mark.parametrize("wrong_on, code", [("is_same_v<T, half>", 0), ("is_same_v<T, float>", 1)])
@pytest.mark.slow
def test_a_dtype_the_checkout_no_longer_sends_is_skipped_as_a_mac_skips_it(real_root, wrong_on, code):
    # review 31's O03 (a false red): the checkout's OpInfo narrows the MPS dtypes to float32, a
    # Mac's test sends float32 alone; a functor wrong on half is green there, on float32 red
    edit_cmi(real_root, HYPOT, HYPOT.replace("floating_types_and(torch.bfloat16, torch.half)",
                                             "floating_types()"))
    path = real_root / KERNELS
    text = path.read_text()
    assert text.count(HYPOT_BODY) == 1
    path.write_text(text.replace(HYPOT_BODY, HYPOT_BODY.replace("float(b))))",
                                                                f"float(b)) + ({wrong_on} ? 1 : 0)))")))
    res = porter("test", "hypot", "--device", "emulate", "--samples-only", root=real_root)
    assert res.code == code, res.out
    assert ("skip float16, bfloat16: not sent: the checkout's OpInfo for hypot (torch/testing/"
            "_internal/common_methods_invocations.py:") in res.out
    assert "no longer sends these on MPS, so a Mac's test_mps.py does not run them" in res.out
    assert ("FAIL float32" in res.out) is (code == 1)
    assert "FAIL float16" not in res.out


@needs_cxx
@pytest.mark.slow
def test_a_dtype_the_checkout_sends_and_the_run_did_not_test_is_not_proven(real_root):
    # the other way round from the test above: a Mac's test sends int32, this run cannot
    edit_cmi(real_root, HYPOT, HYPOT.replace("floating_types_and(torch.bfloat16, torch.half)",
                                             "floating_types_and(torch.bfloat16, torch.half, torch.int32)"))
    res = porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "--samples-only",
                 root=real_root)
    assert res.code == 1, res.out
    assert ("not proven: the checkout's OpInfo for hypot (torch/testing/_internal/"
            "common_methods_invocations.py:") in res.out
    assert "sends int32 on MPS, which the installed torch 2.13" in res.out
    assert "note: the checkout's OpInfo" not in res.err       # said once, as the verdict


@needs_cxx
@pytest.mark.slow
def test_dtypes_the_checkout_hides_from_a_static_reading_are_not_proven(real_root):
    # a review's false green: `dtypesIfMPS` through a `**` splat was not read at all
    edit_cmi(real_root, HYPOT, HYPOT + "                    **{'dtypesIfMPS': "
             "floating_types_and(torch.bfloat16, torch.half, torch.int32)},\n")
    res = porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "--samples-only",
                 root=real_root)
    assert res.code == 1, res.out
    assert "spells the dtypes it sends on MPS as porter cannot read (a `**` argument)" in res.out


@needs_cxx
@pytest.mark.slow
def test_a_checkout_without_the_opinfo_says_so(real_root):
    edit_cmi(real_root, HYPOT, HYPOT.replace("'hypot'", "'hypot_elsewhere'"))
    res = porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "--samples-only", root=real_root)
    # a note, on stderr (stdout is the report), and -q removes it
    assert "note: the checkout has no OpInfo for hypot (torch/testing/_internal): tested with " \
           "the installed torch 2.13" in res.err and "note:" not in res.out
    quiet = porter("test", "hypot", "--device", "emulate", "--dtype", "float32", "-q", "--samples-only",
                   root=real_root)
    assert quiet.code == 0 and "no OpInfo" not in quiet.out + quiet.err


# The run reads the checkout's OpInfo source only where it can differ from the op database's:
# the same files, byte for byte, are skipped; any other checkout is read (the tests above).
def _torch_package(base, files: dict[str, str]):
    (base / "torch").mkdir(parents=True)
    (base / "torch/__init__.py").write_text("")
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return base


SOURCES = {CMI: "op_db = [OpInfo('hypot', dtypes=floating_types())]\n",
           "torch/testing/_internal/opinfo/definitions/special.py": "op_db = []\n"}


@pytest.mark.parametrize("change, same", [
    ({}, True),
    ({CMI: SOURCES[CMI].replace("floating_types()", "all_types()")}, False),
    ({"torch/testing/_internal/opinfo/definitions/special.py": "op_db = [OpInfo('x')]\n"}, False),
    ({"torch/testing/_internal/opinfo/definitions/extra.py": "op_db = []\n"}, False),
])
def test_the_checkouts_opinfo_source_is_read_unless_it_is_the_op_databases_own(tmp_path, change, same):
    from porter.harness.opinfo_agreement import same_sources
    from porter.source.checkout import Checkout

    installed = _torch_package(tmp_path / "site", SOURCES)
    checkout = _torch_package(tmp_path / "checkout", {**SOURCES, **change})
    assert same_sources(Checkout(checkout), str(installed / "torch")) is same
    # a file the op database has and the checkout lacks: differs too
    if not change:
        (checkout / "torch/testing/_internal/opinfo/definitions/special.py").unlink()
        assert same_sources(Checkout(checkout), str(installed / "torch")) is False


def test_an_op_database_of_unknown_place_is_compared_with_nothing(tmp_path):
    from porter.harness.opinfo_agreement import same_sources
    from porter.source.checkout import Checkout

    checkout = Checkout(_torch_package(tmp_path / "checkout", SOURCES))
    assert not same_sources(checkout, None) and not same_sources(checkout, "?")
    # the cached run's record of an op database now gone from disk
    assert not same_sources(checkout, str(tmp_path / "gone" / "torch"))


# upstream's CPU kernels: registered per ISA, dispatched over floating and complex types
ALSO_AVX512 = "ALSO_REGISTER_AVX512_DISPATCH"


def test_softplus_registered_per_isa_gets_no_integer_kernels(real_root):
    cpu = real_root / "aten/src/ATen/native/cpu/Activation.cpp"
    text = cpu.read_text()
    assert "REGISTER_DISPATCH(softplus_stub" in text
    cpu.write_text(text.replace("REGISTER_DISPATCH(softplus_stub", f"{ALSO_AVX512}(softplus_stub"))
    res = porter("migrate-from-mpsgraph", "softplus", "--body", "x", "--dry-run", "--no-build", root=real_root)
    assert res.code == 0, res.err
    regs = [line for line in res.out.splitlines() if line.startswith("+REGISTER_UNARY_ALPHA_OP(softplus")]
    assert regs and all(t in line for line in regs for t in ("Params_float",))
    assert not any(f"softplus, {t}," in line for line in regs for t in ("int", "short", "char", "uchar", "bool"))
    assert "not registered: bool, int16, int32, int8, uint8 (the CPU kernel at " in res.err   # a note


def test_nan_to_num_dispatched_with_complex_types_gets_no_integer_kernels(real_root):
    cpu = real_root / "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp"
    text = cpu.read_text()
    start = text.index("nan_to_num_kernel(")
    dispatch = text.index("AT_DISPATCH_", start)
    end = text.index("(", dispatch)
    cpu.write_text(text[:dispatch] + "AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES_AND2" + text[end:])
    body = "isnan(x) ? nan : (isinf(x) ? (x > 0 ? posinf : neginf) : x)"
    res = porter("migrate-from-mpsgraph", "nan_to_num", "--body", body, "--dry-run", "--no-build",
                 root=real_root)
    assert res.code == 0, res.err
    assert not any(line.startswith("+REGISTER_UNARY_ALPHA_OP(nan_to_num, " + t + ",")
                   for line in res.out.splitlines() for t in ("int", "long", "short", "char", "uchar", "bool"))
    assert "not registered: bool, int16, int32, int64, int8, uint8" in res.err   # a note
