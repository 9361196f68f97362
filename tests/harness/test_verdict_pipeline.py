"""porter.harness.verdicts: the one pipeline both `porter test` runs go through, on a source
whose samples, device answers and references are plain numbers (no torch, no op_db)."""

from __future__ import annotations

import contextlib

import pytest

from porter.errors import PorterError
from porter.harness import verdicts
from porter.harness.verdicts import FAIL, PASS, SKIP, XFAIL, XPASS, RecordedFailure


class Abandon(Exception):
    pass


class Source:
    """Samples are numbers; the device answers `device(x)`, the reference is `x`."""

    device = "fake"
    abandon = (Abandon,)
    sample_errors = (RecordedFailure,)

    def __init__(self, samples=(1, 2, 3), device=lambda x: x, dtypes=("float32", "int64"),
                 no_kernel=(), xfail=(), skip=(), cannot_run=None, build_error=None,
                 broken_after=None, mac=None, fused=None):
        self._samples, self._device, self._mac = list(samples), device, mac
        self._fused, self._last = fused, None      # fused: the device with a*b+c contracted
        self.asked: list = []                       # (what was asked, of which sample)
        self._dtypes, self._no_kernel = set(dtypes), set(no_kernel)
        self._xfail, self._skip = set(xfail), set(skip)
        self._cannot_run, self._build_error, self._broken_after = cannot_run, build_error, broken_after

    def header(self):
        return verdicts.OpResult("op.v", "op", "v", "opv", self.device)

    def dtypes(self):
        return self._dtypes, self._no_kernel

    def cannot_run(self):
        return self._cannot_run

    def build_error(self):
        return self._build_error

    def expectations(self, dtype):
        return ([f"xfail {dtype}"] if dtype in self._xfail else [],
                [f"skip {dtype}"] if dtype in self._skip else [], (0.0, 0.0))

    def reported_tolerances(self, dtype):
        return (None, None)

    def samples(self, dtype):
        yield from self._samples
        if self._broken_after:
            raise RecordedFailure(self._broken_after)

    def sample_error(self, exc):
        return str(exc)

    def tolerances(self, sample, dtype):
        return (0, 0)

    def tolerance_error(self, exc):
        return "tolerance rules raised"

    def quiet(self):
        return contextlib.nullcontext()

    def run(self, sample, dtype):
        self._last = sample
        return self._device(sample)

    def other_versions(self):
        return []

    def contracted(self):
        self.asked.append(("contracted", self._last))
        return None if self._fused is None else (self._fused(self._last), [])

    def reference(self, sample, device_out):
        return sample

    def record_errors(self, res, reference, device_out):
        verdicts.raise_max(res, "max_abs", abs(device_out - reference))

    def mac_reference(self, sample, reference):
        return None if self._mac is None else (self._mac(sample), "a Mac's CPU reference")

    def compare(self, sample, reference, device_out, tolerances, floors, dtype, brief=False):
        self.asked.append(("brief" if brief else "full", sample))
        if device_out == reference:
            return None
        return "differs" if brief else f"{device_out} != {reference}"


def outcomes(result):
    return {d.dtype: d.outcome for d in result.dtypes}


def test_every_sample_runs_and_the_first_failure_is_reported():
    res = verdicts.run_op(Source(device=lambda x: x if x == 1 else x + 1))
    row = res.dtypes[0]
    assert (row.dtype, row.outcome, row.samples, row.failed_samples, row.first_failure,
            row.message, row.max_abs) == ("int64", FAIL, 3, 2, 1, "3 != 2", 1)
    assert res.supported == ["int64", "float32"]


