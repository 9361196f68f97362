"""The reference cache of `porter test --device emulate`: same verdicts, no op_db and no torch
on a warm run, exact invalidation, live expectations and tolerances, LRU bound, --watch."""

from __future__ import annotations

import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from porter import cli
from porter.harness import refcache
from porter.harness import opinfo_run as runner
from porter.harness.session import Options, run

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                                reason="no C++ compiler for the Metal emulator")

REPO = Path(__file__).resolve().parents[2]
BINARY = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
HYPOT_BODY = "c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b)))"
HYPOT_WRONG = "(::metal::fabs(float(a)) + ::metal::fabs(float(b)))"
# wrong only past |a| = 4: a few elements of each large reference input, each of which the
# scalar loop is asked about (the record holds no answers for a sample that large)
HYPOT_WRONG_PAST_4 = ("(::metal::fabs(float(a)) > 4 ? 0.0f : c10::metal::hypot(::metal::fabs(float(a)), "
                      "::metal::fabs(float(b))))")
ATAN2_INT_BODY = "inline float operator()(const T a, const T b) {\n    return precise::atan2(float(a), float(b));"
ATAN2_INT_WRONG = "inline float operator()(const T a, const T b) {\n    return precise::atan2(float(b), float(a));"


@pytest.fixture(scope="module")
def kernel_cache(porter_cache) -> Path:
    """Compiled kernel libraries: the session's (tests/conftest.py), so this module builds no
    kernel another test file built; each test starts with its own empty reference cache."""
    return porter_cache


@pytest.fixture
def cache(tmp_path, monkeypatch, kernel_cache) -> Path:
    monkeypatch.setenv("PORTER_CACHE_DIR", str(kernel_cache))
    monkeypatch.setenv("PORTER_REFCACHE_DIR", str(tmp_path / "references"))
    return tmp_path / "references"


def _table(root: Path, ops: list[str], **kw) -> tuple[int, dict]:
    out = io.StringIO()
    code = run(Options(ops=ops, root=str(root), device="emulate", json=True, out=out, **kw))
    data = json.loads(out.getvalue())
    data.pop("reference_cache", None)           # says where the samples came from
    for op in data["ops"]:
        for d in op["dtypes"]:
            d.pop("seconds")
    return code, data


def _from_cache_only(monkeypatch):
    """Make any uncached run an error, so a test knows its run came from the cache."""
    def no_op_db(*args, **kwargs):
        raise AssertionError("ran the op database although the cache had everything")
    monkeypatch.setattr(runner, "run_op_tests", no_op_db)


def _registered_ops(root: Path) -> list[str]:
    from porter.emulate.hostmap import host_kernels
    return sorted({h.op for h in host_kernels(root) if h.metal.name in
                   ("UnaryKernel.metal", "BinaryKernel.metal")})


@pytest.mark.slow
def test_cached_and_uncached_tables_are_identical_for_every_registered_op(real_root, cache,
                                                                          monkeypatch):
    ops = _registered_ops(real_root)
    assert {"hypot", "atan2", "add", "round", "special.erfcx", "sqrt"} <= set(ops)
    # frac is still MPSGraph (skip, with why); the fixture's yaml routes plain round through
    # round_stub, which no host file registers (fail, as on a Mac): both kinds compared
    ops.append("frac")
    # Two wrong bodies among the right ones, so that failures (messages, first failing
    # sample, max errors) are compared as well as passes and skips.
    metal = real_root / BINARY
    text = metal.read_text()
    assert HYPOT_BODY in text and ATAN2_INT_BODY in text
    metal.write_text(text.replace(HYPOT_BODY, HYPOT_WRONG).replace(ATAN2_INT_BODY, ATAN2_INT_WRONG))
    cold_code, cold = _table(real_root, ops)                 # the ordinary run; records
    with monkeypatch.context() as m:
        _from_cache_only(m)
        warm_code, warm = _table(real_root, ops)
    assert (warm_code, warm) == (cold_code, cold)
    outcomes = {(o["op"], d["dtype"]): d["outcome"] for o in cold["ops"] for d in o["dtypes"]}
    assert len(outcomes) > 150 and cold_code == 1
    assert {k for k, v in outcomes.items() if v == "fail"} >= {
        ("hypot", "float32"), ("hypot", "bfloat16"), ("atan2", "int32"), ("atan2", "bool")}
    assert {"pass", "fail", "skip"} <= set(outcomes.values())
    assert outcomes[("frac", "float32")] == "skip" and outcomes[("round", "float32")] == "fail"


