"""The op_db run of `porter test`: samples generated from op_db now, CPU references computed
now, compared by upstream's `TestCase.assertEqual` (torch), through the one verdict pipeline
(porter.harness.verdicts; the cached run, porter.harness.cached_run, is the other source).

Mirrors upstream's `TestConsistency.test_output_match`: every sample input (generated on the
CPU with the keywords of the checkout test's `sample_inputs` call, porter.harness.sample_rules),
run on the device and on a CPU copy; half/bfloat16 reference in float32 when the CPU has no
kernel, cast back to the op's own output dtype; compared by `TestCase.assertEqual` (NaN equal,
exact dtype) with the checkout's tolerance rules (porter.harness.tolerances) per sample and the
OpInfo's tolerance overrides as floors.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import re
import unittest
import warnings
from dataclasses import dataclass
from pathlib import Path

from porter.dispatch.kernel_choice import OpNames, to_device
from porter.errors import PorterError
from porter.harness import mps_expectations as expmod
from porter.harness import opdb, sample_rules, tolerances, verdicts
from porter.harness.devices import get_backend, mps_dtypes
from porter.harness.verdicts import SKIP, TEST_NAME, XFAIL, DtypeResult, OpResult, dtype_name, raise_max

TEST_CLASS = "TestConsistency"
GRAD_TEST_NAME = "test_output_grad_match"


@dataclass
class RunContext:
    """What one run needs besides the op: read once, shared by every op of the run."""

    root: Path | None
    backend: object
    expectations: expmod.Expectations
    lists: tolerances.LowPrecisionLists
    db: opdb.OpDb
    macos: tuple[int, int] | None = None
    samples: sample_rules.SampleRules = sample_rules.BUILT_IN
    grad_expectations: expmod.Expectations | None = None     # read on first --grad use


def make_context(root, backend, checkout=None, macos: tuple[int, int] | None = None) -> RunContext:
    """`macos`: the version whose gated lists apply; default this Mac's on --device mps,
    else the newest (expectations.NEWEST_MACOS)."""
    from porter.source.checkout import Checkout
    if checkout is None and root is not None:
        checkout = Checkout.at(root)
    mps_like = getattr(backend, "mps_expectations", False)
    exp = expmod.load(checkout) if (checkout is not None and mps_like) else expmod.Expectations(None)
    lists = tolerances.load_lists(checkout)
    db = opdb.load(Path(root) if root is not None else None)
    if macos is None:
        macos = (_macos_version() if getattr(backend, "name", "") == "mps" else None) \
            or expmod.NEWEST_MACOS
    return RunContext(Path(root) if root is not None else None, backend, exp, lists, db,
                      macos, sample_rules.load(checkout))


def run_op_tests(op: str, root=None, backend="cpu", dtypes=None, sample: int | None = None,
                 ctx: RunContext | None = None, grad: bool = False,
                 reference_inputs: bool = False, shapes: bool = False) -> list[OpResult]:
    """Test every OpInfo named `op`. `backend`: a Backend or a registered name;
    `dtypes`: names or torch dtypes to restrict to; `sample`: run only that sample index;
    `grad`: compare gradients too (upstream's test_output_grad_match); `reference_inputs`:
    also a result per OpInfo over its reference_inputs (±0.0, ±inf, nan, subnormals, large
    magnitudes), after the upstream one; `shapes`: also one over porter.harness.shapes'
    layouts (transposed, sliced, broadcast, 0-dim, empty, large)."""
    if isinstance(backend, str):
        backend = get_backend(backend, root)
    if ctx is None:
        ctx = make_context(root, backend)
    results = []
    for info in test_infos(op, ctx, grad):
        reference = reference_inputs and hasattr(info, "reference_inputs")
        # `--reference-inputs --sample N` (the repro of a failing reference sample): N counts
        # the reference inputs, which the plain run has fewer of
        if not (reference and sample is not None):
            results.append(run_opinfo(info, ctx, dtypes=dtypes, sample=sample))
        if reference:
            results.append(run_opinfo(info, ctx, dtypes=dtypes, sample=sample, reference=True))
        if shapes and has_shapes(info):
            results.append(run_opinfo(info, ctx, dtypes=dtypes, sample=sample, shapes=True))
    return results


def has_shapes(info) -> bool:
    """Whether `info` gets a shapes row: every OpInfo, and a backward op's stand-in (its
    kernel's layouts are as much in question as a forward op's: grad and self are its
    operands), but not --grad's comparison of gradients, which has no kernel of its own."""
    return getattr(info, "compare", None) is None


def test_infos(op: str, ctx: RunContext, grad: bool = False) -> list:
    """What `porter test op` runs: the OpInfos named `op`; for a backward op (no OpInfo of its
    own), the forward op's samples fed through its derivative formula; with `grad`, the
    forward op's gradients (on a device with autograd) or its backward ops (emulate)."""
    from porter.harness import backward
    from porter.source.checkout import Checkout
    checkout = Checkout.at(ctx.root) if ctx.root is not None else None
    if not grad:
        try:
            return opdb.find(ctx.db, op)
        except PorterError:
            infos = backward.backward_infos(checkout, ctx.db, op)
            if infos is None:
                raise
            return infos
    infos = opdb.find(ctx.db, op)
    if getattr(ctx.backend, "name", "") != "emulate":
        mps_like = getattr(ctx.backend, "device_type", "") == "mps"
        return [backward.GradOpInfo(info, mps_like) for info in infos]
    # The emulator has no autograd: it tests the backward kernels the formulas call.
    names = backward.backward_ops_of(checkout, infos[0].aten_name or infos[0].name)
    found = [b for name in names for b in (backward.backward_infos(checkout, ctx.db, name) or [])]
    if not found:
        raise PorterError(f"--grad --device emulate: the derivative formula of {op} calls no "
                          "*_backward op, so there is no backward kernel to emulate",
                          hint="run --grad on a device with autograd (mps, cuda)")
    return found


