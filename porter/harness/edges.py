"""Reference inputs at the edges of each dtype, for every elementwise op.

Upstream's reference_inputs stop short of the integer limits (sign's reach ±10701), so a
kernel that computes an int32 through a `short` passes them. These samples put each dtype's
limits and their neighbours through the op: INT_MIN, INT_MAX, -1, 0, 255/256, 2^15 ± 1,
2^31 ± 1 where they fit; ±0, ±inf, NaN, subnormals and the float16/bfloat16/float32 limits for
floating types. `porter test --reference-inputs` runs them after the OpInfo's own.

An operand that counts steps (a polynomial's degree `n`: special.legendre_polynomial_p and
its kin loop n times per element, on the CPU and in a kernel alike) gets only the edge values
within MAX_DEGREE: INT_MAX there is 2^31 steps per element, minutes of a run that say nothing
a degree of 2^16 does not.
"""

from __future__ import annotations

import contextlib
import math

# integer candidates; each dtype keeps those in its range (plus its own min/max and neighbours)
_INTS = (0, 1, -1, 2, -2, 3, -3, 7, -7, 100, -100, 126, 127, -127, -128, 128, -129, 129,
         254, 255, 256, 257, -255, -256, 2**15 - 1, 2**15, 2**15 + 1, -2**15, -2**15 + 1,
         -2**15 - 1, 2**16 - 1, 2**16, -2**16, 10701, 2**24 + 1, 2**31 - 2, 2**31 - 1, 2**31,
         2**31 + 1, -2**31, -2**31 + 1, -2**31 - 1, 2**32, 2**32 + 1, 2**53 + 1, -2**53 - 1,
         2**63 - 2, 2**63 - 1, -2**63, -2**63 + 1)
# float candidates besides each float dtype's own limits (cast to the dtype: what overflows
# becomes inf, what underflows 0, as a conversion on the device does)
_FLOATS = (0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.25,
           1.5, -2.5, 3.5, 1e-3, -1e-3, 100.5, 65504.0, -65504.0, 65520.0, 6.103515625e-05,
           5.960464477539063e-08, -5.960464477539063e-08, 3.3895313892515355e38, 1e10, -1e10,
           2.0**24 + 2, 2.0**31, -2.0**31, 2.0**63, 1e-40, -1e-40, 1e-45)
# complex: finite corners (the CPU's and a GPU's branch cuts at inf differ within tolerance
# rules upstream keeps for itself)
_COMPLEX = ((0.0, 0.0), (-0.0, -0.0), (0.0, -0.0), (1.0, -1.0), (-2.5, 3.0), (0.5, 0.0),
            (0.0, 2.0), (-1.0, 0.0), (1e-3, -1e3), (100.0, 0.01))

ELEMENTWISE = ("UnaryUfuncInfo", "BinaryUfuncInfo")


def values(dtype):
    """A 1-D CPU tensor of `dtype`'s edge values (bool: both; no dtype is left without)."""
    import torch
    if dtype == torch.bool:
        return torch.tensor([False, True, True, False], dtype=torch.bool)
    if dtype.is_complex:
        real = torch.finfo(dtype).max
        # max / 4 in both parts: 1 / |z| is a subnormal there, which an Apple GPU flushes, so a
        # formula multiplying by 1 / |z| answers 0 and one dividing by |z| the CPU's 0.707; the
        # smallest subnormal in both parts, and one beside a zero: 1 / |z| overflows on the CPU,
        # and a flushing GPU reads them as 0 (edges.either_flushed)
        tiny = float(torch.finfo(dtype).tiny) * float(torch.finfo(dtype).eps)
        pairs = list(_COMPLEX) + [(real / 4, -real / 4), (tiny, tiny), (-tiny * 4096, 0.0)]
        return torch.tensor([complex(a, b) for a, b in pairs], dtype=torch.complex128).to(dtype)
    if dtype.is_floating_point:
        own = []
        for d in (dtype, torch.float16, torch.bfloat16, torch.float32):
            info = torch.finfo(d)
            tiny, eps = float(info.tiny), float(info.eps)
            own += [float(info.max), -float(info.max), tiny, -tiny, tiny * eps, -tiny * eps,
                    tiny * eps * 3, eps, 1.0 + eps, 1.0 - eps / 2]
        near = torch.tensor([float(torch.finfo(dtype).max)], dtype=dtype)
        own.append(float(torch.nextafter(near, torch.tensor([0.0], dtype=dtype))))
        wide = torch.tensor(list(_FLOATS) + own, dtype=torch.float64)
        return wide.to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    picked = [v for v in _INTS if lo <= v <= hi] + [lo, lo + 1, hi, hi - 1]
    return torch.tensor(list(dict.fromkeys(picked)), dtype=torch.int64).to(dtype)


