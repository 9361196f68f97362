"""The one verdict pipeline of `porter test`: samples -> kernel -> compare -> outcome, per
(OpInfo, dtype), with the records it fills.

Both runs go through `run_op`; they differ only in where samples and references come from,
a `SampleSource`:
- porter.harness.opinfo_run: samples generated from op_db now, CPU references computed now,
  compared by upstream's `TestCase.assertEqual` (torch);
- porter.harness.cached_run: both read from the reference cache, compared by its numpy
  mirror (porter.dispatch.numpy_tensors), no torch.

What is decided here, the same way for both: the dtypes reported (those asked for and not
declared are skipped with why), a dtype decided without running a sample (an expectation's
skip, porter's cannot-run skip, the device's build failure or missing kernel), every sample run
(not only up to the first failure, unlike upstream, so the report can give the number of failing
samples and the worst error), and the outcome as upstream's unittest decides it (an expected
failure that passes is an XPASS).
"""

from __future__ import annotations

import contextlib
import enum
import math
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable, Protocol

from porter.errors import PorterError
from porter.harness.devices import MPS_DTYPE_NAMES
from porter.harness.mps_expectations import canonical_dtype



class Outcome(str, enum.Enum):
    """A dtype's verdict under one test. The values are those of `--json`, JUnit and the tables
    (and the words upstream's pytest report), so an Outcome compares equal to its word and is
    written as it."""

    PASS = "pass"
    FAIL = "fail"          # a Mac fails it too: a mismatch, a missing kernel, an error
    XFAIL = "xfail"        # fails, and an expectation entry says it does
    XPASS = "xpass"        # passes, though an entry says it fails: the entry is stale
    SKIP = "skip"          # not run, with the reason (what porter truly cannot run)

    def __str__(self) -> str:
        return self.value


# the short names the harness compares with: the same members
PASS, FAIL, XFAIL, XPASS, SKIP = Outcome
TEST_NAME = "test_output_match"


@dataclass
class DtypeResult:
    dtype: str
    outcome: Outcome
    samples: int = 0
    failed_samples: int = 0
    max_abs: float | None = None
    max_rel: float | None = None
    first_failure: int | None = None
    message: str | None = None
    expected_by: list[str] = field(default_factory=list)   # why an xfail / skip applies
    atol: float | None = None
    rtol: float | None = None
    seconds: float = 0.0
    upstream: Outcome | None = None                          # outcome under test_mps.py
    # the first failing sample's first mismatching elements (porter.harness.mismatches)
    mismatches: list[dict] = field(default_factory=list)
    sample: dict | None = None        # --sample N: {index, inputs: mismatches.describe(sample)}
    # what the run changed about its references, and why (porter.harness.mac_cpu_reference)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        # a word read back from --json, or a typo, is an Outcome or a ValueError here
        self.outcome = Outcome(self.outcome)
        if self.upstream is not None:
            self.upstream = Outcome(self.upstream)


@dataclass
class OpResult:
    op: str            # full name: name[.variant]
    name: str
    variant: str
    key: str           # xfail key: name + variant
    device: str
    dtypes: list[DtypeResult] = field(default_factory=list)
    supported: list[str] = field(default_factory=list)   # every dtype testable on the device
    # --reference-inputs: these rows ran the OpInfo's reference_inputs (extremal values),
    # which upstream's test does not; reported apart, never used to prune an expectation
    reference: bool = False
    # --shapes: these rows ran porter.harness.shapes' layouts (the names, in order), which
    # upstream's test does not; reported apart like reference rows, never used to prune
    shapes: list[str] = field(default_factory=list)
    test: str = TEST_NAME          # test_output_match, test_output_grad_match, backward_output_match
    via: str | None = None         # a backward op: the forward OpInfo and formula it is tested through

    @property
    def failed(self) -> bool:
        return any(d.outcome in (FAIL, XPASS) for d in self.dtypes)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "OpResult":
        dtypes = [DtypeResult(**d) for d in data.get("dtypes", [])]
        return cls(**{**data, "dtypes": dtypes})


class RecordedFailure(Exception):
    """A failure the source recorded word for word (the reference cache's sample-generation or
    CPU-reference error): reported as it is, not wrapped again."""