@pytest.mark.parametrize("op, passes", [
    ("hypot", 3),
    # add (its kernel takes alpha) is not proven on the tree: its MPS row names add_out_mps
    ("atan2", 9),
])
@pytest.mark.slow
def test_warm_run_imports_neither_the_op_database_nor_torch(real_root, cache, op, passes):
    _table(real_root, [op])                                     # fills the cache in-process
    # os.environ carries the `cache` fixture's kernel and reference caches: the child builds
    # nothing (its kernel cache pointed at the references folder cost a cold build, ~130 s
    # under load against the 120 s limit)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # --samples-only: upstream's samples alone (the full verdict: the test below)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "porter", "test", op,
                           "--device", "emulate", "--samples-only", "--root", str(real_root)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"summary: {passes} pass, 0 fail" in proc.stdout and "references cached" in proc.stdout
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "numpy" in imported                                   # the cached run did run
    assert "torch.testing._internal.common_methods_invocations" not in imported
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}


def test_environment_key_covers_torch_build_op_definitions_and_sample_functions(tmp_path, cache,
                                                                              monkeypatch):
    pkg = tmp_path / "site" / "torch"
    defs = pkg / "testing" / "_internal" / "opinfo" / "definitions"
    defs.mkdir(parents=True)
    (pkg / "lib").mkdir()
    files = {
        pkg / "version.py": "__version__ = '2.13.0+cpu'\n",
        pkg / "_C.cpython-311-x86_64-linux-gnu.so": "binary",
        pkg / "lib" / "libtorch_cpu.so": "kernels",
        pkg / "testing" / "_internal" / "common_methods_invocations.py":
            "op_db = [BinaryUfuncInfo('hypot', dtypes=floating_types())]\n",
        defs / "special.py": "def sample_inputs_erfcx(op, device, dtype):\n    yield 1\n",
        pkg / "testing" / "_internal" / "common_mps.py": "def mps_ops_modifier(ops): ...\n",
    }
    for path, text in files.items():
        path.write_text(text)
    monkeypatch.setattr(refcache, "torch_dir", lambda root: pkg)
    base = refcache.environment(None, "mps")
    assert base == refcache.environment(None, "mps")
    os.utime(pkg / "version.py", ns=(1, 1))                     # touched, same bytes: a hit
    assert refcache.environment(None, "mps") == base
    assert refcache.environment(None, "cuda") != base

    def changed(path: Path, text: str) -> str:
        old, st = path.read_text(), path.stat()
        path.write_text(text)
        try:
            return refcache.environment(None, "mps")
        finally:
            path.write_text(old)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    # a different torch: version, or a rebuilt library of the same version
    assert changed(pkg / "version.py", "__version__ = '2.14.0'\n") != base
    assert changed(pkg / "_C.cpython-311-x86_64-linux-gnu.so", "rebuilt!") != base
    assert changed(pkg / "lib" / "libtorch_cpu.so", "other kernels") != base
    # a changed OpInfo definition, a changed sample function
    cmi = pkg / "testing" / "_internal" / "common_methods_invocations.py"
    assert changed(cmi, "op_db = [BinaryUfuncInfo('hypot', dtypes=all_types())]\n") != base
    assert changed(defs / "special.py", "def sample_inputs_erfcx(op, device, dtype):\n    yield 2\n") != base
    assert refcache.environment(None, "mps") == base            # all restored: a hit again


def _add_tolerance_list(root: Path, names: set[str]) -> None:
    path = root / "test" / "test_mps.py"
    text = path.read_text()
    # after the class's own lists (the last assignment is the one the class keeps)
    anchor = "    # (atol, rtol) per op and dtype"
    start = text.index(anchor) if anchor in text else \
        text.index("class TestConsistency(TestCase):\n") + len("class TestConsistency(TestCase):\n")
    text = text[:start] + f"    FP32_LOW_PRECISION_LIST = {sorted(names)!r}\n" + text[start:]
    text = text.replace("FP32_LOW_PRECISION_LIST = [", "FP32_LOW_PRECISION_LIST = {").replace("']\n", "'}\n", 1)
    path.write_text(text)


