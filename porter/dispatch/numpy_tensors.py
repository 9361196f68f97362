"""Tensors as numpy sees them, and upstream's comparison on them, without importing torch: the
portable arrays.

A warm `porter test --device emulate` (porter.harness.cached_run) loads its samples and CPU
references from the reference cache and must not pay ~1.5 s for `import torch`; this module is
what it computes with instead, and what the emulator runs its kernels on there
(porter.emulate.numpy_run). `PArray` is a tensor's dtype name (torch's spelling) and its
values; bfloat16, which numpy lacks, is kept as its uint16 bit pattern and widened to float32
(exactly) for arithmetic, narrowed with round-to-nearest-even as c10::BFloat16 does.

`compare` mirrors `TestCase.assertEqual(actual, expected, atol=, rtol=)` with the
`precision` / `rel_tol` floors on two strided tensors: shape, then dtype, then
`torch.isclose` computed in the tensors' own dtype (half and bfloat16 arithmetic rounded per
operation, as torch's CPU kernels do), and torch's mismatch message. `max_errors` mirrors the
op_db run's `_update_errors` (float64 / complex128). A test runs every op of the real-size
tree's kernel files both ways and compares the tables.

Only `from_torch` imports torch, and only the cold path (which has it loaded) calls it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

NUMPY = {
    "bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "float16": np.float16, "bfloat16": np.uint16, "float32": np.float32,
    "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128,
}
FLOATING = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex64", "complex128")
# torch.testing's default (rtol, atol) per dtype; every other dtype compares exactly
DEFAULT_TOLERANCES = {
    "float16": (0.001, 1e-5), "bfloat16": (0.016, 1e-5), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7), "complex32": (0.001, 1e-5), "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


class Unsupported(Exception):
    """Something here cannot be done without torch (a dtype numpy lacks, an exotic value):
    the caller runs the op the ordinary way."""


@dataclass(frozen=True)
class PArray:
    dtype: str          # torch dtype name: "float32", "bfloat16", ...
    data: np.ndarray    # C-contiguous values; bfloat16 as uint16 bits
    # a strided view's layout (porter.harness.shapes' samples): (its storage from the first
    # element on, 1-D, in `dtype`'s numpy type; its strides in elements). `data` holds its values
    # all the same; the emulator sends the storage and strides, as it sends a torch view's
    layout: tuple | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def itemsize(self) -> int:
        return self.data.dtype.itemsize


# ----------------------------------------------------------------- dtype conversions

def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round to nearest even, NaN to the canonical quiet NaN: c10::BFloat16(float)."""
    values = np.asarray(values, dtype=np.float32, order="C")
    bits = values.view(np.uint32)
    rounded = ((bits + (((bits >> 16) & 1) + np.uint32(0x7FFF))) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded).astype(np.uint16)


def strided(dtype: str, storage: np.ndarray, shape, strides) -> PArray:
    """The view `as_strided(shape, strides)` of `storage` (from its first element on)."""
    storage = np.ascontiguousarray(storage)
    item = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage, tuple(shape), tuple(s * item for s in strides),
                                           writeable=False) if storage.size else \
        np.empty(tuple(shape), dtype=storage.dtype)
    return PArray(dtype, np.ascontiguousarray(view), (storage, tuple(int(s) for s in strides)))


def torch_contiguous(shape, strides) -> bool:
    """Tensor.is_contiguous(): row-major strides, size-1 dims ignored (no elements: always)."""
    if any(n == 0 for n in shape):
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


def non_overlapping_and_dense(shape, strides) -> bool:
    """Whether the elements fill their span once each (Tensor.to keeps such a view's strides)."""
    dims = sorted((s, n) for n, s in zip(shape, strides) if n != 1)
    expected = 1
    for s, n in dims:
        if s != expected:
            return False
        expected *= n
    return True


def widened(a: PArray) -> np.ndarray:
    """Values numpy can compute with: bfloat16 as float32, everything else as is."""
    return bf16_to_f32(a.data) if a.dtype == "bfloat16" else a.data


