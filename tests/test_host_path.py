"""The kernel a dtype runs under the emulator is the one a Mac's host code would look up (issue
21, item 4): a REGISTER_DISPATCH the preprocessor drops registers nothing; a structured kernel
that runs another op's stub (`sub_out` -> `add_stub(-alpha)`) or splits dtypes between stubs
(`sgn_out`: `sign_stub` for real inputs) is followed, and a port through such a kernel waits
for that stub's MPS kernel. The fixture carries both shared functions in upstream's shape (our
own words); the tests here edit them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from porter.source.checkout import KERNELS, NATIVE, NATIVE_YAML, OPERATIONS  # noqa: E402
from tests.porter_run import by_dtype, porter, snapshot  # noqa: E402

if shutil.which(os.environ.get("CXX", "g++")) is None:
    pytest.skip("no C++ compiler for the Metal emulator", allow_module_level=True)

SUB_OUT = """TORCH_IMPL_FUNC(sub_out) (
  const Tensor& self, const Tensor& other, const Scalar& alpha, const Tensor& result
) {
  add_stub(device_type(), *this, -alpha);
  TORCH_INTERNAL_ASSERT(result.scalar_type() == output().dtype());
}

"""
SUB_CALL = "  add_stub(device_type(), *this, -alpha);\n"
ADD_REGISTRATION = "REGISTER_DISPATCH(add_stub, &add_mps_kernel)\n"
SGN_OUT = """TORCH_IMPL_FUNC(sgn_out) (const Tensor& self, const Tensor& result) {
  if (self.is_complex()) {
    sgn_stub(device_type(), *this);
  } else {
    sign_stub(device_type(), *this);
  }
}

"""


def add_function(root: Path, cpp: str, before: str, text: str) -> None:
    path = root / NATIVE / cpp
    source = path.read_text()
    assert before in source
    path.write_text(source.replace(before, text + before, 1))


def edit_function(root: Path, cpp: str, old: str, new: str) -> None:
    """Replaces `old`, found once in the fixture's native/`cpp`, by `new`."""
    path = root / NATIVE / cpp
    source = path.read_text()
    assert source.count(old) == 1, old
    path.write_text(source.replace(old, new))


def route_mps_to_shared(root: Path, old: str, new: str) -> None:
    yaml = root / NATIVE_YAML
    rows = yaml.read_text()
    assert rows.count(old) == 1
    yaml.write_text(rows.replace(old, new))


def outcomes(root: Path, op: str, *args: str) -> tuple[int, dict[str, dict]]:
    res = porter("test", op, "--device", "emulate", "--json", *args, root=root)
    data = json.loads(res.out)
    return res.code, by_dtype(data)


@pytest.mark.parametrize("wrap", [("#if 0\n", "#endif\n"), ("#if 1\n#else\n", "#endif\n")],
                         ids=["if-0", "else-of-if-1"])
@pytest.mark.slow
def test_a_registration_the_preprocessor_drops_registers_nothing(real_root, wrap):
    assert porter("new-op", "heaviside", root=real_root).code == 0
    code, by = outcomes(real_root, "heaviside", "--dtype", "float32")
    assert code == 0 and by["float32"]["outcome"] == "pass"
    mm = real_root / OPERATIONS / "BinaryKernel.mm"
    line = "REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)\n"
    text = mm.read_text()
    assert text.count(line) == 1
    mm.write_text(text.replace(line, wrap[0] + line + wrap[1]))
    code, by = outcomes(real_root, "heaviside", "--dtype", "float32", "--dtype", "int32")
    assert code == 1
    for d in by.values():
        assert d["outcome"] == "fail"
        assert "MPS raises 'heaviside_stub: missing kernel for mps'" in d["message"]
    # and `#if 1` alone keeps it
    mm.write_text(text.replace(line, "#if 1\n" + line + "#endif\n"))
    code, by = outcomes(real_root, "heaviside", "--dtype", "float32")
    assert code == 0 and by["float32"]["outcome"] == "pass"
    # a registration through a macro of the file's own: not read, so not proven, never "MPS
    # raises" (review 29's H05: a Mac registers it as before)
    mm.write_text(text.replace(line, "#define PORTER_REGISTER(fn) REGISTER_DISPATCH(heaviside_stub, &fn)\n"
                                     "PORTER_REGISTER(heaviside_mps_kernel)\n"))
    try:
        code, by = outcomes(real_root, "heaviside", "--dtype", "float32")
    finally:
        mm.write_text(text)
    assert code == 1 and by["float32"]["message"].startswith("not proven: "), by
    assert "names heaviside_stub otherwise than in a REGISTER_DISPATCH line porter reads" \
        in by["float32"]["message"], by


