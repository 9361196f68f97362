"""Run one emulated kernel on torch CPU tensors: the TensorIterator part, in Python.

Inputs are broadcast to a common shape (expanded dims get stride 0, as in TensorIterator).
Contiguous same-shape operands take the dense entry point; anything else the strided one with
byte strides, dim 0 fastest (c10::metal::pos_from_thread_index's order).
"""

from __future__ import annotations

import ctypes
import struct

from porter.dispatch.kernel_choice import METAL_DTYPES, dtype_name, torch_dtype
from porter.emulate.build import Library, Registration
from porter.emulate.client import WorkerClient

def pack_alpha(metal: str, value) -> bytes:
    """Bytes of a scalar argument of Metal type `metal` (alpha, exponent, params struct)."""
    import torch
    if metal in METAL_DTYPES:
        t = torch.tensor(value, dtype=torch_dtype(metal)).reshape(1)
        return _tensor_bytes(t)
    if metal.endswith("Params_float"):
        # a params struct instantiated at float (porter.port.scalars): its fields in order
        return struct.pack(f"<{len(value)}f", *value)
    if metal.endswith("Params_long"):
        # the same struct at long, for integer inputs (porter.port.scalars)
        return struct.pack(f"<{len(value)}q", *(int(v) for v in value))
    raise ValueError(f"cannot pass a scalar of Metal type {metal}")


def _tensor_bytes(t) -> bytes:
    """The bytes of t's storage from its first element on (strided views keep their layout)."""
    storage = t.untyped_storage()
    start = t.storage_offset() * t.element_size()
    return ctypes.string_at(storage.data_ptr() + start, storage.nbytes() - start) if storage.nbytes() else b""


def run_registration(client: WorkerClient, lib: Library, reg: Registration, inputs: list,
                     alpha: bytes | None = None, force_strided: bool = False):
    """Run `reg` on CPU tensors already of dtype reg.in_type; returns a CPU tensor of out_type."""
    import torch
    in_dtype, out_dtype = torch_dtype(reg.in_type), torch_dtype(reg.out_type)
    if in_dtype is None or out_dtype is None:
        raise ValueError(f"{reg.name}: no torch dtype for Metal types {reg.in_type}/{reg.out_type}")
    inputs = [t.to(in_dtype) for t in inputs]
    shape = torch.broadcast_shapes(*(t.shape for t in inputs))
    expanded = [t.expand(shape) for t in inputs]
    out = torch.empty(shape, dtype=out_dtype)
    numel = out.numel()
    if numel == 0:
        return out
    dense = not force_strided and all(t.is_contiguous() and t.shape == shape for t in inputs)
    request = {"lib": str(lib.path), "index": reg.index, "entry": (reg.name, reg.in_type, reg.out_type), "out_nbytes": numel * out.element_size(),
               "numel": numel, "alpha": alpha, "sizes": None, "strides": None}
    if dense:
        request["inputs"] = [_tensor_bytes(t) for t in inputs]
        # a dense input's bytes run from its first element to its storage's end: the worker's
        # run over every k-th element steps by the element, not by bytes / numel
        request["in_item"] = inputs[0].element_size() if inputs else 0
    else:
        sizes = list(reversed(shape)) or [1]
        strides = [list(reversed([s * out.element_size() for s in out.stride()])) or [0]]
        for t in expanded:
            strides.append(list(reversed([s * t.element_size() for s in t.stride()])) or [0])
        request.update(inputs=[_tensor_bytes(t) for t in expanded], sizes=sizes, strides=strides)
    raw = client.call(request)
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return flat.view(out_dtype).reshape(shape).clone()


def like(out, raw: bytes):
    """`raw` (the worker's other reading of the same call) as a tensor shaped like `out`."""
    import torch
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(out.dtype).reshape(out.shape).clone()


def dtype_name_of(out) -> str:
    return dtype_name(out.dtype)


def real_part(out):
    """A complex result's real lane, as the host reads it (`out.real`)."""
    return out.real.clone()