def run_opinfo(info, ctx: RunContext, dtypes=None, sample: int | None = None,
               reference: bool = False, shapes: bool = False) -> OpResult:
    return verdicts.run_op(OpDbSource(info, ctx, reference, shapes), dtypes, sample)


class OpDbSource(verdicts.TwoWayNotes):
    """One OpInfo of op_db on the run's device: porter.harness.verdicts.SampleSource."""

    abandon = ()
    sample_errors = (Exception,)

    def __init__(self, info, ctx: RunContext, reference: bool = False, shapes: bool = False):
        self.info, self.ctx, self.reference_inputs, self.shapes = info, ctx, reference, shapes
        self.backend = ctx.backend
        self.device = self.backend.name
        self.device_type = getattr(self.backend, "device_type", self.backend.name)
        self._dtypes: dict = {}          # name -> torch dtype
        self._exact_rows = None          # reference inputs held to the exact value: rows a Mac is off
        self._unsettled: list = []       # edge values this CPU answers two ways (edges._two_ways)
        self._flushed: list = []         # elements right on the zero an Apple GPU reads (edges.either_flushed)

    def header(self) -> OpResult:
        info = self.info
        result = OpResult(info.full_name, info.name, info.variant_test_name, opdb.xfail_key(info),
                          self.device, test=getattr(info, "test_name", TEST_NAME),
                          via=getattr(info, "via", None), reference=self.reference_inputs)
        if self.shapes:
            from porter.harness.shapes import SHAPES
            result.shapes = list(SHAPES)
        return result

    def dtypes(self) -> tuple[set[str], set[str]]:
        supported, no_kernel = _tested_dtypes(self.info, self.backend, self.device_type)
        self._dtypes = {dtype_name(d): d for d in supported | no_kernel}
        return {dtype_name(d) for d in supported}, {dtype_name(d) for d in no_kernel}

    def cannot_run(self) -> str | None:
        return _backend_says(self.backend, "skip_reason", OpNames.of(self.info))

    def build_error(self) -> str | None:
        return (_backend_says(self.backend, "build_error", OpNames.of(self.info))
                or self.ctx.lists.unread_verdict() or self.ctx.expectations.unread_verdict(self.info.name))

    def expectations(self, name: str):
        return _expectations(self.info, self._dtypes[name], self.ctx, self.device_type)

    def reported_tolerances(self, name: str):
        return self.ctx.lists.tolerances(self.info, self._dtypes[name], self.ctx.macos)

    def samples(self, name: str):
        self._exact_rows = None
        self._unsettled = []
        self._flushed = []
        return generate_samples(self.info, self._dtypes[name], self.ctx.samples,
                                self.reference_inputs, self.shapes, self._unsettled)

    def flushed_answer(self, sample, reference):
        """The CPU's answer on the sample's inputs as an Apple GPU reads them (None where no
        input has a float32/bfloat16 subnormal): lost precision excuses a device giving it."""
        from porter.harness import edges
        if self.device not in edges.FLUSHING_DEVICES or not edges.is_elementwise(self.info):
            return None
        with self.quiet():
            return edges.flushed_reference(self.info, sample, reference)

    def sample_error(self, exc: BaseException) -> str:
        return f"sample inputs failed: {verdicts.one_line(exc)}"

    def tolerances(self, sample, name: str):
        dtype, ctx = self._dtypes[name], self.ctx
        atol, rtol = ctx.lists.for_sample(self.info, dtype, sample, ctx.macos)
        # --grad: output and gradients apart
        gradients = ctx.lists.gradient_tolerances(self.info, dtype, sample, ctx.macos) \
            if getattr(self.info, "compare", None) is not None else None
        return atol, rtol, gradients

    def tolerance_error(self, exc: BaseException) -> str:
        return f"{self.ctx.lists.source} raised deciding the tolerances: {verdicts.one_line(exc)}"

    @contextlib.contextmanager
    def quiet(self):
        """The device run and the reference, without torch's UserWarnings."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning)
            yield

    def run(self, sample, name: str):
        # a --shapes sample reaches the kernel as it is: a copy would make its views contiguous
        if getattr(sample, "keeps_layout", False):
            try:
                return self.backend.run(self.info, sample, self._dtypes[name])
            except Exception as exc:
                raise RuntimeError(f"{sample.name}: {verdicts.one_line(exc)}") from None
        return self.backend.run(self.info, to_device(sample, "cpu"), self._dtypes[name])

    def other_versions(self) -> list:
        found = getattr(self.backend, "other_version_outputs", None)
        return found() if found is not None else []

    def contracted(self):
        found = getattr(self.backend, "contracted_outputs", None)
        return found() if found is not None else None

    def reference(self, sample, device_out):
        from porter.harness import edges, mac_cpu_reference
        # porter's edge values of a plain OpInfo: torch's loops, as on a Mac (no oneDNN)
        with edges.without_onednn() if getattr(sample, edges.MAC_LOOPS, False) \
                else contextlib.nullcontext():
            local = _reference(self.info, sample, device_out)
        reference, changed = mac_cpu_reference.exact_reference(
            self.info.name, sample.input, local, self.reference_inputs)
        if changed is not None:
            self._exact_rows = (self._exact_rows or 0) + changed
        return reference

    def mac_reference(self, sample, reference):
        from porter.harness import mac_cpu_reference
        return mac_cpu_reference.for_torch(self.info.name, sample.input, reference,
                                           self.reference_inputs)

    def wide_reference(self, sample):
        # porter's reference inputs only: upstream's test never sends them (no Mac has judged
        # them); the reference cache records these values (_reference_extras)
        if not self.reference_inputs or self.shapes:
            return None
        with self.quiet():
            return float64_reference(self.info, sample)

    def opmath_note(self, sample, device_out, tolerances, floors, name: str) -> str | None:
        """Where a float16/bfloat16 row fails: whether the kernel answers the op computed in
        float32 and rounded once (porter.harness.opmath), the note that says a Mac is red too."""
        from porter.harness import opmath
        with self.quiet():
            wide = opmath.float32_reference(self.info, sample, name)
        if wide is None:
            return None
        # a question about the kernel, not a comparison of the row: the elements it takes two
        # ways are the row's already (counting them again doubled a bfloat16 row's note)
        with self.unnoted():
            differs = self.compare(sample, wide, device_out, tolerances, floors, name) is not None
        return None if differs else opmath.note(name)

    def record_errors(self, res: DtypeResult, reference, device_out) -> None:
        _update_errors(res, reference, device_out)
        if self._exact_rows is not None:
            from porter.harness.mac_cpu_reference import exact_note
            res.notes = [exact_note(self.info.name, self._exact_rows)]
        if self.reference_inputs and not res.notes:
            from porter.harness import edges
            if not edges.is_elementwise(self.info):
                res.notes = [edges.NO_EDGES]
        self._row = res          # compare() adds the values it accepted two ways to its notes
        self._note_two_ways()

    def compare(self, sample, reference, device_out, tolerances, floors, name: str,
                brief: bool = False) -> str | None:       # torch's message comes with its check
        atol, rtol, gradients = tolerances
        tc = _comparer(*floors)
        compare = getattr(self.info, "compare", None)
        self.accepted_reference = None      # the reference a pass settled on (verdicts._held)
        try:
            if compare is not None:
                compare(tc, reference, device_out, atol, rtol, name, gradients)
            elif self.info.name == "kthvalue":
                _check_kthvalue(tc, sample, reference, device_out, atol, rtol)
            else:
                from porter.harness import edges
                # an edge value torch's CPU answers two ways: either answer passes
                reference = edges.either(sample, reference, device_out, atol, rtol)
                try:
                    tc.assertEqual(reference, device_out, atol=atol, rtol=rtol)
                except AssertionError:
                    if not self.reference_inputs or self.shapes:
                        raise
                    # porter's reference inputs: a value the vectorized loop of a large tensor
                    # answers otherwise than the scalar loop passes with either
                    before = len(self._unsettled), len(self._flushed)
                    reference = edges.either_per_element(
                        self.info, sample, reference, device_out, atol, rtol, self._unsettled,
                        getattr(sample, edges.MAC_LOOPS, False))
                    # an input an Apple GPU reads as zero: the answer on that zero passes too
                    if self.device in edges.FLUSHING_DEVICES:
                        reference = edges.either_flushed(self.info, sample, reference, device_out,
                                                         atol, rtol, self._flushed)
                    if (len(self._unsettled), len(self._flushed)) == before:
                        raise
                    self._note_two_ways()
                    tc.assertEqual(reference, device_out, atol=atol, rtol=rtol)
                # with the values it took two ways (the answer on a flushed input): the
                # lost-precision rule judges the device against these, not the CPU's first answer
                self.accepted_reference = reference
        except AssertionError as exc:
            where = f"{sample.name}: " if getattr(sample, "keeps_layout", False) else ""
            return where + verdicts.one_line(exc)
        return None


def _backend_says(backend, question: str, op: OpNames) -> str | None:
    ask = getattr(backend, question, None)      # a torch device has neither question
    return ask(op) if ask is not None else None


def _tested_dtypes(info, backend, device_type: str) -> tuple[set, set]:
    """(dtypes to run, dtypes the device test sends but the backend has no kernel for)."""
    supported = set(info.supported_dtypes(device_type))
    if device_type == "mps":          # no float64 / complex128 on the device
        supported &= mps_dtypes()
    extra = backend.supported_dtypes(info)
    if extra is None:
        return supported, set()
    return supported & set(extra), supported - set(extra)


def generate_samples(info, dtype, rules: sample_rules.SampleRules = sample_rules.BUILT_IN,
                     reference: bool = False, shapes: bool = False, unsettled: list | None = None):
    """The sample inputs upstream's test sends for `dtype`, asked with `rules`' keywords (the
    reference cache records these); `reference`: the OpInfo's reference_inputs instead;
    `shapes`: porter.harness.shapes' layouts, built on the first upstream sample;
    `unsettled` collects the edge values this CPU answers two ways (edges._two_ways).

    A plain function, never a generator: each branch returns its iterable (a `yield` here
    would turn the shapes branch's `return shape_samples(...)` into an empty iteration)."""
    kwargs = rules.kwargs(info, dtype)
    if shapes:
        from porter.harness.shapes import shape_samples
        first = next(iter(info.sample_inputs("cpu", dtype, **kwargs)), None)
        return shape_samples(first, dtype, getattr(info, "operands_bound", False))
    if reference:
        return _reference_and_edge_samples(info, dtype, kwargs, unsettled)
    return info.sample_inputs("cpu", dtype, **kwargs)


def _reference_and_edge_samples(info, dtype, kwargs, unsettled=None):
    """The OpInfo's reference_inputs, then the dtype's limits, which they do not reach.

    Asked for on "cpu", an OpInfo's reference_inputs may pair the tested dtype with float64 or
    complex128 operands (addcmul's type promotion cases, from its CPU dtypes): no such tensor
    exists on MPS (a Mac fails its move to the device, before any kernel), so those samples are
    not sent; every other one is. A generator that refuses `requires_grad` runs without it."""
    from porter.harness import edges
    try:
        samples = list(info.reference_inputs("cpu", dtype, **kwargs))
    except ValueError as err:
        if not kwargs.get("requires_grad") or "requires_grad" not in str(err):
            raise
        # upstream's ternary generator makes an int64 operand with the sample's requires_grad
        # (its int x float promotion case), which torch refuses; the forward result the test
        # compares does not depend on it
        samples = list(info.reference_inputs("cpu", dtype, **{**kwargs, "requires_grad": False}))
    # the edge samples first, yielded last: `unsettled` is filled before any sample runs, so
    # its note reaches the dtype's row even when every edge sample was left out
    edge = edges.edge_samples(info, dtype, info.sample_inputs("cpu", dtype, **kwargs), unsettled)
    yield from (s for s in samples if not _holds_double(s))
    yield from edge


def _holds_double(sample) -> bool:
    """Whether a tensor of the sample is float64 or complex128, dtypes MPS has not."""
    import torch
    tensors = [sample.input, *sample.args, *sample.kwargs.values()]
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.float64, torch.complex128)
               for t in tensors)


