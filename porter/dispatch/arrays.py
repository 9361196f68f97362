"""Tensors as numpy sees them, without importing torch: the portable arrays.

A warm `porter test --device emulate` (porter.harness.cached_run) loads its samples and CPU
references from the reference cache and must not pay ~1.5 s for `import torch`; the emulator
runs its kernels on these (porter.emulate.numpy_run) and the harness compares them
(porter.harness.numpy_compare). `PArray` is a tensor's dtype name (torch's spelling) and its
values; bfloat16, which numpy lacks, is kept as its uint16 bit pattern and widened to float32
(exactly) for arithmetic, narrowed with round-to-nearest-even as c10::BFloat16 does.

Only `from_torch` / `to_torch` import torch, and only the cold path (which has it loaded) calls them.
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


class Unsupported(Exception):
    """Something here cannot be done without torch (a dtype numpy lacks, an exotic value):
    the caller runs the op the ordinary way."""


@dataclass
class PArray:
    dtype: str          # torch dtype name: "float32", "bfloat16", ...
    data: np.ndarray    # C-contiguous values; bfloat16 as uint16 bits

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


def to_torch(a: PArray):
    import torch
    if a.dtype == "bfloat16":
        return torch.from_numpy(a.data.copy()).view(torch.bfloat16)
    return torch.from_numpy(a.data.copy())


def real_part(a: PArray) -> PArray:
    """`out.real.clone()` of a complex result."""
    real = {"complex64": "float32", "complex128": "float64"}.get(a.dtype)
    if real is None:
        raise Unsupported(f"real part of {a.dtype}")
    return PArray(real, np.array(a.data.real, order="C"))
