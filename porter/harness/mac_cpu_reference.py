"""The CPU reference a Mac computes where it is not this machine's.

upstream's test_output_match compares the MPS answer with the CPU's, on the Mac. For most ops
the two CPUs agree within tolerance, so the CPU here stands in for the Mac's. Not for the
complex inverse trigonometric and hyperbolic functions: torch's CPU calls `std::asinh` (and
friends) of a `std::complex<float>`, which on Linux is glibc's casinhf (accurate) and on a
Mac libc++'s textbook formula in float, `log(z + sqrt(z*z + 1))`. That formula cancels when
the real part is negative (asinh(-6.8+8.3i) is off by twice torch's default complex64
tolerance; asinh(-501-501i) by 5%) and overflows beyond |z| ~ 1.8e19. An accurate kernel can
then be green here and red on a Mac.

This module computes libc++'s value step by step in float32 (libc++'s <complex>: asinh,
acosh, atanh, and asin, acos, atan through them; its complex division with the fused
multiply-adds clang makes on a Mac). Off a Mac:
- upstream's samples (what a Mac's test sends) hold the kernel to both references: a row the
  two put farther apart than the tolerance is red, since a Mac compares with libc++'s value;
- porter's own reference inputs are held to the exact value (numpy's complex128) on every
  platform, a Mac included: libc++'s value is no answer there, and judging them alike keeps
  a Mac and this machine agreeing. The report counts the rows where libc++ departs from it.
Only finite inputs are modelled; the special values (inf, NaN) follow C99 Annex G in both
libraries, so the local reference stands for them.
"""

from __future__ import annotations

import numpy as np

_F = np.float32
DTYPES = ("complex64",)      # those libc++'s complex<float> formulas compute


def model(op: str, dtype: str):
    """The Mac's CPU reference of `op` on `dtype` as a function of the input's values (a
    numpy complex64 array to one), or None where this machine's CPU stands in for it."""
    if dtype not in DTYPES:
        return None
    return _MODELS.get(op)


def departs(op: str) -> list[str]:
    """The dtypes (as the reference's dtype names) whose samples `for_arrays` holds to a Mac's
    CPU reference here: recorded with a cached OpInfo, so that a cached run of any other op
    never asks (this module is in the reference cache's key)."""
    return [] if _here_is_a_mac() or op not in _MODELS else list(DTYPES)


def describe(op: str) -> str:
    """What the Mac's CPU computes, for messages."""
    return f"a Mac's CPU reference (libc++'s std::{op} of a complex<float>, {_FORMULAS[op]})"


def apply(op: str, values: np.ndarray, local: np.ndarray) -> np.ndarray:
    """The Mac's reference for `values`: libc++'s formula where every input is finite, the
    local reference elsewhere (both follow Annex G's special values)."""
    fn = _MODELS[op]
    z = np.asarray(values, dtype=np.complex64)
    shape, z = z.shape, z.reshape(-1)            # a 0-d sample as one row
    with np.errstate(all="ignore"):
        mac = fn(z.real.astype(_F), z.imag.astype(_F))
    out = np.array(local, dtype=np.complex64, copy=True).reshape(-1)
    finite = np.isfinite(z.real) & np.isfinite(z.imag)
    out[finite] = mac[finite]
    return out.reshape(shape)


# ---------------------------------------------------------------- libc++'s pieces, in float

def _abs(re, im):
    return np.hypot(re, im).astype(_F)


def _arg(re, im):
    return np.arctan2(im, re).astype(_F)


def _log(re, im):
    return np.log(_abs(re, im)).astype(_F), _arg(re, im)


def _sqrt(re, im):
    """libc++: polar(sqrt(abs(z)), arg(z) / 2), a NaN part of which becomes 0."""
    rho = np.sqrt(_abs(re, im)).astype(_F)
    theta = (_arg(re, im) / _F(2)).astype(_F)
    x = (rho * np.cos(theta).astype(_F)).astype(_F)
    y = (rho * np.sin(theta).astype(_F)).astype(_F)
    return np.where(np.isnan(x), _F(0), x), np.where(np.isnan(y), _F(0), y)


