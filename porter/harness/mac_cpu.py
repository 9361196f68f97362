"""The CPU arithmetic a Mac's MPS test compares against, on a machine that is not a Mac.

test_output_match compares the MPS result with the same op on the Mac's own CPU. There torch's
arm64 kernels round every multiply and every add of their vectorized lambdas (NEON intrinsics,
which clang does not fuse), and PyTorch compiles its Metal kernels in MTLMathModeSafe
(MetalShaderLibrary, unless PYTORCH_MPS_FAST_MATH is set), which fuses nothing either: the two
sides agree bit for bit on `grad * (1 - y * y)`.

torch's x86 wheel instead runs an AVX2/AVX512 build of the same lambdas, compiled with FMA by a
compiler that contracts `1 - y * y` into one rounding. Near y = 1 that moves tanh_backward's
float32 result by 1e-4 relative, past test_output_match's 1.3e-6: an exact port looked red
here and green on a Mac. ATen's DEFAULT build (ATEN_CPU_CAPABILITY=default) runs the same
vectorized lambdas compiled for baseline x86-64, without FMA, each operation rounded as on the
Mac; porter computes an emulated run's CPU references with it.

Not modelled: a sample the CPU runs through its scalar lambda (a strided `--shapes` input), where
clang on a Mac may fuse a multiply and an add written in one statement.

ATen reads the variable once, at its first CPU kernel, so `pin` runs before any sample is made;
a capability the user set is kept (and is part of the reference cache's key).
"""

from __future__ import annotations

import os

ENV = "ATEN_CPU_CAPABILITY"
MAC_LIKE = "default"


def pin() -> str:
    """Make this process's CPU kernels round like the Mac's; the capability in force."""
    return os.environ.setdefault(ENV, MAC_LIKE)


def capability() -> str:
    """The capability this process's references are computed with ('' for torch's own pick)."""
    return os.environ.get(ENV, "")
