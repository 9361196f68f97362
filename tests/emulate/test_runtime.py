"""Running kernels: Metal numerics of the shim, hypot overflow, strides, crashes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from porter.dispatch.numpy_tensors import PArray
from porter.emulate.build import build_file
from porter.emulate.client import KernelCrashed
from porter.emulate.torch_run import run_registration

from .conftest import DATA

torch = pytest.importorskip("torch")

FLT_MAX = torch.finfo(torch.float32).max


def test_naive_hypot_overflows_at_flt_max_and_c10_hypot_does_not(fixture_root, client):
    # pytorch issue 192507: sqrt(a*a + b*b) overflowed on real MPS at FLT_MAX
    lib = build_file(DATA / "hypot.metal", fixture_root)
    a = torch.tensor([FLT_MAX, 3.0, 1e-30])
    b = torch.tensor([1.0, 4.0, 1e-30])
    naive = run_registration(client, lib, lib.find("naive_hypot", "float")[0], [a, b])
    good = run_registration(client, lib, lib.find("hypot", "float")[0], [a, b])
    assert naive[0].item() == float("inf")
    assert naive[2].item() == 0.0            # and underflows at the other end
    torch.testing.assert_close(good, torch.hypot(a, b))
    assert good[0].item() == FLT_MAX


def test_fixture_hypot_does_not_overflow(fixture_root, client):
    from porter.source.checkout import KERNELS
    lib = build_file(fixture_root / KERNELS / "BinaryKernel.metal", fixture_root)
    a = torch.tensor([FLT_MAX, -FLT_MAX])
    out = run_registration(client, lib, lib.find("hypot", "float")[0], [a, torch.ones(2)])
    assert out.tolist() == [FLT_MAX, FLT_MAX]


def test_half_rounds_after_every_operation_and_vectors_behave(fixture_root, client):
    lib = build_file(DATA / "shim_semantics.metal", fixture_root)   # static_asserts inside
    a = torch.tensor([1.0009765625], dtype=torch.float16)
    out = run_registration(client, lib, lib.find("half_fma", "half")[0], [a, a, -torch.ones(1, dtype=torch.float16)])
    assert out.item() == 0.001953125           # (a*a rounded to half) - 1, not 0.00195407...
    z = torch.tensor([1 + 2j, -3 + 0.5j], dtype=torch.complex64)
    assert run_registration(client, lib, lib.find("vec", "float2")[0], [z, z]).tolist() == [True, True]


def test_strided_and_broadcast_paths_agree_with_dense(fixture_root, client):
    lib = build_file(DATA / "hypot.metal", fixture_root)
    reg = lib.find("hypot", "float")[0]
    a = torch.randn(5, 7)
    b = torch.randn(7, 5).t()                   # non-contiguous
    out = run_registration(client, lib, reg, [a, b])
    torch.testing.assert_close(out, torch.hypot(a, b))
    row = torch.randn(1, 7)                     # broadcast: stride 0
    torch.testing.assert_close(run_registration(client, lib, reg, [a, row]), torch.hypot(a, row))


@pytest.mark.parametrize("case", ["permuted 4-d", "sliced with steps", "broadcast middle dim",
                                  "size-1 dims", "one element"])
def test_every_strided_layout_reads_the_elements_the_dense_path_reads(fixture_root, client, case):
    """The strided loop walks offsets as an odometer (prelude.h's run_loop): each layout's
    answer is the dense answer of the same values, element for element."""
    lib = build_file(DATA / "hypot.metal", fixture_root)
    reg = lib.find("hypot", "float")[0]
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(3, 4, 5, 6, generator=gen)
    a, b = {
        "permuted 4-d": (base.permute(2, 0, 3, 1), torch.randn(6, 3, 5, 4, generator=gen).permute(2, 1, 0, 3)),
        "sliced with steps": (base[::2, 1::2, ::3, :], torch.randn(2, 2, 2, 6, generator=gen)),
        "broadcast middle dim": (base, torch.randn(3, 1, 5, 1, generator=gen)),
        "size-1 dims": (base[:, :1, :, :1], torch.randn(1, 1, 5, 1, generator=gen).expand(3, 1, 5, 1)),
        "one element": (base[1:2, 2:3, 3:4, 4:5], torch.randn(1, generator=gen)),
    }[case]
    out = run_registration(client, lib, reg, [a, b])
    assert out.shape == torch.broadcast_shapes(a.shape, b.shape)
    dense = run_registration(client, lib, reg, [a.contiguous(), b.expand_as(out).contiguous()])
    assert torch.equal(out, dense)
    torch.testing.assert_close(out, torch.hypot(a, b))


def test_a_record_that_names_another_entry_of_the_library_runs_nothing(fixture_root, client):
    """A cache record read beside a library it does not describe (its entry `index` another
    registration): the worker refuses, naming both, where it ran the other kernel and the
    sample failed with that kernel's values."""
    import dataclasses

    from porter.emulate.client import KernelError
    lib = build_file(DATA / "hypot.metal", fixture_root)
    naive, good = lib.find("naive_hypot", "float")[0], lib.find("hypot", "float")[0]
    a = torch.tensor([3.0])
    swapped = dataclasses.replace(good, index=naive.index)
    with pytest.raises(KernelError, match=r"kernel cache is inconsistent: .* holds \('naive_hypot', "
                                          r"'float', 'float'\) at entry \d+, not \('hypot', "):
        run_registration(client, lib, swapped, [a, a])
    assert run_registration(client, lib, good, [a, a]).tolist() == [torch.hypot(a, a).item()]


def test_integer_division_by_zero_crashes_the_worker_not_porter(fixture_root, client):
    lib = build_file(DATA / "int_div.metal", fixture_root)
    reg = lib.find("div_trunc", "int")[0]
    # review 31's N05: a GPU does not trap, and Metal leaves the answer undefined
    with pytest.raises(KernelCrashed, match=r"kernel crashed \(signal 8, SIGFPE\): the kernel "
                                            r"divided an integer by zero .* not proven"):
        run_registration(client, lib, reg, [torch.tensor([1], dtype=torch.int32),
                                            torch.tensor([0], dtype=torch.int32)])
    # the next call gets a fresh worker
    out = run_registration(client, lib, reg, [torch.tensor([7], dtype=torch.int32),
                                              torch.tensor([2], dtype=torch.int32)])
    assert out.tolist() == [3]


def test_a_local_read_before_it_is_written_never_reads_as_a_lucky_zero(fixture_root, client):
    """Wrong on purpose: `result` is written only for x > 0 (a relu missing its else). On a Mac
    the read is undefined; here it read what the stack held, often the 0 a relu wants (or the
    previous element's value), so a port could pass by luck. The worker fills the stack before
    each run, the first run with g++'s pattern (-1.7e38) and again with zeros: the answers
    differ, and the call says so (bit 32768: the sample is not proven, pass or fail)."""
    from porter.emulate.build import build_source
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct lucky_functor {
  template <typename T>
  inline T operator()(const T x) {
    T result;
    if (x > T(0)) result = x;
    return result;
  }
};

REGISTER_UNARY_OP(lucky, float, float);
REGISTER_UNARY_OP(lucky, int, int);
REGISTER_UNARY_OP(lucky, bfloat, bfloat);
"""
    lib = build_source(text, "lucky.metal", fixture_root)
    # bfloat, the shim's class, as Metal's scalar: `bfloat result;` is not zeroed (review 78's
    # finding 2: it read 0 on both fillings, a relu's lucky answer), `bfloat()` is
    out = run_registration(client, lib, lib.find("lucky", "bfloat")[0],
                           [torch.tensor([-1.0, 2.0], dtype=torch.bfloat16)])
    assert out[1].item() == 2.0
    assert client.undefined and client.undefined[0] & 32768, (out, client.undefined)
    out = run_registration(client, lib, lib.find("lucky", "float")[0],
                           [torch.tensor([-1.0, 2.0, 0.0])])
    assert out[1].item() == 2.0
    assert out[0].item() < -1e38, out
    assert client.undefined and client.undefined[0] & 32768, client.undefined
    out = run_registration(client, lib, lib.find("lucky", "float")[0], [torch.tensor([1.0, 2.0])])
    assert out.tolist() == [1.0, 2.0] and not (client.undefined and client.undefined[0] & 32768)
    ints = run_registration(client, lib, lib.find("lucky", "int")[0],
                            [torch.tensor([0, 5, -3], dtype=torch.int32)])
    # the first element reads the pattern; the third, the frame the second left (5): undefined
    # either way, and so not proven
    assert ints.tolist()[:2] == [-16843010, 5] and client.undefined[0] & 32768


@pytest.mark.parametrize("layout", ["dense", "transposed"])
def test_a_call_past_the_zeroed_prefix_keeps_every_answer_and_still_finds_the_read(
        fixture_root, client, layout):
    """The stack-of-zeros run covers ZEROED_PREFIX elements of a large call (every k-th of a
    dense one, the first of a strided one), written over the first run's answers (upstream's
    943,593-element reference tensors: half the worker's time). Every answer it skips is the
    first run's, in both layouts, and a read before a write is still found."""
    from porter.emulate.build import build_source
    import re

    import porter.emulate
    # worker.py is the worker process's script (its import reads argv): its constant, read
    worker = Path(porter.emulate.__file__).with_name("worker.py").read_text()
    ZEROED_PREFIX = eval(re.search(r"^ZEROED_PREFIX = (.+)$", worker, re.M).group(1))
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct lucky_functor {
  template <typename T>
  inline T operator()(const T x) {
    T result;
    if (x > T(0)) result = x;
    return result;
  }
};

struct relu_functor {
  template <typename T>
  inline T operator()(const T x) {
    return x > T(0) ? x : T(0);
  }
};

REGISTER_UNARY_OP(lucky, float, float);
REGISTER_UNARY_OP(relu, float, float);
"""
    lib = build_source(text, "lucky.metal", fixture_root)
    x = torch.randn(ZEROED_PREFIX // 256 * 3, 1024, generator=torch.Generator().manual_seed(1))
    if layout == "transposed":
        x = x.t()
    assert x.numel() > 2 * ZEROED_PREFIX
    out = run_registration(client, lib, lib.find("relu", "float")[0], [x])
    assert torch.equal(out, torch.relu(x)), "an answer past the prefix was lost"
    assert not (client.undefined and client.undefined[0] & 32768), client.undefined
    out = run_registration(client, lib, lib.find("lucky", "float")[0], [x])
    assert torch.equal(out[x > 0], x[x > 0])
    assert client.undefined and client.undefined[0] & 32768, client.undefined


def test_a_sweep_whose_unwritten_local_is_read_past_the_prefix_alone_is_found(fixture_root,
                                                                              client):
    """Wrong on purpose: a sorted sweep of 300,000 values, `result` written only for x <= 2.5,
    which only its last elements exceed. The run on zeros covers every k-th element of a
    dense call, the last ones included: the read is found. Its clean twin is not flagged."""
    from porter.emulate.build import build_source
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct late_functor {
  template <typename T>
  inline T operator()(const T x) {
    T result;
    if (x <= T(2.5)) result = x;
    return result;
  }
};

struct early_functor {
  template <typename T>
  inline T operator()(const T x) {
    return x <= T(2.5) ? x : T(0);
  }
};

REGISTER_UNARY_OP(late, float, float);
REGISTER_UNARY_OP(early, float, float);
"""
    lib = build_source(text, "late.metal", fixture_root)
    x = torch.linspace(-3.0, 3.0, 300000)
    run_registration(client, lib, lib.find("late", "float")[0], [x])
    assert client.undefined and client.undefined[0] & 32768, client.undefined
    out = run_registration(client, lib, lib.find("early", "float")[0], [x])
    assert torch.equal(out, torch.where(x <= 2.5, x, torch.zeros_like(x)))
    assert not (client.undefined and client.undefined[0] & 32768), client.undefined
    # a dense view into a larger storage (its bytes run to the storage's end): the run on zeros
    # steps by the element (review 46: it stepped by bytes / numel, twice too far, and the
    # clean kernel was not proven)
    view = torch.cat([x, x])[:300000]
    assert view.is_contiguous() and view.untyped_storage().nbytes() == 2 * view.nbytes
    out = run_registration(client, lib, lib.find("early", "float")[0], [view])
    assert torch.equal(out, torch.where(view <= 2.5, view, torch.zeros_like(view)))
    assert not (client.undefined and client.undefined[0] & 32768), client.undefined


def test_metals_half_literals_build_and_are_rounded_to_half_once(fixture_root, client):
    """`0.1h` is Metal's half literal (the `h`/`H` suffix). g++ has no such suffix: the file
    was a build error, "does not build on a Mac", for a file a Mac builds."""
    from porter.emulate.build import build_source
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct tenth_functor {
  inline half operator()(const half x) {
    return x * 0.1h + 1.0H;
  }
};

REGISTER_UNARY_OP(tenth, half, half);
"""
    lib = build_source(text, "tenth.metal", fixture_root)
    assert lib.build_errors() == []
    x = torch.tensor([1.0, 3.0], dtype=torch.float16)
    out = run_registration(client, lib, lib.find("tenth", "half")[0], [x])
    tenth = torch.tensor(0.1, dtype=torch.float16)
    assert out.tolist() == ((x * tenth) + 1).tolist()


def test_inputs_and_outputs_of_every_size_go_through_the_shared_memory(fixture_root):
    """The worker reads its inputs from and writes its output to memory it shares with porter,
    grown on demand: a million-element call between small ones answers as torch does, each
    call its own, and the reference cache's numpy path gives the torch path's bits."""
    from porter.emulate import numpy_run
    from porter.emulate.client import WorkerClient

    lib = build_file(DATA / "hypot.metal", fixture_root)
    reg = lib.find("hypot", "float")[0]
    client = WorkerClient()
    sizes, checked = [], 0
    try:
        for shape in [(3,), (1029, 917), (2, 2), (1100, 1000), (5,)]:
            a, b = torch.randn(shape), torch.randn(shape)
            out = run_registration(client, lib, reg, [a, b])
            torch.testing.assert_close(out, torch.hypot(a, b))
            got = numpy_run.run_registration(client, lib, reg, [PArray("float32", a.numpy()),
                                                                PArray("float32", b.numpy())])
            assert got.data.shape == shape and np.array_equal(got.data, out.numpy())
            got.data[...] = 0                    # the answer is porter's own, not the worker's
            sizes.append(client._lanes[0].shared.size)
            checked += 1
    finally:
        client.close()
    assert checked == 5
    assert sizes[1] >= 2 * 1029 * 917 * 4 and sizes[3] > sizes[1] and sizes[4] == sizes[3]


def _hypot_and_div_trunc(fixture_root):
    """The fixture's float hypot and int div_trunc kernels: (library, registration) of each."""
    lib = build_file(DATA / "hypot.metal", fixture_root)
    div = build_file(DATA / "int_div.metal", fixture_root)
    return lib, lib.find("hypot", "float")[0], div, div.find("div_trunc", "int")[0]


def f32(*values):
    return PArray("float32", np.array(values, dtype=np.float32))


def i32(*values):
    return PArray("int32", np.array(values, dtype=np.int32))


def _recorded_row(client, lib, reg, calls: dict) -> list:
    """What `client.record` gathers of a row whose samples (the keys) each make their calls of
    `reg`, one per list of inputs, in order."""
    from porter.emulate import numpy_run

    def dry_run():
        for key, inputs_of_calls in calls.items():
            client.sample = key
            for inputs in inputs_of_calls:
                numpy_run.run_registration(client, lib, reg, inputs)
        client.sample = None
    return client.record(dry_run)


def _count_trips(client) -> list:
    """A list that gains an entry for each message any of `client`'s workers is sent."""
    trips = []
    for lane in client._lanes:
        lane.send = (lambda send: lambda proc, message, limit: trips.append(1) or
                     send(proc, message, limit))(lane.send)
    return trips


def test_a_rows_chunks_answer_each_call_as_alone_whatever_comes_between(fixture_root):
    """answer_ahead sends a long row in chunks, the next one when a sample first asks for an
    answer of the one before: every call still takes its own answer, a call of its own made
    while a chunk runs (another kernel, no sample) waits for that chunk and is answered
    itself, a sample whose two calls lie in two chunks takes both, and a crash in a later
    chunk is charged to its sample alone, the samples before and after it answered right."""
    from porter.emulate import client as client_mod, numpy_run
    from porter.emulate.client import WorkerClient

    lib, reg, div, trunc = _hypot_and_div_trunc(fixture_root)

    keys = [f"s{i}" for i in range(40)]
    samples = {k: [f32(3 * i, 5 + i), f32(4 * i, 12)] for i, k in enumerate(keys)}
    client = WorkerClient()
    try:
        alone = {k: numpy_run.run_registration(client, lib, reg, v).data.tolist()
                 for k, v in samples.items()}
        twice = {k: numpy_run.run_registration(client, lib, reg, v[::-1]).data.tolist()
                 for k, v in samples.items()}

        trips = _count_trips(client)
        client.answer_ahead(_recorded_row(client, lib, reg,
                                          {k: [samples[k], samples[k][::-1]] for k in keys}))
        # 80 calls in four chunks, one in flight on each worker
        assert len(client._in_flight) == len(client._lanes) == len(trips)
        chunks = len(client._queue) + len(client._in_flight)
        assert chunks == client_mod.PIPELINE_CHUNKS
        for n, key in enumerate(keys):
            client.sample = key
            assert numpy_run.run_registration(client, lib, reg, samples[key]).data.tolist() == alone[key]
            assert numpy_run.run_registration(client, lib, reg, samples[key][::-1]).data.tolist() == twice[key]
            if n == 3:
                # a call of its own between two samples, a chunk in flight: answered itself
                client.sample = None
                assert numpy_run.run_registration(client, div, trunc, [i32(7), i32(2)]).data.tolist() == [3]
        client.sample = None
        assert len(trips) == chunks + 1                         # the chunks and the call between

        # a crash in the first chunk, the second in flight on the other worker meanwhile, and
        # one in the last chunk: charged to its sample, every other sample answered as alone
        for crash in (3, 25):
            rows = {f"r{crash} {i}": [i32(7 * i + 7), i32(0 if i == crash else 2 + i % 3)]
                    for i in range(32)}

            client.answer_ahead(_recorded_row(client, div, trunc,
                                              {k: [v] for k, v in rows.items()}))
            # each chunk in flight on a worker process of its own
            assert len({lane.proc.pid for lane, *_ in client._in_flight}) == len(client._lanes)
            for i, key in enumerate(rows):
                client.sample = key
                if i == crash:
                    with pytest.raises(KernelCrashed, match="SIGFPE"):
                        numpy_run.run_registration(client, div, trunc, rows[key])
                else:
                    want = [int((7 * i + 7) / (2 + i % 3))]
                    assert numpy_run.run_registration(client, div, trunc, rows[key]).data.tolist() == want
            client.sample = None
    finally:
        client.close()


def test_a_chunk_that_cannot_be_sent_leaves_its_calls_to_be_made_alone(fixture_root, monkeypatch):
    """Review of the two kernel workers: a chunk whose worker could not start (EAGAIN) left the
    queue unsent, and a sample whose calls it shared with the next chunk took that chunk's
    answer for its first call. It ends the queue as a failed chunk does: every call still takes
    its own answer."""
    from porter.emulate import client as client_mod, numpy_run
    from porter.emulate.client import WorkerClient

    monkeypatch.setattr(client_mod, "lane_count", lambda: 2)
    lib, reg, _, _ = _hypot_and_div_trunc(fixture_root)
    keys = [f"s{i}" for i in range(12)]
    # each sample's two calls of one shape: a chunk of 8 calls ends inside a sample
    samples = {k: ([f32(3 * i, 5 + i), f32(4 * i, 12)], [f32(i, 7), f32(2 * i, 1)])
               for i, k in enumerate(keys)}
    client = WorkerClient()
    try:
        alone = {k: [numpy_run.run_registration(client, lib, reg, v).data.tolist() for v in vs]
                 for k, vs in samples.items()}
        failed = []
        real_start = client._lanes[1].start

        def no_process_once():
            if not failed:
                failed.append(1)
                raise BlockingIOError(11, "Resource temporarily unavailable")
            return real_start()
        client._lanes[1].start = no_process_once

        recorded = _recorded_row(client, lib, reg, {k: list(samples[k]) for k in keys})
        try:
            client.answer_ahead(recorded)
        except OSError:
            pass                # a caller that goes on, as the row's samples then do
        assert failed and len(client._in_flight) == 1 and not client._queue
        for key in keys:
            client.sample = key
            got = [numpy_run.run_registration(client, lib, reg, v).data.tolist()
                   for v in samples[key]]
            assert got == alone[key], key
        client.sample = None
    finally:
        client.close()


@pytest.mark.parametrize("cores, lanes", [(1, 1), (2, 2), (16, 2)])
def test_a_rows_chunks_run_on_two_workers_where_there_are_two_cores(monkeypatch, cores, lanes):
    """One worker ran a row's chunks while porter compared the one before, busy 0.6 s of a
    `--watch` round's 0.78 s of rows on a 2-core box: two run them where two cores can."""
    from porter.emulate import client as client_mod

    monkeypatch.setattr(client_mod.os, "sched_getaffinity", lambda pid: set(range(cores)),
                        raising=False)
    assert client_mod.lane_count() == lanes
    assert len(client_mod.WorkerClient()._lanes) == lanes


def _hypot_call(client, lib, reg, n: int):
    """`reg`'s answer to n random float pairs, checked against torch's hypot."""
    a, b = torch.randn(n), torch.randn(n)
    out = run_registration(client, lib, reg, [a, b])
    torch.testing.assert_close(out, torch.hypot(a, b))
    return out


def test_a_watch_rounds_client_takes_the_workers_the_last_rounds_client_left(fixture_root,
                                                                            monkeypatch):
    """While kept_lanes runs (porter test --watch), a closed client's workers and shared memory
    answer the next client's calls, each call its own, instead of a start-up per worker and
    round; the lanes still kept end with it, and without it a closed client's workers end."""
    from porter.emulate import client as client_mod

    monkeypatch.setattr(client_mod, "lane_count", lambda: 2)
    lib = build_file(DATA / "hypot.metal", fixture_root)
    reg = lib.find("hypot", "float")[0]
    with client_mod.kept_lanes():
        first = client_mod.WorkerClient()
        first.start()
        _hypot_call(first, lib, reg, 1000)
        procs = [lane.proc for lane in first._lanes]
        first.close()
        assert all(proc.poll() is None for proc in procs)       # waiting, not ended
        second = client_mod.WorkerClient()
        assert [lane.proc for lane in second._lanes] == procs
        for n in (3, 500_000, 7):             # shared memory grown, then a small call again
            _hypot_call(second, lib, reg, n)
        assert [lane.proc for lane in second._lanes] == procs
        second.close()
        with client_mod.kept_lanes():         # nested: the outer one ends them
            pass
        assert all(proc.poll() is None for proc in procs)
    assert client_mod._KEPT is None
    assert all(proc.poll() is not None for proc in procs)
    alone = client_mod.WorkerClient()
    _hypot_call(alone, lib, reg, 10)
    proc = alone._lanes[0].proc
    alone.close()
    assert proc.poll() is not None


def test_a_lane_is_kept_only_with_its_worker_running_every_answer_read_and_few_libraries(
        fixture_root, monkeypatch):
    """A kept worker whose answer to the last client is still unread would give it to the next
    client's first call: such a lane ends, as does one whose worker died and one that has
    loaded more than KEPT_LIBRARIES libraries (each stays mapped in the worker)."""
    from porter.emulate import client as client_mod

    monkeypatch.setattr(client_mod, "lane_count", lambda: 1)
    lib = build_file(DATA / "hypot.metal", fixture_root)
    reg = lib.find("hypot", "float")[0]

    def left_by(spoil) -> list:
        """The lanes a client leaves kept after `spoil(its lane)`, and that lane's process."""
        with client_mod.kept_lanes():
            client = client_mod.WorkerClient()
            _hypot_call(client, lib, reg, 100)
            lane = client._lanes[0]
            spoil(lane)
            proc = lane.proc
            client.close()
            kept = list(client_mod._KEPT)
            if not kept:
                assert proc is None or proc.poll() is not None      # ended, not left running
        return kept

    assert len(left_by(lambda lane: None)) == 1
    # a message sent and its answer never read
    assert left_by(lambda lane: lane.send(lane.proc, {"registrations": str(lib.path)}, 60)) == []

    def killed(lane):
        lane.proc.kill()
        lane.proc.wait()
    assert left_by(killed) == []
    monkeypatch.setattr(client_mod, "KEPT_LIBRARIES", 0)
    assert left_by(lambda lane: None) == []

    # a worker restarted after a crash starts with nothing unread and no library loaded: an
    # answer its dead forerunner never gave, and what that one had loaded, are not its own
    monkeypatch.setattr(client_mod, "KEPT_LIBRARIES", 1)
    _, _, div, div_reg = _hypot_and_div_trunc(fixture_root)
    with client_mod.kept_lanes():
        client = client_mod.WorkerClient()
        _hypot_call(client, lib, reg, 100)
        lane = client._lanes[0]
        lane.send(lane.proc, {"registrations": str(lib.path)}, 60)      # never read
        killed(lane)
        a = torch.tensor([7, -7], dtype=torch.int32)
        b = torch.tensor([2, 2], dtype=torch.int32)
        assert run_registration(client, div, div_reg, [a, b]).tolist() == [3, -3]
        restarted = lane.proc
        client.close()
        assert [kept.proc for kept in client_mod._KEPT] == [restarted]


def test_the_next_rows_calls_queued_behind_a_row_take_their_own_answers(fixture_root, monkeypatch):
    """The row after the one being compared is queued behind it (answer_ahead's `append`,
    porter.harness.cached_run): the worker runs on from one row into the next, every call
    takes its own answer in one round trip per chunk, nothing in flight is read early, and
    the rows consumed before are forgotten when another is queued."""
    from porter.emulate import client as client_mod, numpy_run
    from porter.emulate.client import WorkerClient

    lib, reg, div, trunc = _hypot_and_div_trunc(fixture_root)
    rows = [{f"row{r} s{i}": [f32(3 * i + r, 5 + i), f32(4 * i, 12 + r)] for i in range(20)}
            for r in range(3)]
    client = WorkerClient()
    try:
        alone = {k: numpy_run.run_registration(client, lib, reg, v).data.tolist()
                 for row in rows for k, v in row.items()}

        def recorded(row):
            return _recorded_row(client, lib, reg, {k: [v] for k, v in row.items()})

        made = []
        real_chunks = client_mod._chunks
        monkeypatch.setattr(client_mod, "_chunks", lambda batch: made.extend(real_chunks(batch)) or real_chunks(batch))
        trips = _count_trips(client)
        client.answer_ahead(recorded(rows[0]))
        in_flight = list(client._in_flight)
        client.answer_ahead(recorded(rows[1]), append=True)
        assert client._in_flight[:len(in_flight)] == in_flight   # not read, not replaced
        for r, row in enumerate(rows):
            if r == 2:
                client.answer_ahead(recorded(row), append=True)
                assert not any(id(k) in client._answered for k in rows[0]), "row 0 kept"
            for key, inputs in row.items():
                client.sample = key
                assert numpy_run.run_registration(client, lib, reg, inputs).data.tolist() == alone[key]
        client.sample = None
        assert len(made) >= 6 and len(trips) == len(made)       # a trip a chunk, no call alone
    finally:
        client.close()


def test_a_rows_calls_answered_ahead_are_the_calls_own_answers(fixture_root):
    """A row's calls run in one round trip (porter.emulate.client.answer_ahead): each sample's
    calls, made afterwards in the dry run's order, take the batch's answers, which are the
    answers the calls give alone; a call of another shape than the dry run's, a sample the
    batch did not hold, and a sample whose batch crashed run as they always did, and a crash
    is charged to its own sample."""
    from porter.emulate import numpy_run
    from porter.emulate.client import WorkerClient

    lib, reg, div, trunc = _hypot_and_div_trunc(fixture_root)

    samples = {"a": [f32(3, 5), f32(4, 12)], "b": [f32(1e30), f32(1e30)],
               "big": [f32(*range(1000)), f32(*range(1000))]}
    client = WorkerClient()
    try:
        alone = {k: numpy_run.run_registration(client, lib, reg, v).data.tolist()
                 for k, v in samples.items()}

        row = {k: [samples[k]] for k in ("a", "b", "big")}
        recorded = _recorded_row(client, lib, reg, row)
        assert [s for s, _ in recorded] == ["a", "b", "big"]
        trips = _count_trips(client)
        client.answer_ahead(recorded)
        assert len(trips) == 1                                  # one round trip for the row
        for key in ("a", "b", "big"):
            client.sample = key
            assert numpy_run.run_registration(client, lib, reg, samples[key]).data.tolist() == alone[key]
        client.sample = None
        assert len(trips) == 1                                  # every answer was the batch's
        # a call of another shape than the dry run's: run itself, not given another's answer
        client.answer_ahead(_recorded_row(client, lib, reg, row))
        client.sample = "a"
        other = [f32(6, 8, 1), f32(8, 15, 1)]
        assert numpy_run.run_registration(client, lib, reg, other).data.tolist() == [10, 17, pytest.approx(2 ** 0.5)]
        assert len(trips) == 3

        # a row whose batch crashes (a division by zero in the second sample): every call runs
        # alone, and the crash is the second sample's
        rows = {"ok": [i32(7), i32(2)], "zero": [i32(1), i32(0)], "after": [i32(9), i32(3)]}

        client.answer_ahead(_recorded_row(client, div, trunc, {k: [v] for k, v in rows.items()}))
        client.sample = "ok"
        assert numpy_run.run_registration(client, div, trunc, rows["ok"]).data.tolist() == [3]
        client.sample = "zero"
        with pytest.raises(KernelCrashed, match="SIGFPE"):
            numpy_run.run_registration(client, div, trunc, rows["zero"])
        client.sample = "after"
        assert numpy_run.run_registration(client, div, trunc, rows["after"]).data.tolist() == [3]
    finally:
        client.close()


@pytest.mark.parametrize("sanitized", [True, False])
def test_a_run_on_zeros_that_reads_past_an_array_is_not_proven(fixture_root, tmp_path,
                                                               monkeypatch, sanitized):
    """Wrong on purpose (review 45): an index read before it is written, in bounds on the
    first filling of the stack and past a `constant` array on zeros. The run on zeros stops at
    the guard page; its unwritten elements keep the first run's answers, so the answer alone
    did not change: the stop itself marks the sample not proven, with the sanitizers and
    without them."""
    from porter.emulate.build import build_source
    from porter.emulate.client import WorkerClient
    from porter.emulate.toolchain import address_runtime
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "cache"))
    if not sanitized:
        monkeypatch.setenv("PORTER_NO_ASAN", "1")
    address_runtime.cache_clear()         # read once a process: this test's build and worker
    text = """#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

constant float table[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

struct pick_functor {
  template <typename T>
  inline T operator()(const T x) {
    uchar i;
    return x + T(table[uchar(i + 16)]);
  }
};

REGISTER_UNARY_OP(pick, float, float);
"""
    lib = build_source(text, "pick.metal", fixture_root)
    own = WorkerClient()
    try:
        run_registration(own, lib, lib.find("pick", "float")[0], [torch.zeros(8)])
        assert own.undefined and own.undefined[0] & 32768, own.undefined
    finally:
        own.close()
        monkeypatch.delenv("PORTER_NO_ASAN", raising=False)
        address_runtime.cache_clear()
