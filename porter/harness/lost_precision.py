"""Lost precision: what upstream's absolute tolerance lets pass on porter's reference inputs.

Upstream's `assertEqual` takes |device - cpu| <= atol + rtol * |cpu|, with atol 1e-5 for
float32: a kernel that answers 0 where the CPU answers 1.5e-12 passes, relative error 1. On the
reference inputs (large arguments, subnormals, the dtype's limits) that is a real bug: erfc's
Metal kernel returned 0 above x ~ 3.9 (pytorch#187806) and passed. So on the reference-input rows
only, after upstream's comparison passes, an element fails as "lost precision" where the CPU's
value is a normal number of the dtype (finite, at least its smallest normal in magnitude) and the
device's is zero (flushed) or of the other sign (flipped). Upstream's samples keep upstream's
tolerances: a Mac's test judges those.

numpy only (porter.dispatch.numpy_tensors), so the op_db run and the cached run decide alike.
"""

from __future__ import annotations

import numpy as np

from porter.dispatch import numpy_tensors as portable

# the smallest normal value of each floating dtype (torch.finfo(dtype).tiny)
SMALLEST_NORMAL = {"float16": 6.103515625e-05, "bfloat16": 1.1754943508222875e-38,
                   "float32": 1.1754943508222875e-38, "float64": 2.2250738585072014e-308}
WORDS = "lost precision"


def _portable(value):
    if isinstance(value, portable.PArray):
        return value
    if type(value).__module__.startswith("torch") and hasattr(value, "dtype"):
        try:
            return portable.from_torch(value.detach())
        except portable.Unsupported:
            return None
    return None


# how near the float64 value the CPU's must be for the CPU to be trusted over the device
CPU_AGREES_REL = 1e-2


def lost(expected, actual, wide=None, flushed=None):
    """The flat mask of the elements where `expected` (the CPU's) is a normal number and
    `actual` (the device's) is zero or of the other sign; None where there is nothing to judge
    (not one floating tensor each, or another shape or dtype). `wide`: the op's float64 value
    of the same inputs (porter's reference inputs): an element is judged only where the CPU's
    value is within CPU_AGREES_REL of it, since a value whose true answer is 0 (sinc at an
    integer: sin of a rounded 3*pi) gives the CPU a tiny normal number of its own rounding, and
    a kernel answering 0 there is not the one that is off."""
    expected, actual = _portable(expected), _portable(actual)
    if expected is None or actual is None or expected.dtype not in SMALLEST_NORMAL \
            or expected.dtype != actual.dtype or expected.shape != actual.shape:
        return None
    # only an element whose value differs can be lost: an equal one is zero where the CPU's is
    # (not a normal number) and of its sign. Those alone are widened (a passing kernel's
    # reference rows are millions of elements, nearly all equal)
    size = int(np.prod(expected.shape, dtype=np.int64))
    found = np.zeros(size, dtype=bool)
    at = np.flatnonzero(expected.data.reshape(-1) != actual.data.reshape(-1))
    if not at.size:
        return found
    e, a = (np.asarray(portable.widened(portable.PArray(t.dtype, t.data.reshape(-1)[at])),
                       dtype=np.float64) for t in (expected, actual))
    normal = np.isfinite(e) & (np.abs(e) >= SMALLEST_NORMAL[expected.dtype])
    zero = a == 0
    flipped = ~np.isnan(a) & (np.signbit(a) != np.signbit(e))
    hit = normal & (zero | flipped)
    w = _wide(wide, (size,))
    if w is not None:
        with np.errstate(invalid="ignore"):         # inf - inf where both are infinite
            hit &= np.abs(e - w[at]) <= CPU_AGREES_REL * np.abs(w[at])
    # the CPU's answer on the inputs as an Apple GPU reads them (subnormals as zero): a device
    # that gives it cannot see the subnormal, and lost nothing (sqrt(1e-40) is 1e-20, sqrt(0) 0)
    f = _portable(flushed)
    if f is not None and f.shape == expected.shape:
        hit &= ~(np.asarray(portable.widened(portable.PArray(f.dtype, f.data.reshape(-1)[at])),
                            dtype=np.float64) == a)
    found[at] = hit
    return found


def _wide(wide, shape):
    if wide is None:
        return None
    if not isinstance(wide, np.ndarray):
        p = _portable(wide)
        if p is None or p.dtype != "float64":
            return None
        wide = p.data
    wide = np.asarray(wide, dtype=np.float64).reshape(-1)
    return wide if wide.shape == shape else None


def check(expected, actual, wide=None, flushed=None) -> tuple[str, object] | None:
    """(the one-line failure, the mask) when an element lost its precision, else None;
    `flushed`: the CPU's answer on the flushed inputs (edges.flushed_reference), or None."""
    mask = lost(expected, actual, wide, flushed)
    if mask is None or not mask.any():
        return None
    e = np.asarray(portable.widened(_portable(expected)), dtype=np.float64).reshape(-1)
    a = np.asarray(portable.widened(_portable(actual)), dtype=np.float64).reshape(-1)
    first = int(np.flatnonzero(mask)[0])
    how = "lost to zero" if a[first] == 0 else "of the other sign"
    return (f"{WORDS}: {int(mask.sum())} element(s) whose CPU value is a normal number and "
            f"whose device value is zero or of the other sign (upstream's tolerance passes them; "
            f"porter's reference inputs do not): first at flat index {first}: cpu {e[first]:.6g}, "
            f"device {a[first]:.6g} ({how})"), mask


def side_kept(value: float, exact: float, dtype: str) -> bool:
    """Whether `value` keeps the float64 value `exact`: the mismatch table's "within" of a
    lost-precision row (the side that is not flushed nor flipped against float64)."""
    if not np.isfinite(exact) or abs(exact) < SMALLEST_NORMAL.get(dtype, 0.0):
        return True
    return value != 0 and bool(np.signbit(value) == np.signbit(exact))