def narrowed(values: np.ndarray, dtype: str) -> PArray:
    """`values` (any numpy dtype) converted to `dtype` as `Tensor.to(dtype)` converts."""
    if dtype not in NUMPY:
        raise Unsupported(f"no numpy dtype for {dtype}")
    if dtype == "bfloat16":
        return PArray(dtype, f32_to_bf16(values.astype(np.float32)))
    if dtype == "bool":
        return PArray(dtype, np.asarray(values != 0, order="C"))
    with np.errstate(all="ignore"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")        # complex -> real drops the imaginary part
            return PArray(dtype, np.asarray(values.astype(NUMPY[dtype]), order="C"))


def astype(a: PArray, dtype: str) -> PArray:
    return a if a.dtype == dtype else narrowed(widened(a), dtype)


def scalar(value, dtype: str) -> PArray:
    """`torch.tensor(value, dtype=dtype)` for a Python number."""
    if isinstance(value, complex) and dtype not in COMPLEX:
        raise Unsupported("complex scalar into a real dtype")
    return narrowed(np.asarray(value), dtype)


# ----------------------------------------------------------------- torch boundary (cold path only)

def from_torch(t) -> PArray:
    import torch
    name = str(t.dtype).removeprefix("torch.")
    if name not in NUMPY or t.layout != torch.strided or t.is_conj() or t.is_neg():
        raise Unsupported(f"tensor of dtype {name}")
    t = t.detach().cpu().contiguous()
    if name == "bfloat16":
        return PArray(name, t.view(torch.uint16).numpy().copy())
    return PArray(name, t.numpy().copy())


def real_part(a: PArray) -> PArray:
    """`out.real.clone()` of a complex result."""
    real = {"complex64": "float32", "complex128": "float64"}.get(a.dtype)
    if real is None:
        raise Unsupported(f"real part of {a.dtype}")
    return PArray(real, np.array(a.data.real, order="C"))


# ----------------------------------------------------------------- errors and comparison

def magnitude(values: np.ndarray) -> np.ndarray:
    """torch.abs: for complex, sqrt(re*re + im*im) in the tensor's precision (torch's CPU
    kernel; numpy's hypot differs in the last bit, which shows in messages)."""
    if values.dtype.kind != "c":
        return np.abs(values)
    re, im = values.real, values.imag
    return np.sqrt(re * re + im * im)


# max_errors runs its float64 passes over pieces of this many elements (1 MB an array), which
# stay in the CPU's cache from one pass to the next: over a whole million-element reference
# input (a wrong body's) each pass went to memory (float32: 13 ms a sample as written, 8 ms
# with fewer passes, 5 ms with them in pieces; bench figures in docs/measurements.md)
ERROR_PIECE = 1 << 17


def max_errors(expected: PArray, actual: PArray) -> tuple[float, float] | None:
    """(max abs, max rel) error as the runner's `_update_errors` computes them, or None when
    it records nothing (other shape, no elements)."""
    if expected.shape != actual.shape or expected.data.size == 0:
        return None
    if expected.dtype == actual.dtype and np.array_equal(expected.data, actual.data):
        # every element equal (a NaN is not, and takes the long way): no error anywhere; a
        # passing kernel's samples, of up to a million elements each, end here
        return 0.0, 0.0
    e_all = np.asarray(widened(expected)).reshape(-1)
    a_all = np.asarray(widened(actual)).reshape(-1)
    if expected.dtype in COMPLEX or actual.dtype in COMPLEX:
        return _errors_as_written(e_all, a_all, np.complex128)
    found = [_real_errors(e_all[at:at + ERROR_PIECE], a_all[at:at + ERROR_PIECE])
             for at in range(0, e_all.size, ERROR_PIECE)]
    # np.max of the pieces' maxima: a NaN in any piece is the answer, as over the whole
    return tuple(float(np.max(np.array(column, dtype=np.float64))) for column in zip(*found))


def _real_errors(e: np.ndarray, a: np.ndarray) -> tuple[float, float]:
    """_errors_as_written's answer on real values, in fewer passes. Where no |a - e| is NaN,
    an element is `same` (equal, or NaN both) exactly where its |a - e| is 0: finite values
    subtract to 0 only when equal (subnormals are not flushed here), and an infinite one, or a
    NaN, leaves a non-zero or a NaN. So no mask is needed for the absolute error, and the
    relative one is masked where that error is 0. Any NaN: the masks as written."""
    with np.errstate(all="ignore"):
        ew = e.astype(np.float64)
        diff = a.astype(np.float64)
        np.abs(np.subtract(diff, ew, out=diff), out=diff)
        worst = diff.max()
        if np.isnan(worst):
            return _errors_as_written(e, a, np.float64)
        rel = np.divide(diff, np.abs(ew, out=ew), out=ew)
        np.putmask(rel, diff == 0, 0)
        return float(worst), float(rel.max())


def _errors_as_written(e_values, a_values, wide) -> tuple[float, float]:
    """max_errors' (max abs, max rel) on widened values, computed as the runner writes it: an
    element equal on both sides (NaN on both counts) has no error."""
    with np.errstate(all="ignore"):
        # arrays of their own (`data` may be a numpy scalar), written in place below
        e = np.array(e_values, dtype=wide)
        a = np.array(a_values, dtype=wide)
        same = e == a
        same |= np.isnan(e) & np.isnan(a)
        if wide is np.complex128:
            diff = np.where(same, 0, magnitude(a - e))
            rel = np.where(same, 0, diff / magnitude(e))
        else:            # the same values computed in place: fewer arrays of a million
            diff = np.abs(np.subtract(a, e, out=a), out=a)
            np.putmask(diff, same, 0)
            rel = np.divide(diff, np.abs(e, out=e), out=e)
            np.putmask(rel, same, 0)
    return float(np.max(diff)), float(np.max(rel))


def _op(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round a float32 intermediate to `dtype`, as one torch CPU op on `dtype` does; the
    rounded values stay float32 (each exact there)."""
    if dtype == "float16":
        return _f16_rounded(values)
    if dtype == "bfloat16":
        return _bf16_rounded(values)
    return values


def _f16_rounded(values: np.ndarray) -> np.ndarray:
    """values.astype(float16).astype(float32) in float32 arithmetic, bit for bit: numpy
    converts to float16 one element at a time, and a float16 row's comparisons were its
    reference rows' slowest (docs/measurements.md). Adding then subtracting
    1.5 * 2**(e + 13), e the value's exponent held within half's (-14 to 16), rounds it to
    nearest even at half's step there, 2**(e - 10), subnormal halves included; scaling by
    2**112 and back makes a sum past half's largest, 65504, (from the midpoint 65520 on)
    infinite; the sign goes back on last (a value that rounds to zero keeps it). No branch, no
    masked store: both were slower than these six passes."""
    values = np.asarray(values, dtype=np.float32)
    flat = values.reshape(-1)               # a 0-d array's arithmetic gives numpy scalars
    bits = flat.view(np.uint32)
    exponent = (bits >> np.uint32(23)) & np.uint32(0xFF)
    np.clip(exponent, np.uint32(127 - 14), np.uint32(127 + 16), out=exponent)
    shift = ((exponent + np.uint32(13)) << np.uint32(23) | np.uint32(0x400000)).view(np.float32)
    with np.errstate(all="ignore"):
        out = flat + shift
        out -= shift
        out *= np.float32(2.0 ** 112)
        out *= np.float32(2.0 ** -112)
    sign = out.view(np.uint32)
    sign |= bits & np.uint32(0x80000000)
    return out.reshape(values.shape)


def _bf16_rounded(values: np.ndarray) -> np.ndarray:
    """bf16_to_f32(f32_to_bf16(values)) without the uint16 round trip (a third less time on a
    million elements): round to nearest even on the float32 bits, NaN the canonical quiet
    NaN."""
    values = np.asarray(values, dtype=np.float32)
    flat = values.reshape(-1)               # a 0-d array's arithmetic gives numpy scalars
    bits = flat.view(np.uint32)
    rounded = bits + ((bits >> 16) & np.uint32(1)) + np.uint32(0x7FFF)
    rounded &= np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    nan = np.isnan(flat)
    if nan.any():
        out[nan] = np.uint32(0x7FC00000).view(np.float32)
    return out.reshape(values.shape)


def _compute_dtype(dtype: str):
    # half and bfloat16 compute in float (opmath) and round after every op
    return {"float16": np.float32, "bfloat16": np.float32}.get(dtype)


def isclose(actual: PArray, expected: PArray, rtol: float, atol: float) -> np.ndarray:
    """torch.isclose(actual, expected, rtol, atol, equal_nan=True) on same-dtype arrays."""
    dtype = actual.dtype
    a, e = widened(actual), widened(expected)
    if dtype == "float16":          # exact in float32, whose comparisons numpy vectorizes
        a, e = a.astype(np.float32), e.astype(np.float32)
    with np.errstate(all="ignore"):
        close = a == e
        if dtype in FLOATING or dtype in COMPLEX:
            close = close | (np.isnan(a) & np.isnan(e))
        if rtol == 0 and atol == 0:
            return close
        if dtype == "bool":          # torch computes the error of bools in the default dtype
            a, e, dtype = a.astype(np.float32), e.astype(np.float32), "float32"
        if dtype in ("float16", "bfloat16"):
            a32, e32 = a.astype(np.float32, copy=False), e.astype(np.float32, copy=False)
            # `atol + tensor` takes atol in the tensor's dtype (a wrapped number is cast to the
            # common dtype); `rtol * tensor` keeps rtol's value (review 80's F5: with atol in
            # float32, bfloat16 pairs torch calls apart were close here)
            atol_in_dtype = _op(np.asarray(atol, dtype=np.float32), dtype)
            allowed = _op(np.abs(_op(np.float32(rtol) * e32, dtype)) + atol_in_dtype, dtype)
            actual_error = np.abs(_op(a32 - e32, dtype))
        elif dtype in ("float32", "complex64"):
            real = np.float32
            allowed = magnitude(real(rtol) * e) + real(atol)
            actual_error = magnitude(a - e)
        elif dtype in ("float64", "complex128"):
            allowed = magnitude(rtol * e) + atol
            actual_error = magnitude(a - e)
        else:                        # integers: `rtol * other` promotes to the default dtype
            allowed = np.abs(np.float32(rtol) * e.astype(np.float32)) + np.float32(atol)
            # assertEqual promotes integers to int64 before isclose: int8 127 and -128 are 255
            # apart, not -1 (and uint8 127 and 128 are 1 apart, not 255)
            actual_error = np.abs(a.astype(np.int64) - e.astype(np.int64)).astype(np.float32)
        return close | (np.isfinite(actual_error) & (actual_error <= allowed))


# isclose over a large array in pieces of this many elements, where a question stops at the
# first pieces that answer it (a wrong kernel's million-element sample fails in its first)
CLOSE_PIECE = 1 << 16


def not_close(actual: PArray, expected: PArray, rtol: float, atol: float,
              enough: int | None = None) -> tuple[int, np.ndarray | None]:
    """(how many elements are not `isclose`, where they are: a bool array of `actual`'s shape),
    on same-shape, same-dtype arrays. `enough`: once more than that many are counted, the count
    so far and None (the rest is not looked at). isclose is elementwise, so its pieces answer
    as the whole does."""
    size = actual.data.size
    if size <= CLOSE_PIECE:
        bad = ~isclose(actual, expected, rtol, atol)
        count = int(np.count_nonzero(bad))
        return (count, None) if enough is not None and count > enough else \
            (count, np.asarray(bad).reshape(actual.data.shape))
    flat_a, flat_e = actual.data.reshape(-1), expected.data.reshape(-1)
    pieces, count = [], 0
    for start in range(0, size, CLOSE_PIECE):
        piece = ~isclose(PArray(actual.dtype, flat_a[start:start + CLOSE_PIECE]),
                         PArray(expected.dtype, flat_e[start:start + CLOSE_PIECE]), rtol, atol)
        count += int(np.count_nonzero(piece))
        if enough is not None and count > enough:
            return count, None
        pieces.append(piece)
    return count, np.concatenate(pieces).reshape(actual.data.shape)


def _size(shape) -> str:
    return f"torch.Size([{', '.join(str(s) for s in shape)}])"


def _item(a: PArray, flat_index: int):
    value = widened(a).reshape(-1)[flat_index]
    return value.item()


BRIEF = "Tensor-likes are not close!"     # `compare(..., brief=True)`'s failure


def compare(actual: PArray, expected: PArray, atol: float | None, rtol: float | None,
            floors: tuple[float, float] = (0.0, 0.0), brief: bool = False) -> str | None:
    """The AssertionError text of `TestCase.assertEqual(actual, expected, atol=, rtol=)` with
    `precision, rel_tol = floors`, or None when they are equal; `brief`: its first line alone
    where the values differ (composing the rest is most of a failing comparison's time)."""
    if actual.shape != expected.shape:
        return (f"The values for attribute 'shape' do not match: {_size(actual.shape)} != "
                f"{_size(expected.shape)}.")
    if actual.dtype != expected.dtype:
        return (f"The values for attribute 'dtype' do not match: torch.{actual.dtype} != "
                f"torch.{expected.dtype}.")
    if np.array_equal(actual.data, expected.data):
        return None             # equal everywhere: isclose holds at any tolerance
    if rtol is None or atol is None:
        rtol, atol = DEFAULT_TOLERANCES.get(actual.dtype, (0.0, 0.0))
    precision, rel_tol = floors
    rtol, atol = max(rtol, rel_tol), max(atol, precision)
    if brief:
        # whether any element is not close, and no more: the first piece with one answers
        return BRIEF if not_close(actual, expected, rtol, atol, enough=0)[0] else None
    matches = isclose(actual, expected, rtol, atol)
    if bool(np.all(matches)):
        return None
    if actual.shape == ():
        return _scalar_message(_item(actual, 0), _item(expected, 0), rtol, atol)
    return _tensor_message(actual, expected, matches, rtol, atol)


def _message(identifier: str, extra: str, abs_diff, abs_idx, atol, rel_diff, rel_idx, rtol) -> str:
    equality = rtol == 0 and atol == 0

    def diff_msg(kind, diff, idx, tol):
        msg = f"{kind.title()} difference: {diff}" if idx is None else \
            f"Greatest {kind} difference: {diff} at index {idx}"
        return msg + ("" if equality else f" (up to {tol} allowed)") + "\n"

    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n{extra.strip()}\n"
    msg += diff_msg("absolute", abs_diff, abs_idx, atol)
    msg += diff_msg("relative", rel_diff, rel_idx, rtol)
    return msg.strip()


def _scalar_message(actual, expected, rtol, atol) -> str:
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _message("Scalars", f"Expected {expected} but got {actual}.", abs_diff, None, atol,
                    rel_diff, None, rtol)


def _tensor_message(actual: PArray, expected: PArray, matches: np.ndarray, rtol, atol) -> str:
    total = matches.size
    mismatched = total - int(np.sum(matches))
    extra = f"Mismatched elements: {mismatched} / {total} ({mismatched / total:.1%})"
    dtype = actual.dtype
    a, e = widened(actual).reshape(-1), widened(expected).reshape(-1)
    flat_matches = matches.reshape(-1)
    with np.errstate(all="ignore"):
        if dtype in FLOATING or dtype in COMPLEX:
            compute = _compute_dtype(dtype)
            if compute is not None:
                abs_diff = np.abs(_op(a.astype(compute) - e.astype(compute), dtype))
                abs_diff = np.where(flat_matches, np.float32(0), abs_diff)
                rel_diff = _op(abs_diff / np.abs(e.astype(compute)), dtype)
            else:
                abs_diff = magnitude(a - e)
                abs_diff = np.where(flat_matches, abs_diff.dtype.type(0), abs_diff)
                rel_diff = abs_diff / magnitude(e)
        else:                        # integers and bools are compared as int64
            abs_diff = np.abs(a.astype(np.int64) - e.astype(np.int64))
            abs_diff = np.where(flat_matches, np.int64(0), abs_diff)
            # int64 / int64 is true division in the default dtype
            rel_diff = abs_diff.astype(np.float32) / np.abs(e.astype(np.int64)).astype(np.float32)
        rel_diff = np.where(flat_matches, rel_diff.dtype.type(0), rel_diff)
    abs_idx, rel_idx = _argmax(abs_diff), _argmax(rel_diff)
    return _message("Tensor-likes", extra, abs_diff[abs_idx].item(), unravel(abs_idx, matches.shape),
                    atol, rel_diff[rel_idx].item(), unravel(rel_idx, matches.shape), rtol)


def _argmax(values: np.ndarray) -> int:
    """torch.max(values, 0)'s index: the first NaN if any, else the first maximum."""
    nan = np.flatnonzero(np.isnan(values)) if values.dtype.kind in "fc" else ()
    return int(nan[0]) if len(nan) else int(np.argmax(values))


def unravel(flat: int, shape) -> tuple[int, ...]:
    """A flat index's coordinates in `shape` (row-major), as torch's messages give them."""
    out = []
    for size in reversed(shape):
        flat, mod = divmod(flat, size)
        out.append(mod)
    return tuple(reversed(out))
