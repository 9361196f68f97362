"""porter.harness.edges' two-way answers on a cached reference-input sample, without the op
database (and without torch but for one case, below).

torch's CPU answers some edge values two ways (its vectorized loop over a large tensor, its
scalar loop one element at a time: hardshrink_backward at a NaN `self`), and a Mac's reference
runs either, so the op_db run passes a kernel matching either (`edges.either`,
`edges.either_per_element`). Those ask torch for the scalar loop's answer; the recording run
(porter.harness.opinfo_run._reference_extras) asked it for every element of each reference
input and stored it beside the sample (`other`, `scalar`), so the cached run
(porter.harness.cached_run) decides the same way here, on numpy arrays. A sample too large to
have recorded every element's answer has the recorded function of the op asked about the
mismatching elements alone, with torch (a body wrong at a few elements: 6 s a cycle, where the
op_db run it fell back to took 14 s).
"""

from __future__ import annotations

import numpy as np

from porter.dispatch.numpy_tensors import (FLOATING, PArray, Unsupported, from_torch, isclose,
                                           not_close, widened)
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
                       unsettled: list | None, callable_name: str | None = None):
    """edges.either_per_element on the recorded scalar-loop answers (`scalar`, `scalar_ok`:
    whether the one-element call gave one tensor) and operand values (`operands`). A sample
    too large to have recorded them asks torch's scalar loop now for its mismatching elements
    (`callable_name`: the op's function, as the recording run named it); where that cannot
    be done it raises Unsupported (the op_db run decides)."""
    if not elementwise or not all(isinstance(t, PArray) for t in (reference, device_out)) \
            or reference.shape != device_out.shape or reference.dtype != device_out.dtype \
            or reference.dtype not in FLOATING or reference.data.size == 0:
        return reference
    rtol, atol = _tolerance(reference.dtype, atol, rtol)
    # counted first, and only as far as the limit: a wrong body's million indices, unlisted
    count, bad = not_close(device_out, reference, rtol, atol, enough=MAX_SCALAR_CALLS)
    if not count or bad is None:
        return reference
    wrong = np.argwhere(bad)
    extra = getattr(sample, "extra", None) or {}
    scalar = extra.get("scalar")
    if scalar == "no broadcast":
        return reference
    # all at once, as edges.either_per_element asks each element in turn (in this order), on
    # flat views (a 0-d sample too)
    at = np.ravel_multi_index(tuple(wrong.T), reference.data.shape) if reference.data.ndim else \
        np.zeros(1, dtype=np.intp)
    if isinstance(scalar, PArray):
        if not bool(np.all(extra["scalar_ok"].data.reshape(-1)[at])):
            return reference                # an element the scalar loop gave no answer for
        values = PArray(reference.dtype, scalar.data.reshape(-1)[at])
        operands = extra["operands"].data
        shown_all = operands.reshape(operands.shape[0], -1)[:, at]
    elif scalar == "too large" and callable_name and "mac_loops" in extra:
        # too large to have recorded every element's answer: ask torch's scalar loop for the
        # mismatching ones now, as the op_db run does (torch, not the op database)
        asked = _ask_scalar_loop(callable_name, sample, reference, wrong, extra["mac_loops"])
        if asked is None:
            return reference                # an element the scalar loop gave no answer for
        values, shown_all = asked
    else:
        raise Unsupported("the scalar loop's answers of a reference input too large to record")
    taken = isclose(PArray(device_out.dtype, device_out.data.reshape(-1)[at]), values, rtol, atol)
    merged = reference.data.copy()
    merged.reshape(-1)[at[taken]] = values.data[taken]
    if unsettled is not None and bool(np.any(taken)):
        shown = shown_all[:, taken]
        ref_values = widened(reference).reshape(-1)[at[taken]]
        scalar_values = widened(values)[taken]
        for k in range(len(ref_values)):
            one = tuple(float(v) for v in shown[:, k])
            unsettled.append((one if len(one) > 1 else one[0], float(ref_values[k]),
                              float(scalar_values[k])))
    return PArray(reference.dtype, merged)


def _ask_scalar_loop(callable_name: str, sample, reference: PArray, wrong, mac_loops: bool):
    """(the scalar loop's answers at `wrong`, in reference's dtype; the operands' values there,
    one row per operand), as edges.one_element_answer computes them; None where an element
    has no one-element answer. Unsupported where torch cannot be given the sample."""
    import contextlib
    import warnings
    from types import SimpleNamespace

    import torch

    from porter.harness import edges

    try:
        op = edges.find_callable(callable_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise Unsupported(f"the op's function {callable_name}: {exc}") from None
    sample_t = SimpleNamespace(input=_to_torch(sample.input),
                               args=[_to_torch(a) for a in sample.args],
                               kwargs={k: _to_torch(v) for k, v in sample.kwargs.items()})
    broadcast = edges.broadcast_operands(sample_t, tuple(reference.shape))
    if broadcast is None:
        return None
    operands, positions = broadcast
    target = getattr(torch, reference.dtype)
    values, shown = [], []
    with warnings.catch_warnings(), \
            (edges.without_onednn() if mac_loops else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        for index in wrong.tolist():
            one, scalar = edges.one_element_answer(op, sample_t, operands, positions, tuple(index))
            if scalar is None:
                return None
            values.append(scalar.to(target))
            shown.append([float(t.reshape(())) for t in one])
    shown_rows = np.asarray(shown, dtype=np.float64).T.reshape(len(operands), -1)
    return from_torch(torch.stack(values)), shown_rows


def _to_torch(value):
    """A sample's numpy array (porter.dispatch.numpy_tensors.PArray) as a torch tensor; any
    other value as it is."""
    if not isinstance(value, PArray):
        if isinstance(value, (list, tuple)):
            return type(value)(_to_torch(v) for v in value)
        return value
    import torch
    # a row --watch holds is read-only (refcache.held_rows): torch gets a copy, which the op
    # may write, and no warning that differs from a plain run's output (review 80's F6)
    data = np.ascontiguousarray(value.data)       # a 0-d array as one element, either way
    if not data.flags.writeable:
        data = data.copy()
    if value.dtype == "bfloat16":
        return torch.from_numpy(data).view(torch.bfloat16)
    if value.dtype not in _TORCH_NAMES:
        raise Unsupported(f"a {value.dtype} operand for torch")
    return torch.from_numpy(data)


# the numpy-backed dtypes torch.from_numpy takes as they are
_TORCH_NAMES = frozenset({"bool", "uint8", "int8", "int16", "int32", "int64", "float16",
                          "float32", "float64", "complex64", "complex128"})


def either_flushed(sample, reference, device_out, atol, rtol, flushed: list | None):
    """edges.either_flushed on the recorded answer on the flushed inputs (`flushed`)."""
    merged, other, take = _take_recorded("flushed", sample, reference, device_out, atol, rtol)
    if take is not None and flushed is not None:
        a, b = widened(reference), widened(other)
        flushed.extend((a[at].item(), b[at].item()) for at in map(tuple, np.argwhere(take)))
    return merged