def test_past_a_dtypes_first_failure_only_whether_a_sample_fails_is_asked():
    # the row shows the first failure's message, run again contracted; later failing samples
    # cost a comparison with no message and no contracted run (a wrong body failed ~1000
    # samples, each composing a message and running again contracted: twice the edit's time)
    # (a passing sample runs contracted as well, before the first failure: sample 1)
    source = Source(samples=(1, 2, 3, 4), device=lambda x: x if x == 1 else x + 1,
                    fused=lambda x: x if x == 1 else x + 1, dtypes=("float32",))
    row = verdicts.run_op(source).dtypes[0]
    assert (row.outcome, row.failed_samples, row.first_failure) == (FAIL, 3, 1)
    assert row.message == "3 != 2"          # the contracted answer fails alike: nothing to add
    assert source.asked == [("full", 1), ("contracted", 1), ("full", 1), ("full", 2),
                            ("contracted", 2), ("full", 2), ("brief", 3), ("brief", 4)]


def test_a_sample_whose_mac_reference_differs_is_held_to_both_and_red_with_which():
    # a Mac's test compares with a Mac's CPU: the kernel agrees with this machine's reference
    # on sample 2 but not with the Mac's, so the dtype is red and the message says against what
    res = verdicts.run_op(Source(mac=lambda x: x + 10 if x == 2 else x))
    row = res.dtypes[0]
    assert (row.outcome, row.failed_samples, row.first_failure) == (FAIL, 1, 1)
    assert row.message == "against a Mac's CPU reference: 2 != 12"
    # where the Mac's reference is this machine's, nothing changes
    assert outcomes(verdicts.run_op(Source(mac=lambda x: x))) == {"float32": PASS, "int64": PASS}


# FMA contraction: whether a Mac's compiler fuses a*b+c is not known, nor whether a Mac's CPU
# reference is fused where this machine's is, so a sample that fails one way is not proven
# either way, and its message says which way fails. (device rounded twice, device contracted)
# -> (outcome, failed samples, message, notes)
CONTRACTION_TABLE = [
    # both ways right: green, no note
    ((lambda x: x), (lambda x: x), (PASS, 0, None, [])),
    # only the contracted build right (planted: a kernel that needs the fma): not proven, red,
    # saying so (tanh_backward float32 near 1 - y*y = 0: a Mac's NEON body does not fuse)
    ((lambda x: x + 1 if x == 2 else x), (lambda x: x),
     (FAIL, 1, "3 != 2 (" + verdicts.CONTRACTED_ONLY + ": not proven, since whether Apple's "
      "compiler contracts it is not known, and a Mac's CPU reference fuses it only in its scalar "
      "loop, not in its vector body)", [])),
    # only the build rounding twice right: not proven, red, saying so (review 27's N16:
    # `fa * fa - fa * fa` is 0 only unfused); past the dtype's first failure no sample is asked
    # contracted again (the row is red already)
    ((lambda x: x), (lambda x: x + 1),
     (FAIL, 1, "2 != 1 (" + verdicts.UNFUSED_ONLY + ": not proven, since Apple's compiler may "
      "contract it, as clang does within an expression, and whether it does is not known)", [])),
    # right unfused, and contracted only on the samples it is asked (the second fails
    # unfused): the first failure's message, with the contracted build's verdict
    ((lambda x: x + 1 if x == 2 else x), (lambda x: x + 1 if x == 3 else x),
     (FAIL, 1, "3 != 2 (" + verdicts.CONTRACTED_ONLY + ": not proven, since whether Apple's "
      "compiler contracts it is not known, and a Mac's CPU reference fuses it only in its scalar "
      "loop, not in its vector body)", [])),
    # wrong both ways: red, and the message says so
    ((lambda x: x + 1 if x == 2 else x), (lambda x: x + 2 if x == 2 else x),
     (FAIL, 1, "3 != 2 (fails with a*b+c contracted to one fma as well)", [])),
    # wrong the same both ways (an integer kernel: no a*b+c to contract): red, and no word of
    # the fma, which changed nothing (review34 item 10: it said "as well" for int32 sign)
    ((lambda x: x + 1 if x == 2 else x), (lambda x: x + 1 if x == 2 else x),
     (FAIL, 1, "3 != 2", [])),
]