class SampleSource(Protocol):
    """One OpInfo on one device: where its samples and references come from, and how a
    device's answer is compared with a reference."""

    device: str                                 # the device's name, for messages
    # exceptions that abandon the whole run (the cached run falls back to the op_db one)
    abandon: tuple[type[BaseException], ...]
    # exceptions while iterating `samples` that fail the dtype ("sample inputs failed")
    sample_errors: tuple[type[BaseException], ...]

    def header(self) -> OpResult: ...

    def dtypes(self) -> tuple[set[str], set[str]]:
        """(dtypes to run, dtypes the device test sends that the device has no kernel for)."""

    def cannot_run(self) -> str | None: ...

    def build_error(self) -> str | None: ...

    def expectations(self, dtype: str) -> tuple[list[str], list[str], tuple[float, float]]:
        """(xfail sources, skip sources, (precision, rel_tol) floors)."""

    def reported_tolerances(self, dtype: str) -> tuple: ...

    def samples(self, dtype: str) -> Iterable: ...

    def sample_error(self, exc: BaseException) -> str: ...

    def tolerances(self, sample, dtype: str): ...

    def tolerance_error(self, exc: BaseException) -> str: ...

    def quiet(self) -> contextlib.AbstractContextManager: ...

    def run(self, sample, dtype: str): ...

    def contracted(self):
        """The last `run`'s answers with a*b+c contracted to one fma: (answer, [(version,
        answer or why none)]), or None where the device has no such build."""

    def other_versions(self) -> list[tuple[int | str, object]]:
        """The last `run`'s answers under the other `__METAL_VERSION__`s whose kernel tokens
        differ (an answer, or a string saying why there is none), then each other reading of
        an answer Metal leaves undefined, named by a phrase; [] on other devices."""

    def reference(self, sample, device_out): ...

    def mac_reference(self, sample, reference):
        """(the reference a Mac's CPU computes, what it is) where it is not this machine's
        (porter.harness.mac_cpu_reference), else None."""

    def wide_reference(self, sample):
        """The op's value of the sample's inputs in float64 for the mismatch table (porter's
        reference inputs), or None."""

    def record_errors(self, res: DtypeResult, reference, device_out) -> None: ...

    def row_done(self, res: DtypeResult) -> None:
        """What the row's samples recorded and `res` does not hold yet (porter.harness.
        row_errors: the error maxima of large samples, computed beside the comparisons),
        before its verdict is settled; a source without it records as it goes."""

    def compare(self, sample, reference, device_out, tolerances, floors, dtype: str,
                brief: bool = False) -> str | None:
        """The one-line failure, or None when the device's answer matches; `brief`: any
        non-None failure will do (a later failing sample of the dtype, whose message no row
        shows), so a source may skip composing it."""


# Called as `listener(result, dtype_result)` the moment each dtype's verdict is decided, in
# run order: `porter test` on a terminal prints the row then (porter.commands.terminal.Live)
# rather than the whole table at the end. Nothing here writes: a listener only observes.
listeners: list = []


def _decided(result: OpResult, d: DtypeResult) -> DtypeResult:
    for listener in list(listeners):
        listener(result, d)
    return d


def run_op(source: SampleSource, dtypes=None, only: int | None = None) -> OpResult:
    """One OpInfo's result: every dtype it declares for the device (`dtypes`: only those;
    `only`: only that sample index)."""
    result = source.header()
    wanted = {dtype_name(d) for d in dtypes} if dtypes else None
    tested, no_kernel = source.dtypes()
    result.supported = sorted(tested | no_kernel, key=dtype_order)
    if wanted:
        for name in sorted(wanted - (tested | no_kernel), key=dtype_order):
            result.dtypes.append(DtypeResult(name, SKIP, message=(
                f"{result.op} does not support {name} on {result.device}")))
    # What stops every dtype: the op is beyond the device (skip, with why), or its kernel
    # file does not compile (fail, with the compiler's words: a Mac cannot load it either).
    cannot_run = source.cannot_run()
    build_error = None if cannot_run else source.build_error()
    upcoming = getattr(source, "upcoming", None)
    if upcoming is not None and not (cannot_run or build_error):
        upcoming([name for name in sorted(tested, key=dtype_order)
                  if (wanted is None or name in wanted) and name not in no_kernel])
    for name in sorted(tested | no_kernel, key=dtype_order):
        if wanted is not None and name not in wanted:
            continue
        if cannot_run or build_error or name in no_kernel:
            xfail_by, skip_by, _ = source.expectations(name)
            result.dtypes.append(_decided(result, not_run_verdict(
                name, xfail_by, skip_by, cannot_run,
                build_error or f"no Metal kernel registered for {name}: the MPS test sends it, "
                               "and MPS raises for it")))
        else:
            result.dtypes.append(_decided(result, _run_dtype(source, result.op, name, only)))
    result.dtypes.sort(key=lambda d: dtype_order(d.dtype))
    return result


