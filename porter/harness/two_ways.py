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


def _take_recorded(key: str, sample, reference, device_out, atol, rtol):
    """(`reference` with the answer the recording run stored under `key` wherever the device
    matches that one and not `reference`, the mask taken, or None where nothing was taken)."""
    other = (getattr(sample, "extra", None) or {}).get(key)
    if other is None or not all(isinstance(t, PArray) for t in (reference, device_out)) \
            or reference.shape != other.shape or device_out.shape != reference.shape \
            or device_out.dtype != reference.dtype:
        return reference, None, None
    rtol, atol = _tolerance(reference.dtype, atol, rtol)
    take = isclose(device_out, other, rtol, atol) & ~isclose(device_out, reference, rtol, atol)
    if not bool(np.any(take)):
        return reference, None, None
    return PArray(reference.dtype, np.where(take, other.data, reference.data)), other, take


def either(sample, reference, device_out, atol, rtol):
    """edges.either: `reference` with the scalar loop's answer (recorded as `other`) wherever
    the device matches that one and not the other."""
    return _take_recorded("other", sample, reference, device_out, atol, rtol)[0]


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
    # all at once, as edges.either_per_element asks each element in turn (in this order), on
    # flat views (a 0-d sample too)
    at = np.ravel_multi_index(tuple(wrong.T), reference.data.shape) if reference.data.ndim else \
        np.zeros(1, dtype=np.intp)
    if not bool(np.all(extra["scalar_ok"].data.reshape(-1)[at])):
        return reference                    # an element the scalar loop gave no answer for
    values = PArray(reference.dtype, scalar.data.reshape(-1)[at])
    taken = isclose(PArray(device_out.dtype, device_out.data.reshape(-1)[at]), values, rtol, atol)
    merged = reference.data.copy()
    merged.reshape(-1)[at[taken]] = values.data[taken]
    if unsettled is not None and bool(np.any(taken)):
        operands = extra["operands"].data
        shown = operands.reshape(operands.shape[0], -1)[:, at[taken]]
        ref_values = widened(reference).reshape(-1)[at[taken]]
        scalar_values = widened(values)[taken]
        for k in range(len(ref_values)):
            one = tuple(float(v) for v in shown[:, k])
            unsettled.append((one if len(one) > 1 else one[0], float(ref_values[k]),
                              float(scalar_values[k])))
    return PArray(reference.dtype, merged)


def either_flushed(sample, reference, device_out, atol, rtol, flushed: list | None):
    """edges.either_flushed on the recorded answer on the flushed inputs (`flushed`)."""
    merged, other, take = _take_recorded("flushed", sample, reference, device_out, atol, rtol)
    if take is not None and flushed is not None:
        a, b = widened(reference), widened(other)
        flushed.extend((a[at].item(), b[at].item()) for at in map(tuple, np.argwhere(take)))
    return merged