@pytest.mark.parametrize("plain, fused, expected", CONTRACTION_TABLE)
def test_a_sample_failing_rounded_twice_is_red_and_says_whether_the_fma_passes(plain, fused, expected):
    res = verdicts.run_op(Source(device=plain, fused=fused, dtypes=("float32",)))
    row = res.dtypes[0]
    assert (row.outcome, row.failed_samples, row.message, row.notes) == expected


class ReferenceInputs(Source):
    """porter's reference-input rows, with a tolerance: upstream's atol 1e-5 passes a value of
    1e-12 flushed to zero, porter's lost-precision rule fails it."""

    reference_inputs, shapes = True, False

    def compare(self, sample, reference, device_out, tolerances, floors, dtype, brief=False):
        a, b = float(device_out.data[0]), float(reference.data[0])
        return None if abs(a - b) <= 1e-5 else f"{a} != {b}"

    def record_errors(self, res, reference, device_out):
        pass


def test_a_value_flushed_to_zero_both_ways_stays_red_under_the_contracted_build():
    # erfc-style: the kernel answers 0 where the CPU answers 1e-12, with or without the fma. The
    # contracted answer was held to upstream's tolerance alone, which passes it: the row said
    # "passes only with a*b+c contracted" and was green
    import numpy as np

    from porter.dispatch.numpy_tensors import PArray

    def value(x):
        return PArray("float32", np.array([x], dtype=np.float32))

    def flush(sample):
        return value(0.0) if float(sample.data[0]) < 1e-6 else sample

    samples = [value(1.0), value(1e-12)]
    res = verdicts.run_op(ReferenceInputs(samples=samples, device=flush, fused=flush, dtypes=("float32",)))
    row = res.dtypes[0]
    assert (row.outcome, row.failed_samples) == (FAIL, 1), (row.outcome, row.message, row.notes)
    assert row.message.startswith("lost precision") and "(lost to zero)" in row.message, row.message
    assert "contracted" not in row.message and not row.notes, (row.message, row.notes)
    # a contracted build that keeps the value: red all the same, "not proven", as for any other
    # failure that only the contracted build passes
    res = verdicts.run_op(ReferenceInputs(samples=samples, device=flush, fused=lambda x: x, dtypes=("float32",)))
    row = res.dtypes[0]
    assert row.outcome == FAIL and f"({verdicts.CONTRACTED_ONLY}: not proven" in row.message, row.message


class FlushingInputs(ReferenceInputs):
    """A GPU that reads a subnormal input as zero: the CPU's answer on that zero (here -8) passes
    too, and the compare says which reference it settled on (edges.either_flushed)."""

    def compare(self, sample, reference, device_out, tolerances, floors, dtype, brief=False):
        import numpy as np
        from porter.dispatch.numpy_tensors import PArray
        self.accepted_reference = None
        on_zero = PArray("float32", np.array([-8.0], dtype=np.float32))
        settled = on_zero if float(device_out.data[0]) == -8.0 else reference
        message = super().compare(sample, settled, device_out, tolerances, floors, dtype)
        if message is None:
            self.accepted_reference = settled
        return message


def test_the_answer_on_an_input_the_gpu_flushes_is_no_lost_precision():
    # heaviside(1e-40, -8): the CPU answers 1, a GPU reading 0 answers -8, which passes as the
    # CPU's answer on that zero; the lost-precision rule judged -8 against 1 ("of the other
    # sign") and the row was red, green only through the contracted build's hole
    import numpy as np

    from porter.dispatch.numpy_tensors import PArray
    one = PArray("float32", np.array([1.0], dtype=np.float32))
    minus_eight = PArray("float32", np.array([-8.0], dtype=np.float32))
    res = verdicts.run_op(FlushingInputs(samples=[one], device=lambda x: minus_eight,
                                         fused=lambda x: minus_eight, dtypes=("float32",)))
    assert (res.dtypes[0].outcome, res.dtypes[0].message, res.dtypes[0].notes) == (PASS, None, [])


