"""`porter test --shapes`: transposed, sliced-with-step, broadcast, 0-dim, empty and large inputs
reach the emulated kernel as views (the strided path, with their own strides), reported as their
own rows; a kernel run that ignores strides passes upstream's samples and fails them."""

from __future__ import annotations

import json
import shutil

import pytest

from porter.harness.shapes import SHAPES
from tests.porter_run import git_init, porter

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="host emulation needs g++")

DTYPES = ("bool", "int64", "float32")


def _port_threshold(root, tmp_path, monkeypatch):
    git_init(root)
    ported = porter("migrate-from-mpsgraph", "threshold", "--body", "x <= threshold ? value : x", root=root)
    assert ported.code == 0, ported.err


def _shapes_run(root):
    result = porter("test", "threshold", "--device", "emulate", "--shapes", "--json",
                    *(a for d in DTYPES for a in ("--dtype", d)), root=root)
    assert result.out.startswith("{"), result.err
    report = json.loads(result.out)
    # the full verdict: upstream's samples and the reference inputs (no shapes), then the shapes;
    # a (False, dtype) key holds every row of that dtype outside the shapes
    rows = {}
    for op in report["ops"]:
        for case in op["dtypes"]:
            key = (bool(op["shapes"]), case["dtype"])
            rows[key] = case if op["shapes"] else rows.get(key, []) + [case]
    return result.code, report, rows


@pytest.mark.slow
def test_shapes_rows_run_every_layout_and_pass_a_correct_port(real_root, tmp_path, monkeypatch):
    _port_threshold(real_root, tmp_path, monkeypatch)
    code, report, rows = _shapes_run(real_root)
    assert code == 0
    assert [op["shapes"] for op in report["ops"]] == [[], [], list(SHAPES)]
    for dtype in DTYPES:
        assert rows[(True, dtype)]["outcome"] == "pass"
        assert rows[(True, dtype)]["samples"] == len(SHAPES)
    text = porter("test", "threshold", "--device", "emulate", "--shapes", "--dtype", "float32", root=real_root).out
    assert ("nn.functional.threshold  (shapes: transposed, sliced with step, broadcast, 0-dim, empty, "
            "large; beyond upstream's samples, views kept, device emulate)") in text


def test_the_samples_keep_their_layout():
    import torch
    from torch.testing._internal.opinfo.core import SampleInput

    from porter.harness.shapes import shape_samples
    unary = {s.name: s for s in shape_samples(SampleInput(torch.ones(3), args=(0.5, 2.0)), torch.float32)}
    assert not unary["transposed"].input.is_contiguous()
    assert unary["sliced with step"].input.stride() == (21, 3) and unary["sliced with step"].input.storage_offset() == 21
    assert unary["broadcast"].input.stride() == (0, 1)
    assert unary["0-dim"].input.dim() == 0 and unary["empty"].input.numel() == 0
    assert unary["large"].input.numel() == 257 * 513
    assert unary["transposed"].args == (0.5, 2.0)
    binary = {s.name: s for s in shape_samples(SampleInput(torch.ones(3, dtype=torch.int8),
                                                                args=(torch.ones(3, dtype=torch.int8),)), torch.int8)}
    assert binary["broadcast"].input.shape == (5, 1) and binary["broadcast"].args[0].shape == (1, 7)
    assert binary["transposed"].args[0].is_contiguous() and binary["transposed"].args[0].dtype == torch.int8


def test_a_backward_ops_layouts_take_its_samples_values_and_keep_pairs():
    """sigmoid_backward(grad, result): drawn from [-9, 9], `result` = -7 is no sigmoid's output
    and magnifies a float16 rounding 50 times (a false red); drawn from the sample, every value
    is one the formula made, and a (grad, result) pair of one element stays a pair."""
    import torch
    from torch.testing._internal.opinfo.core import SampleInput

    from porter.harness.shapes import shape_samples
    grad = torch.tensor([0.25, 0.5, 0.75])
    result = torch.tensor([0.1, 0.2, 0.3])
    first = SampleInput(grad, args=(result,))
    drawn = {s.name: s for s in shape_samples(first, torch.float32, values_from_sample=True)}
    pairs = {(0.25, 0.1), (0.5, 0.2), (0.75, 0.3)}
    for name in ("transposed", "sliced with step", "0-dim", "large"):
        g, r = drawn[name].input, drawn[name].args[0]
        found = {(round(a, 4), round(b, 4)) for a, b in zip(g.reshape(-1).tolist(), r.reshape(-1).tolist())}
        assert found <= {(a, round(b, 4)) for a, b in pairs} and found, (name, found)
    assert drawn["large"].input.unique().numel() == 3        # every element of the sample is used
    assert drawn["transposed"].input.stride() == (1, 5) and drawn["transposed"].args[0].is_contiguous()
    # a free op's layouts keep porter's own range, with its exact integers
    free = {s.name: s for s in shape_samples(first, torch.float32)}
    assert free["large"].input.abs().max() > 1 and (free["large"].input == 0).any()


