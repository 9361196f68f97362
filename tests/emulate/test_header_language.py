"""The checkout's headers a kernel file includes are Metal too (c10/metal/*.h, kernels/*.h).

A Mac compiling UnaryKernel.metal compiles c10/metal/special_math.h with it: a `double` in a
helper there fails the file's build as surely as one in the functor. The language check read
only the kernel file's own tokens, so a port whose helper porter writes into special_math.h
(special_ndtri's calc_ndtri) was all green with `double`, `long double` or `goto` in it. Each
planted construct below must be a build error named at the header's own line; the real
headers (torch 2.13's, on the real-size tree) and the idioms upstream's headers build with
must stay clean.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from porter.emulate import dialect
from porter.emulate.probe import probe_source
from porter.source.checkout import KERNELS

UNARY = f"{KERNELS}/UnaryKernel.metal"

# planted in a template helper shaped as porter writes calc_ndtri, or in a plain function
PLANTED = [
    ("template <typename T>\ninline T planted(T y0) {\n  double y = y0;\n  return T(y);\n}",
     3, "Metal has no `double`"),
    ("template <typename T>\ninline T planted(T y0) {\n  long double y = y0;\n  return T(y);\n}",
     3, "Metal has no `double`"),
    ("template <typename T>\ninline T planted(T y0) {\n  goto done;\ndone:\n  return y0;\n}",
     3, "Metal has no `goto`"),
    ("inline float planted(float y0) {\n  return std::max(y0, 0.0f);\n}",
     2, "Metal has no C++ standard library"),
]


def _plant(path: Path, after: str, code: str) -> int:
    """Put `code` on the line after the first `after` line of `path`: its first line's number."""
    text = path.read_text()
    at = text.index(after + "\n") + len(after) + 1
    path.write_text(text[:at] + code + "\n" + text[at:])
    return text[:at].count("\n") + 1


def _errors(root: Path, rel: str = UNARY) -> list[str]:
    text = (root / rel).read_text()
    return dialect.errors_by_version(dialect.views(text, rel, root))


@pytest.mark.parametrize(("code", "offset", "message"), PLANTED,
                         ids=["double", "long-double", "goto", "std"])
@pytest.mark.slow
def test_a_non_metal_construct_in_special_math_h_fails_the_kernel_file_at_the_header_line(
        real_root, code, offset, message):
    first = _plant(real_root / "c10/metal/special_math.h", "namespace metal {", code)
    line = first + offset - 1
    error = probe_source((real_root / UNARY).read_text(), UNARY, real_root, None)
    assert error is not None and error.startswith(f"c10/metal/special_math.h:{line}: "), error
    assert message in error, error


@pytest.mark.parametrize("header", ["c10/metal/utils.h", "c10/metal/indexing.h",
                                    f"{KERNELS}/UnaryKernel.h"])
@pytest.mark.slow
def test_a_double_in_a_header_of_the_precompiled_prelude_or_the_kernels_fails_too(real_root,
                                                                                   header):
    """utils.h and indexing.h are parsed once into the precompiled prelude, so the kernel
    file's preprocessed text never shows them; UnaryKernel.h is the kernels' own header."""
    path = real_root / header
    anchor = "namespace metal {" if header.startswith("c10") else "#pragma once"
    line = _plant(path, anchor, "inline double planted(float x) { return x; }")
    [error] = _errors(real_root)
    assert error.startswith(f"{header}:{line}: Metal has no `double` (use float"), error


def test_a_system_include_in_a_header_is_named_at_the_header(real_root):
    line = _plant(real_root / "c10/metal/special_math.h", "#include <metal_stdlib>",
                  "#include <vector>")
    [error] = _errors(real_root)
    assert error.startswith(f"c10/metal/special_math.h:{line}: "), error
    assert "#include <vector>" in error, error