def _reference(info, sample, dev_out):
    """CPU result on a copy of the sample. Where the CPU has no kernel for the dtype, the
    reference is computed wider and cast back: half/bfloat16 (and bool, as upstream's code
    ends up doing) in float32; complex32 in complex64 (a porter addition, for CUDA)."""
    import torch
    out, cast = reference_uncast(info, sample, device_out_is_tensor=isinstance(dev_out, torch.Tensor))
    if not cast:
        return out
    # Cast back to what the op gives for the sample's own dtype (its meta function says),
    # never to whatever the device returned: a device returning float32 for ceil on bool
    # must still fail the exact-dtype check, as upstream's does.
    target = _meta_dtype(info, sample) or getattr(sample.input, "dtype", None)
    return out.to(dtype=target) if isinstance(out, torch.Tensor) else out


def reference_uncast(info, sample, device_out_is_tensor: bool = True):
    """(CPU result, whether it was computed wider and still needs the cast to the device
    output's dtype). The reference cache stores this and casts when the kernel has run."""
    import torch
    wider = {torch.float16: torch.float32, torch.bfloat16: torch.float32,
             torch.bool: torch.float32, torch.complex32: torch.complex64}
    in_dtype = getattr(sample.input, "dtype", None)
    upcast = info.name in ("grid_sampler_2d", "grid_sampler_3d") and \
        in_dtype in (torch.float16, torch.bfloat16)
    if not upcast:
        try:
            return _call(info, to_device(sample, "cpu")), False
        except (NotImplementedError, RuntimeError) as exc:
            if isinstance(exc, RuntimeError) and "not implemented for" not in str(exc):
                raise
            if not device_out_is_tensor or in_dtype not in wider:
                raise
    wide = to_device(sample, "cpu").transform(
        lambda t: t.to(wider[t.dtype]) if isinstance(t, torch.Tensor) and t.dtype in wider else t)
    return _call(info, wide), True


