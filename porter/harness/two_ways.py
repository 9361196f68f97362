"""porter.harness.edges' two-way answers on a cached reference-input sample, without torch.

torch's CPU answers some edge values two ways (its vectorized loop over a large tensor, its
scalar loop one element at a time: hardshrink_backward at a NaN `self`), and a Mac's reference
runs either, so the op_db run passes a kernel matching either (`edges.either`,
`edges.either_per_element`). Those ask torch for the scalar loop's answer; the recording run
(porter.harness.opinfo_run._reference_extras) asked it for every element of each reference
input and stored it beside the sample (`other`, `scalar`), so the cached run
(porter.harness.cached_run) decides the same way here, on numpy arrays.
"""

from __future__ import annotations

import numpy as np

from porter.dispatch.numpy_tensors import FLOATING, PArray, Unsupported, isclose, widened
from porter.harness.edges import MAX_SCALAR_CALLS

# edges._default_tolerance: (rtol, atol), torch.testing.assert_close's, per floating dtype
_DEFAULT = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
            "complex64": (1.3e-6, 1e-5)}


def _tolerance(dtype: str, atol, rtol) -> tuple[float, float]:
    if atol is None or rtol is None:
        return _DEFAULT.get(dtype, (1e-7, 1e-7))
    return rtol, atol


def either(sample, reference, device_out, atol, rtol):
    """edges.either: `reference` with the scalar loop's answer (recorded as `other`) wherever
    the device matches that one and not the other."""
    other = (getattr(sample, "extra", None) or {}).get("other")
    if other is None or not all(isinstance(t, PArray) for t in (reference, device_out)) \
            or reference.shape != other.shape or device_out.shape != reference.shape \
            or device_out.dtype != reference.dtype:
        return reference
    rtol, atol = _tolerance(reference.dtype, atol, rtol)
    takes_other = isclose(device_out, other, rtol, atol) & ~isclose(device_out, reference, rtol, atol)
    if not bool(np.any(takes_other)):
        return reference
    return PArray(reference.dtype, np.where(takes_other, other.data, reference.data))


def either_per_element(elementwise: bool, sample, reference, device_out, atol, rtol,
                       unsettled: list | None):
    """edges.either_per_element on the recorded scalar-loop answers (`scalar`, `scalar_ok`:
    whether the one-element call gave one tensor) and operand values (`operands`). A sample
    too large to have recorded them, where they are asked, raises Unsupported (the op_db run
    decides)."""
    if not elementwise or not all(isinstance(t, PArray) for t in (reference, device_out)) \
            or reference.shape != device_out.shape or reference.dtype != device_out.dtype \
            or reference.dtype not in FLOATING or reference.data.size == 0:
        return reference
    rtol, atol = _tolerance(reference.dtype, atol, rtol)
    wrong = np.argwhere(~isclose(device_out, reference, rtol, atol))
    if not len(wrong) or len(wrong) > MAX_SCALAR_CALLS:
        return reference
    extra = getattr(sample, "extra", None) or {}
    scalar = extra.get("scalar")
    if scalar == "no broadcast":
        return reference
    if not isinstance(scalar, PArray):
        raise Unsupported("the scalar loop's answers of a reference input too large to record")
    ok, operands = extra["scalar_ok"].data, extra["operands"].data
    merged = reference.data.copy()
    ref_values = widened(reference)
    for index in wrong.tolist():
        at = tuple(index)
        if not bool(ok[at]):
            return reference
        value = PArray(reference.dtype, np.asarray(scalar.data[at]))
        device = PArray(device_out.dtype, np.asarray(device_out.data[at]))
        if bool(isclose(device, value, rtol, atol)):
            merged[at] = scalar.data[at]
            if unsettled is not None:
                shown = tuple(float(operands[(k,) + at]) for k in range(operands.shape[0]))
                unsettled.append((shown if len(shown) > 1 else shown[0], float(ref_values[at]),
                                  float(widened(value))))
    return PArray(reference.dtype, merged)


def either_flushed(sample, reference, device_out, atol, rtol, flushed: list | None):
    """edges.either_flushed on the recorded answer on the flushed inputs (`flushed`)."""
    other = (getattr(sample, "extra", None) or {}).get("flushed")
    if other is None or not all(isinstance(t, PArray) for t in (reference, device_out)) \
            or reference.shape != other.shape or device_out.shape != reference.shape \
            or device_out.dtype != reference.dtype:
        return reference
    rtol, atol = _tolerance(reference.dtype, atol, rtol)
    take = isclose(device_out, other, rtol, atol) & ~isclose(device_out, reference, rtol, atol)
    if not bool(np.any(take)):
        return reference
    if flushed is not None:
        a, b = widened(reference), widened(other)
        flushed.extend((a[at].item(), b[at].item()) for at in map(tuple, np.argwhere(take)))
    return PArray(reference.dtype, np.where(take, other.data, reference.data))