def is_elementwise(info) -> bool:
    """An OpInfo whose samples may take any shape of values: the ufunc classes upstream uses
    for elementwise ops, and an OpInfo of another class whose aten op is tagged `pointwise` in
    native_functions.yaml (nn.functional.gelu and leaky_relu, and through them their backward
    ops: activations upstream tests with a plain OpInfo, whose Metal kernels are elementwise
    all the same)."""
    return _ufunc(info) or _pointwise(getattr(info, "info", info))


def _pointwise(info) -> bool:
    import torch
    name = (getattr(info, "aten_name", None) or info.name).removeprefix("nn.functional.")
    packet = getattr(torch.ops.aten, name, None) if name.isidentifier() else None
    default = getattr(packet, "default", None) if packet is not None else None
    return default is not None and torch.Tag.pointwise in default.tags


def edge_samples(info, dtype, template_samples, unsettled: list | None = None) -> list:
    """Samples of `info` whose tensors hold `dtype`'s edge values, modelled on the first
    upstream sample with a tensor input (its scalars and kwargs kept). The input gets every
    edge value; for a binary op, another sample puts them in the second operand too. A
    sample the CPU reference refuses is not sent: upstream's test never sends one."""
    import torch
    if not is_elementwise(info):
        return []
    template_samples = list(template_samples)       # a generator: read twice below
    fits = [s for s in template_samples if isinstance(s.input, torch.Tensor) and s.input.dtype == dtype]
    # one whose tensors are not all 0-d (a Python-scalar-like other takes another host path)
    template = next((s for s in fits if all(a.dim() > 0 for a in (s.input, *s.args)
                                            if isinstance(a, torch.Tensor))), fits[0] if fits else None)
    if template is None:
        return []
    edges = values(dtype)
    n = edges.numel()

    def cycled(t, avoid=(), n=n):
        flat = t.reshape(-1)
        if flat.numel() == 0:
            return None
        keep = flat[~torch.isin(flat, torch.tensor(avoid, dtype=flat.dtype))] if avoid else flat
        if keep.numel() == 0:
            return None
        return keep.repeat(n // keep.numel() + 1)[:n].clone()

    found = []
    # one more input-edge sample per other value of a string keyword (gelu's approximate
    # 'tanh' runs another kernel than 'none'), its other arguments the template's
    for kwargs in _other_keyword_choices(fits, template):
        args = [cycled(a) if isinstance(a, torch.Tensor) else a for a in template.args]
        if all(a is not None for a in args):
            found.append(type(template)(edges.clone(), args=tuple(args), kwargs=kwargs))
    others = [a for a in template.args]
    # never an integer 0 or -1 in a second operand: INT_MIN / -1 traps on the host CPU
    base_args = [cycled(a, () if a.dtype.is_floating_point or a.dtype.is_complex
                        or a.dtype == torch.bool else (0, -1))
                 if isinstance(a, torch.Tensor) else a for a in others]
    if all(a is not None for a in base_args):
        found.append(type(template)(edges.clone(), args=tuple(base_args),
                                    kwargs=dict(template.kwargs)))
    if others and isinstance(others[0], torch.Tensor):
        second = values(others[0].dtype)
        if not (second.dtype.is_floating_point or second.dtype.is_complex or second.dtype == torch.bool):
            second = second[(second != 0) & (second != -1)]
        lhs = cycled(template.input)
        if lhs is not None and second.numel():
            m = second.numel()
            lhs = lhs.repeat(m // n + 1)[:m]
            # for each value of a string keyword too: gelu_backward's tanh kernel reads NaN
            # and inf from `self`, its second operand
            for kwargs in [dict(template.kwargs)] + _other_keyword_choices(fits, template):
                found.append(type(template)(lhs.clone(), args=(second.clone(), *base_args[1:]),
                                            kwargs=kwargs))
        # each critical value of a beside each of b's, once (heaviside(0, nan), inf - inf,
        # INT_MIN * -1 happen in no sample above: the other operand there is upstream's
        # values); a small fixed set, not every pair of edges (which ran test_verify's
        # reference sweep past 10 min)
        a_crit, b_crit = critical(dtype), critical(others[0].dtype)
        if not (b_crit.dtype.is_floating_point or b_crit.dtype.is_complex or b_crit.dtype == torch.bool):
            # an integer b stays small: never 0 or -1 (INT_MIN / -1 traps on the host CPU),
            # and no limit, which the sample above gives b already (INT_MAX as a polynomial's
            # degree is 2^31 steps of its recurrence per element: the kernel's watchdog)
            b_crit = torch.tensor([1, 2, 3], dtype=b_crit.dtype)
        if b_crit.numel() and not any(isinstance(a, torch.Tensor) for a in others[1:]):
            found.append(type(template)(a_crit.repeat_interleave(b_crit.numel()),
                                        args=(b_crit.repeat(a_crit.numel()), *others[1:]),
                                        kwargs=dict(template.kwargs)))
    # an integer second operand avoids 0 and -1 there too
    found += scalar_samples(template_samples + keyword_templates(info, fits), dtype, lambda a, size: cycled(
        a, () if a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool
        else (0, -1), n=size))
    steps = degree_positions(info)
    if steps:
        found = [s for s in (_degree_bounded(s, steps) for s in found) if s is not None]
    found = [s for s in found if _cpu_accepts(info, s)]
    mac_loops = not _ufunc(info)
    # where torch's vectorized and scalar loops answer an element apart, both answers pass
    found = [_two_ways(info, s, unsettled, mac_loops) for s in found]
    if mac_loops:
        # their reference is computed as a Mac's torch computes it
        found = [_without_onednn_sample(s) for s in found]
    # porter's own: a CPU error on one drops it with a note (verdicts), never fails the kernel
    return [_marked(s, **{EDGE: True}) for s in found]


# a sample whose CPU reference runs without oneDNN (without_onednn)
MAC_LOOPS = "porter_without_onednn"
# a sample's other CPU answer (its scalar loop's) where the vectorized loop answers apart
TWO_WAYS = "porter_two_ways"
# a sample porter made (not upstream's)
EDGE = "porter_edge"
_MARKED_CLASS: list = []


def _marked(sample, **marks):
    """`sample` carrying `marks` (SampleInput has __slots__ and takes no new attribute: a
    subclass without them does), keeping the marks it had."""
    if not _MARKED_CLASS:
        from torch.testing._internal.opinfo.core import SampleInput
        _MARKED_CLASS.append(type("MarkedSample", (SampleInput,), {}))
    out = _MARKED_CLASS[0](sample.input, args=sample.args, kwargs=sample.kwargs,
                           output_process_fn_grad=sample.output_process_fn_grad,
                           broadcasts_input=sample.broadcasts_input, name=sample.name)
    for key in (MAC_LOOPS, TWO_WAYS, EDGE):
        if key in getattr(sample, "__dict__", {}):
            setattr(out, key, getattr(sample, key))
    for key, value in marks.items():
        setattr(out, key, value)
    return out


def _without_onednn_sample(sample):
    """`sample` as one whose reference runs without oneDNN."""
    return _marked(sample, **{MAC_LOOPS: True})


@contextlib.contextmanager
def without_onednn():
    """torch's CPU without oneDNN, as a Mac's torch is built (USE_MKLDNN is off on arm64
    macOS). Here oneDNN computes float32 and bfloat16 gelu over a tensor of more than one
    element, and its erf answers NaN at inf and inf near FLT_MAX, where torch's own loops (a
    Mac's, and this machine's one-element call) answer inf and x."""
    import torch
    # torch's own switch, not torch.backends.mkldnn: upstream's test module locks that one
    # (disable_global_flags), and its flags() also resets oneDNN's other settings
    get, put = torch._C._get_mkldnn_enabled, torch._C._set_mkldnn_enabled
    was = get()
    put(False)
    try:
        yield
    finally:
        put(was)


def _ufunc(info) -> bool:
    return any(c.__name__ in ELEMENTWISE for c in type(getattr(info, "info", info)).__mro__)


def _two_ways(info, sample, unsettled: list | None, mac_loops: bool = False):
    """`sample`, carrying (TWO_WAYS) the CPU's other answer where it has two: its vectorized
    loop (a whole tensor) and its scalar loop (one element at a time, a tensor too short for
    the vector body) apart by more than torch's default tolerance for the dtype.
    hardshrink_backward with a NaN `self` is one: 0 vectorized, `grad` one at a time. Which
    loop a Mac's reference runs for an element depends on where it sits, so the kernel passes
    when it matches either (`either`); each such element goes into `unsettled` as
    (operands' values, vectorized, scalar), for the row's note. `mac_loops`: both computed
    without oneDNN (without_onednn), as a plain OpInfo's reference is."""
    import warnings

    import torch
    n = sample.input.numel()
    if sample.input.dim() != 1 or n < 2:
        return sample
    sliced = [isinstance(a, torch.Tensor) and a.dim() == 1 and a.numel() == n for a in sample.args]
    with warnings.catch_warnings(), (without_onednn() if mac_loops else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        try:
            whole = info(sample.input.clone(), *sample.args, **sample.kwargs)
            if not isinstance(whole, torch.Tensor) or whole.shape != (n,) or \
                    not whole.dtype.is_floating_point:
                return sample
            one = [info(sample.input[i:i + 1].clone(),
                        *[a[i:i + 1] if s else a for a, s in zip(sample.args, sliced)],
                        **sample.kwargs) for i in range(n)]
            scalar = torch.cat(one)
        except Exception:
            return sample
    rtol, atol = _default_tolerance(whole.dtype)
    agree = torch.isclose(whole, scalar, rtol=rtol, atol=atol, equal_nan=True)
    if bool(agree.all()):
        return sample
    if unsettled is not None:
        for i in (~agree).nonzero().flatten().tolist():
            at = tuple(float(t[i]) for t in [sample.input, *(a for a, s in zip(sample.args, sliced) if s)])
            unsettled.append((at if len(at) > 1 else at[0], float(whole[i]), float(scalar[i])))
    return _marked(sample, **{TWO_WAYS: scalar})


def either(sample, reference, device_out, atol, rtol):
    """The reference the device is held to: `reference` (the vectorized loop's), with the
    scalar loop's answer (TWO_WAYS) wherever the device matches that one and not the other."""
    import torch
    other = getattr(sample, TWO_WAYS, None)
    if other is None or not all(isinstance(t, torch.Tensor) for t in (reference, device_out)) \
            or reference.shape != other.shape or device_out.shape != reference.shape \
            or device_out.dtype != reference.dtype:
        return reference
    if atol is None or rtol is None:
        rtol, atol = _default_tolerance(reference.dtype)
    device = device_out.detach().cpu()
    other = other.to(reference.dtype)
    takes_other = torch.isclose(device, other, rtol=rtol, atol=atol, equal_nan=True) & \
        ~torch.isclose(device, reference, rtol=rtol, atol=atol, equal_nan=True)
    return torch.where(takes_other, other, reference) if bool(takes_other.any()) else reference


def _default_tolerance(dtype) -> tuple[float, float]:
    """(rtol, atol): torch.testing.assert_close's defaults for a floating dtype."""
    import torch
    return {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
            torch.float32: (1.3e-6, 1e-5), torch.complex64: (1.3e-6, 1e-5)}.get(dtype, (1e-7, 1e-7))


# at most this many mismatching elements are asked of the scalar loop, one call each
MAX_SCALAR_CALLS = 8192


def broadcast_operands(sample, shape):
    """(the sample's tensor operands broadcast together, which of sample.args they are), where
    they broadcast to `shape`; None where they cannot: a Number input (sub's reference inputs)
    has no one-element slice, and operands that do not broadcast, or broadcast to another shape
    than the output's, have none that is the element's. The live run (either_per_element) and
    the reference cache's recorder ask this one question, so their answers cannot differ."""
    import torch
    if not isinstance(sample.input, torch.Tensor):
        return None
    positions = [i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor)]
    try:
        operands = torch.broadcast_tensors(sample.input, *[sample.args[i] for i in positions])
    except RuntimeError:
        return None
    return (operands, positions) if operands[0].shape == shape else None


def callable_name(info) -> str | None:
    """`module:name` of the function an OpInfo calls, where calling the OpInfo calls just it
    and that name finds it again (torch.heaviside, torch.nn.functional.hardshrink); else None
    (a lambda, a method, a backward op's stand-in)."""
    from torch.testing._internal.opinfo.core import OpInfo
    op = getattr(info, "op", None)
    if not isinstance(info, OpInfo) or type(info).__call__ is not OpInfo.__call__ or op is None:
        return None
    module = getattr(op, "__module__", None)
    # torch's own functions: `__qualname__` is `_VariableFunctionsClass.heaviside`, the name
    # they are found by in `torch` is `__name__`
    for name in dict.fromkeys((getattr(op, "__qualname__", None), getattr(op, "__name__", None))):
        if not module or not name or "<" in name:
            continue
        try:
            if find_callable(f"{module}:{name}") is op:
                return f"{module}:{name}"
        except (ImportError, AttributeError, ValueError):
            continue
    return None


def find_callable(spelled: str):
    """callable_name's function again."""
    import importlib
    module, name = spelled.split(":", 1)
    found = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def one_element_answer(info, sample, operands, positions, at):
    """The op on one-element slices at `at` of its broadcast operands (`positions`: which of
    sample.args are tensors), as its scalar loop answers: (the slices, the answer as a 0-d
    tensor, or None where the call raises or answers other than one element)."""
    import torch
    one = [t[at].reshape(1).clone() for t in operands]
    args = list(sample.args)
    for k, t in zip(positions, one[1:]):
        args[k] = t
    try:
        scalar = info(one[0], *args, **sample.kwargs)
    except Exception:
        return one, None
    if not isinstance(scalar, torch.Tensor) or scalar.numel() != 1:
        return one, None
    return one, scalar.reshape(())


def either_per_element(info, sample, reference, device_out, atol, rtol, unsettled: list | None,
                       mac_loops: bool = False):
    """`reference` with the scalar loop's answer wherever the device disagrees with it and
    matches that one: each mismatching element of an elementwise op computed again on
    one-element slices of its broadcast operands (a tensor too short for the vector body).
    A large tensor's vectorized loop answers some values otherwise (hardshrink_backward at a
    NaN `self`: 0, where its scalar lambda gives `grad`); the element goes into `unsettled`."""
    import warnings

    import torch
    if not is_elementwise(info) or not all(isinstance(t, torch.Tensor) for t in (reference, device_out)) \
            or reference.shape != device_out.shape or reference.dtype != device_out.dtype \
            or not reference.dtype.is_floating_point or reference.numel() == 0:
        return reference
    if atol is None or rtol is None:
        rtol, atol = _default_tolerance(reference.dtype)
    device = device_out.detach().cpu()
    wrong = (~torch.isclose(device, reference, rtol=rtol, atol=atol, equal_nan=True)).nonzero()
    if not len(wrong) or len(wrong) > MAX_SCALAR_CALLS:
        return reference
    broadcast = broadcast_operands(sample, reference.shape)
    if broadcast is None:
        return reference
    operands, positions = broadcast
    merged = reference.clone()
    with warnings.catch_warnings(), (without_onednn() if mac_loops else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        for index in wrong.tolist():
            at = tuple(index)
            one, scalar = one_element_answer(info, sample, operands, positions, at)
            if scalar is None:
                return reference
            value = scalar.to(reference.dtype)
            if bool(torch.isclose(device[at], value, rtol=rtol, atol=atol, equal_nan=True)):
                merged[at] = value
                if unsettled is not None:
                    shown = tuple(float(t.reshape(())) for t in one)
                    unsettled.append((shown if len(shown) > 1 else shown[0],
                                      float(reference[at]), float(value)))
    return merged


# devices whose GPU reads float32 and bfloat16 subnormals as zero (Apple's, as porter's emulator
# models it: docs/testing.md "Subnormals"); CUDA keeps them
FLUSHING_DEVICES = ("emulate", "mps", "mps-shader")
FLUSHED = "subnormal input(s) an Apple GPU reads as zero"


def _flushed(t):
    """`t` as an Apple GPU reads it: float32/bfloat16 subnormals as a zero of their sign, and
    each part of a complex64 so (Metal's complex is a float2: the worker's FTZ/DAZ flushes its
    parts as it flushes a float)."""
    import torch
    if isinstance(t, torch.Tensor) and t.dtype == torch.complex64:
        return torch.complex(_flushed(t.real), _flushed(t.imag))
    if not isinstance(t, torch.Tensor) or t.dtype not in (torch.float32, torch.bfloat16):
        return t
    tiny = torch.finfo(t.dtype).tiny
    return torch.where((t != 0) & (t.abs() < tiny), torch.copysign(torch.zeros_like(t), t), t)


def flushed_reference(info, sample, reference):
    """The CPU's answer on the sample's inputs as an Apple GPU reads them, or None where no input
    has a float32/bfloat16 subnormal (or the op does not answer in `reference`'s shape)."""
    import warnings

    import torch
    inputs = [sample.input, *sample.args]
    if not any(isinstance(t, torch.Tensor) and not torch.equal(_flushed(t), t) for t in inputs):
        return None
    # with the CPU loops the sample's reference ran with: a Mac's torch has no oneDNN, whose
    # gelu answers NaN at inf (an x86 flushed answer of NaN let a gelu NaN at inf pass)
    mac_loops = getattr(sample, MAC_LOOPS, False)
    with warnings.catch_warnings(), (without_onednn() if mac_loops else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        try:
            other = info(_flushed(sample.input), *[_flushed(a) for a in sample.args],
                         **sample.kwargs)
        except Exception:
            return None
    if not isinstance(other, torch.Tensor) or other.shape != reference.shape:
        return None
    return other.to(reference.dtype)


def either_flushed(info, sample, reference, device_out, atol, rtol, flushed: list | None):
    """`reference` with the CPU's answer on the inputs as an Apple GPU reads them (subnormals
    flushed to zero) wherever the device matches that one and not the unflushed answer. The
    kernel cannot see a subnormal input there: no functor can be right on it, and one that is
    right on the zero it reads is. Each element taken goes into `flushed`. The output may be
    of any dtype: logical_not of a float32 subnormal is True on the GPU (it reads 0), False on
    the CPU; the input, not the output, is what the GPU flushes."""
    import torch
    if not is_elementwise(info) or not all(isinstance(t, torch.Tensor) for t in (reference, device_out)) \
            or reference.shape != device_out.shape or reference.dtype != device_out.dtype \
            or reference.numel() == 0:
        return reference
    other = flushed_reference(info, sample, reference)
    if other is None:
        return reference
    reference, other = reference.detach(), other.detach()
    if atol is None or rtol is None:
        rtol, atol = _default_tolerance(reference.dtype)
    device = device_out.detach().cpu()
    take = (~torch.isclose(device, reference, rtol=rtol, atol=atol, equal_nan=True)) \
        & torch.isclose(device, other, rtol=rtol, atol=atol, equal_nan=True)
    if not bool(take.any()):
        return reference
    if flushed is not None:
        # .item(): a bool or complex value as itself (float() refuses a complex one)
        flushed.extend((reference[at].item(), other[at].item())
                       for at in map(tuple, take.nonzero().tolist()))
    return torch.where(take, other, reference)


def flushed_note(flushed: list) -> str:
    shown = ", ".join(f"{a:g} (CPU) / {b:g} (on the zero the GPU reads)" for a, b in flushed[:3])
    more = f" and {len(flushed) - 3} more" if len(flushed) > 3 else ""
    return (f"{len(flushed)} element(s) of {FLUSHED} (float32/bfloat16 subnormals, complex64 "
            f"parts too; "
            f"docs/testing.md \"Subnormals\"): the kernel passes with the CPU's answer on "
            f"either input: {shown}{more}")


UNSETTLED = "value(s) torch's CPU answers two ways"
# a reference run of an OpInfo porter adds no edge values to: its rows are the OpInfo's own
NO_EDGES = ("no edge values (NaN, ±inf, the dtype's limits) added: the OpInfo is neither a ufunc "
            "one nor of an aten op tagged pointwise; these are its own reference inputs")


def unsettled_note(unsettled: list) -> str:
    """The run's note for the elements `_two_ways` found: either answer passes there."""
    def at(x):
        return f"x={x:g}" if not isinstance(x, tuple) else "(" + ", ".join(f"{v:g}" for v in x) + ")"
    shown = ", ".join(f"{at(x)} ({a:g} vectorized, {b:g} one at a time)" for x, a, b in unsettled[:3])
    more = f" and {len(unsettled) - 3} more" if len(unsettled) > 3 else ""
    return (f"{len(unsettled)} {UNSETTLED} (its vectorized loop and its scalar loop, which "
            f"a Mac's reference runs depends on where the value sits): the kernel passes with "
            f"either: {shown}{more}")


def _other_keyword_choices(samples, template) -> list[dict]:
    """The template's keywords with each other string value upstream's samples give a string
    keyword (at most 3 more)."""
    seen, found = set(), []
    for s in samples:
        for k, v in s.kwargs.items():
            if isinstance(v, str) and template.kwargs.get(k) != v and (k, v) not in seen:
                seen.add((k, v))
                found.append({**template.kwargs, k: v})
    return found[:3]


# at most this many ways of passing scalars per op and dtype, a sample each (int32 and int64 add
# two at 2^24 and 2^24 + 1): one per way upstream's samples pass them (a scalar by position, by
# keyword), the sweep's reference runs stay within ~10%
MAX_SCALAR_SAMPLES = 2


def scalar_samples(template_samples, dtype, cycled) -> list:
    """Samples where the op's Python-number arguments meet NaN and the values at their own
    boundaries: the input holds `critical` values (NaN, ±inf, ±0, ±1, ...) and, for each
    scalar s, s itself, its neighbours in `dtype`, -s and 1 - s (logit's eps clamps to
    [eps, 1 - eps]; threshold's x == threshold picks `value`). A float scalar is first rounded
    to a floating `dtype`, so that x == s is exact whether a kernel compares in `dtype` or in
    float. One sample per way upstream's samples pass scalars (positions and keywords), each
    modelled on the first such sample, its other tensors `cycled(tensor, size)` to the
    input's size.

    The edge samples above keep one sample's scalars, and it may be the one without any
    (logit's first sample has no eps): a clamp that loses NaN (Metal's min/max/clamp return the
    non-NaN operand) or `<` for `<=` at x == threshold passed every dtype's reference run."""
    import torch
    found = []
    signatures = set()
    sent = 0            # ways that gave a sample: one that cannot (an empty tensor) takes no place
    # of the samples passing scalars one way, one whose scalars are all positive first: a
    # boundary at a negative or zero threshold is often no boundary at all (hardshrink's
    # x <= lambd with lambd = -0.5, its first sample, holds for no x >= -lambd: `<` for `<=`
    # passed float32, review 23's N06)
    def positive(template) -> bool:
        where = _scalars(template)
        return bool(where) and all(v > 0 for _, v in where)
    for template in sorted(template_samples, key=lambda s: not positive(s)):
        if not isinstance(template.input, torch.Tensor) or template.input.dtype != dtype:
            continue
        where = _scalars(template)
        signature = tuple(k for k, _ in where)
        if not where or signature in signatures:
            continue
        signatures.add(signature)
        scalars = {k: _rounded(v, dtype) for k, v in where}
        values = _boundaries(list(scalars.values()), dtype)
        args = [scalars.get(i, a) for i, a in enumerate(template.args)]
        n = values.numel()
        args = [cycled(a, n) if isinstance(a, torch.Tensor) and a.dim() > 0 else a for a in args]
        if any(a is None for a in args):
            continue
        kwargs = {k: scalars.get(k, v) for k, v in template.kwargs.items()}
        found.append(type(template)(values, args=tuple(args), kwargs=kwargs))
        sent += 1
        if dtype in (torch.int32, torch.int64):
            # every scalar at 2^24, where a float stops holding each integer: a kernel that
            # compares or computes an integer through a float (`float(x) <= threshold`) takes
            # 2^24 + 1 for 2^24 and answers apart from the CPU's integer lambda; then every
            # scalar at 2^24 + 1, which no float holds: a host that passes a scalar through a
            # float (`value.to<float>()` into an integer params field) sends 2^24 for it
            for limit in (FLOAT_EXACT_LIMIT, FLOAT_EXACT_LIMIT + 1):
                wide = {k: limit for k in scalars}
                found.append(type(template)(
                    _boundaries([limit], dtype),
                    args=tuple(wide.get(i, a) for i, a in enumerate(args)),
                    kwargs={k: wide.get(k, v) for k, v in kwargs.items()}))
        if sent >= MAX_SCALAR_SAMPLES:
            break       # ways, not samples: an int32 way's 2^24 samples leave room for the next
    return found


FLOAT_EXACT_LIMIT = 2 ** 24
# what keyword_templates passes: apart from one another, from 0, ±1 and every dtype's extremes,
# and held exactly by half and bfloat16
KEYWORD_VALUES = (1.5, -2.5, 3.5, -4.5)


def keyword_templates(info, fits) -> list:
    """One template passing each optional number keyword of the op's schema (`float? posinf=None`)
    where upstream's samples pass the input alone: nan_to_num's samples pass none of nan,
    posinf and neginf, so a kernel or host ignoring posinf passed them all (and a Mac's test).
    Values from KEYWORD_VALUES, in schema order; none where the schema is not found, or where
    the samples pass other arguments (clamp's tensor min and max: its Scalar overload is
    another kernel than the one upstream tests)."""
    import torch
    if not fits or any(s.args or s.kwargs for s in fits):
        return []
    name = getattr(info, "aten_name", None) or info.name
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return []
    schema = next((s for s in schemas if s.overload_name == ""), None)
    if schema is None:
        return []
    keywords = [a.name for a in schema.arguments[1:]
                if a.has_default_value() and a.default_value is None
                and str(a.type) in ("Optional[float]", "Optional[number]")]     # float?, Scalar?
    if not keywords or len(keywords) > len(KEYWORD_VALUES):
        return []
    template = fits[0]
    return [type(template)(template.input, args=tuple(template.args),
                           kwargs={**template.kwargs, **dict(zip(keywords, KEYWORD_VALUES))})]


def _scalars(sample) -> list:
    """(position or keyword, value) of the sample's Python numbers (not bools)."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return ([(i, a) for i, a in enumerate(sample.args) if number(a)]
            + [(k, v) for k, v in sorted(sample.kwargs.items()) if number(v)])


def _rounded(value, dtype):
    """A float scalar as a floating `dtype` holds it (what a Mac's kernel compares with); an
    integer, or any scalar of an integer or bool dtype, as it is."""
    import torch
    if not (isinstance(value, float) and dtype.is_floating_point):
        return value
    held = float(torch.tensor(value, dtype=torch.float64).to(dtype))
    return held if math.isfinite(held) or not math.isfinite(value) else value


def _boundaries(scalars: list, dtype):
    """`critical(dtype)` and, per scalar, the values at its boundaries, as a `dtype` tensor
    (integers out of `dtype`'s range left out: a conversion would wrap them)."""
    import torch
    base = critical(dtype)
    if dtype == torch.bool or dtype.is_complex:
        return base
    wanted = []
    for s in scalars:
        if not math.isfinite(s):
            continue
        if dtype.is_floating_point:
            here = torch.tensor([s], dtype=dtype)
            up = torch.nextafter(here, torch.tensor([math.inf], dtype=dtype))
            down = torch.nextafter(here, torch.tensor([-math.inf], dtype=dtype))
            one = torch.ones(1, dtype=dtype)
            wanted += [s, float(up), float(down), -s, float(one - here)]
        else:
            t = int(s)
            wanted += [t, t - 1, t + 1, -t, 1 - t]
    if dtype.is_floating_point:
        extra = torch.tensor(wanted, dtype=torch.float64).to(dtype)
    else:
        info = torch.iinfo(dtype)
        extra = torch.tensor([v for v in wanted if info.min <= v <= info.max],
                             dtype=torch.int64).to(dtype)
    return torch.cat([base, extra])


def critical(dtype):
    """The few values where ops of two operands have their special cases: zeros of both
    signs, the infinities, NaN, ±1, the smallest normal and the largest finite value for
    floats; 0, ±1 and the limits for integers (at most 9 values: their pairs stay small)."""
    import torch
    if dtype == torch.bool:
        return torch.tensor([False, True], dtype=torch.bool)
    if dtype.is_complex:
        return torch.tensor([0j, complex(1.0, -1.0), complex(-0.0, 2.0)], dtype=dtype)
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        return torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0,
                             float(info.tiny), float(info.max)], dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.tensor(list(dict.fromkeys([0, 1, -1, int(info.min), int(info.max)])),
                        dtype=torch.int64).to(dtype)


# the largest degree an edge sample sends (see the module's docstring): ±2^16 and every edge
# below it stay, 2^24 and the 32- and 64-bit limits go
MAX_DEGREE = 2 ** 16
# the schema's name for an operand whose value is a count of steps (a degree or an order):
# special.*_polynomial_*(Tensor x, Tensor n)
DEGREE_NAMES = ("n",)


def degree_positions(info) -> tuple[int, ...]:
    """Positions (0: the input, i: args[i - 1]) of the op's Tensor or Scalar operands that the
    aten schema names a degree (DEGREE_NAMES); () where the schema is not found."""
    import torch
    name = (getattr(info, "aten_name", None) or info.name).replace(".", "_")
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return ()
    found = set()
    for schema in schemas:
        for i, a in enumerate(a for a in schema.arguments if not a.kwarg_only):
            if a.name in DEGREE_NAMES and str(a.type) in ("Tensor", "number"):
                found.add(i)
    return tuple(sorted(found))


def _degree_bounded(sample, positions):
    """`sample` with only the elements whose degree operands are finite and within
    ±MAX_DEGREE; None where none is left (or a degree outside sits in a 0-d tensor or a
    Python number, which every element shares)."""
    import torch
    operands = [sample.input, *sample.args]
    n = sample.input.numel() if isinstance(sample.input, torch.Tensor) else 0
    sliced = [isinstance(a, torch.Tensor) and a.dim() == 1 and a.numel() == n for a in operands]
    keep = torch.ones(max(n, 1), dtype=torch.bool)
    for p in positions:
        if p >= len(operands):
            continue
        degree = operands[p]
        if isinstance(degree, bool) or degree is None:
            continue
        if isinstance(degree, (int, float)):
            ok = math.isfinite(degree) and abs(degree) <= MAX_DEGREE
            if not ok:
                return None
            continue
        if not isinstance(degree, torch.Tensor) or degree.dtype == torch.bool or degree.is_complex():
            continue
        wide = degree.to(torch.float64)
        fits = torch.isfinite(wide) & (wide.abs() <= MAX_DEGREE)
        if sliced[p]:
            keep &= fits
        elif not bool(fits.all()):
            return None
    if bool(keep.all()):
        return sample
    if not bool(keep.any()):
        return None
    cut = [a[keep].clone() if s else a for a, s in zip(operands, sliced)]
    return type(sample)(cut[0], args=tuple(cut[1:]), kwargs=dict(sample.kwargs))


def _cpu_accepts(info, sample) -> bool:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            info(sample.input.clone(), *sample.args, **sample.kwargs)
        except Exception:
            return False
    return True