def _run_dtype(source: SampleSource, op: str, name: str, only: int | None) -> DtypeResult:
    xfail_by, skip_by, floors = source.expectations(name)
    res = DtypeResult(name, PASS)
    if skip_by:
        res.outcome, res.expected_by = SKIP, skip_by
        res.message = "skipped by " + ", ".join(skip_by)
        return res
    # before any sample: what the report shows; each sample may loosen it
    res.atol, res.rtol = source.reported_tolerances(name)
    start = time.perf_counter()
    generated = 0
    dropped: list = []
    try:
        for index, sample in enumerate(source.samples(name)):
            generated += 1
            if only is not None and index != only:
                continue
            if only is not None:
                from porter.harness.mismatches import describe
                res.sample = {"index": index, "inputs": describe(sample)}
            res.samples += 1
            err = _check_sample(source, sample, name, floors, res)
            if isinstance(err, Dropped):
                # porter's own edge sample the CPU refuses: not sent, as upstream never sends one
                res.samples -= 1
                dropped.append((index, err.why))
                continue
            if err is not None:
                res.failed_samples += 1
                if res.first_failure is None:
                    res.first_failure, res.message = index, err
    except source.abandon:
        raise
    except source.sample_errors as exc:   # sample generation broke: the test errors upstream too
        res.failed_samples += 1
        res.message = res.message or source.sample_error(exc)
    else:
        if only is not None and not res.samples:
            # nothing ran: a pass here would be a green no device ever gave
            raise PorterError(f"--sample {only}: {op} has {generated} sample input(s) "
                              f"for {name}", hint=f"pass --sample 0 to {generated - 1}" if generated else None)
        if not res.samples:
            # no sample at all: nothing reached the kernel, so neither pass nor (for an xfail)
            # xpass; a skip with why, which a run of nothing else reports as not green
            res.outcome, res.seconds = SKIP, round(time.perf_counter() - start, 4)
            res.message = f"no sample inputs for {name}: nothing ran"
            return res
    if dropped:
        shown = "; ".join(f"sample {i}: {why}" for i, why in dropped[:2])
        more = f" and {len(dropped) - 2} more" if len(dropped) > 2 else ""
        rows = "layouts" if getattr(source, "shapes", False) else "reference inputs"
        res.notes.append(f"{len(dropped)} sample(s) of porter's {rows} left out: the CPU "
                         f"reference refuses them ({shown}{more})")
    row_done = getattr(source, "row_done", None)
    if row_done is not None:
        row_done(res)
    return settle(res, start, xfail_by)


class Dropped(str):
    """_check_sample's answer for porter's own edge sample whose CPU reference raised."""

    @property
    def why(self) -> str:
        return str(self)


