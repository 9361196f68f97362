"""Run the OpInfo output-match test of one op, per dtype, on a backend.

Mirrors upstream's `TestConsistency.test_output_match`: every sample input (generated on the
CPU with the keywords of the checkout test's `sample_inputs` call, porter.harness.sample_rules),
run on the device and on a CPU copy; half/bfloat16 reference in float32 when the CPU has no
kernel, cast back to the op's own output dtype; compared by `TestCase.assertEqual` (NaN equal,
exact dtype) with the checkout's tolerance rules (porter.harness.tolerances) per sample and the
OpInfo's tolerance overrides as floors.
Unlike upstream, every sample runs (not only up to the first failure), so the report can give
the number of failing samples and the worst error.
"""

from __future__ import annotations

import math
import re
import time
import unittest
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from porter.errors import PorterError
from porter.harness import mps_expectations as expmod
from porter.harness import opdb, sample_rules, tolerances
from porter.dispatch.sample_devices import to_device
from porter.harness.devices import MPS_DTYPE_NAMES, get_backend, mps_dtypes

PASS, FAIL, XFAIL, XPASS, SKIP = "pass", "fail", "xfail", "xpass", "skip"
TEST_CLASS, TEST_NAME = "TestConsistency", "test_output_match"
GRAD_TEST_NAME = "test_output_grad_match"


@dataclass
class DtypeResult:
    dtype: str
    outcome: str
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
    upstream: str | None = None                              # outcome under test_mps.py


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
                 reference_inputs: bool = False) -> list[OpResult]:
    """Test every OpInfo named `op`. `backend`: a Backend or a registered name;
    `dtypes`: names or torch dtypes to restrict to; `sample`: run only that sample index;
    `grad`: compare gradients too (upstream's test_output_grad_match); `reference_inputs`:
    also a result per OpInfo over its reference_inputs (±0.0, ±inf, nan, subnormals, large
    magnitudes), after the upstream one."""
    if isinstance(backend, str):
        backend = get_backend(backend, root)
    if ctx is None:
        ctx = make_context(root, backend)
    results = []
    for info in test_infos(op, ctx, grad):
        results.append(run_opinfo(info, ctx, dtypes=dtypes, sample=sample))
        if reference_inputs and hasattr(info, "reference_inputs"):
            results.append(run_opinfo(info, ctx, dtypes=dtypes, sample=sample, reference=True))
    return results


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
               reference: bool = False) -> OpResult:
    backend = ctx.backend
    device_type = getattr(backend, "device_type", backend.name)
    result = OpResult(info.full_name, info.name, info.variant_test_name, opdb.xfail_key(info),
                      backend.name, test=getattr(info, "test_name", TEST_NAME),
                      via=getattr(info, "via", None), reference=reference)
    wanted = {_dtype_name(d) for d in dtypes} if dtypes else None
    supported, no_kernel = _tested_dtypes(info, backend, device_type)
    result.supported = sorted((_dtype_name(d) for d in supported | no_kernel), key=_dtype_order)
    if wanted:
        tested = {_dtype_name(d) for d in supported | no_kernel}
        for name in sorted(wanted - tested, key=_dtype_order):
            result.dtypes.append(DtypeResult(name, SKIP, message=(
                f"{info.full_name} does not support {name} on {backend.name}")))
    # What stops every dtype: the op is beyond the backend (skip, with why), or its kernel
    # file does not compile (fail, with the compiler's words: a Mac cannot load it either).
    cannot_run = _backend_says(backend, "skip_reason", info)
    build_error = None if cannot_run else _backend_says(backend, "build_error", info)
    for dtype in sorted(supported | no_kernel, key=lambda d: _dtype_order(_dtype_name(d))):
        name = _dtype_name(dtype)
        if wanted is not None and name not in wanted:
            continue
        if cannot_run or build_error or dtype in no_kernel:
            result.dtypes.append(_not_run(info, dtype, ctx, device_type, cannot_run, build_error
                                          or f"no Metal kernel registered for {name}: the MPS "
                                          "test sends it, and MPS raises for it"))
        else:
            result.dtypes.append(_run_dtype(info, dtype, ctx, device_type, sample, reference))
    result.dtypes.sort(key=lambda d: _dtype_order(d.dtype))
    return result


def _backend_says(backend, question: str, info) -> str | None:
    ask = getattr(backend, question, None)
    return ask(info) if ask is not None else None


def _not_run(info, dtype, ctx: RunContext, device_type: str, cannot_run: str | None,
             failure: str) -> DtypeResult:
    """A dtype decided without running a sample: skipped because porter cannot run the op,
    or failed as the device would fail it (subject to the op's expectations, as a run is)."""
    name = _dtype_name(dtype)
    xfail_by, skip_by, _ = _expectations(info, dtype, ctx, device_type)
    return not_run_verdict(name, xfail_by, skip_by, cannot_run, failure)


def _tested_dtypes(info, backend, device_type: str) -> tuple[set, set]:
    """(dtypes to run, dtypes the device test sends but the backend has no kernel for)."""
    supported = set(info.supported_dtypes(device_type))
    if device_type == "mps":          # no float64 / complex128 on the device
        supported &= mps_dtypes()
    extra = backend.supported_dtypes(info)
    if extra is None:
        return supported, set()
    return supported & set(extra), supported - set(extra)


