"""Metal scalar types and torch's dtypes: the names a kernel registration is spelled in
(`REGISTER_UNARY_OP(exp, float, float)`) and the dtype names porter keeps (torch's spelling,
`"float32"`), both ways, and torch's own dtypes (lazily: the warm path has no torch)."""

from __future__ import annotations

# Metal type -> torch dtype name
METAL_TO_NAME = {
    "float": "float32", "half": "float16", "bfloat": "bfloat16", "long": "int64", "int": "int32",
    "short": "int16", "char": "int8", "uchar": "uint8", "bool": "bool", "float2": "complex64",
    "half2": "complex32",
}
NAME_TO_METAL = {v: k for k, v in METAL_TO_NAME.items()}
METAL_DTYPES = tuple(METAL_TO_NAME)


def dtype_name(dtype) -> str:
    """torch's name of a torch dtype: torch.float32 -> "float32"."""
    return str(dtype).removeprefix("torch.")


def torch_dtype(metal: str):
    """The torch dtype of a Metal type, or None."""
    import torch
    name = METAL_TO_NAME.get(metal)
    return None if name is None else getattr(torch, name)


def metal_dtype(dtype) -> str | None:
    """The Metal type of a torch dtype, or None."""
    return NAME_TO_METAL.get(dtype_name(dtype))


def is_floating_or_complex(name: str) -> bool:
    """`dtype.is_floating_point or dtype.is_complex`, on a dtype name."""
    return name.startswith(("float", "bfloat", "complex"))