def _check_sample(source: SampleSource, sample, name: str, floors, res: DtypeResult) -> str | None:
    """Run one sample on the device, get its reference, compare: a one-line failure or None."""
    try:
        # the checkout's rules decide per sample (interpolate's and upsample's depend on its kwargs)
        tolerances = source.tolerances(sample, name)
    except source.abandon:
        raise
    except Exception as exc:      # upstream's test errors on this sample as well
        return source.tolerance_error(exc)
    with source.quiet():
        try:
            device_out = source.run(sample, name)
        except source.abandon:
            raise
        except Exception as exc:
            return _device_error(source.device, exc)
        try:
            reference = source.reference(sample, device_out)
        except RecordedFailure as exc:
            return str(exc)
        except Exception as exc:
            # porter's own sample (an edge value, a reference input or a layout: upstream's
            # test sends none of them) that the CPU refuses has no reference to hold the kernel
            # to (gelu_backward's float16 broadcast layout: oneDNN cannot reorder it)
            if getattr(sample, "porter_edge", False) or reference_row(source) \
                    or getattr(source, "shapes", False):
                return Dropped(one_line(exc))
            return f"CPU reference error: {one_line(exc)}"
    source.record_errors(res, reference, device_out)
    others = source.other_versions()
    message, reference, device_out = _held(source, sample, reference, device_out, others,
                                           tolerances, floors, name, res)
    lost = None
    if message is None:
        message, lost = _lost(source, sample, reference, device_out)
    if message is None and not res.failed_samples:     # past a failure the dtype is red anyway
        message, reference, device_out, lost = _unfused_only(source, sample, reference,
                                                             device_out, tolerances, floors,
                                                             name, res)
    elif message is not None and not res.failed_samples:
        # Whether a Mac's compiler contracts a*b+c into one fma is not known, nor whether a Mac's
        # CPU reference is fused where this machine's is (clang fuses its scalar loop, not its
        # NEON body): a sample that passes only contracted is not proven, and its message says
        # which way it fails. Red either way: only the dtype's first failure, whose message the
        # row shows, is run again contracted (a rerun per failing sample doubled a wrong
        # body's edit-to-verdict time)
        contracted = _contracted_verdict(source, sample, reference, tolerances, floors, name, res)
        if contracted is not None:
            again = contracted[0]
            if again is None:
                message = (f"{message} ({CONTRACTED_ONLY}: not proven, since whether Apple's "
                           "compiler contracts it is not known, and a Mac's CPU reference fuses "
                           "it only in its scalar loop, not in its vector body)")
            elif again != message:
                # said only where contraction changed the failure: an integer kernel (no a*b+c
                # to contract) fails the same way both ways, and the phrase would mislead
                message = f"{message} (fails with a*b+c contracted to one fma as well)"
    if message is not None:
        # a reduced float the kernel computes in float32 (opmath) where the CPU rounds each
        # step in the dtype: red here and on a Mac alike, and the row says so
        opmath = getattr(source, "opmath_note", None)
        note = opmath(sample, device_out, tolerances, floors, name) if opmath is not None else None
        if note is not None and note not in res.notes:
            res.notes.append(note)
    if message is not None and not res.failed_samples:      # the first failing sample's table
        from porter.harness import mismatches
        wide = getattr(source, "wide_reference", None)
        res.mismatches = mismatches.rows(mismatches.sample_inputs(sample), reference, device_out,
                                         tolerances[0], tolerances[1], floors,
                                         wide=wide(sample) if wide is not None else None, lost=lost)
    return message


def _contracted_verdict(source: SampleSource, sample, reference, tolerances, floors, name: str,
                        res: DtypeResult):
    """The last sample's contracted answer (source.contracted) held to the same rows as the
    unfused one, lost precision included (a value flushed to zero both ways passed upstream's
    tolerance and was green): (the failure or None, the reference and answer it names, the
    lost-precision mask), or None where there is no second build to run (the first way's
    verdict stands)."""
    with source.quiet():
        try:
            contracted = source.contracted()
        except source.abandon:
            raise
        except Exception:
            contracted = None
    if contracted is None:
        return None
    fused, fused_others = contracted
    unnoted = getattr(source, "unnoted", contextlib.nullcontext)
    with unnoted():
        again, fused_reference, fused_out = _held(source, sample, reference, fused, fused_others,
                                                  tolerances, floors, name, res, record=False)
    lost = None
    if again is None:
        again, lost = _lost(source, sample, fused_reference, fused_out)
    return again, fused_reference, fused_out, lost


def _unfused_only(source: SampleSource, sample, reference, device_out, tolerances, floors,
                  name: str, res: DtypeResult):
    """A sample that passes as built (no a*b+c contracted) run again contracted: (the failure,
    said "not proven", the reference and answer it names, the lost-precision mask) where it
    fails so, else (None, the passing reference and answer, None). Apple's compiler may
    contract within an expression as clang does (whether it does in PyTorch's kernels is not
    known), so a sample right only unfused is no proof (review 27's N16: `fa * fa - fa * fa` is
    0 unfused and the rounding error of `fa * fa` contracted)."""
    contracted = _contracted_verdict(source, sample, reference, tolerances, floors, name, res)
    if contracted is None or contracted[0] is None:
        return None, reference, device_out, None
    again, fused_reference, fused_out, lost = contracted
    return (f"{again} ({UNFUSED_ONLY}: not proven, since Apple's compiler may contract it, as "
            "clang does within an expression, and whether it does is not known)",
            fused_reference, fused_out, lost)


CONTRACTED_ONLY = "passes only with a*b+c contracted to one fma"
UNFUSED_ONLY = "fails with a*b+c contracted to one fma, passes only unfused"