def float64_reference(info, sample):
    """The op on the sample's inputs widened to float64 (floating and integer tensors; bools
    stay), on this CPU: what a float16/float32 answer is judged against in the mismatch table.
    None where the op refuses them or answers other than one float64 tensor."""
    import torch
    narrow = (torch.float16, torch.bfloat16, torch.float32)

    def widen(t):
        if isinstance(t, torch.Tensor) and t.dtype != torch.bool and not t.dtype.is_complex \
                and (t.dtype in narrow or not t.dtype.is_floating_point):
            return t.to(torch.float64)
        return t
    try:
        out = _call(info, to_device(sample, "cpu").transform(widen))
    except Exception:            # an op that takes integer indices, or no float64: no column
        return None
    return out if isinstance(out, torch.Tensor) and out.dtype == torch.float64 else None


def _meta_dtype(info, sample):
    import torch
    try:
        out = _call(info, to_device(sample, "meta"))
    except Exception:
        return None
    return out.dtype if isinstance(out, torch.Tensor) else None


def _call(info, sample):
    return info(sample.input, *sample.args, **sample.kwargs)


def _check_kthvalue(tc, sample, cpu_out, dev_out, atol, rtol):
    import torch
    tc.assertEqual(cpu_out[0], dev_out[0], atol=atol, rtol=rtol)
    # indices are ambiguous for repeated values: check they point at the values
    dim = sample.args[1] if len(sample.args) > 1 else -1
    keep = sample.args[2] if len(sample.args) > 2 else False
    idx = dev_out[1] if keep else dev_out[1].unsqueeze(dim)
    values = torch.gather(sample.input, dim, idx)
    tc.assertEqual(values if keep else values.squeeze(dim), dev_out[0])