def test_the_run_generates_every_layout():
    # generate_samples, the call the run makes, must hand back all six layouts: a `yield` in
    # it (the reference edges') once made it a generator whose shapes branch `return`ed none
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    from porter.harness.opinfo_run import generate_samples
    info = next(o for o in op_db if o.name == "nn.functional.threshold")
    assert [s.name for s in generate_samples(info, torch.float32, shapes=True)] == list(SHAPES)
    assert len(list(generate_samples(info, torch.float32))) > 0
    assert len(list(generate_samples(info, torch.float32, reference=True))) > 0


@pytest.mark.slow
def test_a_kernel_that_reads_views_as_contiguous_fails_only_the_shapes(real_root, tmp_path, monkeypatch):
    # The wrong-on-purpose case: the host hands the kernel a view's storage as if it were dense
    # (the dense entry point on a non-contiguous tensor). Upstream's threshold samples are all
    # contiguous, so they pass; the transposed, sliced and broadcast layouts must fail.
    import torch

    from porter.emulate import torch_run as runner

    _port_threshold(real_root, tmp_path, monkeypatch)
    real = runner.run_registration

    def ignoring_strides(client, lib, reg, inputs, alpha=None, force_strided=False):
        def as_dense(t):
            if t.is_contiguous():
                return t
            contiguous = torch.empty(t.shape).stride()
            return torch.as_strided(t, t.shape, contiguous, t.storage_offset())
        return real(client, lib, reg, [as_dense(t) for t in inputs], alpha, force_strided)

    monkeypatch.setattr("porter.emulate.torch_run.run_registration", ignoring_strides)
    # an empty reference cache: a cached run (porter.harness.cached_run) runs the kernel through
    # numpy_run, not torch_run, and would never reach the patch (a run before this one records)
    monkeypatch.setenv("PORTER_REFCACHE_DIR", str(tmp_path / "refcache"))
    code, report, rows = _shapes_run(real_root)
    assert code == 1, json.dumps(report)[:3000]
    for dtype in DTYPES:
        # upstream's samples (all contiguous) pass; the reference inputs hold views of their own
        # (the full verdict's second row), which this kernel may get wrong too
        assert rows[(False, dtype)][0]["outcome"] == "pass"
        assert rows[(True, dtype)]["outcome"] == "fail"
    # the failure names its layout (bool: threshold's output there may be one value throughout,
    # so a permutation does not show and the broadcast one is the first to fail)
    assert rows[(True, "float32")]["message"].startswith("transposed: ")
    assert rows[(True, "float32")]["failed_samples"] == 3     # transposed, sliced, broadcast


def test_a_device_backend_gets_the_views_not_copies():
    # on a real device (mps, cuda) Tensor.to would make sliced and expanded views contiguous:
    # the shapes rows would then test nothing a dense sample does not
    import torch
    from torch.testing._internal.opinfo.core import SampleInput

    from porter.harness.devices import TorchDeviceBackend
    from porter.harness.shapes import shape_samples

    seen = {}

    class Recording:
        name = "recording"

        def __call__(self, x, *args, **kwargs):
            seen[len(seen)] = (tuple(x.stride()), x.storage_offset())
            return x.clone()

    samples = shape_samples(SampleInput(torch.ones(3), args=(0.5, 2.0)), torch.float32)
    backend = TorchDeviceBackend("cpu")
    for s in samples:
        out = backend.run(Recording(), s, torch.float32)
        assert torch.equal(out, s.input)
    assert seen[1] == ((21, 3), 21) and seen[2] == ((0, 1), 0) and seen[0] == ((1, 5), 0)