def _plant_sqrt_off(root: Path) -> None:
    """sqrt's complex kernel 2e-5 off (relative): outside complex64's default tolerance, inside
    the low-precision list's (1e-4, 3e-5), so a test can watch the lists decide the verdict."""
    metal = root / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"
    text = metal.read_text()
    exact = "    return T(re, copysign(im, b));\n"
    assert exact in text
    metal.write_text(text.replace(exact, "    return T(re * 1.00002f, copysign(im, b) * 1.00002f);\n", 1))


@pytest.mark.slow
def test_expectation_and_tolerance_lists_are_read_on_every_cached_run(real_root, cache, monkeypatch):
    """They change with every port, so they are never cached: a stale cache cannot turn a
    red verdict green, and an edit to them shows on the next (still cached) run."""
    _plant_sqrt_off(real_root)
    code, data = _table(real_root, ["sqrt"])
    outcome = {d["dtype"]: d["outcome"] for d in data["ops"][0]["dtypes"]}
    assert code == 1 and outcome["complex64"] == "fail"
    _from_cache_only(monkeypatch)

    # an expectation entry: the failure is now expected
    common_mps = real_root / "torch/testing/_internal/common_mps.py"
    original = common_mps.read_text()
    common_mps.write_text(original.replace('"hash_tensor": None,',
                                           '"hash_tensor": None,\n            "sqrt": [torch.complex64],', 1))
    code, data = _table(real_root, ["sqrt"])
    (c64,) = [d for d in data["ops"][0]["dtypes"] if d["dtype"] == "complex64"]
    assert code == 0 and c64["outcome"] == "xfail" and c64["expected_by"]
    common_mps.write_text(original)

    # a tolerance list: sqrt among the low-precision float32 ops passes; taken out, fails again
    test_mps = (real_root / "test/test_mps.py")
    plain = test_mps.read_text()
    _add_tolerance_list(real_root, {"sqrt"})
    code, data = _table(real_root, ["sqrt"])
    assert data["tolerance_lists"].startswith("test/test_mps.py")   # its lists, its _compute_tolerances
    assert code == 0 and {d["outcome"] for d in data["ops"][0]["dtypes"]} == {"pass"}
    test_mps.write_text(plain)
    _add_tolerance_list(real_root, {"matmul"})
    code, data = _table(real_root, ["sqrt"])
    assert code == 1


def test_lru_eviction_and_cache_clear(cache, capsys, tmp_path, monkeypatch):
    # `cache clear` empties the kernel cache too: this test's own, not the one the session's
    # other tests (and xdist's other worker) are building into
    monkeypatch.setenv("PORTER_CACHE_DIR", str(tmp_path / "kernels"))
    d = refcache.directory()
    d.mkdir(parents=True)
    for i in range(5):
        # ref-0 and ref-1: an older porter's records (.npz), which no key names now, still
        # count and go first, least recently used
        p = d / f"ref-{i}{'.npz' if i < 2 else refcache.REF_SUFFIX}"
        p.write_bytes(b"x" * 1000)
        os.utime(p, ns=(i * 10**9, i * 10**9))                    # ref-0 least recently used
    assert refcache.evict(limit=2500) == 3
    assert sorted(p.name for p in refcache.entries()) == ["ref-3.ref", "ref-4.ref"]
    assert cli.main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert "references" in out and "removed 2 file(s)" in out
    assert refcache.entries() == []