def _sqr(re, im):
    """libc++'s __sqr: ((re - im) * (re + im), 2 * re * im)."""
    return ((re - im) * (re + im)).astype(_F), (_F(2) * re * im).astype(_F)


def _fma(a, b, c):
    # clang contracts `a * b + c` in one expression (-ffp-contract=on, its default on a Mac):
    # the product of two floats is exact in double, so one rounding to float remains
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(_F)


def _div(a, b, c, d):
    """libc++'s operator/ of complex<float>: scaled by logb of the divisor (C99 Annex G)."""
    scale = np.maximum(np.abs(c), np.abs(d))
    logb = np.where(scale > 0, np.floor(np.log2(np.where(scale > 0, scale, 1))), 0).astype(int)
    c, d = np.ldexp(c, -logb).astype(_F), np.ldexp(d, -logb).astype(_F)
    denom = _fma(c, c, (d * d).astype(_F))
    x = np.ldexp((_fma(a, c, (b * d).astype(_F)) / denom).astype(_F), -logb).astype(_F)
    y = np.ldexp((_fma(b, c, -(a * d).astype(_F)) / denom).astype(_F), -logb).astype(_F)
    return x, y


def _asinh(re, im):
    sr, si = _sqr(re, im)
    qr, qi = _sqrt((sr + _F(1)).astype(_F), si)
    lr, li = _log((re + qr).astype(_F), (im + qi).astype(_F))
    return (np.copysign(lr, re) + 1j * np.copysign(li, im)).astype(np.complex64)


def _acosh(re, im):
    sr, si = _sqr(re, im)
    qr, qi = _sqrt((sr - _F(1)).astype(_F), si)
    lr, li = _log((re + qr).astype(_F), (im + qi).astype(_F))
    return (np.copysign(lr, _F(0)) + 1j * np.copysign(li, im)).astype(np.complex64)


def _atanh(re, im):
    x, y = _div((_F(1) + re).astype(_F), im, (_F(1) - re).astype(_F), (-im).astype(_F))
    lr, li = _log(x, y)
    out = (np.copysign((lr / _F(2)).astype(_F), re)
           + 1j * np.copysign((li / _F(2)).astype(_F), im)).astype(np.complex64)
    pole = (np.abs(re) == 1) & (im == 0)
    out[pole] = (np.copysign(np.inf, re[pole]) + 1j * np.copysign(0, im[pole])).astype(np.complex64)
    return out


def _asin(re, im):            # asinh(i z), rotated back
    z = _asinh((-im).astype(_F), re)
    return (z.imag - 1j * z.real).astype(np.complex64)


def _atan(re, im):            # atanh(i z), rotated back
    z = _atanh((-im).astype(_F), re)
    return (z.imag - 1j * z.real).astype(np.complex64)


def _acos(re, im):
    sr, si = _sqr(re, im)
    qr, qi = _sqrt((sr - _F(1)).astype(_F), si)
    lr, li = _log((re + qr).astype(_F), (im + qi).astype(_F))
    imag = np.where(np.signbit(im), np.abs(lr), -np.abs(lr))
    out = (np.abs(li) + 1j * imag).astype(np.complex64)
    axis = (re == 0) & (im == 0)
    out[axis] = (np.float32(np.pi / 2) - 1j * im[axis]).astype(np.complex64)
    return out


_MODELS = {"asinh": _asinh, "acosh": _acosh, "atanh": _atanh,
           "asin": _asin, "acos": _acos, "atan": _atan}
_FORMULAS = {"asinh": "log(z + sqrt(z*z + 1)) in float", "acosh": "log(z + sqrt(z*z - 1)) in float",
             "atanh": "log((1 + z) / (1 - z)) / 2 in float", "asin": "through asinh(i z) in float",
             "acos": "log(z + sqrt(z*z - 1)) in float", "atan": "through atanh(i z) in float"}


def _here_is_a_mac() -> bool:
    import sys
    return sys.platform == "darwin"       # the local CPU reference is already libc++'s


def _modelled(op: str, sample_input, reference) -> bool:
    import torch
    return isinstance(reference, torch.Tensor) and isinstance(sample_input, torch.Tensor) \
        and model(op, str(reference.dtype).removeprefix("torch.")) is not None \
        and sample_input.shape == reference.shape


