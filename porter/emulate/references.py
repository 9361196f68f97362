"""CPU references for kernels: the torch op of the same name, through a small name map.

A kernel is named after its op in most cases (`hypot`, `sin`); the map covers the rest
(`div_floor` is `torch.div(rounding_mode="floor")`, `sqr` is `x * x`, `*_alpha` carry the
alpha scalar). Kernels with no CPU op return None: reported, not guessed.
"""

from __future__ import annotations

from typing import Callable


def _torch():
    import torch
    return torch


def _special(name: str):
    return lambda *xs: getattr(_torch().special, name)(*xs)


def _aten(name: str):
    return getattr(_torch().ops.aten, name)


def _map() -> dict[str, Callable]:
    torch = _torch()
    F = torch.nn.functional
    return {
        # unary with another spelling
        "sqr": lambda x: x * x,
        "erfcx": _special("erfcx"),
        "trigamma": lambda x: torch.polygamma(1, x),
        # unary with a scalar argument
        "round_decimals": lambda x, a: torch.round(x, decimals=int(a)),
        "pow_scalar": lambda x, a: torch.pow(x, a),
        "polygamma": lambda x, a: torch.polygamma(int(a), x),
        "nan_to_num": lambda x, p: torch.nan_to_num(x, *p),
        # activations with scalar arguments (params structs: their fields in order)
        "hardshrink": lambda x, a: F.hardshrink(x, a),
        "softshrink": lambda x, a: F.softshrink(x, a),
        "leaky_relu": lambda x, a: F.leaky_relu(x, a),
        "softplus": lambda x, p: F.softplus(x, *p),
        "threshold": lambda x, p: F.threshold(x, *p),
        "logit": lambda x, a: torch.logit(x, None if a < 0 else a),
        # binary
        "zeta": _special("zeta"),
        "xlog1py": _special("xlog1py"),
        "chebyshev_polynomial_t": _special("chebyshev_polynomial_t"),
        "chebyshev_polynomial_u": _special("chebyshev_polynomial_u"),
        "chebyshev_polynomial_v": _special("chebyshev_polynomial_v"),
        "chebyshev_polynomial_w": _special("chebyshev_polynomial_w"),
        "shifted_chebyshev_polynomial_t": _special("shifted_chebyshev_polynomial_t"),
        "shifted_chebyshev_polynomial_u": _special("shifted_chebyshev_polynomial_u"),
        "shifted_chebyshev_polynomial_v": _special("shifted_chebyshev_polynomial_v"),
        "shifted_chebyshev_polynomial_w": _special("shifted_chebyshev_polynomial_w"),
        "hermite_polynomial_h": _special("hermite_polynomial_h"),
        "hermite_polynomial_he": _special("hermite_polynomial_he"),
        "laguerre_polynomial_l": _special("laguerre_polynomial_l"),
        "legendre_polynomial_p": _special("legendre_polynomial_p"),
        "mse": lambda a, b: F.mse_loss(a, b, reduction="none"),
        "div_true": lambda a, b: torch.div(a, b),
        "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
        "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        "igamma": _special("gammainc"),
        "igammac": _special("gammaincc"),
        "make_complex": lambda a, b: torch.complex(a, b),
        "logical_and": torch.logical_and,
        "logical_or": torch.logical_or,
        "logical_xor": torch.logical_xor,
        # binary with alpha
        "add_alpha": lambda a, b, al: torch.add(a, b, alpha=al),
        "sub_alpha": lambda a, b, al: torch.sub(a, b, alpha=al),
        "lerp_alpha": lambda a, b, al: torch.lerp(a, b, al),
        "smooth_l1": lambda a, b, al: F.smooth_l1_loss(a, b, reduction="none", beta=al),
        "huber": lambda a, b, al: F.huber_loss(a, b, reduction="none", delta=al),
        "smooth_l1_backward_clip": lambda a, b, al: _aten("smooth_l1_loss_backward")(
            torch.ones_like(a), a, b, 0, al),
        "huber_backward_clip": lambda a, b, al: _aten("huber_loss_backward")(
            torch.ones_like(a), a, b, 0, al),
        # ternary
        "mse_backward2": lambda a, b, g: _aten("mse_loss_backward")(g, a, b, 0),
        "mse_backward_scaled": lambda a, b, g: _aten("mse_loss_backward")(g, a, b, 0) / 2,
        "lerp": lambda a, b, w: torch.lerp(a, b, w),
    }


_CACHE: dict[str, Callable] | None = None


def reference(kernel: str) -> Callable | None:
    """Callable computing `kernel` on CPU tensors (+ scalar argument), or None."""
    global _CACHE
    if _CACHE is None:
        _CACHE = _map()
    if kernel in _CACHE:
        return _CACHE[kernel]
    torch = _torch()
    for namespace in (torch, torch.special):
        fn = getattr(namespace, kernel, None)
        if callable(fn):
            return fn
    return None


# Scalar arguments the check passes, per kernel (else per Metal type).
ALPHAS = {
    "add_alpha": 2, "sub_alpha": 2, "lerp_alpha": 0.25, "smooth_l1": 1.0, "huber": 1.0,
    "smooth_l1_backward_clip": 1.0, "huber_backward_clip": 1.0, "round_decimals": 2,
    "polygamma": 1, "nan_to_num": (0.0, 100.0, -100.0),
    "hardshrink": 0.5, "softshrink": 0.5, "leaky_relu": 0.125, "softplus": (2.0, 3.0),
    "threshold": (0.5, -1.0), "logit": 0.125,
}


def alpha_for(kernel: str, alpha_type: str):
    if kernel == "pow_scalar":
        return {"float2": (2.0 + 0j), "int": 3}.get(alpha_type, 2.5)
    value = ALPHAS.get(kernel, 2)
    if alpha_type == "bool":
        return True
    if alpha_type.endswith("Params_long") and isinstance(value, tuple):
        return tuple(int(v) for v in value)     # what the host's to<int64_t>() gives
    if alpha_type in ("long", "int", "short", "char", "uchar") and isinstance(value, float):
        return 1
    return value
