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
        "threshold": _threshold,
        "logit": lambda x, a: torch.logit(x, None if a < 0 else a),
        "gelu": lambda x: F.gelu(x),
        "mish": lambda x: F.mish(x),
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        # backward kernels: their operands in the order the op's iterator reads them
        "gelu_backward": lambda g, x: _aten("gelu_backward")(g, x),
        "gelu_tanh_backward": lambda g, x: _aten("gelu_backward")(g, x, approximate="tanh"),
        "tanh_backward": lambda g, y: _aten("tanh_backward")(g, y),
        "sigmoid_backward": lambda g, y: _aten("sigmoid_backward")(g, y),
        "mish_backward": lambda g, x: _aten("mish_backward")(g, x),
        "logit_backward": lambda g, x, a: _aten("logit_backward")(g, x, None if a < 0 else a),
        "softplus_backward": lambda g, x, p: _aten("softplus_backward")(g, x, *p),
        "leaky_relu_backward": lambda x, g, a: _aten("leaky_relu_backward")(g, x, a, False),
        # upstream's ActivationKernel.metal: each kernel beside the op(s) whose stub runs it
        "hardsigmoid": lambda x: F.hardsigmoid(x),
        "hardsigmoid_backward": lambda g, x: _aten("hardsigmoid_backward")(g, x),
        "hardswish": lambda x: F.hardswish(x),
        "hardswish_backward": lambda g, x: _aten("hardswish_backward")(g, x),
        "silu": lambda x: F.silu(x),
        "silu_backward": lambda g, x: _aten("silu_backward")(g, x),
        "log_sigmoid_forward": lambda x: F.logsigmoid(x),
        # the CPU reads exp(-|x|) from the buffer log_sigmoid_forward filled (cpu/Activation.cpp);
        # MPS's kernel computes it
        "log_sigmoid_backward": lambda x, g: _aten("log_sigmoid_backward")(
            g, x, torch.exp(-x.abs())),
        # hardshrink_backward and softshrink_backward share the kernel: both keep the gradient
        # where |x| > lambda
        "shrink_backward": lambda g, x, a: _aten("hardshrink_backward")(g, x, a),
        # (elu and elu_backward are left out: their params structs hold half and bool fields,
        # which the check's scalar packing (torch_run.pack_alpha) does not lay out)
        # glu's binary kernel takes the halves its host split the input into
        "glu": lambda a, b: F.glu(torch.stack([a, b]), 0)[0],
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


def _threshold(x, *rest):
    """threshold's kernel: unary (x, (threshold, value)), or the binary one threshold and
    threshold_backward share (x, other, (threshold, value)): cpu/Activation.cpp's lambda
    `x <= threshold ? value : other`, whose forward passes x as other and whose backward passes
    the gradient with value 0, the two ops torch has."""
    torch = _torch()
    if len(rest) == 1:
        return torch.nn.functional.threshold(x, *rest[0])
    other, (threshold, value) = rest
    if value == 0:
        return _aten("threshold_backward")(other, x, threshold)
    return torch.where(x <= threshold, _aten("threshold")(x, threshold, value), other)


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
    "logit_backward": 0.125, "softplus_backward": (2.0, 3.0), "leaky_relu_backward": 0.125,
    "shrink_backward": 0.5,
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