def _lost(source: SampleSource, sample, reference, device_out) -> tuple[str | None, object]:
    """(the lost-precision failure, its mask) of porter's reference inputs: beyond upstream's
    tolerance, a normal value flushed to zero or of the other sign fails
    (porter.harness.lost_precision); (None, None) on other rows or where none was lost."""
    if not reference_row(source):
        return None, None
    from porter.harness import lost_precision
    found = lost_precision.check(reference, device_out)
    if found is not None:
        # judged again beside the float64 value (the CPU must be the side that keeps it) and
        # the answer on the inputs as an Apple GPU reads them (a subnormal input is zero there)
        wide = getattr(source, "wide_reference", None)
        flushed = getattr(source, "flushed_answer", None)
        found = lost_precision.check(reference, device_out,
                                     wide(sample) if wide is not None else None,
                                     flushed(sample, reference) if flushed is not None else None)
    return found if found is not None else (None, None)


def _held(source: SampleSource, sample, reference, device_out, others, tolerances, floors,
          name: str, res: DtypeResult, record: bool = True):
    """(the one-line failure or None, the reference and answer it names) of one way a Mac may
    build the kernel: its answer, then each other __METAL_VERSION__'s, then a Mac's CPU
    reference where it is not this machine's."""
    # past the dtype's first failure only whether a sample fails counts (its message is not shown)
    brief = bool(res.failed_samples)
    message = source.compare(sample, reference, device_out, tolerances, floors, name, brief)
    # a wrong answer of a kernel that reached an answer Metal leaves undefined (an index past a
    # vector, a float converted out of an integer's range): a Mac's answer there is not known,
    # so the sample is not proven rather than red (review 37's K06, N10)
    undefined = next((other for tag, other in others
                      if getattr(tag, "undefined", False) and isinstance(other, str)), None)
    if message is not None and undefined is not None:
        return (f"not proven: {undefined} (the answer this CPU gave there fails: {message})",
                reference, device_out)
    # a failing answer where Metal leaves it open and another reading of it (NaN's, the other
    # zero, the library's other answer, no signed overflow) passes: a Mac gives one of them, so
    # the sample is not proven, as where the first passes and the other fails (review 38's U08)
    if message is not None:
        for version, other in others:
            if isinstance(version, str) and not isinstance(other, str) and \
                    source.compare(sample, reference, other, tolerances, floors, name, True) is None:
                return (f"not proven: {message} (it passes {version}: a Mac gives one of the two)",
                        reference, device_out)
    # the reference the pass settled on: with the values torch answers two ways, or the answer
    # on an input an Apple GPU flushes, where the device took that one (what lost precision
    # is judged against: heaviside's answer on the zero a GPU reads is no lost value)
    accepted = getattr(source, "accepted_reference", None) if message is None else None
    if message is None:
        # a Mac compiles the kernel with the Metal of its OS: each version whose tokens differ
        # is a kernel of its own, held to the same reference
        for version, other in others:
            # an int: another Metal version's build; a phrase: another reading of an answer
            # Metal leaves undefined (porter.emulate.emulator_device.undefined_reading)
            where = (version if isinstance(version, str) else
                     f"under __METAL_VERSION__ {version} (the kernel file's tokens differ there; "
                     "a Mac whose Metal is that version builds them)")
            # a reading's failure (or a reading that could not run) leaves the sample's answer
            # on a Mac unknown: not proven, as the row and the summary say (review 38's L11)
            proven = ("not proven: " if isinstance(version, str)
                      and not where.startswith("not proven") else "")
            if isinstance(other, str):
                return f"{proven}{where}: {other}", reference, device_out
            if record:
                source.record_errors(res, reference, other)
            message = source.compare(sample, reference, other, tolerances, floors, name, brief)
            if message is not None:
                return f"{proven}{where}: {message}", reference, other
    if message is None:
        # a Mac's test compares with a Mac's CPU: where that reference is not this machine's,
        # the kernel is held to both (a row they put farther apart than the tolerance is red)
        mac = source.mac_reference(sample, reference)
        if mac is not None:
            message = source.compare(sample, mac[0], device_out, tolerances, floors, name, brief)
            if message is not None:
                return f"against {mac[1]}: {message}", mac[0], device_out
    if message is None and accepted is not None:
        return None, accepted, device_out
    return message, reference, device_out