@pytest.mark.slow
def test_a_record_evicted_alone_is_recorded_again_by_the_next_run(real_root, cache, monkeypatch):
    """evict() removes files one at a time: with one dtype's samples gone, every later run of
    the op missed the cache and took the op_db way, since the recorder saw the op's record
    complete and wrote nothing (a fresh `porter test heaviside` took 5.5 s where a warm one
    takes 1 s, on a cache shared with other runs)."""
    code, cold = _table(real_root, ["atan2"])                     # records
    refs = sorted(cache.glob("ref-*" + refcache.REF_SUFFIX))
    assert len(refs) >= 9                                           # one per dtype at least
    gone = refs[len(refs) // 2]
    gone.unlink()
    assert _table(real_root, ["atan2"]) == (code, cold)         # a miss: the op_db way, records
    assert gone.is_file()
    with monkeypatch.context() as m:
        _from_cache_only(m)
        assert _table(real_root, ["atan2"]) == (code, cold)


@pytest.mark.slow
def test_a_backward_op_is_recorded_and_a_changed_formula_is_a_miss(real_root, cache, monkeypatch):
    """A backward op's runs all took the op_db way (8 s where a forward op's warm run takes
    1 s): the recorder looked its name up in op_db, which has no OpInfo of it. Its samples
    come through the derivative formula, so a formula the checkout changes is not the record's."""
    from tests.porter_run import git_init, porter
    git_init(real_root)
    assert porter("migrate-from-mpsgraph", "sigmoid_backward", "--body",
                  "grad_output * (1 - output) * output", root=real_root).code == 0
    full = {"reference_inputs": True, "shapes": True}
    cold = _table(real_root, ["sigmoid_backward"], **full)
    assert cold[0] == 0 and cold[1]["ops"][0]["test"] == "backward_output_match"
    with monkeypatch.context() as m:
        _from_cache_only(m)
        assert _table(real_root, ["sigmoid_backward"], **full) == cold
    own = real_root / "tools" / "autograd" / "derivatives.yaml"
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_text("- name: sigmoid(Tensor self) -> Tensor\n  self: sigmoid_backward(grad, result)\n")
    with monkeypatch.context() as m:
        _from_cache_only(m)
        with pytest.raises(AssertionError, match="ran the op database"):
            _table(real_root, ["sigmoid_backward"], **full)


def test_a_record_reads_back_every_array_as_it_was_and_a_damaged_one_is_a_miss(cache):
    import numpy as np
    arrays = {"matrix": np.arange(12, dtype=np.float32).reshape(3, 4),
              "zero_d_bool": np.array(True), "empty": np.zeros((0, 3), np.int64),
              "complex": (np.arange(5) - 1j).astype(np.complex64),
              "bf16_bits": np.arange(6, dtype=np.uint16)[::2],          # a view: its values
              "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              "half_scalar": np.array(3.5, np.float16), "int8": np.array([-128, 127], np.int8)}
    meta = {"samples": [{"t": "array", "k": "matrix"}], "error": None, "text": "é"}
    refcache.save_refs("env", "op", "float32", arrays, meta)
    loaded = refcache.load_refs("env", "op", "float32")
    assert loaded is not None
    got_meta, got = loaded
    assert got_meta == meta and sorted(got) == sorted(arrays)
    for name, want in arrays.items():
        assert (got[name].dtype, got[name].shape) == (want.dtype, want.shape), name
        assert np.array_equal(got[name], want), name
        assert got[name].flags.writeable, name          # as np.load's arrays were
    assert refcache.load_refs("env", "op", "float64") is None               # not recorded
    path = refcache.ref_path("env", "op", "float32")
    data = path.read_bytes()
    for damaged in (data[:len(data) // 2], b"PK\x03\x04" + data[4:], b""):
        path.write_bytes(damaged)
        assert refcache.load_refs("env", "op", "float32") is None


def _one_sample_record(values, name="op", dtype="float32"):
    import numpy as np
    meta = {"samples": [{"input": {"t": "array", "k": "x", "dtype": "float32"}, "args": [],
                         "kwargs": {}, "promoted": {}, "out_dtype": dtype,
                         "ref": {"t": "array", "k": "ref", "dtype": "float32"},
                         "ref_cast": False, "ref_error": None}], "error": None}
    refcache.save_refs("env", name, dtype, {"x": np.asarray(values, np.float32),
                                            "ref": np.asarray(values, np.float32) * 2}, meta)


def test_held_rows_gives_a_record_asked_again_its_decoded_samples_read_only(cache, monkeypatch):
    """Under held_rows (porter test --watch), the second ask of an unchanged record reads and
    decodes nothing; its arrays cannot be written, so no round changes what the next reads.
    Outside it, every ask reads the record and its arrays stay writable."""
    import numpy as np
    _one_sample_record([1.0, 2.0])
    reads = []
    read = refcache._read_record
    monkeypatch.setattr(refcache, "_read_record", lambda path: reads.append(path) or read(path))

    first = refcache.load_row("env", "op", "float32")
    again = refcache.load_row("env", "op", "float32")
    assert len(reads) == 2 and first[1][0] is not again[1][0]
    assert first[1][0].input.data.flags.writeable
    with refcache.held_rows():
        reads.clear()
        first = refcache.load_row("env", "op", "float32")
        again = refcache.load_row("env", "op", "float32")
        assert len(reads) == 1 and again == first and again[1][0] is first[1][0]
        sample = again[1][0]
        assert np.array_equal(sample.input.data, [1.0, 2.0])
        assert np.array_equal(sample.ref.data, [2.0, 4.0])
        with pytest.raises(ValueError, match="read-only"):
            sample.input.data[0] = 5.0
        assert refcache.load_row("env", "op", "float64") is None       # not recorded
    reads.clear()
    refcache.load_row("env", "op", "float32")
    assert len(reads) == 1                  # the watch ended: nothing is held


def test_held_rows_reads_a_record_replaced_or_deleted_since(cache):
    """A record written again (the cache replaces it by a rename: another file) is read
    again, not answered from what was held; so is one deleted and written again at the same
    path, even one holding no array (review 79's finding 1: freed, its inode was reused, and
    the deleted record's meta came back)."""
    import numpy as np
    with refcache.held_rows():
        _one_sample_record([1.0, 2.0])
        assert np.array_equal(refcache.load_row("env", "op", "float32")[1][0].input.data, [1, 2])
        _one_sample_record([3.0, 4.0])
        assert np.array_equal(refcache.load_row("env", "op", "float32")[1][0].input.data, [3, 4])
        path = refcache.ref_path("env", "op", "float32")
        path.unlink()                                                  # evicted
        assert refcache.load_row("env", "op", "float32") is None

        for error in ("AAAA", "BBBB"):
            empty = refcache.ref_path("env", "empty", "float32")
            empty.unlink(missing_ok=True)
            refcache.save_refs("env", "empty", "float32", {}, {"samples": [], "error": error})
            assert refcache.load_row("env", "empty", "float32")[0]["error"] == error


def test_a_round_lets_go_of_the_rows_the_last_one_did_not_ask_and_of_records_gone(cache):
    """refcache.next_round (each --watch round's start) drops what the last round did not
    read, and what was deleted or replaced since (each held row keeps its record's mapping,
    and so its disk space: review 79's finding 2, `porter cache clear` mid-watch); what the
    last round read stays held, however many records that is (review 79's finding 3: a
    count bound made three ops' 81 records miss every round)."""
    def mapped() -> set:
        return {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                if "ref-" in line}

    with refcache.held_rows():
        for name in ("a", "b", "c"):
            _one_sample_record([1.0], name)
        paths = {name: str(refcache.ref_path("env", name, "float32")) for name in "abc"}
        for n in range(70):                 # more records than any count bound would keep
            _one_sample_record([float(n)], f"many{n}")
            refcache.load_row("env", f"many{n}", "float32")
        refcache.next_round()
        for name in ("a", "b", "c"):
            refcache.load_row("env", name, "float32")
        assert len(refcache._HELD) == 73
        refcache.next_round()               # "many*" were not asked in the round that ended
        assert sorted(key[0] for key in refcache._HELD) == sorted(paths.values())
        refcache.load_row("env", "a", "float32")
        refcache.load_row("env", "b", "float32")
        Path(paths["a"]).unlink()           # as `porter cache clear` does
        refcache.next_round()               # c: not asked; a: deleted
        assert [key[0] for key in refcache._HELD] == [paths["b"]]
        import gc
        gc.collect()
        if Path("/proc/self/maps").exists():
            assert not any(paths["a"] in m or paths["c"] in m for m in mapped())
        reads = []
        read = refcache._read_record
        refcache._read_record = lambda path: reads.append(path) or read(path)
        try:
            refcache.load_row("env", "b", "float32")
        finally:
            refcache._read_record = read
        assert reads == []                  # asked in the last round: still held


def _ctrl_c_as_from_a_terminal() -> None:
    # pytest run in the background (`cmd &` in a script, nohup) starts with SIGINT ignored, and
    # a child inherits that: its Python then never raises KeyboardInterrupt and the SIGINT below
    # would be lost. Default disposition, so the child's Python installs its Ctrl-C handler.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_watch_reruns_on_save_and_stops_on_ctrl_c(real_root, cache):
    _table(real_root, ["hypot"])                                 # the watcher's first round is warm
    # os.environ carries the `cache` fixture's PORTER_CACHE_DIR (the session's kernel cache) and
    # PORTER_REFCACHE_DIR, so the watcher's first round reuses what _table built: pointing its
    # kernel cache at the references folder made it rebuild every kernel cold (over 90 s on CI)
    # PYTHONFAULTHANDLER: a watcher still alive after Ctrl-C is sent SIGABRT, which prints every
    # thread's stack, so the failure says where it hung (CI saw one once)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "porter", "test", "hypot", "--device", "emulate",
                             "--watch", "--samples-only", "--root", str(real_root)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=_ctrl_c_as_from_a_terminal)
    seen: list[str] = []

    # a reader thread, so that a silent watcher fails the wait at its deadline instead of
    # blocking readline (and the whole suite) for ever
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in iter(proc.stdout.readline, "")]
                     + [lines.put("")], daemon=True).start()

    def wait_for(text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if not line:
                break
            seen.append(line)
            if text in line:
                return
        raise AssertionError(f"no {text!r} in:\n{''.join(seen)}")

    try:
        wait_for("porter: exit 0")
        wait_for("porter: watching")
        metal = real_root / BINARY
        good = metal.read_text()
        metal.write_text(good.replace(HYPOT_BODY, HYPOT_WRONG))
        wait_for("porter: changed: " + BINARY)
        wait_for("porter: exit 1")
        assert any(line.startswith("  FAIL float32") for line in seen)
        metal.write_text(good)
        wait_for("porter: exit 0")
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=30)
            stacks = "".join(iter(lambda: lines.get(timeout=30), ""))
            raise AssertionError(f"the watcher outlived Ctrl-C by 30 s; it printed:\n{stacks}") from None
        assert proc.returncode == 0
        rest = "".join(iter(lambda: lines.get(timeout=30), ""))   # to the reader's end mark
        assert "porter: watch stopped" in rest and "Traceback" not in "".join(seen) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_watched_files_are_the_kernel_sources_and_their_includes(real_root):
    from porter.harness.watch import watched_files
    files = {str(p.relative_to(real_root)) for p in watched_files(real_root) if p.is_relative_to(real_root)}
    assert {BINARY, "aten/src/ATen/native/mps/kernels/UnaryKernel.metal",
            "aten/src/ATen/native/mps/kernels/UnaryKernel.h",
            "aten/src/ATen/native/mps/operations/BinaryKernel.mm",
            "torch/testing/_internal/common_mps.py", "c10/metal/utils.h",
            # whether the CPU reference is this checkout's (review 42's F6)
            "aten/src/ATen/native/native_functions.yaml",
            "aten/src/ATen/native/cpu/BinaryOpsKernel.cpp"} <= files
    assert "c10/metal/README.md" not in files and not any(f.endswith(".py") and "opinfo" in f for f in files)


@pytest.mark.slow
def test_checkout_sample_keywords_other_than_the_recorded_ones_bypass_the_cache(real_root, cache):
    """The cache records upstream's built-in sample keywords; a checkout whose test asks
    sample_inputs with other keywords gets other samples on a Mac, so its run is never
    answered from samples recorded for the built-in keywords."""
    test_mps = real_root / "test/test_mps.py"
    plain = test_mps.read_text()
    _table(real_root, ["hypot"])                                   # records, built-in keywords
    upstream_call = "requires_grad=(dtype.is_floating_point or dtype.is_complex)"
    assert upstream_call in plain
    test_mps.write_text(plain.replace(upstream_call, "requires_grad=False", 1))
    try:
        out = io.StringIO()
        run(Options(ops=["hypot"], root=str(real_root), device="emulate", json=True, out=out))
        data = json.loads(out.getvalue())
        assert not data.get("reference_cache"), data.get("reference_cache")
        assert data["samples"].startswith("test/test_mps.py"), data["samples"]
    finally:
        test_mps.write_text(plain)


@pytest.mark.slow
def test_the_checkouts_per_sample_tolerance_rules_apply_to_cached_runs(real_root, cache, monkeypatch):
    """A cached run applies the checkout's rules per sample, as the uncached run does; a rule
    reading the sample's tensors (which the cache holds as arrays) sends the run uncached."""
    test_mps = real_root / "test/test_mps.py"
    plain = test_mps.read_text()
    anchor = "            if op.name == \"kthvalue\":\n"
    _plant_sqrt_off(real_root)
    code, data = _table(real_root, ["sqrt"], dtypes=["complex64"])
    assert code == 1
    by_kwargs = ("            if op.name == \"sqrt\" and mps_sample.kwargs.get(\"porter\") is None:\n"
                 "                atol, rtol = 1e-3, 1e-3\n")
    test_mps.write_text(plain.replace(anchor, by_kwargs + anchor, 1))
    with monkeypatch.context() as m:
        _from_cache_only(m)
        code, data = _table(real_root, ["sqrt"], dtypes=["complex64"])
    assert code == 0 and data["ops"][0]["dtypes"][0]["atol"] == 1e-3
    by_tensor = by_kwargs.replace("mps_sample.kwargs.get(\"porter\") is None", "mps_sample.input.dim() > 0")
    test_mps.write_text(plain.replace(anchor, by_tensor + anchor, 1))
    out = io.StringIO()
    code = run(Options(ops=["sqrt"], root=str(real_root), device="emulate", json=True, out=out,
                       dtypes=["complex64"]))
    data = json.loads(out.getvalue())
    assert code == 0 and not data.get("reference_cache")        # decided on torch samples
    test_mps.write_text(plain)


def test_every_porter_module_in_the_environment_key_exists():
    # a module renamed without this list would drop out of the key silently: its edits would
    # then reuse references recorded by the old code
    package = Path(refcache.__file__).resolve().parent.parent
    missing = [rel for rel in refcache._PORTER_SOURCES if not (package / rel).is_file()]
    assert missing == []


def test_the_cache_key_changes_with_the_cpu_capability(monkeypatch):
    # ATEN_CPU_CAPABILITY picks torch's CPU kernels: the AVX2/AVX512 builds fuse multiply-adds,
    # DEFAULT does not, so references recorded under one are not those of another
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    unset = refcache.environment(None, "mps")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert unset is not None and refcache.environment(None, "mps") != unset


@pytest.mark.slow
def test_a_cached_run_asks_for_a_macs_cpu_reference_only_where_its_record_says(real_root, cache,
                                                                               monkeypatch):
    # a Mac's CPU computes asinh of a complex<float> otherwise than this machine's (porter.
    # harness.mac_cpu_reference): the recording run writes down which reference dtypes, and
    # a cached run holds exactly those to the Mac's reference, as the op_db run does; add's
    # never (the module is not asked), asinh's complex64 always
    from porter.harness import mac_cpu_reference
    from tests.porter_run import porter
    assert porter("migrate-from-mpsgraph", "asinh", "--no-test", root=real_root).code == 0
    cold = _table(real_root, ["add", "asinh"])
    env = refcache.environment(real_root, "mps")
    assert [r["mac_cpu"] for r in refcache.load_ops(env, "add")["ops"]] == [[]]
    assert [r["mac_cpu"] for r in refcache.load_ops(env, "asinh")["ops"]] == [["complex64"]]
    asked = []
    real = mac_cpu_reference.for_arrays

    def counting(op, sample_input, reference):
        asked.append((op, reference.dtype))
        return real(op, sample_input, reference)
    monkeypatch.setattr(mac_cpu_reference, "for_arrays", counting)
    _from_cache_only(monkeypatch)
    assert _table(real_root, ["add", "asinh"]) == cold
    assert asked and set(asked) == {("asinh", "complex64")}


def _warm_subprocess(root: Path, cache: Path, op: str) -> tuple[int, dict, set[str]]:
    """`porter test OP --device emulate --json` (the full verdict) in a fresh interpreter:
    (exit code, its table as _table gives it, the modules it imported)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PORTER_REFCACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "porter", "test", op,
                           "--device", "emulate", "--json", "--root", str(root)],
                          capture_output=True, text=True, env=env, timeout=600)
    data = json.loads(proc.stdout)
    assert data.pop("reference_cache", None), proc.stderr[-2000:]      # it did come from the cache
    for o in data["ops"]:
        for d in o["dtypes"]:
            d.pop("seconds")
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    return proc.returncode, data, imported


@pytest.mark.parametrize("op, wrong", [("atan2", False), ("hypot", HYPOT_WRONG),
                                       ("hypot", HYPOT_WRONG_PAST_4)],
                         ids=["passing", "planted-wrong-functor", "wrong-at-a-few-elements"])
@pytest.mark.slow
def test_a_warm_full_verdict_equals_the_cold_one_and_imports_no_torch(real_root, cache, op, wrong):
    """The full verdict (upstream's samples, porter's reference inputs with their edge values,
    the layouts) from the cache after an edit: the same table, notes and mismatch rows as the
    op_db run, with neither torch nor the op database imported. A body wrong at a few elements
    of a large reference input asks torch's scalar loop about them (a value torch may answer
    two ways), so it imports torch, never the op database: before, that case ran the op_db
    way, 14 s where 6 s do."""
    if wrong:
        metal = real_root / BINARY
        metal.write_text(metal.read_text().replace(HYPOT_BODY, wrong))
    cold_code, cold = _table(real_root, [op], reference_inputs=True, shapes=True)
    rows = {(o["reference"], bool(o["shapes"])): {d["outcome"] for d in o["dtypes"]}
            for o in cold["ops"]}
    assert set(rows) == {(False, False), (True, False), (False, True)}      # all three rows ran
    if wrong:
        assert cold_code == 1 and all("fail" in outcomes for outcomes in rows.values())
        shapes_row = next(o for o in cold["ops"] if o["shapes"])
        assert any(d["message"] and d["message"].startswith(("transposed", "sliced", "broadcast",
                                                              "0-dim", "large"))
                   for d in shapes_row["dtypes"])
        assert any(d["mismatches"] for o in cold["ops"] if o["reference"] for d in o["dtypes"])
    else:
        assert cold_code == 0 and all(outcomes == {"pass"} for outcomes in rows.values())
    warm_code, warm, imported = _warm_subprocess(real_root, cache, op)
    assert (warm_code, warm) == (cold_code, cold)
    assert "numpy" in imported
    assert "torch.testing._internal.common_methods_invocations" not in imported
    if wrong != HYPOT_WRONG_PAST_4:
        assert not {m for m in imported if m == "torch" or m.startswith("torch.")}


def test_porters_own_rows_are_in_the_cache_key():
    # the edge values, the layouts and the two-way rule decide what the cache holds for the
    # full verdict: an edit to any of them must miss
    assert {"harness/edges.py", "harness/shapes.py", "harness/two_ways.py",
            "harness/sample_rules.py"} <= set(refcache._PORTER_SOURCES)


@pytest.mark.slow
def test_a_number_input_among_the_reference_inputs_is_recorded_and_read_back_green(real_root, cache,
                                                                                 monkeypatch):
    """sub's reference inputs include a Number `self` (sub(2.5, t)): recording their per-element
    answers called torch.broadcast_tensors on it, the record kept "sample inputs failed", and
    every cached run was red where the live one was green. Now the cached verdict is the live
    one, from the cache."""
    rows = (real_root / "aten/src/ATen/native/native_functions.yaml").read_text()
    shared = rows.replace("    CPU, CUDA: sub_out\n    MPS: sub_out_mps\n", "    CPU, CUDA, MPS: sub_out\n")
    assert shared != rows
    (real_root / "aten/src/ATen/native/native_functions.yaml").write_text(shared)
    cold_code, cold = _table(real_root, ["sub"], reference_inputs=True, dtypes=["float32"])
    assert cold_code == 0, cold
    assert any(o["reference"] and o["dtypes"][0]["samples"] > 100 for o in cold["ops"]), cold
    _from_cache_only(monkeypatch)
    assert _table(real_root, ["sub"], reference_inputs=True, dtypes=["float32"]) == (cold_code, cold)


@pytest.mark.slow
def test_a_rows_calls_made_in_one_round_trip_give_the_verdicts_of_one_call_each(real_root, cache,
                                                                                monkeypatch):
    """porter.emulate.emulator_device.prefetch runs a cached row's kernel calls in a few round
    trips to the worker: the table is the one the calls made one at a time give, reference
    inputs and layouts included."""
    from porter.emulate.client import WorkerClient
    from porter.emulate.emulator_device import EmulateBackend
    ops = ["atan2", "sqrt"]
    _table(real_root, ops)                                       # records
    _from_cache_only(monkeypatch)
    batches, appended = [], []
    real = WorkerClient._send_chunk
    monkeypatch.setattr(WorkerClient, "_send_chunk",
                        lambda self, lane, b, keys: batches.append(len(b)) or real(self, lane, b, keys))
    ahead = WorkerClient.answer_ahead
    monkeypatch.setattr(WorkerClient, "answer_ahead", lambda self, recorded, append=False:
                        appended.append(append) or ahead(self, recorded, append))
    code, batched = _table(real_root, ops)
    assert batches and max(batches) > 1                          # calls at once
    # each row after a record's first is queued while the one before it is compared
    assert appended.count(False) < appended.count(True), appended
    monkeypatch.setattr(EmulateBackend, "prefetch", lambda self, op, samples, append=False: None)
    assert _table(real_root, ops) == (code, batched)
    assert sum(d["outcome"] == "pass" for op in batched["ops"] for d in op["dtypes"]) >= 10