def _run_dtype(info, dtype, ctx: RunContext, device_type: str, only: int | None,
               reference: bool = False) -> DtypeResult:
    name = _dtype_name(dtype)
    xfail_by, skip_by, tol_floor = _expectations(info, dtype, ctx, device_type)
    res = DtypeResult(name, PASS)
    if skip_by:
        res.outcome, res.expected_by = SKIP, skip_by
        res.message = "skipped by " + ", ".join(skip_by)
        return res
    # before any sample: what the report shows; each sample may loosen it (_check_sample)
    res.atol, res.rtol = ctx.lists.tolerances(info, dtype, ctx.macos)
    start = time.perf_counter()
    try:
        generated = 0
        for index, sample in enumerate(generate_samples(info, dtype, ctx.samples, reference)):
            generated += 1
            if only is not None and index != only:
                continue
            res.samples += 1
            err = _check_sample(info, sample, dtype, ctx, tol_floor, res)
            if err is not None:
                res.failed_samples += 1
                if res.first_failure is None:
                    res.first_failure, res.message = index, err
    except Exception as exc:   # sample generation itself broke: the test errors upstream too
        res.failed_samples += 1
        res.message = res.message or f"sample inputs failed: {_one_line(exc)}"
    else:
        if only is not None and not res.samples:
            # nothing ran: a pass here would be a green no device ever gave
            raise PorterError(f"--sample {only}: {info.full_name} has {generated} sample input(s) for "
                              f"{name}", hint=f"pass --sample 0 to {generated - 1}" if generated else None)
    return settle(res, start, xfail_by)


def generate_samples(info, dtype, rules: sample_rules.SampleRules = sample_rules.BUILT_IN,
                     reference: bool = False):
    """The sample inputs upstream's test sends for `dtype`, asked with `rules`' keywords (the
    reference cache records these); `reference`: the OpInfo's reference_inputs instead."""
    kwargs = rules.kwargs(info, dtype)
    if reference:
        return info.reference_inputs("cpu", dtype, **kwargs)
    return info.sample_inputs("cpu", dtype, **kwargs)


def _check_sample(info, sample, dtype, ctx: RunContext, tol_floor, res) -> str | None:
    """Run one sample; update the error maxima; return a one-line failure or None."""
    name = _dtype_name(dtype)
    backend = ctx.backend
    # the checkout's rules decide per sample (interpolate's and upsample's depend on its kwargs)
    compare = getattr(info, "compare", None)     # --grad: output and gradients apart
    try:
        atol, rtol = ctx.lists.for_sample(info, dtype, sample, ctx.macos)
        gradients = ctx.lists.gradient_tolerances(info, dtype, sample, ctx.macos) \
            if compare is not None else None
    except Exception as exc:      # upstream's test errors on this sample as well
        return f"{ctx.lists.source} raised deciding the tolerances: {_one_line(exc)}"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning)
        try:
            dev_out = backend.run(info, to_device(sample, "cpu"), dtype)
        except Exception as exc:
            return f"{backend.name} error: {_one_line(exc)}"
        try:
            cpu_out = _reference(info, sample, dev_out)
        except Exception as exc:
            return f"CPU reference error: {_one_line(exc)}"
    _update_errors(res, cpu_out, dev_out)
    tc = _comparer(*tol_floor)
    try:
        if compare is not None:
            compare(tc, cpu_out, dev_out, atol, rtol, name, gradients)
        elif info.name == "kthvalue":
            _check_kthvalue(tc, sample, cpu_out, dev_out, atol, rtol)
        else:
            tc.assertEqual(cpu_out, dev_out, atol=atol, rtol=rtol)
    except AssertionError as exc:
        return _one_line(exc)
    return None


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
    name = _dtype_name(dtype)
    key = opdb.xfail_key(info)
    mps_like = getattr(ctx.backend, "mps_expectations", False)
    test_name = getattr(info, "test_name", TEST_NAME)
    if mps_like:
        # test_output_grad_match has lists of its own (mps_ops_grad_modifier)
        expected = _grad_expectations(ctx) if test_name == GRAD_TEST_NAME else ctx.expectations
        for entry in expected.active(key, name, macos=ctx.macos):
            (skip if entry.kind == expmod.SKIP else xfail).append(entry.where)
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
        _raise_max(res, "max_abs", float(diff.max()))
        _raise_max(res, "max_rel", float(rel.max()))


def _raise_max(res, attr, value) -> None:
    if math.isnan(value):
        value = math.inf
    old = getattr(res, attr)
    setattr(res, attr, value if old is None else max(old, value))


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, AssertionError) else str(exc)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _dtype_name(dtype) -> str:
    if isinstance(dtype, str):
        return expmod.canonical_dtype(dtype.removeprefix("torch."))
    return str(dtype).removeprefix("torch.")


_ORDER = {n: i for i, n in enumerate(MPS_DTYPE_NAMES + ("float64", "complex128", "complex32"))}


def _dtype_order(name: str):
    return (_ORDER.get(name, len(_ORDER)), name)


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


def settle(res: "DtypeResult", start: float, xfail_by) -> "DtypeResult":
    """The dtype's outcome from its failed samples and expectations, as upstream's unittest
    decides it (an expected failure that passes is an XPASS); both run paths end here."""
    res.seconds = round(time.perf_counter() - start, 4)
    failed = res.failed_samples > 0
    if xfail_by:
        res.expected_by = xfail_by
        res.outcome = XFAIL if failed else XPASS
    else:
        res.outcome = FAIL if failed else PASS
    return res


def not_run_verdict(name: str, xfail_by, skip_by, cannot_run: str | None, failure: str) -> "DtypeResult":
    """A dtype decided without running a sample (both run paths): an expectation's skip, then
    porter's own cannot-run skip with its reason, else the device's failure, expected or not."""
    if skip_by:
        return DtypeResult(name, SKIP, expected_by=skip_by, message="skipped by " + ", ".join(skip_by))
    if cannot_run:
        return DtypeResult(name, SKIP, message=cannot_run)
    if xfail_by:
        return DtypeResult(name, XFAIL, expected_by=xfail_by, message=failure)
    return DtypeResult(name, FAIL, message=failure)