@pytest.mark.slow
def test_a_header_the_kernel_file_does_not_include_is_not_its_error(real_root):
    """random.h is in c10/metal but UnaryKernel.metal includes neither it nor a header that
    does: a Mac building UnaryKernel.metal never compiles it."""
    assert "random.h" not in (real_root / UNARY).read_text()
    _plant(real_root / "c10/metal/random.h", "namespace metal {",
           "inline double planted(float x) { return x; }")
    assert _errors(real_root) == []


def test_a_header_edit_and_its_revert_change_the_verdict(real_root):
    """The views are cached by content: the header's content must be in the key both ways."""
    path = real_root / "c10/metal/special_math.h"
    before = path.read_text()
    assert _errors(real_root) == []
    _plant(path, "namespace metal {", "inline double planted(float x) { return x; }")
    assert len(_errors(real_root)) == 1
    path.write_text(before)
    assert _errors(real_root) == []


# idioms upstream's own headers build with on a Mac, in our own words: a host-only branch, an
# operation passed as a function-pointer parameter (c10/metal/atomic.h's shape), a template
# that calls itself (c10/metal/special_math.h's bessel_j1_forward's shape) and a plain function
# that does (Metal treats both alike: MSL §1.5.4's C++14 list no longer names recursion)
VALID_HEADER = """
#ifndef __METAL__
#include <array>
inline std::array<double, 2> host_only() { return {}; }
#endif
template <typename T>
inline void apply_op(thread T* data, T value, T (*op)(T, T)) {
  *data = op(*data, value);
}
template <typename T>
inline float mirrored(T x) {
  if (x < T(0)) {
    return -mirrored(-x);
  }
  return float(x);
}
inline float halved(float y0) {
  return y0 > 2 ? halved(y0 - 1) : y0;
}
"""


@pytest.mark.slow
def test_idioms_upstream_headers_build_with_are_not_errors(real_root):
    _plant(real_root / "c10/metal/special_math.h", "namespace metal {", VALID_HEADER)
    assert _errors(real_root) == []


def test_the_real_headers_and_kernel_files_have_no_language_error(real_root):
    """Every c10/metal header and kernels/*.h of the real-size tree (torch's own), included
    all at once, and every kernel file, under each Metal version: no false red."""
    headers = sorted((real_root / "c10/metal").glob("*.h"))
    kernel_headers = sorted((real_root / KERNELS).glob("*.h"))
    assert len(headers) >= 8 and kernel_headers
    text = "".join(f"#include <c10/metal/{h.name}>\n" for h in headers)
    text += "".join(f"#include <ATen/native/mps/kernels/{h.name}>\n" for h in kernel_headers)
    assert dialect.errors_by_version(dialect.views(text, "all_headers.metal", real_root)) == []
    for path in sorted((real_root / KERNELS).glob("*.metal")):
        assert _errors(real_root, str(path.relative_to(real_root))) == [], path.name


@pytest.mark.slow(seconds=130)
def test_a_double_in_calc_ndtri_fails_porter_test_at_the_header_line(real_root):
    """The reviewer's case end to end: `porter new-op special_ndtri` writes calc_ndtri into
    c10/metal/special_math.h; `double y = y0;` there printed all green."""
    from tests.porter_run import porter

    assert porter("new-op", "special_ndtri", root=real_root).code == 0
    path = real_root / "c10/metal/special_math.h"
    before = path.read_text()
    start = before.index("inline T calc_ndtri(T y0) {")
    body = before.index("\n", start) + 1
    line = before[:body].count("\n") + 1
    path.write_text(before[:body] + "  double y = y0;\n  (void)y;\n" + before[body:])
    args = ("test", "special_ndtri", "--device", "emulate", "--dtype", "float32")
    result = porter(*args, root=real_root)
    assert result.code == 1, result.out
    assert f"c10/metal/special_math.h:{line}: Metal has no `double`" in result.out + result.err
    path.write_text(before)
    again = porter(*args, root=real_root)
    assert again.code == 0, again.out + again.err
