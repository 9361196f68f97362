"""Issue 12, the planning side: porter never writes a port a Mac would reject, and never calls
an incomplete port done. Each case of the issue on the real-size tree (torch 2.13's yaml,
OpInfos and common_mps.py over the fixture's kernel and host files)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from porter.emulate.probe import probe_source
from porter.emulate.build_check import BuildRefused, check_kernel_file
from porter.source.checkout import KERNELS, NATIVE_YAML, OPERATIONS, TESTING
from tests.porter_run import changed_files, file_diff, git_init, porter, snapshot, without_cpu_kernel

BINARY_METAL = f"{KERNELS}/BinaryKernel.metal"
UNARY_METAL = f"{KERNELS}/UnaryKernel.metal"
UNARY_OPS = f"{OPERATIONS}/UnaryOps.mm"
COMMON_MPS = f"{TESTING}/common_mps.py"
CMI = f"{TESTING}/common_methods_invocations.py"
MISH_BODY = "x * ::precise::tanh(c10::metal::log1p(::precise::exp(x)))"


def refused(root, *args, code=1):
    """Run porter; it must exit `code` and leave every file as it was."""
    before = snapshot(root)
    result = porter(*args, root=root)
    assert result.code == code, (result.out, result.err)
    assert snapshot(root) == before, "a refused port wrote to the tree"
    assert '"ok": true' not in result.out
    return result


# --- case 1: a bool functor registered float -> float stops BinaryKernel.metal compiling ----

# logical_and itself is now ported input -> bool, castout and complex included, and measured:
# tests/test_logical_ops.py (which also keeps the refusal where the shared function is missing)


def test_a_bool_op_registered_float_to_float_is_refused(real_root):
    """The registration check: an op whose output is bool (logical_and's always_returns_bool)
    planned with the file's float -> float macros is refused, whatever the functor says."""
    from porter.port import completeness
    from porter.port.plan import plan_port
    from porter.port.resolve import resolve
    from porter.commands.before_writing import WrongRegistration, verify
    from porter.source.checkout import Checkout

    checkout = Checkout.at(real_root)
    spec = resolve(checkout, "heaviside")
    assert not completeness.always_bool(spec)
    plan = plan_port(checkout, spec, "a > b", validator=_NoYaml())
    assert plan.wrong == []
    # the same planned file, judged for heaviside as if its meta function returned bool, as
    # logical_and's does: every registration but bool's has the wrong output type
    planned = plan.changes.current(BINARY_METAL, checkout.read)
    bool_spec = spec._replace(returns_bool=True)
    _, wrong = completeness.check(bool_spec, planned, completeness.dtype_plan(spec, False))
    assert [w.message for w in wrong] == [
        "heaviside would be registered float -> float, half -> half, bfloat -> bfloat, "
        "uchar -> uchar, char -> char, short -> short, int -> int, long -> long, "
        "but heaviside always returns bool"]
    plan.wrong = wrong
    with pytest.raises(WrongRegistration) as err:
        verify("new-op", checkout, plan, body="a > b", complex_body=None)
    assert err.value.exit_code == 1 and "nothing was written" in str(err.value)


class _NoYaml:
    def check(self, requests, tags_text):
        return []


def test_the_build_probe_names_a_wrong_output_type_at_its_line(real_root):
    """What the registration check would miss, the build catches: a functor returning bool
    registered float -> float is the compiler's error, at the registration's line."""
    original = (real_root / BINARY_METAL).read_text()
    functor = ("struct logical_and_functor {\n  template <typename T>\n"
               "  inline bool operator()(const T a, const T b) {\n    return a && b;\n  }\n};\n\n")
    planned = original.replace("// Complex binary functors", functor + "// Complex binary functors")
    planned += "REGISTER_FLOAT_BINARY_OP(logical_and);\n"
    line = planned.count("\n")          # the registration is the last line
    with pytest.raises(BuildRefused) as err:
        check_kernel_file(BINARY_METAL, original, planned, real_root, ("logical_and",))
    assert err.value.exit_code == 1
    assert (f"{BINARY_METAL}:{line}: logical_and registered with output type float for input "
            "float, but logical_and_functor returns bool") in str(err.value)
    # the same file with the functor returning T builds
    fixed = planned.replace("inline bool operator()", "inline T operator()")
    assert probe_source(fixed.replace("return a && b;", "return T(a && b);"),
                        BINARY_METAL, real_root, ("logical_and",)) is None


def test_a_planned_file_that_does_not_build_is_refused(real_root):
    """`fract` has no integer overload: sign's integer kernels stop UnaryKernel.metal compiling."""
    result = refused(real_root, "migrate-from-mpsgraph", "sign", "--body", "::metal::fract(x)")
    # the Metal front end's (clang's) words
    assert re.search(rf"the planned {UNARY_METAL} does not build: {UNARY_METAL}:\d+: call to "
                     r"'fract' is ambiguous; nothing was written", result.err), result.err


def test_a_port_into_a_file_that_already_fails_to_build_is_refused(real_root):
    """Wrong on purpose: a `;` missing in neg_functor, a functor of the same file the port does
    not touch. Before, migrate-from-mpsgraph signbit deleted the working MPSGraph impl and wrote
    its kernel into the broken file, exit 0 and no word: on a Mac the file, signbit with it,
    does not compile."""
    path = real_root / UNARY_METAL
    text = path.read_text()
    neg = "    return T(-x);\n"
    assert text.count(neg) == 1
    path.write_text(text.replace(neg, "    return T(-x)\n"))
    # the line of the return, in the Metal front end's (clang's) words
    line = path.read_text()[:path.read_text().index("    return T(-x)\n")].count("\n") + 1
    result = refused(real_root, "migrate-from-mpsgraph", "signbit")
    assert (f"{UNARY_METAL} does not build before porter's edit: {UNARY_METAL}:{line}: expected "
            "';' after return statement; a Mac cannot build the port into it either; nothing was "
            "written") in result.err, result.err
    assert "--no-build" in result.err


@pytest.mark.parametrize("command", ["new-op", "migrate-from-mpsgraph"])
@pytest.mark.slow
def test_nothing_to_do_is_not_said_of_a_port_whose_kernel_file_no_longer_builds(real_root, command):
    """Wrong on purpose: sign is ported, then a `;` goes missing in neg_functor, which the port
    does not touch. Before, a rerun printed "nothing to do", exit 0: nothing was planned, so
    nothing was built, while on a Mac the file, sign with it, does not compile."""
    assert porter("migrate-from-mpsgraph", "sign", root=real_root).code == 0
    path = real_root / UNARY_METAL
    good = path.read_text()
    neg = "    return T(-x);\n"
    assert good.count(neg) == 1
    path.write_text(good.replace(neg, "    return T(-x)\n"))
    line = good[:good.index(neg)].count("\n") + 1
    result = refused(real_root, command, "sign")
    assert result.err.startswith(
        f"porter: error: the port of sign exists but its kernel file {UNARY_METAL} does not build: "
        f"{UNARY_METAL}:{line}: expected ';' after return statement;"), result.err
    assert "--no-build" in result.err and "nothing to do" not in result.out
    # --no-build skips the build; a rerun re-tests the port written before unless --no-test,
    # which says so on stderr
    unbuilt = porter(command, "sign", "--no-build", "--no-test", root=real_root)
    assert (unbuilt.code, unbuilt.out) == \
        (0, f"porter {command} sign: nothing to do\n")
    assert "--no-test: the files were written already and sign was not tested" in unbuilt.err
    path.write_text(good)
    again = porter(command, "sign", "--test", root=real_root)
    assert again.code == 0, again.err
    assert again.out.startswith(f"porter {command} sign: every file is already as planned; testing the port\n")
    assert again.out.endswith(f"porter {command} sign: nothing to do (the port is written, and green)\n")


def test_nothing_to_do_is_not_said_of_a_port_registered_with_a_wrong_output_type(real_root):
    """Wrong on purpose: after the port, sign's long registration is edited to output float;
    the registration's static_assert fails on a Mac too."""
    assert porter("migrate-from-mpsgraph", "sign", root=real_root).code == 0
    path = real_root / UNARY_METAL
    good = path.read_text()
    row = "REGISTER_UNARY_OP(sign, long, long);"
    assert good.count(row) == 1
    path.write_text(good.replace(row, "REGISTER_UNARY_OP(sign, long, float);"))
    line = good[:good.index(row)].count("\n") + 1
    result = refused(real_root, "new-op", "sign")
    assert (f"{UNARY_METAL}:{line}: sign registered with output type float for input long, but "
            "sign_functor returns long; on a Mac sign") in result.err, result.err


def test_no_compiler_is_said_and_exits_1_unless_no_build(real_root, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    result = refused(real_root, "new-op", "heaviside")
    assert "no C++ compiler found: porter new-op builds the planned kernel file" in result.err
    assert "--no-build" in result.err
    written = porter("new-op", "heaviside", "--no-build", root=real_root)
    assert written.code == 0, written.err
    assert "WARNING: not built (--no-build)" in written.err


# --- case 3: --body is judged by the compiler ------------------------------------------------

@pytest.mark.parametrize("body,words", [
    # the Metal front end's (clang's) words
    ("return x;", "expected expression"),
    ("x ? 1", "expected ':'"),
    ("foo(x)", "use of undeclared identifier 'foo'"),
])
@pytest.mark.slow
def test_a_body_that_is_not_an_expression_is_bad_input(real_root, body, words):
    result = refused(real_root, "migrate-from-mpsgraph", "signbit", "--body", body, code=2)
    assert result.err.startswith(f"porter: error: --body {body!r} for signbit does not compile as "
                                 "one Metal expression in x: " + words), result.err
    assert "static_cast<T>(return" not in result.out


@pytest.mark.slow
def test_a_complex_body_is_compiled_with_float2(real_root):
    result = refused(real_root, "migrate-from-mpsgraph", "asinh", "--body", "::precise::asinh(x)",
                     "--complex-body", "x.z", code=2)
    assert "--complex-body 'x.z' for asinh does not compile" in result.err


# --- case 4: an op in SUPPORTED_COMPLEX_OPS without a complex kernel is incomplete -----------

def test_acosh_without_complex_body_is_incomplete(real_root):
    git_init(real_root)
    result = refused(real_root, "migrate-from-mpsgraph", "acosh")
    assert result.err == (
        "porter: error: incomplete port of acosh, nothing written: missing a complex64 kernel "
        "(acosh is in SUPPORTED_COMPLEX_OPS, so its MPS test sends complex64): --complex-body EXPR "
        "(--allow-incomplete writes it anyway)\n")
    data = json.loads(refused(real_root, "migrate-from-mpsgraph", "acosh", "--json").out)
    assert data["ok"] is False and data["written"] == [] and data["incomplete"]
    before = snapshot(real_root)
    result = porter("migrate-from-mpsgraph", "acosh", "--allow-incomplete", root=real_root)
    assert result.code == 1
    assert changed_files(before, snapshot(real_root)) == sorted([
        NATIVE_YAML, UNARY_METAL, f"{OPERATIONS}/UnaryKernel.mm", UNARY_OPS])
    assert "INCOMPLETE port written (--allow-incomplete)" in result.out
    assert "python test/test_mps.py -k test_output_match_acosh_cpu_complex64" in result.err


def test_a_dtype_without_a_kernel_is_a_gap_bool_included(mini_root):
    """Wrong on purpose: the planned file registers heaviside for every dtype the MPS test
    sends but one. Each left-out dtype, bool as much as int32, is a gap naming it (its MPS test
    fails on a Mac: no kernel); with every registration there, none."""
    from porter.port import completeness
    from porter.port.resolve import resolve
    from porter.source.checkout import Checkout
    from porter.source.dtypes import METAL

    checkout = Checkout.at(mini_root)
    spec = resolve(checkout, "heaviside")
    text = checkout.read(spec.metal_path)
    sent = ("bool", "float32", "int32", "uint8")
    dtypes = completeness.DtypePlan(frozenset(sent), frozenset())

    def planned(*dtypes_registered):
        return text + "".join(f"REGISTER_BINARY_OP(heaviside, {METAL[d]}, {METAL[d]});\n"
                              for d in dtypes_registered)

    assert completeness.check(spec, planned(*sent), dtypes) == ([], [])
    for left_out in ("bool", "int32"):
        gaps, wrong = completeness.check(
            spec, planned(*(d for d in sent if d != left_out)), dtypes)
        assert wrong == []
        assert gaps == [completeness.Gap(f"a kernel for {left_out}",
                                         "a registration written by hand", (left_out,))]


# --- case 5: mish: never a skeleton for working MPSGraph code; no kernels the CPU refuses ----

def test_mish_without_body_is_refused_even_with_allow_incomplete(real_root):
    without_cpu_kernel(real_root, "mish_stub")       # no CPU lambda to translate
    for extra in ((), ("--allow-incomplete",), ("--json",)):
        result = refused(real_root, "migrate-from-mpsgraph", "mish", *extra)
    assert json.loads(result.out)["ok"] is False
    assert "would replace a working MPSGraph implementation by a functor without a body" in result.out
    assert "--body EXPR (in x)" in result.out


def test_mish_with_body_registers_only_what_the_cpu_computes(real_root):
    result = porter("migrate-from-mpsgraph", "mish", "--body", MISH_BODY, "--dry-run", root=real_root)
    assert result.code == 0, result.err
    registered = re.findall(r"^\+REGISTER_UNARY_OP\(mish, (\w+), (\w+)\);", result.out, re.M)
    assert sorted(registered) == [("bfloat", "bfloat"), ("float", "float"), ("half", "half")]
    assert "is_scalar_integral_v" not in file_diff(result.out, UNARY_METAL)
    # the integer xfails stay (CPU mish raises for integers); so do the _refs decorators that
    # are about wrong integer results, each with the command that checks it on a Mac
    assert file_diff(result.out, COMMON_MPS) == ""
    assert file_diff(result.out, CMI) == ""
    assert ("UNIMPLEMENTED_XFAILLIST['nn.functional.mish'] (int32, uint8, bool, int8, int16) left in "
            "place; the port registers no kernel for dtypes the CPU reference refuses") in result.err
    assert ("MPS expectedFailure (TestCommon test_python_ref uint8, int8, int32, int16, bool) kept: "
            "it is not about the missing kernel; check it on a Mac: python test/test_ops.py -k "
            "test_python_ref__refs_nn_functional_mish_mps") in result.err


def test_the_host_includes_the_header_declaring_the_stub_it_registers(real_root):
    """mish_backward_stub is declared in ATen/native/Activation.h, which UnaryKernel.mm and
    BinaryKernel.mm do not include: without the include, REGISTER_DISPATCH(mish_backward_stub, ...)
    does not compile on a Mac. With no ActivationKernel.metal the activation goes to its kind's
    pair, which gets the include; sign_stub (UnaryOps.h, already included) adds nothing; a second
    run has nothing to do."""
    (real_root / "aten/src/ATen/native/mps/kernels/ActivationKernel.metal").unlink()
    (real_root / OPERATIONS / "ActivationKernel.mm").unlink()
    host_rel = f"{OPERATIONS}/BinaryKernel.mm"
    assert "#include <ATen/native/Activation.h>" not in (real_root / host_rel).read_text()
    result = porter("migrate-from-mpsgraph", "mish_backward", root=real_root)
    assert result.code == 0, result.err
    host = (real_root / host_rel).read_text()
    assert host.count("#include <ATen/native/Activation.h>\n") == 1
    assert host.index("#include <ATen/native/Activation.h>") < host.index("#ifndef")
    assert "REGISTER_DISPATCH(mish_backward_stub, &mish_backward_mps_kernel)" in host
    again = porter("migrate-from-mpsgraph", "mish_backward", root=real_root)
    assert again.code == 0 and "nothing to do" in again.out + again.err, (again.out, again.err)
    sign = porter("migrate-from-mpsgraph", "sign", "--dry-run", root=real_root)
    assert sign.code == 0, sign.err
    assert "+#include" not in file_diff(sign.out, f"{OPERATIONS}/UnaryKernel.mm")


# --- case 6: a half-applied migration ---------------------------------------------------------

def _half_migrate_sign(root):
    yaml = root / NATIVE_YAML
    text = yaml.read_text()
    assert "    CPU, CUDA: sign_out\n    MPS: sign_out_mps\n" in text
    yaml.write_text(text.replace("    CPU, CUDA: sign_out\n    MPS: sign_out_mps\n",
                                 "    CPU, CUDA, MPS: sign_out\n"))


def test_half_applied_migration_is_found_and_finished(real_root):
    _half_migrate_sign(real_root)
    git_init(real_root)
    check = porter("check", root=real_root)
    assert re.search(rf"{UNARY_OPS}:\d+: PORTER003 orphan-mps-function: TORCH_IMPL_FUNC\(sign_out_mps\) "
                     "is the MPSGraph implementation of sign, but no yaml row names it any more, so "
                     "torchgen declares no structured_sign_out_mps", check.out), check.out
    status = porter("status", "sign", root=real_root)
    assert "PORTER003" in status.out and "next: porter new-op sign\n" in status.out
    done = porter("new-op", "sign", root=real_root)
    assert done.code == 0, done.err
    assert "TORCH_IMPL_FUNC(sign_out_mps)" not in (real_root / UNARY_OPS).read_text()
    assert "#include <ATen/ops/sign_native.h>" not in (real_root / UNARY_OPS).read_text()
    assert "PORTER003" not in porter("check", root=real_root).out
    after = porter("status", "sign", root=real_root)
    assert after.out.startswith("sign: native (unary)")


def _run_next(root, op: str, bodies: dict) -> tuple[str, int]:
    out = porter("status", op, root=root).out
    line = next(l for l in out.splitlines() if l.startswith("next: "))[len("next: "):]
    if line == "no porter command":
        return line, 0
    args = line.split()[1:]
    for flag in ("--body", "--complex-body"):
        if flag in args:
            args[args.index(flag) + 1] = bodies[(op, flag)]
    result = porter(*args, root=root)
    if result.code == 0:        # as a user would, before the next op
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", op], cwd=root, check=True)
    return line, result.code


@pytest.mark.slow
def test_every_next_command_status_prints_succeeds(real_root, monkeypatch):
    """status's "next:" for an op in each state: run it as printed (EXPR filled in) and it
    succeeds (logical_and's too, now that its shared function is in the tree)."""
    from porter.survey import op_status

    monkeypatch.setattr(op_status, "device", lambda: "emulate")
    without_cpu_kernel(real_root, "mish_stub")       # mish asks for --body
    _half_migrate_sign(real_root)
    git_init(real_root)
    bodies = {("mish", "--body"): MISH_BODY,
              ("acosh", "--complex-body"): "x",      # compiles: the check here is the command's
              ("asinh", "--complex-body"): "x"}
    seen = {}
    for op in ("heaviside", "sign", "signbit", "acosh", "asinh", "mish", "logical_and",
               "special_log_ndtr"):
        line, code = _run_next(real_root, op, bodies)
        seen[op] = line
        assert code == 0, (op, line)
    assert seen["logical_and"] == "porter migrate-from-mpsgraph logical_and"
    assert seen["acosh"] == "porter migrate-from-mpsgraph acosh --complex-body EXPR"
    assert seen["mish"] == "porter migrate-from-mpsgraph mish --body EXPR"
    assert seen["sign"] == "porter new-op sign"
    # once ported, status moves on to the test (porter test's own suite runs it)
    for op in ("heaviside", "sign", "mish"):
        out = porter("status", op, root=real_root).out
        assert f"next: porter test {op} --device emulate" in out, out


# --- case 7: signbit is right for -0.0 --------------------------------------------------------

def test_signbit_port_is_right_for_negative_zero(real_root):
    torch = pytest.importorskip("torch")
    from porter.emulate.build import build_file
    from porter.emulate.client import WorkerClient
    from porter.emulate.torch_run import run_registration

    result = porter("migrate-from-mpsgraph", "signbit", root=real_root)
    assert result.code == 0, result.err
    metal = (real_root / UNARY_METAL).read_text()
    assert "return ::metal::signbit(float(x));" in metal and "float(x) < 0" not in metal
    lib = build_file(real_root / UNARY_METAL, real_root)
    values = torch.tensor([-0.0, 0.0, -1.5, 2.0, float("-inf"), float("inf")])
    client = WorkerClient()
    checked = []
    try:
        for reg in lib.find("signbit"):
            if reg.in_type not in ("float", "half", "bfloat"):
                continue
            got = run_registration(client, lib, reg, [values])
            assert got.tolist() == [True, False, True, False, True, False], reg.in_type
            checked.append(reg.in_type)
    finally:
        client.close()
    # a library with no floating registration of signbit would check nothing, and pass
    assert sorted(checked) == ["bfloat", "float", "half"], checked


# --- case 8: expectations porter can stand behind -------------------------------------------

def test_only_not_implemented_decorators_go_with_their_comment(real_root):
    result = porter("new-op", "heaviside", "--dry-run", root=real_root)
    assert result.code == 0, result.err
    diff = file_diff(result.out, CMI)
    removed = [l[1:].strip() for l in diff.splitlines() if l.startswith("-")]
    assert removed.count("# NotImplementedError: The operator 'aten::heaviside.out' is not "
                         "currently implemented for the MPS device") == 2
    assert sum("device_type='mps'" in l for l in removed) == 7
    assert not any(l.startswith("+") for l in diff.splitlines())
    # the neighbouring comment and skip that are not about MPS stay
    assert "PyTorch's heaviside does not appear to propagate NaNs" not in diff.replace(" # PyTorch", "")


def test_decorators_about_behaviour_stay_listed_with_a_mac_command(real_root):
    """logical_and's test_out / test_out_warning xfails are about out= semantics, not a missing
    kernel: the edit keeps them (and their comments); no `skips=(\\n),` is left anywhere."""
    from porter.port.edits.opinfo import mac_command, remove_expected_failures
    from porter.source.checkout import Checkout
    from porter.source.opinfo_source import for_op

    opinfos, refs = for_op(Checkout.at(real_root), "logical_and")
    text = (real_root / CMI).read_text()
    sources = [s for s in (*opinfos, *refs) if s.path == CMI]
    new, kept = remove_expected_failures(text, sources)
    assert new == text
    assert sorted(mac_command(d) for d in kept) == [
        "python test/test_ops.py -k test_out_logical_and_mps",
        "python test/test_ops.py -k test_out_warning_logical_and_mps"]


# --- verdicts: a stub the yaml routes MPS through, registered by no host file, fails ---------

@pytest.mark.slow
def test_a_deregistered_stub_fails_every_dtype_not_skips(real_root):
    """After a port, the yaml sends MPS to sign_out and its sign_stub; a hand edit drops the
    host's registration. A Mac raises 'missing kernel' for every dtype: porter test must fail
    (exit 1), not call the op one porter cannot run (skip, exit 0)."""
    result = porter("migrate-from-mpsgraph", "sign", root=real_root)
    assert result.code == 0, result.err
    host = real_root / OPERATIONS / "UnaryKernel.mm"
    text = host.read_text()
    assert "REGISTER_UNARY_TI_DISPATCH(sign);\n" in text
    host.write_text(text.replace("REGISTER_UNARY_TI_DISPATCH(sign);\n", ""))
    result = porter("test", "sign", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert result.code == 1, (result.out, result.err)
    # every row of the full verdict (samples, reference inputs, shapes) fails on the missing
    # kernel, and nothing is skipped
    assert "summary: 0 pass, 3 fail, 0 xfail, 0 xpass; 0 skip" in result.out, result.out
    assert result.out.count("MPS raises 'sign_stub: missing kernel for mps'") == 3, result.out



@pytest.mark.slow
def test_a_deregistered_stub_of_a_namespaced_op_fails_too(real_root):
    """special.erfcx: the yaml spells it special_erfcx, the OpInfo special.erfcx; its stub's
    registration dropped, a Mac raises 'missing kernel'. The emulator must find the yaml row
    under the yaml's spelling, or it calls the op one porter cannot run (nothing tested)."""
    host = real_root / OPERATIONS / "UnaryKernel.mm"
    text = host.read_text()
    line = "REGISTER_DISPATCH(special_erfcx_stub, erfcx_kernel)\n"
    assert text.count(line) == 1
    host.write_text(text.replace(line, ""))
    result = porter("test", "special.erfcx", "--device", "emulate", "--dtype", "float32",
                    root=real_root)
    assert result.code == 1, (result.out, result.err)
    assert "summary: 0 pass, 3 fail, 0 xfail, 0 xpass; 0 skip" in result.out, result.out
    assert result.out.count("MPS raises 'special_erfcx_stub: missing kernel for mps'") == 3, \
        result.out

def test_a_body_may_call_the_kernel_files_own_helpers(real_root):
    """A body is compiled where the functor will sit, inside the kernel file: upstream's
    UnaryKernel.metal has helpers (`exp_`) and functors its functors call (`log_functor{}`), and
    a --complex-body that uses them is an expression, not bad input. A helper the file does not
    have is still the compiler's error, at exit 2."""
    from porter.emulate.build_check import check_expression
    from porter.errors import PorterError

    metal = (real_root / UNARY_METAL).read_text()
    helper = ("\ntemplate <typename T>\ninline T porter_test_twice_(const T x) {\n"
              "  return x + x;\n}\n")
    metal = metal.replace("using namespace c10::metal;\n", "using namespace c10::metal;\n" + helper, 1)
    assert helper in metal
    (real_root / UNARY_METAL).write_text(metal)
    git_init(real_root)
    body = "porter_test_twice_(x)"
    result = porter("migrate-from-mpsgraph", "acosh", "--complex-body", body, "--dry-run",
                    root=real_root)
    assert result.code == 0, result.err
    assert "porter_test_twice_(x)" in result.out
    with pytest.raises(PorterError, match="use of undeclared identifier 'porter_test_thrice_'"):
        check_expression("--complex-body", "porter_test_thrice_(x)", ("x",), metal,
                         real_root, "acosh", complex_=True)


def test_a_good_body_is_not_blamed_for_the_kernel_files_own_error(real_root):
    """Where the kernel file itself does not build here, a body that compiles on its own is
    still accepted (the planned file's build judges the file)."""
    from porter.emulate.build_check import check_expression

    broken = (real_root / UNARY_METAL).read_text() + "\nstruct broken_functor { int x = ; };\n"
    check_expression("--body", "::precise::sqrt(x)", ("x",), broken, real_root, "sqrt")


# --- c10/metal headers older than the kernel file --------------------------------------------

NEWER_FUNCTOR = """
// written against newer c10/metal headers: they define porter_floor_halved
struct floor_halved_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return c10::metal::porter_floor_halved(a, b);
  }
};
REGISTER_FLOAT_BINARY_OP(floor_halved);
"""


@pytest.mark.slow
def test_a_kernel_file_newer_than_the_wheels_headers_is_not_called_green(real_root):
    """Upstream's BinaryKernel.metal calls c10::metal::div_floor, which torch 2.13's headers
    lack. In a checkout without c10/metal of its own, the emulator builds with the wheel's: the
    other kernels of the file run and pass, but the file's build is not proven, and the run
    says so and exits 1 (a port is done when its kernel file builds)."""
    import shutil

    metal = real_root / BINARY_METAL
    metal.write_text(metal.read_text() + NEWER_FUNCTOR)
    shutil.rmtree(real_root / "c10")
    result = porter("test", "atan2", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert re.search(r"float32 +pass", result.out), result.out
    assert result.code == 1, result.out
    assert re.search(rf"not proven: {BINARY_METAL} is not fully built: {BINARY_METAL}:\d+: "
                     r"c10::metal::porter_floor_halved is not defined in the installed torch "
                     r"\S+'s c10/metal \(the checkout has none\)", result.out), result.out
    data = json.loads(porter("test", "atan2", "--device", "emulate", "--dtype", "float32",
                             "--json", root=real_root).out)
    assert data["ok"] is False and data["not_proven"]


@pytest.mark.slow
def test_a_kernel_file_its_own_c10_metal_cannot_build_fails_every_dtype(real_root):
    """With the checkout's own c10/metal lacking the function, a Mac building this checkout
    fails the whole file: every dtype of every op in it fails, naming the headers."""
    metal = real_root / BINARY_METAL
    metal.write_text(metal.read_text() + NEWER_FUNCTOR)
    result = porter("test", "atan2", "--device", "emulate", "--dtype", "float32", root=real_root)
    assert result.code == 1
    assert re.search(r"float32 +fail", result.out), result.out
    assert ("c10::metal::porter_floor_halved is not defined in the checkout's c10/metal (the same "
            "files as the installed torch") in result.out, result.out
