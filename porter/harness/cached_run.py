"""`porter test --device emulate` from the reference cache: no op database, no torch.

`try_run` answers only when every OpInfo and dtype the run needs is cached under this
environment's key (porter.harness.refcache); otherwise it returns None and the session runs
the op_db way, which records for the next run (porter.harness.opinfo_run.record_for_cache).
A cached run is the op_db run's pipeline (porter.harness.verdicts) with another source of
samples and references, `CachedSource`, on dtype names:

- the dtypes to test: the OpInfo's (recorded), each run against the kernels the checkout's
  `.metal` registers now (built on every run: the kernel is what the author is editing);
- expectations: `common_mps.py` parsed now, plus the OpInfo's DecorateInfos (recorded);
- tolerances: `test_mps.py`'s rules read and run now, plus the recorded floors;
- each sample runs on the emulator (`EmulateBackend.run_portable`) and is compared with the
  recorded CPU reference by `porter.dispatch.numpy_tensors.compare`, upstream's assertEqual
  in numpy.

Anything numpy cannot do (`porter.dispatch.numpy_tensors.Unsupported`) abandons the cached
run for the op_db one.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import SimpleNamespace

from porter.dispatch.numpy_tensors import Unsupported, astype, compare
from porter.harness import mps_expectations as expmod
from porter.harness import refcache, sample_rules, tolerances, two_ways, verdicts
from porter.harness.row_errors import RowErrors
from porter.harness.verdicts import TEST_NAME, OpResult, RecordedFailure


class Miss(Exception):
    pass


@dataclass(frozen=True)
class CachedRun:
    results: list[OpResult]
    expectations: expmod.Expectations
    lists: tolerances.LowPrecisionLists
    db: SimpleNamespace                      # source, torch_version, torch_path (for the header)
    from_reference_cache: bool = True
    macos: tuple[int, int] = expmod.NEWEST_MACOS          # the lists applied (macos=None: newest)
    samples: sample_rules.SampleRules = sample_rules.BUILT_IN   # as the op_db run recorded them


def try_run(opts, checkout, backend, env: str, entries: list[dict]) -> CachedRun | None:
    """The run from the recorded OpInfos `entries` (refcache.recorded_ops), or None when a
    sample or dtype is missing or numpy cannot do what it needs."""
    try:
        return _run(opts, checkout, backend, env, entries)
    except (Miss, Unsupported):
        return None


def _run(opts, checkout, backend, env: str, entries: list[dict]) -> CachedRun:
    exp = expmod.load(checkout) if checkout is not None else expmod.Expectations(None)
    lists = tolerances.load_lists(checkout)
    results = []
    reference, shapes = getattr(opts, "reference_inputs", False), getattr(opts, "shapes", False)
    for data in entries:
        for rec in data["ops"]:
            if rec.get("formula") is not None:
                _same_formula(checkout, rec)
            # opinfo_run.run_op_tests' rows, in its order
            ref_row = reference and rec.get("has_reference", False)
            if not (ref_row and opts.sample is not None):
                results.append(_run_record(rec, env, backend, exp, lists, opts.dtypes, opts.sample))
            if ref_row:
                results.append(_run_record(rec, env, backend, exp, lists, opts.dtypes, opts.sample,
                                           "reference"))
            if shapes and rec.get("has_shapes", False):
                results.append(_run_record(rec, env, backend, exp, lists, opts.dtypes, opts.sample,
                                           "shapes"))
    meta = entries[0]["meta"] if entries else {}
    db = SimpleNamespace(source=meta.get("source", "?"), torch_version=meta.get("torch", "?"),
                         torch_path=meta.get("path", "?"))
    # recordable samples are asked with the built-in keywords, whichever file says them
    return CachedRun(results, exp, lists, db, samples=sample_rules.load(checkout))


def _same_formula(checkout, rec: dict) -> None:
    """A backward op's samples go through its derivative formula: recorded under another one
    (the checkout's tools/autograd/derivatives.yaml edited since), they are not this run's."""
    from porter.harness.backward import current_formula
    if current_formula(checkout, rec["name"]) != rec["formula"]:
        raise Miss(f"{rec['name']}: its derivative formula changed since it was recorded")


def _run_record(rec: dict, env: str, backend, exp, lists, dtypes, only,
                rows: str = "samples") -> OpResult:
    return verdicts.run_op(CachedSource(rec, env, backend, exp, lists, rows), dtypes, only)


class CachedSource(verdicts.TwoWayNotes):
    """One OpInfo record of the reference cache: porter.harness.verdicts.SampleSource. Every
    dtype the MPS test sends is run (a dtype without a kernel fails in the device); the op
    beyond the emulator is skipped, a kernel file that does not build fails every dtype."""

    abandon = (Miss, Unsupported)
    sample_errors = (RecordedFailure,)

    def __init__(self, rec: dict, env: str, backend, exp: expmod.Expectations, lists,
                 rows: str = "samples"):
        from porter.dispatch.kernel_choice import OpNames
        self.rec, self.env, self.backend, self.exp, self.lists = rec, env, backend, exp, lists
        self.rows = rows
        # porter.harness.verdicts.reference_row reads these, as on opinfo_run.OpDbSource
        self.reference_inputs, self.shapes = rows == "reference", rows == "shapes"
        self.device = backend.name
        self.op = OpNames(rec["name"], rec.get("aten_name"), rec["variant"])
        self._exact_rows = None
        self._unsettled: list = []
        self._flushed: list = []
        self._row = None
        self._upcoming: list[str] = []
        self._ahead: dict[str, tuple[dict, list]] = {}      # dtype -> its row, queued early
        self._errors = RowErrors()

    def header(self) -> OpResult:
        rec = self.rec
        result = OpResult(rec["full_name"], rec["name"], rec["variant"], rec["key"], self.device,
                          test=rec.get("test", TEST_NAME), via=rec.get("via"),
                          reference=self.reference_inputs)
        if self.shapes:
            from porter.harness.shapes import SHAPES
            result.shapes = list(SHAPES)
        return result

    def dtypes(self) -> tuple[set[str], set[str]]:
        return set(self.rec["supported"]), set()

    def cannot_run(self) -> str | None:
        return self.backend.skip_reason(self.op)

    def build_error(self) -> str | None:
        return (self.backend.build_error(self.op) or self.lists.unread_verdict()
                or self.exp.unread_verdict(self.rec["name"]))

    def expectations(self, dtype: str):
        """opinfo_run._expectations: the checkout's entries now, the OpInfo's as recorded."""
        rec, xfail, skip = self.rec, [], []
        for entry in self.exp.active(rec["key"], dtype, macos=None):
            (skip if entry.kind == expmod.KIND_SKIP else xfail).append(entry.where)
        # SUPPORTED_COMPLEX_OPS gates test_output_match alone (opinfo_run._expectations)
        if rec.get("test", TEST_NAME) == TEST_NAME and self.exp.complex_xfail(rec["key"], dtype):
            xfail.append(f"SUPPORTED_COMPLEX_OPS lacks {rec['key']!r}")
        recorded = rec["decorators"].get(dtype)
        if recorded is None:
            raise Miss(f"{rec['full_name']} {dtype}")
        dec_xfail, dec_skip, floors = recorded
        return xfail + dec_xfail, skip + dec_skip, tuple(floors)

    def reported_tolerances(self, dtype: str):
        # the checkout's rules, as the op_db run applies them (a stand-in torch: no import)
        return self.lists.named(*self._tolerance_names(), dtype)

    def _tolerance_names(self) -> tuple[str, str]:
        """The OpInfo whose tolerances apply: a backward op takes its forward op's."""
        rec = self.rec
        return rec.get("tolerance_name", rec["name"]), rec.get("tolerance_variant", rec["variant"])

    def upcoming(self, dtypes: list[str]) -> None:
        """The dtypes whose samples the verdict will ask for, in its order (verdicts.run_op):
        each row's kernel calls are queued while the row before it is compared."""
        self._upcoming = list(dtypes)

    def samples(self, dtype: str):
        meta, samples = self._ahead.pop(dtype, None) or self._loaded(dtype)
        self._exact_rows = None
        # the values this CPU answers two ways, found generating the edge samples
        self._unsettled = [(tuple(x) if isinstance(x, list) else x, a, b)
                           for x, a, b in meta.get("unsettled", [])]
        self._flushed = []
        later = self._upcoming[self._upcoming.index(dtype) + 1:] if dtype in self._upcoming else []
        if later and later[0] not in self._ahead:
            try:
                self._ahead[later[0]] = self._loaded(later[0], append=True)
            except Miss:
                pass             # the row itself says so when the verdict asks for it
        return self._replay(samples, meta["error"])

    def _loaded(self, dtype: str, append: bool = False) -> tuple[dict, list]:
        """A row's record and samples, its kernel calls sent to the emulator's worker in a few
        round trips, not one each (`append`: behind the row being compared)."""
        loaded = refcache.load_row(self.env, self.rec["full_name"], dtype, self.rows)
        if loaded is None:
            raise Miss(f"{self.rec['full_name']} {dtype} {self.rows}")
        meta, samples = loaded
        prefetch = getattr(self.backend, "prefetch", None)
        if prefetch is not None and samples:
            prefetch(self.op, samples, append=append)
        return meta, samples

    @staticmethod
    def _replay(samples: list, error: str | None):
        yield from samples
        if error:                  # sample generation broke after these, when recorded
            raise RecordedFailure(error)

    def sample_error(self, exc: BaseException) -> str:
        return str(exc)

    @staticmethod
    def flushed_answer(sample, reference):
        """OpDbSource.flushed_answer, as the recording run computed it."""
        return (getattr(sample, "extra", None) or {}).get("flushed")

    def tolerances(self, sample: refcache.Sample, dtype: str):
        try:
            return self.lists.named(*self._tolerance_names(), dtype, sample)
        except Exception as exc:  # a rule reading the sample's tensors: run them as torch ones
            raise Unsupported(f"the checkout's tolerance rules on a cached sample: {exc}") from exc

    def tolerance_error(self, exc: BaseException) -> str:     # `tolerances` abandons instead
        return f"{self.lists.source} raised deciding the tolerances: {verdicts.one_line(exc)}"

    def quiet(self):
        return contextlib.nullcontext()

    def run(self, sample: refcache.Sample, dtype: str):
        if not self.shapes:
            return self.backend.run_portable(self.op, sample)
        try:                      # OpDbSource.run on a layout sample
            return self.backend.run_portable(self.op, sample)
        except self.abandon:
            raise
        except Exception as exc:
            raise RuntimeError(f"{sample.name}: {verdicts.one_line(exc)}") from None

    def other_versions(self) -> list:
        found = getattr(self.backend, "other_version_outputs", None)
        return found() if found is not None else []

    def contracted(self):
        found = getattr(self.backend, "contracted_outputs", None)
        return found() if found is not None else None

    def reference(self, sample: refcache.Sample, device_out):
        refused = (sample.extra or {}).get("refused")
        if refused is not None:      # porter's sample the CPU refuses: verdicts leaves it out
            raise _Refused(refused)
        if sample.ref_error:
            raise RecordedFailure(sample.ref_error)
        if self.reference_inputs:
            # recorded as the op_db run holds the device to it: cast, and to the exact value
            changed = sample.extra.get("exact_rows")
            if changed is not None:
                self._exact_rows = (self._exact_rows or 0) + changed
            return sample.ref
        # the wider reference goes back to the op's own output dtype (the meta function's),
        # not the device's answer: a float32 answer for a half op still fails the exact-dtype check
        return astype(sample.ref, _cast_target(sample, device_out)) if sample.ref_cast else sample.ref

    def mac_reference(self, sample: refcache.Sample, reference):
        if self.reference_inputs:        # held to the exact value instead (mac_cpu_reference)
            return None
        # the recording run wrote down the reference dtypes a Mac's CPU computes otherwise
        # (mac_cpu_reference.departs, under the cache's key): for every other one, this
        # machine's reference is the Mac's and there is nothing to ask
        departs = self.rec.get("mac_cpu")
        if departs is not None and getattr(reference, "dtype", None) not in departs:
            return None
        from porter.harness import mac_cpu_reference
        return mac_cpu_reference.for_arrays(self.rec["name"], sample.input, reference)

    def wide_reference(self, sample: refcache.Sample):
        # porter's reference inputs: the float64 value the op_db run computed, recorded
        if not self.reference_inputs:
            return None
        return sample.extra.get("wide")

    def record_errors(self, res, reference, device_out) -> None:
        self._errors.add(res, reference, device_out)
        if not self.reference_inputs:
            return
        # OpDbSource.record_errors' notes, from what the recording run found
        from porter.harness import edges
        if self._exact_rows is not None:
            from porter.harness.mac_cpu_reference import exact_note
            res.notes = [exact_note(self.rec["name"], self._exact_rows)]
        if not res.notes and not self.rec.get("elementwise", True):
            res.notes = [edges.NO_EDGES]
        self._row = res
        self._note_two_ways()

    def row_done(self, res) -> None:
        self._errors.done(res)

    def compare(self, sample, reference, device_out, tolerances, floors, dtype: str,
                brief: bool = False) -> str | None:
        if self.rec["name"] == "kthvalue":
            raise Unsupported("kthvalue's index check")
        atol, rtol = tolerances
        self.accepted_reference = None      # the reference a pass settled on (verdicts._held)
        if not self.shapes:
            # an edge value torch's CPU answers two ways: either answer passes (edges.either)
            reference = two_ways.either(sample, reference, device_out, atol, rtol)
        message = compare(reference, device_out, atol, rtol, floors, brief)
        if message is not None and self.reference_inputs:
            # edges.either_per_element on the scalar loop's answers the recording run computed
            before = len(self._unsettled), len(self._flushed)
            reference = two_ways.either_per_element(self.rec.get("elementwise", True), sample,
                                                    reference, device_out, atol, rtol, self._unsettled,
                                                    self.rec.get("callable"))
            # edges.either_flushed on the answer the recording run computed on the flushed inputs
            reference = two_ways.either_flushed(sample, reference, device_out, atol, rtol,
                                                self._flushed)
            if (len(self._unsettled), len(self._flushed)) != before:
                self._note_two_ways()
                message = compare(reference, device_out, atol, rtol, floors, brief)
        if message is None:
            self.accepted_reference = reference     # with the values it took two ways
            return None
        where = f"{sample.name}: " if self.shapes else ""
        return where + verdicts.one_line(AssertionError(message))


class _Refused(AssertionError):
    """A recorded CPU refusal, in verdicts.one_line's words already (which shows an
    AssertionError's text as it is)."""


def _cast_target(sample: refcache.Sample, dev_out) -> str:
    return sample.out_dtype or dev_out.dtype
