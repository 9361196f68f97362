"""Half literals rounded once (porter.emulate.half_literals): the shim's `operator""h` takes a
long double and rounds that to half, so a decimal within a long double's step of a tie
between two halves was read on the tie (review 36's K01)."""

from __future__ import annotations

import shutil
import subprocess
from fractions import Fraction

import pytest

from porter.emulate.half_literals import exact_half_literals, nearest_half

TIE_ABOVE = "1.0004882812500000000009"      # 1 + 2^-11 (a tie) + 9e-22


@pytest.mark.parametrize("decimal, half", [
    ("0.5", 0.5), ("0.1", 0.0999755859375), (TIE_ABOVE, 1.0009765625),
    ("1.00048828125", 1.0),                  # on the tie: to even
    ("1.00146484375", 1.001953125),          # 1 + 3 * 2^-11: the tie above an odd half, up
    ("65504", 65504.0), ("65519.99", 65504.0), ("65520", float("inf")),
    ("2.98023223876953125e-8", 0.0),         # 2^-25, half the least subnormal: to even, 0
    ("2.98023223876953126e-8", 2.0 ** -24), ("-0.1", -0.0999755859375),
])
def test_nearest_half(decimal, half):
    assert nearest_half(Fraction(decimal)) == half


@pytest.mark.parametrize("before, after", [
    (f"x = {TIE_ABOVE}h;", "x = 0x1.0040000000000p+0h;"),
    ("y = 0.5h + 1.5H + 2e0h;", "y = 0.5h + 1.5H + 2e0h;"),           # exact: as written
    ("z = 0.1h; // 0.1h", "z = 0x1.9980000000000p-4h; // 0.1h"),      # the comment kept
    ("w = v.h + a1.5h + 1e5h;", "w = v.h + a1.5h + __builtin_inff16();"),
    ("u = 0.1f + 0.1;", "u = 0.1f + 0.1;"),
    # C++14's digit separators: one literal (review 37's N06t: its tail was rewritten alone)
    ("t = 1.000'488'281'250'000'000'000'9h;", "t = 0x1.0040000000000p+0h;"),
    ("s = 1'024.5h + 0.000'1h; // 0.1h", "s = 0x1.0000000000000p+10h + 0x1.a380000000000p-14h; // 0.1h"),
    ("c = 'a' + 0.1h + '0';", "c = 'a' + 0x1.9980000000000p-4h + '0';"),
])
def test_exact_half_literals(before, after):
    assert exact_half_literals(before) == after


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_spelling_is_the_half_clang_makes(tmp_path):
    # what g++ makes of the rewritten literal through the shim's long double operator
    src = tmp_path / "h.cpp"
    src.write_text("#include <cstdio>\ntypedef _Float16 half;\n"
                   "constexpr inline half operator\"\"h(long double v) { return static_cast<half>(v); }\n"
                   f"int main() {{ std::printf(\"%.12f %.12f\\n\", double({TIE_ABOVE}h), "
                   f"double({exact_half_literals(TIE_ABOVE + 'h')})); }}\n")
    subprocess.run(["g++", "-std=c++17", "-w", str(src), "-o", str(tmp_path / "h")], check=True)
    two_roundings, once = subprocess.run([str(tmp_path / "h")], capture_output=True, text=True,
                                         check=True).stdout.split()
    assert (float(two_roundings), float(once)) == (1.0, 1.0009765625)