def for_torch(op: str, sample_input, reference, reference_inputs: bool):
    """(the Mac's reference as a tensor like `reference`, what it is) for one of upstream's
    samples, or None where this machine's CPU reference stands for the Mac's (and for
    porter's reference inputs, held to the exact value instead: exact_reference)."""
    import torch
    if _here_is_a_mac() or reference_inputs or not _modelled(op, sample_input, reference):
        return None
    values = sample_input.detach().cpu().resolve_conj().resolve_neg().numpy()
    mac = apply(op, values, reference.detach().cpu().resolve_conj().numpy())
    return torch.from_numpy(mac).to(reference.device), describe(op)


def exact_reference(op: str, sample_input, reference, reference_inputs: bool):
    """(the reference, how many rows a Mac's CPU is off on, or None where the reference stays
    this machine's CPU's). porter's reference inputs (not upstream's samples: a Mac's test
    sends those and compares with its CPU) reach values where libc++'s float formula is no
    answer (asinh(-501-501i) cancels to 5% off; beyond |z| ~ 1.8e19 it is inf). They are held
    to the exact value (the op in complex128, rounded) on every platform, a Mac included, so a
    Mac and this machine judge them alike; the count of rows where a Mac's CPU departs from it
    beyond tolerance goes into the report."""
    import torch
    if not reference_inputs or not _modelled(op, sample_input, reference):
        return reference, None
    values = sample_input.detach().cpu().resolve_conj().resolve_neg().numpy()
    finite = np.asarray(np.isfinite(values.real) & np.isfinite(values.imag))
    exact = np.asarray(_exact(op, values))
    held = torch.from_numpy(exact.astype(np.complex64)).to(reference.device)
    out = reference.clone()
    mask = torch.from_numpy(finite).to(reference.device)
    out[mask] = held[mask]
    return out, int(np.sum(_off(op, values, exact)))


def _off(op: str, values: np.ndarray, exact: np.ndarray | None = None) -> np.ndarray:
    """Where libc++'s float value departs from the exact one (`exact`, where the caller has it)
    beyond complex64's default tolerance (atol 1e-5, rtol 1.3e-6, torch.testing's): the same
    rows on every platform."""
    z = np.asarray(values, dtype=np.complex64)
    shape, z = z.shape, z.reshape(-1)            # a 0-d sample as one row
    exact = _exact(op, z) if exact is None else np.asarray(exact).reshape(-1)
    with np.errstate(all="ignore"):
        mac = _MODELS[op](z.real.astype(_F), z.imag.astype(_F)).astype(np.complex128)
        finite = np.isfinite(z.real) & np.isfinite(z.imag)
        err = np.abs(mac - exact)
        close = (err <= 1e-5 + 1.3e-6 * np.abs(exact)) | (mac == exact)
    return (finite & ~close).reshape(shape)


def _exact(op: str, values: np.ndarray) -> np.ndarray:
    """The op in complex128 through numpy's C99 functions (casinh and friends: accurate on a
    Mac and here alike, unlike torch's complex128 on a Mac, which is libc++'s formula again)."""
    fn = {"asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "asin": np.arcsin,
          "acos": np.arccos, "atan": np.arctan}[op]
    with np.errstate(all="ignore"):
        return fn(np.asarray(values, dtype=np.complex128))


def for_arrays(op: str, sample_input, reference):
    """The same for a cached sample (porter.dispatch.numpy_tensors.PArray values)."""
    from porter.dispatch.numpy_tensors import PArray
    if _here_is_a_mac() or not isinstance(reference, PArray) \
            or not isinstance(sample_input, PArray) or model(op, reference.dtype) is None \
            or sample_input.shape != reference.shape:
        return None
    return PArray(reference.dtype, apply(op, sample_input.data, reference.data)), describe(op)


def exact_note(op: str, rows: int) -> str:
    return (f"reference inputs held to the exact value (complex128, rounded): {describe(op)} "
            f"departs from it beyond tolerance on {rows} row(s) (docs/testing.md)")
