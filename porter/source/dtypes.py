"""Dtype sets of OpInfo sources, evaluated statically from their `ast` expressions.

Names follow torch (`float32`, `bfloat16`, ...); `metal` gives the Metal spelling.
"""

from __future__ import annotations

import ast

FLOATING = ("float32", "float64")
INTEGRAL = ("uint8", "int8", "int16", "int32", "int64")
COMPLEX = ("complex64", "complex128")
UNSIGNED = ("uint16", "uint32", "uint64")

ALIASES = {"half": "float16", "float": "float32", "double": "float64", "int": "int32",
           "long": "int64", "short": "int16", "cfloat": "complex64", "cdouble": "complex128",
           "chalf": "complex32", "bool": "bool", "bfloat16": "bfloat16"}

BASES = {
    "floating_types": FLOATING, "integral_types": INTEGRAL, "all_types": FLOATING + INTEGRAL,
    "complex_types": COMPLEX, "all_types_and_complex": FLOATING + INTEGRAL + COMPLEX,
    "floating_and_complex_types": FLOATING + COMPLEX, "custom_types": (), "empty_types": (),
}

# Dtypes the MPS backend supports (test_mps.py MPS_DTYPES); double and cdouble never.
MPS_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
              "float32", "complex64")



def has_integer(dtypes) -> bool:
    """Whether an MPS dtype set holds an integer (or bool) dtype."""
    return any(d not in ("float32", "float16", "bfloat16", "complex64") for d in dtypes)


METAL = {"float32": "float", "float16": "half", "bfloat16": "bfloat", "bool": "bool",
         "uint8": "uchar", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
         "complex64": "float2"}
METAL_FLOATING = ("float", "half", "bfloat")
METAL_INTEGRAL = ("long", "int", "short", "uchar", "char")


def _dtype_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return ALIASES.get(node.attr, node.attr)
    return None


def evaluate_dtypes(node: ast.AST, names: dict | None = None) -> frozenset[str] | None:
    """The dtype names of an expression like `all_types_and(torch.bool, torch.half)`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        fn = node.func.id
        base = fn[:-4] if fn.endswith("_and") else fn
        if base not in BASES:
            return None
        out = set(BASES[base])
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                inner = _starred(arg.value, names)
                if inner is None:
                    return None
                out |= inner
                continue
            name = _dtype_name(arg)
            if name is None:
                return None
            out.add(name)
        return frozenset(out)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out = set()
        for elt in node.elts:
            name = _dtype_name(elt)
            if name is None:
                return None
            out.add(name)
        return frozenset(out)
    return None


def _starred(node: ast.AST, names: dict | None) -> set[str] | None:
    if isinstance(node, ast.Name) and node.id == "_unsigned_int_types":
        return set(UNSIGNED)
    if isinstance(node, (ast.Tuple, ast.List)):
        return evaluate_dtypes(node)
    return None
