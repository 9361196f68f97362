"""`porter test --device mps-shader`, against a fake torch.mps backed by the emulator.

There is no Apple GPU here: porter/testing/fake_mps.py takes the same calls as torch.mps
(compile_shader, lib.<host_name>, kernel(*args, threads=, group_size=, arg_casts=)) and runs
them with the emulator under the same dispatch arithmetic. What these tests prove: the source
handed to compile_shader carries the checkout's headers, each kernel is called through its
dense entry point with the arguments and thread counts its Metal signature needs, and the
results give the same per-dtype table as --device emulate, failures included.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from porter.harness import mps_shader_device as mps_shader
from porter.harness.mps_shader_device import MpsShaderBackend
from porter.harness.session import Options, run
from porter.testing.fake_mps import FakeMps

OPS = ["hypot", "exp", "round", "add"]      # binary, unary (ILP), unary alpha, binary alpha


def table(root: Path, ops: list[str], device: str, backend=None) -> tuple[int, dict]:
    out = io.StringIO()
    code = run(Options(ops=ops, root=str(root), device=device, backend=backend, out=out, json=True))
    import json
    data = json.loads(out.getvalue())
    return code, {(r["op"], d["dtype"]): (d["outcome"], d["samples"]) for r in data["ops"] for d in r["dtypes"]}


@pytest.fixture
def fake(mini_root):
    mps = FakeMps(mini_root)
    yield mps
    mps.close()


def shader(root, fake) -> MpsShaderBackend:
    return MpsShaderBackend(root, mps=fake, device="cpu")


@pytest.mark.slow
def test_same_table_as_emulate(mini_root, fake):
    # without its int8 (char) kernel, add fails for int8 as on a Mac, on both devices
    metal = mini_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    metal.write_text(metal.read_text().replace("REGISTER_BINARY_ALPHA_OP(add_alpha, char, char, char);\n", ""))
    code, got = table(mini_root, OPS, "mps-shader", shader(mini_root, fake))
    emulate_code, want = table(mini_root, OPS, "emulate")
    assert got == want and code == emulate_code == 1
    from collections import Counter
    # plain round has no *Kernel.mm (skip, porter cannot run it)
    assert Counter(o for o, _ in got.values()) == {"pass": 29, "skip": 8, "xfail": 5, "fail": 1}
    assert got[("add", "int8")] == ("fail", 11) and got[("hypot", "float16")] == ("pass", 9)


@pytest.mark.slow
def test_dense_entry_points_and_dispatch_arithmetic(mini_root, fake):
    import torch
    backend = shader(mini_root, fake)
    metal = mini_root / "aten/src/ATen/native/mps/kernels"
    regs = {(r.kernel, r.in_type): r for r in backend._static_registrations(metal / "UnaryKernel.metal")}
    x = torch.linspace(-3, 3, 4099)
    got = backend.run_dense(metal / "UnaryKernel.metal", regs[("exp", "float")], "unary", [x])
    assert torch.allclose(got, torch.exp(x))
    # c10/metal's unary_dense takes numel and does ILP_PER_THREAD (4) elements a thread
    assert fake.calls[-1] == {"kernel": "exp_dense_float_float", "threads": [1025], "group_size": [1024],
                              "arg_casts": {2: "int32"}}
    bregs = {(r.kernel, r.in_type): r for r in backend._static_registrations(metal / "BinaryKernel.metal")}
    a, b = torch.rand(3, 1, dtype=torch.float16), torch.rand(1, 700, dtype=torch.float16)
    got = backend.run_dense(metal / "BinaryKernel.metal", bregs[("hypot", "half")], "binary", [a, b])
    assert torch.allclose(got, torch.hypot(a, b), atol=1e-3)
    # binary_dense: one thread an element, broadcast operands made dense first
    assert fake.calls[-1] == {"kernel": "hypot_dense_half_half", "threads": [2100], "group_size": [1024],
                              "arg_casts": None}


@pytest.mark.slow
def test_source_carries_the_checkouts_headers(mini_root, fake):
    """A checkout's own c10/metal wins over the installed torch's, as in the emulator."""
    from porter.emulate.headers import torch_include_dir
    own = mini_root / "c10" / "metal"
    own.mkdir(parents=True)
    for header in (torch_include_dir() / "c10" / "metal").glob("*.h"):
        (own / header.name).write_text(header.read_text())
    (own / "utils.h").write_text((own / "utils.h").read_text() + "\n// this checkout's own utils.h\n")
    code, _ = table(mini_root, ["exp"], "mps-shader", shader(mini_root, fake))
    assert code == 0
    source = fake.sources[0]
    assert "// this checkout's own utils.h" in source
    assert not re.search(r"#\s*include\s*[<\"]c10/", source)
    assert source.count("// porter-inline-begin c10/metal/utils.h") == 1


@pytest.mark.slow
def test_a_wrong_functor_fails_as_under_emulation(mini_root, fake):
    kernel = mini_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    kernel.write_text(kernel.read_text().replace(
        "c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b)))",
        "::metal::fabs(float(a)) + ::metal::fabs(float(b))"))
    code, got = table(mini_root, ["hypot"], "mps-shader", shader(mini_root, fake))
    assert code == 1 and {o for o, _ in got.values()} == {"fail"}
    assert table(mini_root, ["hypot"], "emulate")[1] == got


def test_a_file_that_does_not_compile_fails_every_dtype(mini_root, fake):
    """One bad line stops a Metal library whole: hypot and atan2 (same file) both fail."""
    kernel = mini_root / "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
    kernel.write_text(kernel.read_text().replace(
        "c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b)))", "a +"))
    out = io.StringIO()
    code = run(Options(ops=["atan2"], root=str(mini_root), device="mps-shader",
                       backend=shader(mini_root, fake), out=out))
    text = out.getvalue()
    assert code == 1 and "0 pass" in text
    assert "BinaryKernel.metal does not compile: Failed to create metal library" in text


def test_too_few_threads_leave_elements_unwritten(mini_root, fake, monkeypatch):
    """What it prints if the dispatch arithmetic were wrong: ILP dispatch without dividing
    rounds down and leaves the tail unwritten; the test fails instead of passing."""
    monkeypatch.setattr(mps_shader.DenseEntry, "threads", lambda self, n: max(1, n // (self.ilp * 2)))
    code, got = table(mini_root, ["exp"], "mps-shader", shader(mini_root, fake))
    assert code == 1 and ("exp", "float32") in got and got[("exp", "float32")][0] == "fail"


def test_the_fake_refuses_calls_a_gpu_would_get_wrong(mini_root, fake):
    import torch
    backend = shader(mini_root, fake)
    metal = mini_root / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
    lib, _ = backend._shader_library(metal)
    kernel = lib.exp_dense_float_float
    x = torch.rand(8)
    with pytest.raises(RuntimeError, match=r"takes 3 arguments .* got 2"):
        kernel(torch.empty(8), x, threads=2)
    with pytest.raises(RuntimeError, match="Failed to create function state object for: exp_dense_double"):
        lib.exp_dense_double_double
    blib, _ = backend._shader_library(metal.with_name("BinaryKernel.metal"))
    with pytest.raises(RuntimeError, match="write past the end"):
        blib.hypot_dense_float_float(torch.empty(4), torch.rand(4), torch.rand(4), threads=5)
    with pytest.raises(RuntimeError, match="threads per threadgroup"):
        blib.hypot_dense_float_float(torch.empty(4), torch.rand(4), torch.rand(4), threads=4,
                                     group_size=2048)


def test_without_an_apple_gpu_it_says_so(mini_root, capsys):
    from porter.cli import main
    code = main(["test", "exp", "--device", "mps-shader", "--root", str(mini_root)])
    err = capsys.readouterr().err
    assert code == 2 and "--device mps-shader" in err and "Apple silicon only" in err