class TwoWayNotes:
    """A sample source's notes of the elements its row took two ways (`_unsettled`: torch's
    two CPU loops answer otherwise; `_flushed`: a subnormal input an Apple GPU reads as zero),
    each element once: a comparison that asks another question of a sample already compared
    (the contracted build's answer, the float32 opmath check) runs `unnoted`."""

    _row: DtypeResult | None = None
    _unsettled: list
    _flushed: list

    def _note_two_ways(self) -> None:
        res = self._row
        if self._unsettled and res is not None:     # one note, however many samples record
            from porter.harness.edges import UNSETTLED, unsettled_note
            res.notes = [n for n in res.notes if UNSETTLED not in n] + [unsettled_note(self._unsettled)]
        if self._flushed and res is not None:
            from porter.harness.edges import FLUSHED, flushed_note
            res.notes = [n for n in res.notes if FLUSHED not in n] + [flushed_note(self._flushed)]

    @contextlib.contextmanager
    def unnoted(self):
        kept = self._unsettled, self._flushed
        self._unsettled, self._flushed = [], []
        try:
            yield
        finally:
            self._unsettled, self._flushed = kept
            self._note_two_ways()


def reference_row(source) -> bool:
    """Whether `source` runs porter's reference-input rows (not upstream's samples, nor shapes)."""
    return bool(getattr(source, "reference_inputs", False)) and not getattr(source, "shapes", False)


def settle(res: DtypeResult, start: float, xfail_by) -> DtypeResult:
    """The dtype's outcome from its failed samples and expectations, as upstream's unittest
    decides it (an expected failure that passes is an XPASS)."""
    res.seconds = round(time.perf_counter() - start, 4)
    failed = res.failed_samples > 0
    if xfail_by:
        res.expected_by = xfail_by
        res.outcome = XFAIL if failed else XPASS
    else:
        res.outcome = FAIL if failed else PASS
    return res


def not_run_verdict(name: str, xfail_by, skip_by, cannot_run: str | None, failure: str) -> DtypeResult:
    """A dtype decided without running a sample: an expectation's skip, then porter's own
    cannot-run skip with its reason, else the device's failure, expected or not. A failure
    that is "not proven" overrides the expectations: what porter cannot model may be the
    expectations themselves (review 35's T17, T23: a modifier porter does not read showed its
    listed dtypes as xfail, where a Mac ran and failed them)."""
    if failure.startswith("not proven") and not cannot_run:
        return DtypeResult(name, FAIL, message=failure)
    if skip_by:
        return DtypeResult(name, SKIP, expected_by=skip_by, message="skipped by " + ", ".join(skip_by))
    if cannot_run:
        return DtypeResult(name, SKIP, message=cannot_run)
    if xfail_by:
        return DtypeResult(name, XFAIL, expected_by=xfail_by, message=failure)
    return DtypeResult(name, FAIL, message=failure)


def raise_max(res: DtypeResult, attr: str, value: float) -> None:
    if math.isnan(value):
        value = math.inf
    old = getattr(res, attr)
    setattr(res, attr, value if old is None else max(old, value))


# a shapes row names its layout first (`transposed: RuntimeError: not proven: ...`)
_LAYOUT_NOT_PROVEN = re.compile(r"^([\w ,()-]+): (?:\w+: )?(not proven: .*)$")


def _device_error(device: str, exc: BaseException) -> str:
    """A sample's failure where the device raised: what the device says it cannot tell ("not
    proven: ...", a kernel the emulator cannot build that the Metal front end accepts, a host
    check it does not evaluate) reads as it says, so that the row and the summary count it
    so (review 38's L09, H12); any other error is the device's, with its type."""
    reason = " ".join(str(exc).split())
    if reason.startswith("not proven"):
        return reason if len(reason) <= 300 else reason[:297] + "..."
    layout = _LAYOUT_NOT_PROVEN.match(reason)
    if layout:
        return f"{layout.group(2)[:280]} ({layout.group(1)})"
    return f"{device} error: {one_line(exc)}"


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, AssertionError) else str(exc)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def dtype_name(dtype) -> str:
    """A dtype's name as reports spell it: a torch dtype or a name ("torch.half", "half")."""
    if isinstance(dtype, str):
        return canonical_dtype(dtype.removeprefix("torch."))
    return str(dtype).removeprefix("torch.")


_ORDER = {n: i for i, n in enumerate(MPS_DTYPE_NAMES + ("float64", "complex128", "complex32"))}


def dtype_order(name: str):
    return (_ORDER.get(name, len(_ORDER)), name)

