"""porter.port.formatting: clang-format on porter's own lines only, on the real-size tree."""

from __future__ import annotations

import subprocess

import pytest

from porter.port import formatting
from porter.port.formatting import PYTORCH_CPP
from tests.porter_run import git_init, porter

UNARY_METAL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"

needs_clang_format = pytest.mark.skipif(formatting.binary() is None, reason="needs clang-format")


@pytest.mark.parametrize(("text", "formatted", "ranges", "kept"), [
    pytest.param("a\nb  \\\nc\n", "a\nb \\\nc\n", [(3, 3)], "a\nb  \\\nc\n",
                 id="a reflowed line outside the ranges is kept"),
    pytest.param("a\nb\nnew  ;\n", "a\nb\nnew;\n", [(3, 3)], "a\nb\nnew;\n",
                 id="porter's line is formatted"),
    pytest.param("x  \\\nnew  \\\ny\n", "x \\\nnew \\\ny\n", [(2, 2)], "x  \\\nnew  \\\ny\n",
                 id="inside one realigned macro porter's line stays in line with the others"),
    pytest.param("x  \\\nnew( a)  \\\ny\n", "x \\\nnew(a) \\\ny\n", [(2, 2)],
                 "x  \\\nnew(a) \\\ny\n", id="line for line: porter's line formatted"),
    pytest.param("f(a,\n  new);\n", "f(a, new);\n", [(2, 2)], "f(a,\n  new);\n",
                 id="a join of porter's line with another is not taken"),
    pytest.param("f(new, long);\n", "f(new,\n  long);\n", [(1, 1)], "f(new,\n  long);\n",
                 id="porter's line wrapped"),
])
def test_only_within(text, formatted, ranges, kept):
    assert formatting.only_within(text, formatted, ranges) == kept


def _misalign(path) -> tuple[str, str]:
    """Badly formatted macros next to where porter writes (backslashes out of line)."""
    text = path.read_text()
    vec2_old = "#define INSTANTIATE_UNARY_KERNELS_VEC2(DTYPE)     \\\n  REGISTER_UNARY_OP(neg, DTYPE##2, DTYPE##2);     \\\n"
    vec2_bad = "#define INSTANTIATE_UNARY_KERNELS_VEC2(DTYPE) \\\n  REGISTER_UNARY_OP(neg, DTYPE##2, DTYPE##2);            \\\n"
    k2_old = "#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\\n  REGISTER_UNARY_OP(erfinv, DTYPE1, DTYPE0);       \\\n"
    k2_bad = "#define INSTANTIATE_UNARY_KERNELS2(DTYPE0, DTYPE1) \\\n  REGISTER_UNARY_OP(erfinv, DTYPE1, DTYPE0); \\\n"
    assert vec2_old in text and k2_old in text
    path.write_text(text.replace(vec2_old, vec2_bad).replace(k2_old, k2_bad))
    return vec2_bad, k2_bad


@needs_clang_format
def test_untouched_badly_formatted_macros_beside_the_edit_stay_byte_identical(real_root, tmp_path,
                                                                             monkeypatch):
    monkeypatch.delenv("PORTER_CLANG_FORMAT", raising=False)
    (real_root / ".clang-format").write_text(PYTORCH_CPP.strip("{}").replace(", ", "\n") + "\n")
    vec2_bad, k2_bad = _misalign(real_root / UNARY_METAL)
    git_init(real_root)
    # sign: a per-dtype block just before INSTANTIATE_UNARY_KERNELS2; then sgn (whose real
    # inputs sgn_out sends to sign_stub): a line inside INSTANTIATE_UNARY_KERNELS_VEC2
    result = porter("migrate-from-mpsgraph", "sign", root=real_root)
    assert result.code == 0, result.err + result.out
    result = porter("migrate-from-mpsgraph", "sgn", "--complex-body", "x", "--allow-dirty", root=real_root)
    assert result.code == 0, result.err + result.out
    diff = subprocess.run(["git", "diff", "-U0", "--", UNARY_METAL], cwd=real_root,
                          capture_output=True, text=True, check=True).stdout
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == []                    # no line porter did not write has changed
    text = (real_root / UNARY_METAL).read_text()
    assert vec2_bad in text and k2_bad in text
    # in step with its neighbours' escaped newlines, as porter wrote it
    assert "  REGISTER_UNARY_OP(exp, DTYPE##2, DTYPE##2);     \\\n  REGISTER_UNARY_OP(sgn, DTYPE##2, DTYPE##2);     \\\n" in text
