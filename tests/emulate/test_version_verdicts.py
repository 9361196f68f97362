"""`porter test --device emulate` runs every `__METAL_VERSION__` whose kernel tokens differ
(issue 21, left over): a Mac compiles the kernel file with the Metal its OS has, so a functor
that computes otherwise under `#if __METAL_VERSION__ >= 400` is another kernel, held to the
same reference. It passed before: only the 3.1 library ran."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from porter.source.checkout import KERNELS  # noqa: E402
from tests.porter_run import porter  # noqa: E402

HEAVISIDE = "    return a == 0 ? b : static_cast<T>(a > 0);\n"


def _branch(root, under_400: str) -> None:
    path = root / KERNELS / "BinaryKernel.metal"
    text = path.read_text()
    assert HEAVISIDE in text
    path.write_text(text.replace(HEAVISIDE, "#if __METAL_VERSION__ >= 400\n" + under_400
                                 + "#else\n" + HEAVISIDE + "#endif\n"))


@pytest.mark.slow
def test_a_functor_wrong_only_under_metal_4_fails(real_root):
    assert porter("new-op", "heaviside", root=real_root).code == 0
    # wrong on purpose, under Metal 4.0 only: heaviside(0, b) is 0 there, not b
    _branch(real_root, "    return static_cast<T>(a > 0);\n")
    res = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", root=real_root)
    assert res.code == 1, res.out + res.err
    assert ("FAIL int32 (7/9 samples), sample 1: under __METAL_VERSION__ 400 (the kernel file's "
            "tokens differ there; a Mac whose Metal is that version builds them): Tensor-likes "
            "are not equal!") in res.out


@pytest.mark.slow
def test_a_branch_that_computes_the_same_passes(real_root):
    assert porter("new-op", "heaviside", root=real_root).code == 0
    # the clean twin: other tokens under 4.0, the same values
    _branch(real_root, "    return a == 0 ? b : (a > 0 ? T(1) : T(0));\n")
    # not float32 nor bfloat16: a Mac flushes their subnormals, so heaviside(1e-45, b) is b there,
    # which passes only through edges.either_flushed's rule (docs/testing.md, "Subnormals");
    # half keeps its subnormals
    res = porter("test", "heaviside", "--device", "emulate", "--reference-inputs", "--dtype",
                 "int32", "--dtype", "float16", root=real_root)
    assert res.code == 0, res.out + res.err
    # the full verdict (the flag names a row porter test runs anyway): 3 rows of 2 dtypes
    assert "summary: 6 pass, 0 fail, 0 xfail, 0 xpass; 0 skip" in res.out


@pytest.mark.slow
def test_a_kernel_missing_under_another_version_fails(real_root):
    assert porter("new-op", "heaviside", root=real_root).code == 0
    path = real_root / KERNELS / "BinaryKernel.metal"
    text = path.read_text()
    line = "REGISTER_INTEGER_BINARY_OP(heaviside);\n"
    assert line in text
    # registered only where Metal is older than 4.0: a Mac with Metal 4 has no int kernel
    path.write_text(text.replace(line, "#if __METAL_VERSION__ < 400\n" + line + "#endif\n"))
    res = porter("test", "heaviside", "--device", "emulate", "--dtype", "int32", root=real_root)
    assert res.code == 1, res.out + res.err
    assert ("builds them): no kernel heaviside (int -> int) is registered in BinaryKernel.metal "
            "under this version") in res.out