def test_a_device_without_a_contracted_build_keeps_its_verdict():
    row = verdicts.run_op(Source(device=lambda x: x + 1, dtypes=("float32",))).dtypes[0]
    assert (row.outcome, row.failed_samples, row.message) == (FAIL, 3, "2 != 1")


def test_an_expected_failure_that_passes_is_an_xpass_and_one_that_fails_an_xfail():
    assert outcomes(verdicts.run_op(Source(xfail={"float32"}))) == {"float32": XPASS, "int64": PASS}
    wrong = Source(device=lambda x: -x, xfail={"float32"})
    assert outcomes(verdicts.run_op(wrong)) == {"float32": XFAIL, "int64": FAIL}


def test_dtypes_decided_without_a_sample():
    assert outcomes(verdicts.run_op(Source(skip={"int64"}))) == {"float32": PASS, "int64": SKIP}
    res = verdicts.run_op(Source(cannot_run="porter cannot run op"))
    assert {d.message for d in res.dtypes} == {"porter cannot run op"}
    assert outcomes(res) == {"float32": SKIP, "int64": SKIP}
    res = verdicts.run_op(Source(build_error="x.metal does not build", xfail={"int64"}))
    assert outcomes(res) == {"float32": FAIL, "int64": XFAIL}
    res = verdicts.run_op(Source(dtypes={"float32"}, no_kernel={"int64"}))
    assert outcomes(res) == {"float32": PASS, "int64": FAIL}
    assert res.dtypes[0].message.startswith("no Metal kernel registered for int64")


def test_a_dtype_with_no_sample_is_never_a_pass():
    # zero samples ran (a generator that yields none, e.g. a broken --shapes one): nothing
    # reached the kernel, so neither pass nor, under an xfail, xpass; a skip saying why
    res = verdicts.run_op(Source(samples=(), xfail={"float32"}))
    assert [(d.dtype, d.outcome, d.samples, d.message) for d in res.dtypes] == [
        ("int64", SKIP, 0, "no sample inputs for int64: nothing ran"),
        ("float32", SKIP, 0, "no sample inputs for float32: nothing ran")]
    assert not any(d.outcome == PASS and d.samples == 0 for d in res.dtypes)


def test_a_dtype_asked_for_and_not_declared_is_skipped_with_why():
    res = verdicts.run_op(Source(), dtypes=["torch.float16", "float32"])
    assert [(d.dtype, d.outcome, d.message) for d in res.dtypes] == [
        ("float16", SKIP, "op.v does not support float16 on fake"), ("float32", PASS, None)]


def test_a_recorded_sample_failure_fails_the_dtype_after_the_samples_ran():
    res = verdicts.run_op(Source(broken_after="sample inputs failed: boom"), dtypes=["int64"])
    row = res.dtypes[0]
    assert (row.outcome, row.samples, row.failed_samples, row.message) == (
        FAIL, 3, 1, "sample inputs failed: boom")


def test_one_sample_by_index_and_an_index_out_of_range_is_an_error():
    res = verdicts.run_op(Source(device=lambda x: 0 if x == 3 else x), dtypes=["int64"], only=2)
    assert (res.dtypes[0].samples, res.dtypes[0].outcome, res.dtypes[0].first_failure) == (1, FAIL, 2)
    with pytest.raises(PorterError, match=r"--sample 7: op.v has 3 sample input\(s\) for int64"):
        verdicts.run_op(Source(), dtypes=["int64"], only=7)


def test_device_errors_fail_a_sample_and_abandoning_stops_the_run():
    def boom(x):
        raise ValueError("bad operand")
    res = verdicts.run_op(Source(device=boom), dtypes=["int64"])
    assert res.dtypes[0].message == "fake error: ValueError: bad operand"

    def give_up(x):
        raise Abandon("numpy cannot")
    with pytest.raises(Abandon):
        verdicts.run_op(Source(device=give_up))


