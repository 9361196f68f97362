"""Names of the Metal Standard Library (the Metal Shading Language specification's function
lists): an identifier g++ calls undeclared is beyond the emulator's shim when Metal has it, and
a plain build error (a Mac rejects it too) when Metal does not."""

from __future__ import annotations

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
# families named by prefix: simd_shuffle_down, quad_sum, atomic_fetch_add_explicit, pack_..., ...
PREFIXES = ("simd_", "simdgroup_", "quad_", "atomic_", "pack_", "unpack_", "make_filled_simdgroup")
NAMESPACES = frozenset({"metal", "precise", "fast", "metal::precise", "metal::fast"})


def is_metal_name(name: str) -> bool:
    """`name` (possibly qualified: `metal::simd_sum`) is something Metal defines."""
    parts = name.lstrip(":").split("::")
    if len(parts) > 1:      # c10::metal is the checkout's own header: not Metal's
        return "::".join(parts[:-1]) in NAMESPACES
    plain = parts[-1]
    return plain in FUNCTIONS or plain.startswith(PREFIXES)