@pytest.mark.slow
def test_sub_runs_the_add_kernel_with_minus_alpha(real_root):
    assert SUB_OUT in (real_root / NATIVE / "BinaryOps.cpp").read_text()
    route_mps_to_shared(real_root, "    CPU, CUDA: sub_out\n    MPS: sub_out_mps\n", "    CPU, CUDA, MPS: sub_out\n")
    code, by = outcomes(real_root, "sub", "--dtype", "float32", "--dtype", "int64")
    assert code == 0 and {d["outcome"] for d in by.values()} == {"pass"}
    # the sign of alpha is the shared function's: passing it unnegated fails every sample
    cpp = real_root / NATIVE / "BinaryOps.cpp"
    cpp.write_text(cpp.read_text().replace("*this, -alpha)", "*this, alpha)"))
    code, by = outcomes(real_root, "sub", "--dtype", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail"
    cpp.write_text(cpp.read_text().replace("*this, alpha)", "*this, -alpha)"))
    # sub_stub's own registration is no help: sub_out never calls it
    mm = real_root / OPERATIONS / "BinaryKernel.mm"
    host = mm.read_text()
    assert "REGISTER_DISPATCH(sub_stub, &sub_mps_kernel)" in host
    mm.write_text(host.replace(ADD_REGISTRATION, ""))
    code, by = outcomes(real_root, "sub", "--dtype", "float32")
    assert code == 1
    assert ("sub_out runs add_stub for float32 (aten/src/ATen/native/BinaryOps.cpp:"
            in by["float32"]["message"])
    assert "MPS raises 'add_stub: missing kernel for mps'" in by["float32"]["message"]


@pytest.mark.slow
def test_sub_is_ported_as_its_row_joining_sub_out_which_runs_add_with_minus_alpha(real_root):
    """sub_out runs add_stub with -alpha, and add_stub has its MPS kernel (add_alpha): the port
    is sub.out's MPS row joining sub_out, nothing in the kernel or host files; the test runs
    add_alpha with -alpha, as a Mac would. Before: refused ('porter does not port an op through
    another op's stub')."""
    kernels = {p: (real_root / p).read_text() for p in (f"{OPERATIONS}/BinaryKernel.mm",
                                                        f"{KERNELS}/BinaryKernel.metal")}
    res = porter("migrate-from-mpsgraph", "sub", root=real_root)
    assert res.code == 0, res.err + res.out
    assert {p: (real_root / p).read_text() for p in kernels} == kernels
    rows = (real_root / NATIVE_YAML).read_text()
    start = rows.index("- func: sub.out(")
    assert "    CPU, CUDA, MPS: sub_out\n" in rows[start:rows.index("\n- func:", start)]
    code, by = outcomes(real_root, "sub", "--reference-inputs")
    assert code == 0 and by and {d["outcome"] for d in by.values()} == {"pass"}, \
        (code, {dtype: (d["outcome"], d.get("first_fail"), d.get("mismatches", [])[:1]) for dtype, d in by.items()})
    # wrong on purpose: a sub_out passing alpha unnegated (a + alpha * b) is red on every dtype
    edit_function(real_root, "BinaryOps.cpp", SUB_CALL, SUB_CALL.replace("-alpha", "alpha"))
    code, by = outcomes(real_root, "sub")
    assert code == 1 and {d["outcome"] for d in by.values()} == {"fail"}, by


def test_migrating_sub_is_refused_while_add_stub_has_no_mps_kernel(real_root):
    mm = real_root / OPERATIONS / "BinaryKernel.mm"
    mm.write_text(mm.read_text().replace(ADD_REGISTRATION, ""))
    before = snapshot(real_root)
    res = porter("migrate-from-mpsgraph", "sub", "--body", "a - alpha * b", root=real_root)
    assert res.code == 2 and snapshot(real_root) == before
    assert "'sub': sub_out runs add_stub(iter, -alpha), not sub_stub" in res.err
    assert "add_stub (registered for MPS by no *Kernel.mm)" in res.err
    assert "the add_alpha kernel aten/src/ATen/native/mps/kernels/BinaryKernel.metal registers" in res.err


@pytest.mark.slow
def test_sgn_is_ported_with_sign_while_sign_has_no_kernel_and_follows_sign_stub(real_root):
    # the tree's UnaryOps.cpp carries sgn_out as upstream writes it (SGN_OUT)
    assert SGN_OUT in (real_root / NATIVE / "UnaryOps.cpp").read_text()
    before = snapshot(real_root)
    # sign_stub, which sgn_out runs for real inputs, has no MPS kernel: one command ports both,
    # sign first, and its dry run lists the files of both ports
    res = porter("migrate-from-mpsgraph", "sgn", "--dry-run", root=real_root)
    assert res.code == 0 and snapshot(real_root) == before, res.err
    assert "note: ported sign too, first: sgn's shared function runs sign's kernel" in res.err
    assert "+REGISTER_UNARY_TI_DISPATCH(sign);" in res.out and "+REGISTER_UNARY_TI_DISPATCH(sgn);" in res.out, res.out
    assert "-TORCH_IMPL_FUNC(sign_out_mps)" in res.out, res.out
    # and candidates says what the command does: automatic, with sign's files among its own
    listed = {c["op"]: c for c in json.loads(porter("candidates", "--json", root=real_root).out)["candidates"]}
    assert listed["sgn"]["verdict"] == "automatic", listed["sgn"]
    assert "sign's port first, in one command" in listed["sgn"]["how"], listed["sgn"]
    # a sign porter cannot port completely (a CPU body it cannot translate) keeps sgn refused,
    # naming both
    kernels = real_root / NATIVE / "cpu/UnaryOpsKernel.cpp"
    kernels.write_text(kernels.read_text().replace(
        "return static_cast<scalar_t>((0 < a) - c10::is_negative(a));",
        "return static_cast<scalar_t>(frobnicate(a));"))
    before = snapshot(real_root)
    res = porter("migrate-from-mpsgraph", "sgn", root=real_root)
    assert res.code == 2 and snapshot(real_root) == before
    assert "real inputs run sign_stub (registered for MPS by no *Kernel.mm)" in res.err
    assert "porter would port sign with it, but sign's port is incomplete (the body of sign_functor" \
        in res.err, res.err
    # candidates answers from the same plan: refused, naming sign's missing body
    listed = {c["op"]: c for c in json.loads(porter("candidates", "--json", root=real_root).out)["candidates"]}
    assert listed["sgn"]["verdict"] == "refused" and "sign's port is incomplete" in listed["sgn"]["how"], listed["sgn"]
    kernels.write_text(kernels.read_text().replace(
        "return static_cast<scalar_t>(frobnicate(a));",
        "return static_cast<scalar_t>((0 < a) - c10::is_negative(a));"))
    # MPS sent to sgn_out by hand: real dtypes reach sign_stub, which has no kernel yet
    yaml = (real_root / NATIVE_YAML).read_text()
    start = yaml.index("- func: sgn.out(")
    old = yaml[start:yaml.index("\n- func:", start)]
    assert "    CPU, CUDA: sgn_out\n    MPS: sgn_out_mps\n" in old
    route_mps_to_shared(real_root, old, old.replace("    CPU, CUDA: sgn_out\n    MPS: sgn_out_mps\n",
                                                    "    CPU, CUDA, MPS: sgn_out\n"))
    code, by = outcomes(real_root, "sgn", "--dtype", "float32", "--dtype", "int32")
    assert code == 1
    assert "MPS raises 'sign_stub: missing kernel for mps'" in by["int32"]["message"]
    # with sign ported, the real dtypes run sign's kernel
    assert porter("migrate-from-mpsgraph", "sign", root=real_root).code == 0
    code, by = outcomes(real_root, "sgn", "--dtype", "float32", "--dtype", "int32")
    assert code == 0, by
    # and sgn's own port is sgn_stub's for the complex inputs that reach it: one complex overload
    # from the CPU's sgn_impl, no real registration (sign's kernel serves those)
    res = porter("migrate-from-mpsgraph", "sgn", "--dry-run", root=real_root)
    assert res.code == 0, res.err
    assert "inline enable_if_t<is_complex_v<T>, T> operator()(const T x)" in res.out
    assert "REGISTER_UNARY_OP(sgn, DTYPE##2, DTYPE##2);" in res.out
    assert "REGISTER_UNARY_OP(sgn, float, float)" not in res.out


@pytest.mark.slow
def test_branches_porter_cannot_read_are_not_proven(real_root):
    edit_function(real_root, "BinaryOps.cpp", SUB_CALL,
                  "  if (alpha.isIntegral(false)) {\n    add_stub(device_type(), *this, -alpha);\n"
                  "  } else {\n    sub_stub(device_type(), *this, alpha);\n  }\n")
    before = snapshot(real_root)
    res = porter("migrate-from-mpsgraph", "sub", root=real_root)
    assert res.code == 2 and snapshot(real_root) == before
    assert ("'sub': sub_out calls add_stub, sub_stub under conditions porter cannot read, so which "
            "kernel each dtype runs on MPS is not proven; nothing was written") in res.err
    route_mps_to_shared(real_root, "    CPU, CUDA: sub_out\n    MPS: sub_out_mps\n", "    CPU, CUDA, MPS: sub_out\n")
    code, by = outcomes(real_root, "sub", "--dtype", "float32")
    # never a pass, never a skip
    assert code == 1 and by["float32"]["outcome"] == "fail"
    assert "not proven: sub_out (aten/src/ATen/native/BinaryOps.cpp:" in by["float32"]["message"]


@pytest.mark.parametrize("condition", ["#if PORTER_SOME_BUILD_FLAG\n", "#ifdef PORTER_SOME_BUILD_FLAG\n",
                                       "#if defined(PORTER_A) && PORTER_B > 2\n"],
                         ids=["if-unknown", "ifdef-unknown", "if-expression"])
@pytest.mark.slow
def test_a_registration_under_a_condition_porter_cannot_evaluate_is_not_proven(real_root, condition):
    """Whether a REGISTER_DISPATCH under `#if FLAG` registers depends on what the build defines:
    with FLAG undefined (as the C preprocessor reads it, 0) a Mac says 'missing kernel'.
    porter printed every dtype pass, exit 0; it is not proven, exit 1, never green."""
    assert porter("new-op", "heaviside", root=real_root).code == 0
    mm = real_root / OPERATIONS / "BinaryKernel.mm"
    line = "REGISTER_DISPATCH(heaviside_stub, &heaviside_mps_kernel)\n"
    text = mm.read_text()
    mm.write_text(text.replace(line, condition + line + "#endif\n"))
    code, by = outcomes(real_root, "heaviside", "--dtype", "float32")
    assert code == 1
    assert by["float32"]["outcome"] == "fail"
    assert "not proven" in by["float32"]["message"]
    assert "PORTER_" in by["float32"]["message"]
    # check and status read the same condition: they counted the registration as made
    cond = condition.strip()
    findings = [f for f in json.loads(porter("check", "--json", root=real_root).out)["findings"]
                if f["op"] == "heaviside"]
    assert [f["id"] for f in findings] == ["PORTER023"], findings
    assert (f"runs heaviside_stub, registered for MPS only under `{cond}` "
            "(aten/src/ATen/native/mps/operations/BinaryKernel.mm:") in findings[0]["message"]
    assert "a condition porter cannot decide: not proven" in findings[0]["message"]
    status = porter("status", "heaviside", root=real_root)
    assert status.out.startswith("heaviside: not proven (binary)\n"), status.out
    assert f"host: heaviside_mps_kernel registered only under `{cond}`, not proven (" in status.out
    assert "next: porter check\n" in status.out


@pytest.mark.slow
def test_a_kernel_registration_under_a_build_flag_is_not_counted_by_check_or_status(real_root):
    """The .metal side: `REGISTER_INTEGER_BINARY_OP(heaviside)` under `#ifdef FLAG` makes no
    integer kernel in a build without FLAG; check and status counted the integers as
    registered (an `__METAL_VERSION__` condition is every Metal's own and stays counted)."""
    from porter.source.checkout import KERNELS
    assert porter("new-op", "heaviside", root=real_root).code == 0
    metal = real_root / KERNELS / "BinaryKernel.metal"
    line = "REGISTER_INTEGER_BINARY_OP(heaviside);\n"
    text = metal.read_text()
    assert text.count(line) == 1

    def heaviside_findings():
        return [f for f in json.loads(porter("check", "--json", root=real_root).out)["findings"]
                if f["op"] == "heaviside"]
    assert heaviside_findings() == []
    metal.write_text(text.replace(line, "#ifdef PORTER_FLAG\n" + line + "#endif\n"))
    [finding] = heaviside_findings()
    assert finding["id"] == "PORTER011"
    assert ("kernel 'heaviside' is registered for bfloat, float, half (and for bool, char, int, "
            "long, short, uchar only under `#ifdef PORTER_FLAG` (aten/src/ATen/native/mps/kernels/"
            "BinaryKernel.metal:") in finding["message"]
    status = porter("status", "heaviside", root=real_root).out
    assert "registrations: float -> float; half -> half; bfloat -> bfloat (" in status
    assert ("registrations only under `#ifdef PORTER_FLAG`, not proven: long -> long; int -> int; "
            "short -> short; uchar -> uchar; char -> char; bool -> bool (") in status
    # and the emulator, which preprocesses the file, finds no int32 kernel
    code, by = outcomes(real_root, "heaviside", "--dtype", "int32")
    assert code == 1 and by["int32"]["outcome"] == "fail"
    # the Metal version's own condition is compiled by the Metal that has it: still counted
    metal.write_text(text.replace(line, "#if __METAL_VERSION__ >= 310\n" + line + "#endif\n"))
    assert "PORTER011" not in [f["id"] for f in heaviside_findings()]


@pytest.mark.parametrize(("op", "upstream"), [("sgn", "sign_stub for real inputs"),
                                              ("sub", "add_stub with -alpha")])
def test_a_port_whose_shared_kernel_has_no_body_here_is_not_proven(real_root, op, upstream):
    """The tree has no TORCH_IMPL_FUNC(OP_out): which stub it runs cannot be read (upstream's
    runs `upstream`). porter assumed `OP_stub`, wrote the port and tested it green on a kernel
    a Mac's inputs never reach (sub: 9/9 pass on sub_alpha); now nothing is written, exit 1."""
    # the fixture's shared function taken out: a tree without it
    if op == "sgn":
        edit_function(real_root, "UnaryOps.cpp", SGN_OUT, "")
    else:
        edit_function(real_root, "BinaryOps.cpp", SUB_OUT, "")
    before = snapshot(real_root)
    for extra in ((), ("--json",)):
        res = porter("migrate-from-mpsgraph", op, "--body", "x", "--complex-body", "x", root=real_root) \
            if op == "sgn" else porter("migrate-from-mpsgraph", op, *extra, root=real_root)
        assert res.code == 1, res.out + res.err
        assert snapshot(real_root) == before
    res = porter("migrate-from-mpsgraph", op, root=real_root)
    assert (f"'{op}': not proven: MPS would join {op}_out, whose body is in no "
            f"aten/src/ATen/native/*.cpp of this checkout (no TORCH_IMPL_FUNC({op}_out)), so which "
            "DispatchStub it runs for each dtype cannot be read; porter does not assume "
            f"{op}_stub; nothing was written") in res.err
    # with the body there, the route is read: both are refused, naming the stub they reach
    if op == "sgn":
        add_function(real_root, "UnaryOps.cpp", "TORCH_IMPL_FUNC(signbit_out)", SGN_OUT)
        res = porter("migrate-from-mpsgraph", op, root=real_root)
        assert res.code == 0 and "ported sign too, first" in res.err, res.err
    else:
        add_function(real_root, "BinaryOps.cpp", "TORCH_IMPL_FUNC(atan2_out)", SUB_OUT)
        res = porter("migrate-from-mpsgraph", op, root=real_root)
        assert res.code == 0 and "not proven" not in res.err, res.err


@pytest.mark.parametrize("body", [
    # two kernel names under a branch porter does not model: it ran the first for every sample
    '  if (iter.numel() < 1000) {\n    lib.exec_binary_kernel(iter, "heaviside");\n  } else {\n'
    '    lib.exec_binary_kernel(iter, "heaviside_large");\n  }\n',
    # a name computed at run time (gelu's shape)
    '  const char* name = iter.numel() < 1000 ? "heaviside" : "heaviside_large";\n'
    '  lib.exec_binary_kernel(iter, name);\n'], ids=["if-else", "computed-name"])
@pytest.mark.slow
def test_a_host_that_picks_its_kernel_name_at_run_time_is_not_proven(real_root, body):
    """`heaviside_large` is no kernel of the file: a Mac fails every large input, while porter
    ran `heaviside` on every sample and said pass (if-else), or skipped (computed name)."""
    assert porter("new-op", "heaviside", root=real_root).code == 0
    mm = real_root / OPERATIONS / "BinaryKernel.mm"
    text = mm.read_text()
    call = '  lib.exec_binary_kernel(iter, "heaviside");\n'
    assert text.count(call) == 1
    mm.write_text(text.replace(call, body))
    code, by = outcomes(real_root, "heaviside", "--dtype", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail", by
    assert by["float32"]["message"].startswith(
        "not proven: heaviside_mps_kernel (operations/BinaryKernel.mm:"), by
    assert "picks its Metal kernel at run time (" in by["float32"]["message"]
    assert "by a condition porter does not model" in by["float32"]["message"]


@pytest.mark.parametrize("second", ["same-file", "other-file", "mpsgraph-file"])
@pytest.mark.slow
def test_a_stub_registered_twice_is_not_green(real_root, second):
    """Wrong on purpose: a second REGISTER_DISPATCH of heaviside_stub, on another function
    that runs the wrong kernel. porter ran the first registration and said pass, exit 0. In
    one .mm the macro defines `static RegisterMPSDispatch<...> heaviside_stub__register` twice
    (a Mac does not compile it); across two .mm files static-init order picks one."""
    assert porter("new-op", "heaviside", root=real_root).code == 0
    extra = ("static void heaviside_wrong_kernel(TensorIteratorBase& iter) {\n"
             '  lib.exec_binary_kernel(iter, "hypot");\n}\n'
             "REGISTER_DISPATCH(heaviside_stub, &heaviside_wrong_kernel)\n")
    if second == "same-file":
        mm = real_root / OPERATIONS / "BinaryKernel.mm"
        text = mm.read_text()
        end = text.rindex("} // namespace at::native")
        mm.write_text(text[:end] + extra + text[end:])
    elif second == "other-file":
        mm = real_root / OPERATIONS / "ActivationKernel.mm"
        text = mm.read_text()
        end = text.rindex("} // namespace at::native")
        mm.write_text(text[:end] + extra + text[end:])
    else:
        # an MPSGraph registration left behind in a .mm of no Metal kernels (one a unary op's
        # port leaves in UnaryOps.mm): it was not read, and the run said pass
        mm = real_root / OPERATIONS / "UnaryOps.mm"
        text = mm.read_text()
        end = text.rindex("} // namespace at::native")
        mm.write_text(text[:end] + "REGISTER_MPS_UNARY_STUB(heaviside, heaviside);\n" + text[end:])
    code, by = outcomes(real_root, "heaviside", "--dtype", "float32")
    assert code == 1 and by["float32"]["outcome"] == "fail", by
    message = by["float32"]["message"]
    assert "heaviside_stub is registered" in message and "PORTER021" in message, message
    if second == "same-file":
        assert "does not compile on a Mac" in message, message
        # nor does any other op of that .mm run on a Mac: hypot's kernel is fine, its host is not
        code, by = outcomes(real_root, "hypot", "--dtype", "float32")
        assert code == 1 and by["float32"]["outcome"] == "fail", by
        assert "BinaryKernel.mm does not compile on a Mac: it registers heaviside_stub twice" in \
            by["float32"]["message"], by
    else:
        where = "ActivationKernel.mm:" if second == "other-file" else "UnaryOps.mm:"
        assert message.startswith("not proven: ") and where in message, message