def test_both_sources_feed_the_one_pipeline_and_know_nothing_of_each_other():
    # a second copy of the sample loop would come back as one source calling into the other
    from tests.test_layout import graph

    g = graph()
    sources = {"porter.harness.opinfo_run", "porter.harness.cached_run"}
    for source in sources:
        assert "porter.harness.verdicts" in g[source]
        assert not (sources - {source}) & g[source], source
    assert not sources & g["porter.harness.verdicts"]


class RefusingCpu(Source):
    """The CPU reference raises for sample 2 (remainder of bools: "not implemented for 'Bool'")."""

    def __init__(self, reference_inputs: bool, **kw):
        super().__init__(**kw)
        self.reference_inputs = reference_inputs

    def reference(self, sample, device_out):
        if sample == 2:
            raise NotImplementedError("\"remainder_cpu\" not implemented for 'Bool'")
        return sample


def test_a_reference_input_the_cpu_refuses_is_left_out_with_a_note_not_failed():
    """On porter's reference-input rows (upstream's test sends none of them) a sample whose CPU
    reference raises has nothing to hold the kernel to: left out, said in the row's note. On
    upstream's samples it stays a failure, as upstream's test errors there too."""
    ours = verdicts.run_op(RefusingCpu(True, dtypes=("bool",)))
    row = ours.dtypes[0]
    assert (row.outcome, row.samples, row.failed_samples) == (PASS, 2, 0)
    assert row.notes == ["1 sample(s) of porter's reference inputs left out: the CPU reference "
                         "refuses them (sample 1: NotImplementedError: \"remainder_cpu\" not "
                         "implemented for 'Bool')"]
    # a wrong kernel on the other samples is still red
    wrong = verdicts.run_op(RefusingCpu(True, dtypes=("bool",), device=lambda x: x + 1))
    assert wrong.dtypes[0].outcome == FAIL and wrong.dtypes[0].failed_samples == 2
    upstream = verdicts.run_op(RefusingCpu(False, dtypes=("bool",)))
    assert upstream.dtypes[0].outcome == FAIL
    assert upstream.dtypes[0].message.startswith("CPU reference error: NotImplementedError")


class _UndefinedTag(str):
    undefined = True        # what porter.emulate.emulator_device tags such a reading with


@pytest.mark.parametrize("tag, outcome_message", [
    # review 37's K06, N10: the kernel reached an answer Metal leaves undefined, and the answer
    # this CPU gave fails: a Mac's answer is not known, so not proven, never plain red
    (_UndefinedTag("not proven"), "not proven: indexed past the vector (the answer this CPU gave "
                                  "there fails: 3 != 2)"),
    # any other reading (another Metal version's answer) leaves the failure red as it was
    ("under __METAL_VERSION__ 320", "3 != 2"),
])
def test_a_failing_sample_that_reached_an_undefined_answer_is_not_proven(tag, outcome_message):
    source = Source(samples=(2,), device=lambda x: x + 1, dtypes=("float32",))
    source.other_versions = lambda: [(tag, "indexed past the vector")]
    row = verdicts.run_op(source).dtypes[0]
    assert (row.outcome, row.message) == (FAIL, outcome_message)


@pytest.mark.parametrize("others, outcome, message", [
    # review 38's U08, B10: where Metal leaves the answer open, a Mac gives one of the two
    # readings: the first failing and the other passing is not proven, as the first passing
    # and the other failing is; both failing is red
    ([("with the other reading", 2)], FAIL,
     "not proven: 3 != 2 (it passes with the other reading: a Mac gives one of the two)"),
    ([("with the other reading", 4)], FAIL, "3 != 2"),
    # another Metal version is another Mac: each must pass, so its passing rescues nothing
    ([(320, 2)], FAIL, "3 != 2"),
])
def test_a_sample_right_only_in_the_other_reading_is_not_proven(others, outcome, message):
    source = Source(samples=(2,), device=lambda x: x + 1, dtypes=("float32",))
    source.other_versions = lambda: others
    row = verdicts.run_op(source).dtypes[0]
    assert (row.outcome, row.message) == (outcome, message)
    from porter.harness.run_report import is_not_proven
    assert is_not_proven(row.message) == message.startswith("not proven")
