"""Names of the Metal Standard Library (the Metal Shading Language specification's function
and type lists), and the one positive list of what porter files as an "unsupported construct":
a name Metal defines that the emulator's shim lacks (`shim_gap`). Any other compiler error is
a build error of the kernel file: a Mac's compiler rejects it too."""

from __future__ import annotations

import re

FUNCTIONS = frozenset("""
abs acos acosh asin asinh atan atan2 atanh ceil copysign cos cosh cospi divide exp exp2 exp10
fabs fdim floor fma fmax fmax3 fmedian3 fmin fmin3 fmod fract frexp ilogb ldexp log log2 log10
max max3 median3 min min3 modf nan nextafter pow powr rint round rsqrt sin sincos sinh sinpi
sqrt tan tanh tanpi trunc
clamp mix saturate sign smoothstep step
absdiff addsat clz ctz extract_bits hadd insert_bits mad24 madhi madsat mul24 mulhi popcount
reverse_bits rhadd rotate subsat
all any isfinite isinf isnan isnormal isordered isunordered select signbit
cross distance distance_squared dot faceforward length length_squared normalize reflect refract
as_type threadgroup_barrier simdgroup_barrier
""".split())
# Metal types the shim does not model (textures, samplers, ray tracing, function tables)
TYPES = frozenset("""
texture1d texture1d_array texture2d texture2d_array texture2d_ms texture2d_ms_array texture3d
texturecube texturecube_array texture_buffer depth2d depth2d_array depth2d_ms depth2d_ms_array
depthcube depthcube_array sampler access visible_function_table intersection_function_table
acceleration_structure primitive_acceleration_structure instance_acceleration_structure
imageblock mesh_grid_properties render_grid_properties
""".split())
# families named by prefix: simd_shuffle_down, quad_sum, atomic_fetch_add_explicit, pack_..., ...
PREFIXES = ("simd_", "simdgroup_", "quad_", "atomic_", "pack_", "unpack_", "make_filled_simdgroup",
            "packed_", "raytracing")
NAMESPACES = frozenset({"metal", "precise", "fast", "metal::precise", "metal::fast"})


def is_metal_name(name: str) -> bool:
    """`name` (possibly qualified: `metal::simd_sum`) is something Metal defines."""
    parts = name.lstrip(":").split("::")
    if len(parts) > 1:      # c10::metal is the checkout's own header: not Metal's
        return "::".join(parts[:-1]) in NAMESPACES
    plain = parts[-1]
    return plain in FUNCTIONS or plain in TYPES or plain.startswith(PREFIXES)


# g++'s words for a name it does not know, in each place a name can stand
_UNKNOWN_NAME = re.compile(
    r"'([\w:]+)' (?:was not declared in this scope|has not been declared|does not name a type|"
    r"is not a member of '([\w:]+)')|"
    r"there are no arguments to '(\w+)' that depend on a template parameter|"
    r"'([\w:]+)' is not a (?:template|type)")


# a swizzle of a swizzle of two or more components (`v.xyz.xy`): Metal's swizzle is a vector,
# the shim's has its components only (porter/emulate/swizzles.py)
_SWIZZLE_OF_SWIZZLE = re.compile(r"'(?:struct )?metal::swizzle<[^']*>' has no member named "
                                 r"'([xyzw]{2,4}|[rgba]{2,4})'")


def shim_gap(message: str) -> str | None:
    """The Metal name a compiler error is about, when Metal defines it and the shim lacks it
    (porter's "unsupported construct": beyond the emulator, not wrong Metal); else None (the
    error is the file's: a build error)."""
    swizzle = _SWIZZLE_OF_SWIZZLE.search(message)
    if swizzle:
        return f"a swizzle of a swizzle (.{swizzle.group(1)})"
    m = _UNKNOWN_NAME.search(message)
    if m is None:
        return None
    name = m.group(1) or m.group(3) or m.group(4)
    if m.group(2):
        name = f"{m.group(2)}::{name}"
    if not is_metal_name(name):
        return None
    plain = name.split("::")[-1]
    if "did you mean '" in message and not _listed(plain):
        # any member of metal:: counts as Metal's, but a name of no Metal list for which g++
        # suggests one it has (`precise::tanhh`, "did you mean 'tanh'?") is a misspelling,
        # which a Mac's compiler rejects too
        return None
    return name


def _listed(plain: str) -> bool:
    return plain in FUNCTIONS or plain in TYPES or plain.startswith(PREFIXES)


# Metal's library functions whose definition is a multiply-add (MSL §6.2, §6.11), keyed by the
# formula the shim marks `porter: may contract NAME`, with the functions built on it: whether
# Apple's library runs one as a single fma is not documented (porter.emulate.fused_kernels,
# porter.emulate.frontend's narrow multiply-adds)
MULTIPLY_ADD_FORMULAS = {"dot": ("dot", "length", "length_squared", "distance", "normalize"),
                         "mix": ("mix",), "mad": ("mad",)}
