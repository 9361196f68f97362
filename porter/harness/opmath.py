"""Reduced floats computed in float32: a float16/bfloat16 red that a Mac shares.

upstream's merged Metal kernels compute float16 and bfloat16 in float32 and round once
(`opmath_t`: BinaryKernel.metal's REGISTER_OPMATH_FLOAT_BINARY_OP, UnaryKernel.metal's
`opmath_t<T>`), and so does a kernel porter writes from a CPU lambda. torch's CPU instead
rounds each step of a lambda to the dtype (c10::Half's arithmetic widens each operand and
rounds each result; its vectorized loops do the same per operation), on x86 and on a Mac's
NEON alike: logit_backward float16 at grad 0.71924, self 0.00024462 answers 2944 on the CPU
and 2940 (2940.977 rounded) in float32. Such a row is red on a Mac too. It stays red here;
where the kernel's answer matches the op computed in float32 and rounded once, within the
row's tolerance, the row carries `note()` saying so, so that no reader takes the red for a
porter bug nor a Mac's green for a given.
"""

from __future__ import annotations

REDUCED = ("float16", "bfloat16")


def note(dtype: str) -> str:
    return (f"the kernel answers the op computed in float32 and rounded once to {dtype} "
            "(opmath, as upstream's merged Metal kernels compute reduced floats, "
            "REGISTER_OPMATH_FLOAT_BINARY_OP and opmath_t<T>); the CPU rounds each step to "
            f"{dtype}, and a Mac's CPU does the same, so a Mac is red here too")


def float32_reference(info, sample, dtype: str):
    """The op on the sample with its `dtype` tensors widened to float32, its answer rounded
    once to `dtype`; None for any other dtype, or where the op refuses float32 inputs or
    answers other than one float32 tensor."""
    if dtype not in REDUCED:
        return None
    import torch

    from porter.dispatch.kernel_choice import to_device
    narrow = getattr(torch, dtype)

    def widen(t):
        return t.to(torch.float32) if isinstance(t, torch.Tensor) and t.dtype == narrow else t
    try:
        wide = to_device(sample, "cpu").transform(widen)
        out = info(wide.input, *wide.args, **wide.kwargs)
    except Exception:            # an op that insists on one dtype for all its operands
        return None
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32:
        return None
    return out.to(narrow)