_COMPARER: dict = {}


def _comparer(precision: float, rel_tol: float):
    """A TestCase whose `precision` / `rel_tol` act as tolerance floors, as upstream."""
    tc = _COMPARER.get("tc")
    if tc is None:
        from torch.testing._internal.common_utils import TestCase

        class _Compare(TestCase):
            def runTest(self):
                pass
        tc = _COMPARER["tc"] = _Compare()
    tc.precision, tc.rel_tol = precision, rel_tol
    return tc


def _expectations(info, dtype, ctx: RunContext, device_type: str):
    """(xfail sources, skip sources, (precision, rel_tol) floors) for one op and dtype."""
    xfail, skip = [], []
    name = dtype_name(dtype)
    key = opdb.xfail_key(info)
    mps_like = getattr(ctx.backend, "mps_expectations", False)
    test_name = getattr(info, "test_name", TEST_NAME)
    if mps_like:
        # test_output_grad_match has lists of its own (mps_ops_grad_modifier)
        expected = _grad_expectations(ctx) if test_name == GRAD_TEST_NAME else ctx.expectations
        for entry in expected.active(key, name, macos=ctx.macos):
            (skip if entry.kind == expmod.KIND_SKIP else xfail).append(entry.where)
        if test_name == TEST_NAME and ctx.expectations.complex_xfail(key, name):
            xfail.append(f"SUPPORTED_COMPLEX_OPS lacks {key!r}")
    dec_xfail, dec_skip, floors = decorator_expectations(info, dtype, device_type, mps_like)
    return xfail + dec_xfail, skip + dec_skip, floors


def decorator_expectations(info, dtype, device_type: str, mps_like: bool):
    """(xfail sources, skip sources, (precision, rel_tol) floors) from the OpInfo's own
    decorators: the part of `_expectations` the reference cache records with the samples."""
    xfail, skip = [], []
    precision, rel_tol = 0.0, 0.0
    test_name = getattr(info, "test_name", TEST_NAME)
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    for index, info_dec in enumerate(info.decorators or ()):
        # a bare decorator (no DecorateInfo) applies to every test of the op
        decs = info_dec.decorators if hasattr(info_dec, "is_active") else [info_dec]
        if hasattr(info_dec, "is_active") and not _is_active(info_dec, device_type, dtype, test_name):
            continue
        for dec in decs:
            if isinstance(dec, toleranceOverride):
                if dtype in dec.d:
                    precision, rel_tol = dec.d[dtype].atol, dec.d[dtype].rtol
            elif isinstance(dec, precisionOverride):
                precision = dec.d.get(dtype, precision)
            elif mps_like:
                kind = _decorator_kind(dec)
                where = f"OpInfo DecorateInfo #{index} ({getattr(info_dec, 'cls_name', None)}, " \
                        f"{getattr(info_dec, 'test_name', None)})"
                if kind == XFAIL:
                    xfail.append(where)
                elif kind == SKIP:
                    skip.append(where)
    return xfail, skip, (precision, rel_tol)


def _is_active(info_dec, device_type, dtype, test_name: str = TEST_NAME) -> bool:
    try:
        return bool(info_dec.is_active(TEST_CLASS, test_name, device_type, dtype, {}))
    except TypeError:   # older torch: no param_kwargs
        return bool(info_dec.is_active(TEST_CLASS, test_name, device_type, dtype))


def _grad_expectations(ctx: RunContext) -> expmod.Expectations:
    if ctx.grad_expectations is None:
        from porter.source.checkout import Checkout
        ctx.grad_expectations = (expmod.load_grad(Checkout.at(ctx.root)) if ctx.root is not None
                                 else expmod.Expectations(None))
    return ctx.grad_expectations


# Device words in a decorator's name (skipCPUIfNoLapack, skipCUDAIfRocm, skipXPU,
# expectedFailureMeta): such a decorator acts on that device's tests only.
_DEVICE_WORD = re.compile(r"(?i)(mps|cpu|cuda|xpu|rocm|meta|lazy|hpu|mtia|xla|magma|cusolver|"
                          r"lapack|mkl|fft)")


