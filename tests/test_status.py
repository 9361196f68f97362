"""`porter status OP`: one screen per op state, and the next command."""

from __future__ import annotations

import json

import expecttest
import pytest

from porter.survey import op_status
from porter.source.checkout import KERNELS, NATIVE_YAML
from porter.cli import main

T = expecttest.TestCase()


DETECT_DEVICE = op_status.device


@pytest.fixture(autouse=True)
def linux_device(monkeypatch):
    monkeypatch.setattr(op_status, "device", lambda: "emulate")


def status(root, capsys, op: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["status", op, "--root", str(root), *args])
    return code, capsys.readouterr().out


def status_json(root, capsys, op: str) -> dict:
    code, out = status(root, capsys, op, "--json")
    assert code == 0
    return json.loads(out)


def test_unported_op_screen(mini_root, capsys):
    code, out = status(mini_root, capsys, "heaviside")
    assert code == 0
    T.assertExpectedInline(out, """\
heaviside: unported (binary)
  no MPS dispatch row
yaml:
  native_functions.yaml:473  heaviside.out  CPU, CUDA: heaviside_out
  native_functions.yaml:481  heaviside  delegates to heaviside.out
  native_functions.yaml:487  heaviside_  delegates to heaviside.out
stub: heaviside_stub (structured_binary_fn, aten/src/ATen/native/BinaryOps.h:25)
functor: none
host: heaviside_stub has no MPS registration
opinfo: heaviside (torch/testing/_internal/common_methods_invocations.py:112; MPS dtypes bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32)
opinfo: _refs.heaviside (ref) (torch/testing/_internal/common_methods_invocations.py:203)
expectation: UNIMPLEMENTED_XFAILLIST['heaviside'] = None (mps_ops_modifier, torch/testing/_internal/common_mps.py:42)
mps decorator: DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_variant_consistency_eager', device_typ... (torch/testing/_internal/common_methods_invocations.py:126)
mps decorator: DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_out_warning', device_type='mps') (torch/testing/_internal/common_methods_invocations.py:127)
mps decorator: DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_out', device_type='mps') (torch/testing/_internal/common_methods_invocations.py:128)
mps decorator: DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_dtypes', device_type='mps') (torch/testing/_internal/common_methods_invocations.py:129)
mps decorator: DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_python_ref_torch_fallback', device_typ... (torch/testing/_internal/common_methods_invocations.py:209)
mps decorator: DecorateInfo(unittest.expectedFailure, 'TestCommon', 'test_python_ref', device_type='mps') (torch/testing/_internal/common_methods_invocations.py:210)
next: porter new-op heaviside
  scaffold the Metal kernel
""")


def test_native_op_screen(mini_root, capsys):
    T.assertExpectedInline(status(mini_root, capsys, "exp")[1], """\
exp: native (unary)
  native Metal kernel 'exp' on exp_stub
yaml:
  native_functions.yaml:187  exp  delegates to exp.out
  native_functions.yaml:193  exp_  delegates to exp.out
  native_functions.yaml:199  exp.out  CPU, CUDA, MPS, MTIA: exp_out
stub: exp_stub (unary_fn, aten/src/ATen/native/UnaryOps.h:23)
functor: exp_functor (aten/src/ATen/native/mps/kernels/UnaryKernel.metal:9)
registrations: bfloat -> bfloat; half -> half; float, bool, uchar, char, short, int, long -> float; float2 -> float2; half2 -> half2 (aten/src/ATen/native/mps/kernels/UnaryKernel.metal:152)
host: exp_kernel_mps registered (aten/src/ATen/native/mps/operations/UnaryKernel.mm:21)
opinfo: exp (torch/testing/_internal/common_methods_invocations.py:223; MPS dtypes bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, complex64)
expectation: 'exp' in SUPPORTED_COMPLEX_OPS (mps_ops_modifier, torch/testing/_internal/common_mps.py:26)
next: porter test exp --device emulate
  prove the kernel against the CPU
""")


