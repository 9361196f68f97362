"""`porter.emulate.torch_run.run_registration` on numpy arrays (porter.dispatch.numpy_tensors): the
warm path of the reference cache runs kernels without importing torch.

Same request to the same worker: inputs converted to the registration's input type,
broadcast to a common shape, the dense entry point for contiguous same-shape operands, else
the strided one with byte strides, dim 0 fastest. The verdict-equality test runs both.
"""

from __future__ import annotations

import struct

import numpy as np

from porter.dispatch.numpy_tensors import (PArray, Unsupported, astype, f32_to_bf16,
                                           non_overlapping_and_dense, strided, torch_contiguous)
from porter.dispatch.numpy_tensors import real_part  # noqa: F401  (the emulator device reads it here)
from porter.dispatch.kernel_choice import METAL_TO_NAME
from porter.emulate.build import Library, Registration
from porter.emulate.client import WorkerClient


def pack_alpha(metal: str, value) -> bytes:
    """porter.emulate.torch_run.pack_alpha without torch."""
    if metal.endswith("Params_float"):
        # a params struct instantiated at float (porter.port.scalars): its fields in order
        return struct.pack(f"<{len(value)}f", *value)
    if metal.endswith("Params_long"):
        # the same struct at long, for integer inputs (porter.port.scalars)
        return struct.pack(f"<{len(value)}q", *(int(v) for v in value))
    name = METAL_TO_NAME.get(metal)
    if name is None or name == "complex32":
        raise Unsupported(f"scalar of Metal type {metal}")
    if name == "bfloat16":
        return f32_to_bf16(np.asarray([value], dtype=np.float32)).tobytes()
    if isinstance(value, complex) and name != "complex64":
        raise Unsupported("complex scalar into a real Metal type")
    return np.asarray([value]).astype(np.dtype(np.bool_ if name == "bool" else name)).tobytes()


def run_registration(client: WorkerClient, lib: Library, reg: Registration,
                     inputs: list[PArray], alpha: bytes | None = None) -> PArray:
    in_name, out_name = METAL_TO_NAME.get(reg.in_type), METAL_TO_NAME.get(reg.out_type)
    if in_name is None or out_name is None:
        raise ValueError(f"{reg.name}: no torch dtype for Metal types {reg.in_type}/{reg.out_type}")
    if "complex32" in (in_name, out_name):
        raise Unsupported("complex32 kernel")
    inputs = [_converted(t, in_name) for t in inputs]
    arrays = [t.data for t in inputs]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    out_np = np.dtype(np.uint16 if out_name == "bfloat16" else
                      np.bool_ if out_name == "bool" else out_name)
    numel = int(np.prod(shape, dtype=np.int64))
    if numel == 0:
        return PArray(out_name, np.empty(shape, dtype=out_np))
    dense = all(_contiguous(t) and t.shape == shape for t in inputs)
    request = {"lib": str(lib.path), "index": reg.index, "entry": (reg.name, reg.in_type, reg.out_type), "out_nbytes": numel * out_np.itemsize,
               "numel": numel, "alpha": alpha, "sizes": None, "strides": None}
    request["inputs"] = [_storage_bytes(t) for t in inputs]
    if dense:
        # a dense input's bytes run from its first element to its storage's end: the worker's
        # run over every k-th element steps by the element, not by bytes / numel
        request["in_item"] = inputs[0].itemsize if inputs else 0
    if not dense:
        sizes = list(reversed(shape)) or [1]
        out_strides = [s for s in np.empty(shape, dtype=out_np).strides]
        strides = [list(reversed(out_strides)) or [0]]
        for t in inputs:
            # as torch's expand: broadcast dims get stride 0, a view keeps its own strides;
            # size-1 dims keep a contiguous tensor's stride in torch; numpy agrees for
            # C-contiguous arrays, and such a dim is only ever indexed at 0
            view = np.broadcast_to(_view(t), shape)
            strides.append(list(reversed(view.strides)) or [0])
        request.update(sizes=sizes, strides=strides)
    raw = client.call(request)           # a bytearray of its own: the array is writable
    return PArray(out_name, np.frombuffer(raw, dtype=out_np).reshape(shape))


def like(out: PArray, raw: bytes) -> PArray:
    """`raw` (the worker's other reading of the same call) as an answer shaped like `out`."""
    return PArray(out.dtype, np.frombuffer(bytearray(raw), dtype=out.data.dtype).reshape(out.data.shape))


def _converted(t: PArray, name: str) -> PArray:
    """`Tensor.to(name)` as torch_run calls it: the same dtype keeps the view; another keeps
    the strides of a non-overlapping dense view (a transposed one), else makes it contiguous."""
    if t.dtype == name:
        return t
    out = astype(t, name)
    if t.layout is not None:
        storage, strides = t.layout
        if non_overlapping_and_dense(t.shape, strides):
            span = astype(PArray(t.dtype, storage[:t.data.size]), name).data
            return strided(name, span, t.shape, strides)
    return out


def _contiguous(t: PArray) -> bool:
    return t.layout is None or torch_contiguous(t.shape, t.layout[1])


def _view(t: PArray) -> np.ndarray:
    if t.layout is None:
        return np.asarray(t.data, order="C")
    storage, strides = t.layout
    item = storage.dtype.itemsize
    return np.lib.stride_tricks.as_strided(storage, t.shape, tuple(s * item for s in strides),
                                           writeable=False)


def _storage_bytes(t: PArray) -> np.ndarray:
    """torch_run._tensor_bytes: a view's storage from its first element on, as a flat byte
    view (the client copies it once, into the memory the worker reads)."""
    if t.layout is None:
        return np.asarray(t.data, order="C").reshape(-1).view(np.uint8)
    return np.ascontiguousarray(t.layout[0]).reshape(-1).view(np.uint8)


def dtype_name_of(out: PArray) -> str:
    return out.dtype