def _decorator_kind(dec) -> str | None:
    """XFAIL or SKIP when `dec` acts on an MPS run of test_output_match, else None.

    Only a decorator that names no device (unittest.expectedFailure, unittest.skip(...)) or
    names MPS applies: a device's decorator (skipCPUIfNoLapack, skipCUDAIfRocm, skipXPU)
    skips that device's tests only, and a conditional one (skipIfRocm, skipIfTorchDynamo)
    is off on an MPS run, as upstream runs it. onlyCPU / onlyCUDA keep the test off MPS."""
    if dec is unittest.expectedFailure:
        return XFAIL
    device = getattr(dec, "device_type", None)
    if isinstance(device, str) and device != "mps":
        return None
    label = getattr(dec, "__qualname__", None) or type(dec).__name__
    words = {w.lower() for w in _DEVICE_WORD.findall(label)}
    if label == "slowTest":             # upstream runs it only with PYTORCH_TEST_WITH_SLOW=1
        from torch.testing._internal.common_utils import TEST_WITH_SLOW
        return None if TEST_WITH_SLOW else SKIP
    if label.startswith("only") and label != "onlyNativeDeviceTypes":
        return None if "mps" in words else SKIP        # onlyCPU, onlyCUDA: not run on MPS
    if words and "mps" not in words:
        return None
    low = label.lower()
    if "expectedfailure" in low:
        return XFAIL
    if dec is unittest.skip or low.startswith("skip.<locals>") or (
            low.startswith("skip") and "mps" in words):
        dep = getattr(dec, "dep", True)   # common_device_type.skipIf-style classes
        return SKIP if (dep if isinstance(dep, bool) else True) else None
    return None


def _update_errors(res: DtypeResult, expected, actual) -> None:
    import torch
    from torch.utils import _pytree as pytree
    exp_leaves, act_leaves = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
    if len(exp_leaves) != len(act_leaves):
        return
    for e, a in zip(exp_leaves, act_leaves):
        if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)):
            continue
        if e.shape != a.shape or e.numel() == 0 or e.layout != torch.strided:
            continue
        wide = torch.complex128 if (e.is_complex() or a.is_complex()) else torch.float64
        e64, a64 = e.detach().to(wide), a.detach().to(wide)
        same = (e64 == a64) | (torch.isnan(e64) & torch.isnan(a64))
        diff = (a64 - e64).abs().masked_fill(same, 0)
        rel = (diff / e64.abs()).masked_fill(same, 0)
        raise_max(res, "max_abs", float(diff.max()))
        raise_max(res, "max_rel", float(rel.max()))