@pytest.mark.parametrize("op, state, shape, next_command", [
    ("sign", "mpsgraph", "TORCH_IMPL_FUNC body", "porter migrate-from-mpsgraph sign"),
    ("asinh", "mpsgraph", "one-line CREATE_MPS_STRUCTURED_UNARY_TORCH_IMPL_FUNC",
     "porter migrate-from-mpsgraph asinh"),
    ("acosh", "mpsgraph", "hidden REGISTER_MPS_UNARY_STUB on the shared stub",
     "porter migrate-from-mpsgraph acosh"),
    # logit's two CPU lambdas, chosen by eps: one functor branching on it, no --body
    ("logit", "mpsgraph", "non-structured function", "porter migrate-from-mpsgraph logit"),
    ("bmm", "mpsgraph", "TORCH_IMPL_FUNC body", "no porter command"),
    ("special.log_ndtr", "unported", None, "porter new-op special_log_ndtr"),
    ("special_erfcx", "native", None, "porter test special_erfcx --device emulate"),
    ("linalg_svd", "cpu-fallback", None, "no porter command"),
])
def test_states_and_next_commands(mini_root, capsys, op, state, shape, next_command):
    data = status_json(mini_root, capsys, op)
    assert (data["state"], data["next"]) == (state, next_command)
    if shape:
        assert data["mpsgraph"][0]["shape"] == shape


def test_native_op_with_a_stale_unimplemented_entry(mini_root, capsys):
    path = mini_root / NATIVE_YAML
    path.write_text(path.read_text().replace("CPU, CUDA: heaviside_out", "CPU, CUDA, MPS: heaviside_out"))
    data = status_json(mini_root, capsys, "heaviside")
    assert data["state"] == "inconsistent"       # MPS row, but no kernel registered on the stub
    assert data["next"] == "porter new-op heaviside"
    assert any("PORTER031" in f for f in data["findings"])


def test_skeleton_functor_points_at_body(mini_root, capsys):
    path = mini_root / KERNELS / "UnaryKernel.metal"
    text = path.read_text().replace("    return T(precise::exp(float(x)));",
                                    '    static_assert(sizeof(T) == 0, "porter: write the Metal body of exp_functor");')
    path.write_text(text)
    data = status_json(mini_root, capsys, "exp")
    assert data["next"] == "porter new-op exp --body EXPR"
    assert data["findings"][0].endswith("(write the Metal body, or rerun `porter new-op exp --body EXPR`)")


@pytest.mark.parametrize("name,says", [
    ("heavyside", "did you mean heaviside?"),
    ("1abc", "'1abc' is not an operator name"),
    ("sign.out", "pass the op name, 'sign'"),        # once reported as a composite op
    # a dotted name whose head is no op is no overload ("names one overload of 'foo'")
    ("foo.bar", "'foo.bar' is neither an aten op nor an OpInfo name of the checkout"),
])
def test_a_name_that_is_not_one_op_is_bad_input(mini_root, capsys, name, says):
    assert main(["status", name, "--root", str(mini_root)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err


def test_real_size_tree(real_root, capsys):
    data = status_json(real_root, capsys, "heaviside")
    assert data["state"] == "unported" and data["next"] == "porter new-op heaviside"
    assert data["expectations"][0]["key"] == "heaviside"


@pytest.mark.parametrize("platform, machine, device", [
    ("darwin", "arm64", "mps"),            # Apple silicon: the real GPU
    ("darwin", "x86_64", "emulate"),       # an Intel Mac: no Apple GPU
    ("linux", "aarch64", "emulate"),
    ("linux", "x86_64", "emulate"),
])
def test_next_line_names_the_device_of_this_machine(mini_root, capsys, monkeypatch, platform, machine, device):
    import platform as platform_module
    import sys

    monkeypatch.setattr(op_status, "device", DETECT_DEVICE)      # the real detection, not the fixture's
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(platform_module, "machine", lambda: machine)
    assert status_json(mini_root, capsys, "exp")["next"] == f"porter test exp --device {device}"


def test_a_python_ref_opinfo_name_names_its_op(mini_root, capsys):
    # `_refs.heaviside` (python_ref_db) tests heaviside: it answered "names one overload of '_refs'"
    code, out = status(mini_root, capsys, "_refs.heaviside")
    assert code == 0 and out.startswith("heaviside: ")