def _macos_version() -> tuple[int, int] | None:
    import platform
    ver = platform.mac_ver()[0]
    if not ver:
        return None
    parts = (ver.split(".") + ["0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return None


# ----------------------------------------------------------------- the record for the cached run

def _source_sha(info) -> str:
    try:
        return hashlib.sha256(inspect.getsource(info.sample_inputs_func).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return "?"


def _record_dtype(env: str, info, dtype) -> None:
    """Samples and references of one OpInfo and dtype (raises Unsupported)."""
    import torch

    from porter.dispatch import kernel_choice
    from porter.dispatch.numpy_tensors import Unsupported
    from porter.harness import refcache
    enc = refcache.Encoder()
    samples, error = [], None
    try:
        for i, sample in enumerate(generate_samples(info, dtype)):
            item = {"input": enc.value(sample.input, f"s{i}_input"),
                    "args": [enc.value(a, f"s{i}_arg{j}") for j, a in enumerate(sample.args)],
                    "kwargs": {k: enc.value(v, f"s{i}_kw_{k}") for k, v in sample.kwargs.items()},
                    "promoted": kernel_choice.promotions(sample),
                    "out_dtype": kernel_choice.TorchSample(info, sample).out_dtype(),
                    "ref": None, "ref_cast": False, "ref_error": None}
            try:
                out, cast = reference_uncast(info, sample)
            except Exception as exc:
                item["ref_error"] = f"CPU reference error: {verdicts.one_line(exc)}"
            else:
                if not isinstance(out, torch.Tensor):
                    raise Unsupported("a reference that is not one tensor")
                item["ref"] = enc.value(out, f"s{i}_ref")
                item["ref_cast"] = cast
            samples.append(item)
    except Unsupported:
        raise
    except Exception as exc:          # the op_db run reports it the same way
        error = f"sample inputs failed: {verdicts.one_line(exc)}"
    meta = {"op": info.full_name, "dtype": dtype_name(dtype), "samples": samples,
            "error": error, "sample_source_sha": _source_sha(info)}
    refcache.save_refs(env, info.full_name, dtype_name(dtype), enc.arrays, meta)


# the scalar loop's answers are recorded for every element of a reference-input sample of at
# most this many elements (edges.either_per_element asks for the mismatching ones); a larger
# sample that needs them sends the run the op_db way
SCALAR_RECORD_LIMIT = 4096


def _record_rows(env: str, info, dtype, ctx: RunContext, rows: str) -> None:
    """Porter's rows of one OpInfo and dtype, `rows` "reference" or "shapes" (raises
    Unsupported): each sample as OpDbSource makes it and its reference as OpDbSource computes
    it (edge values without oneDNN, held to the exact value, cast to the op's dtype), and what
    the pipeline asks torch for beside the reference: the float64 value (lost precision, the
    mismatch table), the scalar loop's other answer (edges.either, either_per_element), the rows
    a Mac's CPU is off on (the exact-value note), the two-way values found generating them."""
    import torch

    from porter.dispatch import kernel_choice
    from porter.dispatch.numpy_tensors import Unsupported
    from porter.harness import edges, refcache
    reference, shapes = rows == "reference", rows == "shapes"
    src = OpDbSource(info, ctx, reference, shapes)
    enc = refcache.Encoder()
    unsettled: list = []
    samples, error = [], None
    probe = torch.empty(0)
    try:
        with src.quiet():
            for i, sample in enumerate(generate_samples(info, dtype, sample_rules.BUILT_IN,
                                                        reference, shapes, unsettled)):
                keep = bool(getattr(sample, "keeps_layout", False))
                # as OpDbSource.run sends it: a layout sample as it is, another through
                # to_device's copy (a transposed view stays one, a sliced one is made contiguous)
                sent = sample if keep else to_device(sample, "cpu")
                item = {"input": enc.value(sent.input, f"s{i}_input", True),
                        "args": [enc.value(a, f"s{i}_arg{j}", True) for j, a in enumerate(sent.args)],
                        "kwargs": {k: enc.value(v, f"s{i}_kw_{k}") for k, v in sample.kwargs.items()},
                        "promoted": kernel_choice.promotions(sample),
                        "out_dtype": kernel_choice.TorchSample(info, sample).out_dtype(),
                        "ref": None, "ref_cast": False, "ref_error": None,
                        "name": sample.name if keep else "",
                        "porter_edge": bool(getattr(sample, edges.EDGE, False)), "extra": {}}
                src._exact_rows = None
                try:
                    ref = src.reference(sample, probe)
                except Exception as exc:
                    # porter's own sample (a reference input, a layout): the pipeline leaves it
                    # out, saying why, as the live run does (verdicts._check_sample); recorded
                    # as an error, a rerun read from the cache charged the kernel with it
                    if reference or shapes:
                        item["extra"]["refused"] = verdicts.one_line(exc)
                    else:
                        item["ref_error"] = f"CPU reference error: {verdicts.one_line(exc)}"
                    samples.append(item)
                    continue
                if not isinstance(ref, torch.Tensor):
                    raise Unsupported("a reference that is not one tensor")
                item["ref"] = enc.value(ref.contiguous(), f"s{i}_ref")
                if reference:
                    try:
                        item["extra"].update(_reference_extras(info, sample, ref, src, enc, i))
                    except Unsupported:
                        raise
                    except Exception as exc:
                        # porter's own extras, not the samples: an error here is no error of
                        # the live run, and recorded it would fail every cached run (a false
                        # red); the dtype is left unrecorded instead
                        raise _unsupported(f"a reference input's extras: {verdicts.one_line(exc)}") \
                            from None
                samples.append(item)
    except Unsupported:
        raise
    except Exception as exc:          # the op_db run reports it the same way
        error = f"sample inputs failed: {verdicts.one_line(exc)}"
    meta = {"op": info.full_name, "dtype": dtype_name(dtype), "samples": samples,
            "error": error, "unsettled": unsettled, "rows": rows}
    refcache.save_refs(env, info.full_name, dtype_name(dtype), enc.arrays, meta, rows)


def _reference_extras(info, sample, ref, src: "OpDbSource", enc, i: int) -> dict:
    """What a reference-input row asks torch for beside its reference, recorded."""
    import warnings

    import torch

    from porter.harness import edges
    out: dict = {"exact_rows": src._exact_rows}
    # the float64 value stands beside a floating output only (porter.harness.mismatches,
    # lost_precision): an integer, bool or complex output's would be a third of its record
    wide = src.wide_reference(sample) if ref.dtype.is_floating_point else None
    out["wide"] = enc.value(wide.contiguous(), f"s{i}_wide") if wide is not None else None
    other = getattr(sample, edges.TWO_WAYS, None)
    out["other"] = enc.value(other.to(ref.dtype).contiguous(), f"s{i}_other") \
        if isinstance(other, torch.Tensor) and other.shape == ref.shape else None
    # edges.either_flushed's answer on the inputs as an Apple GPU reads them (any output dtype)
    flushed = edges.flushed_reference(info, sample, ref) \
        if src.device in edges.FLUSHING_DEVICES and edges.is_elementwise(info) else None
    out["flushed"] = enc.value(flushed.contiguous(), f"s{i}_flushed") if flushed is not None else None
    # edges.either_per_element's answer one element at a time, for every element
    out["scalar"] = None
    if not edges.is_elementwise(info) or not ref.dtype.is_floating_point or ref.numel() == 0:
        return out
    broadcast = edges.broadcast_operands(sample, ref.shape)
    if broadcast is None:
        out["scalar"] = "no broadcast"
        return out
    operands, positions = broadcast
    mac_loops = getattr(sample, edges.MAC_LOOPS, False)
    if ref.numel() > SCALAR_RECORD_LIMIT:
        out["scalar"] = "too large"
        out["mac_loops"] = bool(mac_loops)      # how the cached run asks, where it must
        return out
    values = torch.zeros(ref.shape, dtype=ref.dtype)
    ok = torch.zeros(ref.shape, dtype=torch.bool)
    shown = torch.zeros((len(operands),) + tuple(ref.shape), dtype=torch.float64)
    with warnings.catch_warnings(), (edges.without_onednn() if mac_loops else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        for at in (tuple(ix) for ix in torch.ones(ref.shape).nonzero().tolist()) if ref.dim() else [()]:
            one, scalar = edges.one_element_answer(info, sample, operands, positions, at)
            if scalar is None:
                continue
            values[at] = scalar.to(ref.dtype)
            ok[at] = True
            try:
                for k, t in enumerate(one):
                    shown[(k,) + at] = float(t.reshape(()))
            except Exception as exc:
                raise _unsupported(f"an operand of a reference input as a float: {exc}") from None
    out["scalar"] = enc.value(values, f"s{i}_scalar")
    out["scalar_ok"] = enc.value(ok, f"s{i}_scalar_ok")
    out["operands"] = enc.value(shown, f"s{i}_operands")
    return out


def _unsupported(why: str):
    from porter.dispatch.numpy_tensors import Unsupported
    return Unsupported(why)


def record_for_cache(ctx: RunContext, queries: list[str], env: str,
                     rows: tuple[str, ...] = ("samples",)) -> None:
    """Fill the reference cache after an op_db run, which has torch and the op database loaded
    already: every OpInfo `queries` name that the cache lacks. Never fails the run.

    For every dtype the OpInfo declares for the device (not only the ones tested this time: the
    next edit may register a kernel for another), what this run computes before the device
    runs: the sample inputs (`generate_samples`, the very call the run makes), the CPU
    reference (`reference_uncast`), the OpInfo's own DecorateInfo expectations and tolerance
    floors per dtype, and, per sample, the dtype torch promotes 1, 2 or 3 operands to and the
    meta output dtype (porter.dispatch.kernel_choice, which needs torch). `rows` beyond
    "samples": porter's reference inputs and layouts too (`_record_rows`). A sample porter
    cannot represent without torch (a non-contiguous or exotic tensor, a tensor in kwargs, a
    tuple output) makes the OpInfo's rows of its kind uncacheable: recorded as such, so the
    next run goes the op_db way at once."""
    from porter.dispatch.numpy_tensors import Unsupported
    from porter.harness import edges, mac_cpu_reference, refcache
    backend = ctx.backend
    device_type = getattr(backend, "device_type", backend.name)
    mps_like = getattr(backend, "mps_expectations", False)
    db_meta = {"source": ctx.db.source, "torch": ctx.db.torch_version, "path": ctx.db.torch_path}
    for query in queries:
        known = refcache.load_ops(env, query)
        # complete: each row kind recorded (or uncacheable) and each of its files still there;
        # an entry evicted alone (the cache is bounded, its records are files) is recorded
        # again, or every later run of the op would miss it and take the op_db way
        if known is not None and all(r.get("uncacheable") or (all(
                r.get("rows", {}).get(kind) for kind in rows if kind != "samples")
                and not refcache.missing_refs(env, r, rows)) for r in known["ops"]):
            continue
        before = {r["full_name"]: r for r in known["ops"]} if known is not None else {}
        try:
            # what the run tests: a backward op's stand-in too (porter.harness.backward)
            infos = test_infos(query, ctx)
        except Exception:
            continue
        records = []
        for info in infos:
            supported = set(info.supported_dtypes(device_type))
            if device_type == "mps":
                supported &= mps_dtypes()
            rec = {"full_name": info.full_name, "name": info.name,
                   "aten_name": getattr(info, "aten_name", None),
                   "variant": info.variant_test_name, "key": opdb.xfail_key(info),
                   # a backward op's header, and the forward OpInfo whose tolerances it takes
                   "test": getattr(info, "test_name", TEST_NAME), "via": getattr(info, "via", None),
                   "tolerance_name": getattr(info, "tolerance_name", info.name),
                   "tolerance_variant": getattr(info, "tolerance_variant", info.variant_test_name),
                   # a backward op's formula (a checkout's own derivatives.yaml can change it)
                   "formula": getattr(info, "formula", None),
                   "supported": sorted(dtype_name(d) for d in supported),
                   "decorators": {}, "uncacheable": None,
                   # which references a Mac's CPU computes otherwise (porter.harness.cached_run)
                   "mac_cpu": mac_cpu_reference.departs(info.name),
                   # run_op_tests' rows of this OpInfo: a reference row where it has reference
                   # inputs, a shapes row where has_shapes says so
                   "has_reference": hasattr(info, "reference_inputs"),
                   "elementwise": edges.is_elementwise(info),
                   # the op as a dotted name, where it is one: the cached run asks its scalar
                   # loop itself on a sample too large to have recorded the answers
                   "callable": edges.callable_name(info),
                   "has_shapes": has_shapes(info),
                   "rows": dict(before.get(info.full_name, {}).get("rows", {}))}
            try:
                for dtype in supported:
                    xfail, skip, floors = decorator_expectations(info, dtype, device_type, mps_like)
                    rec["decorators"][dtype_name(dtype)] = [xfail, skip, list(floors)]
                    if not refcache.ref_path(env, info.full_name, dtype_name(dtype)).is_file():
                        _record_dtype(env, info, dtype)
            except Unsupported as why:
                rec["uncacheable"] = str(why)
            for kind in rows:
                wanted = kind == "shapes" and rec["has_shapes"] or kind == "reference" and rec["has_reference"]
                if not wanted or rec["uncacheable"] or rec["rows"].get(kind, "").startswith("uncacheable"):
                    continue
                try:
                    for dtype in supported:
                        if not refcache.ref_path(env, info.full_name, dtype_name(dtype), kind).is_file():
                            _record_rows(env, info, dtype, ctx, kind)
                    rec["rows"][kind] = "recorded"
                except Unsupported as why:
                    rec["rows"][kind] = f"uncacheable: {why}"
            records.append(rec)
        refcache.save_ops(env, query, records, db_meta)
    refcache.evict()
